#!/usr/bin/env bash
# fwd.sh - forwarding Mpps with 1, 100 and 10,000 OpenFlow rules over 1, 4
# and 8 tables, our vswitchd vs OVS userspace, both AF_XDP with one busy PMD
# on CPU1, through the team's harness ../shared/bench/veth-bench.sh (trafgen
# on CPU0, 5 s windows, counters from /proc/net/dev) with sut-switch.sh as
# its `cmd:` SUT. For R rules the harness sends FLOWS=R distinct UDP source
# ports 1024..1024+R-1, one per rule, so the packets spread over all rules.
# One harness run per rule count; inside it, rounds interleave every
# (switch, tables) pair (ORDER=interleave).
#
# Usage: sudo bench/ofbench/fwd.sh          (after `make build`)
# Knobs: RULES ["1 100 10000"] TABLES ["1 4 8"] REPS [3] DUR [5]
#        HARNESS [../shared/bench/veth-bench.sh] OUTDIR [bench-results/ofbench-fwd-TS]
set -u -o pipefail
D=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$D/../.." && pwd)
RULES=${RULES:-"1 100 10000"}
TABLES=${TABLES:-"1 4 8"}
REPS=${REPS:-3}
DUR=${DUR:-5}
HARNESS=${HARNESS:-$REPO/../shared/bench/veth-bench.sh}
OUTDIR=${OUTDIR:-$REPO/bench-results/ofbench-fwd-$(date +%Y%m%d-%H%M%S)}
[ -x "$REPO/bin/vswitchd" ] || { echo "no bin/vswitchd: make build" >&2; exit 1; }
mkdir -p "$OUTDIR"
# sut-switch.sh leaves each run's last pmd-stats-show there
export OFB_STATS_DIR=$OUTDIR/pmd-stats
grep -m1 'cpu MHz' /proc/cpuinfo >"$OUTDIR/cpu-mhz.txt"
for n in $RULES; do
    suts=()
    for t in $TABLES; do
        suts+=("cmd:vs-r$n-t$t=$D/sut-switch.sh ours $n $t" "cmd:ovs-r$n-t$t=$D/sut-switch.sh ovs $n $t")
    done
    REPS=$REPS DUR=$DUR WARM=1 FLOWS=$n TESTS=tput OUTDIR=$OUTDIR/rules-$n \
        "$HARNESS" "${suts[@]}" || echo "harness run for $n rules failed" >&2
done
python3 - "$OUTDIR" <<'PY' | tee "$OUTDIR/summary.txt"
import csv, glob, re, statistics, sys
cells = {}
for f in glob.glob(sys.argv[1] + "/rules-*/results.csv"):
    for r in csv.DictReader(open(f)):
        m = re.match(r"cmd-(vs|ovs)-r(\d+)-t(\d+)$", r["sut"])
        if not m or r["test"] != "tput" or not r["rx_mpps"]: continue
        cells.setdefault((int(m[2]), int(m[3]), m[1]), []).append((float(r["rx_mpps"]), float(r["tx_mpps"]), float(r["loss_pct"])))
def fmt(v):
    if not v: return "n/a"
    x = sorted(a for a, _, _ in v); l = statistics.median(c for _, _, c in v)
    return f"{statistics.median(x):.2f} [{x[0]:.2f}-{x[-1]:.2f}] loss {l:.1f}%"
print("| rules | tables | vswitch rx Mpps | OVS rx Mpps | ratio |")
print("|---:|---:|---|---|---:|")
for n, t in sorted({(n, t) for n, t, _ in cells}):
    a, b = cells.get((n, t, "vs"), []), cells.get((n, t, "ovs"), [])
    ratio = statistics.median(x for x, _, _ in a) / statistics.median(x for x, _, _ in b) if a and b else float("nan")
    print(f"| {n} | {t} | {fmt(a)} | {fmt(b)} | {ratio:.2f} |")
# PMD time per packet from the snapshots: ours "avg. ns per packet" (busy
# time / packets), OVS "avg processing cycles per packet" / cpu MHz
mhz = float(open(sys.argv[1] + "/cpu-mhz.txt").read().split(":")[1])
per = {}
for f in glob.glob(sys.argv[1] + "/pmd-stats/*.txt"):
    m = re.search(r"/(ours|ovs)-r(\d+)-t(\d+)-", f)
    txt = open(f).read()
    if m[1] == "ours":
        v = re.findall(r"avg\. ns per packet: ([0-9.]+)", txt)
        ns = float(v[0]) if v else None
    else:
        v = re.findall(r"avg processing cycles per packet: ([0-9.]+)", txt)
        ns = float(v[0]) * 1000 / mhz if v else None
    emc, rx = re.findall(r"emc hits: (\d+)", txt), re.findall(r"packets received: (\d+)", txt)
    e = 100 * int(emc[0]) / int(rx[0]) if emc and rx and int(rx[0]) else float("nan")
    if ns: per.setdefault((int(m[2]), int(m[3]), m[1]), []).append((ns, e))
print()
print(f"PMD processing time per packet (ns, median over runs; OVS cycles at {mhz:.0f} MHz), EMC hit %:")
print("| rules | tables | vswitch ns/pkt | OVS ns/pkt | vswitch emc % | OVS emc % |")
print("|---:|---:|---:|---:|---:|---:|")
for n, t in sorted({(n, t) for n, t, _ in per}):
    a, b = per.get((n, t, "ours"), []), per.get((n, t, "ovs"), [])
    md = lambda v, i: f"{statistics.median(x[i] for x in v):.0f}" if v else "n/a"
    print(f"| {n} | {t} | {md(a, 0)} | {md(b, 0)} | {md(a, 1)} | {md(b, 1)} |")
PY

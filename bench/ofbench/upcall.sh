#!/usr/bin/env bash
# upcall.sh - translation (upcall) rate through the datapath, our vswitchd
# vs Open vSwitch 3.x userspace, both with AF_XDP ports and one
# busy-polling PMD on CPU1, trafgen on CPU0 (topology: topo.sh).
#
# Rules: N (default 50,000) distinct `in_port=1,ip,nw_dst=198.18.X.Y ->
# output:2` in table 0. trafgen sends 60-byte UDP frames whose nw_dst sweeps
# those N addresses (ipv4 da[2:2]=dinc(0, N-1)), so the first packet to each
# address misses every cache and needs a new megaflow (exact nw_dst).
#
# Per switch and round: topology and switch set up anew, rules loaded, a
# WARMUP-second sweep (OVS starts with a dynamic flow limit of 10,000
# datapath flows and raises it while its revalidators keep up; without a
# warm-up most of the N upcalls would be refused with ENOSPC), then MEAS
# measurements, each: megaflows flushed (OVS: ovs-appctl revalidator/purge,
# which drops datapath flows and their ukeys - after dpctl/del-flows the
# stale ukeys make every new upcall fail "ukey installation fails"; ours: a
# flow-mod, which invalidates every megaflow), PMD stats cleared,
# trafgen started, `pmd-stats-show` sampled back to back (pinned to CPU0)
# for DUR seconds. From the samples of "miss with success upcall" +
# "miss with failed upcall":
#   ramp_rate   (misses at the first sample >= 90 % of the final count -
#               misses at the last sample < 10 %) / time between: a lower
#               bound of the rate while all packets miss
#   peak_rate   highest rate over any >= 0.2 s span of samples
# plus, over the ramp span, the packets the PMD received (pmd-stats-show)
# and the frames trafgen offered (ofb-v1's tx counter): when these are
# close to ramp_rate the switch kept up with the generator and the figure
# is a lower bound of its upcall capacity.
# Rounds interleave the switches (round r: ours, then OVS).
#
# Usage: sudo bench/ofbench/upcall.sh      (after `make build`)
# Knobs: N [50000] REPS (rounds) [3] MEAS [2] DUR [3] WARMUP [25]
#        SUTS ["ours ovs"] OUTDIR [bench-results/ofbench-upcall-TS]
set -u -o pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/topo.sh"

N=${N:-50000}
REPS=${REPS:-3}
MEAS=${MEAS:-2}
DUR=${DUR:-3}
WARMUP=${WARMUP:-25}
SUTS=${SUTS:-"ours ovs"}
OUTDIR=${OUTDIR:-$REPO/bench-results/ofbench-upcall-$(date +%Y%m%d-%H%M%S)}
SUT_CPU=1 GEN_CPU=0
# this script and what it runs (sampler, ovs-ofctl, vsctl) stay on CPU0
# with trafgen; the switch under test gets CPU1 (taskset in lib.sh)
taskset -pc $GEN_CPU $$ >/dev/null

trap ofb_cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || die "must run as root"
[ -x "$BIN/vswitchd" ] || die "no $BIN/vswitchd: make build"
for t in trafgen ovs-vswitchd ethtool taskset; do command -v $t >/dev/null || die "missing $t"; done
[ "$N" -le 65536 ] || die "N must be <= 65536 (one /16 of nw_dst)"
mkdir -p "$OUTDIR"; ofb_work
RULES=$OFB_WORK/rules.txt
gen_dst_rules "$RULES" "$N" "in_port=1,"
TG=$OFB_WORK/sweep.cfg
cat >"$TG" <<EOF
{
  eth(da=$TSINK, sa=$TMAC1),
  ipv4(sa=$TIP1, da=198.18.0.0, da[2:2]=dinc(0, $((N - 1))), ttl=64),
  udp(sp=1024, dp=9),
  fill(0x00, 18)
}
EOF
echo "sut,round,meas,final_success,final_failed,ramp_rate,peak_rate,t99_s,rx_mpps_end,samples,ramp_recv_pps,ramp_offered_pps" >"$OUTDIR/results.csv"
{ echo "date: $(date -Is)"; echo "kernel: $(uname -r)"; echo "ovs: $(ovs-vswitchd --version | head -1)"
  echo "N=$N REPS=$REPS MEAS=$MEAS DUR=$DUR WARMUP=$WARMUP SUTS=$SUTS"; echo "loadavg: $(cat /proc/loadavg)"; } >"$OUTDIR/env.txt"

TG_PID=""
tg_start() { ofb_bg "$1" ip netns exec $TNS1 taskset -c $GEN_CPU trafgen -o $TV1 -i "$TG" -P 1 --no-sock-mem --notouch-irq; TG_PID=$BG_PID; }
tg_stop() { ofb_stop "$TG_PID" INT; TG_PID=""; }

stats() { # -> pmd-stats-show text of the current switch
    case "$CUR" in
        ours) ours_vsctl pmd-stats-show ;;
        ovs) ovs_appctl dpif-netdev/pmd-stats-show ;;
    esac
}
stats_clear() {
    case "$CUR" in
        ours) ours_vsctl pmd-stats-clear >/dev/null ;;
        ovs) ovs_appctl dpif-netdev/pmd-stats-clear >/dev/null ;;
    esac
}
flush_megaflows() { # $1 = counter, makes each call a distinct change
    case "$CUR" in
        ours) ours_vsctl add-flow br0 "table=0,priority=1,ip,nw_dst=198.19.254.$1,actions=drop" ;;
        ovs) ovs_appctl revalidator/purge >/dev/null ;;
    esac
}
# "success failed received" summed over PMDs from pmd-stats-show text
misses() { awk '/miss with success upcall:/ { s += $5 } /miss with failed upcall:/ { f += $5 }
    /packets received:/ { r += $3 } END { print s + 0, f + 0, r + 0 }'; }
# frames ofb-v1 sent (+ dropped at its peer), read through trafgen's netns
offered() { awk -v d="$TV1:" '{ sub(/^ */, "") } index($0, d) == 1 { split($0, x, /[: ]+/); print x[11] + x[13] }' "/proc/$TG_PID/net/dev"; }

# sampler OUT DUR: "t success failed received offered" lines, back to back,
# for DUR seconds
sampler() {
    local out=$1 dur=$2 t0 t1 end
    end=$(awk -v t="$EPOCHREALTIME" -v d="$dur" 'BEGIN { printf "%.6f", t + d }')
    : >"$out"
    while :; do
        t0=$EPOCHREALTIME
        local m; m="$(stats | misses) $(offered)"
        t1=$EPOCHREALTIME
        echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", (a + b) / 2 }') $m" >>"$out"
        awk -v a="$t1" -v e="$end" 'BEGIN { exit !(a < e) }' || break
    done
}

analyse() { # samples-file -> "success failed ramp peak t99 n"
    python3 - "$1" <<'EOF'
import sys
s = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if len(l.split()) == 5]
t0 = s[0][0]
pts = [(t - t0, a + b) for t, a, b, _, _ in s]
fin = pts[-1][1]
def first(frac):
    for t, m in pts:
        if m >= frac * fin: return t, m
    return pts[-1]
def last_below(frac):
    r = pts[0]
    for t, m in pts:
        if m < frac * fin: r = (t, m)
        else: break
    return r
(ta, ma), (tb, mb) = last_below(0.1), first(0.9)
ramp = (mb - ma) / (tb - ta) if tb > ta else float("nan")
# received by the PMD(s) and offered by trafgen over the same span
ia = next(i for i, p in enumerate(pts) if p[0] == ta); ib = next(i for i, p in enumerate(pts) if p[0] == tb)
recv = (s[ib][3] - s[ia][3]) / (tb - ta) if tb > ta else float("nan")
offr = (s[ib][4] - s[ia][4]) / (tb - ta) if tb > ta else float("nan")
peak = 0.0
for i in range(len(pts)):
    for j in range(i + 1, len(pts)):
        if pts[j][0] - pts[i][0] >= 0.2:
            peak = max(peak, (pts[j][1] - pts[i][1]) / (pts[j][0] - pts[i][0])); break
t99 = first(0.99)[0]
print(int(s[-1][1]), int(s[-1][2]), f"{ramp:.0f}", f"{peak:.0f}", f"{t99:.3f}", len(s), f"{recv:.0f}", f"{offr:.0f}")
EOF
}

run_sut() { # sut round
    CUR=$1; local r=$2 dir=$OFB_WORK/$1.$2 m
    log "=== $CUR round $r"
    topo_up
    mkdir -p "$dir"
    case "$CUR" in
        # a failed setup ends the run (the EXIT trap cleans up)
        ours) ours_up "$dir" $TSUT afxdp $TP1 $TP2 || die "ours: setup failed, see $dir/vswitchd.log"
              ours_vsctl add-flows br0 "$RULES" || die "ours: add-flows failed" ;;
        ovs)  ovs_up "$dir" $TSUT afxdp $TP1 $TP2 || die "ovs: setup failed, see $OVS_LOGDIR"
              ovs-ofctl -O OpenFlow13 add-flows br0 "$RULES" || die "ovs: add-flows failed" ;;
    esac
    sleep 1
    # warm-up sweep
    tg_start "$OUTDIR/$CUR-r$r-warm-trafgen.log"; sleep "$WARMUP"; tg_stop
    [ "$CUR" = ovs ] && ovs_appctl upcall/show >"$OUTDIR/$CUR-r$r-upcall-after-warmup.txt" 2>&1
    for m in $(seq 1 "$MEAS"); do
        flush_megaflows "$((r * 10 + m))"
        sleep 1
        stats_clear
        local rx0 rx1 ta tb
        tg_start "$OUTDIR/$CUR-r$r-m$m-trafgen.log"
        sampler "$OUTDIR/$CUR-r$r-m$m-samples.txt" "$DUR"
        # delivery rate in the last second (all megaflows in: hit rate)
        rx0=$(rx_v2); ta=$EPOCHREALTIME; sleep 1; rx1=$(rx_v2); tb=$EPOCHREALTIME
        tg_stop
        { stats; [ "$CUR" = ovs ] && ovs_appctl upcall/show; } >"$OUTDIR/$CUR-r$r-m$m-stats.txt" 2>&1
        local a; a=$(analyse "$OUTDIR/$CUR-r$r-m$m-samples.txt")
        local rxm; rxm=$(awk -v a="$rx0" -v b="$rx1" -v x="$ta" -v y="$tb" 'BEGIN { printf "%.3f", (b - a) / (y - x) / 1e6 }')
        read -r fs ff ramp peak t99 ns recv offr <<<"$a"
        echo "$CUR,$r,$m,$fs,$ff,$ramp,$peak,$t99,$rxm,$ns,$recv,$offr" >>"$OUTDIR/results.csv"
        log "$CUR r$r m$m: success=$fs failed=$ff ramp=$ramp/s peak=$peak/s t99=${t99}s ramp_recv=$recv/s ramp_offered=$offr/s rx_after=${rxm}Mpps samples=$ns"
    done
    case "$CUR" in
        ours) ours_down; cp "$dir/vswitchd.log" "$OUTDIR/$CUR-r$r-vswitchd.log" ;;
        ovs) ovs_down; cp "$OVS_LOGDIR/ovs-vswitchd.log" "$OUTDIR/$CUR-r$r-ovs-vswitchd.log" ;;
    esac
    topo_down
    rm -rf "$dir"
}

for r in $(seq 1 "$REPS"); do for s in $SUTS; do run_sut "$s" "$r"; done; done

python3 - "$OUTDIR/results.csv" <<'EOF' | tee "$OUTDIR/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows: by.setdefault(r["sut"], []).append(r)
def mmm(v):
    v = sorted(float(x) for x in v)
    return f"{statistics.median(v):.4g} [{v[0]:.4g}-{v[-1]:.4g}]"
for k, rs in by.items():
    print(f"{k:<6} n={len(rs)} ramp_rate/s {mmm(r['ramp_rate'] for r in rs)}  peak/s {mmm(r['peak_rate'] for r in rs)}  "
          f"success {mmm(r['final_success'] for r in rs)}  failed {mmm(r['final_failed'] for r in rs)}  t99_s {mmm(r['t99_s'] for r in rs)}  "
          f"ramp recv/s {mmm(r['ramp_recv_pps'] for r in rs)}  ramp offered/s {mmm(r['ramp_offered_pps'] for r in rs)}")
EOF
log "results in $OUTDIR"

#!/usr/bin/env bash
# bundle100k.sh - issue 27's bundle benchmark: 100,000 flows in ONE bundle
# through `ovs-ofctl -O OpenFlow15 --bundle add-flows`, time and memory per
# flow, our vswitchd beside Debian's ovs-vswitchd 3.1 (userspace,
# datapath_type=netdev). Printed, never asserted.
#
# Flow sets (TABLES, each loaded into a freshly started switch per run):
#   simple  100,000 x table=0,priority=100,ip,nw_dst=198.X.Y.Z,actions=output:2
#           (gen_dst_rules, the set of ../ofbench/flowmod.sh and turn 3)
#   ovn     100,009 flows of bench/ovnpipe's OVN-shaped pipeline scaled up
#           (`ovnpipe gen -filler 11465 -dps 100`): 31 tables, registers,
#           resubmit, move, push/pop, conjunctions, ARP-responder rewrites
# Switches, each started the way ../ofbench/lib.sh does (fail mode secure,
# no ports): ours = bin/vswitchd --state-dir DIR (its br0.mgmt); OVS =
# ovsdb-server + ovs-vswitchd in a netns of their own with private
# OVS_RUNDIR/OVS_DBDIR/OVS_LOGDIR/OVS_SYSCONFDIR (its br0.mgmt).
# SUT ours-ctrl (not in the default SUTS) is ours with a controller
# connected (set-controller ptcp:CTRL_PORT + `ovs-ofctl monitor` holding
# the connection), so the daemon saves no flow table: ours minus ours-ctrl
# is what persisting the committed bundle costs.
# Per run: VmRSS of the daemon 1 s after start, wall time of the ovs-ofctl
# command (bundle open, 100k adds, commit; it returns on the commit reply;
# ovs-ofctl's own start and file parsing included, the same for both),
# VmRSS 2 s after it returned, the flows counted with dump-aggregate.
# B/flow = RSS delta / flows in the table. Rounds interleave the switches
# (round r: ours, then OVS, for each flow set). Medians of REPS.
#
# Usage: sudo bench/bundles/bundle100k.sh     (after `make build`)
# Knobs: REPS [3] TABLES ["simple ovn"] SUTS ["ours ovs"; also ours-ctrl] TIMEBOX [180]
#        OUTDIR [bench-results/bundle100k-TS]
set -u -o pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../ofbench/lib.sh"

REPS=${REPS:-3}
TABLES=${TABLES:-"simple ovn"}
SUTS=${SUTS:-"ours ovs"}
TIMEBOX=${TIMEBOX:-180}
OUTDIR=${OUTDIR:-$REPO/bench-results/bundle100k-$(date +%Y%m%d-%H%M%S)}
NS=bb100k$$
CTRL_PORT=${CTRL_PORT:-16653}

trap ofb_cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || die "must run as root"
[ -x "$BIN/vswitchd" ] || die "no $BIN/vswitchd: make build"
for t in ovs-vswitchd ovsdb-server ovs-ofctl; do command -v $t >/dev/null || die "missing $t (apt-get install -y openvswitch-switch)"; done
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
mkdir -p "$OUTDIR"; ofb_work
gen_dst_rules "$OFB_WORK/simple.txt" 100000
(cd "$REPO" && go build -o "$OFB_WORK/ovnpipe" ./bench/ovnpipe) || die "build failed"
"$OFB_WORK/ovnpipe" gen -dir "$OFB_WORK/ovngen" -filler 11465 -dps 100 -packets 16 >&2 || die "gen failed"
mv "$OFB_WORK/ovngen/flows.txt" "$OFB_WORK/ovn.txt"
echo "table,sut,rep,flows_in_file,seconds,flows_per_s,rss_before_kb,rss_after_kb,bytes_per_flow,flows_in_table" >"$OUTDIR/results.csv"
{ echo "date: $(date -Is)"; echo "kernel: $(uname -r)"; echo "ovs: $(ovs-vswitchd --version | head -1)"
  echo "vswitchd: $(git -C "$REPO" log -1 --format='%h %s' 2>/dev/null)"
  echo "REPS=$REPS TABLES=$TABLES SUTS=$SUTS"; echo "loadavg: $(cat /proc/loadavg)"; } >"$OUTDIR/env.txt"

# run_one TABLE SUT REP
run_one() {
    local tab=$1 sut=$2 r=$3 dir=$OFB_WORK/$2.$1.$3 file=$OFB_WORK/$1.txt pid target t0 t1 rss0 rss1 count nfile
    mkdir -p "$dir"
    nfile=$(grep -c . "$file")
    local mon=""
    case "$sut" in
        ours*) ours_up "$dir" "" || die "ours: start failed: $(tail -3 "$dir/vswitchd.log")"
              pid=$OURS_PID target=unix:$dir/br0.mgmt
              if [ "$sut" = ours-ctrl ]; then
                  ours_vsctl set-controller br0 "ptcp:$CTRL_PORT:127.0.0.1" || die "set-controller failed"
                  sleep 0.3
                  ofb_bg "$dir/monitor.log" env OVS_RUNDIR="$dir" ovs-ofctl -O OpenFlow13 monitor "tcp:127.0.0.1:$CTRL_PORT"
                  mon=$BG_PID
                  sleep 1
                  ours_vsctl show | grep -q 'is_connected: true' || die "ours-ctrl: controller not connected"
              fi ;;
        ovs)  ofb_add_ns "$NS"
              ovs_up "$dir" "$NS" || die "ovs: start failed, see $dir/log"
              pid=$OVS_PID target=unix:$OVS_RUNDIR/br0.mgmt ;;
    esac
    sleep 1
    rss0=$(rss_kb "$pid")
    t0=$EPOCHREALTIME
    timeout "$TIMEBOX" ovs-ofctl -O OpenFlow15 --bundle add-flows "$target" "$file" >"$dir/load.out" 2>&1
    local rc=$?
    t1=$EPOCHREALTIME
    sleep 2
    rss1=$(rss_kb "$pid")
    [ "$rc" = 0 ] || log "$tab/$sut: add-flows exited $rc (124 = stopped by the ${TIMEBOX}s time box): $(head -3 "$dir/load.out")"
    count=$(ovs-ofctl -O OpenFlow15 dump-aggregate "$target" 2>/dev/null | sed -n 's/.*flow_count=\([0-9]*\).*/\1/p')
    count=${count:-0}
    local sec fps bpf
    sec=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    fps=$(awk -v s="$sec" -v n="$count" 'BEGIN { printf "%.0f", n / s }')
    bpf=$(awk -v a="$rss0" -v b="$rss1" -v n="$count" 'BEGIN { printf "%.0f", n ? (b - a) * 1024 / n : 0 }')
    echo "$tab,$sut,$r,$nfile,$sec,$fps,$rss0,$rss1,$bpf,$count" >>"$OUTDIR/results.csv"
    log "$tab/$sut rep $r: ${sec}s ${fps} flows/s RSS ${rss0}->${rss1} kB (${bpf} B/flow) table=$count/$nfile"
    case "$sut" in
        ours*) [ -n "$mon" ] && ofb_stop "$mon"
              ours_down; cp "$dir/vswitchd.log" "$OUTDIR/$tab-$sut-$r-vswitchd.log" 2>/dev/null ;;
        ovs)  ovs_down; cp "$OVS_LOGDIR/ovs-vswitchd.log" "$OUTDIR/$tab-$sut-$r-ovs-vswitchd.log" 2>/dev/null
              ip netns del "$NS"; OFB_NS=() ;;
    esac
    rm -rf "$dir"
}

for r in $(seq 1 "$REPS"); do
    for tab in $TABLES; do for s in $SUTS; do run_one "$tab" "$s" "$r"; done; done
done

python3 - "$OUTDIR/results.csv" <<'EOF' | tee "$OUTDIR/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows: by.setdefault((r["table"], r["sut"]), []).append(r)
def mmm(v):
    v = sorted(float(x) for x in v)
    return f"{statistics.median(v):.4g} [{v[0]:.4g}-{v[-1]:.4g}]"
print(f"{'table/sut':<12} {'n':<3} {'seconds':<24} {'flows/s':<28} {'B/flow (RSS)':<22} flows")
for (t, s), rs in by.items():
    print(f"{t + '/' + s:<12} {len(rs):<3} {mmm(r['seconds'] for r in rs):<24} {mmm(r['flows_per_s'] for r in rs):<28} "
          f"{mmm(r['bytes_per_flow'] for r in rs):<22} {rs[0]['flows_in_table']}/{rs[0]['flows_in_file']}")
EOF
log "results in $OUTDIR"

#!/usr/bin/env bash
# flowmod.sh - flow-mod rate and memory per rule, our vswitchd vs Open
# vSwitch 3.x userspace (datapath_type=netdev), same 100,000 rules
#   table=0,priority=100,ip,nw_dst=198.18.X.Y,actions=output:2
# loaded with `ovs-ofctl -O OpenFlow13 add-flows`, into a freshly started
# switch each time. Variants, interleaved (round r runs each once):
#   ours-ofctl        ovs-ofctl add-flows unix:STATE/br0.mgmt (flow tables
#                     saved to the store: on the final barrier and by the
#                     once-a-second saver while the rules stream in)
#   ours-ofctl-ctrl   the same with a controller connected (set-controller
#                     ptcp:16653:127.0.0.1 + `ovs-ofctl monitor` holding the
#                     connection), so the daemon saves nothing: the
#                     difference to ours-ofctl is the cost of persistence
#   ours-vsctl        bin/vsctl add-flows br0 FILE (all flow-mods, then one
#                     barrier: one save at the end)
#   ours-vsctl-ctrl   the same with a controller connected (no save)
#   ovs-ofctl         ovs-ofctl add-flows br0 (OVS's br0.mgmt)
# flows/s and B/rule use the rules actually in the table (flows_in_table).
# RSS is VmRSS of the daemon 1 s after start-up and 2 s after add-flows
# returned. Every run checks that all N rules are in the table.
#
# Usage: sudo bench/ofbench/flowmod.sh      (after `make build`)
# Knobs: N [100000], REPS [3], TIMEBOX [120], VARIANTS ["ours-ofctl ours-ofctl-ctrl
#        ours-vsctl ours-vsctl-ctrl ovs-ofctl"], OUTDIR [bench-results/ofbench-flowmod-TS]
set -u -o pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-100000}
REPS=${REPS:-3}
VARIANTS=${VARIANTS:-"ours-ofctl ours-ofctl-ctrl ours-vsctl ours-vsctl-ctrl ovs-ofctl"}
OUTDIR=${OUTDIR:-$REPO/bench-results/ofbench-flowmod-$(date +%Y%m%d-%H%M%S)}
NS=ofb-fm-ovs
CTRL_PORT=${CTRL_PORT:-16653}
# ovs-ofctl add-flows sends each flow-mod followed by a barrier and waits
# for the reply (lock-step); our daemon saves the whole flow table before
# each barrier reply, so that variant is quadratic in N and is stopped after
# TIMEBOX seconds: its figures are then for the rules that got in.
TIMEBOX=${TIMEBOX:-120}

trap ofb_cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || die "must run as root"
[ -x "$BIN/vswitchd" ] || die "no $BIN/vswitchd: make build"
for t in ovs-vswitchd ovsdb-server ovs-ofctl; do command -v $t >/dev/null || die "missing $t (apt-get install -y openvswitch-switch)"; done
mkdir -p "$OUTDIR"; ofb_work
RULES=$OFB_WORK/rules.txt
gen_dst_rules "$RULES" "$N"
echo "variant,rep,seconds,flows_per_s,rss_before_kb,rss_after_kb,bytes_per_rule,flows_in_table" >"$OUTDIR/results.csv"
{ echo "date: $(date -Is)"; echo "kernel: $(uname -r)"; echo "ovs: $(ovs-vswitchd --version | head -1)"
  echo "vswitchd: $("$BIN/vswitchd" --version 2>&1 | head -1)"; echo "N=$N REPS=$REPS TIMEBOX=$TIMEBOX VARIANTS=$VARIANTS"
  echo "loadavg: $(cat /proc/loadavg)"; } >"$OUTDIR/env.txt"

now() { echo "$EPOCHREALTIME"; }

# run_one VARIANT REP
run_one() {
    local v=$1 r=$2 dir=$OFB_WORK/$1.$2 pid target t0 t1 rss0 rss1 count mon=""
    mkdir -p "$dir"
    case "$v" in
        ours-*)
            ours_up "$dir" "" || die "$v: start failed: $(tail -3 "$dir/vswitchd.log")"
            pid=$OURS_PID target=unix:$dir/br0.mgmt
            if [[ "$v" == *-ctrl ]]; then
                ours_vsctl set-controller br0 "ptcp:$CTRL_PORT:127.0.0.1" || die "$v: set-controller failed"
                sleep 0.3
                # ovs-ofctl monitor needs a writable rundir for its unixctl socket
                ofb_bg "$dir/monitor.log" env OVS_RUNDIR="$dir" ovs-ofctl -O OpenFlow13 monitor "tcp:127.0.0.1:$CTRL_PORT"
                mon=$BG_PID
                sleep 1
                ours_vsctl show | grep -q 'is_connected: true' ||
                    die "$v: controller not connected: $(ours_vsctl show | grep -A1 Controller | tr '\n' ' ') $(cat "$dir/monitor.log")"
            fi ;;
        ovs-*)
            ovs_up "$dir" "$NS" || die "$v: OVS start failed, see $dir/log"
            pid=$OVS_PID target=br0 ;;
    esac
    sleep 1
    rss0=$(rss_kb "$pid")
    t0=$(now)
    case "$v" in
        ours-vsctl*) "$BIN/vsctl" --state-dir "$dir" add-flows br0 "$RULES" >"$dir/load.out" 2>&1 ;;
        ours-ofctl) timeout "$TIMEBOX" ovs-ofctl -O OpenFlow13 add-flows "$target" "$RULES" >"$dir/load.out" 2>&1 ;;
        *) ovs-ofctl -O OpenFlow13 add-flows "$target" "$RULES" >"$dir/load.out" 2>&1 ;;
    esac
    local rc=$?
    t1=$(now)
    sleep 2
    rss1=$(rss_kb "$pid")
    [ "$rc" = 0 ] || log "$v: add-flows exited $rc (124 = stopped by the ${TIMEBOX}s time box): $(head -3 "$dir/load.out")"
    count=$(ovs-ofctl -O OpenFlow13 dump-flows "$target" 2>/dev/null | grep -c 'nw_dst=198\.')
    local n=$count
    local sec fps bpr
    sec=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
    fps=$(awk -v s="$sec" -v n="$n" 'BEGIN { printf "%.0f", n / s }')
    bpr=$(awk -v a="$rss0" -v b="$rss1" -v n="$n" 'BEGIN { printf "%.0f", n ? (b - a) * 1024 / n : 0 }')
    echo "$v,$r,$sec,$fps,$rss0,$rss1,$bpr,$count" >>"$OUTDIR/results.csv"
    log "$v rep $r: ${sec}s ${fps} flows/s RSS ${rss0}->${rss1} kB (${bpr} B/rule) table=$count"
    [ "$count" = "$N" ] || log "$v: WARNING table holds $count rules, not $N"
    case "$v" in
        ours-*) [ -n "$mon" ] && ofb_stop "$mon"
                ls -l "$dir" >"$OUTDIR/$v-$r-statedir.txt" 2>&1
                ours_down; cp "$dir/vswitchd.log" "$OUTDIR/$v-$r-vswitchd.log" 2>/dev/null ;;
        ovs-*)  ovs_down; cp "$OVS_LOGDIR/ovs-vswitchd.log" "$OUTDIR/$v-$r-ovs-vswitchd.log" 2>/dev/null
                ip netns del "$NS"; OFB_NS=() ;;
    esac
    rm -rf "$dir"
}

for r in $(seq 1 "$REPS"); do
    for v in $VARIANTS; do
        case "$v" in ovs-*) ofb_add_ns "$NS" ;; esac
        run_one "$v" "$r"
    done
done

python3 - "$OUTDIR/results.csv" <<'EOF' | tee "$OUTDIR/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
by = {}
for r in rows: by.setdefault(r["variant"], []).append(r)
def mmm(v):
    v = sorted(float(x) for x in v)
    return f"{statistics.median(v):.4g} [{v[0]:.4g}-{v[-1]:.4g}]"
print(f"{'variant':<18} {'seconds':<24} {'flows/s':<28} {'B/rule (RSS)':<20}")
for k, rs in by.items():
    print(f"{k:<18} {mmm(r['seconds'] for r in rs):<24} {mmm(r['flows_per_s'] for r in rs):<28} {mmm(r['bytes_per_rule'] for r in rs):<20}")
EOF
log "results in $OUTDIR"

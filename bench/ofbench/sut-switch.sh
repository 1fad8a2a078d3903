#!/usr/bin/env bash
# sut-switch.sh - a `cmd:` SUT for ../shared/bench/veth-bench.sh: a switch
# forwarding between the harness's two ports through an OpenFlow rule set.
#
#   sut-switch.sh ours|ovs RULES TABLES PORT1 PORT2
#
# (veth-bench.sh appends PORT1 PORT2 and runs this in its SUT netns pinned
# to SUT_CPU.) Both switches get AF_XDP ports (PORT1 = OpenFlow port 1,
# PORT2 = 2) and one busy-polling PMD on CPU1: our vswitchd with
# pmd-sleep-max=0, OVS userspace (datapath_type=netdev, private run/db/log
# dirs) with pmd-cpu-mask=0x2. Rules: gen_fwd_rules in lib.sh (RULES
# udp tp_src rules at the end of a TABLES-deep goto_table chain); the
# reverse path is the last rule loaded, so the harness's connectivity check
# passes only once all rules are in. Loaded with `vsctl add-flows` for ours
# (ovs-ofctl's flow-mod + barrier lock-step makes our daemon save the table
# once per rule, see flowmod.sh) and `ovs-ofctl add-flows` for OVS.
# Runs until SIGTERM/SIGINT, then stops the switch and removes its files.
set -u -o pipefail
OFB_SAME_PGRP=1
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# = 5 ] || die "usage: $0 ours|ovs RULES TABLES PORT1 PORT2"
SW=$1 NR=$2 NT=$3 P1=$4 P2=$5
# PMD counters, snapshot every 2 s (the switch is gone by the time the
# harness's SIGTERM reaches this script); the last one is kept in
# OFB_STATS_DIR (if set) and printed to the harness's cmd log.
SNAP_PID=""
pmd_stats() { case "$SW" in ours) ours_vsctl pmd-stats-show ;; ovs) ovs_appctl dpif-netdev/pmd-stats-show ;; esac; }
snapshots() {
    while sleep 2; do pmd_stats >"$OFB_WORK/stats.new" 2>&1 && mv "$OFB_WORK/stats.new" "$OFB_WORK/stats.txt"; done
}
stop() {
    [ -n "$SNAP_PID" ] && kill "$SNAP_PID" 2>/dev/null
    if [ -f "$OFB_WORK/stats.txt" ]; then
        echo "== last pmd-stats-show snapshot (2 s period)"; cat "$OFB_WORK/stats.txt"
        [ -n "${OFB_STATS_DIR:-}" ] && mkdir -p "$OFB_STATS_DIR" &&
            cp "$OFB_WORK/stats.txt" "$OFB_STATS_DIR/$SW-r$NR-t$NT-$(date +%H%M%S).txt"
    fi
    case "$SW" in ours) ours_down ;; ovs) ovs_down ;; esac; ofb_cleanup; exit 0
}
trap stop TERM INT
trap ofb_cleanup EXIT
ofb_work
gen_fwd_rules "$OFB_WORK/rules.txt" "$NR" "$NT"
t0=$EPOCHREALTIME
case "$SW" in
    ours) ours_up "$OFB_WORK/state" "" afxdp "$P1" "$P2" || die "vswitchd setup failed"
          ours_vsctl add-flows br0 "$OFB_WORK/rules.txt" || die "add-flows failed"
          n=$(ours_vsctl dump-flows br0 | grep -c 'actions=') ;;
    ovs)  ovs_up "$OFB_WORK/ovs" "" afxdp "$P1" "$P2" || die "OVS setup failed"
          ovs-ofctl -O OpenFlow13 add-flows br0 "$OFB_WORK/rules.txt" || die "add-flows failed"
          n=$(ovs-ofctl -O OpenFlow13 dump-flows br0 | grep -c 'actions=') ;;
    *) die "unknown switch $SW" ;;
esac
log "$SW: $n OpenFlow rules in $NT table(s) ($NR tp_src rules), up in $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
snapshots &
SNAP_PID=$!
sleep infinity &
wait $!
stop

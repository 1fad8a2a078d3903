#!/usr/bin/env bash
# ctbench.sh - issue 28's connection-tracking figures: our datapath beside
# OVS-DPDK's userspace conntrack, the same flows and the same packets in
# the same run, rounds alternating (ours, OVS, ours, OVS...). Printed, never
# asserted.
#
# Pipelines (`ctbench gen`, main.go; e2e/conntrack_bench_test.go's):
#   plain  in_port=1 -> 2, in_port=2 -> 1 (the ceiling of the replay)
#   noct   the ct pipeline without ct: table 0 ip -> goto_table:1, table 1
#          ip,in_port=1 -> 2, ip,in_port=2 -> 1, anything else dropped (the
#          issue's "same pipeline without ct", established figures only)
#   ct     ip,ct_state=-trk -> ct(table=1,zone=1); table 1: port 1's
#          +trk+new -> ct(commit,zone=1),output:2; +trk+est -> the other
#          port (both ways); anything else dropped
#   snat   ct, committing with nat(src=198.19.0.1-198.19.0.16)
# Packets: 64-byte UDP.
#   est-K-orig.pcap / est-K-reply.pcap (K = 1, 1000, 100000 connections,
#          repeated to >= 1024 frames): each connection's packets and its
#          replies. A one-way UDP flow stays +new in OVS (and in Linux)
#          until a reply is seen, so the established figures replay both
#          directions: orig into port 1, replies into port 2.
#   new.pcap  NEW (2,000,000) distinct tuples into port 1, each a new
#          connection.
#
# (a) established Mpps: both pcaps replayed in a loop; after a WARM s
#     warm-up (every connection committed and answered), the packets out
#     of both ports over a DUR s window. Ours: in-process (`ctbench run
#     -mode fwd`), one PMD on the calling goroutine between two ring ports,
#     a burst into each port in turn, output discarded. OVS: ports 1 and 2
#     are DPDK's pcap PMD replaying the pcaps from memory
#     (net_pcapN,rx_pcap=FILE,infinite_rx=1; no tx: tx drops and counts),
#     Mpps = the ports' tx packets (ovs-ofctl dump-ports) over the window.
# (b)/(c) new connections/s with ct / snat, and plain as the ceiling of
#     the replay itself: new.pcap sent ONCE, so every packet is a new
#     tuple; the tracker is flushed before each pass. Ours (`ctbench run
#     -mode new`): connections made / wall time from 5 to 30 % of the pass
#     (about what OVS's window below sees of its pass; the whole pass, with
#     the tracker growing to NEW, in the note).
#     OVS: port 1 is net_pcapN,rx_pcap=new.pcap WITHOUT infinite_rx (the
#     PMD reads the file once, from the page cache, then receives
#     nothing; infinite_rx would make the second loop established, and it
#     holds the pcap in mbufs, at most ~250k); 0.3 s after the port is
#     added, `ovs-appctl dpctl/ct-get-nconns` twice NEWDUR s apart:
#     connections made / elapsed time, and the port-2 tx packets over the
#     same window (for plain, the rate is the packets', over 0.1 s from
#     just after the port is added: the file takes well under 1 s; a
#     rough ceiling of the replay, the control calls' latency in it). A window that
#     reaches the end of the file is flagged "(pass ended)"; the port is
#     deleted and the tracker flushed (dpctl/flush-conntrack) after it.
# CPU per packet besides the rates (the machine is shared: the rates move
# with the load, the CPU time less): ours, the process's (getrusage: the
# Go runtime's GC, on the same CPU, included; the PMD thread's alone in
# parentheses) over the window or pass; OVS, the PMD thread's (schedstat)
# over the window.
# Both switches on CPU1 (OVS: pmd-cpu-mask=0x2, lcore CPU0; ours: taskset
# -c 1, the Go runtime's GC included), DPDK without hugepages
# (--no-huge -m 2048). Load average printed per round: the machine is
# shared.
#
# Usage: sudo flock /tmp/bench.lock bench/ctbench/ctbench.sh  (apt-get install openvswitch-switch-dpdk;
#        the lock keeps other benchmarks' busy-polling switches off CPU1 meanwhile)
# Knobs: ROUNDS [2] DUR [3] WARM [2] NEW [2000000] NEWDUR [1] KS ["1 1000 100000"]
#        SUTS ["ours ovs"] CLUSTERED [0: 1 = new.pcap from `gen -clustered`]
#        OUTDIR [bench-results/ctbench-TS]
set -u -o pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../ofbench/lib.sh"

ROUNDS=${ROUNDS:-2}
DUR=${DUR:-3}
WARM=${WARM:-2}
NEW=${NEW:-2000000}
NEWDUR=${NEWDUR:-1}
KS=${KS:-"1 1000 100000"}
CLUSTERED=${CLUSTERED:-0}
SUTS=${SUTS:-"ours ovs"}
OUTDIR=${OUTDIR:-$REPO/bench-results/ctbench-$(date +%Y%m%d-%H%M%S)}

# a run that dies inside run_ovs leaves DPDK's runtime dir behind
trap 'ofb_cleanup; rm -rf /run/dpdk/ctb$$-*' EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || die "must run as root"
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
mkdir -p "$OUTDIR"; ofb_work
(cd "$REPO" && go build -o "$OFB_WORK/ctbench" ./bench/ctbench) || die "build failed"
G=$OFB_WORK/gen
"$OFB_WORK/ctbench" gen -dir "$G" -new "$NEW" $([ "$CLUSTERED" = 1 ] && echo -clustered) || die "gen failed"
{ echo "date: $(date -Is)"; echo "kernel: $(uname -r)"; echo "ovs: $($OVS_DPDK --version | head -1)"
  echo "ROUNDS=$ROUNDS DUR=$DUR WARM=$WARM NEW=$NEW NEWDUR=$NEWDUR KS=$KS CLUSTERED=$CLUSTERED"; } >"$OUTDIR/env.txt"
RES=$OUTDIR/results.txt; : >"$RES"

# result SUT TEST VALUE UNIT [NOTE]
result() { echo "$*" | tee -a "$RES"; }

run_ours() {
    local r=$1 k p out
    log "=== ours, round $r (load $(cut -d' ' -f1-3 /proc/loadavg))"
    for k in $KS; do
        for p in plain noct ct; do
            out=$(taskset -c 1 "$OFB_WORK/ctbench" run -flows "$G/$p.txt" -mode fwd -pcap1 "$G/est-$k-orig.pcap" \
                -pcap2 "$G/est-$k-reply.pcap" -dur "${DUR}s" -rounds 1 -label "ours est-$k-$p") || die "ours failed"
            echo "$out" >>"$OUTDIR/ours.txt"
            result ours "est-$k-$p" "$(sed -n 's/.* round 1: fwd \([0-9.]*\) Mpps.*/\1/p' <<<"$out")" Mpps \
                "$(sed -n 's/.*; \([0-9.]*\) cpu-ns\/pkt, the PMD thread.s \([0-9.]*\)), \([0-9]*\) tracked.*/\1 cpu-ns\/pkt (PMD \2); \3 tracked/p' <<<"$out")"
        done
    done
    for p in plain ct snat; do
        out=$(taskset -c 1 "$OFB_WORK/ctbench" run -flows "$G/$p.txt" -mode new -pcap1 "$G/new.pcap" \
            -rounds 1 -label "ours new-$p") || die "ours failed"
        echo "$out" >>"$OUTDIR/ours.txt"
        result ours "new-$p" "$(sed -n 's/.* round 1: new \([0-9.]*\) k\/s.*/\1/p' <<<"$out")" k/s \
            "$(sed -n 's/.* in 5-30% of the pass (\([0-9]*\) cpu-ns\/pkt); whole pass \([0-9]*\) k\/s.*; \([0-9]*\) cpu-ns\/pkt, the PMD thread.*/\1 cpu-ns\/pkt in 5-30% of the pass; whole pass \2 k\/s, \3 cpu-ns\/pkt/p' <<<"$out"); $(grep -o '[0-9]* connections made, [0-9]* packets in, [0-9]* out, [0-9.]*m*s' <<<"$out")"
    done
}

DEV=0 # net_pcap device number: every added port gets a fresh one
tx_of() { ovs-ofctl dump-ports br0 "$1" | awk '/tx pkts=/ { sub(/.*tx pkts=/, ""); sub(/,.*/, ""); print; exit }'; }
nconns() { ovs_appctl dpctl/ct-get-nconns; }
# pmd_cpu: ns the OVS PMD thread has run on a CPU (schedstat), the figure
# that other processes on the shared CPU do not inflate
# (looked up each time: OVS starts its PMD with the first port)
pmd_cpu() { awk '{ print $1 }' "/proc/$OVS_PID/task/$(ovs_pmd_tid)/schedstat"; }
install() {
    ovs-ofctl -O OpenFlow15 del-flows br0 && ovs-ofctl -O OpenFlow15 add-flows br0 "$G/$1.txt" || die "ovs: flows $1"
    ovs_appctl dpctl/flush-conntrack >/dev/null || die "ovs: flush-conntrack"
}
port() { ovs_dpdk_port "dpdk$1" "$1" "net_pcap$DEV,$2" || die "ovs: port $1 ($2)"; DEV=$((DEV + 1)); }
unport() { ovs_vsctl del-port br0 "dpdk$1"; }

run_ovs() {
    local r=$1 k p ns=ctb$$-$r prefix=ctb$$-$r a0 b0 a1 b1 bs t0 t1 n0 n1 c0 c1 mpps rate note wait win
    log "=== ovs-dpdk, round $r (load $(cut -d' ' -f1-3 /proc/loadavg))"
    ovs_dpdk_up "$OFB_WORK/ovs-$r" "$ns" "$prefix" || die "ovs-dpdk: setup failed, see $OFB_WORK/ovs-$r/log"
    for k in $KS; do
        install plain
        port 1 "rx_pcap=$G/est-$k-orig.pcap,infinite_rx=1"
        port 2 "rx_pcap=$G/est-$k-reply.pcap,infinite_rx=1"
        for p in plain noct ct; do
            install "$p"
            sleep "$WARM"
            a0=$(tx_of 1); b0=$(tx_of 2); t0=$EPOCHREALTIME; c0=$(pmd_cpu)
            sleep "$DUR"
            c1=$(pmd_cpu); a1=$(tx_of 1); b1=$(tx_of 2); t1=$EPOCHREALTIME
            mpps=$(awk -v a="$((a1 - a0 + b1 - b0))" -v x="$t0" -v y="$t1" 'BEGIN { printf "%.3f", a / (y - x) / 1e6 }')
            result ovs "est-$k-$p" "$mpps" Mpps "$(awk -v c="$((c1 - c0))" -v n="$((a1 - a0 + b1 - b0))" 'BEGIN { printf "%.1f", c / n }') cpu-ns/pkt; port 1 tx $((a1 - a0)), port 2 tx $((b1 - b0)); $(nconns) tracked"
        done
        ovs_appctl dpif-netdev/pmd-stats-show >"$OUTDIR/ovs-r$r-est-$k-pmd.txt"
        ovs_appctl dpctl/dump-flows >"$OUTDIR/ovs-r$r-est-$k-dpflows.txt" 2>&1
        unport 1; unport 2
    done
    port 2 "rx_pcap=$G/empty.pcap"
    for p in plain ct snat; do
        install "$p"
        bs=$(tx_of 2)
        port 1 "rx_pcap=$G/new.pcap"
        # plain goes through the file in well under a second: sample at once
        if [ "$p" = plain ]; then wait=0 win=0.1; else wait=0.3 win=$NEWDUR; fi
        sleep "$wait"
        n0=$(nconns); b0=$(tx_of 2); t0=$EPOCHREALTIME; c0=$(pmd_cpu)
        sleep "$win"
        c1=$(pmd_cpu); n1=$(nconns); b1=$(tx_of 2); t1=$EPOCHREALTIME
        note="$(awk -v c="$((c1 - c0))" -v n="$((b1 - b0))" 'BEGIN { printf "%.0f", c / n }') cpu-ns/pkt; $((n1 - n0)) connections made, $((b1 - b0)) packets out of port 2 in $(awk -v x="$t0" -v y="$t1" 'BEGIN { printf "%.2f", y - x }') s"
        [ "$((b1 - bs))" -ge "$((NEW - 1000))" ] && note="$note (pass ended)"
        if [ "$p" = plain ]; then
            rate=$(awk -v a="$((b1 - b0))" -v x="$t0" -v y="$t1" 'BEGIN { printf "%.0f", a / (y - x) / 1e3 }')
        else
            rate=$(awk -v a="$((n1 - n0))" -v x="$t0" -v y="$t1" 'BEGIN { printf "%.0f", a / (y - x) / 1e3 }')
        fi
        result ovs "new-$p" "$rate" k/s "$note"
        ovs_appctl dpctl/ct-stats-show >"$OUTDIR/ovs-r$r-new-$p-ct-stats.txt" 2>&1
        unport 1
        ovs_appctl dpctl/flush-conntrack >/dev/null
    done
    cp "$OVS_LOGDIR/ovs-vswitchd.log" "$OUTDIR/ovs-r$r-vswitchd.log" 2>/dev/null
    ovs_dpdk_down "$prefix"
}

for r in $(seq 1 "$ROUNDS"); do
    for s in $SUTS; do "run_$s" "$r"; done
done

med() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
# col SUT TEST FIELD: the median of a result's value (FIELD 3) or of its
# cpu-ns/pkt note (FIELD cpu)
col() {
    if [ "$3" = cpu ]; then
        awk -v s="$1" -v t="$2" '$1 == s && $2 == t { for (i = 5; i < NF; i++) if ($(i + 1) ~ /^cpu-ns\/pkt/) print $i }' "$RES" | med
    else
        awk -v s="$1" -v t="$2" '$1 == s && $2 == t { print $3 }' "$RES" | med
    fi
}
{
    echo "== medians of $ROUNDS rounds ($(cut -d' ' -f1-3 /proc/loadavg) load at the end)"
    printf '%-18s %10s %10s %6s  %s\n' test ours ovs ours/ovs "cpu-ns/pkt ours, ovs"
    for t in $(awk '{print $2}' "$RES" | awk '!s[$0]++'); do
        so=$(col ours "$t" 3) sv=$(col ovs "$t" 3)
        printf '%-18s %10s %10s %6s  %s, %s %s\n' "$t" "$so" "$sv" \
            "$(awk -v a="$so" -v b="$sv" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b }')" \
            "$(col ours "$t" cpu)" "$(col ovs "$t" cpu)" "$(awk -v t="$t" '$2 == t {print $4; exit}' "$RES")"
    done
} | tee "$OUTDIR/summary.txt"
log "results in $OUTDIR"

#!/usr/bin/env bash
# ovnpipe.sh - issue 27's OVN-shaped pipeline: forwarding Mpps and upcall
# (translation) rate, our datapath beside OVS-DPDK with the same flows and
# the same packets in the same run. Printed, never asserted.
#
# Flows and packets: `ovnpipe gen` (main.go, gen.go; seeded, so every run
# of a seed has the same ones): ~10,000 flows in ovs-ofctl syntax, table 0
# plus 30 logical stages (tables 8-37) chained by resubmit (four by
# goto_table) plus the output table 65, reg0-reg15 loaded, moved (also
# through the stack) and matched exact and masked, an address-set ACL as a
# conjunction of 100 source x 100 destination addresses; filler ports and
# filler datapaths fill the per-port stages. PKTS (8192) 64-byte TCP/UDP
# packets, each a distinct (source, destination) pair, so each needs a
# megaflow of its own in either switch (OVS's megaflow for them:
# in_port, MACs, nw_src, nw_dst, tp_dst exact); half go through the
# conjunction, half take the ACL's default path; all come out of port 2.
#
# Ours (bench/ovnpipe run, pinned to CPU1 like the OVS PMD): the flows go
# through ofproto/ofptext into a bridge over a manual-mode datapath with
# ring ports; one PMD on the calling goroutine replays the pcap.
#   fwd     the pcap looped for DUR s, every megaflow in place: Mpps and
#           ns/pkt, the receive copy included (ring injection ~ net_pcap's
#           copy into a fresh mbuf), output discarded.
#   upcall  every megaflow invalidated, each packet sent once: all miss;
#           misses / wall time of the pass (translation, install, execute).
#   xlate   translation alone (Bridge.Upcall on the packets' keys).
# OVS-DPDK (Debian's /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk,
# by path, in a netns of its own with private OVS_RUNDIR/OVS_DBDIR,
# dpdk-extra "--no-huge -m 2048 --legacy-mem --no-pci", PMD on CPU1):
# bridge datapath_type=netdev, the flows added with
# `ovs-ofctl -O OpenFlow15 --bundle add-flows`, then port 1 = type dpdk on
# DPDK's pcap PMD replaying the pcap from memory
# (net_pcap0,rx_pcap=pkts.pcap,infinite_rx=1; no tx given: tx drops and
# counts), port 2 = net_pcap1,rx_pcap=empty.pcap (nothing to receive,
# tx drops). DPDK 22.11's pcap PMD has no tx_drop key; a missing tx is the
# drop. net_null is not usable: its frames are zeros, not IP.
#   fwd     after a WARM s warm-up, port 2's tx packets (ovs-ofctl
#           dump-ports) over a DUR s window: Mpps; ns/pkt = 1000 / Mpps.
#           pmd-stats-show's received count over the window is printed too.
#   upcall  other_config:pmd-perf-metrics=true (only for this part: it
#           costs the fast path), stats cleared, `ovs-appctl
#           revalidator/purge` (every datapath flow and ukey dropped), 2 s
#           of the looping pcap: every packet's flow misses once.
#           `dpif-netdev/pmd-perf-show` "Upcalls: N (.., X us/upcall)" =
#           PMD cycles in handle_packet_upcall (translation, install,
#           execute) per upcall; rate = 1e6 / X.
# Rounds: ROUNDS per switch, medians; ours first, then OVS.
# Anchor (ANCHOR=1): the same packets through a one-flow table
# (ip,in_port=1,actions=output:2: every packet parsed, one megaflow; the
# ip keeps both off their in_port-only "simple match" path), one fwd
# window per switch: each side's cost of the ports, the parse, the caches
# and the output without the pipeline.
#
# Usage: sudo bench/ovnpipe/ovnpipe.sh   (apt-get install openvswitch-switch-dpdk)
# Knobs: ROUNDS [3] DUR [5] WARM [3] PKTS [8192] SEED [27] SUTS ["ours ovs"] ANCHOR [1]
#        OUTDIR [bench-results/ovnpipe-TS]
set -u -o pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../ofbench/lib.sh"

ROUNDS=${ROUNDS:-3}
DUR=${DUR:-5}
WARM=${WARM:-3}
PKTS=${PKTS:-8192}
SEED=${SEED:-27}
SUTS=${SUTS:-"ours ovs"}
ANCHOR=${ANCHOR:-1}
OUTDIR=${OUTDIR:-$REPO/bench-results/ovnpipe-$(date +%Y%m%d-%H%M%S)}

trap ofb_cleanup EXIT
trap 'exit 130' INT TERM
[ "$(id -u)" = 0 ] || die "must run as root"
[ -x "$OVS_DPDK" ] || die "no $OVS_DPDK (apt-get install openvswitch-switch-dpdk)"
command -v go >/dev/null || export PATH=/usr/local/go/bin:$PATH
mkdir -p "$OUTDIR"; ofb_work
(cd "$REPO" && go build -o "$OFB_WORK/ovnpipe" ./bench/ovnpipe) || die "build failed"
"$OFB_WORK/ovnpipe" gen -dir "$OFB_WORK" -seed "$SEED" -packets "$PKTS" | tee "$OUTDIR/gen.txt"
cp "$OFB_WORK/flows.txt" "$OUTDIR/"
echo "table=0,priority=100,ip,in_port=1,actions=output:2" >"$OFB_WORK/oneflow.txt"
{ echo "date: $(date -Is)"; echo "kernel: $(uname -r)"; echo "ovs: $($OVS_DPDK --version | head -1)"
  echo "ROUNDS=$ROUNDS DUR=$DUR WARM=$WARM PKTS=$PKTS SEED=$SEED"; echo "loadavg: $(cat /proc/loadavg)"; } >"$OUTDIR/env.txt"

med() { sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }

run_ours() {
    log "=== ours"
    taskset -c 1 "$OFB_WORK/ovnpipe" run -flows "$OFB_WORK/flows.txt" -pcap "$OFB_WORK/pkts.pcap" \
        -dur "${DUR}s" -rounds "$ROUNDS" | tee "$OUTDIR/ours.txt" || die "ours failed"
    if [ "$ANCHOR" = 1 ]; then
        taskset -c 1 "$OFB_WORK/ovnpipe" run -flows "$OFB_WORK/oneflow.txt" -pcap "$OFB_WORK/pkts.pcap" \
            -dur "${DUR}s" -rounds 1 | tee "$OUTDIR/ours-anchor.txt" || die "ours (anchor) failed"
    fi
}

tx_pkts() { ovs-ofctl dump-ports br0 2 | awk '/tx pkts=/ { sub(/.*tx pkts=/, ""); sub(/,.*/, ""); print; exit }'; }
pmd_rx() { ovs_appctl dpif-netdev/pmd-stats-show | awk '/packets received:/ { s += $3 } END { print s + 0 }'; }
# pmd_cpu: ns the OVS PMD thread has run on a CPU (schedstat), the figure
# that other processes on the shared CPU do not inflate
pmd_cpu() { awk '{ print $1 }' "/proc/$OVS_PID/task/$PMD_TID/schedstat"; }

# ovs_fwd LABEL: one forwarding window of DUR s
ovs_fwd() {
    local tx0 tx1 rx0 rx1 c0 c1 ta tb mpps rxm cpp
    rx0=$(pmd_rx); c0=$(pmd_cpu); tx0=$(tx_pkts); ta=$EPOCHREALTIME
    sleep "$DUR"
    tx1=$(tx_pkts); tb=$EPOCHREALTIME; c1=$(pmd_cpu); rx1=$(pmd_rx)
    mpps=$(awk -v a="$tx0" -v b="$tx1" -v x="$ta" -v y="$tb" 'BEGIN { printf "%.3f", (b - a) / (y - x) / 1e6 }')
    rxm=$(awk -v a="$rx0" -v b="$rx1" -v x="$ta" -v y="$tb" 'BEGIN { printf "%.3f", (b - a) / (y - x) / 1e6 }')
    cpp=$(awk -v a="$rx0" -v b="$rx1" -v x="$c0" -v y="$c1" 'BEGIN { printf "%.1f", (y - x) / (b - a) }')
    echo "$1: fwd $mpps Mpps ($(awk -v m="$mpps" 'BEGIN { printf "%.1f", 1000 / m }') ns/pkt, $cpp cpu-ns/pkt; port 2 tx; PMD received $rxm Mpps)" | tee /dev/stderr
}

run_ovs() {
    log "=== ovs-dpdk"
    local dir=$OFB_WORK/ovs ns=ovnp$$ prefix=ovnp$$ r
    ovs_dpdk_up "$dir" "$ns" "$prefix" || die "ovs-dpdk: setup failed, see $dir/log"
    local t0 t1
    t0=$EPOCHREALTIME
    ovs-ofctl -O OpenFlow15 --bundle add-flows br0 "$OFB_WORK/flows.txt" || die "ovs: add-flows failed"
    t1=$EPOCHREALTIME
    log "ovs: $(ovs-ofctl -O OpenFlow15 dump-aggregate br0) in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) * 1000 }') ms"
    ovs_dpdk_port dpdk0 1 "net_pcap0,rx_pcap=$OFB_WORK/pkts.pcap,infinite_rx=1" &&
        ovs_dpdk_port dpdk1 2 "net_pcap1,rx_pcap=$OFB_WORK/empty.pcap" || die "ovs: add-port failed"
    PMD_TID=$(ovs_pmd_tid)
    [ -n "$PMD_TID" ] || die "ovs: no PMD thread in $OVS_PID"
    sleep "$WARM"
    : >"$OUTDIR/ovs.txt"
    for r in $(seq 1 "$ROUNDS"); do ovs_fwd "ovs round $r" >>"$OUTDIR/ovs.txt"; done
    ovs_appctl dpif-netdev/pmd-stats-show >"$OUTDIR/ovs-pmd-stats-fwd.txt"
    ovs_appctl dpctl/dump-flows -m >"$OUTDIR/ovs-dpflows.txt" 2>&1
    log "ovs: $(grep -c '^ufid' "$OUTDIR/ovs-dpflows.txt") datapath flows; first: $(grep -m1 -o 'recirc_id.*actions:[^ ]*' "$OUTDIR/ovs-dpflows.txt" | sed 's/packets:.*actions/actions/')"
    ovs_vsctl set Open_vSwitch . other_config:pmd-perf-metrics=true
    sleep 1
    for r in $(seq 1 "$ROUNDS"); do
        ovs_appctl dpif-netdev/pmd-stats-clear >/dev/null
        ovs_appctl revalidator/purge >/dev/null
        sleep 2
        ovs_appctl dpif-netdev/pmd-perf-show >"$OUTDIR/ovs-perf-r$r.txt"
        local line n us
        line=$(grep -m1 'Upcalls:' "$OUTDIR/ovs-perf-r$r.txt")
        n=$(awk '{print $3}' <<<"$line")
        us=$(sed -n 's/.*, *\([0-9.]*\) us\/upcall.*/\1/p' <<<"$line")
        echo "ovs round $r: upcall $(awk -v u="$us" 'BEGIN { printf "%.0f", (u > 0 ? 1e6 / u : 0) }')/s ($n upcalls, $us us/upcall)" | tee -a "$OUTDIR/ovs.txt"
    done
    ovs_appctl upcall/show >"$OUTDIR/ovs-upcall-show.txt" 2>&1
    ovs_appctl coverage/show >"$OUTDIR/ovs-coverage.txt" 2>&1
    if [ "$ANCHOR" = 1 ]; then
        ovs_vsctl set Open_vSwitch . other_config:pmd-perf-metrics=false
        ovs-ofctl -O OpenFlow15 del-flows br0 && ovs-ofctl -O OpenFlow15 add-flows br0 "$OFB_WORK/oneflow.txt" ||
            die "ovs: anchor flows failed"
        sleep "$WARM"
        ovs_fwd "ovs anchor (one flow)" >"$OUTDIR/ovs-anchor.txt"
    fi
    cp "$OVS_LOGDIR/ovs-vswitchd.log" "$OUTDIR/ovs-vswitchd.log" 2>/dev/null
    ovs_dpdk_down "$prefix"
}

for s in $SUTS; do "run_$s"; done

{
    echo "== summary (medians of $ROUNDS; $(cat /proc/loadavg | cut -d' ' -f1-3) load at the end)"
    if [ -s "$OUTDIR/ours.txt" ]; then
        grep '^ours median' "$OUTDIR/ours.txt"
        [ -s "$OUTDIR/ours-anchor.txt" ] && echo "ours anchor (one flow): $(grep -o 'fwd [^(]*([^,]*,[^,]*' "$OUTDIR/ours-anchor.txt" | head -1)"
    fi
    if [ -s "$OUTDIR/ovs.txt" ]; then
        echo "ovs median of $ROUNDS: upcall $(sed -n 's/.*upcall \([0-9]*\)\/s.*/\1/p' "$OUTDIR/ovs.txt" | med)/s" \
             "($(sed -n 's/.*, \([0-9.]*\) us\/upcall.*/\1/p' "$OUTDIR/ovs.txt" | med) us/upcall)" \
             " fwd $(sed -n 's/.*fwd \([0-9.]*\) Mpps.*/\1/p' "$OUTDIR/ovs.txt" | med) Mpps" \
             " $(sed -n 's/.*(\([0-9.]*\) ns\/pkt.*/\1/p' "$OUTDIR/ovs.txt" | med) ns/pkt" \
             " $(sed -n 's/.* \([0-9.]*\) cpu-ns\/pkt.*/\1/p' "$OUTDIR/ovs.txt" | med) cpu-ns/pkt"
        [ -s "$OUTDIR/ovs-anchor.txt" ] && cat "$OUTDIR/ovs-anchor.txt"
    fi
} | tee "$OUTDIR/summary.txt"
log "results in $OUTDIR"

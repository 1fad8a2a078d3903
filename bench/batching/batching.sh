#!/usr/bin/env bash
# batching.sh — does tx-flush-interval batch at moderate load, and what does
# it cost in latency? Side by side with Open vSwitch's userspace datapath.
#
#   sudo bench/batching/batching.sh [RATES] [INTERVALS]
#
# RATES are offered loads in packets per second (default "20000 100000
# 300000 1000000"), INTERVALS tx-flush-interval values in µs or "auto"
# (default "0 50 200 auto"; OVS takes only numbers and skips "auto").
# RATES "-" runs only the probe alone, without load.
# Environment: SUTS (default "ours ovs"; "ours=LABEL:BINDIR" runs another
# build, e.g. the previous commit's, under LABEL), DUR (seconds of load per
# cell, default 4), PROBE_US (ping-pong interval, default 500).
#
# Topology: ns bt1 (bt-v1) -- bt-p1 [switch in ns bt-sut, AF_XDP ports,
# flows 1<->2] bt-p2 -- (bt-v2) ns bt2. trafgen in bt1 (CPU 0) sends 64-byte
# UDP frames at each rate to a MAC nobody owns (bt2 drops them); beside it a
# UDP ping-pong (one probe in flight, PROBE_US apart) between bt1 and bt2
# measures the round trip through the switch, both directions. The switch's
# PMD runs on CPU 1. Per cell it prints the PMD's average output batch,
# kicks (send syscalls) per output packet, PMD busy ns per packet and the
# probe's RTT p50/p99, plus, for rate 0, the RTT of the probe alone.
# Figures are reported, never asserted.
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd); top=$(cd "$here/../.." && pwd)
RATES=${1:-"20000 100000 300000 1000000"}
[ "$RATES" = - ] && RATES="" # only the probe alone (rate 0)
INTERVALS=${2:-"0 50 200 auto"}
SUTS=${SUTS:-"ours ovs"}
DUR=${DUR:-4}
PROBE_US=${PROBE_US:-500}
SHARED=${SHARED:-$top/../shared}
PP=/tmp/batching-pingpong
MAC1=02:00:c6:12:07:01 MAC2=02:00:c6:12:07:02 SINK=02:00:c6:12:07:fe
IP1=198.18.7.1 IP2=198.18.7.2

die() { echo "batching.sh: $*" >&2; exit 1; }
for t in trafgen ip ethtool gcc python3 taskset; do
	command -v $t >/dev/null || die "missing $t (apt-get install netsniff-ng iproute2 ethtool gcc python3 util-linux)"
done
[ -x "$PP" ] || gcc -O2 -o "$PP" "$SHARED/bench/hb-pingpong.c" || die "cannot build the ping-pong probe from $SHARED/bench/hb-pingpong.c"
[ "$(id -u)" = 0 ] || die "needs root"

work=$(mktemp -d); pids=(); spid=""; opids=()
cleanup() {
	for p in "${pids[@]}" $spid "${opids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	for n in bt1 bt2 bt-sut; do ip netns del $n 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

topo() {
	for n in bt1 bt2 bt-sut; do ip netns add $n || die "netns $n exists (stale run?)"; done
	ip link add bt-p1 netns bt-sut type veth peer name bt-v1 netns bt1
	ip link add bt-p2 netns bt-sut type veth peer name bt-v2 netns bt2
	for p in bt-p1 bt-p2; do ip -n bt-sut link set $p up; done
	for t in "bt1 bt-v1 $MAC1 $IP1" "bt2 bt-v2 $MAC2 $IP2"; do
		set -- $t
		ip -n $1 link set lo up; ip -n $1 link set $2 address $3
		ip -n $1 addr add $4/24 dev $2; ip netns exec $1 ethtool -K $2 tx off >/dev/null 2>&1
		ip -n $1 link set $2 up
	done
	ip -n bt1 neigh replace $IP2 lladdr $MAC2 dev bt-v1 nud permanent
	ip -n bt2 neigh replace $IP1 lladdr $MAC1 dev bt-v2 nud permanent
	ip netns exec bt2 taskset -c 0 "$PP" server $IP2 7 >/dev/null 2>&1 & pids+=($!)
	cat >"$work/pkt.cfg" <<CFG
{ eth(da=$SINK, sa=$MAC1), ipv4(saddr=$IP1, daddr=$IP2, ttl=64), udp(sp=1000, dp=9), fill(0x00, 18) }
CFG
}

# --- SUT: this switch (or another build of it)
ours_up() { # BINDIR
	bin=$1; st=$work/state.$RANDOM; mkdir -m 700 -p "$st"
	export VSWITCHD_STATE_DIR=$st
	ip netns exec bt-sut taskset -c 1 "$bin/vswitchd" --state-dir "$st" --metrics-addr "" >"$work/vswitchd.log" 2>&1 & spid=$!
	for _ in $(seq 100); do "$bin/vsctl" show >/dev/null 2>&1 && break; sleep 0.1; done
	v="$bin/vsctl"
	$v br-exists br0 || $v add-br br0
	$v set-fail-mode br0 secure
	$v add-port br0 bt-p1 -- type=afxdp && $v add-port br0 bt-p2 -- type=afxdp || { tail "$work/vswitchd.log"; return 1; }
	$v del-flows br0 >/dev/null
	$v add-flow br0 "in_port=bt-p1,actions=output:bt-p2" && $v add-flow br0 "in_port=bt-p2,actions=output:bt-p1"
}
ours_down() { kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$VSWITCHD_STATE_DIR"; }
ours_flush() { $v set Open_vSwitch . other_config:tx-flush-interval=$1 >/dev/null; sleep 0.3; }
ours_clear() { $v pmd-stats-clear >/dev/null; }
ours_stats() { # prints: batch kicks/pkt ns/pkt
	$v --format json pmd-stats-show | python3 -c '
import json, sys
rows = [r for r in json.load(sys.stdin) if r["bridge"] == "br0"]
pk = sum(r["packets_received"] for r in rows); ob = sum(r["output_batches"] for r in rows)
ki = sum(r.get("output_kicks", 0) for r in rows); busy = sum(r["busy_ns"] for r in rows)
out = sum(r["avg_packets_per_output_batch"] * r["output_batches"] for r in rows)
print("%.2f %.3f %.0f" % (out / ob if ob else 0, ki / out if out else 0, busy / pk if pk else 0))'
}

# --- SUT: Open vSwitch 3.1, userspace datapath, afxdp ports
ovs_up() {
	od=$work/ovs.$RANDOM; mkdir -p "$od"/{run,db,log,etc}
	export OVS_RUNDIR=$od/run OVS_DBDIR=$od/db OVS_LOGDIR=$od/log OVS_SYSCONFDIR=$od/etc
	ovsdb-tool create "$od/db/conf.db" /usr/share/openvswitch/vswitch.ovsschema
	ip netns exec bt-sut ovsdb-server "$od/db/conf.db" --remote=punix:"$od/run/db.sock" \
		--pidfile="$od/run/ovsdb-server.pid" --unixctl="$od/run/ovsdb-server.ctl" --log-file="$od/log/ovsdb.log" --no-chdir >/dev/null 2>&1 & opids=($!)
	for _ in $(seq 50); do [ -S "$od/run/db.sock" ] && break; sleep 0.1; done
	ovsvs() { ip netns exec bt-sut ovs-vsctl --timeout=20 "$@"; }
	ovsvs --no-wait init
	ovsvs --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2
	ip netns exec bt-sut ovs-vswitchd unix:"$od/run/db.sock" --pidfile="$od/run/ovs-vswitchd.pid" \
		--unixctl="$od/run/ovs-vswitchd.ctl" --log-file="$od/log/ovs-vswitchd.log" --no-chdir \
		--disable-system-route -vconsole:off >/dev/null 2>&1 & opids+=($!)
	for _ in $(seq 100); do [ -S "$od/run/ovs-vswitchd.ctl" ] && break; sleep 0.1; done
	ovsvs add-br btovs -- set bridge btovs datapath_type=netdev fail-mode=secure
	ovsvs add-port btovs bt-p1 -- set Interface bt-p1 type=afxdp ofport_request=1
	ovsvs add-port btovs bt-p2 -- set Interface bt-p2 type=afxdp ofport_request=2
	ip netns exec bt-sut ovs-ofctl del-flows btovs
	ip netns exec bt-sut ovs-ofctl add-flow btovs in_port=1,actions=output:2
	ip netns exec bt-sut ovs-ofctl add-flow btovs in_port=2,actions=output:1
}
ovs_appctl() { ip netns exec bt-sut ovs-appctl -t "$OVS_RUNDIR/ovs-vswitchd.ctl" "$@"; }
ovs_down() {
	ovs_appctl exit --cleanup >/dev/null 2>&1
	for p in "${opids[@]}"; do kill $p 2>/dev/null; wait $p 2>/dev/null; done
	ip -n bt-sut link del btovs 2>/dev/null; ip -n bt-sut link del ovs-netdev 2>/dev/null
	# OVS may leave its XDP programs behind; the next SUT needs the links bare.
	for p in bt-p1 bt-p2; do ip -n bt-sut link set $p xdp off 2>/dev/null; ip -n bt-sut link set $p xdpgeneric off 2>/dev/null; done
}
ovs_flush() { ovsvs set Open_vSwitch . other_config:tx-flush-interval=$1; sleep 0.3; }
ovs_clear() { ovs_appctl dpif-netdev/pmd-stats-clear >/dev/null; }
ovs_stats() { # OVS counts no kicks; cycles → ns at its measured TSC rate is not printed, so busy share is
	ovs_appctl dpif-netdev/pmd-stats-show | python3 -c '
import re, sys
t = sys.stdin.read()
g = lambda k: float((re.search(re.escape(k) + r":\s*([0-9.]+)", t) or [0, 0])[1])
print("%.2f n/a %.0fc" % (g("avg. packets per output batch"), g("avg processing cycles per packet")))'
}

cell() { # SUT RATE INTERVAL
	local sut=$1 rate=$2 fi=$3 lat
	${sut}_flush "$fi"; ${sut}_clear
	if [ "$rate" != 0 ]; then
		ip netns exec bt1 timeout $DUR taskset -c 0 trafgen --dev bt-v1 --conf "$work/pkt.cfg" -P 1 \
			-b ${rate}pps --no-sock-mem --notouch-irq -q >/dev/null 2>&1 & tg=$!
		sleep 0.5
	fi
	lat=$(ip netns exec bt1 taskset -c 0 "$PP" client $IP2 7 -n 100000 -i $PROBE_US -t 100 -d $((DUR - 1)))
	[ "$rate" != 0 ] && wait $tg
	sleep 0.2
	local st; st=$(${sut}_stats)
	set -- $st
	local p50 p99
	p50=$(sed -n 's/.*p50=\([0-9.NA]*\).*/\1/p' <<<"$lat"); p99=$(sed -n 's/.*p99=\([0-9.NA]*\).*/\1/p' <<<"$lat")
	printf "%-10s %8s %5s %10s %12s %10s %8s %8s\n" "$label" "$rate" "$fi" "$1" "$2" "$3" "$p50" "$p99"
}

topo
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %8s %5s %10s %12s %10s %8s %8s\n" sut rate_pps flush avg_batch kicks/pkt busy/pkt p50_us p99_us
for spec in $SUTS; do
	case $spec in
	ours) label=ours; kind=ours; bindir=$top/bin ;;
	ours=*) kind=ours; label=${spec#ours=}; bindir=${label#*:}; label=${label%%:*} ;;
	ovs) label=ovs-3.1; kind=ovs ;;
	*) die "unknown SUT $spec" ;;
	esac
	if [ $kind = ours ]; then ours_up "$bindir" || die "$label did not start"; else
		command -v ovs-vswitchd >/dev/null || die "missing ovs-vswitchd (apt-get install openvswitch-switch)"
		ovs_up || die "ovs did not start"
	fi
	for _ in $(seq 50); do ip netns exec bt1 "$PP" client $IP2 7 -n 1 -t 200 >/dev/null 2>&1 && break; sleep 0.2; done
	for rate in 0 $RATES; do
		for fi in $INTERVALS; do
			[ $kind = ovs ] && [ "$fi" = auto ] && continue
			cell $kind "$rate" "$fi"
		done
	done
	${kind}_down
done

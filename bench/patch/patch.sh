#!/usr/bin/env bash
# Patch ports side by side: two bridges joined by a patch pair (Interface
# type=patch, options:peer), one veth to a host namespace on each,
#   h1 -- br1 ==p12/p21== br2 -- h2,
# on this switch and on Debian's ovs-vswitchd (userspace, datapath_type=
# netdev), both configured through the real ovs-vsctl on a private
# ovsdb-server, each switch in a namespace of its own pinned to CPU 1,
# default (NORMAL) flows. As the anchor, the same h1 -- h2 traffic through
# ONE bridge (both veths on br1, no patch) on the same switch, so the table
# shows what the patch crossing costs each switch: here each bridge has its
# own datapath and PMDs and a frame crosses through a ring the other
# bridge's PMD polls; Open vSwitch crosses within one flow translation.
# Per switch and topology it prints: ping round trips h1 -> h2 (200 pings,
# 10 ms apart; p50 and p99 of the per-ping times, and how many came back),
# and one iperf3 TCP stream h1 -> h2 for SECS seconds (client pinned to
# CPU 0): Gbit/s received and the sender's retransmits; and the drops the
# switch counted on its ports (OpenFlow port stats, rx + tx, LOCAL left
# out; a patch port's tx drops are frames its peer's ring had no room
# for). Printed, never asserted. With TXOFF=1 the hosts' veths have transmit offloads off
# (`ethtool -K tx off`, what Open vSwitch's documentation asks for with
# veths; it also turns TSO off). Needs root, openvswitch-switch, iperf3.
#   usage: bench/patch/patch.sh [BIN] [SECS] [SUTS]   (BIN: where vswitchd
#   is, default bin; SECS default 5; SUTS default "ours ovs")
set -u
BIN=$(cd "${1:-bin}" && pwd) || { echo "no BIN directory ${1:-bin}"; exit 1; }
SECS=${2:-5}
SUTS=${3:-ours ovs}
W=$(mktemp -d /tmp/patch-bench.XXXXXX)
NS=pb$$
cleanup() {
	for p in "$W"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
	for n in h1 h2; do ip netns pids $NS$n 2>/dev/null | xargs -r kill 2>/dev/null; done
	sleep 0.5
	for p in "$W"/*.pid; do [ -f "$p" ] && kill -9 "$(cat "$p")" 2>/dev/null; done
	rm -f "$W"/*.pid
	for n in sw h1 h2; do ip netns del $NS$n 2>/dev/null; done
}
trap 'cleanup; rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
# fail SUT LABEL WHAT [LOG]: say what failed (and the log's last lines).
fail() { printf '%-5s %-16s FAILED: %s\n' "$1" "$2" "$3"; [ -f "${4:-}" ] && tail -n 4 "$4" | sed 's/^/      | /'; }

# run SUT TOPO (one: both veths on br1; patch: br1 ==patch== br2).
run() {
	local sut=$1 topo=$2 d=$W/$1-$2 label=${2/one/one-bridge}${TXOFF:+,txoff}
	cleanup; mkdir -p "$d"
	for n in sw h1 h2; do ip netns add $NS$n && ip -n $NS$n link set lo up ||
		{ fail $sut $label "namespace $NS$n"; return; }; done
	for i in 1 2; do
		ip link add ${NS}p$i netns ${NS}sw type veth peer name eth0 netns ${NS}h$i &&
			ip -n ${NS}h$i link set eth0 address 02:00:c6:12:00:0$i &&
			ip -n ${NS}h$i addr add 198.18.0.$i/24 dev eth0 &&
			ip -n ${NS}h$i link set eth0 up && ip -n ${NS}sw link set ${NS}p$i up ||
			{ fail $sut $label "veth ${NS}p$i"; return; }
		if [ -n "${TXOFF:-}" ]; then
			ip netns exec ${NS}h$i ethtool -K eth0 tx off >/dev/null 2>&1 ||
				{ fail $sut $label "ethtool -K tx off on h$i"; return; }
		fi
	done
	# The database and the switch.
	ovsdb-tool create $d/conf.db /usr/share/openvswitch/vswitch.ovsschema &&
		ovsdb-server $d/conf.db --remote=punix:$d/db.sock --pidfile=$W/db.pid --unixctl=$d/db.ctl \
			--log-file=$d/db.log --detach --no-chdir 2>>$d/start.err || { fail $sut $label "ovsdb-server" $d/start.err; return; }
	local VS="ovs-vsctl --timeout=30 --db=unix:$d/db.sock"
	$VS --no-wait init || { fail $sut $label "ovs-vsctl init"; return; }
	if [ "$sut" = ours ]; then
		OVS_RUNDIR=$d ip netns exec ${NS}sw taskset -c 1 "$BIN/vswitchd" --db unix:$d/db.sock \
			--pidfile=$W/vs.pid --log-file=$d/vs.log --state-dir=$d/state --metrics-addr "" \
			--default-bridge "" --detach --no-chdir 2>>$d/start.err || { fail $sut $label "vswitchd start" $d/start.err; return; }
	elif [ "$sut" = ovs ]; then
		$VS --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2
		OVS_RUNDIR=$d OVS_DBDIR=$d OVS_LOGDIR=$d ip netns exec ${NS}sw taskset -c 1 ovs-vswitchd unix:$d/db.sock \
			--pidfile=$W/vs.pid --unixctl=$d/vs.ctl --log-file=$d/vs.log --detach --no-chdir --disable-system-route 2>>$d/start.err ||
			{ fail $sut $label "ovs-vswitchd start" $d/start.err; return; }
	else
		fail $sut $label "unknown SUT (ours or ovs)"; return
	fi
	# The topology, through the real ovs-vsctl, each change waited for.
	local ok=1
	$VS add-br br1 -- set bridge br1 datapath_type=netdev && $VS add-port br1 ${NS}p1 || ok=
	if [ "$topo" = one ]; then
		[ -n "$ok" ] && $VS add-port br1 ${NS}p2 || ok=
	else
		[ -n "$ok" ] && $VS add-br br2 -- set bridge br2 datapath_type=netdev && $VS add-port br2 ${NS}p2 &&
			$VS add-port br1 p12 -- set interface p12 type=patch options:peer=p21 &&
			$VS add-port br2 p21 -- set interface p21 type=patch options:peer=p12 || ok=
	fi
	[ -n "$ok" ] || { fail $sut $label "ovs-vsctl topology" $d/vs.log; return; }
	# Every interface's ofport and error, as the database has them.
	local errs=$($VS --columns=name,ofport,error find Interface 2>/dev/null | awk '
		/^name/ {n=$3} /^ofport/ {o=$3} /^error/ && $3 != "[]" {e=e " " n ":" substr($0, index($0, $3))}
		/^ofport/ && o+0 < 0 {e=e " " n ":ofport=" o} END {print e}')
	[ -n "$errs" ] && fail $sut $label "interface errors:$errs"
	# Warm up: learn both MACs, up to 10 s for the switch to forward.
	local up=""
	for t in $(seq 20); do
		ip netns exec ${NS}h1 ping -c 1 -W 0.5 198.18.0.2 >/dev/null 2>&1 && { up=1; break; }
	done
	[ -n "$up" ] || { fail $sut $label "no ping h1 -> h2 within 10 s" $d/vs.log; return; }
	ip netns exec ${NS}h1 ping -c 5 -i 0.05 198.18.0.2 >/dev/null 2>&1
	# 200 pings, 10 ms apart: p50 and p99 of the per-ping times.
	local rtt=$(ip netns exec ${NS}h1 ping -n -c 200 -i 0.01 -W 1 198.18.0.2 2>/dev/null |
		sed -n 's/.* time=\([0-9.]*\) ms.*/\1/p' | sort -g | awk '{v[NR]=$1}
		function q(p,  i) { i = int(p * NR + 0.9999); if (i < 1) i = 1; return v[i] }
		END { if (NR) printf "%.3f %.3f %d", q(0.50), q(0.99), NR; else print "- - 0" }')
	set -- $rtt
	local p50=$1 p99=$2 got=$3
	# One TCP stream h1 -> h2.
	ip netns exec ${NS}h2 iperf3 -s -1 -D -p 5209 >/dev/null 2>&1; sleep 0.5
	ip netns exec ${NS}h1 timeout $((SECS + 20)) taskset -c 0 iperf3 -c 198.18.0.2 -p 5209 -t "$SECS" \
		--connect-timeout 3000 -J >$d/iperf.json 2>/dev/null
	ip netns pids ${NS}h2 2>/dev/null | xargs -r kill 2>/dev/null
	# Drops the switch counted on its ports but LOCAL (OpenFlow port stats, rx + tx).
	local drops=0 br
	for br in br1 br2; do [ $topo = one ] && [ $br = br2 ] && continue
		OVS_RUNDIR=$d ovs-ofctl dump-ports $br >$d/ports-$br 2>&1 || { drops=?; break; }
		drops=$((drops + $(awk '/port / {l = /port +LOCAL:/} !l {for (i = 1; i <= NF; i++)
			if ($i ~ /^drop=[0-9]/) s += substr($i, 6)} END {print s+0}' $d/ports-$br)))
	done
	local tcp=$(python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1])); e = d["end"]
    print("%.2f %s" % (e["sum_received"]["bits_per_second"] / 1e9, e["sum_sent"].get("retransmits", "-")))
except Exception as x:
    print("failed -")' $d/iperf.json)
	set -- $tcp
	printf '%-5s %-16s %7s %7s %7s %10s %8s %6s\n' "$sut" "$label" \
		"$p50" "$p99" "$got/200" "$1" "$2" "$drops"
	[ "$1" = failed ] && fail $sut $label "iperf3:$(sed -n 's/^[[:space:]]*"error":[[:space:]]*/ /p' $d/iperf.json 2>/dev/null)$([ -z "${TXOFF:-}" ] && echo " (offloads on: try TXOFF=1)")"
}

printf '%-5s %-16s %7s %7s %7s %10s %8s %6s\n' sut topology "p50 ms" "p99 ms" pings "TCP Gbit/s" retrans drops
for s in $SUTS; do for t in one patch; do run "$s" "$t"; done; done

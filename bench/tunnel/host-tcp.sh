#!/usr/bin/env bash
# host-tcp.sh — what an underlay=afxdp tunnel port costs the host's own
# traffic on the interface it takes: one iperf3 TCP stream between two
# namespaces over a veth pair, first with no switch, then with each BIN's
# vswitchd in the receiving namespace holding a vxlan port with
# underlay=afxdp on that veth. Printed, never asserted.
#
#   sudo bench/tunnel/host-tcp.sh [BIN ...]      # default BIN: bin
#
# Native XDP on a veth makes the kernel turn TSO off on its peer (the
# sender's veth here), so the host's TCP leaves in MTU-size segments;
# a generic program leaves the peer's offloads alone. REPS (2) rounds.
set -u -o pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -gt 0 ] || set -- "$top/bin"
REPS=${REPS:-2}
[ "$(id -u)" = 0 ] || { echo "host-tcp.sh: needs root" >&2; exit 1; }
for t in iperf3 ethtool python3; do command -v $t >/dev/null || { echo "host-tcp.sh: missing $t" >&2; exit 1; }; done
tag=$$
A=ht-a-$tag B=ht-b-$tag ST=$(mktemp -d /tmp/host-tcp.XXXXXX)
cleanup() {
	kill $(jobs -p) 2>/dev/null
	wait 2>/dev/null
	ip netns del $A 2>/dev/null; ip netns del $B 2>/dev/null
	rm -rf "$ST"
}
trap cleanup EXIT

row() { # BIN|none
	ip netns add $A && ip netns add $B || return 1
	ip link add ha-$tag type veth peer name hb-$tag
	ip link set ha-$tag netns $A name ha; ip link set hb-$tag netns $B name hb
	ip -n $A addr add 198.18.70.1/24 dev ha; ip -n $B addr add 198.18.70.2/24 dev hb
	ip -n $A link set ha up; ip -n $B link set hb up
	local mode=- pid=
	if [ "$1" != none ]; then
		local st=$ST/$RANDOM; mkdir -p "$st"
		ip netns exec $B "$1/vswitchd" --state-dir "$st" --metrics-addr '' --default-bridge br0 --log-level warn &
		pid=$!
		for _ in $(seq 100); do [ -S "$st/br0.mgmt" ] && break; sleep 0.1; done
		"$1/vsctl" --state-dir "$st" add-port br0 vx0 -- type=vxlan options:remote_ip=198.18.70.1 \
			options:local_ip=198.18.70.2 options:key=5 options:underlay=afxdp || return 1
		mode=$("$1/vsctl" --state-dir "$st" show | sed -n 's/.*underlay_xdp_mode=\([a-z]*\).*/\1/p' | head -1)
	fi
	local tso; tso=$(ip netns exec $A ethtool -k ha | sed -n 's/^tcp-segmentation-offload: \([a-z]*\).*/\1/p')
	ip netns exec $B iperf3 -s -1 -B 198.18.70.2 >/dev/null 2>&1 &
	local srv=$!
	for _ in $(seq 50); do ip netns exec $B ss -ltn | grep -q ':5201' && break; sleep 0.1; done
	local g; g=$(ip netns exec $A iperf3 -c 198.18.70.2 -t 5 -J | python3 -c \
		'import json, sys; print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))')
	local name=none
	[ "$1" != none ] && name=$(basename "$(dirname "$1")")/$(basename "$1")
	printf "%-28s %-8s %-8s %8s\n" "$name" "${mode:--}" "$tso" "$g"
	wait $srv 2>/dev/null
	[ -n "$pid" ] && { kill $pid; wait $pid 2>/dev/null; }
	ip netns del $A; ip netns del $B
}

printf "%-28s %-8s %-8s %8s\n" switch xdp peer_tso host_tcp_Gbps
for ((r = 0; r < REPS; r++)); do
	row none
	for b in "$@"; do row "$b"; done
done

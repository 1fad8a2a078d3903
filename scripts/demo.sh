#!/bin/bash
# The five-minute tour (make demo): two network namespaces, one bridge,
# ping through it, the flows and a few metric lines. Needs root. Everything
# it creates is removed at exit, even on failure.
#
# It runs beside a `make run` daemon without touching it: its own state
# directory, its own bridge name (so its own LOCAL tap device and datapath
# id), its own namespaces and veths (all suffixed with this shell's pid) and
# its own metrics port (DEMO_METRICS_PORT, default 19477; refused clearly
# if busy).
set -euo pipefail

BIN=${BIN:-bin}
tag=$$
br=dmbr$((tag % 100000))

need() {
	local missing=()
	for t in "$@"; do
		command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t%%:*} (Debian/Ubuntu package ${t#*:})")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "make demo needs: ${missing[*]}" >&2
		echo "install them, e.g.: apt-get install iproute2 iputils-ping curl" >&2
		exit 1
	fi
}
need ip:iproute2 ping:iputils-ping curl:curl
[ -x "$BIN/vswitchd" ] && [ -x "$BIN/vsctl" ] || { echo "no $BIN/vswitchd or $BIN/vsctl: run make build first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "make demo needs root (network namespaces)" >&2; exit 1; }

metrics=127.0.0.1:${DEMO_METRICS_PORT:-19477}
if (exec 3<>"/dev/tcp/${metrics%:*}/${metrics#*:}") 2>/dev/null; then
	echo "port ${metrics#*:} is taken (another demo or vswitchd?); run with DEMO_METRICS_PORT=another port" >&2
	exit 1
fi
if ip link show "$br" >/dev/null 2>&1; then
	echo "an interface named $br exists already; not touching it" >&2
	exit 1
fi
state=$(mktemp -d /tmp/vswitch-demo.XXXXXX)
export VSWITCHD_STATE_DIR=$state
pid=

cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	ip link del "dmp1-$tag" 2>/dev/null || true
	ip link del "dmp2-$tag" 2>/dev/null || true
	ip netns del "dmns1-$tag" 2>/dev/null || true
	ip netns del "dmns2-$tag" 2>/dev/null || true
	rm -rf "$state"
}
trap cleanup EXIT

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

for i in 1 2; do
	ip netns add "dmns$i-$tag"
	ip link add "dmp$i-$tag" type veth peer name "dmh$i-$tag"
	ip link set "dmh$i-$tag" netns "dmns$i-$tag"
	ip -n "dmns$i-$tag" addr add "198.18.0.$i/24" dev "dmh$i-$tag"
	ip -n "dmns$i-$tag" link set "dmh$i-$tag" up
	ip link set "dmp$i-$tag" up
done
echo "two namespaces: dmns1-$tag (198.18.0.1) and dmns2-$tag (198.18.0.2), wired to dmp1-$tag and dmp2-$tag"

say "$BIN/vswitchd --state-dir $state --metrics-addr $metrics --default-bridge $br &"
"$BIN/vswitchd" --state-dir "$state" --metrics-addr "$metrics" --default-bridge "$br" --log-file "$state/vswitchd.log" &
pid=$!
for _ in $(seq 100); do "$BIN/vsctl" version >/dev/null 2>&1 && break; sleep 0.1; done
"$BIN/vsctl" version >/dev/null || { echo "vswitchd did not start:" >&2; cat "$state/vswitchd.log" >&2; exit 1; }

run "$BIN/vsctl" add-port "$br" "dmp1-$tag"
run "$BIN/vsctl" add-port "$br" "dmp2-$tag" -- type=afpacket
run "$BIN/vsctl" show
run ip netns exec "dmns1-$tag" ping -c 3 -i 0.2 198.18.0.2
run "$BIN/vsctl" add-flow "$br" "priority=100,icmp,in_port=dmp1-$tag,actions=output:dmp2-$tag"
run "$BIN/vsctl" add-flow "$br" "priority=100,icmp,in_port=dmp2-$tag,actions=output:dmp1-$tag"
run ip netns exec "dmns1-$tag" ping -c 3 -i 0.2 198.18.0.2
run "$BIN/vsctl" dump-flows "$br"
run "$BIN/vsctl" dpif-dump-flows "$br"
run "$BIN/vsctl" fdb-show "$br"
run "$BIN/vsctl" pmd-stats-show
say "curl -s http://$metrics/metrics | grep -E 'vswitch_(port_rx_packets|pmd_rx_packets|datapath_flows)'"
curl -s "http://$metrics/metrics" | grep -E '^vswitch_(port_rx_packets|pmd_rx_packets|datapath_flows)' || true
echo
echo "demo done; cleaning up"

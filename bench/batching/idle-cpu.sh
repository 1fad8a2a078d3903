#!/usr/bin/env bash
# idle-cpu.sh [BINDIR]: how much CPU an idle vswitchd uses, from
# /proc/PID/stat over 10 s: with its default bridge, with four bridges, and
# with four bridges of which br0 has two AF_XDP ports on veths (idle).
# Reported, never asserted. Needs root.
set -u
here=$(cd "$(dirname "$0")" && pwd); bin=${1:-$here/../../bin}
[ "$(id -u)" = 0 ] || { echo "idle-cpu.sh: needs root" >&2; exit 1; }
command -v bc >/dev/null || { echo "idle-cpu.sh: missing bc (apt-get install bc)" >&2; exit 1; }
st=$(mktemp -d); chmod 700 "$st"; pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; ip netns del ic-peer 2>/dev/null; rm -rf "$st"; }
trap cleanup EXIT INT TERM
export VSWITCHD_STATE_DIR=$st/state
"$bin/vswitchd" --state-dir "$st/state" --metrics-addr "" >"$st/log" 2>&1 & pid=$!
for _ in $(seq 100); do "$bin/vsctl" show >/dev/null 2>&1 && break; sleep 0.1; done
measure() {
	sleep 2
	local t0 t1 hz; hz=$(getconf CLK_TCK)
	t0=$(awk '{print $14+$15}' /proc/$pid/stat); sleep 10; t1=$(awk '{print $14+$15}' /proc/$pid/stat)
	printf "%-40s %6s %% of a core\n" "$1" "$(echo "scale=2; ($t1-$t0)*100/$hz/10" | bc)"
}
measure "default bridge"
for b in 2 3 4; do "$bin/vsctl" add-br icbr$b >/dev/null; done
measure "four bridges"
ip netns add ic-peer
ip link add ic-p1 type veth peer name ic-v1 netns ic-peer; ip link add ic-p2 type veth peer name ic-v2 netns ic-peer
for l in ic-p1 ic-p2; do ip link set $l up; done
ip -n ic-peer link set ic-v1 up; ip -n ic-peer link set ic-v2 up
"$bin/vsctl" add-port br0 ic-p1 -- type=afxdp >/dev/null && "$bin/vsctl" add-port br0 ic-p2 -- type=afxdp >/dev/null
measure "four bridges, two idle AF_XDP ports"
"$bin/vsctl" del-port br0 ic-p1 >/dev/null; "$bin/vsctl" del-port br0 ic-p2 >/dev/null
ip link del ic-p1 2>/dev/null; ip link del ic-p2 2>/dev/null

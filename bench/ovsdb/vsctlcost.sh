#!/usr/bin/env bash
# What one vsctl command costs, end to end (process start, finding the
# database, the transaction, the wait for cur_cfg): BIN's vswitchd on its
# embedded database in a namespace of its own, M (default 50) of each of
# `vsctl list-br`, `vsctl version` (the management socket only),
# `vsctl set Open_vSwitch . other_config:tx-flush-interval=N` (applied in
# place), `vsctl add-port br0 iN -- type=internal` one by one, and, where
# Open vSwitch's tools are
# installed, `ovs-vsctl set` against the same daemon's database. Prints
# the wall time per command. Run it for two builds in turn (old, new) to
# compare; printed, never asserted. FLOWS=N first adds N flows to br0
# (through Open vSwitch's ovs-ofctl) and lets them be saved: what a
# configuration change costs beside a bridge's saved tables.
#   usage: bench/ovsdb/vsctlcost.sh [BIN] [TAG]   (M, FLOWS from the environment)
# Needs root.
set -u
BIN=$(cd "${1:-bin}" && pwd) || exit 1
TAG=${2:-$BIN}
M=${M:-50}
NS=vcc$$
W=$(mktemp -d /tmp/vsctlcost.XXXXXX)
chmod 700 "$W"
cleanup() {
	pkill -f "state-dir $W" 2>/dev/null
	sleep 1
	ip netns del $NS 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
ip netns add $NS
ip netns exec $NS ip link set lo up
ip netns exec $NS "$BIN"/vswitchd --state-dir "$W" --default-bridge br0 --metrics-addr "" >"$W"/log 2>&1 &
for _ in $(seq 100); do [ -S "$W"/vswitchd.sock ] && break; sleep 0.1; done
export VSWITCHD_STATE_DIR=$W
ip netns exec $NS "$BIN"/vsctl list-br >/dev/null || exit 1
if [ "${FLOWS:-0}" -gt 0 ]; then
	awk -v n="$FLOWS" 'BEGIN { for (i = 0; i < n; i++) printf "priority=10,udp,tp_dst=%d,nw_dst=198.18.%d.%d,actions=drop\n", i % 65536, int(i / 256) % 256, i % 256 }' >"$W"/flows
	ip netns exec $NS ovs-ofctl -O OpenFlow13 add-flows unix:"$W"/br0.mgmt "$W"/flows || exit 1
	sleep 3 # the saver snapshots after a second without changes
	TAG="$TAG flows=$FLOWS"
fi
per() { # NAME CMD...: run CMD M times (with $i set), print µs per run
	local name=$1 t0 t1
	shift
	t0=$(date +%s%N)
	for i in $(seq "$M"); do eval "$@" >/dev/null || echo "$name failed"; done
	t1=$(date +%s%N)
	printf '%s %s: %d us\n' "$TAG" "$name" $(((t1 - t0) / M / 1000))
}
per list-br 'ip netns exec $NS "$BIN"/vsctl list-br'
per version 'ip netns exec $NS "$BIN"/vsctl version'
per set 'ip netns exec $NS "$BIN"/vsctl set Open_vSwitch . other_config:tx-flush-interval=$((i % 40))'
per add-port 'ip netns exec $NS "$BIN"/vsctl add-port br0 vcci$i -- type=internal'
if command -v ovs-vsctl >/dev/null && [ -S "$W"/db.sock ]; then
	per ovs-vsctl-set 'ip netns exec $NS ovs-vsctl --db=unix:$W/db.sock set Open_vSwitch . other_config:tx-flush-interval=$((40 + i % 40))'
fi

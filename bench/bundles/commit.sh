#!/usr/bin/env bash
# Bundle commit cost, this switch beside Debian's ovs-vswitchd (userspace,
# datapath_type=netdev) in the same run, driven by the same ovs-ofctl
# --bundle commands over each bridge's br0.mgmt: a 10,000-flow table in
# one bundle (and without one), then one-flow bundles on that table, the
# commit size ovn-controller's incremental updates have. Times include
# ovs-ofctl's own start (~20 ms); medians of 3 and 9 runs. Printed, never
# asserted. Needs root, ovs-vswitchd, ovsdb-server, ovs-ofctl.
#   usage: bench/bundles/commit.sh [BIN]   (BIN: where vswitchd is; default bin)
set -euo pipefail
BIN=${1:-bin}
W=$(mktemp -d /tmp/bundle-bench.XXXXXX)
NS=bb$$
cleanup() {
	[ -f "$W/ovs/vs.pid" ] && kill "$(cat "$W/ovs/vs.pid")" 2>/dev/null || true
	[ -f "$W/ovs/db.pid" ] && kill "$(cat "$W/ovs/db.pid")" 2>/dev/null || true
	[ -n "${OURS:-}" ] && kill "$OURS" 2>/dev/null || true
	ip netns del "$NS" 2>/dev/null || true
	sleep 0.5; rm -rf "$W"
}
trap cleanup EXIT

# Open vSwitch in a namespace of its own with private run/db/log dirs.
mkdir -p "$W/ovs" "$W/ours"
ip netns add "$NS"
ovsdb-tool create "$W/ovs/conf.db" /usr/share/openvswitch/vswitch.ovsschema
ip netns exec "$NS" ovsdb-server --remote="punix:$W/ovs/db.sock" --pidfile="$W/ovs/db.pid" \
	--unixctl="$W/ovs/db.ctl" --log-file="$W/ovs/db.log" --detach "$W/ovs/conf.db"
ovs-vsctl --db="unix:$W/ovs/db.sock" --no-wait init
OVS_RUNDIR="$W/ovs" OVS_DBDIR="$W/ovs" OVS_LOGDIR="$W/ovs" ip netns exec "$NS" ovs-vswitchd \
	"unix:$W/ovs/db.sock" --pidfile="$W/ovs/vs.pid" --unixctl="$W/ovs/vs.ctl" --log-file="$W/ovs/vs.log" --detach
ovs-vsctl --db="unix:$W/ovs/db.sock" add-br br0 -- set bridge br0 datapath_type=netdev

# This switch on its embedded default.
OVS_RUNDIR="$W/ours" "$BIN/vswitchd" --state-dir "$W/ours" --metrics-addr 127.0.0.1:0 >"$W/ours.log" 2>&1 &
OURS=$!
for _ in $(seq 100); do [ -S "$W/ours/br0.mgmt" ] && break; sleep 0.1; done

python3 -c "
for i in range(10000):
    print('priority=10,udp,nw_src=10.%d.%d.1,tp_dst=%d,actions=drop' % (i//256, i%256, 1000+i%50))
" >"$W/f10k.txt"

ms() { local t0; t0=$(date +%s%N); "$@" >/dev/null; echo $(( ($(date +%s%N) - t0) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() {
	local S=$1 O="ovs-ofctl -O OpenFlow15"
	local big plain one1 add1 empty
	big=$(for _ in 1 2 3; do $O del-flows "$S"; ms $O --bundle add-flows "$S" "$W/f10k.txt"; done | median)
	plain=$(for _ in 1 2 3; do $O del-flows "$S"; ms $O add-flows "$S" "$W/f10k.txt"; done | median)
	one1=$(for k in $(seq 9); do printf 'priority=20,tcp,tp_dst=%d,actions=drop\n' "$k" >"$W/one.txt"
		ms $O --bundle add-flows "$S" "$W/one.txt"; done | median)
	add1=$(for k in $(seq 9); do ms $O add-flow "$S" "priority=21,tcp,tp_dst=$k,actions=drop"; done | median)
	$O del-flows "$S"
	empty=$(for k in $(seq 9); do printf 'priority=20,tcp,tp_dst=%d,actions=drop\n' "$k" >"$W/one.txt"
		ms $O --bundle add-flows "$S" "$W/one.txt"; done | median)
	printf '%-6s %10s %12s %14s %12s %14s\n' "$2" "$big" "$plain" "$one1" "$add1" "$empty"
}
printf '%-6s %10s %12s %14s %12s %14s\n' "" "10k bundle" "10k no bndl" "1-flow bundle" "1 add-flow" "1-flow bundle"
printf '%-6s %10s %12s %14s %12s %14s\n' "(ms)" "" "" "(10k table)" "(10k table)" "(empty table)"
run "unix:$W/ovs/br0.mgmt" ovs
run "unix:$W/ours/br0.mgmt" ours

#!/usr/bin/env bash
# The daemon's cost of one ovs-vsctl add-port on a large bridge: this
# switch on its embedded database (or, with DB=ovsdb-server, following
# Debian's ovsdb-server), in a namespace of its own pinned to CPU 1, bridge
# br0 holding N (default 900) internal ports added in one transaction;
# then M (default 50) internal ports added one by one with the real
# ovs-vsctl (without --no-wait). Prints the wall time per add and the
# daemon's CPU time (utime + stime from /proc) per add (and ovsdb-server's,
# with DB=ovsdb-server): on a shared,
# noisy machine the CPU time is the steadier of the two. REPS (default 1)
# repeats the whole. SWITCH=ovs runs Debian's ovs-vswitchd (userspace,
# datapath_type=netdev) on Debian's ovsdb-server instead, for comparison.
# Printed, never asserted.
#   usage: bench/ovsdb/addcost.sh [BIN]   (BIN: where vswitchd is, default bin;
#   N, M, REPS, DB, SWITCH from the environment)
# Needs root and Debian's openvswitch-switch (ovs-vsctl; ovsdb-server).
set -u
BIN=$(cd "${1:-${BIN:-bin}}" && pwd) || exit 1
N=${N:-900}
M=${M:-50}
REPS=${REPS:-1}
DB=${DB:-embedded}
SWITCH=${SWITCH:-ours}
[ "$SWITCH" = ovs ] && DB=ovsdb-server
W=$(mktemp -d /tmp/addcost.XXXXXX)
NS=acb$$
cleanup() {
	local p pid
	for p in "$W"/ovs-vswitchd.pid "$W"/ovsdb-server.pid; do
		[ -f "$p" ] || continue
		pid=$(cat "$p" 2>/dev/null) || continue
		kill "$pid" 2>/dev/null
		for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$pid" 2>/dev/null
	done
	ip netns del $NS 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cpu() { awk '{print $14 + $15}' /proc/"$1"/stat; }
hz=$(getconf CLK_TCK)

for rep in $(seq "$REPS"); do
	cleanup
	mkdir -p "$W"
	ip netns add $NS
	if [ "$DB" = ovsdb-server ]; then
		ovsdb-tool create $W/conf.db /usr/share/openvswitch/vswitch.ovsschema
		ovsdb-server $W/conf.db --remote=punix:$W/db.sock --pidfile=$W/ovsdb-server.pid \
			--unixctl=$W/db.ctl --log-file=$W/db.log --detach --no-chdir >/dev/null 2>&1 || exit 1
		VS="ovs-vsctl --db=unix:$W/db.sock --timeout=120"
		$VS --no-wait init
		dbarg=(--db unix:$W/db.sock)
	else
		VS="ovs-vsctl --db=unix:$W/state/db.sock --timeout=120"
		dbarg=()
	fi
	if [ "$SWITCH" = ovs ]; then
		OVS_RUNDIR=$W OVS_DBDIR=$W OVS_LOGDIR=$W ip netns exec $NS taskset -c 1 ovs-vswitchd unix:$W/db.sock \
			--pidfile=$W/ovs-vswitchd.pid --log-file=$W/vswitchd.log --detach --no-chdir >/dev/null 2>&1 || exit 1
	else
		OVS_RUNDIR=$W ip netns exec $NS taskset -c 1 "$BIN/vswitchd" "${dbarg[@]}" --state-dir $W/state \
			--metrics-addr "" --default-bridge "" --pidfile=$W/ovs-vswitchd.pid --log-file=$W/vswitchd.log --detach || exit 1
	fi
	pid=$(cat $W/ovs-vswitchd.pid)
	$VS add-br br0 -- set Bridge br0 datapath_type=netdev || exit 1
	args=()
	for i in $(seq "$N"); do args+=(-- add-port br0 ip$i -- set Interface ip$i type=internal); done
	$VS "${args[@]}" || exit 1
	sleep 1
	dbpid=$(cat $W/ovsdb-server.pid 2>/dev/null || echo "")
	c0=$(cpu $pid)
	[ -n "$dbpid" ] && d0=$(cpu $dbpid)
	t0=$(date +%s%N)
	for i in $(seq "$M"); do
		$VS add-port br0 x$i -- set Interface x$i type=internal || echo "add-port x$i failed"
	done
	t1=$(date +%s%N)
	c1=$(cpu $pid)
	extra=""
	[ -n "$dbpid" ] && extra=", ovsdb-server CPU $(( ($(cpu $dbpid) - d0) * 1000 / hz / M )) ms per add"
	echo "switch=$SWITCH db=$DB ports=$N adds=$M: $(( (t1 - t0) / 1000000 / M )) ms per add, daemon CPU $(( (c1 - c0) * 1000 / hz / M )) ms per add$extra"
done

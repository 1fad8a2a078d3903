#!/usr/bin/env bash
# Adding ports through OVSDB, side by side: this switch (vswitchd --db,
# following Debian's ovsdb-server: "ours"; vswitchd serving its embedded
# database: "embedded") and Debian's ovs-vswitchd (userspace,
# datapath_type=netdev), one after the other, each switch in a namespace of
# its own with a private ovsdb-server, pinned to CPU 1, bridge br0. The real
# ovs-vsctl, without --no-wait, returns once the switch has written
# Open_vSwitch.cur_cfg = next_cfg. Per switch it prints:
#  - one veth port (the second of two hosts' veths, each switch's default
#    port type): the ms from the start of `ovs-vsctl add-port` to ovs-vsctl
#    returning and to the first ping h1 -> h2 answered (static neighbours,
#    so no ARP; one ping process sending every 10 ms until a reply, up to
#    20 s); the median of REPS (default 5) del-port/add-port rounds;
#  - PORTS (default 1000) internal ports added in ONE ovs-vsctl
#    transaction: the seconds to ovs-vsctl returning and to every one of
#    them having an ofport > 0; the switch's RSS (VmRSS) before and with
#    them (1 s after, and again after the idle window: rssI); its CPU
#    (user + system, ms per second) idle with them over IDLE (default
#    10) s, from 5 s after (the switch's process: with ovsdb-server, that
#    server's is not counted); the seconds to ovs-vsctl returning from
#    deleting them all in one transaction;
#  - ONEBYONE (default PORTS) internal ports added by as many ovs-vsctl
#    add-port commands, one after the other: how many and the seconds they
#    took, stopping early once OBMAX (default 600) seconds have passed;
#    the seconds to delete them in one transaction, and the switch's to
#    stop after SIGTERM; the warnings and errors of its log.
# Printed, never asserted; a step that fails says so and the run goes on.
# Needs root and the Debian packages openvswitch-switch, iputils-ping.
#   usage: bench/ovsdb/addport.sh [BIN] [PORTS] [SUTS]   (BIN: where
#   vswitchd is, default bin; PORTS default 1000; SUTS default "ours
#   embedded ovs";
#   also from the environment: BIN, PORTS, SUTS, ONEBYONE, OBMAX, REPS, IDLE;
#   KEEP=1 keeps the work directory with the logs)
set -u
BIN=$(cd "${1:-${BIN:-bin}}" && pwd) || exit 1
PORTS=${2:-${PORTS:-1000}}
SUTS=${3:-${SUTS:-ours embedded ovs}}
ONEBYONE=${ONEBYONE:-$PORTS}
OBMAX=${OBMAX:-600}
REPS=${REPS:-5}
IDLE=${IDLE:-10}
W=$(mktemp -d /tmp/addport-bench.XXXXXX)
NS=apb$$
cleanup() {
	local p
	for p in "$W"/*/ovs-vswitchd.pid "$W"/*/ovsdb-server.pid; do
		[ -f "$p" ] || continue
		local pid; pid=$(cat "$p" 2>/dev/null) && [ -n "$pid" ] || continue
		kill "$pid" 2>/dev/null
		for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$pid" 2>/dev/null && { echo "$p: still running 120 s after SIGTERM, killed"; kill -9 "$pid"; }
		rm -f "$p"
	done
	for n in sw h1 h2; do ip netns del $NS$n 2>/dev/null; done
}
trap 'cleanup; [ -n "${KEEP:-}" ] && echo "logs kept in $W" || rm -rf "$W"' EXIT
trap 'exit 130' INT TERM

now() { date +%s.%N; }
ms() { echo "($2 - $1) * 1000 / 1" | bc; }
secs() { printf '%.2f' "$(echo "$2 - $1" | bc)"; }
median() { sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR + 1) / 2)] : "-"}'; }
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' /proc/"$1"/status 2>/dev/null || echo -; }
# CPU ms (user + system) process $1 has used
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' /proc/"$1"/stat; }
# ports named PREFIX<n> whose ofport is > 0, and those whose ofport is -1
ofports() {
	$VS --no-wait --format=csv --no-headings --columns=name,ofport find Interface type=internal |
		awk -F, -v p="^\"?$1[0-9]+\"?$" '$1 ~ p {if ($2 > 0) ok++; else if ($2 == -1) bad++}
			END {print ok + 0, bad + 0}'
}
say() { echo "$sut: $*"; }

run() {
	sut=$1
	local d=$W/$sut r0=- tv=- tp=- t1x=- tof=- rssN=- rssI=- idle=- tdel=- obn=0 obt=- pid
	cleanup; mkdir -p "$d"
	for n in sw h1 h2; do ip netns add $NS$n; ip -n $NS$n link set lo up; done
	for i in 1 2; do
		ip link add ${NS}p$i netns ${NS}sw type veth peer name eth0 netns ${NS}h$i
		ip -n ${NS}h$i link set eth0 address 02:00:c6:12:00:0$i
		ip -n ${NS}h$i addr add 198.18.0.$i/24 dev eth0
		ip -n ${NS}h$i link set eth0 up
		ip -n ${NS}sw link set ${NS}p$i up
	done
	ip -n ${NS}h1 neigh replace 198.18.0.2 lladdr 02:00:c6:12:00:02 dev eth0 nud permanent
	ip -n ${NS}h2 neigh replace 198.18.0.1 lladdr 02:00:c6:12:00:01 dev eth0 nud permanent
	if [ "$sut" = embedded ]; then
		# No ovsdb-server: the daemon serves the database itself.
		VS="ovs-vsctl --db=unix:$d/state/db.sock"
		OVS_RUNDIR=$d ip netns exec ${NS}sw taskset -c 1 "$BIN/vswitchd" \
			--state-dir $d/state --metrics-addr "" --default-bridge "" --pidfile \
			--log-file=$d/vswitchd.log --detach 2>>$d/start.err || { cat $d/start.err; say "vswitchd did not start"; return; }
	else
		ovsdb-tool create $d/conf.db /usr/share/openvswitch/vswitch.ovsschema
		ovsdb-server $d/conf.db --remote=punix:$d/db.sock --pidfile=$d/ovsdb-server.pid \
			--unixctl=$d/db.ctl --log-file=$d/db.log --detach --no-chdir 2>>$d/start.err || { say "ovsdb-server failed"; return; }
		VS="ovs-vsctl --db=unix:$d/db.sock"
		$VS --no-wait init
	fi
	if [ "$sut" = embedded ]; then
		:
	elif [ "$sut" = ours ]; then
		OVS_RUNDIR=$d ip netns exec ${NS}sw taskset -c 1 "$BIN/vswitchd" --db unix:$d/db.sock \
			--state-dir $d/state --metrics-addr "" --default-bridge "" --pidfile \
			--log-file=$d/vswitchd.log --detach 2>>$d/start.err || { cat $d/start.err; say "vswitchd did not start"; return; }
	else
		$VS --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2
		OVS_RUNDIR=$d OVS_DBDIR=$d OVS_LOGDIR=$d ip netns exec ${NS}sw taskset -c 1 ovs-vswitchd \
			unix:$d/db.sock --pidfile --log-file --detach --no-chdir 2>>$d/start.err || { cat $d/start.err; say "ovs-vswitchd did not start"; return; }
	fi
	pid=$(cat $d/ovs-vswitchd.pid)
	$VS --timeout=60 add-br br0 -- set Bridge br0 datapath_type=netdev || say "add-br br0 failed"
	$VS --timeout=60 add-port br0 ${NS}p1 || say "add-port ${NS}p1 failed"

	# 1. One veth port: add-port to ovs-vsctl returning, to the first ping.
	local vl=() pl=()
	for rep in $(seq "$REPS"); do
		rm -f $d/t1
		local t0=$(now)
		( $VS --timeout=60 add-port br0 ${NS}p2 && now >$d/t1 ) &
		ip netns exec ${NS}h1 ping -q -n -c 1 -w 20 -i 0.01 198.18.0.2 >/dev/null 2>&1
		local rc=$? t2=$(now)
		wait $!
		if [ -s $d/t1 ]; then vl+=("$(ms $t0 "$(cat $d/t1)")"); else say "add-port ${NS}p2 (round $rep) failed"; fi
		if [ $rc = 0 ]; then pl+=("$(ms $t0 $t2)"); else say "no ping answered within 20 s (round $rep)"; fi
		$VS --timeout=60 del-port br0 ${NS}p2 || say "del-port ${NS}p2 (round $rep) failed"
		sleep 0.5
	done
	tv=$(printf '%s\n' "${vl[@]}" | grep . | median)
	tp=$(printf '%s\n' "${pl[@]}" | grep . | median)
	say "single port, ms to ovs-vsctl returning: ${vl[*]:-none}; to first ping: ${pl[*]:-none}"

	# 2. PORTS internal ports in one transaction.
	r0=$(rss $pid)
	local args=()
	for i in $(seq 0 $((PORTS - 1))); do args+=(-- add-port br0 pi$i -- set Interface pi$i type=internal); done
	local t0=$(now) ok bad
	if $VS --timeout=900 "${args[@]:1}"; then
		t1x=$(secs $t0 "$(now)")
		for _ in $(seq 6000); do
			read -r ok bad < <(ofports pi)
			[ $((ok + bad)) -ge "$PORTS" ] && break
			sleep 0.05
		done
		local t2=$(now)
		if [ "$ok" -ge "$PORTS" ]; then tof=$(secs $t0 $t2); else
			say "$ok of $PORTS ports with an ofport > 0, $bad with -1, after $(secs $t0 $t2) s"
			$VS --no-wait --columns=name,error find Interface 'error!=[]' | grep -m 4 . | sed "s/^/$sut:   /"
		fi
		sleep 1
		rssN=$(rss $pid)
		# Idle with them: the switch's CPU over IDLE s (user + system),
		# from 5 s after the add (the kernel's and the switch's own
		# aftermath of 1,000 new interfaces settled).
		local c0 c1
		sleep 5
		c0=$(cpu_ms $pid); sleep "$IDLE"; c1=$(cpu_ms $pid)
		rssI=$(rss $pid)
		idle=$(((c1 - c0) / IDLE))
		say "idle with $PORTS internal ports: $idle ms of CPU per second (over $IDLE s)"
		args=()
		for i in $(seq 0 $((PORTS - 1))); do args+=(-- del-port br0 pi$i); done
		t0=$(now)
		if $VS --timeout=900 "${args[@]:1}"; then tdel=$(secs $t0 "$(now)"); else say "deleting $PORTS ports failed"; fi
		for _ in $(seq 300); do ip -n ${NS}sw -o link show | grep -q ' pi[0-9]' || break; sleep 0.1; done
		n=$(ip -n ${NS}sw -o link show | grep -c ' pi[0-9]')
		[ "$n" = 0 ] || say "$n pi* devices still in the namespace 30 s after the delete"
	else
		say "adding $PORTS ports in one transaction failed after $(secs $t0 "$(now)") s"
		$VS --no-wait --columns=name,error find Interface 'error!=[]' | grep -m 4 . | sed "s/^/$sut:   /"
	fi

	# 3. ONEBYONE internal ports, one ovs-vsctl add-port each.
	local fails=0 tenth=$((ONEBYONE / 10)) ta=- tb=-
	t0=$(now)
	for i in $(seq 0 $((ONEBYONE - 1))); do
		[ $i = $tenth ] && ta=$(secs $t0 "$(now)")
		[ $i = $((ONEBYONE - tenth)) ] && tb=$(now)
		$VS --timeout=60 add-port br0 pj$i -- set Interface pj$i type=internal 2>>$d/onebyone.err ||
			fails=$((fails + 1))
		obn=$((obn + 1))
		[ "$(echo "$(now) - $t0 > $OBMAX" | bc)" = 1 ] && { say "one by one: stopped after $obn ports ($OBMAX s)"; break; }
	done
	obt=$(secs $t0 "$(now)")
	read -r ok bad < <(ofports pj)
	[ "$tb" != - ] && [ $obn = $ONEBYONE ] && tb=$(secs $tb "$(now)") || tb=-
	local split=""; [ $tenth -gt 0 ] && split=" (first $tenth: $ta s, last $tenth: $tb s)"
	say "one by one: $obn add-ports in $obt s$split, $fails failed; $ok with an ofport > 0, $bad with -1"
	[ $fails = 0 ] || sed -n '1,3s/^/  /p' $d/onebyone.err

	# Deleted before the stop: ovs-vswitchd leaves its (persistent) taps
	# behind, for the kernel to remove with the namespace, after this run.
	if [ "$obn" -gt 0 ]; then
		args=()
		for i in $(seq 0 $((obn - 1))); do args+=(-- --if-exists del-port br0 pj$i); done
		t0=$(now)
		$VS --timeout=900 "${args[@]:1}" && say "the $obn deleted in one transaction in $(secs $t0 "$(now)") s" ||
			say "deleting the $obn one-by-one ports failed"
	fi
	kill -0 "$pid" 2>/dev/null || say "the switch (pid $pid) is no longer running"
	local log=$d/ovs-vswitchd.log; [ "$sut" != ovs ] && log=$d/vswitchd.log
	local pat='level=(WARN|ERROR)|\|(WARN|ERR|EMER)\|'
	say "log: $(grep -Ec "$pat" $log) warning/error lines"
	grep -E "$pat" $log | sed -E 's/^time=[^ ]+ //; s/^[^|]*\|[0-9]+\|//; s/[0-9]+/N/g' | sort | uniq -c | sort -rn | head -5 |
		cut -c1-220 | sed 's/^/    /'
	# Stopped before the next switch starts.
	t0=$(now); kill "$pid" 2>/dev/null
	for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	say "the switch stopped $(secs $t0 "$(now)") s after SIGTERM"
	printf '%-8s %8s %8s %6s %8s %8s %8s %8s %8s %8s %6s %6s %8s\n' "$sut" "$tv" "$tp" "$PORTS" "$t1x" "$tof" "$r0" "$rssN" \
		"$rssI" "$idle" "$tdel" "$obn" "$obt" >>$W/table
	cleanup
}

for s in $SUTS; do run "$s"; done
echo
echo "sut:  single port ms (vsctl return, first ping); N ports in one transaction s (vsctl return, all ofport>0);"
echo "      RSS MiB before and with N ports (1 s after the last ofport, and again after the idle window);"
echo "      idle CPU ms/s with them; delete all s; one by one: count, s"
printf '%-8s %8s %8s %6s %8s %8s %8s %8s %8s %8s %6s %6s %8s\n' sut vsctl-ms ping-ms N 1txn-s ofport-s rss0-MiB rssN-MiB rssI-MiB idle-ms/s del-s \
	1by1-n 1by1-s
cat $W/table

#!/usr/bin/env bash
# tunnel.sh — a VXLAN overlay between two hosts, three ways side by side:
# this switch, Open vSwitch 3.1's userspace datapath, and the Linux kernel
# (vxlan device + Linux bridge). Figures are printed, never asserted.
#
#   sudo bench/tunnel/tunnel.sh            # all three
#   SUTS="ours kernel" sudo bench/tunnel/tunnel.sh
#
# Topology (every box a network namespace; names end in this shell's pid):
#
#   tw-a (eth0 198.19.60.1/24, MTU 1450)        tw-b (eth0 198.19.60.2/24)
#        | veth                                        | veth
#   tp-a                                          tp-b
#   [ host A: switch, VXLAN VNI 100 ]  underlay  [ host B: switch ]
#   ul-a 198.18.60.1/24  <------- veth ------->  ul-b 198.18.60.2/24
#
# Each host runs its own switch (for OVS: its own ovsdb-server and
# ovs-vswitchd with private run/db/log dirs, since every userspace OVS makes
# a tap named ovs-netdev in its namespace). The switches learn MACs
# (ours: standalone bridge; OVS: NORMAL; kernel: bridge). Workload ports are
# PTYPE (default afxdp) for both userspace switches; the workloads' veths
# have checksum offload, TSO and GSO off, so every SUT sees MTU-size frames
# with complete checksums (a userspace switch reading a veth would forward
# offloaded frames with their checksum unfilled) — the kernel row is
# measured the same way, so it is not the kernel at its best.
#
# OVS userspace native tunnelling needs the underlay address on an OVS
# bridge: ul-X becomes a port of br-phy, its address moves to br-phy, and
# OVS learns the route from the kernel and the neighbour by ARP
# (tnl/route-show, tnl/arp/show print them into the log).
#
# CPU: two busy-polling PMDs, one per host (A on CPU 0, B on CPU 1), never
# more; on a two-core machine the traffic generators share those CPUs, so
# every figure is a whole-machine figure. Nothing else of ours polls.
#
# Tests per SUT:
#   udp64  trafgen in tw-a sends 64-byte UDP frames as fast as it can for
#          DUR s to tw-b's MAC; Mpps is what tw-b's eth0 received per
#          second, loss the share of what tw-a's eth0 sent that never came.
#   tcp    iperf3, one stream, TCP_DUR s, tw-a -> tw-b, receiver Gbit/s.
#   rtt    UDP ping-pong (hb-pingpong from ../shared/bench), one probe in
#          flight every 200 us for RTT_DUR s, p50/p99 in us.
# The table's last rows are ours/OVS and ours/kernel ratios (for RTT the
# ratio is theirs/ours, so > 1 means ours is better in every column).
#
# SUT kernel-tso is the kernel again with the workloads' offloads on, and
# ours-tso ours so (AF_PACKET workload ports, which take super-frames).
#
# SUT ours-xdp is ours with underlay=afxdp on the tunnel ports (ours-xdp-tso
# with ours-tso's workloads, ours-xdp-busy with ours-busy's PMDs).
#
# SUT ours-nooffload is ours with udp_offload=false on the tunnel ports
# (no UDP segmentation on send, no coalescing on receive); ours-busy is ours
# with busy-polling PMDs (pmd-sleep-max=0), as Open vSwitch's PMDs always
# are: our idle PMDs sleep until a packet wakes them, which on a loaded
# machine adds the scheduler's wake-up latency to every RTT.
#
# Environment: SUTS ("ours ours-busy ours-tso ovs kernel kernel-tso"), TESTS ("udp64 tcp
# rtt"; a test left out prints "-"), REPS (1: the SUT list is run that many
# times in turn, one row per run, the first run compared), PTYPE (afxdp|afpacket), DUR (5),
# TCP_DUR (8), RTT_DUR (4), BIN (bin), SHARED (../shared), OURS_CONFIG
# (more Open_vSwitch other_config for ours, e.g. other_config:pmd-sleep-max=0),
# SINK (socket: udp64's frames go to a UDP socket in tw-b that never reads;
# none: to a closed port, the kernel's port-unreachable path, as before
# 2026-12-01), DIAG (1: after the tests, ours rows run bench/latency/pingprobe with
# latency-probe=1 on both switches and print the probe's one-way times and
# each switch's pmd-latency-show and pmd-perf-show, to stderr), RTTSPLIT (1:
# after rtt, every SUT runs bench/latency/pingprobe, which cuts each one-way
# time at the receiving kernel's timestamp into "path" (the switches and the
# kernel between them) and "wake" (socket to process), to stderr), PERF (a
# path prefix: udp64 runs perf record -a -g over both CPUs for DUR-2 s of the
# test into PREFIX.SUT.data; `perf report -i ... --sort comm,dso,sym`).
set -u -o pipefail
here=$(cd "$(dirname "$0")" && pwd); top=$(cd "$here/../.." && pwd)
SUTS=${SUTS:-"ours ours-busy ours-tso ovs kernel kernel-tso"}
TESTS=${TESTS:-"udp64 tcp rtt"}
REPS=${REPS:-1}
PTYPE=${PTYPE:-afxdp}
DUR=${DUR:-5}
OURS_CONFIG=${OURS_CONFIG:-}
SINK=${SINK:-socket}
TCP_DUR=${TCP_DUR:-8}
RTT_DUR=${RTT_DUR:-4}
BIN=${BIN:-$top/bin}
SHARED=${SHARED:-$top/../shared}
PP=/tmp/tunnel-bench-pingpong
tag=$$
HA=tb-ha-$tag HB=tb-hb-$tag WA=tw-a-$tag WB=tw-b-$tag
ULA=ul-a ULB=ul-b TPA=tp-a TPB=tp-b
UA=198.18.60.1 UB=198.18.60.2 IPA=198.19.60.1 IPB=198.19.60.2
MACA=02:00:c6:13:3c:01 MACB=02:00:c6:13:3c:02

die() { echo "tunnel.sh: $*" >&2; exit 1; }
log() { echo "[$(date +%T)] $*" >&2; }
for t in trafgen iperf3 ip ethtool gcc python3 taskset; do
	command -v $t >/dev/null || die "missing $t (apt-get install netsniff-ng iperf3 iproute2 ethtool gcc python3 util-linux)"
done
[ "$(id -u)" = 0 ] || die "needs root"
[ -x "$PP" ] || gcc -O2 -o "$PP" "$SHARED/bench/hb-pingpong.c" || die "cannot build the ping-pong probe from $SHARED/bench/hb-pingpong.c"

work=$(mktemp -d /tmp/tunnel-bench.XXXXXX)
pids=() # everything started in the background, stopped at exit
# stop_bg stops what bg started: SIGTERM, then SIGKILL for what still runs
# after 5 s (an OVS with afxdp ports and a busy PMD was seen ignoring
# SIGTERM, which hung the run in wait).
stop_bg() {
	local p i
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for ((i = 0; i < 50; i++)); do
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && break; p=""; done
		[ -z "${p:-}" ] && break
		sleep 0.1
	done
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
}
cleanup() {
	sut_down 2>/dev/null
	stop_bg
	for n in $WA $WB $HA $HB; do ip netns del "$n" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bg() { "$@" >>"$work/bg.log" 2>&1 </dev/null & pids+=($!); }
wait_for() { # SECONDS CMD...: poll CMD until it succeeds
	local i n=$(($1 * 10)); shift
	for ((i = 0; i < n; i++)); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}

# --- the four namespaces, fresh for every SUT
topo_up() {
	for n in $HA $HB $WA $WB; do ip netns add $n || die "netns $n"; ip -n $n link set lo up; done
	ip link add $ULA netns $HA type veth peer name $ULB netns $HB
	ip -n $HA addr add $UA/24 dev $ULA; ip -n $HB addr add $UB/24 dev $ULB
	ip link add $TPA netns $HA type veth peer name eth0 netns $WA
	ip link add $TPB netns $HB type veth peer name eth0 netns $WB
	for t in "$HA $ULA $WA $TPA $MACA $IPA" "$HB $ULB $WB $TPB $MACB $IPB"; do
		set -- $t
		ip -n $1 link set $2 up; ip -n $1 link set $4 up
		ip netns exec $1 sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		ip netns exec $3 sysctl -qw net.ipv6.conf.all.disable_ipv6=1
		ip -n $3 link set eth0 address $5 mtu 1450
		case $cur in kernel-tso | ours-tso | ours-xdp-tso) ;; *) ip netns exec $3 ethtool -K eth0 tx off tso off gso off >/dev/null 2>&1 ;; esac
		ip -n $3 addr add $6/24 dev eth0
		ip -n $3 link set eth0 up
	done
	cat >"$work/udp64.cfg" <<CFG
{ eth(da=$MACB, sa=$MACA), ipv4(saddr=$IPA, daddr=$IPB, ttl=64), udp(sp=1000, dp=9), fill(0x00, 18) }
CFG
}
topo_down() { for n in $WA $WB $HA $HB; do ip netns del $n 2>/dev/null; done; }

# --- SUT: this switch, one per host, one PMD each
ours_one() { # HOSTNS CPU WLPORT LOCAL REMOTE
	local st=$work/ours-$1-$RANDOM; mkdir -p "$st"
	bg ip netns exec $1 "$BIN/vswitchd" --state-dir "$st" --metrics-addr '' --default-bridge br0 --log-level warn
	echo "${pids[-1]}" >>"$work/ours-pids"
	wait_for 10 test -S "$st/br0.mgmt" || { tail "$work/bg.log"; return 1; }
	local v=("$BIN/vsctl" --state-dir "$st")
	echo "$st" >>"$work/ours-states"
	"${v[@]}" set Open_vSwitch . other_config:n-pmd=1 other_config:pmd-cpu-mask=$(printf '%x' $((1 << $2))) $OURS_CONFIG || return 1
	"${v[@]}" add-port br0 $3 -- type=$PTYPE || return 1
	"${v[@]}" add-port br0 vx0 -- type=vxlan options:remote_ip=$5 options:local_ip=$4 options:key=100 $OURS_OPTS || return 1
}
ours_up() { ours_one $HA 0 $TPA $UA $UB && ours_one $HB 1 $TPB $UB $UA; }
ours_down() { :; } # the processes stop with the rest at the end of the SUT
OURS_OPTS=""
ours-nooffload_up() { OURS_OPTS=options:udp_offload=false; ours_up; local rc=$?; OURS_OPTS=""; return $rc; }
ours-nooffload_down() { :; }
# ours-busy: PMDs that never sleep (pmd-sleep-max=0), as OVS's do.
ours-busy_up() { local c=$OURS_CONFIG; OURS_CONFIG="$c other_config:pmd-sleep-max=0"; ours_up; local rc=$?; OURS_CONFIG=$c; return $rc; }
ours-busy_down() { :; }
# ours-tso: ours with the workloads' offloads on, as kernel-tso, and
# AF_PACKET workload ports, which take their TCP super-frames whole; the
# tunnel ports segment them into UDP_SEGMENT runs.
ours-tso_up() { local p=$PTYPE; PTYPE=afpacket; ours_up; local rc=$?; PTYPE=$p; return $rc; }
ours-tso_down() { :; }
# ours-xdp: ours with underlay=afxdp on both tunnel ports (AF_XDP sockets
# on ul-X behind a program that takes only the tunnel's UDP packets; the
# address stays on ul-X); ours-xdp-tso: the same with ours-tso's workloads.
ours-xdp_up() { OURS_OPTS=options:underlay=afxdp; ours_up; local rc=$?; OURS_OPTS=""; return $rc; }
ours-xdp_down() { :; }
ours-xdp-tso_up() { local p=$PTYPE; PTYPE=afpacket; ours-xdp_up; local rc=$?; PTYPE=$p; return $rc; }
ours-xdp-tso_down() { :; }
ours-xdp-busy_up() { local c=$OURS_CONFIG; OURS_CONFIG="$c other_config:pmd-sleep-max=0"; ours-xdp_up; local rc=$?; OURS_CONFIG=$c; return $rc; }
ours-xdp-busy_down() { :; }

# --- SUT: Open vSwitch userspace, native tunnelling
ovs_one() { # HOSTNS CPU WLPORT UL LOCAL REMOTE
	local d=$work/ovs-$1 ns=$1; rm -rf "$d"; mkdir -p "$d"/{run,db,log,etc} # a fresh database for every run (REPS)
	local env=(env OVS_RUNDIR=$d/run OVS_DBDIR=$d/db OVS_LOGDIR=$d/log OVS_SYSCONFDIR=$d/etc)
	ovsdb-tool create "$d/db/conf.db" /usr/share/openvswitch/vswitch.ovsschema || return 1
	bg ip netns exec $ns "${env[@]}" ovsdb-server "$d/db/conf.db" --remote=punix:"$d/run/db.sock" \
		--unixctl="$d/run/ovsdb-server.ctl" --log-file="$d/log/ovsdb-server.log" --no-chdir
	wait_for 10 test -S "$d/run/db.sock" || return 1
	local vs=(ip netns exec $ns "${env[@]}" ovs-vsctl --timeout=20 --db=unix:$d/run/db.sock)
	"${vs[@]}" --no-wait init
	"${vs[@]}" --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=$(printf '%x' $((1 << $2))) other_config:tx-flush-interval=0
	bg ip netns exec $ns "${env[@]}" ovs-vswitchd unix:"$d/run/db.sock" --unixctl="$d/run/ovs-vswitchd.ctl" \
		--log-file="$d/log/ovs-vswitchd.log" --no-chdir -vconsole:off
	wait_for 10 test -S "$d/run/ovs-vswitchd.ctl" || return 1
	echo "$d/run/ovs-vswitchd.ctl" >>"$work/ovs-ctls"
	local opt=()
	[ "$PTYPE" = afxdp ] && opt=(type=afxdp options:xdp-mode=best-effort)
	"${vs[@]}" add-br br-phy -- set bridge br-phy datapath_type=netdev fail-mode=standalone || return 1
	"${vs[@]}" add-port br-phy $4 -- set Interface $4 "${opt[@]}" || return 1
	ip -n $ns addr flush dev $4
	ip -n $ns addr add $5/24 dev br-phy; ip -n $ns link set br-phy up
	"${vs[@]}" add-br br-int -- set bridge br-int datapath_type=netdev fail-mode=standalone || return 1
	"${vs[@]}" add-port br-int vx0 -- set Interface vx0 type=vxlan options:remote_ip=$6 options:local_ip=$5 options:key=100 || return 1
	"${vs[@]}" add-port br-int $3 -- set Interface $3 "${opt[@]}" || return 1
	local e; e=$("${vs[@]}" get Interface $3 error 2>/dev/null)
	[ -n "$e" ] && [ "$e" != "[]" ] && { log "OVS interface $3: $e"; return 1; }
	return 0
}
ovs_up() {
	command -v ovs-vswitchd >/dev/null || die "missing ovs-vswitchd (apt-get install openvswitch-switch)"
	ovs_one $HA 0 $TPA $ULA $UA $UB && ovs_one $HB 1 $TPB $ULB $UB $UA
}
ovs_down() {
	local c
	for c in $(cat "$work/ovs-ctls" 2>/dev/null); do
		{ ovs-appctl -t "$c" tnl/route-show; ovs-appctl -t "$c" tnl/arp/show; } >>"$work/ovs-tnl.log" 2>&1
		ovs-appctl -t "$c" --timeout=10 exit --cleanup >/dev/null 2>&1
	done
	rm -f "$work/ovs-ctls"
}

# --- SUT: the kernel, vxlan device in a Linux bridge
kernel_one() { # HOSTNS WLPORT UL LOCAL REMOTE
	ip -n $1 link add vx0 type vxlan id 100 remote $5 local $4 dstport 4789 dev $3 || return 1
	ip -n $1 link add br0 type bridge || return 1
	ip -n $1 link set vx0 master br0; ip -n $1 link set $2 master br0
	ip -n $1 link set vx0 up; ip -n $1 link set br0 up
}
kernel_up() { kernel_one $HA $TPA $ULA $UA $UB && kernel_one $HB $TPB $ULB $UB $UA; }
kernel_down() { :; }
# kernel-tso: the same, with the workloads' offloads left on (TSO/GSO: the
# kernel at its best, for reference; userspace ports cannot take that).
kernel-tso_up() { kernel_up; }
kernel-tso_down() { :; }

sut_down() { [ -n "${cur:-}" ] && ${cur}_down; cur=""; rm -f "$work/ours-states" "$work/ours-pids"; }

# cpustat prints the time, the CPU time so far of each of our switches (all
# threads, and the busiest thread: the PMD), of trafgen (whole seconds:
# not printed) and of both CPUs (busy: all but idle and iowait), in ns, on
# one line.
cpustat() {
	local p
	date +%s%N | tr '\n' ' '
	for p in $(cat "$work/ours-pids" 2>/dev/null); do
		cat /proc/$p/task/*/schedstat 2>/dev/null | awk '{s += $1; if ($1 > m) m = $1} END {printf "%.0f %.0f ", s, m}'
	done
	ps -C trafgen -o times= | awk '{s += $1} END {printf "%.0f ", s * 1e9}'
	awk -v hz="$(getconf CLK_TCK)" '/^cpu[0-9]/ {printf "%.0f ", ($2+$3+$4+$7+$8+$9) * 1e9 / hz}' /proc/stat
	echo
}

diag() { # ours only: where the round trip's microseconds go, per PMD stage
	[ -f "$work/ours-states" ] || return 0
	[ -x "$work/pingprobe" ] || (cd "$top" && go build -o "$work/pingprobe" ./bench/latency/pingprobe) || return 0
	local st
	for st in $(cat "$work/ours-states"); do
		"$BIN/vsctl" --state-dir "$st" set Open_vSwitch . other_config:latency-probe=1
		"$BIN/vsctl" --state-dir "$st" pmd-latency-clear
	done
	bg ip netns exec $WB "$work/pingprobe" server $IPB:7001
	sleep 0.3
	echo "== $cur pingprobe: $(timeout 30 ip netns exec $WA "$work/pingprobe" client -n 10000 -i 200 $IPB:7001)" >&2
	for st in $(cat "$work/ours-states"); do
		echo "== $cur switch $st" >&2
		"$BIN/vsctl" --state-dir "$st" pmd-latency-show >&2
		"$BIN/vsctl" --state-dir "$st" pmd-perf-show >&2
		"$BIN/vsctl" --state-dir "$st" pmd-stats-show >&2
		"$BIN/vsctl" --state-dir "$st" drop-stats >&2
	done
}

rx() { ip netns exec $1 cat /sys/class/net/eth0/statistics/$2; }

udp64() { # prints: Mpps loss%
	local tx0 rx0 tx1 rx1 sink=""
	if [ "$SINK" = socket ]; then
		# A receiver on port 9 that never reads: its full queue drops the
		# frames. Without one, tw-b's kernel answers every frame with a
		# port-unreachable attempt (a route lookup each, rate limiting
		# after it), and that runs in the context of the switch that
		# delivers to tw-b's veth (an AF_XDP generic transmit delivers
		# in the sender's softirq): a third of host B's PMD went there.
		# Started and stopped here: udp64 runs in a command
		# substitution, so bg's pid list would not see it.
		ip netns exec $WB python3 -c 'import socket, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.bind(("'$IPB'", 9))
time.sleep(3600)' >>"$work/bg.log" 2>&1 </dev/null &
		sink=$!
		wait_for 5 ip netns exec $WB sh -c "ss -lun | grep -q ':9 '"
	fi
	tx0=$(rx $WA tx_packets); rx0=$(rx $WB rx_packets)
	local c0; c0=$(cpustat)
	local perf=""
	if [ -n "${PERF:-}" ]; then
		# The middle of the run, both CPUs, kernel and user stacks.
		perf record -q -a -g -F 1999 -o "$PERF.$cur.data" -- sleep $((DUR > 2 ? DUR - 2 : 1)) >/dev/null 2>&1 &
		perf=$!
	fi
	ip netns exec $WA timeout $DUR trafgen --dev eth0 --conf "$work/udp64.cfg" --cpus 1 \
		--no-sock-mem --notouch-irq -q >/dev/null 2>&1
	[ -n "$perf" ] && wait $perf
	sleep 0.5 # what is still in flight arrives
	tx1=$(rx $WA tx_packets); rx1=$(rx $WB rx_packets)
	# Our switches' CPU per packet received (host A, host B) and each
	# CPU's busy share: the cost that the noisy machine's rates hide.
	python3 -c "
a=[int(x) for x in '$c0'.split()]; b=[int(x) for x in '$(cpustat)'.split()]
d=[y-x for x, y in zip(a, b)]; r=max($rx1-$rx0, 1); n=(len(d)-4)//2
print('$cur: udp64 cpu ns/pkt' + ''.join(' switch%d %.0f (pmd %.0f)' % (i, d[1+2*i]/r, d[2+2*i]/r) for i in range(n)) +
      ' cpu%% of %.1f s:' % (d[0]/1e9) + ''.join(' switch%d %.0f' % (i, 100.0*d[1+2*i]/d[0]) for i in range(n)) +
      ''.join(' cpu%d busy %.0f' % (i, 100.0*d[2+2*n+i]/d[0]) for i in range(2)))" >&2
	[ -n "$sink" ] && { kill $sink; wait $sink; } 2>/dev/null
	python3 -c "t=$tx1-$tx0; r=$rx1-$rx0; print('%.3f %.1f' % (r/$DUR/1e6, 100.0*(t-r)/t if t else 100))"
}
tcp() { # prints: Gbit/s
	local p0 b0
	p0=$(rx $WB rx_packets); b0=$(rx $WB rx_bytes)
	bg ip netns exec $WB iperf3 -s -1 -B $IPB
	wait_for 5 ip netns exec $WB sh -c "ss -ltn | grep -q ':5201'" || { echo 0; return; }
	ip netns exec $WA iperf3 -c $IPB -t $TCP_DUR -J 2>/dev/null | python3 -c '
import json, sys
try: print("%.2f" % (json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9))
except Exception: print("0")'
	# Frames the receiver's eth0 got: ~1,500 bytes on average unless the
	# switch delivers coalesced super-frames.
	log "$cur: tcp receiver's eth0 got $(( $(rx $WB rx_packets) - p0 )) frames, $(( ($(rx $WB rx_bytes) - b0) / ($(rx $WB rx_packets) - p0 + 1) )) bytes on average"
}
rtt() { # prints: p50 p99 (us)
	local out
	# Bounded: a probe client that hangs (seen once with the OVS row)
	# must cost this row its RTT, not the whole run.
	out=$(timeout $((RTT_DUR + 10)) ip netns exec $WA "$PP" client $IPB 7 -n 1000000 -i 200 -t 100 -d $RTT_DUR)
	echo "$(sed -n 's/.*p50=\([0-9.NA]*\).*/\1/p' <<<"$out") $(sed -n 's/.*p99=\([0-9.NA]*\).*/\1/p' <<<"$out")"
}

rttsplit() { # any SUT: each one-way time cut at the receiving kernel's timestamp
	[ -x "$work/pingprobe" ] || (cd "$top" && go build -o "$work/pingprobe" ./bench/latency/pingprobe) || return 0
	bg ip netns exec $WB "$work/pingprobe" server $IPB:7001
	sleep 0.3
	log "$cur pingprobe: $(timeout $((RTT_DUR + 10)) ip netns exec $WA "$work/pingprobe" client -n $((RTT_DUR * 4000)) -i 200 $IPB:7001 | tr '\n' ' ')"
}

declare -A R
ROWS=()
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs, uptime:$(uptime | sed 's/.*up[^,]*,//'), ports $PTYPE"
has() { [[ " $TESTS " == *" $1 "* ]]; }
for s in $(for ((r = 0; r < REPS; r++)); do echo $SUTS; done); do
	case $s in ours | ours-nooffload | ours-busy | ours-tso | ours-xdp | ours-xdp-tso | ours-xdp-busy | ovs | kernel | kernel-tso) ;; *) die "unknown SUT $s" ;; esac
	log "$s: setting up"
	cur=$s
	topo_up
	if ! ${s}_up; then
		log "$s did not start; its logs:"; tail -20 "$work/bg.log" >&2
		R[$s]=${R[$s]:-"- - - - -"}; ROWS+=("$s - - - - -"); sut_down; topo_down; continue
	fi
	bg ip netns exec $WB "$PP" server $IPB 7
	# the overlay works and both sides know each other's MAC (for OVS also
	# the underlay neighbour) before anything is measured
	if ! wait_for 30 ip netns exec $WA ping -c1 -W1 $IPB; then
		log "$s: no connectivity through the tunnel"; R[$s]=${R[$s]:-"- - - - -"}; ROWS+=("$s - - - - -")
	else
		ip netns exec $WB ping -c3 -i0.2 -q $IPA >/dev/null
		u="- -" c=- l="- -"
		has udp64 && { log "$s: udp64"; u=$(udp64); }
		has tcp && { log "$s: tcp"; c=$(tcp); }
		has rtt && { log "$s: rtt"; l=$(rtt); }
		[ "${RTTSPLIT:-0}" = 1 ] && rttsplit
		[ "${DIAG:-0}" = 1 ] && diag
		R[$s]=${R[$s]:-"$u $c $l"} # the first run of a SUT is the one compared
		ROWS+=("$s $u $c $l")
	fi
	sut_down
	stop_bg
	pids=()
	topo_down
done

printf "%-20s %10s %8s %10s %10s %10s\n" sut udp64_Mpps loss_% tcp_Gbps rtt_p50_us rtt_p99_us
for row in "${ROWS[@]}"; do
	set -- $row
	printf "%-20s %10s %8s %10s %10s %10s\n" "$1" "$2" "$3" "$4" "$5" "$6"
done
ratio() { python3 -c "
a='$1'.split(); b='$2'.split()
def r(x, y, inv=False):
    try:
        x, y = float(x), float(y)
        return '%.2fx' % ((y / x) if inv else (x / y))
    except Exception: return '-'
print('%-20s %10s %8s %10s %10s %10s' % ('$3', r(a[0], b[0]), '', r(a[2], b[2]), r(a[3], b[3], True), r(a[4], b[4], True)))"; }
for o in ours-nooffload ours-busy ours-xdp ovs kernel kernel-tso; do
	[ -n "${R[ours]:-}" ] && [ -n "${R[$o]:-}" ] && ratio "${R[ours]}" "${R[$o]}" "ours/$o"
done
[ -n "${R[ours-tso]:-}" ] && [ -n "${R[kernel-tso]:-}" ] && ratio "${R[ours-tso]}" "${R[kernel-tso]}" "ours-tso/kernel-tso"

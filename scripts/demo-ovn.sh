#!/bin/bash
# OVN in one machine (make demo-ovn): Debian's OVN central (northbound and
# southbound ovsdb-servers, ovn-northd) and three chassis, each a network
# namespace with its own Open_vSwitch ovsdb-server, this switch as its
# ovs-vswitchd (started as ovs-vswitchd is, on the database) and Debian's
# ovn-controller, joined by an underlay (a Linux bridge in a namespace of
# its own) over which OVN tunnels with Geneve, OVN's default (ENCAP=vxlan
# for VXLAN): the switch maps OVN's Geneve option to tun_metadata0 at
# ovn-controller's request (NXT_TLV_TABLE_MOD). Workloads are namespaces
# behind veth ports bound to logical switch ports (external_ids:iface-id).
#
# The logical network, built with ovn-nbctl as an OVN user builds it: a
# logical switch ls0 over the three chassis (w1, w2, w3), a second one ls1
# (w4, on chassis 2) behind a logical router lr0 (its ARP responder
# resolves the workloads' gateways, the TTL drops by one); then a
# stateful ACL (allow-related, drop), a reject ACL (TCP answered with a
# reset, UDP and ICMP with an ICMP unreachable, by ovn-controller on the
# destination's chassis), a load balancer with a backend on each chassis,
# DHCP answered by ovn-controller (a paused pipeline, resumed) to busybox
# udhcpc, a kill -9 of one chassis' switch, a provider network (a
# localnet port, which ovn-bridge-mappings joins to a bridge br-ex through
# patch ports) reaching a host outside OVN, and NAT toward it on a
# distributed gateway port (snat for ls0, dnat_and_snat for one
# workload). Every step is checked with traffic across chassis and ends
# with ovn-nbctl --wait=hv sync (bounded: a chassis that never catches up
# fails the demo), and at the end no ovn-controller may have logged an
# OpenFlow error.
#
# Each chassis' Open_vSwitch database is Debian's ovsdb-server; DB=embedded
# has this switch serve it instead (its embedded database, no
# ovsdb-server: ovn-controller and ovs-vsctl talk to the switch's own
# db.sock). SWITCH=ovs runs the same with Debian's ovs-vswitchd (userspace,
# datapath_type=netdev, its tunnels on a br-phy holding the underlay
# address) in place of this switch, for comparison; BENCH=1 adds a
# measurement (step 14): ping round trips and one iperf3 TCP stream
# between workloads on two chassis, across the router, through an ACL
# and a load balancer (bench/ovn/multichassis.sh runs both switches).
#
# Needs root and the packages ovn-central, ovn-host (services not started:
# this script starts its own daemons), busybox and python3. Everything it
# creates is removed at exit, even on failure. Names end in this shell's
# pid; addresses are from 198.18.0.0/15 (reserved for benchmarking).
set -euo pipefail

BIN=${BIN:-bin}
SWITCH=${SWITCH:-ours}
BENCH=${BENCH:-}
SECS=${SECS:-5}
ENCAP=${ENCAP:-geneve}
DB=${DB:-ovsdb-server}
tag=$$

need() {
	local missing=()
	for t in "$@"; do
		command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t%%:*} (Debian/Ubuntu package ${t#*:})")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "make demo-ovn needs: ${missing[*]}" >&2
		echo "install them without starting their services, e.g.:" >&2
		echo "  printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d" >&2
		echo "  apt-get install ovn-central ovn-host busybox python3 iproute2 iputils-ping" >&2
		exit 1
	fi
}
need ip:iproute2 ping:iputils-ping ovsdb-server:openvswitch-switch ovs-vsctl:openvswitch-switch \
	ovn-northd:ovn-central ovn-nbctl:ovn-central ovn-controller:ovn-host busybox:busybox python3:python3
[ -x "$BIN/vswitchd" ] || { echo "no $BIN/vswitchd: run make build first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "make demo-ovn needs root (network namespaces)" >&2; exit 1; }

CHASSIS=(1 2 3)
underlay=ovn-ul-$tag
chns() { echo "ovn-ch$1-$tag"; }  # chassis N's namespace
wlns() { echo "ovn-w$1-$tag"; }   # workload N's namespace
chip() { echo "198.18.60.$1"; }   # chassis N's underlay (tunnel) address
extns=ovn-ext-$tag                # a host on the provider network (step 11)
state=$(mktemp -d /tmp/vswitch-demo-ovn.XXXXXX)
pids=() # every daemon and server this script started

cleanup() {
	local rc=$?
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# Anything else still in a namespace of ours (a client a failed step
	# left behind) goes with it.
	for ns in $(ip netns list | awk -v t="-$tag" '$1 ~ "^ovn-[a-z0-9]+" t "$" { print $1 }'); do
		local pids_in
		pids_in=$(ip netns pids "$ns" 2>/dev/null) || continue
		[ -z "$pids_in" ] || kill -9 $pids_in 2>/dev/null || true
	done
	for w in 1 2 3 4 5 6; do ip netns del "$(wlns "$w")" 2>/dev/null || true; done
	ip netns del "$extns" 2>/dev/null || true
	for c in "${CHASSIS[@]}"; do ip netns del "$(chns "$c")" 2>/dev/null || true; done
	ip netns del "$underlay" 2>/dev/null || true
	if [ $rc -ne 0 ]; then
		echo "demo-ovn FAILED (exit $rc); the end of the logs:" >&2
		for f in "$state"/ch*/vswitchd.log "$state"/ch*/ovn-controller.log "$state"/northd.log; do
			[ -f "$f" ] && { echo "== $f" >&2; tail -n 15 "$f" >&2; }
		done
	fi
	rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
run() { printf '\033[1m$ %s\033[0m\n' "$*"; "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
quiet() { ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; }
# offloads NS: Open vSwitch's userspace datapath passes no TCP frame with
# a partial checksum or segmentation offload from veth (TCP fails, ping
# works): with SWITCH=ovs, transmit offloads off on NS's eth0, and with
# BENCH for both switches alike.
offloads() {
	if [ -n "$BENCH" ] || [ "$SWITCH" = ovs ]; then
		ip netns exec "$1" ethtool -K eth0 tx off >/dev/null 2>&1 || true
	fi
}
nbctl() { ovn-nbctl --db="unix:$state/nb.sock" --timeout=30 "$@"; }
# dbsock N: chassis N's Open_vSwitch database.
dbsock() { if [ "$DB" = embedded ]; then echo "$state/ch$1/state/db.sock"; else echo "$state/ch$1/db.sock"; fi; }
vsctl() { local c=$1; shift; ovs-vsctl --db="unix:$(dbsock "$c")" --timeout=30 "$@"; }
# sync_hv: until every chassis has installed the northbound database's
# current state (ovn-controller reports nb_cfg back), bounded: a chassis
# that never catches up fails the demo instead of hanging it.
sync_hv() {
	local t0
	t0=$(date +%s%N)
	ovn-nbctl --db="unix:$state/nb.sock" --wait=hv --timeout=60 sync ||
		fail "ovn-nbctl --wait=hv sync: not every chassis caught up within 60 s"
	echo "ovn-nbctl --wait=hv sync: $(ms_since "$t0") ms"
}
# wait_for SECONDS WHAT CMD...: until CMD succeeds, or fail once SECONDS
# have passed (CMD's own time counts).
wait_for() {
	local secs=$1 what=$2 end=$((SECONDS + $1))
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || fail "timed out after ${secs}s waiting for $what"
		sleep 0.2
	done
}
in_wl() { local w=$1; shift; ip netns exec "$(wlns "$w")" "$@"; }
# http_get W HOST PORT: workload W fetches /who from HOST:PORT (HTTP/1.0
# over busybox nc) and prints the body's last line.
http_get() { printf 'GET /who HTTP/1.0\r\n\r\n' | in_wl "$1" busybox nc -w 3 "$2" "$3" | tail -n 1 | grep .; }
pingq() { in_wl "$1" ping -c 3 -i 0.2 -W 2 -q "$2" | tail -n 2; }
in_ext() { ip netns exec "$extns" "$@"; }
# spawn NS LOG CMD...: CMD in namespace NS in the background, its output
# in LOG. ip execs CMD, so $! is CMD itself, which cleanup ends (a shell
# function run with & is a subshell: ending it would leave CMD running,
# holding the caller's stdout).
spawn() {
	local ns=$1 log=$2
	shift 2
	ip netns exec "$ns" "$@" >"$log" 2>&1 &
	pids+=($!)
}
# udp_probe W HOST PORT: workload W sends a datagram to HOST:PORT on a
# connected socket and prints what came back: the echo, nothing, or the
# error an ICMP unreachable leaves on the socket.
udp_probe() {
	in_wl "$1" python3 -c '
import errno, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
s.connect((sys.argv[1], int(sys.argv[2])))
s.send(b"probe")
try:
    print("answered: " + s.recv(64).decode())
except socket.timeout:
    print("no answer")
except OSError as e:
    print("ICMP unreachable (" + errno.errorcode[e.errno] + ")")
' "$2" "$3"
}
udp_answered() { [ "$(udp_probe "$@")" = "answered: probe" ]; }
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
# An ovsdb-server (root namespace: it speaks on a unix socket only).
dbserver() {
	local name=$1 schema=$2 dir=$3
	ovsdb-tool create "$dir/$name.db" "$schema"
	ovsdb-server "$dir/$name.db" --remote="punix:$dir/$name.sock" --unixctl="$dir/$name.ctl" \
		--pidfile="$dir/$name.pid" --log-file="$dir/$name-server.log" --no-chdir -vconsole:off &
	pids+=($!)
	wait_for 10 "the $name database" test -S "$dir/$name.sock"
}
# start_switch N: this switch (or, with SWITCH=ovs, Open vSwitch's) as
# chassis N's ovs-vswitchd, in its namespace.
start_switch() {
	local c=$1
	if [ "$SWITCH" = ovs ]; then
		ip netns exec "$(chns "$c")" env OVS_RUNDIR="$state/ch$c/run" OVS_DBDIR="$state/ch$c" OVS_LOGDIR="$state/ch$c" \
			ovs-vswitchd "unix:$state/ch$c/db.sock" --pidfile="$state/ch$c/run/ovs-vswitchd.pid" \
			--unixctl="$state/ch$c/run/ovs-vswitchd.ctl" --log-file="$state/ch$c/vswitchd.log" \
			--no-chdir -vconsole:off &
	elif [ "$DB" = embedded ]; then
		ip netns exec "$(chns "$c")" env OVS_RUNDIR="$state/ch$c/run" OVS_DBDIR="$state/ch$c" \
			"$BIN/vswitchd" --pidfile --state-dir "$state/ch$c/state" --default-bridge "" \
			--metrics-addr "" --log-file="$state/ch$c/vswitchd.log" &
	else
		ip netns exec "$(chns "$c")" env OVS_RUNDIR="$state/ch$c/run" OVS_DBDIR="$state/ch$c" \
			"$BIN/vswitchd" "unix:$state/ch$c/db.sock" --pidfile --state-dir "$state/ch$c/state" \
			--metrics-addr "" --log-file="$state/ch$c/vswitchd.log" &
	fi
	swpid[$c]=$!
	pids+=($!)
	wait_for 20 "chassis $c's switch" test -f "$state/ch$c/run/ovs-vswitchd.pid"
}

say "1. OVN central: northbound and southbound databases, ovn-northd"
dbserver nb /usr/share/ovn/ovn-nb.ovsschema "$state"
dbserver sb /usr/share/ovn/ovn-sb.ovsschema "$state"
OVN_RUNDIR=$state ovn-northd --ovnnb-db="unix:$state/nb.sock" --ovnsb-db="unix:$state/sb.sock" \
	--pidfile="$state/northd.pid" --log-file="$state/northd.log" --no-chdir -vconsole:off &
pids+=($!)

say "2. The underlay: a Linux bridge in $underlay; chassis at $(chip 1), $(chip 2), $(chip 3)"
ip netns add "$underlay"
ip -n "$underlay" link add ulbr type bridge
ip -n "$underlay" link set ulbr up
for c in "${CHASSIS[@]}"; do
	ns=$(chns "$c")
	ip netns add "$ns"
	quiet "$ns"
	ip -n "$ns" link set lo up
	ip link add ul0 netns "$ns" type veth peer name "c$c" netns "$underlay"
	ip -n "$underlay" link set "c$c" master ulbr up
	ip -n "$ns" addr add "$(chip "$c")/24" dev ul0
	ip -n "$ns" link set ul0 up
done

say "3. Each chassis: an Open_vSwitch database, this switch as its ovs-vswitchd, ovn-controller"
declare -A swpid
for c in "${CHASSIS[@]}"; do
	mkdir -p "$state/ch$c/run" "$state/ch$c/state"
	if [ "$DB" = embedded ]; then
		printf '\033[1m$ %s\033[0m\n' "ip netns exec $(chns "$c") env OVS_RUNDIR=... $BIN/vswitchd --state-dir $state/ch$c/state --pidfile ... &   # serves $(dbsock "$c")"
		start_switch "$c"
		wait_for 20 "chassis $c's database" test -S "$(dbsock "$c")"
	else
		dbserver db /usr/share/openvswitch/vswitch.ovsschema "$state/ch$c"
		ovs-vsctl --db="unix:$state/ch$c/db.sock" --no-wait init
		printf '\033[1m$ %s\033[0m\n' "ip netns exec $(chns "$c") env OVS_RUNDIR=... $BIN/vswitchd unix:$state/ch$c/db.sock --pidfile ... &"
		start_switch "$c"
	fi
	run vsctl "$c" set Open_vSwitch . other_config:n-pmd=1 external_ids:system-id="ch$c" \
		external_ids:ovn-remote="unix:$state/sb.sock" external_ids:ovn-encap-type="$ENCAP" \
		external_ids:ovn-encap-ip="$(chip "$c")" external_ids:ovn-bridge-datapath-type=netdev
	if [ "$SWITCH" = ovs ]; then
		# Open vSwitch's userspace tunnels need the underlay address on
		# one of its bridges.
		vsctl "$c" add-br br-phy -- set bridge br-phy datapath_type=netdev fail-mode=standalone -- add-port br-phy ul0
		ip -n "$(chns "$c")" addr flush dev ul0
		ip -n "$(chns "$c")" addr add "$(chip "$c")/24" dev br-phy
		ip -n "$(chns "$c")" link set br-phy up
	fi
	ip netns exec "$(chns "$c")" env OVS_RUNDIR="$state/ch$c/run" OVN_RUNDIR="$state/ch$c" \
		ovn-controller "unix:$(dbsock "$c")" --pidfile="$state/ch$c/ovn-controller.pid" \
		--log-file="$state/ch$c/ovn-controller.log" --no-chdir -vconsole:off &
	pids+=($!)
done
for c in "${CHASSIS[@]}"; do wait_for 60 "ovn-controller on chassis $c to create br-int" vsctl "$c" br-exists br-int; done

say "4. The logical network: ls0 (198.18.70.0/24) over the three chassis, ls1 (198.18.71.0/24) behind router lr0"
wlchassis=(0 1 2 3 2) # workload N is on chassis wlchassis[N]
wlip() { if [ "$1" = 4 ]; then echo 198.18.71.14; else echo "198.18.70.1$1"; fi; }
wlmac() { printf '02:00:c6:46:00:%02x' "$1"; }
run nbctl ls-add ls0
run nbctl ls-add ls1
run nbctl lr-add lr0
run nbctl lrp-add lr0 lrp0 02:00:c6:46:ff:00 198.18.70.254/24
run nbctl lrp-add lr0 lrp1 02:00:c6:46:ff:01 198.18.71.254/24
for i in 0 1; do
	run nbctl lsp-add "ls$i" "ls$i-lr0" -- lsp-set-type "ls$i-lr0" router -- lsp-set-addresses "ls$i-lr0" router \
		-- lsp-set-options "ls$i-lr0" "router-port=lrp$i"
done
for w in 1 2 3 4; do
	ls=ls0
	gw=198.18.70.254
	if [ "$w" = 4 ]; then ls=ls1; gw=198.18.71.254; fi
	c=${wlchassis[$w]}
	ns=$(wlns "$w")
	ip netns add "$ns"
	quiet "$ns"
	ip -n "$ns" link set lo up
	ip link add "w$w" netns "$(chns "$c")" type veth peer name eth0 netns "$ns"
	ip -n "$(chns "$c")" link set "w$w" up
	# Geneve with OVN's option over a 1500-byte underlay leaves 1442 for
	# the workloads (VXLAN 1450), as OVN sizes its networks.
	mtu=1442
	[ "$ENCAP" = vxlan ] && mtu=1450
	ip -n "$ns" link set eth0 address "$(wlmac "$w")" mtu $mtu
	offloads "$ns"
	ip -n "$ns" addr add "$(wlip "$w")/24" dev eth0
	ip -n "$ns" link set eth0 up
	ip -n "$ns" route add default via "$gw"
	nbctl lsp-add "$ls" "lsp-w$w" -- lsp-set-addresses "lsp-w$w" "$(wlmac "$w") $(wlip "$w")"
	run vsctl "$c" add-port br-int "w$w" -- set Interface "w$w" external_ids:iface-id="lsp-w$w"
done
for w in 1 2 3 4; do
	c=${wlchassis[$w]}
	wait_for 60 "lsp-w$w to be installed on chassis $c" \
		sh -c "ovs-vsctl --db=unix:$(dbsock "$c") get Interface w$w external_ids:ovn-installed | grep -q true"
done
sync_hv
run vsctl 1 show
if [ "$ENCAP" = geneve ]; then
	# ovn-controller mapped its Geneve option (class 0x102, type 0x80) to
	# a tun_metadata field, which carries the logical ports across.
	printf '\033[1m$ %s\033[0m\n' "ovs-ofctl -O OpenFlow15 dump-tlv-map br-int"
	OVS_RUNDIR="$state/ch1/run" ovs-ofctl -O OpenFlow15 dump-tlv-map br-int | tee "$state/tlv"
	grep -q '0x102  0x80       4  tun_metadata' "$state/tlv" || fail "OVN's Geneve option is not mapped on chassis 1"
fi

say "5. Across chassis on ls0 ($ENCAP between the chassis' switches), and across the router"
# No neighbour entries yet: the gateways' MACs must come from lr0's ARP
# responder, on each workload's own chassis.
for w in 1 4; do in_wl "$w" ip neigh flush all; done
for pair in "1 2" "1 3" "2 3" "3 1"; do
	set -- $pair
	printf '\033[1m$ %s\033[0m\n' "w$1: ping $(wlip "$2")"
	pingq "$1" "$(wlip "$2")" || fail "w$1 (chassis ${wlchassis[$1]}) cannot reach w$2 (chassis ${wlchassis[$2]})"
done
printf '\033[1m$ %s\033[0m\n' "w1: ping $(wlip 4) (across lr0)"
out=$(in_wl 1 ping -c 3 -i 0.2 -W 2 "$(wlip 4)") || fail "w1 cannot reach w4 across the router"
echo "$out" | tail -n 2
# A here-string, not echo | grep -q: grep -q stops reading at the first
# match, echo may then die of SIGPIPE, and pipefail fails the check.
grep -q 'ttl=63' <<<"$out" || fail "the router did not decrement the TTL: $out"
echo "TTL 63: one router hop"
printf '\033[1m$ %s\033[0m\n' "w4: ping $(wlip 3) (chassis 2, ls1 -> chassis 3, ls0)"
pingq 4 "$(wlip 3)" || fail "w4 (chassis 2) cannot reach w3 (chassis 3) across the router"
for w in 1 4; do
	gw=198.18.70.254 mac=02:00:c6:46:ff:00
	[ "$w" = 4 ] && gw=198.18.71.254 mac=02:00:c6:46:ff:01
	printf '\033[1m$ %s\033[0m\n' "w$w: ip neigh show $gw"
	in_wl "$w" ip neigh show "$gw" | tee "$state/neigh"
	grep -q "lladdr $mac " "$state/neigh" || fail "w$w did not resolve its gateway $gw to lr0's $mac"
done
echo "router ARP: both gateways resolved to lr0's MACs"
spawn "$(wlns 3)" "$state/tcp-w3" busybox nc -l -p 5000
sleep 0.3
echo through-two-chassis | in_wl 1 busybox nc -w 3 "$(wlip 3)" 5000 || fail "TCP from w1 to w3"
wait_for 5 "w3 to receive the TCP data" grep -q through-two-chassis "$state/tcp-w3"
echo "TCP w1 -> w3: received"
sync_hv

say "6. A stateful ACL towards w3: ICMP allowed with its replies, the rest of IP dropped"
run nbctl acl-add ls0 to-lport 1001 'outport == "lsp-w3" && icmp4' allow-related
run nbctl acl-add ls0 to-lport 1000 'outport == "lsp-w3" && ip4' drop
sync_hv
pingq 1 "$(wlip 3)" || fail "the ACL blocks the ping it allows"
spawn "$(wlns 3)" "$state/tcp-w3b" busybox nc -l -p 5001
sleep 0.3
if echo dropped | in_wl 1 busybox nc -w 2 "$(wlip 3)" 5001 2>/dev/null; then fail "TCP to w3 passed a drop ACL"; fi
echo "TCP to w3: dropped, as the ACL says"
run nbctl acl-del ls0
sync_hv
echo now-allowed | in_wl 1 busybox nc -w 3 "$(wlip 3)" 5001 || fail "TCP to w3 once the ACL is gone"

say "7. A reject ACL towards w3 (chassis 3): TCP answered with a reset, UDP and ICMP with an ICMP unreachable, back to w1 (chassis 1)"
# w3 listens on TCP and echoes UDP: a refusal can only come from the ACL
# (ovn-controller on chassis 3 builds it from the packet-in and sends it
# back through the pipeline and the tunnel).
spawn "$(wlns 3)" "$state/tcp-w3c" busybox nc -l -p 5002
spawn "$(wlns 3)" "$state/udp-w3" python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("", 5003))
while True:
    d, a = s.recvfrom(64)
    s.sendto(d, a)
'
wait_for 10 "w3's UDP echo" udp_answered 1 "$(wlip 3)" 5003
run nbctl acl-add ls0 to-lport 1000 'outport == "lsp-w3" && ip4' reject
sync_hv
t0=$(date +%s%N)
if out=$(echo rejected | in_wl 1 busybox nc -w 5 "$(wlip 3)" 5002 2>&1); then fail "TCP to w3 passed a reject ACL"; fi
echo "w1: TCP to $(wlip 3):5002: ${out#nc: } ($(ms_since "$t0") ms)"
case $out in *refused*) ;; *) fail "TCP to w3 under a reject ACL: want the connection refused (a reset), got: $out" ;; esac
out=$(udp_probe 1 "$(wlip 3)" 5003)
echo "w1: UDP to $(wlip 3):5003: $out"
case $out in "ICMP unreachable"*) ;; *) fail "UDP to w3 under a reject ACL: want an ICMP unreachable, got: $out" ;; esac
out=$(in_wl 1 ping -c 1 -W 3 "$(wlip 3)" 2>&1) && fail "ping to w3 passed a reject ACL"
echo "w1: ping $(wlip 3): $(grep -i unreachable <<<"$out" || true)"
# From w3's address: w1's own kernel would report a failed ARP from w1's.
grep -q "From $(wlip 3) .*Unreachable" <<<"$out" ||
	fail "ping to w3 under a reject ACL: want an ICMP unreachable from $(wlip 3), got: $out"
echo "reject: TCP reset, UDP and ICMP unreachable across chassis"
run nbctl acl-del ls0
sync_hv
echo now-allowed | in_wl 1 busybox nc -w 3 "$(wlip 3)" 5002 || fail "TCP to w3 once the reject ACL is gone"
udp_answered 1 "$(wlip 3)" 5003 || fail "UDP to w3 once the reject ACL is gone: $(udp_probe 1 "$(wlip 3)" 5003)"
echo "TCP and UDP to w3 pass again"

say "8. A load balancer, 198.18.72.100:80, with a backend on each chassis (w1, w2, w3)"
for w in 1 2 3; do
	mkdir -p "$state/www$w"
	echo "w$w" >"$state/www$w/who"
	# busybox httpd: python's http.server looks its own address up in
	# DNS at start, which from a workload namespace waits out the
	# resolver's timeouts (10 s where the host's nameserver is unreachable).
	spawn "$(wlns "$w")" "$state/httpd-w$w.log" busybox httpd -f -p "$(wlip "$w"):8080" -h "$state/www$w"
done
run nbctl lb-add lb0 198.18.72.100:80 198.18.70.11:8080,198.18.70.12:8080,198.18.70.13:8080 tcp
run nbctl ls-lb-add ls1 lb0
run nbctl ls-lb-add ls0 lb0
sync_hv
for w in 1 2 3; do wait_for 10 "the backend on w$w" http_get "$w" "$(wlip "$w")" 8080; done
declare -A seen
for i in $(seq 12); do
	who=$(http_get 4 198.18.72.100 80) || fail "w4: request $i to the load balancer"
	seen[$who]=1
done
echo "w4 (chassis 2, ls1) reached the backends: ${!seen[*]}"
[ ${#seen[@]} -ge 2 ] || fail "12 connections all went to one backend (${!seen[*]})"
# Hairpin: a backend asking the virtual address may get itself.
for i in $(seq 6); do
	http_get 1 198.18.72.100 80 >/dev/null || fail "w1: request $i to the load balancer (hairpin)"
done
echo "w1 (a backend) reached the load balancer 6 times"

say "9. DHCP answered by ovn-controller: w6 (chassis 3, no address) gets 198.18.70.16 with busybox udhcpc"
# put_dhcp_opts pauses ls0's pipeline on chassis 3 (a packet-in with a
# continuation); ovn-controller writes the offer into the packet and
# resumes it (NXT_RESUME) toward w6.
run nbctl dhcp-options-create 198.18.70.0/24
dhcp=$(nbctl --bare --columns=_uuid find DHCP_Options cidr=198.18.70.0/24)
run nbctl dhcp-options-set-options "$dhcp" lease_time=3600 router=198.18.70.254 server_id=198.18.70.254 \
	server_mac=02:00:c6:46:ff:00
ns=$(wlns 6)
ip netns add "$ns"
quiet "$ns"
ip -n "$ns" link set lo up
ip link add w6 netns "$(chns 3)" type veth peer name eth0 netns "$ns"
ip -n "$(chns 3)" link set w6 up
ip -n "$ns" link set eth0 address "$(wlmac 6)" mtu "$mtu"
offloads "$ns"
ip -n "$ns" link set eth0 up
run nbctl lsp-add ls0 lsp-w6 -- lsp-set-addresses lsp-w6 "$(wlmac 6) 198.18.70.16" -- lsp-set-dhcpv4-options lsp-w6 "$dhcp"
run vsctl 3 add-port br-int w6 -- set Interface w6 external_ids:iface-id=lsp-w6
wait_for 60 "lsp-w6 to be installed on chassis 3" \
	sh -c "ovs-vsctl --db=unix:$(dbsock 3) get Interface w6 external_ids:ovn-installed | grep -q true"
sync_hv
# udhcpc's hook: configure what the lease says.
cat >"$state/udhcpc.sh" <<'EOF'
#!/bin/sh
[ "$1" = bound ] || exit 0
ip addr add "$ip/$mask" dev "$interface"
ip route add default via "$router"
EOF
chmod +x "$state/udhcpc.sh"
run in_wl 6 busybox udhcpc -i eth0 -f -q -n -t 5 -T 1 -s "$state/udhcpc.sh" 2>&1 | tee "$state/dhcp" ||
	fail "w6 got no lease from ovn-controller"
grep -q "lease of 198.18.70.16 obtained" "$state/dhcp" || fail "w6 got no lease from ovn-controller"
in_wl 6 ip -4 -br addr show dev eth0
printf '\033[1m$ %s\033[0m\n' "w6: ping $(wlip 1) (chassis 3 -> 1), $(wlip 4) (across lr0, chassis 3 -> 2)"
pingq 6 "$(wlip 1)" || fail "w6 (DHCP) cannot reach w1 across chassis"
pingq 6 "$(wlip 4)" || fail "w6 (DHCP) cannot reach w4 across the router"
echo "DHCP: w6 took its lease from ovn-controller and reaches w1 and w4"

say "10. kill -9 of chassis 2's switch, and a restart: ovn-controller reconnects and reinstalls"
run kill -9 "${swpid[2]}"
wait "${swpid[2]}" 2>/dev/null || true
rm -f "$state/ch2/run/ovs-vswitchd.pid"
start_switch 2
wait_for 60 "w1 to reach w2 again" in_wl 1 ping -c 1 -W 1 "$(wlip 2)"
sync_hv
pingq 4 "$(wlip 1)" || fail "w4 (chassis 2) cannot reach w1 after the restart"
echo "traffic through chassis 2 again"

say "11. A provider network: ls2's localnet port reaches a host outside OVN through chassis 3's br-ex"
# ovn-bridge-mappings names the bridge a physical network leaves by;
# ovn-controller joins br-int to it with a pair of patch ports.
ip netns add "$extns"
quiet "$extns"
ip -n "$extns" link set lo up
ip link add ext0 netns "$(chns 3)" type veth peer name eth0 netns "$extns"
offloads "$extns"
ip -n "$extns" addr add 198.18.74.1/24 dev eth0
ip -n "$extns" link set eth0 up
ip -n "$(chns 3)" link set ext0 up
run vsctl 3 add-br br-ex -- set bridge br-ex datapath_type=netdev -- add-port br-ex ext0
run vsctl 3 set Open_vSwitch . external_ids:ovn-bridge-mappings=physnet:br-ex
run nbctl ls-add ls2 -- lsp-add ls2 ln2 -- lsp-set-type ln2 localnet -- lsp-set-addresses ln2 unknown \
	-- lsp-set-options ln2 network_name=physnet
ns=$(wlns 5)
ip netns add "$ns"
quiet "$ns"
ip link add w5 netns "$(chns 3)" type veth peer name eth0 netns "$ns"
ip -n "$(chns 3)" link set w5 up
ip -n "$ns" link set eth0 address 02:00:c6:4a:00:05
offloads "$ns"
ip -n "$ns" addr add 198.18.74.15/24 dev eth0
ip -n "$ns" link set eth0 up
nbctl lsp-add ls2 lsp-w5 -- lsp-set-addresses lsp-w5 "02:00:c6:4a:00:05 198.18.74.15"
run vsctl 3 add-port br-int w5 -- set Interface w5 external_ids:iface-id=lsp-w5
wait_for 60 "lsp-w5 to be installed on chassis 3" \
	sh -c "ovs-vsctl --db=unix:$(dbsock 3) get Interface w5 external_ids:ovn-installed | grep -q true"
sync_hv
wait_for 20 "the patch ports between br-int and br-ex" sh -c "ovs-vsctl --db=unix:$(dbsock 3) list-ports br-ex | grep -q patch"
echo "br-ex ports: $(vsctl 3 list-ports br-ex | tr '\n' ' ')"
printf '\033[1m$ %s\033[0m\n' "w5: ping 198.18.74.1 (outside OVN, through the patch ports and br-ex)"
pingq 5 198.18.74.1 || fail "w5 cannot reach the host on the provider network"

say "12. NAT toward the provider network through a distributed gateway port on chassis 3: snat 198.18.74.100 for ls0, dnat_and_snat 198.18.74.102 for w2"
# Traffic routed to lrp2 goes through its chassisredirect port, on
# chassis 3 (the gateway chassis), which translates it and sends it out
# of the localnet port; the external host reaches the NAT addresses (lr0
# answers their ARP) on chassis 3.
run nbctl lrp-add lr0 lrp2 02:00:c6:46:ff:02 198.18.74.254/24
run nbctl lsp-add ls2 ls2-lr0 -- lsp-set-type ls2-lr0 router -- lsp-set-addresses ls2-lr0 router \
	-- lsp-set-options ls2-lr0 router-port=lrp2
run nbctl lrp-set-gateway-chassis lrp2 ch3
run nbctl lr-nat-add lr0 snat 198.18.74.100 198.18.70.0/24
run nbctl lr-nat-add lr0 dnat_and_snat 198.18.74.102 "$(wlip 2)"
sync_hv
# The external host answers each TCP connection with the address it
# came from.
spawn "$extns" "$state/ext-server.log" python3 -c '
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.74.1", 7000))
s.listen(8)
while True:
    c, a = s.accept()
    c.sendall((a[0] + "\n").encode())
    c.close()
'
wait_for 10 "the external host's server" sh -c "ip netns exec $extns busybox nc -w 1 198.18.74.1 7000 </dev/null | grep -q 198.18.74.1"
for w in 1 3 2; do
	want=198.18.74.100
	[ "$w" = 2 ] && want=198.18.74.102
	wait_for 10 "w$w to reach the external host" sh -c "ip netns exec $(wlns "$w") busybox nc -w 2 198.18.74.1 7000 </dev/null | grep -q ."
	seen=$(in_wl "$w" busybox nc -w 2 198.18.74.1 7000 </dev/null)
	echo "w$w (chassis ${wlchassis[$w]}) seen by the external host as $seen"
	[ "$seen" = "$want" ] || fail "w$w's connection left as $seen, want $want"
done
printf '\033[1m$ %s\033[0m\n' "external host: ping 198.18.74.102; GET http://198.18.74.102:8080/who"
pingq_ext() { in_ext ping -c 3 -i 0.2 -W 2 -q "$1" | tail -n 2; }
pingq_ext 198.18.74.102 || fail "the external host cannot ping w2's floating address"
who=$(printf 'GET /who HTTP/1.0\r\n\r\n' | in_ext busybox nc -w 3 198.18.74.102 8080 | tail -n 1) ||
	fail "the external host cannot reach w2's httpd at its floating address"
[ "$who" = w2 ] || fail "198.18.74.102:8080 answered \"$who\", want w2"
echo "NAT: snat and dnat_and_snat through chassis 3's gateway port"

say "13. ovn-controller's logs: no error on any chassis"
for c in "${CHASSIS[@]}"; do
	log=$state/ch$c/ovn-controller.log
	if grep -E '\|(ERR|EMER)\||OpenFlow error|OFPT_ERROR|refused to allocate Geneve' "$log"; then
		fail "chassis $c: ovn-controller logged an error"
	fi
	echo "chassis $c: br-int ports $(vsctl "$c" --no-wait list-ports br-int | tr '\n' ' ')"
done
sync_hv
if [ -n "$BENCH" ]; then
	say "14. Measured: w1 (chassis 1, ls0) to w4 (chassis 2, ls1) across the router, an ACL and a load balancer"
	run nbctl acl-add ls1 to-lport 1001 'outport == "lsp-w4" && ip4' allow-related
	run nbctl lb-add lb1 198.18.73.100:5201 198.18.71.14:5201 tcp
	run nbctl ls-lb-add ls0 lb1
	sync_hv
	in_wl 1 ping -c 3 -i 0.2 -W 2 -q "$(wlip 4)" >/dev/null || fail "w1 cannot reach w4 under the ACL"
	rtts=$(in_wl 1 ping -c 500 -i 0.01 -W 2 "$(wlip 4)" | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -n)
	n=$(echo "$rtts" | wc -l)
	p50=$(echo "$rtts" | sed -n "$(((n + 1) / 2))p")
	p99=$(echo "$rtts" | sed -n "$(((n * 99 + 99) / 100))p")
	in_wl 4 iperf3 -s -1 -D -B "$(wlip 4)" -p 5201 >/dev/null 2>&1
	sleep 0.5
	bps=$(in_wl 1 iperf3 -c 198.18.73.100 -p 5201 -t "$SECS" -J --connect-timeout 3000 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f" % (d["end"]["sum_received"]["bits_per_second"]/1e9))' 2>/dev/null || echo failed)
	echo "RESULT switch=$SWITCH rtt_p50_ms=$p50 rtt_p99_ms=$p99 pings=$n tcp_gbps=$bps"
fi
echo "demo-ovn done"

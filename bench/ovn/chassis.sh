#!/usr/bin/env bash
# An OVN chassis side by side: the same OVN 23.03 topology (two logical
# switches behind a logical router, one host on each, VXLAN encap) run by
# ovn-controller on this switch and on Debian's ovs-vswitchd (userspace,
# datapath_type=netdev), each switch in a namespace of its own, pinned to
# CPU 1, each switch's default port type for the veths, and the hosts'
# veths with their default offloads, or with TXOFF=1 with transmit
# offloads off (what Open vSwitch's documentation asks for with veths:
# its userspace datapath does not pass TCP otherwise). Per switch it prints: the seconds
# from ovn-controller's start to both ports ovn-installed (connect, the
# bundles of ~440 flows, the barrier), the flows on br-int, ping round
# trips across the router (min/avg/max/mdev of 200 pings, 10 ms apart),
# and one iperf3 TCP stream across the router for SECS seconds. Printed,
# never asserted. Needs root and the Debian packages ovn-central, ovn-host,
# openvswitch-switch, iperf3.
# Then, with PORTS (default 1000; 0 skips it), the seconds from
# ovn-nbctl --wait=hv adding PORTS logical ports, bound to as many internal
# ports of the chassis, to their flows installed.
#   usage: bench/ovn/chassis.sh [BIN] [SECS] [SUTS]   (BIN: where vswitchd
#   is, default bin; SECS default 5; SUTS default "ours ovs")
set -u
BIN=$(cd "${1:-bin}" && pwd)
SECS=${2:-5}
SUTS=${3:-ours ovs}
PORTS=${PORTS:-1000}
W=$(mktemp -d /tmp/ovn-bench.XXXXXX)
NS=ovb$$
cleanup() {
	for p in "$W"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done
	sleep 0.5
	for n in sw h1 h2; do ip netns del $NS$n 2>/dev/null; done
}
trap 'cleanup; rm -rf "$W"' EXIT INT TERM

run() {
	local sut=$1 d=$W/$1
	cleanup; rm -f "$W"/*.pid; mkdir -p "$d"
	for n in sw h1 h2; do ip netns add $NS$n; ip -n $NS$n link set lo up; done
	for i in 1 2; do
		ip link add ${NS}p$i netns ${NS}sw type veth peer name eth0 netns ${NS}h$i
		ip -n ${NS}h$i link set eth0 address 02:00:c6:12:0$i:0$i
		ip -n ${NS}h$i addr add 198.18.$i.$i/24 dev eth0
		ip -n ${NS}h$i link set eth0 up
		[ -n "${TXOFF:-}" ] && ip netns exec ${NS}h$i ethtool -K eth0 tx off >/dev/null 2>&1
		ip -n ${NS}h$i route add default via 198.18.$i.254
		ip -n ${NS}sw link set ${NS}p$i up
	done
	# OVN's databases and northd.
	for db in nb sb; do
		ovsdb-tool create $d/$db.db /usr/share/ovn/ovn-$db.ovsschema
		ovsdb-server $d/$db.db --remote=punix:$d/$db.sock --pidfile=$W/$db.pid --unixctl=$d/$db.ctl \
			--log-file=$d/$db.log --detach --no-chdir
	done
	OVN_RUNDIR=$d ovn-northd --ovnnb-db=unix:$d/nb.sock --ovnsb-db=unix:$d/sb.sock --pidfile=$W/northd.pid \
		--log-file=$d/northd.log --detach --no-chdir
	NB="ovn-nbctl --db=unix:$d/nb.sock"
	$NB lr-add lr0
	for i in 1 2; do
		$NB ls-add ls$i -- lsp-add ls$i h$i -- lsp-set-addresses h$i "02:00:c6:12:0$i:0$i 198.18.$i.$i"
		$NB lrp-add lr0 lrp$i 02:00:c6:12:ff:0$i 198.18.$i.254/24
		$NB lsp-add ls$i ls$i-lr0 -- lsp-set-type ls$i-lr0 router -- lsp-set-addresses ls$i-lr0 router \
			-- lsp-set-options ls$i-lr0 router-port=lrp$i
	done
	# The chassis: its database, the switch, ovn-controller.
	ovsdb-tool create $d/conf.db /usr/share/openvswitch/vswitch.ovsschema
	ovsdb-server $d/conf.db --remote=punix:$d/db.sock --pidfile=$W/db.pid --unixctl=$d/db.ctl \
		--log-file=$d/db.log --detach --no-chdir
	VS="ovs-vsctl --db=unix:$d/db.sock"
	$VS --no-wait init
	if [ "$sut" = ours ]; then
		OVS_RUNDIR=$d ip netns exec ${NS}sw taskset -c 1 "$BIN/vswitchd" unix:$d/db.sock --pidfile=$W/vs.pid \
			--log-file=$d/vs.log --state-dir=$d/state --metrics-addr= --default-bridge= --detach
	else
		OVS_RUNDIR=$d OVS_DBDIR=$d OVS_LOGDIR=$d ip netns exec ${NS}sw taskset -c 1 ovs-vswitchd unix:$d/db.sock \
			--pidfile=$W/vs.pid --unixctl=$d/vs.ctl --log-file=$d/vs.log --detach --no-chdir --disable-system-route
		$VS --no-wait set Open_vSwitch . other_config:pmd-cpu-mask=0x2 external_ids:ovn-bridge-datapath-type=netdev
	fi
	$VS set Open_vSwitch . external_ids:system-id=$sut external_ids:ovn-remote=unix:$d/sb.sock \
		external_ids:ovn-encap-type=vxlan external_ids:ovn-encap-ip=198.18.255.1
	local t0=$(date +%s.%N)
	OVS_RUNDIR=$d OVN_RUNDIR=$d ovn-controller unix:$d/db.sock --pidfile=$W/ovnc.pid --log-file=$d/ovnc.log \
		--detach --no-chdir
	for t in $(seq 100); do $VS br-exists br-int 2>/dev/null && break; sleep 0.1; done
	for i in 1 2; do $VS add-port br-int ${NS}p$i -- set Interface ${NS}p$i external_ids:iface-id=h$i; done
	local ok=""
	for t in $(seq 600); do
		if $VS get Interface ${NS}p1 external_ids:ovn-installed 2>/dev/null | grep -q true &&
			$VS get Interface ${NS}p2 external_ids:ovn-installed 2>/dev/null | grep -q true; then
			ok=1; break
		fi
		sleep 0.05
	done
	local t1=$(date +%s.%N)
	if [ -z "$ok" ]; then echo "$sut: ports never ovn-installed"; return; fi
	local flows=$(OVS_RUNDIR=$d ovs-ofctl -O OpenFlow15 dump-flows br-int 2>/dev/null | grep -c cookie)
	local errs=$(grep -c 'OpenFlow error' $d/ovnc.log)
	ip netns exec ${NS}h1 ping -c 3 -W 1 198.18.2.2 >/dev/null 2>&1
	local rtt=$(ip netns exec ${NS}h1 ping -q -c 200 -i 0.01 198.18.2.2 | sed -n 's/^rtt [^=]*= //p')
	ip netns exec ${NS}h2 iperf3 -s -1 -D -p 5209 >/dev/null 2>&1; sleep 0.5
	local bps=$(ip netns exec ${NS}h1 taskset -c 0 iperf3 -c 198.18.2.2 -p 5209 -t $SECS -J 2>/dev/null |
		python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f" % (d["end"]["sum_received"]["bits_per_second"]/1e9))' 2>/dev/null)
	printf '%-5s%s ovn-installed after %.2f s, %s flows, %s OpenFlow errors; rtt min/avg/max/mdev %s; TCP %s Gbit/s\n' \
		"$sut" "${TXOFF:+ (tx off)}" "$(echo "$t1 - $t0" | bc)" "$flows" "$errs" "${rtt:-none}" "${bps:-failed}"
	[ "$PORTS" -gt 0 ] || return
	# PORTS new logical ports at once: their interfaces (internal ports)
	# first, which gives ovn-controller nothing to install yet, then the
	# logical ports in one ovn-nbctl transaction, timed until --wait=hv
	# returns (northd, the southbound database, ovn-controller, its bundle
	# and barrier on every chassis).
	local vs=() nb=()
	for p in $(seq "$PORTS"); do
		vs+=(-- add-port br-int x$p -- set Interface x$p type=internal external_ids:iface-id=x$p)
		nb+=(-- lsp-add ls1 x$p -- lsp-set-addresses x$p "$(printf '02:00:c6:13:%02x:%02x' $((p / 256)) $((p % 256)))")
	done
	$VS --timeout=300 "${vs[@]:1}" || { echo "$sut: adding $PORTS interfaces failed"; return; }
	local t2=$(date +%s.%N)
	$NB --wait=hv --timeout=600 "${nb[@]:1}" || { echo "$sut: ovn-nbctl --wait=hv failed"; return; }
	local t3=$(date +%s.%N)
	local flows2=$(OVS_RUNDIR=$d ovs-ofctl -O OpenFlow15 dump-flows br-int 2>/dev/null | grep -c cookie)
	printf '%-5s %d new logical ports: ovn-nbctl --wait=hv returned after %.2f s; %s flows (%s before); %s OpenFlow errors\n' \
		"$sut" "$PORTS" "$(echo "$t3 - $t2" | bc)" "$flows2" "$flows" "$(grep -c 'OpenFlow error' $d/ovnc.log)"
}

for s in $SUTS; do run "$s"; done

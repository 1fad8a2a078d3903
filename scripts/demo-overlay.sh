#!/bin/bash
# An overlay network in one machine (make demo-overlay): three "hosts", each
# a network namespace running its own vswitchd with its own state directory,
# joined by an underlay (a Linux bridge in a namespace of its own). Two
# tenants, VNI 100 and VNI 200, have one workload (a namespace with a veth
# into its host) on every host, and both tenants use the same subnet, as
# tenants do. No controller: the flows are static, written with vsctl, and
# the tunnels are flow-based (one vxlan port per host, remote_ip=flow and
# key=flow): a workload's frame gets its tenant's VNI (tun_id) and the
# destination host (tun_dst) from the flow matching its destination MAC;
# broadcasts (ARP) go to every other host; a frame from the tunnel is
# delivered by VNI and destination MAC, so a tenant's frames never reach
# another tenant's workload. The script shows that with a capture, not
# only with a failing ping: while tenant 100 talks, tcpdump in every
# workload counts the frames that come from tenant 100's MACs; tenant 200's
# workloads must count none of them.
#
# Needs root. Everything it creates is removed at exit, even on failure.
# Namespace names end in this shell's pid; interface names are local to
# their namespaces, so nothing outside the demo's namespaces is touched.
# Addresses are from 198.18.0.0/15 (reserved for benchmarking).
set -euo pipefail

BIN=${BIN:-bin}
tag=$$
VXLAN_MTU=1450 # underlay MTU 1500 - 50 bytes of IPv4 + UDP + VXLAN

need() {
	local missing=()
	for t in "$@"; do
		command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t%%:*} (Debian/Ubuntu package ${t#*:})")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "make demo-overlay needs: ${missing[*]}" >&2
		echo "install them, e.g.: apt-get install iproute2 iputils-ping procps tcpdump" >&2
		exit 1
	fi
}
need ip:iproute2 ping:iputils-ping sysctl:procps tcpdump:tcpdump
[ -x "$BIN/vswitchd" ] && [ -x "$BIN/vsctl" ] || { echo "no $BIN/vswitchd or $BIN/vsctl: run make build first" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "make demo-overlay needs root (network namespaces)" >&2; exit 1; }

HOSTS=(1 2 3)
TENANTS=(100 200)
underlay=ovl-ul-$tag
hostns() { echo "ovl-h$1-$tag"; }            # host N's namespace
wlns() { echo "ovl-h$1-t$2-$tag"; }          # tenant T's workload on host N
hostip() { echo "198.18.50.$1"; }            # host N's underlay address
wlip() { echo "198.19.1.$(($2 / 100))$1"; }  # tenant T's workload on host N: 198.19.1.1N (VNI 100), .2N (VNI 200)
wlmac() { printf '02:00:00:00:%02x:%02x' "$(($2 / 100))" "$1"; } # 02:00:00:00:0T:0N
state=$(mktemp -d /tmp/vswitch-demo-overlay.XXXXXX)
pids=() # the daemons
caps=() # step 6's captures

cleanup() {
	local rc=$?
	for p in "${caps[@]}" "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${caps[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	for h in "${HOSTS[@]}"; do
		for t in "${TENANTS[@]}"; do ip netns del "$(wlns "$h" "$t")" 2>/dev/null || true; done
		ip netns del "$(hostns "$h")" 2>/dev/null || true
	done
	ip netns del "$underlay" 2>/dev/null || true
	if [ $rc -ne 0 ]; then
		echo "demo-overlay FAILED (exit $rc); the daemons' logs:" >&2
		for h in "${HOSTS[@]}"; do tail -n 20 "$state/h$h/vswitchd.log" 2>/dev/null >&2 || true; done
	fi
	rm -rf "$state"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
run() { printf '\033[1m$ %s\033[0m\n' "$*"; "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# vsctl on host N's switch (its own state directory, hence its own socket).
vsctl() { local h=$1; shift; "$BIN/vsctl" --state-dir "$state/h$h" "$@"; }
# rx_packets of a workload's interface: what its switch delivered to it.
wl_rx() { ip netns exec "$(wlns "$1" "$2")" cat /sys/class/net/eth0/statistics/rx_packets; }
# n_packets of host N's flows matching FILTER (and the pattern GREP, if
# given), summed.
flow_packets() {
	vsctl "$1" dump-flows br0 "$2" | grep -e "${3:-.}" | grep -o 'n_packets=[0-9]*' | awk -F= '{s += $2} END {print s + 0}'
}
quiet() { ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; }

say "1. The underlay: a Linux bridge in $underlay, hosts at $(hostip 1), $(hostip 2), $(hostip 3)"
ip netns add "$underlay"
ip -n "$underlay" link add ulbr type bridge
ip -n "$underlay" link set ulbr up
for h in "${HOSTS[@]}"; do
	ns=$(hostns "$h")
	ip netns add "$ns"
	quiet "$ns"
	ip -n "$ns" link set lo up
	ip link add ul0 netns "$ns" type veth peer name "h$h" netns "$underlay"
	ip -n "$underlay" link set "h$h" master ulbr up
	ip -n "$ns" addr add "$(hostip "$h")/24" dev ul0
	ip -n "$ns" link set ul0 up
	echo "host $h: namespace $ns, underlay address $(hostip "$h") on its own interface ul0"
done

say "2. Workloads: tenant (VNI) 100 and tenant 200 on every host, both in 198.19.1.0/24, MTU $VXLAN_MTU"
for h in "${HOSTS[@]}"; do
	for t in "${TENANTS[@]}"; do
		ns=$(wlns "$h" "$t")
		ip netns add "$ns"
		quiet "$ns"
		ip link add "wl$t" netns "$(hostns "$h")" type veth peer name eth0 netns "$ns"
		ip -n "$(hostns "$h")" link set "wl$t" up
		ip -n "$ns" link set eth0 address "$(wlmac "$h" "$t")" mtu "$VXLAN_MTU"
		ip -n "$ns" addr add "$(wlip "$h" "$t")/24" dev eth0
		ip -n "$ns" link set eth0 up
		echo "host $h tenant $t: $ns, $(wlip "$h" "$t") $(wlmac "$h" "$t"), switch port wl$t"
	done
done

say "3. One vswitchd per host, inside the host's namespace, each with its own state directory"
for h in "${HOSTS[@]}"; do
	mkdir -p "$state/h$h"
	printf '\033[1m$ %s\033[0m\n' "ip netns exec $(hostns "$h") $BIN/vswitchd --state-dir $state/h$h --metrics-addr \"\" --default-bridge \"\" &"
	ip netns exec "$(hostns "$h")" "$BIN/vswitchd" --state-dir "$state/h$h" --metrics-addr "" --default-bridge "" \
		--log-file "$state/h$h/vswitchd.log" &
	pids+=($!)
done
for h in "${HOSTS[@]}"; do
	for _ in $(seq 100); do vsctl "$h" version >/dev/null 2>&1 && break; sleep 0.1; done
	vsctl "$h" version >/dev/null || fail "vswitchd on host $h did not start"
	# One PMD each: three switches share this machine's cores.
	vsctl "$h" set Open_vSwitch . other_config:n-pmd=1
	vsctl "$h" add-br br0 fail_mode=secure
	for t in "${TENANTS[@]}"; do vsctl "$h" add-port br0 "wl$t" -- type=afpacket; done
done
for h in "${HOSTS[@]}"; do
	run vsctl "$h" add-port br0 vx0 -- type=vxlan options:remote_ip=flow options:key=flow options:local_ip="$(hostip "$h")"
done

say "4. Flows (static: the script knows every workload's MAC); host 1's, the others alike"
bcast=01:00:00:00:00:00/01:00:00:00:00:00
for h in "${HOSTS[@]}"; do
	f=$state/h$h/flows
	: >"$f"
	for t in "${TENANTS[@]}"; do
		flood="set_field:$t->tun_id"
		for r in "${HOSTS[@]}"; do
			[ "$r" = "$h" ] && continue
			# To a known MAC of the same tenant on another host: VNI and remote host from the flow.
			echo "priority=100,in_port=wl$t,dl_dst=$(wlmac "$r" "$t"),actions=set_field:$t->tun_id,set_field:$(hostip "$r")->tun_dst,output:vx0" >>"$f"
			flood+=",set_field:$(hostip "$r")->tun_dst,output:vx0"
		done
		# Broadcast and multicast (ARP): to every other host, in the tenant's VNI.
		echo "priority=90,in_port=wl$t,dl_dst=$bcast,actions=$flood" >>"$f"
		# Anything else from the workload (another tenant's MAC, say): dropped, and counted here.
		echo "priority=10,in_port=wl$t,actions=drop" >>"$f"
		# From the tunnel: delivered by VNI and destination MAC.
		echo "priority=100,in_port=vx0,tun_id=$t,dl_dst=$(wlmac "$h" "$t"),actions=output:wl$t" >>"$f"
		echo "priority=90,in_port=vx0,tun_id=$t,dl_dst=$bcast,actions=output:wl$t" >>"$f"
	done
	echo "priority=10,in_port=vx0,actions=drop" >>"$f"
	[ "$h" = 1 ] && cat "$f"
	vsctl "$h" add-flows br0 "$f"
done
run vsctl 1 show

say "5. Each tenant pings its own workloads on the other hosts"
declare -A rx0
for h in "${HOSTS[@]}"; do for t in "${TENANTS[@]}"; do rx0[$h.$t]=$(wl_rx "$h" "$t"); done; done
for t in "${TENANTS[@]}"; do
	for r in 2 3; do
		printf '\033[1m$ %s\033[0m\n' "ip netns exec $(wlns 1 "$t") ping -c 3 -i 0.2 -W 2 $(wlip "$r" "$t")"
		ip netns exec "$(wlns 1 "$t")" ping -c 3 -i 0.2 -W 2 -q "$(wlip "$r" "$t")" | tail -n 2 ||
			fail "tenant $t: host 1 cannot reach host $r"
	done
done
printf '\033[1m$ %s\033[0m\n' "ip netns exec $(wlns 2 100) ping -c 3 -i 0.2 -W 2 $(wlip 3 100)"
ip netns exec "$(wlns 2 100)" ping -c 3 -i 0.2 -W 2 -q "$(wlip 3 100)" | tail -n 2 || fail "tenant 100: host 2 cannot reach host 3"
run vsctl 1 dpif-dump-flows br0

say "6. Isolation: only tenant 100 talks; no frame from tenant 100 may reach tenant 200"
# The check counts tenant 100's frames only, by their source MACs: tenant
# 200's kernels keep talking on their own meanwhile (about 5 s after step 5
# they re-check their neighbours with unicast ARP across the tunnels), and
# those frames say nothing about isolation. Every workload, tenant 100's
# too, runs the same capture: tenant 100's must count frames, which shows
# the capture itself works.
t100macs=()
for h in "${HOSTS[@]}"; do t100macs+=("ether src $(wlmac "$h" 100)"); done
from100=$(printf ' or %s' "${t100macs[@]}")
from100=${from100# or }
echo "in every workload: tcpdump -Q in '$from100'"
snapshot_rx() { for h in "${HOSTS[@]}"; do for t in "${TENANTS[@]}"; do rx0[$h.$t]=$(wl_rx "$h" "$t"); done; done; }
snapshot_rx
declare -A cap cap_pid
for h in "${HOSTS[@]}"; do
	for t in "${TENANTS[@]}"; do
		cap[$h.$t]=$state/cap-h$h-t$t
		ip netns exec "$(wlns "$h" "$t")" tcpdump -i eth0 -Q in -e -n -l --immediate-mode "$from100" \
			>"${cap[$h.$t]}" 2>"${cap[$h.$t]}.err" &
		cap_pid[$h.$t]=$!
		caps+=($!)
	done
done
# tcpdump says "listening on" once its filter is in place.
for h in "${HOSTS[@]}"; do
	for t in "${TENANTS[@]}"; do
		for _ in $(seq 100); do grep -q 'listening on' "${cap[$h.$t]}.err" && break; sleep 0.1; done
		grep -q 'listening on' "${cap[$h.$t]}.err" || fail "tcpdump in $(wlns "$h" "$t") did not start: $(cat "${cap[$h.$t]}.err")"
	done
done
echo "tenant 100 on host 1 tries to reach tenant 200's workloads:"
echo " (a) $(wlip 2 200) (host 2) by ARP: the broadcast is flooded in VNI 100 only, so nobody answers"
printf '\033[1m$ %s\033[0m\n' "ip netns exec $(wlns 1 100) ping -c 3 -i 0.2 -W 1 $(wlip 2 200)"
if ip netns exec "$(wlns 1 100)" ping -c 3 -i 0.2 -W 1 -q "$(wlip 2 200)" >/dev/null 2>&1; then fail "tenant 100 reached tenant 200"; fi
echo "     no reply, as it should be"
# A different address from (a)'s: the kernel still holds (a)'s pings in
# that neighbour entry's queue and would send them on once it had a MAC.
echo " (b) $(wlip 3 200) (host 3) with its MAC in the neighbour table: no tenant-100 flow matches that MAC, so host 1 drops the frames"
run ip -n "$(wlns 1 100)" neigh replace "$(wlip 3 200)" lladdr "$(wlmac 3 200)" dev eth0 nud permanent
drop0b=$(flow_packets 1 in_port=wl100 actions=drop)
printf '\033[1m$ %s\033[0m\n' "ip netns exec $(wlns 1 100) ping -c 3 -i 0.2 -W 1 $(wlip 3 200)"
if ip netns exec "$(wlns 1 100)" ping -c 3 -i 0.2 -W 1 -q "$(wlip 3 200)" >/dev/null 2>&1; then fail "tenant 100 reached tenant 200"; fi
dropb=$(($(flow_packets 1 in_port=wl100 actions=drop) - drop0b))
echo "     no reply, as it should be; host 1's flow in_port=wl100,actions=drop: n_packets +$dropb"
[ "$dropb" -ge 3 ] || fail "the frames to tenant 200's MAC were not dropped at host 1's ingress"
# Meanwhile tenant 100 keeps working, so the captures below are taken
# while tenant 100 traffic crosses the same tunnels.
echo " (c) and tenant 100 still reaches its own workload on host 2"
printf '\033[1m$ %s\033[0m\n' "ip netns exec $(wlns 1 100) ping -c 3 -i 0.2 -W 2 $(wlip 2 100)"
ip netns exec "$(wlns 1 100)" ping -c 3 -i 0.2 -W 2 -q "$(wlip 2 100)" >/dev/null || fail "tenant 100 stopped working"
# Every ping above has had its reply or its timeout, so any frame of
# theirs that reached a workload has been captured.
for p in "${caps[@]}"; do kill -INT "$p"; done
for p in "${caps[@]}"; do wait "$p" || true; done
caps=()
# A capture's frames, one a line (tcpdump ends its output with an empty one).
count() { grep -c . "$1" || true; }

printf '\n%-8s %-8s %-30s %-30s\n' host tenant "packets into the workload" "of them from tenant 100's MACs"
bad=0
for h in "${HOSTS[@]}"; do
	for t in "${TENANTS[@]}"; do
		d=$(($(wl_rx "$h" "$t") - rx0[$h.$t]))
		c=$(count "${cap[$h.$t]}")
		[ "$t" = 200 ] && [ "$c" != 0 ] && bad=1
		printf '%-8s %-8s %-30s %-30s\n' "$h" "$t" "+$d" "$c"
	done
done
[ "$bad" = 0 ] || fail "tenant 200's workloads received frames from tenant 100:"$'\n'"$(grep -h . "$state"/cap-h*-t200)"
# The pings of (c): three echo requests from host 1's tenant 100 workload.
[ "$(count "${cap[2.100]}")" -ge 3 ] || fail "the capture in $(wlns 2 100) missed tenant 100's pings from host 1"
echo "no frame from tenant 100 reached tenant 200's workloads; tenant 100's own workloads received its frames"
echo "(tenant 200's packets, if any, are its own kernels' ARP checks: they come from tenant 200's MACs)"
run vsctl 1 dump-flows br0

echo
echo "demo-overlay done; cleaning up"

#!/usr/bin/env bash
# OVN over three chassis, this switch and Open vSwitch side by side: runs
# scripts/demo-ovn.sh (make demo-ovn) with BENCH=1 once per switch, each
# time this switch or Debian's ovs-vswitchd (userspace, datapath_type=
# netdev) as every chassis' ovs-vswitchd, and prints the measured lines:
# ping round trips (p50, p99 of 500 pings 10 ms apart) and one iperf3 TCP
# stream (SECS seconds) from a workload on chassis 1 to one on chassis 2,
# across the logical router, through an allow-related ACL and a load
# balancer's virtual address. The workloads' tx offloads are off for both
# (Open vSwitch's userspace datapath does not pass TSO frames from veth).
# Printed, never asserted. Needs root and what make demo-ovn needs.
#   usage: bench/ovn/multichassis.sh [BIN] [SECS] [SWITCHES]
#   (BIN default bin, SECS default 5, SWITCHES default "ours ovs")
set -u
BIN=${1:-bin}
SECS=${2:-5}
here=$(cd "$(dirname "$0")/../.." && pwd)
for sw in ${3:-ours ovs}; do
	out=$(BIN=$BIN SWITCH=$sw BENCH=1 SECS=$SECS bash "$here/scripts/demo-ovn.sh" 2>&1)
	if line=$(echo "$out" | grep '^RESULT '); then
		echo "$line"
	else
		echo "$sw: the run failed:"
		echo "$out" | tail -n 30
	fi
done

#!/usr/bin/env bash
# Meter band accuracy on the real clock through veth ports: trafgen offers
# twice a dscp_remark band's rate (100 to 20,000 pktps with 100 B frames,
# 1 to 200 Mbit/s with 1000 B frames), IPv4 with DSCP AF21 and then ARP;
# a packet socket on the far side counts what leaves the switch. Per band
# it prints what the switch took in, the rate that passed unchanged beyond
# the band's one-second bucket (as % of the band rate), the frames
# remarked AF22, and that every ARP frame passed. Printed, never asserted
# (the test asserts only DSCPs, counters and that nothing is dropped).
# Open vSwitch 3.1's userspace datapath has no dscp_remark band, so there
# is no anchor. Needs root and trafgen.
#   usage: bench/meters/bands.sh [PORT_TYPE]   (afpacket, the default, or afxdp)
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
VSWITCH_E2E=1 VSWITCH_METER_SWEEP=1 VSWITCH_METER_PORT_TYPE="${1:-afpacket}" \
	go test -count=1 -run '^TestMeterRemarkTrafgen$' -v ./e2e/ |
	sed -n 's/band=type=dscp_remark,//; s/.*BENCH meter //p'

// Package actions defines datapath actions — what a megaflow does to the
// packets that hit it — and applies the ones that rewrite packets. Output and
// to-controller actions are carried out by the PMD (they need its output
// batches and queues); everything else is a pure function of the packet.
package actions

// Kind says what an Action does.
type Kind uint8

// Action kinds. Set* kinds rewrite a header field of the packet if the packet
// has that header (a set on an absent header is a no-op, as in OVS) and keep
// every checksum right.
const (
	Invalid Kind = iota
	// Output queues the packet on port Port.
	Output
	// Controller hands a copy of the packet to the upcall side (OpenFlow
	// packet-in); Port carries the reason/arg word for ofproto.
	Controller
	// SetEthSrc / SetEthDst set the Ethernet address to Addr[:6].
	SetEthSrc
	SetEthDst
	// SetIPv4Src / SetIPv4Dst set the IPv4 address to Addr[:4]; IPv4 header
	// and TCP/UDP pseudo-header checksums are updated incrementally.
	SetIPv4Src
	SetIPv4Dst
	// SetIPv6Src / SetIPv6Dst set the IPv6 address to Addr (16 bytes);
	// TCP/UDP/ICMPv6 checksums are updated incrementally.
	SetIPv6Src
	SetIPv6Dst
	// SetIPTOS sets the whole IPv4 TOS / IPv6 traffic class byte to Val8,
	// under Mask8 (bits not in Mask8 are kept; Mask8 0 means 0xff).
	SetIPTOS
	// SetIPTTL sets the IPv4 TTL / IPv6 hop limit to Val8.
	SetIPTTL
	// DecIPTTL decrements the TTL / hop limit; a packet whose TTL is already
	// 0 or 1 is dropped (ofproto turns that into an invalid-TTL packet-in).
	DecIPTTL
	// SetL4Src / SetL4Dst set the TCP, UDP or SCTP port to Val16; the
	// TCP/UDP checksum is updated incrementally, SCTP's CRC32c recomputed.
	SetL4Src
	SetL4Dst
	// PushVLAN inserts a tag (TPID Val16, TCI Val16b) as the outermost tag.
	PushVLAN
	// PopVLAN removes the outermost tag, if any.
	PopVLAN
	// SetVLANTCI sets the outermost tag's TCI to Val16b under mask Val16
	// (0 means all bits); no-op without a tag.
	SetVLANTCI
	// Drop ends processing: the packet is freed (an empty action list drops
	// too; this kind exists so a list can say it explicitly).
	Drop
	numKinds
)

// Action is one datapath action. It is a flat value (no pointers, no
// interfaces) so that an action list is one contiguous slice.
type Action struct {
	Kind   Kind
	Val8   uint8
	Mask8  uint8
	Val16  uint16
	Val16b uint16
	Port   uint32
	Addr   [16]byte
}

// List is the ordered actions of one megaflow.
type List []Action

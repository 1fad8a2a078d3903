// Package actions defines datapath actions — what a megaflow does to the
// packets that hit it — and applies the ones that rewrite packets. Output and
// to-controller actions are carried out by the PMD (they need its output
// batches and queues); everything else is a pure function of the packet.
package actions

import "encoding/binary"

// Kind says what an Action does.
type Kind uint8

// Action kinds. Set* kinds rewrite a header field of the packet if the packet
// has that header (a set on an absent header is a no-op, as in OVS) and keep
// every checksum right.
const (
	Invalid Kind = iota
	// Output queues the packet on port Port (OutputTo builds it).
	Output
	// Controller hands a copy of the packet to the upcall side (OpenFlow
	// packet-in); Val32 carries the reason/arg word for ofproto, Addr the
	// cookie and metadata (ControllerAction builds it, ControllerArg,
	// ControllerCookie and ControllerMetadata read it).
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
	// PushMPLS inserts a label stack entry after the Ethernet addresses and
	// any VLAN tags and sets the Ethernet type to Val16 (0x8848 multicast;
	// any other value means 0x8847). Label, TC and TTL are copied from the
	// old top entry when the packet already is MPLS (OpenFlow 1.3's copy
	// rules); otherwise label and TC are 0, the TTL is the IP TTL / hop
	// limit (0 for a non-IP payload) and the bottom-of-stack bit is set. An
	// 802.3 (length-field) frame is left alone.
	PushMPLS
	// PopMPLS removes the top label stack entry and sets the Ethernet type
	// to Val16, the type of what the entry covered.
	PopMPLS
	// SetMPLSLabel sets the top entry's 20-bit label to Val32.
	SetMPLSLabel
	// SetMPLSTC sets the top entry's 3-bit traffic class to Val8.
	SetMPLSTC
	// SetMPLSTTL sets the top entry's TTL to Val8.
	SetMPLSTTL
	// DecMPLSTTL decrements the top entry's TTL; at 0 or 1 the packet is
	// dropped, as for DecIPTTL.
	DecMPLSTTL
	// CopyTTLOut copies the TTL of what the top MPLS entry covers (the next
	// entry, or the IPv4 TTL / IPv6 hop limit under the bottom of the
	// stack) into the top entry. Only MPLS packets are handled.
	CopyTTLOut
	// CopyTTLIn copies the top MPLS entry's TTL inwards: into the next
	// entry, or under the bottom of the stack into the IPv4 TTL (checksum
	// updated) or IPv6 hop limit.
	CopyTTLIn
	// PushPBB inserts an 802.1ah I-TAG (type Val16; any value but 0x88e7 is
	// taken as 0x88e7) right after the Ethernet addresses: the frame's
	// addresses become the customer addresses behind the I-TAG and are
	// copied to the new backbone addresses in front of it. The I-TAG's
	// 32-bit TCI is Val8<<24 | Val32&0xffffff (priority/DEI/UCA byte, then
	// the I-SID): ofproto supplies OpenFlow's copied I-SID, it knows the key.
	PushPBB
	// PopPBB removes the backbone encapsulation: backbone addresses, any
	// B-TAG in front of the I-TAG, and the I-TAG, leaving the customer frame.
	PopPBB
	// SetPBBISID sets the outermost I-TAG's 24-bit I-SID to Val32.
	SetPBBISID
	// SetTunnelID sets p.Key.TunnelID to Addr[:8] (big-endian) and touches
	// no packet byte: tunnel output ports read the key to pick the tunnel
	// key they encapsulate with.
	SetTunnelID
	// SetIPv6Label sets the IPv6 flow label to Val32's low 20 bits (no
	// checksum covers it).
	SetIPv6Label
	// SetARPOp, SetARPSPA, SetARPTPA, SetARPSHA and SetARPTHA rewrite the
	// fields of an Ethernet/IPv4 ARP packet: the opcode from Val16, the
	// protocol addresses from Addr[:4], the hardware addresses from
	// Addr[:6].
	SetARPOp
	SetARPSPA
	SetARPTPA
	SetARPSHA
	SetARPTHA
	// SetNDTarget sets the target address of a neighbour solicitation or
	// advertisement to Addr; SetNDSLL / SetNDTLL set the address in its
	// source / target link-layer option (if it has one) to Addr[:6]. The
	// ICMPv6 checksum is updated.
	SetNDTarget
	SetNDSLL
	SetNDTLL
	// SetICMPType / SetICMPCode set the ICMPv4 or ICMPv6 type / code to
	// Val8, updating the checksum.
	SetICMPType
	SetICMPCode
	// Meter sends the packet through datapath meter Val32 (an OpenFlow
	// meter id; MeterAction builds it, MeterID reads it). The PMD carries
	// it out: the meter's bands may drop the packet or raise its DSCP drop
	// precedence; a meter that does not exist drops it.
	Meter
	// SetEthType writes Val16 into the Ethernet type behind the VLAN tags
	// (an 802.3 length field is left alone). The bytes behind it are not
	// touched, so they parse as whatever the new type says: the frame is
	// extracted again and no checksum changes, since no header that
	// parsed before still parses as the same header.
	SetEthType
	// SetIPProto writes Val8 into the IPv4 protocol (header checksum
	// updated) or the IPv6 next header that ends the extension header
	// chain. The transport header's bytes stay the old protocol's: only
	// that header's checksum changes, when it covers the pseudo-header
	// (TCP, UDP unless zero, ICMPv6), by the protocol number's change, so
	// it stays right. Nothing is written where the new protocol would
	// keep its checksum (UDP's is inside TCP's sequence number). The
	// frame is then extracted again, so the key and later actions read
	// the header as the new protocol.
	SetIPProto
	// SetMPLSBoS sets the top MPLS entry's bottom-of-stack bit to Val8&1.
	SetMPLSBoS
	// SetTunnelSrc / SetTunnelDst set p.Key.Tun.Src / Dst to Addr (an IPv4
	// address IPv4-mapped, as flow.Tunnel stores it) and, like
	// SetTunnelID, touch no packet byte: a later output to a flow-based
	// tunnel port (remote_ip=flow) encapsulates towards Dst.
	SetTunnelSrc
	SetTunnelDst
	// Recirc sends the packet, as rewritten so far, through the caches
	// again under recirc_id Val32 (never 0; RecircAction builds it,
	// RecircID reads it): the PMD extracts its key
	// afresh, keeping the metadata the frame does not carry, so that a
	// header a pop exposed can be matched. As the last action it takes the
	// packet; before others it takes a copy (a group bucket that needs a
	// field behind a pop), as Output does. The PMD carries it out.
	Recirc
	// CT runs the packet through the datapath's connection tracker
	// (CTAction builds it): zone Val16, CTFlag* bits in Val8, the mark
	// Val32 under the mask in Addr[:4] with CTFlagMark, the label the
	// CTLabel action before it carries with CTFlagLabel. The verdict
	// goes into the packet's key (Key.CT), which a later Recirc carries
	// into the next pass. The PMD carries it out.
	CT
	// CTLabel carries a label for the CT action right after it: the value
	// in Addr; CTLabelMask, right after it, the mask in Addr. On their
	// own they do nothing (a flat action has room for one 16-byte value).
	CTLabel
	CTLabelMask
	// CTClear makes the packet untracked: Key.CT becomes zero.
	CTClear
	// CTNAT carries nat(src|dst=...) for the CT action after it (which
	// has CTFlagNAT): CTNATSrc or CTNATDst in Val8, the lowest address
	// (IPv4-mapped) in Addr, the port range in Val16..Val16b (0: keep
	// the port). CTNATMax, right after it, has the highest address in
	// Addr. A CT with CTFlagNAT and no CTNAT before it only applies the
	// translation its connection was committed with.
	CTNAT
	CTNATMax
	// SetICMPID sets an ICMP or ICMPv6 echo (or other query) message's
	// identifier to Val16: NAT of a query whose identifier clashed.
	SetICMPID
	// SetTunnelOpt makes p.Key.Tun carry tun_metadataN (N = Val8-1; 0
	// for none) with the value Val32 (flow.Tunnel.SetOpt), touching no
	// packet byte: a
	// later output to a Geneve port sends the option its TLV table maps
	// to that field.
	SetTunnelOpt
	// CheckPktLen recirculates the packet under one of two recirc_ids,
	// chosen by its length (PktLen): GreaterID when it is longer than
	// Val16 bytes, LessEqualID otherwise (CheckPktLenAction builds it).
	// It is Open vSwitch's check_pkt_len with both branches frozen: the
	// action list stays flat, and the megaflow that holds it does not
	// depend on the length. Placed like Recirc: as the last action it
	// takes the packet, before others a copy. The PMD carries it out.
	CheckPktLen
	numKinds
)

// Flags of a CT action (Val8).
const (
	CTFlagCommit = 1 << 0 // remember the connection
	CTFlagForce  = 1 << 1 // with commit: end a connection seen the other way
	CTFlagMark   = 1 << 2 // commit sets the mark
	CTFlagLabel  = 1 << 3 // commit sets the label
	CTFlagNAT    = 1 << 4 // the ct has nat: translate
	// A commit attaches an application-layer helper (alg=ftp|tftp) to
	// the connection; its data connections are then +rel.
	CTFlagALGFTP  = 1 << 5
	CTFlagALGTFTP = 1 << 6

	// CTNAT's Val8.
	CTNATSrc        = 1 << 0
	CTNATDst        = 1 << 1
	CTNATPersistent = 1 << 2 // the address from the source address alone
	CTNATRandom     = 1 << 3 // the port search starts at a random number
)

// Action is one datapath action. It is a flat value (no pointers, no
// interfaces) so that an action list is one contiguous slice. The Val
// fields and Addr mean what the Kind's comment says; Port is only ever a
// port, so that code reading a.Port never gets a meter or recirc id by
// mistake. The kinds whose 32-bit argument is an identifier rather than a
// header value have a constructor and an accessor that name it.
type Action struct {
	Kind   Kind
	Val8   uint8
	Mask8  uint8
	Val16  uint16
	Val16b uint16
	// Port is the datapath port an Output sends to; 0 for every other kind.
	Port uint32
	// Val32 is the 32-bit argument of the other kinds: a header value (the
	// MPLS label, the I-SID, the IPv6 flow label) or an identifier (the
	// controller arg, the meter id, the recirc id).
	Val32 uint32
	Addr  [16]byte
}

// List is the ordered actions of one megaflow.
type List []Action

// ControllerAction is a Controller action whose packet-ins carry arg, a
// 64-bit cookie and 64-bit metadata (OpenFlow's flow cookie and pipeline
// metadata) in Addr.
func ControllerAction(arg uint32, cookie, metadata uint64) Action {
	a := Action{Kind: Controller, Val32: arg}
	binary.BigEndian.PutUint64(a.Addr[:8], cookie)
	binary.BigEndian.PutUint64(a.Addr[8:], metadata)
	return a
}

// OutputTo is an Output action to port.
func OutputTo(port uint32) Action { return Action{Kind: Output, Port: port} }

// MeterAction is a Meter action through meter id.
func MeterAction(id uint32) Action { return Action{Kind: Meter, Val32: id} }

// RecircAction is a Recirc action under recirc_id id.
func RecircAction(id uint32) Action { return Action{Kind: Recirc, Val32: id} }

// CheckPktLenAction is a CheckPktLen action comparing with size, going
// on under recirc_id gt for a longer packet, le otherwise.
func CheckPktLenAction(size uint16, gt, le uint32) Action {
	a := Action{Kind: CheckPktLen, Val16: size, Val32: gt}
	binary.BigEndian.PutUint32(a.Addr[:4], le)
	return a
}

// GreaterID is the recirc_id a CheckPktLen action sends a packet longer
// than its size to.
func (a *Action) GreaterID() uint32 { return a.Val32 }

// LessEqualID is the recirc_id a CheckPktLen action sends the other
// packets to.
func (a *Action) LessEqualID() uint32 { return binary.BigEndian.Uint32(a.Addr[:4]) }

// CTAction is a CT action in zone with flags (CTFlag*), setting mark
// under markMask when flags has CTFlagMark.
func CTAction(zone uint16, flags uint8, mark, markMask uint32) Action {
	a := Action{Kind: CT, Val16: zone, Val8: flags, Val32: mark}
	binary.BigEndian.PutUint32(a.Addr[:4], markMask)
	return a
}

// CTMarkMask is the mark mask CTAction stored.
func (a *Action) CTMarkMask() uint32 { return binary.BigEndian.Uint32(a.Addr[:4]) }

// MeterID is the meter a Meter action names.
func (a *Action) MeterID() uint32 { return a.Val32 }

// RecircID is the recirc_id a Recirc action names.
func (a *Action) RecircID() uint32 { return a.Val32 }

// ControllerArg is the reason/arg word ControllerAction stored.
func (a *Action) ControllerArg() uint32 { return a.Val32 }

// ControllerCookie is the cookie ControllerAction stored.
func (a *Action) ControllerCookie() uint64 { return binary.BigEndian.Uint64(a.Addr[:8]) }

// ControllerMetadata is the metadata ControllerAction stored.
func (a *Action) ControllerMetadata() uint64 { return binary.BigEndian.Uint64(a.Addr[8:]) }

// WithControllerContext returns the Controller action a with ctx added: an
// id the upcall side gave to what else its packet-ins carry (registers,
// userdata), handed back in ControllerPacket.Context; 0 is none.
func (a Action) WithControllerContext(ctx uint32) Action {
	a.Val16, a.Val16b = uint16(ctx>>16), uint16(ctx)
	return a
}

// ControllerContext is the id WithControllerContext stored.
func (a *Action) ControllerContext() uint32 { return uint32(a.Val16)<<16 | uint32(a.Val16b) }

// Package header names the protocol numbers and header offsets that the
// datapath, the drivers and the OpenFlow layer all read packets by, so a
// frame is parsed with one vocabulary instead of a private copy of
// 0x86dd and "l3+8" in every package. It depends on nothing; every
// package that touches packet bytes may import it.
//
// Offsets are from the start of the header they name (an IPv4 offset is
// added to the IPv4 header's position in the frame, not the frame's).
package header

// EtherTypes (IEEE 802 numbers, as in the Ethernet type/length field).
const (
	// EtherTypeMin is the smallest type value: below it the field is an
	// 802.3 length.
	EtherTypeMin = 0x0600
	// EtherType8023 is the type Open vSwitch gives an 802.3 frame with no
	// SNAP type; this switch keys such frames the same way.
	EtherType8023 = 0x05ff

	EtherTypeIPv4 = 0x0800
	EtherTypeARP  = 0x0806
	// EtherTypeRARP is reverse ARP: the ARP layout, keyed like ARP (OVN
	// sends RARP announcements and matches them).
	EtherTypeRARP = 0x8035
	// EtherTypeTEB (transparent Ethernet bridging) says an Ethernet frame
	// follows: the protocol of a Geneve or NVGRE payload.
	EtherTypeTEB       = 0x6558
	EtherTypeVLAN      = 0x8100 // 802.1Q customer tag
	EtherTypeIPv6      = 0x86dd
	EtherTypeMPLS      = 0x8847
	EtherTypeMPLSMcast = 0x8848
	EtherTypeQinQ      = 0x88a8 // 802.1ad service tag
	EtherTypePBB       = 0x88e7 // 802.1ah I-TAG
	// EtherTypeQinQOld is the pre-802.1ad service tag some switches still
	// send; accepted as an outer tag only.
	EtherTypeQinQOld = 0x9100
)

// IP protocol numbers (IPv4 protocol, IPv6 next header).
const (
	IPProtoHopByHop = 0
	IPProtoICMP     = 1
	IPProtoTCP      = 6
	IPProtoUDP      = 17
	IPProtoRouting  = 43
	IPProtoFragment = 44
	IPProtoESP      = 50
	IPProtoAH       = 51
	IPProtoICMPv6   = 58
	IPProtoNoNext   = 59
	IPProtoDstOpts  = 60
	IPProtoSCTP     = 132
)

// Ethernet.
const (
	EthernetLen     = 14 // destination, source, type
	EthernetDstOff  = 0
	EthernetSrcOff  = 6
	EthernetTypeOff = 12
	VLANTagLen      = 4 // TPID and TCI
)

// IPv4 (RFC 791), without options.
const (
	IPv4MinLen      = 20
	IPv4TOSOff      = 1
	IPv4TotalLenOff = 2
	IPv4IDOff       = 4
	IPv4FragOff     = 6
	IPv4TTLOff      = 8
	IPv4ProtoOff    = 9
	IPv4ChecksumOff = 10
	IPv4SrcOff      = 12
	IPv4DstOff      = 16
)

// IPv6 (RFC 8200) fixed header.
const (
	IPv6Len           = 40
	IPv6PayloadLenOff = 4
	IPv6NextHeaderOff = 6
	IPv6HopLimitOff   = 7
	IPv6SrcOff        = 8
	IPv6DstOff        = 24
)

// ARP (RFC 826) for Ethernet and IPv4, the only kind a flow key describes.
const (
	ARPLen    = 28
	ARPOpOff  = 6
	ARPSHAOff = 8  // sender hardware address
	ARPSPAOff = 14 // sender protocol address
	ARPTHAOff = 18 // target hardware address
	ARPTPAOff = 24 // target protocol address
)

// Transport headers. TCP, UDP and SCTP all start with the two ports; ICMP
// and ICMPv6 with type and code.
const (
	L4SrcPortOff = 0
	L4DstPortOff = 2
	ICMPTypeOff  = 0
	ICMPCodeOff  = 1

	UDPLen            = 8
	UDPLengthOff      = 4
	UDPChecksumOff    = 6
	TCPMinLen         = 20
	TCPSeqOff         = 4
	TCPDataOffOff     = 12 // data offset in the high nibble
	TCPFlagsOff       = 13
	TCPChecksumOff    = 16
	SCTPCommonLen     = 12
	SCTPChecksumOff   = 8
	ICMPChecksumOff   = 2
	ICMPv6ChecksumOff = 2
)

// ICMPv6 neighbour discovery (RFC 4861): the two messages whose target and
// link-layer options a flow key carries, read by extraction, rewritten by
// the set-field actions and named by OpenFlow match prerequisites.
const (
	ICMPv6NeighborSolicit = 135
	ICMPv6NeighborAdvert  = 136
	NDTargetOff           = 8  // target address within the message
	NDOptionsOff          = 24 // first option within the message
	NDOptSourceLLAddr     = 1
	NDOptTargetLLAddr     = 2
)

package ofproto

import (
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Match × packet type, from OpenFlow 1.3.5 §7.2.3.7 (table 12, the OXM
// fields and their prerequisites) and §7.2.3.6 ("the switch must reject
// a flow entry whose match has a field without its prerequisites,
// OFPBMC_BAD_PREREQ"). Every field is installed (with its prerequisites)
// through the OpenFlow channel, and every packet type goes through the
// datapath: the flow forwards exactly the packet types it applies to and,
// with another value, none. Without its prerequisites (or with a wrong
// one) the flow-mod is refused.

var (
	cfIP4Src, cfIP4Dst = net.IPv4(198, 18, 0, 1).To4(), net.IPv4(198, 18, 0, 2).To4()
	cfIP6Src           = net.ParseIP("fd00::1")
	cfIP6Dst           = net.ParseIP("fd00::2")
	cfNDTarget         = net.ParseIP("fd00::99")
	cfSLL              = net.HardwareAddr{2, 0, 0, 0, 0, 0x51}
	cfTLL              = net.HardwareAddr{2, 0, 0, 0, 0, 0x52}
)

func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return slices.Clone(buf.Bytes())
}

func cfEth(typ layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{DstMAC: mac2, SrcMAC: mac1, EthernetType: typ}
}

// cfIPv4 is the IPv4 header of the IPv4 packet types: DSCP 10, ECN 1.
func cfIPv4(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TTL: 64, TOS: 10<<2 | 1, Protocol: proto, SrcIP: cfIP4Src, DstIP: cfIP4Dst}
}

// cfIPv6 is the IPv6 header of the IPv6 packet types: DSCP 12, ECN 2,
// flow label 0x12345.
func cfIPv6(next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, TrafficClass: 12<<2 | 2, FlowLabel: 0x12345,
		NextHeader: next, SrcIP: cfIP6Src, DstIP: cfIP6Dst}
}

// cfFrames builds one frame of every packet type the fields below apply
// to. Ports: TCP 1001→2001, UDP 1000→2000, SCTP 1002→2002.
func cfFrames(t *testing.T) map[string][]byte {
	pay := gopacket.Payload(make([]byte, 16))
	fs := map[string][]byte{}
	ip := cfIPv4(layers.IPProtocolUDP)
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	fs["udp4"] = serialize(t, cfEth(layers.EthernetTypeIPv4), ip, udp, pay)

	ip = cfIPv4(layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: 1001, DstPort: 2001, Seq: 1, Window: 100, SYN: true}
	tcp.SetNetworkLayerForChecksum(ip)
	fs["tcp4"] = serialize(t, cfEth(layers.EthernetTypeIPv4), ip, tcp, pay)

	// SCTP common header (RFC 9260 §3.1); the switch does not check the
	// CRC32c.
	sctp := make([]byte, 12+16)
	binary.BigEndian.PutUint16(sctp[0:], 1002)
	binary.BigEndian.PutUint16(sctp[2:], 2002)
	fs["sctp4"] = serialize(t, cfEth(layers.EthernetTypeIPv4), cfIPv4(layers.IPProtocolSCTP), gopacket.Payload(sctp))

	fs["icmp4"] = serialize(t, cfEth(layers.EthernetTypeIPv4), cfIPv4(layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 1}, pay)

	fs["arp"] = serialize(t, cfEth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
		SourceHwAddress: mac1, SourceProtAddress: cfIP4Src, DstHwAddress: make([]byte, 6), DstProtAddress: cfIP4Dst})

	ip6 := cfIPv6(layers.IPProtocolUDP)
	udp = &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip6)
	fs["udp6"] = serialize(t, cfEth(layers.EthernetTypeIPv6), ip6, udp, pay)

	ip6 = cfIPv6(layers.IPProtocolTCP)
	tcp = &layers.TCP{SrcPort: 1001, DstPort: 2001, Seq: 1, Window: 100, SYN: true}
	tcp.SetNetworkLayerForChecksum(ip6)
	fs["tcp6"] = serialize(t, cfEth(layers.EthernetTypeIPv6), ip6, tcp, pay)

	ip6 = cfIPv6(layers.IPProtocolICMPv6)
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
	ic.SetNetworkLayerForChecksum(ip6)
	fs["icmp6"] = serialize(t, cfEth(layers.EthernetTypeIPv6), ip6, ic, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 1}, pay)

	ip6 = cfIPv6(layers.IPProtocolICMPv6)
	ic = &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(135, 0)}
	ic.SetNetworkLayerForChecksum(ip6)
	fs["ns6"] = serialize(t, cfEth(layers.EthernetTypeIPv6), ip6, ic, &layers.ICMPv6NeighborSolicitation{TargetAddress: cfNDTarget,
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: cfSLL}}})

	ip6 = cfIPv6(layers.IPProtocolICMPv6)
	ic = &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(136, 0)}
	ic.SetNetworkLayerForChecksum(ip6)
	fs["na6"] = serialize(t, cfEth(layers.EthernetTypeIPv6), ip6, ic, &layers.ICMPv6NeighborAdvertisement{TargetAddress: cfNDTarget,
		Flags: 0x60, Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: cfTLL}}})

	// IPv6 with a hop-by-hop options header before UDP.
	ip6 = cfIPv6(layers.IPProtocolIPv6HopByHop)
	hbh := []byte{byte(layers.IPProtocolUDP), 0, 1, 4, 0, 0, 0, 0} // PadN
	udph := make([]byte, 8+16)
	binary.BigEndian.PutUint16(udph[0:], 1000)
	binary.BigEndian.PutUint16(udph[2:], 2000)
	binary.BigEndian.PutUint16(udph[4:], uint16(len(udph)))
	fs["hbh6"] = serialize(t, cfEth(layers.EthernetTypeIPv6), ip6, gopacket.Payload(append(hbh, udph...)))

	// 802.1Q VID 10 PCP 3 over the IPv4 UDP packet.
	ip = cfIPv4(layers.IPProtocolUDP)
	udp = &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	fs["vlan"] = serialize(t, cfEth(layers.EthernetTypeDot1Q),
		&layers.Dot1Q{Priority: 3, VLANIdentifier: 10, Type: layers.EthernetTypeIPv4}, ip, udp, pay)

	// MPLS label 100, TC 5, bottom of stack, over IPv4.
	fs["mpls"] = serialize(t, cfEth(layers.EthernetTypeMPLSUnicast),
		&layers.MPLS{Label: 100, TrafficClass: 5, StackBottom: true, TTL: 64}, cfIPv4(layers.IPProtocolUDP), pay)

	// 802.1ah I-TAG with I-SID 0x123456 over a customer frame.
	itag := make([]byte, 4+14+20)
	binary.BigEndian.PutUint32(itag, 0x123456)
	copy(itag[4:], mac2)
	copy(itag[10:], mac1)
	binary.BigEndian.PutUint16(itag[16:], 0x0800)
	fs["pbb"] = serialize(t, cfEth(0x88e7), gopacket.Payload(itag))
	return fs
}

func oxmBytes(f ofpwire.XMType, b []byte) ofpwire.OXM { return ofpwire.NewOXM(f, slices.Clone(b)) }

// Prerequisite sets (table 12), as OXMs in front of the field.
var (
	pIPv4   = []ofpwire.OXM{ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x0800)}
	pIPv6   = []ofpwire.OXM{ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x86dd)}
	pARP    = []ofpwire.OXM{ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x0806)}
	pTCP4   = append(slices.Clone(pIPv4), ofpwire.OXMUint(ofpwire.XMTypeIPProto, 6))
	pUDP4   = append(slices.Clone(pIPv4), ofpwire.OXMUint(ofpwire.XMTypeIPProto, 17))
	pSCTP4  = append(slices.Clone(pIPv4), ofpwire.OXMUint(ofpwire.XMTypeIPProto, 132))
	pTCP6   = append(slices.Clone(pIPv6), ofpwire.OXMUint(ofpwire.XMTypeIPProto, 6))
	pUDP6   = append(slices.Clone(pIPv6), ofpwire.OXMUint(ofpwire.XMTypeIPProto, 17))
	pICMP4  = append(slices.Clone(pIPv4), ofpwire.OXMUint(ofpwire.XMTypeIPProto, 1))
	pICMP6  = append(slices.Clone(pIPv6), ofpwire.OXMUint(ofpwire.XMTypeIPProto, 58))
	pNS     = append(slices.Clone(pICMP6), ofpwire.OXMUint(ofpwire.XMTypeICMPv6Type, 135))
	pNA     = append(slices.Clone(pICMP6), ofpwire.OXMUint(ofpwire.XMTypeICMPv6Type, 136))
	pMPLS   = []ofpwire.OXM{ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x8847)}
	pVLAN   = []ofpwire.OXM{ofpwire.OXMUint(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent)|10)}
	allIPv4 = []string{"udp4", "tcp4", "sctp4", "icmp4"}
)

// matchCase is one field: installed after prereq it forwards exactly the
// packet types in hits; other (a different value) forwards none.
type matchCase struct {
	name        string
	prereq      []ofpwire.OXM
	field       ofpwire.OXM
	other       ofpwire.OXM
	hits        []string
	noPrereq    bool // the field has no prerequisite of its own
	wrongPrereq []ofpwire.OXM
}

func matchCases() []matchCase {
	u := ofpwire.OXMUint
	ip6 := func(f ofpwire.XMType, ip net.IP) ofpwire.OXM { return oxmBytes(f, ip.To16()) }
	ip4 := func(f ofpwire.XMType, ip net.IP) ofpwire.OXM { return oxmBytes(f, ip.To4()) }
	mac := func(f ofpwire.XMType, m net.HardwareAddr) ofpwire.OXM { return oxmBytes(f, m) }
	all := []string{"udp4", "tcp4", "sctp4", "icmp4", "arp", "udp6", "tcp6", "icmp6", "ns6", "na6", "hbh6", "vlan", "mpls", "pbb"}
	untagged := slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == "vlan" })
	return []matchCase{
		{name: "eth_dst", field: mac(ofpwire.XMTypeEthDst, mac2), other: mac(ofpwire.XMTypeEthDst, mac1), hits: all, noPrereq: true},
		{name: "eth_src", field: mac(ofpwire.XMTypeEthSrc, mac1), other: mac(ofpwire.XMTypeEthSrc, mac2), hits: all, noPrereq: true},
		{name: "eth_type", field: u(ofpwire.XMTypeEthType, 0x0806), other: u(ofpwire.XMTypeEthType, 0x88cc), hits: []string{"arp"}, noPrereq: true},
		{name: "vlan_vid", field: u(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent)|10), other: u(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent)|11), hits: []string{"vlan"}, noPrereq: true},
		{name: "vlan_vid=none", field: u(ofpwire.XMTypeVlanID, 0), other: ofpwire.OXMUintMasked(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent), uint64(ofpwire.VIDPresent)|0xfff), hits: untagged, noPrereq: true},
		{name: "vlan_pcp", prereq: pVLAN, field: u(ofpwire.XMTypeVlanPCP, 3), other: u(ofpwire.XMTypeVlanPCP, 4), hits: []string{"vlan"},
			wrongPrereq: []ofpwire.OXM{u(ofpwire.XMTypeVlanID, 0)}},
		{name: "ip_dscp/ipv4", prereq: pIPv4, field: u(ofpwire.XMTypeIPDSCP, 10), other: u(ofpwire.XMTypeIPDSCP, 11), hits: append(slices.Clone(allIPv4), "vlan"), wrongPrereq: pARP},
		{name: "ip_dscp/ipv6", prereq: pIPv6, field: u(ofpwire.XMTypeIPDSCP, 12), other: u(ofpwire.XMTypeIPDSCP, 10), hits: []string{"udp6", "tcp6", "icmp6", "ns6", "na6", "hbh6"}},
		{name: "ip_ecn/ipv4", prereq: pIPv4, field: u(ofpwire.XMTypeIPECN, 1), other: u(ofpwire.XMTypeIPECN, 2), hits: append(slices.Clone(allIPv4), "vlan")},
		{name: "ip_ecn/ipv6", prereq: pIPv6, field: u(ofpwire.XMTypeIPECN, 2), other: u(ofpwire.XMTypeIPECN, 1), hits: []string{"udp6", "tcp6", "icmp6", "ns6", "na6", "hbh6"}},
		{name: "ip_proto/ipv4", prereq: pIPv4, field: u(ofpwire.XMTypeIPProto, 6), other: u(ofpwire.XMTypeIPProto, 7), hits: []string{"tcp4"}, wrongPrereq: pARP},
		{name: "ip_proto/ipv6", prereq: pIPv6, field: u(ofpwire.XMTypeIPProto, 17), other: u(ofpwire.XMTypeIPProto, 7), hits: []string{"udp6", "hbh6"}},
		{name: "ipv4_src", prereq: pIPv4, field: ip4(ofpwire.XMTypeIPv4Src, cfIP4Src), other: ip4(ofpwire.XMTypeIPv4Src, cfIP4Dst), hits: append(slices.Clone(allIPv4), "vlan"), wrongPrereq: pARP},
		{name: "ipv4_dst", prereq: pIPv4, field: ip4(ofpwire.XMTypeIPv4Dst, cfIP4Dst), other: ip4(ofpwire.XMTypeIPv4Dst, cfIP4Src), hits: append(slices.Clone(allIPv4), "vlan"), wrongPrereq: pIPv6},
		{name: "ipv4_src/masked", prereq: pIPv4, field: ofpwire.NewMaskedOXM(ofpwire.XMTypeIPv4Src, []byte{198, 18, 0, 0}, []byte{255, 254, 0, 0}),
			other: ofpwire.NewMaskedOXM(ofpwire.XMTypeIPv4Src, []byte{10, 0, 0, 0}, []byte{255, 0, 0, 0}), hits: append(slices.Clone(allIPv4), "vlan")},
		{name: "tcp_src/ipv4", prereq: pTCP4, field: u(ofpwire.XMTypeTCPSrc, 1001), other: u(ofpwire.XMTypeTCPSrc, 1000), hits: []string{"tcp4"}, wrongPrereq: pUDP4},
		{name: "tcp_dst/ipv6", prereq: pTCP6, field: u(ofpwire.XMTypeTCPDst, 2001), other: u(ofpwire.XMTypeTCPDst, 2000), hits: []string{"tcp6"}, wrongPrereq: pIPv6},
		{name: "udp_src/ipv4", prereq: pUDP4, field: u(ofpwire.XMTypeUDPSrc, 1000), other: u(ofpwire.XMTypeUDPSrc, 1001), hits: []string{"udp4", "vlan"}, wrongPrereq: pTCP4},
		{name: "udp_dst/ipv6", prereq: pUDP6, field: u(ofpwire.XMTypeUDPDst, 2000), other: u(ofpwire.XMTypeUDPDst, 2001), hits: []string{"udp6", "hbh6"}, wrongPrereq: pTCP6},
		{name: "sctp_src", prereq: pSCTP4, field: u(ofpwire.XMTypeSCTPSrc, 1002), other: u(ofpwire.XMTypeSCTPSrc, 1000), hits: []string{"sctp4"}, wrongPrereq: pUDP4},
		{name: "sctp_dst", prereq: pSCTP4, field: u(ofpwire.XMTypeSCTPDst, 2002), other: u(ofpwire.XMTypeSCTPDst, 2000), hits: []string{"sctp4"}, wrongPrereq: pTCP4},
		{name: "icmpv4_type", prereq: pICMP4, field: u(ofpwire.XMTypeICMPv4Type, 8), other: u(ofpwire.XMTypeICMPv4Type, 0), hits: []string{"icmp4"}, wrongPrereq: pICMP6},
		{name: "icmpv4_code", prereq: pICMP4, field: u(ofpwire.XMTypeICMPv4Code, 0), other: u(ofpwire.XMTypeICMPv4Code, 1), hits: []string{"icmp4"}, wrongPrereq: pUDP4},
		{name: "arp_op", prereq: pARP, field: u(ofpwire.XMTypeARPOpcode, 1), other: u(ofpwire.XMTypeARPOpcode, 2), hits: []string{"arp"}, wrongPrereq: pIPv4},
		{name: "arp_spa", prereq: pARP, field: ip4(ofpwire.XMTypeARPSPA, cfIP4Src), other: ip4(ofpwire.XMTypeARPSPA, cfIP4Dst), hits: []string{"arp"}, wrongPrereq: pIPv4},
		{name: "arp_tpa", prereq: pARP, field: ip4(ofpwire.XMTypeARPTPA, cfIP4Dst), other: ip4(ofpwire.XMTypeARPTPA, cfIP4Src), hits: []string{"arp"}, wrongPrereq: pIPv4},
		{name: "arp_sha", prereq: pARP, field: mac(ofpwire.XMTypeARPSHA, mac1), other: mac(ofpwire.XMTypeARPSHA, mac2), hits: []string{"arp"}, wrongPrereq: pIPv6},
		{name: "arp_tha", prereq: pARP, field: mac(ofpwire.XMTypeARPTHA, make(net.HardwareAddr, 6)), other: mac(ofpwire.XMTypeARPTHA, mac2), hits: []string{"arp"}, wrongPrereq: pIPv4},
		{name: "ipv6_src", prereq: pIPv6, field: ip6(ofpwire.XMTypeIPv6Src, cfIP6Src), other: ip6(ofpwire.XMTypeIPv6Src, cfIP6Dst), hits: []string{"udp6", "tcp6", "icmp6", "ns6", "na6", "hbh6"}, wrongPrereq: pIPv4},
		{name: "ipv6_dst", prereq: pIPv6, field: ip6(ofpwire.XMTypeIPv6Dst, cfIP6Dst), other: ip6(ofpwire.XMTypeIPv6Dst, cfIP6Src), hits: []string{"udp6", "tcp6", "icmp6", "ns6", "na6", "hbh6"}, wrongPrereq: pIPv4},
		{name: "ipv6_flabel", prereq: pIPv6, field: u(ofpwire.XMTypeIPv6FLabel, 0x12345), other: u(ofpwire.XMTypeIPv6FLabel, 0x12346), hits: []string{"udp6", "tcp6", "icmp6", "ns6", "na6", "hbh6"}, wrongPrereq: pIPv4},
		{name: "icmpv6_type", prereq: pICMP6, field: u(ofpwire.XMTypeICMPv6Type, 128), other: u(ofpwire.XMTypeICMPv6Type, 129), hits: []string{"icmp6"}, wrongPrereq: pICMP4},
		{name: "icmpv6_code", prereq: pICMP6, field: u(ofpwire.XMTypeICMPv6Code, 0), other: u(ofpwire.XMTypeICMPv6Code, 1), hits: []string{"icmp6", "ns6", "na6"}, wrongPrereq: pUDP6},
		{name: "ipv6_nd_target/ns", prereq: pNS, field: ip6(ofpwire.XMTypeIPv6NDTarget, cfNDTarget), other: ip6(ofpwire.XMTypeIPv6NDTarget, cfIP6Dst), hits: []string{"ns6"}, wrongPrereq: pICMP6},
		{name: "ipv6_nd_target/na", prereq: pNA, field: ip6(ofpwire.XMTypeIPv6NDTarget, cfNDTarget), other: ip6(ofpwire.XMTypeIPv6NDTarget, cfIP6Dst), hits: []string{"na6"},
			wrongPrereq: append(slices.Clone(pICMP6), u(ofpwire.XMTypeICMPv6Type, 128))},
		{name: "ipv6_nd_sll", prereq: pNS, field: mac(ofpwire.XMTypeIPv6NDSLL, cfSLL), other: mac(ofpwire.XMTypeIPv6NDSLL, cfTLL), hits: []string{"ns6"}, wrongPrereq: pNA},
		{name: "ipv6_nd_tll", prereq: pNA, field: mac(ofpwire.XMTypeIPv6NDTLL, cfTLL), other: mac(ofpwire.XMTypeIPv6NDTLL, cfSLL), hits: []string{"na6"}, wrongPrereq: pNS},
		{name: "mpls_label", prereq: pMPLS, field: u(ofpwire.XMTypeMPLSLabel, 100), other: u(ofpwire.XMTypeMPLSLabel, 101), hits: []string{"mpls"}, wrongPrereq: pIPv4},
		{name: "mpls_tc", prereq: pMPLS, field: u(ofpwire.XMTypeMPLSTC, 5), other: u(ofpwire.XMTypeMPLSTC, 4), hits: []string{"mpls"}, wrongPrereq: pIPv4},
		{name: "mpls_bos", prereq: pMPLS, field: u(ofpwire.XMTypeMPLSBOS, 1), other: u(ofpwire.XMTypeMPLSBOS, 0), hits: []string{"mpls"}, wrongPrereq: pIPv6},
		{name: "pbb_isid", prereq: []ofpwire.OXM{u(ofpwire.XMTypeEthType, 0x88e7)}, field: u(ofpwire.XMTypePBBISID, 0x123456), other: u(ofpwire.XMTypePBBISID, 0x123457), hits: []string{"pbb"}, wrongPrereq: pMPLS},
		{name: "ipv6_exthdr", prereq: pIPv6, field: ofpwire.OXMUintMasked(ofpwire.XMTypeIPv6ExtHeader, 0x40, 0x40), other: ofpwire.OXMUintMasked(ofpwire.XMTypeIPv6ExtHeader, 0x08, 0x08), hits: []string{"hbh6"}, wrongPrereq: pIPv4},
	}
}

// matchFlow is table 0, priority 100: in_port=1 and ms → output:2.
func matchFlow(ms ...ofpwire.OXM) *ofpwire.FlowMod {
	fm := flowIn(0, 100, 1, applyOut(2))
	for _, o := range ms {
		fm.Match.Add(o)
	}
	return fm
}

func TestConformanceMatchPacketTypes(t *testing.T) {
	frames := cfFrames(t)
	for _, c := range matchCases() {
		t.Run(c.name, func(t *testing.T) {
			tb := newTestBridge(t)
			check := func(field ofpwire.OXM, hits []string) {
				t.Helper()
				tb.mustRequest(t, &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll),
					BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
				tb.mustRequest(t, matchFlow(append(slices.Clone(c.prereq), field)...))
				for _, name := range slices.Sorted(mapKeys(frames)) {
					got := tb.forward(tb.p1, tb.p2, frames[name])
					want := slices.Contains(hits, name)
					if want != (len(got) == 1) {
						t.Errorf("%s: %s packet forwarded %d times, want match=%v", fieldText(field), name, len(got), want)
					}
				}
			}
			check(c.field, c.hits)
			check(c.other, nil)
		})
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func fieldText(o ofpwire.OXM) string {
	return fmt.Sprintf("field %d=%x/%x", o.Field, o.Value, o.Mask)
}

// §7.2.3.6: without its prerequisites, or with a prerequisite of another
// value, the flow-mod fails with OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ and
// installs nothing.
func TestConformanceMatchPrerequisites(t *testing.T) {
	tb := newTestBridge(t)
	for _, c := range matchCases() {
		if c.noPrereq {
			tb.mustRequest(t, matchFlow(c.field))
			continue
		}
		tb.c.wantError(matchFlow(c.field), ofpwire.ETBadMatch, ofpwire.BMCBadPrereq)
		// Every prerequisite but the last one (the field's own) is not
		// enough either.
		if len(c.prereq) > 1 {
			tb.c.wantError(matchFlow(append(slices.Clone(c.prereq[:len(c.prereq)-1]), c.field)...), ofpwire.ETBadMatch, ofpwire.BMCBadPrereq)
		}
		if c.wrongPrereq != nil {
			tb.c.wantError(matchFlow(append(slices.Clone(c.wrongPrereq), c.field)...), ofpwire.ETBadMatch, ofpwire.BMCBadPrereq)
		}
	}
	fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply)
	n := 0
	for _, c := range matchCases() {
		if c.noPrereq {
			n++
		}
	}
	if len(fs.Flows) != n {
		t.Fatalf("%d flows installed, want only the %d without prerequisites", len(fs.Flows), n)
	}
}

// METADATA (maskable, no prerequisite) matches what write-metadata left
// for the next table; TUNNEL_ID of a packet that came in on no tunnel is
// 0; IN_PHY_PORT, with its prerequisite IN_PORT, is the in_port here.
func TestConformanceMatchPipelineFields(t *testing.T) {
	frames := cfFrames(t)
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 10, 1, &ofpwire.InstrWriteMetadata{Metadata: 0xab00, Mask: 0xff00}, &ofpwire.InstrGotoTable{TableID: 1}))
	md := flowIn(1, 10, 0, applyOut(2))
	md.Match.Add(ofpwire.OXMUintMasked(ofpwire.XMTypeMetadata, 0xab00, 0xff00))
	tb.mustRequest(t, md)
	if got := tb.forward(tb.p1, tb.p2, frames["udp4"]); len(got) != 1 {
		t.Fatalf("metadata=0xab00/0xff00 in table 1: %d frames out, want 1", len(got))
	}
	tb.mustRequest(t, &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll), BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	tun := matchFlow(ofpwire.OXMUint(ofpwire.XMTypeTunnelID, 0), ofpwire.OXMUint(ofpwire.XMTypeInPhyPort, 1))
	tb.mustRequest(t, tun)
	if got := tb.forward(tb.p1, tb.p2, frames["arp"]); len(got) != 1 {
		t.Fatalf("tunnel_id=0,in_phy_port=1 on a plain port: %d frames out, want 1", len(got))
	}
	phy := flowIn(0, 10, 0, applyOut(2)) // in_phy_port without in_port
	phy.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPhyPort, 1))
	tb.c.wantError(phy, ofpwire.ETBadMatch, ofpwire.BMCBadPrereq)
}

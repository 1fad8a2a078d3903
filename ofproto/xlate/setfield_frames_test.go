package xlate

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/internal/checksumref"
)

// Frame-level tests of set-field on every field OpenFlow 1.3 lets it write
// (§7.2.5: every OXM_OF_* field of table 12 but IN_PORT, IN_PHY_PORT and
// METADATA; IPV6_EXTHDR, a pseudo-field, stays refused): a real frame goes
// through translation and the datapath's rewrites, and gopacket reads the
// result. Each case checks the field, every checksum that covers it, and
// that the datapath's key after the action is what the output frame
// extracts to.

var (
	sfMAC1 = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	sfMAC2 = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	sfV4a  = net.IPv4(198, 18, 0, 1).To4()
	sfV4b  = net.IPv4(198, 18, 0, 2).To4()
	sfV6a  = net.ParseIP("2001:db8::1")
	sfV6b  = net.ParseIP("2001:db8::2")
)

func sfEth(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: sfMAC1, DstMAC: sfMAC2, EthernetType: t}
}

func sfIPv4(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TOS: 0x28, TTL: 64, Id: 7, Protocol: proto, SrcIP: sfV4a, DstIP: sfV4b}
}

func sfIPv6(nh layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, TrafficClass: 0x28, FlowLabel: 0x12345, HopLimit: 64, NextHeader: nh, SrcIP: sfV6a, DstIP: sfV6b}
}

// The frames the cases start from.
func frameTCP4(t testing.TB) []byte {
	ip := sfIPv4(layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: 1000, DstPort: 80, Seq: 1, Window: 100, ACK: true}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, sfEth(layers.EthernetTypeIPv4), ip, tcp, gopacket.Payload("tcp payload 0123456789"))
}

func frameUDP4(t testing.TB) []byte {
	ip := sfIPv4(layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 1000, DstPort: 53}
	_ = u.SetNetworkLayerForChecksum(ip)
	return serialize(t, sfEth(layers.EthernetTypeIPv4), ip, u, gopacket.Payload("udp payload 0123456789"))
}

func frameVLANUDP4(t testing.TB) []byte {
	ip := sfIPv4(layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 1000, DstPort: 53}
	_ = u.SetNetworkLayerForChecksum(ip)
	return serialize(t, sfEth(layers.EthernetTypeDot1Q), &layers.Dot1Q{Priority: 2, VLANIdentifier: 10, Type: layers.EthernetTypeIPv4},
		ip, u, gopacket.Payload("tagged udp payload"))
}

func frameSCTP4(t testing.TB) []byte {
	return serialize(t, sfEth(layers.EthernetTypeIPv4), sfIPv4(layers.IPProtocolSCTP),
		&layers.SCTP{SrcPort: 5000, DstPort: 6000, VerificationTag: 0xabcdef01},
		&layers.SCTPData{SCTPChunk: layers.SCTPChunk{Type: layers.SCTPChunkTypeData}, TSN: 1, BeginFragment: true, EndFragment: true},
		gopacket.Payload("sctp payload"))
}

func frameICMP4(t testing.TB) []byte {
	return serialize(t, sfEth(layers.EthernetTypeIPv4), sfIPv4(layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 2}, gopacket.Payload("ping"))
}

func frameARP(t testing.TB) []byte {
	return serialize(t, sfEth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: sfMAC1, SourceProtAddress: sfV4a,
		DstHwAddress: make([]byte, 6), DstProtAddress: sfV4b})
}

func frameTCP6(t testing.TB) []byte {
	ip := sfIPv6(layers.IPProtocolTCP)
	tcp := &layers.TCP{SrcPort: 1000, DstPort: 80, Seq: 1, Window: 100, ACK: true}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	return serialize(t, sfEth(layers.EthernetTypeIPv6), ip, tcp, gopacket.Payload("tcp6 payload"))
}

func frameUDP6(t testing.TB) []byte {
	ip := sfIPv6(layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 1000, DstPort: 53}
	_ = u.SetNetworkLayerForChecksum(ip)
	return serialize(t, sfEth(layers.EthernetTypeIPv6), ip, u, gopacket.Payload("udp6 payload"))
}

func frameICMP6(t testing.TB) []byte {
	ip := sfIPv6(layers.IPProtocolICMPv6)
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
	_ = ic.SetNetworkLayerForChecksum(ip)
	return serialize(t, sfEth(layers.EthernetTypeIPv6), ip, ic, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 2})
}

func frameND(t testing.TB, typ uint8) []byte {
	ip := sfIPv6(layers.IPProtocolICMPv6)
	ip.HopLimit = 255
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
	_ = ic.SetNetworkLayerForChecksum(ip)
	var body gopacket.SerializableLayer
	if typ == header.ICMPv6NeighborSolicit {
		body = &layers.ICMPv6NeighborSolicitation{TargetAddress: sfV6b,
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: []byte(sfMAC1)}}}
	} else {
		body = &layers.ICMPv6NeighborAdvertisement{TargetAddress: sfV6b, Flags: 0x60,
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: []byte(sfMAC2)}}}
	}
	return serialize(t, sfEth(layers.EthernetTypeIPv6), ip, ic, body)
}

func frameMPLS(t testing.TB) []byte {
	ip := sfIPv4(layers.IPProtocolUDP)
	u := &layers.UDP{SrcPort: 1000, DstPort: 53}
	_ = u.SetNetworkLayerForChecksum(ip)
	return serialize(t, sfEth(layers.EthernetTypeMPLSUnicast), &layers.MPLS{Label: 100, TrafficClass: 1, StackBottom: true, TTL: 32},
		ip, u, gopacket.Payload("under a label"))
}

// framePBB is a backbone frame: B-DA, B-SA, I-TAG (type 0x88e7, TCI with
// I-SID 0x100), then the customer frame.
func framePBB(t testing.TB) []byte {
	inner := frameUDP4(t)
	f := append([]byte(nil), sfMAC2...)
	f = append(f, sfMAC1...)
	f = append(f, 0x88, 0xe7, 0x00, 0x00, 0x01, 0x00)
	return append(f, inner...)
}

// runFrame translates frame through one flow whose apply-actions are acts
// followed by output 2, runs the datapath actions on it, and returns the
// frame sent and the key the datapath held when sending it.
func runFrame(t *testing.T, frame []byte, acts ...ofpwire.Action) ([]byte, flow.Key) {
	t.Helper()
	if err := CheckActions(append(acts, out(2)), false); err != nil {
		t.Fatalf("actions refused: %v", err)
	}
	var key flow.Key
	var off flow.Offsets
	flow.Extract(frame, 1, &key, &off)
	var res datapath.UpcallResult
	if err := Translate(build(t, []flowSpec{{0, 1, nil, ins(apply(append(acts, out(2))...))}}), &key, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	p := loadFrame(t, frame, 1)
	defer p.Free()
	for i := range res.Actions {
		a := &res.Actions[i]
		if a.Kind == actions.Output {
			if a.Port != 2 {
				t.Fatalf("output to %d, want 2 (%v)", a.Port, res.Actions)
			}
			return append([]byte(nil), p.Data()...), p.Key
		}
		if !actions.Apply(a, p) {
			t.Fatalf("packet dropped by %v", a)
		}
	}
	t.Fatalf("no output in %v", res.Actions)
	return nil, flow.Key{}
}

// keyMatchesFrame checks that the datapath's key after the actions is the
// key of the frame it sent (the tunnel ID is metadata, not in the frame).
func keyMatchesFrame(t *testing.T, got []byte, k flow.Key) {
	t.Helper()
	var want flow.Key
	var off flow.Offsets
	flow.Extract(got, 1, &want, &off)
	want.TunnelID, want.Tun = k.TunnelID, k.Tun
	if !want.Equal(&k) {
		t.Fatalf("datapath key after the actions\n %+v\ndiffers from the sent frame's\n %+v", k, want)
	}
}

// onesComplement sums b as big-endian words from acc.
func onesComplement(acc uint64, b []byte) uint64 {
	for i := 0; i < len(b); i += 2 {
		w := uint64(b[i]) << 8
		if i+1 < len(b) {
			w |= uint64(b[i+1])
		}
		acc += w
	}
	return acc
}

func folds(acc uint64) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// checksumsOK verifies, with code independent of the datapath's, the IPv4
// header checksum and the transport checksum of the IP packet gopacket
// finds in frame (under VLAN tags or an MPLS label too).
func checksumsOK(t *testing.T, frame []byte) {
	t.Helper()
	checksumsOKAs(t, frame, 0)
}

// checksumsOKAs is checksumsOK for a transport header of protocol hdr
// under an IP header that may name another (an ip_proto rewrite keeps the
// old header); 0 takes the IP header's word for it.
func checksumsOKAs(t *testing.T, frame []byte, hdr layers.IPProtocol) {
	t.Helper()
	pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	var pseudo uint64
	var l4 []byte
	var proto layers.IPProtocol
	v6 := false
	if ip, ok := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4); ok {
		hdr := ip.Contents
		if folds(onesComplement(0, hdr)) != 0xffff {
			t.Fatalf("IPv4 header checksum wrong: %x", hdr)
		}
		if ip.Flags&layers.IPv4MoreFragments != 0 || ip.FragOffset != 0 {
			return
		}
		pseudo = onesComplement(0, hdr[12:20])
		l4, proto = ip.Payload, ip.Protocol
	} else if ip, ok := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
		pseudo = onesComplement(0, ip.Contents[8:40])
		l4, proto, v6 = ip.Payload, ip.NextHeader, true
	} else {
		return
	}
	pseudo += uint64(len(l4)) + uint64(proto)
	if hdr != 0 {
		proto = hdr
	}
	var sum uint16
	switch {
	case proto == layers.IPProtocolTCP && len(l4) >= 20, proto == layers.IPProtocolUDP && len(l4) >= 8,
		proto == layers.IPProtocolICMPv6 && v6 && len(l4) >= 4:
		if proto == layers.IPProtocolUDP && !v6 && l4[6] == 0 && l4[7] == 0 {
			return
		}
		sum = folds(onesComplement(pseudo, l4))
	case proto == layers.IPProtocolICMPv4 && !v6 && len(l4) >= 4:
		sum = folds(onesComplement(0, l4))
	case proto == layers.IPProtocolSCTP && len(l4) >= 12:
		c := append([]byte(nil), l4...)
		got := binary.LittleEndian.Uint32(c[8:])
		clear(c[8:12])
		if want := checksumref.CRC32c(c); got != want {
			t.Fatalf("SCTP CRC32c %#08x, want %#08x", got, want)
		}
		return
	default:
		return
	}
	if sum != 0xffff {
		t.Fatalf("protocol %d checksum wrong (sum %#04x): %x", proto, sum, l4)
	}
}

func mac(b ...byte) []byte { return b }

// setFieldCase is one set-field, the frame it is applied to and what
// gopacket must then read.
type setFieldCase struct {
	name  string
	field ofpwire.XMType
	value []byte
	frame func(testing.TB) []byte
	check func(t *testing.T, got []byte, pk gopacket.Packet)
}

func layerOf[L any](t *testing.T, pk gopacket.Packet, lt gopacket.LayerType) L {
	t.Helper()
	l, ok := pk.Layer(lt).(L)
	if !ok {
		t.Fatalf("no %v layer in %x", lt, pk.Data())
	}
	return l
}

func u16(v uint16) []byte { return []byte{byte(v >> 8), byte(v)} }

var setFieldCases = []setFieldCase{
	{"eth_dst", ofpwire.XMTypeEthDst, mac(2, 9, 9, 9, 9, 9), frameUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if e := layerOf[*layers.Ethernet](t, pk, layers.LayerTypeEthernet); !bytes.Equal(e.DstMAC, mac(2, 9, 9, 9, 9, 9)) {
			t.Fatalf("eth_dst %v", e.DstMAC)
		}
	}},
	{"eth_src", ofpwire.XMTypeEthSrc, mac(2, 8, 8, 8, 8, 8), frameUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if e := layerOf[*layers.Ethernet](t, pk, layers.LayerTypeEthernet); !bytes.Equal(e.SrcMAC, mac(2, 8, 8, 8, 8, 8)) {
			t.Fatalf("eth_src %v", e.SrcMAC)
		}
	}},
	{"eth_type IPv4 to a local experimental type", ofpwire.XMTypeEthType, u16(0x88b5), frameUDP4, func(t *testing.T, got []byte, pk gopacket.Packet) {
		if e := layerOf[*layers.Ethernet](t, pk, layers.LayerTypeEthernet); e.EthernetType != 0x88b5 {
			t.Fatalf("eth_type %#x", uint16(e.EthernetType))
		}
		if !bytes.Equal(got[14:], frameUDP4(t)[14:]) {
			t.Fatal("the bytes behind the Ethernet type changed")
		}
	}},
	{"eth_type behind a VLAN tag", ofpwire.XMTypeEthType, u16(0x0806), frameVLANUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if q := layerOf[*layers.Dot1Q](t, pk, layers.LayerTypeDot1Q); q.Type != layers.EthernetTypeARP || q.VLANIdentifier != 10 {
			t.Fatalf("tag %+v, want VID 10 over type 0x0806", q)
		}
	}},
	{"vlan_vid", ofpwire.XMTypeVlanID, u16(0x1000 | 77), frameVLANUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if q := layerOf[*layers.Dot1Q](t, pk, layers.LayerTypeDot1Q); q.VLANIdentifier != 77 || q.Priority != 2 {
			t.Fatalf("tag %+v, want VID 77 PCP 2", q)
		}
	}},
	{"vlan_pcp", ofpwire.XMTypeVlanPCP, []byte{6}, frameVLANUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if q := layerOf[*layers.Dot1Q](t, pk, layers.LayerTypeDot1Q); q.VLANIdentifier != 10 || q.Priority != 6 {
			t.Fatalf("tag %+v, want VID 10 PCP 6", q)
		}
	}},
	{"ip_dscp v4", ofpwire.XMTypeIPDSCP, []byte{46}, frameUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv4](t, pk, layers.LayerTypeIPv4); ip.TOS != 46<<2 {
			t.Fatalf("TOS %#x, want DSCP 46 with ECN 0", ip.TOS)
		}
	}},
	{"ip_dscp v6", ofpwire.XMTypeIPDSCP, []byte{12}, frameUDP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv6](t, pk, layers.LayerTypeIPv6); ip.TrafficClass != 12<<2 || ip.FlowLabel != 0x12345 {
			t.Fatalf("traffic class %#x label %#x", ip.TrafficClass, ip.FlowLabel)
		}
	}},
	{"ip_ecn", ofpwire.XMTypeIPECN, []byte{3}, frameTCP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv4](t, pk, layers.LayerTypeIPv4); ip.TOS != 0x28|3 {
			t.Fatalf("TOS %#x, want DSCP kept, ECN 3", ip.TOS)
		}
	}},
	{"ip_proto TCP to UDP (v4)", ofpwire.XMTypeIPProto, []byte{17}, frameTCP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv4](t, pk, layers.LayerTypeIPv4); ip.Protocol != layers.IPProtocolUDP {
			t.Fatalf("protocol %v", ip.Protocol)
		}
		if u := layerOf[*layers.UDP](t, pk, layers.LayerTypeUDP); u.SrcPort != 1000 || u.DstPort != 80 {
			t.Fatalf("ports %d→%d, want the TCP ports kept", u.SrcPort, u.DstPort)
		}
	}},
	{"ip_proto UDP to an unknown protocol (v4)", ofpwire.XMTypeIPProto, []byte{253}, frameUDP4, func(t *testing.T, got []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv4](t, pk, layers.LayerTypeIPv4); ip.Protocol != 253 {
			t.Fatalf("protocol %v", ip.Protocol)
		}
		// The UDP header stays, its checksum following the pseudo-header.
		if want := frameUDP4(t); !bytes.Equal(got[34:40], want[34:40]) || !bytes.Equal(got[42:], want[42:]) {
			t.Fatal("the UDP header or payload changed beyond the checksum")
		}
	}},
	{"ip_proto UDP to TCP (v6)", ofpwire.XMTypeIPProto, []byte{6}, frameUDP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv6](t, pk, layers.LayerTypeIPv6); ip.NextHeader != layers.IPProtocolTCP {
			t.Fatalf("next header %v", ip.NextHeader)
		}
	}},
	{"ipv4_src", ofpwire.XMTypeIPv4Src, []byte{198, 19, 1, 1}, frameTCP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv4](t, pk, layers.LayerTypeIPv4); !ip.SrcIP.Equal(net.IPv4(198, 19, 1, 1)) {
			t.Fatalf("src %v", ip.SrcIP)
		}
	}},
	{"ipv4_dst", ofpwire.XMTypeIPv4Dst, []byte{198, 19, 2, 2}, frameUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv4](t, pk, layers.LayerTypeIPv4); !ip.DstIP.Equal(net.IPv4(198, 19, 2, 2)) {
			t.Fatalf("dst %v", ip.DstIP)
		}
	}},
	{"tcp_src", ofpwire.XMTypeTCPSrc, u16(4444), frameTCP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.TCP](t, pk, layers.LayerTypeTCP); l.SrcPort != 4444 {
			t.Fatalf("port %d", l.SrcPort)
		}
	}},
	{"tcp_dst v6", ofpwire.XMTypeTCPDst, u16(8080), frameTCP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.TCP](t, pk, layers.LayerTypeTCP); l.DstPort != 8080 {
			t.Fatalf("port %d", l.DstPort)
		}
	}},
	{"udp_src", ofpwire.XMTypeUDPSrc, u16(5555), frameUDP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.UDP](t, pk, layers.LayerTypeUDP); l.SrcPort != 5555 {
			t.Fatalf("port %d", l.SrcPort)
		}
	}},
	{"udp_dst v6", ofpwire.XMTypeUDPDst, u16(5353), frameUDP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.UDP](t, pk, layers.LayerTypeUDP); l.DstPort != 5353 {
			t.Fatalf("port %d", l.DstPort)
		}
	}},
	{"sctp_src", ofpwire.XMTypeSCTPSrc, u16(7000), frameSCTP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.SCTP](t, pk, layers.LayerTypeSCTP); l.SrcPort != 7000 || l.DstPort != 6000 {
			t.Fatalf("ports %d→%d", l.SrcPort, l.DstPort)
		}
	}},
	{"sctp_dst", ofpwire.XMTypeSCTPDst, u16(7001), frameSCTP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.SCTP](t, pk, layers.LayerTypeSCTP); l.DstPort != 7001 || l.SrcPort != 5000 {
			t.Fatalf("ports %d→%d", l.SrcPort, l.DstPort)
		}
	}},
	{"icmpv4_type", ofpwire.XMTypeICMPv4Type, []byte{0}, frameICMP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ICMPv4](t, pk, layers.LayerTypeICMPv4); l.TypeCode.Type() != 0 {
			t.Fatalf("type %d", l.TypeCode.Type())
		}
	}},
	{"icmpv4_code", ofpwire.XMTypeICMPv4Code, []byte{5}, frameICMP4, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ICMPv4](t, pk, layers.LayerTypeICMPv4); l.TypeCode.Code() != 5 || l.TypeCode.Type() != 8 {
			t.Fatalf("type/code %v", l.TypeCode)
		}
	}},
	{"arp_op", ofpwire.XMTypeARPOpcode, u16(2), frameARP, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ARP](t, pk, layers.LayerTypeARP); l.Operation != 2 {
			t.Fatalf("op %d", l.Operation)
		}
	}},
	{"arp_spa", ofpwire.XMTypeARPSPA, []byte{198, 18, 9, 9}, frameARP, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ARP](t, pk, layers.LayerTypeARP); !bytes.Equal(l.SourceProtAddress, []byte{198, 18, 9, 9}) {
			t.Fatalf("spa %v", l.SourceProtAddress)
		}
	}},
	{"arp_tpa", ofpwire.XMTypeARPTPA, []byte{198, 18, 9, 8}, frameARP, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ARP](t, pk, layers.LayerTypeARP); !bytes.Equal(l.DstProtAddress, []byte{198, 18, 9, 8}) {
			t.Fatalf("tpa %v", l.DstProtAddress)
		}
	}},
	{"arp_sha", ofpwire.XMTypeARPSHA, mac(2, 7, 7, 7, 7, 7), frameARP, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ARP](t, pk, layers.LayerTypeARP); !bytes.Equal(l.SourceHwAddress, mac(2, 7, 7, 7, 7, 7)) {
			t.Fatalf("sha %v", l.SourceHwAddress)
		}
	}},
	{"arp_tha", ofpwire.XMTypeARPTHA, mac(2, 6, 6, 6, 6, 6), frameARP, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ARP](t, pk, layers.LayerTypeARP); !bytes.Equal(l.DstHwAddress, mac(2, 6, 6, 6, 6, 6)) {
			t.Fatalf("tha %v", l.DstHwAddress)
		}
	}},
	{"ipv6_src", ofpwire.XMTypeIPv6Src, net.ParseIP("2001:db8::77"), frameTCP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv6](t, pk, layers.LayerTypeIPv6); !ip.SrcIP.Equal(net.ParseIP("2001:db8::77")) {
			t.Fatalf("src %v", ip.SrcIP)
		}
	}},
	{"ipv6_dst", ofpwire.XMTypeIPv6Dst, net.ParseIP("2001:db8::78"), frameICMP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv6](t, pk, layers.LayerTypeIPv6); !ip.DstIP.Equal(net.ParseIP("2001:db8::78")) {
			t.Fatalf("dst %v", ip.DstIP)
		}
	}},
	{"ipv6_flabel", ofpwire.XMTypeIPv6FLabel, []byte{0, 0x0a, 0xbc, 0xde}, frameUDP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if ip := layerOf[*layers.IPv6](t, pk, layers.LayerTypeIPv6); ip.FlowLabel != 0xabcde || ip.TrafficClass != 0x28 {
			t.Fatalf("label %#x class %#x", ip.FlowLabel, ip.TrafficClass)
		}
	}},
	{"icmpv6_type", ofpwire.XMTypeICMPv6Type, []byte{129}, frameICMP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ICMPv6](t, pk, layers.LayerTypeICMPv6); l.TypeCode.Type() != 129 {
			t.Fatalf("type %d", l.TypeCode.Type())
		}
	}},
	{"icmpv6_code", ofpwire.XMTypeICMPv6Code, []byte{3}, frameICMP6, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if l := layerOf[*layers.ICMPv6](t, pk, layers.LayerTypeICMPv6); l.TypeCode.Code() != 3 {
			t.Fatalf("code %d", l.TypeCode.Code())
		}
	}},
	{"ipv6_nd_target", ofpwire.XMTypeIPv6NDTarget, net.ParseIP("2001:db8::99"), func(t testing.TB) []byte { return frameND(t, header.ICMPv6NeighborSolicit) },
		func(t *testing.T, _ []byte, pk gopacket.Packet) {
			if l := layerOf[*layers.ICMPv6NeighborSolicitation](t, pk, layers.LayerTypeICMPv6NeighborSolicitation); !l.TargetAddress.Equal(net.ParseIP("2001:db8::99")) {
				t.Fatalf("target %v", l.TargetAddress)
			}
		}},
	{"ipv6_nd_sll", ofpwire.XMTypeIPv6NDSLL, mac(2, 5, 5, 5, 5, 5), func(t testing.TB) []byte { return frameND(t, header.ICMPv6NeighborSolicit) },
		func(t *testing.T, _ []byte, pk gopacket.Packet) {
			l := layerOf[*layers.ICMPv6NeighborSolicitation](t, pk, layers.LayerTypeICMPv6NeighborSolicitation)
			if len(l.Options) != 1 || !bytes.Equal(l.Options[0].Data, mac(2, 5, 5, 5, 5, 5)) {
				t.Fatalf("options %+v", l.Options)
			}
		}},
	{"ipv6_nd_tll", ofpwire.XMTypeIPv6NDTLL, mac(2, 4, 4, 4, 4, 4), func(t testing.TB) []byte { return frameND(t, header.ICMPv6NeighborAdvert) },
		func(t *testing.T, _ []byte, pk gopacket.Packet) {
			l := layerOf[*layers.ICMPv6NeighborAdvertisement](t, pk, layers.LayerTypeICMPv6NeighborAdvertisement)
			if len(l.Options) != 1 || !bytes.Equal(l.Options[0].Data, mac(2, 4, 4, 4, 4, 4)) {
				t.Fatalf("options %+v", l.Options)
			}
		}},
	{"mpls_label", ofpwire.XMTypeMPLSLabel, []byte{0, 0x01, 0x23, 0x45}, frameMPLS, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if m := layerOf[*layers.MPLS](t, pk, layers.LayerTypeMPLS); m.Label != 0x12345 || m.TrafficClass != 1 || m.TTL != 32 || !m.StackBottom {
			t.Fatalf("entry %+v", m)
		}
	}},
	{"mpls_tc", ofpwire.XMTypeMPLSTC, []byte{6}, frameMPLS, func(t *testing.T, _ []byte, pk gopacket.Packet) {
		if m := layerOf[*layers.MPLS](t, pk, layers.LayerTypeMPLS); m.TrafficClass != 6 || m.Label != 100 {
			t.Fatalf("entry %+v", m)
		}
	}},
	{"mpls_bos", ofpwire.XMTypeMPLSBOS, []byte{0}, frameMPLS, func(t *testing.T, got []byte, _ gopacket.Packet) {
		// gopacket would read on into a second entry: check the bytes.
		lse := binary.BigEndian.Uint32(got[14:])
		if lse&0x100 != 0 || lse>>12 != 100 || lse&0xff != 32 {
			t.Fatalf("entry %#08x, want label 100 TTL 32 without BoS", lse)
		}
	}},
	{"pbb_isid", ofpwire.XMTypePBBISID, []byte{0xab, 0xcd, 0xef}, framePBB, func(t *testing.T, got []byte, _ gopacket.Packet) {
		// gopacket has no 802.1ah decoder: check the I-TAG bytes.
		if !bytes.Equal(got[12:18], []byte{0x88, 0xe7, 0, 0xab, 0xcd, 0xef}) {
			t.Fatalf("I-TAG %x", got[12:18])
		}
	}},
	{"tunnel_id", ofpwire.XMTypeTunnelID, []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39}, frameUDP4, func(t *testing.T, got []byte, _ gopacket.Packet) {
		// Metadata for a tunnel port: the frame itself is unchanged.
		if !bytes.Equal(got, frameUDP4(t)) {
			t.Fatal("tunnel_id changed the frame")
		}
	}},
}

func TestSetFieldEveryField(t *testing.T) {
	covered := map[ofpwire.XMType]bool{}
	for _, c := range setFieldCases {
		covered[c.field] = true
		t.Run(c.name, func(t *testing.T) {
			frame := c.frame(t)
			got, key := runFrame(t, frame, &ofpwire.ActionSetField{Field: ofpwire.NewOXM(c.field, c.value)})
			if bytes.Equal(got, frame) && c.field != ofpwire.XMTypeTunnelID {
				t.Fatalf("frame unchanged: %x", got)
			}
			c.check(t, got, gopacket.NewPacket(got, layers.LayerTypeEthernet, gopacket.Default))
			if c.field == ofpwire.XMTypeIPProto {
				checksumsOKAs(t, got, ipProtoOf(frame))
			} else {
				checksumsOK(t, got)
			}
			keyMatchesFrame(t, got, key)
			if c.field == ofpwire.XMTypeTunnelID && key.TunnelID != 12345 {
				t.Fatalf("tunnel_id %d in the key, want 12345", key.TunnelID)
			}
		})
	}
	// Every field the switch calls settable has a case (metadata is
	// pipeline state, tested with the tables).
	for f := ofpwire.XMType(0); int(f) < ofpwire.NumBasicFields; f++ {
		if settable(f) && f != ofpwire.XMTypeMetadata && !covered[f] {
			t.Errorf("settable field %d has no frame-level case", f)
		}
	}
	for _, f := range []ofpwire.XMType{ofpwire.XMTypeInPort, ofpwire.XMTypeInPhyPort, ofpwire.XMTypeIPv6ExtHeader} {
		size, _, _ := ofpwire.FieldSize(f)
		err := CheckActions([]ofpwire.Action{&ofpwire.ActionSetField{Field: ofpwire.NewOXM(f, make([]byte, size))}}, false)
		var oe *ofpwire.OFPError
		if !errors.As(err, &oe) || oe.Type != ofpwire.ETBadAction || oe.Code != ofpwire.BACBadSetType {
			t.Errorf("set-field on %d: %v, want BAD_SET_TYPE", f, err)
		}
	}
}

// ipProtoOf returns the transport protocol frame carries.
func ipProtoOf(frame []byte) layers.IPProtocol {
	var k flow.Key
	var off flow.Offsets
	flow.Extract(frame, 1, &k, &off)
	return layers.IPProtocol(k.NwProto)
}

// TestSetIPProtoChecksums changes the protocol between every pair of
// checksummed transports, for IPv4 and IPv6, and checks that the transport
// header is left as it was but for its own checksum, which verifies over
// the pseudo-header that names the new protocol: the bytes are still the
// old protocol's header, and the new one's checksum offset lies inside it.
func TestSetIPProtoChecksums(t *testing.T) {
	frames := map[string]func(testing.TB) []byte{"tcp4": frameTCP4, "udp4": frameUDP4, "sctp4": frameSCTP4,
		"icmp4": frameICMP4, "tcp6": frameTCP6, "udp6": frameUDP6, "icmp6": frameICMP6, "vlan_udp4": frameVLANUDP4}
	for name, fr := range frames {
		for _, proto := range []uint8{1, 6, 17, 58, 132, 47} {
			t.Run(fmt.Sprintf("%s_to_%d", name, proto), func(t *testing.T) {
				orig := fr(t)
				got, key := runFrame(t, orig, setF(ofpwire.XMTypeIPProto, uint64(proto)))
				if key.NwProto != proto {
					t.Fatalf("key protocol %d, want %d", key.NwProto, proto)
				}
				var k flow.Key
				var off flow.Offsets
				flow.Extract(orig, 1, &k, &off)
				l3, l4 := int(off.L3), int(off.L4)
				may := map[int]bool{}
				if k.EthType == header.EtherTypeIPv6 {
					may[l3+header.IPv6NextHeaderOff] = true
				} else {
					may[l3+header.IPv4ProtoOff] = true
					may[l3+header.IPv4ChecksumOff], may[l3+header.IPv4ChecksumOff+1] = true, true
				}
				switch k.NwProto {
				case header.IPProtoTCP:
					may[l4+header.TCPChecksumOff], may[l4+header.TCPChecksumOff+1] = true, true
				case header.IPProtoUDP:
					may[l4+header.UDPChecksumOff], may[l4+header.UDPChecksumOff+1] = true, true
				case header.IPProtoICMPv6:
					may[l4+header.ICMPv6ChecksumOff], may[l4+header.ICMPv6ChecksumOff+1] = true, true
				}
				if len(got) != len(orig) {
					t.Fatalf("length %d, was %d", len(got), len(orig))
				}
				for i := range got {
					if got[i] != orig[i] && !may[i] {
						t.Fatalf("byte %d (L4%+d) changed: %x, was %x", i, i-l4, got, orig)
					}
				}
				checksumsOKAs(t, got, layers.IPProtocol(k.NwProto))
				keyMatchesFrame(t, got, key)
			})
		}
	}
}

package flow

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Shared packet builders for the extraction tests, fuzz seeds and benchmarks.

var (
	tMacDst = net.HardwareAddr{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}
	tMacSrc = net.HardwareAddr{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}
	tIP4Src = net.IP{198, 18, 0, 1}
	tIP4Dst = net.IP{198, 18, 0, 2}
	tIP6Src = net.ParseIP("2001:db8::1")
	tIP6Dst = net.ParseIP("2001:db8::2")
	tTarget = net.ParseIP("fe80::1234")
	tMacSLL = net.HardwareAddr{0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}
)

const (
	tIP4SrcU = 0xc6120001
	tIP4DstU = 0xc6120002
)

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		t.Fatalf("serialize: %v", err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func tEth(typ layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: tMacSrc, DstMAC: tMacDst, EthernetType: typ}
}

func tDot1Q(pcp uint8, vid uint16, next layers.EthernetType) *layers.Dot1Q {
	return &layers.Dot1Q{Priority: pcp, VLANIdentifier: vid, Type: next}
}

func tIP4(proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, TOS: 0x10, TTL: 64, Protocol: proto, SrcIP: tIP4Src, DstIP: tIP4Dst}
}

func tIP6(nh layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, TrafficClass: 0xb8, FlowLabel: 0x12345, HopLimit: 63,
		NextHeader: nh, SrcIP: tIP6Src, DstIP: tIP6Dst}
}

func tUDP(nl gopacket.NetworkLayer) *layers.UDP {
	u := &layers.UDP{SrcPort: 1024, DstPort: 9}
	_ = u.SetNetworkLayerForChecksum(nl)
	return u
}

func tTCP(nl gopacket.NetworkLayer) *layers.TCP {
	c := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: 1, SYN: true, ACK: true, Window: 1024}
	_ = c.SetNetworkLayerForChecksum(nl)
	return c
}

func tICMP6(nl gopacket.NetworkLayer, typ, code uint8) *layers.ICMPv6 {
	c := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, code)}
	_ = c.SetNetworkLayerForChecksum(nl)
	return c
}

// extOpts builds an IPv6 hop-by-hop / destination options / routing-like
// extension header of n 8-octet units, padded with PadN.
func extOpts(nh byte, n int) []byte {
	b := make([]byte, n*8)
	b[0] = nh
	b[1] = byte(n - 1)
	b[2] = 1 // PadN
	b[3] = byte(n*8 - 4)
	return b
}

// extRouting builds a type-4 (segment routing style) routing header with no
// segments left, 8 bytes.
func extRouting(nh byte) []byte {
	return []byte{nh, 0, 4, 0, 0, 0, 0, 0}
}

// extAH builds an authentication header with a 4-byte ICV (16 bytes).
func extAH(nh byte) []byte {
	return []byte{nh, 2, 0, 0, 0, 0, 0x10, 0x01, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef}
}

// extFrag builds a fragment header; off is in 8-octet units.
func extFrag(nh byte, off uint16, more bool) []byte {
	b := []byte{nh, 0, 0, 0, 0, 0, 0x12, 0x34}
	v := off << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(b[2:], v)
	return b
}

func payload(n int) gopacket.Payload {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + 1)
	}
	return p
}

// Frames used by the benchmarks and as fuzz seeds.

func frameUDP4(t testing.TB, payloadLen int) []byte {
	ip := tIP4(layers.IPProtocolUDP)
	return serialize(t, tEth(layers.EthernetTypeIPv4), ip, tUDP(ip), payload(payloadLen))
}

func frameTCP4(t testing.TB) []byte {
	ip := tIP4(layers.IPProtocolTCP)
	return serialize(t, tEth(layers.EthernetTypeIPv4), ip, tTCP(ip), payload(26))
}

func frameUDP6(t testing.TB) []byte {
	ip := tIP6(layers.IPProtocolUDP)
	return serialize(t, tEth(layers.EthernetTypeIPv6), ip, tUDP(ip), payload(18))
}

func frameVLANUDP4(t testing.TB) []byte {
	ip := tIP4(layers.IPProtocolUDP)
	return serialize(t, tEth(layers.EthernetTypeDot1Q), tDot1Q(5, 100, layers.EthernetTypeIPv4),
		ip, tUDP(ip), payload(18))
}

func frameQinQTCP4Opts(t testing.TB) []byte {
	ip := tIP4(layers.IPProtocolTCP)
	ip.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}}}
	return serialize(t, tEth(layers.EthernetTypeQinQ), tDot1Q(1, 10, layers.EthernetTypeDot1Q),
		tDot1Q(2, 20, layers.EthernetTypeIPv4), ip, tTCP(ip), payload(10))
}

func frameIPv6ExtUDP(t testing.TB) []byte {
	ip := tIP6(layers.IPProtocolIPv6HopByHop)
	var ext []byte
	ext = append(ext, extOpts(60, 1)...)
	ext = append(ext, extOpts(43, 2)...)
	ext = append(ext, extRouting(51)...)
	ext = append(ext, extAH(17)...)
	return serialize(t, tEth(layers.EthernetTypeIPv6), ip, gopacket.Payload(ext), tUDP(ip), payload(6))
}

func frameNS(t testing.TB) []byte {
	ip := tIP6(layers.IPProtocolICMPv6)
	ip.HopLimit = 255
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: tTarget,
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: tMacSLL}}}
	return serialize(t, tEth(layers.EthernetTypeIPv6), ip, tICMP6(ip, 135, 0), ns)
}

func frameNA(t testing.TB) []byte {
	ip := tIP6(layers.IPProtocolICMPv6)
	ip.HopLimit = 255
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x60, TargetAddress: tTarget,
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: tMacSLL}}}
	return serialize(t, tEth(layers.EthernetTypeIPv6), ip, tICMP6(ip, 136, 0), na)
}

func frameARP(t testing.TB, op uint16) []byte {
	a := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: op,
		SourceHwAddress: tMacSrc, SourceProtAddress: tIP4Src,
		DstHwAddress: tMacSLL, DstProtAddress: tIP4Dst}
	return serialize(t, tEth(layers.EthernetTypeARP), a)
}

func frameSNAPUDP4(t testing.TB) []byte {
	ip := tIP4(layers.IPProtocolUDP)
	return serialize(t, tEth(layers.EthernetTypeLLC),
		&layers.LLC{DSAP: 0xaa, SSAP: 0xaa, Control: 3},
		&layers.SNAP{OrganizationalCode: []byte{0, 0, 0}, Type: layers.EthernetTypeIPv4},
		ip, tUDP(ip), payload(18))
}

func frameMPLS(t testing.TB) []byte {
	ip := tIP4(layers.IPProtocolUDP)
	return serialize(t, tEth(layers.EthernetTypeMPLSUnicast),
		&layers.MPLS{Label: 1000, TrafficClass: 5, StackBottom: true, TTL: 33},
		ip, tUDP(ip), payload(18))
}

// framePBB builds a backbone frame: B-tag (802.1ad, PCP 3, VID 100), then an
// I-TAG (I-PCP 5, I-SID 0xabcdef) and the customer frame.
func framePBB(t testing.TB) []byte {
	itag := []byte{0xa0, 0xab, 0xcd, 0xef}
	inner := serialize(t, tEth(layers.EthernetTypeIPv4), tIP4(layers.IPProtocolUDP))
	return serialize(t, tEth(layers.EthernetTypeQinQ), tDot1Q(3, 100, 0x88e7),
		gopacket.Payload(append(itag, inner...)))
}

func frameSCTP4(t testing.TB) []byte {
	return serialize(t, tEth(layers.EthernetTypeIPv4), tIP4(layers.IPProtocolSCTP),
		&layers.SCTP{SrcPort: 5000, DstPort: 36412, VerificationTag: 7})
}

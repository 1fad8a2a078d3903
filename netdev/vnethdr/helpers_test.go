package vnethdr

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// refSum is a plain 16-bit-at-a-time one's-complement sum, independent of
// the package's 64-bit one, used as the oracle.
func refSum(parts ...[]byte) uint16 {
	var s uint32
	odd := false
	var hi byte
	for _, b := range parts {
		for _, c := range b {
			if !odd {
				hi = c
			} else {
				s += uint32(hi)<<8 | uint32(c)
			}
			odd = !odd
		}
	}
	if odd {
		s += uint32(hi) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// refPseudo builds the L4 pseudo-header bytes for an IP header.
func refPseudo(ip []byte, ipv6 bool, proto uint8, l4len int) []byte {
	if ipv6 {
		b := make([]byte, 40)
		copy(b, ip[8:40])
		binary.BigEndian.PutUint32(b[32:], uint32(l4len))
		b[39] = proto
		return b
	}
	b := make([]byte, 12)
	copy(b, ip[12:20])
	b[9] = proto
	binary.BigEndian.PutUint16(b[10:], uint16(l4len))
	return b
}

// frameSpec describes a test frame.
type frameSpec struct {
	ipv6     bool
	vlans    int // 0, 1 or 2 tags
	udp      bool
	icmp     bool
	tcpOpts  bool
	ipv4Opts bool
	flags    string // TCP flags: any of "FPCESAU" (FIN PSH CWR ECE SYN ACK URG)
	seq      uint32
	ipID     uint16
	payload  []byte
}

var (
	srcMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 1}
	dstMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 2}
)

// build serialises the frame with gopacket (lengths and checksums right)
// and returns it with the offsets of the IP and L4 headers.
func build(t testing.TB, f frameSpec) (frame []byte, l3off, l4off int) {
	t.Helper()
	var ls []gopacket.SerializableLayer
	eth := &layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC}
	ls = append(ls, eth)
	ipType := layers.EthernetTypeIPv4
	if f.ipv6 {
		ipType = layers.EthernetTypeIPv6
	}
	switch f.vlans {
	case 0:
		eth.EthernetType = ipType
	case 1:
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 100, Type: ipType})
	case 2:
		eth.EthernetType = layers.EthernetTypeQinQ
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 10, Type: layers.EthernetTypeDot1Q},
			&layers.Dot1Q{VLANIdentifier: 20, Type: ipType})
	}
	l3off = 14 + 4*f.vlans
	proto := layers.IPProtocolTCP
	switch {
	case f.udp:
		proto = layers.IPProtocolUDP
	case f.icmp && f.ipv6:
		proto = layers.IPProtocolICMPv6
	case f.icmp:
		proto = layers.IPProtocolICMPv4
	}
	var nl gopacket.NetworkLayer
	if f.ipv6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2:3")}
		nl = ip
		ls = append(ls, ip)
		l4off = l3off + 40
	} else {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, Id: f.ipID,
			Flags: layers.IPv4DontFragment, TOS: 0x02,
			SrcIP: net.IPv4(10, 1, 2, 3), DstIP: net.IPv4(192, 168, 200, 7)}
		if f.ipv4Opts {
			// Record route with room for one address, padded to 8 bytes.
			ip.Options = []layers.IPv4Option{{OptionType: 7, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}}, {OptionType: 0}}
		}
		nl = ip
		ls = append(ls, ip)
		l4off = -1
	}
	switch {
	case f.udp:
		u := &layers.UDP{SrcPort: 5000, DstPort: 9999}
		_ = u.SetNetworkLayerForChecksum(nl)
		ls = append(ls, u)
	case f.icmp && f.ipv6:
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
		_ = ic.SetNetworkLayerForChecksum(nl)
		ls = append(ls, ic)
	case f.icmp:
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 9})
	default:
		tcp := &layers.TCP{SrcPort: 40000, DstPort: 80, Seq: f.seq, Ack: 12345, Window: 512}
		for _, c := range f.flags {
			switch c {
			case 'F':
				tcp.FIN = true
			case 'P':
				tcp.PSH = true
			case 'C':
				tcp.CWR = true
			case 'E':
				tcp.ECE = true
			case 'S':
				tcp.SYN = true
			case 'A':
				tcp.ACK = true
			case 'U':
				tcp.URG = true
			}
		}
		if f.tcpOpts {
			tcp.Options = []layers.TCPOption{
				{OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindNop},
				{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			}
		}
		_ = tcp.SetNetworkLayerForChecksum(nl)
		ls = append(ls, tcp)
	}
	ls = append(ls, gopacket.Payload(f.payload))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	frame = append([]byte(nil), buf.Bytes()...)
	if l4off < 0 {
		l4off = l3off + int(frame[l3off]&0xf)*4
	}
	return frame, l3off, l4off
}

// l4CsumField is the offset of the checksum within the L4 header.
func l4CsumField(f frameSpec) int {
	switch {
	case f.udp:
		return 6
	case f.icmp:
		return 2
	}
	return 16
}

// seedPseudo turns frame into what Linux hands over for CHECKSUM_PARTIAL:
// the L4 checksum field holds the (uncomplemented) pseudo-header sum.
func seedPseudo(frame []byte, f frameSpec, l3off, l4off int) Header {
	proto := uint8(6)
	if f.udp {
		proto = 17
	}
	field := l4off + l4CsumField(f)
	binary.BigEndian.PutUint16(frame[field:], refSum(refPseudo(frame[l3off:], f.ipv6, proto, ipEnd(frame, l3off, f.ipv6)-l4off)))
	return Header{Flags: FlagNeedsCsum, CsumStart: uint16(l4off), CsumOffset: uint16(l4CsumField(f))}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed + byte(i>>8)
	}
	return b
}

// ipEnd is where the IP packet ends (gopacket pads short frames to 60).
func ipEnd(frame []byte, l3off int, ipv6 bool) int {
	if ipv6 {
		return l3off + 40 + int(binary.BigEndian.Uint16(frame[l3off+4:]))
	}
	return l3off + int(binary.BigEndian.Uint16(frame[l3off+2:]))
}

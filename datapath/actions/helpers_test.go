package actions

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Fragment positions a pktSpec can describe (IPv4 only).
const (
	notFrag = iota
	firstFrag
	laterFrag
)

type vlanSpec struct {
	tpid, tci uint16
}

// pktSpec describes a test packet field by field. Tests build the wire bytes
// with gopacket (checksums and lengths computed by gopacket) and derive the
// expected flow key from the same fields, so an action can be checked by
// changing the field in the spec and comparing the two results.
type pktSpec struct {
	ethSrc, ethDst [6]byte
	vlans          []vlanSpec // outer first
	v6             bool
	src, dst       [16]byte // IPv4 uses [:4]
	tos, ttl       uint8
	flowLabel      uint32
	ipOption       bool // IPv4: add a 4-byte option so IHL is 6
	proto          uint8
	sport, dport   uint16 // ICMP: type and code
	icmpID         uint16 // ICMP: a query's identifier
	tcpFlags       uint16
	payload        []byte
	udpZeroCsum    bool // IPv4 UDP sent without checksum
	frag           int
}

func (s pktSpec) clone() pktSpec {
	c := s
	c.vlans = append([]vlanSpec(nil), s.vlans...)
	c.payload = append([]byte(nil), s.payload...)
	return c
}

func (s *pktSpec) ipType() uint16 {
	if s.v6 {
		return header.EtherTypeIPv6
	}
	return header.EtherTypeIPv4
}

var serializeOpts = gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true}

// l4Layers returns the transport layers (with payload) for s, tied to the
// network layer for pseudo-header checksums.
func (s *pktSpec) l4Layers(t testing.TB, nl gopacket.NetworkLayer) []gopacket.SerializableLayer {
	t.Helper()
	payload := gopacket.Payload(s.payload)
	switch s.proto {
	case header.IPProtoTCP:
		tcp := &layers.TCP{
			SrcPort: layers.TCPPort(s.sport), DstPort: layers.TCPPort(s.dport),
			Seq: 0x01020304, Ack: 0x0a0b0c0d, Window: 4096,
			FIN: s.tcpFlags&0x001 != 0, SYN: s.tcpFlags&0x002 != 0, RST: s.tcpFlags&0x004 != 0,
			PSH: s.tcpFlags&0x008 != 0, ACK: s.tcpFlags&0x010 != 0, URG: s.tcpFlags&0x020 != 0,
		}
		if err := tcp.SetNetworkLayerForChecksum(nl); err != nil {
			t.Fatal(err)
		}
		return []gopacket.SerializableLayer{tcp, payload}
	case header.IPProtoUDP:
		udp := &layers.UDP{SrcPort: layers.UDPPort(s.sport), DstPort: layers.UDPPort(s.dport)}
		if err := udp.SetNetworkLayerForChecksum(nl); err != nil {
			t.Fatal(err)
		}
		return []gopacket.SerializableLayer{udp, payload}
	case header.IPProtoSCTP:
		return []gopacket.SerializableLayer{
			&layers.SCTP{SrcPort: layers.SCTPPort(s.sport), DstPort: layers.SCTPPort(s.dport), VerificationTag: 0xdeadbeef},
			&layers.SCTPData{
				SCTPChunk: layers.SCTPChunk{Type: layers.SCTPChunkTypeData},
				TSN:       7, StreamId: 1, StreamSequence: 2, PayloadProtocol: 3,
				BeginFragment: true, EndFragment: true,
			},
			payload,
		}
	case header.IPProtoICMP:
		return []gopacket.SerializableLayer{
			&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(uint8(s.sport), uint8(s.dport)), Id: s.icmpID, Seq: 10},
			payload,
		}
	case header.IPProtoICMPv6:
		icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(uint8(s.sport), uint8(s.dport))}
		if err := icmp.SetNetworkLayerForChecksum(nl); err != nil {
			t.Fatal(err)
		}
		return []gopacket.SerializableLayer{icmp, &layers.ICMPv6Echo{Identifier: s.icmpID, SeqNumber: 10}, payload}
	}
	return []gopacket.SerializableLayer{payload}
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer() // fresh: gopacket's SCTP sums its checksum bytes as found
	if err := gopacket.SerializeLayers(buf, serializeOpts, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// build returns the frame described by s.
func (s *pktSpec) build(t testing.TB) []byte {
	t.Helper()
	var ls []gopacket.SerializableLayer
	next := s.ipType()
	if len(s.vlans) > 0 {
		next = s.vlans[0].tpid
	}
	ls = append(ls, &layers.Ethernet{
		SrcMAC: net.HardwareAddr(s.ethSrc[:]), DstMAC: net.HardwareAddr(s.ethDst[:]),
		EthernetType: layers.EthernetType(next),
	})
	for i, v := range s.vlans {
		next = s.ipType()
		if i+1 < len(s.vlans) {
			next = s.vlans[i+1].tpid
		}
		ls = append(ls, &layers.Dot1Q{
			Priority: uint8(v.tci >> 13), DropEligible: v.tci&0x1000 != 0,
			VLANIdentifier: v.tci & 0x0fff, Type: layers.EthernetType(next),
		})
	}
	var nl gopacket.NetworkLayer
	if s.v6 {
		ip := &layers.IPv6{
			Version: 6, TrafficClass: s.tos, FlowLabel: s.flowLabel, HopLimit: s.ttl,
			NextHeader: layers.IPProtocol(s.proto),
			SrcIP:      net.IP(append([]byte(nil), s.src[:]...)), DstIP: net.IP(append([]byte(nil), s.dst[:]...)),
		}
		ls = append(ls, ip)
		nl = ip
	} else {
		ip := &layers.IPv4{
			Version: 4, TOS: s.tos, TTL: s.ttl, Id: 0x4242, Protocol: layers.IPProtocol(s.proto),
			SrcIP: net.IP(append([]byte(nil), s.src[:4]...)), DstIP: net.IP(append([]byte(nil), s.dst[:4]...)),
		}
		if s.ipOption {
			ip.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}
		}
		switch s.frag {
		case firstFrag:
			ip.Flags = layers.IPv4MoreFragments
		case laterFrag:
			ip.FragOffset = 185
		}
		ls = append(ls, ip)
		nl = ip
	}
	if s.frag == laterFrag {
		// A later fragment carries the middle of a datagram: make it look
		// like a transport header so that touching it would show. Its bytes
		// must not depend on the addresses, which rewrites change.
		fixed := &layers.IPv4{SrcIP: net.IPv4(1, 1, 1, 1), DstIP: net.IPv4(2, 2, 2, 2)}
		ls = append(ls, gopacket.Payload(serialize(t, s.l4Layers(t, fixed)...)))
	} else {
		ls = append(ls, s.l4Layers(t, nl)...)
	}
	frame := serialize(t, ls...)
	if s.proto == header.IPProtoUDP && s.frag != laterFrag {
		c := s.l4Offset() + 6
		switch {
		case s.udpZeroCsum:
			frame[c], frame[c+1] = 0, 0
		case frame[c] == 0 && frame[c+1] == 0:
			// gopacket leaves a computed zero as is; RFC 768 sends it as all ones.
			frame[c], frame[c+1] = 0xff, 0xff
		}
	}
	return frame
}

func (s *pktSpec) l3Offset() int { return 14 + 4*len(s.vlans) }

func (s *pktSpec) l4Offset() int {
	if s.v6 {
		return s.l3Offset() + 40
	}
	if s.ipOption {
		return s.l3Offset() + 24
	}
	return s.l3Offset() + 20
}

// offsets returns the Offsets extraction reports for s.
func (s *pktSpec) offsets() flow.Offsets {
	o := flow.Offsets{L3: uint16(s.l3Offset()), L4: uint16(s.l4Offset())}
	if s.frag == laterFrag {
		o.L4 = flow.NoOffset
	}
	return o
}

// key returns the flow key of s, following the field semantics of flow.Key.
func (s *pktSpec) key(inPort uint32) flow.Key {
	var k flow.Key
	k.InPort = inPort
	k.EthSrc, k.EthDst = s.ethSrc, s.ethDst
	for i := 0; i < len(s.vlans) && i < 2; i++ {
		k.VLAN[i] = flow.VLANTag{TPID: s.vlans[i].tpid, TCI: s.vlans[i].tci}
	}
	k.EthType = s.ipType()
	k.NwProto = s.proto
	k.NwTOS = s.tos
	k.NwTTL = s.ttl
	if s.v6 {
		k.IPv6Src, k.IPv6Dst = s.src, s.dst
		k.IPv6Label = s.flowLabel
	} else {
		k.IPv4Src = binary.BigEndian.Uint32(s.src[:4])
		k.IPv4Dst = binary.BigEndian.Uint32(s.dst[:4])
	}
	switch s.frag {
	case firstFrag:
		k.NwFrag = flow.FragAny
	case laterFrag:
		k.NwFrag = flow.FragAny | flow.FragLater
		return k
	}
	k.TpSrc, k.TpDst = s.sport, s.dport
	if s.proto == header.IPProtoTCP {
		k.TCPFlags = s.tcpFlags
	}
	return k
}

var testPool = packet.NewPool(64, packet.DefaultBufSize)

// loadPacket puts frame into a pool packet with the key and offsets of s,
// as the PMD would have after extraction.
func loadPacket(t testing.TB, s *pktSpec, frame []byte) *packet.Packet {
	t.Helper()
	p := testPool.Get()
	if p == nil {
		t.Fatal("test pool exhausted")
	}
	p.SetData(frame)
	p.InPort = 3
	p.Key = s.key(3)
	p.Offsets = s.offsets()
	p.KeyValid = true
	return p
}

func ip4(a, b, c, d byte) (r [16]byte) {
	r[0], r[1], r[2], r[3] = a, b, c, d
	return r
}

func ip6(s string) (r [16]byte) {
	copy(r[:], net.ParseIP(s).To16())
	return r
}

// baseSpec returns a representative packet of the given family and protocol.
func baseSpec(v6 bool, proto uint8) pktSpec {
	s := pktSpec{
		ethSrc: [6]byte{0x02, 0, 0, 0, 0, 0x01}, ethDst: [6]byte{0x02, 0, 0, 0, 0, 0x02},
		v6: v6, tos: 0x28, ttl: 64, proto: proto, sport: 33333, dport: 80,
		tcpFlags: 0x018, payload: []byte("the quick brown fox jumps over the lazy dog"),
	}
	if v6 {
		s.src, s.dst = ip6("2001:db8::1"), ip6("2001:db8:1::abcd")
		s.flowLabel = 0x12345
	} else {
		s.src, s.dst = ip4(10, 0, 0, 1), ip4(10, 0, 1, 2)
	}
	if proto == header.IPProtoICMP || proto == header.IPProtoICMPv6 {
		s.sport, s.dport = 8, 0
		if v6 {
			s.sport = 128
		}
	}
	return s
}

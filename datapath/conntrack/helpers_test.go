package conntrack

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ipA  = net.IP{198, 18, 0, 1}
	ipB  = net.IP{198, 18, 0, 2}
	ip6A = net.ParseIP("2001:db8::1")
	ip6B = net.ParseIP("2001:db8::2")
)

// frame serializes layers behind an Ethernet header.
func frame(tb testing.TB, ls ...gopacket.SerializableLayer) []byte {
	tb.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		tb.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func eth(ipv6 bool) *layers.Ethernet {
	t := layers.EthernetTypeIPv4
	if ipv6 {
		t = layers.EthernetTypeIPv6
	}
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: t}
}

func ip4(src, dst net.IP, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: proto, SrcIP: src, DstIP: dst}
}

func ip6(src, dst net.IP, proto layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: src, DstIP: dst}
}

// seg describes a TCP segment.
type seg struct {
	src, dst       net.IP
	sport, dport   uint16
	seq, ack       uint32
	syn, ackf, fin bool
	rst            bool
	win            uint16
	payload        int
	data           []byte // the payload's bytes, instead of payload zeros
	wscale         int    // -1: no option
}

func tcpFrame(tb testing.TB, s seg) []byte {
	v6 := s.src.To4() == nil
	t := &layers.TCP{SrcPort: layers.TCPPort(s.sport), DstPort: layers.TCPPort(s.dport), Seq: s.seq, Ack: s.ack,
		SYN: s.syn, ACK: s.ackf, FIN: s.fin, RST: s.rst, Window: s.win}
	if s.win == 0 {
		t.Window = 64000
	}
	if s.wscale >= 0 && s.syn {
		t.Options = []layers.TCPOption{{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{byte(s.wscale)}}}
	}
	pl := gopacket.Payload(make([]byte, s.payload))
	if s.data != nil {
		pl = gopacket.Payload(s.data)
	}
	if v6 {
		l3 := ip6(s.src, s.dst, layers.IPProtocolTCP)
		t.SetNetworkLayerForChecksum(l3)
		return frame(tb, eth(true), l3, t, pl)
	}
	l3 := ip4(s.src, s.dst, layers.IPProtocolTCP)
	t.SetNetworkLayerForChecksum(l3)
	return frame(tb, eth(false), l3, t, pl)
}

func udpFrame(tb testing.TB, src, dst net.IP, sport, dport uint16) []byte {
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: layers.UDPPort(dport)}
	if src.To4() == nil {
		l3 := ip6(src, dst, layers.IPProtocolUDP)
		u.SetNetworkLayerForChecksum(l3)
		return frame(tb, eth(true), l3, u, gopacket.Payload("hello"))
	}
	l3 := ip4(src, dst, layers.IPProtocolUDP)
	u.SetNetworkLayerForChecksum(l3)
	return frame(tb, eth(false), l3, u, gopacket.Payload("hello"))
}

func echoFrame(tb testing.TB, src, dst net.IP, typ uint8, id uint16) []byte {
	if src.To4() == nil {
		l3 := ip6(src, dst, layers.IPProtocolICMPv6)
		ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, 0)}
		ic.SetNetworkLayerForChecksum(l3)
		return frame(tb, eth(true), l3, ic, &layers.ICMPv6Echo{Identifier: id, SeqNumber: 1})
	}
	return frame(tb, eth(false), ip4(src, dst, layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, 0), Id: id, Seq: 1})
}

// icmpErrorFrame is an ICMPv4 error from src to dst about the IP packet
// inner (an Ethernet frame whose IP part is quoted).
func icmpErrorFrame(tb testing.TB, src, dst net.IP, typ, code uint8, inner []byte) []byte {
	return frame(tb, eth(false), ip4(src, dst, layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, code)}, gopacket.Payload(inner[14:14+28]))
}

// icmp6ErrorFrame is an ICMPv6 error from src to dst about the IPv6
// packet inner (an Ethernet frame): its IPv6 header and 48 bytes after.
func icmp6ErrorFrame(tb testing.TB, src, dst net.IP, typ, code uint8, inner []byte) []byte {
	l3 := ip6(src, dst, layers.IPProtocolICMPv6)
	ic := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, code)}
	ic.SetNetworkLayerForChecksum(l3)
	quoted := inner[14:min(len(inner), 14+40+48)]
	return frame(tb, eth(true), l3, ic, gopacket.Payload(append(make([]byte, 4), quoted...)))
}

// track runs frame b through ct with p at now and returns the key's
// conntrack fields.
func track(tb testing.TB, tr *Tracker, b []byte, p Params, now int64) flow.Conntrack {
	tb.Helper()
	pkt := packet.NewPool(1, 4096).Get() // a pool is one goroutine's
	defer pkt.Free()
	pkt.SetData(b)
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	pkt.KeyValid = true
	tr.Process(pkt, &p, now)
	return pkt.Key.CT
}

// stateString names the state bits as ovs-ofctl does, for messages.
func stateString(s uint8) string {
	names := []string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}
	out := ""
	for i, n := range names {
		if s&(1<<i) != 0 {
			out += "+" + n
		}
	}
	if out == "" {
		return "-trk"
	}
	return out
}

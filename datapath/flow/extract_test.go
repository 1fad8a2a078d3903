package flow

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/header"
)

func TestKeyLayout(t *testing.T) {
	if got := unsafe.Sizeof(Key{}); got != KeyWords*8 {
		t.Fatalf("Sizeof(Key) = %d, want %d", got, KeyWords*8)
	}
	var k Key
	// Offsets follow the word comments in key.go.
	want := []struct {
		name string
		off  uintptr
	}{
		{"InPort", 0}, {"EthType", 4}, {"NwProto", 6}, {"NwFrag", 7},
		{"EthDst", 8}, {"NwTOS", 14}, {"NwTTL", 15}, {"EthSrc", 16}, {"TCPFlags", 22},
		{"VLAN", 24},
		{"IPv4Src", 32}, {"IPv4Dst", 36}, {"TpSrc", 40}, {"TpDst", 42}, {"IPv6Label", 44},
		{"IPv6Src", 48}, {"IPv6Dst", 64}, {"NDTarget", 80},
		{"ArpSHA", 96}, {"IPv6ExtHdr", 102}, {"ArpTHA", 104}, {"RecircID", 110},
		{"MPLSLse", 112}, {"PBBISID", 116}, {"TunnelID", 120}, {"Tun", 128}, {"CT", 168},
	}
	got := map[string]uintptr{
		"InPort": unsafe.Offsetof(k.InPort), "EthType": unsafe.Offsetof(k.EthType),
		"NwProto": unsafe.Offsetof(k.NwProto), "NwFrag": unsafe.Offsetof(k.NwFrag),
		"EthDst": unsafe.Offsetof(k.EthDst), "NwTOS": unsafe.Offsetof(k.NwTOS),
		"NwTTL": unsafe.Offsetof(k.NwTTL), "EthSrc": unsafe.Offsetof(k.EthSrc),
		"TCPFlags": unsafe.Offsetof(k.TCPFlags), "VLAN": unsafe.Offsetof(k.VLAN),
		"IPv4Src": unsafe.Offsetof(k.IPv4Src), "IPv4Dst": unsafe.Offsetof(k.IPv4Dst),
		"TpSrc": unsafe.Offsetof(k.TpSrc), "TpDst": unsafe.Offsetof(k.TpDst),
		"IPv6Label": unsafe.Offsetof(k.IPv6Label), "IPv6Src": unsafe.Offsetof(k.IPv6Src),
		"IPv6Dst": unsafe.Offsetof(k.IPv6Dst), "NDTarget": unsafe.Offsetof(k.NDTarget),
		"ArpSHA": unsafe.Offsetof(k.ArpSHA), "IPv6ExtHdr": unsafe.Offsetof(k.IPv6ExtHdr),
		"ArpTHA": unsafe.Offsetof(k.ArpTHA), "RecircID": unsafe.Offsetof(k.RecircID),
		"MPLSLse": unsafe.Offsetof(k.MPLSLse), "PBBISID": unsafe.Offsetof(k.PBBISID),
		"TunnelID": unsafe.Offsetof(k.TunnelID), "Tun": unsafe.Offsetof(k.Tun),
		"CT": unsafe.Offsetof(k.CT),
	}
	for _, w := range want {
		if got[w.name] != w.off {
			t.Errorf("Offsetof(%s) = %d, want %d", w.name, got[w.name], w.off)
		}
	}
	// No implicit padding: each field starts where the previous one ends and
	// the table above names every field.
	typ := reflect.TypeOf(k)
	if typ.NumField() != len(want) {
		t.Errorf("Key has %d fields, layout table has %d", typ.NumField(), len(want))
	}
	end := uintptr(0)
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Offset != end {
			t.Errorf("field %s at %d, previous field ends at %d (implicit padding)", f.Name, f.Offset, end)
		}
		end = f.Offset + f.Type.Size()
	}
	if end != KeyWords*8 {
		t.Errorf("fields end at %d, want %d", end, KeyWords*8)
	}
	// Tunnel has no implicit padding either.
	tt := reflect.TypeOf(Tunnel{})
	tend := uintptr(0)
	for i := 0; i < tt.NumField(); i++ {
		f := tt.Field(i)
		if f.Offset != tend {
			t.Errorf("Tunnel field %s at %d, previous ends at %d", f.Name, f.Offset, tend)
		}
		tend = f.Offset + f.Type.Size()
	}
	if tend != 40 || unsafe.Sizeof(Tunnel{}) != 40 {
		t.Errorf("Tunnel is %d bytes (fields end at %d), want 40", unsafe.Sizeof(Tunnel{}), tend)
	}
	// Nor Conntrack.
	ct := reflect.TypeOf(Conntrack{})
	cend := uintptr(0)
	for i := 0; i < ct.NumField(); i++ {
		f := ct.Field(i)
		if f.Offset != cend {
			t.Errorf("Conntrack field %s at %d, previous ends at %d", f.Name, f.Offset, cend)
		}
		cend = f.Offset + f.Type.Size()
	}
	if cend != 64 || unsafe.Sizeof(Conntrack{}) != 64 {
		t.Errorf("Conntrack is %d bytes (fields end at %d), want 64", unsafe.Sizeof(Conntrack{}), cend)
	}
	if unsafe.Sizeof(VLANTag{}) != 4 {
		t.Errorf("Sizeof(VLANTag) = %d, want 4", unsafe.Sizeof(VLANTag{}))
	}
}

const tPort = 7

func baseKey() Key {
	return Key{InPort: tPort, EthDst: [6]byte(tMacDst), EthSrc: [6]byte(tMacSrc)}
}

func ip4Key(proto uint8) Key {
	k := baseKey()
	k.EthType = header.EtherTypeIPv4
	k.NwTOS, k.NwTTL, k.NwProto = 0x10, 64, proto
	k.IPv4Src, k.IPv4Dst = tIP4SrcU, tIP4DstU
	return k
}

func ip6Key(proto uint8) Key {
	k := baseKey()
	k.EthType = header.EtherTypeIPv6
	k.NwTOS, k.NwTTL, k.NwProto = 0xb8, 63, proto
	k.IPv6Label = 0x12345
	k.IPv6Src, k.IPv6Dst = [16]byte(tIP6Src.To16()), [16]byte(tIP6Dst.To16())
	return k
}

func with(k Key, f func(*Key)) Key {
	f(&k)
	return k
}

func offs(l3, l4 int) Offsets { return Offsets{L3: uint16(l3), L4: uint16(l4)} }

type extractCase struct {
	name  string
	frame []byte
	want  Key
	off   Offsets
	st    Status
}

// patch returns a copy of frame with bytes at off replaced.
func patch(frame []byte, off int, b ...byte) []byte {
	f := append([]byte(nil), frame...)
	copy(f[off:], b)
	return f
}

func extractCases(t testing.TB) []extractCase {
	none := Offsets{NoOffset, NoOffset}
	l3only := func(l3 int) Offsets { return Offsets{uint16(l3), NoOffset} }
	udpPorts := func(k *Key) { k.TpSrc, k.TpDst = 1024, 9 }
	tcpPorts := func(k *Key) { k.TpSrc, k.TpDst, k.TCPFlags = 40000, 80, 0x012 }
	var cs []extractCase
	add := func(name string, frame []byte, want Key, off Offsets, st Status) {
		cs = append(cs, extractCase{name, frame, want, off, st})
	}

	// Ethernet II, IPv4.
	add("udp4", frameUDP4(t, 18), with(ip4Key(17), udpPorts), offs(14, 34), 0)
	add("udp4-padded", frameUDP4(t, 0), with(ip4Key(17), udpPorts), offs(14, 34), 0)
	add("tcp4", frameTCP4(t), with(ip4Key(6), tcpPorts), offs(14, 34), 0)
	{
		ip := tIP4(layers.IPProtocolTCP)
		tcp := &layers.TCP{SrcPort: 1, DstPort: 2, FIN: true, PSH: true, URG: true, ECE: true, CWR: true, NS: true}
		_ = tcp.SetNetworkLayerForChecksum(ip)
		add("tcp4-flags", serialize(t, tEth(layers.EthernetTypeIPv4), ip, tcp),
			with(ip4Key(6), func(k *Key) { k.TpSrc, k.TpDst, k.TCPFlags = 1, 2, 0x1e9 }), offs(14, 34), 0)
	}
	{
		ip := tIP4(layers.IPProtocolICMPv4)
		icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 1, Seq: 2}
		add("icmp4-echo", serialize(t, tEth(layers.EthernetTypeIPv4), ip, icmp, payload(20)),
			with(ip4Key(1), func(k *Key) { k.TpSrc, k.TpDst = 8, 0 }), offs(14, 34), 0)
		ip = tIP4(layers.IPProtocolICMPv4)
		icmp = &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 4)}
		add("icmp4-unreach", serialize(t, tEth(layers.EthernetTypeIPv4), ip, icmp, payload(28)),
			with(ip4Key(1), func(k *Key) { k.TpSrc, k.TpDst = 3, 4 }), offs(14, 34), 0)
	}
	{
		ip := tIP4(layers.IPProtocolUDP)
		ip.Options = []layers.IPv4Option{{OptionType: 0x94, OptionLength: 4, OptionData: []byte{0, 0}},
			{OptionType: 0x07, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}}}
		f := serialize(t, tEth(layers.EthernetTypeIPv4), ip, tUDP(ip), payload(18))
		if f[14] != 0x48 {
			t.Fatalf("IPv4 options frame has version/IHL %#x, want 0x48", f[14])
		}
		add("udp4-options", f, with(ip4Key(17), udpPorts), offs(14, 46), 0)
	}
	{
		ip := tIP4(layers.IPProtocolUDP)
		ip.Flags = layers.IPv4DontFragment
		add("udp4-df", serialize(t, tEth(layers.EthernetTypeIPv4), ip, tUDP(ip), payload(18)),
			with(ip4Key(17), udpPorts), offs(14, 34), 0)
		ip = tIP4(layers.IPProtocolUDP)
		ip.Flags = layers.IPv4MoreFragments
		add("udp4-frag-first", serialize(t, tEth(layers.EthernetTypeIPv4), ip, tUDP(ip), payload(32)),
			with(ip4Key(17), func(k *Key) { udpPorts(k); k.NwFrag = FragAny }), offs(14, 34), 0)
		ip = tIP4(layers.IPProtocolUDP)
		ip.FragOffset = 185
		ip.Flags = layers.IPv4MoreFragments
		add("udp4-frag-later", serialize(t, tEth(layers.EthernetTypeIPv4), ip, payload(40)),
			with(ip4Key(17), func(k *Key) { k.NwFrag = FragAny | FragLater }), l3only(14), 0)
		ip = tIP4(layers.IPProtocolUDP)
		ip.FragOffset = 185
		add("udp4-frag-last", serialize(t, tEth(layers.EthernetTypeIPv4), ip, payload(40)),
			with(ip4Key(17), func(k *Key) { k.NwFrag = FragAny | FragLater }), l3only(14), 0)
	}
	add("sctp4", frameSCTP4(t), with(ip4Key(132), func(k *Key) { k.TpSrc, k.TpDst = 5000, 36412 }), offs(14, 34), 0)
	{
		ip := tIP4(layers.IPProtocolICMPv6)
		add("icmp6-in-ipv4", serialize(t, tEth(layers.EthernetTypeIPv4), ip, payload(30)),
			ip4Key(58), l3only(14), 0)
	}

	// VLANs.
	add("vlan-udp4", frameVLANUDP4(t), with(ip4Key(17), func(k *Key) {
		udpPorts(k)
		k.VLAN[0] = VLANTag{0x8100, 5<<13 | 100}
	}), offs(18, 38), 0)
	add("qinq-tcp4-options", frameQinQTCP4Opts(t), with(ip4Key(6), func(k *Key) {
		tcpPorts(k)
		k.VLAN = [2]VLANTag{{0x88a8, 1<<13 | 10}, {0x8100, 2<<13 | 20}}
	}), offs(22, 46), 0)
	{
		ip := tIP4(layers.IPProtocolUDP)
		f := serialize(t, tEth(0x9100), tDot1Q(0, 30, layers.EthernetTypeDot1Q),
			&layers.Dot1Q{VLANIdentifier: 40, DropEligible: true, Type: layers.EthernetTypeIPv4},
			ip, tUDP(ip), payload(18))
		add("vlan9100-vlan-udp4", f, with(ip4Key(17), func(k *Key) {
			udpPorts(k)
			k.VLAN = [2]VLANTag{{0x9100, 30}, {0x8100, 0x1000 | 40}}
		}), offs(22, 42), 0)
		ip = tIP4(layers.IPProtocolUDP)
		f = serialize(t, tEth(layers.EthernetTypeQinQ), tDot1Q(0, 1, layers.EthernetTypeDot1Q),
			tDot1Q(0, 2, layers.EthernetTypeDot1Q), tDot1Q(0, 3, layers.EthernetTypeIPv4), ip, tUDP(ip))
		k := baseKey()
		k.EthType = 0x8100
		k.VLAN = [2]VLANTag{{0x88a8, 1}, {0x8100, 2}}
		add("three-tags", f, k, none, 0)
		ip = tIP4(layers.IPProtocolUDP)
		f = serialize(t, tEth(layers.EthernetTypeDot1Q), tDot1Q(0, 1, 0x9100),
			tDot1Q(0, 2, layers.EthernetTypeIPv4), ip, tUDP(ip))
		k = baseKey()
		k.EthType = 0x9100
		k.VLAN[0] = VLANTag{0x8100, 1}
		add("inner-9100-not-a-tag", f, k, none, 0)
	}

	// IPv6.
	add("udp6", frameUDP6(t), with(ip6Key(17), udpPorts), offs(14, 54), 0)
	{
		ip := tIP6(layers.IPProtocolTCP)
		add("tcp6", serialize(t, tEth(layers.EthernetTypeIPv6), ip, tTCP(ip)),
			with(ip6Key(6), tcpPorts), offs(14, 54), 0)
		ip = tIP6(layers.IPProtocolSCTP)
		add("sctp6", serialize(t, tEth(layers.EthernetTypeIPv6), ip, &layers.SCTP{SrcPort: 9, DstPort: 10}),
			with(ip6Key(132), func(k *Key) { k.TpSrc, k.TpDst = 9, 10 }), offs(14, 54), 0)
		ip = tIP6(layers.IPProtocolICMPv6)
		add("icmp6-echo", serialize(t, tEth(layers.EthernetTypeIPv6), ip, tICMP6(ip, 128, 0),
			&layers.ICMPv6Echo{Identifier: 1, SeqNumber: 1}),
			with(ip6Key(58), func(k *Key) { k.TpSrc = 128 }), offs(14, 54), 0)
		ip = tIP6(layers.IPProtocolICMPv4)
		add("icmp4-in-ipv6", serialize(t, tEth(layers.EthernetTypeIPv6), ip, payload(8)),
			ip6Key(1), l3only(14), 0)
	}
	exthdr := func(k Key, bits uint16) Key { k.IPv6ExtHdr = bits; return k }
	add("ipv6-ext-udp", frameIPv6ExtUDP(t), exthdr(with(ip6Key(17), udpPorts), ExtHdrHop|ExtHdrDest|ExtHdrRouter|ExtHdrAuth),
		offs(14, 54+8+16+8+16), 0)
	{
		ip := tIP6(layers.IPProtocolIPv6Destination)
		var ext []byte
		for i := 0; i < maxIPv6ExtHeaders-1; i++ {
			ext = append(ext, extOpts(60, 1)...)
		}
		ext = append(ext, extOpts(17, 1)...)
		add("ipv6-16-ext", serialize(t, tEth(layers.EthernetTypeIPv6), ip, gopacket.Payload(ext), tUDP(ip)),
			exthdr(with(ip6Key(17), udpPorts), ExtHdrDest|ExtHdrUnrep|ExtHdrUnseq), offs(14, 54+16*8), 0)
		ip = tIP6(layers.IPProtocolIPv6Destination)
		ext = append(ext[:len(ext)-8], extOpts(60, 1)...)
		ext = append(ext, extOpts(17, 1)...)
		add("ipv6-17-ext", serialize(t, tEth(layers.EthernetTypeIPv6), ip, gopacket.Payload(ext), tUDP(ip)),
			exthdr(ip6Key(60), ExtHdrDest|ExtHdrUnrep|ExtHdrUnseq), l3only(14), Malformed)
	}
	{
		ip := tIP6(layers.IPProtocolIPv6Fragment)
		add("udp6-frag-first", serialize(t, tEth(layers.EthernetTypeIPv6), ip,
			gopacket.Payload(extFrag(17, 0, true)), tUDP(ip), payload(30)),
			exthdr(with(ip6Key(17), func(k *Key) { udpPorts(k); k.NwFrag = FragAny }), ExtHdrFrag), offs(14, 62), 0)
		ip = tIP6(layers.IPProtocolIPv6Fragment)
		add("udp6-frag-atomic", serialize(t, tEth(layers.EthernetTypeIPv6), ip,
			gopacket.Payload(extFrag(17, 0, false)), tUDP(ip), payload(30)),
			exthdr(with(ip6Key(17), func(k *Key) { udpPorts(k); k.NwFrag = FragAny }), ExtHdrFrag), offs(14, 62), 0)
		ip = tIP6(layers.IPProtocolIPv6HopByHop)
		ext := append(extOpts(44, 1), extFrag(6, 100, true)...)
		add("tcp6-frag-later", serialize(t, tEth(layers.EthernetTypeIPv6), ip,
			gopacket.Payload(ext), payload(40)),
			exthdr(with(ip6Key(6), func(k *Key) { k.NwFrag = FragAny | FragLater }), ExtHdrHop|ExtHdrFrag), l3only(14), 0)
		ip = tIP6(layers.IPProtocolIPv6HopByHop)
		add("esp6", serialize(t, tEth(layers.EthernetTypeIPv6), ip,
			gopacket.Payload(extOpts(50, 1)), payload(40)), exthdr(ip6Key(50), ExtHdrHop|ExtHdrESP), l3only(14), 0)
		ip = tIP6(layers.IPProtocolNoNextHeader)
		add("nonext6", serialize(t, tEth(layers.EthernetTypeIPv6), ip), exthdr(ip6Key(59), ExtHdrNoNext), l3only(14), 0)
		ip = tIP6(layers.IPProtocolIPv6HopByHop)
		f := serialize(t, tEth(layers.EthernetTypeIPv6), ip, gopacket.Payload(extOpts(51, 1)),
			gopacket.Payload(extAH(6)), tTCP(ip))
		add("ah-cut", f[:14+40+8+10], exthdr(ip6Key(51), ExtHdrHop|ExtHdrAuth), l3only(14), Truncated)
	}
	// Extension-header order and repeats (OFPIEH_UNSEQ, OFPIEH_UNREP): each
	// chain is a list of next-header values ending with the upper layer.
	for _, c := range []struct {
		name  string
		chain []byte
		bits  uint16
	}{
		{"dest-dest", []byte{60, 60, 59}, ExtHdrDest | ExtHdrNoNext},
		{"dest-router-dest", []byte{60, 43, 60, 59}, ExtHdrDest | ExtHdrRouter | ExtHdrNoNext},
		{"full-order", []byte{0, 60, 43, 44, 51, 60, 59}, ExtHdrHop | ExtHdrDest | ExtHdrRouter | ExtHdrFrag | ExtHdrAuth | ExtHdrNoNext},
		{"full-order-esp", []byte{0, 60, 43, 44, 51, 50}, ExtHdrHop | ExtHdrDest | ExtHdrRouter | ExtHdrFrag | ExtHdrAuth | ExtHdrESP},
		{"ah-dest", []byte{51, 60, 59}, ExtHdrAuth | ExtHdrDest | ExtHdrNoNext},
		{"router-hop", []byte{43, 0, 59}, ExtHdrRouter | ExtHdrHop | ExtHdrUnseq | ExtHdrNoNext},
		{"hop-hop", []byte{0, 0, 59}, ExtHdrHop | ExtHdrUnrep | ExtHdrUnseq | ExtHdrNoNext},
		{"frag-frag", []byte{44, 44, 59}, ExtHdrFrag | ExtHdrUnrep | ExtHdrUnseq | ExtHdrNoNext},
		{"dest-dest-dest", []byte{60, 60, 60, 59}, ExtHdrDest | ExtHdrUnrep | ExtHdrUnseq | ExtHdrNoNext},
		{"dest-dest-router", []byte{60, 60, 43, 59}, ExtHdrDest | ExtHdrRouter | ExtHdrUnseq | ExtHdrNoNext},
		{"router-dest-router", []byte{43, 60, 43, 59}, ExtHdrRouter | ExtHdrDest | ExtHdrUnrep | ExtHdrUnseq | ExtHdrNoNext},
		{"ah-frag", []byte{51, 44, 59}, ExtHdrAuth | ExtHdrFrag | ExtHdrUnseq | ExtHdrNoNext},
	} {
		ip := tIP6(layers.IPProtocol(c.chain[0]))
		var ext []byte
		for i, h := range c.chain[:len(c.chain)-1] {
			nh := c.chain[i+1]
			switch h {
			case 44:
				ext = append(ext, extFrag(nh, 0, false)...)
			case 51:
				ext = append(ext, extAH(nh)...)
			case 43:
				ext = append(ext, extRouting(nh)...)
			default:
				ext = append(ext, extOpts(nh, 1)...)
			}
		}
		want := exthdr(ip6Key(c.chain[len(c.chain)-1]), c.bits)
		if c.bits&ExtHdrFrag != 0 {
			want.NwFrag = FragAny
		}
		add("exthdr-"+c.name, serialize(t, tEth(layers.EthernetTypeIPv6), ip, gopacket.Payload(ext), payload(8)),
			want, l3only(14), 0)
	}

	// Neighbour discovery.
	nsKey := func(typ uint16) Key {
		k := ip6Key(58)
		k.NwTTL = 255
		k.TpSrc = typ
		k.NDTarget = [16]byte(tTarget.To16())
		return k
	}
	add("nd-ns-sll", frameNS(t), with(nsKey(135), func(k *Key) { k.ArpSHA = [6]byte(tMacSLL) }), offs(14, 54), 0)
	add("nd-na-tll", frameNA(t), with(nsKey(136), func(k *Key) { k.ArpTHA = [6]byte(tMacSLL) }), offs(14, 54), 0)
	ndFrame := func(typ uint8, opts layers.ICMPv6Options, raw []byte) []byte {
		ip := tIP6(layers.IPProtocolICMPv6)
		ip.HopLimit = 255
		var body gopacket.SerializableLayer
		if typ == 135 {
			body = &layers.ICMPv6NeighborSolicitation{TargetAddress: tTarget, Options: opts}
		} else {
			body = &layers.ICMPv6NeighborAdvertisement{TargetAddress: tTarget, Options: opts}
		}
		return serialize(t, tEth(layers.EthernetTypeIPv6), ip, tICMP6(ip, typ, 0), body, gopacket.Payload(raw))
	}
	add("nd-ns-tll-ignored", ndFrame(135, layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: tMacSLL}}, nil),
		nsKey(135), offs(14, 54), 0)
	add("nd-na-sll-ignored", ndFrame(136, layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: tMacSLL}}, nil),
		nsKey(136), offs(14, 54), 0)
	add("nd-ns-long-sll-skipped", ndFrame(135, layers.ICMPv6Options{
		{Type: layers.ICMPv6OptSourceAddress, Data: make([]byte, 14)},
		{Type: layers.ICMPv6OptMTU, Data: make([]byte, 6)}}, nil), nsKey(135), offs(14, 54), 0)
	add("nd-ns-mtu-then-sll", ndFrame(135, nil, []byte{5, 1, 0, 0, 0, 0, 5, 0xdc, 1, 1, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f}),
		with(nsKey(135), func(k *Key) { k.ArpSHA = [6]byte(tMacSLL) }), offs(14, 54), 0)
	add("nd-ns-zero-len-option", ndFrame(135, nil, []byte{1, 1, 1, 2, 3, 4, 5, 6, 5, 0, 0, 0, 0, 0, 0, 0}),
		with(ip6Key(58), func(k *Key) { k.NwTTL = 255; k.TpSrc = 135 }), offs(14, 54), Malformed)
	add("nd-ns-duplicate-sll", ndFrame(135, layers.ICMPv6Options{
		{Type: layers.ICMPv6OptSourceAddress, Data: tMacSLL}, {Type: layers.ICMPv6OptSourceAddress, Data: tMacSrc}}, nil),
		with(ip6Key(58), func(k *Key) { k.NwTTL = 255; k.TpSrc = 135 }), offs(14, 54), Malformed)
	add("nd-ns-cut-option", ndFrame(135, nil, []byte{1, 1, 1, 2, 3, 4, 5, 6, 1, 2, 0, 0})[:14+40+24+8+4],
		with(nsKey(135), func(k *Key) { k.ArpSHA = [6]byte{1, 2, 3, 4, 5, 6} }), offs(14, 54), Truncated)
	{
		// Bytes after the IPv6 payload (Ethernet padding) are not options.
		f := ndFrame(135, nil, nil)
		f = append(f, 1, 0, 0, 0, 0, 0, 0, 0)
		add("nd-ns-padding-ignored", f, nsKey(135), offs(14, 54), 0)
	}
	{
		// ND fields need code 0.
		ip := tIP6(layers.IPProtocolICMPv6)
		f := serialize(t, tEth(layers.EthernetTypeIPv6), ip, tICMP6(ip, 135, 1),
			&layers.ICMPv6NeighborSolicitation{TargetAddress: tTarget})
		add("nd-ns-code1", f, with(ip6Key(58), func(k *Key) { k.TpSrc, k.TpDst = 135, 1 }), offs(14, 54), 0)
	}

	// ARP.
	arpKey := func(op uint8) Key {
		k := baseKey()
		k.EthType = header.EtherTypeARP
		k.NwProto = op
		k.IPv4Src, k.IPv4Dst = tIP4SrcU, tIP4DstU
		k.ArpSHA, k.ArpTHA = [6]byte(tMacSrc), [6]byte(tMacSLL)
		return k
	}
	add("arp-request", frameARP(t, 1), arpKey(1), l3only(14), 0)
	add("arp-reply", frameARP(t, 2), arpKey(2), l3only(14), 0)
	add("arp-op-256", frameARP(t, 256), arpKey(0), l3only(14), 0)
	{
		a := &layers.ARP{AddrType: layers.LinkType(6), Protocol: layers.EthernetTypeIPv4,
			HwAddressSize: 6, ProtAddressSize: 4, Operation: 1,
			SourceHwAddress: tMacSrc, SourceProtAddress: tIP4Src, DstHwAddress: tMacSLL, DstProtAddress: tIP4Dst}
		add("arp-not-ethernet", serialize(t, tEth(layers.EthernetTypeARP), a),
			with(baseKey(), func(k *Key) { k.EthType = header.EtherTypeARP }), l3only(14), 0)
	}

	// 802.3, SNAP, MPLS, others.
	add("snap-udp4", frameSNAPUDP4(t), with(ip4Key(17), udpPorts), offs(22, 42), 0)
	{
		f := serialize(t, tEth(layers.EthernetTypeLLC), &layers.LLC{DSAP: 0x42, SSAP: 0x42, Control: 3}, payload(40))
		add("llc-stp", f, with(baseKey(), func(k *Key) { k.EthType = 0x05ff }), none, 0)
		f = serialize(t, tEth(layers.EthernetTypeLLC), &layers.LLC{DSAP: 0xaa, SSAP: 0xaa, Control: 3},
			&layers.SNAP{OrganizationalCode: []byte{0, 0, 0x0c}, Type: 0x2000}, payload(40))
		add("snap-cisco-oui", f, with(baseKey(), func(k *Key) { k.EthType = 0x05ff }), none, 0)
	}
	add("mpls", frameMPLS(t), with(baseKey(), func(k *Key) {
		k.EthType = 0x8847
		k.MPLSLse = 1000<<12 | 5<<9 | 1<<8 | 33
	}), none, 0)
	add("pbb", framePBB(t), with(baseKey(), func(k *Key) {
		k.VLAN[0] = VLANTag{TPID: 0x88a8, TCI: 3<<13 | 100}
		k.EthType = 0x88e7
		k.PBBISID = 0xabcdef
	}), none, 0)
	add("pbb-untagged", serialize(t, tEth(0x88e7), payload(4), payload(30)), with(baseKey(), func(k *Key) {
		k.EthType = 0x88e7
		k.PBBISID = 0x080f16 // bytes 2-4 of payload(4)
	}), none, 0)
	add("pbb-cut", framePBB(t)[:21], with(baseKey(), func(k *Key) {
		k.VLAN[0] = VLANTag{TPID: 0x88a8, TCI: 3<<13 | 100}
		k.EthType = 0x88e7
	}), none, Truncated)
	add("lldp", serialize(t, tEth(0x88cc), payload(50)), with(baseKey(), func(k *Key) { k.EthType = 0x88cc }), none, 0)

	// Malformed and inconsistent lengths.
	udp4 := frameUDP4(t, 18)
	tcp4 := frameTCP4(t)
	add("ipv4-ihl4", patch(udp4, 14, 0x44), with(baseKey(), func(k *Key) { k.EthType = header.EtherTypeIPv4 }), none, Malformed)
	add("ipv4-version5", patch(udp4, 14, 0x55), with(baseKey(), func(k *Key) { k.EthType = header.EtherTypeIPv4 }), none, Malformed)
	add("ipv4-totlen-below-ihl", patch(udp4, 16, 0, 19), with(baseKey(), func(k *Key) { k.EthType = header.EtherTypeIPv4 }), none, Malformed)
	add("ipv4-ihl-beyond-frame", patch(udp4, 14, 0x4f)[:50], with(baseKey(), func(k *Key) { k.EthType = header.EtherTypeIPv4 }), none, Truncated)
	add("ipv4-totlen-beyond-frame", patch(udp4, 16, 0, 200), with(ip4Key(17), udpPorts), offs(14, 34), Truncated)
	add("ipv4-totlen-cuts-udp", patch(udp4, 16, 0, 26), with(ip4Key(17), func(k *Key) { udpPorts(k) }), l3only(14), Truncated)
	add("tcp-doff4", patch(tcp4, 34+12, 0x40), with(ip4Key(6), func(k *Key) { k.TpSrc, k.TpDst = 40000, 80 }), l3only(14), Malformed)
	add("ipv6-version4", patch(frameUDP6(t), 14, 0x4b), with(baseKey(), func(k *Key) { k.EthType = header.EtherTypeIPv6 }), none, Malformed)
	add("ipv6-plen-beyond-frame", patch(frameUDP6(t), 18, 1, 0), with(ip6Key(17), udpPorts), offs(14, 54), Truncated)
	add("runt", udp4[:13], Key{InPort: tPort}, none, Truncated)
	add("empty", nil, Key{InPort: tPort}, none, Truncated)
	add("vlan-cut", frameVLANUDP4(t)[:16], with(baseKey(), func(k *Key) { k.EthType = 0x8100 }), none, Truncated)
	add("llc-cut", frameSNAPUDP4(t)[:16], with(baseKey(), func(k *Key) { k.EthType = 0x05ff }), none, Truncated)
	add("snap-cut", frameSNAPUDP4(t)[:19], with(baseKey(), func(k *Key) { k.EthType = 0x05ff }), none, Truncated)
	add("mpls-cut", frameMPLS(t)[:17], with(baseKey(), func(k *Key) { k.EthType = 0x8847 }), none, Truncated)
	return cs
}

func TestExtractCases(t *testing.T) {
	for _, c := range extractCases(t) {
		t.Run(c.name, func(t *testing.T) {
			var k Key
			// Garbage in the outputs must not leak into the result.
			for i := range k.Words() {
				k.Words()[i] = 0xa5a5a5a5a5a5a5a5
			}
			off := Offsets{1, 2}
			st := Extract(c.frame, tPort, &k, &off)
			if st != c.st {
				t.Errorf("status = %d, want %d", st, c.st)
			}
			if k != c.want {
				t.Errorf("key mismatch\n got  %s\n want %s\n%s", k.String(), c.want.String(), keyDiff(&k, &c.want))
			}
			if off != c.off {
				t.Errorf("offsets = %+v, want %+v", off, c.off)
			}
		})
	}
}

// keyDiff names the fields that differ, for failure messages.
func keyDiff(a, b *Key) string {
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	var s string
	for i := 0; i < va.NumField(); i++ {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			s += fmt.Sprintf("%s: %#v != %#v\n", va.Type().Field(i).Name, va.Field(i).Interface(), vb.Field(i).Interface())
		}
	}
	return s
}

// TestExtractTruncatedEveryLength cuts well-formed frames at every length
// and checks that the status says Truncated and that exactly the headers
// that fit were parsed.
func TestExtractTruncatedEveryLength(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		l3Len int // bytes of the network header the key reads
		l4Min int // bytes needed for Offsets.L4
	}{
		{"udp4", frameUDP4(t, 30), 20, 8},
		{"tcp4", frameTCP4(t), 20, 20},
		{"vlan-udp4", frameVLANUDP4(t), 20, 8},
		{"qinq-tcp4-options", frameQinQTCP4Opts(t), 24, 20},
		{"udp6", frameUDP6(t), 40, 8},
		{"ipv6-ext-udp", frameIPv6ExtUDP(t), 40, 8},
		{"nd-ns", frameNS(t), 40, 4},
		{"nd-na", frameNA(t), 40, 4},
		{"sctp4", frameSCTP4(t)[:14+20+12], 20, 12},
		{"arp", frameARP(t, 1)[:42], 28, 0},
		{"snap-udp4", frameSNAPUDP4(t), 20, 8},
		{"mpls", frameMPLS(t)[:18], 0, 0},
		{"pbb", framePBB(t)[:22], 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var fk Key
			var fo Offsets
			if st := Extract(c.frame, tPort, &fk, &fo); st != 0 {
				t.Fatalf("full frame: status %d", st)
			}
			for n := 0; n < len(c.frame); n++ {
				var k Key
				var off Offsets
				st := Extract(c.frame[:n:n], tPort, &k, &off)
				if st&Truncated == 0 {
					t.Errorf("len %d: status %d, want Truncated", n, st)
				}
				checkTruncated(t, n, &k, &off, &fk, &fo, c.l3Len, c.l4Min)
			}
		})
	}
}

func checkTruncated(t *testing.T, n int, k *Key, off *Offsets, fk *Key, fo *Offsets, l3Len, l4Min int) {
	t.Helper()
	// Every byte is either still zero or what the full parse found, except
	// NwProto (an IPv6 chain cut short names the header that was cut) and
	// EthType (a cut VLAN tag or SNAP header leaves the TPID / 0x05ff).
	kb := unsafe.Slice((*byte)(unsafe.Pointer(k)), unsafe.Sizeof(*k))
	fb := unsafe.Slice((*byte)(unsafe.Pointer(fk)), unsafe.Sizeof(*fk))
	for i := range kb {
		if i == 4 || i == 5 || i == 6 {
			continue
		}
		if i == 102 || i == 103 { // IPv6ExtHdr: bits accumulate along the chain
			continue
		}
		if kb[i] != 0 && kb[i] != fb[i] {
			t.Errorf("len %d: key byte %d = %#x, full parse has %#x", n, i, kb[i], fb[i])
			return
		}
	}
	if k.InPort != tPort {
		t.Errorf("len %d: InPort %d", n, k.InPort)
	}
	eq := func(what string, ok, want bool) {
		if ok != want {
			t.Errorf("len %d: %s present=%v, want %v", n, what, ok, want)
		}
	}
	eq("eth addrs", k.EthSrc == fk.EthSrc && k.EthDst == fk.EthDst && k.EthSrc != [6]byte{}, n >= 14)
	if fk.VLAN[0].TPID != 0 {
		eq("outer tag", k.VLAN[0] == fk.VLAN[0], n >= 18)
	}
	if fk.VLAN[1].TPID != 0 {
		eq("inner tag", k.VLAN[1] == fk.VLAN[1], n >= 22)
	}
	if fk.MPLSLse != 0 {
		eq("mpls", k.MPLSLse == fk.MPLSLse, n >= 18)
	}
	if fk.PBBISID != 0 {
		eq("pbb", k.PBBISID == fk.PBBISID, n >= 22)
	}
	if k.IPv6ExtHdr&^fk.IPv6ExtHdr != 0 {
		t.Errorf("len %d: IPv6ExtHdr %#x not a subset of the full parse's %#x", n, k.IPv6ExtHdr, fk.IPv6ExtHdr)
	}
	if fo.L3 == NoOffset {
		if off.L3 != NoOffset || off.L4 != NoOffset {
			t.Errorf("len %d: offsets %+v for a frame without L3", n, *off)
		}
		return
	}
	l3 := int(fo.L3)
	if n >= l3 && k.EthType != fk.EthType {
		t.Errorf("len %d: EthType %#x, want %#x", n, k.EthType, fk.EthType)
	}
	l3ok := n >= l3+l3Len
	eq("L3 offset", off.L3 == fo.L3, l3ok)
	eq("L3 addresses", k.IPv4Src == fk.IPv4Src && k.IPv6Src == fk.IPv6Src && k.NwTTL == fk.NwTTL &&
		(k.IPv4Src != 0 || k.IPv6Src != [16]byte{}), l3ok)
	if fk.EthType == header.EtherTypeARP {
		eq("ARP fields", k.ArpSHA == fk.ArpSHA && k.NwProto == fk.NwProto && k.ArpSHA != [6]byte{}, l3ok)
		return
	}
	if fo.L4 == NoOffset {
		t.Fatalf("full frame has no L4")
	}
	l4 := int(fo.L4)
	if n >= l4 && k.NwProto != fk.NwProto {
		t.Errorf("len %d: NwProto %d, want %d", n, k.NwProto, fk.NwProto)
	}
	eq("ports", k.TpSrc == fk.TpSrc && k.TpDst == fk.TpDst && k.TpSrc != 0, n >= l4+4)
	eq("L4 offset", off.L4 == fo.L4, n >= l4+l4Min)
	if fk.NwProto == 6 {
		eq("TCP flags", k.TCPFlags == fk.TCPFlags && k.TCPFlags != 0, n >= l4+20)
	}
	if fk.NDTarget != [16]byte{} {
		eq("ND target", k.NDTarget == fk.NDTarget, n >= l4+24)
		eq("ND link-layer address", k.ArpSHA == fk.ArpSHA && k.ArpTHA == fk.ArpTHA, n >= l4+32)
	}
}

// FuzzExtract lives in extract_fuzz_test.go; this checks the determinism
// and output hygiene the fuzzer also checks, on every table case.
func TestExtractDeterministic(t *testing.T) {
	for _, c := range extractCases(t) {
		var a, b Key
		var oa, ob Offsets
		sa := Extract(c.frame, 3, &a, &oa)
		b.Words()[0] = ^uint64(0)
		sb := Extract(c.frame, 3, &b, &ob)
		if a != b || oa != ob || sa != sb {
			t.Errorf("%s: two parses differ", c.name)
		}
	}
}

func TestExtractAllocs(t *testing.T) {
	frames := [][]byte{frameUDP4(t, 18), frameIPv6ExtUDP(t), frameNS(t), frameQinQTCP4Opts(t), frameARP(t, 1)}
	var k Key
	var off Offsets
	for _, f := range frames {
		if a := testing.AllocsPerRun(100, func() { Extract(f, 1, &k, &off) }); a != 0 {
			t.Errorf("Extract allocates %v times per call", a)
		}
	}
}

package actions

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// expect returns the packet s becomes under a, stated field by field (the
// bytes and checksums are then gopacket's business), and whether it survives.
func expect(s pktSpec, a *Action) (pktSpec, bool) {
	s = s.clone()
	hasL4Ports := s.frag != laterFrag && (s.proto == header.IPProtoTCP || s.proto == header.IPProtoUDP || s.proto == header.IPProtoSCTP)
	switch a.Kind {
	case SetEthSrc:
		copy(s.ethSrc[:], a.Addr[:6])
	case SetEthDst:
		copy(s.ethDst[:], a.Addr[:6])
	case SetIPv4Src:
		if !s.v6 {
			copy(s.src[:4], a.Addr[:4])
		}
	case SetIPv4Dst:
		if !s.v6 {
			copy(s.dst[:4], a.Addr[:4])
		}
	case SetIPv6Src:
		if s.v6 {
			s.src = a.Addr
		}
	case SetIPv6Dst:
		if s.v6 {
			s.dst = a.Addr
		}
	case SetIPTOS:
		m := a.Mask8
		if m == 0 {
			m = 0xff
		}
		s.tos = s.tos&^m | a.Val8&m
	case SetIPTTL:
		s.ttl = a.Val8
	case DecIPTTL:
		if s.ttl <= 1 {
			return s, false
		}
		s.ttl--
	case SetL4Src:
		if hasL4Ports {
			s.sport = a.Val16
		}
	case SetL4Dst:
		if hasL4Ports {
			s.dport = a.Val16
		}
	case PushVLAN:
		s.vlans = append([]vlanSpec{{a.Val16, a.Val16b}}, s.vlans...)
	case PopVLAN:
		if len(s.vlans) > 0 {
			s.vlans = s.vlans[1:]
		}
	case SetVLANTCI:
		if len(s.vlans) > 0 {
			m := a.Val16
			if m == 0 {
				m = 0xffff
			}
			s.vlans[0].tci = s.vlans[0].tci&^m | a.Val16b&m
		}
	case SetIPv6Label:
		if s.v6 {
			s.flowLabel = a.Val32 & 0xfffff
		}
	case SetICMPType, SetICMPCode:
		if s.frag != laterFrag && (s.proto == header.IPProtoICMP && !s.v6 || s.proto == header.IPProtoICMPv6 && s.v6) {
			if a.Kind == SetICMPType {
				s.sport = uint16(a.Val8)
			} else {
				s.dport = uint16(a.Val8)
			}
		}
	case SetICMPID:
		icmp := s.proto == header.IPProtoICMP && !s.v6 || s.proto == header.IPProtoICMPv6 && s.v6
		query := s.sport == 0 || s.sport == 8 || s.sport >= 13 && s.sport <= 18
		if s.v6 {
			query = s.sport == 128 || s.sport == 129
		}
		if s.frag != laterFrag && icmp && query {
			s.icmpID = a.Val16
		}
	case PushMPLS, PopMPLS, PushPBB, PopPBB:
		panic(fmt.Sprintf("%v: a pktSpec cannot describe MPLS or PBB", a))
	}
	// The other kinds (MPLS and PBB sets, ARP, ND, tunnel ID) have nothing
	// to act on in a packet a pktSpec describes.
	return s, true
}

// modelsKind reports whether expect can follow kind k.
func modelsKind(k Kind) bool {
	switch k {
	case PushMPLS, PopMPLS, PushPBB, PopPBB, SetEthType, SetIPProto, SetMPLSBoS:
		return false
	}
	return true
}

// rewriteActions covers every kind with values that change the packet.
var rewriteActions = []Action{
	{Kind: SetEthSrc, Addr: [16]byte{0x0a, 0xbb, 0xcc, 0xdd, 0xee, 0xff}},
	{Kind: SetEthDst, Addr: [16]byte{0x33, 0x33, 0, 0, 0, 0x16}},
	{Kind: SetIPv4Src, Addr: ip4(192, 0, 2, 77)},
	{Kind: SetIPv4Dst, Addr: ip4(198, 51, 100, 255)},
	{Kind: SetIPv6Src, Addr: ip6("fe80::1:2:3:4")},
	{Kind: SetIPv6Dst, Addr: ip6("2001:db8:ffff::ffff")},
	{Kind: SetIPTOS, Val8: 0xb8},
	{Kind: SetIPTOS, Val8: 0x03, Mask8: 0x03},
	{Kind: SetIPTOS, Val8: 0xff, Mask8: 0xfc},
	{Kind: SetIPTTL, Val8: 7},
	{Kind: SetIPTTL, Val8: 255},
	{Kind: DecIPTTL},
	{Kind: SetL4Src, Val16: 4242},
	{Kind: SetL4Dst, Val16: 0xffff},
	{Kind: SetL4Dst, Val16: 0},
	{Kind: PushVLAN, Val16: header.EtherTypeVLAN, Val16b: 0x200a},
	{Kind: PushVLAN, Val16: header.EtherTypeQinQ, Val16b: 0xf064},
	{Kind: PopVLAN},
	{Kind: SetVLANTCI, Val16b: 0x0123},
	{Kind: SetVLANTCI, Val16: 0x0fff, Val16b: 0xf321},
	{Kind: SetVLANTCI, Val16: 0xe000, Val16b: 0xa000},
	{Kind: SetIPv6Label, Val32: 0xabcde},
	{Kind: SetIPv6Label, Val32: 0xfff00000}, // bits above the label are ignored
	{Kind: SetICMPType, Val8: 3},
	{Kind: SetICMPCode, Val8: 13},
	{Kind: SetMPLSLabel, Val32: 77},
	{Kind: SetMPLSTC, Val8: 5},
	{Kind: SetMPLSTTL, Val8: 9},
	{Kind: DecMPLSTTL},
	{Kind: CopyTTLOut},
	{Kind: CopyTTLIn},
	{Kind: SetPBBISID, Val32: 0x123456},
	{Kind: SetNDTarget, Addr: ip6("2001:db8::99")},
	{Kind: SetNDSLL, Addr: [16]byte{2, 0, 0, 0, 0, 9}},
	{Kind: SetNDTLL, Addr: [16]byte{2, 0, 0, 0, 0, 9}},
	OutputTo(2),
	{Kind: Controller},
	{Kind: Drop},
	{Kind: Invalid},
}

// checkApply applies a to the packet of s and compares bytes, key and
// offsets with gopacket's rendering of the expected packet.
func checkApply(t *testing.T, s pktSpec, a *Action) {
	t.Helper()
	frame := s.build(t)
	p := loadPacket(t, &s, frame)
	defer p.Free()
	want, survives := expect(s, a)
	got := Apply(a, p)
	if got != survives {
		t.Fatalf("Apply returned %v, want %v", got, survives)
	}
	if !survives {
		return
	}
	wantFrame := want.build(t)
	if !bytes.Equal(p.Data(), wantFrame) {
		t.Fatalf("frame after %v:\n got %x\nwant %x\norig %x", *a, p.Data(), wantFrame, frame)
	}
	if !p.KeyValid {
		t.Fatalf("KeyValid cleared")
	}
	if wk := want.key(3); !p.Key.Equal(&wk) {
		t.Fatalf("key after %v:\n got %+v\nwant %+v", *a, p.Key, wk)
	}
	if wo := want.offsets(); p.Offsets != wo {
		t.Fatalf("offsets after %v: got %+v want %+v", *a, p.Offsets, wo)
	}
	checkKeyMatchesExtract(t, p)
}

// checkKeyMatchesExtract asserts the invariant Apply keeps: the packet's key
// and offsets are what extraction finds in its bytes.
func checkKeyMatchesExtract(t testing.TB, p *packet.Packet) {
	t.Helper()
	var k flow.Key
	var o flow.Offsets
	flow.Extract(p.Data(), p.Key.InPort, &k, &o)
	k.TunnelID, k.Tun = p.Key.TunnelID, p.Key.Tun // metadata: not in the frame
	if !k.Equal(&p.Key) || o != p.Offsets {
		t.Fatalf("key out of step with the frame %x:\n have %+v %+v\n extract %+v %+v", p.Data(), p.Key, p.Offsets, k, o)
	}
}

// The hand-derived keys the tests start from must be what extraction says,
// or the tests would check Apply against the wrong precondition.
func TestSpecKeyMatchesExtract(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, proto := range []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMP, header.IPProtoICMPv6} {
			for _, frag := range []int{notFrag, firstFrag, laterFrag} {
				if (v6 && (proto == header.IPProtoICMP || frag != notFrag)) || (!v6 && proto == header.IPProtoICMPv6) {
					continue
				}
				s := baseSpec(v6, proto)
				s.frag = frag
				s.vlans = []vlanSpec{{header.EtherTypeQinQ, 0x1001}, {header.EtherTypeVLAN, 0xe002}}
				s.ipOption = !v6 && proto == header.IPProtoUDP
				p := loadPacket(t, &s, s.build(t))
				checkKeyMatchesExtract(t, p)
				p.Free()
			}
		}
	}
}

func TestApplyEveryKind(t *testing.T) {
	type family struct {
		v6     bool
		protos []uint8
	}
	families := []family{
		{false, []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMP}},
		{true, []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMPv6}},
	}
	tags := [][]vlanSpec{nil, {{header.EtherTypeVLAN, 0x6005}}}
	for _, f := range families {
		for _, proto := range f.protos {
			for _, vl := range tags {
				for i := range rewriteActions {
					a := &rewriteActions[i]
					name := fmt.Sprintf("v6=%v/proto=%d/vlans=%d/%v", f.v6, proto, len(vl), a.String())
					t.Run(name, func(t *testing.T) {
						s := baseSpec(f.v6, proto)
						s.vlans = vl
						checkApply(t, s, a)
					})
				}
			}
		}
	}
}

func TestApplyIPv4Options(t *testing.T) {
	for _, proto := range []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP} {
		for i := range rewriteActions {
			s := baseSpec(false, proto)
			s.ipOption = true
			checkApply(t, s, &rewriteActions[i])
		}
	}
}

func TestApplyUDPZeroChecksumStaysZero(t *testing.T) {
	for _, a := range []Action{
		{Kind: SetIPv4Src, Addr: ip4(1, 2, 3, 4)},
		{Kind: SetIPv4Dst, Addr: ip4(4, 3, 2, 1)},
		{Kind: SetL4Src, Val16: 1},
		{Kind: SetL4Dst, Val16: 53},
	} {
		s := baseSpec(false, header.IPProtoUDP)
		s.udpZeroCsum = true
		checkApply(t, s, &a)
		// checkApply compared against a zero-checksum rendering; assert it
		// directly too, since that is the point of the test.
		p := loadPacket(t, &s, s.build(t))
		Apply(&a, p)
		c := s.l4Offset() + 6
		if d := p.Data(); d[c] != 0 || d[c+1] != 0 {
			t.Errorf("%v: UDP checksum became %x", a, d[c:c+2])
		}
		p.Free()
	}
}

// A rewrite whose result sums to zero must send 0xffff: zero means "no
// checksum" in UDP.
func TestApplyUDPChecksumZeroSentAsOnes(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		s := baseSpec(v6, header.IPProtoUDP)
		frame := s.build(t)
		c := s.l4Offset() + 6
		old := binary.BigEndian.Uint16(frame[c:])
		// Pick the destination port that makes the one's-complement sum of
		// the datagram 0xffff, i.e. a computed checksum of zero.
		acc := uint32(^old) + uint32(^s.dport)
		acc = (acc & 0xffff) + acc>>16
		acc = (acc & 0xffff) + acc>>16
		port := ^uint16(acc)
		want := s.clone()
		want.dport = port
		wantFrame := want.build(t)
		// build maps gopacket's zero to 0xffff; confirm the sum really was zero.
		if binary.BigEndian.Uint16(wantFrame[c:]) != 0xffff {
			t.Fatalf("v6=%v: test setup: port %d gives checksum %x, not zero", v6, port, wantFrame[c:c+2])
		}
		p := loadPacket(t, &s, frame)
		Apply(&Action{Kind: SetL4Dst, Val16: port}, p)
		if !bytes.Equal(p.Data(), wantFrame) {
			t.Errorf("v6=%v:\n got %x\nwant %x", v6, p.Data(), wantFrame)
		}
		p.Free()
	}
}

func TestApplyFragments(t *testing.T) {
	for _, proto := range []uint8{header.IPProtoTCP, header.IPProtoUDP} {
		for _, frag := range []int{firstFrag, laterFrag} {
			for i := range rewriteActions {
				a := &rewriteActions[i]
				t.Run(fmt.Sprintf("proto=%d/frag=%d/%v", proto, frag, a), func(t *testing.T) {
					s := baseSpec(false, proto)
					s.frag = frag
					checkApply(t, s, a)
				})
			}
		}
	}
	// The later fragment's payload must come through bit for bit, even though
	// it looks like a transport header.
	s := baseSpec(false, header.IPProtoTCP)
	s.frag = laterFrag
	frame := s.build(t)
	p := loadPacket(t, &s, frame)
	defer p.Free()
	for _, a := range []Action{
		{Kind: SetIPv4Src, Addr: ip4(9, 9, 9, 9)},
		{Kind: SetL4Src, Val16: 1},
		{Kind: SetL4Dst, Val16: 2},
	} {
		Apply(&a, p)
	}
	l4 := s.l4Offset()
	if !bytes.Equal(p.Data()[l4:], frame[l4:]) {
		t.Errorf("later fragment payload changed:\n got %x\nwant %x", p.Data()[l4:], frame[l4:])
	}
}

// The CRC of a fragmented SCTP packet covers bytes this fragment does not
// have: the port changes, the CRC is left alone.
func TestApplySCTPFirstFragmentKeepsCRC(t *testing.T) {
	s := baseSpec(false, header.IPProtoSCTP)
	s.frag = firstFrag
	frame := s.build(t)
	p := loadPacket(t, &s, frame)
	defer p.Free()
	Apply(&Action{Kind: SetL4Dst, Val16: 7}, p)
	l4 := s.l4Offset()
	d := p.Data()
	if binary.BigEndian.Uint16(d[l4+2:]) != 7 || p.Key.TpDst != 7 {
		t.Errorf("port not set")
	}
	if !bytes.Equal(d[l4+8:l4+12], frame[l4+8:l4+12]) {
		t.Errorf("CRC changed from %x to %x", frame[l4+8:l4+12], d[l4+8:l4+12])
	}
	checkKeyMatchesExtract(t, p)
}

func TestApplySCTPChecksumIsCRC32c(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		s := baseSpec(v6, header.IPProtoSCTP)
		s.payload = []byte("abc") // SCTP pads to 4 bytes, Ethernet pads the frame
		p := loadPacket(t, &s, s.build(t))
		Apply(&Action{Kind: SetL4Src, Val16: 9999}, p)
		d := p.Data()
		l4 := s.l4Offset()
		var end int
		if v6 {
			end = s.l3Offset() + 40 + int(binary.BigEndian.Uint16(d[s.l3Offset()+4:]))
		} else {
			end = s.l3Offset() + int(binary.BigEndian.Uint16(d[s.l3Offset()+2:]))
		}
		sctp := append([]byte(nil), d[l4:end]...)
		got := binary.LittleEndian.Uint32(sctp[8:])
		sctp[8], sctp[9], sctp[10], sctp[11] = 0, 0, 0, 0
		if want := crc32.Checksum(sctp, crc32.MakeTable(crc32.Castagnoli)); got != want {
			t.Errorf("v6=%v: SCTP CRC %08x, want %08x", v6, got, want)
		}
		p.Free()
	}
}

func TestPushPopVLANRestoresBytes(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, vl := range [][]vlanSpec{nil, {{header.EtherTypeQinQ, 0x0064}}} {
			s := baseSpec(v6, header.IPProtoTCP)
			s.vlans = vl
			frame := s.build(t)
			p := loadPacket(t, &s, frame)
			key, off, head := p.Key, p.Offsets, p.Headroom()
			if !Apply(&Action{Kind: PushVLAN, Val16: header.EtherTypeVLAN, Val16b: 0xe00f}, p) {
				t.Fatal("push dropped the packet")
			}
			if p.Len() != len(frame)+4 || p.Headroom() != head-4 {
				t.Fatalf("after push: len %d headroom %d", p.Len(), p.Headroom())
			}
			Apply(&Action{Kind: PopVLAN}, p)
			if !bytes.Equal(p.Data(), frame) {
				t.Errorf("push+pop:\n got %x\nwant %x", p.Data(), frame)
			}
			if p.Key != key || p.Offsets != off || p.Headroom() != head || !p.KeyValid {
				t.Errorf("push+pop changed metadata: key %+v off %+v headroom %d", p.Key, p.Offsets, p.Headroom())
			}
			p.Free()
		}
	}
}

func TestPushVLANThirdTagInvalidatesKey(t *testing.T) {
	s := baseSpec(false, header.IPProtoUDP)
	s.vlans = []vlanSpec{{header.EtherTypeQinQ, 1}, {header.EtherTypeVLAN, 2}}
	p := loadPacket(t, &s, s.build(t))
	defer p.Free()
	a := Action{Kind: PushVLAN, Val16: header.EtherTypeVLAN, Val16b: 3}
	if !Apply(&a, p) {
		t.Fatal("push dropped the packet")
	}
	if p.KeyValid {
		t.Error("key still valid with three tags")
	}
	want, _ := expect(s, &a)
	if wf := want.build(t); !bytes.Equal(p.Data(), wf) {
		t.Errorf("three tags:\n got %x\nwant %x", p.Data(), wf)
	}
}

func TestPushVLANOddTPIDInvalidatesKey(t *testing.T) {
	cases := []struct {
		name  string
		vlans []vlanSpec
		tpid  uint16
	}{
		{"unknown-tpid", nil, 0x1234},
		{"0x9100-becomes-inner", []vlanSpec{{header.EtherTypeQinQOld, 7}}, header.EtherTypeVLAN},
	}
	for _, c := range cases {
		s := baseSpec(false, header.IPProtoUDP)
		s.vlans = c.vlans
		p := loadPacket(t, &s, s.build(t))
		Apply(&Action{Kind: PushVLAN, Val16: c.tpid, Val16b: 3}, p)
		if p.KeyValid {
			t.Errorf("%s: key still valid", c.name)
		}
		if got := binary.BigEndian.Uint32(p.Data()[12:]); got != uint32(c.tpid)<<16|3 {
			t.Errorf("%s: tag %08x", c.name, got)
		}
		// Extraction indeed disagrees with a plain shift of the tags.
		var k flow.Key
		var o flow.Offsets
		flow.Extract(p.Data(), 3, &k, &o)
		if k.Equal(&p.Key) {
			t.Errorf("%s: extraction agrees with the shifted key; invalidating was not needed", c.name)
		}
		// The offsets still point at the IPv4 header, so later rewrites work.
		if int(p.Offsets.L3) != s.l3Offset()+4 || p.Data()[p.Offsets.L3]>>4 != 4 {
			t.Errorf("%s: L3 offset %d does not point at the IPv4 header", c.name, p.Offsets.L3)
		}
		p.Free()
	}
}

// Popping from a stack deeper than the key holds lets extraction see a tag
// (and the IP header) it could not before; the key must follow.
func TestPopVLANFromThreeTags(t *testing.T) {
	for _, inner := range []uint16{header.EtherTypeVLAN, header.EtherTypeQinQOld} {
		s := baseSpec(false, header.IPProtoTCP)
		s.vlans = []vlanSpec{{header.EtherTypeQinQ, 1}, {header.EtherTypeVLAN, 2}, {inner, 3}}
		if inner == header.EtherTypeQinQOld {
			s.vlans = s.vlans[1:] // 0x8100 then 0x9100: the 0x9100 is not parsed
		}
		frame := s.build(t)
		p := testPool.Get()
		p.SetData(frame)
		flow.Extract(p.Data(), 3, &p.Key, &p.Offsets)
		p.KeyValid = true
		if p.Offsets.L3 != flow.NoOffset {
			t.Fatalf("setup: extraction parsed past the unparsed tag")
		}
		Apply(&Action{Kind: PopVLAN}, p)
		want, _ := expect(s, &Action{Kind: PopVLAN})
		if wf := want.build(t); !bytes.Equal(p.Data(), wf) {
			t.Errorf("\n got %x\nwant %x", p.Data(), wf)
		}
		checkKeyMatchesExtract(t, p)
		if p.Key.EthType != header.EtherTypeIPv4 && len(want.vlans) <= 2 {
			t.Errorf("EthType %#x after pop", p.Key.EthType)
		}
		p.Free()
	}
}

func TestPushVLANWithoutHeadroomDrops(t *testing.T) {
	s := baseSpec(false, header.IPProtoUDP)
	p := loadPacket(t, &s, s.build(t))
	defer p.Free()
	a := Action{Kind: PushVLAN, Val16: header.EtherTypeVLAN, Val16b: 1}
	n := p.Headroom() / 4
	for i := 0; i < n; i++ {
		if !Apply(&a, p) {
			t.Fatalf("push %d dropped with headroom %d", i, p.Headroom())
		}
	}
	before := append([]byte(nil), p.Data()...)
	if Apply(&a, p) {
		t.Fatal("push without headroom did not drop")
	}
	if !bytes.Equal(p.Data(), before) {
		t.Error("failed push changed the frame")
	}
}

func TestDecTTL(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, ttl := range []uint8{0, 1, 2, 255} {
			s := baseSpec(v6, header.IPProtoUDP)
			s.ttl = ttl
			checkApply(t, s, &Action{Kind: DecIPTTL})
		}
	}
	s := baseSpec(false, header.IPProtoTCP)
	s.ttl = 1
	p := loadPacket(t, &s, s.build(t))
	defer p.Free()
	if Apply(&Action{Kind: DecIPTTL}, p) {
		t.Error("TTL 1 not dropped")
	}
}

func TestSetOnAbsentHeaderIsNoOp(t *testing.T) {
	// An ARP request: no IP, no L4.
	arp := []byte{
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
		0, 1, 0x08, 0x00, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	}
	p := testPool.Get()
	defer p.Free()
	p.SetData(arp)
	p.Key = flow.Key{EthType: 0x0806, NwProto: 1, IPv4Src: 0x0a000001, IPv4Dst: 0x0a000002}
	copy(p.Key.EthDst[:], arp[0:6])
	copy(p.Key.EthSrc[:], arp[6:12])
	copy(p.Key.ArpSHA[:], arp[22:28])
	p.Offsets = flow.Offsets{L3: 14, L4: flow.NoOffset}
	p.KeyValid = true
	key := p.Key
	for i := range rewriteActions {
		a := &rewriteActions[i]
		switch a.Kind {
		case SetEthSrc, SetEthDst, PushVLAN:
			continue // these apply to any Ethernet frame
		}
		if !Apply(a, p) {
			t.Errorf("%v dropped an ARP packet", a)
		}
		if !bytes.Equal(p.Data(), arp) || p.Key != key {
			t.Fatalf("%v changed an ARP packet: %x", a, p.Data())
		}
	}
}

// A key that claims headers beyond the end of the frame must not make Apply
// read or write outside it.
func TestApplyStaysInsideFrame(t *testing.T) {
	s := baseSpec(false, header.IPProtoTCP)
	frame := s.build(t)
	for cut := 0; cut <= len(frame); cut++ {
		for i := range rewriteActions {
			p := loadPacket(t, &s, frame[:cut])
			Apply(&rewriteActions[i], p)
			if p.Len() > cut+4 {
				t.Fatalf("cut %d: %v grew the frame to %d", cut, rewriteActions[i], p.Len())
			}
			p.Free()
		}
	}
}

func TestApplyList(t *testing.T) {
	s := baseSpec(false, header.IPProtoTCP)
	l := List{
		{Kind: SetIPv4Dst, Addr: ip4(172, 16, 0, 9)},
		{Kind: SetL4Dst, Val16: 8080},
		OutputTo(1),
		{Kind: DecIPTTL},
		{Kind: PushVLAN, Val16: header.EtherTypeVLAN, Val16b: 5},
	}
	want := s
	for i := range l {
		want, _ = expect(want, &l[i])
	}
	p := loadPacket(t, &s, s.build(t))
	defer p.Free()
	if !ApplyList(l, p) {
		t.Fatal("dropped")
	}
	if wf := want.build(t); !bytes.Equal(p.Data(), wf) {
		t.Errorf("\n got %x\nwant %x", p.Data(), wf)
	}
	s.ttl = 1
	q := loadPacket(t, &s, s.build(t))
	defer q.Free()
	if ApplyList(l, q) {
		t.Error("TTL 1 survived the list")
	}
}

func TestCsumAdjustMatchesRecompute(t *testing.T) {
	// Exhaustive over one word against a from-scratch RFC 1071 sum of a
	// small buffer, including the all-ones corner.
	sum := func(b []byte) uint16 {
		var s uint32
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(binary.BigEndian.Uint16(b[i:]))
		}
		for s > 0xffff {
			s = s&0xffff + s>>16
		}
		return ^uint16(s)
	}
	buf := []byte{0x12, 0x34, 0, 0, 0xab, 0xcd}
	c := sum(buf)
	for v := 0; v <= 0xffff; v++ {
		old := binary.BigEndian.Uint16(buf[2:])
		binary.BigEndian.PutUint16(buf[2:], uint16(v))
		c = header.CsumAdjust(c, header.CsumDelta(0, old, uint16(v)))
		if want := sum(buf); c != want {
			t.Fatalf("word %04x: incremental %04x, recomputed %04x", v, c, want)
		}
	}
}

package actions

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// dropAllowed reports whether an action of kind k may drop a packet whose
// relevant TTL was ttl: a decrement of an exhausted TTL, or a push that
// found no headroom.
func dropAllowed(k Kind, ttl uint8) bool {
	switch k {
	case DecIPTTL, DecMPLSTTL:
		return ttl <= 1
	case PushVLAN, PushMPLS, PushPBB:
		return true
	}
	return false
}

// mplsTTL reads the top MPLS entry's TTL from the bytes (skipping every
// VLAN tag, as the MPLS actions do), or 255 for a frame without one.
func mplsTTL(p *packet.Packet) uint8 {
	d := p.Data()
	pos := 12
	for pos+6 <= len(d) {
		switch binary.BigEndian.Uint16(d[pos:]) {
		case header.EtherTypeVLAN, header.EtherTypeQinQ, header.EtherTypeQinQOld:
			pos += 4
			continue
		case header.EtherTypeMPLS, header.EtherTypeMPLSMcast:
			if pos+6 <= len(d) {
				return d[pos+5]
			}
		}
		break
	}
	return 255
}

// ethLayers returns the Ethernet header and tags of s, ending in type typ.
func ethLayers(s *pktSpec, typ uint16) []gopacket.SerializableLayer {
	next := typ
	if len(s.vlans) > 0 {
		next = s.vlans[0].tpid
	}
	ls := []gopacket.SerializableLayer{&layers.Ethernet{
		SrcMAC: net.HardwareAddr(s.ethSrc[:]), DstMAC: net.HardwareAddr(s.ethDst[:]),
		EthernetType: layers.EthernetType(next),
	}}
	for i, v := range s.vlans {
		next = typ
		if i+1 < len(s.vlans) {
			next = s.vlans[i+1].tpid
		}
		ls = append(ls, &layers.Dot1Q{
			Priority: uint8(v.tci >> 13), DropEligible: v.tci&0x1000 != 0,
			VLANIdentifier: v.tci & 0x0fff, Type: layers.EthernetType(next),
		})
	}
	return ls
}

// mplsFrame is s with the label stack lses (top first) between its tags
// and its IP header, as gopacket renders it.
func mplsFrame(t testing.TB, s *pktSpec, typ uint16, lses ...layers.MPLS) []byte {
	t.Helper()
	ls := ethLayers(s, typ)
	for i := range lses {
		ls = append(ls, &lses[i])
	}
	ls = append(ls, gopacket.Payload(s.build(t)[s.l3Offset():]))
	return serialize(t, ls...)
}

func applyOK(t *testing.T, a Action, p *packet.Packet) {
	t.Helper()
	if !Apply(&a, p) {
		t.Fatalf("%v dropped the packet", a)
	}
	if !p.KeyValid {
		t.Fatalf("%v cleared KeyValid", a)
	}
	checkKeyMatchesExtract(t, p)
}

func wantFrame(t *testing.T, a Action, p *packet.Packet, want []byte) {
	t.Helper()
	if !bytes.Equal(p.Data(), want) {
		t.Fatalf("after %v:\n got %x\nwant %x", a, p.Data(), want)
	}
}

// Push and pop MPLS round trip over IPv4 and IPv6, with 0-2 tags, checking
// each step against gopacket's rendering and OpenFlow's TTL/label copying.
func TestPushPopMPLS(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for n := 0; n <= 2; n++ {
			s := baseSpec(v6, header.IPProtoUDP)
			s.ttl = 57
			s.vlans = []vlanSpec{{header.EtherTypeQinQ, 0x2001}, {header.EtherTypeVLAN, 0x0002}}[:n]
			orig := s.build(t)
			p := loadPacket(t, &s, orig)

			a := Action{Kind: PushMPLS, Val16: header.EtherTypeMPLS}
			applyOK(t, a, p)
			wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLS, layers.MPLS{StackBottom: true, TTL: 57}))
			if p.Key.EthType != header.EtherTypeMPLS || p.Key.MPLSLse != lseBoS|57 || p.Offsets.L3 != flow.NoOffset ||
				p.Key.VLAN != s.key(3).VLAN || p.Key.EthSrc != s.ethSrc {
				t.Fatalf("key after push: %+v %+v", p.Key, p.Offsets)
			}

			for _, a := range []Action{{Kind: SetMPLSLabel, Val32: 0xfedcb}, {Kind: SetMPLSTC, Val8: 5}, {Kind: SetMPLSTTL, Val8: 33}, {Kind: DecMPLSTTL}} {
				applyOK(t, a, p)
			}
			inner := layers.MPLS{Label: 0xfedcb, TrafficClass: 5, StackBottom: true, TTL: 32}
			wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLS, inner))

			// A push onto a stack copies the label, TC and TTL.
			a = Action{Kind: PushMPLS, Val16: header.EtherTypeMPLSMcast}
			applyOK(t, a, p)
			outer := inner
			outer.StackBottom = false
			wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLSMcast, outer, inner))
			if p.Key.MPLSLse != 0xfedcb<<12|5<<9|32 {
				t.Fatalf("top entry %#x", p.Key.MPLSLse)
			}

			a = Action{Kind: PopMPLS, Val16: header.EtherTypeMPLS}
			applyOK(t, a, p)
			wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLS, inner))
			a = Action{Kind: PopMPLS, Val16: s.ipType()}
			applyOK(t, a, p)
			// The TTL went into the label, not the IP header: the frame is
			// the original.
			wantFrame(t, a, p, orig)
			if wk := s.key(3); !p.Key.Equal(&wk) || p.Offsets != s.offsets() {
				t.Fatalf("key after pops: %+v", p.Key)
			}
			p.Free()
		}
	}
}

// Push MPLS on a packet that is neither IP nor MPLS takes TTL 0; an 802.3
// frame has no type to replace and is left alone.
func TestPushMPLSNonIP(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	arpLayers := func(typ uint16, lse ...gopacket.SerializableLayer) []byte {
		ls := []gopacket.SerializableLayer{&layers.Ethernet{SrcMAC: mac, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetType(typ)}}
		ls = append(ls, lse...)
		return serialize(t, append(ls, &layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: 1, SourceHwAddress: mac, SourceProtAddress: []byte{10, 0, 0, 1},
			DstHwAddress: make([]byte, 6), DstProtAddress: []byte{10, 0, 0, 2},
		})...)
	}
	p := extracted(t, arpLayers(header.EtherTypeARP))
	a := Action{Kind: PushMPLS, Val16: 0x1234} // any type but 0x8848 means 0x8847
	applyOK(t, a, p)
	// gopacket pads both frames to 60 bytes; the pushed frame keeps the
	// original's 18 bytes of padding behind 14+4+28 bytes of headers.
	want := arpLayers(header.EtherTypeMPLS, &layers.MPLS{StackBottom: true})
	wantFrame(t, a, p, append(want[:46], make([]byte, 18)...))
	p.Free()

	llc := make([]byte, 64)
	llc[12], llc[13] = 0, 50
	p = extracted(t, llc)
	defer p.Free()
	applyOK(t, a, p)
	wantFrame(t, a, p, llc)
}

// extracted loads frame into a packet with the key extraction gives.
func extracted(t *testing.T, frame []byte) *packet.Packet {
	t.Helper()
	p := testPool.Get()
	p.SetData(frame)
	flow.Extract(p.Data(), 3, &p.Key, &p.Offsets)
	p.KeyValid = true
	return p
}

func TestDecMPLSTTLDrops(t *testing.T) {
	s := baseSpec(false, header.IPProtoTCP)
	for ttl := 0; ttl <= 2; ttl++ {
		p := extracted(t, mplsFrame(t, &s, header.EtherTypeMPLS, layers.MPLS{Label: 5, StackBottom: true, TTL: uint8(ttl)}))
		if got := Apply(&Action{Kind: DecMPLSTTL}, p); got != (ttl == 2) {
			t.Errorf("ttl %d: survived %v", ttl, got)
		}
		p.Free()
	}
	// Without MPLS, the action does nothing.
	p := loadPacket(t, &s, s.build(t))
	defer p.Free()
	s.ttl = 1
	applyOK(t, Action{Kind: DecMPLSTTL}, p)
}

// Copy TTL out and in across two labels and an IP header: the IPv4
// checksum must follow.
func TestCopyTTL(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		s := baseSpec(v6, header.IPProtoTCP)
		s.ttl = 99
		top := layers.MPLS{Label: 1, TTL: 10}
		bottom := layers.MPLS{Label: 2, StackBottom: true, TTL: 20}
		p := extracted(t, mplsFrame(t, &s, header.EtherTypeMPLS, top, bottom))

		a := Action{Kind: CopyTTLOut} // next entry -> top
		applyOK(t, a, p)
		top.TTL = 20
		wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLS, top, bottom))
		a = Action{Kind: PopMPLS, Val16: header.EtherTypeMPLS}
		applyOK(t, a, p)
		a = Action{Kind: CopyTTLOut} // IP -> bottom entry
		applyOK(t, a, p)
		bottom.TTL = 99
		wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLS, bottom))
		if p.Key.MPLSLse&0xff != 99 {
			t.Fatalf("key entry %#x", p.Key.MPLSLse)
		}

		applyOK(t, Action{Kind: SetMPLSTTL, Val8: 7}, p)
		a = Action{Kind: CopyTTLIn} // bottom entry -> IP, checksum updated
		applyOK(t, a, p)
		bottom.TTL, s.ttl = 7, 7
		wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLS, bottom)) // gopacket summed the IPv4 header afresh

		// Copy in to the next entry.
		applyOK(t, Action{Kind: PushMPLS}, p)
		applyOK(t, Action{Kind: SetMPLSTTL, Val8: 3}, p)
		a = Action{Kind: CopyTTLIn}
		applyOK(t, a, p)
		top = bottom
		top.StackBottom = false
		top.TTL, bottom.TTL = 3, 3
		wantFrame(t, a, p, mplsFrame(t, &s, header.EtherTypeMPLS, top, bottom))
		p.Free()
	}
}

// pbbFrame is the 802.1ah encapsulation of customer frame c as gopacket
// renders it (it has no I-TAG layer: the TCI goes in as payload).
func pbbFrame(t testing.TB, bda, bsa net.HardwareAddr, tci uint32, c []byte) []byte {
	t.Helper()
	itag := binary.BigEndian.AppendUint32(nil, tci)
	return serialize(t,
		&layers.Ethernet{DstMAC: bda, SrcMAC: bsa, EthernetType: header.EtherTypePBB},
		gopacket.Payload(append(itag, c...)))
}

func TestPushPopPBB(t *testing.T) {
	s := baseSpec(false, header.IPProtoUDP)
	s.vlans = []vlanSpec{{header.EtherTypeVLAN, 0x0064}}
	orig := s.build(t)
	p := loadPacket(t, &s, orig)
	defer p.Free()

	a := Action{Kind: PushPBB, Val16: header.EtherTypePBB, Val8: 0xa8, Val32: 0xff123456}
	applyOK(t, a, p)
	wantFrame(t, a, p, pbbFrame(t, s.ethDst[:], s.ethSrc[:], 0xa8123456, orig))
	if p.Key.EthType != header.EtherTypePBB || p.Key.PBBISID != 0x123456 || p.Key.VLAN != [2]flow.VLANTag{} {
		t.Fatalf("key after push_pbb: %+v", p.Key)
	}

	a = Action{Kind: SetPBBISID, Val32: 0xabcdef}
	applyOK(t, a, p)
	wantFrame(t, a, p, pbbFrame(t, s.ethDst[:], s.ethSrc[:], 0xa8abcdef, orig))
	if p.Key.PBBISID != 0xabcdef {
		t.Fatalf("I-SID %#x", p.Key.PBBISID)
	}

	// Backbone addresses and a B-TAG, then pop: the customer frame is back.
	bda := Action{Kind: SetEthDst, Addr: [16]byte{0x01, 0x1e, 0x83, 0, 0, 1}}
	applyOK(t, bda, p)
	applyOK(t, Action{Kind: PushVLAN, Val16: header.EtherTypeQinQ, Val16b: 7}, p)
	a = Action{Kind: PopPBB}
	applyOK(t, a, p)
	wantFrame(t, a, p, orig)
	if wk := s.key(3); !p.Key.Equal(&wk) || p.Offsets != s.offsets() {
		t.Fatalf("key after pop_pbb: %+v", p.Key)
	}
	// Not PBB any more: a second pop does nothing.
	applyOK(t, a, p)
	wantFrame(t, a, p, orig)
}

// Pushes that find no headroom drop the packet and leave it as it was.
func TestEncapWithoutHeadroomDrops(t *testing.T) {
	for _, a := range []Action{{Kind: PushMPLS}, {Kind: PushPBB}} {
		s := baseSpec(false, header.IPProtoUDP)
		p := loadPacket(t, &s, s.build(t))
		for p.Headroom() >= pbbLen || a.Kind == PushMPLS && p.Headroom() >= mplsLen {
			if !Apply(&a, p) {
				t.Fatalf("%v dropped with headroom %d", a, p.Headroom())
			}
		}
		before := append([]byte(nil), p.Data()...)
		if Apply(&a, p) {
			t.Errorf("%v without headroom did not drop", a)
		}
		if !bytes.Equal(p.Data(), before) {
			t.Errorf("%v: failed push changed the frame", a)
		}
		p.Free()
	}
}

// The tunnel ID is metadata: the key changes, the frame does not, and it
// survives the actions that parse the frame again.
func TestSetTunnelID(t *testing.T) {
	s := baseSpec(true, header.IPProtoTCP)
	orig := s.build(t)
	p := loadPacket(t, &s, orig)
	defer p.Free()
	a := Action{Kind: SetTunnelID, Addr: [16]byte{0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}}
	applyOK(t, a, p)
	wantFrame(t, a, p, orig)
	for _, b := range []Action{{Kind: PushMPLS}, {Kind: PopMPLS, Val16: header.EtherTypeIPv6}} {
		applyOK(t, b, p)
	}
	if p.Key.TunnelID != 0xdeadbeef {
		t.Fatalf("tunnel ID %#x", p.Key.TunnelID)
	}
}

func arpFrame(t testing.TB, op uint16, sha, tha net.HardwareAddr, spa, tpa []byte) []byte {
	t.Helper()
	return serialize(t,
		&layers.Ethernet{SrcMAC: sha, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
		&layers.ARP{
			AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: op, SourceHwAddress: sha, SourceProtAddress: spa, DstHwAddress: tha, DstProtAddress: tpa,
		})
}

func TestSetARP(t *testing.T) {
	sha, tha := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{0, 0, 0, 0, 0, 0}
	spa, tpa := []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}
	p := extracted(t, arpFrame(t, 1, sha, tha, spa, tpa))
	defer p.Free()
	newSHA, newTHA := net.HardwareAddr{0x0a, 1, 2, 3, 4, 5}, net.HardwareAddr{0x0a, 6, 7, 8, 9, 0xa}
	cases := []struct {
		a      Action
		update func()
	}{
		{Action{Kind: SetARPOp, Val16: 2}, func() {}},
		{Action{Kind: SetARPSPA, Addr: ip4(192, 0, 2, 1)}, func() { spa = []byte{192, 0, 2, 1} }},
		{Action{Kind: SetARPTPA, Addr: ip4(192, 0, 2, 2)}, func() { tpa = []byte{192, 0, 2, 2} }},
		{Action{Kind: SetARPSHA, Addr: [16]byte(append(newSHA, make([]byte, 10)...))}, func() { sha = newSHA }},
		{Action{Kind: SetARPTHA, Addr: [16]byte(append(newTHA, make([]byte, 10)...))}, func() { tha = newTHA }},
	}
	for _, c := range cases {
		applyOK(t, c.a, p)
		c.update()
		want := arpFrame(t, 2, sha, tha, spa, tpa)
		copy(want[6:12], []byte{2, 0, 0, 0, 0, 1}) // the Ethernet source stays
		wantFrame(t, c.a, p, want)
	}
	if p.Key.NwProto != 2 || p.Key.IPv4Src != 0xc0000201 || p.Key.ArpTHA != [6]byte(newTHA) {
		t.Fatalf("key %+v", p.Key)
	}
	// An opcode above 255 does not fit the key's byte: extraction records 0.
	applyOK(t, Action{Kind: SetARPOp, Val16: 0x100}, p)
	if p.Key.NwProto != 0 {
		t.Fatalf("NwProto %d", p.Key.NwProto)
	}
}

// ndFrame renders a neighbour solicitation (with a source link-layer
// option) or advertisement (target link-layer option).
func ndFrame(t testing.TB, advert bool, target [16]byte, ll net.HardwareAddr, icmpType uint8) []byte {
	t.Helper()
	src, dst := ip6("fe80::1"), ip6("ff02::1:ff00:2")
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6,
		SrcIP: net.IP(src[:]), DstIP: net.IP(dst[:])}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(icmpType, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	var body gopacket.SerializableLayer
	if advert {
		body = &layers.ICMPv6NeighborAdvertisement{Flags: 0x60, TargetAddress: net.IP(target[:]),
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: ll}}}
	} else {
		body = &layers.ICMPv6NeighborSolicitation{TargetAddress: net.IP(target[:]),
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: ll}}}
	}
	return serialize(t,
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 2},
			EthernetType: layers.EthernetTypeIPv6},
		ip, icmp, body)
}

func TestSetND(t *testing.T) {
	target, newTarget := ip6("fe80::2"), ip6("2001:db8::77")
	ll, newLL := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{0x0a, 0xb, 0xc, 0xd, 0xe, 0xf}
	newLLAddr := [16]byte(append(append([]byte(nil), newLL...), make([]byte, 10)...))
	for _, advert := range []bool{false, true} {
		typ := uint8(header.ICMPv6NeighborSolicit)
		llSet, llOther := SetNDSLL, SetNDTLL
		if advert {
			typ, llSet, llOther = header.ICMPv6NeighborAdvert, SetNDTLL, SetNDSLL
		}
		p := extracted(t, ndFrame(t, advert, target, ll, typ))
		a := Action{Kind: SetNDTarget, Addr: newTarget}
		applyOK(t, a, p)
		wantFrame(t, a, p, ndFrame(t, advert, newTarget, ll, typ))
		if p.Key.NDTarget != newTarget {
			t.Fatalf("ND target %x", p.Key.NDTarget)
		}
		// The option the message does not carry: nothing to set.
		a = Action{Kind: llOther, Addr: newLLAddr}
		applyOK(t, a, p)
		wantFrame(t, a, p, ndFrame(t, advert, newTarget, ll, typ))
		a = Action{Kind: llSet, Addr: newLLAddr}
		applyOK(t, a, p)
		wantFrame(t, a, p, ndFrame(t, advert, newTarget, newLL, typ))
		if p.Key.ArpSHA != [6]byte(newLL) && p.Key.ArpTHA != [6]byte(newLL) {
			t.Fatalf("link-layer address not in the key: %+v", p.Key)
		}
		// Leaving neighbour discovery: the key drops the ND fields.
		a = Action{Kind: SetICMPType, Val8: 1}
		applyOK(t, a, p)
		wantFrame(t, a, p, ndFrame(t, advert, newTarget, newLL, 1))
		if p.Key.NDTarget != [16]byte{} || p.Key.TpSrc != 1 {
			t.Fatalf("key after leaving ND: %+v", p.Key)
		}
		// And back.
		a = Action{Kind: SetICMPType, Val8: typ}
		applyOK(t, a, p)
		wantFrame(t, a, p, ndFrame(t, advert, newTarget, newLL, typ))
		if p.Key.NDTarget != newTarget {
			t.Fatalf("key after entering ND: %+v", p.Key)
		}
		p.Free()
	}
}

// ICMPv4 type and code rewrites, checked against gopacket's checksum.
func TestSetICMPv4(t *testing.T) {
	s := baseSpec(false, header.IPProtoICMP)
	p := loadPacket(t, &s, s.build(t))
	defer p.Free()
	for _, a := range []Action{{Kind: SetICMPType, Val8: 0}, {Kind: SetICMPCode, Val8: 255}, {Kind: SetICMPType, Val8: 255}} {
		applyOK(t, a, p)
		s, _ = expect(s, &a)
		wantFrame(t, a, p, s.build(t))
	}
	if p.Key.TpSrc != 255 || p.Key.TpDst != 255 {
		t.Fatalf("key %+v", p.Key)
	}
}

// The encapsulation and field actions must not touch bytes beyond a cut
// frame whatever the key claims, nor grow it by more than one push.
func TestNewKindsStayInsideFrame(t *testing.T) {
	s := baseSpec(false, header.IPProtoTCP)
	frames := [][]byte{
		s.build(t),
		mplsFrame(t, &s, header.EtherTypeMPLS, layers.MPLS{Label: 1, TTL: 5}, layers.MPLS{Label: 2, StackBottom: true, TTL: 6}),
		pbbFrame(t, s.ethDst[:], s.ethSrc[:], 0x00123456, s.build(t)),
		arpFrame(t, 1, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{0, 0, 0, 0, 0, 0}, []byte{1, 2, 3, 4}, []byte{5, 6, 7, 8}),
		ndFrame(t, false, ip6("fe80::2"), net.HardwareAddr{2, 0, 0, 0, 0, 1}, header.ICMPv6NeighborSolicit),
	}
	var acts []Action
	for k := PushMPLS; k < numKinds; k++ {
		acts = append(acts, Action{Kind: k, Val8: 2, Val16: header.EtherTypeIPv4, Val32: 0x12345, Addr: ip6("2001:db8::1")})
	}
	for _, frame := range frames {
		var full flow.Key
		var fullOff flow.Offsets
		flow.Extract(frame, 3, &full, &fullOff)
		for cut := 0; cut <= len(frame); cut++ {
			for i := range acts {
				p := testPool.Get()
				p.SetData(frame[:cut])
				p.Key, p.Offsets, p.KeyValid = full, fullOff, true // a key claiming more than is there
				Apply(&acts[i], p)
				if p.Len() > cut+pbbLen {
					t.Fatalf("cut %d: %v grew the frame to %d", cut, acts[i], p.Len())
				}
				p.Free()
			}
		}
	}
}

func TestSetTunnelAddrs(t *testing.T) {
	s := baseSpec(false, header.IPProtoUDP)
	orig := s.build(t)
	p := loadPacket(t, &s, orig)
	defer p.Free()
	dst := [16]byte{10: 0xff, 11: 0xff, 198, 18, 20, 2}
	src := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	a, b := Action{Kind: SetTunnelDst, Addr: dst}, Action{Kind: SetTunnelSrc, Addr: src}
	applyOK(t, a, p)
	applyOK(t, b, p)
	wantFrame(t, a, p, orig)
	// A re-extraction (pop/push MPLS) keeps the metadata.
	for _, c := range []Action{{Kind: PushMPLS}, {Kind: PopMPLS, Val16: header.EtherTypeIPv4}} {
		applyOK(t, c, p)
	}
	if p.Key.Tun.Dst != dst || p.Key.Tun.Src != src {
		t.Errorf("tunnel metadata %+v", p.Key.Tun)
	}
	if got := a.String(); got != "set(tunnel(dst=198.18.20.2))" {
		t.Errorf("String = %q", got)
	}
	if got := b.String(); got != "set(tunnel(ipv6_src=2001:db8::1))" {
		t.Errorf("String = %q", got)
	}
}

package ofmatch

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func u(f ofpwire.XMType, v uint64) ofpwire.OXM     { return ofpwire.OXMUint(f, v) }
func um(f ofpwire.XMType, v, m uint64) ofpwire.OXM { return ofpwire.OXMUintMasked(f, v, m) }
func oxms(fs ...ofpwire.OXM) ofpwire.Match         { return ofpwire.Match{Fields: fs} }
func bad(code uint16) error                        { return &ofpwire.OFPError{Type: ofpwire.ETBadMatch, Code: code} }
func eth(t uint64) ofpwire.OXM                     { return u(ofpwire.XMTypeEthType, t) }
func proto(p uint64) ofpwire.OXM                   { return u(ofpwire.XMTypeIPProto, p) }
func mustFrom(t *testing.T, m ofpwire.Match) Match {
	t.Helper()
	r, err := FromOXM(m)
	if err != nil {
		t.Fatalf("FromOXM(%v): %v", m.Fields, err)
	}
	return r
}

func TestFromOXMErrors(t *testing.T) {
	cases := []struct {
		name string
		m    ofpwire.Match
		code uint16
	}{
		{"other class", oxms(ofpwire.OXM{Class: ofpwire.XMClassNicira0, Field: 1, Value: []byte{0, 0}}), ofpwire.BMCBadField},
		{"unknown field", oxms(ofpwire.OXM{Class: ofpwire.XMClassOpenflowBasic, Field: 40, Value: []byte{0}}), ofpwire.BMCBadField},
		{"NXM field in basic class", oxms(ofpwire.OXM{Class: ofpwire.XMClassOpenflowBasic, Field: ofpwire.XMTypeTunIPv4Src, Value: []byte{1, 2, 3, 4}}), ofpwire.BMCBadField},
		{"short value", oxms(ofpwire.NewOXM(ofpwire.XMTypeEthType, []byte{8})), ofpwire.BMCBadLen},
		{"short mask", oxms(ofpwire.NewMaskedOXM(ofpwire.XMTypeMetadata, make([]byte, 8), make([]byte, 4))), ofpwire.BMCBadLen},
		{"unmaskable", oxms(um(ofpwire.XMTypeInPort, 1, 1)), ofpwire.BMCBadMask},
		{"pcp range", oxms(um(ofpwire.XMTypeVlanID, 0x1000, 0x1000), u(ofpwire.XMTypeVlanPCP, 8)), ofpwire.BMCBadValue},
		{"vid range", oxms(u(ofpwire.XMTypeVlanID, 0x2000)), ofpwire.BMCBadValue},
		{"arp op 256", oxms(eth(0x806), u(ofpwire.XMTypeARPOpcode, 256)), ofpwire.BMCBadValue},
		{"value outside mask", oxms(um(ofpwire.XMTypeTunnelID, 3, 1)), ofpwire.BMCBadWildcards},
		{"duplicate", oxms(u(ofpwire.XMTypeInPort, 1), u(ofpwire.XMTypeInPort, 1)), ofpwire.BMCDupField},
		{"tcp without proto", oxms(eth(0x800), u(ofpwire.XMTypeTCPSrc, 80)), ofpwire.BMCBadPrereq},
		{"tcp with udp proto", oxms(eth(0x800), proto(17), u(ofpwire.XMTypeTCPSrc, 80)), ofpwire.BMCBadPrereq},
		{"ipv4 on arp", oxms(eth(0x806), u(ofpwire.XMTypeIPv4Src, 1)), ofpwire.BMCBadPrereq},
		{"pcp with no tag", oxms(u(ofpwire.XMTypeVlanID, 0), u(ofpwire.XMTypeVlanPCP, 1)), ofpwire.BMCBadPrereq},
		{"nd_sll on NA", oxms(eth(0x86dd), proto(58), u(ofpwire.XMTypeICMPv6Type, 136), ofpwire.NewOXM(ofpwire.XMTypeIPv6NDSLL, make([]byte, 6))), ofpwire.BMCBadPrereq},
		{"pbb without type", oxms(u(ofpwire.XMTypePBBISID, 5)), ofpwire.BMCBadPrereq},
		{"phy port differs", oxms(u(ofpwire.XMTypeInPort, 1), u(ofpwire.XMTypeInPhyPort, 2)), ofpwire.BMCBadValue},
	}
	for _, c := range cases {
		_, err := FromOXM(c.m)
		if !errors.Is(err, bad(c.code)) {
			t.Errorf("%s: error %v, want BAD_MATCH code %d", c.name, err, c.code)
		}
	}
}

// TestFieldMapping pins where each kind of field lands in the key.
func TestFieldMapping(t *testing.T) {
	check := func(name string, om ofpwire.Match, f func(k, m *flow.Key)) {
		t.Helper()
		got := mustFrom(t, om)
		var want Match
		f(&want.Key, &want.Mask)
		if got.Match != want.Match {
			t.Errorf("%s:\n got  %s\n want %s", name, flow.FormatMatch(&got.Key, &got.Mask), flow.FormatMatch(&want.Key, &want.Mask))
		}
	}
	check("any tag", oxms(um(ofpwire.XMTypeVlanID, 0x1000, 0x1000)), func(k, m *flow.Key) {
		k.VLAN[0].TPID, m.VLAN[0].TPID = 0x8000, 0x8000
	})
	check("no tag", oxms(u(ofpwire.XMTypeVlanID, 0)), func(k, m *flow.Key) { m.VLAN[0].TPID = 0x8000 })
	check("vid+pcp", oxms(u(ofpwire.XMTypeVlanID, 0x1000|10), u(ofpwire.XMTypeVlanPCP, 5)), func(k, m *flow.Key) {
		k.VLAN[0] = flow.VLANTag{TPID: 0x8000, TCI: 5<<13 | 10}
		m.VLAN[0] = flow.VLANTag{TPID: 0x8000, TCI: 0xefff}
	})
	check("vid bits only", oxms(um(ofpwire.XMTypeVlanID, 0x5, 0xf)), func(k, m *flow.Key) {
		k.VLAN[0].TCI, m.VLAN[0].TCI = 5, 0xf
	})
	check("tcp", oxms(eth(0x86dd), proto(6), u(ofpwire.XMTypeTCPDst, 443), u(ofpwire.XMTypeIPDSCP, 46), u(ofpwire.XMTypeIPECN, 2)), func(k, m *flow.Key) {
		k.EthType, m.EthType, k.NwProto, m.NwProto = 0x86dd, 0xffff, 6, 0xff
		k.TpDst, m.TpDst = 443, 0xffff
		k.NwTOS, m.NwTOS = 46<<2|2, 0xff
	})
	check("icmp", oxms(eth(0x800), proto(1), u(ofpwire.XMTypeICMPv4Type, 8), u(ofpwire.XMTypeICMPv4Code, 0)), func(k, m *flow.Key) {
		k.EthType, m.EthType, k.NwProto, m.NwProto = 0x800, 0xffff, 1, 0xff
		k.TpSrc, m.TpSrc, m.TpDst = 8, 0xff, 0xff
	})
	check("arp", oxms(eth(0x806), u(ofpwire.XMTypeARPOpcode, 2), um(ofpwire.XMTypeARPTPA, 0x0a000000, 0xff000000)), func(k, m *flow.Key) {
		k.EthType, m.EthType, k.NwProto, m.NwProto = 0x806, 0xffff, 2, 0xff
		k.IPv4Dst, m.IPv4Dst = 0x0a000000, 0xff000000
	})
	check("mpls", oxms(eth(0x8847), u(ofpwire.XMTypeMPLSLabel, 1000), u(ofpwire.XMTypeMPLSTC, 5), u(ofpwire.XMTypeMPLSBOS, 1)), func(k, m *flow.Key) {
		k.EthType, m.EthType = 0x8847, 0xffff
		k.MPLSLse, m.MPLSLse = 1000<<12|5<<9|1<<8, 0xffffff00
	})
	check("pbb+tunnel+exthdr-less", oxms(eth(0x88e7), um(ofpwire.XMTypePBBISID, 0x12, 0xff), u(ofpwire.XMTypeTunnelID, 9)), func(k, m *flow.Key) {
		k.EthType, m.EthType = 0x88e7, 0xffff
		k.PBBISID, m.PBBISID = 0x12, 0xff
		k.TunnelID, m.TunnelID = 9, ^uint64(0)
	})
	check("exthdr", oxms(eth(0x86dd), u(ofpwire.XMTypeIPv6ExtHeader, flow.ExtHdrFrag|flow.ExtHdrHop)), func(k, m *flow.Key) {
		k.EthType, m.EthType = 0x86dd, 0xffff
		k.IPv6ExtHdr, m.IPv6ExtHdr = flow.ExtHdrFrag|flow.ExtHdrHop, 0x1ff
	})
	check("in_phy_port", oxms(u(ofpwire.XMTypeInPhyPort, 3), u(ofpwire.XMTypeInPort, 3)), func(k, m *flow.Key) {
		k.InPort, m.InPort = 3, ^uint32(0)
	})
	m := mustFrom(t, oxms(um(ofpwire.XMTypeMetadata, 0x50, 0xf0)))
	if m.Metadata != 0x50 || m.PipeMask.Metadata != 0xf0 || !m.Mask.IsZero() {
		t.Errorf("metadata: %+v", m)
	}
}

// randMask returns a random mask over full: often all ones, sometimes
// zero, otherwise random bits.
func randMask(r *rand.Rand, full uint64) uint64 {
	switch r.IntN(4) {
	case 0, 1:
		return full
	case 2:
		if r.IntN(4) == 0 {
			return 0
		}
	}
	return r.Uint64() & full
}

func randMasked(r *rand.Rand, f ofpwire.XMType, full uint64) ofpwire.OXM {
	m := randMask(r, full)
	v := r.Uint64() & m
	if m == full && r.IntN(2) == 0 {
		return u(f, v)
	}
	return um(f, v, m)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func randAddr(r *rand.Rand, f ofpwire.XMType, n int, maskable bool) ofpwire.OXM {
	v := randBytes(r, n)
	if !maskable || r.IntN(2) == 0 {
		return ofpwire.NewOXM(f, v)
	}
	m := randBytes(r, n)
	if r.IntN(2) == 0 { // a prefix
		p := r.IntN(8*n + 1)
		for i := range m {
			m[i] = 0
			if (i+1)*8 <= p {
				m[i] = 0xff
			} else if i*8 < p {
				m[i] = ^byte(0xff >> (p - i*8))
			}
		}
	}
	for i := range v {
		v[i] &= m[i]
	}
	return ofpwire.NewMaskedOXM(f, v, m)
}

// randomOXM builds a random valid OpenFlow 1.3 match: each field is
// included at random when its prerequisites are, and the list is shuffled.
func randomOXM(r *rand.Rand) ofpwire.Match {
	var fs []ofpwire.OXM
	maybe := func(p int) bool { return r.IntN(p) == 0 }
	if maybe(2) {
		port := uint64(r.Uint32())
		fs = append(fs, u(ofpwire.XMTypeInPort, port))
		if maybe(4) {
			fs = append(fs, u(ofpwire.XMTypeInPhyPort, port))
		}
	}
	if maybe(3) {
		fs = append(fs, randMasked(r, ofpwire.XMTypeMetadata, ^uint64(0)))
	}
	if maybe(3) {
		fs = append(fs, randAddr(r, ofpwire.XMTypeEthDst, 6, true))
	}
	if maybe(3) {
		fs = append(fs, randAddr(r, ofpwire.XMTypeEthSrc, 6, true))
	}
	if maybe(4) {
		fs = append(fs, randMasked(r, ofpwire.XMTypeTunnelID, ^uint64(0)))
	}
	switch r.IntN(6) {
	case 0:
		fs = append(fs, u(ofpwire.XMTypeVlanID, 0))
	case 1:
		fs = append(fs, um(ofpwire.XMTypeVlanID, 0x1000, 0x1000))
		if maybe(2) {
			fs = append(fs, u(ofpwire.XMTypeVlanPCP, uint64(r.IntN(8))))
		}
	case 2:
		fs = append(fs, u(ofpwire.XMTypeVlanID, 0x1000|uint64(r.IntN(4096))))
		if maybe(2) {
			fs = append(fs, u(ofpwire.XMTypeVlanPCP, uint64(r.IntN(8))))
		}
	case 3:
		o := randMasked(r, ofpwire.XMTypeVlanID, 0x1fff)
		fs = append(fs, o)
		if o.Uint()&o.MaskUint()&0x1000 != 0 && maybe(2) {
			fs = append(fs, u(ofpwire.XMTypeVlanPCP, uint64(r.IntN(8))))
		}
	}
	ethTypes := []uint64{0x0800, 0x86dd, 0x0806, 0x8847, 0x8848, 0x88e7, 0x88cc}
	if maybe(6) {
		goto done
	}
	{
		et := ethTypes[r.IntN(len(ethTypes))]
		fs = append(fs, eth(et))
		switch et {
		case 0x0800, 0x86dd:
			if maybe(3) {
				fs = append(fs, u(ofpwire.XMTypeIPDSCP, uint64(r.IntN(64))))
			}
			if maybe(3) {
				fs = append(fs, u(ofpwire.XMTypeIPECN, uint64(r.IntN(4))))
			}
			if et == 0x0800 {
				if maybe(2) {
					fs = append(fs, randMasked(r, ofpwire.XMTypeIPv4Src, 0xffffffff))
				}
				if maybe(2) {
					fs = append(fs, randMasked(r, ofpwire.XMTypeIPv4Dst, 0xffffffff))
				}
			} else {
				if maybe(2) {
					fs = append(fs, randAddr(r, ofpwire.XMTypeIPv6Src, 16, true))
				}
				if maybe(2) {
					fs = append(fs, randAddr(r, ofpwire.XMTypeIPv6Dst, 16, true))
				}
				if maybe(3) {
					fs = append(fs, randMasked(r, ofpwire.XMTypeIPv6FLabel, 0xfffff))
				}
				if maybe(3) {
					fs = append(fs, randMasked(r, ofpwire.XMTypeIPv6ExtHeader, 0x1ff))
				}
			}
			protos := []uint64{6, 17, 132, 1, 58, 47}
			if maybe(5) {
				break
			}
			p := protos[r.IntN(len(protos))]
			fs = append(fs, proto(p))
			var src, dst ofpwire.XMType
			width := 0xffff
			switch p {
			case 6:
				src, dst = ofpwire.XMTypeTCPSrc, ofpwire.XMTypeTCPDst
			case 17:
				src, dst = ofpwire.XMTypeUDPSrc, ofpwire.XMTypeUDPDst
			case 132:
				src, dst = ofpwire.XMTypeSCTPSrc, ofpwire.XMTypeSCTPDst
			case 1:
				src, dst, width = ofpwire.XMTypeICMPv4Type, ofpwire.XMTypeICMPv4Code, 0xff
			case 58:
				src, dst, width = ofpwire.XMTypeICMPv6Type, ofpwire.XMTypeICMPv6Code, 0xff
			default:
				break
			}
			if src == 0 {
				break
			}
			typ := -1
			if maybe(2) {
				typ = r.IntN(width + 1)
				if p == 58 && maybe(2) {
					typ = 135 + r.IntN(2)
				}
				fs = append(fs, u(src, uint64(typ)))
			}
			if maybe(2) {
				fs = append(fs, u(dst, uint64(r.IntN(width+1))))
			}
			if p == 58 && (typ == 135 || typ == 136) {
				if maybe(2) {
					fs = append(fs, randAddr(r, ofpwire.XMTypeIPv6NDTarget, 16, false))
				}
				if maybe(2) {
					f := ofpwire.XMTypeIPv6NDSLL
					if typ == 136 {
						f = ofpwire.XMTypeIPv6NDTLL
					}
					fs = append(fs, randAddr(r, f, 6, false))
				}
			}
		case 0x0806:
			if maybe(2) {
				fs = append(fs, u(ofpwire.XMTypeARPOpcode, uint64(r.IntN(256))))
			}
			if maybe(2) {
				fs = append(fs, randMasked(r, ofpwire.XMTypeARPSPA, 0xffffffff))
			}
			if maybe(2) {
				fs = append(fs, randMasked(r, ofpwire.XMTypeARPTPA, 0xffffffff))
			}
			if maybe(2) {
				fs = append(fs, randAddr(r, ofpwire.XMTypeARPSHA, 6, true))
			}
			if maybe(2) {
				fs = append(fs, randAddr(r, ofpwire.XMTypeARPTHA, 6, true))
			}
		case 0x8847, 0x8848:
			if maybe(2) {
				fs = append(fs, u(ofpwire.XMTypeMPLSLabel, uint64(r.IntN(1<<20))))
			}
			if maybe(2) {
				fs = append(fs, u(ofpwire.XMTypeMPLSTC, uint64(r.IntN(8))))
			}
			if maybe(2) {
				fs = append(fs, u(ofpwire.XMTypeMPLSBOS, uint64(r.IntN(2))))
			}
		case 0x88e7:
			if maybe(3) {
				fs = append(fs, randMasked(r, ofpwire.XMTypePBBISID, 0xffffff))
			}
		}
	}
done:
	r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	return ofpwire.Match{Fields: fs}
}

// meaning reduces an OXM list to what it says: per field, value and mask
// restricted to the bits the field has, fields with an empty mask dropped,
// IN_PHY_PORT dropped (it repeats IN_PORT), and VLAN_VID "no tag" reduced
// to its presence bit (untagged packets have VID 0).
func meaning(m ofpwire.Match) map[ofpwire.XMType][2]string {
	out := map[ofpwire.XMType][2]string{}
	for _, o := range m.Fields {
		if o.Field == ofpwire.XMTypeInPhyPort {
			continue
		}
		v := append([]byte(nil), o.Value...)
		mk := make([]byte, len(v))
		for i := range mk {
			mk[i] = 0xff
			if o.HasMask {
				mk[i] = o.Mask[i]
			}
		}
		if vb := validBits[o.Field]; vb != 0 {
			for i := range mk {
				mk[i] &= byte(vb >> (8 * (len(mk) - 1 - i)))
			}
		}
		if o.Field == ofpwire.XMTypeVlanID && mk[0]&0x10 != 0 && v[0]|v[1] == 0 {
			mk = []byte{0x10, 0}
		}
		zero := true
		for i := range mk {
			v[i] &= mk[i]
			zero = zero && mk[i] == 0
		}
		if !zero {
			out[o.Field] = [2]string{string(v), string(mk)}
		}
	}
	return out
}

func sameMeaning(a, b map[ofpwire.XMType][2]string) bool {
	if len(a) != len(b) {
		return false
	}
	for f, x := range a {
		if b[f] != x {
			return false
		}
	}
	return true
}

func TestOXMRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fieldsSeen := map[ofpwire.XMType]int{}
	for i := 0; i < 20000; i++ {
		x := randomOXM(r)
		m, err := FromOXM(x)
		if err != nil {
			t.Fatalf("case %d: FromOXM(%v): %v", i, x.Fields, err)
		}
		if m.Key != func() flow.Key { var k flow.Key; m.Key.ApplyMask(&m.Mask, &k); return k }() ||
			m.Metadata&^m.PipeMask.Metadata != 0 {
			t.Fatalf("case %d: key not masked: %+v", i, m)
		}
		y := ToOXM(&m)
		for j, o := range y.Fields {
			fieldsSeen[o.Field]++
			if j > 0 && y.Fields[j-1].Field >= o.Field {
				t.Fatalf("case %d: ToOXM not in field order: %v", i, y.Fields)
			}
		}
		if err := ofpwire.CheckPrerequisites(y); err != nil {
			t.Fatalf("case %d: ToOXM(%v) = %v breaks prerequisites", i, x.Fields, y.Fields)
		}
		if !sameMeaning(meaning(x), meaning(y)) {
			t.Fatalf("case %d: ToOXM(FromOXM(x)) differs from x\n x = %v\n y = %v", i, x.Fields, y.Fields)
		}
		m2, err := FromOXM(y)
		if err != nil || m2 != m {
			t.Fatalf("case %d: FromOXM(ToOXM(m)) != m (%v)\n m  %+v\n m2 %+v", i, err, m, m2)
		}
		// Minimal: no field is exact-with-a-mask or empty.
		for _, o := range y.Fields {
			if o.HasMask {
				if o.MaskUint() == 0 && len(o.Value) <= 8 {
					t.Fatalf("case %d: ToOXM emits an empty mask: %v", i, o)
				}
				full := true
				for j, b := range o.Mask {
					want := byte(0xff)
					if vb := validBits[o.Field]; vb != 0 {
						want = byte(vb >> (8 * (len(o.Mask) - 1 - j)))
					}
					full = full && b&want == want
				}
				if full {
					t.Fatalf("case %d: ToOXM masks a field with all ones: %v", i, o)
				}
			}
		}
	}
	for f := ofpwire.XMType(0); f < ofpwire.NumBasicFields; f++ {
		if f != ofpwire.XMTypeInPhyPort && fieldsSeen[f] < 25 {
			t.Errorf("field %v produced only %d times", f, fieldsSeen[f])
		}
	}
}

// TestRegisterViews: reg, xreg (OpenFlow 1.5's packet registers, class
// 0x8001) and xxreg fields land in one register file, most significant
// word first, survive the wire both ways, and two views of one register in
// a match are a duplicate.
func TestRegisterViews(t *testing.T) {
	xx := ofpwire.NewMaskedOXM(ofpwire.XMTypeXXReg0+1,
		[]byte{0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4},
		[]byte{0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	om := oxms(u(ofpwire.XMTypeReg0+3, 7), um(ofpwire.XMTypeXReg0, 0x0000000500000006, 0xffffffff0000ffff), xx)
	wire, err := ofpwire.Encode(1, &ofpwire.FlowMod{Match: om, BufferID: 0xffffffff, OutPort: 0xffffffff, OutGroup: 0xffffffff})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(wire, []byte{0x80, 0x01, 0x01, 0x10}) { // OXM_OF_PKT_REG0, masked, 16 bytes
		t.Errorf("xreg0 not sent as class 0x8001: % x", wire)
	}
	h, body, err := ofpwire.ReadMessage(bytes.NewReader(wire), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := ofpwire.Decode(h, body[ofpwire.HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	m := mustFrom(t, msg.(*ofpwire.FlowMod).Match)
	want := [ofpwire.NumRegs]uint32{0: 5, 1: 6, 3: 7, 4: 1, 5: 2, 6: 3, 7: 4}
	wantMask := [ofpwire.NumRegs]uint32{0: 0xffffffff, 1: 0xffff, 3: 0xffffffff, 4: 0xff, 5: 0xffffffff, 6: 0xffffffff, 7: 0xffffffff}
	if m.Regs != want || m.PipeMask.Regs != wantMask {
		t.Errorf("registers %x mask %x, want %x %x", m.Regs, m.PipeMask.Regs, want, wantMask)
	}
	back := mustFrom(t, ToOXM(&m))
	if back != m {
		t.Errorf("ToOXM does not read back: %+v", back)
	}
	for _, dup := range []ofpwire.Match{
		oxms(u(ofpwire.XMTypeReg0+1, 1), u(ofpwire.XMTypeXReg0, 1)),
		oxms(u(ofpwire.XMTypeXReg0+2, 1), um(ofpwire.XMTypeXXReg0+1, 0, 0)),
	} {
		if _, err := FromOXM(dup); !errors.Is(err, bad(ofpwire.BMCDupField)) {
			t.Errorf("%v: %v, want DUP_FIELD", dup, err)
		}
	}
}

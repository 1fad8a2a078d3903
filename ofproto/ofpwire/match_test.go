package ofpwire

import (
	"bytes"
	"encoding/hex"
	"reflect"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// flowModWithMatch wraps raw OXM TLVs in a FLOW_MOD with no instructions.
func flowModWithMatch(oxms []byte) []byte {
	mlen := 4 + len(oxms)
	body := make([]byte, 40)
	body = be.AppendUint16(body, 1)
	body = be.AppendUint16(body, uint16(mlen))
	body = append(body, oxms...)
	body = appendZeros(body, roundUp8(mlen)-mlen)
	msg := []byte{Version, 14, 0, 0, 0, 0, 0, 1}
	msg = append(msg, body...)
	be.PutUint16(msg[2:], uint16(len(msg)))
	return msg
}

func decodeBytes(b []byte) (Message, error) {
	h, msg, err := ReadMessage(bytes.NewReader(b), nil)
	if err != nil {
		return nil, err
	}
	return Decode(h, msg[HeaderLen:])
}

func oxmBytes(f ofp.XMType, hasMask bool, payload ...byte) []byte {
	return append(be.AppendUint32(nil, OXMHeader(ofp.XMClassOpenflowBasic, f, hasMask, len(payload))), payload...)
}

func TestFieldTable(t *testing.T) {
	// Sizes and maskability from table 12 of the OpenFlow 1.3.5 spec.
	want := map[ofp.XMType]struct {
		size     int
		maskable bool
	}{
		ofp.XMTypeInPort: {4, false}, ofp.XMTypeInPhyPort: {4, false}, ofp.XMTypeMetadata: {8, true},
		ofp.XMTypeEthDst: {6, true}, ofp.XMTypeEthSrc: {6, true}, ofp.XMTypeEthType: {2, false},
		ofp.XMTypeVlanID: {2, true}, ofp.XMTypeVlanPCP: {1, false}, ofp.XMTypeIPDSCP: {1, false},
		ofp.XMTypeIPECN: {1, false}, ofp.XMTypeIPProto: {1, false}, ofp.XMTypeIPv4Src: {4, true},
		ofp.XMTypeIPv4Dst: {4, true}, ofp.XMTypeTCPSrc: {2, false}, ofp.XMTypeTCPDst: {2, false},
		ofp.XMTypeUDPSrc: {2, false}, ofp.XMTypeUDPDst: {2, false}, ofp.XMTypeSCTPSrc: {2, false},
		ofp.XMTypeSCTPDst: {2, false}, ofp.XMTypeICMPv4Type: {1, false}, ofp.XMTypeICMPv4Code: {1, false},
		ofp.XMTypeARPOpcode: {2, false}, ofp.XMTypeARPSPA: {4, true}, ofp.XMTypeARPTPA: {4, true},
		ofp.XMTypeARPSHA: {6, true}, ofp.XMTypeARPTHA: {6, true}, ofp.XMTypeIPv6Src: {16, true},
		ofp.XMTypeIPv6Dst: {16, true}, ofp.XMTypeIPv6FLabel: {4, true}, ofp.XMTypeICMPv6Type: {1, false},
		ofp.XMTypeICMPv6Code: {1, false}, ofp.XMTypeIPv6NDTarget: {16, false}, ofp.XMTypeIPv6NDSLL: {6, false},
		ofp.XMTypeIPv6NDTLL: {6, false}, ofp.XMTypeMPLSLabel: {4, false}, ofp.XMTypeMPLSTC: {1, false},
		ofp.XMTypeMPLSBOS: {1, false}, ofp.XMTypePBBISID: {3, true}, ofp.XMTypeTunnelID: {8, true},
		ofp.XMTypeIPv6ExtHeader: {2, true},
	}
	if len(want) != NumBasicFields {
		t.Fatalf("table has %d entries", len(want))
	}
	for f, w := range want {
		size, maskable, ok := FieldSize(f)
		if !ok || size != w.size || maskable != w.maskable {
			t.Errorf("%v: got %d %v %v", f, size, maskable, ok)
		}
		// Every field decodes at its size (value 0 is in range for all) ...
		if _, err := decodeBytes(flowModWithMatch(oxmBytes(f, false, make([]byte, w.size)...))); err != nil {
			t.Errorf("%v exact: %v", f, err)
		}
		// ... and rejects one byte more or less.
		wantErr(t, f.String()+" long", errOf(decodeBytes(flowModWithMatch(oxmBytes(f, false, make([]byte, w.size+1)...)))), ETBadMatch, BMCBadLen)
		wantErr(t, f.String()+" short", errOf(decodeBytes(flowModWithMatch(oxmBytes(f, false, make([]byte, w.size-1)...)))), ETBadMatch, BMCBadLen)
		masked := oxmBytes(f, true, make([]byte, 2*w.size)...)
		_, err := decodeBytes(flowModWithMatch(masked))
		if w.maskable && err != nil {
			t.Errorf("%v masked: %v", f, err)
		}
		if !w.maskable {
			wantErr(t, f.String()+" masked", err, ETBadMatch, BMCBadMask)
		}
	}
	if _, _, ok := FieldSize(NumFields); ok {
		t.Errorf("field %d known", NumFields)
	}
	// A basic-class TLV numbered like an internal Nicira field is unknown.
	wantErr(t, "basic 40", errOf(decodeBytes(flowModWithMatch(oxmBytes(40, false, 0, 0, 0, 0)))), ETBadMatch, BMCBadField)
}

// TestNXMTunnelFields pins the encoding "ovs-ofctl -O OpenFlow13" uses for
// tun_src/tun_dst/tun_ipv6_src/tun_ipv6_dst: class 0x0001 TLVs with the
// NXM field numbers 31, 32, 109 and 110 (OVS's lib/meta-flow.h); "ovs-ofctl
// ofp-print" of a flow mod with this match prints
// tun_id=0x64,tun_src=198.18.20.1,tun_dst=198.18.0.0/16,tun_ipv6_src=2001:db8::1,tun_ipv6_dst=2001:db8::2,in_port=1.
func TestNXMTunnelFields(t *testing.T) {
	m := Match{Fields: []OXM{
		OXMUint(ofp.XMTypeInPort, 1),
		NewOXM(XMTypeTunIPv4Src, []byte{198, 18, 20, 1}),
		NewMaskedOXM(XMTypeTunIPv4Dst, []byte{198, 18, 0, 0}, []byte{255, 255, 0, 0}),
		NewOXM(XMTypeTunIPv6Src, []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}),
		NewOXM(XMTypeTunIPv6Dst, []byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}),
		OXMUint(ofp.XMTypeTunnelID, 100),
	}}
	b, err := appendMatch(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	want := "0001" + "0054" + "80000004" + "00000001" +
		"00013e04" + "c6121401" +
		"00014108" + "c6120000" + "ffff0000" +
		"0001da10" + "20010db8000000000000000000000001" +
		"0001dc10" + "20010db8000000000000000000000002" +
		"80004c08" + "0000000000000064" + "00000000"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	back, n, err := parseMatch(b)
	if err != nil || n != len(b) {
		t.Fatalf("parse: %v (%d of %d bytes)", err, n, len(b))
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("round trip\n got %+v\nwant %+v", back, m)
	}
	if _, ok := back.Field(XMTypeTunIPv4Dst); !ok {
		t.Error("Field(XMTypeTunIPv4Dst) not found")
	}
	// An NXM field this switch does not know is BAD_FIELD.
	unknown := []byte{0, 1, 0, 12, 0x00, 0x01, 0xfe, 0x04, 0, 0, 0, 1, 0, 0, 0, 0} // NXM_NX field 127
	if _, _, err := parseMatch(unknown); err != errMatchField {
		t.Errorf("unknown NXM field: %v", err)
	}
}

func errOf(_ Message, err error) error { return err }

func TestMatchErrors(t *testing.T) {
	cases := []struct {
		name string
		oxms []byte
		code uint16
	}{
		{"unknown field", oxmBytes(40, false, 0, 0, 0, 0), BMCBadField},
		{"unknown NXM field", append(be.AppendUint32(nil, uint32(ofp.XMClassNicira1)<<16|127<<9|4), 0, 0, 0, 1), BMCBadField},
		{"unknown class", append(be.AppendUint32(nil, OXMHeader(0x8002, 1, false, 4)), 0, 0, 0, 1), BMCBadField},
		{"experimenter class", append(be.AppendUint32(nil, OXMHeader(ofp.XMClassExperimenter, 1, false, 4)), 0, 0, 0, 1), BMCBadField},
		{"duplicate", append(oxmBytes(ofp.XMTypeInPort, false, 0, 0, 0, 1), oxmBytes(ofp.XMTypeInPort, false, 0, 0, 0, 2)...), BMCDupField},
		{"value outside mask", oxmBytes(ofp.XMTypeIPv4Src, true, 10, 0, 0, 1, 255, 0, 0, 0), BMCBadWildcards},
		{"eth value outside mask", oxmBytes(ofp.XMTypeEthDst, true, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0), BMCBadWildcards},
		{"vlan pcp 8", oxmBytes(ofp.XMTypeVlanPCP, false, 8), BMCBadValue},
		{"dscp 64", oxmBytes(ofp.XMTypeIPDSCP, false, 64), BMCBadValue},
		{"ecn 4", oxmBytes(ofp.XMTypeIPECN, false, 4), BMCBadValue},
		{"vid 0x2000", oxmBytes(ofp.XMTypeVlanID, false, 0x20, 0), BMCBadValue},
		{"mpls label", oxmBytes(ofp.XMTypeMPLSLabel, false, 0, 0x10, 0, 0), BMCBadValue},
		{"mpls bos 2", oxmBytes(ofp.XMTypeMPLSBOS, false, 2), BMCBadValue},
		{"flabel", oxmBytes(ofp.XMTypeIPv6FLabel, false, 0, 0x10, 0, 0), BMCBadValue},
		{"exthdr", oxmBytes(ofp.XMTypeIPv6ExtHeader, false, 2, 0), BMCBadValue},
		{"truncated tlv", []byte{0x80, 0, 0, 4, 0, 0}, BMCBadLen},
		{"partial header", []byte{0x80, 0}, BMCBadLen},
	}
	for _, c := range cases {
		wantErr(t, c.name, errOf(decodeBytes(flowModWithMatch(c.oxms))), ETBadMatch, c.code)
	}
	// Match of the deprecated standard type, and match lengths that lie.
	msg := flowModWithMatch(nil)
	be.PutUint16(msg[48:], 0)
	wantErr(t, "standard match", errOf(decodeBytes(msg)), ETBadMatch, BMCBadType)
	msg = flowModWithMatch(nil)
	be.PutUint16(msg[50:], 3)
	wantErr(t, "match len 3", errOf(decodeBytes(msg)), ETBadMatch, BMCBadLen)
	msg = flowModWithMatch(nil)
	be.PutUint16(msg[50:], 12)
	wantErr(t, "match len overrun", errOf(decodeBytes(msg)), ETBadMatch, BMCBadLen)
	// A FLOW_MOD whose body ends before the match header.
	msg = flowModWithMatch(nil)[:50]
	be.PutUint16(msg[2:], 50)
	wantErr(t, "no match", errOf(decodeBytes(msg)), ETBadMatch, BMCBadLen)
}

func TestMatchAccessors(t *testing.T) {
	m := richMatch()
	o, ok := m.Field(ofp.XMTypeIPv4Src)
	if !ok || o.Uint() != 0x0a000000 || o.MaskUint() != 0xff000000 || !o.HasMask {
		t.Errorf("ipv4_src: %+v", o)
	}
	o, _ = m.Field(ofp.XMTypeTCPDst)
	if o.Uint() != 80 || o.MaskUint() != 0xffff {
		t.Errorf("tcp_dst: %+v", o)
	}
	if _, ok := m.Field(ofp.XMTypeUDPSrc); ok {
		t.Error("udp_src found")
	}
	if h := OXMUint(ofp.XMTypeInPort, 1).Header(); h != 0x80000004 {
		t.Errorf("in_port header %#x", h)
	}
	if h := OXMUintMasked(ofp.XMTypeEthDst, 0, 0).Header(); h != 0x8000070c {
		t.Errorf("eth_dst/mask header %#x", h)
	}
	// Encoding refuses values of the wrong size instead of writing garbage.
	bad := []Match{
		{Fields: []OXM{NewOXM(ofp.XMTypeInPort, []byte{1})}},
		{Fields: []OXM{NewMaskedOXM(ofp.XMTypeInPort, []byte{0, 0, 0, 1}, []byte{0, 0, 0, 1})}},
		{Fields: []OXM{{Class: ofp.XMClassOpenflowBasic, Field: ofp.XMTypeEthType, Value: []byte{8, 0}, Mask: []byte{1, 1}}}},
	}
	for i, mm := range bad {
		if _, err := Encode(1, &FlowMod{Match: mm}); err == nil {
			t.Errorf("bad match %d encoded", i)
		}
	}
	// Order of fields survives a round trip.
	got := decodeAll(t, mustEncode(t, &FlowMod{Match: m}))[0].(*FlowMod).Match
	if !reflect.DeepEqual(got, m) {
		t.Errorf("match changed: %+v", got)
	}
}

func mustEncode(t testing.TB, m Message) []byte {
	t.Helper()
	b, err := Encode(1, m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mk(fields ...OXM) Match { return Match{Fields: fields} }

func TestCheckPrerequisites(t *testing.T) {
	ip4 := OXMUint(ofp.XMTypeEthType, 0x0800)
	ip6 := OXMUint(ofp.XMTypeEthType, 0x86dd)
	arp := OXMUint(ofp.XMTypeEthType, 0x0806)
	tcp := OXMUint(ofp.XMTypeIPProto, 6)
	udp := OXMUint(ofp.XMTypeIPProto, 17)
	icmp6 := OXMUint(ofp.XMTypeIPProto, 58)
	good := []Match{
		{},
		mk(OXMUint(ofp.XMTypeInPort, 1), OXMUint(ofp.XMTypeInPhyPort, 1)),
		mk(ip4, tcp, OXMUint(ofp.XMTypeTCPSrc, 1)),
		mk(OXMUint(ofp.XMTypeTCPDst, 1), tcp, ip6), // order does not matter
		mk(ip4, udp, OXMUint(ofp.XMTypeUDPDst, 53)),
		mk(ip4, OXMUint(ofp.XMTypeIPProto, 132), OXMUint(ofp.XMTypeSCTPSrc, 1)),
		mk(ip4, OXMUint(ofp.XMTypeIPProto, 1), OXMUint(ofp.XMTypeICMPv4Type, 8)),
		mk(ip4, OXMUint(ofp.XMTypeIPv4Src, 1), OXMUint(ofp.XMTypeIPDSCP, 1), OXMUint(ofp.XMTypeIPECN, 1)),
		mk(arp, OXMUint(ofp.XMTypeARPOpcode, 1), OXMUint(ofp.XMTypeARPTHA, 1)),
		mk(ip6, OXMUint(ofp.XMTypeIPv6FLabel, 1), OXMUint(ofp.XMTypeIPv6ExtHeader, 1)),
		mk(ip6, icmp6, OXMUint(ofp.XMTypeICMPv6Type, 135), OXMUint(ofp.XMTypeIPv6NDTarget, 0), OXMUint(ofp.XMTypeIPv6NDSLL, 0)),
		mk(ip6, icmp6, OXMUint(ofp.XMTypeICMPv6Type, 136), OXMUint(ofp.XMTypeIPv6NDTLL, 0)),
		mk(OXMUint(ofp.XMTypeEthType, 0x8848), OXMUint(ofp.XMTypeMPLSLabel, 1)),
		mk(OXMUint(ofp.XMTypeEthType, 0x88e7), OXMUint(ofp.XMTypePBBISID, 1)),
		mk(OXMUint(ofp.XMTypeVlanID, uint64(VIDPresent|5)), OXMUint(ofp.XMTypeVlanPCP, 1)),
		mk(OXMUintMasked(ofp.XMTypeVlanID, uint64(VIDPresent), uint64(VIDPresent)), OXMUint(ofp.XMTypeVlanPCP, 1)),
		mk(OXMUint(ofp.XMTypeMetadata, 1), OXMUint(ofp.XMTypeTunnelID, 1), OXMUint(ofp.XMTypeEthSrc, 1)),
	}
	for i, m := range good {
		if err := CheckPrerequisites(m); err != nil {
			t.Errorf("good %d: %v", i, err)
		}
	}
	bad := []Match{
		mk(OXMUint(ofp.XMTypeInPhyPort, 1)),
		mk(OXMUint(ofp.XMTypeTCPSrc, 1)),
		mk(ip4, OXMUint(ofp.XMTypeTCPSrc, 1)),
		mk(ip4, udp, OXMUint(ofp.XMTypeTCPSrc, 1)),
		mk(tcp, OXMUint(ofp.XMTypeTCPSrc, 1)), // IP_PROTO itself needs ETH_TYPE
		mk(arp, tcp, OXMUint(ofp.XMTypeTCPSrc, 1)),
		mk(ip6, OXMUint(ofp.XMTypeIPv4Dst, 1)),
		mk(OXMUintMasked(ofp.XMTypeEthType, 0x0800, 0xff00), OXMUint(ofp.XMTypeIPv4Dst, 1)),
		mk(ip4, OXMUint(ofp.XMTypeARPSPA, 1)),
		mk(ip4, OXMUint(ofp.XMTypeIPv6Src, 1)),
		mk(ip6, tcp, OXMUint(ofp.XMTypeICMPv6Type, 1)),
		mk(ip6, icmp6, OXMUint(ofp.XMTypeICMPv6Type, 136), OXMUint(ofp.XMTypeIPv6NDSLL, 0)),
		mk(ip6, icmp6, OXMUint(ofp.XMTypeICMPv6Type, 135), OXMUint(ofp.XMTypeIPv6NDTLL, 0)),
		mk(ip6, icmp6, OXMUint(ofp.XMTypeIPv6NDTarget, 0)),
		mk(ip4, OXMUint(ofp.XMTypeMPLSTC, 1)),
		mk(OXMUint(ofp.XMTypePBBISID, 1)),
		mk(ip4, OXMUint(ofp.XMTypeIPv6ExtHeader, 1)),
		mk(OXMUint(ofp.XMTypeVlanPCP, 1)),
		mk(OXMUint(ofp.XMTypeVlanID, uint64(VIDNone)), OXMUint(ofp.XMTypeVlanPCP, 1)),
		mk(ip4, OXMUint(ofp.XMTypeICMPv4Code, 1)),
		mk(OXMUint(ofp.XMTypeIPDSCP, 1)),
	}
	for i, m := range bad {
		wantErr(t, "bad prereq "+string(rune('a'+i)), CheckPrerequisites(m), ETBadMatch, BMCBadPrereq)
	}
}

// TestTunMetadataLengths: a tun_metadata field of any length up to 124
// bytes is held as its last four, right-aligned; bytes before them must
// be zero, since the switch carries four bytes of option data.
func TestTunMetadataLengths(t *testing.T) {
	hdr := func(n int, masked bool, plen int) []byte {
		h := uint32(ClassNXM1)<<16 | uint32(40+n)<<9 | uint32(plen)
		if masked {
			h |= 1 << 8
		}
		return be.AppendUint32(nil, h)
	}
	long := make([]byte, 124)
	long[121], long[123] = 1, 2
	for _, c := range []struct {
		name  string
		b     []byte
		value []byte
		err   error
	}{
		{"4 bytes", append(hdr(0, false, 4), 0, 1, 0, 2), []byte{0, 1, 0, 2}, nil},
		{"2 bytes", append(hdr(5, false, 2), 7, 8), []byte{0, 0, 7, 8}, nil},
		{"124 bytes", append(hdr(63, false, 124), long...), []byte{0, 1, 0, 2}, nil},
		{"masked 3 bytes", append(hdr(0, true, 6), 1, 0, 0, 0x7f, 0xff, 0), []byte{0, 1, 0, 0}, nil},
		{"a byte beyond four", append(hdr(0, false, 5), 1, 0, 0, 0, 0), nil, errMatchValue},
		{"odd masked length", append(hdr(0, true, 5), 1, 0, 0, 0, 0), nil, errMatchLen},
		{"empty", hdr(0, false, 0), nil, errMatchLen},
	} {
		o, _, err := parseOXM(c.b)
		if err != c.err || err == nil && !bytes.Equal(o.Value, c.value) {
			t.Errorf("%s: %x %v, want %x %v", c.name, o.Value, err, c.value, c.err)
		}
		if n, ok := IsTunMetadata(o.Field); err == nil && (!ok || n != int(c.b[2]>>1)-40) {
			t.Errorf("%s: field %d", c.name, o.Field)
		}
	}
}

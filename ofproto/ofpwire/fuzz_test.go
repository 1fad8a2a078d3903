package ofpwire

import (
	"bytes"
	"reflect"
	"runtime"
	"slices"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// allocPerByte and allocFixed bound what decoding may allocate: so many
// bytes per input byte, plus a constant for the 64 KiB read buffer. A decoder that trusted a length field
// (make(n) before checking n against the input) breaks it at once.
const (
	allocPerByte = 64
	allocFixed   = 80 << 10
)

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		b, err := Encode(7, m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, m := range []Message{ovsFlowMod(), ovsICMPv6FlowMod(), ovsMeterMod()} {
		b, _ := Encode(7, m)
		f.Add(b)
	}
	// Nicira-class tunnel fields in a match and a set-field.
	tun, _ := Encode(7, &FlowMod{Command: ofp.FlowAdd, BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
		Match: Match{Fields: []OXM{NewMaskedOXM(XMTypeTunIPv4Src, []byte{198, 18, 0, 0}, []byte{255, 255, 0, 0}),
			NewOXM(XMTypeTunIPv6Dst, []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1})}},
		Instructions: []Instruction{&InstrApplyActions{Actions: []Action{
			&ActionSetField{Field: NewOXM(XMTypeTunIPv4Dst, []byte{198, 18, 20, 2})}}}}})
	f.Add(tun)
	f.Add(mustHex("04 00 0010 00000001 0001 fffc 00000010"))
	// Open vSwitch's actions and registers, in 1.3 and in 1.5 (where
	// move is copy_field and a masked set-field is one).
	nx := &FlowMod{Command: ofp.FlowAdd, BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
		Match: Match{Fields: []OXM{OXMUint(XMTypeReg0+2, 7), OXMUintMasked(XMTypeXReg0+1, 5, 0xff)}},
		Instructions: []Instruction{&InstrApplyActions{Actions: []Action{
			&ActionRegMove{Src: ofp.XMTypeIPv4Src, Dst: XMTypeXXReg0, SrcOfs: 0, DstOfs: 96, NBits: 32},
			&ActionSetField{Field: OXMUintMasked(XMTypeReg0+1, 0x500, 0xff00)},
			&ActionSetField{Field: OXMUintMasked(XMTypeReg0+1, 0x501, 0xff01)},
			&ActionResubmit{InPort: PortIn, Table: 4}, &ActionNote{Note: []byte{1, 2, 3, 4, 5, 6}}, &ActionExit{},
			&ActionCT{Flags: CTCommit, HasZoneField: true, ZoneField: XMTypeReg0 + 13, ZoneNBits: 16, RecircTable: 9,
				Actions: []Action{&ActionNAT{Flags: NATSrc, RangePresent: NATRangeIPv4Min | NATRangeProtoMin, IPv4Min: [4]byte{10, 0, 0, 1}, ProtoMin: 80},
					&ActionSetField{Field: OXMUintMasked(XMTypeCTMark, 0, 1)}}},
			&ActionController{MaxLen: 0xffff, Reason: 1, Userdata: []byte{0, 0, 0, 0x12}, Pause: true, MeterID: NoMeter},
			&ActionStack{Field: XMTypeReg0, NBits: 32}, &ActionDecTTLIDs{IDs: []uint16{1}}, &ActionCTClear{},
			&ActionLearn{TableID: 3, Priority: 9, Flags: LearnDeleteLearned | LearnWriteResult, Limit: 4, ResultDst: XMTypeReg0, ResultDstOfs: 3,
				Specs: []LearnSpec{{NBits: 48, SrcField: ofp.XMTypeEthSrc, Dst: LearnDstMatch, DstField: ofp.XMTypeEthDst},
					{NBits: 16, Imm: []byte{8, 0}, Dst: LearnDstMatch, DstField: ofp.XMTypeEthType},
					{NBits: 3, Imm: []byte{5}, Dst: LearnDstLoad, DstField: XMTypeReg0 + 2, DstOfs: 4},
					{NBits: 16, SrcField: XMTypeInPort16, Dst: LearnDstOutput}}},
			&ActionFinTimeout{IdleTimeout: 1, HardTimeout: 2},
			&ActionOutputReg{Field: XMTypeReg0 + 1, NBits: 16},
			&ActionMultipath{Fields: HashSymmetricL4, Basis: 50, Algorithm: MultipathHRW, MaxLink: 3, Dst: XMTypeReg0, DstNBits: 2},
			&ActionBundle{Algorithm: BundleHRW, Fields: HashSymmetricL3L4UDP, Members: []ofp.PortNo{1, 2, PortLocal}},
			&ActionBundle{Members: []ofp.PortNo{4}, Load: true, Dst: XMTypeReg0 + 5, DstNBits: 16}}}}}
	for _, v := range []uint8{Version, Version15} {
		b, err := EncodeIn(v, 7, nx)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, seed := range versionSeeds {
		f.Add(mustHex(seed))
	}
	f.Add(mustHex("04 0d 0018 00000001 ffffffff fffffffd ffff 000000000000"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		h, msg, err := ReadMessage(bytes.NewReader(data), nil)
		var m Message
		if err == nil {
			m, err = Decode(h, msg[HeaderLen:])
		}
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(allocPerByte*len(data)+allocFixed) {
			t.Fatalf("decoding %d bytes allocated %d bytes", len(data), alloc)
		}
		if err != nil {
			if _, ok := err.(*OFPError); !ok && msg != nil {
				t.Fatalf("Decode returned a non-OpenFlow error: %v", err)
			}
			return
		}
		// Whatever version it came in, the message is now in the one
		// internal form, which 1.3 encodes (a 1.4+ SET_ASYNC excepted: its
		// per-property form has no 1.3 encoding).
		if _, ok := m.(*AsyncProps); ok {
			return
		}
		// Nor do 1.5's bucket commands and bucket ids: what 1.3 keeps of
		// a group-mod must survive.
		want := m
		if gm, ok := m.(*GroupMod); ok {
			if gm.Command == GroupInsertBucket || gm.Command == GroupRemoveBucket {
				return
			}
			c := *gm
			c.Buckets = slices.Clone(gm.Buckets)
			for i := range c.Buckets {
				c.Buckets[i].ID = 0
			}
			want = &c
		}
		b, err := Encode(h.Transaction, want)
		if err != nil {
			t.Fatalf("re-encoding %T: %v", m, err)
		}
		got := decodeAll(t, b)
		if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
			t.Fatalf("%T does not survive re-encoding:\n got %#v\nwant %#v", m, got[0], m)
		}
		// Rewriting into the later versions' layouts must not fail on
		// anything the codec accepted.
		for _, v := range []uint8{Version14, Version15} {
			if _, err := EncodeIn(v, h.Transaction, m); err != nil && len(data) < MaxMessageLen-64 {
				t.Fatalf("encoding %T in version %d: %v", m, v, err)
			}
		}
		// 1.0 refuses the flow-mods it cannot carry; one it encodes must
		// decode as a 1.0 flow-mod.
		if fm, ok := m.(*FlowMod); ok {
			if b, err := EncodeIn(Version10, h.Transaction, fm); err == nil {
				if b[0] != Version10 {
					t.Fatalf("a 1.0 flow-mod with version %d", b[0])
				}
				decodeAll(t, b)
			}
		}
	})
}

// FuzzParsePacketIn2: NXT_PACKET_IN2/NXT_RESUME properties never panic,
// and what parses encodes to properties that parse the same.
func FuzzParsePacketIn2(f *testing.F) {
	pi := &PacketIn{BufferID: NoBuffer, TotalLen: 100, Reason: 1, TableID: 3, Cookie: 9, Data: []byte{1, 2, 3},
		Userdata: []byte{0, 0, 0, 0x12}, Match: Match{Fields: []OXM{OXMUint(XMTypeReg0, 5), OXMUint(ofp.XMTypeInPort, 1)}}}
	for _, cont := range [][]byte{nil, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		pi.Continuation = cont
		x, err := pi.PacketIn2()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(x.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePacketIn2(data)
		if err != nil {
			return
		}
		x, err := p.PacketIn2()
		if err != nil {
			return // e.g. metadata fields this side would not send
		}
		q, err := ParsePacketIn2(x.Data)
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("re-encoded packet-in2 parses as %+v (%v), want %+v", q, err, p)
		}
	})
}

// FuzzContinuationID: a continuation from a controller never panics the
// parser, and the id it finds is the one a continuation made from it
// carries.
func FuzzContinuationID(f *testing.F) {
	f.Add(Continuation([16]byte{'v', 's', 'g', 'o', 0, 0, 0, 1, 9, 9, 9, 9, 9, 9, 9, 9}))
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 5, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, c []byte) {
		id, ok := ContinuationID(c)
		if !ok {
			return
		}
		if back, ok := ContinuationID(Continuation(id)); !ok || back != id {
			t.Fatalf("id %x reads back as %x, %v", id, back, ok)
		}
	})
}

// FuzzParseNXFlowMod: NXT_FLOW_MOD bodies (the NXM flow format of 1.0
// peers) never panic, and what decodes encodes.
func FuzzParseNXFlowMod(f *testing.F) {
	// cookie, command (table 3, add), idle, hard, priority, buffer,
	// out_port, flags, match_len 8, pad; NXM_NX_REG0=5; output:2.
	f.Add(mustHex("0000000000000001 0300 0000 0000 000a ffffffff ffff 0000 0008 000000000000"+
		"00010004 00000005 0000 0008 0002 0000"), true)
	f.Add(mustHex("0000000000000000 0003 0000 0000 0000 ffffffff ffff 0000 000c 000000000000"+
		"00000402 1005 00000006 00000000"), false)
	f.Fuzz(func(t *testing.T, b []byte, tableID bool) {
		fm, err := ParseNXFlowMod(b, tableID)
		if err != nil {
			return
		}
		if _, err := Encode(1, fm); err != nil {
			t.Fatalf("decoded %+v does not encode: %v", fm, err)
		}
	})
}

// FuzzParseCTFlush: NXT_CT_FLUSH from a controller never panics, and what
// it decodes encodes back to a message that decodes the same.
func FuzzParseCTFlush(f *testing.F) {
	zone := uint16(7)
	for _, m := range []*CTFlush{
		{},
		{Proto: 6, Zone: &zone, Orig: CTFlushTuple{Src: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 1}, DstPort: 80},
			Reply: CTFlushTuple{SrcPort: 80}},
		{Proto: 58, Orig: CTFlushTuple{Src: [16]byte{0: 0x20, 1: 1, 15: 1}, ICMPID: 9, ICMPType: 128}},
	} {
		b, err := m.appendBody(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[8:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseCTFlush(b)
		if err != nil {
			return
		}
		enc, err := m.appendBody(nil)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseCTFlush(enc[8:])
		if err != nil {
			t.Fatalf("re-encoded %x: %v", enc, err)
		}
		// ICMP fields are only written for ICMP, ports only for others.
		norm := func(m *CTFlush) {
			for _, tu := range []*CTFlushTuple{&m.Orig, &m.Reply} {
				if m.Proto == 1 || m.Proto == 58 {
					tu.SrcPort, tu.DstPort = 0, 0
				} else {
					tu.ICMPID, tu.ICMPType, tu.ICMPCode = 0, 0, 0
				}
			}
		}
		norm(m)
		norm(again)
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("decoded %+v, re-decoded %+v", m, again)
		}
	})
}

// FuzzParseTLVTableMod: what NXT_TLV_TABLE_MOD's parser accepts encodes
// back to the same bytes and mappings; what it refuses is refused with an
// OpenFlow error.
func FuzzParseTLVTableMod(f *testing.F) {
	for _, m := range []*TLVTableMod{
		{Command: TLVAdd, Maps: []TLVMap{{Class: 0x0102, Type: 0x80, Len: 4, Index: 0}}},
		{Command: TLVDelete, Maps: []TLVMap{{Class: 1, Type: 2, Len: 124, Index: 63}, {Index: 1}}},
		{Command: TLVClear},
	} {
		b, err := m.appendBody(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[8:])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseTLVTableMod(b)
		if err != nil {
			if _, ok := err.(*OFPError); !ok {
				t.Fatalf("error %v is not an OpenFlow error", err)
			}
			return
		}
		enc, _ := m.appendBody(nil)
		again, err := ParseTLVTableMod(enc[8:])
		if err != nil || again.Command != m.Command || !slices.Equal(again.Maps, m.Maps) {
			t.Fatalf("re-encoded %x: %+v %v, want %+v", enc, again, err, m)
		}
	})
}

// FuzzUpFlowModPlain: a 1.4 or 1.5 flow-mod body that upFlowMod decodes
// as it is (plainInstructions15) decodes to what the rewrite of a copy
// gives, error included.
func FuzzUpFlowModPlain(f *testing.F) {
	for _, m := range []Message{ovsFlowMod(), ovsICMPv6FlowMod()} {
		for _, v := range []uint8{Version14, Version15} {
			b, err := EncodeIn(v, 7, m)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(v == Version15, b[HeaderLen:])
		}
	}
	f.Fuzz(func(t *testing.T, v15 bool, b []byte) {
		v := uint8(Version14)
		if v15 {
			v = Version15
		}
		if len(b) < 44 {
			return
		}
		fast, err := upFlowMod(v, b)
		if err != nil || &fast[0] != &b[0] {
			return // rewritten: nothing to compare
		}
		slow, serr := rewriteFlowMod(v, b)
		var a, c FlowMod
		aerr := a.decodeBody(fast)
		if serr == nil {
			serr = c.decodeBody(slow)
		}
		if (aerr == nil) != (serr == nil) || (aerr == nil && !reflect.DeepEqual(a, c)) {
			t.Fatalf("as is: %+v (%v); rewritten: %+v (%v)", a, aerr, c, serr)
		}
	})
}

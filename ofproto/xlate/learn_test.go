package xlate

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// macLearn is Open vSwitch's MAC-learning recipe: learn(table=1,
// hard_timeout=60, NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],
// output:NXM_OF_IN_PORT[]), resubmit(,1); table 1 floods what it does not
// know.
func macLearn() []flowSpec {
	learn := &ofpwire.ActionLearn{TableID: 1, HardTimeout: 60, Priority: 0x8000, Specs: []ofpwire.LearnSpec{
		{NBits: 48, SrcField: ofpwire.XMTypeEthSrc, Dst: ofpwire.LearnDstMatch, DstField: ofpwire.XMTypeEthDst},
		{NBits: 16, SrcField: ofpwire.XMTypeInPort16, Dst: ofpwire.LearnDstOutput}}}
	return []flowSpec{
		{0, 1, nil, ins(apply(learn, resubmitT(1)))},
		{1, 0, nil, ins(apply(out(uint32(ofpwire.PortFlood))))},
	}
}

// TestLearnMAC: a packet from MAC A on port 1 teaches table 1 to send
// packets for A to port 1; the megaflow depends on the bits learned from
// (eth_src, in_port); learning the same again changes nothing; a trace
// learns nothing.
func TestLearnMAC(t *testing.T) {
	p := build(t, macLearn())
	a := [6]byte{0, 0, 0, 0, 0, 0xa}
	k := ipv4Key()
	k.EthSrc, k.EthDst, k.InPort = a, [6]byte{0, 0, 0, 0, 0, 0xb}, 1
	var learned []*ofpwire.FlowMod
	opts := Options{Ports: []uint32{1, 2, 3}, Learn: func(fm *ofpwire.FlowMod, _ uint32) { learned = append(learned, fm) }}
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, opts); err != nil {
		t.Fatal(err)
	}
	if res.Mask.EthSrc != [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} || res.Mask.InPort != ^uint32(0) {
		t.Fatalf("megaflow mask does not hold the learned-from bits: %+v", res.Mask)
	}
	if len(learned) != 1 {
		t.Fatalf("%d flows learned, want 1", len(learned))
	}
	fm := learned[0]
	dst, ok := fm.Match.Field(ofpwire.XMTypeEthDst)
	if fm.TableID != 1 || fm.HardTimeout != 60 || fm.Priority != 0x8000 || len(fm.Match.Fields) != 1 || !ok || !bytes.Equal(dst.Value, a[:]) {
		t.Fatalf("learned %+v, match %+v", fm, fm.Match)
	}
	acts := fm.Instructions[0].(*ofpwire.InstrApplyActions).Actions
	if o, ok := acts[0].(*ofpwire.ActionOutput); len(acts) != 1 || !ok || o.Port != 1 {
		t.Fatalf("learned actions %+v, want output:1", acts)
	}
	now := time.Unix(1000, 0)
	e, changed, err := p.Learn(fm, now)
	if err != nil || !changed || e == nil {
		t.Fatalf("Learn: %v changed=%v", err, changed)
	}
	if _, changed, _ := p.Learn(fm, now.Add(time.Second)); changed {
		t.Fatal("learning the same flow again changed the tables")
	}
	// A packet to A now goes to port 1 only.
	back := ipv4Key()
	back.EthSrc, back.EthDst, back.InPort = [6]byte{0, 0, 0, 0, 0, 0xb}, a, 2
	learned = nil
	if err := Translate(p, &back, &res, opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Actions, actions.List{dpOut(1)}) {
		t.Fatalf("packet to the learned MAC: %+v, want output to 1", res.Actions)
	}
	// The hard timeout counts from the latest learn: 60 s after it.
	if gone := p.Expire(now.Add(60 * time.Second)); len(gone) != 0 {
		t.Fatalf("learned flow expired %d s after it was last learned", 59)
	}
	if gone := p.Expire(now.Add(62 * time.Second)); len(gone) != 1 {
		t.Fatalf("%d flows expired after the hard timeout, want the learned one", len(gone))
	}
	// A trace learns nothing.
	learned = nil
	if _, err := TranslateTrace(p, &k, opts); err != nil || len(learned) != 0 {
		t.Fatalf("trace: %v, learned %d", err, len(learned))
	}
}

// TestLearnSpecs: immediates, partial fields, loads and a register
// source build the flow Open vSwitch's learn_execute builds.
func TestLearnSpecs(t *testing.T) {
	l := &ofpwire.ActionLearn{TableID: 9, Priority: 7, Cookie: 0x55, IdleTimeout: 5, Flags: ofpwire.LearnSendFlowRem,
		FinIdleTimeout: 2, Specs: []ofpwire.LearnSpec{
			{NBits: 16, Imm: []byte{0x08, 0x00}, Dst: ofpwire.LearnDstMatch, DstField: ofpwire.XMTypeEthType},
			{NBits: 32, SrcField: ofpwire.XMTypeIPv4Dst, Dst: ofpwire.LearnDstMatch, DstField: ofpwire.XMTypeIPv4Src},
			{NBits: 8, SrcField: reg(1), SrcOfs: 8, Dst: ofpwire.LearnDstMatch, DstField: reg(2), DstOfs: 0},
			{NBits: 4, Imm: []byte{0x0f}, Dst: ofpwire.LearnDstMatch, DstField: reg(2), DstOfs: 12},
			{NBits: 1, Imm: []byte{1}, Dst: ofpwire.LearnDstLoad, DstField: reg(10), DstOfs: 7},
			{NBits: 16, SrcField: ofpwire.XMTypeTCPDst, Dst: ofpwire.LearnDstLoad, DstField: reg(3), DstOfs: 16}}}
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(setF(reg(1), 0xab00), l))}})
	var learned []*ofpwire.FlowMod
	k := ipv4Key()
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, Options{Learn: func(fm *ofpwire.FlowMod, _ uint32) { learned = append(learned, fm) }}); err != nil {
		t.Fatal(err)
	}
	if len(learned) != 1 {
		t.Fatalf("learned %d", len(learned))
	}
	fm := learned[0]
	if fm.TableID != 9 || fm.Priority != 7 || fm.Cookie != 0x55 || fm.IdleTimeout != 5 || fm.Flags != ofpwire.FlowFlagSendFlowRem {
		t.Fatalf("flow-level fields %+v", fm)
	}
	want := []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x800), oxm(ofpwire.XMTypeIPv4Src, 0x0a000002), oxmM(reg(2), 0xf0ab, 0xf0ff)}
	if len(fm.Match.Fields) != len(want) {
		t.Fatalf("match %+v, want %+v", fm.Match.Fields, want)
	}
	for i, w := range want {
		g := fm.Match.Fields[i]
		if g.Field != w.Field || !bytes.Equal(g.Value, w.Value) || g.HasMask != w.HasMask || w.HasMask && !bytes.Equal(g.Mask, w.Mask) {
			t.Fatalf("match field %d: %+v, want %+v", i, g, w)
		}
	}
	acts := fm.Instructions[0].(*ofpwire.InstrApplyActions).Actions
	if len(acts) != 3 {
		t.Fatalf("actions %+v", acts)
	}
	if ft, ok := acts[0].(*ofpwire.ActionFinTimeout); !ok || ft.IdleTimeout != 2 {
		t.Fatalf("first action %+v, want fin_timeout(idle_timeout=2)", acts[0])
	}
	if sf := acts[1].(*ofpwire.ActionSetField).Field; sf.Uint() != 0x80 || !bytes.Equal(sf.Mask, []byte{0, 0, 0, 0x80}) {
		t.Fatalf("load into reg10[7]: %+v", sf)
	}
	if sf := acts[2].(*ofpwire.ActionSetField).Field; sf.Uint() != 80<<16 || !bytes.Equal(sf.Mask, []byte{0xff, 0xff, 0, 0}) {
		t.Fatalf("load of tcp_dst into reg3[16..31]: %+v", sf)
	}
	if res.Mask.IPv4Dst != ^uint32(0) || res.Mask.TpDst != 0xffff {
		t.Fatalf("learned-from bits not in the mask: %+v", res.Mask)
	}
	// The tables accept it: its match has its prerequisites.
	if _, _, err := p.Learn(fm, t0); err != nil {
		t.Fatal(err)
	}
}

// TestLearnChecks: learn actions whose flows could never be added are
// refused when the flow holding them is; limit is not evaluated yet and
// fails closed.
func TestLearnChecks(t *testing.T) {
	ipSrc := ofpwire.LearnSpec{NBits: 32, SrcField: ofpwire.XMTypeIPv4Src, Dst: ofpwire.LearnDstMatch, DstField: ofpwire.XMTypeIPv4Src}
	for _, c := range []struct {
		name string
		l    *ofpwire.ActionLearn
		code uint16
	}{
		{"IP field without eth_type", &ofpwire.ActionLearn{TableID: 1, Specs: []ofpwire.LearnSpec{ipSrc}}, ofpwire.BACMatchInconsistent},
		{"load into a read-only field", &ofpwire.ActionLearn{TableID: 1, Specs: []ofpwire.LearnSpec{
			{NBits: 8, Imm: []byte{1}, Dst: ofpwire.LearnDstLoad, DstField: ofpwire.XMTypeIPv6ExtHeader}}}, ofpwire.BACBadSetType},
		{"table past the last", &ofpwire.ActionLearn{TableID: 254}, ofpwire.BACBadArgument},
		{"load into tcp_flags", &ofpwire.ActionLearn{TableID: 1, Specs: []ofpwire.LearnSpec{
			{NBits: 8, Imm: []byte{1}, Dst: ofpwire.LearnDstLoad, DstField: ofpwire.XMTypeTCPFlags}}}, ofpwire.BACBadSetType},
	} {
		var oe *ofpwire.OFPError
		if err := CheckActions([]ofpwire.Action{c.l}, false); !errors.As(err, &oe) || oe.Code != c.code {
			t.Errorf("%s: %v, want BAD_ACTION code %d", c.name, err, c.code)
		}
	}
	for _, f := range []ofpwire.XMType{ofpwire.XMTypeTCPFlags, ofpwire.XMTypeCTState, ofpwire.XMTypeCTZone} {
		size, _, _ := ofpwire.FieldSize(f)
		var oe *ofpwire.OFPError
		if err := CheckActions([]ofpwire.Action{&ofpwire.ActionSetField{Field: ofpwire.NewOXM(f, make([]byte, size))}}, false); !errors.As(err, &oe) || oe.Code != ofpwire.BACBadSetType {
			t.Errorf("set_field on read-only field %d: %v", f, err)
		}
	}
	ok := &ofpwire.ActionLearn{TableID: 1, Specs: []ofpwire.LearnSpec{
		{NBits: 16, Imm: []byte{8, 0}, Dst: ofpwire.LearnDstMatch, DstField: ofpwire.XMTypeEthType}, ipSrc}}
	if err := CheckActions([]ofpwire.Action{ok}, false); err != nil {
		t.Fatalf("eth_type=0x800,NXM_OF_IP_SRC[]: %v", err)
	}
}

// TestLearnLimit: learn(limit=2,result_dst=reg0[0]) learns a flow per IP
// source into table 1 while that table holds fewer than two flows with the
// learned cookie; a flow already learned still reports 1, a refused one 0,
// and the rest of the walk reads the bit. A flow of the table with the
// same cookie counts against the limit whoever added it.
func TestLearnLimit(t *testing.T) {
	ipSrc := ofpwire.LearnSpec{NBits: 32, SrcField: ofpwire.XMTypeIPv4Src, Dst: ofpwire.LearnDstMatch, DstField: ofpwire.XMTypeIPv4Src}
	l := &ofpwire.ActionLearn{TableID: 1, Priority: 5, Cookie: 0x77, Limit: 2, Flags: ofpwire.LearnWriteResult,
		ResultDst: reg(0), ResultDstOfs: 0, Specs: []ofpwire.LearnSpec{
			{NBits: 16, Imm: []byte{8, 0}, Dst: ofpwire.LearnDstMatch, DstField: ofpwire.XMTypeEthType}, ipSrc}}
	p := build(t, []flowSpec{
		{table: 0, prio: 1, ins: ins(apply(l, resubmitT(2)))},
		{table: 2, prio: 10, match: []ofpwire.OXM{oxm(reg(0), 1)}, ins: ins(apply(out(2)))},
		{table: 2, prio: 5, ins: ins(apply(out(3)))},
	})
	var pending []*ofpwire.FlowMod
	opts := Options{Ports: []uint32{1, 2, 3}, Learn: func(fm *ofpwire.FlowMod, limit uint32) {
		if limit != 2 {
			t.Errorf("learned with limit %d, want 2", limit)
		}
		pending = append(pending, fm)
	}}
	send := func(src uint32) uint32 {
		t.Helper()
		k := ipv4Key()
		k.IPv4Src = src
		var res datapath.UpcallResult
		if err := Translate(p, &k, &res, opts); err != nil {
			t.Fatal(err)
		}
		for _, fm := range pending {
			if _, _, err := p.LearnLimit(fm, 2, t0); err != nil {
				t.Fatalf("LearnLimit after a translation that allowed it: %v", err)
			}
		}
		pending = nil
		if len(res.Actions) != 1 || res.Actions[0].Kind != actions.Output {
			t.Fatalf("source %#x: actions %v", src, res.Actions)
		}
		return res.Actions[0].Port
	}
	for i, c := range []struct {
		src  uint32
		port uint32
	}{
		{1, 2}, {2, 2}, // learned
		{3, 3}, // the limit refuses it
		{1, 2}, // already there
		{4, 3},
	} {
		if got := send(c.src); got != c.port {
			t.Errorf("packet %d (source %d): port %d, want %d", i, c.src, got, c.port)
		}
	}
	if n := p.TableStats(1).Active; n != 2 {
		t.Errorf("table 1 holds %d flows, want 2", n)
	}
	// A third flow, refused by the tables directly too.
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 1, Priority: 5, Cookie: 0x77,
		Match:    ofpwire.Match{Fields: []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x800), oxm(ofpwire.XMTypeIPv4Src, 9)}},
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
	if _, _, err := p.LearnLimit(fm, 2, t0); !errors.Is(err, pipeline.ErrLearnLimit) {
		t.Errorf("LearnLimit past the limit: %v, want ErrLearnLimit", err)
	}
	// Another cookie is not limited by these.
	fm.Cookie = 0x78
	if _, _, err := p.LearnLimit(fm, 2, t0); err != nil {
		t.Errorf("LearnLimit with another cookie: %v", err)
	}
}

package xlate

import (
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// TestConntrackFork: ct(commit, zone from a register, exec(ct_mark),
// table=3) emits the datapath CT action and a recirculation of a copy to
// table 3, where ct_state picks the flow; the walk goes on untracked.
func TestConntrackFork(t *testing.T) {
	ct := &ofpwire.ActionCT{Flags: ofpwire.CTCommit, HasZoneField: true, ZoneField: ofpwire.XMTypeReg0,
		ZoneOfs: 0, ZoneNBits: 16, RecircTable: 3,
		Actions: []ofpwire.Action{&ofpwire.ActionSetField{Field: ofpwire.OXMUintMasked(ofpwire.XMTypeCTMark, 0x50, 0xf0)}}}
	est := ofpwire.OXMUintMasked(ofpwire.XMTypeCTState, flow.CTTracked|flow.CTEstablished, flow.CTTracked|flow.CTEstablished)
	nw := ofpwire.OXMUintMasked(ofpwire.XMTypeCTState, flow.CTTracked|flow.CTNew, flow.CTTracked|flow.CTNew)
	untracked := ofpwire.OXMUintMasked(ofpwire.XMTypeCTState, 0, flow.CTTracked)
	p := build(t, []flowSpec{
		{0, 1, nil, ins(apply(&ofpwire.ActionSetField{Field: ofpwire.OXMUint(ofpwire.XMTypeReg0, 0x10007)}, ct,
			&ofpwire.ActionResubmit{InPort: ofpwire.PortIn, Table: 1}))},
		{1, 2, []ofpwire.OXM{untracked}, ins(apply(out(2)))},
		{1, 1, nil, ins(apply(out(9)))},
		{3, 2, []ofpwire.OXM{est}, ins(apply(out(4)))},
		{3, 2, []ofpwire.OXM{nw, oxm(ofpwire.XMTypeReg0, 0x10007)}, ins(apply(out(5)))},
	})
	rt := NewRecircTable()
	opts := Options{Recirc: rt}
	k := flow.Key{InPort: 1, EthType: 0x0800, NwProto: 17}
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, opts); err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 3 || res.Actions[1].Kind != actions.Recirc {
		t.Fatalf("actions %v, want ct, recirc, output", res.Actions)
	}
	id := res.Actions[1].RecircID()
	want := actions.List{actions.CTAction(7, actions.CTFlagCommit|actions.CTFlagMark, 0x50, 0xf0), actions.RecircAction(id), dpOut(2)}
	if !slices.Equal(res.Actions, want) {
		t.Fatalf("actions\n got %v\nwant %v", res.Actions, want)
	}
	for _, c := range []struct {
		state uint8
		out   uint32
	}{{flow.CTTracked | flow.CTEstablished | flow.CTReply, 4}, {flow.CTTracked | flow.CTNew, 5}} {
		k := flow.Key{InPort: 1, EthType: 0x0800, NwProto: 17, RecircID: uint16(id)}
		k.CT.State, k.CT.Zone = c.state, 7
		var res datapath.UpcallResult
		if err := Translate(p, &k, &res, opts); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(res.Actions, actions.List{dpOut(c.out)}) {
			t.Errorf("ct_state %#x: actions %v, want output %d", c.state, res.Actions, c.out)
		}
		if res.Mask.CT.State == 0 {
			t.Errorf("ct_state %#x: the megaflow does not match on ct_state", c.state)
		}
	}
}

func TestCTClear(t *testing.T) {
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionCTClear{}, out(2)))}})
	k := flow.Key{InPort: 1, EthType: 0x0800}
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Actions, actions.List{{Kind: actions.CTClear}, dpOut(2)}) {
		t.Fatalf("actions %v", res.Actions)
	}
}

// TestConntrackTrace: a trace follows ct(table=N)'s tracked copy as Open
// vSwitch's ofproto/trace does: in the ct's zone with the mark its commit
// writes, as trk|new unless --ct-next states are given (one per ct, in
// order), and a nat with a range translated to its first address and port.
func TestConntrackTrace(t *testing.T) {
	ctState := func(v, m uint8) ofpwire.OXM {
		return ofpwire.OXMUintMasked(ofpwire.XMTypeCTState, uint64(v), uint64(m))
	}
	trk, nw, est := uint8(flow.CTTracked), uint8(flow.CTNew), uint8(flow.CTEstablished)
	commit := &ofpwire.ActionCT{Flags: ofpwire.CTCommit, ZoneImm: 5, RecircTable: 1,
		Actions: []ofpwire.Action{&ofpwire.ActionSetField{Field: ofpwire.OXMUint(ofpwire.XMTypeCTMark, 42)}}}
	snat := &ofpwire.ActionCT{Flags: ofpwire.CTCommit, ZoneImm: 6, RecircTable: 2,
		Actions: []ofpwire.Action{&ofpwire.ActionNAT{Flags: ofpwire.NATSrc,
			RangePresent: ofpwire.NATRangeIPv4Min | ofpwire.NATRangeIPv4Max | ofpwire.NATRangeProtoMin,
			IPv4Min:      [4]byte{198, 19, 0, 1}, IPv4Max: [4]byte{198, 19, 0, 9}, ProtoMin: 4000}}}
	ipv4 := oxm(ofpwire.XMTypeEthType, 0x0800)
	p := build(t, []flowSpec{
		{0, 1, []ofpwire.OXM{ipv4, ctState(0, trk)}, ins(apply(commit))},
		{1, 3, []ofpwire.OXM{ipv4, ctState(trk|nw, trk|nw), oxm(ofpwire.XMTypeCTMark, 42), oxm(ofpwire.XMTypeCTZone, 5)}, ins(apply(snat))},
		{1, 2, []ofpwire.OXM{ctState(trk|est, trk|est)}, ins(apply(out(4)))},
		{2, 2, []ofpwire.OXM{ipv4, oxm(ofpwire.XMTypeIPv4Src, 0xc6130001), ctState(trk|est, trk|est)}, ins(apply(out(7)))},
		{2, 1, []ofpwire.OXM{ipv4, oxm(ofpwire.XMTypeIPv4Src, 0xc6130001)}, ins(apply(out(6)))},
	})
	k := flow.Key{InPort: 1, EthType: 0x0800, NwProto: 17, IPv4Src: 0xc6120001, IPv4Dst: 0xc6120002, TpSrc: 1000, TpDst: 53}
	for _, c := range []struct {
		ctNext []uint8
		out    uint32 // of the last walk
		texts  []string
	}{
		{nil, 6, []string{"recirc(0x1) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)",
			"ct_zone(0x5),ct_mark(0x2a)", "Replacing src/dst IP/ports to simulate NAT:",
			" Initial flow: nw_src=198.18.0.1,tp_src=1000,nw_dst=198.18.0.2,tp_dst=53",
			" Modified flow: nw_src=198.19.0.1,tp_src=4000,nw_dst=198.18.0.2,tp_dst=53"}},
		{[]uint8{trk | nw, trk | est}, 7, []string{"recirc(0x1) - resume conntrack with ct_state=new|trk\n",
			"recirc(0x2) - resume conntrack with ct_state=est|trk\n"}},
		{[]uint8{trk | est}, 4, []string{"resume conntrack with ct_state=est|trk"}},
	} {
		tr, err := TranslateTrace(p, &k, Options{Recirc: NewRecircTable()}, c.ctNext...)
		if err != nil {
			t.Fatal(err)
		}
		last := tr
		for len(last.CTResumes) > 0 {
			last = last.CTResumes[0].Trace
		}
		if !slices.Equal(last.Actions, actions.List{dpOut(c.out)}) {
			t.Errorf("--ct-next %v: the last walk's actions %v, want output %d\n%s", c.ctNext, last.Actions, c.out, tr)
		}
		s := tr.String()
		for _, w := range c.texts {
			if !strings.Contains(s, w) {
				t.Errorf("--ct-next %v: trace lacks %q:\n%s", c.ctNext, w, s)
			}
		}
	}
}

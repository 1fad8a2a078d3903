package xlate

import (
	"slices"
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

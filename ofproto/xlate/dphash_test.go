package xlate

import (
	"slices"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// TestDPHashMatch: dp_hash is 0 on the way to a select group (table 0
// matches dp_hash=0), and after it, in the bucket and the tables it
// resubmits to, the hash the group chose by, never 0: table 1 splits on
// its low bit as OVN's and Antrea's flows do, and a move copies it whole
// into reg0, which table 2 matches exactly. Packets that differ only in a
// hashed field land on both sides; each translation's megaflow holds the
// fields the hash read (so a megaflow never carries a packet whose hash
// differs), and the same packet always gets the same verdict.
func TestDPHashMatch(t *testing.T) {
	gt := pipeline.NewGroupTable()
	gm := &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeSelect, GroupID: 1,
		Buckets:   []ofpwire.Bucket{bkt(&ofpwire.ActionResubmit{InPort: ofpwire.PortIn, Table: 1})},
		Selection: &ofpwire.GroupSelection{Method: "dp_hash"}}
	gm.Buckets[0].Weight = 1
	if _, err := gt.ApplyGroupMod(gm, t0); err != nil {
		t.Fatal(err)
	}
	dpHash := func(v, m uint64) ofpwire.OXM { return oxmM(ofpwire.XMTypeDPHash, v, m) }
	p := build(t, []flowSpec{
		{0, 10, []ofpwire.OXM{oxm(ofpwire.XMTypeDPHash, 0)}, ins(apply(grp(1)))},
		{0, 0, nil, ins(apply(out(9)))}, // dp_hash set before any group: wrong
		{1, 10, []ofpwire.OXM{dpHash(0, 1)}, ins(apply(out(2),
			&ofpwire.ActionRegMove{Src: ofpwire.XMTypeDPHash, Dst: ofpwire.XMTypeReg0, NBits: 32},
			&ofpwire.ActionResubmit{InPort: ofpwire.PortIn, Table: 2}))},
		{1, 10, []ofpwire.OXM{dpHash(1, 1)}, ins(apply(out(3),
			&ofpwire.ActionRegMove{Src: ofpwire.XMTypeDPHash, Dst: ofpwire.XMTypeReg0, NBits: 32},
			&ofpwire.ActionResubmit{InPort: ofpwire.PortIn, Table: 2}))},
		{1, 20, []ofpwire.OXM{oxm(ofpwire.XMTypeDPHash, 0)}, ins(apply(out(8)))}, // computed hashes are never 0
	})
	ports := map[uint32]int{}
	for src := uint32(1); src <= 64; src++ {
		k := ipv4Key()
		k.IPv4Src = 0x0a000000 | src
		x := xlator{key: k, mask: &flow.Mask{}}
		want := max(x.flowHash(), 1)
		// Table 2 holds, for this packet only, the exact match on the
		// hash the move copied: output 4 says the value is the group's.
		if _, err := p.Apply(&ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 2, Priority: 10,
			Match:        ofpwire.Match{Fields: []ofpwire.OXM{oxm(ofpwire.XMTypeReg0, uint64(want)), oxm(ofpwire.XMTypeDPHash, uint64(want))}},
			Instructions: ins(apply(out(4))), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}, t0); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			var res datapath.UpcallResult
			if err := Translate(p, &k, &res, Options{Groups: gt}); err != nil {
				t.Fatal(err)
			}
			wantPort := uint32(2) + want&1
			if len(res.Actions) != 2 || res.Actions[0] != dpOut(wantPort) || res.Actions[1] != dpOut(4) {
				t.Fatalf("source %#x (hash %#x): actions %v, want output %d then 4", k.IPv4Src, want, res.Actions, wantPort)
			}
			if res.Mask.IPv4Src != ^uint32(0) || res.Mask.EthSrc != ones6 || res.Mask.TpDst != 0xffff {
				t.Fatalf("megaflow mask %+v lacks fields the hash read", res.Mask)
			}
			ports[res.Actions[0].Port]++
		}
	}
	if ports[2] == 0 || ports[3] == 0 {
		t.Fatalf("64 sources split %v over dp_hash's low bit: the match does not see the hash", ports)
	}
}

// TestDPHashWithHashFields: selection_method=hash with fields is not
// dp_hash: the packet's dp_hash stays 0 after it, as in Open vSwitch.
func TestDPHashWithHashFields(t *testing.T) {
	gt := pipeline.NewGroupTable()
	gm := &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeSelect, GroupID: 1,
		Buckets: []ofpwire.Bucket{bkt(&ofpwire.ActionResubmit{InPort: ofpwire.PortIn, Table: 1})},
		Selection: &ofpwire.GroupSelection{Method: "hash",
			Fields: []ofpwire.OXM{ofpwire.NewOXM(ofpwire.XMTypeIPv4Src, []byte{255, 255, 255, 255})}}}
	gm.Buckets[0].Weight = 1
	if _, err := gt.ApplyGroupMod(gm, t0); err != nil {
		t.Fatal(err)
	}
	p := build(t, []flowSpec{
		{0, 10, nil, ins(apply(grp(1)))},
		{1, 10, []ofpwire.OXM{oxm(ofpwire.XMTypeDPHash, 0)}, ins(apply(out(2)))},
		{1, 0, nil, ins(apply(out(3)))},
	})
	k := ipv4Key()
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, Options{Groups: gt}); err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 1 || res.Actions[0] != dpOut(2) {
		t.Fatalf("actions %v, want output 2 (dp_hash still 0)", res.Actions)
	}
}

// TestRecircIDMatch: recirc_id=0 matches a packet's first pass and not the
// pass after a recirculation (here after pop_mpls, whose IP header a later
// table reads), where the packet carries the id the walk froze under,
// which an exact recirc_id match on that id does match.
func TestRecircIDMatch(t *testing.T) {
	ip, tc, pl := tcp4(t, 0x0a000001, 0x0a000002, 80, 0)
	frame := mplsOver(l3Frame(t, layers.EthernetTypeIPv4, ip, tc, pl))
	ipMatch := []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPProto, 6)}
	flows := []flowSpec{
		{0, 10, []ofpwire.OXM{oxm(ofpwire.XMTypeRecircID, 0), oxm(ofpwire.XMTypeEthType, 0x8847)},
			ins(apply(&ofpwire.ActionPopMPLS{EtherType: 0x0800}), gotoT(1))},
		{0, 0, nil, ins(apply(out(9)))},
		{1, 10, append([]ofpwire.OXM{oxm(ofpwire.XMTypeRecircID, 0)}, ipMatch...), ins(apply(out(2)))},
		{1, 5, ipMatch, ins(apply(out(3)))},
	}
	p := build(t, flows)
	opts := Options{Ports: framePorts, Recirc: NewRecircTable()}
	got, passes := translateRecirc(t, p, opts, frame)
	if passes != 1 || len(got) != 1 || got[0].port != 3 {
		t.Fatalf("after a recirculation: sent %s in %d passes, want port 3 (recirc_id is no longer 0)", sentText(got), passes)
	}

	// The id the first pass froze under, matched exactly, wins the
	// second pass.
	var key flow.Key
	var off flow.Offsets
	flow.Extract(frame, 1, &key, &off)
	var res datapath.UpcallResult
	if err := Translate(p, &key, &res, opts); err != nil {
		t.Fatal(err)
	}
	last := res.Actions[len(res.Actions)-1]
	if last.Kind != actions.Recirc || res.Mask.RecircID != 0xffff {
		t.Fatalf("first pass: %v (mask recirc_id %#x), want a recirculation, recirc_id exact", res.Actions, res.Mask.RecircID)
	}
	if _, err := p.Apply(&ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 1, Priority: 20,
		Match:        ofpwire.Match{Fields: append([]ofpwire.OXM{oxm(ofpwire.XMTypeRecircID, uint64(last.RecircID()))}, ipMatch...)},
		Instructions: ins(apply(out(4))), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}, t0); err != nil {
		t.Fatal(err)
	}
	got, _ = translateRecirc(t, p, opts, frame)
	if len(got) != 1 || got[0].port != 4 {
		t.Fatalf("sent %s, want port 4 (recirc_id=%#x)", sentText(got), last.RecircID())
	}
}

// TestNwTOSWrites: a move or load into NXM_OF_IP_TOS writes the DSCP
// bits only, as Open vSwitch writes nw_tos: all eight bits moved from a
// register of ones set the DSCP to 0x3f and leave the packet's ECN bits;
// a load of the two ECN bits alone changes nothing (the DSCP is set to
// what it was). dp_hash and
// recirc_id are read-only: a write is refused, a read is not.
func TestNwTOSWrites(t *testing.T) {
	k := ipv4Key()
	k.NwTOS = 0x01
	move := &ofpwire.ActionRegMove{Src: ofpwire.XMTypeReg0, Dst: ofpwire.XMTypeNwTOS, NBits: 8}
	for _, c := range []struct {
		name string
		acts []ofpwire.Action
		want []actions.Action
	}{
		{"move all eight bits", []ofpwire.Action{setF(ofpwire.XMTypeReg0, 0xff), move, out(2)},
			[]actions.Action{{Kind: actions.SetIPTOS, Val8: 0xfc, Mask8: 0xfc}, dpOut(2)}},
		{"load ECN bits only", []ofpwire.Action{&ofpwire.ActionSetField{Field: oxmM(ofpwire.XMTypeNwTOS, 3, 3)}, out(2)},
			[]actions.Action{{Kind: actions.SetIPTOS, Val8: 0, Mask8: 0xfc}, dpOut(2)}},
		{"set_field 184", []ofpwire.Action{setF(ofpwire.XMTypeNwTOS, 184), out(2)},
			[]actions.Action{{Kind: actions.SetIPTOS, Val8: 184, Mask8: 0xfc}, dpOut(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := CheckActions(c.acts, false); err != nil {
				t.Fatal(err)
			}
			p := build(t, []flowSpec{{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800)}, ins(apply(c.acts...))}})
			var res datapath.UpcallResult
			if err := Translate(p, &k, &res, Options{}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Actions, c.want) {
				t.Fatalf("actions %v, want %v", res.Actions, c.want)
			}
		})
	}
	for _, f := range []ofpwire.XMType{ofpwire.XMTypeDPHash, ofpwire.XMTypeRecircID} {
		if CheckActions([]ofpwire.Action{setF(f, 1)}, false) == nil {
			t.Errorf("set-field on %v accepted", f)
		}
		if CheckActions([]ofpwire.Action{&ofpwire.ActionRegMove{Src: ofpwire.XMTypeReg0, Dst: f, NBits: 8}}, false) == nil {
			t.Errorf("move into %v accepted", f)
		}
		if err := CheckActions([]ofpwire.Action{&ofpwire.ActionRegMove{Src: f, Dst: ofpwire.XMTypeReg0, NBits: 8}}, false); err != nil {
			t.Errorf("move from %v: %v", f, err)
		}
	}
}

package xlate

import (
	"errors"
	"slices"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

func bkt(acts ...ofpwire.Action) ofpwire.Bucket {
	return ofpwire.Bucket{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny, Actions: acts}
}

func addGroup(t *testing.T, gt *pipeline.GroupTable, id ofpwire.Group, typ ofpwire.GroupType, bs ...ofpwire.Bucket) {
	t.Helper()
	if typ == ofpwire.GroupTypeSelect {
		for i := range bs {
			bs[i].Weight = 1
		}
	}
	if _, err := gt.ApplyGroupMod(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: typ, GroupID: id, Buckets: bs}, t0); err != nil {
		t.Fatalf("add group %d: %v", id, err)
	}
}

func grp(id ofpwire.Group) *ofpwire.ActionGroup { return &ofpwire.ActionGroup{Group: id} }

func translateGroups(t *testing.T, is []ofpwire.Instruction, gt *pipeline.GroupTable, k flow.Key, live func(uint32) bool) datapath.UpcallResult {
	t.Helper()
	p := build(t, []flowSpec{{prio: 0, ins: is}})
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, Options{Groups: gt, PortLive: live}); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestGroupAllClonesPerBucket(t *testing.T) {
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 1, ofpwire.GroupTypeAll,
		bkt(setF(ofpwire.XMTypeIPv4Dst, 0x0b000001), out(2)),
		bkt(setF(ofpwire.XMTypeTCPDst, 8080), out(3)),
		bkt(out(4)))
	key := ipv4Key()
	for _, viaSet := range []bool{false, true} {
		is := ins(apply(grp(1), out(5)))
		if viaSet {
			is = ins(write(grp(1), out(6)))
		}
		res := translateGroups(t, is, gt, key, nil)
		obs, _ := runDatapath(t, res.Actions, key)
		a := key
		a.IPv4Dst = 0x0b000001
		b := key
		b.TpDst = 8080
		want := []observed{{2, a}, {3, b}, {4, key}}
		if !viaSet {
			want = append(want, observed{5, key}) // after the group: unchanged
		}
		if !slices.Equal(obs, want) {
			t.Fatalf("viaSet=%v: outputs %+v, want %+v (actions %v)", viaSet, obs, want, res.Actions)
		}
		// The restored values come from the packet: in the mask.
		if !viaSet && (res.Mask.IPv4Dst != ^uint32(0) || res.Mask.TpDst != 0xffff) {
			t.Fatalf("restored fields not masked: %+v", res.Mask)
		}
		if viaSet && res.Mask.TpDst != 0xffff {
			t.Fatalf("viaSet: restore of tp_dst before bucket 3 needs it masked: %+v", res.Mask)
		}
	}
}

func TestGroupAllVLANPushPopUndone(t *testing.T) {
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 1, ofpwire.GroupTypeAll,
		bkt(&ofpwire.ActionPushVLAN{EtherType: 0x8100}, setF(ofpwire.XMTypeVlanID, 0x1000|7), out(2)),
		bkt(&ofpwire.ActionPopVLAN{}, out(3)),
		bkt(setF(ofpwire.XMTypeVlanID, 0x1000|9), out(4)))
	key := ipv4Key()
	key.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: 0x2005}
	res := translateGroups(t, ins(apply(grp(1), out(5))), gt, key, nil)
	obs, final := runDatapath(t, res.Actions, key)
	if len(obs) != 4 || final != key {
		t.Fatalf("outputs %+v final %+v (actions %v)", obs, final, res.Actions)
	}
	if v := obs[0].key.VLAN; v[0].TCI != 0x2007 || v[1] != key.VLAN[0] {
		t.Fatalf("bucket 1 saw %+v", v)
	}
	if obs[1].key.VLAN[0].TPID != 0 {
		t.Fatalf("bucket 2 saw a tag %+v", obs[1].key.VLAN)
	}
	if obs[2].key.VLAN[0].TCI != 0x2009 {
		t.Fatalf("bucket 3 saw %+v", obs[2].key.VLAN)
	}
	if obs[3].key != key {
		t.Fatalf("after group %+v", obs[3].key)
	}
}

func TestGroupIndirectAndUnknown(t *testing.T) {
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 7, ofpwire.GroupTypeIndirect, bkt(out(3)))
	res := translateGroups(t, ins(apply(grp(7))), gt, ipv4Key(), nil)
	if want := (actions.List{dpOut(3)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("indirect: %v", res.Actions)
	}
	res = translateGroups(t, ins(apply(grp(8), out(4))), gt, ipv4Key(), nil)
	if want := (actions.List{dpOut(4)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("unknown group should drop (only the later output stays): %v", res.Actions)
	}
	p := build(t, []flowSpec{{prio: 0, ins: ins(apply(grp(7)))}})
	k := ipv4Key()
	var r datapath.UpcallResult
	if err := Translate(p, &k, &r, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("no group table: %v", err)
	}
}

func TestGroupFastFailover(t *testing.T) {
	gt := pipeline.NewGroupTable()
	w := func(port uint32, out_ uint32) ofpwire.Bucket {
		b := bkt(out(out_))
		b.WatchPort = ofpwire.PortNo(port)
		return b
	}
	addGroup(t, gt, 1, ofpwire.GroupTypeFastFailover, w(2, 2), w(3, 3))
	down := map[uint32]bool{}
	live := func(p uint32) bool { return !down[p] }
	res := translateGroups(t, ins(apply(grp(1))), gt, ipv4Key(), live)
	if want := (actions.List{dpOut(2)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("all live: %v", res.Actions)
	}
	var onlyInPort flow.Mask
	onlyInPort.InPort = ^uint32(0)
	if res.Mask != onlyInPort {
		t.Fatalf("fast failover added to the mask: %+v", res.Mask)
	}
	down[2] = true
	res = translateGroups(t, ins(apply(grp(1))), gt, ipv4Key(), live)
	if want := (actions.List{dpOut(3)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("port 2 down: %v", res.Actions)
	}
	down[3] = true
	res = translateGroups(t, ins(apply(grp(1))), gt, ipv4Key(), live)
	if len(res.Actions) != 0 {
		t.Fatalf("nothing live: %v", res.Actions)
	}
}

func TestGroupSelectHashesFiveTuple(t *testing.T) {
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 1, ofpwire.GroupTypeSelect, bkt(out(2)), bkt(out(3)), bkt(out(4)))
	seen := map[uint32]int{}
	for sp := uint16(1000); sp < 1100; sp++ {
		k := ipv4Key()
		k.TpSrc = sp
		res := translateGroups(t, ins(apply(grp(1))), gt, k, nil)
		if len(res.Actions) != 1 || res.Actions[0].Kind != actions.Output {
			t.Fatalf("select: %v", res.Actions)
		}
		again := translateGroups(t, ins(apply(grp(1))), gt, k, nil)
		if !slices.Equal(res.Actions, again.Actions) {
			t.Fatal("same flow picked different buckets")
		}
		seen[res.Actions[0].Port]++
		m := res.Mask
		if m.EthType != 0xffff || m.NwProto != 0xff || m.IPv4Src != ^uint32(0) || m.IPv4Dst != ^uint32(0) ||
			m.TpSrc != 0xffff || m.TpDst != 0xffff {
			t.Fatalf("5-tuple not in mask: %+v", m)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("100 flows used buckets %v, want all three", seen)
	}
}

func TestGroupChainedUndoesAcrossLevels(t *testing.T) {
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 1, ofpwire.GroupTypeIndirect, bkt(setF(ofpwire.XMTypeTCPDst, 443), out(3)))
	addGroup(t, gt, 2, ofpwire.GroupTypeAll,
		bkt(setF(ofpwire.XMTypeIPv4Dst, 0x0b000001), grp(1), out(5)),
		bkt(out(4)))
	key := ipv4Key()
	res := translateGroups(t, ins(apply(grp(2))), gt, key, nil)
	obs, final := runDatapath(t, res.Actions, key)
	a := key
	a.IPv4Dst = 0x0b000001
	nested := a
	nested.TpDst = 443
	want := []observed{{3, nested}, {5, a}, {4, key}}
	if !slices.Equal(obs, want) || final != key {
		t.Fatalf("outputs %+v final %+v, want %+v (actions %v)", obs, final, want, res.Actions)
	}
}

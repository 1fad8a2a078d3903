package ofproto

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Groups from OpenFlow 1.3.5 §5.6: ALL runs every bucket on its own copy
// of the packet; SELECT runs one, chosen by a switch-computed selection
// (here a flow hash) that weighs the buckets; INDIRECT runs its one
// bucket; FAST_FAILOVER the first live one. Installed through the
// OpenFlow channel, checked with frames through the datapath.

// groupBridge is a test bridge with a third ring port.
func groupBridge(t *testing.T) (*testBridge, *ring.Port) {
	tb := newTestBridge(t)
	p3 := ring.New("r3", 1, 1, 4096)
	if _, err := tb.dp.AddPort(3, p3); err != nil {
		t.Fatal(err)
	}
	return tb, p3
}

func groupFlow(g ofpwire.Group) *ofpwire.FlowMod {
	return flowIn(0, 100, 1, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: g}}})
}

// §5.6.1 ALL: each bucket gets a copy; one bucket's rewrite does not
// reach another's.
func TestConformanceGroupAllCopies(t *testing.T) {
	tb, p3 := groupBridge(t)
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{
		bucketOut(2, &ofpwire.ActionPushVLAN{EtherType: 0x8100}, setField(ofpwire.OXMUint(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent)|7))),
		bucketOut(3),
	}})
	tb.mustRequest(t, groupFlow(1))
	got2 := tb.forward(tb.p1, tb.p2, frame())
	var got3 [][]byte
	p3.Drain(0, func(f []byte) { got3 = append(got3, f) })
	if len(got2) != 1 || len(got3) != 1 {
		t.Fatalf("%d and %d copies out of ports 2 and 3, want one each", len(got2), len(got3))
	}
	q := gopacket.NewPacket(got2[0], layers.LayerTypeEthernet, gopacket.Default).Layer(layers.LayerTypeDot1Q)
	if q == nil || q.(*layers.Dot1Q).VLANIdentifier != 7 {
		t.Fatalf("port 2's copy %x, want VLAN 7", got2[0])
	}
	if string(got3[0]) != string(frame()) {
		t.Fatalf("port 3's copy %x, want the packet untouched", got3[0])
	}
}

// §5.6.1 SELECT: over 2000 flows, weights 1:3 give the buckets 25% and
// 75% of the flows within 4 points; a flow always takes the same bucket.
func TestConformanceGroupSelectWeights(t *testing.T) {
	tb, p3 := groupBridge(t)
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeSelect, GroupID: 2,
		Buckets: []ofpwire.Bucket{selectBucket(1, 2), selectBucket(3, 3)}})
	tb.mustRequest(t, groupFlow(2))
	const n = 2000
	var on2, on3 int
	for i := range n {
		f := nstestUDP(uint16(10000+i), uint16(20000+i*7))
		for range 2 { // the same flow twice: the same bucket
			tb.p1.Inject(0, f)
			tb.dp.PMDs()[0].PollOnce()
			tb.dp.PMDs()[0].PollOnce()
		}
		a, b := tb.p2.Discard(0), p3.Discard(0)
		switch {
		case a == 2 && b == 0:
			on2++
		case a == 0 && b == 2:
			on3++
		default:
			t.Fatalf("flow %d: %d packets out of port 2 and %d out of 3, want both on one", i, a, b)
		}
	}
	if s := float64(on2) / n; s < 0.21 || s > 0.29 {
		t.Fatalf("weight 1 of 4 took %.3f of the flows (%d/%d), want 0.25±0.04", s, on2, on3)
	}
	g := tb.c.multipart(&ofpwire.GroupStatsRequest{Group: 2}).(*ofpwire.GroupStatsReply).Groups[0]
	if g.PacketCount != 2*n || g.BucketStats[0].PacketCount != uint64(2*on2) || g.BucketStats[1].PacketCount != uint64(2*on3) {
		t.Fatalf("group stats %+v, want %d packets, %d and %d per bucket", g, 2*n, 2*on2, 2*on3)
	}
}

// §5.6.1 FAST_FAILOVER: the first bucket whose watched port is live; a
// port brought down by PORT_MOD (OFPPC_PORT_DOWN) is not live.
func TestConformanceGroupFastFailover(t *testing.T) {
	tb, p3 := groupBridge(t)
	ff := func(watch, out ofpwire.PortNo) ofpwire.Bucket {
		b := bucketOut(out)
		b.WatchPort = watch
		return b
	}
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeFastFailover, GroupID: 3,
		Buckets: []ofpwire.Bucket{ff(2, 2), ff(3, 3)}})
	tb.mustRequest(t, groupFlow(3))
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 1 {
		t.Fatalf("%d frames out of port 2 while it is live, want 1", len(got))
	}
	pd := tb.portDesc(2)
	tb.mustRequest(t, &ofpwire.PortMod{PortNo: 2, HWAddr: pd.HWAddr, Config: ofpwire.PortConfigDown, Mask: ofpwire.PortConfigDown})
	tb.forward(tb.p1, tb.p2, frame())
	if n := p3.Discard(0); n != 1 {
		t.Fatalf("%d frames out of port 3 with port 2 down, want 1", n)
	}
}

// §6.7: group mod errors through the channel.
func TestConformanceGroupModErrors(t *testing.T) {
	tb, _ := groupBridge(t)
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{bucketOut(2)}})
	grp := func(g ofpwire.Group) ofpwire.Bucket {
		return ofpwire.Bucket{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny, Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: g}}}
	}
	for _, c := range []struct {
		name string
		gm   ofpwire.GroupMod
		typ  uint16
		code uint16
	}{
		{"exists", ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1}, ofpwire.ETGroupModFailed, ofpwire.GMFCGroupExists},
		{"modify unknown", ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeAll, GroupID: 2}, ofpwire.ETGroupModFailed, ofpwire.GMFCUnknownGroup},
		{"id ALL", ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: ofpwire.GroupAll}, ofpwire.ETGroupModFailed, ofpwire.GMFCInvalidGroup},
		{"bad type", ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: 7, GroupID: 2}, ofpwire.ETGroupModFailed, ofpwire.GMFCBadType},
		{"indirect with 2 buckets", ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 2,
			Buckets: []ofpwire.Bucket{bucketOut(2), bucketOut(3)}}, ofpwire.ETGroupModFailed, ofpwire.GMFCInvalidGroup},
		{"ff without watch", ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeFastFailover, GroupID: 2,
			Buckets: []ofpwire.Bucket{bucketOut(2)}}, ofpwire.ETGroupModFailed, ofpwire.GMFCBadWatch},
		{"to an unknown group", ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 2,
			Buckets: []ofpwire.Bucket{grp(77)}}, ofpwire.ETBadAction, ofpwire.BACBadOutGroup},
		{"loop", ofpwire.GroupMod{Command: ofpwire.GroupModify, Type: ofpwire.GroupTypeAll, GroupID: 1,
			Buckets: []ofpwire.Bucket{grp(1)}}, ofpwire.ETGroupModFailed, ofpwire.GMFCLoop},
	} {
		gm := c.gm
		tb.c.wantError(&gm, c.typ, c.code)
	}
	// A flow to a group that does not exist (§6.4).
	tb.c.wantError(groupFlow(9), ofpwire.ETBadAction, ofpwire.BACBadOutGroup)
	// Deleting a group removes the flows that forward to it (§6.7).
	tb.mustRequest(t, groupFlow(1))
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 1})
	if fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply); len(fs.Flows) != 0 {
		t.Fatalf("%d flows left after deleting their group", len(fs.Flows))
	}
}

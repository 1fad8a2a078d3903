package ofproto

import (
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func bucketOut(port ofpwire.PortNo, acts ...ofpwire.Action) ofpwire.Bucket {
	return ofpwire.Bucket{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny,
		Actions: append(acts, &ofpwire.ActionOutput{Port: port})}
}

func TestGroupModForwardsAndDeleteRemovesFlows(t *testing.T) {
	tb := newTestBridge(t)
	// A flow naming a group that does not exist is refused.
	tb.c.wantError(outputFlow(1, &ofpwire.ActionGroup{Group: 1}), ofpwire.ETBadAction, ofpwire.BACBadOutGroup)

	gm := &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{
		bucketOut(2),
		bucketOut(2, &ofpwire.ActionSetField{Field: ofpwire.OXMUint(ofpwire.XMTypeUDPDst, 9999)}),
	}}
	if r := tb.c.request(gm); len(r) != 0 {
		t.Fatalf("group-mod replies %#v", r)
	}
	if r := tb.c.request(outputFlow(1, &ofpwire.ActionGroup{Group: 1})); len(r) != 0 {
		t.Fatalf("flow-mod replies %#v", r)
	}
	got := tb.forward(tb.p1, tb.p2, frame())
	if len(got) != 2 {
		t.Fatalf("ALL group with two buckets sent %d frames", len(got))
	}
	if string(got[0]) != string(frame()) || string(got[1]) == string(frame()) {
		t.Fatal("first bucket should send the frame unchanged, the second rewritten")
	}

	tb.c.send(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 1})
	_, m := tb.c.recv()
	if fr, ok := m.(*ofpwire.FlowRemoved); !ok || fr.Reason != ofpwire.FlowReasonGroupDelete {
		t.Fatalf("after group delete got %#v, want FLOW_REMOVED (group delete)", m)
	}
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatalf("deleted group still forwards %d frames", len(got))
	}
	fs := tb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}).(*ofpwire.FlowStatsReply)
	if len(fs.Flows) != 0 {
		t.Fatalf("flows left: %+v", fs.Flows)
	}
}

func TestGroupMultiparts(t *testing.T) {
	tb := newTestBridge(t)
	gm := &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 5,
		Buckets: []ofpwire.Bucket{bucketOut(2)}}
	if r := tb.c.request(gm); len(r) != 0 {
		t.Fatalf("group-mod replies %#v", r)
	}
	desc := tb.c.multipart(&ofpwire.GroupDescRequest{}).(*ofpwire.GroupDescReply)
	if len(desc.Groups) != 1 || desc.Groups[0].GroupID != 5 || desc.Groups[0].Type != ofpwire.GroupTypeIndirect ||
		len(desc.Groups[0].Buckets) != 1 {
		t.Fatalf("group desc %+v", desc.Groups)
	}
	st := tb.c.multipart(&ofpwire.GroupStatsRequest{Group: ofpwire.GroupAll}).(*ofpwire.GroupStatsReply)
	if len(st.Groups) != 1 || st.Groups[0].GroupID != 5 || len(st.Groups[0].BucketStats) != 1 {
		t.Fatalf("group stats %+v", st.Groups)
	}
	st = tb.c.multipart(&ofpwire.GroupStatsRequest{Group: 6}).(*ofpwire.GroupStatsReply)
	if len(st.Groups) != 0 {
		t.Fatalf("stats of unknown group %+v", st.Groups)
	}
	f := tb.c.multipart(&ofpwire.GroupFeaturesRequest{}).(*ofpwire.GroupFeaturesReply)
	if f.Types&(1<<uint(ofpwire.GroupTypeFastFailover)) == 0 || f.MaxGroups[0] == 0 {
		t.Fatalf("group features %+v", f)
	}
	// A bad group-mod is refused with the table's error.
	tb.c.wantError(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 5,
		Buckets: []ofpwire.Bucket{bucketOut(2)}}, ofpwire.ETGroupModFailed, ofpwire.GMFCGroupExists)
}

func TestMeterModAndMultiparts(t *testing.T) {
	tb := newTestBridge(t)
	mm := &ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: ofpwire.MeterFlagKBitPerSec, MeterID: 3,
		Bands: []ofpwire.MeterBand{{Type: ofpwire.MeterBandTypeDrop, Rate: 1000}}}
	if r := tb.c.request(mm); len(r) != 0 {
		t.Fatalf("meter-mod replies %#v", r)
	}
	cfg := tb.c.multipart(&ofpwire.MeterConfigRequest{Meter: ofpwire.MeterAll}).(*ofpwire.MeterConfigReply)
	if len(cfg.Meters) != 1 || cfg.Meters[0].MeterID != 3 || len(cfg.Meters[0].Bands) != 1 ||
		cfg.Meters[0].Bands[0].Rate != 1000 {
		t.Fatalf("meter config %+v", cfg.Meters)
	}
	st := tb.c.multipart(&ofpwire.MeterStatsRequest{Meter: 3}).(*ofpwire.MeterStatsReply)
	if len(st.Meters) != 1 || st.Meters[0].MeterID != 3 {
		t.Fatalf("meter stats %+v", st.Meters)
	}
	f := tb.c.multipart(&ofpwire.MeterFeaturesRequest{}).(*ofpwire.MeterFeaturesReply)
	if f.MaxMeter == 0 || f.BandTypes&(1<<uint(ofpwire.MeterBandTypeDrop)) == 0 {
		t.Fatalf("meter features %+v", f)
	}
	tb.c.wantError(mm, ofpwire.ETMeterModFailed, ofpwire.MMFCMeterExists)
	if r := tb.c.request(&ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: 3}); len(r) != 0 {
		t.Fatalf("meter delete replies %#v", r)
	}
	cfg = tb.c.multipart(&ofpwire.MeterConfigRequest{Meter: ofpwire.MeterAll}).(*ofpwire.MeterConfigReply)
	if len(cfg.Meters) != 0 {
		t.Fatalf("meters after delete %+v", cfg.Meters)
	}
}

// TestGroupCounters: the traffic of megaflows that run through a group
// lands in the group's and the chosen buckets' counters.
func TestGroupCounters(t *testing.T) {
	tb := newTestBridge(t)
	gm := &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 9,
		Buckets: []ofpwire.Bucket{bucketOut(2), bucketOut(2)}}
	if r := tb.c.request(gm); len(r) != 0 {
		t.Fatalf("group-mod replies %#v", r)
	}
	if r := tb.c.request(outputFlow(1, &ofpwire.ActionGroup{Group: 9})); len(r) != 0 {
		t.Fatalf("flow-mod replies %#v", r)
	}
	f := frame()
	for i := 0; i < 3; i++ {
		if got := tb.forward(tb.p1, tb.p2, f); len(got) != 2 {
			t.Fatalf("packet %d: %d copies out, want 2", i, len(got))
		}
	}
	st := tb.c.multipart(&ofpwire.GroupStatsRequest{Group: 9}).(*ofpwire.GroupStatsReply)
	if len(st.Groups) != 1 {
		t.Fatalf("group stats %+v", st.Groups)
	}
	g := st.Groups[0]
	if g.PacketCount != 3 || g.ByteCount != 3*uint64(len(f)) || g.RefCount != 1 {
		t.Fatalf("group counters %+v, want 3 packets, %d bytes, 1 ref", g, 3*len(f))
	}
	for i, b := range g.BucketStats {
		if b.PacketCount != 3 || b.ByteCount != 3*uint64(len(f)) {
			t.Fatalf("bucket %d counters %+v", i, b)
		}
	}
}

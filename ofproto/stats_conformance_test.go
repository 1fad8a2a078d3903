package ofproto

import (
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// One test per statistic OpenFlow 1.3 §7.3.5 defines, checked against the
// definition's words with real packets through the datapath.

func allFlows() *ofpwire.FlowStatsRequest {
	return &ofpwire.FlowStatsRequest{TableID: uint8(ofp.TableAll), OutPort: ofp.PortAny, OutGroup: ofp.GroupAny}
}

func flowIn(table uint8, prio uint16, inPort uint32, ins ...ofpwire.Instruction) *ofpwire.FlowMod {
	fm := &ofpwire.FlowMod{Command: ofp.FlowAdd, TableID: table, Priority: prio, BufferID: ofp.NoBuffer,
		OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Instructions: ins}
	if inPort != 0 {
		fm.Match.Add(ofpwire.OXMUint(ofp.XMTypeInPort, uint64(inPort)))
	}
	return fm
}

func applyOut(port ofp.PortNo) *ofpwire.InstrApplyActions {
	return &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: port}}}
}

func (tb *testBridge) mustRequest(t *testing.T, m ofpwire.Message) {
	t.Helper()
	if r := tb.c.request(m); len(r) != 0 {
		t.Fatalf("%T replies %#v", m, r)
	}
}

func (tb *testBridge) tableStats(t *testing.T, table int) ofp.TableStats {
	t.Helper()
	ts := tb.c.multipart(&ofpwire.TableStatsRequest{}).(*ofpwire.TableStatsReply)
	return ts.Tables[table]
}

// §7.3.5.4 ofp_table_stats: lookup_count "number of packets looked up in
// table", matched_count "number of packets that hit table". A packet that
// only meets the table-miss entry (§5.4: "a table miss") missed.
func TestStatTableLookupAndMatchedCount(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2)))
	tb.mustRequest(t, flowIn(0, 0, 0, applyOut(1))) // table-miss entry
	for range 3 {
		tb.forward(tb.p1, tb.p2, frame()) // hit
	}
	for range 2 {
		tb.forward(tb.p2, tb.p1, frame()) // table miss: the table-miss entry
	}
	if s := tb.tableStats(t, 0); s.LookupCount != 5 || s.MatchedCount != 3 {
		t.Fatalf("table 0 lookup %d matched %d, want 5 and 3", s.LookupCount, s.MatchedCount)
	}
	// A miss without a table-miss entry is looked up and dropped (§5.4).
	tb.mustRequest(t, &ofpwire.FlowMod{Command: ofp.FlowDeleteStrict, TableID: 0, Priority: 0, BufferID: ofp.NoBuffer,
		OutPort: ofp.PortAny, OutGroup: ofp.GroupAny})
	tb.forward(tb.p2, tb.p1, frame())
	if s := tb.tableStats(t, 0); s.LookupCount != 6 || s.MatchedCount != 3 {
		t.Fatalf("table 0 lookup %d matched %d after a plain miss, want 6 and 3", s.LookupCount, s.MatchedCount)
	}
	// Tables the packet never reaches are not looked up.
	if s := tb.tableStats(t, 1); s.LookupCount != 0 || s.MatchedCount != 0 {
		t.Fatalf("table 1 %+v, never reached", s)
	}
}

// lookup_count follows goto-table: each table the packet visits counts it.
func TestStatTableLookupCountAlongGotoTable(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 10, 1, &ofpwire.InstrGotoTable{TableID: 3}))
	tb.mustRequest(t, flowIn(3, 10, 1, applyOut(2)))
	for range 4 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	for _, tbl := range []int{0, 3} {
		if s := tb.tableStats(t, tbl); s.LookupCount != 4 || s.MatchedCount != 4 {
			t.Fatalf("table %d lookup %d matched %d, want 4 and 4", tbl, s.LookupCount, s.MatchedCount)
		}
	}
	if s := tb.tableStats(t, 1); s.LookupCount != 0 {
		t.Fatalf("table 1, skipped by goto, looked up %d times", s.LookupCount)
	}
}

// active_count: "number of active entries".
func TestStatTableActiveCount(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(2, 10, 1, applyOut(2)))
	tb.mustRequest(t, flowIn(2, 20, 2, applyOut(1)))
	if s := tb.tableStats(t, 2); s.ActiveCount != 2 {
		t.Fatalf("active_count %d, want 2", s.ActiveCount)
	}
	if s := tb.tableStats(t, 0); s.ActiveCount != 0 {
		t.Fatalf("table 0 active_count %d, want 0", s.ActiveCount)
	}
}

// §7.3.5.2 ofp_flow_stats packet_count / byte_count: packets and bytes
// that matched the entry.
func TestStatFlowPacketAndByteCount(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2)))
	for range 5 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	tb.forward(tb.p2, tb.p1, frame()) // matches nothing
	fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply)
	if len(fs.Flows) != 1 || fs.Flows[0].PacketCount != 5 || fs.Flows[0].ByteCount != 5*uint64(len(frame())) {
		t.Fatalf("flow stats %+v, want 5 packets of %d bytes", fs.Flows, len(frame()))
	}
}

// duration_sec/nsec: "time flow has been alive"; it only grows.
func TestStatFlowDuration(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2)))
	a := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply).Flows[0]
	b := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply).Flows[0]
	da := uint64(a.DurationSec)*1e9 + uint64(a.DurationNSec)
	db := uint64(b.DurationSec)*1e9 + uint64(b.DurationNSec)
	if a.DurationNSec >= 1e9 || db < da {
		t.Fatalf("durations %d.%09d then %d.%09d", a.DurationSec, a.DurationNSec, b.DurationSec, b.DurationNSec)
	}
}

// §7.3.5.3 ofp_aggregate_stats_reply: packet_count, byte_count, flow_count
// over the selected flows.
func TestStatAggregate(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2)))
	tb.mustRequest(t, flowIn(0, 100, 2, applyOut(1)))
	for range 3 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	tb.forward(tb.p2, tb.p1, frame())
	agg := tb.c.multipart(&ofpwire.AggregateStatsRequest{TableID: uint8(ofp.TableAll), OutPort: ofp.PortAny, OutGroup: ofp.GroupAny}).(*ofpwire.AggregateStatsReply)
	if agg.FlowCount != 2 || agg.PacketCount != 4 || agg.ByteCount != 4*uint64(len(frame())) {
		t.Fatalf("aggregate %+v", agg)
	}
	agg = tb.c.multipart(&ofpwire.AggregateStatsRequest{TableID: uint8(ofp.TableAll), OutPort: 1, OutGroup: ofp.GroupAny}).(*ofpwire.AggregateStatsReply)
	if agg.FlowCount != 1 || agg.PacketCount != 1 {
		t.Fatalf("aggregate out_port=1 %+v", agg)
	}
}

// §7.3.5.6 ofp_port_stats: rx/tx packets and bytes as received and
// transmitted; duration "time port has been alive".
func TestStatPortCounters(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2)))
	for range 3 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	ps := tb.c.multipart(&ofpwire.PortStatsRequest{PortNo: ofp.PortAny}).(*ofpwire.PortStatsReply)
	by := map[ofp.PortNo]ofp.PortStats{}
	for _, p := range ps.Ports {
		by[p.PortNo] = p
	}
	n := uint64(len(frame()))
	if p := by[1]; p.RxPackets != 3 || p.RxBytes != 3*n || p.TxPackets != 0 {
		t.Fatalf("port 1 %+v, want 3 packets received", p)
	}
	if p := by[2]; p.TxPackets != 3 || p.TxBytes != 3*n || p.RxPackets != 0 {
		t.Fatalf("port 2 %+v, want 3 packets sent", p)
	}
	if p := by[1]; p.DurationNSec >= 1e9 {
		t.Fatalf("port duration nsec %d", p.DurationNSec)
	}
	// A port that does not exist: OFPBRC_BAD_PORT.
	tb.c.wantError(&ofpwire.MultipartRequest{Body: &ofpwire.PortStatsRequest{PortNo: 77}}, ofpwire.ETBadRequest, ofpwire.BRCBadPort)
}

// §7.3.5.9 ofp_group_stats: ref_count "number of flows or groups that
// directly forward to this group", packet/byte counts of the group and of
// each bucket.
func TestStatGroupCounters(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofp.GroupAdd, Type: ofp.GroupTypeAll, GroupID: 1,
		Buckets: []ofpwire.Bucket{bucketOut(2), bucketOut(2)}})
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofp.GroupAdd, Type: ofp.GroupTypeIndirect, GroupID: 2,
		Buckets: []ofpwire.Bucket{{WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 1}}}}})
	tb.mustRequest(t, flowIn(0, 100, 1, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 1}}}))
	tb.mustRequest(t, flowIn(0, 100, 2, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 2}}}))
	for range 3 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	st := tb.c.multipart(&ofpwire.GroupStatsRequest{Group: 1}).(*ofpwire.GroupStatsReply)
	if len(st.Groups) != 1 {
		t.Fatalf("group stats %+v", st.Groups)
	}
	g := st.Groups[0]
	n := uint64(len(frame()))
	// Flow in_port=1 and group 2's bucket forward to group 1.
	if g.RefCount != 2 {
		t.Errorf("ref_count %d, want 2 (a flow and a group)", g.RefCount)
	}
	if g.PacketCount != 3 || g.ByteCount != 3*n {
		t.Errorf("group packet_count %d byte_count %d, want 3 and %d", g.PacketCount, g.ByteCount, 3*n)
	}
	if len(g.BucketStats) != 2 || g.BucketStats[0].PacketCount != 3 || g.BucketStats[1].ByteCount != 3*n {
		t.Errorf("bucket stats %+v, want 3 packets each (type all)", g.BucketStats)
	}
	if g.DurationNSec >= 1e9 {
		t.Errorf("duration nsec %d", g.DurationNSec)
	}
}

// §7.3.5.12 ofp_meter_stats: flow_count "number of flows bound to meter",
// packet_in_count / byte_in_count "packets/bytes in input", per band the
// packets and bytes the band processed.
func TestStatMeterCounters(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, &ofpwire.MeterMod{Command: ofp.MeterAdd, Flags: ofp.MeterFlagPacketPerSec | ofp.MeterFlagBurst, MeterID: 4,
		Bands: []ofpwire.MeterBand{{Type: ofp.MeterBandTypeDrop, Rate: 1, BurstSize: 2}}})
	tb.mustRequest(t, flowIn(0, 100, 1, &ofpwire.InstrMeter{MeterID: 4}, applyOut(2)))
	for range 10 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	st := tb.c.multipart(&ofpwire.MeterStatsRequest{Meter: 4}).(*ofpwire.MeterStatsReply)
	if len(st.Meters) != 1 {
		t.Fatalf("meter stats %+v", st.Meters)
	}
	m := st.Meters[0]
	n := uint64(len(frame()))
	if m.FlowCount != 1 || m.PacketInCount != 10 || m.ByteInCount != 10*n {
		t.Fatalf("meter %+v, want 1 flow, 10 packets in", m)
	}
	// The band drops what exceeds a 2-packet burst at 1 pktps: at least 7
	// of the 10 (a slow run may refill a token or so).
	if len(m.BandStats) != 1 || m.BandStats[0].PacketBandCount < 7 || m.BandStats[0].PacketBandCount > 8 ||
		m.BandStats[0].ByteBandCount != m.BandStats[0].PacketBandCount*n {
		t.Fatalf("band stats %+v", m.BandStats)
	}
}

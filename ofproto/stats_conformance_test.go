package ofproto

import (
	"net"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// One test per statistic OpenFlow 1.3 §7.3.5 defines, checked against the
// definition's words with real packets through the datapath.

func allFlows() *ofpwire.FlowStatsRequest {
	return &ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
}

func flowIn(table uint8, prio uint16, inPort uint32, ins ...ofpwire.Instruction) *ofpwire.FlowMod {
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: table, Priority: prio, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny, Instructions: ins}
	if inPort != 0 {
		fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(inPort)))
	}
	return fm
}

func applyOut(port ofpwire.PortNo) *ofpwire.InstrApplyActions {
	return &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: port}}}
}

func (tb *testBridge) mustRequest(t *testing.T, m ofpwire.Message) {
	t.Helper()
	if r := tb.c.request(m); len(r) != 0 {
		t.Fatalf("%T replies %#v", m, r)
	}
}

func (tb *testBridge) tableStats(t *testing.T, table int) ofpwire.TableStats {
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
	tb.mustRequest(t, &ofpwire.FlowMod{Command: ofpwire.FlowDeleteStrict, TableID: 0, Priority: 0, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
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
	agg := tb.c.multipart(&ofpwire.AggregateStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}).(*ofpwire.AggregateStatsReply)
	if agg.FlowCount != 2 || agg.PacketCount != 4 || agg.ByteCount != 4*uint64(len(frame())) {
		t.Fatalf("aggregate %+v", agg)
	}
	agg = tb.c.multipart(&ofpwire.AggregateStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: 1, OutGroup: ofpwire.GroupAny}).(*ofpwire.AggregateStatsReply)
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
	ps := tb.c.multipart(&ofpwire.PortStatsRequest{PortNo: ofpwire.PortAny}).(*ofpwire.PortStatsReply)
	by := map[ofpwire.PortNo]ofpwire.PortStats{}
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
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1,
		Buckets: []ofpwire.Bucket{bucketOut(2), bucketOut(2)}})
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 2,
		Buckets: []ofpwire.Bucket{{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny, Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 1}}}}})
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
	tb.mustRequest(t, &ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: ofpwire.MeterFlagPacketPerSec | ofpwire.MeterFlagBurst, MeterID: 4,
		Bands: []ofpwire.MeterBand{{Type: ofpwire.MeterBandTypeDrop, Rate: 1, BurstSize: 2}}})
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

// §6.4: a MODIFY keeps the flow's counters unless OFPFF_RESET_COUNTS is
// set; an ADD over an identical flow (same match and priority) likewise.
func TestStatFlowCountersAcrossModify(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2)))
	for range 3 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	count := func() uint64 {
		t.Helper()
		fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply)
		if len(fs.Flows) != 1 {
			t.Fatalf("flows %+v", fs.Flows)
		}
		return fs.Flows[0].PacketCount
	}
	mod := flowIn(0, 100, 1, applyOut(2))
	mod.Command = ofpwire.FlowModifyStrict
	tb.mustRequest(t, mod)
	if n := count(); n != 3 {
		t.Fatalf("after MODIFY_STRICT: %d packets, want 3 kept", n)
	}
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2))) // ADD of the same flow
	if n := count(); n != 3 {
		t.Fatalf("after an identical ADD: %d packets, want 3 kept", n)
	}
	mod.Flags = ofpwire.FlowFlagResetCounts
	tb.mustRequest(t, mod)
	if n := count(); n != 0 {
		t.Fatalf("after MODIFY with RESET_COUNTS: %d packets, want 0", n)
	}
	tb.forward(tb.p1, tb.p2, frame())
	if n := count(); n != 1 {
		t.Fatalf("after one more packet: %d, want 1", n)
	}
}

// §7.3.5.2: the flow statistics request's cookie/cookie_mask and out_port
// select flows; active_count follows deletes.
func TestStatFlowSelection(t *testing.T) {
	tb := newTestBridge(t)
	a := flowIn(0, 100, 1, applyOut(2))
	a.Cookie = 0x1100
	b := flowIn(0, 100, 2, applyOut(1))
	b.Cookie = 0x2200
	tb.mustRequest(t, a)
	tb.mustRequest(t, b)
	req := allFlows()
	req.Cookie, req.CookieMask = 0x2000, 0xf000
	if fs := tb.c.multipart(req).(*ofpwire.FlowStatsReply); len(fs.Flows) != 1 || fs.Flows[0].Cookie != 0x2200 {
		t.Fatalf("cookie 0x2000/0xf000 selected %+v", fs.Flows)
	}
	req = allFlows()
	req.OutPort = 2
	if fs := tb.c.multipart(req).(*ofpwire.FlowStatsReply); len(fs.Flows) != 1 || fs.Flows[0].Cookie != 0x1100 {
		t.Fatalf("out_port 2 selected %+v", fs.Flows)
	}
	del := &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll), BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny, Cookie: 0x1100, CookieMask: 0xffff}
	tb.mustRequest(t, del)
	if s := tb.tableStats(t, 0); s.ActiveCount != 1 {
		t.Fatalf("active_count %d after deleting one of two, want 1", s.ActiveCount)
	}
}

// §7.3.5.6 tx_dropped: packets the port could not send. Port 2's ring
// holds 64 frames; 100 forwarded without draining it leave 36 dropped,
// and tx_packets + tx_dropped counts every one.
func TestStatPortTxDropped(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 100, 1, applyOut(2)))
	for range 100 {
		tb.p1.Inject(0, frame())
		tb.dp.PMDs()[0].PollOnce()
	}
	tb.dp.PMDs()[0].PollOnce()
	ps := tb.c.multipart(&ofpwire.PortStatsRequest{PortNo: 2}).(*ofpwire.PortStatsReply)
	if len(ps.Ports) != 1 {
		t.Fatalf("port stats %+v", ps.Ports)
	}
	p := ps.Ports[0]
	out := tb.p2.Drain(0, func([]byte) {})
	if p.TxPackets != uint64(out) || p.TxPackets+p.TxDropped != 100 || p.TxDropped == 0 {
		t.Fatalf("port 2 tx_packets %d tx_dropped %d, %d frames in its ring, 100 forwarded", p.TxPackets, p.TxDropped, out)
	}
	if p.TxErrors != 0 || p.RxErrors != 0 {
		t.Fatalf("errors %+v", p)
	}
}

// ref_count "number of flows or groups that directly forward to this
// group" follows flow deletes; a select group counts each packet once,
// in the group and in the one bucket that took it.
func TestStatGroupRefCountAndSelectBuckets(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeSelect, GroupID: 9,
		Buckets: []ofpwire.Bucket{selectBucket(1, 2), selectBucket(1, 2)}})
	grp := &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 9}}}
	tb.mustRequest(t, flowIn(0, 100, 1, grp))
	tb.mustRequest(t, flowIn(1, 100, 2, grp))
	stats := func() ofpwire.GroupStats {
		t.Helper()
		st := tb.c.multipart(&ofpwire.GroupStatsRequest{Group: 9}).(*ofpwire.GroupStatsReply)
		if len(st.Groups) != 1 {
			t.Fatalf("group stats %+v", st.Groups)
		}
		return st.Groups[0]
	}
	if g := stats(); g.RefCount != 2 {
		t.Fatalf("ref_count %d, want 2", g.RefCount)
	}
	const n = 64
	for i := range n {
		f := nstestUDP(uint16(1000+i), 2000)
		tb.forward(tb.p1, tb.p2, f)
	}
	g := stats()
	if g.PacketCount != n || len(g.BucketStats) != 2 ||
		g.BucketStats[0].PacketCount+g.BucketStats[1].PacketCount != n ||
		g.BucketStats[0].ByteCount+g.BucketStats[1].ByteCount != g.ByteCount {
		t.Fatalf("group %+v: want %d packets, split over the buckets", g, n)
	}
	if g.BucketStats[0].PacketCount == 0 || g.BucketStats[1].PacketCount == 0 {
		t.Errorf("buckets %+v: %d flows all took one bucket", g.BucketStats, n)
	}
	tb.mustRequest(t, &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: 1, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	if g := stats(); g.RefCount != 1 {
		t.Fatalf("ref_count %d after deleting one flow, want 1", g.RefCount)
	}
}

func selectBucket(weight uint16, port ofpwire.PortNo) ofpwire.Bucket {
	b := bucketOut(port)
	b.Weight = weight
	return b
}

// nstestUDP is frame() with other UDP ports: another flow.
func nstestUDP(sport, dport uint16) []byte {
	return nstest.UDPFrame(mac2, mac1, net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), sport, dport)
}

// §7.4.2 OFPT_FLOW_REMOVED: an entry with OFPFF_SEND_FLOW_REM that times
// out is reported with reason HARD_TIMEOUT, its cookie, priority, match,
// timeouts, counters and a duration of at least its timeout; one deleted
// by a flow-mod with reason DELETE.
func TestStatFlowRemoved(t *testing.T) {
	tb := newTestBridge(t)
	hard := flowIn(0, 100, 1, applyOut(2))
	hard.HardTimeout, hard.Cookie, hard.Flags = 1, 0xc0ffee, ofpwire.FlowFlagSendFlowRem
	tb.mustRequest(t, hard)
	for range 3 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	del := flowIn(0, 50, 2, applyOut(1))
	del.Cookie, del.Flags = 0xdead, ofpwire.FlowFlagSendFlowRem
	tb.mustRequest(t, del)
	tb.forward(tb.p2, tb.p1, frame())
	tb.c.send(&ofpwire.FlowMod{Command: ofpwire.FlowDeleteStrict, TableID: 0, Priority: 50, Match: del.Match,
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	got := map[uint64]*ofpwire.FlowRemoved{}
	for len(got) < 2 { // recv fails the test after 5 s without a message
		if _, m := tb.c.recv(); m != nil {
			if fr, ok := m.(*ofpwire.FlowRemoved); ok {
				got[fr.Cookie] = fr
			}
		}
	}
	h := got[0xc0ffee]
	if h == nil || h.Reason != ofpwire.FlowReasonHardTimeout || h.Priority != 100 || h.HardTimeout != 1 ||
		h.PacketCount != 3 || h.ByteCount != 3*uint64(len(frame())) || h.DurationSec < 1 || h.DurationNSec >= 1e9 {
		t.Fatalf("hard timeout FLOW_REMOVED %+v", h)
	}
	if p, ok := h.Match.Field(ofpwire.XMTypeInPort); !ok || p.Uint() != 1 {
		t.Fatalf("FLOW_REMOVED match %+v, want in_port=1", h.Match)
	}
	d := got[0xdead]
	if d == nil || d.Reason != ofpwire.FlowReasonDelete || d.PacketCount != 1 || d.Priority != 50 {
		t.Fatalf("delete FLOW_REMOVED %+v", d)
	}
}

// A flow removed with its group (§6.5: reason GROUP_DELETE) reports the
// packets it forwarded up to the delete.
func TestStatFlowRemovedByGroupDelete(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 4,
		Buckets: []ofpwire.Bucket{bucketOut(2)}})
	fm := flowIn(0, 100, 1, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 4}}})
	fm.Flags, fm.Cookie = ofpwire.FlowFlagSendFlowRem, 7
	tb.mustRequest(t, fm)
	for range 2 {
		tb.forward(tb.p1, tb.p2, frame())
	}
	tb.c.send(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 4})
	for {
		if _, m := tb.c.recv(); m != nil {
			if fr, ok := m.(*ofpwire.FlowRemoved); ok {
				if fr.Reason != ofpwire.FlowReasonGroupDelete || fr.Cookie != 7 || fr.PacketCount != 2 {
					t.Fatalf("FLOW_REMOVED %+v, want GROUP_DELETE with 2 packets", fr)
				}
				return
			}
		}
	}
}

package ofproto

import (
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// The tables as ovs-ofctl lines, the way the daemon saves and restores
// them (vswitchd/savedtables.go), so that the tests read in the syntax.
func savedFlows(b *Bridge) []string                { return ofptext.FlowLines(b.FlowMods()) }
func groupLines(b *Bridge) []string                { return ofptext.GroupLines(b.GroupDescs()) }
func meterLines(b *Bridge) []string                { return ofptext.MeterLines(b.MeterMods()) }
func restoreFlows(b *Bridge, lines []string) error { return restoreFlowsKeeping(b, lines, nil) }

func flowStates(b *Bridge) map[string]pipeline.EntryState {
	fms, sts := b.FlowModStates()
	out := make(map[string]pipeline.EntryState, len(fms))
	for i, fm := range fms {
		out[ofptext.FormatFlowMod(fm)] = sts[i]
	}
	return out
}

func restoreFlowsKeeping(b *Bridge, lines []string, states map[string]pipeline.EntryState) error {
	fms := make([]*ofpwire.FlowMod, len(lines))
	for i, l := range lines {
		var err error
		if fms[i], err = ofptext.ParseFlow(l, ofptext.Add); err != nil {
			return err
		}
	}
	return b.RestoreFlowMods(fms, func(i int) (pipeline.EntryState, bool) {
		st, ok := states[lines[i]]
		return st, ok
	})
}

func restoreGroups(b *Bridge, lines []string) error {
	gms := make([]*ofpwire.GroupMod, len(lines))
	for i, l := range lines {
		var err error
		if gms[i], err = ofptext.ParseGroup(l, ofpwire.GroupAdd, ofptext.ParseFlowOptions{}); err != nil {
			return err
		}
	}
	return b.RestoreGroupMods(gms)
}

func restoreMeters(b *Bridge, lines []string) error {
	mms := make([]*ofpwire.MeterMod, len(lines))
	for i, l := range lines {
		var err error
		if mms[i], err = ofptext.ParseMeter(l, ofpwire.MeterAdd); err != nil {
			return err
		}
	}
	return b.RestoreMeterMods(mms)
}

// installTestGroups installs the groups both bridges of the round trip
// start with.
func installTestGroups(t *testing.T, tb *testBridge) {
	t.Helper()
	for _, gm := range []*ofpwire.GroupMod{
		{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{bucketOut(2), bucketOut(1)}},
		{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 2, Buckets: []ofpwire.Bucket{bucketOut(2)}},
	} {
		if r := tb.c.request(gm); len(r) != 0 {
			t.Fatalf("group-mod replies %#v", r)
		}
	}
}

// randomFlow builds a flow-mod of every kind the tables hold: matches on
// several fields, cookies, timeouts, flags, apply/write/clear actions,
// metadata, goto-table and group actions.
func randomFlow(r *rand.Rand) *ofpwire.FlowMod {
	fm := &ofpwire.FlowMod{
		Command:  ofpwire.FlowAdd,
		TableID:  uint8(r.Intn(5)),
		Priority: uint16(r.Intn(0x10000)),
		BufferID: ofpwire.NoBuffer,
		OutPort:  ofpwire.PortAny,
		OutGroup: ofpwire.GroupAny,
	}
	if r.Intn(2) == 0 {
		fm.Cookie = r.Uint64()
	}
	if r.Intn(3) == 0 {
		fm.IdleTimeout = uint16(100 + r.Intn(1000))
	}
	if r.Intn(3) == 0 {
		fm.HardTimeout = uint16(100 + r.Intn(1000))
	}
	for _, f := range []ofpwire.FlowModFlag{ofpwire.FlowFlagSendFlowRem, ofpwire.FlowFlagNoPktCounts, ofpwire.FlowFlagNoByteCounts} {
		if r.Intn(3) == 0 {
			fm.Flags |= f
		}
	}
	if r.Intn(2) == 0 {
		fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(1+r.Intn(3))))
	}
	switch r.Intn(3) {
	case 0:
		fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x0800))
		fm.Match.Add(ofpwire.NewOXM(ofpwire.XMTypeIPv4Dst, []byte{10, byte(r.Intn(256)), byte(r.Intn(256)), 1}))
		if r.Intn(2) == 0 {
			fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeIPProto, 6))
			fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeTCPDst, uint64(r.Intn(65536))))
		}
	case 1:
		fm.Match.Add(ofpwire.NewOXM(ofpwire.XMTypeEthDst, []byte{2, 0, 0, 0, byte(r.Intn(256)), byte(r.Intn(256))}))
	}
	var acts []ofpwire.Action
	if r.Intn(3) == 0 {
		acts = append(acts, &ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeEthSrc, []byte{2, 0, 0, 0, 0, byte(r.Intn(256))})})
	}
	switch r.Intn(4) {
	case 0:
		acts = append(acts, &ofpwire.ActionGroup{Group: ofpwire.Group(1 + r.Intn(2))})
	case 1:
		acts = append(acts, &ofpwire.ActionOutput{Port: ofpwire.PortNo(1 + r.Intn(3))})
	case 2:
		acts = append(acts, &ofpwire.ActionOutput{Port: ofpwire.PortNormal})
	}
	if len(acts) > 0 {
		fm.Instructions = append(fm.Instructions, &ofpwire.InstrApplyActions{Actions: acts})
	}
	if r.Intn(4) == 0 {
		fm.Instructions = append(fm.Instructions, &ofpwire.InstrClearActions{})
	}
	if r.Intn(3) == 0 {
		fm.Instructions = append(fm.Instructions, &ofpwire.InstrWriteActions{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}})
	}
	if r.Intn(3) == 0 {
		fm.Instructions = append(fm.Instructions, &ofpwire.InstrWriteMetadata{Metadata: r.Uint64(), Mask: 0xffff})
	}
	if fm.TableID < 4 && r.Intn(2) == 0 {
		fm.Instructions = append(fm.Instructions, &ofpwire.InstrGotoTable{TableID: fm.TableID + 1 + uint8(r.Intn(int(4-fm.TableID)))})
	}
	return fm
}

// entryView is what must survive a save and restore.
type entryView struct {
	Table              uint8
	Priority           uint16
	Cookie             uint64
	Idle, Hard         uint16
	Flags              ofpwire.FlowModFlag
	Match, Instruction string
}

func tableView(t *testing.T, p *pipeline.Pipeline) []entryView {
	t.Helper()
	f := pipeline.AnyFilter()
	es, err := p.Flows(&f)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]entryView, len(es))
	for i, e := range es {
		m := e.Match()
		out[i] = entryView{e.TableID, e.Priority, e.Cookie, e.IdleTimeout, e.HardTimeout, e.Flags,
			ofptext.FormatMatch(&m), ofptext.FormatInstructions(e.Instructions())}
	}
	return out
}

func TestFlowLinesRoundTrip(t *testing.T) {
	src := newTestBridge(t)
	installTestGroups(t, src)
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		fm := randomFlow(r)
		if err := src.br.flowMod(fm); err != nil {
			t.Fatalf("flow %d (%s): %v", i, ofptext.FormatFlowMod(fm), err)
		}
	}
	lines := savedFlows(src.br)
	if len(lines) < 150 {
		t.Fatalf("only %d flows installed", len(lines))
	}
	tables := map[uint8]bool{}
	for _, v := range tableView(t, src.br.Pipeline()) {
		tables[v.Table] = true
	}
	if len(tables) != 5 {
		t.Fatalf("flows in %d tables, want 5", len(tables))
	}

	groups := groupLines(src.br)
	if len(groups) != 2 {
		t.Fatalf("group lines %q", groups)
	}
	dst := newTestBridge(t)
	// In reverse order: restoring sorts out the references.
	if err := restoreGroups(dst.br, []string{groups[1], groups[0]}); err != nil {
		t.Fatal(err)
	}
	if got := groupLines(dst.br); !reflect.DeepEqual(got, groups) {
		t.Fatalf("restored groups %q, want %q", got, groups)
	}
	dst.c.request(outputFlow(3, &ofpwire.ActionOutput{Port: 1})) // replaced by the restore
	if err := restoreFlows(dst.br, lines); err != nil {
		t.Fatal(err)
	}
	if got := savedFlows(dst.br); !reflect.DeepEqual(got, lines) {
		t.Fatalf("restored lines differ:\n%q\nwant\n%q", got, lines)
	}
	a, b := tableView(t, src.br.Pipeline()), tableView(t, dst.br.Pipeline())
	if len(a) != len(b) {
		t.Fatalf("restored %d entries, want %d", len(b), len(a))
	}
	// Equal-priority entries of a table may list in either order.
	count := map[entryView]int{}
	for _, v := range a {
		count[v]++
	}
	for _, v := range b {
		if count[v]--; count[v] < 0 {
			t.Fatalf("restored entry %+v is not in the source", v)
		}
	}
}

func TestRestoreFlowsAllOrNothing(t *testing.T) {
	tb := newTestBridge(t)
	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: 2}))
	before := savedFlows(tb.br)
	for _, bad := range [][]string{
		{"table=1,priority=5,tcp,tp_dst=80 actions=drop", "in_port=1 actions=frobnicate"},
		{"table=1,priority=5,tcp,tp_dst=80 actions=drop", "table=3 actions=goto_table:2"},
		{"table=1,priority=5,tcp,tp_dst=80 actions=drop", "actions=group:7"},
	} {
		if err := restoreFlows(tb.br, bad); err == nil {
			t.Fatalf("restoreFlows(%q) succeeded", bad)
		}
		if got := savedFlows(tb.br); !reflect.DeepEqual(got, before) {
			t.Fatalf("failed restore changed the tables to %q", got)
		}
	}
	// ovs-ofctl lines of one's own are fine too, and replace everything.
	if err := restoreFlows(tb.br, []string{"table=1,priority=5,tcp,tp_dst=80 actions=drop", "in_port=2 actions=output:1"}); err != nil {
		t.Fatal(err)
	}
	if got := savedFlows(tb.br); len(got) != 2 || got[0] != "in_port=2 actions=output:1" {
		t.Fatalf("restored %q", got)
	}
	if got := tb.forward(tb.p2, tb.p1, frame()); len(got) != 1 {
		t.Fatalf("restored flow forwarded %d frames", len(got))
	}
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatalf("replaced flow still forwards (%d frames)", len(got))
	}
}

// TestTablesGeneration: the tables' generation moves with every change
// to them, whoever makes it, and never with traffic or a change that
// changes nothing.
func TestTablesGeneration(t *testing.T) {
	tb := newTestBridgeWith(t, func(c *BridgeConfig) { c.FailMode = FailSecure })
	last := tb.br.TablesGeneration()
	moved := func(what string) {
		t.Helper()
		if g := tb.br.TablesGeneration(); g == last {
			t.Fatalf("generation still %d after %s", g, what)
		} else {
			last = g
		}
	}
	still := func(what string) {
		t.Helper()
		if g := tb.br.TablesGeneration(); g != last {
			t.Fatalf("generation %d after %s, was %d", g, what, last)
		}
	}
	fm := outputFlow(1, &ofpwire.ActionOutput{Port: 2})
	fm.HardTimeout = 1
	tb.c.request(fm)
	moved("flow-mod")
	// Traffic is not a table change.
	tb.forward(tb.p1, tb.p2, frame())
	tb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	still("traffic")
	// A delete selecting nothing changes nothing.
	tb.c.request(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: 7, BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	still("an empty delete")
	// Expiry, by the housekeeping tick.
	deadline := time.Now().Add(5 * time.Second)
	for len(savedFlows(tb.br)) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(savedFlows(tb.br)); n != 0 {
		t.Fatalf("%d flows 5 s after a 1 s hard timeout", n)
	}
	moved("hard timeout")
	installTestGroups(t, tb)
	moved("group-mods")
	tb.c.request(outputFlow(1, &ofpwire.ActionGroup{Group: 1}))
	moved("flow-mod")
	tb.c.request(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: 1})
	moved("group delete")
	if n := len(savedFlows(tb.br)); n != 0 {
		t.Fatalf("%d flows after deleting their group", n)
	}
	tb.c.request(&ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: ofpwire.MeterFlagKBitPerSec, MeterID: 1,
		Bands: []ofpwire.MeterBand{{Type: ofpwire.MeterBandTypeDrop, Rate: 1000}}})
	moved("meter-mod")
	if err := restoreFlows(tb.br, []string{"actions=drop"}); err != nil {
		t.Fatal(err)
	}
	moved("RestoreFlowMods")
}

func TestGroupRefCounts(t *testing.T) {
	tb := newTestBridge(t)
	installTestGroups(t, tb)
	// Group 3 forwards to group 2; two flows forward to group 2 (one of
	// them twice), one to group 1 through write-actions.
	tb.c.request(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 3,
		Buckets: []ofpwire.Bucket{{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny, Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 2}}}}})
	tb.c.request(outputFlow(1, &ofpwire.ActionGroup{Group: 2}, &ofpwire.ActionGroup{Group: 2}))
	tb.c.request(outputFlow(2, &ofpwire.ActionGroup{Group: 2}))
	fm := outputFlow(3, &ofpwire.ActionOutput{Port: 1})
	fm.Instructions = append(fm.Instructions, &ofpwire.InstrWriteActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 1}}})
	tb.c.request(fm)
	st := tb.c.multipart(&ofpwire.GroupStatsRequest{Group: ofpwire.GroupAll}).(*ofpwire.GroupStatsReply)
	want := map[ofpwire.Group]uint32{1: 1, 2: 3, 3: 0}
	if len(st.Groups) != 3 {
		t.Fatalf("group stats %+v", st.Groups)
	}
	for _, g := range st.Groups {
		if g.RefCount != want[g.GroupID] {
			t.Errorf("group %d ref_count %d, want %d", g.GroupID, g.RefCount, want[g.GroupID])
		}
	}
	st = tb.c.multipart(&ofpwire.GroupStatsRequest{Group: 2}).(*ofpwire.GroupStatsReply)
	if len(st.Groups) != 1 || st.Groups[0].RefCount != 3 {
		t.Fatalf("group 2 stats %+v", st.Groups)
	}
}

func TestRestoreGroups(t *testing.T) {
	tb := newTestBridge(t)
	installTestGroups(t, tb)
	before := groupLines(tb.br)
	for _, bad := range [][]string{
		{"group_id=5,type=all,bucket=actions=output:1", "group_id=6,type=frob"},
		{"group_id=5,type=all,bucket=actions=group:9"},                                               // a group nothing defines
		{"group_id=5,type=all,bucket=actions=group:6", "group_id=6,type=all,bucket=actions=group:5"}, // a loop
	} {
		if err := restoreGroups(tb.br, bad); err == nil {
			t.Fatalf("restoreGroups(%q) succeeded", bad)
		}
		if got := groupLines(tb.br); !reflect.DeepEqual(got, before) {
			t.Fatalf("failed restore changed the groups to %q", got)
		}
	}
	// Chained groups listed before what they forward to.
	lines := []string{
		"group_id=1,type=indirect,bucket=actions=group:2",
		"group_id=2,type=ff,bucket=watch_port:2,actions=output:2,bucket=watch_group:3,actions=group:3",
		"group_id=3,type=select,bucket=weight:5,actions=output:1,bucket=actions=output:2",
	}
	if err := restoreGroups(tb.br, lines); err != nil {
		t.Fatal(err)
	}
	if got := groupLines(tb.br); !reflect.DeepEqual(got, lines) {
		t.Fatalf("restored groups %q, want %q", got, lines)
	}
	tb.c.request(outputFlow(1, &ofpwire.ActionGroup{Group: 1}))
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 1 {
		t.Fatalf("restored group chain forwarded %d frames", len(got))
	}
}

// TestMeterLinesRoundTrip: meters saved as lines come back, in the table
// and in the datapath, on another bridge, and a bad line changes nothing.
func TestMeterLinesRoundTrip(t *testing.T) {
	a := newTestBridge(t)
	for _, mm := range []*ofpwire.MeterMod{
		pktpsMeter(ofpwire.MeterAdd, 1, 100, 10),
		{Command: ofpwire.MeterAdd, Flags: ofpwire.MeterFlagKBitPerSec, MeterID: 7, Bands: []ofpwire.MeterBand{
			{Type: ofpwire.MeterBandTypeDSCPRemark, Rate: 500, PrecLevel: 1},
			{Type: ofpwire.MeterBandTypeDrop, Rate: 2000}}},
	} {
		if r := a.c.request(mm); len(r) != 0 {
			t.Fatalf("meter-mod replies %#v", r)
		}
	}
	lines := meterLines(a.br)
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	b := newTestBridge(t)
	if err := restoreMeters(b.br, []string{"meter=3,frobnicate"}); err == nil {
		t.Fatal("bad meter line accepted")
	}
	if got := meterLines(b.br); len(got) != 0 {
		t.Fatalf("bad restore left meters %q", got)
	}
	if err := restoreMeters(b.br, lines); err != nil {
		t.Fatal(err)
	}
	if got := meterLines(b.br); !slices.Equal(got, lines) {
		t.Fatalf("restored meters\n got %q\nwant %q", got, lines)
	}
	for _, id := range []uint32{1, 7} {
		if _, ok := b.dp.Meter(id); !ok {
			t.Fatalf("meter %d not in the datapath", id)
		}
	}
	// Restoring again replaces rather than fails.
	if err := restoreMeters(b.br, lines); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreFlowsKeeping: flows carried to a new bridge with the old
// one's states keep their install time, last use and counters (a datapath
// rebuild must not reset dump-flows' duration or n_packets); a line with
// no state starts afresh.
func TestRestoreFlowsKeeping(t *testing.T) {
	src := newTestBridge(t)
	src.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: 2}))
	if err := restoreFlows(src.br, append(savedFlows(src.br), "table=1,priority=5,idle_timeout=300,tcp,tp_dst=80 actions=drop")); err != nil {
		t.Fatal(err)
	}
	if got := src.forward(src.p1, src.p2, frame()); len(got) != 1 {
		t.Fatalf("forwarded %d frames", len(got))
	}
	lines, states := savedFlows(src.br), flowStates(src.br)
	if len(states) != len(lines) {
		t.Fatalf("%d states for %d lines", len(states), len(lines))
	}
	// Age the states as if the flows had been installed a minute ago.
	old := time.Now().Add(-time.Minute)
	for l, st := range states {
		st.Created, st.LastUsed = old, old.Add(time.Second)
		states[l] = st
	}
	dst := newTestBridge(t)
	fresh := "table=2,priority=7,udp actions=drop"
	if err := restoreFlowsKeeping(dst.br, append(lines, fresh), states); err != nil {
		t.Fatal(err)
	}
	f := pipeline.AnyFilter()
	entries, _ := dst.br.Pipeline().Flows(&f)
	if len(entries) != 3 {
		t.Fatalf("%d entries restored, want 3", len(entries))
	}
	for _, e := range entries {
		line := ofptext.FormatFlowMod(entryFlowMod(e))
		st, kept := states[line]
		switch {
		case line == fresh:
			if e.Created.Before(old.Add(time.Minute / 2)) {
				t.Errorf("%s: a flow with no state got an old install time %v", line, e.Created)
			}
		case !kept:
			t.Errorf("restored %q is not among the carried lines", line)
		default:
			if got := e.State(); !got.Created.Equal(st.Created) || !got.LastUsed.Equal(st.LastUsed) || got.Packets != st.Packets || got.Bytes != st.Bytes {
				t.Errorf("%s: state %+v, want %+v", line, got, st)
			}
		}
	}
	if st := states[lines[0]]; st.Packets != 1 || st.Bytes == 0 {
		t.Errorf("the forwarding flow's state %+v does not count its frame", st)
	}
}

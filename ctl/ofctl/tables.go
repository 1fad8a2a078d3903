package ofctl

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// The ovs-ofctl commands beyond flows, groups and meters: table and
// aggregate statistics, group and meter statistics, port-mod, and the
// flow-table comparisons (replace-flows, diff-flows).

// TableStatsJSON is one table of dump-tables in JSON.
type TableStatsJSON struct {
	Table   uint8  `json:"table"`
	Active  uint32 `json:"active"`
	Lookups uint64 `json:"lookup"`
	Matched uint64 `json:"matched"`
}

func dumpTables(ctx context.Context, s *session, _ []string) error {
	xid, body, err := s.multipart(ctx, &ofpwire.TableStatsRequest{})
	if err != nil {
		return err
	}
	tables := body.(*ofpwire.TableStatsReply).Tables
	if s.opts.JSON {
		out := make([]TableStatsJSON, len(tables))
		for i, t := range tables {
			out[i] = TableStatsJSON{uint8(t.Table), t.ActiveCount, t.LookupCount, t.MatchedCount}
		}
		return writeJSON(s.out, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_TABLE reply (OF1.3) (xid=%#x):\n", xid)
	// Like ovs-ofctl, a run of tables equal to the one before is one
	// "ditto" line, so 254 mostly empty tables take a few lines.
	for i := 0; i < len(tables); {
		t := tables[i]
		fmt.Fprintf(&b, "  table %d:\n    active=%d, lookup=%d, matched=%d\n", t.Table, t.ActiveCount, t.LookupCount, t.MatchedCount)
		j := i + 1
		for j < len(tables) && tables[j].ActiveCount == t.ActiveCount && tables[j].LookupCount == t.LookupCount && tables[j].MatchedCount == t.MatchedCount {
			j++
		}
		switch {
		case j-i == 2:
			fmt.Fprintf(&b, "  table %d: ditto\n", tables[i+1].Table)
		case j-i > 2:
			fmt.Fprintf(&b, "  tables %d...%d: ditto\n", tables[i+1].Table, tables[j-1].Table)
		}
		i = j
	}
	_, err = io.WriteString(s.out, b.String())
	return err
}

// AggregateJSON is dump-aggregate's data.
type AggregateJSON struct {
	Packets uint64 `json:"packet_count"`
	Bytes   uint64 `json:"byte_count"`
	Flows   uint32 `json:"flow_count"`
}

func dumpAggregate(ctx context.Context, s *session, args []string) error {
	fm, err := s.flowFilter(ctx, args)
	if err != nil {
		return err
	}
	xid, body, err := s.multipart(ctx, &ofpwire.AggregateStatsRequest{
		TableID: fm.TableID, OutPort: fm.OutPort, OutGroup: fm.OutGroup,
		Cookie: fm.Cookie, CookieMask: fm.CookieMask, Match: fm.Match,
	})
	if err != nil {
		return err
	}
	a := body.(*ofpwire.AggregateStatsReply)
	if s.opts.JSON {
		return writeJSON(s.out, AggregateJSON{a.PacketCount, a.ByteCount, a.FlowCount})
	}
	_, err = fmt.Fprintf(s.out, "OFPST_AGGREGATE reply (OF1.3) (xid=%#x): packet_count=%d byte_count=%d flow_count=%d\n",
		xid, a.PacketCount, a.ByteCount, a.FlowCount)
	return err
}

// TableFeaturesJSON is one table of dump-table-features in JSON.
type TableFeaturesJSON struct {
	Table         uint8  `json:"table"`
	Name          string `json:"name"`
	MetadataMatch string `json:"metadata_match"`
	MetadataWrite string `json:"metadata_write"`
	MaxEntries    uint32 `json:"max_entries"`
	Instructions  int    `json:"instructions"`
	NextTables    int    `json:"next_tables"`
	Actions       int    `json:"actions"`
	MatchFields   int    `json:"match_fields"`
	SetFields     int    `json:"set_fields"`
}

func tableFeaturesView(t ofpwire.TableFeatures) TableFeaturesJSON {
	v := TableFeaturesJSON{Table: t.TableID, Name: t.Name, MetadataMatch: fmt.Sprintf("%#x", t.MetadataMatch),
		MetadataWrite: fmt.Sprintf("%#x", t.MetadataWrite), MaxEntries: t.MaxEntries}
	for _, p := range t.Properties {
		switch p.Type {
		case ofpwire.TablePropTypeInstructions:
			v.Instructions = len(p.InstructionIDs)
		case ofpwire.TablePropTypeNextTables:
			v.NextTables = len(p.NextTables)
		case ofpwire.TablePropTypeApplyActions:
			v.Actions = len(p.ActionIDs)
		case ofpwire.TablePropTypeMatch:
			v.MatchFields = len(p.OXMIDs)
		case ofpwire.TablePropTypeApplySetField:
			v.SetFields = len(p.OXMIDs)
		}
	}
	return v
}

func dumpTableFeatures(ctx context.Context, s *session, _ []string) error {
	xid, body, err := s.multipart(ctx, &ofpwire.TableFeaturesRequest{})
	if err != nil {
		return err
	}
	tables := body.(*ofpwire.TableFeaturesReply).Tables
	views := make([]TableFeaturesJSON, len(tables))
	for i, t := range tables {
		views[i] = tableFeaturesView(t)
	}
	if s.opts.JSON {
		return writeJSON(s.out, views)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_TABLE_FEATURES reply (OF1.3) (xid=%#x):\n", xid)
	same := func(a, c TableFeaturesJSON) bool {
		a.Table, c.Table, a.Name, c.Name = 0, 0, "", ""
		a.NextTables, c.NextTables = 0, 0
		return a == c
	}
	for i := 0; i < len(views); {
		v := views[i]
		fmt.Fprintf(&b, "  table %d (\"%s\"):\n    metadata: match=%s write=%s\n    max_entries=%d\n",
			v.Table, v.Name, v.MetadataMatch, v.MetadataWrite, v.MaxEntries)
		fmt.Fprintf(&b, "    instructions: %d, next tables: %d, apply actions: %d, apply set-field: %d, match fields: %d\n",
			v.Instructions, v.NextTables, v.Actions, v.SetFields, v.MatchFields)
		j := i + 1
		for j < len(views) && same(views[j], v) {
			j++
		}
		if j-i > 1 {
			fmt.Fprintf(&b, "  tables %d...%d: ditto\n", views[i+1].Table, views[j-1].Table)
		}
		i = j
	}
	_, err = io.WriteString(s.out, b.String())
	return err
}

// GroupStatsJSON is one group of dump-group-stats in JSON.
type GroupStatsJSON struct {
	GroupID  uint32            `json:"group_id"`
	Duration float64           `json:"duration"`
	RefCount uint32            `json:"ref_count"`
	Packets  uint64            `json:"packet_count"`
	Bytes    uint64            `json:"byte_count"`
	Buckets  []CounterPairJSON `json:"buckets"`
}

// CounterPairJSON is a bucket's or a band's counters.
type CounterPairJSON struct {
	Packets uint64 `json:"packet_count"`
	Bytes   uint64 `json:"byte_count"`
}

func dumpGroupStats(ctx context.Context, s *session, args []string) error {
	want, err := groupArg(args)
	if err != nil {
		return err
	}
	xid, body, err := s.multipart(ctx, &ofpwire.GroupStatsRequest{Group: want})
	if err != nil {
		return err
	}
	groups := body.(*ofpwire.GroupStatsReply).Groups
	if s.opts.JSON {
		out := make([]GroupStatsJSON, len(groups))
		for i, g := range groups {
			out[i] = GroupStatsJSON{GroupID: uint32(g.GroupID), Duration: seconds(g.DurationSec, g.DurationNSec),
				RefCount: g.RefCount, Packets: g.PacketCount, Bytes: g.ByteCount, Buckets: []CounterPairJSON{}}
			for _, bc := range g.BucketStats {
				out[i].Buckets = append(out[i].Buckets, CounterPairJSON{bc.PacketCount, bc.ByteCount})
			}
		}
		return writeJSON(s.out, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_GROUP reply (OF1.3) (xid=%#x):\n", xid)
	for _, g := range groups {
		fmt.Fprintf(&b, " group_id=%d,duration=%s,ref_count=%d,packet_count=%d,byte_count=%d", uint32(g.GroupID),
			ofptext.Duration(g.DurationSec, g.DurationNSec), g.RefCount, g.PacketCount, g.ByteCount)
		for i, bc := range g.BucketStats {
			fmt.Fprintf(&b, ",bucket%d:packet_count=%d,byte_count=%d", i, bc.PacketCount, bc.ByteCount)
		}
		b.WriteString("\n")
	}
	_, err = io.WriteString(s.out, b.String())
	return err
}

// MeterStatsJSON is one meter of meter-stats in JSON.
type MeterStatsJSON struct {
	MeterID  uint32            `json:"meter_id"`
	Flows    uint32            `json:"flow_count"`
	Packets  uint64            `json:"packet_in_count"`
	Bytes    uint64            `json:"byte_in_count"`
	Duration float64           `json:"duration"`
	Bands    []CounterPairJSON `json:"bands"`
}

func meterStats(ctx context.Context, s *session, args []string) error {
	want, err := meterArg(args)
	if err != nil {
		return err
	}
	xid, body, err := s.multipart(ctx, &ofpwire.MeterStatsRequest{Meter: want})
	if err != nil {
		return err
	}
	meters := body.(*ofpwire.MeterStatsReply).Meters
	if s.opts.JSON {
		out := make([]MeterStatsJSON, len(meters))
		for i, m := range meters {
			out[i] = MeterStatsJSON{MeterID: uint32(m.MeterID), Flows: m.FlowCount, Packets: m.PacketInCount,
				Bytes: m.ByteInCount, Duration: seconds(m.DurationSec, m.DurationNSec), Bands: []CounterPairJSON{}}
			for _, bs := range m.BandStats {
				out[i].Bands = append(out[i].Bands, CounterPairJSON{bs.PacketBandCount, bs.ByteBandCount})
			}
		}
		return writeJSON(s.out, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_METER reply (OF1.3) (xid=%#x):\n", xid)
	for _, m := range meters {
		fmt.Fprintf(&b, "meter:%d flow_count:%d packet_in_count:%d byte_in_count:%d duration:%s bands:\n",
			uint32(m.MeterID), m.FlowCount, m.PacketInCount, m.ByteInCount, ofptext.Duration(m.DurationSec, m.DurationNSec))
		for i, bs := range m.BandStats {
			fmt.Fprintf(&b, "%d: packet_count:%d byte_count:%d\n", i, bs.PacketBandCount, bs.ByteBandCount)
		}
	}
	_, err = io.WriteString(s.out, b.String())
	return err
}

// MeterFeaturesJSON is meter-features' data.
type MeterFeaturesJSON struct {
	MaxMeter     uint32   `json:"max_meter"`
	MaxBands     uint8    `json:"max_bands"`
	MaxColor     uint8    `json:"max_color"`
	BandTypes    []string `json:"band_types"`
	Capabilities []string `json:"capabilities"`
}

func meterFeatures(ctx context.Context, s *session, _ []string) error {
	xid, body, err := s.multipart(ctx, &ofpwire.MeterFeaturesRequest{})
	if err != nil {
		return err
	}
	f := body.(*ofpwire.MeterFeaturesReply)
	v := MeterFeaturesJSON{MaxMeter: f.MaxMeter, MaxBands: f.MaxBands, MaxColor: f.MaxColor,
		BandTypes:    bitList(f.BandTypes, []string{"", "drop", "dscp_remark"}),
		Capabilities: bitList(f.Capabilities, []string{"kbps", "pktps", "burst", "stats"})}
	if s.opts.JSON {
		return writeJSON(s.out, v)
	}
	_, err = fmt.Fprintf(s.out, "OFPST_METER_FEATURES reply (OF1.3) (xid=%#x):\nmax_meter:%d max_bands:%d max_color:%d\nband_types: %s\ncapabilities: %s\n",
		xid, v.MaxMeter, v.MaxBands, v.MaxColor, strings.Join(v.BandTypes, " "), strings.Join(v.Capabilities, " "))
	return err
}

// QueueStatsJSON is one queue of queue-stats in JSON.
type QueueStatsJSON struct {
	Port      string  `json:"port"`
	Queue     uint32  `json:"queue"`
	TxPackets uint64  `json:"tx_packets"`
	TxBytes   uint64  `json:"tx_bytes"`
	TxErrors  uint64  `json:"tx_errors"`
	Duration  float64 `json:"duration"`
}

func queueStats(ctx context.Context, s *session, args []string) error {
	port, queue := uint32(ofpwire.PortAny), uint32(ofpwire.QueueAll)
	if len(args) > 0 && args[0] != "ALL" && args[0] != "ANY" {
		var err error
		if port, err = s.portArg(ctx, args[0]); err != nil {
			return err
		}
	}
	if len(args) > 1 && args[1] != "ALL" {
		var q uint64
		if _, err := fmt.Sscan(args[1], &q); err != nil || q > 0xffffffff {
			return fmt.Errorf("bad queue %q", args[1])
		}
		queue = uint32(q)
	}
	xid, body, err := s.multipart(ctx, &ofpwire.QueueStatsRequest{Port: ofpwire.PortNo(port), Queue: ofpwire.Queue(queue)})
	if err != nil {
		return err
	}
	qs := body.(*ofpwire.QueueStatsReply).Queues
	if s.opts.JSON {
		out := make([]QueueStatsJSON, len(qs))
		for i, q := range qs {
			out[i] = QueueStatsJSON{Port: ofptext.PortName(uint32(q.Port)), Queue: uint32(q.Queue), TxPackets: q.TxPackets,
				TxBytes: q.TxBytes, TxErrors: q.TxErrors, Duration: seconds(q.DurationSec, q.DurationNSec)}
		}
		return writeJSON(s.out, out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_QUEUE reply (OF1.3) (xid=%#x): %d queues\n", xid, len(qs))
	for _, q := range qs {
		fmt.Fprintf(&b, "  port %s queue %d: bytes=%d, pkts=%d, errors=%d, duration=%s\n", ofptext.PortName(uint32(q.Port)),
			uint32(q.Queue), q.TxBytes, q.TxPackets, q.TxErrors, ofptext.Duration(q.DurationSec, q.DurationNSec))
	}
	_, err = io.WriteString(s.out, b.String())
	return err
}

// portModBits are mod-port's words: the config bit each sets or clears.
var portModBits = map[string]struct {
	bit ofpwire.PortConfig
	set bool
}{
	"down": {ofpwire.PortConfigDown, true}, "up": {ofpwire.PortConfigDown, false},
	"no-receive": {ofpwire.PortConfigNoRcv, true}, "receive": {ofpwire.PortConfigNoRcv, false},
	"no-forward": {ofpwire.PortConfigNoFwd, true}, "forward": {ofpwire.PortConfigNoFwd, false},
	"no-packet-in": {ofpwire.PortConfigNoPacketIn, true}, "packet-in": {ofpwire.PortConfigNoPacketIn, false},
	"no-flood": {ofpwire.PortConfigNoFlood, true}, "flood": {ofpwire.PortConfigNoFlood, false},
}

func modPort(ctx context.Context, s *session, args []string) error {
	act, ok := portModBits[strings.ToLower(args[1])]
	if !ok {
		words := make([]string, 0, len(portModBits))
		for w := range portModBits {
			words = append(words, w)
		}
		sort.Strings(words)
		return fmt.Errorf("unknown port action %q (want %s)", args[1], strings.Join(words, ", "))
	}
	no, err := s.portArg(ctx, args[0])
	if err != nil {
		return err
	}
	ports, err := s.portDesc(ctx)
	if err != nil {
		return err
	}
	var hw net.HardwareAddr
	found := false
	for _, p := range ports {
		if uint32(p.PortNo) == no {
			hw, found = p.HWAddr, true
		}
	}
	if !found {
		return fmt.Errorf("switch has no port %s", args[0])
	}
	pm := &ofpwire.PortMod{PortNo: ofpwire.PortNo(no), HWAddr: hw, Mask: act.bit}
	if act.set {
		pm.Config = act.bit
	}
	return s.transact(ctx, func(int) string { return fmt.Sprintf("mod-port %s %s", args[0], args[1]) }, pm)
}

// flowEntry is one flow for replace-flows and diff-flows: its identity
// (table, priority, match) and its text without statistics.
type flowEntry struct {
	key, text string
	fm        *ofpwire.FlowMod
}

func flowStatsOf(fm *ofpwire.FlowMod) *ofpwire.FlowStats {
	return &ofpwire.FlowStats{TableID: fm.TableID, Priority: fm.Priority, IdleTimeout: fm.IdleTimeout,
		HardTimeout: fm.HardTimeout, Flags: fm.Flags, Cookie: fm.Cookie, Match: fm.Match, Instructions: fm.Instructions}
}

func entryOf(fs *ofpwire.FlowStats) flowEntry {
	key := fmt.Sprintf("table=%d,priority=%d,%s", fs.TableID, fs.Priority, ofptext.MatchString(fs.Match))
	text := strings.TrimPrefix(ofptext.FormatFlowWith(fs, ofptext.FormatOptions{NoStats: true}), " ")
	return flowEntry{key: key, text: text}
}

// fileFlows reads a flow file as add-flow lines.
func (s *session) fileFlows(ctx context.Context, name string) ([]flowEntry, error) {
	flows, err := readFlowFile(name, s.opts.Stdin)
	if err != nil {
		return nil, err
	}
	var out []flowEntry
	err = s.parse(ctx, func(o ofptext.ParseFlowOptions) error {
		out = out[:0]
		for _, f := range flows {
			fm, err := ofptext.ParseFlowWith(f.text, ofptext.Add, o)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", name, f.line, err)
			}
			e := entryOf(flowStatsOf(fm))
			e.fm = fm
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// switchFlows dumps every flow of the switch s talks to.
func (s *session) switchFlows(ctx context.Context) ([]flowEntry, error) {
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	body, err := c.Multipart(ctx, &ofpwire.FlowStatsRequest{TableID: 0xff, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	if err != nil {
		return nil, err
	}
	flows := body.(*ofpwire.FlowStatsReply).Flows
	out := make([]flowEntry, len(flows))
	for i := range flows {
		out[i] = entryOf(&flows[i])
	}
	return out, nil
}

// replaceFlows makes the switch's flows those of the file, touching only
// the differences, in one transaction: flows absent from the file are
// deleted (strictly), new or changed ones added; with --readd every flow
// of the file is added again (its counters restart).
func replaceFlows(ctx context.Context, s *session, args []string) error {
	want, err := s.fileFlows(ctx, args[0])
	if err != nil {
		return err
	}
	have, err := s.switchFlows(ctx)
	if err != nil {
		return err
	}
	wantBy := map[string]flowEntry{}
	for _, f := range want {
		wantBy[f.key] = f
	}
	haveBy := map[string]flowEntry{}
	for _, f := range have {
		haveBy[f.key] = f
	}
	var msgs []ofpwire.Message
	var what []string
	for _, f := range have {
		if _, ok := wantBy[f.key]; !ok {
			fm, err := ofptext.ParseFlow(deleteText(f.key), ofptext.DeleteStrict)
			if err != nil {
				return fmt.Errorf("deleting %q: %w", f.text, err)
			}
			msgs = append(msgs, fm)
			what = append(what, "delete "+f.text)
		}
	}
	for _, f := range want {
		if h, ok := haveBy[f.key]; ok && h.text == f.text && !s.opts.Readd {
			continue
		}
		msgs = append(msgs, f.fm)
		what = append(what, "add "+f.text)
	}
	if len(msgs) == 0 {
		return nil
	}
	return s.transact(ctx, func(i int) string { return what[i] }, msgs...)
}

// deleteText turns a flow key into a delete_strict's text.
func deleteText(key string) string { return strings.TrimSuffix(key, ",") }

// diffFlows prints the flows that differ between two sources (a switch
// or a file), as ovs-ofctl diff-flows does: "-" for the first's, "+" for
// the second's. It fails (exit 1 in vsctl) when they differ, as diff does.
func diffFlows(ctx context.Context, s *session, args []string) error {
	load := func(sess *session, src string) ([]flowEntry, error) {
		if p, ok := strings.CutPrefix(src, "file:"); ok {
			return sess.fileFlows(ctx, p)
		}
		return sess.switchFlows(ctx)
	}
	a, err := load(s, s.target)
	if err != nil {
		return err
	}
	other := &session{target: args[0], out: s.out, opts: s.opts}
	defer other.close()
	b, err := load(other, args[0])
	if err != nil {
		return err
	}
	aBy, bBy := map[string]string{}, map[string]string{}
	for _, f := range a {
		aBy[f.key] = f.text
	}
	for _, f := range b {
		bBy[f.key] = f.text
	}
	var lines []string
	for _, f := range a {
		if t, ok := bBy[f.key]; !ok || t != f.text {
			lines = append(lines, "-"+f.text)
			if ok {
				lines = append(lines, "+"+t)
			}
		}
	}
	for _, f := range b {
		if _, ok := aBy[f.key]; !ok {
			lines = append(lines, "+"+f.text)
		}
	}
	if s.opts.JSON {
		if lines == nil {
			lines = []string{}
		}
		if err := writeJSON(s.out, lines); err != nil {
			return err
		}
	} else if len(lines) > 0 {
		io.WriteString(s.out, strings.Join(lines, "\n")+"\n")
	}
	if len(lines) > 0 {
		return errFlowsDiffer
	}
	return nil
}

// errFlowsDiffer is diff-flows' failure when the sources differ.
var errFlowsDiffer = fmt.Errorf("flow tables differ")

package ofproto

import (
	"fmt"
	"sort"
	"time"

	"github.com/vswitch-go/vswitch/ctl/flowsyntax"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"

	"github.com/netrack/openflow/ofp"
)

// tablesChanged is the pipeline's OnChange: the datapath's megaflows are
// stale (and with them the recirc_ids their frozen walks hold), and the
// daemon may want to save the tables.
func (b *Bridge) tablesChanged() {
	b.dp.InvalidateFlows()
	b.recirc.Retire()
	b.notifyTables()
}

// notifyTables wakes the goroutine that calls OnFlowTableChange. It never
// blocks: changes made while a call is running are folded into one more.
func (b *Bridge) notifyTables() {
	select {
	case b.tablesDirty <- struct{}{}:
	default:
	}
}

// tableNotifier calls OnFlowTableChange after changes, one call at a time.
func (b *Bridge) tableNotifier() {
	defer b.wg.Done()
	for {
		select {
		case <-b.stop:
			return
		case <-b.tablesDirty:
			b.cfg.OnFlowTableChange()
		}
	}
}

// entryFlowMod is the ADD that recreates entry e.
func entryFlowMod(e *pipeline.Entry) *ofpwire.FlowMod {
	return &ofpwire.FlowMod{
		Command:      ofp.FlowAdd,
		TableID:      e.TableID,
		Priority:     e.Priority,
		Cookie:       e.Cookie,
		IdleTimeout:  e.IdleTimeout,
		HardTimeout:  e.HardTimeout,
		Flags:        e.Flags,
		BufferID:     ofp.NoBuffer,
		OutPort:      ofp.PortAny,
		OutGroup:     ofp.GroupAny,
		Match:        ofmatch.ToOXM(&e.Match),
		Instructions: e.Instructions(),
	}
}

// FlowLines returns every entry of every table as an ovs-ofctl add-flow
// line (table, priority, cookie, timeouts, flags, match, instructions;
// no counters), ordered by table, descending priority, then text, so
// that equal tables give equal lists. RestoreFlows reads it back.
// Timeouts restart when the lines are restored.
func (b *Bridge) FlowLines() []string {
	f := pipeline.AnyFilter()
	entries, _ := b.pipe.Flows(&f)
	type line struct {
		table uint8
		prio  uint16
		text  string
	}
	ls := make([]line, len(entries))
	for i, e := range entries {
		ls[i] = line{e.TableID, e.Priority, flowsyntax.FormatFlowMod(entryFlowMod(e))}
	}
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].table != ls[j].table {
			return ls[i].table < ls[j].table
		}
		if ls[i].prio != ls[j].prio {
			return ls[i].prio > ls[j].prio
		}
		return ls[i].text < ls[j].text
	})
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.text
	}
	return out
}

// FlowStates returns, for every entry, its line as FlowLines gives it
// mapped to what the entry has accumulated (install time, last use,
// counters, the datapath's latest statistics included), for
// RestoreFlowsKeeping.
func (b *Bridge) FlowStates() map[string]pipeline.EntryState {
	b.dp.PushStats(time.Now())
	f := pipeline.AnyFilter()
	entries, _ := b.pipe.Flows(&f)
	out := make(map[string]pipeline.EntryState, len(entries))
	for _, e := range entries {
		out[flowsyntax.FormatFlowMod(entryFlowMod(e))] = e.State()
	}
	return out
}

// RestoreFlows replaces the flow tables with the flows lines describe
// (FlowLines' output, or any ovs-ofctl add-flow lines), all or nothing:
// every line is parsed and installed in a scratch pipeline first, and on
// any error (syntax, a table or instruction the pipeline refuses, a group
// that does not exist, a full table) the bridge is left unchanged. The
// groups the flows use must be installed before. The replacement is not
// atomic for translations running meanwhile, which may see the tables
// half restored (RestoreFlows is meant for start-up). No FLOW_REMOVED is
// sent for the flows it replaces.
func (b *Bridge) RestoreFlows(lines []string) error { return b.RestoreFlowsKeeping(lines, nil) }

// RestoreFlowsKeeping is RestoreFlows where a line found in states (from
// FlowStates of the bridge the lines came from) keeps that entry's install
// time, last use and counters: a datapath rebuild moves the tables to a new
// bridge, and dump-flows' duration, n_packets and the timeouts must not
// start over because of it.
func (b *Bridge) RestoreFlowsKeeping(lines []string, states map[string]pipeline.EntryState) error {
	fms := make([]*ofpwire.FlowMod, 0, len(lines))
	now := time.Now()
	scratch := pipeline.New(b.pipe.MaxEntries)
	for i, l := range lines {
		fm, err := flowsyntax.ParseFlow(l, flowsyntax.Add)
		if err != nil {
			return fmt.Errorf("ofproto: restoring flow %d: %w", i+1, err)
		}
		if err := b.checkGroupRefs(fm); err != nil {
			return fmt.Errorf("ofproto: restoring flow %d %q: %w", i+1, l, err)
		}
		if _, err := scratch.Apply(fm, now); err != nil {
			return fmt.Errorf("ofproto: restoring flow %d %q: %w", i+1, l, err)
		}
		fms = append(fms, fm)
	}
	b.failMu.Lock() // no fail-mode flush in between
	defer b.failMu.Unlock()
	if _, err := b.pipe.Apply(&ofpwire.FlowMod{Command: ofp.FlowDelete, TableID: uint8(ofp.TableAll),
		BufferID: ofp.NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny}, now); err != nil {
		return err
	}
	for i, fm := range fms {
		var err error
		if st, ok := states[lines[i]]; ok {
			err = b.pipe.Reinstall(fm, st)
		} else {
			_, err = b.pipe.Apply(fm, now)
		}
		if err != nil {
			// The scratch pipeline took it; only a concurrent change
			// (a group deleted meanwhile) can get here.
			return fmt.Errorf("ofproto: restoring %q: %w", flowsyntax.FormatFlowMod(fm), err)
		}
	}
	return nil
}

// FDB lists NORMAL's MAC table (port, VLAN, MAC, age) for fdb-show.
func (b *Bridge) FDB() []normal.Entry { return b.cfg.Normal.Entries(time.Now()) }

// groupRefCounts counts, for every group, the flow entries and groups
// that forward to it directly (OpenFlow 1.3's ref_count): each referrer
// once, however many of its actions name the group.
func (b *Bridge) groupRefCounts() map[ofp.Group]uint32 {
	counts := make(map[ofp.Group]uint32)
	seen := make(map[ofp.Group]bool)
	count := func(acts []ofpwire.Action) {
		for _, a := range acts {
			if ga, ok := a.(*ofpwire.ActionGroup); ok && !seen[ga.Group] {
				seen[ga.Group] = true
				counts[ga.Group]++
			}
		}
	}
	f := pipeline.AnyFilter()
	entries, _ := b.pipe.Flows(&f)
	for _, e := range entries {
		clear(seen)
		for _, in := range e.Instructions() {
			switch in := in.(type) {
			case *ofpwire.InstrApplyActions:
				count(in.Actions)
			case *ofpwire.InstrWriteActions:
				count(in.Actions)
			}
		}
	}
	for _, g := range b.groups.Desc() {
		clear(seen)
		for _, bk := range g.Buckets {
			count(bk.Actions)
		}
	}
	return counts
}

// groupStats answers OFPMP_GROUP with reference counts computed from the
// tables (the group table's own count is not maintained).
func (b *Bridge) groupStats(id ofp.Group) []ofpwire.GroupStats {
	b.dp.PushStats(time.Now())
	st := b.groups.Stats(id, time.Now())
	if len(st) == 0 {
		return st
	}
	refs := b.groupRefCounts()
	for i := range st {
		st[i].RefCount = refs[st[i].GroupID]
	}
	return st
}

// GroupLines returns every group as an ovs-ofctl add-group line
// ("group_id=1,type=all,bucket=actions=output:2,..."), by group id, with
// no counters. RestoreGroups reads it back.
func (b *Bridge) GroupLines() []string {
	ds := b.groups.Desc()
	out := make([]string, len(ds))
	for i := range ds {
		out[i] = flowsyntax.FormatGroup(&ds[i])
	}
	return out
}

// RestoreGroups replaces the group table with the groups lines describe
// (GroupLines' output, or ovs-ofctl add-group lines, in any order: a group
// is added after the groups it forwards to or watches), all or nothing:
// on any error the bridge is left unchanged. Flows forwarding to groups
// that are replaced are deleted with them, so restore the groups before
// the flows (RestoreFlows).
func (b *Bridge) RestoreGroups(lines []string) error {
	pending := make([]*ofpwire.GroupMod, 0, len(lines))
	for i, l := range lines {
		gm, err := flowsyntax.ParseGroup(l, ofp.GroupAdd, flowsyntax.ParseFlowOptions{})
		if err != nil {
			return fmt.Errorf("ofproto: restoring group %d: %w", i+1, err)
		}
		pending = append(pending, gm)
	}
	// Find an order that satisfies the references, in a scratch table
	// with the same limits.
	now := time.Now()
	scratch := pipeline.NewGroupTable()
	scratch.MaxGroups, scratch.MaxBuckets = b.groups.MaxGroups, b.groups.MaxBuckets
	order := make([]*ofpwire.GroupMod, 0, len(pending))
	for len(pending) > 0 {
		var lastErr error
		left := pending[:0]
		for _, gm := range pending {
			if _, err := scratch.ApplyGroupMod(gm, now); err != nil {
				lastErr = fmt.Errorf("ofproto: restoring %q: %w", flowsyntax.FormatGroupMod(gm), err)
				left = append(left, gm)
				continue
			}
			order = append(order, gm)
		}
		if len(left) == len(pending) {
			return lastErr // no progress: a real error, not an ordering one
		}
		pending = left
	}
	if err := b.groupMod(&ofpwire.GroupMod{Command: ofp.GroupDelete, GroupID: ofp.GroupAll}); err != nil {
		return err
	}
	for _, gm := range order {
		if err := b.groupMod(gm); err != nil {
			// Only a concurrent GROUP_MOD can get here.
			return fmt.Errorf("ofproto: restoring %q: %w", flowsyntax.FormatGroupMod(gm), err)
		}
	}
	return nil
}

// MeterLines returns every meter as a one-line ovs-ofctl add-meter
// specification, by meter id. RestoreMeters reads it back.
func (b *Bridge) MeterLines() []string {
	cs := b.meters.Config(ofp.MeterAll)
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = flowsyntax.FormatMeterMod(&ofpwire.MeterMod{Command: ofp.MeterAdd,
			Flags: cs[i].Flags, MeterID: cs[i].MeterID, Bands: cs[i].Bands})
	}
	return out
}

// RestoreMeters installs the meters lines describe (MeterLines' output, or
// ovs-ofctl add-meter lines), in the table and the datapath, replacing a
// meter of the same id. Every line is parsed before anything changes; a
// meter the table refuses stops the restore there (the earlier ones stay).
// Restore meters before the flows that use them.
func (b *Bridge) RestoreMeters(lines []string) error {
	mms := make([]*ofpwire.MeterMod, 0, len(lines))
	for i, l := range lines {
		mm, err := flowsyntax.ParseMeter(l, ofp.MeterAdd)
		if err != nil {
			return fmt.Errorf("ofproto: restoring meter %d: %w", i+1, err)
		}
		mms = append(mms, mm)
	}
	for _, mm := range mms {
		if b.meters.Get(mm.MeterID) != nil {
			mm.Command = ofp.MeterModify
		}
		if err := b.meterMod(mm); err != nil {
			return fmt.Errorf("ofproto: restoring %q: %w", flowsyntax.FormatMeterMod(mm), err)
		}
	}
	return nil
}

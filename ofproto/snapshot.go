package ofproto

import (
	"fmt"
	"iter"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// The bridge's tables as messages, for whoever saves them (the daemon
// writes them as ovs-ofctl lines, through ofptext): snapshots as the
// FLOW_MOD, GROUP_DESC and METER_MOD that recreate them, restores from
// those, and TablesGeneration to say when a snapshot is out of date. No
// text syntax here.

// tablesChanged is the pipeline's OnChange: the datapath's megaflows are
// stale (and with them the recirc_ids their frozen walks hold), and the
// daemon may want to save the tables.
func (b *Bridge) tablesChanged() {
	b.invalidate()
	b.recirc.Retire()
	b.pins.Retire()
}

// TablesGeneration moves on every change to the flow, group and meter
// tables (flow-mods, expiry, group- and meter-mods, flushes, restores),
// never with traffic: a saver compares it with the generation it saved.
func (b *Bridge) TablesGeneration() uint64 {
	return b.pipe.Generation() + b.groups.Generation() + b.meters.Generation()
}

// entryFlowMod is the ADD that recreates entry e.
func entryFlowMod(e *pipeline.Entry) *ofpwire.FlowMod {
	idle, hard := e.Timeouts() // as a fin_timeout left them
	return &ofpwire.FlowMod{
		Command:      ofpwire.FlowAdd,
		TableID:      e.TableID,
		Priority:     e.Priority,
		Cookie:       e.Cookie,
		IdleTimeout:  idle,
		HardTimeout:  hard,
		Flags:        e.Flags,
		BufferID:     ofpwire.NoBuffer,
		OutPort:      ofpwire.PortAny,
		OutGroup:     ofpwire.GroupAny,
		Match:        e.MatchOXM(),
		Instructions: e.Instructions(),
	}
}

// FlowMods returns the ADD that recreates each entry of every table
// (table, priority, cookie, timeouts, flags, match, instructions; no
// counters), by table, then descending priority. RestoreFlowMods takes
// them back; timeouts restart then.
func (b *Bridge) FlowMods() []*ofpwire.FlowMod {
	fms, _ := b.flowMods(false)
	return fms
}

// FlowModStates is FlowMods with, for each, what the entry has
// accumulated (install time, last use, counters, the datapath's latest
// statistics included), for RestoreFlowMods to carry over.
func (b *Bridge) FlowModStates() ([]*ofpwire.FlowMod, []pipeline.EntryState) {
	b.dp.PushStats(time.Now())
	return b.flowMods(true)
}

// FlowModSeq is FlowMods one at a time, in the same order (by table,
// then descending priority): the entries are taken when it is called, and
// each flow-mod is made as it is consumed, so that a saver walking a large
// table does not hold them all.
func (b *Bridge) FlowModSeq() iter.Seq[*ofpwire.FlowMod] {
	entries := b.sortedEntries()
	return func(yield func(*ofpwire.FlowMod) bool) {
		for _, e := range entries {
			if !yield(entryFlowMod(e)) {
				return
			}
		}
	}
}

// sortedEntries is every entry, ordered by table, then descending
// priority (as Pipeline.Flows returns them).
func (b *Bridge) sortedEntries() []*pipeline.Entry {
	f := pipeline.AnyFilter()
	entries, _ := b.pipe.Flows(&f)
	return entries
}

func (b *Bridge) flowMods(withStates bool) ([]*ofpwire.FlowMod, []pipeline.EntryState) {
	entries := b.sortedEntries()
	fms := make([]*ofpwire.FlowMod, len(entries))
	var sts []pipeline.EntryState
	if withStates {
		sts = make([]pipeline.EntryState, len(entries))
	}
	for i, e := range entries {
		fms[i] = entryFlowMod(e)
		if withStates {
			sts[i] = e.State()
		}
	}
	return fms, sts
}

// RestoreError is a table restore that failed on one of its messages.
// Index is that message's place in what the restore was given, Installing
// whether the tables took it alone but not in the real bridge (only a
// concurrent change gets there), so that the caller can name it in its
// own terms (the line it came from).
type RestoreError struct {
	Index      int
	Installing bool
	Err        error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("ofproto: restoring message %d: %v", e.Index+1, e.Err)
}

func (e *RestoreError) Unwrap() error { return e.Err }

// RestoreFlowMods replaces the flow tables with the flows fms add, all or
// nothing: every one is installed in a scratch pipeline first, and on any
// error (a table or instruction the pipeline refuses, a group that does
// not exist, a full table) the bridge is left unchanged and the error is a
// *RestoreError. The groups the flows use must be installed before. The
// replacement is not atomic for translations running meanwhile, which may
// see the tables half restored (it is meant for start-up). No FLOW_REMOVED
// is sent for the flows it replaces. When keep is not nil, a flow for
// which keep(i) reports a state (from FlowModStates of the bridge the
// flows came from) keeps that entry's install time, last use and
// counters: a datapath rebuild moves the tables to a new bridge, and
// dump-flows' duration, n_packets and the timeouts must not start over
// because of it.
func (b *Bridge) RestoreFlowMods(fms []*ofpwire.FlowMod, keep func(i int) (pipeline.EntryState, bool)) error {
	now := time.Now()
	scratch := pipeline.New(b.pipe.MaxEntries)
	for i, fm := range fms {
		if err := b.checkGroupRefs(fm); err != nil {
			return &RestoreError{Index: i, Err: err}
		}
		if _, err := scratch.Apply(fm, now); err != nil {
			return &RestoreError{Index: i, Err: err}
		}
	}
	b.failMu.Lock() // no fail-mode flush in between
	defer b.failMu.Unlock()
	if _, err := b.pipe.Apply(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll),
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}, now); err != nil {
		return err
	}
	for i, fm := range fms {
		var err error
		if st, ok := keepState(keep, i); ok {
			err = b.pipe.Reinstall(fm, st)
		} else {
			_, err = b.pipe.Apply(fm, now)
		}
		if err != nil {
			// The scratch pipeline took it; only a concurrent change
			// (a group deleted meanwhile) can get here.
			return &RestoreError{Index: i, Installing: true, Err: err}
		}
	}
	return nil
}

func keepState(keep func(int) (pipeline.EntryState, bool), i int) (pipeline.EntryState, bool) {
	if keep == nil {
		return pipeline.EntryState{}, false
	}
	return keep(i)
}

// GroupDescs returns every group, by group id, with no counters.
// RestoreGroupMods takes them back as GROUP_MOD adds.
func (b *Bridge) GroupDescs() []ofpwire.GroupDesc { return b.groups.Desc() }

// RestoreGroupMods replaces the group table with the groups gms add, in
// any order (a group is added after the groups it forwards to or
// watches), all or nothing: on any error the bridge is left unchanged and
// the error is a *RestoreError naming a group that could not be added.
// Flows forwarding to groups that are replaced are deleted with them, so
// restore the groups before the flows (RestoreFlowMods).
func (b *Bridge) RestoreGroupMods(gms []*ofpwire.GroupMod) error {
	pending := make([]int, len(gms))
	for i := range pending {
		pending[i] = i
	}
	// Find an order that satisfies the references, in a scratch table
	// with the same limits.
	now := time.Now()
	scratch := pipeline.NewGroupTable()
	scratch.MaxGroups, scratch.MaxBuckets = b.groups.MaxGroups, b.groups.MaxBuckets
	order := make([]int, 0, len(pending))
	for len(pending) > 0 {
		var lastErr error
		left := pending[:0]
		for _, i := range pending {
			if _, err := scratch.ApplyGroupMod(gms[i], now); err != nil {
				lastErr = &RestoreError{Index: i, Err: err}
				left = append(left, i)
				continue
			}
			order = append(order, i)
		}
		if len(left) == len(pending) {
			return lastErr // no progress: a real error, not an ordering one
		}
		pending = left
	}
	if err := b.groupMod(&ofpwire.GroupMod{Command: ofpwire.GroupDelete, GroupID: ofpwire.GroupAll}); err != nil {
		return err
	}
	for _, i := range order {
		if err := b.groupMod(gms[i]); err != nil {
			// Only a concurrent GROUP_MOD can get here.
			return &RestoreError{Index: i, Installing: true, Err: err}
		}
	}
	return nil
}

// MeterMods returns the ADD that recreates each meter, by meter id.
// RestoreMeterMods takes them back.
func (b *Bridge) MeterMods() []*ofpwire.MeterMod {
	cs := b.meters.Config(ofpwire.MeterAll)
	out := make([]*ofpwire.MeterMod, len(cs))
	for i := range cs {
		out[i] = &ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: cs[i].Flags, MeterID: cs[i].MeterID, Bands: cs[i].Bands}
	}
	return out
}

// RestoreMeterMods installs the meters mms add, in the table and the
// datapath, replacing a meter of the same id. A meter the table refuses
// stops the restore there (the earlier ones stay) with a *RestoreError.
// Restore meters before the flows that use them.
func (b *Bridge) RestoreMeterMods(mms []*ofpwire.MeterMod) error {
	for i, mm := range mms {
		if b.meters.Get(mm.MeterID) != nil {
			mm.Command = ofpwire.MeterModify
		}
		if err := b.meterMod(mm); err != nil {
			return &RestoreError{Index: i, Installing: true, Err: err}
		}
	}
	return nil
}

package pipeline

import (
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// ChangeKind is what happened to an entry.
type ChangeKind uint8

// Change kinds.
const (
	EntryAdded ChangeKind = iota
	EntryModified
	EntryRemoved
)

// Change is one change to the tables, as flow monitors report them.
type Change struct {
	Kind  ChangeKind
	Entry *Entry // removed: RemovedReason says why
	// OldInstructions are a modified entry's instructions before the
	// change (a monitor's out_port matches the old ones or the new).
	OldInstructions []ofpwire.Instruction
	// Mod is the flow-mod that made the change (nil for a timeout or a
	// meter deletion): whose it was decides how a monitor of the
	// connection that sent it is told.
	Mod *ofpwire.FlowMod
}

// Watcher is told of every change to the tables while it is Watching,
// under the pipeline's write lock (so in the order the changes were
// made, and before anyone sees the tables changed); Changed must not call
// back into the pipeline, and owns the slice only for the call.
// Watching is asked on every change, so it must be cheap: while it is
// false the pipeline records nothing.
type Watcher interface {
	Watching() bool
	Changed([]Change)
}

// SetWatcher installs w (nil: none).
func (p *Pipeline) SetWatcher(w Watcher) {
	p.mu.Lock()
	p.watcher = w
	p.mu.Unlock()
}

// watching reports whether changes are to be recorded (write lock held).
func (p *Pipeline) watching() bool { return p.watcher != nil && p.watcher.Watching() }

// note records a change for the watcher (write lock held, watching()).
func (p *Pipeline) note(c Change) { p.pending = append(p.pending, c) }

// noteRemoved records removed entries.
func (p *Pipeline) noteRemoved(removed []*Entry, fm *ofpwire.FlowMod) {
	if len(removed) == 0 || !p.watching() {
		return
	}
	for _, e := range removed {
		p.note(Change{Kind: EntryRemoved, Entry: e, Mod: fm})
	}
}

// HoldChanges keeps the changes from the watcher until ReleaseChanges,
// so that a bundle commit is reported only once it succeeded: a failed
// one is rolled back by deleting everything and reinstalling what was
// there, which monitors must not see as changes.
func (p *Pipeline) HoldChanges() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// ReleaseChanges ends HoldChanges, handing the held changes to the
// watcher (deliver) or dropping them.
func (p *Pipeline) ReleaseChanges(deliver bool) {
	p.mu.Lock()
	p.held = false
	if deliver {
		p.flushLocked()
	} else {
		clear(p.pending)
		p.pending = p.pending[:0]
	}
	p.mu.Unlock()
}

// flushLocked hands the recorded changes to the watcher (write lock held).
func (p *Pipeline) flushLocked() {
	if len(p.pending) == 0 || p.held {
		return
	}
	if p.watcher != nil {
		p.watcher.Changed(p.pending)
	}
	clear(p.pending)
	p.pending = p.pending[:0]
}

// CoveredBy reports whether m selects e as a non-strict flow-mod or flow
// statistics request would: e's match is m's or more specific.
func (e *Entry) CoveredBy(m *ofmatch.Match) bool {
	st := e.st
	if st == nil {
		return false
	}
	if !st.pipeMask.Covers(&m.PipeMask) {
		return false
	}
	sw, mw := st.mask.Words(), m.Mask.Words()
	for i := range mw {
		if sw[i]&mw[i] != mw[i] {
			return false
		}
	}
	return coversEntry(m, e)
}

// OutputsTo reports whether the entry outputs to port (any: PortAny).
func (e *Entry) OutputsTo(port ofpwire.PortNo) bool { return e.outputsTo(port) }

// UsesGroup reports whether the entry forwards to group g (any: GroupAny).
func (e *Entry) UsesGroup(g ofpwire.Group) bool { return e.usesGroup(g) }

// DeleteGroupFlows deletes every flow that forwards to group g (the group
// was deleted, OpenFlow 1.3 §6.5) and returns them with RemovedReason
// GROUP_DELETE, the reason monitors are told too.
func (p *Pipeline) DeleteGroupFlows(g ofpwire.Group, now time.Time) ([]*Entry, error) {
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: TableAll,
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: g}
	p.mu.Lock()
	removed, changed, err := p.applyLocked(fm, now)
	for _, e := range removed {
		e.RemovedReason = ofpwire.FlowReasonGroupDelete // before unlockChanged hands them to the watcher
	}
	p.unlockChanged(changed)
	return removed, err
}

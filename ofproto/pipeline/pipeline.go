// Package pipeline holds the OpenFlow 1.3 flow tables of one bridge: flow
// entries with their priorities, cookies, timeouts, flags, instructions and
// counters, the flow-mod commands that change them, and the control-plane
// classifier that finds, for a flow key, the entry a table applies together
// with the wildcard mask that answer depended on (what the translation turns
// into a megaflow mask).
//
// It knows nothing of datapath actions, groups or meters: instructions are
// stored as decoded, and references to ports, groups and meters are checked
// by the caller (see Apply).
//
// Concurrency: upcalls read the pipeline from PMD goroutines while the
// OpenFlow side writes it, so every table sits behind one sync.RWMutex.
// Entries are safe to read without the lock (what MODIFY changes, the
// instructions, is swapped atomically); RLock with LookupLocked lets a
// translation see one consistent pipeline across all the tables it walks.
package pipeline

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// NumTables is the number of flow tables; table ids run 0..NumTables-1.
const NumTables = 254

// TableAll is OFPTT_ALL: every table, for deletes and statistics.
const TableAll = uint8(ofpwire.TableAll)

// knownFlags are the OFPFF_* bits OpenFlow 1.3 defines. NO_PKT_COUNTS and
// NO_BYTE_COUNTS are hints a switch may ignore, so they are accepted and
// the counters are kept anyway.
const knownFlags = ofpwire.FlowFlagSendFlowRem | ofpwire.FlowFlagCheckOverlap |
	ofpwire.FlowFlagResetCounts | ofpwire.FlowFlagNoPktCounts | ofpwire.FlowFlagNoByteCounts

// Entry is one flow entry. Its exported fields never change once it is
// installed (RemovedReason excepted, set as it leaves); MODIFY replaces the
// instructions, read through Instructions.
type Entry struct {
	Priority uint16
	TableID  uint8
	Cookie   uint64
	// IdleTimeout and HardTimeout are the timeouts the entry was added
	// with (seconds, 0 = none); Timeouts gives them as a fin_timeout
	// action may have reduced them since.
	IdleTimeout uint16
	HardTimeout uint16
	Flags       ofpwire.FlowModFlag
	// RemovedReason says why the entry left its table (idle or hard
	// timeout, delete), for FLOW_REMOVED; meaningful once Apply or Expire
	// has returned the entry. (Here, beside the other small fields, for
	// the entry's size.)
	RemovedReason ofpwire.FlowRemovedReason
	Created       time.Time

	// Packets and Bytes count what the entry matched; the revalidator adds
	// datapath statistics through Touch.
	Packets, Bytes atomic.Uint64

	lastUsed atomic.Int64 // UnixNano of the latest use, starts at Created
	// hardFrom is when the hard timeout started (UnixNano): Created, or
	// the latest time a learn action found the entry again (Learn,
	// LearnRefresher), as Open vSwitch restarts a learned flow's hard
	// timeout each time it is learned.
	hardFrom atomic.Int64
	// reduced holds the timeouts a fin_timeout set (idle<<16 | hard, each
	// 0 when not reduced): written by translations holding only the read
	// lock, so atomic.
	reduced atomic.Uint32
	// conjunctive says the entry is a clause of a conjunctive match: its
	// actions are conjunction actions (which then are all it has). Set
	// with the instructions, under the pipeline's write lock.
	conjunctive bool
	insts       atomic.Pointer[[]ofpwire.Instruction]
	insts0      []ofpwire.Instruction // what insts points to first (initInstructions)

	// The match is its subtable's masks, which every entry of the
	// subtable shares, and the words of the masked key and pipeline state
	// where those masks have bits (the subtable's keyWords, then its
	// pipeWord): a whole match is 640 bytes, nearly all zero words, which
	// made a table of 100,000 flows cost ~750 bytes a flow in matches
	// alone. Set by the table's insert.
	st    *subtable
	words []uint64
}

// MatchOXM returns the entry's match as OXM fields, as flow statistics and
// FLOW_REMOVED carry it.
func (e *Entry) MatchOXM() ofpwire.Match {
	m := e.Match()
	return ofmatch.ToOXM(&m)
}

// Match returns the entry's match (key masked).
func (e *Entry) Match() ofmatch.Match {
	var m ofmatch.Match
	if e.st == nil { // not in a table (yet): the empty match, as the zero Entry had
		return m
	}
	m.Mask, m.PipeMask = e.st.mask, e.st.pipeMask
	kw, pw := m.Key.Words(), pipeWords(&m.Pipe)
	for i, w := range e.st.keyWords {
		kw[w] = e.words[i]
	}
	for i, w := range e.st.pipeWord {
		pw[w] = e.words[len(e.st.keyWords)+i]
	}
	return m
}

// Timeouts returns the entry's idle and hard timeouts (seconds, 0 =
// none) as they are now: what it was added with, unless a fin_timeout
// reduced them. Expiry, flow stats and FLOW_REMOVED use these, as Open
// vSwitch's dump-flows shows a reduced timeout.
func (e *Entry) Timeouts() (idle, hard uint16) { return e.timeouts(e.reduced.Load()) }

// timeouts is Timeouts with reduced's value r.
func (e *Entry) timeouts(r uint32) (idle, hard uint16) {
	idle, hard = e.IdleTimeout, e.HardTimeout
	if ri := uint16(r >> 16); ri != 0 {
		idle = ri
	}
	if rh := uint16(r); rh != 0 {
		hard = rh
	}
	return idle, hard
}

// ReduceTimeouts is what a fin_timeout(idle_timeout=idle,
// hard_timeout=hard) action does to the entry it ran from when a TCP FIN
// or RST passes (Open vSwitch's ofproto_rule_reduce_timeouts): each
// timeout given (not 0) replaces the entry's when that is none or longer.
// The hard timeout still counts from when it started, so an entry older
// than the new one expires at the next check. It changes nothing a
// translation reads, so the tables' generation stays.
func (e *Entry) ReduceTimeouts(idle, hard uint16) {
	for {
		old := e.reduced.Load()
		ci, ch := e.timeouts(old)
		ni, nh := uint16(old>>16), uint16(old)
		if idle != 0 && (ci == 0 || ci > idle) {
			ni = idle
		}
		if hard != 0 && (ch == 0 || ch > hard) {
			nh = hard
		}
		n := uint32(ni)<<16 | uint32(nh)
		if n == old || e.reduced.CompareAndSwap(old, n) {
			return
		}
	}
}

// Instructions returns the entry's instruction list as of now. The slice is
// never modified in place: MODIFY installs a new one.
func (e *Entry) Instructions() []ofpwire.Instruction {
	if p := e.insts.Load(); p != nil {
		return *p
	}
	return nil
}

func (e *Entry) setInstructions(ins []ofpwire.Instruction) {
	e.insts.Store(&ins)
	e.conjunctive = len(conjunctionsOf(ins)) > 0
}

// initInstructions is setInstructions for an entry not yet in a table:
// insts points to the entry's own insts0, not to a slice header of its
// own (an allocation per flow). A MODIFY later stores a new header, as
// translations may be reading the one they loaded.
func (e *Entry) initInstructions(ins []ofpwire.Instruction) {
	e.insts0 = ins
	e.insts.Store(&e.insts0)
	e.conjunctive = len(conjunctionsOf(ins)) > 0
}

// conjunctionsOf returns the conjunction actions of a clause entry's
// instructions.
func conjunctionsOf(ins []ofpwire.Instruction) []*ofpwire.ActionConjunction {
	var out []*ofpwire.ActionConjunction
	for _, in := range ins {
		if ap, ok := in.(*ofpwire.InstrApplyActions); ok {
			for _, a := range ap.Actions {
				if c, ok := a.(*ofpwire.ActionConjunction); ok {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// Touch records that the entry was used at now (if later than the use
// already recorded) and adds packets and bytes to its counters. It is safe
// to call without any lock, concurrently with lookups and flow-mods.
func (e *Entry) Touch(now time.Time, packets, bytes uint64) {
	if packets != 0 {
		e.Packets.Add(packets)
	}
	if bytes != 0 {
		e.Bytes.Add(bytes)
	}
	t := now.UnixNano()
	for {
		old := e.lastUsed.Load()
		if t <= old || e.lastUsed.CompareAndSwap(old, t) {
			return
		}
	}
}

// LastUsed is the time of the latest use recorded by Touch, or Created.
func (e *Entry) LastUsed() time.Time { return time.Unix(0, e.lastUsed.Load()) }

// SendFlowRemoved reports whether the controller asked for FLOW_REMOVED
// when this entry goes.
func (e *Entry) SendFlowRemoved() bool { return e.Flags&ofpwire.FlowFlagSendFlowRem != 0 }

// Duration is how long the entry has been installed at now.
func (e *Entry) Duration(now time.Time) time.Duration { return now.Sub(e.Created) }

// outputsTo reports whether one of the entry's apply- or write-actions
// outputs to port (any port when port is OFPP_ANY).
func (e *Entry) outputsTo(port ofpwire.PortNo) bool {
	if port == ofpwire.PortAny {
		return true
	}
	return e.hasAction(func(a ofpwire.Action) bool {
		o, ok := a.(*ofpwire.ActionOutput)
		return ok && o.Port == port
	})
}

// usesGroup is outputsTo for group actions.
func (e *Entry) usesGroup(g ofpwire.Group) bool {
	if g == ofpwire.GroupAny {
		return true
	}
	return e.hasAction(func(a ofpwire.Action) bool {
		ga, ok := a.(*ofpwire.ActionGroup)
		return ok && ga.Group == g
	})
}

func (e *Entry) hasAction(pred func(ofpwire.Action) bool) bool {
	for _, in := range e.Instructions() {
		for _, a := range ofpwire.InstructionActions(in) {
			if pred(a) {
				return true
			}
		}
	}
	return false
}

// TableStats are the counters OFPMP_TABLE reports for one table
// (OpenFlow 1.3 §7.3.5.4): packets looked up in the table, and those that
// hit an entry. A packet that only met the table-miss entry (§5.4) missed
// the table: it counts as looked up, not as matched.
type TableStats struct {
	Active  uint32 // entries installed
	Lookups uint64 // packets looked up in the table
	Matched uint64 // of those, packets that matched an entry other than the table-miss entry
}

// tableCounters sit apart from the tables so that lookups, which only hold
// the read lock, can count.
type tableCounters struct {
	lookups, matched atomic.Uint64
}

// tableHit and tableMiss are a table's counters seen as the statistics
// sink of a megaflow whose packets hit (or missed) the table: translation
// lists them among the megaflow's refs, so every packet the datapath
// forwards counts, not only the ones that came up for translation. The
// conversions from *tableCounters cost no allocation.
type (
	tableHit  tableCounters
	tableMiss tableCounters
)

func (c *tableHit) Touch(_ time.Time, packets, _ uint64) {
	c.lookups.Add(packets)
	c.matched.Add(packets)
}

func (c *tableMiss) Touch(_ time.Time, packets, _ uint64) { c.lookups.Add(packets) }

// StatsSink is what LookupSink returns: datapath.StatsSink's method.
type StatsSink interface {
	Touch(now time.Time, packets, bytes uint64)
}

// LookupSink returns the sink that counts packets looked up in table tid
// whose lookup found e (nil: no entry at all); a table-miss entry counts as
// a miss. It is for translation, which looks up with PeekLocked and lets
// the datapath push the megaflow's packets here.
func (p *Pipeline) LookupSink(tid uint8, e *Entry) StatsSink {
	return p.TableSink(tid, e != nil && !e.IsTableMiss())
}

// TableSink returns the sink that counts packets looked up in table tid
// that hit an entry (hit) or missed it.
func (p *Pipeline) TableSink(tid uint8, hit bool) StatsSink {
	c := &p.counters[tid]
	if hit {
		return (*tableHit)(c)
	}
	return (*tableMiss)(c)
}

// IsTableMiss reports whether e is a table-miss entry (§5.4): priority 0
// and wildcarding every field. The pipeline-state mask is tested first:
// it is the shorter, and OVN's many priority-0 entries set it (metadata).
func (e *Entry) IsTableMiss() bool {
	return e.Priority == 0 && (e.st == nil || e.st.pipeMask.IsZero() && e.st.mask.IsZero())
}

// Pipeline is the set of NumTables flow tables of one bridge.
type Pipeline struct {
	// MaxEntries bounds the entries of each table (0: no bound); an ADD
	// beyond it fails with OFPFMFC_TABLE_FULL. Set it before use.
	MaxEntries int

	// OnChange, when set, is called after every change to the tables
	// (flow-mods that changed something, expiry), outside the lock: the
	// datapath's cache invalidation hook. Set it before use.
	OnChange func()

	mu       sync.RWMutex
	tables   [NumTables]table
	counters [NumTables]tableCounters
	gen      atomic.Uint64

	// paths are the interned lookup paths (PathSink); shares, guarded
	// by pathMu, indexes them by table for TableStats.
	paths  atomic.Pointer[pathSet]
	pathMu sync.Mutex

	// watcher and pending: flow monitors (watch.go), under mu.
	watcher Watcher
	pending []Change
	held    bool
	shares  *[NumTables][]pathShare
}

// New returns an empty pipeline whose tables hold at most maxEntries
// entries each (0: unbounded).
func New(maxEntries int) *Pipeline { return &Pipeline{MaxEntries: maxEntries} }

// Generation counts the changes made to the tables; it moves on every
// change OnChange is called for.
func (p *Pipeline) Generation() uint64 { return p.gen.Load() }

// RLock takes the pipeline's read lock, for a caller that walks several
// tables (LookupLocked) or reads entry fields that MODIFY may change.
func (p *Pipeline) RLock() { p.mu.RLock() }

// RUnlock releases RLock.
func (p *Pipeline) RUnlock() { p.mu.RUnlock() }

// Lookup returns the highest-priority entry of table tid matching a packet
// with key k and pipeline state pipe, or nil, and ORs into wc and wcPipe
// (either may be nil) the mask bits the answer depended on: every key
// equal to k under the resulting wc, with pipeline state equal under
// wcPipe, gets the same answer. Among entries of equal priority that both
// match, which one wins is unspecified (OpenFlow leaves it undefined) but
// fixed until the table changes. tid must be < NumTables.
func (p *Pipeline) Lookup(tid uint8, k *flow.Key, pipe *ofmatch.Pipe, wc *flow.Mask, wcPipe *ofmatch.Pipe) *Entry {
	p.mu.RLock()
	e := p.LookupLocked(tid, k, pipe, wc, wcPipe)
	p.mu.RUnlock()
	return e
}

// LookupLocked is Lookup for a caller that holds RLock.
func (p *Pipeline) LookupLocked(tid uint8, k *flow.Key, pipe *ofmatch.Pipe, wc *flow.Mask, wcPipe *ofmatch.Pipe) *Entry {
	e := p.tables[tid].lookup(k, pipe, wc, wcPipe, nil)
	p.LookupSink(tid, e).Touch(time.Time{}, 1, 0)
	return e
}

// PeekLocked is LookupLocked without counting the lookup in the table's
// statistics: what a trace uses, which must leave no trace.
func (p *Pipeline) PeekLocked(tid uint8, k *flow.Key, pipe *ofmatch.Pipe, wc *flow.Mask, wcPipe *ofmatch.Pipe) *Entry {
	return p.tables[tid].lookup(k, pipe, wc, wcPipe, nil)
}

// PeekWords is PeekLocked without pipeline-state wildcards that also
// returns which words of wc it ORed masks into (bit i: word i of
// wc.Words()): a translation folds each lookup's wildcards into its
// megaflow mask, and visiting those few words beats visiting all
// flow.KeyWords of them 30 times an upcall.
func (p *Pipeline) PeekWords(tid uint8, k *flow.Key, pipe *ofmatch.Pipe, wc *flow.Mask) (*Entry, uint32) {
	var touched uint32
	e := p.tables[tid].lookup(k, pipe, wc, nil, &touched)
	return e, touched
}

// TableStats returns the statistics of table tid (< NumTables).
func (p *Pipeline) TableStats(tid uint8) TableStats {
	p.mu.RLock()
	n := p.tables[tid].count
	p.mu.RUnlock()
	c := &p.counters[tid]
	pl, pm := p.pathCounts(tid)
	return TableStats{Active: uint32(n), Lookups: c.lookups.Load() + pl, Matched: c.matched.Load() + pm}
}

func fmErr(code uint16) error {
	return &ofpwire.OFPError{Type: ofpwire.ETFlowModFailed, Code: code}
}

func instErr(code uint16) error {
	return &ofpwire.OFPError{Type: ofpwire.ETBadInstruction, Code: code}
}

// checkInstructions validates an instruction list for table tid. Goto-table
// must move forward to an existing table; each instruction type may appear
// once (OpenFlow 1.3 has no DUP_INST code, so a repeat is UNSUP_INST);
// experimenter instructions are not supported. Meter ids, group ids and
// output ports are the caller's to check.
func checkInstructions(tid uint8, ins []ofpwire.Instruction) error {
	var seen [8]bool
	for _, in := range ins {
		if in == nil {
			return instErr(ofpwire.BICUnknownInst)
		}
		switch in := in.(type) {
		case *ofpwire.InstrGotoTable:
			if in.TableID <= tid || int(in.TableID) >= NumTables {
				return instErr(ofpwire.BICBadTableID)
			}
		case *ofpwire.InstrExperimenter:
			return instErr(ofpwire.BICBadExperimenter)
		case *ofpwire.InstrWriteMetadata, *ofpwire.InstrWriteActions,
			*ofpwire.InstrApplyActions, *ofpwire.InstrClearActions, *ofpwire.InstrMeter:
		default:
			return instErr(ofpwire.BICUnknownInst)
		}
		t := int(in.InstructionType())
		if t >= len(seen) {
			return instErr(ofpwire.BICUnknownInst)
		}
		if seen[t] {
			return instErr(ofpwire.BICUnsupInst)
		}
		seen[t] = true
	}
	return nil
}

func cookieMatches(e *Entry, cookie, mask uint64) bool {
	return e.Cookie&mask == cookie&mask
}

// Apply carries out one OpenFlow 1.3 flow-mod at time now and returns the
// entries it removed (DELETE and DELETE_STRICT only, RemovedReason set to
// OFPRR_DELETE); the caller sends FLOW_REMOVED for those with
// SendFlowRemoved. Errors are *ofpwire.OFPError with the spec's codes:
//
//   - unknown command: FLOW_MOD_FAILED/BAD_COMMAND;
//   - table id ≥ NumTables (OFPTT_ALL allowed for deletes only):
//     FLOW_MOD_FAILED/BAD_TABLE_ID;
//   - unknown flag bits: FLOW_MOD_FAILED/BAD_FLAGS (every timeout value is
//     supported, so BAD_TIMEOUT never occurs);
//   - match errors from ofmatch.FromOXM: BAD_MATCH/*;
//   - ADD or MODIFY instructions: BAD_INSTRUCTION/BAD_TABLE_ID for a goto
//     to the same or an earlier (or non-existent) table, UNSUP_INST for a
//     repeated instruction type, BAD_EXPERIMENTER for experimenter ones;
//   - ADD with CHECK_OVERLAP over an entry of the same priority that a
//     packet could match too (an identical entry included):
//     FLOW_MOD_FAILED/OVERLAP;
//   - ADD of a new entry into a table holding MaxEntries: TABLE_FULL.
//
// Not checked here, because they need state this package lacks: output
// ports of OUTPUT actions (BAD_ACTION/BAD_OUT_PORT), groups and meters
// named by actions and instructions, set-field consistency with the match,
// and BufferID (the caller releases the buffered packet through the new
// entry after a successful ADD/MODIFY).
//
// ADD of an existing (match, priority) replaces that entry: the new entry
// starts a new duration and keeps the old counters unless RESET_COUNTS;
// no FLOW_REMOVED is due for the replaced one. MODIFY and MODIFY_STRICT
// replace the instructions of the selected entries, keeping cookie,
// timeouts, flags, duration and (unless RESET_COUNTS) counters; selecting
// nothing is not an error and adds nothing. Cookie/cookie_mask filter
// MODIFY and DELETE; out_port/out_group filter DELETE only. Entries keep
// fm.Instructions: the caller must not modify that slice afterwards.
func (p *Pipeline) Apply(fm *ofpwire.FlowMod, now time.Time) (removed []*Entry, err error) {
	p.mu.Lock()
	removed, changed, err := p.applyLocked(fm, now)
	p.unlockChanged(changed)
	return removed, err
}

// ApplyQuiet is Apply without calling OnChange: it reports whether the
// tables changed, and the caller, applying many changes in a row (a
// bundle commit), calls OnChange once after the last of them.
func (p *Pipeline) ApplyQuiet(fm *ofpwire.FlowMod, now time.Time) (removed []*Entry, changed bool, err error) {
	p.mu.Lock()
	removed, changed, err = p.applyLocked(fm, now)
	if changed {
		p.gen.Add(1)
	}
	p.flushLocked()
	p.mu.Unlock()
	return removed, changed, err
}

// unlockChanged ends a change made under the write lock: when the tables
// changed, the generation moves and, once unlocked, OnChange is called.
func (p *Pipeline) unlockChanged(changed bool) {
	if changed {
		p.gen.Add(1)
	}
	p.flushLocked()
	p.mu.Unlock()
	if changed && p.OnChange != nil {
		p.OnChange()
	}
}

// checkMod checks fm's command, table and flags.
func (p *Pipeline) checkMod(fm *ofpwire.FlowMod) error {
	isDelete := fm.Command == ofpwire.FlowDelete || fm.Command == ofpwire.FlowDeleteStrict
	if fm.Command > ofpwire.FlowDeleteStrict {
		return fmErr(ofpwire.FMFCBadCommand)
	}
	if int(fm.TableID) >= NumTables && !(isDelete && fm.TableID == TableAll) {
		return fmErr(ofpwire.FMFCBadTableID)
	}
	if fm.Flags&^knownFlags != 0 {
		return fmErr(ofpwire.FMFCBadFlags)
	}
	return nil
}

func (p *Pipeline) applyLocked(fm *ofpwire.FlowMod, now time.Time) ([]*Entry, bool, error) {
	if err := p.checkMod(fm); err != nil {
		return nil, false, err
	}
	m, err := ofmatch.FromOXM(fm.Match)
	if err != nil {
		return nil, false, err
	}
	if fm.Command != ofpwire.FlowDelete && fm.Command != ofpwire.FlowDeleteStrict {
		if err := checkInstructions(fm.TableID, fm.Instructions); err != nil {
			return nil, false, err
		}
	}
	switch fm.Command {
	case ofpwire.FlowAdd:
		return nil, true, p.add(fm, &m, now, nil)
	case ofpwire.FlowModify, ofpwire.FlowModifyStrict:
		t := &p.tables[fm.TableID]
		sel := t.selectEntries(nil, &m, fm.Priority, fm.Command == ofpwire.FlowModifyStrict)
		n := 0
		watch := p.watching()
		for _, e := range sel {
			if !cookieMatches(e, fm.Cookie, fm.CookieMask) {
				continue
			}
			if watch {
				p.note(Change{Kind: EntryModified, Entry: e, OldInstructions: e.Instructions(), Mod: fm})
			}
			e.setInstructions(fm.Instructions)
			if fm.Flags&ofpwire.FlowFlagResetCounts != 0 {
				e.Packets.Store(0)
				e.Bytes.Store(0)
			}
			n++
		}
		return nil, n > 0, nil
	}
	// DELETE, DELETE_STRICT
	lo, hi := int(fm.TableID), int(fm.TableID)
	if fm.TableID == TableAll {
		lo, hi = 0, NumTables-1
	}
	var removed []*Entry
	for tid := lo; tid <= hi; tid++ {
		t := &p.tables[tid]
		if t.count == 0 {
			continue
		}
		start := len(removed)
		removed = t.selectEntries(removed, &m, fm.Priority, fm.Command == ofpwire.FlowDeleteStrict)
		kept := removed[:start]
		for _, e := range removed[start:] {
			if cookieMatches(e, fm.Cookie, fm.CookieMask) && e.outputsTo(fm.OutPort) && e.usesGroup(fm.OutGroup) {
				kept = append(kept, e)
			}
		}
		removed = kept
		for _, e := range removed[start:] {
			t.remove(e)
			e.RemovedReason = ofpwire.FlowReasonDelete
		}
	}
	removed = p.deleteLearnedLocked(removed)
	p.noteRemoved(removed, fm)
	return removed, len(removed) > 0, nil
}

// EntryState is what an entry accumulates while installed, apart from its
// definition: when it was installed, when last used, and its counters.
type EntryState struct {
	Created, LastUsed time.Time
	Packets, Bytes    uint64
}

// State returns e's accumulated state.
func (e *Entry) State() EntryState {
	return EntryState{Created: e.Created, LastUsed: e.LastUsed(), Packets: e.Packets.Load(), Bytes: e.Bytes.Load()}
}

// Reinstall is an ADD (fm.Command must be ADD) whose new entry takes st's
// install time, last use and counters instead of starting afresh: it
// carries an entry from one pipeline to another (a datapath rebuild), so
// that its duration and counters, and the timeouts that run from them, go
// on as if nothing happened.
func (p *Pipeline) Reinstall(fm *ofpwire.FlowMod, st EntryState) error {
	if fm.Command != ofpwire.FlowAdd {
		return fmErr(ofpwire.FMFCBadCommand)
	}
	p.mu.Lock()
	err := p.checkMod(fm)
	if err == nil {
		var m ofmatch.Match
		if m, err = ofmatch.FromOXM(fm.Match); err == nil {
			err = checkInstructions(fm.TableID, fm.Instructions)
		}
		if err == nil {
			err = p.add(fm, &m, st.Created, &st)
		}
	}
	p.unlockChanged(err == nil)
	return err
}

// add installs fm's entry at now; with st, the entry takes st's times and
// counters instead.
func (p *Pipeline) add(fm *ofpwire.FlowMod, m *ofmatch.Match, now time.Time, st *EntryState) error {
	t := &p.tables[fm.TableID]
	s := t.locate(m, fm.Priority)
	old := s.old
	if fm.Flags&ofpwire.FlowFlagCheckOverlap != 0 && t.overlaps(m, fm.Priority, nil) {
		return fmErr(ofpwire.FMFCOverlap)
	}
	if old == nil && p.MaxEntries > 0 && t.count >= p.MaxEntries {
		return fmErr(ofpwire.FMFCTableFull)
	}
	e := &Entry{
		Priority: fm.Priority, TableID: fm.TableID, Cookie: fm.Cookie,
		IdleTimeout: fm.IdleTimeout, HardTimeout: fm.HardTimeout, Flags: fm.Flags,
		Created: now,
	}
	e.initInstructions(fm.Instructions)
	e.lastUsed.Store(now.UnixNano())
	e.hardFrom.Store(now.UnixNano())
	if st != nil {
		e.lastUsed.Store(st.LastUsed.UnixNano())
		e.Packets.Store(st.Packets)
		e.Bytes.Store(st.Bytes)
	}
	if old != nil {
		if fm.Flags&ofpwire.FlowFlagResetCounts == 0 && st == nil {
			e.Packets.Store(old.Packets.Load())
			e.Bytes.Store(old.Bytes.Load())
		}
	}
	t.place(&s, e, m) // in old's place, if any
	if st == nil && p.watching() {
		if old != nil {
			p.note(Change{Kind: EntryModified, Entry: e, OldInstructions: old.Instructions(), Mod: fm})
		} else {
			p.note(Change{Kind: EntryAdded, Entry: e, Mod: fm})
		}
	}
	return nil
}

// expiry returns when e times out and why, or ok false when it has no
// timeout. When both timeouts have passed the earlier deadline is the reason.
func expiry(e *Entry) (at int64, reason ofpwire.FlowRemovedReason, ok bool) {
	idleT, hardT := e.Timeouts()
	if hardT != 0 {
		at, reason, ok = e.hardFrom.Load()+int64(hardT)*int64(time.Second), ofpwire.FlowReasonHardTimeout, true
	}
	if idleT != 0 {
		idle := e.lastUsed.Load() + int64(idleT)*int64(time.Second)
		if !ok || idle < at {
			at, reason, ok = idle, ofpwire.FlowReasonIdleTimeout, true
		}
	}
	return at, reason, ok
}

// Expire removes every entry whose hard timeout has passed since it was
// added, or whose idle timeout has passed since its last recorded use, at
// now, and returns them with RemovedReason set (IDLE_TIMEOUT or
// HARD_TIMEOUT) for FLOW_REMOVED. Idle time follows Touch: the caller
// pushes datapath usage before calling Expire.
func (p *Pipeline) Expire(now time.Time) []*Entry {
	n := now.UnixNano()
	return p.removeIf(func(e *Entry) (ofpwire.FlowRemovedReason, bool) {
		at, reason, ok := expiry(e)
		return reason, ok && at <= n
	})
}

// removeIf removes every entry of every table for which gone reports
// true, with the RemovedReason it gives, and returns them; if any, the
// generation moves and OnChange is called (after the lock is released).
func (p *Pipeline) removeIf(gone func(e *Entry) (ofpwire.FlowRemovedReason, bool)) []*Entry {
	var out []*Entry
	p.mu.Lock()
	for tid := range p.tables {
		t := &p.tables[tid]
		if t.count == 0 {
			continue
		}
		start := len(out)
		t.each(func(e *Entry) {
			if reason, ok := gone(e); ok {
				e.RemovedReason = reason
				out = append(out, e)
			}
		})
		for _, e := range out[start:] {
			t.remove(e)
		}
	}
	out = p.deleteLearnedLocked(out)
	p.noteRemoved(out, nil)
	p.unlockChanged(len(out) > 0)
	return out
}

// Filter selects entries for flow and aggregate statistics (and is what
// MODIFY and DELETE select by).
type Filter struct {
	TableID            uint8         // a table, or TableAll
	Match              ofmatch.Match // as ofmatch.FromOXM returns it (key masked)
	Strict             bool          // exactly Match and Priority, instead of Match or more specific
	Priority           uint16        // used with Strict only
	OutPort            ofpwire.PortNo
	OutGroup           ofpwire.Group
	Cookie, CookieMask uint64
}

// AnyFilter returns a filter that selects every entry of every table.
func AnyFilter() Filter {
	return Filter{TableID: TableAll, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
}

// Flows returns the entries f selects, ordered by table and then by
// descending priority. A table id that is neither a table nor TableAll is
// BAD_REQUEST/BAD_TABLE_ID, as flow-stats requests want.
func (p *Pipeline) Flows(f *Filter) ([]*Entry, error) {
	if int(f.TableID) >= NumTables && f.TableID != TableAll {
		return nil, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadTableID}
	}
	lo, hi := int(f.TableID), int(f.TableID)
	if f.TableID == TableAll {
		lo, hi = 0, NumTables-1
	}
	var out []*Entry
	p.mu.RLock()
	for tid := lo; tid <= hi; tid++ {
		t := &p.tables[tid]
		if t.count == 0 {
			continue
		}
		start := len(out)
		out = t.selectEntries(out, &f.Match, f.Priority, f.Strict)
		kept := out[:start]
		for _, e := range out[start:] {
			if cookieMatches(e, f.Cookie, f.CookieMask) && e.outputsTo(f.OutPort) && e.usesGroup(f.OutGroup) {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	p.mu.RUnlock()
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].TableID != out[j].TableID {
			return out[i].TableID < out[j].TableID
		}
		return out[i].Priority > out[j].Priority
	})
	return out, nil
}

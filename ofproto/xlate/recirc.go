package xlate

import (
	"errors"
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// Recirculator is where a translation that cannot go on parks the rest of
// its work (freezes) and where the translation of the recirculated packet
// finds it again (thaws). The walk freezes when it needs a field the key
// does not describe (behind a popped MPLS entry or I-TAG); conntrack and
// tunnel decapsulation are meant to freeze through the same seam. It is
// called from PMD upcalls, concurrently.
type Recirculator interface {
	// Freeze returns the recirc_id (1-0xffff, what the datapath key can
	// hold) that stands for f; the same content gets the same id, so the
	// megaflows of one frozen state share their second pass. ok is false
	// when no id is free.
	Freeze(f *Frozen) (id uint32, ok bool)
	// Thaw returns the state id stands for, or nil for an id that is not
	// (or no longer) allocated.
	Thaw(id uint32) *Frozen
}

// Frozen is the pipeline state a translation stopped at: where to go on
// (a table lookup, the rest of an entry's instructions, or the action
// set) with which metadata and action set. It holds no packet field: the
// recirculated packet's key supplies those.
type Frozen struct {
	key frozenKey
	// ins is the instruction list of key.entry as it was when the walk
	// froze inside it (a MODIFY may replace the entry's list since).
	ins []ofpwire.Instruction
	// acts is the action list a stageActs walk goes on with: a group
	// bucket's (a GROUP_MOD replaces the list, never edits it), or what
	// was left of a packet-out's.
	acts []ofpwire.Action
}

// Where a frozen walk goes on.
const (
	stageTable uint8 = iota + 1 // look up key.table
	stageEntry                  // key.entry's instruction key.instr, action key.act onward
	stageSet                    // execute the action set
	stageActs                   // Frozen.acts from action key.act, then stop
)

// frozenKey is the comparable part of a Frozen: equal keys mean the same
// continuation, so they share an id.
type frozenKey struct {
	p     *pipeline.Pipeline
	stage uint8
	table uint8
	miss  bool
	instr uint16
	act   uint16
	entry *pipeline.Entry
	ins0  *ofpwire.Instruction // identifies the version of the entry's list
	acts0 *ofpwire.Action      // identifies a bucket's action list
	// po holds the encoded rest of a packet-out's actions (stageActs):
	// packet-outs carrying the same actions share one id, so a controller
	// repeating one cannot use up the ids.
	po string
	// tableOK lets a thawed packet-out's actions output to TABLE.
	tableOK bool
	cookie  uint64
	pipe    ofmatch.Pipe
	set     actionSet
	// fork carries, for a check_pkt_larger's branches, what the walk
	// holds outside the packet and the pipeline fields: the push:/pop:
	// stack, and the in_port a set-field made the packet look as if it
	// had come in on (the recirculated key has the real one).
	fork forkState
}

// forkState is the part of a check_pkt_larger branch's state beyond
// frozenKey's: comparable, so equal states still share an id.
type forkState struct {
	stack     string
	inPort    uint32
	inPortSet bool
}

// String says where the frozen walk goes on, for traces.
func (f *Frozen) String() string {
	k := &f.key
	switch k.stage {
	case stageTable:
		return fmt.Sprintf("table %d", k.table)
	case stageEntry:
		return fmt.Sprintf("table %d, action %d of instruction %d of the entry matched", k.table, k.act+1, k.instr+1)
	case stageSet:
		return "the action set"
	case stageActs:
		if k.po != "" {
			return fmt.Sprintf("action %d of what was left of the packet-out's", k.act+1)
		}
		return fmt.Sprintf("action %d of a group bucket", k.act+1)
	}
	return "nowhere"
}

// RecircTable is the Recirculator of one bridge: recirc_ids keyed by
// content, with idTable's lifetime (Retire at every flush the tables
// cause).
type RecircTable struct{ t *idTable[frozenKey, Frozen] }

// maxRecircID is the largest id the datapath key holds.
const maxRecircID = 0xffff

// NewRecircTable makes an empty table.
func NewRecircTable() *RecircTable { return &RecircTable{newIDTable[frozenKey, Frozen](maxRecircID)} }

// Freeze implements Recirculator.
func (t *RecircTable) Freeze(f *Frozen) (uint32, bool) { return t.t.get(f.key, *f) }

// Thaw implements Recirculator.
func (t *RecircTable) Thaw(id uint32) *Frozen { return t.t.lookup(id) }

// Retire starts a new generation and frees the ids unused for a whole
// one. Call it whenever the datapath's megaflows are flushed because the
// tables changed.
func (t *RecircTable) Retire() { t.t.retire() }

// Len is the number of ids allocated.
func (t *RecircTable) Len() int { return t.t.len() }

// checkpoint is the walk's output at a point it can freeze at: an
// operation that turns out to need an unknown field is undone back to it.
// A trace also keeps the working key, the packet as it will recirculate,
// by pointer: a checkpoint is taken before every action, and copying (or
// just zeroing) a whole key each time was a tenth of an upcall.
type checkpoint struct {
	out, refs, path int
	// helps says some field was unknown already: only then does a fresh
	// key from the packet as it is here tell the operation more.
	helps bool
	key   *flow.Key // traces only
}

func (x *xlator) checkpoint() checkpoint {
	ck := checkpoint{out: len(x.out), refs: len(x.refs), path: x.path.Len(), helps: x.unknown != flow.Mask{}}
	if x.tr != nil {
		k := x.key
		ck.key = &k
	}
	return ck
}

// errNoProgress reports a resumed walk that froze again where it had been
// thawed: recirculating cannot help (the field is unknown even on a fresh
// key, e.g. behind a pop in a group bucket).
var errNoProgress = fmt.Errorf("%w: a field behind a popped header, needed where recirculation cannot resume", ErrUnsupported)

// freeze ends the translation at ck: the operation after it needed an
// unknown field. What was emitted before ck stays, a recirc action to the
// frozen state k follows, and the walk stops. Where freezing is not
// possible (no Recirculator, or a restore left pending by an output to
// TABLE) the translation fails as before. Inside an output to TABLE the
// walk cannot stop (the packet-out's later actions need the original):
// errFreezeCopy asks outputTable to recirculate a copy instead. A
// packet-out's own actions freeze as a stageActs state keyed by their
// encoding, since the scratch pipeline they sit in does not outlive the
// packet-out.
func (x *xlator) freeze(ck checkpoint, k frozenKey, ins []ofpwire.Instruction) error {
	if x.opts.Recirc == nil || x.pending != nil || x.noFreeze {
		return errBlind
	}
	if x.nested > 0 {
		return errFreezeCopy
	}
	var acts []ofpwire.Action
	switch {
	case x.opts.Table != nil && k.stage == stageEntry:
		// The scratch entry of a packet-out holds one apply-actions.
		acts = ins[k.instr].(*ofpwire.InstrApplyActions).Actions[k.act:]
		b, err := ofpwire.Encode(0, &ofpwire.PacketOut{Actions: acts})
		if err != nil {
			return errBlind
		}
		k = frozenKey{stage: stageActs, table: k.table, miss: k.miss, cookie: k.cookie, pipe: k.pipe,
			po: string(b), tableOK: true}
		ins = nil
	case x.opts.Table != nil && k.stage != stageActs:
		return errBlind // the scratch pipeline's lookup or action set
	case k.stage == stageActs:
		acts = x.freezing
	}
	k.p = x.statePipeline(k.stage)
	if k.stage == stageEntry {
		k.ins0 = &ins[0]
	}
	if !ck.helps || x.thawed != nil && x.thawed.key == k {
		return errNoProgress
	}
	f := Frozen{key: k, ins: ins, acts: acts}
	id, ok := x.opts.Recirc.Freeze(&f)
	if !ok {
		return fmt.Errorf("%w: no free recirc_id", ErrUnsupported)
	}
	x.out, x.refs = x.out[:ck.out], x.refs[:ck.refs]
	x.path.Truncate(ck.path)
	x.blind = false
	x.stopped = true
	x.recircID = id
	if x.tr != nil {
		x.key = *ck.key
	}
	if x.tr != nil {
		x.traceNote(TraceRecirc, fmt.Sprintf("needs a field behind a popped header: recirculating as recirc(%#x), to resume at %s", id, f.String()))
	}
	return x.emit(actions.RecircAction(id))
}

// statePipeline is the pipeline a state frozen at stage belongs to: the
// one walked, except that a packet-out's actions (and the buckets they
// run) thaw in an upcall of the bridge's pipeline, not the scratch one.
func (x *xlator) statePipeline(stage uint8) *pipeline.Pipeline {
	if stage == stageActs && x.opts.Table != nil {
		return x.opts.Table
	}
	return x.p
}

// errFreezeCopy is how a freeze inside a group bucket that is not the
// last thing the translation does, or inside an output to TABLE, asks the
// bucket (or the output) to recirculate a copy of the packet from its
// start instead, while the original goes on with what follows.
var errFreezeCopy = errors.New("xlate: freeze a copy")

// freezeCopy emits a recirc action that sends a copy of the packet, as it
// is now, to the frozen state k (which starts where the copy's own work
// starts), and leaves the walk going on with the original. The thawed
// walk sees a freshly extracted key, so whatever the copy's work pops, it
// can freeze again behind the pop.
func (x *xlator) freezeCopy(k frozenKey, acts []ofpwire.Action) error {
	if x.opts.Recirc == nil || x.pending != nil {
		return errBlind
	}
	if k.stage == stageActs {
		k.p = x.statePipeline(k.stage)
	}
	if x.thawed != nil && x.thawed.key == k {
		return errNoProgress
	}
	f := Frozen{key: k, acts: acts}
	id, ok := x.opts.Recirc.Freeze(&f)
	if !ok {
		return fmt.Errorf("%w: no free recirc_id", ErrUnsupported)
	}
	if x.tr != nil {
		x.traceNote(TraceRecirc, fmt.Sprintf("needs a field behind a popped header: recirculating a copy as recirc(%#x), to run %s", id, f.String()))
	}
	return x.emit(actions.RecircAction(id))
}

// thaw runs the rest of the walk frozen in f against the recirculated
// packet's key.
func (x *xlator) thaw(f *Frozen) error {
	k := &f.key
	if k.p != x.p {
		return fmt.Errorf("%w: recirc_id of another pipeline", ErrUnsupported)
	}
	x.thawed = f
	x.pipe, x.set = k.pipe, k.set
	if f == x.opts.resume {
		x.pipe = x.opts.Pipe // the registers as the controller handed them back
	}
	x.table, x.miss, x.cookie = k.table, k.miss, k.cookie
	x.setStack(decodeStack(k.fork.stack))
	if k.fork.inPortSet {
		x.setInPort(k.fork.inPort)
	}
	if x.tr != nil {
		x.traceNote(TraceRecirc, "thaw: resuming at "+f.String())
	}
	switch k.stage {
	case stageTable:
		return x.walkFrom(k.table)
	case stageEntry:
		if x.tr != nil {
			x.tr.addStep(k.table, k.entry)
		}
		return x.walkEntry(k.table, k.entry, f.ins, int(k.instr), int(k.act))
	case stageSet:
		return x.executeSet()
	case stageActs:
		if k.tableOK {
			x.opts.Table = x.p // the thawed packet-out's output to TABLE
		}
		// A bucket's copy ends with the bucket: nothing follows it.
		return x.runActs(f.acts, int(k.act), k.table, k.miss, true)
	}
	return fmt.Errorf("%w: bad frozen state", ErrUnsupported)
}

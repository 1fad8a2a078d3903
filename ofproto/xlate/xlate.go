package xlate

import (
	"errors"
	"fmt"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// MaxActions bounds the datapath action list of one translation; beyond it
// Translate fails with ErrTooManyActions rather than install a megaflow
// whose execution cost is unbounded. It is far above what a bridge's
// floods need: NORMAL, FLOOD and ALL output to every port, and OVN sends a
// logical switch's broadcast to each of its ports, one output each (at 64,
// a bridge of 65 ports dropped every broadcast). Open vSwitch's bound is
// the 64 KiB of a netlink attribute, some 8,000 outputs.
const MaxActions = 4096

// maxSteps bounds the tables one walk visits. Goto-table only moves to a
// higher table, so NumTables is already a bound; this guards the invariant.
const maxSteps = pipeline.NumTables

var (
	// ErrUnsupported is wrapped by every error for an instruction, action
	// or output port this package does not translate yet.
	ErrUnsupported = errors.New("xlate: unsupported")
	// ErrTooManyActions means the translation needed more than MaxActions
	// datapath actions.
	ErrTooManyActions = errors.New("xlate: too many datapath actions")
	// ErrLoop means the walk visited more tables than exist (goto-table
	// went backwards, which the pipeline is meant to reject).
	ErrLoop = errors.New("xlate: pipeline walk did not terminate")
)

// Options carries the bridge state a translation needs besides the tables.
type Options struct {
	// Ports lists the bridge's ports (datapath numbers, which equal
	// OpenFlow port numbers): what OFPP_ALL sends to, and what OFPP_FLOOD
	// sends to when FloodPorts is nil. With PortConfig set it must list
	// every port a packet can arrive on (see PortConfig).
	Ports []uint32
	// LocalPort is the datapath port of the bridge's local interface, the
	// target of OFPP_LOCAL; 0 (never a valid OpenFlow port) means the
	// bridge has none and output to LOCAL is dropped.
	LocalPort uint32
	// NoInvalidTTLToController drops packets whose TTL a dec-TTL action
	// finds at 0 or 1 instead of sending them to the controller.
	NoInvalidTTLToController bool
	// Normal is the bridge's NORMAL switch, consulted (and taught source
	// MACs) by output to OFPP_NORMAL; nil makes that output unsupported.
	Normal *normal.Switch
	// Now is the time NORMAL learns and ages MACs at.
	Now time.Time
	// Groups is the bridge's group table, for the group action; nil makes
	// that action unsupported.
	Groups *pipeline.GroupTable
	// PortLive tells fast-failover and select groups whether a watched
	// port is up; nil means every port is. The megaflow does not record
	// liveness: the caller must invalidate megaflows when it changes.
	PortLive func(port uint32) bool
	// PortConfig returns the OFPPC_* bits a PORT_MOD set on a port
	// (PORT_DOWN, NO_RECV, NO_FWD, NO_PACKET_IN; NO_FLOOD is honoured by
	// the caller leaving the port out of FloodPorts); nil means none set.
	// A packet received on a NO_RECV or PORT_DOWN port is dropped; output
	// to a NO_FWD or PORT_DOWN port (whatever asked for it: a port number,
	// IN_PORT, LOCAL, ALL, FLOOD, NORMAL) is skipped; packet-ins for a
	// packet whose in_port is NO_PACKET_IN are dropped. While any port of
	// Ports refuses to receive, every megaflow matches in_port. The
	// megaflow does not record the config of output ports: the caller
	// must invalidate megaflows when any port's config changes.
	PortConfig func(port uint32) ofpwire.PortConfig
	// FloodPorts is what OFPP_FLOOD and NORMAL's floods send to (ports
	// without NO_FLOOD), a subset of Ports; nil means Ports.
	FloodPorts []uint32
	// Table is the pipeline that output to OFPP_TABLE submits the packet
	// to. Only a packet-out sets it (the bridge's active pipeline), since
	// OpenFlow 1.3 allows that port nowhere else; nil makes the output
	// unsupported.
	Table *pipeline.Pipeline
	// DropFragments drops IP fragments (first and later) before the
	// pipeline: OFPC_FRAG_DROP of SET_CONFIG. It applies to received
	// packets, not a packet-out's; the caller invalidates megaflows when
	// it changes.
	DropFragments bool
	// Learn receives each flow a learn action built (an ADD) and the
	// action's limit (0: none); the caller applies it once Translate has
	// returned, since the walk holds the pipeline's read lock, with
	// pipeline.LearnLimit. nil makes learn unsupported.
	Learn func(fm *ofpwire.FlowMod, limit uint32)
	// Pipe is the pipeline state (metadata, registers) the walk starts
	// with: zero for a received packet, what an OpenFlow 1.5 packet-out's
	// match says for its packet.
	Pipe ofmatch.Pipe
	// resume is the walk TranslateResume goes on with.
	resume *Frozen
	// PacketIns holds the contexts of packet-ins that carry registers or
	// userdata; nil sends them without.
	PacketIns *PacketInTable
	// Recirc parks the rest of a walk that needs a field behind a popped
	// MPLS entry or I-TAG, and finds it again for a key with a recirc_id
	// (see Recirculator); nil makes such a walk fail as unsupported.
	Recirc Recirculator
}

// ControllerArg packs what ofproto needs to build a packet-in into the
// Port word of a datapath Controller action: bits 0-15 the max_len of the
// output action (OFPCML_NO_BUFFER = 0xffff is whole packet), bits 16-23 the
// OFPR_* reason, bits 24-31 the id of the table whose entry sent it.
func ControllerArg(reason ofpwire.PacketInReason, table uint8, maxLen uint16) uint32 {
	return uint32(table)<<24 | uint32(reason)<<16 | uint32(maxLen)
}

// ParseControllerArg undoes ControllerArg.
func ParseControllerArg(arg uint32) (reason ofpwire.PacketInReason, table uint8, maxLen uint16) {
	return ofpwire.PacketInReason(arg >> 16), uint8(arg >> 24), uint16(arg)
}

// xlator is the state of one walk.
type xlator struct {
	p       *pipeline.Pipeline
	opts    Options
	key     flow.Key   // the packet as rewritten so far
	written flow.Mask  // key bits actions have set: no longer the original packet's
	mask    *flow.Mask // the result: original bits the translation consulted
	out     actions.List
	refs    []datapath.StatsSink // entries matched, in order
	// path records the table lookups made in pathP (the first pipeline
	// a lookup went to); flushPath turns it into one sink among refs.
	// Lookups in another pipeline, or beyond the path's capacity, list
	// their table's sink in refs directly.
	path    pipeline.LookupPath
	pathP   *pipeline.Pipeline
	set     actionSet
	table   uint8 // table of the entry being executed
	miss    bool  // that entry is a table-miss entry
	stopped bool  // an invalid TTL ended processing
	dec     normal.Decision
	tags    int          // tags pushed minus tags popped so far
	depth   int          // groups being executed, one inside another
	pipe    ofmatch.Pipe // metadata and registers
	// unknown holds the key bits whose value the walk cannot know: those
	// behind a popped MPLS entry or I-TAG, which the datapath re-extracts
	// from bytes the key never described. They also count as written.
	// Consulting one sets blind, which fails the translation.
	unknown flow.Mask
	// lookupWC is a lookup's wildcards, all zero between lookups (each
	// lookup clears the words it set).
	lookupWC flow.Mask
	blind    bool
	inner    innerTTL
	// irrev counts changes the datapath cannot undo (MPLS and PBB pushes
	// and pops, copy TTL inwards); a non-final group bucket may not make
	// one.
	irrev int
	// pending is the packet state to restore after an output to TABLE,
	// emitted only if some action follows.
	pending *savedState
	// tr is non-nil only for TranslateTrace: every step is recorded there
	// and NORMAL does not learn. Every use is behind a nil check, so a
	// plain Translate pays one compare per record point.
	tr   *Trace
	tind int // trace nesting: group buckets and the action set indent
	// cookie is the cookie of the entry being executed, for packet-ins.
	cookie uint64
	// nested counts outputs to TABLE being walked, where a walk cannot
	// freeze.
	nested int
	// recircID is the id the walk froze under (0: it did not).
	recircID uint32
	// thawed is the frozen state this walk resumed, if any.
	thawed *Frozen
	// freezing is the bucket action list a stageActs freeze parks.
	freezing []ofpwire.Action
	// noFreeze says the walk needed an unknown field where a
	// recirculation cannot help (restoring the packet after an output to
	// TABLE): it fails as before.
	noFreeze bool
	// resubmitDepth counts resubmits being walked, one inside another;
	// resubmits all of this walk's.
	resubmitDepth, resubmits int
	// exited says an exit action ran: no further action executes, the
	// action set still does.
	exited bool
	// push:/pop:'s stack: its first entries in stackLow (OVN pushes
	// one or two), the rest in stackHigh, stackN in all. An array, not
	// a slice into one, so that the xlator stays on its caller's stack.
	stackLow  [4]stackEntry
	stackHigh []stackEntry
	stackN    int

	// nonTail counts the resubmits being walked after which their caller
	// has more to do; pauseAt is where a pausing controller action being
	// executed lets the walk go on (pausePoint).
	nonTail int
	pauseAt *Frozen
	// forkAt is where the check_pkt_larger being executed lets the walk
	// go on in its two branches (forkPoint); forked says it has: the
	// action list it sat in, and its entry, end there, and the walk goes
	// on with whatever resubmitted to that entry.
	forkAt *Frozen
	forked bool
	// entry is the entry whose instructions are being executed (the
	// resubmitted one inside a resubmit): what fin_timeout shortens.
	entry *pipeline.Entry
}

// Translate walks the pipeline for the packet whose flow key is key,
// starting at table 0 with metadata 0, and fills res with the datapath
// actions equivalent to running the pipeline on that packet and the mask
// of every original key bit the result depends on. res.Actions is reused
// (truncated, then appended to). On error res holds no usable result.
// The walk holds the pipeline's read lock, so it sees one version of every
// table it visits.
func Translate(p *pipeline.Pipeline, key *flow.Key, res *datapath.UpcallResult, opts Options) error {
	return translate(p, key, res, opts, nil)
}

func translate(p *pipeline.Pipeline, key *flow.Key, res *datapath.UpcallResult, opts Options, tr *Trace) error {
	x := xlator{p: p, opts: opts, key: *key, mask: &res.Mask, out: res.Actions[:0], tr: tr}
	res.Mask = flow.Mask{}
	res.NoInstall = false
	x.refs = res.Refs[:0]
	p.RLock()
	var err error
	switch {
	case opts.resume != nil:
		err = x.thaw(opts.resume)
	case key.RecircID != 0:
		err = x.resume(key.RecircID)
	default:
		err = x.walk()
	}
	p.RUnlock()
	if err == nil && x.blind {
		err = errBlind
	}
	x.out = foldVLANPairs(x.out)
	res.Actions = x.out
	x.flushPath()
	res.Refs = x.refs
	if tr != nil {
		tr.finish(&x, err)
	}
	return err
}

// flushPath lists the walk's lookup path among its refs: one sink for
// every table it looked up, or a sink per lookup when the pipeline keeps
// no more paths.
func (x *xlator) flushPath() {
	if x.path.Len() == 0 {
		return
	}
	if s := x.pathP.PathSink(&x.path); s != nil {
		x.refs = append(x.refs, s)
	} else {
		for i := range x.path.Len() {
			x.refs = append(x.refs, x.pathP.TableSink(x.path.Step(i)))
		}
	}
	x.path.Truncate(0)
}

// resume translates a recirculated packet: the walk frozen under id goes
// on against the packet's fresh key. The megaflow matches the id.
func (x *xlator) resume(id uint16) error {
	x.consult(&flow.Mask{RecircID: 0xffff})
	var f *Frozen
	if x.opts.Recirc != nil {
		f = x.opts.Recirc.Thaw(uint32(id))
	}
	if f == nil {
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("recirc_id %#x is not allocated: dropped", id))
		}
		return fmt.Errorf("%w: recirc_id %#x is not allocated", ErrUnsupported, id)
	}
	return x.thaw(f)
}

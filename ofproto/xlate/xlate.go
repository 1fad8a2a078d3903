// Package xlate translates a flow key through the OpenFlow 1.3 pipeline
// into datapath actions and the megaflow mask of every key bit the answer
// depended on (OpenFlow 1.3 §5.1–5.10: tables, instructions, action set).
//
// The walk keeps a working copy of the key that apply-actions rewrite, so
// later tables see the rewritten packet, while the mask is kept in terms of
// the original packet: a bit an action wrote before anything consulted it is
// a constant of the translation (or a function of bits already in the mask)
// and is left out of the mask.
//
// Every OpenFlow 1.3 action translates; the meter instruction becomes a
// datapath meter action. Translate returns an error wrapping
// ErrUnsupported for: experimenter actions; set-field
// on a field OpenFlow or the datapath cannot write (IN_PORT, IN_PHY_PORT,
// ETH_TYPE, IP_PROTO, MPLS_BOS, IPV6_EXTHDR); masked set-field on any field
// but VLAN_VID and METADATA (the datapath's set actions carry no mask);
// output to OFPP_NORMAL when Options.Normal is nil, to OFPP_TABLE outside a
// packet-out (Options.Table nil) and to OFPP_ANY or an undefined reserved
// number; and the cases below that the flow key cannot follow.
// CheckActions gives the OpenFlow error a flow-mod or packet-out carrying
// such actions deserves.
//
// Set-queue is accepted and does nothing: the switch has no egress queues,
// as in Open vSwitch without QoS configured.
//
// Metadata may be written by set-field too (as Open vSwitch allows,
// masked or not): from apply-actions it steers the tables after it; in the
// action set it comes too late to matter.
//
// MPLS and PBB. Push MPLS inserts a label stack entry after the VLAN tags
// (label and TC 0 and TTL from the IP header over IP, a copy of the old top
// entry over MPLS) and push PBB an I-TAG before them, whose I-SID is copied
// from an outer I-TAG and I-PCP from the outer VLAN PCP, as OpenFlow 1.3's
// copy rules say. After a push the key holds what the datapath's
// re-extraction gives: no L3 fields, the new top entry or I-SID. The key
// does not describe what a label stack or an I-TAG covers, so after pop
// MPLS to an Ethernet type the datapath parses further (IPv4, IPv6, ARP,
// MPLS, PBB) and after pop PBB every field but in_port and tunnel_id, the
// fields behind the popped header are unknown to the walk: a later lookup,
// prerequisite check, dec-TTL or hash that needs one fails as unsupported
// (Open vSwitch would recirculate). Fields a set-field writes afterwards
// become known again. Copy TTL out takes the TTL the top entry covers,
// known only when this translation pushed that entry; otherwise the top
// entry's TTL becomes unknown the same way. Dec MPLS TTL at 0 or 1 sends an
// OFPR_INVALID_TTL packet-in and stops, like dec NW TTL. An 802.3 SNAP frame
// carries its Ethernet type where the datapath's encapsulation actions do
// not look, so they leave it alone while the walk assumes otherwise (a
// known gap, as is a stack of more than two VLAN tags).
//
// The action set executes in the order of OpenFlow 1.3 §5.10: copy TTL
// inwards; the pops (VLAN, PBB, then MPLS); push MPLS, push PBB, push VLAN;
// copy TTL outwards; the decrements (MPLS, then IP); set NW TTL, set MPLS
// TTL and the set-fields; set-queue; group, else output.
//
// Output to OFPP_TABLE, valid only in a packet-out (§4.5), runs the
// packet as rewritten so far through Options.Table from table 0 with an
// empty action set and metadata 0, then puts the packet back as it was
// for the packet-out's later actions (as for a group bucket; nothing is
// restored when nothing follows).
//
// The group action runs each bucket chosen (ALL: every bucket; INDIRECT:
// its bucket; FAST_FAILOVER: the first live one; SELECT: one picked from a
// hash of the Ethernet addresses, type and VLAN IDs and, where present, the
// IP protocol, addresses and L4 ports, all of which go in the mask) as an action list on a clone of the packet: after a bucket,
// actions are emitted that set every field it rewrote back to its
// pre-bucket value (those values join the mask), so the next bucket and the
// actions after the group see the packet unchanged. The last bucket of a
// group run from the action set needs no such undo. A bucket whose VLAN
// pushes and pops cannot be undone that way (more than one net push or pop,
// or a TPID change) is unsupported, and so is one that pushes or pops MPLS
// or PBB, or copies a TTL inwards, since the datapath has no inverse for
// those. An unknown group drops. The group and
// each bucket run join the result's Refs, so the megaflow's traffic counts
// in their statistics.
//
// OFPP_NORMAL asks Options.Normal for a decision on the packet as rewritten
// so far and emits its outputs with their tag treatment (push 0x8100 with
// the VLAN's VID and PCP 0, pop, or rewrite of the VID bits). Between and
// after those outputs the tag is put back as it was, since NORMAL does not
// change the packet later actions see. NORMAL learns source MACs, which the
// megaflow cannot show: callers must invalidate megaflows when the switch's
// Generation moves.
//
// Port config (Options.PortConfig and FloodPorts, what PORT_MOD sets) is
// applied where OpenFlow 1.3 §7.2.1 puts it: at the in_port (NO_RECV,
// PORT_DOWN drop the packet; NO_PACKET_IN drops its packet-ins) and at
// every output, NORMAL's included (NO_FWD, PORT_DOWN; NO_FLOOD for floods).
//
// TranslateTrace runs the same walk recording each step for
// ofproto/trace; the record points cost a plain Translate one nil check
// each, and a trace teaches NORMAL nothing.
//
// Push and pop VLAN move tags between the key's two tag slots, which
// per-bit tracking cannot follow, so they put every original tag bit in the
// mask. A set-field whose prerequisites the packet does not meet does
// nothing (as in Open vSwitch); the fields that decided that are in the
// mask. Unsupported actions fail where
// they appear, even in a write-actions that a later clear-actions would
// have discarded.
package xlate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"

	"github.com/netrack/openflow/ofp"
)

// MaxActions bounds the datapath action list of one translation; beyond it
// Translate fails with ErrTooManyActions rather than install a megaflow
// whose execution cost is unbounded.
const MaxActions = 64

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
	PortConfig func(port uint32) ofp.PortConfig
	// FloodPorts is what OFPP_FLOOD and NORMAL's floods send to (ports
	// without NO_FLOOD), a subset of Ports; nil means Ports.
	FloodPorts []uint32
	// Table is the pipeline that output to OFPP_TABLE submits the packet
	// to. Only a packet-out sets it (the bridge's active pipeline), since
	// OpenFlow 1.3 allows that port nowhere else; nil makes the output
	// unsupported.
	Table *pipeline.Pipeline
}

// ControllerArg packs what ofproto needs to build a packet-in into the
// Port word of a datapath Controller action: bits 0-15 the max_len of the
// output action (OFPCML_NO_BUFFER = 0xffff is whole packet), bits 16-23 the
// OFPR_* reason, bits 24-31 the id of the table whose entry sent it.
func ControllerArg(reason ofp.PacketInReason, table uint8, maxLen uint16) uint32 {
	return uint32(table)<<24 | uint32(reason)<<16 | uint32(maxLen)
}

// ParseControllerArg undoes ControllerArg.
func ParseControllerArg(arg uint32) (reason ofp.PacketInReason, table uint8, maxLen uint16) {
	return ofp.PacketInReason(arg >> 16), uint8(arg >> 24), uint16(arg)
}

// Ethernet types and IP protocols that set-field prerequisites test.
const (
	ethIPv4   = 0x0800
	ethIPv6   = 0x86dd
	protoTCP  = 6
	protoUDP  = 17
	protoSCTP = 132
)

// actionSet is the OpenFlow action set: at most one action per type and,
// for set-field, one per field. Only the types Translate supports have a
// slot; the rest are rejected when written.
type actionSet struct {
	copyTTLIn  bool
	popVLAN    bool
	popPBB     bool
	popMPLS    *ofpwire.ActionPopMPLS
	pushMPLS   *ofpwire.ActionPushMPLS
	pushPBB    *ofpwire.ActionPushPBB
	pushVLAN   *ofpwire.ActionPushVLAN
	copyTTLOut bool
	decMPLSTTL bool
	decTTL     bool
	setTTL     *ofpwire.ActionSetNwTTL
	setMPLSTTL *ofpwire.ActionSetMPLSTTL
	fields     [ofpwire.NumFields]*ofpwire.ActionSetField
	queue      bool // set-queue: held, and does nothing
	output     *ofpwire.ActionOutput
	group      *ofpwire.ActionGroup // takes precedence over output
	outTable   uint8                // table of the entry that wrote output (packet-in table id)
	outMiss    bool                 // that entry was a table-miss entry
	outCookie  uint64               // and its cookie
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
	set     actionSet
	table   uint8 // table of the entry being executed
	miss    bool  // that entry is a table-miss entry
	stopped bool  // an invalid TTL ended processing
	dec     normal.Decision
	tags    int // tags pushed minus tags popped so far
	depth   int // groups being executed, one inside another
	md      uint64
	// unknown holds the key bits whose value the walk cannot know: those
	// behind a popped MPLS entry or I-TAG, which the datapath re-extracts
	// from bytes the key never described. They also count as written.
	// Consulting one sets blind, which fails the translation.
	unknown flow.Mask
	blind   bool
	inner   innerTTL
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
	err := x.walk()
	p.RUnlock()
	if err == nil && x.blind {
		err = errBlind
	}
	x.out = foldVLANPairs(x.out)
	res.Actions = x.out
	res.Refs = x.refs
	if tr != nil {
		tr.finish(&x, err)
	}
	return err
}

func (x *xlator) walk() error {
	if x.opts.PortConfig != nil && !x.received() {
		return nil
	}
	return x.walkTables()
}

// walkTables runs the packet through x.p from table 0 with metadata 0 and
// then executes its action set.
func (x *xlator) walkTables() error {
	x.md = 0
	tid := uint8(0)
	for step := 0; ; step++ {
		if step >= maxSteps {
			return ErrLoop
		}
		if err := x.flushPending(); err != nil {
			return err
		}
		var wc flow.Mask
		// The lookup is counted through the megaflow's refs, per packet
		// (a trace counts nothing).
		e := x.p.PeekLocked(tid, &x.key, x.md, &wc, nil)
		if x.tr == nil {
			x.refs = append(x.refs, x.p.LookupSink(tid, e))
		}
		x.consult(&wc)
		if x.tr != nil {
			x.tr.addStep(tid, e)
		}
		if e == nil {
			// No table-miss entry: OpenFlow 1.3 §5.4 drops the packet,
			// so the action set is discarded, not executed.
			return nil
		}
		x.refs = append(x.refs, e) // the entry counts the megaflow's traffic
		x.table, x.miss, x.cookie = tid, isTableMiss(e), e.Cookie
		next, gotoTable := uint8(0), false
		for _, in := range e.Instructions() {
			var err error
			switch in := in.(type) {
			case *ofpwire.InstrApplyActions:
				err = x.applyActions(in.Actions)
			case *ofpwire.InstrClearActions:
				x.set = actionSet{}
				if x.tr != nil {
					x.traceEvent(TraceEvent{Kind: TraceClearActions, Text: "clear_actions"})
				}
			case *ofpwire.InstrWriteActions:
				err = x.writeActions(in.Actions)
				if x.tr != nil && err == nil {
					x.traceWriteActions(in.Actions)
				}
			case *ofpwire.InstrWriteMetadata:
				x.md = x.md&^in.Mask | in.Metadata&in.Mask
				if x.tr != nil {
					x.traceMetadata(in, x.md)
				}
			case *ofpwire.InstrGotoTable:
				next, gotoTable = in.TableID, true
				if x.tr != nil {
					x.traceEvent(TraceEvent{Kind: TraceGoto, Table: in.TableID,
						Text: fmt.Sprintf("goto_table:%d", in.TableID)})
				}
			case *ofpwire.InstrMeter:
				// The datapath meters by OpenFlow meter id (ofproto
				// programs its meters). OpenFlow runs the meter before
				// the entry's other instructions; ofproto stores it
				// first. It consults no packet field.
				err = x.emit(actions.Action{Kind: actions.Meter, Port: uint32(in.MeterID)})
			default:
				err = fmt.Errorf("%w: instruction type %d", ErrUnsupported, in.InstructionType())
			}
			if err != nil {
				return err
			}
			if x.stopped {
				return nil
			}
		}
		if !gotoTable {
			break
		}
		if next <= tid {
			return ErrLoop
		}
		tid = next
	}
	return x.executeSet()
}

// isTableMiss reports whether e is a table-miss entry (priority 0, every
// field wildcarded): its controller outputs carry reason NO_MATCH.
func isTableMiss(e *pipeline.Entry) bool { return e.IsTableMiss() }

// consult adds to the mask the bits of m that still hold the original
// packet's value.
func (x *xlator) consult(m *flow.Mask) {
	a, w, r, u := m.Words(), x.written.Words(), x.mask.Words(), x.unknown.Words()
	for i := range a {
		r[i] |= a[i] &^ w[i]
		if a[i]&u[i] != 0 {
			x.blind = true
		}
	}
}

// errBlind reports a translation that needed a field behind a popped MPLS
// entry or I-TAG.
var errBlind = fmt.Errorf("%w: a field behind a popped MPLS or PBB header (the key does not describe it)", ErrUnsupported)

func (x *xlator) emit(a actions.Action) error {
	if len(x.out) >= MaxActions {
		return ErrTooManyActions
	}
	x.out = append(x.out, a)
	return nil
}

func (x *xlator) applyActions(acts []ofpwire.Action) error {
	for _, a := range acts {
		if err := x.doAction(a, x.table, x.miss); err != nil {
			return err
		}
		if x.stopped {
			return nil
		}
	}
	return nil
}

// checkSupported rejects, at write time, actions the action set cannot hold.
func checkSupported(a ofpwire.Action) error {
	switch a := a.(type) {
	case *ofpwire.ActionOutput, *ofpwire.ActionPushVLAN, *ofpwire.ActionPopVLAN,
		*ofpwire.ActionDecNwTTL, *ofpwire.ActionSetNwTTL, *ofpwire.ActionGroup,
		*ofpwire.ActionPushMPLS, *ofpwire.ActionPopMPLS, *ofpwire.ActionPushPBB,
		*ofpwire.ActionPopPBB, *ofpwire.ActionCopyTTLIn, *ofpwire.ActionCopyTTLOut,
		*ofpwire.ActionSetMPLSTTL, *ofpwire.ActionDecMPLSTTL, *ofpwire.ActionSetQueue:
		return nil
	case *ofpwire.ActionSetField:
		_, err := setFieldSupported(a)
		return err
	default:
		return unsupportedAction(a)
	}
}

func unsupportedAction(a ofpwire.Action) error {
	return fmt.Errorf("%w: action type %d", ErrUnsupported, a.ActionType())
}

func (x *xlator) writeActions(acts []ofpwire.Action) error {
	for _, a := range acts {
		if err := checkSupported(a); err != nil {
			return err
		}
		s := &x.set
		switch a := a.(type) {
		case *ofpwire.ActionOutput:
			s.output, s.outTable, s.outMiss, s.outCookie = a, x.table, x.miss, x.cookie
		case *ofpwire.ActionPushVLAN:
			s.pushVLAN = a
		case *ofpwire.ActionPopVLAN:
			s.popVLAN = true
		case *ofpwire.ActionPushMPLS:
			s.pushMPLS = a
		case *ofpwire.ActionPopMPLS:
			s.popMPLS = a
		case *ofpwire.ActionPushPBB:
			s.pushPBB = a
		case *ofpwire.ActionPopPBB:
			s.popPBB = true
		case *ofpwire.ActionCopyTTLIn:
			s.copyTTLIn = true
		case *ofpwire.ActionCopyTTLOut:
			s.copyTTLOut = true
		case *ofpwire.ActionDecNwTTL:
			s.decTTL = true
		case *ofpwire.ActionDecMPLSTTL:
			s.decMPLSTTL = true
		case *ofpwire.ActionSetNwTTL:
			s.setTTL = a
		case *ofpwire.ActionSetMPLSTTL:
			s.setMPLSTTL = a
		case *ofpwire.ActionSetQueue:
			s.queue = true
		case *ofpwire.ActionSetField:
			s.fields[a.Field.Field] = a
		case *ofpwire.ActionGroup:
			s.group, s.outTable, s.outMiss, s.outCookie = a, x.table, x.miss, x.cookie
		}
	}
	return nil
}

// The argument-free actions the action set records as flags.
var (
	actCopyTTLIn  = &ofpwire.ActionCopyTTLIn{}
	actCopyTTLOut = &ofpwire.ActionCopyTTLOut{}
	actPopVLAN    = &ofpwire.ActionPopVLAN{}
	actPopPBB     = &ofpwire.ActionPopPBB{}
	actDecMPLSTTL = &ofpwire.ActionDecMPLSTTL{}
	actDecNwTTL   = &ofpwire.ActionDecNwTTL{}
)

// executeSet runs the action set in the order of OpenFlow 1.3 §5.10 (see
// the package doc). Set-queue has nothing to run.
func (x *xlator) executeSet() error {
	s := &x.set
	if x.tr != nil && *s != (actionSet{}) {
		x.traceEvent(TraceEvent{Kind: TraceActionSet, Text: "executing the action set:"})
		x.tind++
	}
	var seq [16]ofpwire.Action
	n := 0
	add := func(a ofpwire.Action, ok bool) {
		if ok {
			seq[n] = a
			n++
		}
	}
	add(actCopyTTLIn, s.copyTTLIn)
	add(actPopVLAN, s.popVLAN)
	add(actPopPBB, s.popPBB)
	add(s.popMPLS, s.popMPLS != nil)
	add(s.pushMPLS, s.pushMPLS != nil)
	add(s.pushPBB, s.pushPBB != nil)
	add(s.pushVLAN, s.pushVLAN != nil)
	add(actCopyTTLOut, s.copyTTLOut)
	add(actDecMPLSTTL, s.decMPLSTTL)
	add(actDecNwTTL, s.decTTL)
	add(s.setTTL, s.setTTL != nil)
	add(s.setMPLSTTL, s.setMPLSTTL != nil)
	for _, a := range seq[:n] {
		if err := x.doAction(a, x.table, x.miss); err != nil || x.stopped {
			return err
		}
	}
	for _, f := range s.fields {
		if f != nil {
			if err := x.doAction(f, x.table, x.miss); err != nil {
				return err
			}
		}
	}
	if s.group != nil {
		x.cookie = s.outCookie
		return x.group(s.group.Group, s.outTable, s.outMiss, true)
	}
	if s.output != nil {
		x.cookie = s.outCookie
		return x.doAction(s.output, s.outTable, s.outMiss)
	}
	return nil
}

// doAction translates one OpenFlow action executed now; table and miss
// describe the entry it came from (for packet-in).
func (x *xlator) doAction(a ofpwire.Action, table uint8, miss bool) error {
	if err := x.flushPending(); err != nil {
		return err
	}
	if x.tr != nil {
		x.traceAction(a)
	}
	switch a := a.(type) {
	case *ofpwire.ActionOutput:
		return x.output(a, table, miss)
	case *ofpwire.ActionSetField:
		return x.setField(a)
	case *ofpwire.ActionPushVLAN:
		return x.pushVLAN(a.EtherType)
	case *ofpwire.ActionPopVLAN:
		return x.popVLAN()
	case *ofpwire.ActionSetNwTTL:
		if !x.isIP() {
			return nil
		}
		x.key.NwTTL = a.TTL
		x.written.NwTTL = 0xff
		x.unknown.NwTTL = 0
		return x.emit(actions.Action{Kind: actions.SetIPTTL, Val8: a.TTL})
	case *ofpwire.ActionDecNwTTL:
		return x.decTTL(table)
	case *ofpwire.ActionGroup:
		return x.group(a.Group, table, miss, false)
	case *ofpwire.ActionPushMPLS:
		return x.pushMPLS(a.EtherType)
	case *ofpwire.ActionPopMPLS:
		return x.popMPLS(a.EtherType)
	case *ofpwire.ActionPushPBB:
		return x.pushPBB()
	case *ofpwire.ActionPopPBB:
		return x.popPBB()
	case *ofpwire.ActionSetMPLSTTL:
		return x.setMPLSTTL(a.TTL)
	case *ofpwire.ActionDecMPLSTTL:
		return x.decMPLSTTL(table)
	case *ofpwire.ActionCopyTTLOut:
		return x.copyTTLOut()
	case *ofpwire.ActionCopyTTLIn:
		return x.copyTTLIn()
	case *ofpwire.ActionSetQueue:
		if x.tr != nil {
			x.traceNote(TraceAction, "set_queue: the switch has no queues, nothing to do")
		}
		return nil
	default:
		return unsupportedAction(a)
	}
}

func (x *xlator) isIP() bool {
	x.consult(&flow.Mask{EthType: 0xffff})
	return x.key.EthType == ethIPv4 || x.key.EthType == ethIPv6
}

func (x *xlator) decTTL(table uint8) error {
	if !x.isIP() {
		return nil // OpenFlow leaves dec-TTL on non-IP undefined; do nothing, as OVS
	}
	x.consult(&flow.Mask{NwTTL: 0xff})
	if x.key.NwTTL <= 1 {
		return x.invalidTTL(table, x.key.NwTTL)
	}
	x.key.NwTTL--
	x.written.NwTTL = 0xff
	return x.emit(actions.Action{Kind: actions.DecIPTTL})
}

// invalidTTL ends processing of a packet whose TTL a decrement found at
// ttl (0 or 1): OpenFlow 1.3 sends it to the controller with
// OFPR_INVALID_TTL, unless configured (or the in_port's config) not to.
func (x *xlator) invalidTTL(table, ttl uint8) error {
	x.stopped = true
	if x.tr != nil {
		x.traceNote(TraceDrop, fmt.Sprintf("invalid TTL %d: processing stops", ttl))
	}
	if x.opts.NoInvalidTTLToController || !x.packetInAllowed() {
		return nil
	}
	return x.emit(actions.ControllerAction(ControllerArg(ofp.PacketInReasonInvalidTTL, table, 0xffff), x.cookie, x.md))
}

// allVLAN is the mask of both VLAN tags.
var allVLAN = [2]flow.VLANTag{{TPID: 0xffff, TCI: 0xffff}, {TPID: 0xffff, TCI: 0xffff}}

// vlanShift handles push and pop conservatively: the tags move between the
// key's two slots, which bit-position tracking cannot follow, so every
// original tag bit is consulted and the tags count as written afterwards.
func (x *xlator) vlanShift() {
	x.consult(&flow.Mask{VLAN: allVLAN})
	x.written.VLAN = allVLAN
}

func (x *xlator) pushVLAN(tpid uint16) error {
	x.vlanShift()
	// OpenFlow 1.3's push-tag rule: VID and PCP of the new tag come from
	// the existing outer tag, or are 0 when there is none.
	tci := uint16(0)
	if x.key.VLAN[0].TPID&flow.TPIDPresent != 0 {
		tci = x.key.VLAN[0].TCI
	}
	x.key.VLAN[1] = x.key.VLAN[0]
	x.key.VLAN[0] = flow.VLANTag{TPID: tpid, TCI: tci}
	x.tags++
	return x.emit(actions.Action{Kind: actions.PushVLAN, Val16: tpid, Val16b: tci})
}

func (x *xlator) popVLAN() error {
	x.vlanShift()
	if x.key.VLAN[0].TPID&flow.TPIDPresent == 0 {
		return nil // no tag: nothing to pop
	}
	x.key.VLAN[0] = x.key.VLAN[1]
	x.key.VLAN[1] = flow.VLANTag{}
	x.tags--
	return x.emit(actions.Action{Kind: actions.PopVLAN})
}

// output translates an output action. Every kind of output depends on
// in_port (a plain port equal to in_port drops, ALL/FLOOD skip it), so
// in_port is always consulted.
func (x *xlator) output(a *ofpwire.ActionOutput, table uint8, miss bool) error {
	x.consult(&flow.Mask{InPort: ^uint32(0)})
	in := x.key.InPort
	switch a.Port {
	case ofp.PortIn:
		return x.outputPort(in)
	case ofp.PortController:
		if !x.packetInAllowed() {
			return nil
		}
		reason := ofp.PacketInReasonAction
		if miss {
			reason = ofp.PacketInReasonNoMatch
		}
		return x.emit(actions.ControllerAction(ControllerArg(reason, table, a.MaxLen), x.cookie, x.md))
	case ofp.PortAll, ofp.PortFlood:
		ports := x.opts.Ports
		if a.Port == ofp.PortFlood && x.opts.FloodPorts != nil {
			ports = x.opts.FloodPorts
		}
		for _, p := range ports {
			if p != in {
				if err := x.outputPort(p); err != nil {
					return err
				}
			}
		}
		return nil
	case ofp.PortLocal:
		if lp := x.opts.LocalPort; lp != 0 && lp != in {
			return x.outputPort(lp)
		}
		if x.tr != nil {
			x.traceNote(TraceDrop, "no LOCAL port, or it is the in_port: dropped")
		}
		return nil
	case ofp.PortNormal:
		if x.opts.Normal == nil {
			return fmt.Errorf("%w: output to NORMAL", ErrUnsupported)
		}
		return x.normal()
	case ofp.PortTable:
		return x.outputTable()
	case ofp.PortAny:
		return fmt.Errorf("%w: output to ANY, which names no port", ErrUnsupported)
	}
	if a.Port > ofp.PortMax {
		return fmt.Errorf("%w: output to reserved port %#x", ErrUnsupported, uint32(a.Port))
	}
	if uint32(a.Port) == in {
		// OpenFlow sends back to in_port only through OFPP_IN_PORT.
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("skipping output to input port %d", in))
		}
		return nil
	}
	return x.outputPort(uint32(a.Port))
}

// Port config bits that stop a port receiving or sending.
const (
	recvBlocked = ofp.PortConfigNoRcv | ofp.PortConfigDown
	fwdBlocked  = ofp.PortConfigNoFwd | ofp.PortConfigDown
)

// outputPort emits output to port unless its config forbids forwarding.
// The config is not a key field, so nothing joins the mask.
func (x *xlator) outputPort(port uint32) error {
	if x.opts.PortConfig != nil && !x.forwards(port) {
		return nil
	}
	return x.emit(actions.Action{Kind: actions.Output, Port: port})
}

// forwards reports whether port's config (PortConfig must be set) lets
// packets out of it.
func (x *xlator) forwards(port uint32) bool {
	cfg := x.opts.PortConfig(port)
	if cfg&fwdBlocked == 0 {
		return true
	}
	if x.tr != nil {
		x.traceNote(TraceDrop, fmt.Sprintf("output:%d skipped: port config %s", port, configText(cfg&fwdBlocked)))
	}
	return false
}

// received reports whether the in_port's config (PortConfig must be set)
// lets the packet in. The
// answer depends on in_port whenever some port refuses to receive, so
// in_port then joins the mask even when this packet's port accepts: a
// megaflow without it would also catch the refusing port's packets.
func (x *xlator) received() bool {
	pc := x.opts.PortConfig
	cfg := pc(x.key.InPort)
	anyBlocked := cfg&recvBlocked != 0
	for _, p := range x.opts.Ports {
		if anyBlocked {
			break
		}
		anyBlocked = pc(p)&recvBlocked != 0
	}
	if anyBlocked {
		x.consult(&flow.Mask{InPort: ^uint32(0)})
	}
	if cfg&recvBlocked != 0 {
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("in_port %d has port config %s: packet dropped on receive",
				x.key.InPort, configText(cfg&recvBlocked)))
		}
		return false
	}
	return true
}

// packetInAllowed reports whether the in_port's config allows sending the
// packet to the controller, consulting in_port when it has to ask.
func (x *xlator) packetInAllowed() bool {
	pc := x.opts.PortConfig
	if pc == nil {
		return true
	}
	x.consult(&flow.Mask{InPort: ^uint32(0)})
	if pc(x.key.InPort)&ofp.PortConfigNoPacketIn != 0 {
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("in_port %d is NO_PACKET_IN: no packet-in", x.key.InPort))
		}
		return false
	}
	return true
}

// floodable reports whether a NORMAL flood may include port: FloodPorts,
// when set, lists the ports without NO_FLOOD.
func (x *xlator) floodable(port uint32) bool {
	if x.opts.FloodPorts == nil || len(x.opts.FloodPorts) == len(x.opts.Ports) {
		return true // a subset of Ports as long as Ports leaves nothing out
	}
	for _, p := range x.opts.FloodPorts {
		if p == port {
			return true
		}
	}
	return false
}

// tagState is the outer 802.1Q tag of the packet as the datapath holds it
// while NORMAL's outputs are emitted.
type tagState struct {
	present bool
	tpid    uint16
	tci     uint16
}

// normal translates output to OFPP_NORMAL: the switch decides on the
// working key, each output gets the tag treatment it asks for, and the
// packet is put back in its pre-NORMAL tag state afterwards, because NORMAL
// does not rewrite the packet the rest of the pipeline sees. The fields the
// decision read are added to the mask (those still original).
func (x *xlator) normal() error {
	d := &x.dec
	if x.tr != nil {
		x.decideWithoutLearning(d)
	} else {
		x.opts.Normal.DecideInto(&x.key, x.opts.Now, d)
	}
	var m flow.Mask
	d.Deps.AddToMask(&m)
	x.consult(&m)
	x.filterNormal(d)
	if x.tr != nil {
		x.traceNormal(d)
	}
	orig := tagState{present: x.key.VLAN[0].TPID&flow.TPIDPresent != 0,
		tpid: x.key.VLAN[0].TPID, tci: x.key.VLAN[0].TCI}
	cur := orig
	for _, o := range d.Outputs {
		if o.VLAN == normal.VLANPop {
			// The popped tag is pushed back afterwards, rebuilt whole:
			// its TPID and PCP become part of the answer.
			x.consult(&flow.Mask{VLAN: [2]flow.VLANTag{{TPID: 0xffff, TCI: 0xffff}}})
			break
		}
	}
	for _, o := range d.Outputs {
		want := orig
		switch o.VLAN {
		case normal.VLANPush:
			want = tagState{present: true, tpid: 0x8100, tci: o.VID & 0x0fff}
		case normal.VLANPop:
			want = tagState{}
		case normal.VLANRewrite:
			want.tci = orig.tci&^0x0fff | o.VID&0x0fff
		}
		if err := x.retag(&cur, want); err != nil {
			return err
		}
		if err := x.emit(actions.Action{Kind: actions.Output, Port: o.Port}); err != nil {
			return err
		}
	}
	return x.retag(&cur, orig)
}

// filterNormal drops, in place, the outputs of d that port config forbids:
// ports with NO_FWD or PORT_DOWN, and, in a flood, ports left out of
// FloodPorts (NO_FLOOD). A learned destination is reached even when it is
// NO_FLOOD, as NO_FLOOD only keeps a port out of floods.
func (x *xlator) filterNormal(d *normal.Decision) {
	pc := x.opts.PortConfig
	if pc == nil && x.opts.FloodPorts == nil {
		return
	}
	n := 0
	for _, o := range d.Outputs {
		if pc != nil && pc(o.Port)&fwdBlocked != 0 {
			if x.tr != nil {
				x.traceNote(TraceDrop, fmt.Sprintf("NORMAL: output:%d skipped: port config %s", o.Port, configText(pc(o.Port)&fwdBlocked)))
			}
			continue
		}
		if d.Flooded && !x.floodable(o.Port) {
			if x.tr != nil {
				x.traceNote(TraceDrop, fmt.Sprintf("NORMAL: flood skips port %d (NO_FLOOD)", o.Port))
			}
			continue
		}
		d.Outputs[n] = o
		n++
	}
	d.Outputs = d.Outputs[:n]
}

// retag emits the datapath actions that take the outer tag from *cur to
// want, and records want in *cur.
func (x *xlator) retag(cur *tagState, want tagState) error {
	var err error
	switch {
	case *cur == want:
		return nil
	case cur.present && !want.present:
		err = x.emit(actions.Action{Kind: actions.PopVLAN})
	case !cur.present && want.present:
		err = x.emit(actions.Action{Kind: actions.PushVLAN, Val16: want.tpid, Val16b: want.tci})
	default:
		msk := uint16(0x0fff)
		if (cur.tci^want.tci)&^0x0fff != 0 {
			msk = 0xffff
		}
		err = x.emit(actions.Action{Kind: actions.SetVLANTCI, Val16: msk, Val16b: want.tci & msk})
	}
	*cur = want
	return err
}

// errTags reports a group bucket whose VLAN pushes and pops undo cannot
// reverse.
var errTags = fmt.Errorf("%w: group bucket VLAN changes that cannot be undone", ErrUnsupported)

// maxGroupDepth bounds groups run inside group buckets; GROUP_MOD refuses
// loops, so this only guards that invariant.
const maxGroupDepth = 32

func allLive(uint32) bool { return true }

// group translates the group action for group id; final is set when it is
// the last thing the translation does (from the action set), so the last
// bucket need not undo its rewrites.
func (x *xlator) group(id ofp.Group, table uint8, miss, final bool) error {
	if x.opts.Groups == nil {
		return fmt.Errorf("%w: group action", ErrUnsupported)
	}
	if x.depth >= maxGroupDepth {
		return ErrLoop
	}
	t := x.opts.Groups
	g := t.Get(id)
	if g == nil {
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("group %d does not exist: dropped", id))
		}
		return nil // unknown group: drop
	}
	x.refs = append(x.refs, g) // the group counts the megaflow's traffic
	x.depth++
	err := x.runGroup(t, g, table, miss, final)
	x.depth--
	return err
}

func (x *xlator) runGroup(t *pipeline.GroupTable, g *pipeline.Group, table uint8, miss, final bool) error {
	live := x.opts.PortLive
	if live == nil {
		live = allLive
	}
	switch g.Type() {
	case ofp.GroupTypeAll:
		bs := g.Buckets()
		for i := range bs {
			if x.tr != nil {
				x.traceGroup(g, &bs[i])
			}
			if err := x.bucket(&bs[i], table, miss, final && i == len(bs)-1); err != nil {
				return err
			}
		}
		return nil
	case ofp.GroupTypeIndirect:
		var b *pipeline.Bucket
		if bs := g.Buckets(); len(bs) > 0 {
			b = &bs[0]
		}
		return x.chosenBucket(g, b, table, miss, final)
	case ofp.GroupTypeFastFailover:
		return x.chosenBucket(g, t.FirstLive(g, live), table, miss, final)
	case ofp.GroupTypeSelect:
		return x.chosenBucket(g, t.SelectBucket(g, x.flowHash(), x.opts.PortLive), table, miss, final)
	}
	return fmt.Errorf("%w: group type %d", ErrUnsupported, g.Type())
}

// chosenBucket runs b, the one bucket an INDIRECT, FAST_FAILOVER or
// SELECT group picked; nil (no bucket, none live) drops.
func (x *xlator) chosenBucket(g *pipeline.Group, b *pipeline.Bucket, table uint8, miss, final bool) error {
	if x.tr != nil {
		x.traceGroup(g, b)
	}
	if b == nil {
		return nil
	}
	return x.bucket(b, table, miss, final)
}

// flowHash hashes the packet (as rewritten so far) for SELECT groups,
// consulting the fields it hashes: the Ethernet addresses, type and VLAN
// IDs always, so that traffic varying only at L2 spreads too; then, when
// present, the IP protocol and addresses (IPv4, IPv6, or ARP's protocol
// addresses) and the transport ports (ICMP type and code). Fields a packet
// cannot have are left out, to keep its megaflows as wide as they can be.
func (x *xlator) flowHash() uint32 {
	var m flow.Mask
	m.EthSrc, m.EthDst, m.EthType = ones6, ones6, 0xffff
	m.VLAN[0].TCI, m.VLAN[1].TCI = 0x0fff, 0x0fff
	x.consult(&flow.Mask{EthType: 0xffff})
	switch x.key.EthType {
	case ethIPv4, ethIPv6:
		m.NwProto = 0xff
		if x.key.EthType == ethIPv4 {
			m.IPv4Src, m.IPv4Dst = ^uint32(0), ^uint32(0)
		} else {
			m.IPv6Src, m.IPv6Dst = ones16, ones16
		}
		x.consult(&flow.Mask{NwProto: 0xff, NwFrag: flow.FragLater})
		switch x.key.NwProto {
		case protoTCP, protoUDP, protoSCTP, protoICMP, protoICMPv6:
			if x.key.NwFrag&flow.FragLater == 0 {
				m.TpSrc, m.TpDst = 0xffff, 0xffff
			}
		}
	case ethARP:
		m.IPv4Src, m.IPv4Dst = ^uint32(0), ^uint32(0)
	}
	x.consult(&m)
	var k flow.Key
	x.key.ApplyMask(&m, &k)
	return k.Hash()
}

// bucket runs one bucket's actions on a clone of the packet and, unless
// final, emits the actions that undo its rewrites.
func (x *xlator) bucket(b *pipeline.Bucket, table uint8, miss, final bool) error {
	x.refs = append(x.refs, b)
	saved := x.save()
	x.tind++
	for _, a := range b.Actions {
		if err := x.doAction(a, table, miss); err != nil {
			return err
		}
		if x.stopped {
			break
		}
	}
	x.tind--
	x.stopped = false // an invalid TTL ends this clone only
	x.md = saved.md   // metadata a bucket wrote does not leave it
	if final {
		return nil
	}
	if x.irrev != saved.irrev {
		return errIrreversible
	}
	return x.undo(&saved)
}

var ones16 = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// undo emits the actions that take the packet back to saved (the walk's
// state before a bucket or an output to TABLE) and resets the walk's state
// to it. A field is restored when it was written for the first time (its
// value may differ packet to packet) or changed its value; the restored
// values are consulted, as seen before.
func (x *xlator) undo(saved *savedState) error {
	var ch flow.Mask
	cw, kw, sk, nw, ow := ch.Words(), x.key.Words(), saved.key.Words(), x.written.Words(), saved.written.Words()
	for i := range cw {
		cw[i] = nw[i]&^ow[i] | (kw[i] ^ sk[i])
	}
	cur, net := x.key, x.tags-saved.tags
	x.key, x.written, x.unknown, x.tags, x.inner = saved.key, saved.written, saved.unknown, saved.tags, saved.inner
	var need flow.Mask
	err := x.undoFields(&cur, &saved.key, &ch, &need, net)
	x.consult(&need)
	return err
}

func (x *xlator) undoFields(cur, saved *flow.Key, ch, need *flow.Mask, net int) error {
	// VLAN tags: push/pop already consulted every tag bit.
	switch net {
	case 0:
		if ch.VLAN[0].TCI == 0 && ch.VLAN[0].TPID == 0 {
			break
		}
		if cur.VLAN[0].TPID != saved.VLAN[0].TPID || cur.VLAN[1] != saved.VLAN[1] {
			return errTags
		}
		if m := ch.VLAN[0].TCI; m != 0 && saved.VLAN[0].TPID&flow.TPIDPresent != 0 {
			need.VLAN[0].TCI |= m
			if err := x.emit(actions.Action{Kind: actions.SetVLANTCI, Val16: m, Val16b: saved.VLAN[0].TCI & m}); err != nil {
				return err
			}
		}
	case 1:
		if cur.VLAN[1] != saved.VLAN[0] {
			return errTags
		}
		if err := x.emit(actions.Action{Kind: actions.PopVLAN}); err != nil {
			return err
		}
	case -1:
		inner := saved.VLAN[1]
		if cur.VLAN[0].TPID != inner.TPID {
			return errTags
		}
		if cur.VLAN[0].TCI != inner.TCI {
			if err := x.emit(actions.Action{Kind: actions.SetVLANTCI, Val16: 0xffff, Val16b: inner.TCI}); err != nil {
				return err
			}
		}
		if err := x.emit(actions.Action{Kind: actions.PushVLAN, Val16: saved.VLAN[0].TPID, Val16b: saved.VLAN[0].TCI}); err != nil {
			return err
		}
	default:
		return errTags
	}

	return x.undoHeaders(saved, ch, need)
}

// errARPOpUndo reports a bucket that rewrote the ARP opcode of a packet
// whose opcode the key does not hold (above 255, kept as 0).
var errARPOpUndo = fmt.Errorf("%w: group bucket ARP opcode change that cannot be undone", ErrUnsupported)

// undoHeaders emits the restores of every header field but the VLAN tags.
// The ICMP type and code go back before the neighbour discovery fields,
// which the datapath only rewrites in an ND message.
func (x *xlator) undoHeaders(saved *flow.Key, ch, need *flow.Mask) error {
	var acts [26]actions.Action
	n := 0
	add := func(a actions.Action) {
		acts[n] = a
		n++
	}
	addr := func(kind actions.Kind, b []byte) {
		a := actions.Action{Kind: kind}
		copy(a.Addr[:], b)
		add(a)
	}
	be32 := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	arp := saved.EthType == ethARP
	icmp := saved.EthType == ethIPv4 && saved.NwProto == protoICMP || saved.EthType == ethIPv6 && saved.NwProto == protoICMPv6
	if ch.EthSrc != ([6]byte{}) {
		addr(actions.SetEthSrc, saved.EthSrc[:])
		need.EthSrc = ones6
	}
	if ch.EthDst != ([6]byte{}) {
		addr(actions.SetEthDst, saved.EthDst[:])
		need.EthDst = ones6
	}
	if m := ch.NwTOS; m != 0 {
		add(actions.Action{Kind: actions.SetIPTOS, Val8: saved.NwTOS & m, Mask8: m})
		need.NwTOS |= m
	}
	if ch.NwTTL != 0 {
		add(actions.Action{Kind: actions.SetIPTTL, Val8: saved.NwTTL})
		need.NwTTL = 0xff
	}
	if ch.IPv4Src != 0 {
		addr(ipv4SetKind(arp, true), be32(saved.IPv4Src))
		need.IPv4Src = ^uint32(0)
	}
	if ch.IPv4Dst != 0 {
		addr(ipv4SetKind(arp, false), be32(saved.IPv4Dst))
		need.IPv4Dst = ^uint32(0)
	}
	if ch.IPv6Src != ([16]byte{}) {
		addr(actions.SetIPv6Src, saved.IPv6Src[:])
		need.IPv6Src = ones16
	}
	if ch.IPv6Dst != ([16]byte{}) {
		addr(actions.SetIPv6Dst, saved.IPv6Dst[:])
		need.IPv6Dst = ones16
	}
	if ch.TpSrc != 0 {
		if icmp {
			add(actions.Action{Kind: actions.SetICMPType, Val8: uint8(saved.TpSrc)})
		} else {
			add(actions.Action{Kind: actions.SetL4Src, Val16: saved.TpSrc})
		}
		need.TpSrc = 0xffff
	}
	if ch.TpDst != 0 {
		if icmp {
			add(actions.Action{Kind: actions.SetICMPCode, Val8: uint8(saved.TpDst)})
		} else {
			add(actions.Action{Kind: actions.SetL4Dst, Val16: saved.TpDst})
		}
		need.TpDst = 0xffff
	}
	if ch.NwProto != 0 && arp {
		if saved.NwProto == 0 {
			return errARPOpUndo
		}
		add(actions.Action{Kind: actions.SetARPOp, Val16: uint16(saved.NwProto)})
		need.NwProto = 0xff
	}
	if ch.NDTarget != ([16]byte{}) {
		addr(actions.SetNDTarget, saved.NDTarget[:])
		need.NDTarget = ones16
	}
	if ch.ArpSHA != ([6]byte{}) {
		kind := actions.SetNDSLL
		if arp {
			kind = actions.SetARPSHA
		}
		addr(kind, saved.ArpSHA[:])
		need.ArpSHA = ones6
	}
	if ch.ArpTHA != ([6]byte{}) {
		kind := actions.SetNDTLL
		if arp {
			kind = actions.SetARPTHA
		}
		addr(kind, saved.ArpTHA[:])
		need.ArpTHA = ones6
	}
	if ch.IPv6Label != 0 {
		add(actions.Action{Kind: actions.SetIPv6Label, Port: saved.IPv6Label})
		need.IPv6Label = ^uint32(0)
	}
	lse := saved.MPLSLse
	if ch.MPLSLse&lseLabel != 0 {
		add(actions.Action{Kind: actions.SetMPLSLabel, Port: lse >> 12})
		need.MPLSLse |= lseLabel
	}
	if ch.MPLSLse&lseTC != 0 {
		add(actions.Action{Kind: actions.SetMPLSTC, Val8: uint8(lse>>9) & 7})
		need.MPLSLse |= lseTC
	}
	if ch.MPLSLse&lseTTL != 0 {
		add(actions.Action{Kind: actions.SetMPLSTTL, Val8: uint8(lse)})
		need.MPLSLse |= lseTTL
	}
	if ch.MPLSLse&lseBoS != 0 {
		add(actions.Action{Kind: actions.SetMPLSBoS, Val8: uint8(lse>>8) & 1})
		need.MPLSLse |= lseBoS
	}
	if ch.PBBISID != 0 {
		add(actions.Action{Kind: actions.SetPBBISID, Port: saved.PBBISID})
		need.PBBISID = ^uint32(0)
	}
	if ch.TunnelID != 0 {
		a := actions.Action{Kind: actions.SetTunnelID}
		binary.BigEndian.PutUint64(a.Addr[:8], saved.TunnelID)
		add(a)
		need.TunnelID = ^uint64(0)
	}
	if ch.Tun.Src != ([16]byte{}) {
		add(actions.Action{Kind: actions.SetTunnelSrc, Addr: saved.Tun.Src})
		need.Tun.Src = ones16
	}
	if ch.Tun.Dst != ([16]byte{}) {
		add(actions.Action{Kind: actions.SetTunnelDst, Addr: saved.Tun.Dst})
		need.Tun.Dst = ones16
	}
	for _, a := range acts[:n] {
		if err := x.emit(a); err != nil {
			return err
		}
	}
	return nil
}

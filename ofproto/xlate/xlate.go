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
// Not supported yet (Translate returns an error wrapping ErrUnsupported):
// the meter instruction (meters are configured and reported, not enforced);
// set-queue, push/pop MPLS, push/pop PBB,
// copy-TTL in/out, set/dec MPLS TTL and experimenter actions; set-field on
// any field but ETH_SRC/DST, VLAN_VID/PCP, IP_DSCP/ECN, IPV4_SRC/DST,
// IPV6_SRC/DST and TCP/UDP/SCTP ports, and masked set-field; output to
// OFPP_NORMAL when Options.Normal is nil, OFPP_TABLE and OFPP_ANY (and
// reserved numbers above OFPP_MAX).
//
// The group action runs each bucket chosen (ALL: every bucket; INDIRECT:
// its bucket; FAST_FAILOVER: the first live one; SELECT: one picked from a
// hash of eth_type, IP protocol, IP addresses and L4 ports, all of which go
// in the mask) as an action list on a clone of the packet: after a bucket,
// actions are emitted that set every field it rewrote back to its
// pre-bucket value (those values join the mask), so the next bucket and the
// actions after the group see the packet unchanged. The last bucket of a
// group run from the action set needs no such undo. A bucket whose VLAN
// pushes and pops cannot be undone that way (more than one net push or pop,
// or a TPID change) is unsupported. An unknown group drops. The group and
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
	"errors"
	"fmt"
	"time"

	"vswitch/datapath"
	"vswitch/datapath/actions"
	"vswitch/datapath/flow"
	"vswitch/ofproto/normal"
	"vswitch/ofproto/ofpwire"
	"vswitch/ofproto/pipeline"

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
	popVLAN  bool
	pushVLAN *ofpwire.ActionPushVLAN
	decTTL   bool
	setTTL   *ofpwire.ActionSetNwTTL
	fields   [ofpwire.NumBasicFields]*ofpwire.ActionSetField
	output   *ofpwire.ActionOutput
	group    *ofpwire.ActionGroup // takes precedence over output
	outTable uint8                // table of the entry that wrote output (packet-in table id)
	outMiss  bool                 // that entry was a table-miss entry
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
	// tr is non-nil only for TranslateTrace: every step is recorded there
	// and NORMAL does not learn. Every use is behind a nil check, so a
	// plain Translate pays one compare per record point.
	tr   *Trace
	tind int // trace nesting: group buckets and the action set indent
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
	var md uint64
	tid := uint8(0)
	for step := 0; ; step++ {
		if step >= maxSteps {
			return ErrLoop
		}
		var wc flow.Mask
		var e *pipeline.Entry
		if x.tr == nil {
			e = x.p.LookupLocked(tid, &x.key, md, &wc, nil)
		} else {
			e = x.p.PeekLocked(tid, &x.key, md, &wc, nil)
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
		x.table, x.miss = tid, isTableMiss(e)
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
				md = md&^in.Mask | in.Metadata&in.Mask
				if x.tr != nil {
					x.traceMetadata(in, md)
				}
			case *ofpwire.InstrGotoTable:
				next, gotoTable = in.TableID, true
				if x.tr != nil {
					x.traceEvent(TraceEvent{Kind: TraceGoto, Table: in.TableID,
						Text: fmt.Sprintf("goto_table:%d", in.TableID)})
				}
			case *ofpwire.InstrMeter:
				err = fmt.Errorf("%w: meter instruction", ErrUnsupported)
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
func isTableMiss(e *pipeline.Entry) bool {
	return e.Priority == 0 && e.Match.Mask.IsZero() && e.Match.MetadataMask == 0
}

// consult adds to the mask the bits of m that still hold the original
// packet's value.
func (x *xlator) consult(m *flow.Mask) {
	a, w, r := m.Words(), x.written.Words(), x.mask.Words()
	for i := range a {
		r[i] |= a[i] &^ w[i]
	}
}

// consultField is consult for one field given as a mask with only that
// field's bits set.
func (x *xlator) consultField(set func(m *flow.Mask)) {
	var m flow.Mask
	set(&m)
	x.consult(&m)
}

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
		*ofpwire.ActionDecNwTTL, *ofpwire.ActionSetNwTTL, *ofpwire.ActionGroup:
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
		switch a := a.(type) {
		case *ofpwire.ActionOutput:
			x.set.output, x.set.outTable, x.set.outMiss = a, x.table, x.miss
		case *ofpwire.ActionPushVLAN:
			x.set.pushVLAN = a
		case *ofpwire.ActionPopVLAN:
			x.set.popVLAN = true
		case *ofpwire.ActionDecNwTTL:
			x.set.decTTL = true
		case *ofpwire.ActionSetNwTTL:
			x.set.setTTL = a
		case *ofpwire.ActionSetField:
			x.set.fields[a.Field.Field] = a
		case *ofpwire.ActionGroup:
			x.set.group, x.set.outTable, x.set.outMiss = a, x.table, x.miss
		}
	}
	return nil
}

// executeSet runs the action set in the order of OpenFlow 1.3 §5.10 (the
// kinds this package supports: pop, push VLAN, dec TTL, set, output).
func (x *xlator) executeSet() error {
	s := &x.set
	if x.tr != nil && *s != (actionSet{}) {
		x.traceEvent(TraceEvent{Kind: TraceActionSet, Text: "executing the action set:"})
		x.tind++
	}
	if s.popVLAN {
		if err := x.doAction(&ofpwire.ActionPopVLAN{}, x.table, x.miss); err != nil {
			return err
		}
	}
	if s.pushVLAN != nil {
		if err := x.doAction(s.pushVLAN, x.table, x.miss); err != nil {
			return err
		}
	}
	if s.decTTL {
		if err := x.doAction(&ofpwire.ActionDecNwTTL{}, x.table, x.miss); err != nil || x.stopped {
			return err
		}
	}
	if s.setTTL != nil {
		if err := x.doAction(s.setTTL, x.table, x.miss); err != nil {
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
		return x.group(s.group.Group, s.outTable, s.outMiss, true)
	}
	if s.output != nil {
		return x.doAction(s.output, s.outTable, s.outMiss)
	}
	return nil
}

// doAction translates one OpenFlow action executed now; table and miss
// describe the entry it came from (for packet-in).
func (x *xlator) doAction(a ofpwire.Action, table uint8, miss bool) error {
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
		return x.emit(actions.Action{Kind: actions.SetIPTTL, Val8: a.TTL})
	case *ofpwire.ActionDecNwTTL:
		return x.decTTL(table)
	case *ofpwire.ActionGroup:
		return x.group(a.Group, table, miss, false)
	default:
		return unsupportedAction(a)
	}
}

func (x *xlator) isIP() bool {
	x.consultField(func(m *flow.Mask) { m.EthType = 0xffff })
	return x.key.EthType == ethIPv4 || x.key.EthType == ethIPv6
}

func (x *xlator) decTTL(table uint8) error {
	if !x.isIP() {
		return nil // OpenFlow leaves dec-TTL on non-IP undefined; do nothing, as OVS
	}
	x.consultField(func(m *flow.Mask) { m.NwTTL = 0xff })
	if x.key.NwTTL <= 1 {
		x.stopped = true
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("invalid TTL %d: processing stops", x.key.NwTTL))
		}
		if x.opts.NoInvalidTTLToController || !x.packetInAllowed() {
			return nil
		}
		return x.emit(actions.Action{Kind: actions.Controller,
			Port: ControllerArg(ofp.PacketInReasonInvalidTTL, table, 0xffff)})
	}
	x.key.NwTTL--
	x.written.NwTTL = 0xff
	return x.emit(actions.Action{Kind: actions.DecIPTTL})
}

// allVLAN is the mask of both VLAN tags.
var allVLAN = [2]flow.VLANTag{{TPID: 0xffff, TCI: 0xffff}, {TPID: 0xffff, TCI: 0xffff}}

// vlanShift handles push and pop conservatively: the tags move between the
// key's two slots, which bit-position tracking cannot follow, so every
// original tag bit is consulted and the tags count as written afterwards.
func (x *xlator) vlanShift() {
	x.consultField(func(m *flow.Mask) { m.VLAN = allVLAN })
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

// setFieldSupported returns the field's value as an integer (for the
// narrow fields) after checking the field is one Translate can set.
func setFieldSupported(a *ofpwire.ActionSetField) (uint64, error) {
	f := a.Field
	if f.Class != ofp.XMClassOpenflowBasic || f.HasMask {
		return 0, fmt.Errorf("%w: masked or non-basic set-field", ErrUnsupported)
	}
	size, _, ok := ofpwire.FieldSize(f.Field)
	if !ok || len(f.Value) != size {
		return 0, fmt.Errorf("%w: set-field %d with %d bytes", ErrUnsupported, f.Field, len(f.Value))
	}
	switch f.Field {
	case ofp.XMTypeEthDst, ofp.XMTypeEthSrc, ofp.XMTypeVlanID, ofp.XMTypeVlanPCP,
		ofp.XMTypeIPDSCP, ofp.XMTypeIPECN, ofp.XMTypeIPv4Src, ofp.XMTypeIPv4Dst,
		ofp.XMTypeIPv6Src, ofp.XMTypeIPv6Dst, ofp.XMTypeTCPSrc, ofp.XMTypeTCPDst,
		ofp.XMTypeUDPSrc, ofp.XMTypeUDPDst, ofp.XMTypeSCTPSrc, ofp.XMTypeSCTPDst:
		if size <= 8 {
			return f.Uint(), nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("%w: set-field on field %d", ErrUnsupported, f.Field)
}

// l4Prereq reports whether the packet is an IPv4/IPv6 first fragment (or
// unfragmented) of protocol proto, consulting the fields that tells.
func (x *xlator) l4Prereq(proto uint8) bool {
	if !x.isIP() {
		return false
	}
	x.consultField(func(m *flow.Mask) { m.NwProto = 0xff; m.NwFrag = flow.FragLater })
	return x.key.NwProto == proto && x.key.NwFrag&flow.FragLater == 0
}

func l4Proto(f ofp.XMType) uint8 {
	switch f {
	case ofp.XMTypeTCPSrc, ofp.XMTypeTCPDst:
		return protoTCP
	case ofp.XMTypeUDPSrc, ofp.XMTypeUDPDst:
		return protoUDP
	}
	return protoSCTP
}

// setField rewrites one field if the packet has it (a set-field whose
// prerequisites the packet does not meet does nothing, as in OVS), and
// emits the datapath action that does the same.
func (x *xlator) setField(a *ofpwire.ActionSetField) error {
	v, err := setFieldSupported(a)
	if err != nil {
		return err
	}
	f := a.Field
	k, w := &x.key, &x.written
	act := actions.Action{}
	switch f.Field {
	case ofp.XMTypeEthDst:
		k.EthDst = [6]byte(f.Value)
		w.EthDst = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		act.Kind = actions.SetEthDst
		copy(act.Addr[:], f.Value)
	case ofp.XMTypeEthSrc:
		k.EthSrc = [6]byte(f.Value)
		w.EthSrc = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		act.Kind = actions.SetEthSrc
		copy(act.Addr[:], f.Value)
	case ofp.XMTypeVlanID, ofp.XMTypeVlanPCP:
		// Sets the outer tag's VID or PCP; no-op without a tag.
		x.consultField(func(m *flow.Mask) { m.VLAN[0].TPID = flow.TPIDPresent })
		if k.VLAN[0].TPID&flow.TPIDPresent == 0 {
			return nil
		}
		val, msk := uint16(v&0x0fff), uint16(0x0fff)
		if f.Field == ofp.XMTypeVlanPCP {
			val, msk = uint16(v&7)<<13, 0xe000
		}
		k.VLAN[0].TCI = k.VLAN[0].TCI&^msk | val
		w.VLAN[0].TCI |= msk
		act = actions.Action{Kind: actions.SetVLANTCI, Val16: msk, Val16b: val}
	case ofp.XMTypeIPDSCP, ofp.XMTypeIPECN:
		if !x.isIP() {
			return nil
		}
		val, msk := uint8(v&0x3f)<<2, uint8(0xfc)
		if f.Field == ofp.XMTypeIPECN {
			val, msk = uint8(v&3), 0x03
		}
		k.NwTOS = k.NwTOS&^msk | val
		w.NwTOS |= msk
		act = actions.Action{Kind: actions.SetIPTOS, Val8: val, Mask8: msk}
	case ofp.XMTypeIPv4Src, ofp.XMTypeIPv4Dst:
		x.consultField(func(m *flow.Mask) { m.EthType = 0xffff })
		if k.EthType != ethIPv4 {
			return nil
		}
		act.Kind = actions.SetIPv4Src
		if f.Field == ofp.XMTypeIPv4Src {
			k.IPv4Src, w.IPv4Src = uint32(v), ^uint32(0)
		} else {
			k.IPv4Dst, w.IPv4Dst = uint32(v), ^uint32(0)
			act.Kind = actions.SetIPv4Dst
		}
		copy(act.Addr[:], f.Value)
	case ofp.XMTypeIPv6Src, ofp.XMTypeIPv6Dst:
		x.consultField(func(m *flow.Mask) { m.EthType = 0xffff })
		if k.EthType != ethIPv6 {
			return nil
		}
		ones := [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		act.Kind = actions.SetIPv6Src
		if f.Field == ofp.XMTypeIPv6Src {
			k.IPv6Src, w.IPv6Src = [16]byte(f.Value), ones
		} else {
			k.IPv6Dst, w.IPv6Dst = [16]byte(f.Value), ones
			act.Kind = actions.SetIPv6Dst
		}
		copy(act.Addr[:], f.Value)
	default: // the L4 ports
		if !x.l4Prereq(l4Proto(f.Field)) {
			return nil
		}
		switch f.Field {
		case ofp.XMTypeTCPSrc, ofp.XMTypeUDPSrc, ofp.XMTypeSCTPSrc:
			k.TpSrc, w.TpSrc = uint16(v), 0xffff
			act.Kind = actions.SetL4Src
		default:
			k.TpDst, w.TpDst = uint16(v), 0xffff
			act.Kind = actions.SetL4Dst
		}
		act.Val16 = uint16(v)
	}
	return x.emit(act)
}

// output translates an output action. Every kind of output depends on
// in_port (a plain port equal to in_port drops, ALL/FLOOD skip it), so
// in_port is always consulted.
func (x *xlator) output(a *ofpwire.ActionOutput, table uint8, miss bool) error {
	x.consultField(func(m *flow.Mask) { m.InPort = ^uint32(0) })
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
		return x.emit(actions.Action{Kind: actions.Controller, Port: ControllerArg(reason, table, a.MaxLen)})
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
		return fmt.Errorf("%w: output to TABLE", ErrUnsupported)
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
		x.consultField(func(m *flow.Mask) { m.InPort = ^uint32(0) })
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
	x.consultField(func(m *flow.Mask) { m.InPort = ^uint32(0) })
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
			x.consultField(func(m *flow.Mask) { m.VLAN[0] = flow.VLANTag{TPID: 0xffff, TCI: 0xffff} })
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

// flowHash hashes the packet's 5-tuple (as rewritten so far) for SELECT
// groups, consulting those fields.
func (x *xlator) flowHash() uint32 {
	var m flow.Mask
	m.EthType, m.NwProto = 0xffff, 0xff
	m.IPv4Src, m.IPv4Dst = ^uint32(0), ^uint32(0)
	for i := range m.IPv6Src {
		m.IPv6Src[i], m.IPv6Dst[i] = 0xff, 0xff
	}
	m.TpSrc, m.TpDst = 0xffff, 0xffff
	x.consult(&m)
	var k flow.Key
	x.key.ApplyMask(&m, &k)
	return k.Hash()
}

// bucket runs one bucket's actions on a clone of the packet and, unless
// final, emits the actions that undo its rewrites.
func (x *xlator) bucket(b *pipeline.Bucket, table uint8, miss, final bool) error {
	x.refs = append(x.refs, b)
	savedKey, savedW, savedTags := x.key, x.written, x.tags
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
	if final {
		return nil
	}
	return x.undo(&savedKey, &savedW, savedTags)
}

var ones16 = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// undo emits the actions that take the packet back to saved (the working
// key before a bucket; savedW the written bits then) and resets the walk's
// state to it. A field is restored when the bucket wrote it for the first
// time (its value may differ packet to packet) or changed its value; the
// restored values are consulted, as seen before the bucket.
func (x *xlator) undo(saved *flow.Key, savedW *flow.Mask, savedTags int) error {
	var ch flow.Mask
	cw, kw, sk, nw, ow := ch.Words(), x.key.Words(), saved.Words(), x.written.Words(), savedW.Words()
	for i := range cw {
		cw[i] = nw[i]&^ow[i] | (kw[i] ^ sk[i])
	}
	cur, net := x.key, x.tags-savedTags
	x.key, x.written, x.tags = *saved, *savedW, savedTags
	var need flow.Mask
	err := x.undoFields(&cur, saved, &ch, &need, net)
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

	var acts [12]actions.Action
	n := 0
	addr := func(kind actions.Kind, b []byte) {
		acts[n] = actions.Action{Kind: kind}
		copy(acts[n].Addr[:], b)
		n++
	}
	if ch.EthSrc != ([6]byte{}) {
		addr(actions.SetEthSrc, saved.EthSrc[:])
		need.EthSrc = [6]byte(ones16[:6])
	}
	if ch.EthDst != ([6]byte{}) {
		addr(actions.SetEthDst, saved.EthDst[:])
		need.EthDst = [6]byte(ones16[:6])
	}
	if m := ch.NwTOS; m != 0 {
		acts[n] = actions.Action{Kind: actions.SetIPTOS, Val8: saved.NwTOS & m, Mask8: m}
		n++
		need.NwTOS |= m
	}
	if ch.NwTTL != 0 {
		acts[n] = actions.Action{Kind: actions.SetIPTTL, Val8: saved.NwTTL}
		n++
		need.NwTTL = 0xff
	}
	if ch.IPv4Src != 0 {
		addr(actions.SetIPv4Src, []byte{byte(saved.IPv4Src >> 24), byte(saved.IPv4Src >> 16), byte(saved.IPv4Src >> 8), byte(saved.IPv4Src)})
		need.IPv4Src = ^uint32(0)
	}
	if ch.IPv4Dst != 0 {
		addr(actions.SetIPv4Dst, []byte{byte(saved.IPv4Dst >> 24), byte(saved.IPv4Dst >> 16), byte(saved.IPv4Dst >> 8), byte(saved.IPv4Dst)})
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
		acts[n] = actions.Action{Kind: actions.SetL4Src, Val16: saved.TpSrc}
		n++
		need.TpSrc = 0xffff
	}
	if ch.TpDst != 0 {
		acts[n] = actions.Action{Kind: actions.SetL4Dst, Val16: saved.TpDst}
		n++
		need.TpDst = 0xffff
	}
	for _, a := range acts[:n] {
		if err := x.emit(a); err != nil {
			return err
		}
	}
	return nil
}

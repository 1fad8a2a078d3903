package xlate

import (
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

func (x *xlator) walk() error {
	if x.opts.PortConfig != nil && !x.received() {
		return nil
	}
	if x.opts.DropFragments && x.isIP() {
		x.consult(&flow.Mask{NwFrag: flow.FragAny})
		if x.key.NwFrag&flow.FragAny != 0 {
			if x.tr != nil {
				x.traceNote(TraceDrop, "an IP fragment, and the switch config says frag=drop: dropped")
			}
			return nil
		}
	}
	x.pipe = x.opts.Pipe
	return x.walkFrom(0)
}

// walkTables runs the packet through x.p from table 0 with metadata 0 and
// then executes its action set.
func (x *xlator) walkTables() error {
	x.pipe = ofmatch.Pipe{}
	return x.walkFrom(0)
}

// walkFrom runs the packet through x.p from table tid and then executes
// its action set. A lookup that needs a field the walk does not know
// freezes the walk there.
func (x *xlator) walkFrom(tid uint8) error {
	for step := 0; ; step++ {
		if step >= maxSteps {
			return ErrLoop
		}
		if err := x.flushPending(); err != nil {
			return err
		}
		ck := x.checkpoint()
		e := x.lookup(tid, ofpwire.PortIn)
		if x.blind {
			if x.tr != nil {
				// The entry found was chosen on unknown fields: the
				// thawed walk shows the real lookup.
				x.tr.Steps = x.tr.Steps[:len(x.tr.Steps)-1]
			}
			return x.freeze(ck, frozenKey{stage: stageTable, table: tid, pipe: x.pipe, set: x.set}, nil)
		}
		if e == nil {
			// No table-miss entry: OpenFlow 1.3 §5.4 drops the packet,
			// so the action set is discarded, not executed.
			return nil
		}
		x.refs = append(x.refs, e) // the entry counts the megaflow's traffic
		next, gotoTable, err := x.runEntry(tid, e, e.Instructions(), 0, 0)
		if err != nil || x.stopped || x.forked {
			return err
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

// walkEntry goes on with entry e of table tid from instruction fromIns,
// action fromAct (a thawed walk), and from there as walkFrom does.
func (x *xlator) walkEntry(tid uint8, e *pipeline.Entry, ins []ofpwire.Instruction, fromIns, fromAct int) error {
	next, gotoTable, err := x.runEntry(tid, e, ins, fromIns, fromAct)
	if err != nil || x.stopped || x.forked {
		return err
	}
	if !gotoTable {
		return x.executeSet()
	}
	if next <= tid {
		return ErrLoop
	}
	return x.walkFrom(next)
}

// runEntry executes the instructions ins of entry e (table tid) from
// instruction fromIns, whose actions start at fromAct, and says where the
// walk goes next.
func (x *xlator) runEntry(tid uint8, e *pipeline.Entry, ins []ofpwire.Instruction, fromIns, fromAct int) (next uint8, gotoTable bool, err error) {
	x.table, x.miss, x.cookie, x.entry = tid, isTableMiss(e), e.Cookie, e
	for i := fromIns; i < len(ins); i++ {
		switch in := ins[i].(type) {
		case *ofpwire.InstrApplyActions:
			from := 0
			if i == fromIns {
				from = fromAct
			}
			err = x.applyActions(e, ins, i, from)
			if x.exited {
				return 0, false, err // no goto: the action set runs
			}
			if x.forked {
				return 0, false, err // the entry's rest went to the branches
			}
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
			x.pipe.Metadata = x.pipe.Metadata&^in.Mask | in.Metadata&in.Mask
			if x.tr != nil {
				x.traceMetadata(in, x.pipe.Metadata)
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
			err = x.emit(actions.MeterAction(uint32(in.MeterID)))
		default:
			err = fmt.Errorf("%w: instruction type %d", ErrUnsupported, in.InstructionType())
		}
		if err != nil || x.stopped {
			return 0, false, err
		}
	}
	return next, gotoTable, nil
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

// applyActions executes the apply-actions instruction ins[i] of entry e
// from action from on. An action that needs a field the walk does not
// know freezes the walk before it.
func (x *xlator) applyActions(e *pipeline.Entry, ins []ofpwire.Instruction, i, from int) error {
	acts := ins[i].(*ofpwire.InstrApplyActions).Actions
	for j := from; j < len(acts); j++ {
		ck := x.checkpoint()
		nonTail := 0
		switch a := acts[j].(type) {
		case *ofpwire.ActionController:
			if a.Pause {
				x.pauseAt = x.pausePoint(e, ins, i, j)
			}
		case *ofpwire.ActionResubmit:
			if j < len(acts)-1 || i < len(ins)-1 {
				nonTail = 1
			}
		case *ofpwire.ActionCheckPktLarger:
			x.forkAt = x.forkPoint(e, ins, i, j)
		}
		x.nonTail += nonTail
		err := x.doAction(acts[j], x.table, x.miss)
		x.nonTail -= nonTail
		x.pauseAt, x.forkAt = nil, nil
		if x.blind {
			return x.freeze(ck, frozenKey{stage: stageEntry, table: x.table, miss: x.miss, cookie: x.cookie,
				entry: e, instr: uint16(i), act: uint16(j), pipe: x.pipe, set: x.set}, ins)
		}
		if err != nil {
			return err
		}
		if x.stopped || x.exited || x.forked {
			return nil
		}
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
		return x.setFieldAny(a)
	case *ofpwire.ActionRegMove:
		return x.regMove(a)
	case *ofpwire.ActionResubmit:
		return x.resubmit(a)
	case *ofpwire.ActionNote, *ofpwire.ActionSample:
		// sample: no IPFIX exporter here (ofpwire.ActionSample).
		return nil
	case *ofpwire.ActionExit:
		x.exited = true
		return nil
	case *ofpwire.ActionStack:
		return x.stack(a)
	case *ofpwire.ActionDecTTLIDs:
		return x.decTTLIDs(table, len(a.IDs))
	case *ofpwire.ActionCT:
		return x.conntrack(a)
	case *ofpwire.ActionCTClear:
		return x.ctClear()
	case *ofpwire.ActionController:
		return x.controller(a)
	case *ofpwire.ActionConjunction:
		// The classifier resolves clauses (a lookup never answers
		// with one), and CheckActions keeps them out of packet-outs.
		return fmt.Errorf("%w: conjunction outside a table's clause", ErrUnsupported)
	case *ofpwire.ActionClone:
		return x.clone(a.Actions, table, miss, false)
	case *ofpwire.ActionLearn:
		return x.learn(a)
	case *ofpwire.ActionOutputReg:
		return x.outputReg(a, table, miss)
	case *ofpwire.ActionMultipath:
		return x.multipath(a)
	case *ofpwire.ActionBundle:
		return x.bundle(a, table, miss)
	case *ofpwire.ActionFinTimeout:
		return x.finTimeout(a)
	case *ofpwire.ActionCheckPktLarger:
		return x.checkPktLarger(a)
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
	case *ofpwire.ActionSetQueue, *ofpwire.ActionPopQueue:
		if x.tr != nil {
			x.traceNote(TraceAction, "set_queue/pop_queue: the switch has no queues, nothing to do")
		}
		return nil
	default:
		return unsupportedAction(a)
	}
}

// finTimeout reduces the timeouts of the entry being executed (its
// fin_timeout's; a resubmitted entry's own) when the packet is a TCP FIN
// or RST, as Open vSwitch does at translation. The megaflow matches the
// FIN and RST bits of TCP packets, so the first such packet of a flow
// gets a translation of its own, which applies the reduction at once
// (Open vSwitch applies it when its revalidator pushes the megaflow's
// TCP flags, up to a second later); later ones find it done. A trace
// changes nothing.
func (x *xlator) finTimeout(a *ofpwire.ActionFinTimeout) error {
	x.consult(&flow.Mask{EthType: 0xffff, NwProto: 0xff})
	if x.key.EthType != header.EtherTypeIPv4 && x.key.EthType != header.EtherTypeIPv6 || x.key.NwProto != header.IPProtoTCP {
		return nil
	}
	x.consult(&flow.Mask{TCPFlags: tcpFIN | tcpRST})
	if x.key.TCPFlags&(tcpFIN|tcpRST) == 0 || x.entry == nil {
		return nil
	}
	if x.tr != nil {
		x.traceNote(TraceAction, fmt.Sprintf("a TCP FIN or RST: the flow's timeouts would be reduced to idle %d, hard %d (not by a trace)", a.IdleTimeout, a.HardTimeout))
		return nil
	}
	x.entry.ReduceTimeouts(a.IdleTimeout, a.HardTimeout)
	return nil
}

// The TCP flags fin_timeout looks for.
const (
	tcpFIN = 0x001
	tcpRST = 0x004
)

func (x *xlator) isIP() bool {
	x.consult(&flow.Mask{EthType: 0xffff})
	return x.key.EthType == header.EtherTypeIPv4 || x.key.EthType == header.EtherTypeIPv6
}

func (x *xlator) decTTL(table uint8) error { return x.decTTLIDs(table, -1) }

// decTTLIDs is dec_ttl naming ids controllers for an expired TTL (-1: the
// OpenFlow action, which tells them all); with none an expired packet is
// dropped silently.
func (x *xlator) decTTLIDs(table uint8, ids int) error {
	if !x.isIP() {
		return nil // OpenFlow leaves dec-TTL on non-IP undefined; do nothing, as OVS
	}
	x.consult(&flow.Mask{NwTTL: 0xff})
	if x.key.NwTTL <= 1 && ids == 0 {
		x.stopped = true
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("invalid TTL %d and no controller to tell: processing stops", x.key.NwTTL))
		}
		return nil
	}
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
	return x.emit(x.controllerAction(ofpwire.PacketInReasonInvalidTTL, table, 0xffff, nil, 0, nil))
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

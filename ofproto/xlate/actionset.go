package xlate

import (
	"fmt"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
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
// the package doc). Set-queue has nothing to run. Each action leaves the
// set once it ran, so that an action that needs a field the walk does not
// know freezes the walk with the rest of the set, to go on from there.
func (x *xlator) executeSet() error {
	s := &x.set
	if x.tr != nil && *s != (actionSet{}) {
		x.traceEvent(TraceEvent{Kind: TraceActionSet, Text: "executing the action set:"})
		x.tind++
	}
	for k := 0; k < numSetSlots; k++ {
		a := s.slot(k)
		if a == nil {
			continue
		}
		ck := x.checkpoint()
		rest := *s
		var err error
		switch a.(type) {
		case *ofpwire.ActionGroup:
			x.cookie = s.outCookie
			err = x.group(s.group.Group, s.outTable, s.outMiss, true)
		case *ofpwire.ActionOutput:
			x.cookie = s.outCookie
			err = x.doAction(a, s.outTable, s.outMiss)
		default:
			err = x.doAction(a, x.table, x.miss)
		}
		if x.blind {
			return x.freeze(ck, frozenKey{stage: stageSet, table: x.table, miss: x.miss, cookie: x.cookie,
				pipe: x.pipe, set: rest}, nil)
		}
		s.clearSlot(k)
		if err != nil || x.stopped {
			return err
		}
	}
	return nil
}

// The action set's slots in execution order: the fixed actions, one per
// set-field, then the group or output (the group takes precedence).
const (
	slotFields  = 12
	slotFinal   = slotFields + ofpwire.NumFields
	numSetSlots = slotFinal + 1
)

// slot returns the action in slot k, nil when empty.
func (s *actionSet) slot(k int) ofpwire.Action {
	flag := func(a ofpwire.Action, ok bool) ofpwire.Action {
		if ok {
			return a
		}
		return nil
	}
	switch k {
	case 0:
		return flag(actCopyTTLIn, s.copyTTLIn)
	case 1:
		return flag(actPopVLAN, s.popVLAN)
	case 2:
		return flag(actPopPBB, s.popPBB)
	case 3:
		return flag(s.popMPLS, s.popMPLS != nil)
	case 4:
		return flag(s.pushMPLS, s.pushMPLS != nil)
	case 5:
		return flag(s.pushPBB, s.pushPBB != nil)
	case 6:
		return flag(s.pushVLAN, s.pushVLAN != nil)
	case 7:
		return flag(actCopyTTLOut, s.copyTTLOut)
	case 8:
		return flag(actDecMPLSTTL, s.decMPLSTTL)
	case 9:
		return flag(actDecNwTTL, s.decTTL)
	case 10:
		return flag(s.setTTL, s.setTTL != nil)
	case 11:
		return flag(s.setMPLSTTL, s.setMPLSTTL != nil)
	case slotFinal:
		if s.group != nil {
			return s.group
		}
		return flag(s.output, s.output != nil)
	}
	return flag(s.fields[k-slotFields], s.fields[k-slotFields] != nil)
}

// clearSlot empties slot k.
func (s *actionSet) clearSlot(k int) {
	switch k {
	case 0:
		s.copyTTLIn = false
	case 1:
		s.popVLAN = false
	case 2:
		s.popPBB = false
	case 3:
		s.popMPLS = nil
	case 4:
		s.pushMPLS = nil
	case 5:
		s.pushPBB = nil
	case 6:
		s.pushVLAN = nil
	case 7:
		s.copyTTLOut = false
	case 8:
		s.decMPLSTTL = false
	case 9:
		s.decTTL = false
	case 10:
		s.setTTL = nil
	case 11:
		s.setMPLSTTL = nil
	case slotFinal:
		s.group, s.output = nil, nil
	default:
		s.fields[k-slotFields] = nil
	}
}

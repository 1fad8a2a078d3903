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

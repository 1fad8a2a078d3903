package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// Action is one OpenFlow 1.3 action. The concrete types below are the only
// implementations.
type Action interface {
	// ActionType is the OFPAT_* code of the action.
	ActionType() ofp.ActionType
	appendTo(b []byte) ([]byte, error)
}

// ActionOutput sends the packet to Port; MaxLen bounds what goes to the
// controller when Port is OFPP_CONTROLLER.
type ActionOutput struct {
	Port   ofp.PortNo
	MaxLen uint16
}

// ActionCopyTTLOut copies the TTL from the next-to-outermost header outwards.
type ActionCopyTTLOut struct{}

// ActionCopyTTLIn copies the TTL from the outermost header inwards.
type ActionCopyTTLIn struct{}

// ActionSetMPLSTTL sets the MPLS TTL.
type ActionSetMPLSTTL struct{ TTL uint8 }

// ActionDecMPLSTTL decrements the MPLS TTL.
type ActionDecMPLSTTL struct{}

// ActionPushVLAN pushes a VLAN tag with the given TPID.
type ActionPushVLAN struct{ EtherType uint16 }

// ActionPopVLAN pops the outer VLAN tag.
type ActionPopVLAN struct{}

// ActionPushMPLS pushes an MPLS label with the given ethertype.
type ActionPushMPLS struct{ EtherType uint16 }

// ActionPopMPLS pops the outer MPLS label, setting EtherType as the payload's.
type ActionPopMPLS struct{ EtherType uint16 }

// ActionSetQueue selects an egress queue.
type ActionSetQueue struct{ Queue ofp.Queue }

// ActionGroup processes the packet through a group.
type ActionGroup struct{ Group ofp.Group }

// ActionSetNwTTL sets the IP TTL / hop limit.
type ActionSetNwTTL struct{ TTL uint8 }

// ActionDecNwTTL decrements the IP TTL / hop limit.
type ActionDecNwTTL struct{}

// ActionSetField rewrites one header field or register. A mask (OpenFlow
// 1.5's masked set-field, Open vSwitch's reg_load and reg_load2) writes
// only the bits it covers; 1.3 peers get a masked one as a reg_load (or
// reg_load2), as Open vSwitch sends it.
type ActionSetField struct{ Field OXM }

// ActionPushPBB pushes a PBB service tag.
type ActionPushPBB struct{ EtherType uint16 }

// ActionPopPBB pops the outer PBB service tag.
type ActionPopPBB struct{}

// ActionExperimenter is a vendor action; Data is everything after the
// experimenter id (including the vendor's padding).
type ActionExperimenter struct {
	Experimenter uint32
	Data         []byte
}

// ActionType implements Action.
func (*ActionOutput) ActionType() ofp.ActionType { return ofp.ActionTypeOutput }

// ActionType implements Action.
func (*ActionCopyTTLOut) ActionType() ofp.ActionType { return ofp.ActionTypeCopyTTLOut }

// ActionType implements Action.
func (*ActionCopyTTLIn) ActionType() ofp.ActionType { return ofp.ActionTypeCopyTTLIn }

// ActionType implements Action.
func (*ActionSetMPLSTTL) ActionType() ofp.ActionType { return ofp.ActionTypeSetMPLSTTL }

// ActionType implements Action.
func (*ActionDecMPLSTTL) ActionType() ofp.ActionType { return ofp.ActionTypeDecMPLSTTL }

// ActionType implements Action.
func (*ActionPushVLAN) ActionType() ofp.ActionType { return ofp.ActionTypePushVLAN }

// ActionType implements Action.
func (*ActionPopVLAN) ActionType() ofp.ActionType { return ofp.ActionTypePopVLAN }

// ActionType implements Action.
func (*ActionPushMPLS) ActionType() ofp.ActionType { return ofp.ActionTypePushMPLS }

// ActionType implements Action.
func (*ActionPopMPLS) ActionType() ofp.ActionType { return ofp.ActionTypePopMPLS }

// ActionType implements Action.
func (*ActionSetQueue) ActionType() ofp.ActionType { return ofp.ActionTypeSetQueue }

// ActionType implements Action.
func (*ActionGroup) ActionType() ofp.ActionType { return ofp.ActionTypeGroup }

// ActionType implements Action.
func (*ActionSetNwTTL) ActionType() ofp.ActionType { return ofp.ActionTypeSetNwTTL }

// ActionType implements Action.
func (*ActionDecNwTTL) ActionType() ofp.ActionType { return ofp.ActionTypeDecNwTTL }

// ActionType implements Action.
func (*ActionSetField) ActionType() ofp.ActionType { return ofp.ActionTypeSetField }

// ActionType implements Action.
func (*ActionPushPBB) ActionType() ofp.ActionType { return ofp.ActionTypePushPBB }

// ActionType implements Action.
func (*ActionPopPBB) ActionType() ofp.ActionType { return ofp.ActionTypePopPBB }

// ActionType implements Action.
func (*ActionExperimenter) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func actHdr(b []byte, t ofp.ActionType, n int) []byte {
	b = be.AppendUint16(b, uint16(t))
	return be.AppendUint16(b, uint16(n))
}

// ofp_action_generic: header + 4 bytes of padding.
func appendBare(b []byte, t ofp.ActionType) []byte {
	return appendZeros(actHdr(b, t, 8), 4)
}

// ofp_action_push / pop_mpls: header, ethertype, 2 bytes of padding.
func appendEther(b []byte, t ofp.ActionType, et uint16) []byte {
	return appendZeros(be.AppendUint16(actHdr(b, t, 8), et), 2)
}

// ofp_action_mpls_ttl / nw_ttl: header, ttl, 3 bytes of padding.
func appendTTL(b []byte, t ofp.ActionType, ttl uint8) []byte {
	return appendZeros(append(actHdr(b, t, 8), ttl), 3)
}

func (a *ActionOutput) appendTo(b []byte) ([]byte, error) {
	b = be.AppendUint32(actHdr(b, a.ActionType(), 16), uint32(a.Port))
	return appendZeros(be.AppendUint16(b, a.MaxLen), 6), nil
}
func (a *ActionCopyTTLOut) appendTo(b []byte) ([]byte, error) {
	return appendBare(b, a.ActionType()), nil
}
func (a *ActionCopyTTLIn) appendTo(b []byte) ([]byte, error) {
	return appendBare(b, a.ActionType()), nil
}
func (a *ActionSetMPLSTTL) appendTo(b []byte) ([]byte, error) {
	return appendTTL(b, a.ActionType(), a.TTL), nil
}
func (a *ActionDecMPLSTTL) appendTo(b []byte) ([]byte, error) {
	return appendBare(b, a.ActionType()), nil
}
func (a *ActionPushVLAN) appendTo(b []byte) ([]byte, error) {
	return appendEther(b, a.ActionType(), a.EtherType), nil
}
func (a *ActionPopVLAN) appendTo(b []byte) ([]byte, error) {
	return appendBare(b, a.ActionType()), nil
}
func (a *ActionPushMPLS) appendTo(b []byte) ([]byte, error) {
	return appendEther(b, a.ActionType(), a.EtherType), nil
}
func (a *ActionPopMPLS) appendTo(b []byte) ([]byte, error) {
	return appendEther(b, a.ActionType(), a.EtherType), nil
}
func (a *ActionSetQueue) appendTo(b []byte) ([]byte, error) {
	return be.AppendUint32(actHdr(b, a.ActionType(), 8), uint32(a.Queue)), nil
}
func (a *ActionGroup) appendTo(b []byte) ([]byte, error) {
	return be.AppendUint32(actHdr(b, a.ActionType(), 8), uint32(a.Group)), nil
}
func (a *ActionSetNwTTL) appendTo(b []byte) ([]byte, error) {
	return appendTTL(b, a.ActionType(), a.TTL), nil
}
func (a *ActionDecNwTTL) appendTo(b []byte) ([]byte, error) {
	return appendBare(b, a.ActionType()), nil
}
func (a *ActionSetField) appendTo(b []byte) ([]byte, error) {
	if a.Field.HasMask {
		return appendMaskedSetField(b, a.Field)
	}
	start := len(b)
	b = actHdr(b, a.ActionType(), 0)
	b, err := appendOXM(b, a.Field)
	if err != nil {
		return b, err
	}
	n := roundUp8(len(b) - start)
	b = appendZeros(b, n-(len(b)-start))
	putLen16(b, start+2, n)
	return b, nil
}
func (a *ActionPushPBB) appendTo(b []byte) ([]byte, error) {
	return appendEther(b, a.ActionType(), a.EtherType), nil
}
func (a *ActionPopPBB) appendTo(b []byte) ([]byte, error) {
	return appendBare(b, a.ActionType()), nil
}
func (a *ActionExperimenter) appendTo(b []byte) ([]byte, error) {
	n := roundUp8(8 + len(a.Data))
	if n > 0xfff8 {
		return b, fmt.Errorf("ofpwire: experimenter action too long")
	}
	b = be.AppendUint32(actHdr(b, a.ActionType(), n), a.Experimenter)
	b = append(b, a.Data...)
	return appendZeros(b, n-8-len(a.Data)), nil
}

// fixedActionLen is the exact length of each fixed-size action type.
func fixedActionLen(t ofp.ActionType) (int, bool) {
	switch t {
	case ofp.ActionTypeOutput:
		return 16, true
	case ofp.ActionTypeCopyTTLOut, ofp.ActionTypeCopyTTLIn, ofp.ActionTypeSetMPLSTTL,
		ofp.ActionTypeDecMPLSTTL, ofp.ActionTypePushVLAN, ofp.ActionTypePopVLAN,
		ofp.ActionTypePushMPLS, ofp.ActionTypePopMPLS, ofp.ActionTypeSetQueue,
		ofp.ActionTypeGroup, ofp.ActionTypeSetNwTTL, ofp.ActionTypeDecNwTTL,
		ofp.ActionTypePushPBB, ofp.ActionTypePopPBB:
		return 8, true
	}
	return 0, false
}

// parseAction decodes the action at the front of b.
func parseAction(b []byte) (Action, int, error) {
	if len(b) < 4 {
		return nil, 0, errActionLen
	}
	t := ofp.ActionType(be.Uint16(b))
	n := int(be.Uint16(b[2:]))
	if n < 8 || n%8 != 0 || n > len(b) {
		return nil, 0, errActionLen
	}
	if want, ok := fixedActionLen(t); ok && n != want {
		return nil, 0, errActionLen
	}
	a := b[:n]
	switch t {
	case ofp.ActionTypeOutput:
		return &ActionOutput{Port: ofp.PortNo(be.Uint32(a[4:])), MaxLen: be.Uint16(a[8:])}, n, nil
	case ofp.ActionTypeCopyTTLOut:
		return &ActionCopyTTLOut{}, n, nil
	case ofp.ActionTypeCopyTTLIn:
		return &ActionCopyTTLIn{}, n, nil
	case ofp.ActionTypeSetMPLSTTL:
		return &ActionSetMPLSTTL{TTL: a[4]}, n, nil
	case ofp.ActionTypeDecMPLSTTL:
		return &ActionDecMPLSTTL{}, n, nil
	case ofp.ActionTypePushVLAN:
		return &ActionPushVLAN{EtherType: be.Uint16(a[4:])}, n, nil
	case ofp.ActionTypePopVLAN:
		return &ActionPopVLAN{}, n, nil
	case ofp.ActionTypePushMPLS:
		return &ActionPushMPLS{EtherType: be.Uint16(a[4:])}, n, nil
	case ofp.ActionTypePopMPLS:
		return &ActionPopMPLS{EtherType: be.Uint16(a[4:])}, n, nil
	case ofp.ActionTypeSetQueue:
		return &ActionSetQueue{Queue: ofp.Queue(be.Uint32(a[4:]))}, n, nil
	case ofp.ActionTypeGroup:
		return &ActionGroup{Group: ofp.Group(be.Uint32(a[4:]))}, n, nil
	case ofp.ActionTypeSetNwTTL:
		return &ActionSetNwTTL{TTL: a[4]}, n, nil
	case ofp.ActionTypeDecNwTTL:
		return &ActionDecNwTTL{}, n, nil
	case ofp.ActionTypePushPBB:
		return &ActionPushPBB{EtherType: be.Uint16(a[4:])}, n, nil
	case ofp.ActionTypePopPBB:
		return &ActionPopPBB{}, n, nil
	case ofp.ActionTypeSetField:
		o, err := parseSetFieldOXM(a[4:])
		if err != nil {
			return nil, 0, err
		}
		return &ActionSetField{Field: o}, n, nil
	case ofp.ActionTypeExperimenter:
		if len(a) >= 10 && be.Uint32(a[4:]) == NXVendor {
			act, err := parseNX(a)
			if err != nil {
				return nil, 0, err
			}
			return act, n, nil
		}
		return &ActionExperimenter{Experimenter: be.Uint32(a[4:]), Data: cloneBytes(a[8:])}, n, nil
	}
	return nil, 0, errActionType
}

// parseSetFieldOXM decodes the OXM of a set-field action (b is what follows
// the action header, padding included) and maps match errors to the
// set-field codes of BAD_ACTION.
func parseSetFieldOXM(b []byte) (OXM, error) {
	if len(b) < 4 {
		return OXM{}, errSetLen
	}
	plen := int(b[3])
	// The action must be exactly the OXM rounded up to 8 bytes.
	if roundUp8(4+4+plen) != 4+len(b) {
		return OXM{}, errSetLen
	}
	if b[2]&1 != 0 {
		return OXM{}, errSetArg
	}
	o, _, err := parseOXM(b)
	if err != nil {
		return OXM{}, setFieldErr(err)
	}
	return o, nil
}

// parseActions decodes an action list that fills b exactly.
func parseActions(b []byte) ([]Action, error) {
	// Counted first (by their length fields; parseAction checks them):
	// the list is allocated once, not grown through 1, 2, 4... for
	// every flow of a 100,000-flow bundle.
	count := 0
	for r := b; len(r) >= 4; count++ {
		n := int(be.Uint16(r[2:]))
		if n < 8 || n > len(r) {
			count++
			break
		}
		r = r[n:]
	}
	var out []Action
	if count > 0 {
		out = make([]Action, 0, count)
	}
	for len(b) > 0 {
		a, n, err := parseAction(b)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
		b = b[n:]
	}
	return out, nil
}

func appendActions(b []byte, acts []Action) ([]byte, error) {
	var err error
	for _, a := range acts {
		if a == nil {
			return b, fmt.Errorf("ofpwire: nil action")
		}
		if b, err = a.appendTo(b); err != nil {
			return b, err
		}
	}
	return b, nil
}

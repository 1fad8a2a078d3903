package ofpwire

import (
	"github.com/netrack/openflow"
)

// Bundles (OpenFlow 1.4 §7.3.9; for 1.3, ONF extension EXT-230, which
// ovs-ofctl --bundle uses): a controller opens a bundle, adds flow-mods
// and group-mods to it and commits them all or none. 1.4+ has message
// types of their own; 1.3 carries the same bodies in experimenter messages
// of ONF's experimenter id.

// Message types of 1.4+.
const (
	TypeBundleControl openflow.Type = 33
	TypeBundleAdd     openflow.Type = 34
)

// ONF's experimenter id and EXT-230's experimenter types.
const (
	ExperimenterONF    = 0x4f4e4600
	onfBundleControl   = 2300
	onfBundleAddMsg    = 2301
	onfBundleErrorBase = 2300
)

// OFPBCT_* bundle control types.
const (
	BundleOpenRequest    = 0
	BundleOpenReply      = 1
	BundleCloseRequest   = 2
	BundleCloseReply     = 3
	BundleCommitRequest  = 4
	BundleCommitReply    = 5
	BundleDiscardRequest = 6
	BundleDiscardReply   = 7
)

// OFPBF_* bundle flags.
const (
	BundleAtomic  = 1 << 0
	BundleOrdered = 1 << 1
)

// OFPET_BUNDLE_FAILED and its OFPBFC_* codes.
const (
	ETBundleFailed       = 17
	BFCUnknown           = 0
	BFCEperm             = 1
	BFCBadID             = 2
	BFCBundleExist       = 3
	BFCBundleClosed      = 4
	BFCOutOfBundles      = 5
	BFCBadType           = 6
	BFCBadFlags          = 7
	BFCMsgBadLen         = 8
	BFCMsgBadXID         = 9
	BFCMsgUnsup          = 10
	BFCMsgConflict       = 11
	BFCMsgTooMany        = 12
	BFCMsgFailed         = 13
	BFCTimeout           = 14
	BFCBundleInProgress  = 15
	bundleCtrlLen        = 8
	bundleAddFixedLen    = 8
	experimenterHeaderSz = 8
)

// BundleCtrl is OFPT_BUNDLE_CONTROL. Properties are not interpreted (none
// is defined but experimenter ones) and are not echoed.
type BundleCtrl struct {
	BundleID uint32
	Type     uint16
	Flags    uint16
}

// MsgType implements Message.
func (*BundleCtrl) MsgType() openflow.Type { return TypeBundleControl }

func (m *BundleCtrl) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(b, m.BundleID)
	b = be.AppendUint16(b, m.Type)
	return be.AppendUint16(b, m.Flags), nil
}

func (m *BundleCtrl) decodeBody(b []byte) error {
	if len(b) < bundleCtrlLen {
		return errBadLen
	}
	*m = BundleCtrl{BundleID: be.Uint32(b), Type: be.Uint16(b[4:]), Flags: be.Uint16(b[6:])}
	return nil
}

// BundleAdd is OFPT_BUNDLE_ADD_MESSAGE. Msg is the whole inner message,
// header included, still encoded: the connection decodes it in its own
// version and checks its xid against the add's. Unlike other decoded
// messages, a decoded BundleAdd's Msg shares the bytes it was decoded
// from (valid as long as they are): the connection decodes and copies
// the inner message at once, and a copy of every one of a 100,000-flow
// bundle's messages would only be garbage.
type BundleAdd struct {
	BundleID uint32
	Flags    uint16
	Msg      []byte
}

// MsgType implements Message.
func (*BundleAdd) MsgType() openflow.Type { return TypeBundleAdd }

func (m *BundleAdd) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(b, m.BundleID)
	b = be.AppendUint16(b, 0)
	b = be.AppendUint16(b, m.Flags)
	return append(b, m.Msg...), nil
}

func (m *BundleAdd) decodeBody(b []byte) error {
	if len(b) < bundleAddFixedLen+HeaderLen {
		return newErr(ETBundleFailed, BFCMsgBadLen)
	}
	inner := b[bundleAddFixedLen:]
	n := int(be.Uint16(inner[2:]))
	if n < HeaderLen || n > len(inner) {
		return newErr(ETBundleFailed, BFCMsgBadLen)
	}
	// Properties may follow the inner message (padded to 8 bytes); none
	// is defined but experimenter ones, which are ignored.
	*m = BundleAdd{BundleID: be.Uint32(b), Flags: be.Uint16(b[6:]), Msg: inner[:n:n]}
	return nil
}

// BundleFromExperimenter decodes EXT-230's 1.3 form of a bundle message;
// ok is false for other experimenter messages.
func BundleFromExperimenter(e *Experimenter) (m Message, ok bool, err error) {
	if e.Experimenter != ExperimenterONF {
		return nil, false, nil
	}
	switch e.ExpType {
	case onfBundleControl:
		m = new(BundleCtrl)
	case onfBundleAddMsg:
		m = new(BundleAdd)
	default:
		return nil, false, nil
	}
	return m, true, m.decodeBody(e.Data)
}

// bundleAsExperimenter is EXT-230's 1.3 form of a bundle message.
func bundleAsExperimenter(m Message) (*Experimenter, bool) {
	var t uint32
	switch m.(type) {
	case *BundleCtrl:
		t = onfBundleControl
	case *BundleAdd:
		t = onfBundleAddMsg
	default:
		return nil, false
	}
	body, _ := m.appendBody(nil)
	return &Experimenter{Experimenter: ExperimenterONF, ExpType: t, Data: body}, true
}

// bundleErrorIn13 rewrites an OFPET_BUNDLE_FAILED error message (whole
// message b) into EXT-230's experimenter error for a 1.3 peer: type
// OFPET_EXPERIMENTER, exp_code 2300+code, ONF's experimenter id.
func bundleErrorIn13(b []byte) []byte {
	if len(b) < 12 || be.Uint16(b[8:]) != ETBundleFailed {
		return b
	}
	code := be.Uint16(b[10:])
	nb := append([]byte(nil), b[:8]...)
	nb = be.AppendUint16(nb, ETExperimenter)
	nb = be.AppendUint16(nb, onfBundleErrorBase+code)
	nb = be.AppendUint32(nb, ExperimenterONF)
	nb = append(nb, b[12:]...)
	putLen16(nb, 2, len(nb))
	return nb
}

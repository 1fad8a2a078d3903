package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow"
)

// Flow monitors: a controller asks to be told of flow-table changes. Three
// encodings carry the same thing: Open vSwitch's NXST_FLOW_MONITOR (1.0,
// NXM matches and 1.0 actions), ONF's extension 1870 to 1.3 (the same
// layout with OXM matches and instructions) and 1.4's OFPMP_FLOW_MONITOR.
// They are decoded into one FlowMonitorRequest and the updates encoded
// back in the peer's version.

// Flow monitor flags, as 1.4 numbers them (Open vSwitch's reading: its
// "own" bit is 1.4's ONLY_OWN, and means own changes in full).
const (
	FlowMonitorInitial      = 1 << 0
	FlowMonitorAdd          = 1 << 1
	FlowMonitorRemoved      = 1 << 2
	FlowMonitorModify       = 1 << 3
	FlowMonitorInstructions = 1 << 4
	FlowMonitorOwn          = 1 << 6
)

// Nicira's numbering of the same flags (NXFMF_*).
const (
	nxfmfInitial = 1 << 0
	nxfmfAdd     = 1 << 1
	nxfmfDelete  = 1 << 2
	nxfmfModify  = 1 << 3
	nxfmfActions = 1 << 4
	nxfmfOwn     = 1 << 5
	nxfmfAll     = 1<<6 - 1
)

// Flow monitor commands (1.4; the older encodings only add).
const (
	FlowMonitorCmdAdd    = 0
	FlowMonitorCmdModify = 1
	FlowMonitorCmdDelete = 2
)

// FlowUpdateEvent is what happened to a flow (1.4's OFPFME_* numbers).
type FlowUpdateEvent uint16

// Flow update events.
const (
	FlowUpdateInitial  FlowUpdateEvent = 0
	FlowUpdateAdded    FlowUpdateEvent = 1
	FlowUpdateRemoved  FlowUpdateEvent = 2
	FlowUpdateModified FlowUpdateEvent = 3
	FlowUpdateAbbrev   FlowUpdateEvent = 4
)

// Wire numbers of the monitor messages.
const (
	nxstFlowMonitor      = 2    // NXST_FLOW_MONITOR (1.0 vendor stats)
	onfstFlowMonitor     = 1870 // ONFST_FLOW_MONITOR (1.3 experimenter multipart)
	nxtFlowMonitorCancel = 21   // NXT_FLOW_MONITOR_CANCEL
	onftFlowMonitorCncl  = 1870 // ONFT_FLOW_MONITOR_CANCEL
	mpFlowMonitor14      = 16   // OFPMP_FLOW_MONITOR
	mpExperimenter       = 0xffff
	flowMonitorReqLen    = 16 // every encoding's fixed part
	flowUpdateFullLen    = 24
	flowUpdateAbbrevLen  = 8
	etMonitorFailed      = 16 // OFPET_MONITOR_FAILED
)

// Monitor errors (OFPMOFC_*).
var (
	ErrMonitorExists  = &OFPError{Type: etMonitorFailed, Code: 1}
	ErrUnknownMonitor = &OFPError{Type: etMonitorFailed, Code: 3}
	errMonitorCommand = &OFPError{Type: etMonitorFailed, Code: 4}
	errMonitorFlags   = &OFPError{Type: etMonitorFailed, Code: 5}
	errMonitorZeros   = &OFPError{Type: ETBadRequest, Code: BRCBadLen}
)

// FlowMonitor is one monitor of a request.
type FlowMonitor struct {
	ID       uint32
	Command  uint8  // FlowMonitorCmd*
	Flags    uint16 // FlowMonitor* bits
	OutPort  PortNo // PortAny: any
	OutGroup Group  // GroupAny: any
	TableID  uint8  // TableAll: every table
	Match    Match
}

// FlowMonitorRequest is a flow monitor request in any version. The
// connection layer decodes it (DecodeFlowMonitor) before the generic
// decoder, which knows none of its encodings.
type FlowMonitorRequest struct {
	Monitors []FlowMonitor
}

// MsgType implements Message.
func (*FlowMonitorRequest) MsgType() openflow.Type { return openflow.TypeMultipartRequest }

func (*FlowMonitorRequest) appendBody([]byte) ([]byte, error) {
	return nil, fmt.Errorf("ofpwire: flow monitor request is encoded by version (not sent by a switch)")
}
func (*FlowMonitorRequest) decodeBody([]byte) error { return errBadMultipart }

// FlowMonitorCancel is NXT_FLOW_MONITOR_CANCEL (or ONF's 1.3 one).
type FlowMonitorCancel struct{ ID uint32 }

// MsgType implements Message.
func (*FlowMonitorCancel) MsgType() openflow.Type { return openflow.TypeExperiment }

func (*FlowMonitorCancel) appendBody([]byte) ([]byte, error) {
	return nil, fmt.Errorf("ofpwire: flow monitor cancel is not sent by a switch")
}
func (*FlowMonitorCancel) decodeBody([]byte) error { return errBadType }

// FlowUpdate is one flow change reported to a monitor.
type FlowUpdate struct {
	Event                    FlowUpdateEvent
	Reason                   FlowRemovedReason // for FlowUpdateRemoved
	TableID                  uint8
	Priority                 uint16
	IdleTimeout, HardTimeout uint16
	Cookie                   uint64
	Match                    Match
	Instructions             []Instruction // nil: none sent
	XID                      uint32        // FlowUpdateAbbrev: the request that made the change
}

// DecodeFlowMonitor decodes raw (a whole message, header included) when it
// is a flow monitor request or cancel in its version; ok false when it is
// neither.
func DecodeFlowMonitor(raw []byte) (m Message, ok bool, err error) {
	if len(raw) < HeaderLen {
		return nil, false, nil
	}
	h := ParseHeader(raw)
	body := raw[HeaderLen:]
	if int(h.Length) != len(raw) {
		return nil, false, nil
	}
	switch {
	case h.Version == Version10 && h.Type == 16 && len(body) >= 16 && be.Uint16(body) == stats10Vendor &&
		be.Uint32(body[4:]) == NXVendor && be.Uint32(body[8:]) == nxstFlowMonitor:
		r, err := decodeMonitors(body[16:], decodeNXMonitor)
		return r, true, err
	case h.Version == Version10 && h.Type == 4 && len(body) >= 8 && be.Uint32(body) == NXVendor &&
		be.Uint32(body[4:]) == nxtFlowMonitorCancel:
		if len(body) != 12 {
			return nil, true, errBadLen
		}
		return &FlowMonitorCancel{ID: be.Uint32(body[8:])}, true, nil
	case h.Version == Version13 && h.Type == openflow.TypeMultipartRequest && len(body) >= 16 &&
		be.Uint16(body) == mpExperimenter && be.Uint32(body[8:]) == ExperimenterONF && be.Uint32(body[12:]) == onfstFlowMonitor:
		r, err := decodeMonitors(body[16:], decodeONFMonitor)
		return r, true, err
	case h.Version == Version13 && h.Type == openflow.TypeExperiment && len(body) >= 8 &&
		be.Uint32(body) == ExperimenterONF && be.Uint32(body[4:]) == onftFlowMonitorCncl:
		if len(body) != 12 {
			return nil, true, errBadLen
		}
		return &FlowMonitorCancel{ID: be.Uint32(body[8:])}, true, nil
	case h.Version >= Version14 && Supported(h.Version) && h.Type == openflow.TypeMultipartRequest && len(body) >= 8 &&
		be.Uint16(body) == mpFlowMonitor14:
		r, err := decodeMonitors(body[8:], decodeMonitor14)
		return r, true, err
	}
	return nil, false, nil
}

func decodeMonitors(b []byte, one func([]byte) (FlowMonitor, int, error)) (*FlowMonitorRequest, error) {
	r := &FlowMonitorRequest{}
	for len(b) > 0 {
		fm, n, err := one(b)
		if err != nil {
			return nil, err
		}
		r.Monitors = append(r.Monitors, fm)
		b = b[n:]
	}
	return r, nil
}

// nxFlags converts NXFMF_* flags (checked as Open vSwitch does: at least
// one event, no unknown bit) to FlowMonitor* ones.
func nxFlags(f uint16) (uint16, error) {
	if f&(nxfmfAdd|nxfmfDelete|nxfmfModify) == 0 || f&^nxfmfAll != 0 {
		return 0, errMonitorFlags
	}
	out := f & (nxfmfInitial | nxfmfAdd | nxfmfDelete | nxfmfModify | nxfmfActions)
	if f&nxfmfOwn != 0 {
		out |= FlowMonitorOwn
	}
	return out, nil
}

// decodeNXMonitor: id flags out_port(16) match_len table zeros(5), NXM.
func decodeNXMonitor(b []byte) (FlowMonitor, int, error) {
	if len(b) < flowMonitorReqLen {
		return FlowMonitor{}, 0, errBadLen
	}
	flags, err := nxFlags(be.Uint16(b[4:]))
	if err != nil {
		return FlowMonitor{}, 0, err
	}
	if !allZero(b[11:16]) {
		return FlowMonitor{}, 0, errMonitorZeros
	}
	mlen := int(be.Uint16(b[8:]))
	n := flowMonitorReqLen + roundUp8(mlen)
	if n > len(b) {
		return FlowMonitor{}, 0, errMatchLen
	}
	oxms, _, _, err := nxmToOXM(b[flowMonitorReqLen : flowMonitorReqLen+mlen])
	if err != nil {
		return FlowMonitor{}, 0, err
	}
	mb := be.AppendUint16(nil, matchTypeOXM)
	mb = be.AppendUint16(mb, uint16(4+len(oxms)))
	mb = append(mb, oxms...)
	mb = appendZeros(mb, roundUp8(len(mb))-len(mb))
	m, _, err := parseMatch(mb)
	if err != nil {
		return FlowMonitor{}, 0, err
	}
	return FlowMonitor{
		ID: be.Uint32(b), Flags: flags, OutPort: PortNo(port10to13(be.Uint16(b[6:]))),
		OutGroup: GroupAny, TableID: b[10], Match: m,
	}, n, nil
}

// decodeONFMonitor: id flags match_len out_port(32) table zeros(3), OXM
// ofp_match.
func decodeONFMonitor(b []byte) (FlowMonitor, int, error) {
	if len(b) < flowMonitorReqLen {
		return FlowMonitor{}, 0, errBadLen
	}
	flags, err := nxFlags(be.Uint16(b[4:]))
	if err != nil {
		return FlowMonitor{}, 0, err
	}
	if !allZero(b[13:16]) {
		return FlowMonitor{}, 0, errMonitorZeros
	}
	m, n, err := parseMatch(b[flowMonitorReqLen:])
	if err != nil {
		return FlowMonitor{}, 0, err
	}
	return FlowMonitor{
		ID: be.Uint32(b), Flags: flags, OutPort: PortNo(be.Uint32(b[8:])),
		OutGroup: GroupAny, TableID: b[12], Match: m,
	}, flowMonitorReqLen + n, nil
}

// decodeMonitor14: monitor_id out_port out_group flags table command,
// OXM ofp_match.
func decodeMonitor14(b []byte) (FlowMonitor, int, error) {
	if len(b) < flowMonitorReqLen {
		return FlowMonitor{}, 0, errBadLen
	}
	m, n, err := parseMatch(b[flowMonitorReqLen:])
	if err != nil {
		return FlowMonitor{}, 0, err
	}
	fm := FlowMonitor{
		ID: be.Uint32(b), OutPort: PortNo(be.Uint32(b[4:])), OutGroup: Group(be.Uint32(b[8:])),
		Flags: be.Uint16(b[12:]), TableID: b[14], Command: b[15], Match: m,
	}
	switch fm.Command {
	case FlowMonitorCmdDelete:
	case FlowMonitorCmdAdd, FlowMonitorCmdModify:
		const known = FlowMonitorInitial | FlowMonitorAdd | FlowMonitorRemoved | FlowMonitorModify | FlowMonitorInstructions | FlowMonitorOwn
		if fm.Flags&(FlowMonitorAdd|FlowMonitorRemoved|FlowMonitorModify) == 0 || fm.Flags&^known != 0 {
			return FlowMonitor{}, 0, errMonitorFlags
		}
	default:
		return FlowMonitor{}, 0, errMonitorCommand
	}
	return fm, flowMonitorReqLen + n, nil
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// EncodeFlowUpdates encodes updates as flow monitor replies of version v
// with transaction id xid: the reply to a request (the initial flows,
// xid the request's), or unsolicited updates (xid 0, as Open vSwitch
// sends them). Updates that exceed one message are cut into several, all
// but the last flagged MORE. No updates gives one empty reply.
func EncodeFlowUpdates(v uint8, xid uint32, ups []FlowUpdate) ([][]byte, error) {
	var head []byte
	switch {
	case v == Version10:
		head = appendZeros(nil, HeaderLen)
		head = be.AppendUint16(head, stats10Vendor)
		head = appendZeros(head, 2) // flags
		head = be.AppendUint32(head, NXVendor)
		head = be.AppendUint32(head, nxstFlowMonitor)
		head = appendZeros(head, 4)
	case v == Version13:
		head = appendZeros(nil, HeaderLen)
		head = be.AppendUint16(head, mpExperimenter)
		head = appendZeros(head, 6)
		head = be.AppendUint32(head, ExperimenterONF)
		head = be.AppendUint32(head, onfstFlowMonitor)
	case v == Version14 || v == Version15:
		head = appendZeros(nil, HeaderLen)
		head = be.AppendUint16(head, mpFlowMonitor14)
		head = appendZeros(head, 6)
	default:
		return nil, errBadVersion
	}
	typ := byte(openflow.TypeMultipartReply)
	if v == Version10 {
		typ = 17 // OFPT_STATS_REPLY
	}
	finish := func(b []byte, more bool) []byte {
		b[0], b[1] = v, typ
		putLen16(b, 2, len(b))
		be.PutUint32(b[4:], xid)
		if more {
			b[HeaderLen+3] = 1
		}
		return b
	}
	var out [][]byte
	cur := append([]byte(nil), head...)
	for i := range ups {
		e, err := appendFlowUpdate(nil, v, &ups[i])
		if err != nil {
			return nil, err
		}
		if len(cur)+len(e) > MaxMessageLen && len(cur) > len(head) {
			out = append(out, finish(cur, true))
			cur = append([]byte(nil), head...)
		}
		cur = append(cur, e...)
	}
	return append(out, finish(cur, false)), nil
}

// appendFlowUpdate appends one update in v's encoding.
func appendFlowUpdate(b []byte, v uint8, u *FlowUpdate) ([]byte, error) {
	start := len(b)
	if u.Event == FlowUpdateAbbrev {
		ev := uint16(3) // NXFME_ABBREV
		if v >= Version14 {
			ev = uint16(FlowUpdateAbbrev)
		}
		b = be.AppendUint16(b, flowUpdateAbbrevLen)
		b = be.AppendUint16(b, ev)
		return be.AppendUint32(b, u.XID), nil
	}
	var err error
	if v >= Version14 {
		b = be.AppendUint16(b, 0)
		b = be.AppendUint16(b, uint16(u.Event))
		b = append(b, u.TableID, uint8(u.Reason))
		b = be.AppendUint16(b, u.IdleTimeout)
		b = be.AppendUint16(b, u.HardTimeout)
		b = be.AppendUint16(b, u.Priority)
		b = appendZeros(b, 4)
		b = be.AppendUint64(b, u.Cookie)
		if b, err = appendMatch(b, u.Match); err != nil {
			return nil, err
		}
		ins, err := appendInstructions(nil, u.Instructions)
		if err != nil {
			return nil, err
		}
		if v >= Version15 {
			ins = meterInstructionToAction(instructionActions(ins, actions13To15))
		}
		b = append(b, ins...)
	} else {
		ev := uint16(0) // NXFME_ADDED (also for the initial flows)
		switch u.Event {
		case FlowUpdateRemoved:
			ev = 1
		case FlowUpdateModified:
			ev = 2
		}
		b = be.AppendUint16(b, 0)
		b = be.AppendUint16(b, ev)
		b = be.AppendUint16(b, uint16(u.Reason))
		b = be.AppendUint16(b, u.Priority)
		b = be.AppendUint16(b, u.IdleTimeout)
		b = be.AppendUint16(b, u.HardTimeout)
		lenAt := len(b)
		b = be.AppendUint16(b, 0) // match_len
		b = append(b, u.TableID, 0)
		b = be.AppendUint64(b, u.Cookie)
		mStart := len(b)
		if v == Version10 {
			for _, o := range u.Match.Fields {
				if b, err = appendOXM(b, o); err != nil {
					return nil, err
				}
			}
			putLen16(b, lenAt, len(b)-mStart)
			b = appendZeros(b, roundUp8(len(b)-mStart)-(len(b)-mStart))
			acts, err := actions10Of(u.Instructions)
			if err != nil {
				return nil, err
			}
			b = append(b, acts...)
		} else {
			if b, err = appendMatch(b, u.Match); err != nil {
				return nil, err
			}
			putLen16(b, lenAt, int(be.Uint16(b[mStart+2:])))
			if b, err = appendInstructions(b, u.Instructions); err != nil {
				return nil, err
			}
		}
	}
	if len(b)-start > 0xffff {
		return nil, fmt.Errorf("ofpwire: flow update too long")
	}
	putLen16(b, start, len(b)-start)
	return b, nil
}

// actions10Of is the 1.0 action list of a flow's instructions as
// NXST_FLOW reports it: apply-actions, then write-metadata as Open
// vSwitch's action; other instructions have no 1.0 form.
func actions10Of(ins []Instruction) ([]byte, error) {
	var acts13 []byte
	for _, in := range ins {
		if ap, ok := in.(*InstrApplyActions); ok {
			var err error
			if acts13, err = appendActions(acts13, ap.Actions); err != nil {
				return nil, err
			}
		}
	}
	acts := actions13to10(acts13)
	for _, in := range ins {
		if wm, ok := in.(*InstrWriteMetadata); ok {
			acts = appendWriteMetadata10(acts, wm)
		}
	}
	return acts, nil
}

// monitorErrorOld is a flow monitor error (OFPET_MONITOR_FAILED, which
// 1.4 added) as Open vSwitch encodes it for an older peer: in 1.3 a
// Nicira experimenter error, in 1.0 Nicira's vendor error (NXET_VENDOR,
// then vendor, BAD_REQUEST and the Nicira code in front of the data);
// codes without an older form become BAD_REQUEST/EPERM. prefix goes
// before the offending bytes.
func monitorErrorOld(v uint8, e *OFPError) (err *OFPError, prefix []byte) {
	var nx10, nx13 uint16
	switch e.Code {
	case 1: // MONITOR_EXISTS
		nx10, nx13 = 517, 6
	case 5: // BAD_FLAGS
		nx10, nx13 = 518, 7
	case 3: // UNKNOWN_MONITOR
		nx10, nx13 = 519, 8
	default:
		return &OFPError{Type: ETBadRequest, Code: BRCEperm}, nil
	}
	if v == Version10 {
		prefix = be.AppendUint32(nil, NXVendor)
		prefix = be.AppendUint16(prefix, ETBadRequest)
		prefix = be.AppendUint16(prefix, nx10)
		return &OFPError{Type: nxetVendor, Code: 0}, prefix
	}
	return &OFPError{Type: ETExperimenter, Code: nx13, Experimenter: NXVendor}, nil
}

// nxetVendor is Nicira's 1.0 error type for vendor errors.
const nxetVendor = 0xb0c2

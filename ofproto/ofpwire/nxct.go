package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow"

	"github.com/netrack/openflow/ofp"
)

// Open vSwitch's conntrack and controller actions: ct (with its nested
// nat and exec actions), ct_clear and controller(...) (NXAST_CONTROLLER
// and NXAST_CONTROLLER2). They are decoded and encoded whole, so that a
// controller that installs them (every OVN logical switch has ct flows)
// gets no error; translation executes what the switch implements.

const (
	nxastClone          = 42
	nxastCheckPktLarger = 49
	nxastController     = 20
	nxastCT             = 35
	nxastNAT            = 36
	nxastController2    = 37
	nxastCTClear        = 43
)

// ct flags (NX_CT_F_*), and the recirc table meaning "none".
const (
	CTCommit      = 1 << 0
	CTForce       = 1 << 1
	CTRecircNone  = 0xff
	ctKnownFlags  = CTCommit | CTForce
	natKnownFlags = 0x1f
)

// NAT flags (NX_NAT_F_*) and which range parts are present
// (NX_NAT_RANGE_*).
const (
	NATSrc         = 1 << 0
	NATDst         = 1 << 1
	NATPersistent  = 1 << 2
	NATProtoHash   = 1 << 3
	NATProtoRandom = 1 << 4

	NATRangeIPv4Min  = 1 << 0
	NATRangeIPv4Max  = 1 << 1
	NATRangeIPv6Min  = 1 << 2
	NATRangeIPv6Max  = 1 << 3
	NATRangeProtoMin = 1 << 4
	NATRangeProtoMax = 1 << 5
)

// ActionCT sends the packet through the connection tracker (Open
// vSwitch's ct): Flags (CTCommit, CTForce), the zone from bits
// ZoneOfs..ZoneOfs+ZoneNBits-1 of ZoneField when HasZoneField, else
// ZoneImm, then on to RecircTable (CTRecircNone: no recirculation), with
// ALG Alg (0: none) and nested Actions (nat, and set-field or move on
// ct_mark/ct_label under exec).
type ActionCT struct {
	Flags              uint16
	HasZoneField       bool
	ZoneField          ofp.XMType
	ZoneOfs, ZoneNBits uint16
	ZoneImm            uint16
	RecircTable        uint8
	Alg                uint16
	Actions            []Action
}

// ActionNAT is ct's nat: Flags (NATSrc, NATDst, ...) and the range parts
// RangePresent says are there, in wire order: IPv4 min/max, IPv6
// min/max, protocol port min/max.
type ActionNAT struct {
	Flags, RangePresent uint16
	IPv4Min, IPv4Max    [4]byte
	IPv6Min, IPv6Max    [16]byte
	ProtoMin, ProtoMax  uint16
}

// ActionCTClear clears the packet's connection-tracking state.
type ActionCTClear struct{}

// ActionClone runs Actions on a copy of the packet and its pipeline state;
// the original goes on unchanged after it.
type ActionClone struct{ Actions []Action }

// ActionCheckPktLarger sets bit Ofs of field Dst to whether the packet is
// longer than PktLen bytes (check_pkt_larger).
type ActionCheckPktLarger struct {
	PktLen uint16
	Dst    ofp.XMType
	Ofs    uint16
}

// ActionType implements Action.
func (*ActionClone) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionCheckPktLarger) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (a *ActionClone) appendTo(b []byte) ([]byte, error) {
	start := len(b)
	b = appendZeros(nxHeader(b, 0, nxastClone), 6)
	b, err := appendActions(b, a.Actions)
	if err != nil {
		return b, err
	}
	if len(b)-start > 0xfff8 {
		return b, fmt.Errorf("ofpwire: clone action too long")
	}
	putLen16(b, start+2, len(b)-start)
	return b, nil
}

func (a *ActionCheckPktLarger) appendTo(b []byte) ([]byte, error) {
	size, _, ok := FieldSize(a.Dst)
	if !ok {
		return b, fmt.Errorf("ofpwire: check_pkt_larger into unknown field %d", a.Dst)
	}
	b = nxHeader(b, 24, nxastCheckPktLarger)
	b = be.AppendUint16(b, a.PktLen)
	b = be.AppendUint16(b, a.Ofs)
	b = be.AppendUint32(b, OXMHeader(ClassOf(a.Dst), a.Dst, false, size))
	return appendZeros(b, 6), nil
}

// ActionController sends the packet to the controllers with Open vSwitch's
// options: MaxLen bytes of it (0xffff: all), to controller ControllerID,
// with reason Reason, Userdata for the controller, Pause (the pipeline
// stops, to be resumed by the controller) and a meter (MeterID; NoMeter:
// none).
type ActionController struct {
	MaxLen, ControllerID uint16
	Reason               uint8
	Userdata             []byte
	Pause                bool
	MeterID              uint32
}

// NoMeter is ActionController.MeterID when no meter applies.
const NoMeter = 0xffffffff

// ActionType implements Action.
func (*ActionCT) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionNAT) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionCTClear) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionController) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (a *ActionCT) appendTo(b []byte) ([]byte, error) {
	start := len(b)
	b = nxHeader(b, 0, nxastCT)
	b = be.AppendUint16(b, a.Flags)
	if a.HasZoneField {
		size, _, ok := FieldSize(a.ZoneField)
		if !ok || a.ZoneNBits == 0 || a.ZoneNBits > 64 {
			return b, fmt.Errorf("ofpwire: ct zone from field %d", a.ZoneField)
		}
		b = be.AppendUint32(b, OXMHeader(ClassOf(a.ZoneField), a.ZoneField, false, size))
		b = be.AppendUint16(b, a.ZoneOfs<<6|(a.ZoneNBits-1))
	} else {
		b = be.AppendUint32(b, 0)
		b = be.AppendUint16(b, a.ZoneImm)
	}
	b = append(b, a.RecircTable, 0, 0, 0)
	b = be.AppendUint16(b, a.Alg)
	b, err := appendActions(b, a.Actions)
	if err != nil {
		return b, err
	}
	if len(b)-start > 0xfff8 {
		return b, fmt.Errorf("ofpwire: ct action too long")
	}
	putLen16(b, start+2, len(b)-start)
	return b, nil
}

func (a *ActionNAT) appendTo(b []byte) ([]byte, error) {
	start := len(b)
	b = nxHeader(b, 0, nxastNAT)
	b = append(b, 0, 0)
	b = be.AppendUint16(b, a.Flags)
	b = be.AppendUint16(b, a.RangePresent)
	if a.RangePresent&NATRangeIPv4Min != 0 {
		b = append(b, a.IPv4Min[:]...)
	}
	if a.RangePresent&NATRangeIPv4Max != 0 {
		b = append(b, a.IPv4Max[:]...)
	}
	if a.RangePresent&NATRangeIPv6Min != 0 {
		b = append(b, a.IPv6Min[:]...)
	}
	if a.RangePresent&NATRangeIPv6Max != 0 {
		b = append(b, a.IPv6Max[:]...)
	}
	if a.RangePresent&NATRangeProtoMin != 0 {
		b = be.AppendUint16(b, a.ProtoMin)
	}
	if a.RangePresent&NATRangeProtoMax != 0 {
		b = be.AppendUint16(b, a.ProtoMax)
	}
	return padAction(b, start), nil
}

func (a *ActionCTClear) appendTo(b []byte) ([]byte, error) {
	return appendZeros(nxHeader(b, 16, nxastCTClear), 6), nil
}

// appendProp appends an OpenFlow property (type, length, value, padding
// to 8 bytes).
func appendProp(b []byte, typ uint16, v []byte) []byte {
	b = be.AppendUint16(b, typ)
	b = be.AppendUint16(b, uint16(4+len(v)))
	b = append(b, v...)
	return appendZeros(b, roundUp8(4+len(v))-4-len(v))
}

// NXAC2PT_* properties of NXAST_CONTROLLER2.
const (
	nxac2MaxLen = iota
	nxac2ControllerID
	nxac2Reason
	nxac2Userdata
	nxac2Pause
	nxac2MeterID
)

// appendTo writes NXAST_CONTROLLER2 with the properties that differ from
// their defaults, as Open vSwitch does.
func (a *ActionController) appendTo(b []byte) ([]byte, error) {
	start := len(b)
	b = appendZeros(nxHeader(b, 0, nxastController2), 6)
	if a.MaxLen != 0xffff {
		b = appendProp(b, nxac2MaxLen, be.AppendUint16(nil, a.MaxLen))
	}
	if a.ControllerID != 0 {
		b = appendProp(b, nxac2ControllerID, be.AppendUint16(nil, a.ControllerID))
	}
	if a.Reason != uint8(ofp.PacketInReasonAction) {
		b = appendProp(b, nxac2Reason, []byte{a.Reason})
	}
	if len(a.Userdata) > 0 {
		if len(a.Userdata) > 0xff00 {
			return b, fmt.Errorf("ofpwire: controller userdata too long")
		}
		b = appendProp(b, nxac2Userdata, a.Userdata)
	}
	if a.Pause {
		b = appendProp(b, nxac2Pause, nil)
	}
	if a.MeterID != NoMeter {
		b = appendProp(b, nxac2MeterID, be.AppendUint32(nil, a.MeterID))
	}
	putLen16(b, start+2, len(b)-start)
	return b, nil
}

// parseNXCT decodes the conntrack and controller subtypes (a is the whole
// action); ok false for other subtypes.
func parseNXCT(st uint16, a []byte) (Action, bool, error) {
	switch st {
	case nxastCT:
		if len(a) < 24 {
			return nil, true, errActionLen
		}
		ct := &ActionCT{Flags: be.Uint16(a[10:]), RecircTable: a[18], Alg: be.Uint16(a[22:])}
		if ct.Flags&^ctKnownFlags != 0 || a[19]|a[20]|a[21] != 0 {
			return nil, true, errActionArg
		}
		if zs := be.Uint32(a[12:]); zs != 0 {
			f, err := fieldByHeader(zs)
			if err != nil {
				return nil, true, err
			}
			on := be.Uint16(a[16:])
			ct.HasZoneField, ct.ZoneField, ct.ZoneOfs, ct.ZoneNBits = true, f, on>>6, on&0x3f+1
			if int(ct.ZoneOfs)+int(ct.ZoneNBits) > FieldBits(f) {
				return nil, true, errActionArg
			}
		} else {
			ct.ZoneImm = be.Uint16(a[16:])
		}
		acts, err := parseActions(a[24:])
		if err != nil {
			return nil, true, err
		}
		ct.Actions = acts
		return ct, true, nil
	case nxastNAT:
		nat, err := parseNAT(a)
		return nat, true, err
	case nxastClone:
		if a[10]|a[11]|a[12]|a[13]|a[14]|a[15] != 0 {
			return nil, true, errActionArg
		}
		acts, err := parseActions(a[16:])
		if err != nil {
			return nil, true, err
		}
		return &ActionClone{Actions: acts}, true, nil
	case nxastCheckPktLarger:
		if len(a) != 24 {
			return nil, true, errActionLen
		}
		f, err := fieldByHeader(be.Uint32(a[14:]))
		if err != nil {
			return nil, true, err
		}
		c := &ActionCheckPktLarger{PktLen: be.Uint16(a[10:]), Ofs: be.Uint16(a[12:]), Dst: f}
		for _, p := range a[18:] {
			if p != 0 {
				return nil, true, errActionArg
			}
		}
		if int(c.Ofs) >= FieldBits(f) {
			return nil, true, errActionArg
		}
		return c, true, nil
	case nxastCTClear:
		if len(a) != 16 {
			return nil, true, errActionLen
		}
		return &ActionCTClear{}, true, nil
	case nxastController:
		if len(a) != 16 {
			return nil, true, errActionLen
		}
		return &ActionController{MaxLen: be.Uint16(a[10:]), ControllerID: be.Uint16(a[12:]), Reason: a[14],
			MeterID: NoMeter}, true, nil
	case nxastController2:
		c, err := parseController2(a[16:])
		return c, true, err
	}
	return nil, false, nil
}

func parseNAT(a []byte) (Action, error) {
	if len(a) < 16 || a[10]|a[11] != 0 {
		return nil, errActionLen
	}
	n := &ActionNAT{Flags: be.Uint16(a[12:]), RangePresent: be.Uint16(a[14:])}
	if n.Flags&^natKnownFlags != 0 || n.Flags&NATSrc != 0 && n.Flags&NATDst != 0 || n.RangePresent&^0x3f != 0 ||
		n.Flags&NATProtoHash != 0 && n.Flags&NATProtoRandom != 0 {
		return nil, errActionArg
	}
	r := a[16:]
	take := func(bit uint16, dst []byte) bool {
		if n.RangePresent&bit == 0 {
			return true
		}
		if len(r) < len(dst) {
			return false
		}
		copy(dst, r)
		r = r[len(dst):]
		return true
	}
	var pmin, pmax [2]byte
	if !take(NATRangeIPv4Min, n.IPv4Min[:]) || !take(NATRangeIPv4Max, n.IPv4Max[:]) ||
		!take(NATRangeIPv6Min, n.IPv6Min[:]) || !take(NATRangeIPv6Max, n.IPv6Max[:]) ||
		!take(NATRangeProtoMin, pmin[:]) || !take(NATRangeProtoMax, pmax[:]) {
		return nil, errActionLen
	}
	n.ProtoMin, n.ProtoMax = be.Uint16(pmin[:]), be.Uint16(pmax[:])
	for _, p := range r {
		if p != 0 {
			return nil, errActionArg
		}
	}
	return n, nil
}

// controller2PropLen is the value length of the fixed-size properties.
var controller2PropLen = map[uint16]int{nxac2MaxLen: 2, nxac2ControllerID: 2, nxac2Reason: 1, nxac2Pause: 0, nxac2MeterID: 4}

func parseController2(props []byte) (Action, error) {
	c := &ActionController{MaxLen: 0xffff, Reason: uint8(ofp.PacketInReasonAction), MeterID: NoMeter}
	err := eachProp(props, errActionLen, func(typ uint16, v []byte) error {
		if w, fixed := controller2PropLen[typ]; fixed && len(v) != w {
			// Open vSwitch writes a 16-bit value with its 2 bytes of
			// padding inside the property's length.
			if w != 2 || len(v) != 4 {
				return errActionLen
			}
		}
		switch typ {
		case nxac2MaxLen:
			c.MaxLen = be.Uint16(v)
		case nxac2ControllerID:
			c.ControllerID = be.Uint16(v)
		case nxac2Reason:
			c.Reason = v[0]
		case nxac2Userdata:
			c.Userdata = cloneBytes(v)
		case nxac2Pause:
			c.Pause = true
		case nxac2MeterID:
			c.MeterID = be.Uint32(v)
		default:
			return &OFPError{Type: ETBadProperty, Code: BPCBadType, Reason: "unknown controller2 property"}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// NXTCTFlushZone is the subtype of NXT_CT_FLUSH_ZONE.
const NXTCTFlushZone = 29

// CTFlushZone is NXT_CT_FLUSH_ZONE: the controller asks the switch to
// forget every tracked connection of Zone (ovn-controller sends it when
// it gives a zone to a new port).
type CTFlushZone struct{ Zone uint16 }

// MsgType implements Message: NXT_CT_FLUSH_ZONE is an experimenter message.
func (*CTFlushZone) MsgType() openflow.Type { return openflow.TypeExperiment }

func (m *CTFlushZone) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(b, NXVendor)
	b = be.AppendUint32(b, NXTCTFlushZone)
	b = append(b, 0, 0, 0, 0, 0, 0) // struct nx_zone_id: zeros, then the zone
	return be.AppendUint16(b, m.Zone), nil
}

func (m *CTFlushZone) decodeBody(b []byte) error {
	if len(b) != 16 || be.Uint32(b) != NXVendor || be.Uint32(b[4:]) != NXTCTFlushZone {
		return errBadLen
	}
	m.Zone = be.Uint16(b[14:])
	return nil
}

// NXTCTFlush is the subtype of NXT_CT_FLUSH.
const NXTCTFlush = 32

// CTFlush is NXT_CT_FLUSH: the controller asks the switch to forget the
// tracked connections that match, in Zone when set (ovn-controller sends
// it for a load balancer's backends when they go away). Zero fields match
// anything; an ICMP tuple's id, type and code are always compared.
type CTFlush struct {
	Proto       uint8
	Zone        *uint16
	Orig, Reply CTFlushTuple
}

// CTFlushTuple is one direction of a CTFlush; addresses are IPv6 or
// IPv4-mapped, zero for any.
type CTFlushTuple struct {
	Src, Dst           [16]byte
	SrcPort, DstPort   uint16
	ICMPID             uint16
	ICMPType, ICMPCode uint8
}

// NXT_CT_FLUSH's properties: the two tuples (nested) and the zone.
const (
	ctFlushOrig = iota
	ctFlushReply
	ctFlushZone
)

// Properties nested in a tuple.
const (
	ctTupleSrc = iota
	ctTupleDst
	ctTupleSrcPort
	ctTupleDstPort
	ctTupleICMPID
	ctTupleICMPType
	ctTupleICMPCode
)

// MsgType implements Message: NXT_CT_FLUSH is an experimenter message.
func (*CTFlush) MsgType() openflow.Type { return openflow.TypeExperiment }

func (m *CTFlush) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(b, NXVendor)
	b = be.AppendUint32(b, NXTCTFlush)
	b = appendZeros(append(b, m.Proto), 7)
	icmp := m.Proto == 1 || m.Proto == 58
	for i, tu := range []*CTFlushTuple{&m.Orig, &m.Reply} {
		var in []byte
		if tu.Src != ([16]byte{}) {
			in = appendProp(in, ctTupleSrc, tu.Src[:])
		}
		if tu.Dst != ([16]byte{}) {
			in = appendProp(in, ctTupleDst, tu.Dst[:])
		}
		if icmp {
			in = appendProp(in, ctTupleICMPID, be16Prop(tu.ICMPID))
			in = appendProp(in, ctTupleICMPType, []byte{tu.ICMPType})
			in = appendProp(in, ctTupleICMPCode, []byte{tu.ICMPCode})
		} else {
			if tu.SrcPort != 0 {
				in = appendProp(in, ctTupleSrcPort, be16Prop(tu.SrcPort))
			}
			if tu.DstPort != 0 {
				in = appendProp(in, ctTupleDstPort, be16Prop(tu.DstPort))
			}
		}
		if len(in) > 0 {
			// A nested property's contents start 8-aligned.
			b = appendProp(b, uint16(ctFlushOrig+i), append(make([]byte, 4), in...))
		}
	}
	if m.Zone != nil {
		b = appendProp(b, ctFlushZone, be16Prop(*m.Zone))
	}
	return b, nil
}

func (m *CTFlush) decodeBody(b []byte) error {
	if len(b) < 16 || be.Uint32(b) != NXVendor || be.Uint32(b[4:]) != NXTCTFlush {
		return errBadLen
	}
	return m.decode(b[8:])
}

// ParseCTFlush decodes NXT_CT_FLUSH's body after the experimenter
// header.
func ParseCTFlush(b []byte) (*CTFlush, error) {
	m := &CTFlush{}
	return m, m.decode(b)
}

func (m *CTFlush) decode(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	for _, p := range b[1:8] {
		if p != 0 {
			return &OFPError{Type: ETBadRequest, Code: BRCBadLen, Reason: "NXT_CT_FLUSH padding must be zero"}
		}
	}
	m.Proto = b[0]
	badLen := propErr(BPCBadLen, "NXT_CT_FLUSH property length")
	return eachProp(b[8:], badLen, func(typ uint16, v []byte) error {
		switch typ {
		case ctFlushOrig, ctFlushReply:
			tu := &m.Orig
			if typ == ctFlushReply {
				tu = &m.Reply
			}
			if len(v) < 4 {
				return propErr(BPCBadLen, "NXT_CT_FLUSH tuple length")
			}
			return eachProp(v[4:], badLen, tu.decodeProp)
		case ctFlushZone:
			if len(v) < 2 {
				return propErr(BPCBadLen, "NXT_CT_FLUSH zone length")
			}
			z := be.Uint16(v)
			m.Zone = &z
		}
		return nil // unknown properties are skipped, as Open vSwitch does
	})
}

func (tu *CTFlushTuple) decodeProp(typ uint16, v []byte) error {
	want := map[uint16]int{ctTupleSrc: 16, ctTupleDst: 16, ctTupleSrcPort: 2, ctTupleDstPort: 2,
		ctTupleICMPID: 2, ctTupleICMPType: 1, ctTupleICMPCode: 1}[typ]
	if len(v) < want { // OpenFlow pads 16-bit values inside the length
		return propErr(BPCBadLen, "NXT_CT_FLUSH tuple property length")
	}
	switch typ {
	case ctTupleSrc:
		copy(tu.Src[:], v)
	case ctTupleDst:
		copy(tu.Dst[:], v)
	case ctTupleSrcPort:
		tu.SrcPort = be.Uint16(v)
	case ctTupleDstPort:
		tu.DstPort = be.Uint16(v)
	case ctTupleICMPID:
		tu.ICMPID = be.Uint16(v)
	case ctTupleICMPType:
		tu.ICMPType = v[0]
	case ctTupleICMPCode:
		tu.ICMPCode = v[0]
	}
	return nil
}

// be16Prop is a 16-bit property value as OpenFlow writes it: two bytes of
// padding inside the property's length.
func be16Prop(v uint16) []byte { return []byte{byte(v >> 8), byte(v), 0, 0} }

// eachProp calls f with each OpenFlow property of b (type, value without
// padding), or returns bad when b is not a whole number of properties.
func eachProp(b []byte, bad error, f func(typ uint16, v []byte) error) error {
	for len(b) > 0 {
		if len(b) < 4 {
			return bad
		}
		typ, n := be.Uint16(b), int(be.Uint16(b[2:]))
		if n < 4 || roundUp8(n) > len(b) {
			return bad
		}
		if err := f(typ, b[4:n]); err != nil {
			return err
		}
		b = b[roundUp8(n):]
	}
	return nil
}

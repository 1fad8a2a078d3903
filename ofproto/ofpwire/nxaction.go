package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// Open vSwitch's (Nicira's) extension actions: experimenter actions with
// vendor NXVendor and a 16-bit subtype after it. The ones decoded here
// become the typed actions below; other subtypes stay ActionExperimenter.
// A masked set-field (OpenFlow 1.5) and reg_load/reg_load2 are all one
// ActionSetField with a mask; move and OpenFlow 1.5's copy_field are one
// ActionRegMove. OpenFlow 1.3 has neither a masked set-field nor
// copy_field, so they are sent to 1.3 peers as reg_load2 and reg_move, as
// Open vSwitch does, and the 1.5 encoding rewrites them back.

// NXVendor is Nicira's experimenter id (NX_VENDOR_ID).
const NXVendor = 0x00002320

// NX action subtypes decoded here.
const (
	nxastResubmit        = 1
	nxastRegMove         = 6
	nxastRegLoad         = 7
	nxastSetQueue        = 4
	nxastPopQueue        = 5
	nxastNote            = 8
	nxastResubmitTable   = 14
	nxastExit            = 17
	nxastDecTTL          = 18
	nxastDecTTLCntIDs    = 21
	nxastWriteMetadata   = 22
	nxastStackPush       = 27
	nxastStackPop        = 28
	nxastRegLoad2        = 33
	nxastConjunction     = 34
	nxastResubmitTableCT = 44
)

// TableCurrent in ActionResubmit.Table means the table of the entry
// executing the resubmit (OVS's 255).
const TableCurrent = 0xff

// ActionResubmit looks the packet up again in Table, as if it had arrived
// on InPort (PortIn: the port it has), runs the entry found, and comes
// back to the actions after it (Open vSwitch's resubmit). CT asks for the
// lookup on the connection's original direction (resubmit(,,ct)).
type ActionResubmit struct {
	InPort ofp.PortNo
	Table  uint8
	CT     bool
}

// ActionRegMove copies NBits bits of field Src from bit SrcOfs to field Dst
// from bit DstOfs (move, copy_field). Fields are internal numbers (basic,
// or extension fields such as registers); bit 0 is a field's least
// significant.
type ActionRegMove struct {
	Src, Dst       ofp.XMType
	SrcOfs, DstOfs uint16
	NBits          uint16
}

// ActionStack pushes bits Ofs..Ofs+NBits-1 of Field onto the
// translation's stack, or (Pop) pops the top value into them.
type ActionStack struct {
	Pop        bool
	Field      ofp.XMType
	Ofs, NBits uint16
}

// ActionDecTTLIDs is dec_ttl naming the controllers (by controller id)
// that a packet whose TTL runs out goes to: none drops it silently. OVN
// emits it with no id.
type ActionDecTTLIDs struct{ IDs []uint16 }

// ActionConjunction makes its flow one clause (Clause, from 0) of the
// NClauses-dimensional conjunctive match ID: a packet matching a flow of
// every clause matches the flows with conj_id=ID.
type ActionConjunction struct {
	ID               uint32
	Clause, NClauses uint8
}

// ActionType implements Action.
func (*ActionConjunction) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (a *ActionConjunction) appendTo(b []byte) ([]byte, error) {
	b = nxHeader(b, 16, nxastConjunction)
	b = append(b, a.Clause, a.NClauses)
	return be.AppendUint32(b, a.ID), nil
}

// ActionNote carries bytes a controller attaches to a flow; it does
// nothing.
type ActionNote struct{ Note []byte }

// ActionExit stops executing actions: the action set, if any, still runs.
type ActionExit struct{}

// ActionPopQueue restores the queue a set_queue changed (ovs-ofctl sends
// enqueue to 1.1+ peers as set_queue, output, pop_queue). This switch has
// no queues, so like set_queue it changes nothing.
type ActionPopQueue struct{}

// ActionType implements Action.
func (*ActionPopQueue) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (*ActionPopQueue) appendTo(b []byte) ([]byte, error) {
	return appendZeros(nxHeader(b, 16, nxastPopQueue), 6), nil
}

// ActionType implements Action.
func (*ActionResubmit) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionRegMove) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionNote) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionStack) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionDecTTLIDs) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (a *ActionStack) appendTo(b []byte) ([]byte, error) {
	size, _, ok := FieldSize(a.Field)
	if !ok {
		return b, fmt.Errorf("ofpwire: stack on unknown field %d", a.Field)
	}
	st := uint16(nxastStackPush)
	if a.Pop {
		st = nxastStackPop
	}
	b = nxHeader(b, 24, st)
	b = be.AppendUint16(b, a.Ofs)
	b = be.AppendUint32(b, OXMHeader(ClassOf(a.Field), a.Field, false, size))
	b = be.AppendUint16(b, a.NBits)
	return appendZeros(b, 6), nil
}

func (a *ActionDecTTLIDs) appendTo(b []byte) ([]byte, error) {
	n := 16 + roundUp8(2*len(a.IDs))
	if n > 0xfff8 {
		return b, fmt.Errorf("ofpwire: dec_ttl with too many controller ids")
	}
	b = nxHeader(b, n, nxastDecTTLCntIDs)
	b = be.AppendUint16(b, uint16(len(a.IDs)))
	b = appendZeros(b, 4)
	for _, id := range a.IDs {
		b = be.AppendUint16(b, id)
	}
	return appendZeros(b, roundUp8(2*len(a.IDs))-2*len(a.IDs)), nil
}

// ActionType implements Action.
func (*ActionExit) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// nxHeader starts an NX action of n bytes (a multiple of 8) with subtype st.
func nxHeader(b []byte, n int, st uint16) []byte {
	b = actHdr(b, ofp.ActionTypeExperimenter, n)
	b = be.AppendUint32(b, NXVendor)
	return be.AppendUint16(b, st)
}

// port16 is the OpenFlow 1.0 form of a port: reserved ports keep their low
// 16 bits (OFPP_IN_PORT 0xfff8, ...).
func port16(p ofp.PortNo) uint16 { return uint16(p) }

// port32 is the reverse: 0xff00 and above are the reserved ports.
func port32(p uint16) ofp.PortNo {
	if p >= 0xff00 {
		return ofp.PortNo(0xffff0000 | uint32(p))
	}
	return ofp.PortNo(p)
}

func (a *ActionResubmit) appendTo(b []byte) ([]byte, error) {
	st := uint16(nxastResubmitTable)
	if a.CT {
		st = nxastResubmitTableCT
	}
	b = nxHeader(b, 16, st)
	b = be.AppendUint16(b, port16(a.InPort))
	return append(b, a.Table, 0, 0, 0), nil
}

func (a *ActionRegMove) appendTo(b []byte) ([]byte, error) {
	src, dst, err := a.headers()
	if err != nil {
		return b, err
	}
	b = nxHeader(b, 24, nxastRegMove)
	b = be.AppendUint16(b, a.NBits)
	b = be.AppendUint16(b, a.SrcOfs)
	b = be.AppendUint16(b, a.DstOfs)
	b = be.AppendUint32(b, src)
	return be.AppendUint32(b, dst), nil
}

// headers returns the OXM/NXM headers naming the move's fields.
func (a *ActionRegMove) headers() (src, dst uint32, err error) {
	ss, _, ok1 := FieldSize(a.Src)
	ds, _, ok2 := FieldSize(a.Dst)
	if !ok1 || !ok2 {
		return 0, 0, fmt.Errorf("ofpwire: move between unknown fields %d, %d", a.Src, a.Dst)
	}
	return OXMHeader(ClassOf(a.Src), a.Src, false, ss), OXMHeader(ClassOf(a.Dst), a.Dst, false, ds), nil
}

func (a *ActionNote) appendTo(b []byte) ([]byte, error) {
	n := roundUp8(10 + len(a.Note))
	if n < 16 {
		n = 16
	}
	if n > 0xfff8 {
		return b, fmt.Errorf("ofpwire: note too long")
	}
	b = nxHeader(b, n, nxastNote)
	b = append(b, a.Note...)
	return appendZeros(b, n-10-len(a.Note)), nil
}

func (a *ActionExit) appendTo(b []byte) ([]byte, error) {
	return appendZeros(nxHeader(b, 16, nxastExit), 6), nil
}

// LoadSegments splits a masked set-field into the reg_loads that express
// it, as Open vSwitch does: one per run of contiguous mask bits, at most
// 64 bits each, from the least significant; fn gets each run's offset,
// width and value. A set-field whose mask covers no bit has none.
func LoadSegments(o OXM, fn func(ofs, n int, v uint64)) {
	width := 8 * len(o.Value)
	for ofs := 0; ofs < width; {
		if Bits(o.Mask, ofs, 1) == 0 {
			ofs++
			continue
		}
		n := 1
		for ofs+n < width && n < 64 && Bits(o.Mask, ofs+n, 1) == 1 {
			n++
		}
		fn(ofs, n, Bits(o.Value, ofs, n))
		ofs += n
	}
}

// IsOneLoad reports whether a masked set-field is one reg_load: its mask
// one run of at most 64 bits.
func IsOneLoad(o OXM) bool {
	n := 0
	LoadSegments(o, func(int, int, uint64) { n++ })
	return n == 1
}

// appendMaskedSetField encodes a masked set-field for OpenFlow 1.3 as
// Open vSwitch does: NXAST_REG_LOAD when one load says it (the usual
// case: a contiguous mask), NXAST_REG_LOAD2 (the OXM with its mask)
// otherwise, so that it decodes back as the one action it was.
func appendMaskedSetField(b []byte, o OXM) ([]byte, error) {
	size, _, ok := FieldSize(o.Field)
	if !ok || !knownField(o) || len(o.Value) != size || len(o.Mask) != size {
		return b, fmt.Errorf("ofpwire: masked set-field on field %d of %d bytes", o.Field, len(o.Value))
	}
	if !IsOneLoad(o) {
		start := len(b)
		b = nxHeader(b, 0, nxastRegLoad2)
		b = be.AppendUint32(b, OXMHeader(o.Class, o.Field, true, 2*size))
		b = append(append(b, o.Value...), o.Mask...)
		return padAction(b, start), nil
	}
	LoadSegments(o, func(ofs, n int, v uint64) {
		b = nxHeader(b, 24, nxastRegLoad)
		b = be.AppendUint16(b, uint16(ofs<<6|(n-1)))
		b = be.AppendUint32(b, OXMHeader(o.Class, o.Field, false, size))
		b = be.AppendUint64(b, v)
	})
	return b, nil
}

// parseNX decodes an NX action (a is the whole action, vendor included);
// unknown subtypes stay ActionExperimenter.
func parseNX(a []byte) (Action, error) {
	if len(a) < 16 {
		return nil, errActionLen
	}
	st := be.Uint16(a[8:])
	switch st {
	case nxastResubmit, nxastResubmitTable, nxastResubmitTableCT:
		if len(a) != 16 {
			return nil, errActionLen
		}
		r := &ActionResubmit{InPort: port32(be.Uint16(a[10:])), Table: TableCurrent, CT: st == nxastResubmitTableCT}
		if st != nxastResubmit {
			if a[13]|a[14]|a[15] != 0 {
				return nil, errActionArg
			}
			r.Table = a[12]
		}
		return r, nil
	case nxastRegMove:
		if len(a) != 24 {
			return nil, errActionLen
		}
		return parseMove(be.Uint16(a[10:]), be.Uint16(a[12:]), be.Uint16(a[14:]), a[16:])
	case nxastRegLoad:
		if len(a) != 24 {
			return nil, errActionLen
		}
		return parseRegLoad(be.Uint16(a[10:]), be.Uint32(a[12:]), be.Uint64(a[16:]))
	case nxastRegLoad2:
		o, n, err := parseOXMMask(a[10:], true)
		if err != nil {
			return nil, setFieldErr(err)
		}
		for _, p := range a[10+n:] {
			if p != 0 {
				return nil, errSetArg
			}
		}
		return &ActionSetField{Field: o}, nil
	case nxastNote:
		return &ActionNote{Note: cloneBytes(a[10:])}, nil
	case nxastDecTTL:
		// OpenFlow 1.0's dec_ttl (1.1 made it OFPAT_DEC_NW_TTL).
		if err := nxNoArgument(a); err != nil {
			return nil, err
		}
		return &ActionDecNwTTL{}, nil
	case nxastSetQueue:
		// OpenFlow 1.0's set_queue (1.1 made it OFPAT_SET_QUEUE).
		if len(a) != 16 {
			return nil, errActionLen
		}
		if a[10]|a[11] != 0 {
			return nil, errActionArg
		}
		return &ActionSetQueue{Queue: ofp.Queue(be.Uint32(a[12:]))}, nil
	case nxastPopQueue:
		if err := nxNoArgument(a); err != nil {
			return nil, err
		}
		return &ActionPopQueue{}, nil
	case nxastStackPush, nxastStackPop:
		if len(a) != 24 {
			return nil, errActionLen
		}
		f, err := fieldByHeader(be.Uint32(a[12:]))
		if err != nil {
			return nil, err
		}
		st := &ActionStack{Pop: st == nxastStackPop, Field: f, Ofs: be.Uint16(a[10:]), NBits: be.Uint16(a[16:])}
		for _, p := range a[18:] {
			if p != 0 {
				return nil, errActionArg
			}
		}
		if st.NBits == 0 || int(st.Ofs)+int(st.NBits) > FieldBits(f) {
			return nil, errActionArg
		}
		return st, nil
	case nxastDecTTLCntIDs:
		n := int(be.Uint16(a[10:]))
		if 16+roundUp8(2*n) != len(a) || be.Uint32(a[12:]) != 0 {
			return nil, errActionLen
		}
		d := &ActionDecTTLIDs{IDs: make([]uint16, n)}
		for i := range d.IDs {
			d.IDs[i] = be.Uint16(a[16+2*i:])
		}
		for _, p := range a[16+2*n:] {
			if p != 0 {
				return nil, errActionArg
			}
		}
		return d, nil
	case nxastExit:
		return &ActionExit{}, nil
	case nxastConjunction:
		if len(a) != 16 {
			return nil, errActionLen
		}
		c := &ActionConjunction{Clause: a[10], NClauses: a[11], ID: be.Uint32(a[12:])}
		if c.NClauses < 2 || c.NClauses > 64 || c.Clause >= c.NClauses {
			return nil, errActionArg
		}
		return c, nil
	}
	if act, ok, err := parseNXCT(st, a); ok {
		return act, err
	}
	if act, ok, err := parseNXLearn(st, a); ok {
		return act, err
	}
	if act, ok, err := parseNXMultipath(st, a); ok {
		return act, err
	}
	if act, ok, err := parseNXSample(st, a); ok {
		return act, err
	}
	return &ActionExperimenter{Experimenter: NXVendor, Data: cloneBytes(a[8:])}, nil
}

// nxNoArgument checks an NX action without an argument: 16 bytes, the
// padding after its subtype zero.
func nxNoArgument(a []byte) error {
	if len(a) != 16 {
		return errActionLen
	}
	for _, p := range a[10:] {
		if p != 0 {
			return errActionArg
		}
	}
	return nil
}

// fieldByHeader resolves a field header of an NX action or copy_field:
// OXM basic and extension classes, and the NXM_OF/NXM_NX numbers of the
// basic fields whose NXM form has the same size and meaning.
func fieldByHeader(h uint32) (ofp.XMType, error) {
	class, wire, hasMask, length := ofp.XMClass(h>>16), ofp.XMType(h>>9&0x7f), h&(1<<8) != 0, int(h&0xff)
	f, ok := ofp.XMType(0), false
	switch {
	case class == ofp.XMClassOpenflowBasic:
		f, ok = wire, int(wire) < NumBasicFields
	case class == ClassNXM0:
		if f, ok = extByWire(class, wire); !ok {
			f, ok = nxm0Fields[wire]
		}
	default:
		if f, ok = extByWire(class, wire); !ok && class == ClassNXM1 {
			f, ok = nxm1Fields[wire]
		}
	}
	if !ok {
		return 0, errMatchField
	}
	if _, tm := IsTunMetadata(f); tm {
		// Open vSwitch names these in actions at their full 124 bytes.
		if _, ok := tunMetadataLen(length, hasMask); !ok {
			return 0, errMatchLen
		}
		return f, nil
	}
	size, _, _ := FieldSize(f)
	if hasMask {
		size *= 2
	}
	if length != size {
		return 0, errMatchLen
	}
	return f, nil
}

// nxm0Fields and nxm1Fields are the NXM numbers of basic fields (OVS's
// meta-flow.h) that mean what the OXM field means at the same size.
// NXM_OF_IN_PORT (16 bits), NXM_OF_VLAN_TCI and NXM_OF_IP_TOS have other
// layouts and are not here.
var (
	nxm0Fields = map[ofp.XMType]ofp.XMType{
		1: ofp.XMTypeEthDst, 2: ofp.XMTypeEthSrc, 3: ofp.XMTypeEthType,
		6: ofp.XMTypeIPProto, 7: ofp.XMTypeIPv4Src, 8: ofp.XMTypeIPv4Dst,
		9: ofp.XMTypeTCPSrc, 10: ofp.XMTypeTCPDst, 11: ofp.XMTypeUDPSrc, 12: ofp.XMTypeUDPDst,
		13: ofp.XMTypeICMPv4Type, 14: ofp.XMTypeICMPv4Code, 15: ofp.XMTypeARPOpcode,
		16: ofp.XMTypeARPSPA, 17: ofp.XMTypeARPTPA,
	}
	nxm1Fields = map[ofp.XMType]ofp.XMType{
		16: ofp.XMTypeTunnelID, 17: ofp.XMTypeARPSHA, 18: ofp.XMTypeARPTHA,
		19: ofp.XMTypeIPv6Src, 20: ofp.XMTypeIPv6Dst, 21: ofp.XMTypeICMPv6Type, 22: ofp.XMTypeICMPv6Code,
		23: ofp.XMTypeIPv6NDTarget, 24: ofp.XMTypeIPv6NDSLL, 25: ofp.XMTypeIPv6NDTLL,
		27: ofp.XMTypeIPv6FLabel, 28: ofp.XMTypeIPECN,
	}
)

// FieldBits is the width in bits of field f (its OXM payload), 0 when f
// is unknown.
func FieldBits(f ofp.XMType) int {
	size, _, ok := FieldSize(f)
	if !ok {
		return 0
	}
	return 8 * size
}

func parseMove(nBits, srcOfs, dstOfs uint16, hdrs []byte) (Action, error) {
	src, err := fieldByHeader(be.Uint32(hdrs))
	if err != nil {
		return nil, err
	}
	dst, err := fieldByHeader(be.Uint32(hdrs[4:]))
	if err != nil {
		return nil, err
	}
	for _, p := range hdrs[8:] {
		if p != 0 {
			return nil, errActionArg
		}
	}
	m := &ActionRegMove{Src: src, Dst: dst, SrcOfs: srcOfs, DstOfs: dstOfs, NBits: nBits}
	if nBits == 0 || int(srcOfs)+int(nBits) > FieldBits(src) || int(dstOfs)+int(nBits) > FieldBits(dst) {
		return nil, errSetArg
	}
	return m, nil
}

// parseRegLoad turns reg_load (value into bits ofs..ofs+n-1 of dst) into
// the masked set-field it is.
func parseRegLoad(ofsNBits uint16, dst uint32, v uint64) (Action, error) {
	f, err := fieldByHeader(dst)
	if err != nil {
		return nil, err
	}
	ofs, n := int(ofsNBits>>6), int(ofsNBits&0x3f)+1
	if ofs+n > FieldBits(f) || n < 64 && v>>n != 0 {
		return nil, errActionArg
	}
	size, _, _ := FieldSize(f)
	vm := make([]byte, 2*size) // value and mask, one allocation
	val, mask := vm[:size:size], vm[size:]
	PutBits(val, ofs, n, v)
	PutBits(mask, ofs, n, ^uint64(0))
	return &ActionSetField{Field: NewMaskedOXM(f, val, mask)}, nil
}

// Bits returns n (at most 64) bits of the big-endian number b from bit ofs
// (bit 0 is the last byte's least significant). It goes a byte at a time,
// not a bit: register loads and moves call it on every upcall.
func Bits(b []byte, ofs, n int) uint64 {
	if n <= 0 {
		return 0
	}
	lo, hi, s := ofs/8, (ofs+n-1)/8, uint(ofs%8)
	// At most 9 bytes (64 bits shifted by up to 7): byte lo+j lands at
	// bit 8j-s of the result, the first one's low s bits falling off.
	last := len(b) - 1
	v := uint64(b[last-lo]) >> s
	for j := lo + 1; j <= hi; j++ {
		v |= uint64(b[last-j]) << (uint(8*(j-lo)) - s)
	}
	if n < 64 {
		v &= 1<<uint(n) - 1
	}
	return v
}

// PutBits stores the low n (at most 64) bits of v into b from bit ofs,
// a byte at a time like Bits.
func PutBits(b []byte, ofs, n int, v uint64) {
	if n <= 0 {
		return
	}
	m := ^uint64(0)
	if n < 64 {
		m = 1<<uint(n) - 1
	}
	v &= m
	lo, hi, s := ofs/8, (ofs+n-1)/8, uint(ofs%8)
	last := len(b) - 1
	byt := &b[last-lo]
	*byt = *byt&^byte(m<<s) | byte(v<<s)
	for j := lo + 1; j <= hi; j++ {
		sh := uint(8*(j-lo)) - s
		byt := &b[last-j]
		*byt = *byt&^byte(m>>sh) | byte(v>>sh)
	}
}

// setFieldErr maps a match decoding error to the set-field code of
// BAD_ACTION.
func setFieldErr(err error) error {
	switch err {
	case errMatchField:
		return errSetType
	case errMatchLen:
		return errSetLen
	}
	return errSetArg
}

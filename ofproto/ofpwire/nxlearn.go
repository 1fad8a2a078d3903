package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// Open vSwitch's learn (NXAST_LEARN, NXAST_LEARN2), fin_timeout
// (NXAST_FIN_TIMEOUT) and output_reg (NXAST_OUTPUT_REG) actions. learn builds a flow from the packet being
// processed and adds it (or refreshes it, when the same flow exists) to
// a table: OVN learns its load-balancer hairpin and affinity flows so,
// and the classic MAC-learning recipe is one learn action.

const (
	nxastLearn      = 16
	nxastFinTimeout = 19
	nxastLearn2     = 45
)

// learn flags (NX_LEARN_F_*).
const (
	// LearnSendFlowRem gives the learned flow OFPFF_SEND_FLOW_REM.
	LearnSendFlowRem = 1 << 0
	// LearnDeleteLearned deletes the flows learned into TableID with
	// Cookie once the last flow holding this learn action is gone.
	LearnDeleteLearned = 1 << 1
	// LearnWriteResult writes 1 to ResultDst when the flow was learned,
	// 0 when Limit refused it.
	LearnWriteResult = 1 << 2
)

// Where a learn spec's value goes (NX_LEARN_DST_*, already shifted into
// the spec header's bits 11-12).
const (
	LearnDstMatch  = 0 << 11
	LearnDstLoad   = 1 << 11
	LearnDstOutput = 2 << 11
)

const (
	learnSrcImmediate = 1 << 13
	learnNBitsMask    = 0x3ff
)

// ActionLearn adds a flow to TableID (or refreshes it, when the table
// already has one with the same match and priority), built by Specs from
// the packet: matches on field values, loads, an output. The learned flow
// has the idle and hard timeouts, priority, cookie and flags given; with
// fin timeouts it gets a fin_timeout action first. Limit (0: none) caps
// the flows this action has learned that still exist.
type ActionLearn struct {
	IdleTimeout, HardTimeout       uint16
	Priority                       uint16
	Cookie                         uint64
	Flags                          uint16
	TableID                        uint8
	FinIdleTimeout, FinHardTimeout uint16
	Limit                          uint32
	// ResultDst and ResultDstOfs name the bit LearnWriteResult writes.
	ResultDst    ofp.XMType
	ResultDstOfs uint16
	Specs        []LearnSpec
}

// LearnSpec is one piece of a learned flow: NBits bits taken from a
// field of the packet (SrcField from bit SrcOfs) or an immediate value
// (Imm, big-endian, the value in its low NBits bits), put into the
// learned flow's match (Dst LearnDstMatch) or loaded by its actions
// (LearnDstLoad) into DstField from bit DstOfs, or used as the port of
// an output action (LearnDstOutput).
type LearnSpec struct {
	NBits    uint16
	Imm      []byte // nil: the source is SrcField
	SrcField ofp.XMType
	SrcOfs   uint16
	Dst      uint16
	DstField ofp.XMType
	DstOfs   uint16
}

// ActionFinTimeout shortens the timeouts of the flow it is in once a TCP
// FIN or RST passes: to IdleTimeout and HardTimeout seconds (0: leave
// that timeout alone) when they are shorter than what is left.
type ActionFinTimeout struct{ IdleTimeout, HardTimeout uint16 }

// ActionType implements Action.
func (*ActionLearn) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionFinTimeout) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (a *ActionFinTimeout) appendTo(b []byte) ([]byte, error) {
	b = nxHeader(b, 16, nxastFinTimeout)
	b = be.AppendUint16(b, a.IdleTimeout)
	b = be.AppendUint16(b, a.HardTimeout)
	return appendZeros(b, 2), nil
}

// fieldHeader is the header a learn spec or result_dst names field f by.
func fieldHeader(f ofp.XMType) (uint32, error) {
	size, _, ok := FieldSize(f)
	if !ok {
		return 0, fmt.Errorf("ofpwire: learn names unknown field %d", f)
	}
	return OXMHeader(ClassOf(f), f, false, size), nil
}

func (a *ActionLearn) appendTo(b []byte) ([]byte, error) {
	start := len(b)
	v2 := a.Limit != 0 || a.Flags&LearnWriteResult != 0
	if v2 {
		b = nxHeader(b, 0, nxastLearn2)
	} else {
		b = nxHeader(b, 0, nxastLearn)
	}
	b = be.AppendUint16(b, a.IdleTimeout)
	b = be.AppendUint16(b, a.HardTimeout)
	b = be.AppendUint16(b, a.Priority)
	b = be.AppendUint64(b, a.Cookie)
	b = be.AppendUint16(b, a.Flags)
	b = append(b, a.TableID, 0)
	b = be.AppendUint16(b, a.FinIdleTimeout)
	b = be.AppendUint16(b, a.FinHardTimeout)
	if v2 {
		b = be.AppendUint32(b, a.Limit)
		b = be.AppendUint16(b, a.ResultDstOfs)
		b = appendZeros(b, 2)
		if a.Flags&LearnWriteResult != 0 {
			h, err := fieldHeader(a.ResultDst)
			if err != nil {
				return b, err
			}
			b = be.AppendUint32(b, h)
		}
	}
	for _, s := range a.Specs {
		if s.NBits == 0 || s.NBits > learnNBitsMask || s.Dst > LearnDstOutput || s.Dst&^(3<<11) != 0 {
			return b, fmt.Errorf("ofpwire: bad learn spec %+v", s)
		}
		h := s.NBits | s.Dst
		if s.Imm != nil {
			h |= learnSrcImmediate
		}
		b = be.AppendUint16(b, h)
		if s.Imm != nil {
			n := 2 * ((int(s.NBits) + 15) / 16)
			if len(s.Imm) > n {
				return b, fmt.Errorf("ofpwire: learn immediate of %d bytes for %d bits", len(s.Imm), s.NBits)
			}
			b = appendZeros(b, n-len(s.Imm))
			b = append(b, s.Imm...)
		} else {
			h, err := fieldHeader(s.SrcField)
			if err != nil {
				return b, err
			}
			b = be.AppendUint32(b, h)
			b = be.AppendUint16(b, s.SrcOfs)
		}
		if s.Dst != LearnDstOutput {
			h, err := fieldHeader(s.DstField)
			if err != nil {
				return b, err
			}
			b = be.AppendUint32(b, h)
			b = be.AppendUint16(b, s.DstOfs)
		}
	}
	if len(b)-start > 0xfff8 {
		return b, fmt.Errorf("ofpwire: learn action too long")
	}
	return padAction(b, start), nil
}

// parseNXLearn decodes learn, learn2 and fin_timeout (a is the whole
// action); ok false for other subtypes. What it accepts is what Open
// vSwitch accepts: known flags only, table 255 refused, spec fields known
// and their bit ranges inside them, zero padding.
func parseNXLearn(st uint16, a []byte) (Action, bool, error) {
	switch st {
	case nxastFinTimeout:
		if len(a) != 16 {
			return nil, true, errActionLen
		}
		return &ActionFinTimeout{IdleTimeout: be.Uint16(a[10:]), HardTimeout: be.Uint16(a[12:])}, true, nil
	case nxastLearn, nxastLearn2:
		l, err := parseLearn(st == nxastLearn2, a)
		return l, true, err
	case nxastOutputReg:
		o, err := parseOutputReg(a)
		return o, true, err
	}
	return nil, false, nil
}

func parseLearn(v2 bool, a []byte) (*ActionLearn, error) {
	if len(a) < 32 || v2 && len(a) < 40 {
		return nil, errActionLen
	}
	l := &ActionLearn{
		IdleTimeout: be.Uint16(a[10:]), HardTimeout: be.Uint16(a[12:]), Priority: be.Uint16(a[14:]),
		Cookie: be.Uint64(a[16:]), Flags: be.Uint16(a[24:]), TableID: a[26],
		FinIdleTimeout: be.Uint16(a[28:]), FinHardTimeout: be.Uint16(a[30:]),
	}
	known := uint16(LearnSendFlowRem | LearnDeleteLearned)
	if v2 {
		known |= LearnWriteResult
	}
	if a[27] != 0 || l.TableID == 0xff || l.Flags&^known != 0 {
		return nil, errActionArg
	}
	p := a[32:]
	if v2 {
		l.Limit, l.ResultDstOfs = be.Uint32(a[32:]), be.Uint16(a[36:])
		if a[38]|a[39] != 0 {
			return nil, errActionArg
		}
		p = a[40:]
		if l.Flags&LearnWriteResult != 0 {
			if len(p) < 4 {
				return nil, errActionLen
			}
			f, err := fieldByHeader(be.Uint32(p))
			if err != nil {
				return nil, err
			}
			if int(l.ResultDstOfs) >= FieldBits(f) {
				return nil, errActionArg
			}
			l.ResultDst, p = f, p[4:]
		} else if l.ResultDstOfs != 0 {
			return nil, errActionArg
		}
	}
	for len(p) >= 2 {
		h := be.Uint16(p)
		if h == 0 {
			break
		}
		p = p[2:]
		s := LearnSpec{NBits: h & learnNBitsMask, Dst: h & (3 << 11)}
		imm := h&learnSrcImmediate != 0
		if h&^(learnNBitsMask|3<<11|learnSrcImmediate) != 0 || s.Dst > LearnDstOutput ||
			s.Dst == LearnDstOutput && imm || s.NBits == 0 {
			return nil, errActionArg
		}
		if imm {
			n := 2 * ((int(s.NBits) + 15) / 16)
			if len(p) < n {
				return nil, errActionLen
			}
			s.Imm = cloneBytes(p[n-(int(s.NBits)+7)/8 : n])
			p = p[n:]
		} else {
			f, ofs, err := learnSubfield(&p, s.NBits)
			if err != nil {
				return nil, err
			}
			s.SrcField, s.SrcOfs = f, ofs
		}
		if s.Dst != LearnDstOutput {
			f, ofs, err := learnSubfield(&p, s.NBits)
			if err != nil {
				return nil, err
			}
			s.DstField, s.DstOfs = f, ofs
		}
		l.Specs = append(l.Specs, s)
	}
	for _, c := range p {
		if c != 0 {
			return nil, errActionArg
		}
	}
	return l, nil
}

// learnSubfield reads a field header and offset from *p and checks that
// nbits bits from there fit in the field.
func learnSubfield(p *[]byte, nbits uint16) (ofp.XMType, uint16, error) {
	if len(*p) < 6 {
		return 0, 0, errActionLen
	}
	f, err := fieldByHeader(be.Uint32(*p))
	if err != nil {
		return 0, 0, err
	}
	ofs := be.Uint16((*p)[4:])
	*p = (*p)[6:]
	if int(ofs)+int(nbits) > FieldBits(f) {
		return 0, 0, errActionArg
	}
	return f, ofs, nil
}

// nxastOutputReg is NXAST_OUTPUT_REG: output to the port a subfield holds.
const nxastOutputReg = 15

// ActionOutputReg outputs to the port NBits bits of Field from bit Ofs
// hold (a 16-bit OpenFlow port number: 0xff00 and up are the reserved
// ports; a larger value outputs nothing), as Open vSwitch's
// output:FIELD[range]. MaxLen is for output to the controller.
type ActionOutputReg struct {
	Field      ofp.XMType
	Ofs, NBits uint16
	MaxLen     uint16
}

// ActionType implements Action.
func (*ActionOutputReg) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

func (a *ActionOutputReg) appendTo(b []byte) ([]byte, error) {
	h, err := fieldHeader(a.Field)
	if err != nil {
		return b, err
	}
	if a.NBits == 0 || a.NBits > 64 || int(a.Ofs)+int(a.NBits) > FieldBits(a.Field) {
		return b, fmt.Errorf("ofpwire: output_reg of bits %d+%d of field %d", a.Ofs, a.NBits, a.Field)
	}
	b = nxHeader(b, 24, nxastOutputReg)
	b = be.AppendUint16(b, a.Ofs<<6|(a.NBits-1))
	b = be.AppendUint32(b, h)
	b = be.AppendUint16(b, a.MaxLen)
	return appendZeros(b, 6), nil
}

func parseOutputReg(a []byte) (Action, error) {
	if len(a) != 24 {
		return nil, errActionLen
	}
	on := be.Uint16(a[10:])
	f, err := fieldByHeader(be.Uint32(a[12:]))
	if err != nil {
		return nil, err
	}
	o := &ActionOutputReg{Field: f, Ofs: on >> 6, NBits: on&0x3f + 1, MaxLen: be.Uint16(a[16:])}
	if int(o.Ofs)+int(o.NBits) > FieldBits(f) {
		return nil, errActionArg
	}
	for _, c := range a[18:] {
		if c != 0 {
			return nil, errActionArg
		}
	}
	return o, nil
}

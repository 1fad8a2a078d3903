package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// Instruction is one OpenFlow 1.3 instruction; the concrete types below are
// the only implementations.
type Instruction interface {
	// InstructionType is the OFPIT_* code of the instruction.
	InstructionType() ofp.InstructionType
	appendTo(b []byte) ([]byte, error)
}

// InstrGotoTable continues the pipeline at TableID.
type InstrGotoTable struct{ TableID uint8 }

// InstrWriteMetadata sets metadata = metadata&^Mask | Metadata&Mask.
type InstrWriteMetadata struct{ Metadata, Mask uint64 }

// InstrWriteActions merges Actions into the action set.
type InstrWriteActions struct{ Actions []Action }

// InstrApplyActions applies Actions immediately.
type InstrApplyActions struct{ Actions []Action }

// InstructionActions returns the actions an apply-actions or
// write-actions instruction carries, and nil for every other instruction:
// what a check over "every action of a flow" walks, whichever list the
// action is in.
func InstructionActions(in Instruction) []Action {
	switch in := in.(type) {
	case *InstrApplyActions:
		return in.Actions
	case *InstrWriteActions:
		return in.Actions
	}
	return nil
}

// InstrClearActions empties the action set.
type InstrClearActions struct{}

// InstrMeter sends the packet through a meter.
type InstrMeter struct{ MeterID ofp.Meter }

// InstrExperimenter is a vendor instruction; Data follows the experimenter id.
type InstrExperimenter struct {
	Experimenter uint32
	Data         []byte
}

// InstructionType implements Instruction.
func (*InstrGotoTable) InstructionType() ofp.InstructionType {
	return ofp.InstructionTypeGotoTable
}

// InstructionType implements Instruction.
func (*InstrWriteMetadata) InstructionType() ofp.InstructionType {
	return ofp.InstructionTypeWriteMetadata
}

// InstructionType implements Instruction.
func (*InstrWriteActions) InstructionType() ofp.InstructionType {
	return ofp.InstructionTypeWriteActions
}

// InstructionType implements Instruction.
func (*InstrApplyActions) InstructionType() ofp.InstructionType {
	return ofp.InstructionTypeApplyActions
}

// InstructionType implements Instruction.
func (*InstrClearActions) InstructionType() ofp.InstructionType {
	return ofp.InstructionTypeClearActions
}

// InstructionType implements Instruction.
func (*InstrMeter) InstructionType() ofp.InstructionType { return ofp.InstructionTypeMeter }

// InstructionType implements Instruction.
func (*InstrExperimenter) InstructionType() ofp.InstructionType {
	return ofp.InstructionTypeExperimenter
}

func instHdr(b []byte, t ofp.InstructionType, n int) []byte {
	b = be.AppendUint16(b, uint16(t))
	return be.AppendUint16(b, uint16(n))
}

func (i *InstrGotoTable) appendTo(b []byte) ([]byte, error) {
	return appendZeros(append(instHdr(b, i.InstructionType(), 8), i.TableID), 3), nil
}
func (i *InstrWriteMetadata) appendTo(b []byte) ([]byte, error) {
	b = appendZeros(instHdr(b, i.InstructionType(), 24), 4)
	return be.AppendUint64(be.AppendUint64(b, i.Metadata), i.Mask), nil
}
func appendInstrActions(b []byte, t ofp.InstructionType, acts []Action) ([]byte, error) {
	start := len(b)
	b = appendZeros(instHdr(b, t, 0), 4)
	b, err := appendActions(b, acts)
	if err != nil {
		return b, err
	}
	if len(b)-start > 0xffff {
		return b, fmt.Errorf("ofpwire: instruction too long")
	}
	putLen16(b, start+2, len(b)-start)
	return b, nil
}
func (i *InstrWriteActions) appendTo(b []byte) ([]byte, error) {
	return appendInstrActions(b, i.InstructionType(), i.Actions)
}
func (i *InstrApplyActions) appendTo(b []byte) ([]byte, error) {
	return appendInstrActions(b, i.InstructionType(), i.Actions)
}
func (i *InstrClearActions) appendTo(b []byte) ([]byte, error) {
	return appendZeros(instHdr(b, i.InstructionType(), 8), 4), nil
}
func (i *InstrMeter) appendTo(b []byte) ([]byte, error) {
	return be.AppendUint32(instHdr(b, i.InstructionType(), 8), uint32(i.MeterID)), nil
}
func (i *InstrExperimenter) appendTo(b []byte) ([]byte, error) {
	n := roundUp8(8 + len(i.Data))
	if n > 0xfff8 {
		return b, fmt.Errorf("ofpwire: experimenter instruction too long")
	}
	b = be.AppendUint32(instHdr(b, i.InstructionType(), n), i.Experimenter)
	b = append(b, i.Data...)
	return appendZeros(b, n-8-len(i.Data)), nil
}

// parseInstruction decodes the instruction at the front of b.
func parseInstruction(b []byte) (Instruction, int, error) {
	if len(b) < 4 {
		return nil, 0, errInstLen
	}
	t := ofp.InstructionType(be.Uint16(b))
	n := int(be.Uint16(b[2:]))
	if n < 8 || n%8 != 0 || n > len(b) {
		return nil, 0, errInstLen
	}
	in := b[:n]
	switch t {
	case ofp.InstructionTypeGotoTable:
		if n != 8 {
			return nil, 0, errInstLen
		}
		return &InstrGotoTable{TableID: in[4]}, n, nil
	case ofp.InstructionTypeWriteMetadata:
		if n != 24 {
			return nil, 0, errInstLen
		}
		return &InstrWriteMetadata{Metadata: be.Uint64(in[8:]), Mask: be.Uint64(in[16:])}, n, nil
	case ofp.InstructionTypeWriteActions, ofp.InstructionTypeApplyActions:
		acts, err := parseActions(in[8:])
		if err != nil {
			return nil, 0, err
		}
		if t == ofp.InstructionTypeWriteActions {
			return &InstrWriteActions{Actions: acts}, n, nil
		}
		return &InstrApplyActions{Actions: acts}, n, nil
	case ofp.InstructionTypeClearActions:
		if n != 8 {
			return nil, 0, errInstLen
		}
		return &InstrClearActions{}, n, nil
	case ofp.InstructionTypeMeter:
		if n != 8 {
			return nil, 0, errInstLen
		}
		return &InstrMeter{MeterID: ofp.Meter(be.Uint32(in[4:]))}, n, nil
	case ofp.InstructionTypeExperimenter:
		return &InstrExperimenter{Experimenter: be.Uint32(in[4:]), Data: cloneBytes(in[8:])}, n, nil
	}
	return nil, 0, errInstUnknown
}

// parseInstructions decodes an instruction list that fills b exactly.
func parseInstructions(b []byte) ([]Instruction, error) {
	var out []Instruction
	for len(b) > 0 {
		in, n, err := parseInstruction(b)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
		b = b[n:]
	}
	return out, nil
}

func appendInstructions(b []byte, ins []Instruction) ([]byte, error) {
	var err error
	for _, in := range ins {
		if in == nil {
			return b, fmt.Errorf("ofpwire: nil instruction")
		}
		if b, err = in.appendTo(b); err != nil {
			return b, err
		}
	}
	return b, nil
}

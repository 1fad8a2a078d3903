package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow/ofp"
)

const (
	tableFeaturesLen = 64
	tableNameLen     = 32
)

// InstructionID names an instruction in a table-features property.
type InstructionID struct {
	Type         ofp.InstructionType
	Experimenter uint32 // only for InstructionTypeExperimenter
}

// ActionID names an action in a table-features property.
type ActionID struct {
	Type         ofp.ActionType
	Experimenter uint32 // only for ActionTypeExperimenter
}

// TableFeatureProp is one ofp_table_feature_prop_*. Which list is used
// depends on Type: InstructionIDs for INSTRUCTIONS(_MISS), NextTables for
// NEXT_TABLES(_MISS), ActionIDs for *_ACTIONS(_MISS), OXMIDs (32-bit OXM
// headers, see OXMHeader) for MATCH, WILDCARDS and *_SETFIELD(_MISS),
// Experimenter/ExpType/Data for EXPERIMENTER(_MISS).
type TableFeatureProp struct {
	Type           ofp.TablePropType
	InstructionIDs []InstructionID
	NextTables     []uint8
	ActionIDs      []ActionID
	OXMIDs         []uint32
	Experimenter   uint32
	ExpType        uint32
	Data           []byte
}

// TableFeatures is an ofp_table_features.
type TableFeatures struct {
	TableID       uint8
	Name          string
	MetadataMatch uint64
	MetadataWrite uint64
	Config        ofp.TableConfig
	MaxEntries    uint32
	Properties    []TableFeatureProp
}

type propKind int

const (
	propUnknown propKind = iota
	propInstructions
	propNextTables
	propActions
	propOXM
	propExperimenter
)

func tablePropKind(t ofp.TablePropType) propKind {
	switch t {
	case ofp.TablePropTypeInstructions, ofp.TablePropTypeInstructionsMiss:
		return propInstructions
	case ofp.TablePropTypeNextTables, ofp.TablePropTypeNextTablesMiss:
		return propNextTables
	case ofp.TablePropTypeWriteActions, ofp.TablePropTypeWriteActionsMiss,
		ofp.TablePropTypeApplyActions, ofp.TablePropTypeApplyActionsMiss:
		return propActions
	case ofp.TablePropTypeMatch, ofp.TablePropTypeWildcards,
		ofp.TablePropTypeWriteSetField, ofp.TablePropTypeWriteSetFieldMiss,
		ofp.TablePropTypeApplySetField, ofp.TablePropTypeApplySetFieldMiss:
		return propOXM
	case ofp.TablePropTypeExperimenter, ofp.TablePropTypeExperimenterMiss:
		return propExperimenter
	}
	return propUnknown
}

func appendTableFeatures(b []byte, t *TableFeatures) ([]byte, error) {
	start := len(b)
	b = be.AppendUint16(b, 0)
	b = appendZeros(append(b, t.TableID), 5)
	b = appendCString(b, t.Name, tableNameLen)
	b = be.AppendUint64(b, t.MetadataMatch)
	b = be.AppendUint64(b, t.MetadataWrite)
	b = be.AppendUint32(b, uint32(t.Config))
	b = be.AppendUint32(b, t.MaxEntries)
	for i := range t.Properties {
		p := &t.Properties[i]
		ps := len(b)
		b = be.AppendUint16(b, uint16(p.Type))
		b = be.AppendUint16(b, 0)
		switch tablePropKind(p.Type) {
		case propInstructions:
			for _, id := range p.InstructionIDs {
				b = be.AppendUint16(b, uint16(id.Type))
				if id.Type == ofp.InstructionTypeExperimenter {
					b = be.AppendUint32(be.AppendUint16(b, 8), id.Experimenter)
				} else {
					b = be.AppendUint16(b, 4)
				}
			}
		case propNextTables:
			b = append(b, p.NextTables...)
		case propActions:
			for _, id := range p.ActionIDs {
				b = be.AppendUint16(b, uint16(id.Type))
				if id.Type == ofp.ActionTypeExperimenter {
					b = be.AppendUint32(be.AppendUint16(b, 8), id.Experimenter)
				} else {
					b = be.AppendUint16(b, 4)
				}
			}
		case propOXM:
			for _, h := range p.OXMIDs {
				b = be.AppendUint32(b, h)
			}
		case propExperimenter:
			b = be.AppendUint32(b, p.Experimenter)
			b = be.AppendUint32(b, p.ExpType)
			b = append(b, p.Data...)
		default:
			return b, fmt.Errorf("ofpwire: unknown table feature property %d", p.Type)
		}
		n := len(b) - ps
		if n > 0xffff {
			return b, fmt.Errorf("ofpwire: table feature property too long")
		}
		putLen16(b, ps+2, n)
		b = appendZeros(b, roundUp8(n)-n)
	}
	if len(b)-start > 0xffff {
		return b, fmt.Errorf("ofpwire: table features too long")
	}
	putLen16(b, start, len(b)-start)
	return b, nil
}

// parseTableFeatures decodes the ofp_table_features at the front of b.
func parseTableFeatures(b []byte) (TableFeatures, int, error) {
	if len(b) < tableFeaturesLen {
		return TableFeatures{}, 0, errTFLen
	}
	n := int(be.Uint16(b))
	if n < tableFeaturesLen || n%8 != 0 || n > len(b) {
		return TableFeatures{}, 0, errTFLen
	}
	t := TableFeatures{
		TableID:       b[2],
		Name:          cString(b[8:40]),
		MetadataMatch: be.Uint64(b[40:]),
		MetadataWrite: be.Uint64(b[48:]),
		Config:        ofp.TableConfig(be.Uint32(b[56:])),
		MaxEntries:    be.Uint32(b[60:]),
	}
	for p := b[tableFeaturesLen:n]; len(p) > 0; {
		if len(p) < 4 {
			return TableFeatures{}, 0, errTFLen
		}
		pt, pn := ofp.TablePropType(be.Uint16(p)), int(be.Uint16(p[2:]))
		if pn < 4 || roundUp8(pn) > len(p) {
			return TableFeatures{}, 0, errTFLen
		}
		prop, err := parseTableProp(pt, p[4:pn])
		if err != nil {
			return TableFeatures{}, 0, err
		}
		t.Properties = append(t.Properties, prop)
		p = p[roundUp8(pn):]
	}
	return t, n, nil
}

func parseTableProp(t ofp.TablePropType, b []byte) (TableFeatureProp, error) {
	p := TableFeatureProp{Type: t}
	switch tablePropKind(t) {
	case propInstructions, propActions:
		for len(b) > 0 {
			if len(b) < 4 {
				return p, errTFLen
			}
			typ, n := be.Uint16(b), int(be.Uint16(b[2:]))
			exp := typ == 0xffff
			if n < 4 || n > len(b) || exp && n < 8 {
				return p, errTFLen
			}
			var e uint32
			if exp {
				e = be.Uint32(b[4:])
			}
			if tablePropKind(t) == propInstructions {
				p.InstructionIDs = append(p.InstructionIDs, InstructionID{ofp.InstructionType(typ), e})
			} else {
				p.ActionIDs = append(p.ActionIDs, ActionID{ofp.ActionType(typ), e})
			}
			b = b[n:]
		}
	case propNextTables:
		p.NextTables = cloneBytes(b)
	case propOXM:
		if len(b)%4 != 0 {
			return p, errTFLen
		}
		for i := 0; i < len(b); i += 4 {
			p.OXMIDs = append(p.OXMIDs, be.Uint32(b[i:]))
		}
	case propExperimenter:
		if len(b) < 8 {
			return p, errTFLen
		}
		p.Experimenter, p.ExpType, p.Data = be.Uint32(b), be.Uint32(b[4:]), cloneBytes(b[8:])
	default:
		return p, errTFType
	}
	return p, nil
}

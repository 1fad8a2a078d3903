package pipeline

import (
	"slices"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// The action and instruction types the switch carries out, kept in one
// place because two replies advertise them (TABLE_FEATURES for flow
// entries, GROUP_FEATURES for buckets): a controller believes what it is
// told, and one that is told an action is missing will not use it.

// actionTypes is every OpenFlow 1.3 action but experimenter ones: flow
// entries (apply-actions and the action set) and group buckets may hold
// each of them.
var actionTypes = []ofpwire.ActionType{
	ofpwire.ActionTypeOutput, ofpwire.ActionTypeCopyTTLOut, ofpwire.ActionTypeCopyTTLIn,
	ofpwire.ActionTypeSetMPLSTTL, ofpwire.ActionTypeDecMPLSTTL,
	ofpwire.ActionTypePushVLAN, ofpwire.ActionTypePopVLAN,
	ofpwire.ActionTypePushMPLS, ofpwire.ActionTypePopMPLS,
	ofpwire.ActionTypeSetQueue, ofpwire.ActionTypeGroup,
	ofpwire.ActionTypeSetNwTTL, ofpwire.ActionTypeDecNwTTL,
	ofpwire.ActionTypeSetField, ofpwire.ActionTypePushPBB, ofpwire.ActionTypePopPBB,
}

// instructionTypes is every OpenFlow 1.3 instruction but experimenter
// ones (checkInstructions refuses those).
var instructionTypes = []ofpwire.InstructionType{
	ofpwire.InstructionTypeGotoTable, ofpwire.InstructionTypeWriteMetadata,
	ofpwire.InstructionTypeWriteActions, ofpwire.InstructionTypeApplyActions,
	ofpwire.InstructionTypeClearActions, ofpwire.InstructionTypeMeter,
}

// ActionTypes returns the OFPAT_* types the switch supports.
func ActionTypes() []ofpwire.ActionType { return slices.Clone(actionTypes) }

// InstructionTypes returns the OFPIT_* types the switch supports.
func InstructionTypes() []ofpwire.InstructionType { return slices.Clone(instructionTypes) }

// actionBitmap is ActionTypes as GROUP_FEATURES carries it (1<<OFPAT_*).
func actionBitmap() uint32 {
	var m uint32
	for _, t := range actionTypes {
		m |= 1 << uint(t)
	}
	return m
}

package ofpwire

import (
	"errors"
	"unicode"
	"unicode/utf8"

	"github.com/netrack/openflow/ofp"
)

// OFPError is an OpenFlow error (type, code) as carried by an ERROR message.
// Decode returns one for every malformed input so that the caller can answer
// the peer with ErrorMessage instead of guessing a code.
type OFPError struct {
	Type, Code uint16
	// Experimenter is the experimenter id of an OFPET_EXPERIMENTER error
	// (Code is then its exp_code), put in front of the error's data.
	Experimenter uint32
	// Reason, if set, is a human-readable cause sent after a full copy of
	// the failed request (see ErrorMessage): OpenFlow 1.3 has codes for
	// what a request got wrong but none for the switch's own failures
	// (a full disk), which an operator needs spelled out.
	Reason string
}

// Error implements error with the spec's names, type then code, and what
// the code means where it has a description:
// "OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ: a match field lacks its prerequisite ...".
func (e *OFPError) Error() string {
	s := ErrorTypeName(e.Type) + "/" + ErrorName(e.Type, e.Code)
	if int(e.Type) >= len(errorTypes) {
		s = ErrorName(e.Type, e.Code)
	}
	if m := ErrorMeaning(e.Type, e.Code); m != "" {
		s += ": " + m
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is makes errors.Is compare by (type, code) rather than by pointer.
func (e *OFPError) Is(target error) bool {
	t, ok := target.(*OFPError)
	return ok && t.Type == e.Type && t.Code == e.Code
}

func newErr(t, c uint16) *OFPError { return &OFPError{Type: t, Code: c} }

// Error types (OFPET_*). Values are netrack/openflow's, checked against the
// 1.3.5 spec in the tests.
const (
	ETHelloFailed         = uint16(ofp.ErrTypeHelloFailed)
	ETBadRequest          = uint16(ofp.ErrTypeBadRequest)
	ETBadAction           = uint16(ofp.ErrTypeBadAction)
	ETBadInstruction      = uint16(ofp.ErrTypeBadInstruction)
	ETBadMatch            = uint16(ofp.ErrTypeBadMatch)
	ETFlowModFailed       = uint16(ofp.ErrTypeFlowModFailed)
	ETGroupModFailed      = uint16(ofp.ErrTypeGroupModFailed)
	ETPortModFailed       = uint16(ofp.ErrTypePortModFailed)
	ETTableModFailed      = uint16(ofp.ErrTypeTableModFailed)
	ETQueueOpFailed       = uint16(ofp.ErrTypeQueueOpFailed)
	ETSwitchConfigFailed  = uint16(ofp.ErrTypeSwitchConfigFailed)
	ETRoleRequestFailed   = uint16(ofp.ErrTypeRoleRequestFailed)
	ETMeterModFailed      = uint16(ofp.ErrTypeMeterModFailed)
	ETTableFeaturesFailed = uint16(ofp.ErrTypeTableFeaturesFailed)
	ETExperimenter        = uint16(ofp.ErrTypeExperimenter)
)

// OFPHFC_* codes for ETHelloFailed.
const (
	HFCIncompatible = uint16(ofp.ErrCodeHelloFailedIncompatible)
	HFCEperm        = uint16(ofp.ErrCodeHelloFailedPerm)
)

// OFPBRC_* codes for ETBadRequest.
const (
	BRCBadVersion              = uint16(ofp.ErrCodeBadRequestBadVersion)
	BRCBadType                 = uint16(ofp.ErrCodeBadRequestBadType)
	BRCBadMultipart            = uint16(ofp.ErrCodeBadRequestBadMultipart)
	BRCBadExperimenter         = uint16(ofp.ErrCodeBadRequestBadExperimenter)
	BRCBadExpType              = uint16(ofp.ErrCodeBadRequestBadExpType)
	BRCEperm                   = uint16(ofp.ErrCodeBadRequestPerm)
	BRCBadLen                  = uint16(ofp.ErrCodeBadRequestLen)
	BRCBufferEmpty             = uint16(ofp.ErrCodeBadRequestBufferEmpty)
	BRCBufferUnknown           = uint16(ofp.ErrCodeBadRequestBufferUnknown)
	BRCBadTableID              = uint16(ofp.ErrCodeBadRequestBadTableID)
	BRCIsSlave                 = uint16(ofp.ErrCodeBadRequestIsSlave)
	BRCBadPort                 = uint16(ofp.ErrCodeBadRequestBadPort)
	BRCBadPacket               = uint16(ofp.ErrCodeBadRequestBadPacket)
	BRCMultipartBufferOverflow = uint16(ofp.ErrCodeBadRequestMultipartBufferOverflow)
)

// OFPBAC_* codes for ETBadAction.
const (
	BACBadType           = uint16(ofp.ErrCodeBadActionType)
	BACBadLen            = uint16(ofp.ErrCodeBadActionLen)
	BACBadExperimenter   = uint16(ofp.ErrCodeBadActionExperimenter)
	BACBadExpType        = uint16(ofp.ErrCodeBadActionExpType)
	BACBadOutPort        = uint16(ofp.ErrCodeBadActionOutPort)
	BACBadArgument       = uint16(ofp.ErrCodeBadActionArgument)
	BACEperm             = uint16(ofp.ErrCodeBadActionPerm)
	BACTooMany           = uint16(ofp.ErrCodeBadActionTooMany)
	BACBadQueue          = uint16(ofp.ErrCodeBadActionQueue)
	BACBadOutGroup       = uint16(ofp.ErrCodeBadActionOutGroup)
	BACMatchInconsistent = uint16(ofp.ErrCodeBadActionMatchInconsistent)
	BACUnsupportedOrder  = uint16(ofp.ErrCodeBadActionUnsupportedOrder)
	BACBadTag            = uint16(ofp.ErrCodeBadActionTag)
	BACBadSetType        = uint16(ofp.ErrCodeBadActionSetType)
	BACBadSetLen         = uint16(ofp.ErrCodeBadActionSetLen)
	BACBadSetArgument    = uint16(ofp.ErrCodeBadActionSetArgument)
)

// OFPBIC_* codes for ETBadInstruction.
const (
	BICUnknownInst       = uint16(ofp.ErrCodeBadInstructionUnknown)
	BICUnsupInst         = uint16(ofp.ErrCodeBadInstructionUnsupported)
	BICBadTableID        = uint16(ofp.ErrCodeBadInstructionTableID)
	BICUnsupMetadata     = uint16(ofp.ErrCodeBadInstructionUnsupportedMetadata)
	BICUnsupMetadataMask = uint16(ofp.ErrCodeBadInstructionUnsupportedMetadataMask)
	BICBadExperimenter   = uint16(ofp.ErrCodeBadInstructionExperimenter)
	BICBadExpType        = uint16(ofp.ErrCodeBadInstructionExpType)
	BICBadLen            = uint16(ofp.ErrCodeBadInstructionLen)
	BICEperm             = uint16(ofp.ErrCodeBadInstructionPerm)
)

// OFPBMC_* codes for ETBadMatch.
const (
	BMCBadType       = uint16(ofp.ErrCodeBadMatchBadType)
	BMCBadLen        = uint16(ofp.ErrCodeBadMatchBadLen)
	BMCBadTag        = uint16(ofp.ErrCodeBadMatchBadTag)
	BMCBadDLAddrMask = uint16(ofp.ErrCodeBadMatchBadLinkMask)
	BMCBadNWAddrMask = uint16(ofp.ErrCodeBadMatchBadNetMask)
	BMCBadWildcards  = uint16(ofp.ErrCodeBadMatchBadWildcards)
	BMCBadField      = uint16(ofp.ErrCodeBadMatchBadField)
	BMCBadValue      = uint16(ofp.ErrCodeBadMatchBadValue)
	BMCBadMask       = uint16(ofp.ErrCodeBadMatchBadMask)
	BMCBadPrereq     = uint16(ofp.ErrCodeBadMatchBadPrereq)
	BMCDupField      = uint16(ofp.ErrCodeBadMatchDupField)
	BMCEperm         = uint16(ofp.ErrCodeBadMatchPerm)
)

// OFPFMFC_* codes for ETFlowModFailed.
const (
	FMFCUnknown    = uint16(ofp.ErrCodeFlowModFailedUnknown)
	FMFCTableFull  = uint16(ofp.ErrCodeFlowModFailedTableFull)
	FMFCBadTableID = uint16(ofp.ErrCodeFlowModFailedBadTableID)
	FMFCOverlap    = uint16(ofp.ErrCodeFlowModFailedOverlap)
	FMFCEperm      = uint16(ofp.ErrCodeFlowModFailedPerm)
	FMFCBadTimeout = uint16(ofp.ErrCodeFlowModFailedBadTimeout)
	FMFCBadCommand = uint16(ofp.ErrCodeFlowModFailedBadCommand)
	FMFCBadFlags   = uint16(ofp.ErrCodeFlowModFailedBadFlags)
)

// OFPGMFC_* codes for ETGroupModFailed.
const (
	GMFCGroupExists         = uint16(ofp.ErrCodeGroupModFailedGroupExists)
	GMFCInvalidGroup        = uint16(ofp.ErrCodeGroupModFailedInvalidGroup)
	GMFCWeightUnsupported   = uint16(ofp.ErrCodeGroupModFailedWeightUnsupported)
	GMFCOutOfGroups         = uint16(ofp.ErrCodeGroupModFailedOutOfGroups)
	GMFCOutOfBuckets        = uint16(ofp.ErrCodeGroupModFailedOutOfBuckets)
	GMFCChainingUnsupported = uint16(ofp.ErrCodeGroupModFailedChainingUnsupported)
	GMFCWatchUnsupported    = uint16(ofp.ErrCodeGroupModFailedWatchUnsupported)
	GMFCLoop                = uint16(ofp.ErrCodeGroupModFailedLoop)
	GMFCUnknownGroup        = uint16(ofp.ErrCodeGroupModFailedUnknownGroup)
	GMFCChainedGroup        = uint16(ofp.ErrCodeGroupModFailedChainedGroup)
	GMFCBadType             = uint16(ofp.ErrCodeGroupModBadType)
	GMFCBadCommand          = uint16(ofp.ErrCodeGroupModBadCommand)
	GMFCBadBucket           = uint16(ofp.ErrCodeGroupModBadBucket)
	GMFCBadWatch            = uint16(ofp.ErrCodeGroupModBadWatch)
	GMFCEperm               = uint16(ofp.ErrCodeGroupModPerm)
	// OpenFlow 1.5's: no bucket with the command_bucket_id of an
	// insert or remove, and a bucket id used twice.
	GMFCUnknownBucket uint16 = 15
	GMFCBucketExists  uint16 = 16
)

// OFPPMFC_* codes for ETPortModFailed.
const (
	PMFCBadPort      = uint16(ofp.ErrCodePortModFailedBadPort)
	PMFCBadHWAddr    = uint16(ofp.ErrCodePortModFailedBadHwAddr)
	PMFCBadConfig    = uint16(ofp.ErrCodePortModFailedBadConfig)
	PMFCBadAdvertise = uint16(ofp.ErrCodePortModFailedBadAdvertise)
	PMFCEperm        = uint16(ofp.ErrCodePortModFailedPerm)
)

// OFPTMFC_* codes for ETTableModFailed.
const (
	TMFCBadTable  = uint16(ofp.ErrCodeTableModFailedBadTable)
	TMFCBadConfig = uint16(ofp.ErrCodeTableModFailedBadConfig)
	TMFCEperm     = uint16(ofp.ErrCodeTableModFailedPerm)
)

// OFPQOFC_* codes for ETQueueOpFailed.
const (
	QOFCBadPort  = uint16(ofp.ErrCodeQueueOpFailedBadPort)
	QOFCBadQueue = uint16(ofp.ErrCodeQueueOpFailedBadQueue)
	QOFCEperm    = uint16(ofp.ErrCodeQueueOpFailedPerm)
)

// OFPSCFC_* codes for ETSwitchConfigFailed.
const (
	SCFCBadFlags = uint16(ofp.ErrCodeSwitchConfigFailedBadFlags)
	SCFCBadLen   = uint16(ofp.ErrCodeSwitchConfigFailedBadLen)
	SCFCEperm    = uint16(ofp.ErrCodeSwitchConfigFailedPerm)
)

// OFPRRFC_* codes for ETRoleRequestFailed.
const (
	RRFCStale   = uint16(ofp.ErrCodeRoleRequestFailedStale)
	RRFCUnsup   = uint16(ofp.ErrCodeRoleRequestFailedUnsup)
	RRFCBadRole = uint16(ofp.ErrCodeRoleRequestFailedBadRole)
)

// OFPMMFC_* codes for ETMeterModFailed.
const (
	MMFCUnknown      = uint16(ofp.ErrCodeMeterModFailedUnknown)
	MMFCMeterExists  = uint16(ofp.ErrCodeMeterModFailedMeterExists)
	MMFCInvalidMeter = uint16(ofp.ErrCodeMeterModFailedInvalidMeter)
	MMFCUnknownMeter = uint16(ofp.ErrCodeMeterModFailedUnknownMeter)
	MMFCBadCommand   = uint16(ofp.ErrCodeMeterModFailedBadCommand)
	MMFCBadFlags     = uint16(ofp.ErrCodeMeterModFailedBadFlags)
	MMFCBadRate      = uint16(ofp.ErrCodeMeterModFailedBadRate)
	MMFCBadBurst     = uint16(ofp.ErrCodeMeterModFailedBadBurst)
	MMFCBadBand      = uint16(ofp.ErrCodeMeterModFailedBadBand)
	MMFCBadBandValue = uint16(ofp.ErrCodeMeterModFailedBadBandValue)
	MMFCOutOfMeters  = uint16(ofp.ErrCodeMeterModFailedOutOfMeters)
	MMFCOutOfBands   = uint16(ofp.ErrCodeMeterModFailedOutOfBands)
)

// OFPTFFC_* codes for ETTableFeaturesFailed.
const (
	TFFCBadTable    = uint16(ofp.ErrCodeTableFeaturesFailedBadTable)
	TFFCBadMetadata = uint16(ofp.ErrCodeTableFeaturesFailedBadMetadata)
	TFFCBadType     = uint16(ofp.ErrCodeTableFeaturesFailedBadType)
	TFFCBadLen      = uint16(ofp.ErrCodeTableFeaturesFailedBadLen)
	TFFCBadArgument = uint16(ofp.ErrCodeTableFeaturesFailedBadArgument)
	TFFCEperm       = uint16(ofp.ErrCodeTableFeaturesFailedPerm)
)

// Shared error values; Decode returns these pointers, which callers must not
// modify. Compare with errors.Is or by dereferencing.
var (
	errBadVersion   = newErr(ETBadRequest, BRCBadVersion)
	errBadType      = newErr(ETBadRequest, BRCBadType)
	errBadLen       = newErr(ETBadRequest, BRCBadLen)
	errBadMultipart = newErr(ETBadRequest, BRCBadMultipart)

	errActionType = newErr(ETBadAction, BACBadType)
	errActionLen  = newErr(ETBadAction, BACBadLen)
	errSetType    = newErr(ETBadAction, BACBadSetType)
	errSetLen     = newErr(ETBadAction, BACBadSetLen)
	errSetArg     = newErr(ETBadAction, BACBadSetArgument)
	errActionArg  = newErr(ETBadAction, BACBadArgument)

	errInstUnknown = newErr(ETBadInstruction, BICUnknownInst)
	errInstLen     = newErr(ETBadInstruction, BICBadLen)

	errMatchType      = newErr(ETBadMatch, BMCBadType)
	errMatchLen       = newErr(ETBadMatch, BMCBadLen)
	errMatchField     = newErr(ETBadMatch, BMCBadField)
	errMatchValue     = newErr(ETBadMatch, BMCBadValue)
	errMatchMask      = newErr(ETBadMatch, BMCBadMask)
	errMatchWildcards = newErr(ETBadMatch, BMCBadWildcards)
	errMatchDup       = newErr(ETBadMatch, BMCDupField)
	errMatchPrereq    = newErr(ETBadMatch, BMCBadPrereq)

	errBucket = newErr(ETGroupModFailed, GMFCBadBucket)
	errBand   = newErr(ETMeterModFailed, MMFCBadBand)
	errTFLen  = newErr(ETTableFeaturesFailed, TFFCBadLen)
	errTFType = newErr(ETTableFeaturesFailed, TFFCBadType)
)

// ErrorDataLen is how much of an offending message an ERROR reply carries
// (the spec asks for at least 64 bytes).
const ErrorDataLen = 64

// ErrorMessage builds the wire bytes of the ERROR reply to a request that
// failed with err: type/code from err if it is (or wraps) an *OFPError,
// BAD_REQUEST/EPERM otherwise, and the first ErrorDataLen bytes of the
// offending message (header included) as data.
func ErrorMessage(xid uint32, err error, offending []byte) []byte {
	e := &OFPError{Type: ETBadRequest, Code: BRCEperm}
	var oe *OFPError
	if errors.As(err, &oe) {
		e = oe
	}
	if e.Type == ETExperimenter && e.Experimenter != 0 {
		offending = append(be.AppendUint32(nil, e.Experimenter), offending...)
	}
	if e.Reason != "" {
		// The whole request (the spec asks for at least 64 bytes), so its
		// header's length tells where the reason starts (ErrorReason).
		data := append(append([]byte(nil), offending...), e.Reason...)
		if b, err := Encode(xid, &ErrorMsg{Type: e.Type, Code: e.Code, Data: data}); err == nil {
			return b
		}
	}
	if len(offending) > ErrorDataLen {
		offending = offending[:ErrorDataLen]
	}
	b, _ := Encode(xid, &ErrorMsg{Type: e.Type, Code: e.Code, Data: offending})
	return b
}

// ErrorReason returns the text ErrorMessage put after a whole copy of the
// failed request in an error's data, or "": the copy's OpenFlow header
// gives its length, and what follows must be printable UTF-8.
func ErrorReason(data []byte) string {
	if len(data) < 8 {
		return ""
	}
	n := int(data[2])<<8 | int(data[3])
	if n < 8 || n >= len(data) {
		return ""
	}
	r := data[n:]
	if !utf8.Valid(r) {
		return ""
	}
	for _, c := range string(r) {
		if !unicode.IsPrint(c) {
			return ""
		}
	}
	return string(r)
}

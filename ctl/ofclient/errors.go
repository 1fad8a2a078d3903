package ofclient

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"vswitch/ofproto/ofpwire"
)

// Error is an OFPT_ERROR the switch answered a request with.
type Error struct {
	Type, Code uint16
	// Data is what the switch sent back of the failed request (at least
	// its first 64 bytes, by the spec).
	Data []byte
	// Index is, for Transact, the position of the failed message in the
	// batch; 0 for single requests.
	Index int
}

// Error implements error: "OFPBAC_BAD_OUT_PORT (OpenFlow error type 2,
// code 4)", followed by the switch's reason when it sent one after the
// request (ofpwire.ErrorReason), e.g. a full disk.
func (e *Error) Error() string {
	s := fmt.Sprintf("%s (OpenFlow error type %d, code %d)", e.Name(), e.Type, e.Code)
	if r := e.Reason(); r != "" {
		s += ": " + r
	}
	return s
}

// Reason is the text the switch sent after the failed request, or "".
func (e *Error) Reason() string {
	if e.Type == ofpwire.ETHelloFailed || e.Type == ofpwire.ETExperimenter {
		return ""
	}
	return ofpwire.ErrorReason(e.Data)
}

// Name is the spec's name of the error code, e.g. "OFPBAC_BAD_OUT_PORT".
func (e *Error) Name() string {
	if e.Type == ofpwire.ETExperimenter && len(e.Data) >= 4 {
		return fmt.Sprintf("OFPET_EXPERIMENTER(experimenter %#x, exp_type %d)", binary.BigEndian.Uint32(e.Data), e.Code)
	}
	return ErrorName(e.Type, e.Code)
}

// Is makes errors.Is match an *Error or an *ofpwire.OFPError by type and
// code, so callers can test for ofpwire's codes.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *ofpwire.OFPError:
		return t.Type == e.Type && t.Code == e.Code
	case *Error:
		return t.Type == e.Type && t.Code == e.Code
	}
	return false
}

// AsOFPError converts any error carrying an *Error to ofpwire's value,
// or returns nil.
func AsOFPError(err error) *ofpwire.OFPError {
	var e *Error
	if errors.As(err, &e) {
		return &ofpwire.OFPError{Type: e.Type, Code: e.Code}
	}
	return nil
}

// errorTypes are the OFPET_* names and, for each type, the codes' names
// without their prefix, indexed by code (OpenFlow 1.3.5 §7.4.4).
var errorTypes = []struct {
	name, prefix string
	codes        []string
}{
	{"HELLO_FAILED", "OFPHFC_", []string{"INCOMPATIBLE", "EPERM"}},
	{"BAD_REQUEST", "OFPBRC_", []string{"BAD_VERSION", "BAD_TYPE", "BAD_MULTIPART", "BAD_EXPERIMENTER",
		"BAD_EXP_TYPE", "EPERM", "BAD_LEN", "BUFFER_EMPTY", "BUFFER_UNKNOWN", "BAD_TABLE_ID", "IS_SLAVE",
		"BAD_PORT", "BAD_PACKET", "MULTIPART_BUFFER_OVERFLOW"}},
	{"BAD_ACTION", "OFPBAC_", []string{"BAD_TYPE", "BAD_LEN", "BAD_EXPERIMENTER", "BAD_EXP_TYPE",
		"BAD_OUT_PORT", "BAD_ARGUMENT", "EPERM", "TOO_MANY", "BAD_QUEUE", "BAD_OUT_GROUP",
		"MATCH_INCONSISTENT", "UNSUPPORTED_ORDER", "BAD_TAG", "BAD_SET_TYPE", "BAD_SET_LEN", "BAD_SET_ARGUMENT"}},
	{"BAD_INSTRUCTION", "OFPBIC_", []string{"UNKNOWN_INST", "UNSUP_INST", "BAD_TABLE_ID", "UNSUP_METADATA",
		"UNSUP_METADATA_MASK", "BAD_EXPERIMENTER", "BAD_EXP_TYPE", "BAD_LEN", "EPERM"}},
	{"BAD_MATCH", "OFPBMC_", []string{"BAD_TYPE", "BAD_LEN", "BAD_TAG", "BAD_DL_ADDR_MASK", "BAD_NW_ADDR_MASK",
		"BAD_WILDCARDS", "BAD_FIELD", "BAD_VALUE", "BAD_MASK", "BAD_PREREQ", "DUP_FIELD", "EPERM"}},
	{"FLOW_MOD_FAILED", "OFPFMFC_", []string{"UNKNOWN", "TABLE_FULL", "BAD_TABLE_ID", "OVERLAP", "EPERM",
		"BAD_TIMEOUT", "BAD_COMMAND", "BAD_FLAGS"}},
	{"GROUP_MOD_FAILED", "OFPGMFC_", []string{"GROUP_EXISTS", "INVALID_GROUP", "WEIGHT_UNSUPPORTED",
		"OUT_OF_GROUPS", "OUT_OF_BUCKETS", "CHAINING_UNSUPPORTED", "WATCH_UNSUPPORTED", "LOOP",
		"UNKNOWN_GROUP", "CHAINED_GROUP", "BAD_TYPE", "BAD_COMMAND", "BAD_BUCKET", "BAD_WATCH", "EPERM"}},
	{"PORT_MOD_FAILED", "OFPPMFC_", []string{"BAD_PORT", "BAD_HW_ADDR", "BAD_CONFIG", "BAD_ADVERTISE", "EPERM"}},
	{"TABLE_MOD_FAILED", "OFPTMFC_", []string{"BAD_TABLE", "BAD_CONFIG", "EPERM"}},
	{"QUEUE_OP_FAILED", "OFPQOFC_", []string{"BAD_PORT", "BAD_QUEUE", "EPERM"}},
	{"SWITCH_CONFIG_FAILED", "OFPSCFC_", []string{"BAD_FLAGS", "BAD_LEN", "EPERM"}},
	{"ROLE_REQUEST_FAILED", "OFPRRFC_", []string{"STALE", "UNSUP", "BAD_ROLE"}},
	{"METER_MOD_FAILED", "OFPMMFC_", []string{"UNKNOWN", "METER_EXISTS", "INVALID_METER", "UNKNOWN_METER",
		"BAD_COMMAND", "BAD_FLAGS", "BAD_RATE", "BAD_BURST", "BAD_BAND", "BAD_BAND_VALUE", "OUT_OF_METERS",
		"OUT_OF_BANDS"}},
	{"TABLE_FEATURES_FAILED", "OFPTFFC_", []string{"BAD_TABLE", "BAD_METADATA", "BAD_TYPE", "BAD_LEN",
		"BAD_ARGUMENT", "EPERM"}},
}

// ErrorTypeName is the OFPET_* name of an error type, or "OFPET_<n>" for
// types OpenFlow 1.3 does not define.
func ErrorTypeName(typ uint16) string {
	if int(typ) < len(errorTypes) {
		return "OFPET_" + errorTypes[typ].name
	}
	if typ == ofpwire.ETExperimenter {
		return "OFPET_EXPERIMENTER"
	}
	return fmt.Sprintf("OFPET_%d", typ)
}

// ErrorName is the spec's name of an error (type, code) pair, such as
// "OFPBAC_BAD_OUT_PORT"; unknown codes print as "OFPBAC_<code>" and
// unknown types as "OFPET_<type>/<code>".
func ErrorName(typ, code uint16) string {
	if int(typ) >= len(errorTypes) {
		return fmt.Sprintf("%s/%d", ErrorTypeName(typ), code)
	}
	t := errorTypes[typ]
	if int(code) < len(t.codes) {
		return t.prefix + t.codes[code]
	}
	return strings.TrimSuffix(t.prefix, "_") + fmt.Sprintf("_%d", code)
}

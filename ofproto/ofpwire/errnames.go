package ofpwire

import (
	"fmt"
	"strings"
)

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
	if typ == ETExperimenter {
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

// errorMeanings say in words what the commonest codes mean, for people
// reading an error a tool printed; keyed by ErrorName.
var errorMeanings = map[string]string{
	"OFPBRC_BAD_VERSION":        "the message's OpenFlow version is not the one negotiated",
	"OFPBRC_BAD_TYPE":           "the switch does not know this message type",
	"OFPBRC_BAD_MULTIPART":      "the switch does not know this statistics request",
	"OFPBRC_BAD_LEN":            "the message's length is wrong",
	"OFPBRC_BUFFER_UNKNOWN":     "the packet buffer named does not exist",
	"OFPBRC_BAD_TABLE_ID":       "no such table",
	"OFPBRC_BAD_PORT":           "no such port",
	"OFPBRC_IS_SLAVE":           "the connection is a slave (read-only) controller",
	"OFPBRC_EPERM":              "permission denied",
	"OFPBAC_BAD_TYPE":           "unknown action",
	"OFPBAC_BAD_OUT_PORT":       "output to a port that does not exist",
	"OFPBAC_BAD_ARGUMENT":       "an action's argument is invalid",
	"OFPBAC_BAD_OUT_GROUP":      "the action names a group that does not exist",
	"OFPBAC_MATCH_INCONSISTENT": "the action does not fit the match (e.g. sets a TCP port of a flow that is not TCP)",
	"OFPBAC_BAD_SET_TYPE":       "set_field of a field that cannot be set",
	"OFPBAC_BAD_SET_ARGUMENT":   "set_field value is invalid for the field",
	"OFPBIC_UNKNOWN_INST":       "unknown instruction",
	"OFPBIC_UNSUP_INST":         "instruction not supported",
	"OFPBIC_BAD_TABLE_ID":       "goto_table must go to a later table that exists",
	"OFPBIC_UNSUP_METADATA":     "write_metadata value not supported",
	"OFPBMC_BAD_TYPE":           "unsupported match type",
	"OFPBMC_BAD_LEN":            "the match's length is wrong",
	"OFPBMC_BAD_DL_ADDR_MASK":   "unsupported Ethernet address mask",
	"OFPBMC_BAD_NW_ADDR_MASK":   "unsupported IP address mask",
	"OFPBMC_BAD_WILDCARDS":      "unsupported combination of wildcards",
	"OFPBMC_BAD_FIELD":          "unknown or unsupported match field",
	"OFPBMC_BAD_VALUE":          "a match field's value is invalid",
	"OFPBMC_BAD_MASK":           "a match field's mask is invalid or the field cannot be masked",
	"OFPBMC_BAD_PREREQ":         "a match field lacks its prerequisite (e.g. an IPv4 address without eth_type=0x0800: write ip,nw_dst=...)",
	"OFPBMC_DUP_FIELD":          "a match field appears twice",
	"OFPFMFC_TABLE_FULL":        "the flow table is full",
	"OFPFMFC_BAD_TABLE_ID":      "no such table",
	"OFPFMFC_OVERLAP":           "the flow overlaps an existing one (check_overlap)",
	"OFPFMFC_BAD_TIMEOUT":       "unsupported timeout",
	"OFPFMFC_BAD_COMMAND":       "unknown flow-mod command",
	"OFPFMFC_BAD_FLAGS":         "unknown flow-mod flags",
	"OFPGMFC_GROUP_EXISTS":      "a group with this id exists",
	"OFPGMFC_INVALID_GROUP":     "invalid group id",
	"OFPGMFC_OUT_OF_GROUPS":     "the group table is full",
	"OFPGMFC_LOOP":              "the group would forward to itself",
	"OFPGMFC_UNKNOWN_GROUP":     "no such group",
	"OFPGMFC_CHAINED_GROUP":     "the group is used by another group and cannot be deleted that way",
	"OFPGMFC_BAD_TYPE":          "unsupported group type",
	"OFPGMFC_BAD_BUCKET":        "a bucket is invalid for the group type",
	"OFPGMFC_BAD_WATCH":         "a bucket's watch port or group is invalid",
	"OFPPMFC_BAD_PORT":          "no such port",
	"OFPPMFC_BAD_HW_ADDR":       "the hardware address does not match the port's",
	"OFPMMFC_METER_EXISTS":      "a meter with this id exists",
	"OFPMMFC_INVALID_METER":     "invalid meter id",
	"OFPMMFC_UNKNOWN_METER":     "no such meter",
	"OFPMMFC_BAD_RATE":          "unsupported meter rate",
	"OFPMMFC_BAD_BURST":         "unsupported burst size",
	"OFPMMFC_BAD_BAND":          "unsupported meter band",
	"OFPMMFC_OUT_OF_METERS":     "the meter table is full",
}

// ErrorMeaning says in words what an error (type, code) means, or "" for
// codes without a description.
func ErrorMeaning(typ, code uint16) string { return errorMeanings[ErrorName(typ, code)] }

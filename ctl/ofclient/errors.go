package ofclient

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
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

// Error implements error with the spec's names and what the code means,
// then the switch's reason when it sent one after the request
// (ofpwire.ErrorReason), e.g. a full disk: "OFPET_FLOW_MOD_FAILED/
// OFPFMFC_UNKNOWN: ...: change not saved, so not applied: ...".
func (e *Error) Error() string {
	if e.Type == ofpwire.ETExperimenter {
		return e.Name()
	}
	return (&ofpwire.OFPError{Type: e.Type, Code: e.Code, Reason: e.Reason()}).Error()
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

// ErrorTypeName is the OFPET_* name of an error type (ofpwire.ErrorTypeName).
func ErrorTypeName(typ uint16) string { return ofpwire.ErrorTypeName(typ) }

// ErrorName is the spec's name of an error (type, code) pair, such as
// "OFPBAC_BAD_OUT_PORT" (ofpwire.ErrorName).
func ErrorName(typ, code uint16) string { return ofpwire.ErrorName(typ, code) }

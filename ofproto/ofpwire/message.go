// Package ofpwire is the OpenFlow 1.3 (wire version 0x04) codec of the
// switch: framing, typed messages for both directions, OXM matches,
// instructions and actions, with every malformed input mapped to the
// OFPET_*/code pair the spec asks the switch to answer with.
//
// Enumerations, constants and fixed-layout structures come from
// github.com/netrack/openflow/ofp; the variable-length parts are decoded here
// from byte slices with every length checked against the bytes present,
// because netrack's io.Reader-based decoders trust length fields.
package ofpwire

import (
	"errors"
	"fmt"
	"io"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Header is the 8-byte ofp_header; netrack's type is correct as it is.
type Header = openflow.Header

// Wire constants.
const (
	Version       = 0x04  // OpenFlow 1.3
	HeaderLen     = 8     // sizeof(ofp_header)
	MaxMessageLen = 65535 // the header's length field is 16 bits
)

// ErrFraming means the stream cannot be resynchronised (a length below the
// header size): the connection must be closed, no ERROR reply is possible.
var ErrFraming = errors.New("ofpwire: message length below header size")

// Message is a decoded OpenFlow message body; the concrete types in this
// package are the only implementations.
type Message interface {
	// MsgType is the OFPT_* type the message is sent with.
	MsgType() openflow.Type
	appendBody(b []byte) ([]byte, error)
	decodeBody(b []byte) error
}

// ParseHeader reads the header at the start of b, which holds at least
// HeaderLen bytes.
func ParseHeader(b []byte) Header {
	return Header{Version: b[0], Type: openflow.Type(b[1]), Length: be.Uint16(b[2:]), Transaction: be.Uint32(b[4:])}
}

// ReadMessage reads one message from r. It returns the parsed header and the
// whole message (header included), which lives in buf when buf has the
// capacity (a 64 KiB buf avoids all allocation) and is valid until the next
// call that reuses buf. Pass msg[HeaderLen:] to Decode, and msg to
// ErrorMessage if Decode fails.
func ReadMessage(r io.Reader, buf []byte) (Header, []byte, error) {
	if cap(buf) < HeaderLen {
		buf = make([]byte, HeaderLen)
	}
	hdr := buf[:HeaderLen]
	if _, err := io.ReadFull(r, hdr); err != nil {
		return Header{}, nil, err
	}
	h := ParseHeader(hdr)
	n := int(h.Length)
	if n < HeaderLen {
		return h, nil, ErrFraming
	}
	if cap(buf) < n {
		nb := make([]byte, n)
		copy(nb, hdr)
		buf = nb
	}
	msg := buf[:n]
	if _, err := io.ReadFull(r, msg[HeaderLen:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return h, nil, err
	}
	return h, msg, nil
}

// newMessage returns an empty message of type t, or nil for unknown types.
func newMessage(t openflow.Type) Message {
	switch t {
	case openflow.TypeHello:
		return new(Hello)
	case openflow.TypeError:
		return new(ErrorMsg)
	case openflow.TypeEchoRequest:
		return new(EchoRequest)
	case openflow.TypeEchoReply:
		return new(EchoReply)
	case openflow.TypeExperiment:
		return new(Experimenter)
	case openflow.TypeFeaturesRequest:
		return new(FeaturesRequest)
	case openflow.TypeFeaturesReply:
		return new(FeaturesReply)
	case openflow.TypeGetConfigRequest:
		return new(GetConfigRequest)
	case openflow.TypeGetConfigReply:
		return new(GetConfigReply)
	case openflow.TypeSetConfig:
		return new(SetConfig)
	case openflow.TypePacketIn:
		return new(PacketIn)
	case openflow.TypeFlowRemoved:
		return new(FlowRemoved)
	case openflow.TypePortStatus:
		return new(PortStatus)
	case openflow.TypePacketOut:
		return new(PacketOut)
	case openflow.TypeFlowMod:
		return new(FlowMod)
	case openflow.TypeGroupMod:
		return new(GroupMod)
	case openflow.TypePortMod:
		return new(PortMod)
	case openflow.TypeTableMod:
		return new(TableMod)
	case openflow.TypeMultipartRequest:
		return new(MultipartRequest)
	case openflow.TypeMultipartReply:
		return new(MultipartReply)
	case openflow.TypeBarrierRequest:
		return new(BarrierRequest)
	case openflow.TypeBarrierReply:
		return new(BarrierReply)
	case openflow.TypeQueueGetConfigRequest:
		return new(QueueGetConfigRequest)
	case openflow.TypeQueueGetConfigReply:
		return new(QueueGetConfigReply)
	case openflow.TypeRoleRequest:
		return new(RoleRequest)
	case openflow.TypeRoleReply:
		return new(RoleReply)
	case openflow.TypeGetAsyncRequest:
		return new(GetAsyncRequest)
	case openflow.TypeGetAsyncReply:
		return new(GetAsyncReply)
	case openflow.TypeSetAsync:
		return new(SetAsync)
	case openflow.TypeMeterMod:
		return new(MeterMod)
	case TypeBundleControl:
		return new(BundleCtrl)
	case TypeBundleAdd:
		return new(BundleAdd)
	}
	return nil
}

// Decode turns the body of a message into its typed value. Every failure is
// an *OFPError to be sent back with ErrorMessage. HELLO is accepted with any
// version (negotiation needs it); everything else must be a version of
// Versions, and a 1.4 or 1.5 body is read in its version's layout.
func Decode(h Header, body []byte) (Message, error) {
	if int(h.Length) != HeaderLen+len(body) {
		return nil, errBadLen
	}
	if h.Type != openflow.TypeHello && !Supported(h.Version) {
		return nil, errBadVersion
	}
	t, ok := CanonicalType(h)
	if !ok {
		return nil, errBadType
	}
	switch {
	case t == openflow.TypeHello || h.Version == Version:
	case h.Version == Version10:
		b, err := upgrade10(t, body)
		if err != nil {
			return nil, err
		}
		body = b
	default:
		m, b, err := upgradeBody(h.Version, t, body)
		if m != nil || err != nil {
			return m, err
		}
		body = b
	}
	m := newMessage(t)
	if m == nil {
		return nil, errBadType
	}
	if err := m.decodeBody(body); err != nil {
		return nil, err
	}
	return m, nil
}

// Encode returns the wire bytes of m with transaction id xid. A multipart
// reply whose body exceeds one message is split into several messages, all
// but the last flagged OFPMPF_REPLY_MORE, returned back to back.
func Encode(xid uint32, m Message) ([]byte, error) {
	if r, ok := m.(*MultipartReply); ok {
		return r.encodeSplit(xid, MaxMessageLen)
	}
	return encodeOne(nil, xid, m)
}

// AppendEncode appends the wire bytes of m with transaction id xid to b,
// so that many messages encode into one buffer with no allocation each
// (a bundle's, journaled whole). A multipart reply, which may take several
// messages, is refused.
func AppendEncode(b []byte, xid uint32, m Message) ([]byte, error) {
	if _, ok := m.(*MultipartReply); ok {
		return nil, fmt.Errorf("ofpwire: AppendEncode of a multipart reply")
	}
	return encodeOne(b, xid, m)
}

func encodeOne(b []byte, xid uint32, m Message) ([]byte, error) {
	start := len(b)
	b = append(b, Version, byte(m.MsgType()), 0, 0)
	b = be.AppendUint32(b, xid)
	b, err := m.appendBody(b)
	if err != nil {
		return nil, err
	}
	n := len(b) - start
	if n > MaxMessageLen {
		return nil, fmt.Errorf("ofpwire: %v message of %d bytes exceeds %d", m.MsgType(), n, MaxMessageLen)
	}
	putLen16(b, start+2, n)
	return b, nil
}

func expectEmpty(b []byte) error {
	if len(b) != 0 {
		return errBadLen
	}
	return nil
}

// HelloElemVersionBitmap is OFPHET_VERSIONBITMAP.
const HelloElemVersionBitmap = uint16(ofp.HelloElemTypeVersionBitmap)

// Hello is OFPT_HELLO. VersionBitmap holds the words of the version-bitmap
// element (bit v of word v/32 set = version v supported); nil means the
// hello carries no such element. Unknown elements are skipped, as the spec
// requires.
type Hello struct {
	VersionBitmap []uint32
}

// NewHello returns a hello advertising the given wire versions.
func NewHello(versions ...uint8) *Hello {
	h := &Hello{}
	for _, v := range versions {
		for len(h.VersionBitmap) <= int(v/32) {
			h.VersionBitmap = append(h.VersionBitmap, 0)
		}
		h.VersionBitmap[v/32] |= 1 << (v % 32)
	}
	return h
}

// Supports reports whether the bitmap advertises version v.
func (h *Hello) Supports(v uint8) bool {
	i := int(v / 32)
	return i < len(h.VersionBitmap) && h.VersionBitmap[i]&(1<<(v%32)) != 0
}

// MsgType implements Message.
func (*Hello) MsgType() openflow.Type { return openflow.TypeHello }

func (h *Hello) appendBody(b []byte) ([]byte, error) {
	if h.VersionBitmap == nil {
		return b, nil
	}
	n := 4 + 4*len(h.VersionBitmap)
	b = be.AppendUint16(b, HelloElemVersionBitmap)
	b = be.AppendUint16(b, uint16(n))
	for _, w := range h.VersionBitmap {
		b = be.AppendUint32(b, w)
	}
	return appendZeros(b, roundUp8(n)-n), nil
}

func (h *Hello) decodeBody(b []byte) error {
	h.VersionBitmap = nil
	for len(b) > 0 {
		if len(b) < 4 {
			return errBadLen
		}
		t, n := be.Uint16(b), int(be.Uint16(b[2:]))
		if n < 4 || n > len(b) {
			return errBadLen
		}
		if t == HelloElemVersionBitmap && h.VersionBitmap == nil {
			if (n-4)%4 != 0 {
				return errBadLen
			}
			h.VersionBitmap = make([]uint32, 0, (n-4)/4)
			for i := 4; i < n; i += 4 {
				h.VersionBitmap = append(h.VersionBitmap, be.Uint32(b[i:]))
			}
		}
		// Some peers omit the final element's padding.
		b = b[min(roundUp8(n), len(b)):]
	}
	return nil
}

// ErrorMsg is OFPT_ERROR. For experimenter errors (Type ETExperimenter) Code
// is the exp_type and Data starts with the experimenter id.
type ErrorMsg struct {
	Type, Code uint16
	Data       []byte
}

// MsgType implements Message.
func (*ErrorMsg) MsgType() openflow.Type { return openflow.TypeError }

// Err returns the (type, code) pair as an error value.
func (e *ErrorMsg) Err() *OFPError { return &OFPError{Type: e.Type, Code: e.Code} }

func (e *ErrorMsg) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint16(be.AppendUint16(b, e.Type), e.Code)
	return append(b, e.Data...), nil
}

func (e *ErrorMsg) decodeBody(b []byte) error {
	if len(b) < 4 {
		return errBadLen
	}
	*e = ErrorMsg{Type: be.Uint16(b), Code: be.Uint16(b[2:]), Data: cloneBytes(b[4:])}
	return nil
}

// EchoRequest is OFPT_ECHO_REQUEST; the reply must carry the same Data.
type EchoRequest struct{ Data []byte }

// EchoReply is OFPT_ECHO_REPLY.
type EchoReply struct{ Data []byte }

// MsgType implements Message.
func (*EchoRequest) MsgType() openflow.Type { return openflow.TypeEchoRequest }

// MsgType implements Message.
func (*EchoReply) MsgType() openflow.Type { return openflow.TypeEchoReply }

func (e *EchoRequest) appendBody(b []byte) ([]byte, error) { return append(b, e.Data...), nil }
func (e *EchoRequest) decodeBody(b []byte) error           { e.Data = cloneBytes(b); return nil }
func (e *EchoReply) appendBody(b []byte) ([]byte, error)   { return append(b, e.Data...), nil }
func (e *EchoReply) decodeBody(b []byte) error             { e.Data = cloneBytes(b); return nil }

// Experimenter is OFPT_EXPERIMENTER.
type Experimenter struct {
	Experimenter, ExpType uint32
	Data                  []byte
}

// MsgType implements Message.
func (*Experimenter) MsgType() openflow.Type { return openflow.TypeExperiment }

func (e *Experimenter) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(be.AppendUint32(b, e.Experimenter), e.ExpType)
	return append(b, e.Data...), nil
}

func (e *Experimenter) decodeBody(b []byte) error {
	if len(b) < 8 {
		return errBadLen
	}
	*e = Experimenter{Experimenter: be.Uint32(b), ExpType: be.Uint32(b[4:]), Data: cloneBytes(b[8:])}
	return nil
}

// FeaturesRequest is OFPT_FEATURES_REQUEST.
type FeaturesRequest struct{}

// GetConfigRequest is OFPT_GET_CONFIG_REQUEST.
type GetConfigRequest struct{}

// BarrierRequest is OFPT_BARRIER_REQUEST.
type BarrierRequest struct{}

// BarrierReply is OFPT_BARRIER_REPLY.
type BarrierReply struct{}

// GetAsyncRequest is OFPT_GET_ASYNC_REQUEST.
type GetAsyncRequest struct{}

// MsgType implements Message.
func (*FeaturesRequest) MsgType() openflow.Type { return openflow.TypeFeaturesRequest }

// MsgType implements Message.
func (*GetConfigRequest) MsgType() openflow.Type { return openflow.TypeGetConfigRequest }

// MsgType implements Message.
func (*BarrierRequest) MsgType() openflow.Type { return openflow.TypeBarrierRequest }

// MsgType implements Message.
func (*BarrierReply) MsgType() openflow.Type { return openflow.TypeBarrierReply }

// MsgType implements Message.
func (*GetAsyncRequest) MsgType() openflow.Type { return openflow.TypeGetAsyncRequest }

func (*FeaturesRequest) appendBody(b []byte) ([]byte, error)  { return b, nil }
func (*FeaturesRequest) decodeBody(b []byte) error            { return expectEmpty(b) }
func (*GetConfigRequest) appendBody(b []byte) ([]byte, error) { return b, nil }
func (*GetConfigRequest) decodeBody(b []byte) error           { return expectEmpty(b) }
func (*BarrierRequest) appendBody(b []byte) ([]byte, error)   { return b, nil }
func (*BarrierRequest) decodeBody(b []byte) error             { return expectEmpty(b) }
func (*BarrierReply) appendBody(b []byte) ([]byte, error)     { return b, nil }
func (*BarrierReply) decodeBody(b []byte) error               { return expectEmpty(b) }
func (*GetAsyncRequest) appendBody(b []byte) ([]byte, error)  { return b, nil }
func (*GetAsyncRequest) decodeBody(b []byte) error            { return expectEmpty(b) }

// FeaturesReply is OFPT_FEATURES_REPLY (netrack's SwitchFeatures layout).
type FeaturesReply ofp.SwitchFeatures

// MsgType implements Message.
func (*FeaturesReply) MsgType() openflow.Type { return openflow.TypeFeaturesReply }

func (m *FeaturesReply) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.SwitchFeatures)(m)), nil
}
func (m *FeaturesReply) decodeBody(b []byte) error {
	return readFixed(b, 24, (*ofp.SwitchFeatures)(m), errBadLen)
}

// GetConfigReply is OFPT_GET_CONFIG_REPLY.
type GetConfigReply ofp.SwitchConfig

// SetConfig is OFPT_SET_CONFIG.
type SetConfig ofp.SwitchConfig

// MsgType implements Message.
func (*GetConfigReply) MsgType() openflow.Type { return openflow.TypeGetConfigReply }

// MsgType implements Message.
func (*SetConfig) MsgType() openflow.Type { return openflow.TypeSetConfig }

func (m *GetConfigReply) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.SwitchConfig)(m)), nil
}
func (m *GetConfigReply) decodeBody(b []byte) error {
	return readFixed(b, 4, (*ofp.SwitchConfig)(m), errBadLen)
}
func (m *SetConfig) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.SwitchConfig)(m)), nil
}
func (m *SetConfig) decodeBody(b []byte) error {
	return readFixed(b, 4, (*ofp.SwitchConfig)(m), errBadLen)
}

// TableMod is OFPT_TABLE_MOD.
type TableMod ofp.TableMod

// MsgType implements Message.
func (*TableMod) MsgType() openflow.Type { return openflow.TypeTableMod }

func (m *TableMod) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.TableMod)(m)), nil
}
func (m *TableMod) decodeBody(b []byte) error {
	return readFixed(b, 8, (*ofp.TableMod)(m), errBadLen)
}

// RoleRequest is OFPT_ROLE_REQUEST.
type RoleRequest ofp.RoleRequest

// RoleReply is OFPT_ROLE_REPLY.
type RoleReply ofp.RoleRequest

// MsgType implements Message.
func (*RoleRequest) MsgType() openflow.Type { return openflow.TypeRoleRequest }

// MsgType implements Message.
func (*RoleReply) MsgType() openflow.Type { return openflow.TypeRoleReply }

func (m *RoleRequest) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.RoleRequest)(m)), nil
}
func (m *RoleRequest) decodeBody(b []byte) error {
	return readFixed(b, 16, (*ofp.RoleRequest)(m), errBadLen)
}
func (m *RoleReply) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.RoleRequest)(m)), nil
}
func (m *RoleReply) decodeBody(b []byte) error {
	return readFixed(b, 16, (*ofp.RoleRequest)(m), errBadLen)
}

// GetAsyncReply is OFPT_GET_ASYNC_REPLY. Index 0 of each mask pair is for
// master/equal role, index 1 for slave.
type GetAsyncReply ofp.AsyncConfig

// SetAsync is OFPT_SET_ASYNC.
type SetAsync ofp.AsyncConfig

// MsgType implements Message.
func (*GetAsyncReply) MsgType() openflow.Type { return openflow.TypeGetAsyncReply }

// MsgType implements Message.
func (*SetAsync) MsgType() openflow.Type { return openflow.TypeSetAsync }

func (m *GetAsyncReply) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.AsyncConfig)(m)), nil
}
func (m *GetAsyncReply) decodeBody(b []byte) error {
	return readFixed(b, 24, (*ofp.AsyncConfig)(m), errBadLen)
}
func (m *SetAsync) appendBody(b []byte) ([]byte, error) {
	return appendFixed(b, (*ofp.AsyncConfig)(m)), nil
}
func (m *SetAsync) decodeBody(b []byte) error {
	return readFixed(b, 24, (*ofp.AsyncConfig)(m), errBadLen)
}

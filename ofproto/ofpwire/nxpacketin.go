package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// Open vSwitch's NXT_PACKET_IN2: a packet-in as properties, so that it can
// carry what PACKET_IN cannot: the userdata of the controller action that
// sent it (OVN's pinctrl dispatches on it) and, for a paused pipeline, a
// continuation that NXT_RESUME hands back.

// NX message subtypes.
const (
	NXTResume    = 28
	NXTPacketIn2 = 30
)

// NXT_PACKET_IN2 property types (NXPINT_*).
const (
	nxpintPacket       = 0
	nxpintFullLen      = 1
	nxpintBufferID     = 2
	nxpintTableID      = 3
	nxpintCookie       = 4
	nxpintReason       = 5
	nxpintMetadata     = 6
	nxpintUserdata     = 7
	nxpintContinuation = 8
)

// PacketIn2 is p as an NXT_PACKET_IN2 message: the packet (p.Data, with
// the full length when cut), buffer id (when one), table, cookie (unless
// all ones), the match's fields as its metadata, reason, userdata and
// continuation, in the order Open vSwitch writes them.
func (p *PacketIn) PacketIn2() (*Experimenter, error) {
	b := appendProp(nil, nxpintPacket, p.Data)
	if int(p.TotalLen) > len(p.Data) {
		b = appendProp(b, nxpintFullLen, be.AppendUint32(nil, uint32(p.TotalLen)))
	}
	if p.BufferID != NoBuffer {
		b = appendProp(b, nxpintBufferID, be.AppendUint32(nil, p.BufferID))
	}
	b = appendProp(b, nxpintTableID, []byte{p.TableID})
	if p.Cookie != ^uint64(0) {
		b = appendProp(b, nxpintCookie, be.AppendUint64(make([]byte, 4), p.Cookie))
	}
	var md []byte
	for _, o := range p.Match.Fields {
		var err error
		if md, err = appendOXM(md, o); err != nil {
			return nil, err
		}
	}
	b = appendProp(b, nxpintMetadata, md)
	b = appendProp(b, nxpintReason, []byte{byte(p.Reason)})
	if len(p.Userdata) > 0 {
		b = appendProp(b, nxpintUserdata, p.Userdata)
	}
	if p.Continuation != nil {
		b = appendProp(b, nxpintContinuation, p.Continuation)
	}
	if len(b) > 0xffff-16 {
		return nil, fmt.Errorf("ofpwire: packet-in2 too long")
	}
	return &Experimenter{Experimenter: NXVendor, ExpType: NXTPacketIn2, Data: b}, nil
}

// ParsePacketIn2 reads the properties of an NXT_PACKET_IN2 or NXT_RESUME
// (data: what follows the experimenter header); an unknown property type
// is BAD_REQUEST/BAD_TYPE.
func ParsePacketIn2(data []byte) (*PacketIn, error) {
	p := &PacketIn{BufferID: NoBuffer, Cookie: ^uint64(0)}
	havePacket, haveFull := false, false
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, errBadLen
		}
		typ, n := be.Uint16(data), int(be.Uint16(data[2:]))
		if n < 4 || roundUp8(n) > len(data) {
			return nil, errBadLen
		}
		v := data[4:n]
		switch typ {
		case nxpintPacket:
			p.Data, havePacket = cloneBytes(v), true
		case nxpintFullLen:
			if len(v) != 4 {
				return nil, errBadLen
			}
			p.TotalLen, haveFull = uint16(min(be.Uint32(v), 0xffff)), true
		case nxpintBufferID:
			if len(v) != 4 {
				return nil, errBadLen
			}
			p.BufferID = be.Uint32(v)
		case nxpintTableID, nxpintReason:
			if len(v) != 1 {
				return nil, errBadLen
			}
			if typ == nxpintTableID {
				p.TableID = v[0]
			} else {
				p.Reason = ofp.PacketInReason(v[0])
			}
		case nxpintCookie:
			if len(v) != 12 {
				return nil, errBadLen
			}
			p.Cookie = be.Uint64(v[4:])
		case nxpintMetadata:
			var seen [NumFields]bool
			for len(v) > 0 {
				o, k, err := parseOXM(v)
				if err != nil {
					return nil, err
				}
				if seen[o.Field] {
					return nil, errMatchDup
				}
				seen[o.Field] = true
				p.Match.Fields = append(p.Match.Fields, o)
				v = v[k:]
			}
		case nxpintUserdata:
			p.Userdata = cloneBytes(v)
		case nxpintContinuation:
			p.Continuation = cloneBytes(v)
		default:
			return nil, newErr(ETBadRequest, BRCBadType)
		}
		data = data[roundUp8(n):]
	}
	if !havePacket {
		return nil, errBadLen
	}
	switch {
	case !haveFull:
		p.TotalLen = uint16(min(len(p.Data), 0xffff))
	case int(p.TotalLen) < len(p.Data):
		return nil, errBadLen // a full length shorter than the part sent
	}
	return p, nil
}

// Resume is NXT_RESUME: a controller hands back a paused packet-in2 (the
// packet and metadata as it wants them to go on, and the continuation it
// was given) for the pipeline to go on where it paused.
type Resume struct{ PacketIn }

// MsgType implements Message: NXT_RESUME is an experimenter message.
func (*Resume) MsgType() openflow.Type { return openflow.TypeExperiment }

func (r *Resume) appendBody(b []byte) ([]byte, error) {
	x, err := r.PacketIn.PacketIn2()
	if err != nil {
		return b, err
	}
	x.ExpType = NXTResume
	return x.appendBody(b)
}

func (r *Resume) decodeBody(b []byte) error {
	if len(b) < 8 || be.Uint32(b) != NXVendor || be.Uint32(b[4:]) != NXTResume {
		return errBadLen
	}
	x, err := ParseResume(b[8:])
	if err != nil {
		return err
	}
	*r = *x
	return nil
}

// ParseResume decodes the body of an NXT_RESUME (what follows the
// experimenter header); it must carry a continuation.
func ParseResume(data []byte) (*Resume, error) {
	p, err := ParsePacketIn2(data)
	if err != nil {
		return nil, err
	}
	if p.Continuation == nil {
		return nil, errBadLen
	}
	return &Resume{*p}, nil
}

// nxcptBridge is the continuation property (NXCPT_BRIDGE) naming the
// bridge a continuation belongs to, a UUID. Open vSwitch's clients
// (ovs-ofctl, OVN's pinctrl) decode a continuation's properties and
// encode them again for NXT_RESUME, so what this switch needs to find
// its paused walk travels in the one they keep as it is.
const nxcptBridge = 0x8000

// Continuation is the continuation property value of a paused
// packet-in2 that carries id (16 bytes) as its NXCPT_BRIDGE: a nested
// property list (4 bytes of padding, then the properties).
func Continuation(id [16]byte) []byte {
	return appendProp(make([]byte, 4), nxcptBridge, id[:])
}

// ContinuationID returns the NXCPT_BRIDGE of a continuation, ok false
// when it has none.
func ContinuationID(c []byte) (id [16]byte, ok bool) {
	if len(c) < 4 {
		return id, false
	}
	for p := c[4:]; len(p) >= 4; {
		typ, n := be.Uint16(p), int(be.Uint16(p[2:]))
		if n < 4 || roundUp8(n) > len(p) {
			return id, false
		}
		if typ == nxcptBridge && n == 20 {
			return [16]byte(p[4:20]), true
		}
		p = p[roundUp8(n):]
	}
	return id, false
}

package ofpwire

import (
	"fmt"

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

// PacketIn2 is p as an NXT_PACKET_IN2 message, with continuation (nil:
// none) for a paused pipeline: the packet (p.Data, with the full length
// when cut), buffer id (when one), table, cookie (unless all ones), the
// match's fields as its metadata, reason and userdata, in the order Open
// vSwitch writes them.
func (p *PacketIn) PacketIn2(continuation []byte) (*Experimenter, error) {
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
	if continuation != nil {
		b = appendProp(b, nxpintContinuation, continuation)
	}
	if len(b) > 0xffff-16 {
		return nil, fmt.Errorf("ofpwire: packet-in2 too long")
	}
	return &Experimenter{Experimenter: NXVendor, ExpType: NXTPacketIn2, Data: b}, nil
}

// ParsePacketIn2 reads the properties of an NXT_PACKET_IN2 or NXT_RESUME
// (data: what follows the experimenter header) into a PacketIn and the
// continuation; an unknown property type is BAD_REQUEST/BAD_TYPE.
func ParsePacketIn2(data []byte) (*PacketIn, []byte, error) {
	p := &PacketIn{BufferID: NoBuffer, Cookie: ^uint64(0)}
	var cont []byte
	havePacket, haveFull := false, false
	for len(data) > 0 {
		if len(data) < 4 {
			return nil, nil, errBadLen
		}
		typ, n := be.Uint16(data), int(be.Uint16(data[2:]))
		if n < 4 || roundUp8(n) > len(data) {
			return nil, nil, errBadLen
		}
		v := data[4:n]
		switch typ {
		case nxpintPacket:
			p.Data, havePacket = cloneBytes(v), true
		case nxpintFullLen:
			if len(v) != 4 {
				return nil, nil, errBadLen
			}
			p.TotalLen, haveFull = uint16(min(be.Uint32(v), 0xffff)), true
		case nxpintBufferID:
			if len(v) != 4 {
				return nil, nil, errBadLen
			}
			p.BufferID = be.Uint32(v)
		case nxpintTableID, nxpintReason:
			if len(v) != 1 {
				return nil, nil, errBadLen
			}
			if typ == nxpintTableID {
				p.TableID = v[0]
			} else {
				p.Reason = ofp.PacketInReason(v[0])
			}
		case nxpintCookie:
			if len(v) != 12 {
				return nil, nil, errBadLen
			}
			p.Cookie = be.Uint64(v[4:])
		case nxpintMetadata:
			var seen [NumFields]bool
			for len(v) > 0 {
				o, k, err := parseOXM(v)
				if err != nil {
					return nil, nil, err
				}
				if seen[o.Field] {
					return nil, nil, errMatchDup
				}
				seen[o.Field] = true
				p.Match.Fields = append(p.Match.Fields, o)
				v = v[k:]
			}
		case nxpintUserdata:
			p.Userdata = cloneBytes(v)
		case nxpintContinuation:
			cont = cloneBytes(v)
		default:
			return nil, nil, newErr(ETBadRequest, BRCBadType)
		}
		data = data[roundUp8(n):]
	}
	if !havePacket {
		return nil, nil, errBadLen
	}
	switch {
	case !haveFull:
		p.TotalLen = uint16(min(len(p.Data), 0xffff))
	case int(p.TotalLen) < len(p.Data):
		return nil, nil, errBadLen // a full length shorter than the part sent
	}
	return p, cont, nil
}

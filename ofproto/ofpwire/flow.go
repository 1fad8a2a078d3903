package ofpwire

import (
	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// NoBuffer is OFP_NO_BUFFER: the packet is carried in the message itself.
const NoBuffer = ofp.NoBuffer

// PacketIn is OFPT_PACKET_IN.
type PacketIn struct {
	BufferID uint32
	TotalLen uint16
	Reason   ofp.PacketInReason
	TableID  uint8
	Cookie   uint64
	Match    Match
	Data     []byte
	// Userdata is controller2's userdata and Continuation, opaque to the
	// controller, where a paused pipeline goes on: only NXT_PACKET_IN2
	// carries them (PacketIn2).
	Userdata, Continuation []byte
}

// MsgType implements Message.
func (*PacketIn) MsgType() openflow.Type { return openflow.TypePacketIn }

func (p *PacketIn) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(b, p.BufferID)
	b = be.AppendUint16(b, p.TotalLen)
	b = append(b, byte(p.Reason), p.TableID)
	b = be.AppendUint64(b, p.Cookie)
	b, err := appendMatch(b, p.Match)
	if err != nil {
		return b, err
	}
	return append(appendZeros(b, 2), p.Data...), nil
}

func (p *PacketIn) decodeBody(b []byte) error {
	if len(b) < 16 {
		return errBadLen
	}
	m, n, err := parseMatch(b[16:])
	if err != nil {
		return err
	}
	rest := b[16+n:]
	if len(rest) < 2 {
		return errBadLen
	}
	*p = PacketIn{
		BufferID: be.Uint32(b), TotalLen: be.Uint16(b[4:]),
		Reason: ofp.PacketInReason(b[6]), TableID: b[7], Cookie: be.Uint64(b[8:]),
		Match: m, Data: cloneBytes(rest[2:]),
	}
	return nil
}

// PacketOut is OFPT_PACKET_OUT.
type PacketOut struct {
	BufferID uint32
	InPort   ofp.PortNo
	Actions  []Action
	Data     []byte
	// Match is the pipeline state an OpenFlow 1.5 packet-out starts its
	// packet with (metadata, registers, tunnel metadata), in_port aside;
	// only 1.5 carries it.
	Match Match
}

// MsgType implements Message.
func (*PacketOut) MsgType() openflow.Type { return openflow.TypePacketOut }

func (p *PacketOut) appendBody(b []byte) ([]byte, error) {
	start := len(b)
	b = be.AppendUint32(b, p.BufferID)
	b = be.AppendUint32(b, uint32(p.InPort))
	b = appendZeros(b, 8) // actions_len, back-patched, and pad[6]
	b, err := appendActions(b, p.Actions)
	if err != nil {
		return b, err
	}
	putLen16(b, start+8, len(b)-start-16)
	return append(b, p.Data...), nil
}

func (p *PacketOut) decodeBody(b []byte) error {
	if len(b) < 16 {
		return errBadLen
	}
	alen := int(be.Uint16(b[8:]))
	if alen > len(b)-16 {
		return errBadLen
	}
	acts, err := parseActions(b[16 : 16+alen])
	if err != nil {
		return err
	}
	*p = PacketOut{
		BufferID: be.Uint32(b), InPort: ofp.PortNo(be.Uint32(b[4:])),
		Actions: acts, Data: cloneBytes(b[16+alen:]),
	}
	return nil
}

// FlowMod is OFPT_FLOW_MOD.
type FlowMod struct {
	Cookie, CookieMask uint64
	TableID            uint8
	Command            ofp.FlowModCommand
	IdleTimeout        uint16
	HardTimeout        uint16
	Priority           uint16
	BufferID           uint32
	OutPort            ofp.PortNo
	OutGroup           ofp.Group
	Flags              ofp.FlowModFlag
	Match              Match
	Instructions       []Instruction
}

// MsgType implements Message.
func (*FlowMod) MsgType() openflow.Type { return openflow.TypeFlowMod }

func (f *FlowMod) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint64(b, f.Cookie)
	b = be.AppendUint64(b, f.CookieMask)
	b = append(b, f.TableID, byte(f.Command))
	b = be.AppendUint16(b, f.IdleTimeout)
	b = be.AppendUint16(b, f.HardTimeout)
	b = be.AppendUint16(b, f.Priority)
	b = be.AppendUint32(b, f.BufferID)
	b = be.AppendUint32(b, uint32(f.OutPort))
	b = be.AppendUint32(b, uint32(f.OutGroup))
	b = be.AppendUint16(b, uint16(f.Flags))
	b = appendZeros(b, 2)
	b, err := appendMatch(b, f.Match)
	if err != nil {
		return b, err
	}
	return appendInstructions(b, f.Instructions)
}

func (f *FlowMod) decodeBody(b []byte) error {
	if len(b) < 40 {
		return errBadLen
	}
	if ofp.FlowModCommand(b[17]) > ofp.FlowDeleteStrict {
		return newErr(ETFlowModFailed, FMFCBadCommand)
	}
	m, n, err := parseMatch(b[40:])
	if err != nil {
		return err
	}
	ins, err := parseInstructions(b[40+n:])
	if err != nil {
		return err
	}
	*f = FlowMod{
		Cookie: be.Uint64(b), CookieMask: be.Uint64(b[8:]),
		TableID: b[16], Command: ofp.FlowModCommand(b[17]),
		IdleTimeout: be.Uint16(b[18:]), HardTimeout: be.Uint16(b[20:]),
		Priority: be.Uint16(b[22:]), BufferID: be.Uint32(b[24:]),
		OutPort: ofp.PortNo(be.Uint32(b[28:])), OutGroup: ofp.Group(be.Uint32(b[32:])),
		Flags: ofp.FlowModFlag(be.Uint16(b[36:])),
		Match: m, Instructions: ins,
	}
	return nil
}

// FlowRemoved is OFPT_FLOW_REMOVED.
type FlowRemoved struct {
	Cookie       uint64
	Priority     uint16
	Reason       ofp.FlowRemovedReason
	TableID      uint8
	DurationSec  uint32
	DurationNSec uint32
	IdleTimeout  uint16
	HardTimeout  uint16
	PacketCount  uint64
	ByteCount    uint64
	Match        Match
}

// MsgType implements Message.
func (*FlowRemoved) MsgType() openflow.Type { return openflow.TypeFlowRemoved }

func (f *FlowRemoved) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint64(b, f.Cookie)
	b = be.AppendUint16(b, f.Priority)
	b = append(b, byte(f.Reason), f.TableID)
	b = be.AppendUint32(b, f.DurationSec)
	b = be.AppendUint32(b, f.DurationNSec)
	b = be.AppendUint16(b, f.IdleTimeout)
	b = be.AppendUint16(b, f.HardTimeout)
	b = be.AppendUint64(b, f.PacketCount)
	b = be.AppendUint64(b, f.ByteCount)
	return appendMatch(b, f.Match)
}

func (f *FlowRemoved) decodeBody(b []byte) error {
	if len(b) < 40 {
		return errBadLen
	}
	m, n, err := parseMatch(b[40:])
	if err != nil {
		return err
	}
	if 40+n != len(b) {
		return errBadLen
	}
	*f = FlowRemoved{
		Cookie: be.Uint64(b), Priority: be.Uint16(b[8:]),
		Reason: ofp.FlowRemovedReason(b[10]), TableID: b[11],
		DurationSec: be.Uint32(b[12:]), DurationNSec: be.Uint32(b[16:]),
		IdleTimeout: be.Uint16(b[20:]), HardTimeout: be.Uint16(b[22:]),
		PacketCount: be.Uint64(b[24:]), ByteCount: be.Uint64(b[32:]),
		Match: m,
	}
	return nil
}

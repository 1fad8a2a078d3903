package ofconn

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Open vSwitch's (Nicira's) controller messages that a controller such as
// ovn-controller sends on connect, answered here so that it does not see
// an error (which since OVN 23.03.1 makes it reconnect and start over).
const (
	nxtSetPacketInFormat = 16
	nxtCTFlushZone       = 29
)

// Packet-in formats of NXT_SET_PACKET_IN_FORMAT.
const (
	nxpifStandard = 0
	nxpifNXT      = 1
	nxpifNXT2     = 2
)

var errBadExpType = &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadExpType}

// nicira handles an NX message: NXT_SET_PACKET_IN_FORMAT chooses between
// the standard format and NXT_PACKET_IN2 for the connection's
// packet-ins; NXT_RESUME goes to the handler as an ofpwire.Resume;
// NXT_FLOW_MOD (the NXM flow format of 1.0 peers) as the FlowMod it
// means, with NXT_SET_FLOW_FORMAT and NXT_FLOW_MOD_TABLE_ID accepted;
// NXT_CT_FLUSH_ZONE and NXT_CT_FLUSH go to the handler as an
// ofpwire.CTFlushZone and an ofpwire.CTFlush. Other
// subtypes are BAD_EXPTYPE.
func (c *Conn) nicira(xid uint32, m *ofpwire.Experimenter, raw []byte) {
	switch m.ExpType {
	case nxtSetPacketInFormat:
		if len(m.Data) != 4 {
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadLen}, raw)
			return
		}
		switch binary.BigEndian.Uint32(m.Data) {
		case nxpifStandard:
			c.packetIn2.Store(false)
		case nxpifNXT2:
			c.packetIn2.Store(true)
		case nxpifNXT:
			// The pre-1.1 NXT_PACKET_IN is not produced: refused, so
			// that a client falls back rather than waits for it.
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCEperm}, raw)
		default:
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCEperm}, raw)
		}
	case ofpwire.NXTResume:
		r, err := ofpwire.ParseResume(m.Data)
		if err == nil && c.Role() == ofpwire.ControllerRoleSlave {
			err = errIsSlave
		}
		if err == nil {
			err = c.m.handler.Handle(c, xid, r)
		}
		if err != nil {
			c.replyErr(xid, err, raw)
		}
	case ofpwire.NXTSetFlowFormat:
		if len(m.Data) != 4 {
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadLen}, raw)
			return
		}
		switch binary.BigEndian.Uint32(m.Data) {
		case ofpwire.NXFlowFormatOF10, ofpwire.NXFlowFormatNXM:
			// Flow-mods come as NXT_FLOW_MOD or OFPT_FLOW_MOD either
			// way; only dump-flows depends on it (NXST_FLOW).
		default:
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCEperm}, raw)
		}
	case ofpwire.NXTFlowModTableID:
		if len(m.Data) != 8 {
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadLen}, raw)
			return
		}
		c.flowModTableID.Store(m.Data[0] != 0)
	case ofpwire.NXTFlowMod:
		fm, err := ofpwire.ParseNXFlowMod(m.Data, c.flowModTableID.Load())
		if err != nil {
			c.replyErr(xid, err, raw)
			return
		}
		c.dispatch(xid, fm, raw)
	case nxtCTFlushZone:
		if len(m.Data) != 8 {
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadLen}, raw)
			return
		}
		// struct nx_zone_id: six zero bytes, then the zone.
		c.dispatch(xid, &ofpwire.CTFlushZone{Zone: uint16(m.Data[6])<<8 | uint16(m.Data[7])}, raw)
	case ofpwire.NXTTLVTableMod:
		m, err := ofpwire.ParseTLVTableMod(m.Data)
		if err != nil {
			c.replyErr(xid, err, raw)
			return
		}
		c.dispatch(xid, m, raw)
	case ofpwire.NXTTLVTableRequest:
		if len(m.Data) != 0 {
			c.replyErr(xid, &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadLen}, raw)
			return
		}
		c.dispatch(xid, &ofpwire.TLVTableRequest{}, raw)
	case ofpwire.NXTCTFlush:
		f, err := ofpwire.ParseCTFlush(m.Data)
		if err != nil {
			c.replyErr(xid, err, raw)
			return
		}
		c.dispatch(xid, f, raw)
	default:
		c.replyErr(xid, errBadExpType, raw)
	}
}

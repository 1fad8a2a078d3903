package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow/ofp"
)

// Open vSwitch's NXM flow format for OpenFlow 1.0 peers: what plain
// ovs-ofctl (no -O) sends once a flow needs more than an ofp10_match can
// say (registers, IPv6, ...): NXT_SET_FLOW_FORMAT, NXT_FLOW_MOD_TABLE_ID
// and NXT_FLOW_MOD, whose match is a list of NXM (or OXM) fields.

// NX message subtypes of the NXM flow format.
const (
	NXTSetFlowFormat   = 12
	NXTFlowMod         = 13
	NXTFlowModTableID  = 15
	NXFlowFormatOF10   = 0
	NXFlowFormatNXM    = 2
	nxmCookieWire      = 30 // NXM_NX_COOKIE, in class NXM_NX
	nxm0InPort         = 0
	nxm0VLANTCI        = 4
	nxm0IPTOS          = 5
	nxFlowModFixedSize = 32
)

// ParseNXFlowMod decodes the body of an NXT_FLOW_MOD (what follows the NX
// header) into the FlowMod it asks for. withTableID says the peer turned
// on NXT_FLOW_MOD_TABLE_ID: the command's high byte is then the table;
// otherwise an add goes to table 0 and a modify or delete to every table,
// as Open vSwitch has it.
func ParseNXFlowMod(b []byte, withTableID bool) (*FlowMod, error) {
	if len(b) < nxFlowModFixedSize {
		return nil, errBadLen
	}
	cmd := be.Uint16(b[8:])
	table := byte(cmd >> 8)
	cmd &= 0xff
	if withTableID && cmd == uint16(ofp.FlowAdd) && table == byte(TableAll) {
		table = 0 // no table= given, as in Open vSwitch
	}
	if !withTableID {
		table = 0
		if cmd != uint16(ofp.FlowAdd) {
			table = 0xff
		}
	}
	flags := be.Uint16(b[22:])
	if flags&4 != 0 { // OFPFF_EMERG
		return nil, &OFPError{Type: ETFlowModFailed, Code: FMFCBadFlags, Reason: "emergency flows are not supported"}
	}
	mlen := int(be.Uint16(b[24:]))
	if nxFlowModFixedSize+roundUp8(mlen) > len(b) {
		return nil, errMatchLen
	}
	oxms, cookie, cookieMask, err := nxmToOXM(b[nxFlowModFixedSize : nxFlowModFixedSize+mlen])
	if err != nil {
		return nil, err
	}
	if cmd == uint16(ofp.FlowAdd) && cookieMask != 0 {
		return nil, errMatchField // the cookie of an add is the flow-mod's
	}
	if cmd == uint16(ofp.FlowAdd) || cookieMask == 0 {
		cookie = be.Uint64(b)
	}
	acts, err := actions10to13(b[nxFlowModFixedSize+roundUp8(mlen):], oxmIPProtoOf(oxms))
	if err != nil {
		return nil, err
	}
	nb := be.AppendUint64(nil, cookie)
	nb = be.AppendUint64(nb, cookieMask)
	nb = append(nb, table, byte(cmd))
	nb = append(nb, b[10:20]...) // idle, hard, priority, buffer_id
	nb = be.AppendUint32(nb, port10to13(be.Uint16(b[20:])))
	nb = be.AppendUint32(nb, 0xffffffff) // out_group: any
	nb = be.AppendUint16(nb, flags)
	nb = appendZeros(nb, 2)
	nb = be.AppendUint16(nb, 1)
	nb = be.AppendUint16(nb, uint16(4+len(oxms)))
	nb = append(nb, oxms...)
	nb = appendZeros(nb, roundUp8(4+len(oxms))-4-len(oxms))
	if nb, err = appendInstructions10(nb, acts, cmd < 3); err != nil {
		return nil, err
	}
	fm := &FlowMod{}
	if err := fm.decodeBody(nb); err != nil {
		return nil, err
	}
	return fm, nil
}

// nxmToOXM rewrites an nx_match into OXM fields: NXM_OF fields that mean
// what an OpenFlow basic field means become that field (NXM_OF_IN_PORT
// widened, NXM_OF_VLAN_TCI split into VLAN_VID and VLAN_PCP, NXM_OF_IP_TOS
// into IP_DSCP), Open vSwitch's extension fields stay as they are, OXM
// fields pass, and NXM_NX_COOKIE becomes the cookie and its mask.
func nxmToOXM(m []byte) (oxms []byte, cookie, cookieMask uint64, err error) {
	for len(m) > 0 {
		if len(m) < 4 {
			return nil, 0, 0, errMatchLen
		}
		h := be.Uint32(m)
		n := int(h & 0xff)
		if 4+n > len(m) {
			return nil, 0, 0, errMatchLen
		}
		class, field, masked := ofp.XMClass(h>>16), ofp.XMType(h>>9&0x7f), h&0x100 != 0
		v := m[4 : 4+n]
		var mask []byte
		if masked {
			v, mask = v[:n/2], v[n/2:]
		}
		m = m[4+n:]
		if _, ok := extByWire(class, field); ok && !(class == ClassNXM0 && (field == nxm0InPort || field == nxm0IPTOS)) {
			oxms = be.AppendUint32(oxms, h)
			oxms = append(append(oxms, v...), mask...)
			continue
		}
		switch {
		case class == ofp.XMClassOpenflowBasic:
			oxms = be.AppendUint32(oxms, h)
			oxms = append(append(oxms, v...), mask...)
		case class == ClassNXM1 && field == nxmCookieWire && (n == 8 || n == 16):
			cookie, cookieMask = be.Uint64(v), ^uint64(0)
			if masked {
				cookieMask = be.Uint64(mask)
			}
			cookie &= cookieMask
		case class == ClassNXM0 && field == nxm0InPort && n == 2 && !masked:
			oxms = appendOXMField(oxms, oxmInPort, be.AppendUint32(nil, port10to13(be.Uint16(v))), nil)
		case class == ClassNXM0 && field == nxm0VLANTCI && len(v) == 2:
			tci, tm := be.Uint16(v), uint16(0xffff)
			if masked {
				tm = be.Uint16(mask)
			}
			if vm := tm & 0x1fff; vm != 0 {
				var mk []byte
				if vm != 0x1fff {
					mk = be.AppendUint16(nil, vm)
				}
				oxms = appendOXMField(oxms, oxmVLANVID, be.AppendUint16(nil, tci&vm), mk)
			}
			if tm>>13 == 7 {
				oxms = appendOXMField(oxms, oxmVLANPCP, []byte{byte(tci >> 13)}, nil)
			} else if tm>>13 != 0 {
				return nil, 0, 0, errMatchWildcards
			}
		case class == ClassNXM0 && field == nxm0IPTOS && len(v) == 1:
			if masked && mask[0]&0xfc != 0xfc {
				return nil, 0, 0, errMatchWildcards
			}
			oxms = appendOXMField(oxms, oxmIPDSCP, []byte{v[0] >> 2}, nil)
		default:
			var basic ofp.XMType
			var ok bool
			if class == ClassNXM0 {
				basic, ok = nxm0Fields[field]
			} else if class == ClassNXM1 {
				basic, ok = nxm1Fields[field]
			}
			if !ok {
				return nil, 0, 0, errMatchField
			}
			oxms = appendOXMField(oxms, uint32(basic), v, mask)
		}
	}
	return oxms, cookie, cookieMask, nil
}

// Open vSwitch's NXST_FLOW and NXST_AGGREGATE: the flow and aggregate
// statistics of the NXM flow format, as 1.0 vendor stats.
const (
	nxstFlow          = 0
	nxstAggregate     = 1
	stats10Vendor     = 0xffff
	nxFlowStatsFixed  = 48
	nxStatsHeaderSize = 12 // vendor, subtype, pad
)

// IsNXStats reports whether body (an OpenFlow 1.0 stats request or reply
// body) is one of Open vSwitch's NXST_FLOW or NXST_AGGREGATE.
func IsNXStats(body []byte) bool {
	return len(body) >= 4+nxStatsHeaderSize && be.Uint16(body) == stats10Vendor && be.Uint32(body[4:]) == NXVendor &&
		be.Uint32(body[8:]) <= nxstAggregate
}

// upNXStats10 rewrites an NXST_FLOW or NXST_AGGREGATE request (a 1.0 stats
// body) into the 1.3 flow or aggregate request it means.
func upNXStats10(b []byte) ([]byte, error) {
	if !IsNXStats(b) {
		return nil, errBadMultipart
	}
	sub := be.Uint32(b[8:])
	r := b[16:]
	if len(r) < 8 {
		return nil, errBadLen
	}
	mlen := int(be.Uint16(r[2:]))
	if 8+mlen > len(r) {
		return nil, errMatchLen
	}
	oxms, cookie, cookieMask, err := nxmToOXM(r[8 : 8+mlen])
	if err != nil {
		return nil, err
	}
	nb := be.AppendUint16(nil, uint16(sub)+1) // OFPMP_FLOW (1) or OFPMP_AGGREGATE (2)
	nb = append(nb, b[2:4]...)
	nb = appendZeros(nb, 4)
	nb = append(nb, r[4], 0, 0, 0)
	nb = be.AppendUint32(nb, port10to13(be.Uint16(r)))
	nb = be.AppendUint32(nb, 0xffffffff) // out_group: any
	nb = appendZeros(nb, 4)
	nb = be.AppendUint64(nb, cookie)
	nb = be.AppendUint64(nb, cookieMask)
	nb = be.AppendUint16(nb, 1)
	nb = be.AppendUint16(nb, uint16(4+len(oxms)))
	nb = append(nb, oxms...)
	return appendZeros(nb, roundUp8(4+len(oxms))-4-len(oxms)), nil
}

// EncodeNXStatsReply encodes a flow or aggregate statistics reply for a
// 1.0 peer that asked with NXST_FLOW or NXST_AGGREGATE: matches as NXM
// (OXM fields, which Open vSwitch reads there too), actions as 1.0's with
// Open vSwitch's vendor actions; what 1.0 cannot hold (instructions other
// than apply-actions) is left out. Flow replies are cut into messages of
// at most 64 KiB, all but the last flagged MORE.
func EncodeNXStatsReply(xid uint32, r *MultipartReply) ([][]byte, error) {
	head := func(sub uint32, more bool) []byte {
		b := appendZeros(nil, HeaderLen)
		b = be.AppendUint16(b, stats10Vendor)
		flags := uint16(0)
		if more || r.Flags&1 != 0 {
			flags = 1
		}
		b = be.AppendUint16(b, flags)
		b = be.AppendUint32(b, NXVendor)
		b = be.AppendUint32(b, sub)
		return appendZeros(b, 4)
	}
	finish := func(b []byte) []byte {
		b[0], b[1] = Version10, 17 // OFPT_STATS_REPLY
		putLen16(b, 2, len(b))
		be.PutUint32(b[4:], xid)
		return b
	}
	switch body := r.Body.(type) {
	case *AggregateStatsReply:
		b := head(nxstAggregate, false)
		b = be.AppendUint64(b, body.PacketCount)
		b = be.AppendUint64(b, body.ByteCount)
		b = be.AppendUint32(b, body.FlowCount)
		return [][]byte{finish(appendZeros(b, 4))}, nil
	case *FlowStatsReply:
		var out [][]byte
		cur := head(nxstFlow, false)
		for i := range body.Flows {
			e, err := nxFlowStats(&body.Flows[i])
			if err != nil {
				return nil, err
			}
			if len(cur)+len(e) > MaxMessageLen && len(cur) > HeaderLen+16 {
				cur[HeaderLen+3] = 1 // more
				out = append(out, finish(cur))
				cur = head(nxstFlow, false)
			}
			cur = append(cur, e...)
		}
		return append(out, finish(cur)), nil
	}
	return nil, errBadMultipart
}

// nxFlowStats encodes one flow as an nx_flow_stats entry.
func nxFlowStats(f *FlowStats) ([]byte, error) {
	var m []byte
	for _, o := range f.Match.Fields {
		var err error
		if m, err = appendOXM(m, o); err != nil {
			return nil, err
		}
	}
	var acts13 []byte
	for _, in := range f.Instructions {
		if ap, ok := in.(*InstrApplyActions); ok {
			var err error
			if acts13, err = appendActions(acts13, ap.Actions); err != nil {
				return nil, err
			}
		}
	}
	acts := actions13to10(acts13)
	for _, in := range f.Instructions {
		if wm, ok := in.(*InstrWriteMetadata); ok {
			acts = appendWriteMetadata10(acts, wm)
		}
	}
	b := appendZeros(nil, 2)
	b = append(b, f.TableID, 0)
	b = be.AppendUint32(b, f.DurationSec)
	b = be.AppendUint32(b, f.DurationNSec)
	b = be.AppendUint16(b, f.Priority)
	b = be.AppendUint16(b, f.IdleTimeout)
	b = be.AppendUint16(b, f.HardTimeout)
	b = be.AppendUint16(b, uint16(len(m)))
	b = appendZeros(b, 4) // idle_age, hard_age: not given
	b = be.AppendUint64(b, f.Cookie)
	b = be.AppendUint64(b, f.PacketCount)
	b = be.AppendUint64(b, f.ByteCount)
	b = append(b, m...)
	b = appendZeros(b, roundUp8(len(m))-len(m))
	b = append(b, acts...)
	if len(b) > 0xffff {
		return nil, fmt.Errorf("ofpwire: flow too long for NXST_FLOW")
	}
	putLen16(b, 0, len(b))
	return b, nil
}

// oxmIPProtoOf is the IP protocol an OXM list matches exactly (0 if
// none): which 1.3 field a 1.0 set_tp_src/dst action sets.
func oxmIPProtoOf(oxms []byte) byte {
	for len(oxms) >= 4 {
		h := be.Uint32(oxms)
		n := 4 + int(h&0xff)
		if n > len(oxms) {
			return 0
		}
		if h>>16 == 0x8000 && (h>>9)&0x7f == oxmIPProto && h&0x100 == 0 && n == 5 {
			return oxms[4]
		}
		oxms = oxms[n:]
	}
	return 0
}

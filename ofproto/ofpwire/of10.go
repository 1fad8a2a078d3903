package ofpwire

import (
	"fmt"
	"slices"

	"github.com/netrack/openflow"
)

// OpenFlow 1.0, rewritten to and from the 1.3 layout like 1.4 and 1.5
// (version_bodies.go), so that plain ovs-ofctl (whose default is 1.0) and
// 1.0 controllers work. 1.0 numbers its message types differently, has one
// table, 16-bit port numbers, a fixed 40-byte match and no instructions:
// a 1.0 flow-mod becomes a 1.3 one in table 0 (deletes: every table) with
// an apply-actions instruction. What 1.3 holds and 1.0 cannot say (other
// match fields, instructions, group or MPLS actions) is left out of what a
// 1.0 peer is told; -O OpenFlow13 shows it.

// Version10 is OpenFlow 1.0.
const Version10 = 0x01

// type10 maps 1.0 message types to the 1.3 ones with the same meaning.
var type10 = [...]openflow.Type{
	0: openflow.TypeHello, 1: openflow.TypeError, 2: openflow.TypeEchoRequest, 3: openflow.TypeEchoReply,
	4: openflow.TypeExperiment, 5: openflow.TypeFeaturesRequest, 6: openflow.TypeFeaturesReply,
	7: openflow.TypeGetConfigRequest, 8: openflow.TypeGetConfigReply, 9: openflow.TypeSetConfig,
	10: openflow.TypePacketIn, 11: openflow.TypeFlowRemoved, 12: openflow.TypePortStatus,
	13: openflow.TypePacketOut, 14: openflow.TypeFlowMod, 15: openflow.TypePortMod,
	16: openflow.TypeMultipartRequest, 17: openflow.TypeMultipartReply, 18: openflow.TypeBarrierRequest,
	19: openflow.TypeBarrierReply, 20: openflow.TypeQueueGetConfigRequest, 21: openflow.TypeQueueGetConfigReply,
}

// CanonicalType is the (1.3) type of a message with header h; ok is false
// for a 1.0 type number 1.0 does not have.
func CanonicalType(h Header) (openflow.Type, bool) {
	if h.Version != Version10 {
		return h.Type, true
	}
	if int(h.Type) >= len(type10) {
		return 0, false
	}
	return type10[h.Type], true
}

// type13to10 is the reverse of type10 (0xff: no 1.0 type).
func type13to10(t openflow.Type) uint8 {
	for i, x := range type10 {
		if x == t {
			return uint8(i)
		}
	}
	return 0xff
}

// Port numbers: 1.0's reserved ports are 0xff00-0xffff, 1.3's
// 0xffffff00-0xffffffff.
func port10to13(p uint16) uint32 {
	if p >= 0xff00 {
		return 0xffff0000 | uint32(p)
	}
	return uint32(p)
}

func port13to10(p uint32) uint16 {
	if p >= 0xffffff00 {
		return uint16(p)
	}
	if p >= 0xff00 {
		return 0xffff // OFPP_NONE: no such port (ofports end at 0xfeff)
	}
	return uint16(p)
}

// ofp10_match wildcard bits.
const (
	fw10InPort    = 1 << 0
	fw10DLVLAN    = 1 << 1
	fw10DLSrc     = 1 << 2
	fw10DLDst     = 1 << 3
	fw10DLType    = 1 << 4
	fw10NWProto   = 1 << 5
	fw10TPSrc     = 1 << 6
	fw10TPDst     = 1 << 7
	fw10NWSrcSh   = 8
	fw10NWDstSh   = 14
	fw10DLVLANPCP = 1 << 20
	fw10NWTOS     = 1 << 21
	fw10All       = 1<<22 - 1
)

// OXM basic field numbers used by the 1.0 mapping.
const (
	oxmInPort   = 0
	oxmEthDst   = 3
	oxmEthSrc   = 4
	oxmEthType  = 5
	oxmVLANVID  = 6
	oxmVLANPCP  = 7
	oxmIPDSCP   = 8
	oxmIPProto  = 10
	oxmIPv4Src  = 11
	oxmIPv4Dst  = 12
	oxmTCPSrc   = 13
	oxmTCPDst   = 14
	oxmUDPSrc   = 15
	oxmUDPDst   = 16
	oxmICMPType = 19
	oxmICMPCode = 20
	oxmARPOp    = 21
	oxmARPSPA   = 22
	oxmARPTPA   = 23
)

func appendOXMField(b []byte, field uint32, val []byte, mask []byte) []byte {
	h := uint32(0x8000)<<16 | field<<9 | uint32(len(val)+len(mask))
	if mask != nil {
		h |= 0x100
	}
	b = be.AppendUint32(b, h)
	b = append(b, val...)
	return append(b, mask...)
}

// match10to13 turns an ofp10_match into a padded 1.3 ofp_match.
func match10to13(m []byte) []byte {
	w := be.Uint32(m)
	var ox []byte
	u16 := func(v uint16) []byte { return be.AppendUint16(nil, v) }
	if w&fw10InPort == 0 {
		ox = appendOXMField(ox, oxmInPort, be.AppendUint32(nil, port10to13(be.Uint16(m[4:]))), nil)
	}
	if w&fw10DLSrc == 0 {
		ox = appendOXMField(ox, oxmEthSrc, m[6:12], nil)
	}
	if w&fw10DLDst == 0 {
		ox = appendOXMField(ox, oxmEthDst, m[12:18], nil)
	}
	if w&fw10DLVLAN == 0 {
		if vid := be.Uint16(m[18:]); vid == 0xffff {
			ox = appendOXMField(ox, oxmVLANVID, u16(0), nil) // no tag
		} else {
			ox = appendOXMField(ox, oxmVLANVID, u16(0x1000|vid&0xfff), nil)
		}
	}
	if w&fw10DLVLANPCP == 0 {
		ox = appendOXMField(ox, oxmVLANPCP, []byte{m[20] & 7}, nil)
	}
	ethType := be.Uint16(m[22:])
	if w&fw10DLType == 0 {
		ox = appendOXMField(ox, oxmEthType, m[22:24], nil)
	}
	ip, arp := w&fw10DLType == 0 && ethType == 0x0800, w&fw10DLType == 0 && ethType == 0x0806
	if ip && w&fw10NWTOS == 0 {
		ox = appendOXMField(ox, oxmIPDSCP, []byte{m[24] >> 2}, nil)
	}
	proto := m[25]
	if w&fw10NWProto == 0 {
		switch {
		case ip:
			ox = appendOXMField(ox, oxmIPProto, []byte{proto}, nil)
		case arp:
			ox = appendOXMField(ox, oxmARPOp, u16(uint16(proto)), nil)
		}
	}
	addr := func(field uint32, val []byte, shift uint) {
		n := (w >> shift) & 0x3f
		switch {
		case n >= 32:
		case n == 0:
			ox = appendOXMField(ox, field, val, nil)
		default:
			mask := be.AppendUint32(nil, ^uint32(0)<<n)
			v := be.Uint32(val) & be.Uint32(mask)
			ox = appendOXMField(ox, field, be.AppendUint32(nil, v), mask)
		}
	}
	switch {
	case ip:
		addr(oxmIPv4Src, m[28:32], fw10NWSrcSh)
		addr(oxmIPv4Dst, m[32:36], fw10NWDstSh)
	case arp:
		addr(oxmARPSPA, m[28:32], fw10NWSrcSh)
		addr(oxmARPTPA, m[32:36], fw10NWDstSh)
	}
	if ip && w&fw10NWProto == 0 {
		src, dst := uint32(0), uint32(0)
		switch proto {
		case 6:
			src, dst = oxmTCPSrc, oxmTCPDst
		case 17:
			src, dst = oxmUDPSrc, oxmUDPDst
		case 1:
			if w&fw10TPSrc == 0 {
				ox = appendOXMField(ox, oxmICMPType, []byte{m[37]}, nil)
			}
			if w&fw10TPDst == 0 {
				ox = appendOXMField(ox, oxmICMPCode, []byte{m[39]}, nil)
			}
		}
		if src != 0 && w&fw10TPSrc == 0 {
			ox = appendOXMField(ox, src, m[36:38], nil)
		}
		if dst != 0 && w&fw10TPDst == 0 {
			ox = appendOXMField(ox, dst, m[38:40], nil)
		}
	}
	b := be.AppendUint16(nil, 1)
	b = be.AppendUint16(b, uint16(4+len(ox)))
	b = append(b, ox...)
	return appendZeros(b, roundUp8(len(b))-len(b))
}

// match13to10 turns the OXM fields of a 1.3 ofp_match into an
// ofp10_match; fields 1.0 has no place for are left out.
func match13to10(oxms []byte) []byte {
	m := make([]byte, 40)
	w := uint32(fw10All)
	for len(oxms) >= 4 {
		h := be.Uint32(oxms)
		n := int(h & 0xff)
		if 4+n > len(oxms) {
			break
		}
		v := oxms[4 : 4+n]
		oxms = oxms[4+n:]
		if h>>16 != 0x8000 {
			continue
		}
		field, masked := (h>>9)&0x7f, h&0x100 != 0
		if masked && field != oxmIPv4Src && field != oxmIPv4Dst && field != oxmARPSPA && field != oxmARPTPA {
			continue
		}
		switch field {
		case oxmInPort:
			w &^= fw10InPort
			be.PutUint16(m[4:], port13to10(be.Uint32(v)))
		case oxmEthSrc:
			w &^= fw10DLSrc
			copy(m[6:12], v)
		case oxmEthDst:
			w &^= fw10DLDst
			copy(m[12:18], v)
		case oxmVLANVID:
			w &^= fw10DLVLAN
			if vid := be.Uint16(v); vid&0x1000 == 0 {
				be.PutUint16(m[18:], 0xffff)
			} else {
				be.PutUint16(m[18:], vid&0xfff)
			}
		case oxmVLANPCP:
			w &^= fw10DLVLANPCP
			m[20] = v[0]
		case oxmEthType:
			w &^= fw10DLType
			copy(m[22:24], v)
		case oxmIPDSCP:
			w &^= fw10NWTOS
			m[24] = v[0] << 2
		case oxmIPProto:
			w &^= fw10NWProto
			m[25] = v[0]
		case oxmARPOp:
			w &^= fw10NWProto
			m[25] = v[1]
		case oxmIPv4Src, oxmARPSPA, oxmIPv4Dst, oxmARPTPA:
			at, sh := 28, uint(fw10NWSrcSh)
			if field == oxmIPv4Dst || field == oxmARPTPA {
				at, sh = 32, fw10NWDstSh
			}
			copy(m[at:at+4], v[:4])
			wild := uint32(0)
			if masked {
				mask := be.Uint32(v[4:])
				for wild < 32 && mask&(1<<wild) == 0 {
					wild++
				}
			}
			w = w&^(0x3f<<sh) | wild<<sh
		case oxmTCPSrc, oxmUDPSrc:
			w &^= fw10TPSrc
			copy(m[36:38], v)
		case oxmTCPDst, oxmUDPDst:
			w &^= fw10TPDst
			copy(m[38:40], v)
		case oxmICMPType:
			w &^= fw10TPSrc
			m[37] = v[0]
		case oxmICMPCode:
			w &^= fw10TPDst
			m[39] = v[0]
		}
	}
	be.PutUint32(m, w)
	return m
}

// 1.0 action types.
const (
	act10Output   = 0
	act10SetVID   = 1
	act10SetPCP   = 2
	act10Strip    = 3
	act10SetDLSrc = 4
	act10SetDLDst = 5
	act10SetNWSrc = 6
	act10SetNWDst = 7
	act10SetNWTOS = 8
	act10SetTPSrc = 9
	act10SetTPDst = 10
	act10Enqueue  = 11
	act10Vendor   = 0xffff
)

func appendSetField13(b []byte, field uint32, val []byte) []byte {
	n := roundUp8(4 + 4 + len(val))
	b = be.AppendUint16(b, 25) // OFPAT_SET_FIELD
	b = be.AppendUint16(b, uint16(n))
	b = appendOXMField(b, field, val, nil)
	return appendZeros(b, n-8-len(val))
}

// actions10to13 rewrites a 1.0 action list. ipProto is the flow's IP
// protocol (0: none), which says which 1.3 field a 1.0 set_tp_* sets.
func actions10to13(a []byte, ipProto byte) ([]byte, error) {
	var out []byte
	for len(a) > 0 {
		if len(a) < 8 {
			return nil, errActionLen
		}
		t, n := be.Uint16(a), int(be.Uint16(a[2:]))
		if n < 8 || n%8 != 0 || n > len(a) {
			return nil, errActionLen
		}
		act := a[:n]
		a = a[n:]
		want := 8
		switch t {
		case act10SetDLSrc, act10SetDLDst, act10Output, act10Enqueue:
			want = 16
			if t == act10Output {
				want = 8
			}
		case act10Vendor:
			want = n
		}
		if n != want {
			return nil, errActionLen
		}
		switch t {
		case act10Output:
			out = be.AppendUint16(out, 0)
			out = be.AppendUint16(out, 16)
			out = be.AppendUint32(out, port10to13(be.Uint16(act[4:])))
			out = be.AppendUint16(out, be.Uint16(act[6:]))
			out = appendZeros(out, 6)
		case act10SetVID:
			out = appendSetField13(out, oxmVLANVID, be.AppendUint16(nil, 0x1000|be.Uint16(act[4:])&0xfff))
		case act10SetPCP:
			out = appendSetField13(out, oxmVLANPCP, []byte{act[4] & 7})
		case act10Strip:
			out = append(out, 0, 18, 0, 8, 0, 0, 0, 0) // OFPAT_POP_VLAN
		case act10SetDLSrc:
			out = appendSetField13(out, oxmEthSrc, act[4:10])
		case act10SetDLDst:
			out = appendSetField13(out, oxmEthDst, act[4:10])
		case act10SetNWSrc:
			out = appendSetField13(out, oxmIPv4Src, act[4:8])
		case act10SetNWDst:
			out = appendSetField13(out, oxmIPv4Dst, act[4:8])
		case act10SetNWTOS:
			out = appendSetField13(out, oxmIPDSCP, []byte{act[4] >> 2})
		case act10SetTPSrc, act10SetTPDst:
			field := map[byte][2]uint32{6: {oxmTCPSrc, oxmTCPDst}, 17: {oxmUDPSrc, oxmUDPDst}}[ipProto]
			if field[0] == 0 {
				return nil, errMatchInconsistent
			}
			out = appendSetField13(out, field[t-act10SetTPSrc], act[4:6])
		case act10Vendor:
			// Open vSwitch's actions are laid out alike in 1.0 and 1.3,
			// but those holding actions (ct's exec, clone) hold them in
			// the message's version.
			h, ok := nestingNX(act)
			if !ok {
				out = append(out, act...)
				break
			}
			inner, err := actions10to13(act[h:], ipProto)
			if err != nil {
				return nil, err
			}
			if out, err = appendNestingNX(out, act[:h], inner); err != nil {
				return nil, err
			}
		case act10Enqueue:
			// set_queue, output, pop_queue: as Open vSwitch sends enqueue
			// to 1.1+ peers (the queue is the output's alone).
			out = append(out, 0, 21, 0, 8) // OFPAT_SET_QUEUE
			out = append(out, act[12:16]...)
			out = be.AppendUint16(out, 0)
			out = be.AppendUint16(out, 16)
			out = be.AppendUint32(out, port10to13(be.Uint16(act[4:])))
			out = be.AppendUint16(out, 0xffff)
			out = appendZeros(out, 6)
			out = appendZeros(nxHeader(out, 16, nxastPopQueue), 6)
		default:
			return nil, errActionType
		}
	}
	return out, nil
}

// actions13to10 rewrites a 1.3 action list for a 1.0 peer; actions 1.0
// cannot express are left out.
func actions13to10(a []byte) []byte {
	return enqueue10(actions13to10Each(a))
}

// enqueue10 turns each set_queue, output, pop_queue of a 1.0 action list
// (NXAST_SET_QUEUE, OFPAT10_OUTPUT, NXAST_POP_QUEUE) back into the 1.0
// enqueue it was sent as.
func enqueue10(a []byte) []byte {
	isNX := func(b []byte, st uint16) bool {
		return len(b) >= 16 && be.Uint16(b) == act10Vendor && be.Uint16(b[2:]) == 16 &&
			be.Uint32(b[4:]) == NXVendor && be.Uint16(b[8:]) == st
	}
	var out []byte
	for i := 0; i < len(a); {
		if r := a[i:]; isNX(r, nxastSetQueue) && len(r) >= 40 && be.Uint16(r[16:]) == act10Output &&
			be.Uint16(r[18:]) == 8 && isNX(r[24:], nxastPopQueue) {
			out = be.AppendUint16(out, act10Enqueue)
			out = be.AppendUint16(out, 16)
			out = append(out, r[20:22]...) // port
			out = appendZeros(out, 6)
			out = append(out, r[12:16]...) // queue
			i += 40
			continue
		}
		n := int(be.Uint16(a[i+2:]))
		if n < 8 || i+n > len(a) {
			return append(out, a[i:]...)
		}
		out = append(out, a[i:i+n]...)
		i += n
	}
	return out
}

func actions13to10Each(a []byte) []byte {
	var out []byte
	eachAction(a, func(t uint16, act []byte) bool {
		switch t {
		case 0: // output
			if len(act) >= 16 {
				out = be.AppendUint16(out, act10Output)
				out = be.AppendUint16(out, 8)
				out = be.AppendUint16(out, port13to10(be.Uint32(act[4:])))
				out = be.AppendUint16(out, be.Uint16(act[8:]))
			}
		case 18: // pop_vlan
			out = append(out, 0, act10Strip, 0, 8, 0, 0, 0, 0)
		case 21: // set_queue: Open vSwitch's NXAST_SET_QUEUE in 1.0
			if len(act) >= 8 {
				out = nxHeader(out, 16, nxastSetQueue)
				out = appendZeros(out, 2)
				out = append(out, act[4:8]...)
			}
		case 24: // dec_nw_ttl: Open vSwitch's NXAST_DEC_TTL in 1.0
			out = nxHeader(out, 16, nxastDecTTL)
			out = appendZeros(out, 6)
		case act10Vendor: // Open vSwitch's actions: the same in 1.0
			h, ok := nestingNX(act)
			if !ok {
				out = append(out, act...)
				break
			}
			// ct's exec and clone hold actions of the message's version.
			if b, err := appendNestingNX(out, act[:h], actions13to10(act[h:])); err == nil {
				out = b
			}
		case 25: // set_field
			if len(act) < 8 {
				return true
			}
			h := be.Uint32(act[4:])
			v := act[8:]
			if int(h&0xff) > len(v) {
				return true
			}
			if h>>16 != 0x8000 || h&0x100 != 0 {
				out = regLoad2(out, act[4:8+h&0xff]) // a register or a masked write
				return true
			}
			v = v[:h&0xff]
			before := len(out)
			defer func() {
				if len(out) == before { // no 1.0 action for the field
					out = regLoad2(out, act[4:8+h&0xff])
				}
			}()
			put := func(t uint16, val []byte) {
				n := 8
				if len(val) > 4 {
					n = 16
				}
				out = be.AppendUint16(out, t)
				out = be.AppendUint16(out, uint16(n))
				out = append(out, val...)
				out = appendZeros(out, n-4-len(val))
			}
			switch (h >> 9) & 0x7f {
			case oxmEthSrc:
				put(act10SetDLSrc, v)
			case oxmEthDst:
				put(act10SetDLDst, v)
			case oxmIPv4Src:
				put(act10SetNWSrc, v)
			case oxmIPv4Dst:
				put(act10SetNWDst, v)
			case oxmIPDSCP:
				put(act10SetNWTOS, []byte{v[0] << 2})
			case oxmTCPSrc, oxmUDPSrc:
				put(act10SetTPSrc, v)
			case oxmTCPDst, oxmUDPDst:
				put(act10SetTPDst, v)
			case oxmVLANVID:
				put(act10SetVID, be.AppendUint16(nil, be.Uint16(v)&0xfff))
			case oxmVLANPCP:
				put(act10SetPCP, v)
			}
		}
		return true
	})
	return out
}

// nestingNX returns the header length of an Open vSwitch action that
// holds a list of actions after it (ct, clone), and whether act is one.
func nestingNX(act []byte) (int, bool) {
	if len(act) < 16 || be.Uint32(act[4:]) != NXVendor {
		return 0, false
	}
	switch be.Uint16(act[8:]) {
	case nxastCT:
		if len(act) >= 24 {
			return 24, true
		}
	case nxastClone:
		return 16, true
	}
	return 0, false
}

// appendNestingNX appends the action whose header is hdr holding the
// action list inner, its length set.
func appendNestingNX(b, hdr, inner []byte) ([]byte, error) {
	start := len(b)
	b = padAction(append(append(b, hdr...), inner...), start)
	if len(b)-start > 0xfff8 {
		return b[:start], errActionLen
	}
	return b, nil
}

// regLoad2 appends Open vSwitch's NXAST_REG_LOAD2 writing the OXM
// (header and payload) oxm: a set-field as a 1.0 peer can receive it.
func regLoad2(b, oxm []byte) []byte {
	start := len(b)
	b = nxHeader(b, 0, nxastRegLoad2)
	b = append(b, oxm...)
	return padAction(b, start)
}

// applyActions13 returns the actions of the apply-actions instruction in a
// 1.3 instruction list.
func applyActions13(ins []byte) []byte {
	for len(ins) >= 8 {
		n := int(be.Uint16(ins[2:]))
		if n < 8 || n > len(ins) {
			return nil
		}
		if be.Uint16(ins) == instrApplyActions {
			return ins[8:n]
		}
		ins = ins[n:]
	}
	return nil
}

// DecodeFlowModTableID10 decodes the body of an OpenFlow 1.0 flow-mod
// from a peer that turned NXT_FLOW_MOD_TABLE_ID on: the command's high
// byte is then the table, as in an NXT_FLOW_MOD (ovs-ofctl's add-flow
// table=N and del-flows table=N without -O). An add to table 0xff (no
// table= in a batch where others have one) goes to table 0, as in Open
// vSwitch.
func DecodeFlowModTableID10(h Header, body []byte) (Message, error) {
	if len(body) < 64 {
		return nil, errBadLen
	}
	b := slices.Clone(body)
	table := b[48]
	b[48] = 0
	m, err := Decode(h, b)
	if fm, ok := m.(*FlowMod); ok && err == nil {
		fm.TableID = table
		if fm.Command == FlowAdd && table == byte(TableAll) {
			fm.TableID = 0
		}
	}
	return m, err
}

// upgrade10 rewrites a 1.0 body of (canonical) type t into the 1.3 layout.
func upgrade10(t openflow.Type, b []byte) ([]byte, error) {
	switch t {
	case openflow.TypeFlowMod:
		if len(b) < 64 {
			return nil, errBadLen
		}
		cmd := be.Uint16(b[48:])
		if cmd > 0xff {
			// A table in the high byte needs NXT_FLOW_MOD_TABLE_ID
			// first (DecodeFlowModTableID10), as in Open vSwitch.
			return nil, &OFPError{Type: ETFlowModFailed, Code: FMFCBadCommand}
		}
		flags := be.Uint16(b[62:])
		if flags&4 != 0 { // OFPFF_EMERG
			return nil, &OFPError{Type: ETFlowModFailed, Code: FMFCBadFlags, Reason: "emergency flows are not supported"}
		}
		table := byte(0)
		if cmd == 3 || cmd == 4 { // delete: every table, as a 1.0 peer sees one
			table = 0xff
		}
		proto := byte(0)
		if w := be.Uint32(b); w&fw10DLType == 0 && be.Uint16(b[22:]) == 0x0800 && w&fw10NWProto == 0 {
			proto = b[25]
		}
		acts, err := actions10to13(b[64:], proto)
		if err != nil {
			return nil, err
		}
		nb := append([]byte(nil), b[40:48]...) // cookie
		nb = appendZeros(nb, 8)                // cookie mask
		nb = append(nb, table, byte(cmd))
		nb = append(nb, b[50:56]...) // idle, hard, priority
		nb = append(nb, b[56:60]...) // buffer_id
		nb = be.AppendUint32(nb, port10to13(be.Uint16(b[60:])))
		nb = be.AppendUint32(nb, 0xffffffff) // out_group: any
		nb = be.AppendUint16(nb, flags)
		nb = appendZeros(nb, 2)
		nb = append(nb, match10to13(b[:40])...)
		return appendInstructions10(nb, acts, cmd < 3)
	case openflow.TypePacketOut:
		if len(b) < 8 {
			return nil, errBadLen
		}
		alen := int(be.Uint16(b[6:]))
		if 8+alen > len(b) {
			return nil, errBadLen
		}
		acts, err := actions10to13(b[8:8+alen], 0)
		if err != nil {
			return nil, err
		}
		inPort := port10to13(be.Uint16(b[4:]))
		if inPort == portNoAny {
			inPort = portNoController // 1.0's OFPP_NONE: no input port
		}
		nb := append([]byte(nil), b[0:4]...)
		nb = be.AppendUint32(nb, inPort)
		nb = be.AppendUint16(nb, uint16(len(acts)))
		nb = appendZeros(nb, 6)
		nb = append(nb, acts...)
		return append(nb, b[8+alen:]...), nil
	case openflow.TypePortMod:
		if len(b) != 24 {
			return nil, errBadLen
		}
		nb := be.AppendUint32(nil, port10to13(be.Uint16(b)))
		nb = appendZeros(nb, 4)
		nb = append(nb, b[2:8]...)
		nb = appendZeros(nb, 2)
		nb = append(nb, b[8:20]...) // config, mask, advertise
		return appendZeros(nb, 4), nil
	case openflow.TypeQueueGetConfigRequest:
		if len(b) != 4 {
			return nil, errBadLen
		}
		return appendZeros(be.AppendUint32(nil, port10to13(be.Uint16(b))), 4), nil
	case openflow.TypeMultipartRequest:
		return upStats10(b)
	}
	return b, nil
}

// upStats10: 1.0 stats requests have a 4-byte header (type, flags).
func upStats10(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, errBadLen
	}
	mp := be.Uint16(b)
	if mp == stats10Vendor {
		return upNXStats10(b)
	}
	nb := append(append([]byte(nil), b[:4]...), 0, 0, 0, 0)
	body := b[4:]
	switch mp {
	case 0, 3, 13: // desc, table, port desc: no body
		return append(nb, body...), nil
	case 1, 2: // flow, aggregate
		if len(body) != 44 {
			return nil, errBadLen
		}
		nb = append(nb, body[40], 0, 0, 0)
		nb = be.AppendUint32(nb, port10to13(be.Uint16(body[42:])))
		nb = be.AppendUint32(nb, 0xffffffff) // out_group: any
		nb = appendZeros(nb, 4+16)           // pad, cookie, cookie mask
		return append(nb, match10to13(body[:40])...), nil
	case 4: // port
		if len(body) != 8 {
			return nil, errBadLen
		}
		nb = be.AppendUint32(nb, port10to13(be.Uint16(body)))
		return appendZeros(nb, 4), nil
	case 5: // queue
		if len(body) != 8 {
			return nil, errBadLen
		}
		port := port10to13(be.Uint16(body))
		if port == 0xfffffffc {
			port = portNoAny // 1.0 asks for every port's queues with OFPP_ALL
		}
		nb = be.AppendUint32(nb, port)
		return append(nb, body[4:8]...), nil
	}
	return nil, errBadMultipart
}

// FeaturesReply10 is a FEATURES_REPLY for a 1.0 peer, which lists the
// ports in it (1.3 moved them to the port description).
type FeaturesReply10 struct {
	FeaturesReply
	Ports []Port
}

// MsgType implements Message.
func (*FeaturesReply10) MsgType() openflow.Type { return openflow.TypeFeaturesReply }

func (m *FeaturesReply10) appendBody(b []byte) ([]byte, error) {
	b, err := m.FeaturesReply.appendBody(b)
	if err != nil {
		return nil, err
	}
	r := &PortDescReply{Ports: m.Ports}
	b, _, err = r.appendItems(b, nil)
	return b, err
}

func (m *FeaturesReply10) decodeBody(b []byte) error {
	return errBadType // sent, never received
}

// encode10 is EncodeIn for OpenFlow 1.0.
func encode10(xid uint32, m Message) ([]byte, error) {
	if r, ok := m.(*MultipartReply); ok {
		return r.encodeSplitIn(Version10, xid, MaxMessageLen)
	}
	b, err := encodeOne(nil, xid, m)
	if err != nil {
		return nil, err
	}
	t := type13to10(m.MsgType())
	if t == 0xff {
		return nil, errBadType
	}
	if m.MsgType() == openflow.TypeFlowMod {
		body, err := flowMod13to10(b[HeaderLen:])
		if err != nil {
			return nil, err
		}
		return frame(Version10, openflow.Type(t), xid, body)
	}
	body := downgrade10(m.MsgType(), b[HeaderLen:])
	return frame(Version10, openflow.Type(t), xid, body)
}

// phyPort10 turns a 1.3 ofp_port into a 1.0 ofp_phy_port.
func phyPort10(p []byte) []byte {
	feat := func(f uint32) uint32 { return f&0x7f | (f>>11&0x1f)<<7 }
	b := be.AppendUint16(nil, port13to10(be.Uint32(p)))
	b = append(b, p[8:14]...)  // hw_addr
	b = append(b, p[16:32]...) // name
	b = append(b, p[32:36]...) // config
	b = be.AppendUint32(b, be.Uint32(p[36:])&1)
	for at := 40; at < 56; at += 4 {
		b = be.AppendUint32(b, feat(be.Uint32(p[at:])))
	}
	return b
}

func downgrade10(t openflow.Type, b []byte) []byte {
	switch t {
	case openflow.TypeFeaturesReply:
		if len(b) < 24 {
			return b
		}
		nb := append([]byte(nil), b[:13]...) // dpid, n_buffers, n_tables
		nb = appendZeros(nb, 3)
		caps := be.Uint32(b[16:])&^(8|256) | 128 // no groups or port blocking; ARP_MATCH_IP
		nb = be.AppendUint32(nb, caps)
		nb = be.AppendUint32(nb, 1<<12-1) // actions: output .. enqueue
		for p := b[24:]; len(p) >= 64; p = p[64:] {
			nb = append(nb, phyPort10(p[:64])...)
		}
		return nb
	case openflow.TypePortStatus:
		if len(b) == 72 {
			return append(append([]byte(nil), b[:8]...), phyPort10(b[8:])...)
		}
	case openflow.TypePacketIn:
		if len(b) < 16 {
			return b
		}
		mlen := int(be.Uint16(b[18:]))
		at := 16 + roundUp8(mlen) + 2
		if mlen < 4 || at > len(b) {
			return b
		}
		inPort := uint16(0xffff) // OFPP_NONE, should the match lack in_port
		if m := match13to10(b[20 : 16+mlen]); be.Uint32(m)&fw10InPort == 0 {
			inPort = be.Uint16(m[4:])
		}
		reason := b[6]
		if reason > 1 {
			reason = 1 // invalid TTL: 1.0 knows only no-match and action
		}
		nb := append([]byte(nil), b[0:6]...) // buffer_id, total_len
		nb = be.AppendUint16(nb, inPort)
		nb = append(nb, reason, 0)
		return append(nb, b[at:]...)
	case openflow.TypeFlowRemoved:
		if len(b) < 48 {
			return b
		}
		mlen := int(be.Uint16(b[42:]))
		if mlen < 4 || 40+mlen > len(b) {
			return b
		}
		nb := match13to10(b[44 : 40+mlen])
		nb = append(nb, b[0:10]...) // cookie, priority
		reason := b[10]
		if reason > 2 {
			reason = 2 // group delete and the like: deleted
		}
		nb = append(nb, reason, 0)
		nb = append(nb, b[12:22]...) // duration, idle
		nb = appendZeros(nb, 2)
		return append(nb, b[24:40]...) // packets, bytes
	case openflow.TypeError:
		if len(b) >= 4 {
			nb := append([]byte(nil), b...)
			typ, code := errorTo10(be.Uint16(b), be.Uint16(b[2:]))
			be.PutUint16(nb, typ)
			be.PutUint16(nb[2:], code)
			return nb
		}
	case openflow.TypeQueueGetConfigReply:
		if len(b) >= 8 {
			nb := be.AppendUint16(nil, port13to10(be.Uint32(b)))
			nb = appendZeros(nb, 6)
			return append(nb, b[8:]...)
		}
	}
	return b
}

// errorTo10 maps a 1.3 error to the nearest 1.0 one.
func errorTo10(typ, code uint16) (uint16, uint16) {
	const (
		brEperm          = 5
		flowModUnsupport = 5
	)
	switch typ {
	case ETHelloFailed, nxetVendor:
		return typ, code
	case ETBadRequest:
		if code <= 8 {
			return typ, code
		}
		return ETBadRequest, brEperm
	case ETBadAction:
		if code <= 8 {
			return typ, code
		}
		return ETBadAction, 5 // bad argument
	case ETBadInstruction, ETBadMatch:
		return 3, flowModUnsupport
	case ETFlowModFailed:
		switch code {
		case FMFCTableFull:
			return 3, 0
		case FMFCOverlap:
			return 3, 1
		case FMFCEperm:
			return 3, 2
		case FMFCBadTimeout:
			return 3, 3
		case FMFCBadCommand:
			return 3, 4
		}
		return 3, flowModUnsupport
	case ETPortModFailed:
		if code <= 1 {
			return 4, code
		}
		return 4, 0
	case ETQueueOpFailed:
		return 5, code
	}
	return ETBadRequest, brEperm
}

// downItem10 rewrites one 1.3 multipart reply item for a 1.0 peer; nil
// leaves it out.
func downItem10(mp uint16, it []byte) []byte {
	switch mp {
	case mpFlow:
		if len(it) < 56 {
			return nil
		}
		at := 48 + roundUp8(int(be.Uint16(it[50:])))
		if at > len(it) {
			return nil
		}
		acts := actions13to10(applyActions13(it[at:]))
		b := appendZeros(nil, 2)
		b = append(b, it[2], 0)
		b = append(b, match13to10(it[52:48+int(be.Uint16(it[50:]))])...)
		b = append(b, it[4:12]...)  // duration
		b = append(b, it[12:18]...) // priority, idle, hard
		b = appendZeros(b, 6)
		b = append(b, it[24:48]...) // cookie, packets, bytes
		b = append(b, acts...)
		putLen16(b, 0, len(b))
		return b
	case 3: // table
		if len(it) != 24 {
			return nil
		}
		b := append([]byte(nil), it[0], 0, 0, 0)
		name := make([]byte, 32)
		copy(name, "classifier")
		b = append(b, name...)
		b = be.AppendUint32(b, fw10All)
		b = be.AppendUint32(b, 1000000)
		return append(b, it[4:24]...)
	case mpPortStats:
		if len(it) != 112 {
			return nil
		}
		b := be.AppendUint16(nil, port13to10(be.Uint32(it)))
		b = appendZeros(b, 6)
		return append(b, it[8:104]...)
	case mpQueue:
		if len(it) != 40 {
			return nil
		}
		b := be.AppendUint16(nil, port13to10(be.Uint32(it)))
		b = appendZeros(b, 2)
		return append(b, it[4:32]...)
	case mpPortDesc:
		if len(it) != 64 {
			return nil
		}
		return phyPort10(it)
	case 0, mpAggregate: // the same in 1.0
		return it
	}
	return nil // a reply 1.0 has no such request for
}

// flowMod13to10 rewrites a 1.3 flow-mod body into a 1.0 ofp_flow_mod: an
// ofp10_match, then 1.0 actions (Open vSwitch's where 1.0 has none, as
// for flow stats). Unlike a reply, a flow-mod that lost a match field or
// an action would match or do something else, so what 1.0 cannot say is
// refused: a table other than 0 (every table, for a delete), a cookie
// mask, an output group, flags 1.0 has not, match fields outside
// ofp10_match or masked other than IPv4 and ARP addresses by prefix,
// instructions other than apply-actions, and actions 1.0 has no form for.
func flowMod13to10(b []byte) ([]byte, error) {
	refuse := func(what string) ([]byte, error) {
		return nil, fmt.Errorf("ofpwire: an OpenFlow 1.0 flow-mod cannot carry %s", what)
	}
	if len(b) < 48 {
		return nil, errBadLen
	}
	table, cmd := b[16], b[17]
	if cmd > 4 {
		return refuse(fmt.Sprintf("command %d", cmd))
	}
	if table != 0 && !(table == 0xff && (cmd == 3 || cmd == 4)) {
		return refuse(fmt.Sprintf("table %d", table))
	}
	if be.Uint64(b[8:]) != 0 {
		return refuse("a cookie mask")
	}
	if g := be.Uint32(b[32:]); g != 0xffffffff {
		return refuse("an output group")
	}
	flags := be.Uint16(b[36:])
	if flags&^3 != 0 { // SEND_FLOW_REM and CHECK_OVERLAP only
		return refuse(fmt.Sprintf("flags %#x", flags))
	}
	outPort := be.Uint32(b[28:])
	if outPort >= 0xff00 && outPort < 0xffffff00 {
		return refuse(fmt.Sprintf("out_port %d", outPort))
	}
	mlen := int(be.Uint16(b[42:]))
	at := 40 + roundUp8(mlen)
	if mlen < 4 || at > len(b) {
		return nil, errBadLen
	}
	oxms := b[44 : 40+mlen]
	for o := oxms; len(o) > 0; {
		if len(o) < 4 || 4+int(o[3]) > len(o) {
			return nil, errBadLen
		}
		h := be.Uint32(o)
		v := o[4 : 4+h&0xff]
		o = o[4+h&0xff:]
		field, masked := (h>>9)&0x7f, h&0x100 != 0
		ok := h>>16 == 0x8000
		switch field {
		case oxmInPort:
			p := be.Uint32(v)
			ok = ok && !masked && (p < 0xff00 || p >= 0xffffff00)
		case oxmEthSrc, oxmEthDst, oxmEthType, oxmVLANPCP, oxmIPDSCP, oxmIPProto, oxmARPOp,
			oxmTCPSrc, oxmTCPDst, oxmUDPSrc, oxmUDPDst, oxmICMPType, oxmICMPCode:
			ok = ok && !masked
		case oxmVLANVID:
			ok = ok && !masked
		case oxmIPv4Src, oxmIPv4Dst, oxmARPSPA, oxmARPTPA:
			if masked {
				inv := ^be.Uint32(v[4:])
				ok = ok && inv&(inv+1) == 0 // a prefix mask
			}
		default:
			ok = false
		}
		if !ok {
			return refuse(fmt.Sprintf("match field %#08x", h))
		}
	}
	var acts []byte
	for ins := b[at:]; len(ins) > 0; {
		if len(ins) < 8 {
			return nil, errBadLen
		}
		n := int(be.Uint16(ins[2:]))
		if n < 8 || n > len(ins) {
			return nil, errBadLen
		}
		if t := be.Uint16(ins); t != instrApplyActions {
			return refuse(fmt.Sprintf("instruction type %d", t))
		}
		acts = ins[8:n]
		ins = ins[n:]
	}
	var bad error
	eachAction(acts, func(t uint16, a []byte) bool {
		switch {
		case t == 0 && len(a) >= 16:
			if p := be.Uint32(a[4:]); p >= 0xff00 && p < 0xffffff00 {
				_, bad = refuse(fmt.Sprintf("output to port %d", p))
			}
		case t == 18 || t == 25:
		case t == act10Vendor && len(a) >= 8 && be.Uint32(a[4:]) == NXVendor:
		default:
			_, bad = refuse(fmt.Sprintf("action type %d", t))
		}
		return bad == nil
	})
	if bad != nil {
		return nil, bad
	}
	nb := match13to10(oxms)
	nb = append(nb, b[0:8]...) // cookie
	nb = be.AppendUint16(nb, uint16(cmd))
	nb = append(nb, b[18:24]...) // idle, hard, priority
	nb = append(nb, b[24:28]...) // buffer_id
	nb = be.AppendUint16(nb, port13to10(outPort))
	nb = be.AppendUint16(nb, flags)
	return append(nb, actions13to10(acts)...), nil
}

// appendInstructions10 appends the 1.3 instructions of a 1.0 flow-mod's
// actions (acts, already rewritten as 1.3 actions): apply-actions (when
// there are actions, or always), and write-metadata for Open vSwitch's
// NXAST_WRITE_METADATA, which is how a 1.0 peer writes the metadata.
func appendInstructions10(nb, acts []byte, always bool) ([]byte, error) {
	var rest, wm []byte
	var err error
	eachAction(acts, func(t uint16, a []byte) bool {
		if t != act10Vendor || len(a) < 10 || be.Uint32(a[4:]) != NXVendor || be.Uint16(a[8:]) != nxastWriteMetadata {
			rest = append(rest, a...)
			return true
		}
		switch {
		case len(a) != 32:
			err = errActionLen
		case wm != nil:
			err = errActionArg
		default:
			for _, p := range a[10:16] {
				if p != 0 {
					err = errActionArg
				}
			}
			wm = a[16:32]
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 || always {
		nb = be.AppendUint16(nb, instrApplyActions)
		nb = be.AppendUint16(nb, uint16(8+len(rest)))
		nb = appendZeros(nb, 4)
		nb = append(nb, rest...)
	}
	if wm != nil {
		nb = be.AppendUint16(nb, instrWriteMetadata)
		nb = be.AppendUint16(nb, 24)
		nb = appendZeros(nb, 4)
		nb = append(nb, wm...)
	}
	return nb, nil
}

// appendWriteMetadata10 appends NXAST_WRITE_METADATA: a write-metadata
// instruction as a 1.0 peer receives it.
func appendWriteMetadata10(b []byte, in *InstrWriteMetadata) []byte {
	b = nxHeader(b, 32, nxastWriteMetadata)
	b = appendZeros(b, 6)
	b = be.AppendUint64(b, in.Metadata)
	return be.AppendUint64(b, in.Mask)
}

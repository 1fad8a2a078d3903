package xlate

import (
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

var ones6 = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// settable reports whether set-field may write f. OpenFlow 1.3 §7.2.5
// excludes IN_PORT, IN_PHY_PORT and METADATA as not header fields; metadata
// is written anyway, as Open vSwitch allows. IPV6_EXTHDR is a pseudo-field
// summarising which extension headers are present: writing it would mean
// inserting or removing headers, which no action describes, so it stays
// refused. ETH_TYPE, IP_PROTO and MPLS_BOS are written (unlike Open
// vSwitch, which refuses them): the packet then parses as the new value
// says.
//
// Open vSwitch's 16-bit NXM_OF_IN_PORT is written (it steers the rest of
// the walk, see setInPort) and NXM_NX_IP_TTL (as set_nw_ttl);
// NXM_NX_IP_FRAG is not (fragmentation is not a field to write), nor are
// conj_id, and ct_mark and ct_label outside ct's exec.
func settable(f ofpwire.XMType) bool {
	switch f {
	case ofpwire.XMTypeInPort, ofpwire.XMTypeInPhyPort, ofpwire.XMTypeIPv6ExtHeader, ofpwire.XMTypeTunFlags,
		ofpwire.XMTypeIPFrag, ofpwire.XMTypeCTMark, ofpwire.XMTypeCTLabel, ofpwire.XMTypeConjID,
		ofpwire.XMTypeCTState, ofpwire.XMTypeCTZone, ofpwire.XMTypeCTNwProto, ofpwire.XMTypeCTNwSrc,
		ofpwire.XMTypeCTNwDst, ofpwire.XMTypeCTIPv6Src, ofpwire.XMTypeCTIPv6Dst, ofpwire.XMTypeCTTpSrc,
		ofpwire.XMTypeCTTpDst, ofpwire.XMTypeTCPFlags, ofpwire.XMTypeDPHash, ofpwire.XMTypeRecircID:
		// Read-only (the conntrack fields, tcp_flags, dp_hash and
		// recirc_id, as in Open vSwitch; ct_mark and ct_label are
		// written by ct's exec only).
		return false
	}
	return int(f) < ofpwire.NumFields
}

// Settable reports whether set-field may write OpenFlow basic field f: what
// table features list as settable.
func Settable(f ofpwire.XMType) bool { return settable(f) }

// setFieldArgOK reports whether a set-field value is one the field can
// hold in a packet that still parses: an Ethernet type below 0x0600 would
// be an 802.3 length and a VLAN TPID a tag the key has no slot for, and
// MPLS_BOS is one bit.
func setFieldArgOK(f ofpwire.OXM) bool {
	switch f.Field {
	case ofpwire.XMTypeEthType:
		t := f.Uint()
		return t >= 0x0600 && !isVLANType(uint16(t))
	case ofpwire.XMTypeMPLSBOS:
		return f.Uint() <= 1
	}
	return true
}

// maskedSettable reports whether a masked set-field on f translates: any
// field set-field may write (the datapath sets a whole field, from the
// bits the mask keeps and the new ones; see nicira.go).
func maskedSettable(f ofpwire.XMType) bool { return settable(f) }

// setFieldSupported returns the field's value as an integer (for the
// fields up to 8 bytes) after checking the field is one Translate can set.
func setFieldSupported(a *ofpwire.ActionSetField) (uint64, error) {
	if err := checkSetField(a); err != nil {
		return 0, err
	}
	if len(a.Field.Value) <= 8 {
		return a.Field.Uint(), nil
	}
	return 0, nil
}

// checkSetField is setFieldSupported without the value, for the writes
// that take it as bytes (registers, masked writes).
func checkSetField(a *ofpwire.ActionSetField) error {
	f := a.Field
	if f.Class != ofpwire.ClassOf(f.Field) {
		return fmt.Errorf("%w: set-field of class %#x", ErrUnsupported, f.Class)
	}
	if !settable(f.Field) {
		return fmt.Errorf("%w: set-field on field %d", ErrUnsupported, f.Field)
	}
	size, _, ok := ofpwire.FieldSize(f.Field)
	if !ok || len(f.Value) != size {
		return fmt.Errorf("%w: set-field %d with %d bytes", ErrUnsupported, f.Field, len(f.Value))
	}
	if f.HasMask && (!maskedSettable(f.Field) || len(f.Mask) != size) {
		return fmt.Errorf("%w: masked set-field on field %d", ErrUnsupported, f.Field)
	}
	return nil
}

// l4Prereq reports whether the packet is an IPv4/IPv6 first fragment (or
// unfragmented) of protocol proto, consulting the fields that tells.
func (x *xlator) l4Prereq(proto uint8) bool {
	if !x.isIP() {
		return false
	}
	x.consult(&flow.Mask{NwProto: 0xff, NwFrag: flow.FragLater})
	return x.key.NwProto == proto && x.key.NwFrag&flow.FragLater == 0
}

func l4Proto(f ofpwire.XMType) uint8 {
	switch f {
	case ofpwire.XMTypeTCPSrc, ofpwire.XMTypeTCPDst:
		return header.IPProtoTCP
	case ofpwire.XMTypeUDPSrc, ofpwire.XMTypeUDPDst:
		return header.IPProtoUDP
	}
	return header.IPProtoSCTP
}

// ethTypeIs reports whether the packet's Ethernet type is t, consulting it.
func (x *xlator) ethTypeIs(t uint16) bool {
	x.consult(&flow.Mask{EthType: 0xffff})
	return x.key.EthType == t
}

// icmpPrereq reports whether the packet is an ICMPv4 (v6 false) or ICMPv6
// message whose type and code the key holds.
func (x *xlator) icmpPrereq(v6 bool) bool {
	if v6 {
		return x.l4Prereq(header.IPProtoICMPv6) && x.key.EthType == header.EtherTypeIPv6
	}
	return x.l4Prereq(header.IPProtoICMP) && x.key.EthType == header.EtherTypeIPv4
}

// ndPrereq reports whether the packet is a neighbour solicitation (typ
// header.ICMPv6NeighborSolicit), advertisement (header.ICMPv6NeighborAdvert), or either (typ 0) that extraction
// parses: ICMPv6 code 0 too.
func (x *xlator) ndPrereq(typ uint16) bool {
	if !x.icmpPrereq(true) {
		return false
	}
	x.consult(&flow.Mask{TpSrc: 0xffff, TpDst: 0xffff})
	t := x.key.TpSrc
	if x.key.TpDst != 0 || (t != header.ICMPv6NeighborSolicit && t != header.ICMPv6NeighborAdvert) {
		return false
	}
	return typ == 0 || t == typ
}

func isND(typ, code uint16) bool {
	return (typ == header.ICMPv6NeighborSolicit || typ == header.ICMPv6NeighborAdvert) && code == 0
}

// known clears the unknown bits of the field set marks: a set-field wrote
// it, so its value is the translation's.
func (x *xlator) known(set func(m *flow.Mask)) {
	var m flow.Mask
	set(&m)
	u, w := x.unknown.Words(), m.Words()
	for i := range u {
		u[i] &^= w[i]
	}
}

// setField rewrites one field if the packet has it (a set-field whose
// prerequisites the packet does not meet does nothing, as in OVS), and
// emits the datapath action that does the same.
func (x *xlator) setField(a *ofpwire.ActionSetField) error {
	v, err := setFieldSupported(a)
	if err != nil {
		return err
	}
	f := a.Field
	k, w, u := &x.key, &x.written, &x.unknown
	act := actions.Action{}
	if n, ok := ofpwire.IsTunMetadata(f.Field); ok {
		// The packet carries this field from now on (the key has room
		// for one: another one it carried is replaced).
		k.Tun.SetOpt(n, [4]byte(f.Value))
		w.Tun.Flags |= flow.TunFlagOptIndex
		u.Tun.Flags &^= flow.TunFlagOptIndex
		w.Tun.Opt, u.Tun.Opt = [4]byte{0xff, 0xff, 0xff, 0xff}, [4]byte{}
		return x.emit(actions.Action{Kind: actions.SetTunnelOpt, Val8: uint8(n + 1), Val32: uint32(v)})
	}
	switch f.Field {
	case ofpwire.XMTypeMetadata:
		m := ^uint64(0)
		if f.HasMask {
			m = f.MaskUint()
		}
		x.pipe.Metadata = x.pipe.Metadata&^m | v&m
		return nil
	case ofpwire.XMTypeIPTTL:
		if !x.isIP() {
			return nil
		}
		k.NwTTL, w.NwTTL, u.NwTTL = uint8(v), 0xff, 0
		act = actions.Action{Kind: actions.SetIPTTL, Val8: uint8(v)}
	case ofpwire.XMTypeEthDst:
		k.EthDst, w.EthDst, u.EthDst = [6]byte(f.Value), ones6, [6]byte{}
		act.Kind = actions.SetEthDst
		copy(act.Addr[:], f.Value)
	case ofpwire.XMTypeEthSrc:
		k.EthSrc, w.EthSrc, u.EthSrc = [6]byte(f.Value), ones6, [6]byte{}
		act.Kind = actions.SetEthSrc
		copy(act.Addr[:], f.Value)
	case ofpwire.XMTypeVlanID, ofpwire.XMTypeVlanPCP:
		// Sets the outer tag's VID or PCP; no-op without a tag.
		x.consult(&flow.Mask{VLAN: [2]flow.VLANTag{{TPID: flow.TPIDPresent}}})
		if k.VLAN[0].TPID&flow.TPIDPresent == 0 {
			return nil
		}
		msk := uint16(0x0fff)
		if f.HasMask {
			msk &= uint16(f.MaskUint())
		}
		val := uint16(v) & msk
		if f.Field == ofpwire.XMTypeVlanPCP {
			val, msk = uint16(v&7)<<13, 0xe000
		}
		if msk == 0 {
			return nil // a mask with no VID bit writes nothing
		}
		k.VLAN[0].TCI = k.VLAN[0].TCI&^msk | val
		w.VLAN[0].TCI |= msk
		u.VLAN[0].TCI &^= msk
		act = actions.Action{Kind: actions.SetVLANTCI, Val16: msk, Val16b: val}
	case ofpwire.XMTypeIPDSCP, ofpwire.XMTypeIPECN, ofpwire.XMTypeNwTOS:
		if !x.isIP() {
			return nil
		}
		val, msk := uint8(v&0x3f)<<2, uint8(0xfc)
		switch f.Field {
		case ofpwire.XMTypeIPECN:
			val, msk = uint8(v&3), 0x03
		case ofpwire.XMTypeNwTOS:
			// nw_tos (NXM_OF_IP_TOS) is the DSCP bits in place: what a
			// move or load puts in its ECN bits is not written, as
			// Open vSwitch writes the field.
			val = uint8(v) & 0xfc
		}
		k.NwTOS = k.NwTOS&^msk | val
		w.NwTOS |= msk
		u.NwTOS &^= msk
		act = actions.Action{Kind: actions.SetIPTOS, Val8: val, Mask8: msk}
	case ofpwire.XMTypeIPv4Src, ofpwire.XMTypeIPv4Dst, ofpwire.XMTypeARPSPA, ofpwire.XMTypeARPTPA:
		// ARP's protocol addresses live in the key's IPv4 address fields.
		arp := f.Field == ofpwire.XMTypeARPSPA || f.Field == ofpwire.XMTypeARPTPA
		if arp && !x.ethTypeIs(header.EtherTypeARP) || !arp && !x.ethTypeIs(header.EtherTypeIPv4) {
			return nil
		}
		src := f.Field == ofpwire.XMTypeIPv4Src || f.Field == ofpwire.XMTypeARPSPA
		if src {
			k.IPv4Src, w.IPv4Src, u.IPv4Src = uint32(v), ^uint32(0), 0
		} else {
			k.IPv4Dst, w.IPv4Dst, u.IPv4Dst = uint32(v), ^uint32(0), 0
		}
		act.Kind = ipv4SetKind(arp, src)
		copy(act.Addr[:], f.Value)
	case ofpwire.XMTypeIPv6Src, ofpwire.XMTypeIPv6Dst:
		if !x.ethTypeIs(header.EtherTypeIPv6) {
			return nil
		}
		act.Kind = actions.SetIPv6Src
		if f.Field == ofpwire.XMTypeIPv6Src {
			k.IPv6Src, w.IPv6Src, u.IPv6Src = [16]byte(f.Value), ones16, [16]byte{}
		} else {
			k.IPv6Dst, w.IPv6Dst, u.IPv6Dst = [16]byte(f.Value), ones16, [16]byte{}
			act.Kind = actions.SetIPv6Dst
		}
		copy(act.Addr[:], f.Value)
	case ofpwire.XMTypeIPv6FLabel:
		if !x.ethTypeIs(header.EtherTypeIPv6) {
			return nil
		}
		k.IPv6Label, w.IPv6Label, u.IPv6Label = uint32(v)&0xfffff, ^uint32(0), 0
		act = actions.Action{Kind: actions.SetIPv6Label, Val32: uint32(v) & 0xfffff}
	case ofpwire.XMTypeARPOpcode:
		if !x.ethTypeIs(header.EtherTypeARP) {
			return nil
		}
		// The key holds the opcode only when it fits a byte, as extraction.
		k.NwProto, w.NwProto, u.NwProto = 0, 0xff, 0
		if v <= 0xff {
			k.NwProto = uint8(v)
		}
		act = actions.Action{Kind: actions.SetARPOp, Val16: uint16(v)}
	case ofpwire.XMTypeARPSHA, ofpwire.XMTypeARPTHA:
		if !x.ethTypeIs(header.EtherTypeARP) {
			return nil
		}
		act.Kind = actions.SetARPSHA
		if f.Field == ofpwire.XMTypeARPSHA {
			k.ArpSHA, w.ArpSHA, u.ArpSHA = [6]byte(f.Value), ones6, [6]byte{}
		} else {
			k.ArpTHA, w.ArpTHA, u.ArpTHA = [6]byte(f.Value), ones6, [6]byte{}
			act.Kind = actions.SetARPTHA
		}
		copy(act.Addr[:], f.Value)
	case ofpwire.XMTypeICMPv4Type, ofpwire.XMTypeICMPv4Code:
		if !x.icmpPrereq(false) {
			return nil
		}
		act = x.setTypeCode(f.Field == ofpwire.XMTypeICMPv4Type, uint8(v))
	case ofpwire.XMTypeICMPv6Type, ofpwire.XMTypeICMPv6Code:
		if !x.icmpPrereq(true) {
			return nil
		}
		x.icmpv6ND(f.Field == ofpwire.XMTypeICMPv6Type, uint16(uint8(v)))
		act = x.setTypeCode(f.Field == ofpwire.XMTypeICMPv6Type, uint8(v))
	case ofpwire.XMTypeIPv6NDTarget:
		if !x.ndPrereq(0) {
			return nil
		}
		k.NDTarget, w.NDTarget, u.NDTarget = [16]byte(f.Value), ones16, [16]byte{}
		act.Kind = actions.SetNDTarget
		copy(act.Addr[:], f.Value)
	case ofpwire.XMTypeIPv6NDSLL, ofpwire.XMTypeIPv6NDTLL:
		sll := f.Field == ofpwire.XMTypeIPv6NDSLL
		typ, field, kind := uint16(header.ICMPv6NeighborSolicit), &k.ArpSHA, actions.SetNDSLL
		wf, uf := &w.ArpSHA, &u.ArpSHA
		if !sll {
			typ, field, kind = header.ICMPv6NeighborAdvert, &k.ArpTHA, actions.SetNDTLL
			wf, uf = &w.ArpTHA, &u.ArpTHA
		}
		if !x.ndPrereq(typ) {
			return nil
		}
		// The datapath rewrites the option only when the message has one,
		// which a non-zero address in the key proves; with zero the
		// result is unknown to the walk.
		if sll {
			x.consult(&flow.Mask{ArpSHA: ones6})
		} else {
			x.consult(&flow.Mask{ArpTHA: ones6})
		}
		present := *field != [6]byte{}
		*field, *wf = [6]byte(f.Value), ones6
		*uf = [6]byte{}
		if !present {
			*uf = ones6
		}
		act.Kind = kind
		copy(act.Addr[:], f.Value)
	case ofpwire.XMTypeMPLSLabel, ofpwire.XMTypeMPLSTC:
		if !x.isMPLS() {
			return nil
		}
		if f.Field == ofpwire.XMTypeMPLSLabel {
			x.setLSE(lseLabel, uint32(v)<<12)
			act = actions.Action{Kind: actions.SetMPLSLabel, Val32: uint32(v) & 0xfffff}
		} else {
			x.setLSE(lseTC, uint32(v)<<9)
			act = actions.Action{Kind: actions.SetMPLSTC, Val8: uint8(v) & 7}
		}
	case ofpwire.XMTypeMPLSBOS:
		if !x.isMPLS() {
			return nil
		}
		x.setLSE(lseBoS, uint32(v&1)<<8)
		act = actions.Action{Kind: actions.SetMPLSBoS, Val8: uint8(v & 1)}
	case ofpwire.XMTypeEthType:
		return x.setEthType(uint16(v))
	case ofpwire.XMTypeIPProto:
		return x.setIPProto(uint8(v))
	case ofpwire.XMTypePBBISID:
		if !x.ethTypeIs(header.EtherTypePBB) {
			return nil
		}
		k.PBBISID, w.PBBISID, u.PBBISID = uint32(v)&0xffffff, ^uint32(0), 0
		act = actions.Action{Kind: actions.SetPBBISID, Val32: uint32(v) & 0xffffff}
	case ofpwire.XMTypeTunnelID:
		k.TunnelID, w.TunnelID, u.TunnelID = v, ^uint64(0), 0
		act.Kind = actions.SetTunnelID
		copy(act.Addr[:8], f.Value)
	case ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv4Dst, ofpwire.XMTypeTunIPv6Src, ofpwire.XMTypeTunIPv6Dst:
		// Tunnel metadata for a later output to a flow-based tunnel port;
		// an IPv4 address is stored IPv4-mapped, as flow.Tunnel says.
		var addr [16]byte
		if len(f.Value) == 4 {
			addr[10], addr[11] = 0xff, 0xff
			copy(addr[12:], f.Value)
		} else {
			addr = [16]byte(f.Value)
		}
		act.Addr = addr
		if f.Field == ofpwire.XMTypeTunIPv4Src || f.Field == ofpwire.XMTypeTunIPv6Src {
			k.Tun.Src, w.Tun.Src, u.Tun.Src = addr, ones16, [16]byte{}
			act.Kind = actions.SetTunnelSrc
		} else {
			k.Tun.Dst, w.Tun.Dst, u.Tun.Dst = addr, ones16, [16]byte{}
			act.Kind = actions.SetTunnelDst
		}
	default: // the L4 ports
		if !x.l4Prereq(l4Proto(f.Field)) {
			return nil
		}
		switch f.Field {
		case ofpwire.XMTypeTCPSrc, ofpwire.XMTypeUDPSrc, ofpwire.XMTypeSCTPSrc:
			k.TpSrc, w.TpSrc, u.TpSrc = uint16(v), 0xffff, 0
			act.Kind = actions.SetL4Src
		default:
			k.TpDst, w.TpDst, u.TpDst = uint16(v), 0xffff, 0
			act.Kind = actions.SetL4Dst
		}
		act.Val16 = uint16(v)
	}
	return x.emit(act)
}

func ipv4SetKind(arp, src bool) actions.Kind {
	switch {
	case arp && src:
		return actions.SetARPSPA
	case arp:
		return actions.SetARPTPA
	case src:
		return actions.SetIPv4Src
	}
	return actions.SetIPv4Dst
}

// setTypeCode writes the ICMP type (or code) into the key's TpSrc (TpDst)
// and returns the datapath action.
func (x *xlator) setTypeCode(typ bool, v uint8) actions.Action {
	k, w, u := &x.key, &x.written, &x.unknown
	if typ {
		k.TpSrc, w.TpSrc, u.TpSrc = uint16(v), 0xffff, 0
		return actions.Action{Kind: actions.SetICMPType, Val8: v}
	}
	k.TpDst, w.TpDst, u.TpDst = uint16(v), 0xffff, 0
	return actions.Action{Kind: actions.SetICMPCode, Val8: v}
}

// icmpv6ND models what an ICMPv6 type (typ) or code change to v does to
// the neighbour discovery fields, which the datapath re-extracts when the
// message turns into or out of ND: out of (or never) ND they are zero; into
// ND they come from the message body, unknown to the walk, unless the
// type and code did not change.
func (x *xlator) icmpv6ND(typ bool, v uint16) {
	k := &x.key
	newT, newC := k.TpSrc, k.TpDst
	if typ {
		newT = v
		x.consult(&flow.Mask{TpDst: 0xffff})
	} else {
		newC = v
		x.consult(&flow.Mask{TpSrc: 0xffff})
	}
	nd := func(m *flow.Mask) { m.NDTarget, m.ArpSHA, m.ArpTHA = ones16, ones6, ones6 }
	if !isND(newT, newC) {
		k.NDTarget, k.ArpSHA, k.ArpTHA = [16]byte{}, [6]byte{}, [6]byte{}
		nd(&x.written)
		x.known(nd)
		return
	}
	x.consult(&flow.Mask{TpSrc: 0xffff, TpDst: 0xffff})
	if newT == k.TpSrc && newC == k.TpDst {
		return
	}
	nd(&x.written)
	nd(&x.unknown)
}

// setEthType rewrites the Ethernet type. The datapath parses the frame
// again, so everything extraction reads behind the type becomes what the
// old bytes say under the new type: unknown to the walk, as after pop MPLS.
// The change cannot be undone by later actions (the bytes behind were not
// touched, but the key the undo would need is unknown), so it counts as
// irreversible in a group bucket.
func (x *xlator) setEthType(typ uint16) error {
	if typ < 0x0600 || isVLANType(typ) {
		return fmt.Errorf("%w: set eth_type to %#x", ErrUnsupported, typ)
	}
	x.consult(&flow.Mask{EthType: 0xffff})
	if x.key.EthType < 0x0600 || x.key.EthType == typ {
		return nil // 802.3: no type field to write; or no change
	}
	x.retype(typ)
	return x.emit(actions.Action{Kind: actions.SetEthType, Val16: typ})
}

// portHeaderLen is the header length of the transport protocols whose
// ports sit in the first four bytes (0 for the others).
func portHeaderLen(proto uint8) int {
	switch proto {
	case header.IPProtoTCP:
		return 20
	case header.IPProtoUDP:
		return 8
	case header.IPProtoSCTP:
		return 12
	}
	return 0
}

// ipv6ChainEnds reports whether an IPv6 key's protocol is a transport
// protocol, not an extension header, ESP or no-next-header where the
// chain stopped.
func ipv6ChainEnds(proto uint8) bool {
	switch proto {
	case 0, 43, 44, 50, 51, 59, 60:
		return false
	}
	return true
}

// setIPProto rewrites the IP protocol. The datapath parses the transport
// header again as the new protocol and computes its checksum afresh, so
// the transport fields become unknown to the walk, except the ports when
// the old and new protocol both carry them in the first four bytes
// (extraction reads them from four bytes on, whatever the rest holds).
func (x *xlator) setIPProto(proto uint8) error {
	if !x.isIP() {
		return nil
	}
	x.consult(&flow.Mask{NwProto: 0xff, NwFrag: 0xff})
	k := &x.key
	old := k.NwProto
	if old == proto || k.EthType == header.EtherTypeIPv6 && !ipv6ChainEnds(old) {
		return nil
	}
	k.NwProto, x.written.NwProto, x.unknown.NwProto = proto, 0xff, 0
	var l4 flow.Mask
	l4.TpSrc, l4.TpDst, l4.TCPFlags = 0xffff, 0xffff, 0xffff
	l4.NDTarget, l4.ArpSHA, l4.ArpTHA = ones16, ones6, ones6
	if k.NwFrag&flow.FragLater != 0 {
		// No transport header is parsed, before or after.
		x.overwrite(&l4)
	} else if portHeaderLen(old) != 0 && portHeaderLen(proto) != 0 {
		// The ports stay where they were and stay parsed (whatever the
		// walk knew of them, written or original, still holds); the rest
		// of the transport header is read anew.
		l4.TpSrc, l4.TpDst = 0, 0
		x.overwrite(&l4)
		x.blank(&l4)
	} else {
		x.overwrite(&l4)
		x.blank(&l4)
	}
	x.irrev++
	return x.emit(actions.Action{Kind: actions.SetIPProto, Val8: proto})
}

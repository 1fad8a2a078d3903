// Package ofmatch represents OpenFlow 1.3 matches on the datapath flow key:
// every one of the 40 OXM basic fields maps onto bits of flow.Key (or the
// pipeline's metadata register), so that the OpenFlow pipeline matches a
// flow.Key under a flow.Mask and the union of the masks it consulted is
// directly a megaflow mask for the datapath.
//
// Field mapping (OXM ↔ flow.Key):
//
//	IN_PORT, IN_PHY_PORT  InPort (IN_PHY_PORT must equal IN_PORT)
//	METADATA              Match.Metadata (pipeline state, not a packet field)
//	NXM reg0-15, OXM      Match.Regs (pipeline state; xregN is Regs[2N:2N+2],
//	xreg0-7, NXM xxreg0-3 xxregN Regs[4N:4N+4], most significant first)
//	ETH_DST/SRC/TYPE      EthDst, EthSrc, EthType
//	VLAN_VID              bit 12 (OFPVID_PRESENT) ↔ VLAN[0].TPID bit 15,
//	                      bits 0-11 ↔ VLAN[0].TCI bits 0-11
//	VLAN_PCP              VLAN[0].TCI bits 13-15
//	IP_DSCP, IP_ECN       NwTOS bits 2-7, 0-1
//	IP_PROTO, ARP_OP      NwProto
//	IPV4_*, ARP_SPA/TPA   IPv4Src, IPv4Dst
//	TCP/UDP/SCTP ports    TpSrc, TpDst
//	ICMPV4/V6 type, code  TpSrc, TpDst (low 8 bits)
//	ARP_SHA, IPV6_ND_SLL  ArpSHA;  ARP_THA, IPV6_ND_TLL  ArpTHA
//	IPV6_SRC/DST/FLABEL   IPv6Src, IPv6Dst, IPv6Label
//	IPV6_ND_TARGET        NDTarget
//	MPLS_LABEL/TC/BOS     MPLSLse bits 12-31, 9-11, 8
//	PBB_ISID              PBBISID
//	TUNNEL_ID             TunnelID
//	NXM tun_src/tun_dst   Tun.Src/Tun.Dst, IPv4-mapped (mask covers ::ffff:)
//	NXM tun_ipv6_src/dst  Tun.Src/Tun.Dst
//	NXM tun_flags         Tun.Flags (the public bit, OAM)
//	NXM recirc_id         RecircID (16 bits; larger values refused)
//	NXM dp_hash           Pipe.DPHash (set by select groups)
//	NXM nw_tos            NwTOS bits 2-7 (NXM_OF_IP_TOS, as IP_DSCP)
//	IPV6_EXTHDR           IPv6ExtHdr
//	NXM ct_state, ct_zone CT.State (eight bits), CT.Zone
//	ct_mark, ct_label     CT.Mark, CT.Label
//	ct_nw_proto, ct_tp_*  CT.NwProto, CT.TpSrc, CT.TpDst
//	ct_nw_src/dst         CT.Src/CT.Dst, IPv4-mapped (as tun_src)
//	ct_ipv6_src/dst       CT.Src/CT.Dst
//
// Fields that share a key field (IP_PROTO and ARP_OP, IPV4_SRC and ARP_SPA,
// the four port pairs, ...) are told apart by the prerequisites, which every
// Match carries as exact matches on EthType and NwProto.
package ofmatch

import (
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Pipe is the state the pipeline carries beside the packet: the metadata
// register and the register file. No header holds it: it is zero when a
// packet enters the pipeline, so it never needs megaflow bits; what a walk
// writes into it is a constant of that walk.
type Pipe struct {
	Metadata uint64
	Regs     [ofpwire.NumRegs]uint32
	ConjID   uint32 // conj_id
	PktMark  uint32 // pkt_mark
	// DPHash is dp_hash: 0 until a select group hashes the packet (its
	// dp_hash selection, Open vSwitch's default), then the hash it chose
	// its bucket by. A function of key bits the hash consulted, so, like
	// the rest, it needs no megaflow bits of its own.
	DPHash uint32
	_      uint32 // Pipe is a whole number of words (pipeline's view)
}

// And returns p masked by m.
func (p *Pipe) And(m *Pipe) Pipe {
	r := Pipe{Metadata: p.Metadata & m.Metadata, ConjID: p.ConjID & m.ConjID, PktMark: p.PktMark & m.PktMark, DPHash: p.DPHash & m.DPHash}
	for i := range r.Regs {
		r.Regs[i] = p.Regs[i] & m.Regs[i]
	}
	return r
}

// IsZero reports whether every bit of p is 0.
func (p *Pipe) IsZero() bool { return *p == Pipe{} }

// Covers reports whether every bit of m is in p (p, m masks).
func (p *Pipe) Covers(m *Pipe) bool {
	if m.Metadata&^p.Metadata != 0 || m.ConjID&^p.ConjID != 0 || m.PktMark&^p.PktMark != 0 || m.DPHash&^p.DPHash != 0 {
		return false
	}
	for i := range m.Regs {
		if m.Regs[i]&^p.Regs[i] != 0 {
			return false
		}
	}
	return true
}

// Reg returns count (at most 2) registers from first as one number, the
// first most significant: a reg or an xreg.
func (p *Pipe) Reg(first, count int) uint64 {
	var v uint64
	for i := first; i < first+count; i++ {
		v = v<<32 | uint64(p.Regs[i])
	}
	return v
}

// Match is an OpenFlow match: a masked flow key plus the masked pipeline
// state (metadata and registers), which is not a packet field. Key and
// Pipe are always masked (Key == Key & Mask, Pipe == Pipe & PipeMask).
// The zero Match matches every packet.
type Match struct {
	flow.Match
	Pipe
	PipeMask Pipe
}

// Matches reports whether a packet with key k, at a point of the pipeline
// where its state is pipe, matches m.
func (m *Match) Matches(k *flow.Key, pipe *Pipe) bool {
	return pipe.And(&m.PipeMask) == m.Pipe && k.MatchesMasked(&m.Mask, &m.Key)
}

// TransportFields returns the OXM fields that hold the key's TpSrc and
// TpDst under IP protocol proto (ports, or ICMP type and code), ok false
// when the protocol has none. ToOXM and the text parser (ofptext) both go
// by it, so that tp_src prints and reads as the same field.
func TransportFields(proto int) (src, dst ofpwire.XMType, ok bool) {
	switch proto {
	case header.IPProtoTCP:
		return ofpwire.XMTypeTCPSrc, ofpwire.XMTypeTCPDst, true
	case header.IPProtoUDP:
		return ofpwire.XMTypeUDPSrc, ofpwire.XMTypeUDPDst, true
	case header.IPProtoSCTP:
		return ofpwire.XMTypeSCTPSrc, ofpwire.XMTypeSCTPDst, true
	case header.IPProtoICMP:
		return ofpwire.XMTypeICMPv4Type, ofpwire.XMTypeICMPv4Code, true
	case header.IPProtoICMPv6:
		return ofpwire.XMTypeICMPv6Type, ofpwire.XMTypeICMPv6Code, true
	}
	return 0, 0, false
}

// validBits restricts fields narrower than their OXM payload (the same table
// ofpwire's decoder applies; FromOXM also accepts matches built in memory).
var validBits = [ofpwire.NumFields]uint64{
	ofpwire.XMTypeVlanID:        0x1fff,
	ofpwire.XMTypeVlanPCP:       0x7,
	ofpwire.XMTypeIPDSCP:        0x3f,
	ofpwire.XMTypeIPECN:         0x3,
	ofpwire.XMTypeIPv6FLabel:    0xfffff,
	ofpwire.XMTypeMPLSLabel:     0xfffff,
	ofpwire.XMTypeMPLSTC:        0x7,
	ofpwire.XMTypeMPLSBOS:       0x1,
	ofpwire.XMTypeARPOpcode:     0xff, // the key keeps the opcode in 8 bits, as OVS does
	ofpwire.XMTypeIPv6ExtHeader: 0x1ff,
	ofpwire.XMTypeIPFrag:        0x3,
	ofpwire.XMTypeRecircID:      0xffff, // flow.Key.RecircID: the ids the datapath allocates
	ofpwire.XMTypeNwTOS:         0xfc,
}

// ValidBits is the bits of field f a value may have, 0 when every bit of
// its OXM payload is valid; the text parser masks by it as FromOXM checks.
func ValidBits(f ofpwire.XMType) uint64 { return validBits[f] }

func matchErr(code uint16) error {
	return &ofpwire.OFPError{Type: ofpwire.ETBadMatch, Code: code}
}

// checkOXM validates one field's class, sizes, mask and value range.
func checkOXM(o ofpwire.OXM) error {
	if o.Class != ofpwire.ClassOf(o.Field) || !matchable(o.Field) {
		return matchErr(ofpwire.BMCBadField)
	}
	size, maskable, ok := ofpwire.FieldSize(o.Field)
	if !ok {
		return matchErr(ofpwire.BMCBadField)
	}
	if len(o.Value) != size || o.HasMask && len(o.Mask) != size || !o.HasMask && o.Mask != nil {
		return matchErr(ofpwire.BMCBadLen)
	}
	if o.HasMask && !maskable {
		return matchErr(ofpwire.BMCBadMask)
	}
	if vb := validBits[o.Field]; vb != 0 && o.Uint()&^vb != 0 {
		return matchErr(ofpwire.BMCBadValue)
	}
	for i := range o.Mask {
		if o.Value[i]&^o.Mask[i] != 0 {
			return matchErr(ofpwire.BMCBadWildcards)
		}
	}
	return nil
}

// mac returns the value and mask of an Ethernet address field as arrays
// (mask all ones when the field is exact).
func mac(o ofpwire.OXM) (v, m [6]byte) {
	v = [6]byte(o.Value)
	m = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if o.HasMask {
		m = [6]byte(o.Mask)
	}
	return v, m
}

// ipv6 is mac for 16-byte address fields.
func ipv6(o ofpwire.OXM) (v, m [16]byte) {
	v = [16]byte(o.Value)
	for i := range m {
		m[i] = 0xff
	}
	if o.HasMask {
		m = [16]byte(o.Mask)
	}
	return v, m
}

// mappedIPv4 maps an IPv4 address field the key holds IPv4-mapped
// (tun_src/tun_dst, ct_nw_src/ct_nw_dst) onto that form: the mask also covers the ::ffff: prefix, so an
// IPv4 match never matches an IPv6 underlay.
func mappedIPv4(o ofpwire.OXM) (v, m [16]byte) {
	v[10], v[11] = 0xff, 0xff
	copy(v[12:], o.Value)
	for i := range 12 {
		m[i] = 0xff
	}
	copy(m[12:], allOnes16[:4])
	if o.HasMask {
		copy(m[12:], o.Mask)
	}
	return v, m
}

// mappedAddrOXM appends the OXM for an address the key holds IPv4-mapped:
// the IPv4 field f4 (tun_src, ct_nw_src, ...) when the mask covers the
// IPv4-mapped prefix and the key has it, the IPv6 field f6 otherwise.
func mappedAddrOXM(fs []ofpwire.OXM, f4, f6 ofpwire.XMType, v, m [16]byte) []ofpwire.OXM {
	prefix := [12]byte{10: 0xff, 11: 0xff}
	if [12]byte(m[:12]) == [12]byte(allOnes16[:12]) && [12]byte(v[:12]) == prefix {
		if [4]byte(m[12:]) == [4]byte(allOnes16[:4]) {
			return append(fs, ofpwire.NewOXM(f4, append([]byte(nil), v[12:]...)))
		}
		return append(fs, ofpwire.NewMaskedOXM(f4, append([]byte(nil), v[12:]...), append([]byte(nil), m[12:]...)))
	}
	return oxmIPv6(fs, f6, v, m)
}

// FromOXM converts an OpenFlow 1.3 match into a Match. It rejects, with the
// OFPET_BAD_MATCH code the spec prescribes, fields of other classes, bad
// lengths, masks on unmaskable fields, out-of-range values, value bits
// outside the mask, duplicates and unmet prerequisites; and an IN_PHY_PORT
// different from IN_PORT (BAD_VALUE: ports here have no separate physical
// port) or an ARP opcode above 255 (BAD_VALUE: the key holds 8 bits).
func FromOXM(om ofpwire.Match) (Match, error) {
	var m Match
	var seen [ofpwire.NumFields]bool
	for _, o := range om.Fields {
		if err := checkOXM(o); err != nil {
			return Match{}, err
		}
		if seen[o.Field] {
			return Match{}, matchErr(ofpwire.BMCDupField)
		}
		seen[o.Field] = true
	}
	// tun_src and tun_ipv6_src (tun_dst, tun_ipv6_dst) are one key field:
	// an outer header has one address family.
	// So are ct_nw_src and ct_ipv6_src (ct_nw_dst, ct_ipv6_dst).
	if seen[ofpwire.XMTypeTunIPv4Src] && seen[ofpwire.XMTypeTunIPv6Src] ||
		seen[ofpwire.XMTypeTunIPv4Dst] && seen[ofpwire.XMTypeTunIPv6Dst] ||
		seen[ofpwire.XMTypeCTNwSrc] && seen[ofpwire.XMTypeCTIPv6Src] ||
		seen[ofpwire.XMTypeCTNwDst] && seen[ofpwire.XMTypeCTIPv6Dst] {
		return Match{}, matchErr(ofpwire.BMCDupField)
	}
	if err := ofpwire.CheckPrerequisites(om); err != nil {
		return Match{}, err
	}
	for _, o := range om.Fields {
		if o.Field == ofpwire.XMTypeInPhyPort {
			if p, _ := om.Field(ofpwire.XMTypeInPort); p.Uint() != o.Uint() {
				return Match{}, matchErr(ofpwire.BMCBadValue)
			}
			continue
		}
		if err := m.set(o); err != nil {
			return Match{}, err
		}
	}
	// Masks narrowed in set (VLAN "no tag") leave key bits to clear.
	m.Key.ApplyMask(&m.Mask, &m.Key)
	return m, nil
}

// set adds one checked field to m (IN_PHY_PORT aside, which FromOXM
// checks against IN_PORT).
func (m *Match) set(o ofpwire.OXM) error {
	k, mk := &m.Key, &m.Mask
	v, vm := o.Uint(), o.MaskUint()
	switch o.Field {
	case ofpwire.XMTypeInPort:
		k.InPort, mk.InPort = uint32(v), ^uint32(0)
	case ofpwire.XMTypeInPort16:
		k.InPort, mk.InPort = InPort32(uint16(v)), ^uint32(0)
	case ofpwire.XMTypeIPTTL:
		k.NwTTL, mk.NwTTL = uint8(v), 0xff
	case ofpwire.XMTypeIPFrag:
		k.NwFrag, mk.NwFrag = uint8(v&vm), uint8(vm&3)
	case ofpwire.XMTypeTCPFlags:
		k.TCPFlags, mk.TCPFlags = uint16(v&vm), uint16(vm&0x0fff)
	case ofpwire.XMTypeMetadata:
		m.Metadata, m.PipeMask.Metadata = v, vm
	case ofpwire.XMTypeConjID:
		m.ConjID, m.PipeMask.ConjID = uint32(v), ^uint32(0)
	case ofpwire.XMTypePktMark:
		m.Pipe.PktMark, m.PipeMask.PktMark = uint32(v&vm), uint32(vm)
	case ofpwire.XMTypeDPHash:
		m.Pipe.DPHash, m.PipeMask.DPHash = uint32(v&vm), uint32(vm)
	case ofpwire.XMTypeRecircID:
		// checkOXM kept the value to the key's 16 bits.
		k.RecircID, mk.RecircID = uint16(v), 0xffff
	case ofpwire.XMTypeNwTOS:
		// nw_tos is the DSCP bits in place; its ECN bits are not the
		// field's (checkOXM refused them set).
		k.NwTOS |= uint8(v) & 0xfc
		mk.NwTOS |= 0xfc
	case ofpwire.XMTypeEthDst:
		k.EthDst, mk.EthDst = mac(o)
	case ofpwire.XMTypeEthSrc:
		k.EthSrc, mk.EthSrc = mac(o)
	case ofpwire.XMTypeEthType:
		k.EthType, mk.EthType = uint16(v), 0xffff
	case ofpwire.XMTypeVlanID:
		vm &= 0x1fff
		if vm&uint64(ofpwire.VIDPresent) != 0 {
			mk.VLAN[0].TPID |= flow.TPIDPresent
			if v&uint64(ofpwire.VIDPresent) != 0 {
				k.VLAN[0].TPID |= flow.TPIDPresent
			} else if v == 0 {
				// "No tag": untagged packets have TCI 0, so VID bits
				// matched against 0 add nothing but megaflow bits.
				vm &^= 0x0fff
			}
		}
		k.VLAN[0].TCI |= uint16(v & 0x0fff)
		mk.VLAN[0].TCI |= uint16(vm & 0x0fff)
	case ofpwire.XMTypeVlanPCP:
		k.VLAN[0].TCI |= uint16(v) << 13
		mk.VLAN[0].TCI |= 0xe000
	case ofpwire.XMTypeIPDSCP:
		k.NwTOS |= uint8(v) << 2
		mk.NwTOS |= 0xfc
	case ofpwire.XMTypeIPECN:
		k.NwTOS |= uint8(v)
		mk.NwTOS |= 0x03
	case ofpwire.XMTypeIPProto, ofpwire.XMTypeARPOpcode:
		k.NwProto, mk.NwProto = uint8(v), 0xff
	case ofpwire.XMTypeIPv4Src, ofpwire.XMTypeARPSPA:
		k.IPv4Src, mk.IPv4Src = uint32(v), uint32(vm)
	case ofpwire.XMTypeIPv4Dst, ofpwire.XMTypeARPTPA:
		k.IPv4Dst, mk.IPv4Dst = uint32(v), uint32(vm)
	case ofpwire.XMTypeTCPSrc, ofpwire.XMTypeUDPSrc, ofpwire.XMTypeSCTPSrc:
		k.TpSrc, mk.TpSrc = uint16(v), 0xffff
	case ofpwire.XMTypeTCPDst, ofpwire.XMTypeUDPDst, ofpwire.XMTypeSCTPDst:
		k.TpDst, mk.TpDst = uint16(v), 0xffff
	case ofpwire.XMTypeICMPv4Type, ofpwire.XMTypeICMPv6Type:
		k.TpSrc, mk.TpSrc = uint16(v), 0x00ff
	case ofpwire.XMTypeICMPv4Code, ofpwire.XMTypeICMPv6Code:
		k.TpDst, mk.TpDst = uint16(v), 0x00ff
	case ofpwire.XMTypeARPSHA, ofpwire.XMTypeIPv6NDSLL:
		k.ArpSHA, mk.ArpSHA = mac(o)
	case ofpwire.XMTypeARPTHA, ofpwire.XMTypeIPv6NDTLL:
		k.ArpTHA, mk.ArpTHA = mac(o)
	case ofpwire.XMTypeIPv6Src:
		k.IPv6Src, mk.IPv6Src = ipv6(o)
	case ofpwire.XMTypeIPv6Dst:
		k.IPv6Dst, mk.IPv6Dst = ipv6(o)
	case ofpwire.XMTypeIPv6NDTarget:
		k.NDTarget, mk.NDTarget = ipv6(o)
	case ofpwire.XMTypeIPv6FLabel:
		k.IPv6Label, mk.IPv6Label = uint32(v), uint32(vm&0xfffff)
	case ofpwire.XMTypeMPLSLabel:
		k.MPLSLse |= uint32(v) << 12
		mk.MPLSLse |= 0xfffff << 12
	case ofpwire.XMTypeMPLSTC:
		k.MPLSLse |= uint32(v) << 9
		mk.MPLSLse |= 7 << 9
	case ofpwire.XMTypeMPLSBOS:
		k.MPLSLse |= uint32(v) << 8
		mk.MPLSLse |= 1 << 8
	case ofpwire.XMTypePBBISID:
		k.PBBISID, mk.PBBISID = uint32(v), uint32(vm)
	case ofpwire.XMTypeTunnelID:
		k.TunnelID, mk.TunnelID = v, vm
	case ofpwire.XMTypeTunIPv4Src:
		k.Tun.Src, mk.Tun.Src = mappedIPv4(o)
	case ofpwire.XMTypeTunIPv4Dst:
		k.Tun.Dst, mk.Tun.Dst = mappedIPv4(o)
	case ofpwire.XMTypeTunIPv6Src:
		k.Tun.Src, mk.Tun.Src = ipv6(o)
	case ofpwire.XMTypeTunIPv6Dst:
		k.Tun.Dst, mk.Tun.Dst = ipv6(o)
	case ofpwire.XMTypeTunFlags:
		// Only the public bits (OAM) are OpenFlow's, as in OVS.
		k.Tun.Flags, mk.Tun.Flags = uint16(v)&flow.TunFlagsPublic, uint16(vm)&flow.TunFlagsPublic
	case ofpwire.XMTypeIPv6ExtHeader:
		k.IPv6ExtHdr, mk.IPv6ExtHdr = uint16(v), uint16(vm&0x1ff)
	case ofpwire.XMTypeCTState:
		// Eight bits are defined (flow.CT*); Open vSwitch refuses a
		// value with others.
		if v > 0xff {
			return matchErr(ofpwire.BMCBadValue)
		}
		k.CT.State, mk.CT.State = uint8(v), uint8(vm)
	case ofpwire.XMTypeCTZone:
		k.CT.Zone, mk.CT.Zone = uint16(v), uint16(vm)
	case ofpwire.XMTypeCTMark:
		k.CT.Mark, mk.CT.Mark = uint32(v), uint32(vm)
	case ofpwire.XMTypeCTLabel:
		k.CT.Label, mk.CT.Label = ipv6(o)
	case ofpwire.XMTypeCTNwProto:
		k.CT.NwProto, mk.CT.NwProto = uint8(v), uint8(vm)
	case ofpwire.XMTypeCTNwSrc:
		k.CT.Src, mk.CT.Src = mappedIPv4(o)
	case ofpwire.XMTypeCTNwDst:
		k.CT.Dst, mk.CT.Dst = mappedIPv4(o)
	case ofpwire.XMTypeCTIPv6Src:
		k.CT.Src, mk.CT.Src = ipv6(o)
	case ofpwire.XMTypeCTIPv6Dst:
		k.CT.Dst, mk.CT.Dst = ipv6(o)
	case ofpwire.XMTypeCTTpSrc:
		k.CT.TpSrc, mk.CT.TpSrc = uint16(v), uint16(vm)
	case ofpwire.XMTypeCTTpDst:
		k.CT.TpDst, mk.CT.TpDst = uint16(v), uint16(vm)
	default:
		if n, ok := ofpwire.IsTunMetadata(o.Field); ok {
			// The key holds one option (flow.Tunnel.Opt): a match on
			// tun_metadataN is a match on its index, as OVS's on the
			// field's presence, and on the value's bits.
			if mk.Tun.Flags&flow.TunFlagOptIndex != 0 {
				return matchErr(ofpwire.BMCBadField)
			}
			k.Tun.Flags |= uint16(n+1) << flow.TunFlagOptIndexShift
			mk.Tun.Flags |= flow.TunFlagOptIndex
			k.Tun.Opt, mk.Tun.Opt = [4]byte(o.Value), [4]byte(allOnes16[:4])
			if o.HasMask {
				mk.Tun.Opt = [4]byte(o.Mask)
			}
			return nil
		}
		if first, count, ok := ofpwire.IsReg(o.Field); ok {
			// Views of one register file: two fields covering one
			// register are a duplicate, as in Open vSwitch.
			for i := range count {
				if m.PipeMask.Regs[first+i] != 0 {
					return matchErr(ofpwire.BMCDupField)
				}
			}
			val, msk := o.Value, o.Mask
			if !o.HasMask {
				msk = allOnes16[:len(val)]
			}
			for i := range count {
				m.Regs[first+i] = be32(val[4*i:])
				m.PipeMask.Regs[first+i] = be32(msk[4*i:])
			}
		}
	}
	return nil
}

// matchable reports whether a match may name f: every field this switch
// knows.
func matchable(ofpwire.XMType) bool { return true }

// KeyBits returns the key value and mask that field o (value and mask)
// stands for, without the prerequisites or checks FromOXM applies: how
// the translation finds a packet field's bits in the key. Fields outside
// the key (metadata, registers) give zero.
func KeyBits(o ofpwire.OXM) (k, m flow.Key) {
	var mt Match
	_ = mt.set(o)
	return mt.Key, mt.Mask
}

// ctOXM appends the conntrack fields ct and its mask cm match on, in
// Open vSwitch's order.
func ctOXM(fs []ofpwire.OXM, ct, cm *flow.Conntrack) []ofpwire.OXM {
	if cm.State != 0 {
		// Always masked, as Open vSwitch sends it: the key's eight bits
		// never cover the field's 32.
		fs = append(fs, ofpwire.OXMUintMasked(ofpwire.XMTypeCTState, uint64(ct.State), uint64(cm.State)))
	}
	if cm.Zone != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeCTZone, uint64(ct.Zone)))
	}
	if cm.Mark != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeCTMark, uint64(ct.Mark), uint64(cm.Mark), 0xffffffff)
	}
	if cm.Label != ([16]byte{}) {
		fs = oxmIPv6(fs, ofpwire.XMTypeCTLabel, ct.Label, cm.Label)
	}
	if cm.Src != ([16]byte{}) {
		fs = mappedAddrOXM(fs, ofpwire.XMTypeCTNwSrc, ofpwire.XMTypeCTIPv6Src, ct.Src, cm.Src)
	}
	if cm.Dst != ([16]byte{}) {
		fs = mappedAddrOXM(fs, ofpwire.XMTypeCTNwDst, ofpwire.XMTypeCTIPv6Dst, ct.Dst, cm.Dst)
	}
	if cm.NwProto != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeCTNwProto, uint64(ct.NwProto)))
	}
	if cm.TpSrc != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeCTTpSrc, uint64(ct.TpSrc), uint64(cm.TpSrc), 0xffff)
	}
	if cm.TpDst != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeCTTpDst, uint64(ct.TpDst), uint64(cm.TpDst), 0xffff)
	}
	return fs
}

// oxmUint appends field f with value v under mask vm, exact when vm covers
// every bit the field can hold (full).
func oxmUint(fs []ofpwire.OXM, f ofpwire.XMType, v, vm, full uint64) []ofpwire.OXM {
	if vm&full == full {
		return append(fs, ofpwire.OXMUint(f, v))
	}
	return append(fs, ofpwire.OXMUintMasked(f, v, vm))
}

func oxmMAC(fs []ofpwire.OXM, f ofpwire.XMType, v, vm [6]byte) []ofpwire.OXM {
	if vm == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		return append(fs, ofpwire.NewOXM(f, v[:]))
	}
	return append(fs, ofpwire.NewMaskedOXM(f, v[:], vm[:]))
}

func oxmIPv6(fs []ofpwire.OXM, f ofpwire.XMType, v, vm [16]byte) []ofpwire.OXM {
	if vm == allOnes16 {
		return append(fs, ofpwire.NewOXM(f, v[:]))
	}
	return append(fs, ofpwire.NewMaskedOXM(f, v[:], vm[:]))
}

// appendTransport appends the key's TpSrc and TpDst, where matched, as the
// exact fields src and dst.
func appendTransport(fs []ofpwire.OXM, k, mk *flow.Key, src, dst ofpwire.XMType) []ofpwire.OXM {
	if mk.TpSrc != 0 {
		fs = append(fs, ofpwire.OXMUint(src, uint64(k.TpSrc)))
	}
	if mk.TpDst != 0 {
		fs = append(fs, ofpwire.OXMUint(dst, uint64(k.TpDst)))
	}
	return fs
}

// InPort32 is the OpenFlow 1.1+ number of a 16-bit (NXM, OpenFlow 1.0)
// port: the reserved ports are 0xff00 and up there.
func InPort32(p uint16) uint32 {
	if p >= 0xff00 {
		return 0xffff0000 | uint32(p)
	}
	return uint32(p)
}

func be32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

var allOnes16 = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// ToOXM returns the shortest OXM list with the meaning of m, fields in the
// order of their OXM numbers, masks only where they are not all ones. m must
// be a match FromOXM can produce (in particular its EthType and NwProto
// carry the prerequisites of the fields it constrains); parts of the mask
// OpenFlow cannot express are left out.
func ToOXM(m *Match) ofpwire.Match {
	k, mk := &m.Key, &m.Mask
	var fs []ofpwire.OXM
	if mk.InPort != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(k.InPort)))
	}
	if m.PipeMask.Metadata != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeMetadata, m.Metadata, m.PipeMask.Metadata, ^uint64(0))
	}
	if m.PipeMask.ConjID != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeConjID, uint64(m.ConjID)))
	}
	if m.PipeMask.PktMark != 0 {
		fs = oxmUint(fs, ofpwire.XMTypePktMark, uint64(m.Pipe.PktMark), uint64(m.PipeMask.PktMark), 0xffffffff)
	}
	if mk.RecircID != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeRecircID, uint64(k.RecircID)))
	}
	if m.PipeMask.DPHash != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeDPHash, uint64(m.Pipe.DPHash), uint64(m.PipeMask.DPHash), 0xffffffff)
	}
	if mk.CT != (flow.Conntrack{}) {
		fs = ctOXM(fs, &k.CT, &mk.CT)
	}
	if mk.EthDst != ([6]byte{}) {
		fs = oxmMAC(fs, ofpwire.XMTypeEthDst, k.EthDst, mk.EthDst)
	}
	if mk.EthSrc != ([6]byte{}) {
		fs = oxmMAC(fs, ofpwire.XMTypeEthSrc, k.EthSrc, mk.EthSrc)
	}
	eth := -1 // the exact EthType, which decides the meaning of shared fields
	if mk.EthType == 0xffff {
		eth = int(k.EthType)
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeEthType, uint64(k.EthType)))
	}
	if vm := uint64(mk.VLAN[0].TPID&flow.TPIDPresent)>>3 | uint64(mk.VLAN[0].TCI&0x0fff); vm != 0 {
		v := uint64(k.VLAN[0].TPID&flow.TPIDPresent)>>3 | uint64(k.VLAN[0].TCI&0x0fff)
		if vm&0x0fff == 0 && v == 0 {
			vm = 0x1fff // "no tag" is OFPVID_NONE, exact
		}
		fs = oxmUint(fs, ofpwire.XMTypeVlanID, v, vm, 0x1fff)
	}
	if mk.VLAN[0].TCI&0xe000 != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeVlanPCP, uint64(k.VLAN[0].TCI>>13)))
	}
	ip := eth == header.EtherTypeIPv4 || eth == header.EtherTypeIPv6
	if mk.NwTOS&0xfc != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeIPDSCP, uint64(k.NwTOS>>2)))
	}
	if mk.NwTOS&0x03 != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeIPECN, uint64(k.NwTOS&3)))
	}
	proto := -1
	if ip && mk.NwProto != 0 {
		proto = int(k.NwProto)
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeIPProto, uint64(k.NwProto)))
	}
	if eth == header.EtherTypeIPv4 {
		if mk.IPv4Src != 0 {
			fs = oxmUint(fs, ofpwire.XMTypeIPv4Src, uint64(k.IPv4Src), uint64(mk.IPv4Src), 0xffffffff)
		}
		if mk.IPv4Dst != 0 {
			fs = oxmUint(fs, ofpwire.XMTypeIPv4Dst, uint64(k.IPv4Dst), uint64(mk.IPv4Dst), 0xffffffff)
		}
	}
	// Transport fields go where their OXM numbers put them: ICMPv6's
	// after the IPv6 fields, the others here.
	tpSrc, tpDst, hasTp := TransportFields(proto)
	if hasTp && proto != header.IPProtoICMPv6 {
		fs = appendTransport(fs, k, mk, tpSrc, tpDst)
	}
	if eth == header.EtherTypeARP || eth == header.EtherTypeRARP {
		if mk.NwProto != 0 {
			fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeARPOpcode, uint64(k.NwProto)))
		}
		if mk.IPv4Src != 0 {
			fs = oxmUint(fs, ofpwire.XMTypeARPSPA, uint64(k.IPv4Src), uint64(mk.IPv4Src), 0xffffffff)
		}
		if mk.IPv4Dst != 0 {
			fs = oxmUint(fs, ofpwire.XMTypeARPTPA, uint64(k.IPv4Dst), uint64(mk.IPv4Dst), 0xffffffff)
		}
		if mk.ArpSHA != ([6]byte{}) {
			fs = oxmMAC(fs, ofpwire.XMTypeARPSHA, k.ArpSHA, mk.ArpSHA)
		}
		if mk.ArpTHA != ([6]byte{}) {
			fs = oxmMAC(fs, ofpwire.XMTypeARPTHA, k.ArpTHA, mk.ArpTHA)
		}
	}
	if eth == header.EtherTypeIPv6 {
		if mk.IPv6Src != ([16]byte{}) {
			fs = oxmIPv6(fs, ofpwire.XMTypeIPv6Src, k.IPv6Src, mk.IPv6Src)
		}
		if mk.IPv6Dst != ([16]byte{}) {
			fs = oxmIPv6(fs, ofpwire.XMTypeIPv6Dst, k.IPv6Dst, mk.IPv6Dst)
		}
		if mk.IPv6Label != 0 {
			fs = oxmUint(fs, ofpwire.XMTypeIPv6FLabel, uint64(k.IPv6Label), uint64(mk.IPv6Label), 0xfffff)
		}
	}
	if proto == header.IPProtoICMPv6 {
		fs = appendTransport(fs, k, mk, tpSrc, tpDst)
	}
	if mk.NDTarget != ([16]byte{}) {
		fs = oxmIPv6(fs, ofpwire.XMTypeIPv6NDTarget, k.NDTarget, mk.NDTarget)
	}
	if proto == header.IPProtoICMPv6 { // the prerequisites allow ICMPv6 over ETH_TYPE 0x0800 too
		if mk.ArpSHA != ([6]byte{}) {
			fs = oxmMAC(fs, ofpwire.XMTypeIPv6NDSLL, k.ArpSHA, mk.ArpSHA)
		}
		if mk.ArpTHA != ([6]byte{}) {
			fs = oxmMAC(fs, ofpwire.XMTypeIPv6NDTLL, k.ArpTHA, mk.ArpTHA)
		}
	}
	if mk.MPLSLse>>12 != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeMPLSLabel, uint64(k.MPLSLse>>12)))
	}
	if mk.MPLSLse>>9&7 != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeMPLSTC, uint64(k.MPLSLse>>9&7)))
	}
	if mk.MPLSLse>>8&1 != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeMPLSBOS, uint64(k.MPLSLse>>8&1)))
	}
	if mk.PBBISID != 0 {
		fs = oxmUint(fs, ofpwire.XMTypePBBISID, uint64(k.PBBISID), uint64(mk.PBBISID), 0xffffff)
	}
	if mk.TunnelID != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeTunnelID, k.TunnelID, mk.TunnelID, ^uint64(0))
	}
	if mk.IPv6ExtHdr != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeIPv6ExtHeader, uint64(k.IPv6ExtHdr), uint64(mk.IPv6ExtHdr), 0x1ff)
	}
	if mk.Tun.Src != ([16]byte{}) {
		fs = mappedAddrOXM(fs, ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv6Src, k.Tun.Src, mk.Tun.Src)
	}
	if mk.Tun.Dst != ([16]byte{}) {
		fs = mappedAddrOXM(fs, ofpwire.XMTypeTunIPv4Dst, ofpwire.XMTypeTunIPv6Dst, k.Tun.Dst, mk.Tun.Dst)
	}
	if ip && mk.NwTTL != 0 {
		fs = append(fs, ofpwire.OXMUint(ofpwire.XMTypeIPTTL, uint64(k.NwTTL)))
	}
	if ip && mk.NwFrag != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeIPFrag, uint64(k.NwFrag), uint64(mk.NwFrag), 3)
	}
	if mk.TCPFlags != 0 {
		fs = oxmUint(fs, ofpwire.XMTypeTCPFlags, uint64(k.TCPFlags), uint64(mk.TCPFlags), 0x0fff)
	}
	for i, rm := range m.PipeMask.Regs {
		if rm != 0 {
			fs = oxmUint(fs, ofpwire.XMTypeReg0+ofpwire.XMType(i), uint64(m.Regs[i]), uint64(rm), 0xffffffff)
		}
	}
	if n := k.Tun.OptIndex(); n >= 0 && mk.Tun.Flags&flow.TunFlagOptIndex != 0 {
		f := ofpwire.XMTypeTunMetadata0 + ofpwire.XMType(n)
		if mk.Tun.Opt == [4]byte(allOnes16[:4]) {
			fs = append(fs, ofpwire.NewOXM(f, k.Tun.Opt[:]))
		} else {
			fs = append(fs, ofpwire.NewMaskedOXM(f, k.Tun.Opt[:], mk.Tun.Opt[:]))
		}
	}
	if m := mk.Tun.Flags & flow.TunFlagsPublic; m != 0 {
		// Always masked, as ovs-ofctl sends it: NXM_NX_TUN_FLAGS_W(0001/0001).
		fs = append(fs, ofpwire.NewMaskedOXM(ofpwire.XMTypeTunFlags,
			[]byte{byte(k.Tun.Flags >> 8), byte(k.Tun.Flags & m)}, []byte{byte(m >> 8), byte(m)}))
	}
	return ofpwire.Match{Fields: fs}
}

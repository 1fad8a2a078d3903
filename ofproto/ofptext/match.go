package ofptext

import (
	"bytes"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// portLocal is OFPP_LOCAL, the one reserved port a match may name.
const portLocal = 0xfffffffe

// shorthand names the protocol keywords of ovs-ofctl: an exact EthType, and
// an exact IP protocol when proto >= 0.
var shorthands = []struct {
	name  string
	eth   uint16
	proto int
}{
	{"ip", header.EtherTypeIPv4, -1}, {"icmp", header.EtherTypeIPv4, header.IPProtoICMP}, {"tcp", header.EtherTypeIPv4, header.IPProtoTCP},
	{"udp", header.EtherTypeIPv4, header.IPProtoUDP}, {"sctp", header.EtherTypeIPv4, header.IPProtoSCTP},
	{"ipv6", header.EtherTypeIPv6, -1}, {"icmp6", header.EtherTypeIPv6, header.IPProtoICMPv6}, {"tcp6", header.EtherTypeIPv6, header.IPProtoTCP},
	{"udp6", header.EtherTypeIPv6, header.IPProtoUDP}, {"sctp6", header.EtherTypeIPv6, header.IPProtoSCTP},
	{"arp", header.EtherTypeARP, -1}, {"rarp", header.EtherTypeRARP, -1}, {"mpls", header.EtherTypeMPLS, -1}, {"mplsm", header.EtherTypeMPLSMcast, -1},
}

// FormatMatch prints m in ovs-ofctl's flow syntax, e.g.
// "tcp,in_port=1,metadata=0x5/0xff,dl_vlan=10,nw_src=198.18.0.0/16,tp_dst=80":
// the protocol shorthand first, then the fields in OXM order. Fields Open
// vSwitch does not have use the names pbb_isid and ipv6_exthdr. The empty
// match prints as "".
func FormatMatch(m *ofmatch.Match) string {
	fs := ofmatch.ToOXM(m).Fields
	var out []string
	var eth, proto uint64
	hasEth, hasProto := false, false
	for _, o := range fs {
		switch o.Field {
		case ofpwire.XMTypeEthType:
			eth, hasEth = o.Uint(), true
		case ofpwire.XMTypeIPProto:
			proto, hasProto = o.Uint(), true
		}
	}
	if hasEth {
		for _, s := range shorthands {
			if uint64(s.eth) != eth {
				continue
			}
			if s.proto < 0 || hasProto && uint64(s.proto) == proto {
				out = append(out, s.name)
				if s.proto >= 0 {
					hasProto = false // said by the shorthand
					break
				}
			}
		}
		if len(out) > 1 { // "ip" and "tcp" both matched: keep the precise one
			out = out[1:]
		}
		if len(out) > 0 {
			hasEth = false
		}
	}
	// Open vSwitch prints pkt_mark, recirc_id, dp_hash and the conntrack
	// fields first, before the protocol keyword.
	var lead []string
	for _, f := range []struct {
		f    ofpwire.XMType
		name string
	}{{ofpwire.XMTypePktMark, "pkt_mark="}, {ofpwire.XMTypeRecircID, "recirc_id="}, {ofpwire.XMTypeDPHash, "dp_hash="}} {
		for _, o := range fs {
			if o.Field == f.f {
				lead = append(lead, f.name+hexMasked(o.Uint(), o.MaskUint(), 0xffffffff))
			}
		}
	}
	for _, o := range fs {
		if t, ok := formatCTField(o); ok {
			lead = append(lead, t)
		}
	}
	if _, ok := (ofpwire.Match{Fields: fs}).Field(ofpwire.XMTypeRecircID); ok && slices.ContainsFunc(fs, isPacketField) {
		// A match on recirc_id makes Open vSwitch print the packet
		// type its packet fields imply (its datapath flows' form).
		lead = append(lead, "eth")
	}
	out = append(lead, out...)
	for i := 0; i < len(fs); i++ {
		o := fs[i]
		v, vm := o.Uint(), o.MaskUint()
		switch o.Field {
		case ofpwire.XMTypeInPort:
			if v == portLocal {
				out = append(out, "in_port=LOCAL")
			} else {
				out = append(out, "in_port="+strconv.FormatUint(v, 10))
			}
		case ofpwire.XMTypeMetadata:
			out = append(out, "metadata="+hexMasked(v, vm, ^uint64(0)))
		case ofpwire.XMTypeEthDst:
			out = append(out, "dl_dst="+macMasked(o))
		case ofpwire.XMTypeEthSrc:
			out = append(out, "dl_src="+macMasked(o))
		case ofpwire.XMTypeEthType:
			if hasEth {
				out = append(out, fmt.Sprintf("dl_type=0x%04x", v))
			}
		case ofpwire.XMTypeVlanID:
			// Open vSwitch's vlan_tci: PCP(3) present(1) VID(12).
			tci, tm := uint16(v), uint16(vm&0x1fff)
			if i+1 < len(fs) && fs[i+1].Field == ofpwire.XMTypeVlanPCP {
				i++
				tci |= uint16(fs[i].Uint()) << 13
				tm |= 0xe000
			}
			out = append(out, formatVLAN(tci, tm))
		case ofpwire.XMTypeVlanPCP: // without VLAN_VID cannot happen (prerequisite)
			out = append(out, "dl_vlan_pcp="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeIPDSCP:
			out = append(out, "nw_tos="+strconv.FormatUint(v<<2, 10))
		case ofpwire.XMTypeIPECN:
			out = append(out, "nw_ecn="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeIPProto:
			if hasProto {
				out = append(out, "nw_proto="+strconv.FormatUint(v, 10))
			}
		case ofpwire.XMTypeIPv4Src:
			out = append(out, "nw_src="+ipv4Masked(v, vm))
		case ofpwire.XMTypeIPv4Dst:
			out = append(out, "nw_dst="+ipv4Masked(v, vm))
		case ofpwire.XMTypeTCPSrc, ofpwire.XMTypeUDPSrc, ofpwire.XMTypeSCTPSrc:
			out = append(out, "tp_src="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeTCPDst, ofpwire.XMTypeUDPDst, ofpwire.XMTypeSCTPDst:
			out = append(out, "tp_dst="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeICMPv4Type, ofpwire.XMTypeICMPv6Type:
			out = append(out, "icmp_type="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeICMPv4Code, ofpwire.XMTypeICMPv6Code:
			out = append(out, "icmp_code="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeARPOpcode:
			out = append(out, "arp_op="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeARPSPA:
			out = append(out, "arp_spa="+ipv4Masked(v, vm))
		case ofpwire.XMTypeARPTPA:
			out = append(out, "arp_tpa="+ipv4Masked(v, vm))
		case ofpwire.XMTypeARPSHA:
			out = append(out, "arp_sha="+macMasked(o))
		case ofpwire.XMTypeARPTHA:
			out = append(out, "arp_tha="+macMasked(o))
		case ofpwire.XMTypeIPv6Src:
			out = append(out, "ipv6_src="+ipv6Masked(o))
		case ofpwire.XMTypeIPv6Dst:
			out = append(out, "ipv6_dst="+ipv6Masked(o))
		case ofpwire.XMTypeIPv6FLabel:
			s := fmt.Sprintf("ipv6_label=0x%05x", v)
			if vm&0xfffff != 0xfffff {
				s += fmt.Sprintf("/0x%05x", vm)
			}
			out = append(out, s)
		case ofpwire.XMTypeIPv6NDTarget:
			out = append(out, "nd_target="+ipv6Masked(o))
		case ofpwire.XMTypeIPv6NDSLL:
			out = append(out, "nd_sll="+macMasked(o))
		case ofpwire.XMTypeIPv6NDTLL:
			out = append(out, "nd_tll="+macMasked(o))
		case ofpwire.XMTypeMPLSLabel:
			out = append(out, "mpls_label="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeMPLSTC:
			out = append(out, "mpls_tc="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeMPLSBOS:
			out = append(out, "mpls_bos="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypePBBISID:
			out = append(out, "pbb_isid="+hexMasked(v, vm, 0xffffff))
		case ofpwire.XMTypeTunnelID:
			out = append(out, "tun_id="+hexMasked(v, vm, ^uint64(0)))
		case ofpwire.XMTypeIPv6ExtHeader:
			out = append(out, "ipv6_exthdr="+hexMasked(v, vm, 0x1ff))
		case ofpwire.XMTypeIPTTL:
			out = append(out, "nw_ttl="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeConjID:
			out = append(out, "conj_id="+strconv.FormatUint(v, 10))
		case ofpwire.XMTypeIPFrag:
			out = append(out, "nw_frag="+fragName(v, vm))
		case ofpwire.XMTypeTCPFlags:
			out = append(out, "tcp_flags="+formatFlagBits(tcpFlagNames, v, vm, 0x0fff))
		case ofpwire.XMTypeTunIPv4Src:
			out = append(out, "tun_src="+ipv4Masked(v, vm))
		case ofpwire.XMTypeTunIPv4Dst:
			out = append(out, "tun_dst="+ipv4Masked(v, vm))
		case ofpwire.XMTypeTunIPv6Src:
			out = append(out, "tun_ipv6_src="+ipv6Masked(o))
		case ofpwire.XMTypeTunIPv6Dst:
			out = append(out, "tun_ipv6_dst="+ipv6Masked(o))
		case ofpwire.XMTypeTunFlags:
			if v&flow.TunFlagOAM != 0 {
				out = append(out, "tun_flags=+oam")
			} else {
				out = append(out, "tun_flags=-oam")
			}
		default:
			if first, _, ok := ofpwire.IsReg(o.Field); ok {
				out = append(out, fmt.Sprintf("reg%d=%s", first, hexMasked(v, vm, 0xffffffff)))
			}
			if n, ok := ofpwire.IsTunMetadata(o.Field); ok {
				out = append(out, fmt.Sprintf("tun_metadata%d=%s", n, hexMasked(v, vm, 0xffffffff)))
			}
		}
	}
	return strings.Join(out, ",")
}

// isPacketField reports whether o is a field of the packet's headers,
// which implies an Ethernet packet in Open vSwitch (its prerequisite is
// not MFP_NONE): not in_port, metadata, tunnel, conntrack or pipeline
// fields.
func isPacketField(o ofpwire.OXM) bool {
	switch o.Field {
	case ofpwire.XMTypeIPTTL, ofpwire.XMTypeIPFrag, ofpwire.XMTypeTCPFlags, ofpwire.XMTypeNwTOS:
		return true
	case ofpwire.XMTypeInPort, ofpwire.XMTypeInPhyPort, ofpwire.XMTypeMetadata, ofpwire.XMTypeTunnelID:
		return false
	}
	return int(o.Field) < ofpwire.NumBasicFields
}

// formatVLAN prints an Open vSwitch vlan_tci value/mask the way ovs-ofctl
// does: dl_vlan/dl_vlan_pcp when the tag must be present and VID and PCP
// are each exact or absent, vlan_tci otherwise.
func formatVLAN(tci, mask uint16) string {
	vid, pcp := mask&0x0fff, mask&0xe000
	if mask&0x1000 != 0 && tci&0x1000 != 0 && (vid == 0 || vid == 0x0fff) &&
		(pcp == 0 || pcp == 0xe000) && (vid|pcp) != 0 {
		var s []string
		if vid != 0 {
			s = append(s, "dl_vlan="+strconv.Itoa(int(tci&0x0fff)))
		}
		if pcp != 0 {
			s = append(s, "dl_vlan_pcp="+strconv.Itoa(int(tci>>13)))
		}
		return strings.Join(s, ",")
	}
	if mask == 0xffff {
		return fmt.Sprintf("vlan_tci=0x%04x", tci)
	}
	return fmt.Sprintf("vlan_tci=0x%04x/0x%04x", tci, mask)
}

// hexC formats like C's %#x (zero without a prefix), as ovs-ofctl prints.
func hexC(v uint64) string {
	if v == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(v, 16)
}

func hexMasked(v, m, full uint64) string {
	if m&full == full {
		return hexC(v)
	}
	return hexC(v) + "/" + hexC(m)
}

func macString(b []byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

func macMasked(o ofpwire.OXM) string {
	if !o.HasMask {
		return macString(o.Value)
	}
	return macString(o.Value) + "/" + macString(o.Mask)
}

func ipv4Masked(v, m uint64) string {
	a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	if m == 0xffffffff {
		return a.String()
	}
	if n := bits.LeadingZeros32(^uint32(m)); uint32(m) == ^uint32(0)<<(32-n) {
		return fmt.Sprintf("%s/%d", a, n)
	}
	return a.String() + "/" + netip.AddrFrom4([4]byte{byte(m >> 24), byte(m >> 16), byte(m >> 8), byte(m)}).String()
}

func ipv6Masked(o ofpwire.OXM) string {
	a := netip.AddrFrom16([16]byte(o.Value))
	if !o.HasMask {
		return a.String()
	}
	if n, ok := prefixLen(o.Mask); ok {
		return fmt.Sprintf("%s/%d", a, n)
	}
	return a.String() + "/" + netip.AddrFrom16([16]byte(o.Mask)).String()
}

// prefixLen reports whether mask is a CIDR prefix and its length.
func prefixLen(mask []byte) (int, bool) {
	n := 0
	for _, b := range mask {
		if b == 0xff {
			n += 8
			continue
		}
		n += bits.LeadingZeros8(^b)
		break
	}
	for i := range mask {
		want := byte(0)
		switch {
		case (i+1)*8 <= n:
			want = 0xff
		case i*8 < n:
			want = ^byte(0xff >> (n - i*8))
		}
		if mask[i] != want {
			return 0, false
		}
	}
	return n, true
}

// MatchError is match text ParseMatch refuses (a missing prerequisite is a
// *PrereqError instead). Reason is the mistake alone, which a flow's parser
// puts in its own "bad flow" message; Error keeps the "ofmatch: " prefix
// the match syntax's errors have always had where they are shown bare
// (trace).
type MatchError struct {
	Reason string
}

func (e *MatchError) Error() string { return "ofmatch: " + e.Reason }

func matchErrorf(format string, a ...any) error {
	return &MatchError{Reason: fmt.Sprintf(format, a...)}
}

// field is a value/mask accumulator for one OXM field while parsing, since
// several keywords may add to one field (dl_vlan and vlan_tci) and the OXM
// field of tp_src or icmp_type depends on the protocol given anywhere.
type field struct {
	set     bool
	v, m    uint64
	b, bm   []byte // address-like fields
	maskful bool   // a mask was written explicitly
}

// ParseMatch reads a match in the syntax FormatMatch prints (ovs-ofctl's flow syntax
// for the fields OpenFlow 1.3 has): comma-separated protocol shorthands and
// field=value[/mask] pairs. The result is checked like a match received from
// a controller, so ParseMatch accepts exactly the matches ofmatch.FromOXM accepts.
func ParseMatch(s string) (ofmatch.Match, error) {
	var fs [ofpwire.NumFields]field
	var tpSrc, tpDst, icmpType, icmpCode *field
	var tmp [4]field
	tpSrc, tpDst, icmpType, icmpCode = &tmp[0], &tmp[1], &tmp[2], &tmp[3]
	setU := func(f ofpwire.XMType, v, m uint64) error {
		p := &fs[f]
		if p.set && (p.v^v)&p.m&m != 0 {
			return matchErrorf("conflicting values for %v", f)
		}
		p.set, p.v, p.m = true, p.v|v&m, p.m|m
		return nil
	}
	proto := -1
	setProto := func(p int) error {
		if proto >= 0 && proto != p {
			return matchErrorf("conflicting IP protocols")
		}
		proto = p
		return setU(ofpwire.XMTypeIPProto, uint64(p), 0xff)
	}
	eth := -1
	setEth := func(e int) error {
		if eth >= 0 && eth != e {
			return matchErrorf("conflicting Ethernet types")
		}
		if eth == e {
			return nil
		}
		eth = e
		return setU(ofpwire.XMTypeEthType, uint64(e), 0xffff)
	}
	names := map[ofpwire.XMType]string{} // the keyword that set a field, for errors
	var tpNames [4]string                // tp_src, tp_dst, icmp_type, icmp_code as written
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		name, val, hasVal := strings.Cut(tok, "=")
		name = strings.TrimSpace(name)
		val = strings.TrimSpace(val)
		if f, ok := tokenFields[name]; ok && hasVal {
			names[f] = name
		}
		if !hasVal {
			// "eth" is Open vSwitch's packet_type=(0,0): every packet
			// this switch sees is an Ethernet frame.
			found := name == "eth"
			for _, sh := range shorthands {
				if sh.name == name {
					found = true
					if err := setEth(int(sh.eth)); err != nil {
						return ofmatch.Match{}, err
					}
					if sh.proto >= 0 {
						if err := setProto(sh.proto); err != nil {
							return ofmatch.Match{}, err
						}
					}
				}
			}
			if !found {
				return ofmatch.Match{}, matchErrorf("unknown keyword %q", name)
			}
			continue
		}
		var err error
		switch name {
		case "in_port":
			var v uint64
			if val == "LOCAL" {
				v = portLocal
			} else if v, err = parseUint(val, 32); err != nil {
				break
			}
			err = setU(ofpwire.XMTypeInPort, v, 0xffffffff)
		case "metadata":
			err = parseMaskedUint(val, 64, func(v, m uint64) error { return setU(ofpwire.XMTypeMetadata, v, m) })
		case "tun_id", "tunnel_id":
			err = parseMaskedUint(val, 64, func(v, m uint64) error { return setU(ofpwire.XMTypeTunnelID, v, m) })
		case "pbb_isid":
			err = parseMaskedUint(val, 24, func(v, m uint64) error { return setU(ofpwire.XMTypePBBISID, v, m) })
		case "ipv6_exthdr":
			err = parseMaskedUint(val, 9, func(v, m uint64) error { return setU(ofpwire.XMTypeIPv6ExtHeader, v, m) })
		case "ipv6_label":
			err = parseMaskedUint(val, 20, func(v, m uint64) error { return setU(ofpwire.XMTypeIPv6FLabel, v, m) })
		case "dl_type", "eth_type":
			var v uint64
			if v, err = parseUint(val, 16); err == nil {
				err = setEth(int(v))
			}
		case "dl_src", "eth_src":
			err = parseMAC(val, &fs[ofpwire.XMTypeEthSrc])
		case "dl_dst", "eth_dst":
			err = parseMAC(val, &fs[ofpwire.XMTypeEthDst])
		case "arp_sha":
			err = parseMAC(val, &fs[ofpwire.XMTypeARPSHA])
		case "arp_tha":
			err = parseMAC(val, &fs[ofpwire.XMTypeARPTHA])
		case "nd_sll":
			err = parseMAC(val, &fs[ofpwire.XMTypeIPv6NDSLL])
		case "nd_tll":
			err = parseMAC(val, &fs[ofpwire.XMTypeIPv6NDTLL])
		case "nw_src", "ip_src":
			err = parseIPv4(val, &fs[ofpwire.XMTypeIPv4Src])
		case "nw_dst", "ip_dst":
			err = parseIPv4(val, &fs[ofpwire.XMTypeIPv4Dst])
		case "arp_spa":
			err = parseIPv4(val, &fs[ofpwire.XMTypeARPSPA])
		case "arp_tpa":
			err = parseIPv4(val, &fs[ofpwire.XMTypeARPTPA])
		case "ipv6_src":
			err = parseIPv6(val, &fs[ofpwire.XMTypeIPv6Src])
		case "ipv6_dst":
			err = parseIPv6(val, &fs[ofpwire.XMTypeIPv6Dst])
		case "nd_target":
			err = parseIPv6(val, &fs[ofpwire.XMTypeIPv6NDTarget])
		case "tun_src":
			err = parseIPv4(val, &fs[ofpwire.XMTypeTunIPv4Src])
		case "tun_dst":
			err = parseIPv4(val, &fs[ofpwire.XMTypeTunIPv4Dst])
		case "tun_ipv6_src":
			err = parseIPv6(val, &fs[ofpwire.XMTypeTunIPv6Src])
		case "tun_ipv6_dst":
			err = parseIPv6(val, &fs[ofpwire.XMTypeTunIPv6Dst])
		case "tun_flags":
			// ovs-ofctl's forms: +oam, -oam, oam, or a number[/mask];
			// only the OAM bit is matchable.
			set := func(v uint64) error { return setU(ofpwire.XMTypeTunFlags, v, flow.TunFlagsPublic) }
			switch val {
			case "+oam", "oam":
				err = set(flow.TunFlagOAM)
			case "-oam":
				err = set(0)
			default:
				err = parseMaskedUint(val, 16, func(v, m uint64) error {
					if m&flow.TunFlagsPublic == 0 {
						return matchErrorf("tun_flags=%s matches no public flag", val)
					}
					return setU(ofpwire.XMTypeTunFlags, v&flow.TunFlagsPublic, flow.TunFlagsPublic)
				})
			}
		case "dl_vlan":
			var v uint64
			if v, err = parseUint(val, 16); err != nil {
				break
			}
			if v == 0xffff { // OFP_VLAN_NONE, as ovs-ofctl accepts it
				err = setU(ofpwire.XMTypeVlanID, 0, 0x1fff)
			} else if v > 0x0fff {
				err = matchErrorf("dl_vlan %d out of range", v)
			} else {
				err = setU(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent)|v, 0x1fff)
			}
		case "vlan_vid":
			err = parseMaskedUint(val, 13, func(v, m uint64) error { return setU(ofpwire.XMTypeVlanID, v, m) })
		case "dl_vlan_pcp", "vlan_pcp":
			var v uint64
			if v, err = parseUint(val, 3); err != nil {
				break
			}
			if err = setU(ofpwire.XMTypeVlanPCP, v, 7); err == nil && fs[ofpwire.XMTypeVlanID].m&0x1000 == 0 {
				err = setU(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent), uint64(ofpwire.VIDPresent))
			}
		case "vlan_tci":
			err = parseMaskedUint(val, 16, func(v, m uint64) error {
				if m&0x1000 != 0 && v&0x1000 == 0 {
					// No tag (vlan_tci=0 is the usual way to say it):
					// OpenFlow 1.3 has no PCP without a tag, and
					// ovs-ofctl drops those bits too.
					v, m = v&^0xe000, m&^0xe000
				}
				switch m & 0xe000 {
				case 0:
				case 0xe000:
					if err := setU(ofpwire.XMTypeVlanPCP, v>>13, 7); err != nil {
						return err
					}
				default:
					return matchErrorf("OpenFlow 1.3 cannot match part of the VLAN PCP")
				}
				if m&0x1fff == 0 {
					return nil
				}
				return setU(ofpwire.XMTypeVlanID, v&0x1fff, m&0x1fff)
			})
		case "nw_tos":
			var v uint64
			if v, err = parseUint(val, 8); err == nil {
				if v&3 != 0 {
					err = matchErrorf("nw_tos has ECN bits set")
				} else {
					err = setU(ofpwire.XMTypeIPDSCP, v>>2, 0x3f)
				}
			}
		case "ip_dscp":
			err = parseExact(val, 6, ofpwire.XMTypeIPDSCP, setU)
		case "nw_ecn", "ip_ecn":
			err = parseExact(val, 2, ofpwire.XMTypeIPECN, setU)
		case "nw_proto", "ip_proto":
			names[ofpwire.XMTypeIPProto], names[ofpwire.XMTypeARPOpcode] = name, name
			var v uint64
			if v, err = parseUint(val, 8); err == nil {
				if eth == header.EtherTypeARP || eth == header.EtherTypeRARP {
					err = setU(ofpwire.XMTypeARPOpcode, v, 0xff)
				} else {
					err = setProto(int(v))
				}
			}
		case "arp_op":
			err = parseExact(val, 8, ofpwire.XMTypeARPOpcode, setU)
		case "tp_src", "tcp_src", "udp_src", "sctp_src":
			tpNames[0] = name
			err = parseExactInto(val, 16, tpSrc)
		case "tp_dst", "tcp_dst", "udp_dst", "sctp_dst":
			tpNames[1] = name
			err = parseExactInto(val, 16, tpDst)
		case "icmp_type", "icmpv6_type":
			tpNames[2] = name
			err = parseExactInto(val, 8, icmpType)
		case "icmp_code", "icmpv6_code":
			tpNames[3] = name
			err = parseExactInto(val, 8, icmpCode)
		case "conj_id":
			err = parseExact(val, 32, ofpwire.XMTypeConjID, setU)
		case "pkt_mark":
			err = parseMaskedUint(val, 32, func(v, m uint64) error { return setU(ofpwire.XMTypePktMark, v, m) })
		case "dp_hash":
			err = parseMaskedUint(val, 32, func(v, m uint64) error { return setU(ofpwire.XMTypeDPHash, v, m) })
		case "recirc_id":
			var v uint64
			if v, err = parseUint(val, 32); err == nil && v > 0xffff {
				// The datapath's ids are 16-bit (flow.Key.RecircID):
				// such a flow could never match.
				err = matchErrorf("recirc_id=%s: this switch's recirculation ids are below 0x10000", val)
			} else if err == nil {
				err = setU(ofpwire.XMTypeRecircID, v, 0xffff)
			}
		case "tcp_flags":
			var v, m uint64
			if v, m, err = parseTCPFlags(val); err == nil {
				err = setU(ofpwire.XMTypeTCPFlags, v, m)
			}
		case "ct_state":
			var v, m uint64
			if v, m, err = parseCTState(val); err == nil {
				err = setU(ofpwire.XMTypeCTState, v, m)
			}
		case "ct_zone":
			err = parseExact(val, 16, ofpwire.XMTypeCTZone, setU)
		case "ct_nw_proto":
			err = parseExact(val, 8, ofpwire.XMTypeCTNwProto, setU)
		case "ct_mark":
			err = parseMaskedUint(val, 32, func(v, m uint64) error { return setU(ofpwire.XMTypeCTMark, v, m) })
		case "ct_tp_src", "ct_tp_dst":
			f := map[string]ofpwire.XMType{"ct_tp_src": ofpwire.XMTypeCTTpSrc, "ct_tp_dst": ofpwire.XMTypeCTTpDst}[name]
			err = parseMaskedUint(val, 16, func(v, m uint64) error { return setU(f, v, m) })
		case "ct_nw_src":
			err = parseIPv4(val, &fs[ofpwire.XMTypeCTNwSrc])
		case "ct_nw_dst":
			err = parseIPv4(val, &fs[ofpwire.XMTypeCTNwDst])
		case "ct_ipv6_src":
			err = parseIPv6(val, &fs[ofpwire.XMTypeCTIPv6Src])
		case "ct_ipv6_dst":
			err = parseIPv6(val, &fs[ofpwire.XMTypeCTIPv6Dst])
		case "ct_label":
			err = parseCTLabel(val, &fs[ofpwire.XMTypeCTLabel])
		case "nw_ttl", "ip_ttl":
			err = parseExact(val, 8, ofpwire.XMTypeIPTTL, setU)
		case "nw_frag", "ip_frag":
			f, ok := fragValues[val]
			if !ok {
				err = matchErrorf("%s=%s: not one of no, yes, first, later, not_later", name, val)
				break
			}
			err = setU(ofpwire.XMTypeIPFrag, f[0], f[1])
		case "mpls_label":
			err = parseExact(val, 20, ofpwire.XMTypeMPLSLabel, setU)
		case "mpls_tc":
			err = parseExact(val, 3, ofpwire.XMTypeMPLSTC, setU)
		case "mpls_bos":
			err = parseExact(val, 1, ofpwire.XMTypeMPLSBOS, setU)
		default:
			if f, ok := tunMetadataByName(name); ok {
				err = parseMaskedUint(val, 32, func(v, m uint64) error { return setU(f, v, m) })
				break
			}
			first, count, ok := regName(name)
			if !ok {
				err = matchErrorf("unknown field %q", name)
				break
			}
			var v, m []uint32
			if v, m, err = parseRegValue(val, count); err != nil {
				break
			}
			for i := range count {
				if err = setU(ofpwire.XMTypeReg0+ofpwire.XMType(first+i), uint64(v[i]), uint64(m[i])); err != nil {
					break
				}
			}
		}
		if err != nil {
			return ofmatch.Match{}, err
		}
	}
	// nw_proto given before arp: an ARP opcode after all.
	if (eth == header.EtherTypeARP || eth == header.EtherTypeRARP) && fs[ofpwire.XMTypeIPProto].set {
		fs[ofpwire.XMTypeARPOpcode], fs[ofpwire.XMTypeIPProto] = fs[ofpwire.XMTypeIPProto], field{}
	}
	// nw_src and nw_dst of ARP are its protocol addresses, as in ovs-ofctl.
	if eth == header.EtherTypeARP || eth == header.EtherTypeRARP {
		for _, m := range [][2]ofpwire.XMType{{ofpwire.XMTypeIPv4Src, ofpwire.XMTypeARPSPA}, {ofpwire.XMTypeIPv4Dst, ofpwire.XMTypeARPTPA}} {
			if fs[m[0]].set {
				if fs[m[1]].set {
					return ofmatch.Match{}, matchErrorf("%s and %v both given", names[m[0]], m[1])
				}
				fs[m[1]], fs[m[0]] = fs[m[0]], field{}
				names[m[1]] = names[m[0]]
			}
		}
	}
	// tp_* name ports, icmp_* ICMP's type and code, as String prints them.
	src, dst, hasTp := ofmatch.TransportFields(proto)
	icmp := proto == header.IPProtoICMP || proto == header.IPProtoICMPv6
	for i, d := range []struct {
		f    *field
		to   ofpwire.XMType
		fit  bool
		need string
	}{{tpSrc, src, hasTp && !icmp, "tcp, udp or sctp (or their IPv6 forms)"}, {tpDst, dst, hasTp && !icmp, "tcp, udp or sctp (or their IPv6 forms)"},
		{icmpType, src, icmp, "icmp or icmp6"}, {icmpCode, dst, icmp, "icmp or icmp6"}} {
		if !d.f.set {
			continue
		}
		if !d.fit {
			return ofmatch.Match{}, matchErrorf("%s requires %s (e.g. %s,%s=...); a switch refuses it without: OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ",
				tpNames[i], d.need, firstAlternative(strings.SplitN(d.need, ",", 2)[0]), tpNames[i])
		}
		fs[d.to] = *d.f
		names[d.to] = tpNames[i]
	}

	var om ofpwire.Match
	for i := range fs {
		f := &fs[i]
		if !f.set {
			continue
		}
		ft := ofpwire.XMType(i)
		size, maskable, _ := ofpwire.FieldSize(ft)
		if f.b != nil {
			if f.maskful {
				om.Add(ofpwire.NewMaskedOXM(ft, f.b, f.bm))
			} else {
				om.Add(ofpwire.NewOXM(ft, f.b))
			}
			continue
		}
		full := uint64(1)<<(8*uint(size)) - 1
		if size == 8 {
			full = ^uint64(0)
		}
		if vb := ofmatch.ValidBits(ft); vb != 0 {
			full = vb
		}
		if f.m&full == full || !maskable {
			if f.m&full != full {
				return ofmatch.Match{}, matchErrorf("%v cannot be masked", ft)
			}
			om.Add(ofpwire.OXMUint(ft, f.v))
		} else {
			om.Add(ofpwire.OXMUintMasked(ft, f.v, f.m))
		}
	}
	if err := prereqError(om, names); err != nil {
		return ofmatch.Match{}, err
	}
	return ofmatch.FromOXM(om)
}

// parseUint reads a decimal or 0x-hex number of at most width bits.
func parseUint(s string, width int) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, width)
	if err != nil {
		return 0, matchErrorf("bad number %q", s)
	}
	return v, nil
}

// parseMaskedUint reads value[/mask] (mask all ones when absent).
func parseMaskedUint(s string, width int, set func(v, m uint64) error) error {
	vs, ms, masked := strings.Cut(s, "/")
	v, err := parseUint(vs, width)
	if err != nil {
		return err
	}
	m := ^uint64(0) >> (64 - width)
	if masked {
		if m, err = parseUint(ms, width); err != nil {
			return err
		}
	}
	return set(v&m, m)
}

func parseExact(s string, width int, f ofpwire.XMType, set func(ofpwire.XMType, uint64, uint64) error) error {
	v, err := parseUint(s, width)
	if err != nil {
		return err
	}
	return set(f, v, ^uint64(0)>>(64-width))
}

func parseExactInto(s string, width int, f *field) error {
	v, err := parseUint(s, width)
	if err != nil {
		return err
	}
	if f.set {
		return matchErrorf("transport field given twice")
	}
	*f = field{set: true, v: v, m: ^uint64(0) >> (64 - width)}
	return nil
}

// setBytes stores an address value/mask, masking the value as OpenFlow
// requires.
func setBytes(f *field, v, m []byte, masked bool) error {
	if f.set {
		return matchErrorf("address field given twice")
	}
	for i := range v {
		v[i] &= m[i]
	}
	*f = field{set: true, b: v, bm: m, maskful: masked}
	return nil
}

func parseMAC(s string, f *field) error {
	vs, ms, masked := strings.Cut(s, "/")
	v, err := parseMACAddr(vs)
	if err != nil {
		return err
	}
	m := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if masked {
		if m, err = parseMACAddr(ms); err != nil {
			return err
		}
	}
	return setBytes(f, v, m, masked)
}

func parseMACAddr(s string) ([]byte, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return nil, matchErrorf("bad Ethernet address %q", s)
	}
	b := make([]byte, 6)
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil || len(p) == 0 || len(p) > 2 {
			return nil, matchErrorf("bad Ethernet address %q", s)
		}
		b[i] = byte(v)
	}
	return b, nil
}

// parseAddrMask reads addr, addr/prefix or addr/mask-address.
func parseAddrMask(s string, is4 bool) (v, m []byte, masked bool, err error) {
	vs, ms, masked := strings.Cut(s, "/")
	a, err := netip.ParseAddr(vs)
	if err != nil || a.Is4() != is4 || a.Zone() != "" {
		return nil, nil, false, matchErrorf("bad address %q", s)
	}
	v = a.AsSlice()
	m = make([]byte, len(v))
	for i := range m {
		m[i] = 0xff
	}
	if !masked {
		return v, m, false, nil
	}
	if n, err := strconv.Atoi(ms); err == nil {
		if n < 0 || n > 8*len(v) || strings.HasPrefix(ms, "+") {
			return nil, nil, false, matchErrorf("bad prefix length in %q", s)
		}
		for i := range m {
			switch {
			case (i+1)*8 <= n:
			case i*8 < n:
				m[i] = ^byte(0xff >> (n - i*8))
			default:
				m[i] = 0
			}
		}
		return v, m, true, nil
	}
	ma, err := netip.ParseAddr(ms)
	if err != nil || ma.Is4() != is4 || ma.Zone() != "" {
		return nil, nil, false, matchErrorf("bad mask in %q", s)
	}
	return v, ma.AsSlice(), true, nil
}

func parseIPv4(s string, f *field) error {
	v, m, _, err := parseAddrMask(s, true)
	if err != nil {
		return err
	}
	if f.set {
		return matchErrorf("address field given twice")
	}
	vi := uint64(v[0])<<24 | uint64(v[1])<<16 | uint64(v[2])<<8 | uint64(v[3])
	mi := uint64(m[0])<<24 | uint64(m[1])<<16 | uint64(m[2])<<8 | uint64(m[3])
	*f = field{set: true, v: vi & mi, m: mi}
	return nil
}

func parseIPv6(s string, f *field) error {
	v, m, masked, err := parseAddrMask(s, false)
	if err != nil {
		return err
	}
	return setBytes(f, v, m, masked)
}

// regName reads a register's name: regN (N < 16), xregN (N < 8), xxregN
// (N < 4), as the registers first..first+count-1 of the register file.
func regName(name string) (first, count int, ok bool) {
	for _, r := range []struct {
		prefix string
		count  int
	}{{"xxreg", 4}, {"xreg", 2}, {"reg", 1}} {
		n, found := strings.CutPrefix(name, r.prefix)
		if !found {
			continue
		}
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= ofpwire.NumRegs/r.count || n != strconv.Itoa(i) {
			return 0, 0, false
		}
		return i * r.count, r.count, true
	}
	return 0, 0, false
}

// parseRegValue reads value[/mask] for a register view of count 32-bit
// registers (decimal, or hex up to 32×count bits), as words most
// significant first; the mask is all ones when absent.
func parseRegValue(s string, count int) (v, m []uint32, err error) {
	vs, ms, masked := strings.Cut(s, "/")
	if v, err = parseWords(vs, count); err != nil {
		return nil, nil, err
	}
	m = make([]uint32, count)
	for i := range m {
		m[i] = ^uint32(0)
	}
	if masked {
		if m, err = parseWords(ms, count); err != nil {
			return nil, nil, err
		}
	}
	for i := range v {
		v[i] &= m[i]
	}
	return v, m, nil
}

// parseWords reads a number of up to 32×count bits: decimal (64 bits at
// most) or 0x-hex of any width up to it.
func parseWords(s string, count int) ([]uint32, error) {
	w := make([]uint32, count)
	hex, isHex := strings.CutPrefix(strings.ToLower(s), "0x")
	if !isHex {
		v, err := strconv.ParseUint(s, 10, min(64, 32*count))
		if err != nil {
			return nil, matchErrorf("bad number %q", s)
		}
		w[count-1] = uint32(v)
		if count > 1 {
			w[count-2] = uint32(v >> 32)
		}
		return w, nil
	}
	if hex == "" || len(hex) > 8*count {
		return nil, matchErrorf("bad number %q (at most %d bits)", s, 32*count)
	}
	for i := 0; len(hex) > 0; i++ {
		cut := max(0, len(hex)-8)
		d, err := strconv.ParseUint(hex[cut:], 16, 32)
		if err != nil {
			return nil, matchErrorf("bad number %q", s)
		}
		w[count-1-i] = uint32(d)
		hex = hex[:cut]
	}
	return w, nil
}

// fragValues are ovs-ofctl's names of ip_frag value/mask pairs (bit 0: a
// fragment, bit 1: not the first).
var fragValues = map[string][2]uint64{
	"no": {0, 1}, "yes": {1, 1}, "first": {1, 3}, "later": {3, 3}, "not_later": {0, 2},
}

func fragName(v, m uint64) string {
	for name, f := range fragValues {
		if f == [2]uint64{v, m} {
			return name
		}
	}
	return fmt.Sprintf("%#x/%#x", v, m)
}

// ctStateNames are the ct_state flags by bit, as Open vSwitch names them.
var ctStateNames = []string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

// tcpFlagNames are the TCP flags by bit, as Open vSwitch names them.
var tcpFlagNames = []string{"fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns"}

// parseCTState reads ct_state: flags (+trk-new...) or a number[/mask].
func parseCTState(s string) (v, m uint64, err error) {
	return parseFlagBits("ct_state", ctStateNames, 32, s)
}

// parseTCPFlags reads tcp_flags: flags (+syn-ack...) or a number[/mask].
func parseTCPFlags(s string) (v, m uint64, err error) {
	v, m, err = parseFlagBits("tcp_flags", tcpFlagNames, 12, s)
	return v, m & 0x0fff, err
}

// parseFlagBits reads +FLAG-FLAG... (names by bit) or a number[/mask] of
// width bits.
func parseFlagBits(field string, names []string, width int, s string) (v, m uint64, err error) {
	if s == "" || s[0] != '+' && s[0] != '-' {
		err = parseMaskedUint(s, width, func(a, b uint64) error { v, m = a, b; return nil })
		return v, m, err
	}
	for s != "" {
		on := s[0] == '+'
		if s[0] != '+' && s[0] != '-' {
			return 0, 0, matchErrorf("%s: %q is not +FLAG or -FLAG", field, s)
		}
		s = s[1:]
		end := strings.IndexAny(s, "+-")
		if end < 0 {
			end = len(s)
		}
		bit := -1
		for i, n := range names {
			if n == s[:end] {
				bit = i
			}
		}
		// A bit without a name is written [HEX] (its value), as Open
		// vSwitch prints it.
		if h, ok := strings.CutPrefix(s[:end], "["); ok && strings.HasSuffix(h, "]") {
			if x, err := strconv.ParseUint(strings.TrimSuffix(h, "]"), 16, 64); err == nil && x != 0 && x&(x-1) == 0 && x < 1<<width {
				bit = bits.TrailingZeros64(x)
			}
		}
		if bit < 0 {
			return 0, 0, matchErrorf("%s: unknown flag %q", field, s[:end])
		}
		if m&(1<<bit) != 0 {
			return 0, 0, matchErrorf("%s: %s given twice", field, s[:end])
		}
		m |= 1 << bit
		if on {
			v |= 1 << bit
		}
		s = s[end:]
	}
	return v, m, nil
}

// ParseCTStateFlags reads a ct_state as ovs-appctl ofproto/trace's
// --ct-next takes it: flag names separated by commas or spaces
// ("trk,est"), checked as Open vSwitch checks a state the tracker could
// give (trk with any other flag; inv only with trk; new neither with est
// nor with rpl).
func ParseCTStateFlags(s string) (uint8, error) {
	var v uint8
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		bit := slices.Index(ctStateNames, f)
		if bit < 0 {
			return 0, fmt.Errorf("%s: unknown connection tracking state flag", f)
		}
		v |= 1 << bit
	}
	const newBit, est, rpl, inv, trk = 1 << 0, 1 << 1, 1 << 3, 1 << 4, 1 << 5
	var why string
	switch {
	case v != 0 && v&trk == 0:
		why = `If "trk" is unset, no other flags are set`
	case v&inv != 0 && v&^(trk|inv) != 0:
		why = `when "inv" is set, only "trk" may also be set`
	case v&newBit != 0 && v&est != 0:
		why = `"new" and "est" are mutually exclusive`
	case v&newBit != 0 && v&rpl != 0:
		why = `"new" and "rpy" are mutually exclusive`
	}
	if why != "" {
		return 0, fmt.Errorf("%s: invalid connection state: %s", FormatCTStateFlags(v), why)
	}
	return v, nil
}

// FormatCTStateFlags prints the flags set in v in bit order joined by
// "|" (est|trk), as Open vSwitch's trace names a state.
func FormatCTStateFlags(v uint8) string {
	var parts []string
	for i, n := range ctStateNames {
		if v&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// formatCTState prints ct_state as Open vSwitch does: flags in bit order,
// a number for bits without a name.
func formatCTState(v, m uint64) string { return formatFlagBits(ctStateNames, v, m, 0xffffffff) }

// formatFlagBits prints +FLAG-FLAG... for the bits m covers (names by
// bit; [HEX] for a bit without a name), as Open vSwitch does.
func formatFlagBits(names []string, v, m, full uint64) string {
	var b strings.Builder
	for i := 0; i < 64; i++ {
		if m&full&(1<<i) == 0 {
			continue
		}
		n := fmt.Sprintf("[%x]", uint64(1)<<i)
		if i < len(names) {
			n = names[i]
		}
		if v&(1<<i) != 0 {
			b.WriteString("+" + n)
		} else {
			b.WriteString("-" + n)
		}
	}
	return b.String()
}

// parseCTLabel reads ct_label's 128-bit value[/mask].
func parseCTLabel(s string, f *field) error {
	vs, ms, masked := strings.Cut(s, "/")
	v, err := parseWide(vs, 16)
	if err != nil {
		return matchErrorf("ct_label: %v", err)
	}
	m := bytes.Repeat([]byte{0xff}, 16)
	if masked {
		if m, err = parseWide(ms, 16); err != nil {
			return matchErrorf("ct_label: %v", err)
		}
	}
	return setBytes(f, v, m, masked)
}

// decMasked prints a number, with its mask in hex when it is not full.
func decMasked(v, m, full uint64) string {
	if m == full {
		return strconv.FormatUint(v, 10)
	}
	return fmt.Sprintf("%#x/%#x", v, m)
}

// formatCTField prints a conntrack field; ok false for other fields.
func formatCTField(o ofpwire.OXM) (string, bool) {
	v, vm := o.Uint(), o.MaskUint()
	switch o.Field {
	case ofpwire.XMTypeCTState:
		return "ct_state=" + formatCTState(v, vm), true
	case ofpwire.XMTypeCTZone:
		return "ct_zone=" + strconv.FormatUint(v, 10), true
	case ofpwire.XMTypeCTNwProto:
		return "ct_nw_proto=" + strconv.FormatUint(v, 10), true
	case ofpwire.XMTypeCTMark:
		return "ct_mark=" + hexMasked(v, vm, 0xffffffff), true
	case ofpwire.XMTypeCTLabel:
		l := "ct_label=" + formatWide(o.Value)
		if o.HasMask && !allOnes(o.Mask) {
			l += "/" + formatWide(o.Mask)
		}
		return l, true
	case ofpwire.XMTypeCTNwSrc:
		return "ct_nw_src=" + ipv4Masked(v, vm), true
	case ofpwire.XMTypeCTNwDst:
		return "ct_nw_dst=" + ipv4Masked(v, vm), true
	case ofpwire.XMTypeCTIPv6Src:
		return "ct_ipv6_src=" + ipv6Masked(o), true
	case ofpwire.XMTypeCTIPv6Dst:
		return "ct_ipv6_dst=" + ipv6Masked(o), true
	case ofpwire.XMTypeCTTpSrc:
		return "ct_tp_src=" + decMasked(v, vm, 0xffff), true
	case ofpwire.XMTypeCTTpDst:
		return "ct_tp_dst=" + decMasked(v, vm, 0xffff), true
	}
	return "", false
}

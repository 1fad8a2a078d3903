package ofptext

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// setFields are the fields set_field accepts, by Open vSwitch's names; the
// first name of a field is the one printed, the one ovs-ofctl prints.
var setFields = []struct {
	name  string
	field ofpwire.XMType
}{
	{"eth_dst", ofpwire.XMTypeEthDst}, {"dl_dst", ofpwire.XMTypeEthDst},
	{"eth_src", ofpwire.XMTypeEthSrc}, {"dl_src", ofpwire.XMTypeEthSrc},
	{"eth_type", ofpwire.XMTypeEthType}, {"dl_type", ofpwire.XMTypeEthType},
	{"vlan_vid", ofpwire.XMTypeVlanID}, {"vlan_pcp", ofpwire.XMTypeVlanPCP},
	{"ip_dscp", ofpwire.XMTypeIPDSCP}, {"nw_ecn", ofpwire.XMTypeIPECN}, {"ip_ecn", ofpwire.XMTypeIPECN},
	{"ip_proto", ofpwire.XMTypeIPProto}, {"nw_proto", ofpwire.XMTypeIPProto},
	{"ip_src", ofpwire.XMTypeIPv4Src}, {"ipv4_src", ofpwire.XMTypeIPv4Src}, {"nw_src", ofpwire.XMTypeIPv4Src},
	{"ip_dst", ofpwire.XMTypeIPv4Dst}, {"ipv4_dst", ofpwire.XMTypeIPv4Dst}, {"nw_dst", ofpwire.XMTypeIPv4Dst},
	{"tcp_src", ofpwire.XMTypeTCPSrc}, {"tcp_dst", ofpwire.XMTypeTCPDst},
	{"udp_src", ofpwire.XMTypeUDPSrc}, {"udp_dst", ofpwire.XMTypeUDPDst},
	{"sctp_src", ofpwire.XMTypeSCTPSrc}, {"sctp_dst", ofpwire.XMTypeSCTPDst},
	{"icmp_type", ofpwire.XMTypeICMPv4Type}, {"icmpv4_type", ofpwire.XMTypeICMPv4Type},
	{"icmp_code", ofpwire.XMTypeICMPv4Code}, {"icmpv4_code", ofpwire.XMTypeICMPv4Code},
	{"arp_op", ofpwire.XMTypeARPOpcode}, {"arp_spa", ofpwire.XMTypeARPSPA}, {"arp_tpa", ofpwire.XMTypeARPTPA},
	{"arp_sha", ofpwire.XMTypeARPSHA}, {"arp_tha", ofpwire.XMTypeARPTHA},
	{"ipv6_src", ofpwire.XMTypeIPv6Src}, {"ipv6_dst", ofpwire.XMTypeIPv6Dst},
	{"ipv6_label", ofpwire.XMTypeIPv6FLabel},
	{"icmpv6_type", ofpwire.XMTypeICMPv6Type}, {"icmpv6_code", ofpwire.XMTypeICMPv6Code},
	{"nd_target", ofpwire.XMTypeIPv6NDTarget}, {"nd_sll", ofpwire.XMTypeIPv6NDSLL}, {"nd_tll", ofpwire.XMTypeIPv6NDTLL},
	{"mpls_label", ofpwire.XMTypeMPLSLabel}, {"mpls_tc", ofpwire.XMTypeMPLSTC}, {"mpls_bos", ofpwire.XMTypeMPLSBOS},
	{"pbb_isid", ofpwire.XMTypePBBISID},
	{"tun_id", ofpwire.XMTypeTunnelID}, {"tunnel_id", ofpwire.XMTypeTunnelID},
	{"tun_src", ofpwire.XMTypeTunIPv4Src}, {"tun_dst", ofpwire.XMTypeTunIPv4Dst},
	{"tun_ipv6_src", ofpwire.XMTypeTunIPv6Src}, {"tun_ipv6_dst", ofpwire.XMTypeTunIPv6Dst},
}

func fieldByName(n string) (ofpwire.XMType, bool) {
	for _, f := range setFields {
		if f.name == n {
			return f.field, true
		}
	}
	return 0, false
}

func fieldName(f ofpwire.XMType) string {
	for _, sf := range setFields {
		if sf.field == f {
			return sf.name
		}
	}
	return ""
}

// fieldBits is the width of fields narrower than their OXM payload.
var fieldBits = map[ofpwire.XMType]int{
	ofpwire.XMTypeVlanID: 13, ofpwire.XMTypeVlanPCP: 3, ofpwire.XMTypeIPDSCP: 6, ofpwire.XMTypeIPECN: 2,
	ofpwire.XMTypeIPv6FLabel: 20, ofpwire.XMTypeMPLSLabel: 20, ofpwire.XMTypeMPLSTC: 3, ofpwire.XMTypeMPLSBOS: 1,
}

// parseFieldValue reads the value of field f as a MAC, IPv4, IPv6 address or
// a number, whichever the field holds.
func parseFieldValue(f ofpwire.XMType, s string) (ofpwire.OXM, error) {
	size, _, ok := ofpwire.FieldSize(f)
	if !ok {
		return ofpwire.OXM{}, fmt.Errorf("unknown field")
	}
	switch kindOf(f) {
	case kindMAC:
		var b [6]byte
		parts := strings.Split(s, ":")
		if len(parts) != 6 {
			return ofpwire.OXM{}, fmt.Errorf("bad MAC address %q", s)
		}
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 16, 8)
			if err != nil || len(p) == 0 || len(p) > 2 {
				return ofpwire.OXM{}, fmt.Errorf("bad MAC address %q", s)
			}
			b[i] = byte(v)
		}
		return ofpwire.NewOXM(f, b[:]), nil
	case kindIPv4:
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return ofpwire.OXM{}, fmt.Errorf("bad IPv4 address %q", s)
		}
		b := a.As4()
		return ofpwire.NewOXM(f, b[:]), nil
	case kindIPv6:
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return ofpwire.OXM{}, fmt.Errorf("bad IPv6 address %q", s)
		}
		b := a.As16()
		return ofpwire.NewOXM(f, b[:]), nil
	}
	bits := size * 8
	if fb, ok := fieldBits[f]; ok {
		bits = fb
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return ofpwire.OXM{}, fmt.Errorf("bad number %q", s)
	}
	if bits < 64 && v >= 1<<bits {
		return ofpwire.OXM{}, fmt.Errorf("%s out of range", s)
	}
	if f == ofpwire.XMTypeNwTOS && v&3 != 0 {
		// nw_tos is the DSCP bits in place: ovs-ofctl refuses ECN bits.
		return ofpwire.OXM{}, fmt.Errorf("%s is not a valid value for field nw_tos", s)
	}
	return ofpwire.OXMUint(f, v), nil
}

type valueKind int

const (
	kindNum valueKind = iota
	kindMAC
	kindIPv4
	kindIPv6
)

func kindOf(f ofpwire.XMType) valueKind {
	switch f {
	case ofpwire.XMTypeEthDst, ofpwire.XMTypeEthSrc, ofpwire.XMTypeARPSHA, ofpwire.XMTypeARPTHA,
		ofpwire.XMTypeIPv6NDSLL, ofpwire.XMTypeIPv6NDTLL:
		return kindMAC
	case ofpwire.XMTypeIPv4Src, ofpwire.XMTypeIPv4Dst, ofpwire.XMTypeARPSPA, ofpwire.XMTypeARPTPA,
		ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv4Dst:
		return kindIPv4
	case ofpwire.XMTypeIPv6Src, ofpwire.XMTypeIPv6Dst, ofpwire.XMTypeIPv6NDTarget,
		ofpwire.XMTypeTunIPv6Src, ofpwire.XMTypeTunIPv6Dst:
		return kindIPv6
	}
	return kindNum
}

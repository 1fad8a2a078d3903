package ofptext

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// setFields are the fields set_field accepts, by Open vSwitch's names; the
// first name of a field is the one printed, the one ovs-ofctl prints.
var setFields = []struct {
	name  string
	field ofp.XMType
}{
	{"eth_dst", ofp.XMTypeEthDst}, {"dl_dst", ofp.XMTypeEthDst},
	{"eth_src", ofp.XMTypeEthSrc}, {"dl_src", ofp.XMTypeEthSrc},
	{"eth_type", ofp.XMTypeEthType}, {"dl_type", ofp.XMTypeEthType},
	{"vlan_vid", ofp.XMTypeVlanID}, {"vlan_pcp", ofp.XMTypeVlanPCP},
	{"ip_dscp", ofp.XMTypeIPDSCP}, {"nw_ecn", ofp.XMTypeIPECN}, {"ip_ecn", ofp.XMTypeIPECN},
	{"ip_proto", ofp.XMTypeIPProto}, {"nw_proto", ofp.XMTypeIPProto},
	{"ip_src", ofp.XMTypeIPv4Src}, {"ipv4_src", ofp.XMTypeIPv4Src}, {"nw_src", ofp.XMTypeIPv4Src},
	{"ip_dst", ofp.XMTypeIPv4Dst}, {"ipv4_dst", ofp.XMTypeIPv4Dst}, {"nw_dst", ofp.XMTypeIPv4Dst},
	{"tcp_src", ofp.XMTypeTCPSrc}, {"tcp_dst", ofp.XMTypeTCPDst},
	{"udp_src", ofp.XMTypeUDPSrc}, {"udp_dst", ofp.XMTypeUDPDst},
	{"sctp_src", ofp.XMTypeSCTPSrc}, {"sctp_dst", ofp.XMTypeSCTPDst},
	{"icmp_type", ofp.XMTypeICMPv4Type}, {"icmpv4_type", ofp.XMTypeICMPv4Type},
	{"icmp_code", ofp.XMTypeICMPv4Code}, {"icmpv4_code", ofp.XMTypeICMPv4Code},
	{"arp_op", ofp.XMTypeARPOpcode}, {"arp_spa", ofp.XMTypeARPSPA}, {"arp_tpa", ofp.XMTypeARPTPA},
	{"arp_sha", ofp.XMTypeARPSHA}, {"arp_tha", ofp.XMTypeARPTHA},
	{"ipv6_src", ofp.XMTypeIPv6Src}, {"ipv6_dst", ofp.XMTypeIPv6Dst},
	{"ipv6_label", ofp.XMTypeIPv6FLabel},
	{"icmpv6_type", ofp.XMTypeICMPv6Type}, {"icmpv6_code", ofp.XMTypeICMPv6Code},
	{"nd_target", ofp.XMTypeIPv6NDTarget}, {"nd_sll", ofp.XMTypeIPv6NDSLL}, {"nd_tll", ofp.XMTypeIPv6NDTLL},
	{"mpls_label", ofp.XMTypeMPLSLabel}, {"mpls_tc", ofp.XMTypeMPLSTC}, {"mpls_bos", ofp.XMTypeMPLSBOS},
	{"pbb_isid", ofp.XMTypePBBISID},
	{"tun_id", ofp.XMTypeTunnelID}, {"tunnel_id", ofp.XMTypeTunnelID},
	{"tun_src", ofpwire.XMTypeTunIPv4Src}, {"tun_dst", ofpwire.XMTypeTunIPv4Dst},
	{"tun_ipv6_src", ofpwire.XMTypeTunIPv6Src}, {"tun_ipv6_dst", ofpwire.XMTypeTunIPv6Dst},
}

func fieldByName(n string) (ofp.XMType, bool) {
	for _, f := range setFields {
		if f.name == n {
			return f.field, true
		}
	}
	return 0, false
}

func fieldName(f ofp.XMType) string {
	for _, sf := range setFields {
		if sf.field == f {
			return sf.name
		}
	}
	return ""
}

// fieldBits is the width of fields narrower than their OXM payload.
var fieldBits = map[ofp.XMType]int{
	ofp.XMTypeVlanID: 13, ofp.XMTypeVlanPCP: 3, ofp.XMTypeIPDSCP: 6, ofp.XMTypeIPECN: 2,
	ofp.XMTypeIPv6FLabel: 20, ofp.XMTypeMPLSLabel: 20, ofp.XMTypeMPLSTC: 3, ofp.XMTypeMPLSBOS: 1,
}

// parseFieldValue reads the value of field f as a MAC, IPv4, IPv6 address or
// a number, whichever the field holds.
func parseFieldValue(f ofp.XMType, s string) (ofpwire.OXM, error) {
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
	return ofpwire.OXMUint(f, v), nil
}

type valueKind int

const (
	kindNum valueKind = iota
	kindMAC
	kindIPv4
	kindIPv6
)

func kindOf(f ofp.XMType) valueKind {
	switch f {
	case ofp.XMTypeEthDst, ofp.XMTypeEthSrc, ofp.XMTypeARPSHA, ofp.XMTypeARPTHA,
		ofp.XMTypeIPv6NDSLL, ofp.XMTypeIPv6NDTLL:
		return kindMAC
	case ofp.XMTypeIPv4Src, ofp.XMTypeIPv4Dst, ofp.XMTypeARPSPA, ofp.XMTypeARPTPA,
		ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv4Dst:
		return kindIPv4
	case ofp.XMTypeIPv6Src, ofp.XMTypeIPv6Dst, ofp.XMTypeIPv6NDTarget,
		ofpwire.XMTypeTunIPv6Src, ofpwire.XMTypeTunIPv6Dst:
		return kindIPv6
	}
	return kindNum
}

package ofptext

import (
	"fmt"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// prereqHints say, in ovs-ofctl's syntax, what a field needs in front of
// it (OpenFlow 1.3 table 12). A switch refuses a match without it
// (OFPBMC_BAD_PREREQ), and ovs-ofctl silently drops the field instead
// ("normalization changed ofp_match"), which turns del-flows nw_dst=X
// into a delete of every flow: Parse refuses it with this text before
// anything is sent.
var prereqHints = map[ofpwire.XMType]string{
	ofpwire.XMTypeInPhyPort:     "in_port",
	ofpwire.XMTypeVlanPCP:       "a VLAN tag (dl_vlan=N or vlan_tci=0x1000/0x1000)",
	ofpwire.XMTypeIPDSCP:        "ip or ipv6",
	ofpwire.XMTypeIPECN:         "ip or ipv6",
	ofpwire.XMTypeIPProto:       "ip or ipv6",
	ofpwire.XMTypeIPTTL:         "ip or ipv6",
	ofpwire.XMTypeIPFrag:        "ip or ipv6",
	ofpwire.XMTypeIPv4Src:       "ip or arp",
	ofpwire.XMTypeIPv4Dst:       "ip or arp",
	ofpwire.XMTypeTCPSrc:        "tcp or tcp6",
	ofpwire.XMTypeTCPDst:        "tcp or tcp6",
	ofpwire.XMTypeTCPFlags:      "tcp or tcp6",
	ofpwire.XMTypeUDPSrc:        "udp or udp6",
	ofpwire.XMTypeUDPDst:        "udp or udp6",
	ofpwire.XMTypeSCTPSrc:       "sctp or sctp6",
	ofpwire.XMTypeSCTPDst:       "sctp or sctp6",
	ofpwire.XMTypeICMPv4Type:    "icmp",
	ofpwire.XMTypeICMPv4Code:    "icmp",
	ofpwire.XMTypeARPOpcode:     "arp",
	ofpwire.XMTypeARPSPA:        "arp",
	ofpwire.XMTypeARPTPA:        "arp",
	ofpwire.XMTypeARPSHA:        "arp",
	ofpwire.XMTypeARPTHA:        "arp",
	ofpwire.XMTypeIPv6Src:       "ipv6",
	ofpwire.XMTypeIPv6Dst:       "ipv6",
	ofpwire.XMTypeIPv6FLabel:    "ipv6",
	ofpwire.XMTypeIPv6ExtHeader: "ipv6",
	ofpwire.XMTypeICMPv6Type:    "icmp6",
	ofpwire.XMTypeICMPv6Code:    "icmp6",
	ofpwire.XMTypeIPv6NDTarget:  "icmp6,icmp_type=135 or icmp6,icmp_type=136",
	ofpwire.XMTypeIPv6NDSLL:     "icmp6,icmp_type=135",
	ofpwire.XMTypeIPv6NDTLL:     "icmp6,icmp_type=136",
	ofpwire.XMTypeMPLSLabel:     "mpls or mplsm",
	ofpwire.XMTypeMPLSTC:        "mpls or mplsm",
	ofpwire.XMTypeMPLSBOS:       "mpls or mplsm",
	ofpwire.XMTypePBBISID:       "dl_type=0x88e7",
}

// PrereqError is a match whose field lacks its prerequisite. It is (for
// errors.Is) OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ, what a switch would answer.
type PrereqError struct {
	// Name is the field as the text named it (nw_dst), Field its OXM type.
	Name  string
	Field ofpwire.XMType
}

func (e *PrereqError) Error() string {
	need := prereqHints[e.Field]
	if need == "" {
		return fmt.Sprintf("%s lacks a prerequisite: OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ", e.Name)
	}
	return fmt.Sprintf("%s requires %s (e.g. %s,%s=...); a switch refuses it without: OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ",
		e.Name, need, firstAlternative(need), e.Name)
}

// Is makes errors.Is match the switch's error for the same mistake.
func (e *PrereqError) Is(target error) bool {
	return (&ofpwire.OFPError{Type: ofpwire.ETBadMatch, Code: ofpwire.BMCBadPrereq}).Is(target)
}

// firstAlternative is the first of "a or b" (the example to show).
func firstAlternative(s string) string {
	for i := 0; i+4 <= len(s); i++ {
		if s[i:i+4] == " or " {
			return s[:i]
		}
	}
	return s
}

// tokenFields are the fields Parse's keywords set, where that does not
// depend on the rest of the match (tp_*, icmp_* and nw_proto do).
var tokenFields = map[string]ofpwire.XMType{
	"nw_src": ofpwire.XMTypeIPv4Src, "ip_src": ofpwire.XMTypeIPv4Src, "nw_dst": ofpwire.XMTypeIPv4Dst, "ip_dst": ofpwire.XMTypeIPv4Dst,
	"arp_spa": ofpwire.XMTypeARPSPA, "arp_tpa": ofpwire.XMTypeARPTPA, "arp_sha": ofpwire.XMTypeARPSHA, "arp_tha": ofpwire.XMTypeARPTHA,
	"arp_op": ofpwire.XMTypeARPOpcode, "ipv6_src": ofpwire.XMTypeIPv6Src, "ipv6_dst": ofpwire.XMTypeIPv6Dst,
	"ipv6_label": ofpwire.XMTypeIPv6FLabel, "ipv6_exthdr": ofpwire.XMTypeIPv6ExtHeader, "nd_target": ofpwire.XMTypeIPv6NDTarget,
	"nd_sll": ofpwire.XMTypeIPv6NDSLL, "nd_tll": ofpwire.XMTypeIPv6NDTLL, "dl_vlan_pcp": ofpwire.XMTypeVlanPCP,
	"vlan_pcp": ofpwire.XMTypeVlanPCP, "nw_tos": ofpwire.XMTypeIPDSCP, "ip_dscp": ofpwire.XMTypeIPDSCP,
	"nw_ecn": ofpwire.XMTypeIPECN, "ip_ecn": ofpwire.XMTypeIPECN, "mpls_label": ofpwire.XMTypeMPLSLabel,
	"mpls_tc": ofpwire.XMTypeMPLSTC, "mpls_bos": ofpwire.XMTypeMPLSBOS, "pbb_isid": ofpwire.XMTypePBBISID,
	"nw_ttl": ofpwire.XMTypeIPTTL, "ip_ttl": ofpwire.XMTypeIPTTL, "nw_frag": ofpwire.XMTypeIPFrag, "ip_frag": ofpwire.XMTypeIPFrag,
}

// prereqError names the field of om that lacks its prerequisite with the
// name the text used for it (names maps fields to those), or returns nil.
func prereqError(om ofpwire.Match, names map[ofpwire.XMType]string) error {
	f, missing := ofpwire.MissingPrerequisite(om)
	if !missing {
		return nil
	}
	n := names[f]
	if n == "" {
		n = fmt.Sprint(f)
	}
	return &PrereqError{Name: n, Field: f}
}

package ofptext

import (
	"fmt"

	"github.com/netrack/openflow/ofp"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// prereqHints say, in ovs-ofctl's syntax, what a field needs in front of
// it (OpenFlow 1.3 table 12). A switch refuses a match without it
// (OFPBMC_BAD_PREREQ), and ovs-ofctl silently drops the field instead
// ("normalization changed ofp_match"), which turns del-flows nw_dst=X
// into a delete of every flow: Parse refuses it with this text before
// anything is sent.
var prereqHints = map[ofp.XMType]string{
	ofp.XMTypeInPhyPort:     "in_port",
	ofp.XMTypeVlanPCP:       "a VLAN tag (dl_vlan=N or vlan_tci=0x1000/0x1000)",
	ofp.XMTypeIPDSCP:        "ip or ipv6",
	ofp.XMTypeIPECN:         "ip or ipv6",
	ofp.XMTypeIPProto:       "ip or ipv6",
	ofp.XMTypeIPv4Src:       "ip or arp",
	ofp.XMTypeIPv4Dst:       "ip or arp",
	ofp.XMTypeTCPSrc:        "tcp or tcp6",
	ofp.XMTypeTCPDst:        "tcp or tcp6",
	ofp.XMTypeUDPSrc:        "udp or udp6",
	ofp.XMTypeUDPDst:        "udp or udp6",
	ofp.XMTypeSCTPSrc:       "sctp or sctp6",
	ofp.XMTypeSCTPDst:       "sctp or sctp6",
	ofp.XMTypeICMPv4Type:    "icmp",
	ofp.XMTypeICMPv4Code:    "icmp",
	ofp.XMTypeARPOpcode:     "arp",
	ofp.XMTypeARPSPA:        "arp",
	ofp.XMTypeARPTPA:        "arp",
	ofp.XMTypeARPSHA:        "arp",
	ofp.XMTypeARPTHA:        "arp",
	ofp.XMTypeIPv6Src:       "ipv6",
	ofp.XMTypeIPv6Dst:       "ipv6",
	ofp.XMTypeIPv6FLabel:    "ipv6",
	ofp.XMTypeIPv6ExtHeader: "ipv6",
	ofp.XMTypeICMPv6Type:    "icmp6",
	ofp.XMTypeICMPv6Code:    "icmp6",
	ofp.XMTypeIPv6NDTarget:  "icmp6,icmp_type=135 or icmp6,icmp_type=136",
	ofp.XMTypeIPv6NDSLL:     "icmp6,icmp_type=135",
	ofp.XMTypeIPv6NDTLL:     "icmp6,icmp_type=136",
	ofp.XMTypeMPLSLabel:     "mpls or mplsm",
	ofp.XMTypeMPLSTC:        "mpls or mplsm",
	ofp.XMTypeMPLSBOS:       "mpls or mplsm",
	ofp.XMTypePBBISID:       "dl_type=0x88e7",
}

// PrereqError is a match whose field lacks its prerequisite. It is (for
// errors.Is) OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ, what a switch would answer.
type PrereqError struct {
	// Name is the field as the text named it (nw_dst), Field its OXM type.
	Name  string
	Field ofp.XMType
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
var tokenFields = map[string]ofp.XMType{
	"nw_src": ofp.XMTypeIPv4Src, "ip_src": ofp.XMTypeIPv4Src, "nw_dst": ofp.XMTypeIPv4Dst, "ip_dst": ofp.XMTypeIPv4Dst,
	"arp_spa": ofp.XMTypeARPSPA, "arp_tpa": ofp.XMTypeARPTPA, "arp_sha": ofp.XMTypeARPSHA, "arp_tha": ofp.XMTypeARPTHA,
	"arp_op": ofp.XMTypeARPOpcode, "ipv6_src": ofp.XMTypeIPv6Src, "ipv6_dst": ofp.XMTypeIPv6Dst,
	"ipv6_label": ofp.XMTypeIPv6FLabel, "ipv6_exthdr": ofp.XMTypeIPv6ExtHeader, "nd_target": ofp.XMTypeIPv6NDTarget,
	"nd_sll": ofp.XMTypeIPv6NDSLL, "nd_tll": ofp.XMTypeIPv6NDTLL, "dl_vlan_pcp": ofp.XMTypeVlanPCP,
	"vlan_pcp": ofp.XMTypeVlanPCP, "nw_tos": ofp.XMTypeIPDSCP, "ip_dscp": ofp.XMTypeIPDSCP,
	"nw_ecn": ofp.XMTypeIPECN, "ip_ecn": ofp.XMTypeIPECN, "mpls_label": ofp.XMTypeMPLSLabel,
	"mpls_tc": ofp.XMTypeMPLSTC, "mpls_bos": ofp.XMTypeMPLSBOS, "pbb_isid": ofp.XMTypePBBISID,
}

// prereqError names the field of om that lacks its prerequisite with the
// name the text used for it (names maps fields to those), or returns nil.
func prereqError(om ofpwire.Match, names map[ofp.XMType]string) error {
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

package conntrack

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// Match selects connections by their tuples, as dpctl/flush-conntrack's
// arguments and a controller's NXT_CT_FLUSH give them: a zero field
// matches anything, except that an ICMP tuple's identifier, type and code
// are always compared.
type Match struct {
	Proto uint8
	// Family is 4 or 6 when an address is given, 0 otherwise.
	Family      uint8
	Orig, Reply MatchTuple
}

// MatchTuple is one direction of a Match.
type MatchTuple struct {
	Src, Dst         [16]byte // IPv4 addresses IPv4-mapped; zero: any
	SrcPort, DstPort uint16
	ICMPID           uint16
	ICMPType         uint8
	ICMPCode         uint8
}

func isICMP(proto uint8) bool { return proto == header.IPProtoICMP || proto == header.IPProtoICMPv6 }

func (m *Match) isZero() bool { return *m == Match{} }

// fiveTuple reports whether tu names one connection's direction: both
// addresses and, but for ICMP, both ports.
func (tu *MatchTuple) fiveTuple(proto uint8) bool {
	var zero [16]byte
	ok := tu.Src != zero && tu.Dst != zero
	if !isICMP(proto) {
		ok = ok && tu.SrcPort != 0 && tu.DstPort != 0
	}
	return ok
}

func (tu *MatchTuple) isZero(proto uint8) bool {
	z := MatchTuple{}
	if isICMP(proto) {
		z.ICMPID, z.ICMPType, z.ICMPCode = tu.ICMPID, tu.ICMPType, tu.ICMPCode
	}
	return *tu == z
}

// matches reports whether direction d of a connection fits tu, compared
// as protocol proto's (ICMP fields only when the match names ICMP). An
// empty tu matches anything.
func (tu *MatchTuple) matches(d *Tuple, proto uint8) bool {
	var zero [16]byte
	if *tu == (MatchTuple{}) {
		return true
	}
	if tu.Src != zero && tu.Src != d.Src || tu.Dst != zero && tu.Dst != d.Dst {
		return false
	}
	if isICMP(proto) {
		// The tracker keeps queries only, whose code is 0.
		return tu.ICMPID == d.SrcPort && tu.ICMPType == d.ICMPType && tu.ICMPCode == 0
	}
	return (tu.SrcPort == 0 || tu.SrcPort == d.SrcPort) && (tu.DstPort == 0 || tu.DstPort == d.DstPort)
}

func (m *Match) matches(c *Conn) bool {
	if m.Family != 0 && (m.Family == 6) != c.orig.IPv6 || m.Proto != 0 && m.Proto != c.proto {
		return false
	}
	return m.Orig.matches(&c.orig, m.Proto) && m.Reply.matches(&c.reply, m.Proto)
}

// FlushMatch removes the connections of zone (any zone when nil) that m
// selects; a zero m selects all. As in Open vSwitch, an original tuple
// naming one connection, with no reply tuple and no zone, means zone 0.
func (t *Tracker) FlushMatch(zone *uint16, m *Match) int {
	if m == nil || m.isZero() {
		return t.Flush(zone)
	}
	if zone == nil && m.Orig.fiveTuple(m.Proto) && m.Reply.isZero(m.Proto) {
		zone = new(uint16)
	}
	return t.removeIf(func(c *Conn) bool {
		return (zone == nil || c.orig.Zone == *zone) && m.matches(c)
	})
}

// ParseMatchTuple reads one tuple of dpctl/flush-conntrack into tu (orig
// or reply of m), in Open vSwitch's syntax:
// "ct_nw_src=A,ct_nw_dst=B,ct_nw_proto=6,ct_tp_src=P,ct_tp_dst=Q", with
// ct_ipv6_src/dst for IPv6 and icmp_id, icmp_type, icmp_code for ICMP.
func ParseMatchTuple(s string, m *Match, tu *MatchTuple) error {
	var err error
	for kv := range strings.SplitSeq(s, ",") {
		if kv == "" {
			continue
		}
		key, value, _ := strings.Cut(kv, "=")
		if value == "" {
			return fmt.Errorf("field %s missing value", key)
		}
		switch key {
		case "ct_nw_src", "ct_nw_dst", "ct_ipv6_src", "ct_ipv6_dst":
			fam := uint8(4)
			if strings.HasPrefix(key, "ct_ipv6") {
				fam = 6
			}
			if m.Family != 0 && m.Family != fam {
				return fmt.Errorf("the L3 protocol does not match %s", value)
			}
			a, perr := netip.ParseAddr(value)
			if perr != nil || a.Is4() != (fam == 4) {
				return fmt.Errorf("failed to parse field %s", key)
			}
			dst := &tu.Src
			if strings.HasSuffix(key, "dst") {
				dst = &tu.Dst
			}
			if *dst != ([16]byte{}) {
				return fmt.Errorf("%s is set multiple times", key)
			}
			m.Family, *dst = fam, a.As16() // IPv4-mapped for IPv4

		case "ct_nw_proto":
			if m.Proto, err = parseUint[uint8](value, 8); err != nil {
				return fmt.Errorf("failed to parse field %s", key)
			}
		case "ct_tp_src", "ct_tp_dst":
			p, perr := parseUint[uint16](value, 16)
			if perr != nil {
				return fmt.Errorf("failed to parse field %s", key)
			}
			if key == "ct_tp_src" {
				tu.SrcPort = p
			} else {
				tu.DstPort = p
			}
		case "icmp_id", "icmp_type", "icmp_code":
			if !isICMP(m.Proto) {
				return errors.New("invalid L4 fields")
			}
			if key == "icmp_id" {
				tu.ICMPID, err = parseUint[uint16](value, 16)
			} else {
				var v uint8
				v, err = parseUint[uint8](value, 8)
				if key == "icmp_type" {
					tu.ICMPType = v
				} else {
					tu.ICMPCode = v
				}
			}
			if err != nil {
				return fmt.Errorf("failed to parse field %s", key)
			}
		default:
			return fmt.Errorf("invalid conntrack tuple field: %s", key)
		}
	}
	if m.Proto == 0 && (tu.SrcPort != 0 || tu.DstPort != 0) {
		return errors.New("port is set without protocol")
	}
	return nil
}

func parseUint[T uint8 | uint16](s string, bits int) (T, error) {
	v, err := strconv.ParseUint(s, 0, bits)
	return T(v), err
}

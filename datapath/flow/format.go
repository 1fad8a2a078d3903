package flow

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// String prints the key in Open vSwitch's datapath-flow syntax, e.g.
// in_port(1),eth(src=..,dst=..),eth_type(0x0800),ipv4(...),udp(src=1024,dst=9).
// Only the headers the key's EthType/NwProto say are present are printed.
func (k *Key) String() string {
	var all Mask
	w := all.Words()
	for i := range w {
		w[i] = ^uint64(0)
	}
	// Fields most packets leave zero are shown only when set, so that plain
	// keys print as in OVS.
	if k.TunnelID == 0 {
		all.TunnelID = 0
	}
	if k.Tun.IsZero() {
		all.Tun = Tunnel{}
	}
	if k.IPv6ExtHdr == 0 {
		all.IPv6ExtHdr = 0
	}
	if k.CT == (Conntrack{}) {
		all.CT = Conntrack{}
	}
	return FormatMatch(k, &all)
}

// FormatMatch prints a megaflow: like Key.String, but a field appears only if
// its mask is non-zero, followed by /mask when the mask does not cover the
// whole field. Which headers are printed is decided from k (which is expected
// to be masked already), so a mask that wildcards EthType hides the L3 and L4
// fields as well; OVS's datapath rejects such masks anyway.
//
// recirc_id is printed first, as in OVS, but only when not 0: the datapath
// matches it exactly in every megaflow, and showing recirc_id(0) on every
// first-pass flow would say nothing.
func FormatMatch(k *Key, m *Mask) string {
	var f formatter
	if m.RecircID != 0 && k.RecircID != 0 {
		f.group("recirc_id", fmt.Sprintf("%#x", k.RecircID))
	}
	if m.TunnelID != 0 || !m.Tun.IsZero() {
		var s string
		if m.TunnelID != 0 {
			s = "tun_id=" + hexC(k.TunnelID)
			if m.TunnelID != ^uint64(0) {
				s += "/" + hexC(m.TunnelID)
			}
		}
		f.group("tunnel", append([]string{s}, tunnelFields(&k.Tun, &m.Tun)...)...)
	}
	if k.InPort == localPort && m.InPort == 0xffffffff {
		f.group("in_port", "LOCAL")
	} else {
		f.group("in_port", fieldU("", uint64(k.InPort), uint64(m.InPort), 0xffffffff))
	}
	ctFields(&f, &k.CT, &m.CT)
	f.group("eth", fieldMAC("src", k.EthSrc, m.EthSrc), fieldMAC("dst", k.EthDst, m.EthDst))
	f.vlans(k, m, 0)
	return f.b.String()
}

// ctStateNames are the ct_state bits in the order of flow.CT*.
var ctStateNames = [8]string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

// ctFields prints the conntrack fields a megaflow matches, as Open
// vSwitch's datapath flows show them: ct_state(+trk+est-new), ct_zone,
// ct_mark and ct_label (the original-direction tuple is not shown).
func ctFields(f *formatter, ct, cm *Conntrack) {
	if cm.State != 0 {
		var b strings.Builder
		for i, n := range ctStateNames {
			if cm.State&(1<<i) == 0 {
				continue
			}
			if ct.State&(1<<i) != 0 {
				b.WriteString("+" + n)
			} else {
				b.WriteString("-" + n)
			}
		}
		f.group("ct_state", b.String())
	}
	if cm.Zone != 0 {
		f.group("ct_zone", fmt.Sprintf("%#x", ct.Zone)+maskSuffix(uint64(cm.Zone), 0xffff))
	}
	if cm.Mark != 0 {
		f.group("ct_mark", fmt.Sprintf("%#x", ct.Mark)+maskSuffix(uint64(cm.Mark), 0xffffffff))
	}
	if cm.Label != ([16]byte{}) {
		l := fmt.Sprintf("%#x", ct.Label)
		if cm.Label != allOnes16 {
			l += fmt.Sprintf("/%#x", cm.Label)
		}
		f.group("ct_label", l)
	}
}

var allOnes16 = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// maskSuffix is "/mask" unless m covers the whole field.
func maskSuffix(m, full uint64) string {
	if m == full {
		return ""
	}
	return fmt.Sprintf("/%#x", m)
}

// localPort is OpenFlow's OFPP_LOCAL, the bridge's own interface, which the
// datapath numbers as OpenFlow does (datapath.LocalPort).
const localPort = 0xfffffffe

// formatter accumulates comma-separated groups of the form name(fields).
type formatter struct {
	b strings.Builder
}

// group writes name(fields...) skipping empty fields, and nothing at all if
// every field is empty (fully wildcarded).
func (f *formatter) group(name string, fields ...string) {
	n := 0
	for _, s := range fields {
		if s == "" {
			continue
		}
		if n == 0 {
			if f.b.Len() > 0 {
				f.b.WriteByte(',')
			}
			f.b.WriteString(name)
			f.b.WriteByte('(')
		} else {
			f.b.WriteByte(',')
		}
		f.b.WriteString(s)
		n++
	}
	if n > 0 {
		f.b.WriteByte(')')
	}
}

// vlans prints eth_type/vlan/encap nesting for the tags from index i on,
// then the payload headers.
func (f *formatter) vlans(k *Key, m *Mask, i int) {
	if i < len(k.VLAN) && k.VLAN[i].TPID != 0 {
		t, tm := k.VLAN[i], m.VLAN[i]
		f.group("eth_type", fieldX16(t.TPID, tm.TPID))
		f.group("vlan", vlanFields(t.TCI, tm.TCI)...)
		var inner formatter
		inner.vlans(k, m, i+1)
		if inner.b.Len() > 0 { // an empty encap() would say nothing
			if f.b.Len() > 0 {
				f.b.WriteByte(',')
			}
			f.b.WriteString("encap(")
			f.b.WriteString(inner.b.String())
			f.b.WriteByte(')')
		}
		return
	}
	f.group("eth_type", fieldX16(k.EthType, m.EthType))
	f.payload(k, m)
}

func vlanFields(tci, mask uint16) []string {
	fields := []string{
		fieldU("vid", uint64(tci&0x0fff), uint64(mask&0x0fff), 0x0fff),
		fieldU("pcp", uint64(tci>>13), uint64(mask>>13), 0x7),
	}
	if tci&0x1000 != 0 && mask&0x1000 != 0 {
		fields = append(fields, "dei=1")
	}
	return fields
}

// payload prints the L3 and L4 groups selected by EthType and NwProto.
func (f *formatter) payload(k *Key, m *Mask) {
	v6 := false
	switch k.EthType {
	case header.EtherTypeIPv4:
		f.group("ipv4",
			fieldIPv4("src", k.IPv4Src, m.IPv4Src),
			fieldIPv4("dst", k.IPv4Dst, m.IPv4Dst),
			fieldU("proto", uint64(k.NwProto), uint64(m.NwProto), 0xff),
			fieldX8("tos", k.NwTOS, m.NwTOS),
			fieldU("ttl", uint64(k.NwTTL), uint64(m.NwTTL), 0xff),
			fieldFrag(k.NwFrag, m.NwFrag))
	case header.EtherTypeIPv6:
		v6 = true
		f.group("ipv6",
			fieldIPv6("src", k.IPv6Src, m.IPv6Src),
			fieldIPv6("dst", k.IPv6Dst, m.IPv6Dst),
			fieldX32("label", k.IPv6Label, m.IPv6Label, 0xfffff),
			fieldU("proto", uint64(k.NwProto), uint64(m.NwProto), 0xff),
			fieldX8("tclass", k.NwTOS, m.NwTOS),
			fieldU("hlimit", uint64(k.NwTTL), uint64(m.NwTTL), 0xff),
			fieldFrag(k.NwFrag, m.NwFrag),
			fieldX32("exthdr", uint32(k.IPv6ExtHdr), uint32(m.IPv6ExtHdr), 0x1ff))
	case header.EtherTypeARP:
		f.group("arp",
			fieldIPv4("sip", k.IPv4Src, m.IPv4Src),
			fieldIPv4("tip", k.IPv4Dst, m.IPv4Dst),
			fieldU("op", uint64(k.NwProto), uint64(m.NwProto), 0xff),
			fieldMAC("sha", k.ArpSHA, m.ArpSHA),
			fieldMAC("tha", k.ArpTHA, m.ArpTHA))
		return
	case header.EtherTypeMPLS, header.EtherTypeMPLSMcast:
		l, lm := k.MPLSLse, m.MPLSLse
		f.group("mpls",
			fieldU("label", uint64(l>>12), uint64(lm>>12), 0xfffff),
			fieldU("tc", uint64(l>>9&7), uint64(lm>>9&7), 7),
			fieldU("ttl", uint64(l&0xff), uint64(lm&0xff), 0xff),
			fieldU("bos", uint64(l>>8&1), uint64(lm>>8&1), 1))
		return
	case header.EtherTypePBB:
		f.group("pbb", fieldU("isid", uint64(k.PBBISID), uint64(m.PBBISID), 0xffffff))
		return
	default:
		return
	}
	if k.NwFrag&FragLater != 0 {
		return
	}
	switch {
	case k.NwProto == header.IPProtoTCP:
		f.group("tcp", fieldU("src", uint64(k.TpSrc), uint64(m.TpSrc), 0xffff),
			fieldU("dst", uint64(k.TpDst), uint64(m.TpDst), 0xffff))
		f.group("tcp_flags", fieldTCPFlags(k.TCPFlags, m.TCPFlags))
	case k.NwProto == header.IPProtoUDP:
		f.group("udp", fieldU("src", uint64(k.TpSrc), uint64(m.TpSrc), 0xffff),
			fieldU("dst", uint64(k.TpDst), uint64(m.TpDst), 0xffff))
	case k.NwProto == header.IPProtoSCTP:
		f.group("sctp", fieldU("src", uint64(k.TpSrc), uint64(m.TpSrc), 0xffff),
			fieldU("dst", uint64(k.TpDst), uint64(m.TpDst), 0xffff))
	case k.NwProto == header.IPProtoICMP && !v6:
		f.group("icmp", fieldU("type", uint64(k.TpSrc), uint64(m.TpSrc), 0xff),
			fieldU("code", uint64(k.TpDst), uint64(m.TpDst), 0xff))
	case k.NwProto == header.IPProtoICMPv6 && v6:
		f.group("icmpv6", fieldU("type", uint64(k.TpSrc), uint64(m.TpSrc), 0xff),
			fieldU("code", uint64(k.TpDst), uint64(m.TpDst), 0xff))
		if (k.TpSrc == header.ICMPv6NeighborSolicit || k.TpSrc == header.ICMPv6NeighborAdvert) && k.TpDst == 0 {
			f.group("nd",
				fieldIPv6("target", k.NDTarget, m.NDTarget),
				fieldMAC("sll", k.ArpSHA, m.ArpSHA),
				fieldMAC("tll", k.ArpTHA, m.ArpTHA))
		}
	}
}

// fieldU prints an unsigned field in decimal with a hex mask, as OVS does
// for ports, TTLs and protocol numbers. full is the field's width: mask bits
// outside it are ignored (ICMP type/code live in 16-bit port fields). An
// empty name prints the bare value (in_port(1)).
func fieldU(name string, v, m, full uint64) string {
	m &= full
	if m == 0 {
		return ""
	}
	s := fmt.Sprintf("%d", v)
	if m != full {
		s += fmt.Sprintf("/%#x", m)
	}
	if name == "" {
		return s
	}
	return name + "=" + s
}

// hexC formats like C's %#x: zero has no 0x prefix.
func hexC(v uint64) string {
	if v == 0 {
		return "0"
	}
	return fmt.Sprintf("%#x", v)
}

func fieldX8(name string, v, m uint8) string {
	if m == 0 {
		return ""
	}
	s := name + "=" + hexC(uint64(v))
	if m != 0xff {
		s += "/" + hexC(uint64(m))
	}
	return s
}

func fieldX32(name string, v, m, full uint32) string {
	m &= full
	if m == 0 {
		return ""
	}
	s := name + "=" + hexC(uint64(v))
	if m != full {
		s += "/" + hexC(uint64(m))
	}
	return s
}

// fieldX16 prints an Ethernet type, always with four hex digits.
func fieldX16(v, m uint16) string {
	if m == 0 {
		return ""
	}
	s := fmt.Sprintf("0x%04x", v)
	if m != 0xffff {
		s += fmt.Sprintf("/0x%04x", m)
	}
	return s
}

func fieldMAC(name string, v, m [6]byte) string {
	if m == ([6]byte{}) {
		return ""
	}
	s := name + "=" + formatMAC(v)
	if m != [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		s += "/" + formatMAC(m)
	}
	return s
}

func formatMAC(a [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5])
}

func ipv4String(a uint32) string {
	return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)}).String()
}

func fieldIPv4(name string, v, m uint32) string {
	if m == 0 {
		return ""
	}
	s := name + "=" + ipv4String(v)
	if m != 0xffffffff {
		s += "/" + ipv4String(m)
	}
	return s
}

func fieldIPv6(name string, v, m [16]byte) string {
	if m == ([16]byte{}) {
		return ""
	}
	s := name + "=" + netip.AddrFrom16(v).String()
	var full [16]byte
	for i := range full {
		full[i] = 0xff
	}
	if m != full {
		s += "/" + netip.AddrFrom16(m).String()
	}
	return s
}

// fieldFrag prints the fragment state by name when both bits are matched,
// and as hex value/mask otherwise (a lone FragAny mask means "is a fragment",
// which no single name says).
func fieldFrag(v, m uint8) string {
	m &= FragAny | FragLater
	if m == 0 {
		return ""
	}
	if m != FragAny|FragLater {
		return "frag=" + hexC(uint64(v&m)) + "/" + hexC(uint64(m))
	}
	switch {
	case v&FragLater != 0:
		return "frag=later"
	case v&FragAny != 0:
		return "frag=first"
	}
	return "frag=no"
}

var tcpFlagNames = [12]string{"fin", "syn", "rst", "psh", "ack", "urg", "ece", "cwr", "ns", "[200]", "[400]", "[800]"}

// fieldTCPFlags prints flags as OVS does: an exact match as names joined by
// '|' ("0" for none), a partial mask as +name/-name for each matched bit.
func fieldTCPFlags(v, m uint16) string {
	m &= 0x0fff
	if m == 0 {
		return ""
	}
	var b strings.Builder
	if m == 0x0fff {
		for i, n := range tcpFlagNames {
			if v&(1<<i) != 0 {
				if b.Len() > 0 {
					b.WriteByte('|')
				}
				b.WriteString(n)
			}
		}
		if b.Len() == 0 {
			return "0"
		}
		return b.String()
	}
	for i, n := range tcpFlagNames {
		if m&(1<<i) == 0 {
			continue
		}
		if v&(1<<i) != 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
		b.WriteString(n)
	}
	return b.String()
}

// tunnelFields prints the outer-header fields of a tunnel() group as OVS
// does: src/dst for IPv4 (stored IPv4-mapped), ipv6_src/ipv6_dst otherwise,
// then tos, ttl and flags(+df+csum+key+oam).
func tunnelFields(t, m *Tunnel) []string {
	addr := func(name string, v, vm [16]byte) string {
		if vm == ([16]byte{}) {
			return ""
		}
		a := netip.AddrFrom16(v)
		if a.Is4In6() {
			return fieldIPv4(name, ipv4U32([4]byte(v[12:])), ipv4U32([4]byte(vm[12:])))
		}
		return fieldIPv6("ipv6_"+name, v, vm)
	}
	fs := []string{
		addr("src", t.Src, m.Src), addr("dst", t.Dst, m.Dst),
		fieldU("tos", uint64(t.TOS), uint64(m.TOS), 0xff),
		fieldU("ttl", uint64(t.TTL), uint64(m.TTL), 0xff),
	}
	if m.Flags != 0 {
		var b strings.Builder
		b.WriteString("flags(")
		for _, f := range [...]struct {
			bit  uint16
			name string
		}{{TunFlagDontFragment, "df"}, {TunFlagCsum, "csum"}, {TunFlagKey, "key"}, {TunFlagOAM, "oam"}} {
			if m.Flags&f.bit == 0 {
				continue
			}
			if t.Flags&f.bit != 0 {
				b.WriteByte('+')
			} else {
				b.WriteByte('-')
			}
			b.WriteString(f.name)
		}
		b.WriteByte(')')
		fs = append(fs, b.String())
	}
	if n := t.OptIndex(); n >= 0 && m.Flags&TunFlagOptIndex != 0 {
		// The one Geneve option the key carries, under its field's name.
		fs = append(fs, fieldU(fmt.Sprintf("tun_metadata%d", n), uint64(ipv4U32(t.Opt)), uint64(ipv4U32(m.Opt)), 0xffffffff))
	}
	return fs
}

func ipv4U32(a [4]byte) uint32 {
	return uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
}

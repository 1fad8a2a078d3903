package actions

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// localPort is the bridge's own interface (datapath.LocalPort, OpenFlow's
// LOCAL), printed by name as in_port is.
const localPort = 0xfffffffe

// String renders the action in the style of Open vSwitch datapath actions
// (as ovs-dpctl dump-flows prints them), so that people can read our flow
// dumps with their OVS habits. It allocates: it is for dumps and logs only.
func (a Action) String() string {
	switch a.Kind {
	case Output:
		if a.Port == localPort {
			return "output:LOCAL"
		}
		return fmt.Sprintf("output:%d", a.Port)
	case Controller:
		if ctx := a.ControllerContext(); ctx != 0 {
			return fmt.Sprintf("userspace(controller,arg=%d,context=%d)", a.ControllerArg(), ctx)
		}
		if arg := a.ControllerArg(); arg != 0 {
			return fmt.Sprintf("userspace(controller,arg=%d)", arg)
		}
		return "userspace(controller)"
	case SetEthSrc:
		return "set(eth(src=" + macString(&a.Addr) + "))"
	case SetEthDst:
		return "set(eth(dst=" + macString(&a.Addr) + "))"
	case SetIPv4Src:
		return "set(ipv4(src=" + netip.AddrFrom4([4]byte(a.Addr[:4])).String() + "))"
	case SetIPv4Dst:
		return "set(ipv4(dst=" + netip.AddrFrom4([4]byte(a.Addr[:4])).String() + "))"
	case SetIPv6Src:
		return "set(ipv6(src=" + netip.AddrFrom16(a.Addr).String() + "))"
	case SetIPv6Dst:
		return "set(ipv6(dst=" + netip.AddrFrom16(a.Addr).String() + "))"
	case SetIPTOS:
		// One kind serves IPv4 TOS and IPv6 traffic class, hence "ip".
		// OpenFlow's IP_DSCP and IP_ECN set-fields are SetIPTOS too:
		// DSCP d is Val8 d<<2 under Mask8 0xfc, ECN e is Val8 e under
		// Mask8 0x03.
		if a.Mask8 == 0 || a.Mask8 == 0xff {
			return fmt.Sprintf("set(ip(tos=%#x))", a.Val8)
		}
		return fmt.Sprintf("set(ip(tos=%#x/%#x))", a.Val8&a.Mask8, a.Mask8)
	case SetIPTTL:
		return fmt.Sprintf("set(ip(ttl=%d))", a.Val8)
	case DecIPTTL:
		return "dec_ttl"
	case SetL4Src:
		return fmt.Sprintf("set(l4(src=%d))", a.Val16)
	case SetL4Dst:
		return fmt.Sprintf("set(l4(dst=%d))", a.Val16)
	case PushVLAN:
		var b strings.Builder
		b.WriteString("push_vlan(")
		if a.Val16 != header.EtherTypeVLAN {
			fmt.Fprintf(&b, "tpid=%#x,", a.Val16)
		}
		writeTCI(&b, a.Val16b)
		b.WriteString(")")
		return b.String()
	case PopVLAN:
		return "pop_vlan"
	case SetVLANTCI:
		return setVLANString(a.Val16, a.Val16b)
	case Drop:
		return "drop"
	case PushMPLS:
		// Label, TC, TTL and bottom-of-stack come from the packet when the
		// action runs, so unlike OVS's push_mpls only the type is shown.
		t := uint16(header.EtherTypeMPLS)
		if a.Val16 == header.EtherTypeMPLSMcast {
			t = header.EtherTypeMPLSMcast
		}
		return fmt.Sprintf("push_mpls(eth_type=%#x)", t)
	case PopMPLS:
		return fmt.Sprintf("pop_mpls(eth_type=%#x)", a.Val16)
	case SetMPLSLabel:
		return fmt.Sprintf("set(mpls(label=%d))", a.Val32&0xfffff)
	case SetMPLSTC:
		return fmt.Sprintf("set(mpls(tc=%d))", a.Val8&7)
	case SetMPLSTTL:
		return fmt.Sprintf("set(mpls(ttl=%d))", a.Val8)
	case DecMPLSTTL:
		return "dec_mpls_ttl"
	case CopyTTLOut:
		return "copy_ttl_out"
	case CopyTTLIn:
		return "copy_ttl_in"
	case PushPBB:
		var b strings.Builder
		fmt.Fprintf(&b, "push_pbb(isid=%d", a.Val32&pbbISIDMax)
		if pcp := a.Val8 >> 5; pcp != 0 {
			fmt.Fprintf(&b, ",pcp=%d", pcp)
		}
		if a.Val8&0x10 != 0 {
			b.WriteString(",dei=1")
		}
		if a.Val8&0x08 != 0 {
			b.WriteString(",uca=1")
		}
		b.WriteString(")")
		return b.String()
	case PopPBB:
		return "pop_pbb"
	case SetPBBISID:
		return fmt.Sprintf("set(pbb(isid=%d))", a.Val32&pbbISIDMax)
	case SetTunnelID:
		return fmt.Sprintf("set(tunnel(tun_id=%#x))", binary.BigEndian.Uint64(a.Addr[:8]))
	case SetTunnelOpt:
		if a.Val8 == 0 {
			return "set(tunnel(tun_metadata=none))"
		}
		return fmt.Sprintf("set(tunnel(tun_metadata%d=%#x))", a.Val8-1, a.Val32)
	case SetTunnelSrc, SetTunnelDst:
		name := "src="
		if a.Kind == SetTunnelDst {
			name = "dst="
		}
		ip := netip.AddrFrom16(a.Addr)
		if !ip.Is4In6() {
			name = "ipv6_" + name
		}
		return "set(tunnel(" + name + ip.Unmap().String() + "))"
	case SetIPv6Label:
		return fmt.Sprintf("set(ipv6(label=%#x))", a.Val32&0xfffff)
	case SetARPOp:
		return fmt.Sprintf("set(arp(op=%d))", a.Val16)
	case SetARPSPA:
		return "set(arp(sip=" + netip.AddrFrom4([4]byte(a.Addr[:4])).String() + "))"
	case SetARPTPA:
		return "set(arp(tip=" + netip.AddrFrom4([4]byte(a.Addr[:4])).String() + "))"
	case SetARPSHA:
		return "set(arp(sha=" + macString(&a.Addr) + "))"
	case SetARPTHA:
		return "set(arp(tha=" + macString(&a.Addr) + "))"
	case SetNDTarget:
		return "set(nd(target=" + netip.AddrFrom16(a.Addr).String() + "))"
	case SetNDSLL:
		return "set(nd(sll=" + macString(&a.Addr) + "))"
	case SetNDTLL:
		return "set(nd(tll=" + macString(&a.Addr) + "))"
	case SetICMPType:
		// One kind serves ICMPv4 and ICMPv6, hence "icmp" for both.
		return fmt.Sprintf("set(icmp(type=%d))", a.Val8)
	case SetICMPCode:
		return fmt.Sprintf("set(icmp(code=%d))", a.Val8)
	case Meter:
		return fmt.Sprintf("meter(%d)", a.MeterID())
	case Recirc:
		return fmt.Sprintf("recirc(%#x)", a.RecircID())
	case CheckPktLen:
		// Open vSwitch prints the branches' actions; here each branch
		// is a recirculation.
		return fmt.Sprintf("check_pkt_len(size=%d,gt(recirc(%#x)),le(recirc(%#x)))", a.Val16, a.GreaterID(), a.LessEqualID())
	case CT:
		var b strings.Builder
		b.WriteString("ct(")
		sep := ""
		add := func(s string) { b.WriteString(sep + s); sep = "," }
		if a.Val8&CTFlagCommit != 0 {
			if a.Val8&CTFlagForce != 0 {
				add("force_commit")
			} else {
				add("commit")
			}
		}
		if a.Val16 != 0 {
			add(fmt.Sprintf("zone=%d", a.Val16))
		}
		if a.Val8&CTFlagMark != 0 {
			add(fmt.Sprintf("mark=%#x/%#x", a.Val32, a.CTMarkMask()))
		}
		if a.Val8&CTFlagLabel != 0 {
			add("label") // the value is in the CTLabel actions before it
		}
		if a.Val8&CTFlagNAT != 0 {
			add("nat") // the range is in the CTNAT actions before it
		}
		if a.Val8&CTFlagALGFTP != 0 {
			add("helper=ftp")
		}
		if a.Val8&CTFlagALGTFTP != 0 {
			add("helper=tftp")
		}
		b.WriteString(")")
		return b.String()
	case CTLabel:
		return fmt.Sprintf("ct_label(%x)", a.Addr)
	case CTLabelMask:
		return fmt.Sprintf("ct_label_mask(%x)", a.Addr)
	case CTClear:
		return "ct_clear"
	case CTNAT:
		dir := "dst"
		if a.Val8&CTNATSrc != 0 {
			dir = "src"
		}
		var flags string
		if a.Val8&CTNATPersistent != 0 {
			flags += ",persistent"
		}
		if a.Val8&CTNATRandom != 0 {
			flags += ",random"
		}
		return fmt.Sprintf("nat(%s=%s,ports=%d-%d%s)", dir, netip.AddrFrom16(a.Addr).Unmap(), a.Val16, a.Val16b, flags)
	case CTNATMax:
		return "nat_max(" + netip.AddrFrom16(a.Addr).Unmap().String() + ")"
	case SetICMPID:
		return fmt.Sprintf("set(icmp(id=%d))", a.Val16)
	case SetEthType:
		return fmt.Sprintf("set(eth_type(0x%04x))", a.Val16)
	case SetIPProto:
		return fmt.Sprintf("set(ip(proto=%d))", a.Val8)
	case SetMPLSBoS:
		return fmt.Sprintf("set(mpls(bos=%d))", a.Val8&1)
	}
	return fmt.Sprintf("invalid(kind=%d)", a.Kind)
}

// String renders the list as comma-separated actions; an empty list drops
// the packet, and prints so, as OVS does.
func (l List) String() string {
	if len(l) == 0 {
		return "drop"
	}
	var b strings.Builder
	for i := range l {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l[i].String())
	}
	return b.String()
}

func macString(a *[16]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3], a[4], a[5])
}

const (
	tciVIDMask = 0x0fff
	tciDEI     = 0x1000
	tciPCPMask = 0xe000
)

// writeTCI writes vid=,pcp= and, only when set, cfi=1 (the DEI bit).
func writeTCI(b *strings.Builder, tci uint16) {
	fmt.Fprintf(b, "vid=%d,pcp=%d", tci&tciVIDMask, tci>>13)
	if tci&tciDEI != 0 {
		b.WriteString(",cfi=1")
	}
}

// setVLANString names the fields a TCI rewrite touches when its mask covers
// whole fields, and falls back to a masked raw TCI otherwise.
func setVLANString(mask, tci uint16) string {
	switch mask {
	case 0, 0xffff:
		var b strings.Builder
		b.WriteString("set(vlan(")
		writeTCI(&b, tci)
		b.WriteString("))")
		return b.String()
	case tciVIDMask:
		return fmt.Sprintf("set(vlan(vid=%d))", tci&tciVIDMask)
	case tciPCPMask:
		return fmt.Sprintf("set(vlan(pcp=%d))", tci>>13)
	case tciVIDMask | tciPCPMask:
		return fmt.Sprintf("set(vlan(vid=%d,pcp=%d))", tci&tciVIDMask, tci>>13)
	}
	return fmt.Sprintf("set(vlan(tci=0x%04x/0x%04x))", tci&mask, mask)
}

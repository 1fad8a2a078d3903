package ofproto

import (
	"bytes"
	"fmt"
	"net"
	"slices"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Action × packet type, from OpenFlow 1.3.5 §5.12 (actions), §7.2.5
// (set-field: "the match of the flow entry must contain the OXM
// prerequisite corresponding to the field to be set, otherwise an error
// must be generated"; checksums follow the rewrite) and §6.4 (that error:
// OFPET_BAD_ACTION/OFPBAC_MATCH_INCONSISTENT). Each action is installed
// through the OpenFlow channel with the match its field needs, a packet of
// the type goes through the datapath, and the frame that comes out is
// decoded and checked.

type actionCase struct {
	name   string
	match  []ofpwire.OXM
	acts   []ofpwire.Action
	frame  string
	verify func(p gopacket.Packet) error // nil: the packet must be dropped
}

func setField(o ofpwire.OXM) ofpwire.Action { return &ofpwire.ActionSetField{Field: o} }

func layerOf[T gopacket.Layer](p gopacket.Packet, lt gopacket.LayerType) (T, error) {
	var zero T
	l := p.Layer(lt)
	if l == nil {
		return zero, fmt.Errorf("no %v layer in %v", lt, p)
	}
	return l.(T), nil
}

// checksumsOK re-serializes the decoded packet with computed checksums and
// compares it to what came out.
func checksumsOK(p gopacket.Packet) error {
	var ls []gopacket.SerializableLayer
	var net gopacket.NetworkLayer
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.IPv4:
			net = l
		case *layers.IPv6:
			net = l
		case *layers.TCP:
			_ = l.SetNetworkLayerForChecksum(net)
		case *layers.UDP:
			_ = l.SetNetworkLayerForChecksum(net)
		case *layers.ICMPv6:
			_ = l.SetNetworkLayerForChecksum(net)
		}
		s, ok := l.(gopacket.SerializableLayer)
		if !ok {
			ls = append(ls, gopacket.Payload(l.LayerContents()))
			continue
		}
		ls = append(ls, s)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ls...); err != nil {
		return err
	}
	if !bytes.Equal(buf.Bytes(), p.Data()) {
		return fmt.Errorf("checksums not updated:\n got %x\nwant %x", p.Data(), buf.Bytes())
	}
	return nil
}

func actionCases() []actionCase {
	u := ofpwire.OXMUint
	newIP4 := net.IPv4(198, 19, 0, 9).To4()
	newIP6 := net.ParseIP("fd00::77")
	newMAC := net.HardwareAddr{2, 0, 0, 0, 0, 0x77}
	ip4 := func(p gopacket.Packet) (*layers.IPv4, error) { return layerOf[*layers.IPv4](p, layers.LayerTypeIPv4) }
	ip6 := func(p gopacket.Packet) (*layers.IPv6, error) { return layerOf[*layers.IPv6](p, layers.LayerTypeIPv6) }
	want := func(ok bool, format string, args ...any) error {
		if ok {
			return nil
		}
		return fmt.Errorf(format, args...)
	}
	return []actionCase{
		{name: "set eth_dst", acts: []ofpwire.Action{setField(oxmBytes(ofpwire.XMTypeEthDst, newMAC))}, frame: "arp",
			verify: func(p gopacket.Packet) error {
				e, _ := layerOf[*layers.Ethernet](p, layers.LayerTypeEthernet)
				return want(bytes.Equal(e.DstMAC, newMAC), "eth_dst %v", e.DstMAC)
			}},
		{name: "set ipv4_src/udp", match: pUDP4, acts: []ofpwire.Action{setField(oxmBytes(ofpwire.XMTypeIPv4Src, newIP4))}, frame: "udp4",
			verify: func(p gopacket.Packet) error {
				ip, err := ip4(p)
				if err != nil {
					return err
				}
				if !ip.SrcIP.Equal(newIP4) {
					return fmt.Errorf("ipv4_src %v", ip.SrcIP)
				}
				return checksumsOK(p)
			}},
		{name: "set ipv4_dst/tcp", match: pTCP4, acts: []ofpwire.Action{setField(oxmBytes(ofpwire.XMTypeIPv4Dst, newIP4))}, frame: "tcp4",
			verify: func(p gopacket.Packet) error {
				ip, err := ip4(p)
				if err != nil {
					return err
				}
				if !ip.DstIP.Equal(newIP4) {
					return fmt.Errorf("ipv4_dst %v", ip.DstIP)
				}
				return checksumsOK(p)
			}},
		{name: "set ip_dscp/ipv4", match: pIPv4, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeIPDSCP, 46))}, frame: "icmp4",
			verify: func(p gopacket.Packet) error {
				ip, err := ip4(p)
				if err != nil {
					return err
				}
				if ip.TOS != 46<<2|1 {
					return fmt.Errorf("tos %#x, want DSCP 46 and ECN kept", ip.TOS)
				}
				return checksumsOK(p)
			}},
		{name: "set ip_ecn/ipv6", match: pIPv6, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeIPECN, 3))}, frame: "udp6",
			verify: func(p gopacket.Packet) error {
				ip, err := ip6(p)
				if err != nil {
					return err
				}
				return want(ip.TrafficClass == 12<<2|3, "traffic class %#x, want DSCP 12 kept and ECN 3", ip.TrafficClass)
			}},
		{name: "set ipv6_dst/tcp6", match: pTCP6, acts: []ofpwire.Action{setField(oxmBytes(ofpwire.XMTypeIPv6Dst, newIP6.To16()))}, frame: "tcp6",
			verify: func(p gopacket.Packet) error {
				ip, err := ip6(p)
				if err != nil {
					return err
				}
				if !ip.DstIP.Equal(newIP6) {
					return fmt.Errorf("ipv6_dst %v", ip.DstIP)
				}
				return checksumsOK(p)
			}},
		{name: "set ipv6_flabel", match: pIPv6, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeIPv6FLabel, 0xabcde))}, frame: "icmp6",
			verify: func(p gopacket.Packet) error {
				ip, err := ip6(p)
				if err != nil {
					return err
				}
				return want(ip.FlowLabel == 0xabcde, "flow label %#x", ip.FlowLabel)
			}},
		{name: "set tcp_dst/ipv6", match: pTCP6, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeTCPDst, 8080))}, frame: "tcp6",
			verify: func(p gopacket.Packet) error {
				tcp, err := layerOf[*layers.TCP](p, layers.LayerTypeTCP)
				if err != nil {
					return err
				}
				if tcp.DstPort != 8080 {
					return fmt.Errorf("tcp_dst %d", tcp.DstPort)
				}
				return checksumsOK(p)
			}},
		{name: "set udp_src/ipv4", match: pUDP4, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeUDPSrc, 4000))}, frame: "udp4",
			verify: func(p gopacket.Packet) error {
				udp, err := layerOf[*layers.UDP](p, layers.LayerTypeUDP)
				if err != nil {
					return err
				}
				if udp.SrcPort != 4000 {
					return fmt.Errorf("udp_src %d", udp.SrcPort)
				}
				return checksumsOK(p)
			}},
		{name: "set arp_tpa", match: pARP, acts: []ofpwire.Action{setField(oxmBytes(ofpwire.XMTypeARPTPA, newIP4))}, frame: "arp",
			verify: func(p gopacket.Packet) error {
				a, err := layerOf[*layers.ARP](p, layers.LayerTypeARP)
				if err != nil {
					return err
				}
				return want(bytes.Equal(a.DstProtAddress, newIP4), "arp_tpa %v", a.DstProtAddress)
			}},
		{name: "set icmpv4_type", match: pICMP4, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeICMPv4Type, 0))}, frame: "icmp4",
			verify: func(p gopacket.Packet) error {
				ic, err := layerOf[*layers.ICMPv4](p, layers.LayerTypeICMPv4)
				if err != nil {
					return err
				}
				if ic.TypeCode.Type() != 0 {
					return fmt.Errorf("icmp type %d", ic.TypeCode.Type())
				}
				// ICMPv4's checksum covers the message.
				sum := uint32(0)
				b := ic.Contents
				b = append(slices.Clone(b), ic.Payload...)
				for i := 0; i+1 < len(b); i += 2 {
					sum += uint32(b[i])<<8 | uint32(b[i+1])
				}
				for sum > 0xffff {
					sum = sum&0xffff + sum>>16
				}
				return want(sum == 0xffff, "ICMP checksum not updated")
			}},
		{name: "push_vlan+set vlan_vid+vlan_pcp", acts: []ofpwire.Action{&ofpwire.ActionPushVLAN{EtherType: 0x8100},
			setField(u(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent)|42)), setField(u(ofpwire.XMTypeVlanPCP, 5))}, frame: "udp4",
			verify: func(p gopacket.Packet) error {
				q, err := layerOf[*layers.Dot1Q](p, layers.LayerTypeDot1Q)
				if err != nil {
					return err
				}
				return want(q.VLANIdentifier == 42 && q.Priority == 5 && q.Type == layers.EthernetTypeIPv4, "tag %+v", q)
			}},
		{name: "pop_vlan", match: pVLAN, acts: []ofpwire.Action{&ofpwire.ActionPopVLAN{}}, frame: "vlan",
			verify: func(p gopacket.Packet) error {
				e, _ := layerOf[*layers.Ethernet](p, layers.LayerTypeEthernet)
				return want(e.EthernetType == layers.EthernetTypeIPv4 && p.Layer(layers.LayerTypeDot1Q) == nil, "still tagged: %v", p)
			}},
		{name: "set vlan_vid/tagged", match: pVLAN, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeVlanID, uint64(ofpwire.VIDPresent)|99))}, frame: "vlan",
			verify: func(p gopacket.Packet) error {
				q, err := layerOf[*layers.Dot1Q](p, layers.LayerTypeDot1Q)
				if err != nil {
					return err
				}
				return want(q.VLANIdentifier == 99 && q.Priority == 3, "tag %+v, want VID 99 and PCP 3 kept", q)
			}},
		{name: "push_mpls+set mpls_label", match: pIPv4, acts: []ofpwire.Action{&ofpwire.ActionPushMPLS{EtherType: 0x8847},
			setField(u(ofpwire.XMTypeMPLSLabel, 777))}, frame: "udp4",
			verify: func(p gopacket.Packet) error {
				m, err := layerOf[*layers.MPLS](p, layers.LayerTypeMPLS)
				if err != nil {
					return err
				}
				// §5.12 push MPLS: the TTL comes from the IP TTL.
				return want(m.Label == 777 && m.StackBottom && m.TTL == 64, "mpls %+v", m)
			}},
		{name: "set mpls_tc", match: pMPLS, acts: []ofpwire.Action{setField(u(ofpwire.XMTypeMPLSTC, 2))}, frame: "mpls",
			verify: func(p gopacket.Packet) error {
				m, err := layerOf[*layers.MPLS](p, layers.LayerTypeMPLS)
				if err != nil {
					return err
				}
				return want(m.TrafficClass == 2 && m.Label == 100, "mpls %+v", m)
			}},
		{name: "dec_mpls_ttl", match: pMPLS, acts: []ofpwire.Action{&ofpwire.ActionDecMPLSTTL{}}, frame: "mpls",
			verify: func(p gopacket.Packet) error {
				m, err := layerOf[*layers.MPLS](p, layers.LayerTypeMPLS)
				if err != nil {
					return err
				}
				return want(m.TTL == 63, "mpls ttl %d", m.TTL)
			}},
		{name: "dec_nw_ttl/ipv4", match: pIPv4, acts: []ofpwire.Action{&ofpwire.ActionDecNwTTL{}}, frame: "tcp4",
			verify: func(p gopacket.Packet) error {
				ip, err := ip4(p)
				if err != nil {
					return err
				}
				if ip.TTL != 63 {
					return fmt.Errorf("ttl %d", ip.TTL)
				}
				return checksumsOK(p)
			}},
		{name: "dec_nw_ttl/ipv6", match: pIPv6, acts: []ofpwire.Action{&ofpwire.ActionDecNwTTL{}}, frame: "udp6",
			verify: func(p gopacket.Packet) error {
				ip, err := ip6(p)
				if err != nil {
					return err
				}
				return want(ip.HopLimit == 63, "hop limit %d", ip.HopLimit)
			}},
		{name: "set_nw_ttl/ipv4", match: pIPv4, acts: []ofpwire.Action{&ofpwire.ActionSetNwTTL{TTL: 9}}, frame: "udp4",
			verify: func(p gopacket.Packet) error {
				ip, err := ip4(p)
				if err != nil {
					return err
				}
				if ip.TTL != 9 {
					return fmt.Errorf("ttl %d", ip.TTL)
				}
				return checksumsOK(p)
			}},
		// §5.12: a packet whose TTL the decrement would take to 0 is dropped
		// (and, with OFPC_INVALID_TTL_TO_CONTROLLER, sent to the controller).
		{name: "dec_nw_ttl/ttl1", match: pIPv4, acts: []ofpwire.Action{&ofpwire.ActionSetNwTTL{TTL: 1}, &ofpwire.ActionDecNwTTL{}}, frame: "udp4"},
	}
}

func TestConformanceActionPacketTypes(t *testing.T) {
	frames := cfFrames(t)
	for _, c := range actionCases() {
		t.Run(c.name, func(t *testing.T) {
			tb := newTestBridge(t)
			acts := append(slices.Clone(c.acts), &ofpwire.ActionOutput{Port: 2})
			tb.mustRequest(t, withActions(matchFlow(c.match...), acts))
			got := tb.forward(tb.p1, tb.p2, frames[c.frame])
			if c.verify == nil {
				if len(got) != 0 {
					t.Fatalf("%d frames out, want the packet dropped", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d frames out, want 1", len(got))
			}
			p := gopacket.NewPacket(got[0], layers.LayerTypeEthernet, gopacket.Default)
			if err := c.verify(p); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// withActions replaces fm's instructions with apply-actions acts.
func withActions(fm *ofpwire.FlowMod, acts []ofpwire.Action) *ofpwire.FlowMod {
	fm.Instructions = []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: acts}}
	return fm
}

// §7.2.5/§6.4: a set-field whose prerequisites the match lacks (as the
// actions before it changed the packet) is refused with
// BAD_ACTION/MATCH_INCONSISTENT; with them it is accepted.
func TestConformanceSetFieldPrerequisites(t *testing.T) {
	u := ofpwire.OXMUint
	ip := oxmBytes(ofpwire.XMTypeIPv4Src, cfIP4Dst)
	for _, c := range []struct {
		name  string
		match []ofpwire.OXM
		ins   []ofpwire.Instruction
		ok    bool
	}{
		{"ipv4_src without eth_type", nil, apply(setField(ip)), false},
		{"ipv4_src with ipv6", pIPv6, apply(setField(ip)), false},
		{"ipv4_src with ipv4", pIPv4, apply(setField(ip)), true},
		{"tcp_dst with ipv4 only", pIPv4, apply(setField(u(ofpwire.XMTypeTCPDst, 1))), false},
		{"tcp_dst with udp", pUDP4, apply(setField(u(ofpwire.XMTypeTCPDst, 1))), false},
		{"tcp_dst with tcp", pTCP4, apply(setField(u(ofpwire.XMTypeTCPDst, 1))), true},
		{"vlan_pcp untagged", nil, apply(setField(u(ofpwire.XMTypeVlanPCP, 1))), false},
		{"vlan_pcp after push_vlan", nil, apply(&ofpwire.ActionPushVLAN{EtherType: 0x8100}, setField(u(ofpwire.XMTypeVlanPCP, 1))), true},
		{"vlan_pcp after pop_vlan", pVLAN, apply(&ofpwire.ActionPopVLAN{}, setField(u(ofpwire.XMTypeVlanPCP, 1))), false},
		{"ipv4_src after push_mpls", pIPv4, apply(&ofpwire.ActionPushMPLS{EtherType: 0x8847}, setField(ip)), false},
		{"mpls_label after push_mpls", pIPv4, apply(&ofpwire.ActionPushMPLS{EtherType: 0x8847}, setField(u(ofpwire.XMTypeMPLSLabel, 5))), true},
		{"mpls_label on ipv4", pIPv4, apply(setField(u(ofpwire.XMTypeMPLSLabel, 5))), false},
		{"ipv4_dst after pop_mpls", pMPLS, apply(&ofpwire.ActionPopMPLS{EtherType: 0x0800}, setField(ip)), true},
		{"udp_src after pop_mpls", pMPLS, apply(&ofpwire.ActionPopMPLS{EtherType: 0x0800}, setField(u(ofpwire.XMTypeUDPSrc, 1))), false},
		{"ipv4_src after set eth_type", nil, apply(setField(u(ofpwire.XMTypeEthType, 0x0800)), setField(ip)), true},
		{"nd_target on echo", append(slices.Clone(pICMP6), u(ofpwire.XMTypeICMPv6Type, 128)), apply(setField(oxmBytes(ofpwire.XMTypeIPv6NDTarget, cfIP6Dst.To16()))), false},
		{"nd_target on ns", pNS, apply(setField(oxmBytes(ofpwire.XMTypeIPv6NDTarget, cfIP6Dst.To16()))), true},
		// The action set pushes before it sets, whatever the order given.
		{"write: vlan_pcp then push_vlan", nil, []ofpwire.Instruction{&ofpwire.InstrWriteActions{Actions: []ofpwire.Action{
			setField(u(ofpwire.XMTypeVlanPCP, 1)), &ofpwire.ActionPushVLAN{EtherType: 0x8100}, &ofpwire.ActionOutput{Port: 2}}}}, true},
		{"write: ipv4_src", nil, []ofpwire.Instruction{&ofpwire.InstrWriteActions{Actions: []ofpwire.Action{setField(ip)}}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := newTestBridge(t)
			fm := matchFlow(c.match...)
			fm.Instructions = c.ins
			if c.ok {
				tb.mustRequest(t, fm)
				return
			}
			tb.c.wantError(fm, ofpwire.ETBadAction, ofpwire.BACMatchInconsistent)
		})
	}
}

func apply(acts ...ofpwire.Action) []ofpwire.Instruction {
	return []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: acts}}
}

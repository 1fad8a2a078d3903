package xlate

import (
	"errors"
	"slices"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

func mplsKey(label uint32, ttl uint8) flow.Key {
	return flow.Key{InPort: 1, EthType: 0x8847, MPLSLse: label<<12 | lseBoS | uint32(ttl)}
}

func setB(f ofpwire.XMType, b ...byte) *ofpwire.ActionSetField {
	return &ofpwire.ActionSetField{Field: ofpwire.NewOXM(f, b)}
}

// TestTranslateNewActions covers the OpenFlow 1.3 actions for MPLS, PBB,
// TTLs, queues and VLAN push/pop: the datapath actions each becomes and
// what it puts in the mask.
func TestTranslateNewActions(t *testing.T) {
	ipv4 := ipv4Key()
	v6 := ipv4Key()
	v6.EthType = header.EtherTypeIPv6
	arp := flow.Key{InPort: 1, EthType: header.EtherTypeARP, NwProto: 1, IPv4Src: 1, IPv4Dst: 2}
	icmp4 := flow.Key{InPort: 1, EthType: header.EtherTypeIPv4, NwProto: header.IPProtoICMP, NwTTL: 9, TpSrc: 8}
	ns := flow.Key{InPort: 1, EthType: header.EtherTypeIPv6, NwProto: header.IPProtoICMPv6, TpSrc: header.ICMPv6NeighborSolicit, ArpSHA: [6]byte{2, 0, 0, 0, 0, 1}}
	nsNoOpt := ns
	nsNoOpt.ArpSHA = [6]byte{}
	echo6 := flow.Key{InPort: 1, EthType: header.EtherTypeIPv6, NwProto: header.IPProtoICMPv6, TpSrc: 128}
	pbb := flow.Key{InPort: 1, EthType: header.EtherTypePBB, PBBISID: 0x123456}
	tagged := ipv4Key()
	tagged.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: 5<<13 | 10}
	pushM := &ofpwire.ActionPushMPLS{EtherType: 0x8847}
	popM := func(t uint16) *ofpwire.ActionPopMPLS { return &ofpwire.ActionPopMPLS{EtherType: t} }
	cases := []translateCase{
		{name: "push mpls over ipv4 copies ttl", flows: []flowSpec{{0, 1, nil, ins(apply(pushM,
			setF(ofpwire.XMTypeMPLSLabel, 100), out(2)))}}, key: ipv4,
			want: actions.List{{Kind: actions.PushMPLS, Val16: 0x8847}, {Kind: actions.SetMPLSLabel, Val32: 100}, dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.NwTTL == 0xff && m.EthType == 0xffff && m.MPLSLse == 0 }},
		{name: "push mpls then match label in later table", flows: []flowSpec{
			{0, 1, nil, ins(apply(pushM, setF(ofpwire.XMTypeMPLSLabel, 100)), gotoT(1))},
			{1, 2, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x8847), oxm(ofpwire.XMTypeMPLSLabel, 100)}, ins(apply(out(3)))},
			{1, 1, nil, ins(apply(out(4)))}}, key: ipv4,
			want: actions.List{{Kind: actions.PushMPLS, Val16: 0x8847}, {Kind: actions.SetMPLSLabel, Val32: 100}, dpOut(3)},
			mask: func(m *flow.Mask) bool { return m.MPLSLse == 0 && m.IPv4Dst == 0 }},
		{name: "push mpls on 802.3 does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(pushM, out(2)))}},
			key: flow.Key{InPort: 1, EthType: 0x05ff}, want: actions.List{dpOut(2)}},
		{name: "pop mpls", flows: []flowSpec{{0, 1, nil, ins(apply(popM(0x0800), out(2)))}}, key: mplsKey(7, 9),
			want: actions.List{{Kind: actions.PopMPLS, Val16: 0x0800}, dpOut(2)}},
		{name: "pop mpls on ipv4 does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(popM(0x0800), out(2)))}},
			key: ipv4, want: actions.List{dpOut(2)}},
		{name: "pop mpls then later table on in_port", flows: []flowSpec{
			{0, 1, nil, ins(apply(popM(0x0800)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)}, ins(apply(out(2)))}}, key: mplsKey(7, 9),
			want: actions.List{{Kind: actions.PopMPLS, Val16: 0x0800}, dpOut(2)}},
		{name: "pop mpls then later table on ip fields refused", flows: []flowSpec{
			{0, 1, nil, ins(apply(popM(0x0800)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPv4Dst, 1)}, ins(apply(out(2)))}},
			key: mplsKey(7, 9), err: ErrUnsupported},
		{name: "pop mpls then eth_type match is known", flows: []flowSpec{
			{0, 1, nil, ins(apply(popM(0x0800)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800)}, ins(apply(out(2)))}},
			key: mplsKey(7, 9), want: actions.List{{Kind: actions.PopMPLS, Val16: 0x0800}, dpOut(2)}},
		{name: "pop mpls then dec ttl refused", flows: []flowSpec{{0, 1, nil, ins(apply(popM(0x0800), &ofpwire.ActionDecNwTTL{}))}},
			key: mplsKey(7, 9), err: ErrUnsupported},
		{name: "pop mpls then set ipv4 dst then match it", flows: []flowSpec{
			{0, 1, nil, ins(apply(popM(0x0800), setF(ofpwire.XMTypeIPv4Dst, 5)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPv4Dst, 5)}, ins(apply(out(2)))}},
			key: mplsKey(7, 9), want: actions.List{{Kind: actions.PopMPLS, Val16: 0x0800},
				{Kind: actions.SetIPv4Dst, Addr: [16]byte{0, 0, 0, 5}}, dpOut(2)}},
		{name: "pop mpls to a vlan tpid refused", flows: []flowSpec{{0, 1, nil, ins(apply(popM(0x8100)))}},
			key: mplsKey(7, 9), err: ErrUnsupported},
		{name: "set mpls label tc ttl", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeMPLSLabel, 0xabcde),
			setF(ofpwire.XMTypeMPLSTC, 5), &ofpwire.ActionSetMPLSTTL{TTL: 33}))}}, key: mplsKey(7, 9),
			want: actions.List{{Kind: actions.SetMPLSLabel, Val32: 0xabcde}, {Kind: actions.SetMPLSTC, Val8: 5}, {Kind: actions.SetMPLSTTL, Val8: 33}}},
		{name: "set mpls label on ipv4 does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeMPLSLabel, 1)))}},
			key: ipv4, want: nil, mask: func(m *flow.Mask) bool { return m.EthType == 0xffff }},
		{name: "dec mpls ttl", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionDecMPLSTTL{}, out(2)))}},
			key: mplsKey(7, 9), want: actions.List{{Kind: actions.DecMPLSTTL}, dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.MPLSLse == lseTTL }},
		{name: "dec mpls ttl at 1 is an invalid-ttl packet-in", flows: []flowSpec{
			{0, 1, nil, ins(apply(out(3), &ofpwire.ActionDecMPLSTTL{}, out(2)), write(out(5)))}}, key: mplsKey(7, 1),
			want: actions.List{dpOut(3), {Kind: actions.Controller, Val32: ControllerArg(ofpwire.PacketInReasonInvalidTTL, 0, 0xffff)}}},
		{name: "dec mpls ttl at 0 dropped by option", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionDecMPLSTTL{}, out(2)))}},
			key: mplsKey(7, 0), opts: Options{NoInvalidTTLToController: true}, want: nil},
		{name: "dec mpls ttl after push uses the ip ttl", flows: []flowSpec{
			{0, 1, nil, ins(apply(pushM, &ofpwire.ActionDecMPLSTTL{}, out(2)))}}, key: icmp4,
			want: actions.List{{Kind: actions.PushMPLS, Val16: 0x8847}, {Kind: actions.DecMPLSTTL}, dpOut(2)}},
		{name: "copy ttl out after push", flows: []flowSpec{
			{0, 1, nil, ins(apply(pushM, &ofpwire.ActionSetMPLSTTL{TTL: 1}, &ofpwire.ActionCopyTTLOut{}, &ofpwire.ActionDecMPLSTTL{}, out(2)))}},
			key: icmp4, want: actions.List{{Kind: actions.PushMPLS, Val16: 0x8847}, {Kind: actions.SetMPLSTTL, Val8: 1},
				{Kind: actions.CopyTTLOut}, {Kind: actions.DecMPLSTTL}, dpOut(2)}},
		{name: "copy ttl out on a received stack leaves the ttl unknown", flows: []flowSpec{
			{0, 1, nil, ins(apply(&ofpwire.ActionCopyTTLOut{}, &ofpwire.ActionDecMPLSTTL{}))}},
			key: mplsKey(7, 9), err: ErrUnsupported},
		{name: "copy ttl in", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionCopyTTLIn{}, out(2)))}},
			key: mplsKey(7, 9), want: actions.List{{Kind: actions.CopyTTLIn}, dpOut(2)}},
		{name: "copy ttl on ipv4 does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionCopyTTLIn{}, &ofpwire.ActionCopyTTLOut{}))}},
			key: ipv4, want: nil},
		{name: "push pbb copies vlan pcp", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPushPBB{EtherType: 0x88e7},
			setF(ofpwire.XMTypePBBISID, 0x777), out(2)))}}, key: tagged,
			want: actions.List{{Kind: actions.PushPBB, Val16: 0x88e7, Val8: 5 << 5}, {Kind: actions.SetPBBISID, Val32: 0x777}, dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.VLAN[0].TCI == 0xe000 }},
		{name: "push pbb over pbb copies the isid", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPushPBB{EtherType: 0x88e7}))}},
			key: pbb, want: actions.List{{Kind: actions.PushPBB, Val16: 0x88e7, Val32: 0x123456}}},
		{name: "pop pbb then output", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPopPBB{}, out(2)))}},
			key: pbb, want: actions.List{{Kind: actions.PopPBB}, dpOut(2)}},
		{name: "pop pbb then match eth_dst refused", flows: []flowSpec{
			{0, 1, nil, ins(apply(&ofpwire.ActionPopPBB{}), gotoT(1))},
			{1, 1, []ofpwire.OXM{ofpwire.NewOXM(ofpwire.XMTypeEthDst, []byte{1, 2, 3, 4, 5, 6})}, ins(apply(out(2)))}},
			key: pbb, err: ErrUnsupported},
		{name: "set tunnel id", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeTunnelID, 0x1122334455667788)))}},
			key: ipv4, want: actions.List{{Kind: actions.SetTunnelID, Addr: [16]byte{0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}}}},
		{name: "set tunnel dst and src (NXM)", flows: []flowSpec{{0, 1, nil, ins(apply(
			&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeTunIPv4Dst, []byte{198, 18, 20, 2})},
			&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeTunIPv6Src, []byte{0x20, 0x01, 0x0d, 0xb8, 15: 1})},
			out(2)))}},
			key: ipv4, want: actions.List{
				{Kind: actions.SetTunnelDst, Addr: [16]byte{10: 0xff, 11: 0xff, 198, 18, 20, 2}},
				{Kind: actions.SetTunnelSrc, Addr: [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}}, dpOut(2)}},
		{name: "set_field tun_flags refused", flows: []flowSpec{{0, 1, nil, ins(apply(
			&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeTunFlags, []byte{0, 1})}))}},
			key: ipv4, err: ErrUnsupported},
		{name: "match tun_src", flows: []flowSpec{{0, 1, []ofpwire.OXM{ofpwire.NewOXM(ofpwire.XMTypeTunIPv4Src, []byte{198, 18, 20, 1})}, ins(apply(out(2)))}},
			key: ipv4, want: nil,
			mask: func(m *flow.Mask) bool { return m.Tun.Src == ones16 }},
		{name: "set ipv6 flow label", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeIPv6FLabel, 0xbeef)))}},
			key: v6, want: actions.List{{Kind: actions.SetIPv6Label, Val32: 0xbeef}}},
		{name: "set ipv6 flow label on ipv4 does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeIPv6FLabel, 1)))}},
			key: ipv4, want: nil},
		{name: "set arp fields", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeARPOpcode, 2),
			setF(ofpwire.XMTypeARPSPA, 0x0a000009), setF(ofpwire.XMTypeARPTPA, 0x0a00000a),
			setB(ofpwire.XMTypeARPSHA, 2, 0, 0, 0, 0, 9), setB(ofpwire.XMTypeARPTHA, 2, 0, 0, 0, 0, 10)))}}, key: arp,
			want: actions.List{{Kind: actions.SetARPOp, Val16: 2}, {Kind: actions.SetARPSPA, Addr: [16]byte{10, 0, 0, 9}},
				{Kind: actions.SetARPTPA, Addr: [16]byte{10, 0, 0, 10}}, {Kind: actions.SetARPSHA, Addr: [16]byte{2, 0, 0, 0, 0, 9}},
				{Kind: actions.SetARPTHA, Addr: [16]byte{2, 0, 0, 0, 0, 10}}}},
		{name: "set arp op on ipv4 does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeARPOpcode, 2)))}},
			key: ipv4, want: nil},
		{name: "set ipv4 dst on arp does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeIPv4Dst, 2)))}},
			key: arp, want: nil},
		{name: "set icmpv4 type and code", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeICMPv4Type, 0),
			setF(ofpwire.XMTypeICMPv4Code, 3)))}}, key: icmp4,
			want: actions.List{{Kind: actions.SetICMPType, Val8: 0}, {Kind: actions.SetICMPCode, Val8: 3}}},
		{name: "set icmpv4 type on tcp does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeICMPv4Type, 0)))}},
			key: ipv4, want: nil},
		{name: "set icmpv6 type on icmpv4 does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeICMPv6Type, 0)))}},
			key: icmp4, want: nil},
		{name: "set nd target and sll", flows: []flowSpec{{0, 1, nil, ins(apply(
			setB(ofpwire.XMTypeIPv6NDTarget, 0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7), setB(ofpwire.XMTypeIPv6NDSLL, 2, 0, 0, 0, 0, 7)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, header.EtherTypeIPv6), oxm(ofpwire.XMTypeIPProto, 58), oxm(ofpwire.XMTypeICMPv6Type, 135),
				ofpwire.NewOXM(ofpwire.XMTypeIPv6NDSLL, []byte{2, 0, 0, 0, 0, 7})}, ins(apply(out(2)))}}, key: ns,
			want: actions.List{{Kind: actions.SetNDTarget, Addr: [16]byte{0x20, 1, 15: 7}},
				{Kind: actions.SetNDSLL, Addr: [16]byte{2, 0, 0, 0, 0, 7}}, dpOut(2)}},
		{name: "set nd sll without the option leaves it unknown", flows: []flowSpec{
			{0, 1, nil, ins(apply(setB(ofpwire.XMTypeIPv6NDSLL, 2, 0, 0, 0, 0, 7)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, header.EtherTypeIPv6), oxm(ofpwire.XMTypeIPProto, 58), oxm(ofpwire.XMTypeICMPv6Type, 135),
				ofpwire.NewOXM(ofpwire.XMTypeIPv6NDSLL, []byte{2, 0, 0, 0, 0, 7})}, ins(apply(out(2)))}}, key: nsNoOpt,
			err: ErrUnsupported},
		{name: "set nd tll on a solicitation does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setB(ofpwire.XMTypeIPv6NDTLL, 2, 0, 0, 0, 0, 7)))}},
			key: ns, want: nil},
		{name: "icmpv6 echo turned into ND makes the ND fields unknown", flows: []flowSpec{
			{0, 1, nil, ins(apply(setF(ofpwire.XMTypeICMPv6Type, header.ICMPv6NeighborSolicit)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, header.EtherTypeIPv6), oxm(ofpwire.XMTypeIPProto, 58), oxm(ofpwire.XMTypeICMPv6Type, 135),
				ofpwire.NewOXM(ofpwire.XMTypeIPv6NDTarget, make([]byte, 16))}, ins(apply(out(2)))}}, key: echo6,
			err: ErrUnsupported},
		{name: "ND turned into echo clears the ND fields", flows: []flowSpec{
			{0, 1, nil, ins(apply(setF(ofpwire.XMTypeICMPv6Type, 128)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, header.EtherTypeIPv6), oxm(ofpwire.XMTypeIPProto, 58), oxm(ofpwire.XMTypeICMPv6Type, 135)}, ins(apply(out(2)))},
			{1, 0, nil, ins(apply(out(3)))}}, key: ns,
			want: actions.List{{Kind: actions.SetICMPType, Val8: 128}, dpOut(3)}},
		{name: "masked vlan vid", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionSetField{
			Field: oxmM(ofpwire.XMTypeVlanID, 0x1000|0x00f, 0x1000|0x00f)}))}}, key: tagged,
			want: actions.List{{Kind: actions.SetVLANTCI, Val16: 0x00f, Val16b: 0x00f}}},
		{name: "masked ipv4 sets the address from the bits kept", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionSetField{
			Field: oxmM(ofpwire.XMTypeIPv4Dst, 7, 0xff)}))}}, key: ipv4, // 10.0.0.2 -> 10.0.0.7
			want: actions.List{func() actions.Action {
				a := actions.Action{Kind: actions.SetIPv4Dst}
				copy(a.Addr[:], []byte{10, 0, 0, 7})
				return a
			}()},
			mask: func(m *flow.Mask) bool { return m.IPv4Dst == 0xffffff00 }},
		{name: "set mpls bos", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeMPLSBOS, 0), out(2)))}},
			key: mplsKey(1, 1), want: actions.List{{Kind: actions.SetMPLSBoS, Val8: 0}, dpOut(2)}},
		{name: "set eth_type to its own value does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeEthType, 0x0800), out(2)))}},
			key: ipv4, want: actions.List{dpOut(2)}},
		{name: "set eth_type", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeEthType, 0x88b5), out(2)))}},
			key: ipv4, want: actions.List{{Kind: actions.SetEthType, Val16: 0x88b5}, dpOut(2)}},
		{name: "set eth_type to a VLAN TPID unsupported", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeEthType, 0x8100)))}},
			key: ipv4, err: ErrUnsupported},
		{name: "set metadata steers a later table", flows: []flowSpec{
			{0, 1, nil, ins(apply(&ofpwire.ActionSetField{Field: oxmM(ofpwire.XMTypeMetadata, 0x50, 0xf0)}), gotoT(1))},
			{1, 2, []ofpwire.OXM{oxmM(ofpwire.XMTypeMetadata, 0x50, 0xff)}, ins(apply(out(7)))},
			{1, 1, nil, ins(apply(out(8)))}}, key: ipv4, want: actions.List{dpOut(7)}},
		{name: "set metadata in the action set is too late", flows: []flowSpec{
			{0, 1, nil, ins(write(setF(ofpwire.XMTypeMetadata, 0x50), out(3)))}}, key: ipv4, want: actions.List{dpOut(3)}},
		{name: "set-queue does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionSetQueue{Queue: 3}, out(2)),
			write(&ofpwire.ActionSetQueue{Queue: 4}))}}, key: ipv4, want: actions.List{dpOut(2)}},
		{name: "output ANY refused", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortAny))))}},
			key: ipv4, err: ErrUnsupported},
		{name: "action set order with encapsulation", flows: []flowSpec{
			{0, 1, nil, ins(write(out(3), &ofpwire.ActionSetMPLSTTL{TTL: 7}, setF(ofpwire.XMTypeMPLSLabel, 9),
				&ofpwire.ActionDecMPLSTTL{}, &ofpwire.ActionCopyTTLOut{}, &ofpwire.ActionPushVLAN{EtherType: 0x8100},
				&ofpwire.ActionPushPBB{EtherType: 0x88e7}, pushM, &ofpwire.ActionPopVLAN{},
				&ofpwire.ActionSetQueue{Queue: 1}, &ofpwire.ActionCopyTTLIn{}))}}, key: tagged,
			want: actions.List{{Kind: actions.PopVLAN}, {Kind: actions.PushMPLS, Val16: 0x8847},
				{Kind: actions.PushPBB, Val16: 0x88e7}, {Kind: actions.PushVLAN, Val16: 0x8100}, dpOut(3)}},
		// (After push PBB the packet is no longer MPLS: the TTL actions and
		// the label set-field find no MPLS header.)
		{name: "action set: pop mpls before push vlan, dec before set", flows: []flowSpec{
			{0, 1, nil, ins(write(out(3), setF(ofpwire.XMTypeMPLSLabel, 9), &ofpwire.ActionDecMPLSTTL{},
				&ofpwire.ActionCopyTTLIn{}))}}, key: mplsKey(4, 20),
			want: actions.List{{Kind: actions.CopyTTLIn}, {Kind: actions.DecMPLSTTL}, {Kind: actions.SetMPLSLabel, Val32: 9}, dpOut(3)}},
	}
	runTranslateCases(t, cases)
}

// TestGroupBucketNewSetFieldsUndone: a non-final bucket's rewrites of the
// MPLS, tunnel, ICMP and ARP fields are put back before the next bucket.
func TestGroupBucketNewSetFieldsUndone(t *testing.T) {
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 1, ofpwire.GroupTypeAll,
		bkt(setF(ofpwire.XMTypeMPLSLabel, 99), &ofpwire.ActionDecMPLSTTL{}, setF(ofpwire.XMTypeTunnelID, 5), out(2)),
		bkt(out(3)))
	key := mplsKey(7, 9)
	key.TunnelID = 0x42
	res := translateGroups(t, ins(apply(grp(1), out(4))), gt, key, nil)
	tun := actions.Action{Kind: actions.SetTunnelID}
	tun.Addr[7] = 5
	back := actions.Action{Kind: actions.SetTunnelID}
	back.Addr[7] = 0x42
	want := actions.List{{Kind: actions.SetMPLSLabel, Val32: 99}, {Kind: actions.DecMPLSTTL}, tun, dpOut(2),
		{Kind: actions.SetMPLSLabel, Val32: 7}, {Kind: actions.SetMPLSTTL, Val8: 9}, back, dpOut(3), dpOut(4)}
	if !slices.Equal(res.Actions, want) {
		t.Fatalf("actions\n got %+v\nwant %+v", res.Actions, want)
	}
	if res.Mask.MPLSLse != lseLabel|lseTTL || res.Mask.TunnelID != ^uint64(0) {
		t.Fatalf("restored fields not in the mask: lse %#x tunnel %#x", res.Mask.MPLSLse, res.Mask.TunnelID)
	}
	// ICMP type/code and ARP fields use their own restore actions.
	gt2 := pipeline.NewGroupTable()
	addGroup(t, gt2, 1, ofpwire.GroupTypeAll, bkt(setF(ofpwire.XMTypeICMPv4Type, 0), out(2)), bkt(out(3)))
	icmp := flow.Key{InPort: 1, EthType: header.EtherTypeIPv4, NwProto: header.IPProtoICMP, TpSrc: 8}
	res = translateGroups(t, ins(apply(grp(1))), gt2, icmp, nil)
	want = actions.List{{Kind: actions.SetICMPType, Val8: 0}, dpOut(2), {Kind: actions.SetICMPType, Val8: 8}, dpOut(3)}
	if !slices.Equal(res.Actions, want) {
		t.Fatalf("icmp: actions\n got %+v\nwant %+v", res.Actions, want)
	}
	gt3 := pipeline.NewGroupTable()
	addGroup(t, gt3, 1, ofpwire.GroupTypeAll, bkt(setF(ofpwire.XMTypeARPTPA, 9), out(2)), bkt(out(3)))
	arp := flow.Key{InPort: 1, EthType: header.EtherTypeARP, NwProto: 1, IPv4Dst: 0x0a000001}
	res = translateGroups(t, ins(apply(grp(1))), gt3, arp, nil)
	want = actions.List{{Kind: actions.SetARPTPA, Addr: [16]byte{0, 0, 0, 9}}, dpOut(2),
		{Kind: actions.SetARPTPA, Addr: [16]byte{10, 0, 0, 1}}, dpOut(3)}
	if !slices.Equal(res.Actions, want) {
		t.Fatalf("arp: actions\n got %+v\nwant %+v", res.Actions, want)
	}
}

// TestGroupBucketEncapIrreversible: MPLS/PBB pushes and pops and copy TTL
// inwards cannot be undone, so only a final bucket may make them.
func TestGroupBucketEncapIrreversible(t *testing.T) {
	for _, a := range []ofpwire.Action{&ofpwire.ActionPushMPLS{EtherType: 0x8847},
		&ofpwire.ActionPushPBB{EtherType: 0x88e7}, &ofpwire.ActionCopyTTLIn{}, &ofpwire.ActionPopMPLS{EtherType: 0x0800}} {
		gt := pipeline.NewGroupTable()
		addGroup(t, gt, 1, ofpwire.GroupTypeAll, bkt(a, out(2)), bkt(out(3)))
		key := ipv4Key()
		if _, ok := a.(*ofpwire.ActionCopyTTLIn); ok {
			key = mplsKey(1, 5)
		}
		if _, ok := a.(*ofpwire.ActionPopMPLS); ok {
			key = mplsKey(1, 5)
		}
		p := build(t, []flowSpec{{prio: 0, ins: ins(apply(grp(1)))}})
		var res datapath.UpcallResult
		if err := Translate(p, &key, &res, Options{Groups: gt}); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%T in a non-final bucket: err %v, want ErrUnsupported", a, err)
		}
		// From the action set the last bucket is final: allowed there.
		gt2 := pipeline.NewGroupTable()
		addGroup(t, gt2, 1, ofpwire.GroupTypeAll, bkt(out(3)), bkt(a, out(2)))
		p = build(t, []flowSpec{{prio: 0, ins: ins(write(grp(1)))}})
		if err := Translate(p, &key, &res, Options{Groups: gt2}); err != nil {
			t.Fatalf("%T in the final bucket: %v", a, err)
		}
	}
}

// TestCheckActions: the OpenFlow errors a flow-mod or packet-out gets for
// actions Translate would always refuse.
func TestCheckActions(t *testing.T) {
	code := func(err error) uint16 {
		var oe *ofpwire.OFPError
		if !errors.As(err, &oe) || oe.Type != ofpwire.ETBadAction {
			return 0xffff
		}
		return oe.Code
	}
	cases := []struct {
		a         ofpwire.Action
		packetOut bool
		want      uint16 // 0xfffe: accepted
	}{
		{out(uint32(ofpwire.PortAny)), false, ofpwire.BACBadOutPort},
		{out(0), false, ofpwire.BACBadOutPort},
		{out(uint32(ofpwire.PortTable)), false, ofpwire.BACBadOutPort},
		{out(uint32(ofpwire.PortTable)), true, 0xfffe},
		{out(0xfffffff0), false, ofpwire.BACBadOutPort},
		{out(uint32(ofpwire.PortNormal)), false, 0xfffe},
		{out(7), false, 0xfffe},
		{&ofpwire.ActionPushMPLS{EtherType: 0x0800}, false, ofpwire.BACBadArgument},
		{&ofpwire.ActionPushMPLS{EtherType: 0x8848}, false, 0xfffe},
		{&ofpwire.ActionPopMPLS{EtherType: 0x8100}, false, ofpwire.BACBadArgument},
		{&ofpwire.ActionPopMPLS{EtherType: 0x0800}, false, 0xfffe},
		{&ofpwire.ActionPushPBB{EtherType: 0x8100}, false, ofpwire.BACBadArgument},
		{&ofpwire.ActionPushVLAN{EtherType: 0x0800}, false, ofpwire.BACBadArgument},
		{setF(ofpwire.XMTypeIPProto, 6), false, 0xfffe},
		{setF(ofpwire.XMTypeMPLSBOS, 1), false, 0xfffe},
		{setF(ofpwire.XMTypeMPLSBOS, 2), false, ofpwire.BACBadSetArgument},
		{setF(ofpwire.XMTypeEthType, 0x86dd), false, 0xfffe},
		{setF(ofpwire.XMTypeEthType, 0x05dc), false, ofpwire.BACBadSetArgument},
		{setF(ofpwire.XMTypeEthType, 0x88a8), false, ofpwire.BACBadSetArgument},
		{setF(ofpwire.XMTypeIPv6ExtHeader, 1), false, ofpwire.BACBadSetType},
		{setF(ofpwire.XMTypeInPort, 1), false, ofpwire.BACBadSetType},
		{&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeIPv4Dst, []byte{1, 2})}, false, ofpwire.BACBadSetLen},
		{&ofpwire.ActionSetField{Field: oxmM(ofpwire.XMTypeIPv4Dst, 1, 0xff)}, false, 0xfffe}, // reg_load, or OpenFlow 1.5
		{&ofpwire.ActionSetField{Field: oxmM(ofpwire.XMTypeIPv6ExtHeader, 1, 0xff)}, false, ofpwire.BACBadSetType},
		{&ofpwire.ActionSetField{Field: oxmM(ofpwire.XMTypeVlanID, 0x1001, 0x1fff)}, false, 0xfffe},
		{setF(ofpwire.XMTypePBBISID, 1), false, 0xfffe},
		{&ofpwire.ActionSetQueue{Queue: 1}, false, 0xfffe},
		{&ofpwire.ActionExperimenter{Experimenter: 1}, false, ofpwire.BACBadExperimenter},
	}
	for i, c := range cases {
		err := CheckActions([]ofpwire.Action{c.a}, c.packetOut)
		got := uint16(0xfffe)
		if err != nil {
			got = code(err)
		}
		if got != c.want {
			t.Errorf("case %d %T%+v packetOut=%v: code %#x (%v), want %#x", i, c.a, c.a, c.packetOut, got, err, c.want)
		}
	}
	if err := CheckInstructions(ins(apply(out(1)), write(out(uint32(ofpwire.PortAny))))); code(err) != ofpwire.BACBadOutPort {
		t.Fatalf("CheckInstructions missed a bad write-actions port: %v", err)
	}
}

// TestOutputTable: a packet-out's output to TABLE runs the packet through
// the bridge's pipeline; later packet-out actions see it unchanged.
func TestOutputTable(t *testing.T) {
	bridge := build(t, []flowSpec{
		{0, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800)}, ins(apply(setF(ofpwire.XMTypeIPv4Dst, 9), out(4)), write(out(5)), gotoT(1))},
		{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxm(ofpwire.XMTypeIPv4Dst, 9)}, ins(apply(&ofpwire.ActionPushVLAN{EtherType: 0x8100}))},
	})
	key := ipv4Key()
	for _, tail := range []bool{false, true} {
		po := []ofpwire.Action{setF(ofpwire.XMTypeTCPDst, 443), out(uint32(ofpwire.PortTable))}
		if tail {
			po = append(po, out(6))
		}
		scratch := build(t, []flowSpec{{0, 0, nil, ins(apply(po...))}})
		var res datapath.UpcallResult
		if err := Translate(scratch, &key, &res, Options{Table: bridge}); err != nil {
			t.Fatal(err)
		}
		want := actions.List{{Kind: actions.SetL4Dst, Val16: 443}, {Kind: actions.SetIPv4Dst, Addr: [16]byte{0, 0, 0, 9}},
			dpOut(4), {Kind: actions.PushVLAN, Val16: 0x8100}, dpOut(5)}
		if tail {
			want = append(want, actions.Action{Kind: actions.PopVLAN},
				actions.Action{Kind: actions.SetIPv4Dst, Addr: [16]byte{10, 0, 0, 2}}, dpOut(6))
		}
		if !slices.Equal(res.Actions, want) {
			t.Fatalf("tail=%v: actions\n got %+v\nwant %+v", tail, res.Actions, want)
		}
	}
	// Without a pipeline to submit to (a flow table entry), TABLE is refused.
	p := build(t, []flowSpec{{0, 0, nil, ins(apply(out(uint32(ofpwire.PortTable))))}})
	var res datapath.UpcallResult
	if err := Translate(p, &key, &res, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("TABLE outside packet-out: %v", err)
	}
	// An irreversible change before more packet-out actions is refused.
	mpls := build(t, []flowSpec{{0, 0, nil, ins(apply(&ofpwire.ActionPushMPLS{EtherType: 0x8847}, out(2)))}})
	scratch := build(t, []flowSpec{{0, 0, nil, ins(apply(out(uint32(ofpwire.PortTable)), out(3)))}})
	if err := Translate(scratch, &key, &res, Options{Table: mpls}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("push MPLS in TABLE then more actions: %v", err)
	}
	scratch = build(t, []flowSpec{{0, 0, nil, ins(apply(out(3), out(uint32(ofpwire.PortTable))))}})
	if err := Translate(scratch, &key, &res, Options{Table: mpls}); err != nil {
		t.Fatalf("push MPLS in TABLE as the last action: %v", err)
	}
}

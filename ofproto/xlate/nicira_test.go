package xlate

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func reg(i int) ofpwire.XMType { return ofpwire.XMTypeReg0 + ofpwire.XMType(i) }

func resubmitT(t uint8) *ofpwire.ActionResubmit {
	return &ofpwire.ActionResubmit{InPort: ofpwire.PortIn, Table: t}
}

func move(src, dst ofpwire.XMType, srcOfs, dstOfs, n uint16) *ofpwire.ActionRegMove {
	return &ofpwire.ActionRegMove{Src: src, Dst: dst, SrcOfs: srcOfs, DstOfs: dstOfs, NBits: n}
}

func setM(f ofpwire.XMType, v, m uint64) *ofpwire.ActionSetField {
	return &ofpwire.ActionSetField{Field: oxmM(f, v, m)}
}

// TestTranslateNicira: registers steer later lookups without touching the
// megaflow; resubmit runs another table and comes back; move and masked
// loads write registers and packet fields; exit stops the actions but not
// the action set.
func TestTranslateNicira(t *testing.T) {
	tcp := ipv4Key() // 10.0.0.1:1234 -> 10.0.0.2:80, in_port 1
	ethSet := func(b ...byte) actions.Action {
		a := actions.Action{Kind: actions.SetEthDst}
		copy(a.Addr[:], b)
		return a
	}
	runTranslateCases(t, []translateCase{
		{name: "register written then matched, no packet bit in the mask",
			flows: []flowSpec{
				{0, 1, nil, ins(apply(setF(reg(3), 7)), gotoT(1))},
				{1, 5, []ofpwire.OXM{oxm(reg(3), 7)}, ins(apply(out(2)))},
				{1, 1, nil, ins(apply(out(3)))}},
			key: tcp, want: actions.List{dpOut(2)},
			mask: func(m *flow.Mask) bool { m.InPort = 0; return m.IsZero() }}, // in_port: outputs compare with it
		{name: "xreg and reg are one register file",
			flows: []flowSpec{
				{0, 1, nil, ins(apply(&ofpwire.ActionSetField{Field: ofpwire.OXMUint(ofpwire.XMTypeXReg0, 0x0000000500000006)}), gotoT(1))},
				{1, 5, []ofpwire.OXM{oxm(reg(0), 5), oxm(reg(1), 6)}, ins(apply(out(2)))}},
			key: tcp, want: actions.List{dpOut(2)}},
		{name: "resubmit runs the other table and comes back",
			flows: []flowSpec{
				{0, 1, nil, ins(apply(out(2), resubmitT(5), out(4)))},
				{5, 1, nil, ins(apply(out(3)))}},
			key: tcp, want: actions.List{dpOut(2), dpOut(3), dpOut(4)}},
		{name: "resubmit to a lower table, with another in_port for its lookup only",
			flows: []flowSpec{
				{3, 1, nil, ins(apply(out(5)))},
				{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)}, ins(apply(&ofpwire.ActionResubmit{InPort: 7, Table: 0}, resubmitT(3)))},
				{0, 2, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 7)}, ins(apply(out(uint32(ofpwire.PortIn)), out(6)))}},
			key: tcp, want: actions.List{dpOut(1), dpOut(6), dpOut(5)}},
		{name: "resubmit finding nothing does nothing",
			flows: []flowSpec{{0, 1, nil, ins(apply(resubmitT(9), out(2)))}},
			key:   tcp, want: actions.List{dpOut(2)}},
		{name: "resubmit loop is cut and drops the packet",
			flows: []flowSpec{{0, 1, nil, ins(apply(setF(reg(0), 1), resubmitT(0)))}},
			key:   tcp, want: actions.List{}},
		{name: "resubmits to later tables do not deepen",
			flows: func() (fs []flowSpec) {
				for i := range uint8(100) {
					fs = append(fs, flowSpec{i, 1, nil, ins(apply(resubmitT(i + 1)))})
				}
				return append(fs, flowSpec{100, 1, nil, ins(apply(out(2)))})
			}(),
			key: tcp, want: actions.List{dpOut(2)}},
		{name: "write-actions inside a resubmit join the action set",
			flows: []flowSpec{
				{0, 1, nil, ins(apply(resubmitT(2)))},
				{2, 1, nil, ins(write(out(9)))}},
			key: tcp, want: actions.List{dpOut(9)}},
		{name: "move ip_dst to a register, match it",
			flows: []flowSpec{
				{0, 1, nil, ins(apply(move(ofpwire.XMTypeIPv4Dst, reg(0), 0, 0, 32)), gotoT(1))},
				{1, 5, []ofpwire.OXM{oxm(reg(0), 0x0a000002)}, ins(apply(out(2)))}},
			key: tcp, want: actions.List{dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.IPv4Dst == ^uint32(0) && m.IPv4Src == 0 }},
		{name: "move a register into part of eth_dst: the rest comes from the packet",
			flows: []flowSpec{{0, 1, nil, ins(apply(setF(reg(1), 0xab), move(reg(1), ofpwire.XMTypeEthDst, 0, 0, 8), out(2)))}},
			key:   func() flow.Key { k := tcp; k.EthDst = [6]byte{2, 0, 0, 0, 0, 1}; return k }(),
			want:  actions.List{ethSet(2, 0, 0, 0, 0, 0xab), dpOut(2)},
			mask:  func(m *flow.Mask) bool { return m.EthDst == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0} }},
		{name: "load into part of a register keeps the rest",
			flows: []flowSpec{
				{0, 1, nil, ins(apply(setF(reg(2), 0x11223344), setM(reg(2), 0xaa00, 0xff00)), gotoT(1))},
				{1, 5, []ofpwire.OXM{oxm(reg(2), 0x1122aa44)}, ins(apply(out(2)))}},
			key: tcp, want: actions.List{dpOut(2)}},
		{name: "masked load on tcp_dst sets the whole port",
			flows: []flowSpec{{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x800), oxm(ofpwire.XMTypeIPProto, 6)},
				ins(apply(setM(ofpwire.XMTypeTCPDst, 0x1f00, 0xff00), out(2)))}},
			key: tcp, want: actions.List{{Kind: actions.SetL4Dst, Val16: 0x1f50}, dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.TpDst == 0x00ff }},
		{name: "exit stops the actions everywhere, the action set still runs",
			flows: []flowSpec{
				{0, 1, nil, ins(apply(resubmitT(2), resubmitT(1), out(3)), write(out(7)), gotoT(4))},
				{2, 1, nil, ins(write(out(8)))},
				{1, 1, nil, ins(apply(out(4), &ofpwire.ActionExit{}, out(5)))},
				{4, 1, nil, ins(apply(out(6)))}},
			key: tcp, want: actions.List{dpOut(4), dpOut(8)}},
		{name: "note does nothing",
			flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionNote{Note: []byte{1, 2, 3, 0, 0, 0}}, out(2)))}},
			key:   tcp, want: actions.List{dpOut(2)}},
		{name: "push and pop swap eth_src and eth_dst",
			flows: []flowSpec{{0, 1, nil, ins(apply(
				&ofpwire.ActionStack{Field: ofpwire.XMTypeEthSrc, NBits: 48},
				&ofpwire.ActionStack{Field: ofpwire.XMTypeEthDst, NBits: 48},
				&ofpwire.ActionStack{Pop: true, Field: ofpwire.XMTypeEthSrc, NBits: 48},
				&ofpwire.ActionStack{Pop: true, Field: ofpwire.XMTypeEthDst, NBits: 48}, out(2)))}},
			key: func() flow.Key {
				k := tcp
				k.EthSrc, k.EthDst = [6]byte{2, 0, 0, 0, 0, 1}, [6]byte{2, 0, 0, 0, 0, 2}
				return k
			}(),
			want: actions.List{func() actions.Action {
				a := actions.Action{Kind: actions.SetEthSrc}
				copy(a.Addr[:], []byte{2, 0, 0, 0, 0, 2})
				return a
			}(), ethSet(2, 0, 0, 0, 0, 1), dpOut(2)}},
		{name: "pop from an empty stack writes nothing",
			flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionStack{Pop: true, Field: reg(0), NBits: 32}, out(2)))}},
			key:   tcp, want: actions.List{dpOut(2)}},
		{name: "in_port written to 0 lets output reach the input port",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(1),
				&ofpwire.ActionSetField{Field: ofpwire.OXMUintMasked(ofpwire.XMTypeInPort16, 0, 0xffff)}, out(1)))}},
			key: tcp, want: actions.List{dpOut(1)}},
		{name: "in_port written steers the next lookup",
			flows: []flowSpec{{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)}, ins(apply(
				&ofpwire.ActionSetField{Field: ofpwire.OXMUintMasked(ofpwire.XMTypeInPort16, 7, 0xffff)}, resubmitT(0)))},
				{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 7)}, ins(apply(out(3)))}},
			key: tcp, want: actions.List{dpOut(3)}},
		{name: "dec_ttl() with no controller drops an expiring packet silently",
			flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionDecTTLIDs{}, out(2)))}},
			key:   func() flow.Key { k := tcp; k.NwTTL = 1; return k }(), want: actions.List{}},
		{name: "dec_ttl() decrements a live one",
			flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionDecTTLIDs{}, out(2)))}},
			key:   tcp, want: actions.List{{Kind: actions.DecIPTTL}, dpOut(2)}},
		{name: "ip_ttl and ip_frag match",
			flows: []flowSpec{{0, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x800), oxm(ofpwire.XMTypeIPTTL, 64),
				oxmM(ofpwire.XMTypeIPFrag, 0, 1)}, ins(apply(out(2)))},
				{0, 1, nil, ins(apply(out(3)))}},
			key: tcp, want: actions.List{dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.NwTTL == 0xff && m.NwFrag == 1 }},
		{name: "clone rewrites a copy; the original goes on as it was",
			flows: []flowSpec{{0, 1, nil, ins(apply(
				&ofpwire.ActionClone{Actions: []ofpwire.Action{setF(reg(5), 9),
					&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeEthDst, []byte{2, 0, 0, 0, 0, 9})}, out(3)}},
				resubmitT(1)))},
				{1, 5, []ofpwire.OXM{oxm(reg(5), 9)}, ins(apply(out(4)))},
				{1, 1, nil, ins(apply(out(2)))}},
			key:  func() flow.Key { k := tcp; k.EthDst = [6]byte{2, 0, 0, 0, 0, 2}; return k }(),
			want: actions.List{ethSet(2, 0, 0, 0, 0, 9), dpOut(3), ethSet(2, 0, 0, 0, 0, 2), dpOut(2)}},
		{name: "ct with nat(src=...) carries the range to the datapath",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(2), &ofpwire.ActionCT{Flags: ofpwire.CTCommit, RecircTable: ofpwire.CTRecircNone,
				Actions: []ofpwire.Action{&ofpwire.ActionNAT{Flags: ofpwire.NATSrc,
					RangePresent: ofpwire.NATRangeIPv4Min | ofpwire.NATRangeProtoMin | ofpwire.NATRangeProtoMax,
					IPv4Min:      [4]byte{198, 18, 9, 9}, ProtoMin: 1000, ProtoMax: 2000}}}, out(3)))}},
			key: tcp, want: actions.List{dpOut(2),
				{Kind: actions.CTNAT, Val8: actions.CTNATSrc, Val16: 1000, Val16b: 2000, Addr: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: 9, 15: 9}},
				{Kind: actions.CTNATMax}, actions.CTAction(0, actions.CTFlagCommit|actions.CTFlagNAT, 0, 0), dpOut(3)}},
		{name: "nat's persistent and random flags reach the datapath",
			flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionCT{Flags: ofpwire.CTCommit, RecircTable: ofpwire.CTRecircNone,
				Actions: []ofpwire.Action{&ofpwire.ActionNAT{Flags: ofpwire.NATDst | ofpwire.NATPersistent | ofpwire.NATProtoRandom,
					RangePresent: ofpwire.NATRangeIPv4Min, IPv4Min: [4]byte{198, 18, 9, 9}}}}, out(3)))}},
			key: tcp, want: actions.List{
				{Kind: actions.CTNAT, Val8: actions.CTNATDst | actions.CTNATPersistent | actions.CTNATRandom, Addr: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: 9, 15: 9}},
				{Kind: actions.CTNATMax}, actions.CTAction(0, actions.CTFlagCommit|actions.CTFlagNAT, 0, 0), dpOut(3)}},
		{name: "a conjunction with one clause of two matched is no match",
			flows: []flowSpec{{0, 5, nil, ins(apply(&ofpwire.ActionConjunction{ID: 7, NClauses: 2}))},
				{0, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeConjID, 7)}, ins(apply(out(3)))},
				{0, 1, nil, ins(apply(out(2)))}},
			key: tcp, want: actions.List{dpOut(2)}},
		{name: "a conjunction with both clauses matched takes its conj_id flow",
			flows: []flowSpec{{0, 5, nil, ins(apply(&ofpwire.ActionConjunction{ID: 7, NClauses: 2}))},
				{0, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x800)}, ins(apply(&ofpwire.ActionConjunction{ID: 7, Clause: 1, NClauses: 2}))},
				{0, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeConjID, 7)}, ins(apply(out(3)))},
				{0, 1, nil, ins(apply(out(2)))}},
			key: tcp, want: actions.List{dpOut(3)},
			mask: func(m *flow.Mask) bool { return m.EthType == 0xffff }},
		{name: "conj_id is 0: a flow on a conjunction's id does not match",
			flows: []flowSpec{{0, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeConjID, 7)}, ins(apply(out(3)))},
				{0, 1, nil, ins(apply(out(2)))}},
			key: tcp, want: actions.List{dpOut(2)}},
		{name: "registers a group bucket writes stay in it",
			flows: []flowSpec{{0, 1, nil, ins(apply(setF(reg(4), 1), resubmitT(1)))},
				{1, 5, []ofpwire.OXM{oxm(reg(4), 1)}, ins(apply(out(2)))}},
			key: tcp, want: actions.List{dpOut(2)}},
	})
}

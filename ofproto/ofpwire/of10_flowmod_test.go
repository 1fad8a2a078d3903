package ofpwire

import (
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"
)

// TestFlowModRoundTrip10: a flow-mod encoded for an OpenFlow 1.0 peer is
// OpenFlow 1.0's ofp_flow_mod (version 1, type 14, the 72-byte fixed part
// and 1.0 actions), decodes back to what was encoded, and reads in Open
// vSwitch's own decoder as the same flow.
func TestFlowModRoundTrip10(t *testing.T) {
	out := func(p ofp.PortNo) Action { return &ActionOutput{Port: p, MaxLen: 0xffff} }
	apply := func(a ...Action) []Instruction { return []Instruction{&InstrApplyActions{Actions: a}} }
	cases := []struct {
		fm    *FlowMod
		print string // what ovs-ofctl ofp-print shows of it
	}{
		{&FlowMod{Command: ofp.FlowAdd, Cookie: 0xab, IdleTimeout: 10, HardTimeout: 20, Priority: 100,
			BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Flags: ofp.FlowFlagSendFlowRem,
			Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeInPort, 1), OXMUint(ofp.XMTypeEthType, 0x800),
				OXMUint(ofp.XMTypeIPProto, 6), OXMUintMasked(ofp.XMTypeIPv4Src, 0xc6120000, 0xffff0000),
				OXMUint(ofp.XMTypeTCPDst, 80)}},
			Instructions: apply(&ActionSetField{Field: NewOXM(ofp.XMTypeEthDst, []byte{2, 0, 0, 0, 0, 9})},
				&ActionPopVLAN{}, &ActionSetField{Field: OXMUint(XMTypeReg0+3, 7)}, &ActionResubmit{InPort: ofp.PortIn, Table: 2},
				out(2))},
			"ADD priority=100,tcp,in_port=1,nw_src=198.18.0.0/16,tp_dst=80 cookie:0xab idle:10 hard:20 send_flow_rem actions=mod_dl_dst:02:00:00:00:00:09,strip_vlan,set_field:0x7->reg3,resubmit(,2),output:2"},
		{&FlowMod{Command: ofp.FlowDelete, TableID: 0xff, BufferID: NoBuffer, OutPort: 3, OutGroup: ofp.GroupAny,
			Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeEthSrc, 0x020000000001)}}},
			"DEL priority=0,dl_src=02:00:00:00:00:01 out_port:3 actions=drop"},
		{&FlowMod{Command: ofp.FlowModifyStrict, Priority: 7, BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
			Match:        Match{Fields: []OXM{OXMUint(ofp.XMTypeVlanID, 0x1005)}},
			Instructions: apply(out(ofp.PortController))},
			"MOD_STRICT priority=7,dl_vlan=5 actions=CONTROLLER:65535"},
		// Actions inside ct's exec and clone are in the message's
		// version too: 1.0's set actions in, 1.0's out.
		{&FlowMod{Command: ofp.FlowAdd, Priority: 5, BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
			Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeEthType, 0x800)}},
			Instructions: apply(&ActionCT{Flags: CTCommit, ZoneImm: 5, RecircTable: CTRecircNone, Actions: []Action{
				&ActionSetField{Field: OXMUint(XMTypeCTMark, 42)}}},
				&ActionClone{Actions: []Action{&ActionSetField{Field: NewOXM(ofp.XMTypeEthSrc, []byte{2, 0, 0, 0, 0, 7})},
					&ActionSetField{Field: NewOXM(ofp.XMTypeIPv4Dst, []byte{198, 18, 0, 9})}, out(2)}})},
			"ADD priority=5,ip actions=ct(commit,zone=5,exec(set_field:0x2a->ct_mark)),clone(mod_dl_src:02:00:00:00:00:07,mod_nw_dst:198.18.0.9,output:2)"},
	}
	for i, c := range cases {
		b, err := EncodeIn(Version10, 7, c.fm)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if b[0] != Version10 || b[1] != 14 || len(b) < 72 {
			t.Fatalf("case %d: header %x, %d bytes: not a 1.0 flow-mod", i, b[:4], len(b))
		}
		got := decodeAll(t, b)
		if len(got) != 1 {
			t.Fatalf("case %d: %d messages", i, len(got))
		}
		want := normalise(t, c.fm).(*FlowMod)
		g := got[0].(*FlowMod)
		for _, m := range []*Match{&want.Match, &g.Match} { // 1.0 orders the fields its own way
			slices.SortFunc(m.Fields, func(a, b OXM) int { return int(a.Field) - int(b.Field) })
		}
		if !reflect.DeepEqual(g, want) {
			t.Errorf("case %d: decoded\n %#v\nwant\n %#v", i, g, want)
		}
		if _, err := exec.LookPath("ovs-ofctl"); err == nil {
			p := ofpPrint(t, b)
			if !strings.Contains(p, "OFPT_FLOW_MOD (xid=0x7): "+c.print) {
				t.Errorf("case %d: ovs-ofctl ofp-print:\n%s\nwant %q", i, p, c.print)
			}
		}
	}
	// What 1.0 cannot carry is refused, not dropped.
	for name, fm := range map[string]*FlowMod{
		"a table":           {Command: ofp.FlowAdd, TableID: 3, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny},
		"a register match":  {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Match: Match{Fields: []OXM{OXMUint(XMTypeReg0, 1)}}},
		"a masked MAC":      {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Match: Match{Fields: []OXM{OXMUintMasked(ofp.XMTypeEthSrc, 1, 1)}}},
		"a non-prefix mask": {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeEthType, 0x800), OXMUintMasked(ofp.XMTypeIPv4Src, 1, 0xff00ff00)}}},
		"an IPv6 match":     {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeEthType, 0x86dd), NewOXM(ofp.XMTypeIPv6Src, make([]byte, 16))}}},
		"goto_table":        {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Instructions: []Instruction{&InstrGotoTable{TableID: 1}}},
		"a group action":    {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Instructions: apply(&ActionGroup{Group: 1})},
		"push_vlan":         {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Instructions: apply(&ActionPushVLAN{EtherType: 0x8100})},
		"reset_counts":      {Command: ofp.FlowAdd, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny, Flags: ofp.FlowFlagResetCounts},
		"a cookie mask":     {Command: ofp.FlowModify, CookieMask: 1, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny},
	} {
		if b, err := EncodeIn(Version10, 7, fm); err == nil {
			t.Errorf("%s: encoded as %x, want refused", name, b)
		}
	}
}

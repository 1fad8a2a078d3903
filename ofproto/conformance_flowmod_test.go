package ofproto

import (
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// FLOW_MOD errors, from OpenFlow 1.3.5 §6.4 (flow table modification
// messages) and §7.4.4 (error codes), through the OpenFlow channel. A
// refused flow-mod installs nothing.
func TestConformanceFlowModErrors(t *testing.T) {
	u := ofpwire.OXMUint
	withMatch := func(fm *ofpwire.FlowMod, os ...ofpwire.OXM) *ofpwire.FlowMod {
		for _, o := range os {
			fm.Match.Add(o)
		}
		return fm
	}
	inTable := func(table uint8, ins ...ofpwire.Instruction) *ofpwire.FlowMod {
		return flowIn(table, 10, 1, ins...)
	}
	for _, c := range []struct {
		name      string
		fm        *ofpwire.FlowMod
		typ, code uint16
	}{
		{"add to table ALL", inTable(0xff, applyOut(2)), ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
		{"add to table 254", inTable(254, applyOut(2)), ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
		{"goto backwards", inTable(3, &ofpwire.InstrGotoTable{TableID: 2}), ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"goto itself", inTable(3, &ofpwire.InstrGotoTable{TableID: 3}), ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"goto beyond the last table", inTable(3, &ofpwire.InstrGotoTable{TableID: 254}), ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"bad command", func() *ofpwire.FlowMod { fm := inTable(0, applyOut(2)); fm.Command = 9; return fm }(), ofpwire.ETFlowModFailed, ofpwire.FMFCBadCommand},
		{"vlan_pcp 8", withMatch(inTable(0, applyOut(2)), pVLAN[0], u(ofpwire.XMTypeVlanPCP, 8)), ofpwire.ETBadMatch, ofpwire.BMCBadValue},
		{"ip_dscp 64", withMatch(inTable(0, applyOut(2)), u(ofpwire.XMTypeEthType, 0x0800), u(ofpwire.XMTypeIPDSCP, 64)), ofpwire.ETBadMatch, ofpwire.BMCBadValue},
		{"duplicate field", withMatch(inTable(0, applyOut(2)), u(ofpwire.XMTypeEthType, 0x0800), u(ofpwire.XMTypeEthType, 0x0800)), ofpwire.ETBadMatch, ofpwire.BMCDupField},
		{"value outside mask", withMatch(inTable(0, applyOut(2)), u(ofpwire.XMTypeEthType, 0x0800),
			ofpwire.NewMaskedOXM(ofpwire.XMTypeIPv4Src, []byte{10, 0, 0, 1}, []byte{255, 0, 0, 0})), ofpwire.ETBadMatch, ofpwire.BMCBadWildcards},
		{"output to port 0", inTable(0, applyOut(0)), ofpwire.ETBadAction, ofpwire.BACBadOutPort},
		{"output to ANY", inTable(0, applyOut(ofpwire.PortAny)), ofpwire.ETBadAction, ofpwire.BACBadOutPort},
		{"push_vlan 0x0800", inTable(0, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionPushVLAN{EtherType: 0x0800}}}), ofpwire.ETBadAction, ofpwire.BACBadArgument},
		{"set_field in_port", inTable(0, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{setField(u(ofpwire.XMTypeInPort, 3))}}), ofpwire.ETBadAction, ofpwire.BACBadSetType},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := newTestBridge(t)
			tb.c.wantError(c.fm, c.typ, c.code)
			if fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply); len(fs.Flows) != 0 {
				t.Fatalf("a refused flow-mod installed %+v", fs.Flows)
			}
		})
	}
}

// §6.4: OFPFF_CHECK_OVERLAP refuses an ADD that overlaps an entry of the
// same priority (a packet could match both) with FLOW_MOD_FAILED/OVERLAP;
// a MODIFY or DELETE that matches nothing is no error.
func TestConformanceFlowModOverlapAndNoMatch(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 10, 1, applyOut(2)))
	wide := flowIn(0, 10, 0, applyOut(2)) // matches everything, port 1 too
	wide.Flags = ofpwire.FlowFlagCheckOverlap
	tb.c.wantError(wide, ofpwire.ETFlowModFailed, ofpwire.FMFCOverlap)
	other := flowIn(0, 11, 0, applyOut(2)) // another priority: no overlap
	other.Flags = ofpwire.FlowFlagCheckOverlap
	tb.mustRequest(t, other)
	disjoint := flowIn(0, 10, 2, applyOut(1)) // in_port 2 vs 1: disjoint
	disjoint.Flags = ofpwire.FlowFlagCheckOverlap
	tb.mustRequest(t, disjoint)
	mod := flowIn(0, 10, 3, applyOut(1))
	mod.Command = ofpwire.FlowModifyStrict
	tb.mustRequest(t, mod)
	del := flowIn(5, 10, 3)
	del.Command = ofpwire.FlowDelete
	tb.mustRequest(t, del)
	if fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply); len(fs.Flows) != 3 {
		t.Fatalf("%d flows, want 3 (a MODIFY that matched nothing adds nothing in 1.3)", len(fs.Flows))
	}
}

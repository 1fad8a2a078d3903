package ofptext

import (
	"strings"
	"testing"
)

// TestNiciraFieldActionsText: moves and loads into nw_tos
// (NXM_OF_IP_TOS) and reads of dp_hash and recirc_id read and print as
// ovs-ofctl prints them; set_field with ECN bits on nw_tos is refused as
// ovs-ofctl refuses it, and recirc_id above the datapath's 16 bits is
// refused with a reason.
func TestNiciraFieldActionsText(t *testing.T) {
	for _, s := range []string{
		"ip,recirc_id=0 actions=move:NXM_NX_REG0[0..5]->NXM_OF_IP_TOS[2..7],move:NXM_OF_IP_TOS[]->NXM_NX_REG1[0..7]",
		"ip,dp_hash=0x1/0xf actions=move:NXM_NX_DP_HASH[]->NXM_NX_REG0[],move:NXM_NX_RECIRC_ID[]->NXM_NX_REG1[]",
		"ip actions=set_field:4->nw_tos,load:0x1->NXM_OF_IP_TOS[2]",
	} {
		fm, err := ParseFlow(s, Add)
		if err != nil {
			t.Errorf("%q: %v", s, err)
			continue
		}
		got := FormatFlowMod(fm)
		_, wantActs, _ := strings.Cut(s, " actions=")
		if !strings.Contains(got, "actions="+wantActs) {
			t.Errorf("%q prints as %q", s, got)
		}
	}
	for _, c := range []struct{ flow, err string }{
		{"ip actions=set_field:1->nw_tos", "not a valid value for field nw_tos"},
		{"recirc_id=0x10000 actions=drop", "recirc_id=0x10000"},
	} {
		if _, err := ParseFlow(c.flow, Add); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: error %v, want one saying %q", c.flow, err, c.err)
		}
	}
}

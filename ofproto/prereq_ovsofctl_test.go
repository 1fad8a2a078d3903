package ofproto

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// TestActionPrerequisitesLikeOVS: a flow whose Nicira actions (load,
// move, stack, output:reg, multipath, bundle_load, learn, in a clone too)
// name a field whose prerequisites the match lacks is refused with
// BAD_ACTION/MATCH_INCONSISTENT exactly when Open vSwitch refuses it:
// Debian's ovs-ofctl runs the same check as ovs-vswitchd (ofpacts_check)
// before it sends a flow, so `ovs-ofctl parse-flow` is the oracle. The
// flows with conntrack fields and the rules that are not a field's
// prerequisites (ct on a match that is not IP) are left out: this switch
// does not require them (action_prereq.go says why).
func TestActionPrerequisitesLikeOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	for _, flow := range []string{
		"actions=move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]",
		"ip,actions=move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]",
		"ipv6,actions=move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]",
		"actions=move:NXM_NX_REG0[0..5]->NXM_OF_IP_TOS[2..7]",
		"ipv6,actions=move:NXM_NX_REG0[0..5]->NXM_OF_IP_TOS[2..7]",
		"actions=load:1->NXM_OF_IP_TOS[2..7]",
		"actions=load:1->NXM_NX_IP_TTL[]",
		"ip,actions=load:1->NXM_NX_IP_TTL[]",
		"actions=load:1->NXM_NX_REG3[]",
		"actions=move:NXM_NX_REG0[]->NXM_NX_REG1[]",
		"actions=push:NXM_OF_TCP_SRC[]",
		"tcp,actions=push:NXM_OF_TCP_SRC[]",
		"udp,actions=push:NXM_OF_TCP_SRC[]",
		"actions=pop:NXM_OF_IP_TOS[2..7]",
		"actions=output:NXM_OF_UDP_DST[]",
		"udp,actions=output:NXM_OF_UDP_DST[]",
		"actions=multipath(eth_src,50,modulo_n,1,0,NXM_OF_IP_DST[0..1])",
		"actions=multipath(eth_src,50,modulo_n,1,0,NXM_NX_REG0[0..1])",
		"actions=bundle_load(eth_src,0,hrw,ofport,NXM_OF_TCP_DST[],members:1)",
		"tcp,actions=bundle_load(eth_src,0,hrw,ofport,NXM_OF_TCP_DST[],members:1)",
		"actions=clone(load:1->NXM_OF_IP_DST[0])",
		"actions=clone(move:NXM_OF_IP_DST[]->NXM_NX_REG1[])",
		"ip,actions=clone(move:NXM_OF_IP_DST[]->NXM_NX_REG1[])",
		"ip,actions=push_mpls:0x8847,move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]",
		"ip,actions=clone(push_mpls:0x8847),move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]",
		"mpls,actions=pop_mpls:0x0800,move:NXM_OF_IP_SRC[]->NXM_NX_REG0[]",
		"actions=learn(table=1,NXM_NX_REG1[]=NXM_OF_IP_DST[])",
		"ip,actions=learn(table=1,NXM_NX_REG1[]=NXM_OF_IP_DST[])",
		"ip,actions=learn(table=1,NXM_OF_IP_DST[]=NXM_NX_REG1[])",
		"ip,actions=learn(table=1,eth_type=0x800,NXM_OF_IP_DST[]=NXM_NX_REG1[])",
		"ip,actions=learn(table=1,eth_type=0x800,load:NXM_NX_REG1[]->NXM_OF_IP_DST[])",
		"ip,actions=learn(table=1,load:NXM_NX_REG1[]->NXM_OF_IP_DST[])",
		"actions=learn(table=1,load:NXM_OF_IP_DST[]->NXM_NX_REG1[])",
		"actions=learn(table=1,output:NXM_OF_IP_DST[0..15])",
		"tcp,actions=learn(table=1,eth_type=0x800,nw_proto=6,NXM_OF_TCP_DST[]=NXM_OF_TCP_SRC[])",
		"tcp,actions=learn(table=1,eth_type=0x800,NXM_OF_TCP_DST[]=NXM_OF_TCP_SRC[])",
	} {
		t.Run(flow, func(t *testing.T) {
			out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "parse-flow", flow).CombinedOutput()
			ovsRefuses := strings.Contains(string(out), "MATCH_INCONSISTENT")
			if err != nil && !ovsRefuses {
				t.Fatalf("ovs-ofctl does not take the flow for another reason: %v\n%s", err, out)
			}
			fm, perr := ofptext.ParseFlow(flow, ofptext.Add)
			if perr != nil {
				t.Fatalf("our parser: %v", perr)
			}
			tb := newTestBridge(t)
			var refused bool
			for _, r := range tb.c.request(fm) {
				if e, ok := r.(*ofpwire.ErrorMsg); !ok || e.Type != ofpwire.ETBadAction || e.Code != ofpwire.BACMatchInconsistent {
					t.Fatalf("reply %#v, want nothing or BAD_ACTION/MATCH_INCONSISTENT", r)
				}
				refused = true
			}
			if refused != ovsRefuses {
				t.Errorf("refused %v, Open vSwitch refuses %v (%s)", refused, ovsRefuses, strings.TrimSpace(string(out)))
			}
		})
	}
}

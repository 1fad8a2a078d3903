//go:build linux

package ofproto

import (
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestEndToEndGroupsAndNormal programs groups with the real ovs-ofctl,
// forwards a ping through an ALL group, checks that deleting the group
// deletes the flow using it, then forwards through NORMAL.
func TestEndToEndGroupsAndNormal(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	a, b, _, target := newE2EBridge(t, "ptcp:0:127.0.0.1")

	ovsOfctl(t, "add-group", target, "group_id=1,type=all,bucket=output:1,bucket=output:2")
	dump := ovsOfctl(t, "dump-groups", target)
	if !strings.Contains(dump, "group_id=1,type=all,bucket=actions=output:1,bucket=actions=output:2") {
		t.Fatalf("dump-groups:\n%s", dump)
	}
	ovsOfctl(t, "add-flow", target, "in_port=1,actions=group:1")
	ovsOfctl(t, "add-flow", target, "in_port=2,actions=output:1")
	nstest.Ping(t, a.NS, b.IP)
	if out := ovsOfctl(t, "dump-group-stats", target); !strings.Contains(out, "group_id=1") {
		t.Fatalf("dump-group-stats:\n%s", out)
	}

	ovsOfctl(t, "del-groups", target, "group_id=1")
	flows := flowLines(ovsOfctl(t, "dump-flows", target))
	if len(flows) != 1 || !strings.Contains(flows[0], "in_port=2") {
		t.Fatalf("after del-groups the group's flow should be gone:\n%s", strings.Join(flows, "\n"))
	}
	if out := ovsOfctl(t, "dump-groups", target); strings.Contains(out, "group_id=1") {
		t.Fatalf("dump-groups after delete:\n%s", out)
	}

	ovsOfctl(t, "del-flows", target)
	ovsOfctl(t, "add-flow", target, "actions=NORMAL")
	nstest.Ping(t, a.NS, b.IP)
}

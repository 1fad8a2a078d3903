package e2e

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestDemoOVNScript runs scripts/demo-ovn.sh (make demo-ovn) as users
// would: OVN central and three chassis over Geneve (OVN's Geneve option
// mapped through the TLV table), each with this switch as its
// ovs-vswitchd and Debian's ovn-controller; the script checks every step
// with traffic (pings across chassis and across the router with its TTL,
// TCP, a stateful ACL, a load balancer answering from backends on several
// chassis and to a backend itself, a kill -9 and restart of one chassis'
// switch, a provider network through patch ports) and ovn-controller's
// logs, and must leave no namespace behind.
func TestDemoOVNScript(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovn-northd", "ovn-controller", "ovn-nbctl", "ovsdb-server", "busybox", "python3")
	runDemoScript(t, "demo-ovn", 6*time.Minute, "TTL 63: one router hop", "TCP to w3: dropped, as the ACL says",
		"reached the backends: ", "traffic through chassis 2 again", "0x102  0x80       4  tun_metadata",
		"br-ex ports: ext0 patch-", "demo-ovn done")
}

// TestDemoOVNEmbeddedDatabase runs the same with each chassis' database
// served by this switch itself (DB=embedded: no ovsdb-server on the
// chassis): ovn-controller and ovs-vsctl talk to the switch's own OVSDB
// server through every step, the kill -9 included.
func TestDemoOVNEmbeddedDatabase(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovn-northd", "ovn-controller", "ovn-nbctl", "ovsdb-server", "busybox", "python3")
	runDemoScriptEnv(t, "demo-ovn", []string{"DB=embedded"}, 6*time.Minute, "# serves ", "TTL 63: one router hop",
		"TCP to w3: dropped, as the ACL says", "reached the backends: ", "traffic through chassis 2 again",
		"br-ex ports: ext0 patch-", "demo-ovn done")
}

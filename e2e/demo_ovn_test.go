package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// demoOVNSteps are the lines scripts/demo-ovn.sh prints only once a step's
// traffic check passed, in both database modes: the script fails at the
// first check that does not, but a step left out of it (or one whose check
// was weakened to print nothing) would otherwise go unnoticed.
var demoOVNSteps = []string{
	"TTL 63: one router hop",
	"router ARP: both gateways resolved to lr0's MACs",
	"TCP to w3: dropped, as the ACL says",
	"reject: TCP reset, UDP and ICMP unreachable across chassis",
	"reached the backends: ",
	"lease of 198.18.70.16 obtained",
	"DHCP: w6 took its lease from ovn-controller and reaches w1 and w4",
	"traffic through chassis 2 again",
	"br-ex ports: ext0 patch-",
	"w1 (chassis 1) seen by the external host as 198.18.74.100",
	"w2 (chassis 2) seen by the external host as 198.18.74.102",
	"NAT: snat and dnat_and_snat through chassis 3's gateway port",
	"demo-ovn done",
}

// demoOVNSyncs is how many times the script waits for every chassis
// (ovn-nbctl --wait=hv sync): once at the end of each step from the
// logical network's (4) to the logs' (13), twice in the two ACL steps (6,
// 7), where the ACL is added and then removed.
const demoOVNSyncs = 12

// checkDemoOVNSyncs fails t unless every step's sync returned.
func checkDemoOVNSyncs(t *testing.T, out string) {
	t.Helper()
	if n := strings.Count(out, "ovn-nbctl --wait=hv sync: "); n != demoOVNSyncs {
		t.Errorf("ovn-nbctl --wait=hv sync returned %d times, want %d (one per step)", n, demoOVNSyncs)
	}
}

// TestDemoOVNScript runs scripts/demo-ovn.sh (make demo-ovn) as users
// would: OVN central and three chassis over Geneve (OVN's Geneve option
// mapped through the TLV table), each with this switch as its
// ovs-vswitchd and Debian's ovn-controller; the script checks every step
// with traffic across chassis (pings and TCP across chassis and across the
// router with its TTL and its ARP responder, a stateful ACL, a reject ACL
// answered with a TCP reset and ICMP unreachables, a load balancer
// answering from backends on several chassis and to a backend itself,
// DHCP from ovn-controller, a kill -9 and restart of one chassis' switch,
// a provider network through patch ports, SNAT and a floating address on a
// distributed gateway port), waits for every chassis after each step
// (ovn-nbctl --wait=hv sync) and reads ovn-controller's logs, and must
// leave no namespace behind.
func TestDemoOVNScript(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovn-northd", "ovn-controller", "ovn-nbctl", "ovsdb-server", "busybox", "python3")
	out := runDemoScript(t, "demo-ovn", 6*time.Minute, append([]string{"0x102  0x80       4  tun_metadata"}, demoOVNSteps...)...)
	checkDemoOVNSyncs(t, out)
}

// TestDemoOVNEmbeddedDatabase runs the same with each chassis' database
// served by this switch itself (DB=embedded: no ovsdb-server on the
// chassis): ovn-controller and ovs-vsctl talk to the switch's own OVSDB
// server through every step, the kill -9 included.
func TestDemoOVNEmbeddedDatabase(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovn-northd", "ovn-controller", "ovn-nbctl", "ovsdb-server", "busybox", "python3")
	out := runDemoScriptEnv(t, "demo-ovn", []string{"DB=embedded"}, 6*time.Minute, append([]string{"# serves "}, demoOVNSteps...)...)
	checkDemoOVNSyncs(t, out)
}

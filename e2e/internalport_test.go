package e2e

import (
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestInternalPortPersists: an internal port's interface is the host's
// to configure, as in Open vSwitch: its address survives a datapath
// rebuild and a kill -9 of the switch (the same interface, not a new one
// of that name), and the switch removes it with the port and at a clean
// stop. A tap of the switch's that a crash left behind unconfigured goes
// at the next start; a tap that is not the switch's stays.
func TestInternalPortPersists(t *testing.T) {
	d := newDaemon(t)
	a, _ := nstest.TwoHosts(t)
	d.start()
	br, in, in2 := nstest.Name("vsbr"), nstest.Name("vsin"), nstest.Name("vsin")
	for _, n := range []string{br, in, in2} {
		t.Cleanup(func() { nstest.Output("ip", "link", "del", n) })
	}
	d.vsctl("add-br", br) // standalone: NORMAL
	d.vsctl("add-port", br, a.Port)
	d.vsctl("add-port", br, in, "--", "set", "Interface", in, "type=internal")
	nstest.Run(t, "sysctl", "-qw", "net.ipv6.conf."+in+".disable_ipv6=1")
	nstest.Run(t, "ip", "addr", "add", "198.18.0.253/24", "dev", in)
	nstest.Run(t, "ip", "link", "set", in, "up")
	nstest.Ping(t, a.NS, "198.18.0.253")
	ifindex := strings.TrimSpace(nstest.Run(t, "cat", "/sys/class/net/"+in+"/ifindex"))
	same := func(when string) {
		t.Helper()
		if got := strings.TrimSpace(nstest.Run(t, "cat", "/sys/class/net/"+in+"/ifindex")); got != ifindex {
			t.Fatalf("%s: interface %s recreated (ifindex %s, was %s)", when, in, got, ifindex)
		}
		if out := nstest.Run(t, "ip", "-br", "addr", "show", in); !strings.Contains(out, "198.18.0.253/24") {
			t.Fatalf("%s: address lost: %s", when, out)
		}
		// Administratively up still (its carrier is down while no
		// switch holds it).
		if out := nstest.Run(t, "ip", "-o", "link", "show", in); !strings.Contains(out, ",UP") && !strings.Contains(out, "<UP") {
			t.Fatalf("%s: interface no longer up: %s", when, out)
		}
	}

	d.vsctl("set", "Open_vSwitch", ".", "other_config:n-pmd=2") // a rebuild reopens every port
	same("after a rebuild")
	nstest.Ping(t, a.NS, "198.18.0.253")

	// A crash leaves the interface; the restart takes it back. Beside
	// it, two taps as a crash and a user would leave them: the switch's
	// alias on one of no configured port, none on the other.
	d.vsctl("add-port", br, in2, "--", "set", "Interface", in2, "type=internal")
	d.kill9()
	same("after kill -9")
	orphan, users := nstest.Name("vsor"), nstest.Name("vsus")
	for _, n := range []string{orphan, users} {
		nstest.Run(t, "ip", "tuntap", "add", "mode", "tap", "name", n)
		t.Cleanup(func() { nstest.Output("ip", "link", "del", n) })
	}
	nstest.Run(t, "ip", "link", "set", orphan, "alias", "vswitchd "+d.stateDir)
	d.start()
	same("after the restart")
	nstest.Ping(t, a.NS, "198.18.0.253")
	if linkExists(orphan) {
		t.Errorf("tap %s with the switch's alias and no port survived the start", orphan)
	}
	if !linkExists(users) || !linkExists(in2) {
		t.Errorf("start removed a tap it should keep: %s present %v, %s present %v", users, linkExists(users), in2, linkExists(in2))
	}

	d.vsctl("del-port", br, in)
	if linkExists(in) {
		t.Fatalf("interface %s still there after del-port", in)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{in2, br} {
		if linkExists(n) {
			t.Errorf("interface %s still there after a clean stop", n)
		}
	}
}

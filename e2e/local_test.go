package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestBridgeLocalInterface: a bridge has its own interface, named after
// it, as port LOCAL (as in Open vSwitch): the host gives it an address
// and talks through the bridge to a namespace; the interface keeps its
// address across a datapath rebuild and goes away with the bridge.
func TestBridgeLocalInterface(t *testing.T) {
	d := newDaemon(t)
	a, _ := nstest.TwoHosts(t)
	d.start()
	br := nstest.Name("vsbr")
	d.vsctl("add-br", br) // standalone: NORMAL
	d.vsctl("add-port", br, a.Port)
	t.Cleanup(func() { nstest.Output("ip", "link", "del", br) })
	if desc := d.vsctl("dump-ports-desc", br); !strings.Contains(desc, "LOCAL("+br+")") {
		t.Fatalf("dump-ports-desc has no LOCAL(%s):\n%s", br, desc)
	}
	if ports := d.vsctl("list-ports", br); strings.Contains(ports, br) {
		t.Fatalf("list-ports shows the bridge's own interface:\n%s", ports)
	}
	// Created down, as Open vSwitch does; the host configures it.
	if out := nstest.Run(t, "ip", "-br", "link", "show", br); !strings.Contains(out, "DOWN") {
		t.Fatalf("bridge interface not down at creation: %s", out)
	}
	nstest.Run(t, "sysctl", "-qw", "net.ipv6.conf."+br+".disable_ipv6=1")
	nstest.Run(t, "ip", "addr", "add", "198.18.0.254/24", "dev", br)
	nstest.Run(t, "ip", "link", "set", br, "up")
	nstest.Ping(t, a.NS, "198.18.0.254")
	if fdb := d.vsctl("fdb-show", br); !strings.Contains(fdb, "LOCAL") {
		t.Fatalf("fdb-show does not show the host's MAC on LOCAL:\n%s", fdb)
	}
	for _, in := range []string{"LOCAL", br} {
		tr := d.vsctl("trace", br, "in_port="+in+",dl_src=02:00:00:00:00:99,dl_dst="+a.MAC)
		if !strings.Contains(tr, "NORMAL") || !strings.Contains(tr, "output:1") && !strings.Contains(tr, "output(1)") {
			t.Fatalf("trace from in_port=%s:\n%s", in, tr)
		}
	}

	if show := d.vsctl("show"); !strings.Contains(show, "Port "+br+"\n            ofport: LOCAL") {
		t.Fatalf("show does not list the bridge's own interface:\n%s", show)
	}

	// Deleted from outside, it comes back at the next configuration change
	// (one applied in place), with the same address.
	mac := nstest.Run(t, "cat", "/sys/class/net/"+br+"/address")
	nstest.Run(t, "ip", "link", "del", br)
	nstest.WaitFor(t, 5*time.Second, "LOCAL gone from dump-ports-desc", func() bool {
		return !strings.Contains(d.vsctl("dump-ports-desc", br), "LOCAL(")
	})
	d.vsctl("set", "Open_vSwitch", ".", "other_config:tx-flush-interval=10")
	if desc := d.vsctl("dump-ports-desc", br); !strings.Contains(desc, "LOCAL("+br+")") {
		t.Fatalf("LOCAL not recreated by a configuration change:\n%s", desc)
	}
	if again := nstest.Run(t, "cat", "/sys/class/net/"+br+"/address"); again != mac {
		t.Fatalf("bridge interface address %s, was %s", again, mac)
	}
	nstest.Run(t, "sysctl", "-qw", "net.ipv6.conf."+br+".disable_ipv6=1")
	nstest.Run(t, "ip", "addr", "add", "198.18.0.254/24", "dev", br)
	nstest.Run(t, "ip", "link", "set", br, "up")
	nstest.Ping(t, a.NS, "198.18.0.254")

	// A rebuild (n-pmd) reopens the interface; its address stays.
	d.vsctl("set", "Open_vSwitch", ".", "other_config:n-pmd=2")
	if out := nstest.Run(t, "ip", "-br", "addr", "show", br); !strings.Contains(out, "198.18.0.254/24") {
		t.Fatalf("address lost across the rebuild: %s", out)
	}
	nstest.Ping(t, a.NS, "198.18.0.254")

	d.vsctl("del-br", br)
	if _, err := nstest.Output("ip", "link", "show", br); err == nil {
		t.Fatalf("interface %s still there after del-br", br)
	}
}

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestInterfaceReturns: a port whose veth pair is deleted stops; when the
// pair is created again with the same names and addresses, the daemon
// notices by itself (no vsctl command in between) and the port forwards
// again under the same OpenFlow number, with the flows that name it.
func TestInterfaceReturns(t *testing.T) {
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	d.start()

	d.vsctl("add-br", "br0")
	d.vsctl("set-fail-mode", "br0", "secure")
	d.vsctl("add-port", "br0", b.Port, "--", "type=afpacket")
	d.vsctl("add-port", "br0", a.Port, "--", "type=afpacket")
	d.vsctl("add-flow", "br0", "priority=100,in_port="+a.Port+",actions=output:"+b.Port)
	d.vsctl("add-flow", "br0", "priority=100,in_port="+b.Port+",actions=output:"+a.Port)
	nstest.Ping(t, a.NS, b.IP)
	ofport := strings.TrimSpace(d.vsctl("get", "Interface", a.Port, "ofport"))
	if ofport != "2" {
		t.Fatalf("ofport of %s = %q, want 2", a.Port, ofport)
	}
	descLine := fmt.Sprintf(" %s(%s):", ofport, a.Port)
	if desc := d.vsctl("dump-ports-desc", "br0"); !strings.Contains(desc, descLine) {
		t.Fatalf("dump-ports-desc lacks %q:\n%s", descLine, desc)
	}

	// Deleting the switch's end removes the whole pair.
	nstest.Run(t, "ip", "link", "del", a.Port)
	// OpenFlow stops describing the port when the datapath drops it; the
	// daemon marks it not running once the datapath has closed it.
	var show string
	nstest.WaitFor(t, 5*time.Second, "port "+a.Port+" to leave dump-ports-desc and show as not running", func() bool {
		show = d.vsctl("show")
		return !strings.Contains(d.vsctl("dump-ports-desc", "br0"), "("+a.Port+")") &&
			strings.Contains(portBlock(show, a.Port), "error: not running")
	})
	// The removal makes the daemon look for the interface once; let that
	// pass, so that only the link events of the pair's creation can bring
	// the port back.
	nstest.WaitFor(t, 5*time.Second, "the daemon's check after the removal", func() bool {
		log := d.log.String()
		i := strings.Index(log, "interface disappeared; port stopped")
		return i >= 0 && strings.Contains(log[i:], "interfaces checked")
	})
	if strings.Contains(portBlock(show, b.Port), "not running") {
		t.Fatalf("show reports the other port %s as not running:\n%s", b.Port, show)
	}
	if got := strings.TrimSpace(d.vsctl("list-ports", "br0")); !strings.Contains(got, a.Port) {
		t.Fatalf("the stopped port left the configuration: list-ports %q", got)
	}

	recreateHost(t, a)
	start := time.Now()
	deadline := start.Add(10 * time.Second)
	for {
		if _, err := a.NS.Output("ping", "-c", "1", "-W", "1", b.IP); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ping across the switch 10 s after %s came back\nshow:\n%s", a.Port, d.vsctl("show"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("ping works again %v after the veth pair was recreated", time.Since(start).Round(time.Millisecond))
	nstest.Ping(t, a.NS, b.IP)

	if got := strings.TrimSpace(d.vsctl("get", "Interface", a.Port, "ofport")); got != ofport {
		t.Fatalf("ofport after the return %q, want %q", got, ofport)
	}
	if desc := d.vsctl("dump-ports-desc", "br0"); !strings.Contains(desc, descLine) {
		t.Fatalf("dump-ports-desc after the return lacks %q:\n%s", descLine, desc)
	}
	if block := portBlock(d.vsctl("show"), a.Port); strings.Contains(block, "not running") {
		t.Fatalf("show after the return:\n%s", block)
	}
	flowLine(t, d.vsctl("dump-flows", "br0"), "in_port="+ofport, "output:1")
	nstest.WaitFor(t, 5*time.Second, "the restart to be logged", func() bool {
		for _, l := range strings.Split(d.log.String(), "\n") {
			if strings.Contains(l, "interface reappeared; port restarted") && strings.Contains(l, "port="+a.Port) &&
				strings.Contains(l, "ofport="+ofport) && strings.Contains(l, "bridge=br0") {
				t.Logf("recreated at %s; %s", start.Format("15:04:05.000"), l)
				return true
			}
		}
		return false
	})
}

// recreateHost builds h's veth pair again, as nstest.TwoHosts did: same
// names, MAC and address, the host's end in its namespace. The cleanup
// TwoHosts registered deletes it by name.
func recreateHost(t *testing.T, h *nstest.Host) {
	t.Helper()
	nstest.Run(t, "ip", "link", "add", h.Port, "type", "veth", "peer", "name", h.Dev)
	nstest.Run(t, "ip", "link", "set", h.Dev, "netns", h.NS.Name)
	nstest.Run(t, "sysctl", "-qw", "net.ipv6.conf."+h.Port+".disable_ipv6=1")
	nstest.Run(t, "ip", "link", "set", h.Port, "up")
	h.NS.Run(t, "ip", "link", "set", h.Dev, "address", h.MAC)
	h.NS.Run(t, "ip", "addr", "add", h.IP+"/24", "dev", h.Dev)
	h.NS.Run(t, "ip", "link", "set", h.Dev, "up")
}

// portBlock returns the lines vsctl show prints for port name.
func portBlock(show, name string) string {
	i := strings.Index(show, "Port "+name+"\n")
	if i < 0 {
		return ""
	}
	rest := show[i:]
	if j := strings.Index(rest[1:], "Port "); j >= 0 {
		rest = rest[:j+1]
	}
	if j := strings.Index(rest, "    other_config:"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestAddPortBeforeInterface: as with Open vSwitch, add-port of an
// interface that does not exist yet succeeds; the port is configured,
// shown with ofport -1 and the error "could not open network device X
// (No such device)", and once `ip link add` creates the interface it runs
// under the number it was given and forwards. When the interface goes and
// comes back, the same.
func TestAddPortBeforeInterface(t *testing.T) {
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	// a's pair is created again below, after add-port.
	nstest.Run(t, "ip", "link", "del", a.Port)
	d.start()

	br := nstest.Name("vsbr") // its own interface is in the host's namespace
	d.vsctl("add-br", br)
	d.vsctl("set-fail-mode", br, "secure")
	d.vsctl("add-port", br, b.Port, "--", "type=afpacket")
	if out, errOut, code := d.vsctlRaw("add-port", br, a.Port); code != 0 {
		t.Fatalf("add-port of an interface that does not exist yet: exit %d (stdout %q stderr %q)", code, out, errOut)
	}
	if got := d.vsctl("list-ports", br); !strings.Contains(got, a.Port+"\n") {
		t.Fatalf("list-ports after add-port: %q", got)
	}
	d.vsctl("add-flow", br, "priority=100,in_port=1,actions=output:2")
	d.vsctl("add-flow", br, "priority=100,in_port=2,actions=output:1")

	wantErr := `"could not open network device ` + a.Port + ` (No such device)"`
	waiting := func(what string) {
		t.Helper()
		var got string
		nstest.WaitFor(t, 5*time.Second, a.Port+" to show ofport -1 and its error "+what, func() bool {
			got = d.vsctl("get", "Interface", a.Port, "ofport", "error")
			return got == "-1\n"+wantErr+"\n"
		})
		block := portBlock(d.vsctl("show"), a.Port)
		if !strings.Contains(block, "ofport: -1") || !strings.Contains(block, "could not open network device "+a.Port+" (No such device)") {
			t.Fatalf("show %s:\n%s", what, block)
		}
		if l := d.vsctl("list", "Interface", a.Port); !strings.Contains(l, "error               : "+wantErr) {
			t.Fatalf("list Interface %s:\n%s", what, l)
		}
	}
	running := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := a.NS.Output("ping", "-c", "1", "-W", "1", b.IP); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no ping across the switch 10 s after %s\nshow:\n%s", what, d.vsctl("show"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		nstest.Ping(t, a.NS, b.IP)
		// The number the store gave it at add-port: the next free one.
		if got := d.vsctl("get", "Interface", a.Port, "ofport", "error"); got != "2\n[]\n" {
			t.Fatalf("get ofport error %s: %q", what, got)
		}
		if block := portBlock(d.vsctl("show"), a.Port); !strings.Contains(block, "ofport: 2") || strings.Contains(block, "error") {
			t.Fatalf("show %s:\n%s", what, block)
		}
		if l := flowLine(t, d.vsctl("dump-flows", br), "in_port=2", "output:1"); strings.Contains(l, "n_packets=0,") {
			t.Fatalf("the flow from %s counted nothing %s: %s", a.Port, what, l)
		}
	}

	waiting("before the interface exists")
	recreateHost(t, a)
	running("the interface was created")
	nstest.Run(t, "ip", "link", "del", a.Port)
	waiting("after the interface was deleted")
	recreateHost(t, a)
	running("the interface was created again")
}

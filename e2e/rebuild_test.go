package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// portType returns the "type:" line vsctl show prints for port name
// ("afxdp (automatic)" for an automatic port that runs AF_XDP).
func portType(t *testing.T, show, name string) string {
	t.Helper()
	in := false
	for _, l := range strings.Split(show, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "Port "):
			in = l == "Port "+name
		case in && strings.HasPrefix(l, "type: "):
			return strings.TrimPrefix(l, "type: ")
		}
	}
	t.Fatalf("no type for port %s in show:\n%s", name, show)
	return ""
}

// flowDuration returns the duration, in seconds, of the dump-flows line
// holding every one of subs.
func flowDuration(t *testing.T, dump string, subs ...string) float64 {
	t.Helper()
	l := flowLine(t, dump, subs...)
	i := strings.Index(l, "duration=")
	if i < 0 {
		t.Fatalf("no duration in %q", l)
	}
	v := l[i+len("duration="):]
	v = v[:strings.IndexAny(v+",", ", ")]
	d, err := strconv.ParseFloat(strings.TrimSuffix(v, "s"), 64)
	if err != nil {
		t.Fatalf("duration in %q: %v", l, err)
	}
	return d
}

// TestRebuildKeepsDriverAndFlows: a datapath rebuild (a PMD-shaping
// setting) and a port reopen (a port option) keep an automatic port on
// AF_XDP (the old socket's queue is still being released by the kernel
// when the port reopens: the driver waits for it instead of falling back
// to AF_PACKET) and keep every flow's install time and counters.
func TestRebuildKeepsDriverAndFlows(t *testing.T) {
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	d.start()
	d.vsctl("add-br", "br0")
	d.vsctl("add-port", "br0", a.Port)
	d.vsctl("add-port", "br0", b.Port)
	d.vsctl("set-fail-mode", "br0", "secure")
	d.vsctl("add-flow", "br0", "priority=100,in_port=1,actions=output:2")
	d.vsctl("add-flow", "br0", "priority=100,in_port=2,actions=output:1")
	for _, p := range []string{a.Port, b.Port} {
		if got := portType(t, d.vsctl("show"), p); got != "afxdp (automatic)" {
			t.Fatalf("port %s runs %q before any rebuild, want afxdp (automatic)", p, got)
		}
	}
	nstest.Ping(t, a.NS, b.IP)
	// A duration worth comparing: at least a second.
	nstest.WaitFor(t, 5*time.Second, "the flow's duration reaches 1 s", func() bool {
		return flowDuration(t, d.vsctl("dump-flows", "br0"), "in_port=1") >= 1
	})

	dump := d.vsctl("dump-flows", "br0")
	before := flowDuration(t, dump, "in_port=1")
	packets, _ := field(flowLine(t, dump, "in_port=1"), "n_packets")
	for i, change := range [][]string{
		{"set", "Bridge", "br0", "other_config:mac-aging-time=100"}, // rebuilds the datapath
		{"set", "Bridge", "br0", "other_config:mac-aging-time=200"}, // and again (the driver used to flip back)
		{"set", "Interface", a.Port, "options:n_rxq=1"},             // reopens one port
	} {
		d.vsctl(change...)
		show := d.vsctl("show")
		for _, p := range []string{a.Port, b.Port} {
			if got := portType(t, show, p); got != "afxdp (automatic)" {
				t.Fatalf("after change %d (%s) port %s runs %q, want afxdp (automatic)\n%s", i, strings.Join(change, " "), p, got, show)
			}
		}
		dump := d.vsctl("dump-flows", "br0")
		after := flowDuration(t, dump, "in_port=1")
		if after < before {
			t.Fatalf("after change %d (%s) the flow's duration went from %.3fs to %.3fs", i, strings.Join(change, " "), before, after)
		}
		n, _ := field(flowLine(t, dump, "in_port=1"), "n_packets")
		if n < packets {
			t.Fatalf("after change %d the flow's n_packets went from %d to %d", i, packets, n)
		}
		before, packets = after, n
		nstest.Ping(t, a.NS, b.IP)
	}
	if strings.Contains(d.log.String(), "driver=afpacket") {
		t.Fatalf("a port fell back to AF_PACKET on the way:\n%s", d.log.String())
	}
}

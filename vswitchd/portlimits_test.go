package vswitchd

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// addInternalPorts adds internal ports names to bridge br in one
// transaction.
func addInternalPorts(t *testing.T, d *Daemon, br string, names []string, opts ...string) error {
	t.Helper()
	var cmds [][]string
	for _, n := range names {
		cmds = append(cmds, append([]string{"add-port", br, n, "type=internal"}, opts...))
	}
	_, err := callChain(t, d, cmds)
	return err
}

// noLinks fails the test if any of names is an interface.
func noLinks(t *testing.T, names []string) {
	t.Helper()
	for _, n := range names {
		if _, err := netlink.LinkByName(n); err == nil {
			t.Errorf("interface %s exists after a refused request", n)
		}
	}
}

// TestPortLimits: a request adding more ports than
// other_config:max-ports-per-request, or taking the switch past
// other_config:max-ports, is refused with an error naming the limit, and
// creates nothing (no interface, no port in the configuration); a request
// within both passes, and a switch over a lowered limit can still delete.
func TestPortLimits(t *testing.T) {
	nstest.RequireRoot(t)
	d, _ := startLogged(t)
	br := nstest.Name("vslb")
	mustCall(t, d, "add-br", br)
	for _, bad := range []string{"max-ports=0", "max-ports-per-request=x"} {
		if _, err := call(t, d, "set", "Open_vSwitch", ".", "other_config:"+bad); err == nil {
			t.Errorf("other_config:%s accepted", bad)
		}
	}
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:max-ports-per-request=3", "other_config:max-ports=6")
	names := make([]string, 6)
	for i := range names {
		names[i] = nstest.Name("vsli")
	}
	t.Cleanup(func() {
		for _, n := range names {
			nstest.Output("ip", "link", "del", n)
		}
	})

	err := addInternalPorts(t, d, br, names[:4])
	if err == nil || !strings.Contains(err.Error(), "adds 4 ports") || !strings.Contains(err.Error(), "max-ports-per-request=3") {
		t.Fatalf("4 ports past a per-request limit of 3: %v", err)
	}
	noLinks(t, names[:4])
	if got := mustCall(t, d, "list-ports", br); got != "" {
		t.Fatalf("list-ports after a refused request: %q", got)
	}

	if err := addInternalPorts(t, d, br, names[:3]); err != nil {
		t.Fatalf("3 ports within the limits: %v", err)
	}
	// The bridge's own interface and 3 ports: 4 of 6; 3 more make 7.
	err = addInternalPorts(t, d, br, names[3:6])
	if err == nil || !strings.Contains(err.Error(), "7 ports") || !strings.Contains(err.Error(), "max-ports=6") {
		t.Fatalf("7 ports past a switch limit of 6: %v", err)
	}
	noLinks(t, names[3:6])

	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:max-ports=2")
	mustCall(t, d, "del-port", br, names[0])
	if got, want := mustCall(t, d, "list-ports", br), strings.Join(slices.Sorted(slices.Values(names[1:3])), "\n")+"\n"; got != want {
		t.Fatalf("list-ports after deleting under a lowered limit: %q", got)
	}
}

// TestPortLimitMemory: a request whose new ports would take more than
// half of the available memory, or leave less than a tenth of the
// machine's memory available, is refused, whatever the counts allow. The
// ports are multi-queue internal ports (n_rxq=2), the costly kind (7 MiB).
func TestPortLimitMemory(t *testing.T) {
	nstest.RequireRoot(t)
	var avail, total atomic.Uint64 // MiB; read by the daemon's handlers
	avail.Store(20)                // room for one internal port (7 MiB)
	total.Store(20)
	saved := config.MemInfo
	t.Cleanup(func() { config.MemInfo = saved })
	config.MemInfo = func() (uint64, uint64, bool) { return avail.Load() << 20, total.Load() << 20, true }
	d, _ := startLogged(t)
	br := nstest.Name("vslb")
	mustCall(t, d, "add-br", br)
	names := []string{nstest.Name("vsli"), nstest.Name("vsli"), nstest.Name("vsli")}
	t.Cleanup(func() {
		for _, n := range names {
			nstest.Output("ip", "link", "del", n)
		}
	})
	err := addInternalPorts(t, d, br, names[:2], "options:n_rxq=2")
	if err == nil || !strings.Contains(err.Error(), "more than half of the 20 MiB available") {
		t.Fatalf("2 internal ports with 20 MiB available: %v", err)
	}
	noLinks(t, names[:2])
	if err := addInternalPorts(t, d, br, names[:1], "options:n_rxq=2"); err != nil {
		t.Fatalf("1 internal port with 20 MiB available: %v", err)
	}
	// 7 of 100 MiB available is well under half, but leaves 93 MiB of a
	// 1000 MiB machine.
	avail.Store(100)
	total.Store(1000)
	err = addInternalPorts(t, d, br, names[2:], "options:n_rxq=2")
	if err == nil || !strings.Contains(err.Error(), "less than a tenth of the machine's 1000 MiB") {
		t.Fatalf("1 internal port leaving 93 of 1000 MiB: %v", err)
	}
	noLinks(t, names[2:])
}

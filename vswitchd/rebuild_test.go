package vswitchd

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ctl/ofctl"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// forwarding is a daemon with bridge br (a unique name: its own interface
// lives in the host's namespace) forwarding between hosts a and b by two
// flows that a ping has made count.
type forwarding struct {
	d      *Daemon
	br     string
	a, b   *nstest.Host
	before map[string]pipeline.EntryState
}

func newForwarding(t *testing.T) *forwarding {
	t.Helper()
	a, b := nstest.TwoHosts(t)
	d, _ := startLogged(t)
	f := &forwarding{d: d, br: nstest.Name("vsbr"), a: a, b: b}
	mustCall(t, d, "add-br", f.br, "fail_mode=secure")
	mustCall(t, d, "add-port", f.br, a.Port, "type=afpacket")
	mustCall(t, d, "add-port", f.br, b.Port, "type=afpacket")
	for _, fl := range []string{"priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := ofctl.Run(ctx, "unix:"+d.bridgeSocket(f.br), "add-flow", []string{fl}, io.Discard, ofctl.Options{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	nstest.Ping(t, a.NS, b.IP)
	f.before = f.states()
	if len(f.before) != 2 {
		t.Fatalf("flows before: %v", f.before)
	}
	for l, st := range f.before {
		if st.Packets == 0 {
			t.Fatalf("flow %q counted no packet after the ping", l)
		}
	}
	return f
}

func (f *forwarding) states() map[string]pipeline.EntryState {
	return flowStates(f.d.runningBridge(f.br).of)
}

// unchanged checks, after a refused change, that the flows kept
// their install times and counters, that the ports run under their
// numbers and that traffic crosses, counted by the same flows.
func (f *forwarding) unchanged(t *testing.T) {
	t.Helper()
	br := f.d.runningBridge(f.br)
	if br == nil {
		t.Fatalf("bridge %s not running after the refused change", f.br)
	}
	after := f.states()
	for l, st := range f.before {
		got, ok := after[l]
		switch {
		case !ok:
			t.Errorf("flow %q gone after the refused change: %v", l, after)
		case !got.Created.Equal(st.Created):
			t.Errorf("flow %q installed at %v after the refused change, was %v (its duration restarted)", l, got.Created, st.Created)
		case got.Packets < st.Packets:
			t.Errorf("flow %q counts %d packets after the refused change, was %d", l, got.Packets, st.Packets)
		}
	}
	for name, no := range map[string]uint32{f.a.Port: 1, f.b.Port: 2} {
		if p := br.portByName(name); p == nil || p.no != no {
			t.Errorf("port %s after the refused change: %+v, want running as %d", name, p, no)
		}
	}
	nstest.Ping(t, f.a.NS, f.b.IP)
	if t.Failed() {
		return
	}
	for l, st := range f.states() {
		if st.Packets <= f.before[l].Packets {
			t.Errorf("flow %q counts %d packets after another ping, was %d", l, st.Packets, f.before[l].Packets)
		}
	}
}

// TestFailedRebuildKeepsTables: a configuration change (as the
// reconciler applies the database's) that rebuilds the bridge
// (mac-aging-time) and changes a port so that it cannot open is refused
// and changes nothing: the flows keep their counters and install times,
// the ports their OpenFlow numbers, and traffic still crosses.
func TestFailedRebuildKeepsTables(t *testing.T) {
	f := newForwarding(t)
	d := f.d

	// A port that certainly cannot open (a tap device cannot take a
	// veth's name) is refused before anything is touched: the same bridge,
	// the same ports, no rebuild.
	br := d.runningBridge(f.br)
	pa, pb := br.portByName(f.a.Port), br.portByName(f.b.Port)
	err := d.change(func(c *config.Config) error {
		setOther(c.Bridges[f.br], "mac-aging-time", "30")
		c.Bridges[f.br].Ports[f.b.Port].Type = config.PortTypeTap
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), f.b.Port) {
		t.Fatalf("a rebuild with a tap port on a veth's name: err %v, want one naming %s", err, f.b.Port)
	}
	if nb := d.runningBridge(f.br); nb != br || nb.portByName(f.a.Port) != pa || nb.portByName(f.b.Port) != pb {
		t.Fatal("the refused change rebuilt the bridge or reopened its ports")
	}

	// A port the driver refuses (more AF_PACKET queues than it serves)
	// fails once the old datapath is closed: the bridge comes back as it
	// ran.
	err = d.change(func(c *config.Config) error {
		setOther(c.Bridges[f.br], "mac-aging-time", "30")
		c.Bridges[f.br].Ports[f.b.Port].Options = map[string]string{"n_rxq": "65"}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), f.b.Port) {
		t.Fatalf("a rebuild with a port that cannot open: err %v, want one naming %s", err, f.b.Port)
	}
	if got := d.store.Get().Bridges[f.br]; len(got.OtherConfig) != 0 {
		t.Errorf("other_config after the refused change: %v", got.OtherConfig)
	}
	if p := d.store.Get().Bridges[f.br].Ports[f.b.Port]; p.Type != config.PortTypeAFPacket || len(p.Options) != 0 {
		t.Errorf("type and options after the refused change: %q %v", p.Type, p.Options)
	}
	f.unchanged(t)
}

// TestFailedDelBrKeepsBridge: a configuration change that deletes a bridge and
// then fails (a new bridge's port the driver refuses) is refused and
// changes nothing: the bridge runs with its flows' counters and install
// times, and its own interface keeps the address the host gave it.
func TestFailedDelBrKeepsBridge(t *testing.T) {
	f := newForwarding(t)
	d := f.d
	nstest.Run(t, "ip", "addr", "add", "198.18.77.1/32", "dev", f.br)

	other := nstest.Name("vsbq")
	err := d.change(func(c *config.Config) error {
		delete(c.Bridges, f.br)
		c.Bridges[other] = &config.Bridge{Name: other, FailMode: config.FailModeStandalone, Ports: map[string]*config.Port{
			f.b.Port: {Name: f.b.Port, Type: config.PortTypeAFPacket, Options: map[string]string{"n_rxq": "65"}}}}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), f.b.Port) {
		t.Fatalf("del-br then a port that cannot open: err %v, want one naming %s", err, f.b.Port)
	}
	if got := slices.Sorted(maps.Keys(d.store.Get().Bridges)); !slices.Equal(got, []string{f.br}) {
		t.Errorf("bridges after the refused change: %q", got)
	}
	if out := nstest.Run(t, "ip", "-o", "addr", "show", "dev", f.br); !strings.Contains(out, "198.18.77.1/32") {
		t.Errorf("the bridge's own interface lost its address: %q", out)
	}
	f.unchanged(t)
	// The tables are saved again, for a restart.
	nstest.WaitFor(t, 5*time.Second, "the flows saved", func() bool {
		return len(savedFlows(t, d, f.br)) == 2
	})
}

// TestFailedDelPortKeepsPort: a configuration change that deletes a port and then
// fails (another port changed so that it cannot open) leaves the deleted
// port running as it was, never closed.
func TestFailedDelPortKeepsPort(t *testing.T) {
	f := newForwarding(t)
	pa := f.d.runningBridge(f.br).portByName(f.a.Port)
	err := f.d.change(func(c *config.Config) error {
		delete(c.Bridges[f.br].Ports, f.a.Port)
		c.Bridges[f.br].Ports[f.b.Port].Options = map[string]string{"n_rxq": "65"}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), f.b.Port) {
		t.Fatalf("del-port then a port that cannot open: err %v, want one naming %s", err, f.b.Port)
	}
	if got := f.d.runningBridge(f.br).portByName(f.a.Port); got != pa {
		t.Fatalf("port %s was closed and reopened by the refused change", f.a.Port)
	}
	f.unchanged(t)
}

func setOther(b *config.Bridge, k, v string) {
	if b.OtherConfig == nil {
		b.OtherConfig = map[string]string{}
	}
	b.OtherConfig[k] = v
}

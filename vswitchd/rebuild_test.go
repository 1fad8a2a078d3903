package vswitchd

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ctl/ofctl"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// TestFailedRebuildKeepsTables: a transaction that rebuilds the bridge
// (mac-aging-time) and changes a port so that it cannot open is refused
// and changes nothing: the flows keep their counters and install times,
// the ports their OpenFlow numbers, and traffic still crosses.
func TestFailedRebuildKeepsTables(t *testing.T) {
	a, b := nstest.TwoHosts(t)
	d, _ := startLogged(t)
	mustCall(t, d, "add-br", "br0", "fail_mode=secure")
	mustCall(t, d, "add-port", "br0", a.Port, "type=afpacket")
	mustCall(t, d, "add-port", "br0", b.Port, "type=afpacket")
	for _, f := range []string{"priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:1"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := ofctl.Run(ctx, "unix:"+d.bridgeSocket("br0"), "add-flow", []string{f}, io.Discard, ofctl.Options{})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	nstest.Ping(t, a.NS, b.IP)
	states := func() map[string]pipeline.EntryState { return flowStates(d.runningBridge("br0").of) }
	before := states()
	if len(before) != 2 {
		t.Fatalf("flows before: %v", before)
	}
	for l, st := range before {
		if st.Packets == 0 {
			t.Fatalf("flow %q counted no packet after the ping", l)
		}
	}

	// A port that certainly cannot open (a tap device cannot take a
	// veth's name) is refused before anything is touched: the same bridge,
	// the same ports, no rebuild.
	br, pa, pb := d.runningBridge("br0"), d.runningBridge("br0").portByName(a.Port), d.runningBridge("br0").portByName(b.Port)
	_, err := chain(t, d,
		[]string{"set", "Bridge", "br0", "other_config:mac-aging-time=30"},
		[]string{"set", "Interface", b.Port, "type=tap"})
	if err == nil || !strings.Contains(err.Error(), b.Port) {
		t.Fatalf("a rebuild with a tap port on a veth's name: err %v, want one naming %s", err, b.Port)
	}
	if nb := d.runningBridge("br0"); nb != br || nb.portByName(a.Port) != pa || nb.portByName(b.Port) != pb {
		t.Fatal("the refused transaction rebuilt the bridge or reopened its ports")
	}

	// A port the driver refuses (more AF_PACKET queues than it serves)
	// fails once the old datapath is closed: the bridge comes back as it
	// ran.
	_, err = chain(t, d,
		[]string{"set", "Bridge", "br0", "other_config:mac-aging-time=30"},
		[]string{"set", "Interface", b.Port, "options:n_rxq=65"})
	if err == nil || !strings.Contains(err.Error(), b.Port) {
		t.Fatalf("a rebuild with a port that cannot open: err %v, want one naming %s", err, b.Port)
	}

	after := states()
	for l, st := range before {
		got, ok := after[l]
		switch {
		case !ok:
			t.Errorf("flow %q gone after the refused transaction: %v", l, after)
		case !got.Created.Equal(st.Created):
			t.Errorf("flow %q installed at %v after the refused transaction, was %v (its duration restarted)", l, got.Created, st.Created)
		case got.Packets < st.Packets:
			t.Errorf("flow %q counts %d packets after the refused transaction, was %d", l, got.Packets, st.Packets)
		}
	}
	if got := strings.TrimSpace(mustCall(t, d, "get", "Bridge", "br0", "other_config")); got != "{}" {
		t.Errorf("other_config after the refused transaction: %s", got)
	}
	if got := mustCall(t, d, "get", "Interface", b.Port, "type", "options"); got != "afpacket\n{}\n" {
		t.Errorf("type and options after the refused transaction: %q", got)
	}
	br = d.runningBridge("br0")
	for name, no := range map[string]uint32{a.Port: 1, b.Port: 2} {
		if p := br.portByName(name); p == nil || p.no != no {
			t.Errorf("port %s after the refused transaction: %+v, want running as %d", name, p, no)
		}
	}
	nstest.Ping(t, a.NS, b.IP)
	if t.Failed() {
		return
	}
	for l, st := range states() {
		if st.Packets <= before[l].Packets {
			t.Errorf("flow %q counts %d packets after another ping, was %d", l, st.Packets, before[l].Packets)
		}
	}
}

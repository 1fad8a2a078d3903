//go:build linux

package ofproto

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/afpacket"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// newE2EBridge builds two hosts, a started datapath over their switch ports
// (AF_PACKET, ports 1 and 2) and a bridge with controller target ctlTarget
// and a punix: management socket. It returns the hosts, the bridge and the
// management target for ovs-ofctl; everything is removed when the test ends.
func newE2EBridge(t *testing.T, ctlTarget string) (a, b *nstest.Host, br *Bridge, mgmt string) {
	t.Helper()
	a, b = nstest.TwoHosts(t)
	up := &UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{NumPMDs: 1, PMDSleepMax: 50, Upcall: up})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	for i, h := range []*nstest.Host{a, b} {
		dev, err := afpacket.New(h.Port, afpacket.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dp.AddPort(uint32(i+1), dev); err != nil {
			dev.Close()
			t.Fatal(err)
		}
	}
	sock := filepath.Join(t.TempDir(), "br.mgmt")
	br, err = NewBridge("br0", dp, BridgeConfig{
		DatapathID:        0xfeed,
		Targets:           []string{ctlTarget},
		ManagementTargets: []string{"punix:" + sock},
		Upcall:            up,
		// Secure: the tests program the tables themselves and must not
		// fail open while the controller target waits for a peer.
		FailMode: FailSecure,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(br.Close)
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	return a, b, br, "unix:" + sock
}

// TestEndToEndOvsOfctl programs a bridge over two veth-attached AF_PACKET
// ports with the real ovs-ofctl and checks that hosts can (and then cannot)
// reach each other, and that a CONTROLLER action reaches a Go controller.
func TestEndToEndOvsOfctl(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	const ctlTarget = "ptcp:0:127.0.0.1"
	a, b, br, target := newE2EBridge(t, ctlTarget)

	ovsOfctl(t, "add-flow", target, "in_port=1,actions=output:2")
	ovsOfctl(t, "add-flow", target, "in_port=2,actions=output:1")
	nstest.Ping(t, a.NS, b.IP)

	// The ping's packets were counted by megaflows in the datapath and
	// pushed to the OpenFlow entries when dump-flows asked.
	dump := ovsOfctl(t, "dump-flows", target)
	t.Logf("dump-flows:\n%s", dump)
	flows := flowLines(dump)
	if len(flows) != 2 {
		t.Fatalf("dump-flows:\n%s", strings.Join(flows, "\n"))
	}
	for _, want := range []string{"in_port=1", "in_port=2", "actions=output:2", "actions=output:1"} {
		if !strings.Contains(strings.Join(flows, "\n"), want) {
			t.Fatalf("dump-flows lacks %q:\n%s", want, strings.Join(flows, "\n"))
		}
	}
	for _, f := range flows {
		if strings.Contains(f, "n_packets=0,") {
			t.Fatalf("a flow the ping crossed counted no packets:\n%s", f)
		}
	}
	if out := ovsOfctl(t, "show", target); !strings.Contains(out, "1("+a.Port+")") || !strings.Contains(out, "2("+b.Port+")") {
		t.Fatalf("show does not list both ports:\n%s", out)
	}

	if out := ovsOfctl(t, "dump-ports", target, "1"); !strings.Contains(out, "rx pkts=") || strings.Contains(out, "rx pkts=0,") {
		t.Fatalf("dump-ports 1 after ping:\n%s", out)
	}

	ovsOfctl(t, "del-flows", target)
	if n := len(flowLines(ovsOfctl(t, "dump-flows", target))); n != 0 {
		t.Fatalf("%d flows left after del-flows", n)
	}
	if out, err := a.NS.Output("ping", "-c", "2", "-i", "0.2", "-W", "1", b.IP); err == nil {
		t.Fatalf("ping succeeded with no flows:\n%s", out)
	}

	// A controller on the ptcp target receives what a CONTROLLER action sends.
	var addr string
	nstest.WaitFor(t, 5*time.Second, "controller listener", func() bool {
		for _, s := range br.Manager().Status() {
			if s.Target == ctlTarget && s.State == ofconn.StateListening {
				addr = s.LocalAddr
				return true
			}
		}
		return false
	})
	ctl := dial(t, "tcp", addr)
	ctl.request(&ofpwire.FeaturesRequest{}) // the handshake is done once this is answered
	ovsOfctl(t, "add-flow", target, "in_port=1,actions=controller")
	a.NS.Output("ping", "-c", "1", "-W", "1", b.IP)
	for {
		_, m := ctl.recv()
		pi, ok := m.(*ofpwire.PacketIn)
		if !ok {
			continue
		}
		if pi.Reason != ofp.PacketInReasonAction || len(pi.Data) < 14 {
			t.Fatalf("packet-in %+v", pi)
		}
		if o, ok := pi.Match.Field(ofp.XMTypeInPort); !ok || o.Uint() != 1 {
			t.Fatalf("packet-in match %+v", pi.Match)
		}
		break
	}
}

package metrics

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
)

// tunnelPortNo is where addTunnel puts its port, clear of the ring ports.
const tunnelPortNo = 100

// addTunnel adds a flow-based VXLAN port, bound to the loopback of a
// namespace of its own, to r as port tunnelPortNo, and sends it badHeaders
// datagrams that are not VXLAN, polling until it has counted them all.
func addTunnel(t *testing.T, r *rig, badHeaders int) *tunnel.Port {
	t.Helper()
	nstest.RequireRoot(t)
	ns := nstest.NewNetns(t, "mtun")
	lo := netip.MustParseAddr("127.0.0.1")
	var tp *tunnel.Port
	if err := ns.Do(func() (err error) {
		tp, err = tunnel.New("vx-metrics", tunnel.Options{Kind: tunnel.VXLAN, KeyFlow: true, Local: lo, SocketSend: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dp.AddPort(tunnelPortNo, tp); err != nil {
		tp.Close()
		t.Fatal(err)
	}
	if badHeaders == 0 {
		return tp
	}
	if err := ns.Do(func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, tunnel.VXLAN.DefaultPort())))
		if err != nil {
			return err
		}
		defer c.Close()
		for range badHeaders {
			if _, err := c.Write([]byte("not a VXLAN header")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	nstest.WaitFor(t, 5*time.Second, "the tunnel port to count the bad headers", func() bool {
		r.poll()
		return tp.Drops()[tunnel.CauseBadHeader] == uint64(badHeaders)
	})
	r.settle()
	return tp
}

// TestTunnelDrops: a tunnel port's drops are exported per cause, every
// cause present from the start, and the counted ones with their counts.
func TestTunnelDrops(t *testing.T) {
	r := newRig(t, "br0", 1, 1)
	addTunnel(t, r, 3)
	_, url := serve(t, func() []Bridge { return []Bridge{r.bridge()} })
	fams := scrape(t, url)
	f := fams["vswitch_tunnel_drops_total"]
	if f == nil {
		t.Fatal("vswitch_tunnel_drops_total not exported")
	}
	got := map[string]float64{}
	for _, m := range f.GetMetric() {
		var port, cause string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "port":
				port = l.GetValue()
			case "cause":
				cause = l.GetValue()
			}
		}
		if port != r.portName(tunnelPortNo) {
			t.Errorf("series for port %q, want only the tunnel port %q", port, r.portName(tunnelPortNo))
		}
		got[cause] = m.GetCounter().GetValue()
	}
	if len(got) != tunnel.NumCauses {
		t.Errorf("%d causes exported, want %d: %v", len(got), tunnel.NumCauses, got)
	}
	for i := range tunnel.NumCauses {
		c := tunnel.Cause(i)
		want := 0.0
		if c == tunnel.CauseBadHeader {
			want = 3
		}
		if v, ok := got[c.String()]; !ok || v != want {
			t.Errorf("cause %s: %v (exported %v), want %v", c, v, ok, want)
		}
	}
}

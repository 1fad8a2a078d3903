package afxdp

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// progID is the id of the XDP program attached to dev.
func progID(t *testing.T, dev string) uint32 {
	t.Helper()
	l, err := netlink.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return x.ProgId
	}
	t.Fatalf("no XDP program on %s", dev)
	return 0
}

// generations is the number of shared generations in the test's
// namespace.
func generations(t *testing.T) int {
	t.Helper()
	ns, err := currentNetns()
	if err != nil {
		t.Fatal(err)
	}
	shared.Lock()
	defer shared.Unlock()
	return len(shared.gens[ns])
}

// TestE2ESharedProgram: ports share one program (the same program id on
// every interface) until its maps are full; a port that does not fit gets
// a generation of its own, a closed port's slots are used again, a
// filtering port gets a program of its own beside the plain one in the
// same maps, a port with more queues than a map holds is refused saying
// why, and the last port's Close frees everything.
func TestE2ESharedProgram(t *testing.T) {
	var devs [3]string
	for i := range devs {
		devs[i], _ = vethPair(t)
	}
	if n := generations(t); n != 0 {
		t.Fatalf("%d generations before the test opened a port", n)
	}
	defer func(n int) { xskMapSize = n }(xskMapSize)
	xskMapSize = 2
	var open []*Port
	defer func() {
		for _, p := range open {
			p.Close()
		}
	}()
	openPort := func(dev string, f *UDPFilter) *Port {
		t.Helper()
		p, err := New(dev, Options{Queues: 1, Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, p)
		return p
	}
	closePort := func(p *Port) {
		t.Helper()
		for i, o := range open {
			if o == p {
				open = append(open[:i], open[i+1:]...)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	openPort(devs[0], nil)
	b := openPort(devs[1], nil)
	if progID(t, devs[0]) != progID(t, devs[1]) {
		t.Errorf("two ports run programs %d and %d, want one shared", progID(t, devs[0]), progID(t, devs[1]))
	}
	openPort(devs[2], nil)
	if progID(t, devs[2]) == progID(t, devs[0]) || generations(t) != 2 {
		t.Errorf("a third port in a 2-slot map: program %d (the first two's %d), %d generations; want a second generation",
			progID(t, devs[2]), progID(t, devs[0]), generations(t))
	}
	closePort(b)
	openPort(devs[1], nil)
	if progID(t, devs[1]) != progID(t, devs[0]) || generations(t) != 2 {
		t.Errorf("reopened port runs program %d (want the first generation's %d), %d generations",
			progID(t, devs[1]), progID(t, devs[0]), generations(t))
	}
	// The filtering port takes the slot the plain one frees.
	closePort(open[len(open)-1])
	f := &UDPFilter{Addr: netip.MustParseAddr("198.18.0.1"), Port: 4789}
	openPort(devs[1], f)
	if id := progID(t, devs[1]); id == progID(t, devs[0]) || id == progID(t, devs[2]) || generations(t) != 2 {
		t.Errorf("filtering port runs program %d (plain ones %d, %d), %d generations; want a program of its own in the first generation",
			id, progID(t, devs[0]), progID(t, devs[2]), generations(t))
	}
	_, err := New(devs[1], Options{Queues: 3})
	if err == nil || !strings.Contains(err.Error(), "at most 2") {
		t.Errorf("a port of 3 queues with 2-slot maps: %v, want a refusal naming the limit", err)
	}
	for len(open) > 0 {
		closePort(open[0])
	}
	if n := generations(t); n != 0 {
		t.Errorf("%d generations left after every port closed", n)
	}
	for _, dev := range devs {
		if on, _ := xdpAttached(t, dev); on {
			t.Errorf("XDP program left on %s", dev)
		}
	}
}

// TestE2EReaddAfterRemove: a port removed from the datapath (whose
// sockets close in the background) and opened again on the same interface
// at once, as a del-port and add-port of the same interface do, forwards.
// The other port keeps the shared program attached meanwhile.
func TestE2EReaddAfterRemove(t *testing.T) {
	s := newSwitch(t, Options{})
	nstest.Ping(t, s.A.NS, s.B.IP)
	for i := 0; i < 3; i++ {
		if err := s.DP.RemovePort(2); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		p, err := New(s.B.Port, Options{})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", i, err)
		}
		t.Logf("round %d: reopened in %v (waited %v for the queue)", i, time.Since(start).Round(time.Microsecond), p.BusyWaited())
		if _, err := s.DP.AddPort(2, p); err != nil {
			p.Close()
			t.Fatal(err)
		}
		if progID(t, s.A.Port) != progID(t, s.B.Port) {
			t.Errorf("round %d: the ports run programs %d and %d, want one", i, progID(t, s.A.Port), progID(t, s.B.Port))
		}
		nstest.Ping(t, s.A.NS, s.B.IP)
		nstest.Ping(t, s.B.NS, s.A.IP)
	}
}

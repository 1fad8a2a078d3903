package nstest

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
)

// Counter reads /sys/class/net/<dev>/statistics/<name> as seen from
// namespace ns (nil: the test's own namespace, where the switch ports
// are); sysfs shows the devices of the namespace of the reading process.
func Counter(t testing.TB, ns *Netns, dev, name string) uint64 {
	t.Helper()
	path := "/sys/class/net/" + dev + "/statistics/" + name
	var out string
	var err error
	if ns != nil {
		out, err = ns.Output("cat", path)
	} else {
		var b []byte
		b, err = os.ReadFile(path)
		out = string(b)
	}
	if err != nil {
		t.Fatalf("%s: %v %s", path, err, out)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// PMDDrops sums every drop cause of every PMD: the switch's share of a
// flood's loss accounting.
func PMDDrops(dp *datapath.Datapath) uint64 {
	var n uint64
	for _, s := range dp.PMDStats() {
		for _, d := range s.Drops {
			n += d
		}
	}
	return n
}

// PMDIterations sums the poll loop iterations of every PMD: if it grows,
// the PMDs are still running.
func PMDIterations(dp *datapath.Datapath) uint64 {
	var n uint64
	for _, s := range dp.PMDStats() {
		n += s.Iterations
	}
	return n
}

// CheckPools fails the test unless every PMD pool has all its buffers back
// and none was freed twice. Call it after dp.Stop.
func CheckPools(t testing.TB, dp *datapath.Datapath) {
	t.Helper()
	for _, p := range dp.PMDs() {
		pl := p.Pool()
		if pl.Available() != pl.Size() {
			t.Errorf("PMD %d: %d of %d buffers not returned", p.ID(), pl.Size()-pl.Available(), pl.Size())
		}
		if d := pl.DoubleFrees(); d != 0 {
			t.Errorf("PMD %d: %d double frees", p.ID(), d)
		}
		if b := pl.Big(); b != nil && b.Available() != b.Size() {
			t.Errorf("PMD %d: %d of %d big buffers not returned", p.ID(), b.Size()-b.Available(), b.Size())
		}
	}
}

// WaitFor polls cond every 10 ms until it holds, and fails the test if it
// does not within d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// WaitStable polls f until it returns the same value twice 300 ms apart
// (at most 15 s) and returns that value: a counter has settled once the
// traffic that moves it has drained.
func WaitStable(f func() uint64) uint64 {
	prev := f()
	for i := 0; i < 50; i++ {
		time.Sleep(300 * time.Millisecond)
		v := f()
		if v == prev {
			return v
		}
		prev = v
	}
	return prev
}

// Backlog sends n frames from host a into port, the switch's end of a's
// veth, while nobody polls it (as when a PMD has lost its CPU), then
// drains queue 0 until every frame the veth delivered is received or
// counted in the port's RxDrops. It returns how many frames the veth
// delivered (one it dropped itself, its queue full, is not the port's to
// keep) and how many the port received.
func Backlog(t testing.TB, a *Host, port netdev.Netdev, n int) (delivered, received uint64) {
	t.Helper()
	src, _ := net.ParseMAC(a.MAC)
	frame := UDPFrame(UnusedMAC, src, net.ParseIP(a.IP), net.ParseIP("198.18.0.2"), 1024, 9)
	tx0 := Counter(t, a.NS, a.Dev, "tx_packets")
	s := NewSender(t, a.NS, a.Dev, false)
	for range n {
		if err := s.Send(frame); err != nil {
			t.Fatal(err)
		}
	}
	delivered = Counter(t, a.NS, a.Dev, "tx_packets") - tx0
	pool := packet.NewPool(2*packet.BatchSize, packet.DefaultBufSize)
	var b packet.Batch
	WaitFor(t, 5*time.Second, "the burst received or counted as dropped", func() bool {
		for {
			b.Reset()
			got := port.Recv(0, pool, &b)
			b.FreeAll()
			received += uint64(got)
			if got == 0 {
				return received+port.Stats().RxDrops >= delivered
			}
		}
	})
	return delivered, received
}

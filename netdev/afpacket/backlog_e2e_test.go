package afpacket

import (
	"net"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// backlogBurst is more frames than the receive ring held before (4,096
// slots) and fewer than it holds now (8,192): what arrives at 1 Mpps while
// a PMD is off its CPU for 6 ms.
const backlogBurst = 6000

// TestE2EBacklogWhileNotPolled sends a burst into a port nobody polls, as
// when the PMD has lost its CPU to another task, and then drains it: the
// default ring must keep every frame the veth delivered, with no ring drop.
func TestE2EBacklogWhileNotPolled(t *testing.T) {
	a, _ := nstest.TwoHosts(t)
	p, err := New(a.Port, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	src, _ := net.ParseMAC(a.MAC)
	frame := nstest.UDPFrame(nstest.UnusedMAC, src, net.ParseIP(a.IP), net.ParseIP("198.18.0.2"), 1024, 9)
	tx0 := nstest.Counter(t, a.NS, a.Dev, "tx_packets")
	s := nstest.NewSender(t, a.NS, a.Dev, false)
	for range backlogBurst {
		if err := s.Send(frame); err != nil {
			t.Fatal(err)
		}
	}
	// What the veth handed to the port; a frame it dropped itself (its
	// backlog full) is not the ring's to keep.
	delivered := nstest.Counter(t, a.NS, a.Dev, "tx_packets") - tx0
	if delivered <= 4096 {
		t.Skipf("the veth delivered only %d of %d frames, no more than the old ring held", delivered, backlogBurst)
	}
	pool := packet.NewPool(2*packet.BatchSize, packet.DefaultBufSize)
	var b packet.Batch
	var got uint64
	nstest.WaitFor(t, 5*time.Second, "the burst received or counted as dropped", func() bool {
		for {
			b.Reset()
			n := p.Recv(0, pool, &b)
			b.FreeAll()
			got += uint64(n)
			if n == 0 {
				return got+p.Stats().RxDrops >= delivered
			}
		}
	})
	st := p.Stats()
	t.Logf("sent %d, veth delivered %d, received %d, ring drops %d", backlogBurst, delivered, got, st.RxDrops)
	if st.RxDrops != 0 {
		t.Errorf("%d frames dropped for want of ring space (RxFrames %d)", st.RxDrops, DefaultRxFrames)
	}
}

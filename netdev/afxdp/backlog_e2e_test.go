package afxdp

import (
	"net"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// backlogBurst is more frames than the receive side held before (2,048
// UMEM frames) and fewer than it holds now (8,192): what arrives at 1 Mpps
// while a PMD is off its CPU for 6 ms.
const backlogBurst = 6000

// TestE2EBacklogWhileNotPolled sends a burst into a port nobody polls, as
// when the PMD has lost its CPU to another task, and then drains it: the
// default rings must keep every frame the veth delivered, with neither an
// empty fill ring nor a full rx ring.
func TestE2EBacklogWhileNotPolled(t *testing.T) {
	a, _ := nstest.TwoHosts(t)
	p, err := New(a.Port, Options{Queues: 1})
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
	// queue full) is not the socket's to keep.
	delivered := nstest.Counter(t, a.NS, a.Dev, "tx_packets") - tx0
	if delivered <= 2048 {
		t.Skipf("the veth delivered only %d of %d frames, no more than the old rings held", delivered, backlogBurst)
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
	k := p.KernelStats()
	t.Logf("sent %d, veth delivered %d, received %d, fill ring empty %d, rx ring full %d",
		backlogBurst, delivered, got, k.Rx_fill_ring_empty_descs, k.Rx_ring_full)
	if st := p.Stats(); st.RxDrops != 0 {
		t.Errorf("%d frames dropped for want of receive frames (fill ring empty %d, rx ring full %d)",
			st.RxDrops, k.Rx_fill_ring_empty_descs, k.Rx_ring_full)
	}
}

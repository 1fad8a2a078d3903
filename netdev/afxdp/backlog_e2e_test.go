package afxdp

import (
	"testing"

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
	delivered, got := nstest.Backlog(t, a, p, backlogBurst)
	if delivered <= 2048 {
		t.Skipf("the veth delivered only %d of %d frames, no more than the old rings held", delivered, backlogBurst)
	}
	k := p.KernelStats()
	t.Logf("sent %d, veth delivered %d, received %d, fill ring empty %d, rx ring full %d",
		backlogBurst, delivered, got, k.Rx_fill_ring_empty_descs, k.Rx_ring_full)
	if st := p.Stats(); st.RxDrops != 0 {
		t.Errorf("%d frames dropped for want of receive frames (fill ring empty %d, rx ring full %d)",
			st.RxDrops, k.Rx_fill_ring_empty_descs, k.Rx_ring_full)
	}
}

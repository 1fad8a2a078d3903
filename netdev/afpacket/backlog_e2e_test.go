package afpacket

import (
	"testing"

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
	delivered, got := nstest.Backlog(t, a, p, backlogBurst)
	if delivered <= 4096 {
		t.Skipf("the veth delivered only %d of %d frames, no more than the old ring held", delivered, backlogBurst)
	}
	st := p.Stats()
	t.Logf("sent %d, veth delivered %d, received %d, ring drops %d", backlogBurst, delivered, got, st.RxDrops)
	if st.RxDrops != 0 {
		t.Errorf("%d frames dropped for want of ring space (RxFrames %d)", st.RxDrops, DefaultRxFrames)
	}
}

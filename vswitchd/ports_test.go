package vswitchd

import (
	"testing"

	"github.com/vswitch-go/vswitch/netdev/afxdp"
)

// options:n_rxq_desc on an AF_XDP port becomes fill and rx rings of a
// power of two at least that deep, with as many receive frames.
func TestXDPRxDepth(t *testing.T) {
	if o := xdpRxDepth(afxdp.Options{Queues: 2}, 0); o.FillSize != 0 || o.RxSize != 0 || o.Frames != 0 || o.Queues != 2 {
		t.Errorf("no depth changed the options: %+v", o)
	}
	for _, c := range []struct{ depth, ring int }{{1, 64}, {64, 64}, {5000, 8192}, {8192, 8192}, {8193, 16384}} {
		o := xdpRxDepth(afxdp.Options{Queues: 2}, c.depth)
		if o.FillSize != c.ring || o.RxSize != c.ring || o.Frames != 2*c.ring || o.Queues != 2 {
			t.Errorf("depth %d: %+v, want rings of %d", c.depth, o, c.ring)
		}
	}
}

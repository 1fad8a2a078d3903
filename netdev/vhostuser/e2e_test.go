package vhostuser

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestE2ETestpmd: one dpdk-testpmd process with two virtio-user ports, each
// connected to a vhost-user port of the switch (the switch listens). In
// flowgen mode testpmd sends generated UDP flows on both ports and counts
// (then discards) what it receives, so traffic in both directions through
// the switch shows in testpmd's port counters and in the switch's.
//
// testpmd runs interactively and the test starts forwarding itself once
// both ports are up: virtio-user brings the vhost-user rings up (DRIVER_OK)
// while it probes the device inside rte_eal_init, and only then does
// testpmd mlockall its memory, build its mbuf pool and start its ports,
// which on a loaded machine takes seconds. A test that took "rings up" for
// "testpmd forwards" and gave it a fixed time from there sent SIGINT into
// that start-up now and then; testpmd then still started forwarding and
// stopped it a few milliseconds later (one burst of 32 per port, nothing
// received, no periodic statistics printed). The prompt answering "start"
// is the point from which testpmd's forwarding lcore runs.
func TestE2ETestpmd(t *testing.T) {
	pa, pathA := newServerPort(t, 1)
	pb, pathB := newServerPort(t, 1)
	dp := nstest.CrossConnect(t, 1, pa, pb)

	tp := startTestpmd(t, []string{
		"net_virtio_user0,path=" + pathA + ",queues=1",
		"net_virtio_user1,path=" + pathB + ",queues=1",
	}, "--forward-mode=flowgen")
	tp.waitPrompt()
	waitUp(t, pa, tp)
	waitUp(t, pb, tp)
	tp.do("start")
	// Forward until the switch has moved a good amount each way.
	const enough = 10000
	moved := func() bool {
		sa, sb := pa.Stats(), pb.Stats()
		return min(sa.RxPackets, sa.TxPackets, sb.RxPackets, sb.TxPackets) >= enough
	}
	deadline := time.Now().Add(20 * time.Second)
	for !moved() {
		if time.Now().After(deadline) {
			t.Errorf("switch ports moved too little in 20 s: A %+v B %+v", pa.Stats(), pb.Stats())
			break
		}
		select {
		case <-tp.exited:
			t.Fatalf("testpmd exited while forwarding")
		case <-time.After(10 * time.Millisecond):
		}
	}
	st := tp.stop()
	// The rings stay up after stop: the switch drains what testpmd sent.
	rxA := settle(func() uint64 { return pa.Stats().RxPackets })
	rxB := settle(func() uint64 { return pb.Stats().RxPackets })
	sa, sb := pa.Stats(), pb.Stats()
	t.Logf("testpmd port 0 %+v; port 1 %+v", st[0], st[1])
	t.Logf("switch port A %+v", sa)
	t.Logf("switch port B %+v", sb)
	t.Logf("PMD %+v", dp.PMDStats())
	// Every frame the switch took went out of the other port or is in
	// a PMD drop counter (a full guest receive ring).
	if drops := nstest.PMDDrops(dp); sa.RxPackets+sb.RxPackets != sa.TxPackets+sb.TxPackets+drops {
		t.Errorf("switch received %d+%d, sent %d+%d and dropped %d", sa.RxPackets, sb.RxPackets, sa.TxPackets, sb.TxPackets, drops)
	}
	for i, rx := range []uint64{rxA, rxB} {
		if st[i].RxPackets < enough/2 {
			t.Errorf("testpmd port %d received %d packets across the switch", i, st[i].RxPackets)
		}
		if st[i].TxPackets != rx {
			t.Errorf("testpmd port %d put %d frames in its transmit ring, the switch took %d", i, st[i].TxPackets, rx)
		}
	}
	if sa.RxErrors+sb.RxErrors+sa.TxErrors+sb.TxErrors != 0 {
		t.Errorf("errors: A %+v B %+v", sa, sb)
	}
}

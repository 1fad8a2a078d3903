package vhostuser

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestDatapathForwarding: two frontends exchange frames through the
// datapath's PMD, both ways at once: nothing lost, nothing leaked.
func TestDatapathForwarding(t *testing.T) {
	pa, pathA := newServerPort(t, 1)
	pb, pathB := newServerPort(t, 1)
	dp := nstest.CrossConnect(t, 1, pa, pb)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			dp.Stop()
		}
	}
	t.Cleanup(func() { stop(); dp.Close() })

	fa := dialFrontend(t, pathA, feCfg{})
	fb := dialFrontend(t, pathB, feCfg{eventIdx: true})
	fa.setup()
	fb.setup()
	waitFor(t, "links up", func() bool { return pa.LinkUp() && pb.LinkUp() })

	const n = 5000
	sentA, sentB := 0, 0
	var gotA, gotB []uint32 // what A and B received
	deadline := time.Now().Add(10 * time.Second)
	for (len(gotA) < n || len(gotB) < n) && time.Now().Before(deadline) {
		// Keep fewer frames in flight than either receive ring holds,
		// so a loss would be the switch's.
		if sentA < n && sentA-len(gotB) < 128 {
			sentA += fa.tx(0).transmit(testFrame(60+sentA%200, uint32(sentA)))
		}
		if sentB < n && sentB-len(gotA) < 128 {
			sentB += fb.tx(0).transmit(testFrame(1000, uint32(sentB)))
		}
		for _, fr := range fb.rx(0).receive() {
			gotB = append(gotB, seqOf(fr))
		}
		for _, fr := range fa.rx(0).receive() {
			gotA = append(gotA, seqOf(fr))
		}
	}
	if len(gotA) != n || len(gotB) != n {
		t.Fatalf("A received %d, B received %d of %d (port stats A %+v B %+v, PMD %+v)",
			len(gotA), len(gotB), n, pa.Stats(), pb.Stats(), dp.PMDStats())
	}
	for i := 0; i < n; i++ {
		if gotA[i] != uint32(i) || gotB[i] != uint32(i) {
			t.Fatalf("frame %d out of order: A %d B %d", i, gotA[i], gotB[i])
		}
	}
	stop()
	for _, p := range dp.PMDs() {
		if p.Pool().Available() != p.Pool().Size() {
			t.Errorf("PMD %d: %d buffers not returned", p.ID(), p.Pool().Size()-p.Pool().Available())
		}
	}
	for _, p := range []*Port{pa, pb} {
		s := p.Stats()
		if s.RxPackets != n || s.TxPackets != n || s.TxDrops != 0 || s.RxErrors != 0 || s.TxErrors != 0 {
			t.Errorf("%s stats %+v", p.Name(), s)
		}
	}
}

// TestDatapathFrontendRestart: frontend A disconnects and comes back three
// times while B keeps transmitting towards it and the PMD keeps polling;
// the port drops while A is away (memory unmapped only after the PMD let
// go), and every time A is back frames reach it again.
func TestDatapathFrontendRestart(t *testing.T) {
	rules := &datapath.RuleTable{}
	dp, err := datapath.New(datapath.Config{NumPMDs: 1, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	pa, pathA := newServerPort(t, 1)
	pb, pathB := newServerPort(t, 1)
	dp.AddPort(1, pa)
	dp.AddPort(2, pb)
	rules.Add(nstest.InPortRule(2, 1))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	fb := dialFrontend(t, pathB, feCfg{})
	fb.setup()
	seq := uint32(0)
	pump := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			seq += uint32(fb.tx(0).transmit(testFrame(64, seq)))
			time.Sleep(20 * time.Microsecond)
		}
	}
	for round := 0; round < 3; round++ {
		fa := dialFrontend(t, pathA, feCfg{})
		fa.setup()
		waitFor(t, "A up", pa.LinkUp)
		got := 0
		for end := time.Now().Add(5 * time.Second); got < 50 && time.Now().Before(end); {
			pump(time.Millisecond)
			got += len(fa.rx(0).receive())
		}
		if got < 50 {
			t.Fatalf("round %d: A received %d frames", round, got)
		}
		fa.close() // while B's frames are still flowing to A
		pump(20 * time.Millisecond)
		waitFor(t, "A down", func() bool { return !pa.connected.Load() })
	}
	pump(10 * time.Millisecond)
	// The PMD sees the link down and counts the drops itself; frames
	// caught in flight count as the port's tx drops.
	if d := dp.PMDStats()[0].Drops[datapath.DropPortDown] + pa.Stats().TxDrops; d == 0 {
		t.Errorf("no drops counted while A was away: port %+v", pa.Stats())
	}
	dp.Stop()
	for _, p := range dp.PMDs() {
		if p.Pool().Available() != p.Pool().Size() {
			t.Errorf("PMD %d leaked buffers", p.ID())
		}
	}
}

package datapath

import (
	"fmt"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/actions"
)

// liveRig is a running datapath (PMD goroutine, real clock) whose ports
// wake it through descriptors, forwarding port 1 to 3 and 2 to 4, with the
// idle timer made so long that only a descriptor, a deadline or the
// control side's eventfd can end a sleep within a test.
type liveRig struct {
	dp    *Datapath
	ports map[uint32]*wakingPort
}

func newLiveRig(t *testing.T, intervalUs int) *liveRig {
	t.Helper()
	old := idleWakeNs
	idleWakeNs = int64(time.Hour)
	rules := &RuleTable{}
	dp, err := New(Config{TxFlushInterval: intervalUs, Upcall: rules, EMCInsertInvProb: 1, PMDSleepMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	r := &liveRig{dp: dp, ports: map[uint32]*wakingPort{}}
	for no := uint32(1); no <= 4; no++ {
		wp := newWakingPort(t, fmt.Sprintf("p%d", no), dp.clock)
		if _, err := dp.AddPort(no, wp); err != nil {
			t.Fatal(err)
		}
		r.ports[no] = wp
	}
	rules.Add(inPortRule(10, 1, 3))
	rules.Add(inPortRule(10, 2, 4))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dp.Close()
		idleWakeNs = old
	})
	return r
}

// sentPackets is how many packets the PMD has handed port no's driver.
func (r *liveRig) sentPackets(no uint32) int {
	rp := r.ports[no].recordingPort
	rp.mu.Lock()
	defer rp.mu.Unlock()
	n := 0
	for _, s := range rp.sends {
		n += s.size
	}
	return n
}

// waitFor polls cond until it holds, failing the test after 10 s: what it
// waits for happens in microseconds unless the PMD missed its wake-up, in
// which case it would wait for the hour-long idle timer.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSleepingPMDWakesAtDeadline: a packet held for the interval leaves
// although no other packet arrives: the sleeping PMD wakes by the
// deadline (its idle timer alone would sleep an hour).
func TestSleepingPMDWakesAtDeadline(t *testing.T) {
	r := newLiveRig(t, 20_000) // 20 ms
	r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, 1))
	waitFor(t, "the first packet (sent at once)", func() bool { return r.sentPackets(3) == 1 })
	r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, 2))
	waitFor(t, "the held packet", func() bool { return r.sentPackets(3) == 2 })
	if s := r.dp.PMDStats()[0]; s.RxPackets != 2 {
		t.Fatalf("PMD received %d packets, want 2", s.RxPackets)
	}
}

// TestIdlePMDSleeps: an idle PMD whose queues can wake it sleeps until
// they do, or until the control side needs it: plan changes, packet-outs
// and Stop wake it through its eventfd, and in between it does not
// iterate.
func TestIdlePMDSleeps(t *testing.T) {
	r := newLiveRig(t, 0)
	acts := actions.List{actions.OutputTo(3)}
	packetOut := func(seq uint32) PMDStats {
		t.Helper()
		before := r.dp.PMDStats()[0].Iterations
		if err := r.dp.Execute(udpFrame(1, 2, 0, 9, seq), 1, acts); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the packet-out", func() bool { return r.sentPackets(3) == int(seq) })
		waitFor(t, "the PMD to publish", func() bool { return r.dp.PMDStats()[0].Iterations > before })
		return r.dp.PMDStats()[0]
	}
	s0 := packetOut(1)
	time.Sleep(300 * time.Millisecond)
	s1 := packetOut(2)
	// Polling every pmd-sleep-max (100 µs) would be some 3000 iterations.
	if n := s1.Iterations - s0.Iterations; n > 100 {
		t.Fatalf("an idle PMD iterated %d times in 300 ms", n)
	}
	// A plan change is acknowledged although the PMD sleeps.
	if err := r.dp.SetTxFlushInterval(50); err != nil {
		t.Fatal(err)
	}
	r.ports[2].Inject(0, udpFrame(1, 2, 0, 9, 3))
	waitFor(t, "a packet after the plan change", func() bool { return r.sentPackets(4) == 1 })
	r.dp.Stop() // returns only if the eventfd woke the PMD
	checkNoLeaks(t, r.dp)
}

// TestIdlePMDYields: a busy-polling PMD with nothing to receive offers its
// CPU to the kernel again and again (idleYieldNs) and counts it; a sleeping
// PMD's idle time is spent asleep, so only its spin windows yield.
func TestIdlePMDYields(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{Upcall: rules, PMDSleepMax: 0})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(1, newWakingPort(t, "p1", dp.clock)); err != nil {
		t.Fatal(err)
	}
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	waitFor(t, "an idle busy PMD to yield its CPU", func() bool {
		var n uint64
		for _, s := range dp.PMDStats() {
			n += s.IdleYields
		}
		return n >= 3
	})
}

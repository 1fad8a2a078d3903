package datapath

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// batchRig is a manual-mode datapath with a fake clock: rx ports 1 and 2
// forward to ports 3 and 4 (1→3, 2→4, plus 2→3 for half of port 2's
// traffic, by UDP source port), all ring ports recording their sends.
type batchRig struct {
	t     *testing.T
	clk   *fakeClock
	dp    *Datapath
	ports map[uint32]*wakingPort
	pmd   *PMD
}

func newBatchRig(t *testing.T, intervalUs int) *batchRig {
	t.Helper()
	clk := &fakeClock{ns: 1_000_000_000}
	rules := &RuleTable{}
	dp, err := New(Config{Manual: true, Clock: clk.now, TxFlushInterval: intervalUs, Upcall: rules, EMCInsertInvProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	r := &batchRig{t: t, clk: clk, dp: dp, ports: map[uint32]*wakingPort{}, pmd: dp.PMDs()[0]}
	for no := uint32(1); no <= 4; no++ {
		rp := newWakingPort(t, fmt.Sprintf("p%d", no), clk.now)
		if _, err := dp.AddPort(no, rp); err != nil {
			t.Fatal(err)
		}
		r.ports[no] = rp
	}
	rules.Add(inPortRule(10, 1, 3))
	rules.Add(inPortRule(10, 2, 4))
	odd := inPortRule(20, 2, 3)
	odd.Match.Key.TpSrc, odd.Match.Mask.TpSrc = 1, 1 // odd source ports of port 2 go to 3
	rules.Add(odd)
	t.Cleanup(func() { dp.Close() })
	return r
}

// warm installs the rig's flows (upcalls flush everything, which would
// blur the timing tests), then lets every port go quiet for a second.
func (r *batchRig) warm() {
	r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, 0))
	r.ports[2].Inject(0, udpFrame(1, 2, 0, 9, 0), udpFrame(1, 2, 1, 9, 0))
	r.pmd.PollOnce()
	r.clk.ns += 1_000_000_000
	r.pmd.PollOnce()
	r.drain()
	for _, p := range r.ports {
		p.sends = nil
	}
}

// sent is a packet seen leaving the switch.
type sent struct {
	seq  uint32
	at   int64
	port uint32
}

// drain collects what ports 3 and 4 transmitted so far, stamped with now.
func (r *batchRig) drain() []sent {
	var out []sent
	for _, no := range []uint32{3, 4} {
		r.ports[no].Drain(0, func(f []byte) {
			out = append(out, sent{seq: frameSeq(f), at: r.clk.ns, port: no})
		})
	}
	return out
}

// TestBatchingProperties drives random traffic through a fake-clock PMD
// iterating at random moments and checks the batching rule for several
// intervals.
func TestBatchingProperties(t *testing.T) {
	for _, intervalUs := range []int{0, 1, 50, 1000} {
		t.Run(fmt.Sprintf("interval=%dus", intervalUs), func(t *testing.T) {
			r := newBatchRig(t, intervalUs)
			rng := rand.New(rand.NewPCG(uint64(intervalUs), 7))
			interval := int64(intervalUs) * 1000
			injectedAt := map[uint32]int64{} // when the PMD received it
			inPortOf := map[uint32]uint32{}
			queued := map[uint32][]uint32{} // per input port, injected but not yet received
			var out []sent
			seq := uint32(0)
			var maxIter int64
			for it := 0; it < 3000; it++ {
				// Inject a random burst on each input (often none).
				for _, in := range []uint32{1, 2} {
					if rng.IntN(3) == 0 {
						continue
					}
					for range rng.IntN(40) {
						seq++
						f := udpFrame(0xc6120001, 0xc6120002, uint16(rng.IntN(4)), 9, seq)
						if r.ports[in].Inject(0, f) != 1 {
							t.Fatal("rx ring full")
						}
						inPortOf[seq] = in
						queued[in] = append(queued[in], seq)
					}
				}
				// Advance time by a random iteration length, sometimes a long gap.
				step := int64(rng.IntN(3000)) + 100
				if rng.IntN(50) == 0 {
					step += int64(rng.IntN(2_000_000))
				}
				maxIter = max(maxIter, step)
				r.clk.ns += step
				r.pmd.PollOnce()
				// The rings are FIFOs: what left them was received now.
				for _, in := range []uint32{1, 2} {
					n := len(queued[in]) - r.ports[in].Pending(0)
					for _, s := range queued[in][:n] {
						injectedAt[s] = r.clk.ns
					}
					queued[in] = queued[in][n:]
				}
				out = append(out, r.drain()...)
			}
			// Receive what is left.
			for r.ports[1].Pending(0)+r.ports[2].Pending(0) > 0 {
				r.clk.ns += 100
				r.pmd.PollOnce()
				for _, in := range []uint32{1, 2} {
					n := len(queued[in]) - r.ports[in].Pending(0)
					for _, s := range queued[in][:n] {
						injectedAt[s] = r.clk.ns
					}
					queued[in] = queued[in][n:]
				}
				out = append(out, r.drain()...)
			}
			// Quiesce: idle iterations send what is due, the last one
			// at the latest deadline.
			r.clk.ns += interval
			r.pmd.PollOnce()
			out = append(out, r.drain()...)
			if len(r.pmd.pending) != 0 {
				t.Fatalf("%d batches still held one interval after the last packet", len(r.pmd.pending))
			}

			// No loss, no duplication.
			seen := map[uint32]bool{}
			for _, s := range out {
				if seen[s.seq] {
					t.Fatalf("packet %d sent twice", s.seq)
				}
				seen[s.seq] = true
			}
			if len(seen) != int(seq) {
				t.Fatalf("sent %d distinct packets, injected %d", len(seen), seq)
			}
			// Per (input, output) order preserved.
			last := map[[2]uint32]uint32{}
			for _, s := range out {
				k := [2]uint32{inPortOf[s.seq], s.port}
				if s.seq < last[k] {
					t.Fatalf("packet %d from port %d left port %d after packet %d", s.seq, k[0], k[1], last[k])
				}
				last[k] = s.seq
			}
			// Latency bound: interval 0 sends in the receiving iteration;
			// otherwise within the interval plus one iteration.
			for _, s := range out {
				wait := s.at - injectedAt[s.seq]
				if interval == 0 && wait != 0 {
					t.Fatalf("interval 0: packet %d waited %d ns past its burst", s.seq, wait)
				}
				if wait > interval+maxIter {
					t.Fatalf("packet %d waited %d ns, interval %d ns + iteration %d ns", s.seq, wait, interval, maxIter)
				}
			}
			// No batch above BatchSize.
			for no, rp := range r.ports {
				for _, s := range rp.sends {
					if s.size > packet.BatchSize || s.size == 0 {
						t.Fatalf("port %d sent a batch of %d", no, s.size)
					}
				}
			}
			checkNoLeaks(t, r.dp)
		})
	}
}

// TestQuietPortSendsAtOnce: a port that has not sent for longer than the
// interval sends its next packet at the end of that receive burst, while a
// busy port waits for its deadline.
func TestQuietPortSendsAtOnce(t *testing.T) {
	r := newBatchRig(t, 50)
	r.warm()
	f := func(seq uint32) []byte { return udpFrame(1, 2, 0, 9, seq) }
	r.ports[1].Inject(0, f(1))
	r.pmd.PollOnce()
	if got := r.drain(); len(got) != 1 || got[0].seq != 1 {
		t.Fatalf("first packet to a quiet port: sent %v, want it at once", got)
	}
	// 10 µs later the port is not quiet: the next packet waits, as long as
	// the PMD stays busy (port 2 keeps it busy).
	r.clk.ns += 10_000
	r.ports[1].Inject(0, f(2))
	r.ports[2].Inject(0, udpFrame(1, 2, 0, 9, 100))
	r.pmd.PollOnce()
	if got := r.drain(); len(got) != 1 || got[0].seq != 100 {
		t.Fatalf("10 µs after a send: got %v, want only port 4's first packet", got)
	}
	r.clk.ns += 30_000 // 40 µs after the first send: still before the deadline
	r.ports[2].Inject(0, udpFrame(1, 2, 0, 9, 101))
	r.pmd.PollOnce()
	if got := r.drain(); len(got) != 0 {
		t.Fatalf("40 µs after a send: got %v, want nothing (port 4 sent 30 µs ago too)", got)
	}
	r.clk.ns += 10_001 // past port 3's deadline, 10 µs before port 4's
	r.ports[2].Inject(0, udpFrame(1, 2, 0, 9, 102))
	r.pmd.PollOnce()
	got := r.drain()
	if len(got) != 1 || got[0].seq != 2 || got[0].port != 3 {
		t.Fatalf("past port 3's deadline: got %v, want only packet 2 on port 3", got)
	}
	r.clk.ns += 10_000 // past port 4's deadline
	r.ports[1].Inject(0, f(200))
	r.pmd.PollOnce()
	if got := r.drain(); len(got) != 2 || got[0].port != 4 || got[1].port != 4 {
		t.Fatalf("past port 4's deadline: got %v, want packets 101 and 102 on port 4", got)
	}
	// After 1 s of silence the next packet goes out in its own burst.
	r.clk.ns += 1_000_000_000
	r.ports[1].Inject(0, f(3))
	r.ports[2].Inject(0, udpFrame(1, 2, 0, 9, 103))
	r.pmd.PollOnce()
	if got := r.drain(); len(got) != 3 {
		t.Fatalf("after a quiet second: got %v, want packets 200, 3 and 103 at once", got)
	}
}

// TestFullBatchSentFirst: a batch that would exceed BatchSize is sent
// before the packet that does not fit is queued.
func TestFullBatchSentFirst(t *testing.T) {
	r := newBatchRig(t, 1000)
	r.warm()
	// Make port 3 busy (deadline in the future).
	r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, 0))
	r.pmd.PollOnce()
	r.drain()
	seq := uint32(1)
	for range 3 {
		for range packet.BatchSize {
			r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, seq))
			seq++
		}
		r.clk.ns += 100
		r.pmd.PollOnce()
	}
	sends := r.ports[3].sends
	// First send was the single packet; then full batches as the 33rd,
	// 65th... packet arrived.
	if len(sends) != 3 || sends[1].size != packet.BatchSize || sends[2].size != packet.BatchSize {
		t.Fatalf("sends %+v, want [1 32 32] with 32 still queued", sends)
	}
	r.pmd.PollOnce() // idle, before the deadline: the last 32 wait
	if n := len(r.drain()); n != 2*packet.BatchSize {
		t.Fatalf("drained %d packets before the deadline, want %d", n, 2*packet.BatchSize)
	}
	r.clk.ns += 1_000_000
	r.pmd.PollOnce() // idle, at the deadline
	if n := len(r.drain()); n != packet.BatchSize {
		t.Fatalf("drained %d packets at the deadline, want %d", n, packet.BatchSize)
	}
}

// TestPerPortIntervalOverride: a per-port interval takes precedence over
// the switch's, and changes apply at run time.
func TestPerPortIntervalOverride(t *testing.T) {
	r := newBatchRig(t, 0)
	r.warm()
	if err := r.dp.SetPortTxFlushInterval(3, 500); err != nil {
		t.Fatal(err)
	}
	send := func(in uint32, seq uint32) []sent {
		r.ports[in].Inject(0, udpFrame(1, 2, 0, 9, seq))
		r.clk.ns += 1000
		r.pmd.PollOnce()
		return r.drain()
	}
	send(1, 1) // quiet port: sent at once, deadline +500 µs
	send(2, 2) // keeps port 4 busy (interval 0)
	// Keep the PMD busy via port 2 while port 3 holds a packet.
	r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, 3))
	got := send(2, 4)
	for _, s := range got {
		if s.port == 3 {
			t.Fatalf("port 3 (interval 500 µs) sent %d 1 µs after its last send", s.seq)
		}
	}
	if len(got) != 1 {
		t.Fatalf("port 4 (interval 0) should send at once, got %v", got)
	}
	if err := r.dp.SetPortTxFlushInterval(3, -1); err != nil {
		t.Fatal(err)
	}
	if err := r.dp.SetTxFlushInterval(MaxTxFlushInterval + 1); err == nil {
		t.Fatal("out-of-range interval accepted")
	}
	if err := r.dp.SetPortTxFlushInterval(99, 5); err == nil {
		t.Fatal("interval on a missing port accepted")
	}
}

// TestIdleIterationSendsOnlyDue: an iteration that receives nothing sends
// the batches whose deadline has passed and no other, and the PMD would
// sleep exactly until the earliest deadline it holds.
func TestIdleIterationSendsOnlyDue(t *testing.T) {
	r := newBatchRig(t, 50)
	r.warm()
	r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, 1))
	r.pmd.PollOnce() // port 3 was quiet: sent at once, deadline +50 µs
	if got := r.drain(); len(got) != 1 {
		t.Fatalf("first packet: sent %v, want it at once", got)
	}
	r.clk.ns += 10_000
	r.ports[1].Inject(0, udpFrame(1, 2, 0, 9, 2))
	r.pmd.PollOnce() // held until +50 µs
	if got := r.drain(); len(got) != 0 {
		t.Fatalf("10 µs after a send: sent %v, want it held", got)
	}
	if got := r.pmd.sleepTimeout(); got != 40_000 {
		t.Fatalf("sleep timeout %d ns, want 40000 (until the deadline)", got)
	}
	r.clk.ns += 39_999
	if r.pmd.PollOnce(); len(r.drain()) != 0 {
		t.Fatal("an idle iteration 1 ns before the deadline sent the batch")
	}
	if got := r.pmd.sleepTimeout(); got != 1 {
		t.Fatalf("sleep timeout %d ns, want 1", got)
	}
	r.clk.ns++
	r.pmd.PollOnce()
	if got := r.drain(); len(got) != 1 || got[0].seq != 2 {
		t.Fatalf("idle iteration at the deadline: sent %v, want packet 2", got)
	}
	// Nothing held: the PMD sleeps on its queues until the idle timer.
	if got := r.pmd.sleepTimeout(); got != idleWakeNs {
		t.Fatalf("sleep timeout with nothing held %d ns, want the idle timer %d", got, idleWakeNs)
	}
	checkNoLeaks(t, r.dp)
}

// arrival is one frame reaching an input port at a (fake) time.
type arrival struct {
	at  int64
	in  uint32
	seq uint32
	// receivedAt is when the PMD took it from the port's ring.
	receivedAt int64
}

// simIterationNs is what one simulated PMD iteration costs.
const simIterationNs = 500

// simulate runs the rig's PMD as its goroutine would: busy iterations
// back to back, idle spinning for idleSpinNs after the last packet, then
// sleeping until the next arrival (its queues' descriptors wake it) or
// sleepTimeout, whichever is first. It returns every packet sent, stamped
// with when, and fills in each arrival's receivedAt.
func (r *batchRig) simulate(arr []arrival) []sent {
	r.t.Helper()
	byIn := map[uint32][]*arrival{}
	var out []sent
	lastRx := r.clk.ns
	next := 0
	for next < len(arr) || len(r.pmd.pending) > 0 {
		for next < len(arr) && arr[next].at <= r.clk.ns {
			a := &arr[next]
			if r.ports[a.in].Inject(0, udpFrame(0xc6120001, 0xc6120002, uint16(a.seq%4), 9, a.seq)) != 1 {
				r.t.Fatal("rx ring full")
			}
			byIn[a.in] = append(byIn[a.in], a)
			next++
		}
		n := r.pmd.PollOnce()
		for in, q := range byIn {
			k := len(q) - r.ports[in].Pending(0)
			for _, a := range q[:k] {
				a.receivedAt = r.clk.ns
			}
			byIn[in] = q[k:]
		}
		out = append(out, r.drain()...)
		if n > 0 {
			lastRx = r.clk.ns
		}
		if n > 0 || r.clk.ns-lastRx < idleSpinNs {
			r.clk.ns += simIterationNs
			continue
		}
		wake := r.clk.ns + r.pmd.sleepTimeout()
		if next < len(arr) {
			wake = min(wake, arr[next].at)
		}
		r.clk.ns = max(wake, r.clk.ns+simIterationNs)
	}
	return out
}

// randomArrivals makes n arrivals on ports 1 and 2 from start, in phases
// of random rate (10 kpps to 3 Mpps per port, sometimes a pause).
func randomArrivals(rng *rand.Rand, start int64, n int) []arrival {
	var arr []arrival
	next := [3]int64{0, start, start}
	gap := [3]int64{}
	for seq := uint32(1); len(arr) < n; seq++ {
		in := uint32(1 + rng.IntN(2))
		if gap[in] == 0 || rng.IntN(200) == 0 {
			gap[in] = int64(330 + rng.IntN(100_000)) // 3 Mpps .. 10 kpps
		}
		next[in] += rng.Int64N(2*gap[in]) + 1
		if rng.IntN(500) == 0 {
			next[in] += rng.Int64N(5_000_000)
		}
		arr = append(arr, arrival{at: next[in], in: in, seq: seq})
	}
	slices.SortStableFunc(arr, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
	return arr
}

// TestBatchingDeadlineProperty: a PMD that sleeps when idle, fed random
// arrivals, sends every packet within the interval of when it received
// it (one iteration more for a PMD that was spinning), never reorders the
// packets of an input within an output port, and loses none. Interval 0
// sends in the receiving iteration.
func TestBatchingDeadlineProperty(t *testing.T) {
	for _, intervalUs := range []int{0, 1, 50, 200, TxFlushAuto} {
		t.Run(fmt.Sprintf("interval=%d", intervalUs), func(t *testing.T) {
			r := newBatchRig(t, intervalUs)
			r.warm()
			bound := int64(max(intervalUs, 0)) * 1000
			if intervalUs == TxFlushAuto {
				bound = AutoFlushMaxNs
			}
			for seed := range uint64(2) {
				rng := rand.New(rand.NewPCG(seed, uint64(intervalUs+10)))
				arr := randomArrivals(rng, r.clk.ns+1000, 4000)
				out := r.simulate(arr)
				bySeq := map[uint32]*arrival{}
				for i := range arr {
					bySeq[arr[i].seq] = &arr[i]
				}
				seen := map[uint32]bool{}
				last := map[[2]uint32]uint32{}
				for _, s := range out {
					a := bySeq[s.seq]
					if a == nil || seen[s.seq] {
						t.Fatalf("seed %d: packet %d sent twice or never injected", seed, s.seq)
					}
					seen[s.seq] = true
					wait := s.at - a.receivedAt
					if intervalUs == 0 && wait != 0 || wait > bound+simIterationNs {
						t.Fatalf("seed %d: packet %d waited %d ns after it was received, bound %d ns", seed, s.seq, wait, bound)
					}
					k := [2]uint32{a.in, s.port}
					if s.seq < last[k] {
						t.Fatalf("seed %d: packet %d from port %d left port %d after packet %d", seed, s.seq, k[0], k[1], last[k])
					}
					last[k] = s.seq
				}
				if len(seen) != len(arr) {
					t.Fatalf("seed %d: sent %d of %d packets", seed, len(seen), len(arr))
				}
			}
			checkNoLeaks(t, r.dp)
		})
	}
}

// steadyArrivals makes n arrivals on port 1, one every gapNs from start.
func steadyArrivals(start, gapNs int64, n int) []arrival {
	arr := make([]arrival, n)
	for i := range arr {
		arr[i] = arrival{at: start + int64(i)*gapNs, in: 1, seq: uint32(i + 1)}
	}
	return arr
}

// TestAutoIntervalConverges: under tx-flush-interval=auto, sparse traffic
// leaves in the iteration that received it, and a steady high rate fills
// batches toward BatchSize with about one kick per batch.
func TestAutoIntervalConverges(t *testing.T) {
	t.Run("20kpps", func(t *testing.T) {
		r := newBatchRig(t, TxFlushAuto)
		r.warm()
		arr := steadyArrivals(r.clk.ns, 50_000, 1000) // 50 ms
		for _, s := range r.simulate(arr) {
			if a := arr[s.seq-1]; s.at != a.receivedAt {
				t.Fatalf("packet %d waited %d ns at 20 kpps", s.seq, s.at-a.receivedAt)
			}
		}
	})
	for _, c := range []struct {
		name     string
		gapNs    int64
		minBatch float64
	}{
		{"100kpps", 10_000, 8},
		{"1Mpps", 1000, 28},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newBatchRig(t, TxFlushAuto)
			r.warm()
			start := r.clk.ns
			arr := steadyArrivals(start, c.gapNs, int(20_000_000/c.gapNs)) // 20 ms
			kicks0 := r.ports[3].TxKicks(0)
			r.simulate(arr)
			// Past the first window and before the end, when the rest
			// of the last batch is sent at its deadline.
			pkts, batches := 0, 0
			for _, s := range r.ports[3].sends {
				if s.at > start+2*autoWindowNs && s.at < start+19_000_000 {
					pkts += s.size
					batches++
				}
			}
			avg := float64(pkts) / float64(batches)
			if avg < c.minBatch {
				t.Fatalf("average batch %.1f at a steady %s, want at least %.0f", avg, c.name, c.minBatch)
			}
			if k := r.ports[3].TxKicks(0) - kicks0; k != uint64(len(r.ports[3].sends)) {
				t.Fatalf("%d kicks for %d sends", k, len(r.ports[3].sends))
			}
			var st PortPMDStats
			for _, p := range r.dp.Ports() {
				if p.No == 3 {
					st = p.TxStats()[0]
				}
			}
			if st.Kicks == 0 || st.Kicks != r.ports[3].TxKicks(0) {
				t.Fatalf("TxStats kicks %d, the driver's %d", st.Kicks, r.ports[3].TxKicks(0))
			}
		})
	}
}

// TestAutoIntervalRule checks the rule's arithmetic on one OutputBatch's
// state: below the threshold it holds nothing, above it holds for twice
// a batch's worth of time up to the cap, with hysteresis at the edge.
func TestAutoIntervalRule(t *testing.T) {
	var a autoInterval
	now := int64(0)
	feed := func(pps int64) int64 { // one window of sends of 1 packet
		gap := int64(1e9) / pps
		for end := now + autoWindowNs; now < end; now += gap {
			a.update(now, 1)
		}
		return a.update(now, 1)
	}
	if got := feed(20_000); got != 0 {
		t.Fatalf("20 kpps: interval %d, want 0", got)
	}
	if got := feed(1_000_000); got < 62_000 || got > 66_000 {
		t.Fatalf("1 Mpps: interval %d ns, want about 64 µs (twice 32 µs)", got)
	}
	if got := feed(200_000); got != AutoFlushMaxNs {
		t.Fatalf("200 kpps: interval %d ns, want the cap", got)
	}
	if got := feed(70_000); got != AutoFlushMaxNs {
		t.Fatalf("70 kpps after holding: interval %d ns, want still held (hysteresis)", got)
	}
	if got := feed(50_000); got != 0 {
		t.Fatalf("50 kpps: interval %d ns, want 0", got)
	}
	if got := feed(70_000); got != 0 {
		t.Fatalf("70 kpps after sending at once: interval %d ns, want 0 (hysteresis)", got)
	}
}

package datapath

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"vswitch/datapath/packet"
	"vswitch/netdev/ring"
)

// batchRig is a manual-mode datapath with a fake clock: rx ports 1 and 2
// forward to ports 3 and 4 (1→3, 2→4, plus 2→3 for half of port 2's
// traffic, by UDP source port), all ring ports recording their sends.
type batchRig struct {
	t     *testing.T
	clk   *fakeClock
	dp    *Datapath
	ports map[uint32]*recordingPort
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
	r := &batchRig{t: t, clk: clk, dp: dp, ports: map[uint32]*recordingPort{}, pmd: dp.PMDs()[0]}
	for no := uint32(1); no <= 4; no++ {
		rp := &recordingPort{Port: ring.New(fmt.Sprintf("p%d", no), 1, 1, 4096), clock: clk.now}
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

// TestBatchingProperties drives random traffic through a fake-clock PMD and
// checks DESIGN.md's batching rules for several intervals.
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
			// Receive what is left, then an idle iteration flushes everything.
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
			// Quiesce: idle iterations flush everything.
			r.clk.ns += 10
			r.pmd.PollOnce()
			out = append(out, r.drain()...)

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
	r.pmd.PollOnce() // idle flush
	if n := len(r.drain()); n != 3*packet.BatchSize {
		t.Fatalf("drained %d packets, want %d", n, 3*packet.BatchSize)
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

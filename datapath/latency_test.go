package datapath

import (
	"encoding/binary"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// tickClock advances by step at every read and counts the reads, so that a
// probed batch's spans are known exactly.
type tickClock struct {
	ns, step int64
	reads    int
}

func (c *tickClock) now() int64 {
	c.reads++
	c.ns += c.step
	return c.ns
}

// probeRig is a manual PMD forwarding port 1 to port 2 under a ticking clock.
type probeRig struct {
	clk *tickClock
	dp  *Datapath
	in  *wakingPort
	out *wakingPort
	pmd *PMD
}

func newProbeRig(t *testing.T) *probeRig {
	t.Helper()
	clk := &tickClock{ns: 1_000_000_000, step: 1024}
	rules := &RuleTable{}
	dp, err := New(Config{Manual: true, Clock: clk.now, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	rules.Invalidate = dp.InvalidateFlows
	r := &probeRig{clk: clk, dp: dp, pmd: dp.PMDs()[0]}
	r.in = newWakingPort(t, "p1", clk.now)
	r.out = newWakingPort(t, "p2", clk.now)
	for no, p := range map[uint32]*wakingPort{1: r.in, 2: r.out} {
		if _, err := dp.AddPort(no, p); err != nil {
			t.Fatal(err)
		}
	}
	rules.Add(inPortRule(10, 1, 2))
	// Install the flow: the upcall is not what the tests time.
	r.in.Inject(0, udpFrame(1, 2, 5, 9, 0))
	r.pmd.PollOnce()
	r.out.Drain(0, func([]byte) {})
	return r
}

// markedFrame is a UDP frame whose payload is ProbeMagic and stamp.
func markedFrame(stamp int64) []byte {
	f := udpFrame(1, 2, 5, 9, 0)
	copy(f[42:], ProbeMagic)
	binary.LittleEndian.PutUint64(f[42+len(ProbeMagic):], uint64(stamp))
	return f
}

func sameBucket(got, want int64) bool { return histIndex(got) == histIndex(want) }

func TestLatencyProbeOffCostsNoClockRead(t *testing.T) {
	r := newProbeRig(t)
	for range 10 {
		r.in.Inject(0, udpFrame(1, 2, 5, 9, 1))
		before := r.clk.reads
		if r.pmd.PollOnce() != 1 {
			t.Fatal("frame not received")
		}
		// The recording port reads the clock once per Send, and port 1
		// is not the PMD's last queue, so its busy span is closed by a
		// read of its own (PollOnce).
		if d := r.clk.reads - before; d != 3 {
			t.Fatalf("an iteration with the probe off read the clock %d times, want 1 (+2 for the port and the busy span)", d)
		}
	}
	for _, l := range r.dp.Latency() {
		if l.Batches != 0 || l.Stages[StageTotal].Count != 0 {
			t.Fatalf("probe off recorded %+v", l)
		}
	}
	checkNoLeaks(t, r.dp)
}

func TestLatencyProbeStages(t *testing.T) {
	r := newProbeRig(t)
	if err := r.dp.SetLatencyProbe(1); err != nil {
		t.Fatal(err)
	}
	r.pmd.PollOnce() // pick up the plan
	step := r.clk.step
	const n = 20
	for range n {
		r.in.Inject(0, udpFrame(1, 2, 5, 9, 1))
		r.pmd.PollOnce()
	}
	l := r.dp.Latency()[0]
	if l.Batches != n || l.ProbeEvery != 1 {
		t.Fatalf("sampled %d batches (probe %d), want %d", l.Batches, l.ProbeEvery, n)
	}
	// Reads per batch: iteration, after rx, after processing, the
	// port's Send, after the send. So rx and processing take one step,
	// the send two (the port's read is inside it), the total four, and
	// the previous iteration was six steps before (+1: the read closing
	// the busy span of port 1, not the last queue).
	want := map[LatencyStage]int64{StageRx: step, StageProcess: step, StageSend: 2 * step, StageTotal: 4 * step, StagePollGap: 6 * step}
	for s, w := range want {
		h := l.Stages[s]
		if h.Count != n {
			t.Errorf("%s: %d values, want %d", s, h.Count, n)
		}
		for _, q := range []float64{0.5, 0.99} {
			if p := h.Percentile(q); !sameBucket(p, w) {
				t.Errorf("%s p%.0f = %d ns, want about %d", s, 100*q, p, w)
			}
		}
	}
	if l.Stages[StageSenderToPMD].Count != 0 || l.MarkedPackets != 0 {
		t.Errorf("unmarked traffic counted as marked: %+v", l.Stages[StageSenderToPMD])
	}
	r.dp.ClearLatency()
	if l := r.dp.Latency()[0]; l.Batches != 0 || l.Stages[StageTotal].Count != 0 {
		t.Fatalf("ClearLatency left %+v", l)
	}
	checkNoLeaks(t, r.dp)
}

func TestLatencyProbeSamplesOneInN(t *testing.T) {
	r := newProbeRig(t)
	if err := r.dp.SetLatencyProbe(4); err != nil {
		t.Fatal(err)
	}
	for range 40 {
		r.in.Inject(0, udpFrame(1, 2, 5, 9, 1))
		r.pmd.PollOnce()
	}
	if b := r.dp.Latency()[0].Batches; b != 10 {
		t.Fatalf("1 in 4 of 40 batches: sampled %d, want 10", b)
	}
	// A marked packet's batch is always sampled, and its sender's stamp
	// timed against the iteration's clock read.
	stamp := r.clk.ns - 7000
	r.in.Inject(0, markedFrame(stamp))
	r.pmd.PollOnce()
	l := r.dp.Latency()[0]
	if l.Batches != 11 || l.MarkedPackets != 1 {
		t.Fatalf("marked batch: %d sampled batches, %d marked packets; want 11 and 1", l.Batches, l.MarkedPackets)
	}
	// The iteration read the clock once after stamp was taken.
	if p := l.Stages[StageSenderToPMD].Percentile(0.5); !sameBucket(p, 7000+r.clk.step) {
		t.Fatalf("sender->pmd %d ns, want about %d", p, 7000+r.clk.step)
	}
	if err := r.dp.SetLatencyProbe(0); err != nil {
		t.Fatal(err)
	}
	r.in.Inject(0, markedFrame(stamp))
	r.pmd.PollOnce()
	if got := r.dp.Latency()[0]; got.Batches != 11 || got.MarkedPackets != 1 {
		t.Fatalf("probe off still counts: %+v", got)
	}
	checkNoLeaks(t, r.dp)
}

func TestLatencyHistogramBuckets(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 15, 16, 17, 100, 1000, 1023, 1024, 1 << 20, 1<<62 + 5} {
		i := histIndex(v)
		if i < prev || i >= histBuckets {
			t.Fatalf("histIndex(%d) = %d after %d", v, i, prev)
		}
		prev = i
		if m := histValue(i); histIndex(m) != i || (v >= 16 && (m < v-v/8 || m > v+v/8)) {
			t.Fatalf("bucket %d of %d has middle %d", i, v, m)
		}
	}
	h := LatencyHistogram{Count: 100, Buckets: []LatencyBucket{{10, 50}, {1000, 49}, {100000, 1}}}
	if h.Percentile(0.5) != 10 || h.Percentile(0.9) != 1000 || h.Percentile(1) != 100000 {
		t.Fatalf("percentiles %d %d %d", h.Percentile(0.5), h.Percentile(0.9), h.Percentile(1))
	}
	if (LatencyHistogram{}).Percentile(0.5) != 0 {
		t.Fatal("empty histogram")
	}
}

func TestProbeStamp(t *testing.T) {
	if st, ok := ProbeStamp(markedFrame(123456789)); !ok || st != 123456789 {
		t.Fatalf("marked frame: %d %v", st, ok)
	}
	f := markedFrame(1)
	f[23] = 6 // TCP
	if _, ok := ProbeStamp(f); ok {
		t.Fatal("TCP frame taken for a probe")
	}
	if _, ok := ProbeStamp(udpFrame(1, 2, 3, 4, 5)); ok {
		t.Fatal("plain UDP frame taken for a probe")
	}
}

func FuzzProbeStamp(f *testing.F) {
	f.Add(markedFrame(42))
	f.Add(udpFrame(1, 2, 3, 4, 5))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := ProbeStamp(b)
		if !ok && st != 0 {
			t.Fatal("stamp without a probe")
		}
		pkt := packet.NewPool(1, 4096).Get()
		if len(b) <= len(pkt.Buffer()) {
			pkt.SetData(b)
			if st2, ok2 := ProbeStamp(pkt.Data()); st2 != st || ok2 != ok {
				t.Fatal("copy parsed differently")
			}
		}
	})
}

func TestAdaptSpin(t *testing.T) {
	const max = 100_000
	spin := int64(idleSpinNs)
	// A reply 30 µs after each request, the next request 170 µs later:
	// the window grows over the reply gap and stays there.
	caught := 0
	for i := range 40 {
		gap := int64(30_000)
		if i%2 == 1 {
			gap = 170_000
		}
		if gap == 30_000 && gap <= spin {
			caught++
		}
		spin = adaptSpin(spin, gap, max)
		if spin < idleSpinNs || spin > max {
			t.Fatalf("spin %d out of [%d, %d]", spin, idleSpinNs, max)
		}
	}
	if caught < 15 {
		t.Fatalf("only %d of 20 replies found the PMD polling (spin now %d)", caught, spin)
	}
	// Sparse traffic only: back to the floor.
	for range 100 {
		spin = adaptSpin(spin, 5_000_000, max)
	}
	if spin != idleSpinNs {
		t.Fatalf("sparse traffic left spin at %d", spin)
	}
	// Continuous traffic changes nothing; a gap never widens past max.
	if s := adaptSpin(idleSpinNs, 1000, max); s != idleSpinNs {
		t.Fatalf("continuous traffic: %d", s)
	}
	if s := adaptSpin(idleSpinNs, max, max); s != max {
		t.Fatalf("gap of pmd-sleep-max: %d", s)
	}
}

// TestExpectGap: a ping-pong whose think time outlasts the spin window
// (reply 30 µs after the request, the next request 350 µs after the
// reply) teaches the PMD to expect the long gap, the window around it
// opens early and closes late, and sparse traffic forgets it.
func TestExpectGap(t *testing.T) {
	spin, expect := int64(idleSpinNs), int64(0)
	for i := range 40 {
		gap := int64(30_000)
		if i%2 == 1 {
			gap = 350_000
		}
		expect = expectGap(expect, gap, spin)
		spin = adaptSpin(spin, gap, spinMaxNs)
	}
	if expect != 350_000 {
		t.Fatalf("expected gap %d, want 350000", expect)
	}
	from, to := expectWindow(expect)
	if from >= 350_000-20_000 || from < 350_000-100_000 || to <= 350_000+10_000 || to > 350_000+50_000 {
		t.Fatalf("window [%d, %d) around 350000", from, to)
	}
	if f, e := expectWindow(0); f != 0 || e != 0 {
		t.Fatalf("no expectation, window [%d, %d)", f, e)
	}
	if expect = expectGap(expect, 5*expectMaxNs, spin); expect != 0 {
		t.Fatalf("sparse traffic left an expected gap %d", expect)
	}
	// A packet caught while polling keeps what was expected.
	if e := expectGap(350_000, 1000, spin); e != 350_000 {
		t.Fatalf("a caught packet changed the expectation to %d", e)
	}
}

// TestSleepTimeoutExpected: a PMD expecting a packet sleeps no later than
// the start of its window, polls inside it, and sleeps as before after it.
func TestSleepTimeoutExpected(t *testing.T) {
	r := newBatchRig(t, 0)
	r.warm()
	p := r.pmd
	p.sleepNs, p.spinNs = 400_000, idleSpinNs // a back-off past the window
	p.cur.sleepMaxNs = 1_000_000
	p.lastRx, p.now = r.clk.ns, r.clk.ns+30_000
	p.expectNs = 0
	if got := p.sleepTimeout(); got != 400_000 {
		t.Fatalf("no expectation: sleep %d ns, want the back-off step 400000", got)
	}
	p.expectNs = 350_000
	from, to := expectWindow(p.expectNs)
	if got := p.sleepTimeout(); got != from-30_000 {
		t.Fatalf("expecting a packet at +350 µs: sleep %d ns, want %d (until the window)", got, from-30_000)
	}
	if p.awaiting() {
		t.Fatal("awaiting before the window")
	}
	p.now = p.lastRx + from
	if !p.awaiting() {
		t.Fatal("not awaiting at the start of the window")
	}
	p.now = p.lastRx + to
	if p.awaiting() {
		t.Fatal("awaiting after the window")
	}
	if got := p.sleepTimeout(); got != 400_000 {
		t.Fatalf("after the window: sleep %d ns, want the back-off step", got)
	}
}

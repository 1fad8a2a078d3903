package datapath

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// Meter rates under a fake clock, through the same arithmetic the PMDs
// use (meterState.exceeded): a band lets through exactly its rate, give or
// take 1%, from 100 pktps to 100 Mbit/s, steady and after a burst, and when
// several PMDs with clocks read at different moments share the meter.

// offerSteady offers packets of size bytes evenly spaced at pps for durNs
// starting at startNs, metering each at its arrival time minus skew(i)
// (what a PMD that read its clock earlier sees), and counts the packets
// that exceeded no band, in total and from fromNs on.
func offerSteady(st *meterState, size uint64, pps float64, startNs, durNs, fromNs int64, skew func(i int) int64) (passed, passedFrom int) {
	n := int(pps * float64(durNs) / 1e9)
	for i := range n {
		at := startNs + int64(float64(i)*1e9/pps)
		now := at
		if skew != nil {
			now -= skew(i)
		}
		if st.exceeded(now<<tickShift, size) < 0 {
			passed++
			if at >= fromNs {
				passedFrom++
			}
		}
	}
	return passed, passedFrom
}

func within(got, want, frac float64) bool { return math.Abs(got-want) <= want*frac+1 }

// TestMeterRateExact: twice the band's rate offered for 4 s; the last 2 s
// pass exactly the band's rate (±1%), and the whole run the rate plus the
// default bucket (one second of the rate).
func TestMeterRateExact(t *testing.T) {
	type tc struct {
		kbps bool
		rate uint32
		size uint64
	}
	var cases []tc
	for _, r := range []uint32{100, 1000, 10_000, 100_000} {
		cases = append(cases, tc{false, r, 64}, tc{false, r, 1500})
	}
	for _, r := range []uint32{64, 1000, 10_000, 100_000} { // up to 100 Mbit/s
		cases = append(cases, tc{true, r, 64}, tc{true, r, 1500})
	}
	for _, c := range cases {
		for _, typ := range []MeterBandType{MeterBandDrop, MeterBandDSCPRemark} {
			unit := "pktps"
			pps := float64(c.rate) // the band's rate in packets/s
			if c.kbps {
				unit = "kbps"
				pps = float64(c.rate) * 1000 / 8 / float64(c.size)
			}
			t.Run(fmt.Sprintf("%d%s/%dB/type%d", c.rate, unit, c.size, typ), func(t *testing.T) {
				st, err := newMeterState(MeterConfig{KBPS: c.kbps, Bands: []MeterBand{{Type: typ, Rate: c.rate, PrecLevel: 1}}})
				if err != nil {
					t.Fatal(err)
				}
				const sec = int64(1e9)
				start := 1000 * sec
				passed, steady := offerSteady(st, c.size, 2*pps, start, 4*sec, start+2*sec, nil)
				if !within(float64(steady), 2*pps, 0.01) {
					t.Errorf("steady: %d passed in 2 s, want %.0f (the band's rate) ±1%%", steady, 2*pps)
				}
				// (At a few packets per second the bucket holds a whole
				// number of frames: allow two.)
				if math.Abs(float64(passed)-5*pps) > max(5*pps*0.01, 2) {
					t.Errorf("whole run: %d passed in 4 s, want %.0f (4 s of rate + a 1 s bucket) ±1%%", passed, 5*pps)
				}
			})
		}
	}
}

// TestMeterBurstThenRate: with burst_size set, a burst of three times the
// bucket passes exactly the bucket, and steady traffic after it at twice
// the rate passes the rate.
func TestMeterBurstThenRate(t *testing.T) {
	for _, c := range []struct {
		kbps        bool
		rate, burst uint32
		size        uint64
	}{
		{false, 1000, 50, 100},
		{false, 10_000, 1, 100},
		{true, 10_000, 120, 1500}, // 120 kbit = 10 frames of 1500 bytes
		{true, 100_000, 1000, 1250},
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			st, err := newMeterState(MeterConfig{KBPS: c.kbps, Burst: true,
				Bands: []MeterBand{{Type: MeterBandDrop, Rate: c.rate, BurstSize: c.burst}}})
			if err != nil {
				t.Fatal(err)
			}
			bucketPkts := float64(c.burst)
			pps := float64(c.rate)
			if c.kbps {
				bucketPkts = float64(c.burst) * 1000 / 8 / float64(c.size)
				pps = float64(c.rate) * 1000 / 8 / float64(c.size)
			}
			const sec = int64(1e9)
			now := 1000 * sec
			n := 0
			for range int(3 * bucketPkts) {
				if st.exceeded(now<<tickShift, c.size) < 0 {
					n++
				}
			}
			if n != int(bucketPkts) {
				t.Fatalf("burst: %d passed, want the bucket, %d", n, int(bucketPkts))
			}
			_, steady := offerSteady(st, c.size, 2*pps, now, 2*sec, now+sec, nil)
			if !within(float64(steady), pps, 0.01) {
				t.Fatalf("after the burst: %d passed in 1 s, want %.0f ±1%%", steady, pps)
			}
		})
	}
}

// TestMeterSkewedPMDClocks: the packets come from four PMDs, each of which
// read its clock up to 200 µs before metering (the start of its iteration,
// or before it was descheduled). The band still passes its rate: a PMD
// behind the others finds no tokens for a packet, but the tokens stay in
// the bucket for the next one.
func TestMeterSkewedPMDClocks(t *testing.T) {
	for _, rate := range []uint32{1000, 10_000, 100_000} {
		// A bucket of 10 ms, deeper than the lags: tokens are not lost
		// to the bucket's cap when a lagging PMD's packets bunch up.
		st, err := newMeterState(MeterConfig{Burst: true, Bands: []MeterBand{{Type: MeterBandDrop, Rate: rate, BurstSize: rate / 100}}})
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(rate), 5))
		pmdSkew := [4]int64{}
		skew := func(i int) int64 {
			if i%32 == 0 { // a new iteration: each PMD's lag changes
				for p := range pmdSkew {
					pmdSkew[p] = r.Int64N(200_000)
				}
			}
			return pmdSkew[i%4]
		}
		const sec = int64(1e9)
		start := 1000 * sec
		_, steady := offerSteady(st, 100, 2*float64(rate), start, 3*sec, start+sec, skew)
		if !within(float64(steady), 2*float64(rate), 0.01) {
			t.Errorf("rate %d pktps from 4 skewed PMDs: %d passed in 2 s, want %d ±1%%", rate, steady, 2*rate)
		}
	}
}

// TestMeterSharedByGoroutines: four goroutines meter concurrently through
// one band, each with its own stale view of a shared fake clock, in lock
// step per 1 ms slice; together they offer twice the rate and get the rate.
func TestMeterSharedByGoroutines(t *testing.T) {
	const rate = 20_000 // pktps
	st, err := newMeterState(MeterConfig{Burst: true, Bands: []MeterBand{{Type: MeterBandDrop, Rate: rate, BurstSize: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	const (
		workers = 4
		sliceNs = int64(1_000_000)
		slices  = 2000 // 2 s
		perPkt  = int64(1e9) / (2 * rate)
	)
	start := int64(1000e9)
	var passed atomic.Int64
	for s := range slices {
		var wg sync.WaitGroup
		t0 := start + int64(s)*sliceNs
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// This worker's packets of the slice, metered at the
				// slice start plus a lag of its own: a PMD whose clock
				// read is older than its packets.
				n := int64(0)
				lag := int64(w) * 100_000
				for at := t0 + int64(w)*perPkt; at < t0+sliceNs; at += workers * perPkt {
					now := max(at-lag, t0)
					if st.exceeded(now<<tickShift, 100) < 0 {
						n++
					}
				}
				passed.Add(n)
			}()
		}
		wg.Wait()
	}
	want := float64(rate)*float64(slices)*float64(sliceNs)/1e9 + 10
	if got := float64(passed.Load()); !within(got, want, 0.01) {
		t.Fatalf("%v passed in 2 s, want %.0f ±1%%", got, want)
	}
}

// TestMeterKbpsLargeFrameNoOverflow: a jumbo frame at a few kbit/s costs
// more than 64 bits of fixed-point ticks; it must still cost, not wrap.
func TestMeterKbpsLargeFrameNoOverflow(t *testing.T) {
	st, err := newMeterState(MeterConfig{KBPS: true, Burst: true, Bands: []MeterBand{{Type: MeterBandDrop, Rate: 1, BurstSize: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	now := int64(1000e9) << tickShift
	n := 0
	for range 20 {
		if st.exceeded(now, 1500) < 0 {
			n++
		}
	}
	// 100 kbit = 12,500 bytes: eight 1500-byte frames.
	if n != 8 {
		t.Fatalf("%d frames of 1500 bytes passed a 100 kbit bucket, want 8", n)
	}
}

// TestMeterClumpedArrivals: a steady stream of twice the rate reaches the
// meter in clumps (a PMD meters what arrived since its last iteration at
// that iteration's time), into the shallowest bucket there is (one packet,
// or one frame's kbit). The bucket must not lose the tokens the stream
// earned between clumps (meterJitterNs): the band passes its rate ±1%,
// with one PMD and with two whose clumps interleave, one of them lagging.
func TestMeterClumpedArrivals(t *testing.T) {
	type tc struct {
		kbps        bool
		rate, burst uint32
		size        uint64
	}
	cases := []tc{
		{false, 100, 1, 64}, {false, 1000, 1, 64}, {false, 10_000, 1, 64}, {false, 100_000, 1, 64},
		{true, 1000, 12, 1500}, {true, 10_000, 12, 1500}, {true, 100_000, 12, 1500}, // 12 kbit: one frame
	}
	for _, c := range cases {
		for _, gapNs := range []int64{100_000, 1_000_000, 5_000_000} {
			for _, pmds := range []int{1, 2} {
				t.Run(fmt.Sprintf("%+v/gap%dus/pmds%d", c, gapNs/1000, pmds), func(t *testing.T) {
					st, err := newMeterState(MeterConfig{KBPS: c.kbps, Burst: true,
						Bands: []MeterBand{{Type: MeterBandDrop, Rate: c.rate, BurstSize: c.burst}}})
					if err != nil {
						t.Fatal(err)
					}
					pps := float64(c.rate)
					if c.kbps {
						pps = float64(c.rate) * 1000 / 8 / float64(c.size)
					}
					const sec = int64(1e9)
					start := 1000 * sec
					var offered float64
					passed := 0
					for clump := int64(0); start+clump*gapNs < start+3*sec; clump++ {
						at := start + clump*gapNs
						// The packets that arrived since the last clump, split
						// over the PMDs; the second PMD meters 150 µs late.
						due := 2 * pps * float64(clump*gapNs+gapNs) / 1e9
						n := int(due - offered)
						offered += float64(n)
						for i := range n {
							now := at
							if pmds == 2 && i%2 == 1 {
								now += 150_000
							}
							if st.exceeded(now<<tickShift, c.size) < 0 && at >= start+sec {
								passed++
							}
						}
					}
					if !within(float64(passed), 2*pps, 0.01) {
						t.Errorf("%d passed in the last 2 s, want %.0f (the band's rate) ±1%%", passed, 2*pps)
					}
				})
			}
		}
	}
}

// TestMeterBurstBound: what the jitter allowance costs. A burst at once
// right behind a stream at half the rate passes at most the bucket plus
// meterJitterNs of the rate; after a pause longer than meterJitterNs,
// exactly the bucket.
func TestMeterBurstBound(t *testing.T) {
	const rate, burst = 10_000, 50
	for _, pause := range []int64{1_000_000, 2 * meterJitterNs} {
		st, err := newMeterState(MeterConfig{Burst: true, Bands: []MeterBand{dropBand(rate, burst)}})
		if err != nil {
			t.Fatal(err)
		}
		const sec = int64(1e9)
		now := 1000 * sec
		offerSteady(st, 100, rate/2, now, sec, now, nil)
		now += sec + pause
		n := 0
		for range 10 * burst {
			if st.exceeded(now<<tickShift, 100) < 0 {
				n++
			}
		}
		limit := burst + int(rate*meterJitterNs/sec)
		if pause > meterJitterNs {
			limit = burst
		}
		if n > limit || n < burst {
			t.Errorf("after a pause of %d µs a burst passed %d, want %d..%d", pause/1000, n, burst, limit)
		}
	}
}

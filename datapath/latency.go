package datapath

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// The latency probe (other_config:latency-probe=N) times where a batch's
// microseconds go inside a PMD: one batch in N, and every batch that holds
// a marked probe packet, gets three clock reads more (after the receive,
// after classification and execution, after the send) on top of the PMD's
// one read per iteration, and each span lands in a per-PMD histogram of
// fixed buckets. Nothing is allocated per packet and, with the probe off,
// the PMD pays one predicted branch per received batch on a field of its
// own plan.
//
// A marked probe packet is a UDP/IPv4 datagram whose payload starts with
// ProbeMagic followed by the sender's CLOCK_MONOTONIC time in nanoseconds
// (little endian): the PMD can then also time the kernel side before it,
// from the sender's send call to the PMD's clock read that saw the frame
// (the socket, the veth, XDP, the ring and the PMD's wake-up).

// ProbeMagic starts the UDP payload of a marked probe packet.
const ProbeMagic = "vswprobe"

// LatencyStage is one span of a probed batch.
type LatencyStage int

// The stages, in the order a frame meets them.
const (
	// StageSenderToPMD: sender's stamp → the PMD's iteration clock read
	// that found the frame (marked probe packets only).
	StageSenderToPMD LatencyStage = iota
	// StagePollGap: the PMD's previous look at its queues → this one
	// (the longest the frame can have sat unseen in the ring: the
	// iteration time when busy, the sleep when not).
	StagePollGap
	// StageRx: iteration clock read → the batch copied out of the ring.
	StageRx
	// StageProcess: parse, classify, execute: the batch queued in its
	// output batches.
	StageProcess
	// StageSend: the due output batches sent, the tx kick included.
	StageSend
	// StageTotal: iteration clock read → sent.
	StageTotal
	numStages
)

var stageNames = [numStages]string{"sender->pmd", "poll-gap", "rx", "process", "send", "pmd-total"}

func (s LatencyStage) String() string {
	if s >= 0 && s < numStages {
		return stageNames[s]
	}
	return fmt.Sprintf("stage%d", int(s))
}

// LatencyStages lists the stages in order.
func LatencyStages() []LatencyStage {
	out := make([]LatencyStage, numStages)
	for i := range out {
		out[i] = LatencyStage(i)
	}
	return out
}

// Histogram buckets: values below 16 ns exactly, then 8 buckets per power
// of two (12.5 % wide), up to 2^63 ns.
const (
	histLinear  = 16
	histSub     = 8
	histBuckets = histLinear + (63-4+1)*histSub
)

func histIndex(v int64) int {
	if v < histLinear {
		return int(max(v, 0))
	}
	e := bits.Len64(uint64(v)) - 1 // >= 4
	sub := int(uint64(v)>>(e-3)) & (histSub - 1)
	return histLinear + (e-4)*histSub + sub
}

// histValue is the middle of bucket i.
func histValue(i int) int64 {
	if i < histLinear {
		return int64(i)
	}
	e := (i-histLinear)/histSub + 4
	sub := int64((i - histLinear) % histSub)
	lo := int64(1)<<e + sub<<(e-3)
	return lo + int64(1)<<(e-4)
}

type latencyHist [histBuckets]atomic.Uint64

// latencyProbe is a PMD's histograms. The PMD adds; readers load. Only
// sampled batches touch it, so the atomics cost nothing on the fast path.
type latencyProbe struct {
	hist    [numStages]latencyHist
	batches atomic.Uint64 // sampled batches
	marked  atomic.Uint64 // marked probe packets seen
}

func (lp *latencyProbe) add(s LatencyStage, ns int64) { lp.hist[s][histIndex(ns)].Add(1) }

// LatencyHistogram is a copy of one stage's histogram.
type LatencyHistogram struct {
	Count uint64
	// Buckets holds the non-empty buckets in ascending order.
	Buckets []LatencyBucket
}

// LatencyBucket is a histogram bucket: Count values near Ns.
type LatencyBucket struct {
	Ns    int64
	Count uint64
}

// Percentile returns the value (ns, to the bucket's 12.5 %) below which a
// fraction q of the values lie; 0 for an empty histogram.
func (h LatencyHistogram) Percentile(q float64) int64 {
	if h.Count == 0 {
		return 0
	}
	rank := uint64(q*float64(h.Count) + 0.5)
	rank = min(max(rank, 1), h.Count)
	var seen uint64
	for _, b := range h.Buckets {
		seen += b.Count
		if seen >= rank {
			return b.Ns
		}
	}
	return h.Buckets[len(h.Buckets)-1].Ns
}

// PMDLatency is one PMD's probe histograms.
type PMDLatency struct {
	PMD int
	// TID is the PMD's thread (0 in Manual mode or before it started):
	// /proc/self/task/TID/schedstat holds its run and run-queue wait.
	TID           int
	Batches       uint64 // sampled batches
	MarkedPackets uint64
	Stages        [numStages]LatencyHistogram
	ProbeEvery    int // the current setting
}

// SetLatencyProbe turns the probe on (one batch in every, and every batch
// with a marked probe packet) or off (0). The histograms are kept across
// changes; ClearLatency empties them.
func (dp *Datapath) SetLatencyProbe(every int) error {
	if every < 0 {
		return fmt.Errorf("datapath: latency-probe %d is negative", every)
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if every == dp.probeEvery {
		return nil
	}
	if every > 0 {
		for _, p := range dp.pmds {
			if p.probe.Load() == nil {
				p.probe.Store(new(latencyProbe))
			}
		}
		dp.probeOffset = 0
		if dp.cfg.Clock == nil {
			// Marked packets carry CLOCK_MONOTONIC; the datapath's
			// clock counts from clockBase. The clock_gettime system
			// call takes about a microsecond here: the offset is the
			// midpoint of the narrowest of a few brackets around it.
			best := int64(math.MaxInt64)
			for range 5 {
				var ts unix.Timespec
				a := dp.clock()
				if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
					break
				}
				if b := dp.clock(); b-a < best {
					best, dp.probeOffset = b-a, ts.Nano()-(a+(b-a)/2)
				}
			}
		}
	}
	dp.probeEvery = every
	dp.reconfigure()
	return nil
}

// LatencyProbe returns the latency-probe setting.
func (dp *Datapath) LatencyProbe() int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return dp.probeEvery
}

// Latency returns every PMD's probe histograms (empty ones if the probe
// never ran).
func (dp *Datapath) Latency() []PMDLatency {
	every := dp.LatencyProbe()
	out := make([]PMDLatency, len(dp.pmds))
	for i, p := range dp.pmds {
		out[i] = PMDLatency{PMD: i, TID: int(p.tid.Load()), ProbeEvery: every}
		lp := p.probe.Load()
		if lp == nil {
			continue
		}
		out[i].Batches = lp.batches.Load()
		out[i].MarkedPackets = lp.marked.Load()
		for s := range numStages {
			h := &out[i].Stages[s]
			for b := range lp.hist[s] {
				if n := lp.hist[s][b].Load(); n > 0 {
					h.Count += n
					h.Buckets = append(h.Buckets, LatencyBucket{Ns: histValue(b), Count: n})
				}
			}
		}
	}
	return out
}

// ClearLatency empties the histograms (a batch being recorded meanwhile
// may leave a count behind).
func (dp *Datapath) ClearLatency() {
	for _, p := range dp.pmds {
		lp := p.probe.Load()
		if lp == nil {
			continue
		}
		for s := range lp.hist {
			for b := range lp.hist[s] {
				lp.hist[s][b].Store(0)
			}
		}
		lp.batches.Store(0)
		lp.marked.Store(0)
	}
}

// probeStart runs, with the probe on, after a batch was received in the
// iteration that read the clock at now (prev: the iteration before). It
// times the marked packets' kernel side and decides whether the batch is
// sampled; if so it records the receive spans and returns true.
func (p *PMD) probeStart(b *packet.Batch, prev, now int64) bool {
	lp := p.probe.Load()
	if lp == nil {
		return false
	}
	marked := false
	for _, pkt := range b.Packets() {
		if st, ok := ProbeStamp(pkt.Data()); ok {
			marked = true
			lp.marked.Add(1)
			lp.add(StageSenderToPMD, now+p.cur.probeOffset-st)
		}
	}
	p.probeCount++
	if !marked && p.probeCount < p.cur.probeEvery {
		return false
	}
	p.probeCount = 0
	p.probeT1 = p.clock()
	lp.batches.Add(1)
	lp.add(StagePollGap, now-prev)
	lp.add(StageRx, p.probeT1-now)
	return true
}

// probeEnd records a sampled batch's processing and send spans; t2 is the
// clock read after processing.
func (p *PMD) probeEnd(now, t2 int64) {
	lp := p.probe.Load()
	t3 := p.clock()
	lp.add(StageProcess, t2-p.probeT1)
	lp.add(StageSend, t3-t2)
	lp.add(StageTotal, t3-now)
}

// ProbeStamp returns the sender's stamp of a marked probe packet: an
// untagged Ethernet frame holding IPv4/UDP whose payload starts with
// ProbeMagic and 8 bytes of CLOCK_MONOTONIC nanoseconds.
func ProbeStamp(frame []byte) (int64, bool) {
	const eth = 14
	if len(frame) < eth+20 || frame[12] != 0x08 || frame[13] != 0x00 {
		return 0, false
	}
	ip := frame[eth:]
	ihl := int(ip[0]&0x0f) * 4
	if ip[0]>>4 != 4 || ihl < 20 || ip[9] != unix.IPPROTO_UDP || ip[6]&0x1f != 0 || ip[7] != 0 {
		return 0, false // not IPv4/UDP, or a later fragment
	}
	pl := eth + ihl + 8
	if len(frame) < pl+len(ProbeMagic)+8 || string(frame[pl:pl+len(ProbeMagic)]) != ProbeMagic {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint64(frame[pl+len(ProbeMagic):])), true
}

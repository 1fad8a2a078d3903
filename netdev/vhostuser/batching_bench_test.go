package vhostuser

// The tx-flush-interval benchmark for vhost-user ports: what batching
// saves a guest that takes interrupts, and what it costs in latency.
//
//	VHOST_BATCH_BENCH=1 go test -run TestBatchingBench -v -timeout 30m ./netdev/vhostuser/
//
// Topology: frontend A (the sending VM) → port 1 → switch → port 2 →
// frontend B (the receiving VM), all in this process. A sends 60-byte
// frames (64 on a wire) at a fixed rate from a thread of its own, paced by
// nanosleep: at every wake-up it sends the frames due by then, so at high
// rates it sends short bursts, as a guest does. Every frame carries A's
// send time; B computes each frame's one-way latency (A publishes it → B
// reads it, the switch's batching and B's wake-up included) on the same
// clock, so every frame is a probe. B runs in one of three modes:
//
//   - intr: B waits on its call eventfd and never sets
//     VRING_AVAIL_F_NO_INTERRUPT, like a virtio-net guest taking an
//     interrupt per notification: each output batch costs an eventfd
//     write.
//   - eventidx: the same with VIRTIO_RING_F_EVENT_IDX; B asks to be told
//     of the next frame after the last it read, so batches sent while it
//     is still busy cost nothing.
//   - poll: B sets NO_INTERRUPT and looks at its ring every few
//     microseconds (testpmd spins instead; on a two-core machine that
//     would starve the switch): no kicks at all.
//
// Each cell sends for VHOST_BATCH_WARMUP, then measures for VHOST_BATCH_DUR
// with the load still on: switch counters are differences over the window,
// latencies and losses are those of the frames A stamped inside it. The
// figures are printed, never asserted.
//
// Environment (defaults in brackets):
//
//	VHOST_BATCH_SUTS       switches to measure: ours, ovs [ours]
//	VHOST_BATCH_RATES      offered loads, frames/s, mode intr [20000 100000 300000 1000000]
//	VHOST_BATCH_POLL_RATES loads for mode poll [100000]
//	VHOST_BATCH_EIDX_RATES loads for mode eventidx [none]
//	VHOST_BATCH_INTERVALS  tx-flush-interval values, µs or auto [0 50 200 auto]
//	VHOST_BATCH_BASELINE   load of the "probe alone" row (flush 0, intr) [1000; 0: none]
//	VHOST_BATCH_WARMUP, VHOST_BATCH_DUR  per cell [500ms, 2s]
//	VHOST_BATCH_SLEEP      our pmd-sleep-max, µs [datapath.DefaultPMDSleepMax]
//	VHOST_BATCH_OVS_MAXSLEEP  OVS's pmd-maxsleep, µs [0: busy polling, its default]
//	VHOST_BATCH_CPUS       FRONTENDS,PMD or A,B,PMD: CPUs to pin to [0,1]
//
// ovs is Open vSwitch's userspace datapath with DPDK (ovs-vswitchd-dpdk of
// Debian's openvswitch-switch-dpdk, --no-huge memory) in a network
// namespace of its own, ports type=dpdkvhostuser, the same frontends
// dialling its sockets. It has no tx-flush-interval=auto, and it counts no
// kicks: its kicks/pkt are the eventfd signals B read.

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/vhostuser/virtq"
)

// batchBench is one run's configuration.
type batchBench struct {
	suts               []string
	modes              []benchMode
	intervals          []string
	baseline           int
	warmup, dur        time.Duration
	sleepMax           int
	ovsMaxSleep        int
	aCPU, bCPU, pmdCPU int // -1: not pinned
	ringSize, memBytes int
}

type benchMode struct {
	name     string
	noIntr   bool
	eventIdx bool
	rates    []int
}

func batchBenchFromEnv(t *testing.T) batchBench {
	env := func(k, def string) string {
		if v, ok := os.LookupEnv(k); ok {
			return v
		}
		return def
	}
	ints := func(k, def string) []int {
		var out []int
		for _, f := range strings.Fields(env(k, def)) {
			n, err := strconv.Atoi(f)
			if err != nil || n < 0 {
				t.Fatalf("%s: %q is not a rate", k, f)
			}
			out = append(out, n)
		}
		return out
	}
	dur := func(k, def string) time.Duration {
		d, err := time.ParseDuration(env(k, def))
		if err != nil || d <= 0 {
			t.Fatalf("%s: %v", k, err)
		}
		return d
	}
	c := batchBench{
		suts:      strings.Fields(env("VHOST_BATCH_SUTS", "ours")),
		intervals: strings.Fields(env("VHOST_BATCH_INTERVALS", "0 50 200 auto")),
		warmup:    dur("VHOST_BATCH_WARMUP", "500ms"),
		dur:       dur("VHOST_BATCH_DUR", "2s"),
		sleepMax:  datapath.DefaultPMDSleepMax,
		aCPU:      0,
		bCPU:      0,
		pmdCPU:    1,
		ringSize:  1024,
		memBytes:  16 << 20,
	}
	if b := ints("VHOST_BATCH_BASELINE", "1000"); len(b) > 0 {
		c.baseline = b[0]
	}
	if s := ints("VHOST_BATCH_SLEEP", ""); len(s) > 0 {
		c.sleepMax = s[0]
	}
	if s := ints("VHOST_BATCH_OVS_MAXSLEEP", ""); len(s) > 0 {
		c.ovsMaxSleep = s[0]
	}
	switch cpus := ints("VHOST_BATCH_CPUS", ""); len(cpus) {
	case 0:
	case 2:
		c.aCPU, c.bCPU, c.pmdCPU = cpus[0], cpus[0], cpus[1]
	case 3:
		c.aCPU, c.bCPU, c.pmdCPU = cpus[0], cpus[1], cpus[2]
	default:
		t.Fatalf("VHOST_BATCH_CPUS: FRONTENDS,PMD or A,B,PMD")
	}
	c.modes = []benchMode{
		{name: "intr", rates: ints("VHOST_BATCH_RATES", "20000 100000 300000 1000000")},
		{name: "eventidx", eventIdx: true, rates: ints("VHOST_BATCH_EIDX_RATES", "")},
		{name: "poll", noIntr: true, rates: ints("VHOST_BATCH_POLL_RATES", "100000")},
	}
	return c
}

// TestBatchingBench prints the table; see the top of this file.
func TestBatchingBench(t *testing.T) {
	if os.Getenv("VHOST_BATCH_BENCH") != "1" {
		t.Skip("set VHOST_BATCH_BENCH=1 to run the tx-flush-interval benchmark")
	}
	c := batchBenchFromEnv(t)
	keepProcs(t)
	var load [3]float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscan(string(b), &load[0], &load[1], &load[2])
	}
	fmt.Printf("# %s, %d CPUs, load %.2f %.2f %.2f, A on CPU %d, B on CPU %d, PMD on CPU %d, our pmd-sleep-max %d µs, OVS pmd-maxsleep %d µs, ring %d\n",
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), load[0], load[1], load[2],
		c.aCPU, c.bCPU, c.pmdCPU, c.sleepMax, c.ovsMaxSleep, c.ringSize)
	fmt.Println("# kicks/pkt: the switch's count, or (*) the call-eventfd signals B read; p50/p99: one-way A→B latency of every frame, µs;")
	fmt.Println("# lost: frames of the window B never got (+ frames due that A's full ring refused); A_burst: frames per A transmit")
	fmt.Println(benchHeader)
	for _, name := range c.suts {
		t.Run(name, func(t *testing.T) {
			var sut benchSUT
			switch name {
			case "ours":
				sut = startOurSwitch(t, c)
			case "ovs":
				sut = startOVS(t, c)
			default:
				t.Fatalf("unknown switch %q (ours, ovs)", name)
			}
			runBenchModes(t, c, sut)
		})
	}
}

// TestBatchingBenchSmoke runs two tiny cells of the benchmark through our
// switch, so that its machinery stays working (and race-free): frames
// arrive, a guest taking interrupts is kicked, a polling one never is.
func TestBatchingBenchSmoke(t *testing.T) {
	c := batchBench{
		intervals: []string{"50"}, warmup: 20 * time.Millisecond, dur: 100 * time.Millisecond,
		sleepMax: datapath.DefaultPMDSleepMax, aCPU: -1, bCPU: -1, pmdCPU: -1, ringSize: 256, memBytes: 8 << 20,
	}
	keepProcs(t)
	sut := startOurSwitch(t, c)
	a := dialBenchFrontend(t, sut.sockets()[0], c, benchMode{})
	sut.waitLink(t, 0, true)
	for _, m := range []benchMode{{name: "intr"}, {name: "poll", noIntr: true}} {
		b := dialBenchFrontend(t, sut.sockets()[1], c, m)
		sut.waitLink(t, 1, true)
		r := runBenchCell(t, c, sut, a, b, m, 5000, "50")
		t.Logf("%s: %s", m.name, r.row(sut.name(), m.name, 5000, "50"))
		if r.received == 0 {
			t.Fatalf("%s: nothing received: %+v", m.name, r)
		}
		if m.noIntr && r.guestIRQs != 0 {
			t.Errorf("poll: B was signalled %d times", r.guestIRQs)
		}
		if !m.noIntr && r.guestIRQs == 0 {
			t.Errorf("intr: B received %d frames without a signal", r.received)
		}
		b.close()
		sut.waitLink(t, 1, false)
	}
}

// keepProcs gives the frontends' threads Go Ps of their own for the
// test. They stand for VMs, other processes: with GOMAXPROCS at the CPU
// count, the PMD's P and theirs would be shared, and a frontend thread
// back from poll or nanosleep would wait for sysmon to retake a P — up to
// 10 ms, which is the runtime's latency, not the switch's.
func keepProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(prev + 3)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

func runBenchModes(t *testing.T, c batchBench, sut benchSUT) {
	a := dialBenchFrontend(t, sut.sockets()[0], c, benchMode{})
	sut.waitLink(t, 0, true)
	for _, m := range c.modes {
		if len(m.rates) == 0 && !(m.name == "intr" && c.baseline > 0) {
			continue
		}
		b := dialBenchFrontend(t, sut.sockets()[1], c, m)
		sut.waitLink(t, 1, true)
		cell := func(rate int, fi string) {
			if !sut.setFlush(t, fi) {
				return
			}
			r := runBenchCell(t, c, sut, a, b, m, rate, fi)
			fmt.Println(r.row(sut.name(), m.name, rate, fi))
		}
		if m.name == "intr" && c.baseline > 0 {
			cell(c.baseline, "0")
		}
		for _, rate := range m.rates {
			for _, fi := range c.intervals {
				cell(rate, fi)
			}
		}
		b.close()
		sut.waitLink(t, 1, false)
	}
}

// dialBenchFrontend connects a frontend with the rings and features the
// benchmark uses: split rings of c.ringSize, mergeable buffers (so a
// 12-byte header), no offloads.
func dialBenchFrontend(t *testing.T, path string, c batchBench, m benchMode) *frontend {
	f := dialFrontend(t, path, feCfg{
		size: c.ringSize, memSize: c.memBytes, noIntr: m.noIntr, eventIdx: m.eventIdx,
		featMask: 1<<featVersion1 | 1<<featNetMrgRxbuf | 1<<featProtocolFeature,
	})
	f.setup()
	return f
}

// benchSUT is a switch forwarding port 1 (A's socket) to port 2 (B's).
type benchSUT interface {
	name() string
	sockets() [2]string
	// waitLink waits until port i+1's link is up (or down).
	waitLink(t *testing.T, i int, up bool)
	// setFlush sets tx-flush-interval; false if the switch has no such
	// setting (the cell is skipped).
	setFlush(t *testing.T, fi string) bool
	// mark starts a measurement window; stats ends it.
	mark(t *testing.T)
	stats(t *testing.T) sutStats
}

type sutStats struct {
	avgBatch, busyNsPerPkt float64
	kicks                  uint64 // the switch's own count
	countsKicks            bool
}

// ---- our switch

type ourSwitch struct {
	dp     *datapath.Datapath
	ports  [2]*Port
	paths  [2]string
	before struct {
		pmd datapath.PMDStats
		tx  datapath.PortPMDStats
	}
}

func startOurSwitch(t *testing.T, c batchBench) *ourSwitch {
	rules := &datapath.RuleTable{}
	cfg := datapath.Config{NumPMDs: 1, PMDSleepMax: c.sleepMax, Upcall: rules}
	if c.pmdCPU >= 0 {
		cfg.CPUs = []int{c.pmdCPU}
	}
	dp, err := datapath.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	s := &ourSwitch{dp: dp}
	for i := range s.ports {
		s.ports[i], s.paths[i] = newServerPort(t, 1)
		if _, err := dp.AddPort(uint32(i+1), s.ports[i]); err != nil {
			t.Fatal(err)
		}
	}
	rules.Add(nstest.InPortRule(1, 2))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return s
}

func (s *ourSwitch) name() string       { return "ours" }
func (s *ourSwitch) sockets() [2]string { return s.paths }
func (s *ourSwitch) waitLink(t *testing.T, i int, up bool) {
	waitFor(t, fmt.Sprintf("port %d up=%v", i+1, up), func() bool { return s.ports[i].LinkUp() == up })
}

func (s *ourSwitch) setFlush(t *testing.T, fi string) bool {
	us := datapath.TxFlushAuto
	if fi != "auto" {
		var err error
		if us, err = strconv.Atoi(fi); err != nil {
			t.Fatalf("tx-flush-interval %q", fi)
		}
	}
	if err := s.dp.SetTxFlushInterval(us); err != nil {
		t.Fatal(err)
	}
	return true
}

func (s *ourSwitch) txStats() datapath.PortPMDStats {
	var sum datapath.PortPMDStats
	for _, st := range s.dp.Port(2).TxStats() {
		sum.Packets += st.Packets
		sum.Batches += st.Batches
		sum.Drops += st.Drops
		sum.Kicks += st.Kicks
	}
	return sum
}

func (s *ourSwitch) mark(*testing.T) {
	s.before.pmd, s.before.tx = s.dp.PMDStats()[0], s.txStats()
}

func (s *ourSwitch) stats(*testing.T) sutStats {
	pmd, tx := s.dp.PMDStats()[0], s.txStats()
	rx, busy := pmd.RxPackets-s.before.pmd.RxPackets, pmd.BusyNs-s.before.pmd.BusyNs
	d := datapath.PortPMDStats{
		Packets: tx.Packets - s.before.tx.Packets, Batches: tx.Batches - s.before.tx.Batches,
		Drops: tx.Drops - s.before.tx.Drops,
	}
	return sutStats{avgBatch: d.AvgBatch(), busyNsPerPkt: ratio(busy, rx),
		kicks: tx.Kicks - s.before.tx.Kicks, countsKicks: true}
}

// ---- one cell

// benchFrameLen is the frame A sends: Ethernet, IPv4, UDP and 18 bytes of
// payload (magic, sequence number, send time), 64 bytes on a wire.
const (
	benchFrameLen = 60
	benchMagic    = 0x76627463 // "vbtc"
	offMagic      = 42
	offSeq        = 46
	offStamp      = 50
	histMaxUs     = 100_000 // latencies past 100 ms land in the last bucket
)

func benchFrame() []byte {
	b := make([]byte, benchFrameLen)
	copy(b, []byte{0x02, 0, 0xc6, 0x12, 0x08, 0x02, 0x02, 0, 0xc6, 0x12, 0x08, 0x01, 0x08, 0x00})
	ip := b[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], benchFrameLen-14)
	copy(ip[12:], []byte{198, 18, 8, 1, 198, 18, 8, 2})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := b[34:42]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], benchFrameLen-34)
	binary.BigEndian.PutUint32(b[offMagic:], benchMagic)
	return b
}

// benchEpoch is the clock A stamps frames with and B reads them by.
var benchEpoch = time.Now()

func benchNow() int64 { return int64(time.Since(benchEpoch)) }

// cellResult is what one cell measured.
type cellResult struct {
	sut            sutStats
	window         time.Duration
	sent, received uint64 // frames A stamped inside the window, and B got of them
	notOffered     uint64 // frames due that A's transmit ring had no room for
	guestIRQs      uint64 // eventfd signals B read during the window
	p50, p99       float64
	aBurst         float64 // A's average frames per transmit (per wake-up of its pacing loop)
}

const benchHeader = "sut   guest     rate_pps flush   sent_pps A_burst avg_batch kicks/pkt busy_ns/pkt  p50_us  p99_us  lost"

func (r cellResult) row(sut, mode string, rate int, fi string) string {
	var kicks string
	if r.sut.countsKicks {
		kicks = fmt.Sprintf("%.3f", ratio(r.sut.kicks, r.received))
	} else {
		kicks = fmt.Sprintf("%.3f*", ratio(r.guestIRQs, r.received))
	}
	lost := fmt.Sprintf("%d", r.sent-r.received)
	if r.notOffered > 0 {
		lost += fmt.Sprintf(" (+%d not offered)", r.notOffered)
	}
	return fmt.Sprintf("%-5s %-8s %9d %5s %10.0f %7.2f %9.2f %9s %11.0f %7.0f %7.0f  %s",
		sut, mode, rate, fi, float64(r.sent)/r.window.Seconds(), r.aBurst, r.sut.avgBatch, kicks,
		r.sut.busyNsPerPkt, r.p50, r.p99, lost)
}

func ratio(a, b uint64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// runBenchCell sends at rate for c.warmup + c.dur and measures the window
// after the warm-up.
func runBenchCell(t *testing.T, c batchBench, sut benchSUT, a, b *frontend, m benchMode, rate int, fi string) cellResult {
	start := benchNow()
	winStart, winEnd := start+int64(c.warmup), start+int64(c.warmup+c.dur)
	g := &benchGen{q: a.tx(0), rate: rate, start: start, winStart: winStart, winEnd: winEnd, cpu: c.aCPU}
	rcv := &benchRecv{q: b.rx(0), mode: m, winStart: winStart, winEnd: winEnd, cpu: c.bCPU,
		hist: make([]uint32, histMaxUs+1)}
	b.rx(0).calls() // forget earlier signals
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); g.run() }()
	go func() { defer wg.Done(); rcv.run() }()

	time.Sleep(time.Duration(winStart - benchNow()))
	sut.mark(t)
	irq0 := rcv.irqs.Load()
	time.Sleep(time.Duration(winEnd - benchNow()))
	st := sut.stats(t)
	irqs := rcv.irqs.Load() - irq0
	// Let the window's last frames through: B stops once it has them
	// all, or after a second.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if g.done.Load() && rcv.inWindow.Load() >= g.inWindow.Load() {
			break
		}
	}
	rcv.stop.Store(true)
	wg.Wait()
	r := cellResult{sut: st, window: c.dur, sent: g.inWindow.Load(), received: rcv.inWindow.Load(),
		notOffered: g.notOffered, guestIRQs: irqs, aBurst: ratio(g.total, g.bursts)}
	r.p50, r.p99 = histQuantile(rcv.hist, r.received, 0.5), histQuantile(rcv.hist, r.received, 0.99)
	return r
}

// histQuantile is the q-quantile, in µs, of n samples in 1 µs buckets.
func histQuantile(h []uint32, n uint64, q float64) float64 {
	if n == 0 {
		return math.NaN()
	}
	want := uint64(math.Ceil(q * float64(n)))
	var acc uint64
	for us, c := range h {
		acc += uint64(c)
		if acc >= want {
			return float64(us)
		}
	}
	return float64(len(h) - 1)
}

// benchThread locks the goroutine to its thread, pins it if cpu ≥ 0 and
// lets its nanosleeps end within a microsecond of their deadline. The
// goroutine never unlocks: its thread, pinned and with a changed timer
// slack, ends with it instead of going back to the runtime's pool.
func benchThread(cpu int) {
	runtime.LockOSThread()
	if cpu >= 0 {
		var set unix.CPUSet
		set.Set(cpu)
		_ = unix.SchedSetaffinity(0, &set) // best effort, as the PMD's own pinning
	}
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1000, 0, 0, 0)
}

func nanosleep(ns int64) {
	ts := unix.NsecToTimespec(ns)
	_ = unix.Nanosleep(&ts, nil)
}

// benchGen is frontend A's sender: it sends rate frames/s from start to
// winEnd on its own thread. Only this goroutine touches q while it runs.
type benchGen struct {
	q                         *fvq
	rate                      int
	start, winStart, winEnd   int64
	cpu                       int
	inWindow                  atomic.Uint64
	done                      atomic.Bool
	notOffered, total, bursts uint64 // read after the goroutine ended; notOffered in the window
}

func (g *benchGen) run() {
	defer g.done.Store(true)
	benchThread(g.cpu)
	tmpl := benchFrame()
	period := 1e9 / float64(g.rate)
	var seq uint64 // frames due so far
	for {
		now := benchNow()
		if now >= g.winEnd {
			return
		}
		due := uint64(float64(now-g.start)/period) + 1
		if due <= seq {
			nanosleep(g.start + int64(float64(seq)*period) - now)
			continue
		}
		n := due - seq
		sent := uint64(g.q.sendStamped(int(min(n, uint64(g.q.size))), uint32(seq), now, tmpl))
		seq = due
		if now >= g.winStart {
			g.inWindow.Add(sent)
			g.notOffered += n - sent
		}
		g.total += sent
		g.bursts++
	}
}

// benchRecv is frontend B's receiver. Only this goroutine touches q (and
// hist) while it runs.
type benchRecv struct {
	q                *fvq
	mode             benchMode
	winStart, winEnd int64
	cpu              int
	hist             []uint32
	inWindow         atomic.Uint64
	irqs             atomic.Uint64
	stop             atomic.Bool
}

func (r *benchRecv) run() {
	benchThread(r.cpu)
	fds := []unix.PollFd{{Fd: int32(r.q.call), Events: unix.POLLIN}}
	for !r.stop.Load() {
		if r.mode.noIntr {
			if r.drain() == 0 {
				nanosleep(5000)
			}
			continue
		}
		fds[0].Revents = 0
		if n, _ := unix.Poll(fds, 20); n <= 0 {
			continue
		}
		r.irqs.Add(r.q.calls())
		for r.drain() > 0 {
		}
	}
	if r.mode.noIntr {
		r.irqs.Add(r.q.calls()) // should be none
	}
}

// drain takes what the device put in B's receive ring and reposts the
// buffers, without allocating; with event-idx it asks to be signalled for
// the next frame (and the caller drains again, in case one came in
// between).
func (r *benchRecv) drain() int {
	q := r.q
	usedIdx := q.load16(q.used + 2)
	if q.lastUsed == usedIdx {
		return 0
	}
	now := benchNow()
	old := q.availIdx
	n := 0
	for ; q.lastUsed != usedIdx; q.lastUsed++ {
		e := q.f.mem[q.used+4+8*uint64(q.lastUsed%uint16(q.size)):]
		id, ln := uint16(le.Uint32(e)), le.Uint32(e[4:])
		if fr := q.buf(id)[:ln]; len(fr) >= 12+offStamp+8 {
			fr = fr[12:]
			if binary.BigEndian.Uint32(fr[offMagic:]) == benchMagic {
				if st := int64(le.Uint64(fr[offStamp:])); st >= r.winStart && st < r.winEnd {
					r.hist[min((now-st)/1000, histMaxUs)]++
					r.inWindow.Add(1)
				}
			}
		}
		q.setDesc(id, q.bufGPA(id), uint32(q.bufSize), virtq.DescFWrite, 0)
		le.PutUint16(q.f.mem[q.avail+4+2*uint64(q.availIdx%uint16(q.size)):], id)
		q.availIdx++
		n++
	}
	if r.mode.eventIdx {
		q.store16(q.avail+4+2*uint64(q.size), q.lastUsed) // used_event
	}
	q.store16(q.avail+2, q.availIdx)
	q.notify(old)
	return n
}

// sendStamped queues up to n copies of tmpl, numbered from seq and
// stamped with now, on a transmit ring, without allocating; it returns
// how many fitted.
func (q *fvq) sendStamped(n int, seq uint32, now int64, tmpl []byte) int {
	q.reclaim()
	old := q.availIdx
	k := 0
	for ; k < n && len(q.freeList) > 0; k++ {
		id := q.freeList[len(q.freeList)-1]
		q.freeList = q.freeList[:len(q.freeList)-1]
		b := q.buf(id)
		clear(b[:12])
		fr := b[12 : 12+len(tmpl)]
		copy(fr, tmpl)
		binary.BigEndian.PutUint32(fr[offSeq:], seq+uint32(k))
		le.PutUint64(fr[offStamp:], uint64(now))
		q.setDesc(id, q.bufGPA(id), uint32(12+len(tmpl)), 0, 0)
		le.PutUint16(q.f.mem[q.avail+4+2*uint64(q.availIdx%uint16(q.size)):], id)
		q.availIdx++
	}
	if k > 0 {
		q.store16(q.avail+2, q.availIdx)
		q.notify(old)
	}
	return k
}

// ---- Open vSwitch with DPDK

// ovsDPDK is Debian's DPDK build of ovs-vswitchd (openvswitch-switch-dpdk),
// run by path so that the system's ovs-vswitchd alternative is left alone.
const ovsDPDK = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"

type ovsSwitch struct {
	dir, db, ctl string
	ns           string
	paths        [2]string
	tscKHz       float64
}

func ovsRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startOVS runs a private OVS (database, daemon, run directory, network
// namespace and DPDK file prefix of its own), its PMD on c.pmdCPU, with two
// dpdkvhostuser ports (OVS serves the sockets) and a rule 1 → 2.
func startOVS(t *testing.T, c batchBench) *ovsSwitch {
	if _, err := os.Stat(ovsDPDK); err != nil {
		t.Skipf("%v (apt-get install openvswitch-switch-dpdk)", err)
	}
	dir, err := os.MkdirTemp("", "vhbatch-ovs")
	if err != nil {
		t.Fatal(err)
	}
	s := &ovsSwitch{dir: dir, ns: fmt.Sprintf("vhbatch%d", os.Getpid()), ctl: filepath.Join(dir, "vswitchd.ctl")}
	s.db = "unix:" + filepath.Join(dir, "db.sock")
	prefix := s.ns
	t.Cleanup(func() { os.RemoveAll(dir); os.RemoveAll("/run/dpdk/" + prefix) })
	ovsRun(t, "ip", "netns", "add", s.ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", s.ns).Run() })
	ovsRun(t, "ovsdb-tool", "create", filepath.Join(dir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema")
	ovsRun(t, "ip", "netns", "exec", s.ns, "ovsdb-server", filepath.Join(dir, "conf.db"), "--remote=p"+s.db,
		"--pidfile="+filepath.Join(dir, "ovsdb.pid"), "--unixctl="+filepath.Join(dir, "ovsdb.ctl"),
		"--log-file="+filepath.Join(dir, "ovsdb.log"), "--detach", "--no-chdir")
	t.Cleanup(func() { killPidfile(filepath.Join(dir, "ovsdb.pid")) })
	mask := fmt.Sprintf("0x%x", 1<<max(c.pmdCPU, 0))
	s.vsctl(t, true, "init", "--", "set", "Open_vSwitch", ".",
		"other_config:dpdk-init=true",
		`other_config:dpdk-extra="--no-huge -m 2048 --legacy-mem --no-pci --file-prefix `+prefix+`"`,
		"other_config:dpdk-lcore-mask="+mask, "other_config:pmd-cpu-mask="+mask,
		fmt.Sprintf("other_config:pmd-maxsleep=%d", c.ovsMaxSleep))
	cmd := exec.Command("ip", "netns", "exec", s.ns, ovsDPDK, s.db,
		"--pidfile="+filepath.Join(dir, "vswitchd.pid"), "--unixctl="+s.ctl,
		"--log-file="+filepath.Join(dir, "vswitchd.log"), "--detach", "--no-chdir")
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+dir, "OVS_DBDIR="+dir, "OVS_LOGDIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ovs-vswitchd-dpdk: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() && os.Getenv("VHOST_BATCH_OVS_LOG") == "1" {
			t.Logf("ovs-vswitchd log:\n%s", s.log())
		}
		killPidfile(filepath.Join(dir, "vswitchd.pid"))
	})
	args := []string{"add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev", "fail-mode=secure"}
	for i := range s.paths {
		name := fmt.Sprintf("vhu%d", i+1)
		s.paths[i] = filepath.Join(dir, name) // OVS serves dpdkvhostuser sockets in its run directory
		args = append(args, "--", "add-port", "br0", name, "--", "set", "Interface", name,
			"type=dpdkvhostuser", fmt.Sprintf("ofport_request=%d", i+1))
	}
	s.vsctl(t, false, args...)
	ovsRun(t, "ovs-ofctl", "add-flow", "unix:"+filepath.Join(dir, "br0.mgmt"), "in_port=1,actions=output:2")
	if m := regexp.MustCompile(`TSC frequency: (\d+) KHz`).FindStringSubmatch(s.log()); m != nil {
		s.tscKHz, _ = strconv.ParseFloat(m[1], 64)
	}
	return s
}

func (s *ovsSwitch) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "vswitchd.log"))
	return string(b)
}

func (s *ovsSwitch) vsctl(t *testing.T, noWait bool, args ...string) {
	a := []string{"--db=" + s.db, "--timeout=60"}
	if noWait {
		a = append(a, "--no-wait")
	}
	ovsRun(t, "ovs-vsctl", append(a, args...)...)
}

func (s *ovsSwitch) appctl(t *testing.T, args ...string) string {
	return ovsRun(t, "ovs-appctl", append([]string{"-t", s.ctl}, args...)...)
}

func (s *ovsSwitch) name() string       { return "ovs" }
func (s *ovsSwitch) sockets() [2]string { return s.paths }

// waitLink polls the interface's link_state, which OVS updates in its
// database within seconds.
func (s *ovsSwitch) waitLink(t *testing.T, i int, up bool) {
	want := map[bool]string{true: "up", false: "down"}[up]
	var got string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command("ovs-vsctl", "--db="+s.db, "get", "Interface", fmt.Sprintf("vhu%d", i+1), "link_state").Output()
		if got = strings.TrimSpace(string(out)); got == want {
			return
		}
	}
	t.Fatalf("vhu%d link_state %q, want %s", i+1, got, want)
}

func (s *ovsSwitch) setFlush(t *testing.T, fi string) bool {
	if fi == "auto" {
		return false
	}
	s.vsctl(t, false, "set", "Open_vSwitch", ".", "other_config:tx-flush-interval="+fi)
	return true
}

func (s *ovsSwitch) mark(t *testing.T) { s.appctl(t, "dpif-netdev/pmd-stats-clear") }

func (s *ovsSwitch) stats(t *testing.T) sutStats {
	out := s.appctl(t, "dpif-netdev/pmd-stats-show")
	get := func(key string) float64 {
		m := regexp.MustCompile(regexp.QuoteMeta(key) + `:\s*([0-9.]+)`).FindStringSubmatch(out)
		if m == nil {
			return math.NaN()
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	st := sutStats{avgBatch: get("avg. packets per output batch"), busyNsPerPkt: math.NaN()}
	if s.tscKHz > 0 {
		st.busyNsPerPkt = get("avg processing cycles per packet") / s.tscKHz * 1e6
	}
	return st
}

func killPidfile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	_ = unix.Kill(pid, unix.SIGTERM)
	for i := 0; i < 100; i++ {
		if unix.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = unix.Kill(pid, unix.SIGKILL)
}

package datapath

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/netdev/ring"
)

// BenchmarkForwardWhileScraping: BenchmarkForward's setting (one manual
// PMD, ring ports, 1000 flows over ten masks) while another goroutine reads
// everything an operator or Prometheus would — PMDStats, the output port's
// TxStats, RxqStats and DumpFlows — at 10 Hz and at 1 kHz, next to the same
// run without a reader. One op is one packet. Besides wall-clock ns/pkt it
// reports cpu-ns/pkt, the CPU time of the forwarding thread alone, which
// other load on a shared machine disturbs far less.
func BenchmarkForwardWhileScraping(b *testing.B) {
	for _, bc := range []struct {
		name  string
		every time.Duration
	}{{"scrape=none", 0}, {"scrape=10Hz", 100 * time.Millisecond}, {"scrape=1kHz", time.Millisecond}} {
		b.Run(bc.name, func(b *testing.B) { benchForwardScraped(b, 1000, bc.every) })
	}
}

func benchForwardScraped(b *testing.B, flows int, every time.Duration) {
	rules := &RuleTable{}
	dp, err := New(Config{Manual: true, Upcall: rules, FlowLimit: 2 * flows})
	if err != nil {
		b.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 256), ring.New("out", 0, 1, 256)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	benchRules(rules, 2)
	frames := benchFrames(flows)
	pmd := dp.PMDs()[0]
	next := 0
	run := func(n int) {
		for done := 0; done < n; {
			var bt [32][]byte
			for j := range bt {
				bt[j] = frames[next]
				next = (next + 1) % flows
			}
			in.Inject(0, bt[:]...)
			done += pmd.PollOnce()
			out.Discard(0)
		}
	}
	run(max(3*flows, 100_000))
	if dp.FlowCount() != flows {
		b.Fatalf("%d megaflows installed for %d flows", dp.FlowCount(), flows)
	}
	st0 := dp.PMDStats()[0]

	stop := make(chan struct{})
	var wg sync.WaitGroup
	scrapes, dumped := 0, 0
	if every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				dp.PMDStats()
				dp.Port(2).TxStats()
				dp.RxqStats()
				dumped += len(dp.DumpFlows())
				scrapes++
			}
		}()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPUNs()
	run(b.N)
	cpu := threadCPUNs() - cpu0
	b.StopTimer()
	close(stop)
	wg.Wait()
	if st := dp.PMDStats()[0]; st.Misses != st0.Misses {
		b.Fatalf("%d upcalls during the measurement", st.Misses-st0.Misses)
	}
	if every > 0 && scrapes > 0 && dumped != scrapes*flows {
		b.Fatalf("%d scrapes dumped %d flows, want %d each", scrapes, dumped, flows)
	}
	reportRate(b)
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/pkt")
	if sec := b.Elapsed().Seconds(); sec > 0 {
		b.ReportMetric(float64(scrapes)/sec, "scrapes/s")
	}
}

// threadCPUNs is the CPU time the calling OS thread has used.
func threadCPUNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

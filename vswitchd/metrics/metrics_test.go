package metrics

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
)

// trafficRig is a 4-port, 2-PMD bridge with known traffic behind it:
//
//   - port 1 → port 2: 80 frames received in bursts of 1, 3, 32, 32 and 12
//     (so output batches of those sizes, all from PMD 0, which polls port
//     1); port 2's tx ring holds 64, so the last 16 are refused (tx full);
//   - port 2 → NORMAL: 5 frames from mac2, learned on port 2 and flooded;
//   - port 3 → port 4, whose link is down: 7 frames dropped as port_down
//     by PMD 0 (which polls port 3).
//
// Round-robin assignment puts the rx queues of ports 1 and 3 on PMD 0 and
// those of ports 2 and 4 on PMD 1.
func trafficRig(t *testing.T, name string, targets ...string) *rig {
	t.Helper()
	r := newRig(t, name, 4, 2, targets...)
	r.addFlows(t,
		"in_port=1,actions=output:2",
		"in_port=2,actions=NORMAL",
		"in_port=3,actions=output:4",
		"table=3,priority=5,udp,actions=drop",
		"table=3,priority=6,tcp,actions=drop",
	)
	r.ports[3].SetLinkUp(false)
	f12 := frame(mac1, mac2)
	for _, n := range []int{1, 3, 32} {
		r.send(t, 1, f12, n)
	}
	r.send(t, 1, f12, 44) // two receive batches: 32 and 12
	r.send(t, 2, frame(mac2, mac1), 5)
	r.send(t, 3, f12, 7)
	r.settle()
	return r
}

func TestScrapeMatchesCounters(t *testing.T) {
	ctl := fakeController(t)
	r := trafficRig(t, "br0", "tcp:"+ctl, "tcp:127.0.0.1:1")
	nstest.WaitFor(t, 5*time.Second, "controller handshake and echo", func() bool {
		for _, s := range r.br.Manager().Status() {
			if s.State == ofconn.StateActive && s.MsgsIn >= 2 && s.MsgsOut >= 2 {
				return true
			}
		}
		return false
	})
	_, url := serve(t, func() []Bridge { return []Bridge{r.bridge()} })
	fams := scrape(t, url)

	// Ports: the drivers' counters, under the names PortName gives.
	for _, p := range r.dp.Ports() {
		port := r.portName(p.No)
		s := p.Dev.Stats()
		l := lbl("bridge", "br0", "port", port)
		for name, want := range map[string]uint64{
			"vswitch_port_rx_packets_total": s.RxPackets, "vswitch_port_rx_bytes_total": s.RxBytes,
			"vswitch_port_rx_drops_total": s.RxDrops, "vswitch_port_rx_errors_total": s.RxErrors,
			"vswitch_port_tx_packets_total": s.TxPackets, "vswitch_port_tx_bytes_total": s.TxBytes,
			"vswitch_port_tx_drops_total": s.TxDrops, "vswitch_port_tx_errors_total": s.TxErrors,
			"vswitch_port_tx_refused_total": s.TxRefused,
		} {
			if got := value(t, fams, name, l); got != float64(want) {
				t.Errorf("%s{%s} = %v, want %d", name, l, got, want)
			}
		}
		wantUp := 1.0
		if p.No == 4 {
			wantUp = 0
		}
		if got := value(t, fams, "vswitch_port_link_up", l); got != wantUp {
			t.Errorf("port %s link_up = %v, want %v", port, got, wantUp)
		}
		for _, ts := range p.TxStats() {
			pl := lbl("bridge", "br0", "port", port, "pmd", strconv.Itoa(ts.PMD))
			checkEq(t, fams, "vswitch_pmd_tx_packets_total", pl, ts.Packets)
			checkEq(t, fams, "vswitch_pmd_tx_batches_total", pl, ts.Batches)
			checkEq(t, fams, "vswitch_pmd_tx_drops_total", pl, ts.Drops)
			h := find(t, fams, "vswitch_pmd_tx_batch_size_packets", pl).GetHistogram()
			if h.GetSampleCount() != ts.Batches || h.GetSampleSum() != float64(ts.Packets+ts.Drops) {
				t.Errorf("batch histogram{%s}: count %d sum %v, want %d and %d", pl, h.GetSampleCount(), h.GetSampleSum(), ts.Batches, ts.Packets+ts.Drops)
			}
		}
	}
	if got := value(t, fams, "vswitch_port_rx_packets_total", lbl("bridge", "br0", "port", "br0-eth1")); got != 80 {
		t.Errorf("port 1 received %v, want the 80 injected", got)
	}

	// The output batches PMD 0 sent to port 2, bucket by bucket.
	pl := lbl("bridge", "br0", "port", "br0-eth2", "pmd", "0")
	h := find(t, fams, "vswitch_pmd_tx_batch_size_packets", pl).GetHistogram()
	// Sizes 1, 3, 32, 32, 12; the parser adds the +Inf bucket (the count).
	wantBuckets := map[float64]uint64{1: 1, 2: 1, 4: 2, 8: 2, 16: 3, 32: 5, math.Inf(1): 5}
	if len(h.GetBucket()) != len(wantBuckets) {
		t.Errorf("%d buckets, want %d", len(h.GetBucket()), len(wantBuckets))
	}
	prev := uint64(0)
	for _, b := range h.GetBucket() {
		if want, ok := wantBuckets[b.GetUpperBound()]; !ok || b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
		if b.GetCumulativeCount() < prev {
			t.Errorf("bucket le=%v not cumulative", b.GetUpperBound())
		}
		prev = b.GetCumulativeCount()
	}
	if h.GetSampleCount() != 5 || h.GetSampleSum() != 80 {
		t.Errorf("port 2 batches: count %d sum %v, want 5 and 80", h.GetSampleCount(), h.GetSampleSum())
	}
	checkEq(t, fams, "vswitch_pmd_tx_packets_total", pl, 64)
	checkEq(t, fams, "vswitch_pmd_tx_drops_total", pl, 16)

	// Rx queues: one per port, ports 1 and 3 on PMD 0, 2 and 4 on PMD 1.
	rxqs := r.dp.RxqStats()
	if len(rxqs) != 4 || len(fams["vswitch_rxq_packets_total"].GetMetric()) != 4 {
		t.Errorf("rxq stats %+v, %d series; want 4", rxqs, len(fams["vswitch_rxq_packets_total"].GetMetric()))
	}
	for _, q := range rxqs {
		l := lbl("bridge", "br0", "port", r.portName(q.Port), "queue", strconv.Itoa(q.Queue))
		checkEq(t, fams, "vswitch_rxq_packets_total", l, q.Packets)
		checkEq(t, fams, "vswitch_rxq_pmd", l, uint64(q.PMD))
		if got := value(t, fams, "vswitch_rxq_busy_seconds_total", l); math.Abs(got-float64(q.BusyNs)/1e9) > 1e-12 {
			t.Errorf("rxq busy{%s} = %v, want %v s", l, got, float64(q.BusyNs)/1e9)
		}
	}
	for port, want := range map[string][2]uint64{"br0-eth1": {80, 0}, "br0-eth2": {5, 1}, "br0-eth3": {7, 0}, "br0-eth4": {0, 1}} {
		l := lbl("bridge", "br0", "port", port, "queue", "0")
		checkEq(t, fams, "vswitch_rxq_packets_total", l, want[0])
		checkEq(t, fams, "vswitch_rxq_pmd", l, want[1])
	}

	// PMDs and drops by cause.
	for _, s := range r.dp.PMDStats() {
		l := lbl("bridge", "br0", "pmd", strconv.Itoa(s.PMD))
		for name, want := range map[string]uint64{
			"vswitch_pmd_iterations_total": s.Iterations, "vswitch_pmd_rx_packets_total": s.RxPackets,
			"vswitch_pmd_emc_hits_total": s.EMCHits, "vswitch_pmd_megaflow_hits_total": s.MegaflowHits,
			"vswitch_pmd_simple_match_hits_total": s.SimpleMatchHits,
			"vswitch_pmd_misses_total":            s.Misses, "vswitch_pmd_lost_upcalls_total": s.LostUpcalls,
			"vswitch_pmd_malformed_packets_total": s.Malformed, "vswitch_pmd_flows_limited_total": s.FlowsLimited,
			"vswitch_pmd_recirculations_total": s.Recirculations,
		} {
			checkEq(t, fams, name, l, want)
		}
		for name, ns := range map[string]uint64{"vswitch_pmd_busy_seconds_total": s.BusyNs, "vswitch_pmd_idle_seconds_total": s.IdleNs} {
			if got := value(t, fams, name, l); math.Abs(got-float64(ns)/1e9) > 1e-12 {
				t.Errorf("%s{%s} = %v, want %v s", name, l, got, float64(ns)/1e9)
			}
		}
		for _, c := range datapath.DropCauses() {
			checkEq(t, fams, "vswitch_datapath_drops_total", lbl("bridge", "br0", "pmd", strconv.Itoa(s.PMD), "cause", c.String()), s.Drops[c])
		}
	}
	checkEq(t, fams, "vswitch_pmd_rx_packets_total", lbl("bridge", "br0", "pmd", "0"), 87)
	checkEq(t, fams, "vswitch_pmd_rx_packets_total", lbl("bridge", "br0", "pmd", "1"), 5)
	checkEq(t, fams, "vswitch_datapath_drops_total", lbl("bridge", "br0", "pmd", "0", "cause", "port_down"), 7)
	checkEq(t, fams, "vswitch_datapath_drops_total", lbl("bridge", "br0", "pmd", "0", "cause", "tx_queue_full"), 16)
	if n := len(fams["vswitch_datapath_drops_total"].GetMetric()); n != 2*len(datapath.DropCauses()) {
		t.Errorf("%d drop series, want one per PMD and cause (%d)", n, 2*len(datapath.DropCauses()))
	}
	flows := value(t, fams, "vswitch_datapath_flows", lbl("bridge", "br0"))
	if flows != float64(r.dp.FlowCount()) || flows == 0 {
		t.Errorf("datapath_flows = %v, FlowCount %d (want > 0)", flows, r.dp.FlowCount())
	}

	// OpenFlow tables: 0 and 3 have rules; only they (and tables that were
	// looked up) appear.
	pipe := r.br.Pipeline()
	checkEq(t, fams, "vswitch_openflow_rules", lbl("bridge", "br0", "table", "0"), 3)
	checkEq(t, fams, "vswitch_openflow_rules", lbl("bridge", "br0", "table", "3"), 2)
	if n := len(fams["vswitch_openflow_rules"].GetMetric()); n != 2 {
		t.Errorf("%d rule series, want 2 (tables 0 and 3)", n)
	}
	ts := pipe.TableStats(0)
	checkEq(t, fams, "vswitch_openflow_table_lookups_total", lbl("bridge", "br0", "table", "0"), ts.Lookups)
	checkEq(t, fams, "vswitch_openflow_table_matches_total", lbl("bridge", "br0", "table", "0"), ts.Matched)
	if ts.Lookups < 3 {
		t.Errorf("table 0 looked up %d times, want one upcall per input port at least", ts.Lookups)
	}

	// NORMAL learned mac2 on port 2.
	ms := r.br.Normal().Stats()
	checkEq(t, fams, "vswitch_mac_table_entries", lbl("bridge", "br0"), uint64(ms.Entries))
	checkEq(t, fams, "vswitch_mac_table_learned_total", lbl("bridge", "br0"), ms.Learned)
	if ms.Entries != 1 || ms.Learned != 1 {
		t.Errorf("MAC table %+v, want mac2 learned", ms)
	}

	// Controllers: the fake one is connected, the refused one is not and
	// keeps redialling. Management targets are not controllers.
	after := controllerTargets(r.br.Manager().Status())
	if len(after) != 2 {
		t.Fatalf("controller targets %+v, want 2", after)
	}
	for _, ct := range after {
		l := lbl("bridge", "br0", "target", ct.name)
		up := value(t, fams, "vswitch_controller_connected", l)
		switch {
		case strings.Contains(ct.name, ctl):
			if up != 1 {
				t.Errorf("%s connected = %v, want 1", ct.name, up)
			}
			checkEq(t, fams, "vswitch_controller_messages_received_total", l, ct.msgsIn)
			checkEq(t, fams, "vswitch_controller_messages_sent_total", l, ct.msgsOut)
			checkEq(t, fams, "vswitch_controller_reconnects_total", l, 0)
		default:
			if up != 0 {
				t.Errorf("%s connected = %v, want 0", ct.name, up)
			}
			if n := value(t, fams, "vswitch_controller_reconnects_total", l); n > float64(ct.reconnects) {
				t.Errorf("%s reconnects %v > %d read after the scrape", ct.name, n, ct.reconnects)
			}
		}
	}
	nstest.WaitFor(t, 5*time.Second, "redials of the refused target", func() bool {
		fams := scrape(t, url)
		return value(t, fams, "vswitch_controller_reconnects_total", lbl("bridge", "br0", "target", "tcp:127.0.0.1:1")) >= 2
	})
}

func checkEq(t *testing.T, fams map[string]*dto.MetricFamily, name, labels string, want uint64) {
	t.Helper()
	if got := value(t, fams, name, labels); got != float64(want) {
		t.Errorf("%s{%s} = %v, want %d", name, labels, got, want)
	}
}

// TestScrapeWellFormed checks the exposition as Prometheus would read it:
// every family has help and a type fitting its name, counters end in
// _total, and the linter that ships with client_golang finds nothing, in
// the collector or in the whole registry.
func TestScrapeWellFormed(t *testing.T) {
	ctl := fakeController(t)
	r := trafficRig(t, "br0", "tcp:"+ctl)
	c, url := serve(t, func() []Bridge { return []Bridge{r.bridge()} })
	fams := scrape(t, url)
	ours := 0
	for name, f := range fams {
		if f.GetHelp() == "" {
			t.Errorf("%s has no help", name)
		}
		if !strings.HasPrefix(name, "vswitch_") {
			continue
		}
		ours++
		isCounter := f.GetType() == dto.MetricType_COUNTER
		if isCounter != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %v", name, f.GetType())
		}
	}
	if ours < 30 {
		t.Errorf("only %d vswitch_ families", ours)
	}
	for _, want := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "promhttp_metric_handler_requests_total"} {
		if fams[want] == nil {
			t.Errorf("no %s", want)
		}
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	reg := NewRegistry(c)
	problems, err = testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint (registry): %s: %s", p.Metric, p.Text)
	}
}

// TestScrapeConcurrent scrapes while PMDs forward traffic on their own
// goroutines (run with -race): counters only move forward between scrapes
// and the exposition stays well-formed.
func TestScrapeConcurrent(t *testing.T) {
	r := newRigConfig(t, "run", 2, datapath.Config{NumPMDs: 2, PMDSleepMax: 10})
	r.addFlows(t, "in_port=1,actions=output:2")
	if err := r.dp.Start(); err != nil {
		t.Fatal(err)
	}
	rp, tp := r.ports[0], r.ports[1]
	_, url := serve(t, func() []Bridge { return []Bridge{r.bridge()} })
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		f := frame(mac1, mac2)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rp.Inject(0, f, f, f, f)
			tp.Discard(0)
			time.Sleep(50 * time.Microsecond)
		}
	}()
	// A second scraper, so that two Collects overlap.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			resp, err := http.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("parallel scrape: %s", resp.Status)
				return
			}
		}
	}()
	last := -1.0
	for i := 0; i < 10; i++ {
		fams := scrape(t, url)
		got := value(t, fams, "vswitch_port_rx_packets_total", lbl("bridge", "run", "port", "run-eth1"))
		if got < last {
			t.Errorf("rx counter went back from %v to %v", last, got)
		}
		last = got
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if last == 0 {
		t.Error("no traffic seen by any scrape")
	}
}

// TestHandlerServesDespiteBrokenBridge: a bridge whose reading panics or
// that duplicates another's series is reported in the log and left out;
// the other bridges are still served, and the scrape error is counted.
func TestHandlerServesDespiteBrokenBridge(t *testing.T) {
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf, mu: &logMu}, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

	good := newRig(t, "good", 1, 1)
	bad := newRig(t, "bad", 1, 1)
	broken := bad.bridge()
	broken.PortName = func(uint32) string { panic("port table is gone") }
	_, url := serve(t, func() []Bridge { return []Bridge{good.bridge(), broken, good.bridge()} })
	fams := scrape(t, url)
	if got := value(t, fams, "vswitch_port_link_up", lbl("bridge", "good", "port", "good-eth1")); got != 1 {
		t.Errorf("good bridge's port link_up = %v", got)
	}
	for _, m := range fams["vswitch_port_link_up"].GetMetric() {
		if strings.Contains(labelString(m), "bridge=bad") {
			t.Errorf("broken bridge served: %s", labelString(m))
		}
	}
	fams = scrape(t, url)
	if got := value(t, fams, "promhttp_metric_handler_errors_total", lbl("cause", "gathering")); got < 1 {
		t.Errorf("gathering errors = %v, want the first scrape's counted", got)
	}
	logMu.Lock()
	log := logBuf.String()
	logMu.Unlock()
	for _, want := range []string{"port table is gone", "collected before with the same name and label values"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestBridgesComeAndGo: the collector asks for the bridge list at every
// scrape, so a bridge added later appears and one removed disappears.
func TestBridgesComeAndGo(t *testing.T) {
	a := newRig(t, "bra", 1, 1)
	b := newRig(t, "brb", 1, 1)
	var mu sync.Mutex
	list := []Bridge{a.bridge()}
	_, url := serve(t, func() []Bridge {
		mu.Lock()
		defer mu.Unlock()
		return append([]Bridge(nil), list...)
	})
	bridges := func() map[string]bool {
		seen := map[string]bool{}
		for _, m := range scrape(t, url)["vswitch_datapath_flows"].GetMetric() {
			seen[labelString(m)] = true
		}
		return seen
	}
	if got := bridges(); !got["bridge=bra"] || len(got) != 1 {
		t.Errorf("bridges %v, want bra", got)
	}
	mu.Lock()
	list = []Bridge{b.bridge(), {Name: "half-built"}}
	mu.Unlock()
	if got := bridges(); !got["bridge=brb"] || len(got) != 1 {
		t.Errorf("bridges %v, want brb", got)
	}
}

package datapath

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// costPort is a ring port whose Recv advances a fake clock by a fixed cost
// per packet received on each queue, so that the busy time the PMD charges
// to a queue is known exactly.
type costPort struct {
	*ring.Port
	clk  *fakeClock
	cost []int64 // ns per packet, per rx queue
}

func (c *costPort) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	n := c.Port.Recv(q, pool, b)
	c.clk.ns += int64(n) * c.cost[q]
	return n
}

// countingClock is a fake clock that counts its reads.
type countingClock struct {
	fakeClock
	reads int
}

func (c *countingClock) now() int64 { c.reads++; return c.ns }

// TestDumpFlows: every installed megaflow is dumped with its masked key,
// actions, counters and age, and prints in dpctl/dump-flows style.
func TestDumpFlows(t *testing.T) {
	clk := &fakeClock{ns: 5_000_000_000}
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, NumPMDs: 2, Clock: clk.now, Upcall: rules,
		AssignRxqs: func(rxqs []RxqRef, n int) [][]RxqRef { return [][]RxqRef{{{Port: 1}}, {{Port: 2}}} }})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in1, in2, out := ring.New("in1", 1, 1, 64), ring.New("in2", 1, 1, 64), ring.New("out", 0, 2, 64)
	dp.AddPort(1, in1)
	dp.AddPort(2, in2)
	dp.AddPort(3, out)
	rules.Add(inPortRule(1, 1, 3))
	ip := Rule{Priority: 5, Actions: actions.List{{Kind: actions.SetIPTTL, Val8: 9}, {Kind: actions.Output, Port: 3}}}
	ip.Match.Key.InPort, ip.Match.Mask.InPort = 2, ^uint32(0)
	ip.Match.Key.EthType, ip.Match.Mask.EthType = 0x0800, 0xffff
	ip.Match.Key.IPv4Dst, ip.Match.Mask.IPv4Dst = 0x0a000000, 0xff000000
	rules.Add(ip)
	pmd0, pmd1 := dp.PMDs()[0], dp.PMDs()[1]

	if d := dp.DumpFlows(); len(d) != 0 {
		t.Fatalf("flows before any traffic: %v", d)
	}
	in1.Inject(0, udpFrame(1, 2, 7, 9, 0), udpFrame(1, 2, 8, 9, 1), udpFrame(3, 4, 7, 9, 2))
	pmd0.PollOnce()
	clk.ns += 1_500_000_000
	in2.Inject(0, udpFrame(1, 0x0a010203, 7, 9, 3), udpFrame(1, 0x0a010204, 7, 9, 4))
	pmd1.PollOnce()
	clk.ns += 250_000_000

	d := dp.DumpFlows()
	if len(d) != 2 {
		t.Fatalf("%d flows dumped, want 2: %v", len(d), d)
	}
	f0, f1 := d[0], d[1]
	if f0.PMD != 0 || f0.Packets != 3 || f0.Bytes != 180 || f0.LastUsed != 1750*time.Millisecond {
		t.Errorf("PMD 0 flow: %+v", f0)
	}
	// Translation consulted the higher-priority rule on IPv4 too.
	if f0.Mask.InPort != ^uint32(0) || f0.Key.InPort != 1 || f0.Mask.EthType != 0xffff || f0.Mask.IPv4Dst != 0xff000000 || f0.Mask.TpSrc != 0 {
		t.Errorf("PMD 0 flow match: key %v mask in_port %#x eth_type %#x", &f0.Key, f0.Mask.InPort, f0.Mask.EthType)
	}
	if f1.PMD != 1 || f1.Packets != 2 || f1.Bytes != 120 || f1.LastUsed != 250*time.Millisecond {
		t.Errorf("PMD 1 flow: %+v", f1)
	}
	// The key is masked: 10.1.2.3 under /8 is 10.0.0.0.
	if f1.Key.IPv4Dst != 0x0a000000 || f1.Mask.IPv4Dst != 0xff000000 || f1.Key.TpSrc != 0 {
		t.Errorf("PMD 1 flow key not masked: %v", &f1.Key)
	}
	s := f1.String()
	for _, want := range []string{"in_port(2)", "eth_type(0x0800)", "ipv4(", "dst=10.0.0.0/255.0.0.0",
		", packets:2, bytes:120, used:0.250s, actions:set(ip(ttl=9)),output:3"} {
		if !strings.Contains(s, want) {
			t.Errorf("%q lacks %q", s, want)
		}
	}
	if s0 := f0.String(); s0 != "in_port(1),eth_type(0x0800),ipv4(dst=0.0.0.0/255.0.0.0), packets:3, bytes:180, used:1.750s, actions:output:3" {
		t.Errorf("PMD 0 flow prints %q", s0)
	}
	// The dump is a copy.
	f1.Actions[1].Port = 99
	if a := dp.DumpFlows()[1].Actions[1].Port; a != 3 {
		t.Errorf("changing a dump changed the datapath's actions (port %d)", a)
	}

	// A hit within the used resolution does not move "used"; a later one does.
	in1.Inject(0, udpFrame(1, 2, 7, 9, 5))
	pmd0.PollOnce()
	if d := dp.DumpFlows()[0]; d.Packets != 4 || d.LastUsed != 0 {
		t.Errorf("after a new hit: %+v", d)
	}
	// Rule changes clear the caches at the next batch.
	rules.Add(inPortRule(0, 9, 3))
	in1.Inject(0, udpFrame(1, 2, 7, 9, 6))
	pmd0.PollOnce()
	if d := dp.DumpFlows(); len(d) != 2 || d[0].PMD != 0 || d[0].Packets != 1 {
		t.Errorf("after invalidation: %v", d)
	}
	if n := (FlowDump{LastUsed: -1}).String(); !strings.Contains(n, "used:never") || !strings.HasSuffix(n, "actions:drop") {
		t.Errorf("unused empty flow prints %q", n)
	}
	out.Discard(0)
	out.Discard(1)
	pmd0.PollOnce()
	pmd1.PollOnce()
	checkNoLeaks(t, dp)
}

// TestIntrospectionWhileRunning calls every introspection method in a loop
// while two PMDs forward traffic that keeps installing flows and rule
// changes keep clearing them (the race detector checks the rest); then,
// with the caches reset, the dumped counters add up to the traffic.
func TestIntrospectionWhileRunning(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{NumPMDs: 2, PMDSleepMax: 20, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 2, 1, 4096), ring.New("out", 0, 2, 1<<14)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	rules.Add(inPortRule(1, 1, 2))
	// Consulted by every translation: a flow per source port.
	never := inPortRule(2, 1)
	never.Match.Key.EthType, never.Match.Mask.EthType = 0x0800, 0xffff
	never.Match.Key.NwProto, never.Match.Mask.NwProto = 17, 0xff
	never.Match.Key.TpSrc, never.Match.Mask.TpSrc = 0xffff, 0xffff
	rules.Add(never)
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			dp.PMDStats()
			dp.Port(2).TxStats()
			dp.RxqStats()
			dp.RxqAssignment()
			for _, f := range dp.DumpFlows() {
				_ = f.String()
			}
		}
	}()
	sent := 0
	drained := 0
	inject := func(n, churn int) {
		for s := 0; s < n; s++ {
			for in.Inject(s%2, udpFrame(1, 2, uint16(s%50), 9, uint32(s))) == 0 {
				drained += out.Discard(0) + out.Discard(1)
				time.Sleep(20 * time.Microsecond)
			}
			sent++
			if churn > 0 && s%churn == 0 {
				dp.InvalidateFlows()
			}
		}
	}
	waitAll := func() {
		deadline := time.Now().Add(20 * time.Second)
		for drained < sent && time.Now().Before(deadline) {
			drained += out.Discard(0) + out.Discard(1)
			time.Sleep(100 * time.Microsecond)
		}
		if drained != sent {
			t.Fatalf("forwarded %d of %d", drained, sent)
		}
	}
	inject(5000, 500)
	waitAll()
	// Every PMD clears its caches before its next batch.
	dp.InvalidateFlows()
	const n = 4000
	sent, drained = 0, 0
	inject(n, 0)
	waitAll()
	stop.Store(true)
	wg.Wait()
	dp.Stop()
	var pkts, bytes uint64
	seen := map[string]bool{}
	for _, f := range dp.DumpFlows() {
		pkts += f.Packets
		bytes += f.Bytes
		k := fmt.Sprint(f.PMD, f.String())
		if seen[k] {
			t.Errorf("flow dumped twice: %s", k)
		}
		seen[k] = true
	}
	if pkts != n || bytes != 60*n {
		t.Fatalf("dumped flows carried %d packets, %d bytes; want %d, %d", pkts, bytes, n, 60*n)
	}
	if len(seen) < 50 {
		t.Fatalf("%d flows for 50 source ports", len(seen))
	}
	checkNoLeaks(t, dp)
}

// TestRxqBusyTime: with a clock that only moves when packets are received
// (by a known cost per packet and queue), each rx queue is charged exactly
// its own packets' time, the queues add up to the PMD's busy time, and the
// clock is read once per iteration unless a queue other than the PMD's last
// one received something.
func TestRxqBusyTime(t *testing.T) {
	clk := &countingClock{fakeClock: fakeClock{ns: 1_000_000}}
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Clock: clk.now, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := &costPort{Port: ring.New("in", 3, 1, 256), clk: &clk.fakeClock, cost: []int64{100, 300, 1000}}
	out := ring.New("out", 0, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	rules.Add(inPortRule(1, 1, 2))
	pmd := dp.PMDs()[0]
	if a := dp.RxqAssignment(); !slices.Equal(a[0], []RxqRef{{1, 0}, {1, 1}, {1, 2}}) {
		t.Fatalf("assignment %v", a)
	}
	frames := func(n int) [][]byte {
		var fs [][]byte
		for i := 0; i < n; i++ {
			fs = append(fs, udpFrame(1, 2, 3, 4, uint32(i)))
		}
		return fs
	}
	in.Inject(0, frames(1)...)
	pmd.PollOnce() // installs the flow
	pmd.PollOnce()
	out.Discard(0)
	want := []uint64{100, 0, 0}
	rounds := []struct {
		n     [3]int
		reads int // clock reads of the busy iteration
	}{
		{[3]int{10, 20, 5}, 3},
		{[3]int{0, 0, 7}, 1}, // only the last queue: no extra read
		{[3]int{32, 0, 0}, 2},
		{[3]int{0, 4, 0}, 2},
	}
	for _, r := range rounds {
		for q, n := range r.n {
			in.Inject(q, frames(n)...)
			want[q] += uint64(n) * uint64(in.cost[q])
		}
		clk.reads = 0
		pmd.PollOnce()
		if clk.reads != r.reads {
			t.Errorf("round %v: %d clock reads, want %d", r.n, clk.reads, r.reads)
		}
		pmd.PollOnce() // idle: closes the last queue's span and publishes
		out.Discard(0)
	}
	st := dp.RxqStats()
	var sum uint64
	for q, s := range st {
		if s.PMD != 0 || s.Port != 1 || s.Queue != q {
			t.Fatalf("rxq stats %d: %+v", q, s)
		}
		if s.BusyNs != want[q] {
			t.Errorf("queue %d: busy %d ns, want %d", q, s.BusyNs, want[q])
		}
		wantPkts := uint64(0)
		for _, r := range rounds {
			wantPkts += uint64(r.n[q])
		}
		if q == 0 {
			wantPkts++
		}
		if s.Packets != wantPkts {
			t.Errorf("queue %d: %d packets, want %d", q, s.Packets, wantPkts)
		}
		sum += s.BusyNs
	}
	if ps := dp.PMDStats()[0]; ps.BusyNs != sum {
		t.Errorf("PMD busy %d ns, queues add up to %d", ps.BusyNs, sum)
	}
}

// TestRebalanceGreedy: four loaded queues on one of two manual PMDs are
// spread heaviest first onto the least loaded PMD; a balanced assignment
// is left alone; the placement survives adding a port and a removed port's
// queues are forgotten.
func TestRebalanceGreedy(t *testing.T) {
	clk := &fakeClock{ns: 1}
	rules := &RuleTable{}
	onFirst := func(rxqs []RxqRef, n int) [][]RxqRef {
		out := make([][]RxqRef, n)
		out[0] = rxqs
		return out
	}
	dp, _ := New(Config{Manual: true, NumPMDs: 2, Clock: clk.now, Upcall: rules, AssignRxqs: onFirst})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	// Queue q costs (q+1) µs per packet: loads 1:2:3:4 for equal traffic.
	in := &costPort{Port: ring.New("in", 4, 1, 256), clk: clk, cost: []int64{1000, 2000, 3000, 4000}}
	out := ring.New("out", 0, 2, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	rules.Add(inPortRule(1, 1, 2))
	traffic := func(perQueue int) {
		for q := 0; q < 4; q++ {
			for i := 0; i < perQueue; i++ {
				in.Inject(q, udpFrame(1, 2, 3, 4, uint32(i)))
			}
		}
		for _, p := range dp.PMDs() {
			p.PollOnce()
			p.PollOnce()
		}
		out.Discard(0)
		out.Discard(1)
	}
	traffic(10)
	moved, err := dp.RebalanceRxqs()
	if err != nil {
		t.Fatal(err)
	}
	// Loads 10, 20, 30, 40 µs: q3 stays on 0 (a tie, and 0 is its own),
	// q2 → 1, q1 → 1 (30 < 40), q0 → 0 (40 < 50).
	want := [][]RxqRef{{{1, 0}, {1, 3}}, {{1, 1}, {1, 2}}}
	if a := dp.RxqAssignment(); moved != 2 || !slices.EqualFunc(a, want, slices.Equal) {
		t.Fatalf("moved %d, assignment %v; want 2, %v", moved, a, want)
	}
	for _, s := range dp.RxqStats() {
		pmd := 0
		if s.Queue == 1 || s.Queue == 2 {
			pmd = 1
		}
		if s.Port != 1 || s.PMD != pmd {
			t.Errorf("rxq stats %+v: want port 1 on PMD %d", s, pmd)
		}
	}
	// Balanced now (50:50): nothing moves.
	traffic(10)
	if moved, err := dp.RebalanceRxqs(); moved != 0 || err != nil {
		t.Fatalf("balanced: moved %d (%v), assignment %v", moved, err, dp.RxqAssignment())
	}
	// No traffic since the last call: nothing to go by.
	if moved, _ := dp.RebalanceRxqs(); moved != 0 {
		t.Fatalf("idle: moved %d", moved)
	}
	// Only queue 3 busy: wherever it goes, the busiest PMD carries it all,
	// so nothing is gained and nothing moves (idle queue 0 stays with it).
	in.Inject(3, udpFrame(1, 2, 3, 4, 0))
	traffic(0)
	if moved, _ := dp.RebalanceRxqs(); moved != 0 {
		t.Fatalf("one busy queue: moved %d", moved)
	}
	// A new port's queues go where AssignRxqs says; the placed ones stay.
	dp.AddPort(3, ring.New("extra", 1, 1, 16))
	want[0] = append(want[0], RxqRef{3, 0})
	if a := dp.RxqAssignment(); !slices.EqualFunc(a, want, slices.Equal) {
		t.Fatalf("after adding a port: %v, want %v", a, want)
	}
	// Removing and re-adding port 1 forgets its placement.
	dp.RemovePort(1)
	dp.AddPort(1, ring.New("in-again", 2, 1, 16))
	want = [][]RxqRef{{{1, 0}, {1, 1}, {3, 0}}, nil}
	if a := dp.RxqAssignment(); !slices.EqualFunc(a, want, slices.Equal) {
		t.Fatalf("after re-adding port 1: %v, want %v", a, want)
	}
	checkNoLeaks(t, dp)
}

// TestRebalanceWhileRunning: two busy rx queues put on the same PMD are
// spread over both PMDs by a rebalance made while the PMDs forward them,
// and every packet comes out exactly once, in order per input and PMD.
func TestRebalanceWhileRunning(t *testing.T) {
	rules := &RuleTable{}
	onFirst := func(rxqs []RxqRef, n int) [][]RxqRef {
		out := make([][]RxqRef, n)
		for _, r := range rxqs {
			if r.Port == 3 {
				out[n-1] = append(out[n-1], r) // the idle one
			} else {
				out[0] = append(out[0], r)
			}
		}
		return out
	}
	dp, err := New(Config{NumPMDs: 2, PMDSleepMax: 0, Upcall: rules, AssignRxqs: onFirst})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in1, in2, idle := ring.New("in1", 1, 1, 2048), ring.New("in2", 1, 1, 2048), ring.New("idle", 1, 1, 16)
	out := ring.New("out", 0, 2, 1<<14)
	dp.AddPort(1, in1)
	dp.AddPort(2, in2)
	dp.AddPort(3, idle)
	dp.AddPort(4, out)
	rules.Add(inPortRule(1, 1, 4))
	rules.Add(inPortRule(1, 2, 4))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	const n = 30000 // per input
	// At most window packets in flight, so that the output rings (drained
	// by this goroutine, which a loaded machine may not run for a while)
	// cannot overflow: a drop there would look like a loss.
	const window = 4096
	var injected [2]atomic.Int64
	var drained atomic.Int64
	var wg, firstThird sync.WaitGroup
	resume := make(chan struct{})
	for i, p := range []*ring.Port{in1, in2} {
		wg.Add(1)
		firstThird.Add(1)
		go func() {
			defer wg.Done()
			for s := 0; s < n; s++ {
				if s == n/3 {
					// Both inputs keep going after the rebalance,
					// whatever the scheduler does.
					firstThird.Done()
					<-resume
				}
				for injected[0].Load()+injected[1].Load()-drained.Load() >= window {
					time.Sleep(20 * time.Microsecond)
				}
				for p.Inject(0, udpFrame(uint32(i+1), 2, 5, 9, uint32(i*n+s))) == 0 {
					time.Sleep(20 * time.Microsecond)
				}
				injected[i].Add(1)
			}
		}()
	}
	seen := make([]bool, 2*n)
	last := [2][2]int{{-1, -1}, {-1, -1}} // [txq][input]
	count := 0
	drain := func() {
		for q := 0; q < 2; q++ {
			out.Drain(q, func(f []byte) {
				s := int(frameSeq(f))
				if seen[s] {
					t.Errorf("packet %d twice", s)
				}
				seen[s] = true
				if s <= last[q][s/n] {
					t.Errorf("packet %d after %d on txq %d", s, last[q][s/n], q)
				}
				last[q][s/n] = s
				count++
			})
		}
		drained.Store(int64(count))
	}
	// Let both queues carry traffic on PMD 0, then rebalance mid-stream:
	// the inputs resume as the rebalance starts.
	waited := make(chan struct{})
	go func() { firstThird.Wait(); close(waited) }()
	for done := false; !done; {
		select {
		case <-waited:
			done = true
		default:
			drain()
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(resume)
	if a := dp.RxqAssignment(); len(a[0]) != 2 {
		t.Fatalf("initial assignment %v", a)
	}
	moved, err := dp.RebalanceRxqs()
	if err != nil || moved != 1 {
		t.Fatalf("rebalance moved %d (%v), assignment %v, rxq stats %+v", moved, err, dp.RxqAssignment(), dp.RxqStats())
	}
	a := dp.RxqAssignment()
	busyOn := [2]int{}
	for pmd, rs := range a {
		for _, r := range rs {
			if r.Port != 3 {
				busyOn[pmd]++
			}
		}
	}
	if busyOn != [2]int{1, 1} || !slices.Contains(a[1], RxqRef{3, 0}) {
		t.Fatalf("after rebalance: %v", a)
	}
	deadline := time.Now().Add(30 * time.Second)
	for count < 2*n && time.Now().Before(deadline) {
		drain()
		time.Sleep(100 * time.Microsecond)
	}
	wg.Wait()
	drain()
	if count != 2*n {
		t.Fatalf("received %d of %d; PMD stats %+v", count, 2*n, dp.PMDStats())
	}
	dp.Stop()
	tx := dp.Port(4).TxStats()
	if tx[1].Packets == 0 {
		t.Fatalf("PMD 1 sent nothing after the rebalance: %+v", tx)
	}
	var rx uint64
	for _, s := range dp.RxqStats() {
		rx += s.Packets
	}
	if rx != 2*n {
		t.Fatalf("rx queues counted %d packets, want %d", rx, 2*n)
	}
	checkNoLeaks(t, dp)
}

func TestWithoutMoves(t *testing.T) {
	a, b, c, d := RxqRef{1, 0}, RxqRef{1, 1}, RxqRef{2, 0}, RxqRef{3, 0}
	old := [][]RxqRef{{a, b}, {c}}
	next := [][]RxqRef{{a, c}, {b, d}}
	got, moves := withoutMoves(old, next)
	if !moves || !slices.EqualFunc(got, [][]RxqRef{{a}, {d}}, slices.Equal) {
		t.Fatalf("got %v, %v", got, moves)
	}
	if _, moves := withoutMoves(old, [][]RxqRef{{a}, {c, d}}); moves {
		t.Fatal("a removal and an addition counted as moves")
	}
}

// TestSetPMDSleepMax: the setting is checked and reaches running PMDs.
func TestSetPMDSleepMax(t *testing.T) {
	dp, _ := New(Config{NumPMDs: 2, PMDSleepMax: 5000})
	defer dp.Close()
	dp.AddPort(1, ring.New("r", 1, 1, 16))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int{-1, MaxPMDSleepMax + 1} {
		if err := dp.SetPMDSleepMax(bad); err == nil {
			t.Errorf("pmd-sleep-max %d accepted", bad)
		}
	}
	for _, us := range []int{0, 250, MaxPMDSleepMax} {
		if err := dp.SetPMDSleepMax(us); err != nil {
			t.Fatal(err)
		}
		if dp.PMDSleepMax() != us {
			t.Fatalf("PMDSleepMax() = %d, want %d", dp.PMDSleepMax(), us)
		}
		// SetPMDSleepMax returns once every PMD runs the new plan.
		for _, p := range dp.PMDs() {
			pl := p.plan.Load()
			if pl.sleepMaxNs != int64(us)*1000 || p.applied.Load() != pl.seq {
				t.Fatalf("PMD %d: plan sleep %d ns (applied %d of %d), want %d µs", p.ID(), pl.sleepMaxNs, p.applied.Load(), pl.seq, us)
			}
		}
	}
	dp.Stop()
	checkNoLeaks(t, dp)
}

// TestBatchSizeHistogram: batches of known sizes land in their buckets,
// and every batch in exactly one.
func TestBatchSizeHistogram(t *testing.T) {
	if BatchSizeBounds[len(BatchSizeBounds)-1] != packet.BatchSize {
		t.Fatalf("histogram ends at %d, batches at %d", BatchSizeBounds[len(BatchSizeBounds)-1], packet.BatchSize)
	}
	for n := 1; n <= packet.BatchSize; n++ {
		b := batchSizeBucket(n)
		if n > BatchSizeBounds[b] || (b > 0 && n <= BatchSizeBounds[b-1]) {
			t.Errorf("a batch of %d goes to bucket %d (bound %d)", n, b, BatchSizeBounds[b])
		}
	}
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 256), ring.New("out", 0, 1, 256)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	rules.Add(inPortRule(1, 1, 2))
	pmd := dp.PMDs()[0]
	in.Inject(0, udpFrame(1, 2, 3, 4, 0))
	pmd.PollOnce() // the upcall's batch of 1
	out.Discard(0)
	var want [len(BatchSizeBounds)]uint64
	want[0] = 1
	for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 32, 2, 1} {
		var fs [][]byte
		for i := 0; i < n; i++ {
			fs = append(fs, udpFrame(1, 2, 3, 4, uint32(i)))
		}
		in.Inject(0, fs...)
		pmd.PollOnce()
		if got := out.Discard(0); got != n {
			t.Fatalf("sent %d of %d", got, n)
		}
		want[batchSizeBucket(n)]++
	}
	// Two rounds of 40 in one burst with 8 queued first: a batch of 32 is
	// sent as the 33rd packet arrives.
	for i := 0; i < 48; i++ {
		in.Inject(0, udpFrame(1, 2, 3, 4, uint32(i)))
	}
	pmd.PollOnce() // 32: one batch of 32
	pmd.PollOnce() // 16
	want[5]++
	want[4]++
	out.Discard(0)
	st := dp.Port(2).TxStats()[0]
	if st.BatchSizes != want {
		t.Fatalf("histogram %v, want %v (bounds %v)", st.BatchSizes, want, BatchSizeBounds)
	}
	var sum uint64
	for _, c := range st.BatchSizes {
		sum += c
	}
	if sum != st.Batches {
		t.Fatalf("histogram holds %d batches, Batches says %d", sum, st.Batches)
	}
	// Want, spelled out, for the sizes above: 1,1,1 | 2,2 | 3,4 | 5,8 | 9,16,16 | 17,31,32,32.
	if want != [6]uint64{3, 2, 2, 2, 3, 4} {
		t.Fatalf("test arithmetic: %v", want)
	}
}

// armingPort is a ring port with an rx descriptor that asks to be armed
// (netdev.RxArmer), counting the requests.
type armingPort struct {
	*ring.Port
	fd   int // the read end of a pipe nothing writes to
	arms atomic.Int64
}

func (a *armingPort) RxFD(int) int { return a.fd }
func (a *armingPort) ArmRx(int) bool {
	a.arms.Add(1)
	return false
}

// TestArmOnlyBeforeSleep: a sleeping PMD arms its rx queues before each
// sleep; a busy-polling one never does (its guests would kick for nothing).
func TestArmOnlyBeforeSleep(t *testing.T) {
	for _, sleepUs := range []int{0, 100} {
		fd, err := newWakeFD() // a descriptor nothing makes readable
		if err != nil {
			t.Fatal(err)
		}
		port := &armingPort{Port: ring.New("a", 1, 1, 16), fd: fd}
		dp, _ := New(Config{NumPMDs: 1, PMDSleepMax: sleepUs})
		dp.AddPort(1, port)
		if err := dp.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		dp.Close()
		closeWakeFD(fd)
		arms := port.arms.Load()
		if sleepUs == 0 && arms != 0 {
			t.Errorf("a busy-polling PMD armed its queue %d times", arms)
		}
		if sleepUs > 0 && arms == 0 {
			t.Errorf("a PMD with pmd-sleep-max %d µs slept without arming its queue", sleepUs)
		}
	}
}

// TestRxqAffinity: queues pinned to a CPU go to the PMD on it, which then
// polls nothing else (unless every PMD has pinned queues); rebalancing
// moves neither; bad CPUs and queues are refused without a change; a
// removed port's affinity is forgotten; an empty map clears it.
func TestRxqAffinity(t *testing.T) {
	clk := &fakeClock{ns: 1}
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, NumPMDs: 3, CPUs: []int{4, 5, 6}, Clock: clk.now, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := &costPort{Port: ring.New("in", 4, 1, 256), clk: clk, cost: []int64{1000, 2000, 3000, 4000}}
	dp.AddPort(1, in)
	dp.AddPort(2, ring.New("b", 2, 3, 256))
	rules.Add(inPortRule(1, 1, 2))
	if err := dp.SetRxqAffinity(1, map[int]int{3: 5}); err != nil {
		t.Fatal(err)
	}
	// PMD 1 (CPU 5) has queue 1/3 only; the five other queues round-robin
	// over PMDs 0 and 2.
	want := [][]RxqRef{{{1, 0}, {1, 2}, {2, 1}}, {{1, 3}}, {{1, 1}, {2, 0}}}
	if a := dp.RxqAssignment(); !slices.EqualFunc(a, want, slices.Equal) {
		t.Fatalf("assignment %v, want %v", a, want)
	}
	for _, bad := range []map[int]int{{0: 7}, {9: 4}, {-1: 4}} {
		if err := dp.SetRxqAffinity(1, bad); err == nil {
			t.Errorf("affinity %v accepted", bad)
		}
	}
	if err := dp.SetRxqAffinity(9, map[int]int{0: 4}); err == nil {
		t.Error("affinity for a missing port accepted")
	}
	if a := dp.RxqAssignment(); !slices.EqualFunc(a, want, slices.Equal) {
		t.Fatalf("a refused affinity changed the assignment: %v", a)
	}
	if got := dp.RxqAffinity(1); len(got) != 1 || got[3] != 5 {
		t.Fatalf("RxqAffinity(1) = %v", got)
	}

	// Traffic on every queue of port 1, then a rebalance: queue 3 stays on
	// PMD 1 and nothing else moves there.
	for q := 0; q < 4; q++ {
		for i := 0; i < 10; i++ {
			in.Inject(q, udpFrame(1, 2, 3, 4, uint32(i)))
		}
	}
	for _, p := range dp.PMDs() {
		p.PollOnce()
		p.PollOnce()
	}
	if _, err := dp.RebalanceRxqs(); err != nil {
		t.Fatal(err)
	}
	if a := dp.RxqAssignment(); !slices.Equal(a[1], []RxqRef{{1, 3}}) {
		t.Fatalf("after rebalance PMD 1 polls %v, want only 1/3", a[1])
	}

	// Every PMD isolated: unpinned queues are still polled, by all.
	if err := dp.SetRxqAffinity(2, map[int]int{0: 4, 1: 6}); err != nil {
		t.Fatal(err)
	}
	polled := 0
	for _, rs := range dp.RxqAssignment() {
		polled += len(rs)
	}
	if polled != 6 {
		t.Fatalf("with every PMD isolated %d of 6 queues polled: %v", polled, dp.RxqAssignment())
	}

	// Clearing and removing.
	if err := dp.SetRxqAffinity(1, nil); err != nil {
		t.Fatal(err)
	}
	if got := dp.RxqAffinity(1); len(got) != 0 {
		t.Fatalf("after clearing: %v", got)
	}
	dp.RemovePort(2)
	dp.AddPort(2, ring.New("b2", 2, 3, 256))
	if got := dp.RxqAffinity(2); len(got) != 0 {
		t.Fatalf("a re-added port kept its affinity: %v", got)
	}
	checkNoLeaks(t, dp)
}

package datapath

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/netdev/null"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

func TestSharedStatePadding(t *testing.T) {
	if s := unsafe.Sizeof(TxqLock{}); s != CacheLine {
		t.Errorf("TxqLock is %d bytes, want %d", s, CacheLine)
	}
	dp, _ := New(Config{Manual: true})
	defer dp.Close()
	p, _ := dp.AddPort(1, ring.New("r", 1, 4, 8))
	for i := 0; i < p.txqLocks.len(); i++ {
		if a := uintptr(unsafe.Pointer(p.txqLocks.at(i))) % CacheLine; a != 0 {
			t.Errorf("txq lock %d is %d bytes off a cache line", i, a)
		}
	}
	for _, packed := range []bool{false, true} {
		pc := newSharedSlab[pmdCounters](3, packed)
		tc := newSharedSlab[txCounters](3, packed)
		for i := 0; i < 3; i++ {
			a, b := uintptr(unsafe.Pointer(pc.at(i))), uintptr(unsafe.Pointer(tc.at(i)))
			if !packed && (a%CacheLine != 0 || b%CacheLine != 0) {
				t.Errorf("padded block %d not on a cache line: %#x %#x", i, a, b)
			}
			if i > 0 {
				prev := uintptr(unsafe.Pointer(tc.at(i - 1)))
				sameLine := prev/CacheLine == (b+unsafe.Sizeof(txCounters{})-1)/CacheLine
				if !packed && sameLine {
					t.Errorf("padded tx counters %d and %d share a cache line", i-1, i)
				}
				if packed && !sameLine && i == 1 {
					t.Errorf("packed tx counters 0 and 1 should share a line (the benchmark relies on it)")
				}
			}
			// The last block must lie inside the slab.
			end := uintptr(unsafe.Pointer(pc.at(i))) + unsafe.Sizeof(pmdCounters{})
			if end > uintptr(unsafe.Pointer(&pc.mem[0]))+uintptr(len(pc.mem))*8 {
				t.Errorf("block %d overruns its slab", i)
			}
		}
	}
}

func TestTxqMap(t *testing.T) {
	cases := []struct {
		pmd, npmd, ntxq, txq int
		shared               bool
	}{
		{0, 1, 1, 0, false}, {1, 2, 4, 1, false}, {1, 2, 2, 1, false},
		{0, 2, 1, 0, true}, {1, 2, 1, 0, true}, {2, 3, 2, 0, true},
	}
	for _, c := range cases {
		q, sh := txqMap(c.pmd, c.npmd, c.ntxq)
		if q != c.txq || sh != c.shared {
			t.Errorf("txqMap(%d,%d,%d) = %d,%v want %d,%v", c.pmd, c.npmd, c.ntxq, q, sh, c.txq, c.shared)
		}
	}
}

// TestInvalidation: once a rule change has returned, no packet received
// afterwards is forwarded by a megaflow of the old rules — with real PMD
// goroutines polling.
func TestInvalidation(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{NumPMDs: 2, PMDSleepMax: 0, Upcall: rules, EMCInsertInvProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 2, 2, 1024)
	outA := ring.New("a", 1, 2, 1<<16)
	outB := ring.New("b", 1, 2, 1<<16)
	for no, d := range map[uint32]*ring.Port{1: in, 2: outA, 3: outB} {
		if _, err := dp.AddPort(no, d); err != nil {
			t.Fatal(err)
		}
	}
	rules.Add(inPortRule(10, 1, 2))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	seq := uint32(0)
	inject := func(n int) {
		for i := 0; i < n; i++ {
			seq++
			f := udpFrame(1, 2, uint16(seq%64), 9, seq)
			for in.Inject(int(seq%2), f) == 0 {
				time.Sleep(time.Microsecond)
			}
		}
	}
	drained := func(p *ring.Port) []uint32 {
		var s []uint32
		for q := 0; q < p.NumTxQueues(); q++ {
			p.Drain(q, func(f []byte) { s = append(s, frameSeq(f)) })
		}
		return s
	}
	for round := 0; round < 20; round++ {
		target, other := outA, outB
		if round%2 == 1 {
			target, other = outB, outA
		}
		targetNo := uint32(2 + round%2)
		rules.Clear()
		rules.Add(inPortRule(10, 1, targetNo))
		start := seq + 1
		inject(500)
		deadline := time.Now().Add(5 * time.Second)
		got := 0
		for got < 500 && time.Now().Before(deadline) {
			for _, s := range drained(other) {
				if s >= start {
					t.Fatalf("round %d: packet %d injected after the rule change left by the old rule", round, s)
				}
			}
			for _, s := range drained(target) {
				if s >= start {
					got++
				}
			}
			time.Sleep(100 * time.Microsecond)
		}
		if got != 500 {
			t.Fatalf("round %d: %d of 500 packets arrived", round, got)
		}
	}
	dp.Stop()
	checkNoLeaks(t, dp)
}

// TestSharedTxqConcurrent: two PMDs forward into one port with a single tx
// queue (shared under its lock); nothing is lost or duplicated. Run under
// -race by make test.
func TestSharedTxqConcurrent(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{NumPMDs: 2, PMDSleepMax: 0, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in1, in2 := ring.New("in1", 1, 1, 4096), ring.New("in2", 1, 1, 4096)
	out := ring.New("out", 1, 1, 1<<17)
	dp.AddPort(1, in1)
	dp.AddPort(2, in2)
	dp.AddPort(3, out)
	rules.Add(inPortRule(1, 1, 3))
	rules.Add(inPortRule(1, 2, 3))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	const n = 20000
	var wg sync.WaitGroup
	for i, p := range []*ring.Port{in1, in2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := 0; s < n; s++ {
				f := udpFrame(1, 2, 5, 9, uint32(i*n+s))
				for p.Inject(0, f) == 0 {
					time.Sleep(10 * time.Microsecond)
				}
			}
		}()
	}
	seen := make([]bool, 2*n)
	last := [2]int{-1, -1}
	count := 0
	deadline := time.Now().Add(20 * time.Second)
	for count < 2*n && time.Now().Before(deadline) {
		out.Drain(0, func(f []byte) {
			s := int(frameSeq(f))
			if seen[s] {
				t.Errorf("packet %d twice", s)
			}
			seen[s] = true
			src := s / n
			if s <= last[src] {
				t.Errorf("packet %d after %d from the same input", s, last[src])
			}
			last[src] = s
			count++
		})
		time.Sleep(50 * time.Microsecond)
	}
	wg.Wait()
	if count != 2*n {
		t.Fatalf("received %d of %d", count, 2*n)
	}
	pst := dp.Port(3).TxStats()
	if pst[0].Packets == 0 || pst[1].Packets == 0 {
		t.Fatalf("both PMDs should have sent on the shared txq: %+v", pst)
	}
	if pst[0].Packets+pst[1].Packets != 2*n {
		t.Fatalf("tx stats %+v do not add up to %d", pst, 2*n)
	}
	dp.Stop()
	checkNoLeaks(t, dp)
}

// TestPortChurnWhileRunning adds and removes ports while PMDs forward
// traffic; the remaining ports keep forwarding and no buffer leaks.
func TestPortChurnWhileRunning(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{NumPMDs: 2, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 2, 2, 4096), ring.New("out", 1, 2, 1<<16)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	// Everything from port 1 floods to 2 and to the churning ports 10..13.
	rules.Add(inPortRule(1, 1, 2, 10, 11, 12, 13))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var injected atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for s := uint32(0); !stop.Load(); s++ {
			if in.Inject(int(s%2), udpFrame(1, 2, uint16(s), 9, s)) == 1 {
				injected.Add(1)
			} else {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}()
	var churned []*ring.Port
	for i := 0; i < 40; i++ {
		out.Discard(0)
		out.Discard(1)
		no := uint32(10 + i%4)
		if dp.Port(no) != nil {
			if err := dp.RemovePort(no); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := ring.New(fmt.Sprintf("churn%d", i), 1, 1, 256)
		if _, err := dp.AddPort(no, p); err != nil {
			t.Fatal(err)
		}
		churned = append(churned, p)
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	// Every injected packet is received and forwarded to port 2.
	got := 0
	deadline := time.Now().Add(10 * time.Second)
	for in.Pending(0)+in.Pending(1) > 0 && time.Now().Before(deadline) {
		out.Discard(0)
		out.Discard(1)
		time.Sleep(time.Millisecond)
	}
	dp.Stop()
	st := out.Stats()
	got = int(st.TxPackets)
	if int64(got) != injected.Load() {
		t.Fatalf("port 2 sent %d packets of %d injected", got, injected.Load())
	}
	removed := 0
	for _, p := range churned {
		if p.Closed() {
			removed++
		}
	}
	if removed != 20 {
		t.Fatalf("%d churned ports closed, want 20", removed)
	}
	checkNoLeaks(t, dp)
}

// TestForwardingMatchesRuleTable: random rule sets and packets; what the
// datapath does (through EMC, megaflows and upcalls) equals a brute-force
// evaluation of the rules, with the EMC on and off.
func TestForwardingMatchesRuleTable(t *testing.T) {
	for _, emc := range []int{1, -1} {
		t.Run(fmt.Sprintf("emc-inv-prob=%d", emc), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(42, uint64(emc)))
			for trial := 0; trial < 5; trial++ {
				rules := &RuleTable{}
				dp, _ := New(Config{Manual: true, Upcall: rules, EMCInsertInvProb: max(emc, 0), EMCOff: emc < 0})
				rules.Invalidate = dp.InvalidateFlows
				var outs []*ring.Port
				for no := uint32(1); no <= 5; no++ {
					p := ring.New(fmt.Sprintf("p%d", no), 1, 1, 1024)
					dp.AddPort(no, p)
					outs = append(outs, p)
				}
				for i := 0; i < 30; i++ {
					r := Rule{Priority: rng.IntN(10)}
					if rng.IntN(2) == 0 {
						r.Match.Key.InPort, r.Match.Mask.InPort = uint32(1+rng.IntN(2)), ^uint32(0)
					}
					if rng.IntN(2) == 0 {
						bits := rng.IntN(33)
						m := ^uint32(0) << (32 - bits)
						if bits == 0 {
							m = 0
						}
						r.Match.Key.IPv4Dst, r.Match.Mask.IPv4Dst = rng.Uint32()&0xff, m&0xff|0xffffff00&m
					}
					if rng.IntN(2) == 0 {
						r.Match.Key.TpSrc, r.Match.Mask.TpSrc = uint16(rng.IntN(8)), uint16(rng.IntN(8))
					}
					r.Match.Key.EthType, r.Match.Mask.EthType = 0x0800, 0xffff
					r.Actions = actions.List{actions.OutputTo(uint32(3 + rng.IntN(3)))}
					rules.Add(r)
				}
				pmd := dp.PMDs()[0]
				for i := 0; i < 2000; i++ {
					in := uint32(1 + rng.IntN(2))
					f := udpFrame(1, rng.Uint32()&0xff, uint16(rng.IntN(8)), 9, uint32(i))
					want := rules.Lookup(ptr(keyOf(f, in)))
					outs[in-1].Inject(0, f)
					pmd.PollOnce()
					var got []uint32
					for no := uint32(3); no <= 5; no++ {
						outs[no-1].Drain(0, func(b []byte) {
							if frameSeq(b) == uint32(i) {
								got = append(got, no)
							}
						})
					}
					switch {
					case want == nil && len(got) != 0:
						t.Fatalf("trial %d packet %d: no rule matches but it left on %v", trial, i, got)
					case want != nil && (len(got) != 1 || got[0] != want.Actions[0].Port):
						t.Fatalf("trial %d packet %d: rule says port %d, datapath sent to %v", trial, i, want.Actions[0].Port, got)
					}
				}
				if emc < 0 && pmd.emc.Len() != 0 {
					t.Fatalf("EMC off but it holds %d entries", pmd.emc.Len())
				}
				st := dp.PMDStats()[0]
				if st.Misses == 0 || st.MegaflowHits == 0 || (emc == 1 && st.EMCHits == 0) {
					t.Fatalf("every cache layer should have been used: %+v", st)
				}
				dp.Close()
				checkNoLeaks(t, dp)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestActionsAndDrops covers multi-output (copies), rewrite then output,
// to-controller with overflow, output to a missing port and the drop
// counters by cause.
func TestActionsAndDrops(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules, ControllerQueueDepth: 4})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	var ps []*ring.Port
	for no := uint32(1); no <= 4; no++ {
		p := ring.New(fmt.Sprintf("p%d", no), 1, 1, 1024)
		dp.AddPort(no, p)
		ps = append(ps, p)
	}
	mac := [16]byte{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}
	r := inPortRule(1, 1, 2)
	r.Actions = append(r.Actions,
		actions.Action{Kind: actions.SetEthDst, Addr: mac},
		actions.OutputTo(3),
		actions.ControllerAction(7, 0xc0ffee, 0x42),
		actions.OutputTo(99))
	rules.Add(r)
	pmd := dp.PMDs()[0]
	for i := 0; i < 10; i++ {
		ps[0].Inject(0, udpFrame(1, 2, 1, 9, uint32(i)))
	}
	pmd.PollOnce()
	pmd.PollOnce()
	var p2, p3 [][]byte
	ps[1].Drain(0, func(f []byte) { p2 = append(p2, append([]byte(nil), f...)) })
	ps[2].Drain(0, func(f []byte) { p3 = append(p3, append([]byte(nil), f...)) })
	if len(p2) != 10 || len(p3) != 10 {
		t.Fatalf("port 2 got %d, port 3 got %d, want 10 each", len(p2), len(p3))
	}
	if [6]byte(p2[0][:6]) == [6]byte(mac[:6]) {
		t.Fatal("the copy output before set-field was rewritten")
	}
	if [6]byte(p3[0][:6]) != [6]byte(mac[:6]) {
		t.Fatalf("port 3 dst %x, want %x", p3[0][:6], mac[:6])
	}
	q := dp.ControllerQueue()
	select {
	case <-q.Ready():
	default:
		t.Fatal("controller queue not signalled after packets were queued")
	}
	for i := 0; i < 4; i++ {
		cp, ok := q.Pop()
		if !ok || cp.InPort != 1 || cp.Arg != 7 || cp.Cookie != 0xc0ffee || cp.Metadata != 0x42 || frameSeq(cp.Data) != uint32(i) {
			t.Fatalf("controller packet %d: %+v %v", i, cp, ok)
		}
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("controller queue deeper than configured")
	}
	st := dp.PMDStats()[0]
	if q.Overflows() != 6 || st.Drops[DropController] != 6 {
		t.Fatalf("controller overflows %d / %d, want 6", q.Overflows(), st.Drops[DropController])
	}
	if st.Drops[DropNoPort] != 10 {
		t.Fatalf("no-port drops %d, want 10", st.Drops[DropNoPort])
	}
	// A link that is down drops at flush, counted.
	ps[1].SetLinkUp(false)
	ps[0].Inject(0, udpFrame(1, 2, 1, 9, 100))
	pmd.PollOnce()
	pmd.PollOnce()
	if d := dp.PMDStats()[0].Drops[DropPortDown]; d != 1 {
		t.Fatalf("port-down drops %d, want 1", d)
	}
	checkNoLeaks(t, dp)
}

// TestMalformedCountedNotFatal: garbage and truncated frames are counted
// and classified (here: dropped by a miss with no rule), never crash.
func TestMalformedCountedNotFatal(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	in := ring.New("in", 1, 1, 1024)
	dp.AddPort(1, in)
	rng := rand.New(rand.NewPCG(1, 2))
	good := udpFrame(1, 2, 3, 4, 5)
	for i := 0; i < 500; i++ {
		var f []byte
		switch i % 3 {
		case 0:
			f = good[:rng.IntN(len(good))]
		case 1:
			f = make([]byte, rng.IntN(200))
			for j := range f {
				f[j] = byte(rng.Uint32())
			}
		default:
			f = append([]byte(nil), good...)
			f[14] = 0x41 // IHL 1
		}
		in.Inject(0, f)
		dp.PMDs()[0].PollOnce()
	}
	dp.PMDs()[0].PollOnce() // an idle iteration publishes the counters
	st := dp.PMDStats()[0]
	if st.RxPackets != 500 || st.Malformed < 300 {
		t.Fatalf("stats %+v: want 500 received, most counted malformed", st)
	}
	if st.Drops[DropNoFlow] != 0 {
		t.Fatalf("a rule table miss is a drop action, not a lost upcall: %+v", st)
	}
	checkNoLeaks(t, dp)
}

// TestExecutePacketOut: a packet-out runs on a PMD and is flushed at once,
// even with a long tx-flush-interval.
func TestExecutePacketOut(t *testing.T) {
	dp, _ := New(Config{Manual: true, TxFlushInterval: 1000})
	defer dp.Close()
	out := ring.New("out", 1, 1, 64)
	dp.AddPort(1, out)
	f := udpFrame(1, 2, 3, 4, 77)
	if err := dp.Execute(f, 0, actions.List{actions.OutputTo(1), actions.OutputTo(1)}); err != nil {
		t.Fatal(err)
	}
	dp.PMDs()[0].PollOnce()
	n := out.Drain(0, func(b []byte) {
		if frameSeq(b) != 77 {
			t.Errorf("got packet %d", frameSeq(b))
		}
	})
	if n != 2 {
		t.Fatalf("packet-out produced %d packets, want 2", n)
	}
	if err := dp.Execute(make([]byte, 5000), 0, nil); err == nil {
		t.Fatal("oversized packet-out accepted")
	}
	checkNoLeaks(t, dp)
}

// megaflowRig is a manual datapath of cfg with ring ports 1 (in) and 2
// (out) and a rule from 1 to 2 under a higher-priority rule on the source
// port that never matches: every translation consults it, so each source
// port makes a megaflow of its own, and no packet takes the path of a
// flow on the port alone (which skips the caches).
func megaflowRig(t *testing.T, cfg Config) (*Datapath, *ring.Port, *ring.Port) {
	t.Helper()
	rules := &RuleTable{}
	cfg.Manual, cfg.Upcall = true, rules
	dp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 1024), ring.New("out", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	rules.Add(inPortRule(1, 1, 2))
	never := inPortRule(2, 1)
	never.Match.Key.TpSrc, never.Match.Mask.TpSrc = 0xffff, 0xffff
	rules.Add(never)
	return dp, in, out
}

// TestFlowLimit: beyond the per-PMD flow limit packets are still forwarded
// but nothing more is installed.
func TestFlowLimit(t *testing.T) {
	dp, in, out := megaflowRig(t, Config{FlowLimit: 10})
	for i := 0; i < 20; i++ {
		in.Inject(0, udpFrame(1, 2, uint16(i), 9, uint32(i)))
	}
	dp.PMDs()[0].PollOnce()
	dp.PMDs()[0].PollOnce()
	if n := out.Discard(0); n != 20 {
		t.Fatalf("forwarded %d of 20", n)
	}
	if dp.FlowCount() != 10 || dp.PMDStats()[0].FlowsLimited != 10 {
		t.Fatalf("flows %d limited %d, want 10 and 10", dp.FlowCount(), dp.PMDStats()[0].FlowsLimited)
	}
	// Each installed megaflow counted the one packet that installed it.
	var pkts, bytes uint64
	dp.PMDs()[0].flows.Range(func(_ *flow.Match, f *Megaflow) bool {
		p, b := f.Stats()
		pkts, bytes = pkts+p, bytes+b
		return true
	})
	if pkts != 10 || bytes != 10*60 {
		t.Fatalf("megaflow stats %d packets %d bytes, want 10 and 600", pkts, bytes)
	}
	// Raised in place, it lets the PMD install up to the new limit.
	dp.SetFlowLimit(15)
	for i := 20; i < 40; i++ {
		in.Inject(0, udpFrame(1, 2, uint16(i), 9, uint32(i)))
	}
	dp.PMDs()[0].PollOnce()
	dp.PMDs()[0].PollOnce()
	if n := out.Discard(0); n != 20 {
		t.Fatalf("forwarded %d of 20", n)
	}
	if dp.FlowCount() != 15 || dp.FlowLimit() != 15 {
		t.Fatalf("flows %d limit %d, want 15 and 15", dp.FlowCount(), dp.FlowLimit())
	}
}

// TestEMCInsertInvProbInPlace: emc-insert-inv-prob changes in the running
// PMDs; 0 turns the EMC off and empties it.
func TestEMCInsertInvProbInPlace(t *testing.T) {
	dp, in, out := megaflowRig(t, Config{EMCInsertInvProb: 1})
	pmd := dp.PMDs()[0]
	emcHitsAfter := func(n int) uint64 {
		t.Helper()
		before := dp.PMDStats()[0].EMCHits
		for range n {
			in.Inject(0, udpFrame(1, 2, 3, 4, 5))
			pmd.PollOnce()
		}
		pmd.PollOnce() // idle: publishes the counters
		if got := out.Discard(0); got != n {
			t.Fatalf("forwarded %d of %d", got, n)
		}
		return dp.PMDStats()[0].EMCHits - before
	}
	if hits := emcHitsAfter(4); hits == 0 {
		t.Fatal("emc-insert-inv-prob=1: no EMC hit in 4 packets of one flow")
	}
	if err := dp.SetEMCInsertInvProb(0); err != nil {
		t.Fatal(err)
	}
	if hits := emcHitsAfter(4); hits != 0 || dp.EMCInsertInvProb() != 0 {
		t.Fatalf("emc-insert-inv-prob=0: %d EMC hits, setting %d; want the EMC empty and off", hits, dp.EMCInsertInvProb())
	}
	if err := dp.SetEMCInsertInvProb(1); err != nil {
		t.Fatal(err)
	}
	if hits := emcHitsAfter(4); hits == 0 {
		t.Fatal("back to 1: no EMC hit in 4 packets of one flow")
	}
	if err := dp.SetEMCInsertInvProb(-1); err == nil {
		t.Fatal("a negative emc-insert-inv-prob accepted")
	}
}

// TestStartStopLeakFree runs real PMD goroutines over null ports (endless
// traffic), stops and restarts them, and checks buffers and counters.
func TestStartStopLeakFree(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{NumPMDs: 2, PMDSleepMax: 0, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	src := null.New("src", 2, 2, [][]byte{udpFrame(1, 2, 3, 4, 5), udpFrame(1, 2, 4, 4, 6)})
	dst := null.New("dst", 0, 2, nil)
	dp.AddPort(1, src)
	dp.AddPort(2, dst)
	rules.Add(inPortRule(1, 1, 2))
	for round := 0; round < 3; round++ {
		if err := dp.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		dp.Stop()
		checkNoLeaks(t, dp)
	}
	var rx, hits uint64
	for _, s := range dp.PMDStats() {
		rx += s.RxPackets
		hits += s.EMCHits + s.MegaflowHits + s.SimpleMatchHits
		if s.Iterations == 0 || s.BusyNs == 0 {
			t.Errorf("PMD %d: %+v", s.PMD, s)
		}
	}
	if tx := dst.Stats().TxPackets; rx == 0 || tx != rx {
		t.Fatalf("received %d, sent %d", rx, tx)
	}
	if hits+2 < rx-uint64(2*len(dp.PMDs())) {
		t.Fatalf("cache hits %d for %d packets", hits, rx)
	}
}

// countingSink is a StatsSink that adds up what it is told.
type countingSink struct{ packets, bytes atomic.Uint64 }

func (c *countingSink) Touch(_ time.Time, p, b uint64) { c.packets.Add(p); c.bytes.Add(b) }

// sinkUpcaller forwards port 1 to port 2 and names sink as the rule.
type sinkUpcaller struct{ sink *countingSink }

func (u sinkUpcaller) Upcall(k *flow.Key, res *UpcallResult) error {
	res.Actions = actions.List{actions.OutputTo(2)}
	res.Mask = flow.Mask{InPort: ^uint32(0)}
	res.NoInstall = false
	res.Refs = append(res.Refs[:0], u.sink)
	return nil
}

// TestPushStats: the traffic of megaflows reaches the rules they came from,
// both when PushStats asks and when a rule change clears the caches.
func TestPushStats(t *testing.T) {
	sink := &countingSink{}
	dp, _ := New(Config{Manual: true, Upcall: sinkUpcaller{sink}})
	defer dp.Close()
	in, out := ring.New("in", 1, 1, 1024), ring.New("out", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	pmd := dp.PMDs()[0]
	send := func(n int) {
		for i := 0; i < n; i++ {
			in.Inject(0, udpFrame(1, 2, uint16(i), 9, uint32(i)))
		}
		pmd.PollOnce()
		out.Discard(0)
	}
	send(10)
	dp.PushStats(time.Now())
	if sink.packets.Load() != 10 || sink.bytes.Load() != 600 {
		t.Fatalf("after PushStats: %d packets %d bytes, want 10 and 600", sink.packets.Load(), sink.bytes.Load())
	}
	dp.PushStats(time.Now()) // nothing new: nothing added
	send(5)
	dp.InvalidateFlows() // the PMD pushes before it clears
	send(1)
	dp.PushStats(time.Now())
	if sink.packets.Load() != 16 {
		t.Fatalf("%d packets reached the rule, want 16", sink.packets.Load())
	}
}

// TestExpireIdleFlows: a megaflow unused for max-idle is removed at the
// PMD's next iteration (from the classifier and the EMC), its traffic
// pushed to its rule first; a busy one stays; a later packet of the
// expired flow is an upcall again.
func TestExpireIdleFlows(t *testing.T) {
	sink := &countingSink{}
	clk := &fakeClock{ns: 1_000_000_000}
	dp, _ := New(Config{Manual: true, Clock: clk.now, Upcall: sinkUpcaller{sink}, EMCInsertInvProb: 1})
	defer dp.Close()
	in, out := ring.New("in", 1, 1, 1024), ring.New("out", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	pmd := dp.PMDs()[0]
	send := func(n int) {
		for i := 0; i < n; i++ {
			in.Inject(0, udpFrame(1, 2, 7, 9, uint32(i)))
		}
		pmd.PollOnce()
		pmd.PollOnce() // idle: publishes the counters
		out.Discard(0)
	}
	send(3) // one upcall, one megaflow (in_port only), in the EMC too
	if dp.FlowCount() != 1 || dp.PMDStats()[0].Misses != 1 {
		t.Fatalf("flows %d, misses %d", dp.FlowCount(), dp.PMDStats()[0].Misses)
	}
	clk.ns += 4_000_000_000
	dp.ExpireIdleFlows(10 * time.Second)
	pmd.PollOnce()
	if dp.FlowCount() != 1 || dp.ExpiredFlows() != 0 {
		t.Fatalf("a flow used 4 s ago was expired (max-idle 10 s)")
	}
	send(2) // used now
	clk.ns += 9_000_000_000
	dp.ExpireIdleFlows(10 * time.Second)
	pmd.PollOnce()
	if dp.FlowCount() != 1 {
		t.Fatal("a flow used 9 s ago was expired")
	}
	clk.ns += 2_000_000_000
	dp.ExpireIdleFlows(10 * time.Second)
	pmd.PollOnce()
	pmd.PollOnce() // publish
	if dp.FlowCount() != 0 || dp.ExpiredFlows() != 1 || len(dp.DumpFlows()) != 0 {
		t.Fatalf("after 11 s idle: %d flows, %d expired", dp.FlowCount(), dp.ExpiredFlows())
	}
	if sink.packets.Load() != 5 {
		t.Fatalf("the expired flow pushed %d packets to its rule, want 5", sink.packets.Load())
	}
	send(1) // neither the EMC nor the classifier may still hold it
	if m := dp.PMDStats()[0].Misses; m != 2 {
		t.Fatalf("misses %d after the flow expired, want 2", m)
	}
	checkNoLeaks(t, dp)
}

// TestSimpleMatch: once a port's packets got a megaflow matching on the
// port alone that only outputs, its batches skip parsing and the caches:
// every frame, malformed ones too, goes out unchanged, counted as a simple
// match hit and in the flow's statistics. A rule change takes effect at
// once; a flow that needs the headers (a wider mask, or an action that
// rewrites them) never takes the path.
func TestSimpleMatch(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out2, out3 := ring.New("in", 1, 1, 1024), ring.New("o2", 1, 1, 1024), ring.New("o3", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out2)
	dp.AddPort(3, out3)
	rules.Add(inPortRule(1, 1, 2))
	pmd := dp.PMDs()[0]
	good := udpFrame(1, 2, 3, 4, 5)
	frames := [][]byte{good, good[:5], append(append([]byte(nil), good[:14]...), 0x41), good}
	send := func() {
		t.Helper()
		in.Inject(0, frames...)
		pmd.PollOnce()
		pmd.PollOnce() // idle: publishes the counters
	}
	expect := func(port *ring.Port) {
		t.Helper()
		var got [][]byte
		port.Drain(0, func(f []byte) { got = append(got, append([]byte(nil), f...)) })
		if len(got) != len(frames) {
			t.Fatalf("%s sent %d frames, want %d", port.Name(), len(got), len(frames))
		}
		for i := range got {
			if string(got[i]) != string(frames[i]) {
				t.Fatalf("frame %d changed on the way: %x, sent %x", i, got[i], frames[i])
			}
		}
	}
	send() // the first batch upcalls and installs in_port=1
	expect(out2)
	st0 := dp.PMDStats()[0]
	if st0.SimpleMatchHits != 0 || st0.Misses == 0 || st0.Malformed == 0 {
		t.Fatalf("first batch %+v: want an upcall that parsed every frame", st0)
	}
	send()
	expect(out2)
	st := dp.PMDStats()[0]
	if st.SimpleMatchHits-st0.SimpleMatchHits != uint64(len(frames)) || st.Misses != st0.Misses ||
		st.EMCHits != st0.EMCHits || st.MegaflowHits != st0.MegaflowHits || st.Malformed != st0.Malformed {
		t.Fatalf("second batch %+v after %+v: want every frame a simple match hit, nothing parsed", st, st0)
	}
	var pkts uint64
	for _, f := range dp.DumpFlows() {
		pkts += f.Packets
	}
	if pkts != 2*uint64(len(frames)) {
		t.Fatalf("flow statistics count %d packets, want %d", pkts, 2*len(frames))
	}

	rules.Add(inPortRule(2, 1, 3)) // a higher priority sends to 3 instead
	send()
	expect(out3)

	for _, tc := range []struct {
		name string
		rule Rule
	}{
		{"wider mask", func() Rule {
			r := inPortRule(3, 1, 2)
			r.Match.Mask.EthType = 0xffff
			return r
		}()},
		{"rewriting action", func() Rule {
			r := inPortRule(3, 1, 2)
			r.Actions = append(actions.List{{Kind: actions.SetEthDst}}, r.Actions...)
			return r
		}()},
	} {
		rules.Clear()
		rules.Add(tc.rule)
		before := dp.PMDStats()[0].SimpleMatchHits
		send()
		send()
		out2.Discard(0)
		if after := dp.PMDStats()[0].SimpleMatchHits; after != before {
			t.Errorf("%s: %d simple match hits", tc.name, after-before)
		}
	}
	checkNoLeaks(t, dp)
}

// TestLocalPort: the bridge's own interface is port LocalPort (OpenFlow's
// OFPP_LOCAL number): rules and actions name it so, traffic flows both
// ways (through the simple match too), and no other number reaches it.
func TestLocalPort(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	local, eth := ring.New("br0", 1, 1, 64), ring.New("eth", 1, 1, 64)
	if _, err := dp.AddPort(LocalPort, local); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(LocalPort+1, ring.New("x", 1, 1, 4)); err == nil {
		t.Fatal("port number LocalPort+1 accepted")
	}
	dp.AddPort(1, eth)
	rules.Add(inPortRule(1, 1, LocalPort))
	rules.Add(inPortRule(1, LocalPort, 1))
	pmd := dp.PMDs()[0]
	for round := 0; round < 3; round++ { // upcall, then simple match
		eth.Inject(0, udpFrame(1, 2, 3, 4, uint32(round)))
		local.Inject(0, udpFrame(2, 1, 4, 3, uint32(100+round)))
		pmd.PollOnce()
		var toLocal, toEth []uint32
		local.Drain(0, func(f []byte) { toLocal = append(toLocal, frameSeq(f)) })
		eth.Drain(0, func(f []byte) { toEth = append(toEth, frameSeq(f)) })
		if len(toLocal) != 1 || toLocal[0] != uint32(round) || len(toEth) != 1 || toEth[0] != uint32(100+round) {
			t.Fatalf("round %d: LOCAL got %v, port 1 got %v", round, toLocal, toEth)
		}
	}
	pmd.PollOnce()
	if st := dp.PMDStats()[0]; st.SimpleMatchHits != 4 || st.Misses != 2 {
		t.Fatalf("stats %+v: want 2 upcalls then 4 simple match hits", st)
	}
	// Output to port 0 (LOCAL's index) must not reach LOCAL.
	rules.Clear()
	r := inPortRule(1, 1, 0)
	r.Match.Mask.EthType = 0xffff // not a simple match: the action runs per packet
	r.Match.Key.EthType = 0x0800
	rules.Add(r)
	eth.Inject(0, udpFrame(1, 2, 3, 4, 7))
	pmd.PollOnce()
	if n := local.Drain(0, func([]byte) {}); n != 0 {
		t.Fatalf("output to port 0 reached LOCAL (%d frames)", n)
	}
	checkNoLeaks(t, dp)
}

// TestBatchAddsPortsInOnePlan: ports added inside Batch are visible at
// once (Port) but reach the PMDs in one plan at its end, after which they
// forward; a port removed inside a batch is closed only after the PMDs
// let go of it.
func TestBatchAddsPortsInOnePlan(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{NumPMDs: 2, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 1, 1, 4096)
	dp.AddPort(1, in)
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	seq := dp.seq
	outs := make([]*ring.Port, 20)
	gone := ring.New("gone", 1, 1, 256)
	dp.AddPort(40, gone)
	dp.Batch(func() {
		for i := range outs {
			outs[i] = ring.New(fmt.Sprintf("out%d", i), 1, 1, 256)
			if _, err := dp.AddPort(uint32(10+i), outs[i]); err != nil {
				t.Fatal(err)
			}
			if dp.Port(uint32(10+i)) == nil {
				t.Fatalf("port %d not visible inside the batch", 10+i)
			}
			if err := dp.SetPortTxFlushInterval(uint32(10+i), 0); err != nil {
				t.Fatal(err)
			}
		}
		// A port numbered below the others goes in its place.
		if _, err := dp.AddPort(5, ring.New("low", 1, 1, 256)); err != nil {
			t.Fatal(err)
		}
		ps := dp.Ports()
		nos := make([]uint32, len(ps))
		for i, p := range ps {
			nos[i] = p.No
		}
		if len(nos) != 23 || nos[0] != 1 || nos[1] != 5 || nos[22] != 40 || !slices.IsSorted(nos) {
			t.Fatalf("ports inside the batch: %v", nos)
		}
		if err := dp.RemovePort(40); err != nil {
			t.Fatal(err)
		}
		if !gone.Closed() {
			t.Fatal("a port removed inside a batch is not closed")
		}
	})
	// One plan for the twenty ports (the removal published its own).
	if got := dp.seq - seq; got > 3 {
		t.Errorf("%d plans published for a batch of 20 ports, want at most 3", got)
	}
	rules.Add(inPortRule(1, 1, 10, 19, 29))
	if in.Inject(0, udpFrame(1, 2, 1, 9, 1)) != 1 {
		t.Fatal("inject")
	}
	waitFor(t, "the flood to reach the batch's ports", func() bool {
		return outs[0].Stats().TxPackets == 1 && outs[9].Stats().TxPackets == 1 && outs[19].Stats().TxPackets == 1
	})
}

// BenchmarkBatchAddPorts: a thousand ports added in one Batch, as one
// ovs-vsctl transaction adds them (the datapath's share of it).
func BenchmarkBatchAddPorts(b *testing.B) {
	for b.Loop() {
		dp, err := New(Config{NumPMDs: 1})
		if err != nil {
			b.Fatal(err)
		}
		dp.Batch(func() {
			for i := range 1000 {
				if _, err := dp.AddPort(uint32(i+1), ring.New(fmt.Sprintf("p%d", i), 1, 1, 64)); err != nil {
					b.Fatal(err)
				}
			}
		})
		dp.Close()
	}
}

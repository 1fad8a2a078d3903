package datapath

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// mplsFrame is udpFrame with one MPLS label stack entry (label 16, bottom
// of stack, TTL 64) between the Ethernet header and the IP packet.
func mplsFrame(src, dst uint32, dport uint16, seq uint32) []byte {
	f := udpFrame(src, dst, 1000, dport, seq)
	out := append([]byte(nil), f[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8847)
	out = binary.BigEndian.AppendUint32(out, 16<<12|1<<8|64)
	return append(out, f[14:]...)
}

// recircRules is the pipeline of a pop-MPLS-then-match-IP flow as a
// translator with recirculation would give it: first pass pops the label
// and recirculates as id 7; the second matches the IPv4 destination the
// pop exposed.
func recircRules(rules *RuleTable) {
	var pop Rule
	pop.Priority = 10
	pop.Match.Key.EthType, pop.Match.Mask.EthType = 0x8847, 0xffff
	pop.Match.Mask.RecircID = 0xffff
	pop.Actions = actions.List{{Kind: actions.PopMPLS, Val16: 0x0800}, {Kind: actions.Recirc, Port: 7}}
	rules.Add(pop)
	var fwd Rule
	fwd.Priority = 10
	fwd.Match.Key.RecircID, fwd.Match.Mask.RecircID = 7, 0xffff
	fwd.Match.Key.EthType, fwd.Match.Mask.EthType = 0x0800, 0xffff
	fwd.Match.Key.IPv4Dst, fwd.Match.Mask.IPv4Dst = 2, ^uint32(0)
	fwd.Actions = actions.List{{Kind: actions.Output, Port: 2}}
	rules.Add(fwd)
}

// TestRecirculation: a packet whose first pass pops its MPLS label and
// recirculates is looked up again, in the same iteration, on the key of
// the bytes the pop exposed; the second packet of the flow takes both
// passes' megaflows without an upcall.
func TestRecirculation(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules, EMCInsertInvProb: 1})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 1024), ring.New("out", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	recircRules(rules)
	pmd := dp.PMDs()[0]

	in.Inject(0, mplsFrame(1, 2, 9, 1), mplsFrame(1, 3, 9, 2)) // the second matches nothing after the pop
	pmd.PollOnce()
	got := drain(out, 0)
	if len(got) != 1 {
		t.Fatalf("sent %d frames, want 1", len(got))
	}
	if want := udpFrame(1, 2, 1000, 9, 1); string(got[0]) != string(want) {
		t.Fatalf("sent\n%x\nwant the IP packet behind the label\n%x", got[0], want)
	}
	pmd.local.publish(pmd.counters)
	s := dp.PMDStats()[0]
	// Upcalls: the first pass once (the second packet takes the megaflow
	// the first installed), the second pass once per destination.
	if s.Recirculations != 2 || s.Misses != 3 {
		t.Fatalf("recirculations %d misses %d, want 2 and 3", s.Recirculations, s.Misses)
	}
	// Megaflows: the first pass (recirc_id 0) and the second (7), each
	// matching its id exactly.
	ids := map[uint16]int{}
	pmd.flows.Range(func(m *flow.Match, _ *Megaflow) bool {
		if m.Mask.RecircID != 0xffff {
			t.Errorf("megaflow %s wildcards recirc_id", flow.FormatMatch(&m.Key, &m.Mask))
		}
		ids[m.Key.RecircID]++
		return true
	})
	if len(ids) != 2 || ids[0] != 1 || ids[7] != 2 {
		t.Fatalf("megaflows by recirc_id: %v, want one of 0 and two of 7", ids)
	}

	in.Inject(0, mplsFrame(1, 2, 9, 3))
	pmd.PollOnce()
	pmd.local.publish(pmd.counters)
	s2 := dp.PMDStats()[0]
	if got := drain(out, 0); len(got) != 1 || frameSeq(got[0]) != 3 {
		t.Fatalf("second packet: sent %d frames", len(got))
	}
	if s2.Misses != s.Misses || s2.Recirculations != 3 {
		t.Fatalf("second packet of the flow: %d upcalls (want none), recirculations %d (want 3)", s2.Misses-s.Misses, s2.Recirculations)
	}
	checkNoLeaks(t, dp)
}

// TestRecirculationDepth: a packet recirculated over and over is dropped
// after MaxRecirculations, and counted.
func TestRecirculationDepth(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 1, 1, 1024)
	dp.AddPort(1, in)
	var loop Rule
	loop.Actions = actions.List{{Kind: actions.Recirc, Port: 1}}
	rules.Add(loop)
	in.Inject(0, udpFrame(1, 2, 1, 2, 1))
	pmd := dp.PMDs()[0]
	pmd.PollOnce()
	pmd.local.publish(pmd.counters)
	s := dp.PMDStats()[0]
	if s.Recirculations != MaxRecirculations || s.Drops[DropRecirc] != 1 {
		t.Fatalf("recirculations %d, recirc drops %d; want %d and 1", s.Recirculations, s.Drops[DropRecirc], MaxRecirculations)
	}
	checkNoLeaks(t, dp)
}

// TestRecirculationBatch: a full batch recirculates as one mini-batch and
// every packet comes out, in order, on several PMDs at once.
func TestRecirculationBatch(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, NumPMDs: 2, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	ins := []*ring.Port{ring.New("in1", 1, 1, 1024), ring.New("in3", 1, 1, 1024)}
	out := ring.New("out", 1, 2, 4096)
	dp.AddPort(1, ins[0])
	dp.AddPort(3, ins[1])
	dp.AddPort(2, out)
	recircRules(rules)
	const n = 32 * 8
	var wg sync.WaitGroup
	for i, p := range dp.PMDs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < n; k++ {
				ins[i].Inject(0, mplsFrame(1, 2, 9, uint32(k)))
			}
			for k := 0; k < n; k++ { // more polls than batches needed
				p.PollOnce()
			}
		}()
	}
	wg.Wait()
	// Which PMD polls which port is the scheduler's choice: one may
	// have both, and finish polling before the other goroutine finished
	// injecting. Poll everything until the rings are empty (bounded).
	for range 2 * n / 32 {
		for _, p := range dp.PMDs() {
			p.PollOnce()
		}
	}
	var total uint64
	for _, p := range dp.PMDs() {
		total += dp.PMDStats()[p.ID()].Recirculations
	}
	if got := len(drain(out, 0)) + len(drain(out, 1)); got != 2*n || total != 2*n {
		t.Fatalf("sent %d, recirculated %d; want %d each; stats %+v", got, total, 2*n, dp.PMDStats())
	}
	checkNoLeaks(t, dp)
}

// drain returns copies of the frames sent on tx queue q of p.
func drain(p *ring.Port, q int) [][]byte {
	var fs [][]byte
	p.Drain(q, func(f []byte) { fs = append(fs, append([]byte(nil), f...)) })
	return fs
}

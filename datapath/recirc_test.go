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
	pop.Actions = actions.List{{Kind: actions.PopMPLS, Val16: 0x0800}, actions.RecircAction(7)}
	rules.Add(pop)
	var fwd Rule
	fwd.Priority = 10
	fwd.Match.Key.RecircID, fwd.Match.Mask.RecircID = 7, 0xffff
	fwd.Match.Key.EthType, fwd.Match.Mask.EthType = 0x0800, 0xffff
	fwd.Match.Key.IPv4Dst, fwd.Match.Mask.IPv4Dst = 2, ^uint32(0)
	fwd.Actions = actions.List{actions.OutputTo(2)}
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
	loop.Actions = actions.List{actions.RecircAction(1)}
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

// TestRecirculationCopy: a recirc action that is not the last recirculates
// a copy of the packet as rewritten so far, and the packet goes on with
// the actions after it (a group bucket that pops and then looks behind the
// pop, on its own clone): the copy leaves through the second pass, the
// original through the rest of the first.
func TestRecirculationCopy(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out, orig := ring.New("in", 1, 1, 1024), ring.New("out", 1, 1, 1024), ring.New("orig", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	dp.AddPort(3, orig)
	recircRules(rules)
	var first Rule
	first.Priority = 20
	first.Match.Key.EthType, first.Match.Mask.EthType = 0x8847, 0xffff
	first.Match.Mask.RecircID = 0xffff
	first.Actions = actions.List{{Kind: actions.PopMPLS, Val16: 0x0800}, actions.RecircAction(7),
		{Kind: actions.SetIPTTL, Val8: 9}, {Kind: actions.Output, Port: 3}}
	rules.Add(first)
	pmd := dp.PMDs()[0]
	in.Inject(0, mplsFrame(1, 2, 9, 1))
	pmd.PollOnce()
	if got := drain(out, 0); len(got) != 1 || string(got[0]) != string(udpFrame(1, 2, 1000, 9, 1)) {
		t.Fatalf("recirculated copy: sent %x, want the IP packet behind the label", got)
	}
	got := drain(orig, 0)
	if len(got) != 1 || got[0][14+8] != 9 {
		t.Fatalf("original: sent %x, want the popped packet with TTL 9", got)
	}
	pmd.local.publish(pmd.counters)
	if s := dp.PMDStats()[0]; s.Recirculations != 1 {
		t.Fatalf("recirculations %d, want 1", s.Recirculations)
	}
	checkNoLeaks(t, dp)
}

// sizedFrame is udpFrame grown to n bytes, or, with ipLen set, with an IP
// total length of ipLen (a short datagram in a padded frame).
func sizedFrame(n, ipLen int, seq uint32) []byte {
	f := udpFrame(1, 2, 1000, 9, seq)
	f = append(f, make([]byte, max(0, n-len(f)))...)
	if ipLen == 0 {
		ipLen = n - 14
	}
	ip := f[14:]
	binary.BigEndian.PutUint16(ip[2:], uint16(ipLen))
	binary.BigEndian.PutUint16(ip[10:], 0)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(ip[24:], uint16(ipLen-20))
	return f
}

// TestCheckPktLen: a check_pkt_len recirculates the packet under the id
// its length picks (Ethernet padding behind a short datagram not
// counted); before other actions it sends a copy, and the packet goes on.
func TestCheckPktLen(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, big, small, rest := ring.New("in", 1, 1, 1024), ring.New("big", 1, 1, 1024), ring.New("small", 1, 1, 1024), ring.New("rest", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, big)
	dp.AddPort(3, small)
	dp.AddPort(4, rest)
	var first Rule
	first.Priority = 10
	first.Match.Mask.RecircID = 0xffff
	first.Actions = actions.List{actions.CheckPktLenAction(100, 7, 8), actions.OutputTo(4)}
	rules.Add(first)
	for id, port := range map[uint16]uint32{7: 2, 8: 3} {
		var r Rule
		r.Priority = 10
		r.Match.Key.RecircID, r.Match.Mask.RecircID = id, 0xffff
		r.Actions = actions.List{actions.OutputTo(port)}
		rules.Add(r)
	}
	pmd := dp.PMDs()[0]
	for _, tc := range []struct {
		n, ipLen int
		want     *ring.Port
	}{
		{99, 0, small}, {100, 0, small}, {101, 0, big}, {1500, 0, big},
		{120, 60, small}, // 74 bytes without the padding
	} {
		f := sizedFrame(tc.n, tc.ipLen, uint32(tc.n))
		in.Inject(0, f)
		pmd.PollOnce()
		for _, p := range []*ring.Port{big, small, rest} {
			got := drain(p, 0)
			n := 0
			if p == tc.want || p == rest {
				n = 1
			}
			if len(got) != n || n == 1 && string(got[0]) != string(f) {
				t.Errorf("%d-byte frame (IP length %d): port %s sent %d frames, want %d", tc.n, tc.ipLen, p.Name(), len(got), n)
			}
		}
	}
	checkNoLeaks(t, dp)
}

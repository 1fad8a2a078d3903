package datapath

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// ctRecircRules: every IPv4 packet goes through ct(zone=1) and
// recirculates as id 1 (the ct-and-recirc flow executeCTRecirc takes);
// on its second pass a tracked packet from tunnel 7 goes to port 4
// (a match the first pass's mask does not fix: no memo), one to
// 198.18.0.3 to port 3 and the rest to port 2 (matches on the input port,
// the ct state and the destination, which the first pass does not fix
// either), and one from port 5 to port 2 on the ct state alone (memoised).
// RuleTable's masks are the union of the rules it looked at: the first
// pass's rule comes first (eth_type and recirc_id only), port 5's rule
// first in the second pass.
func ctRecircRules(rules *RuleTable) {
	ip := Rule{Priority: 100, Actions: actions.List{actions.CTAction(1, 0, 0, 0), actions.RecircAction(1)}}
	ip.Match.Key.EthType, ip.Match.Mask.EthType = 0x0800, 0xffff
	ip.Match.Mask.RecircID = 0xffff
	rules.Add(ip)
	second := func(prio int, out uint32) Rule {
		r := Rule{Priority: prio, Actions: actions.List{actions.OutputTo(out)}}
		r.Match.Key.RecircID, r.Match.Mask.RecircID = 1, 0xffff
		r.Match.Key.CT.State, r.Match.Mask.CT.State = flow.CTTracked, flow.CTTracked
		return r
	}
	tun := second(30, 4)
	tun.Match.Key.TunnelID, tun.Match.Mask.TunnelID = 7, ^uint64(0)
	rules.Add(tun)
	dst3 := second(20, 3)
	dst3.Match.Key.IPv4Dst, dst3.Match.Mask.IPv4Dst = 0xc6120003, ^uint32(0)
	rules.Add(dst3)
	p5 := second(40, 2)
	p5.Match.Key.InPort, p5.Match.Mask.InPort = 5, ^uint32(0)
	rules.Add(p5)
	rules.Add(second(10, 2))
}

// TestCTRecircFused: packets of a ct-and-recirc flow classified right
// after the tracker (executeCTRecirc) keep their tunnel metadata on the
// second pass, go where a second pass through the queue would send them,
// in order, when a batch mixes second-pass flows the memo, the EMC and
// an upcall answer; every packet counts one recirculation and one hit of
// each of its two megaflows.
func TestCTRecircFused(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, in5 := ring.New("in", 1, 1, 1024), ring.New("in5", 1, 1, 1024)
	outs := map[uint32]*ring.Port{2: ring.New("o2", 1, 1, 4096), 3: ring.New("o3", 1, 1, 4096), 4: ring.New("o4", 1, 1, 4096)}
	dp.AddPort(1, tunnelingPort{in}) // odd sequence numbers from tunnel 7
	dp.AddPort(5, in5)
	for n, p := range outs {
		dp.AddPort(n, p)
	}
	ctRecircRules(rules)
	pmd := dp.PMDs()[0]
	const dst2, dst3 = 0xc6120002, 0xc6120003
	// want: the port each sequence number must reach.
	want := map[uint32]uint32{}
	seq := uint32(0)
	batch := func(dsts ...uint32) (fs [][]byte) {
		for _, d := range dsts {
			fs = append(fs, udpFrame(0xc6120001, d, 1000, 9, seq))
			switch {
			case seq%2 == 1:
				want[seq] = 4
			case d == dst3:
				want[seq] = 3
			default:
				want[seq] = 2
			}
			seq++
		}
		return fs
	}
	// Rounds: the first installs the flows to port 2 and 4 (dst3 unseen),
	// the second mixes in dst3 (an upcall in the middle of memo and EMC
	// hits), the later ones hit everything.
	var sent int
	for round := range 4 {
		var dsts []uint32
		for i := range 32 {
			d := uint32(dst2)
			if round > 0 && i%3 == 0 {
				d = dst3
			}
			dsts = append(dsts, d)
		}
		sent += in.Inject(0, batch(dsts...)...)
		pmd.PollOnce()
	}
	// Port 5's packets: their second pass is memoised by (port, ct).
	for range 3 {
		var fs [][]byte
		for range 32 {
			fs = append(fs, udpFrame(0xc6120001, dst2, 1000, 9, seq))
			want[seq] = 2
			seq++
		}
		sent += in5.Inject(0, fs...)
		pmd.PollOnce()
	}
	got := 0
	for port, p := range outs {
		last := int64(-1)
		for _, f := range drain(p, 0) {
			s := frameSeq(f)
			if want[s] != port {
				t.Errorf("seq %d on port %d, want %d", s, port, want[s])
			}
			if int64(s) <= last {
				t.Errorf("port %d: seq %d after %d", port, s, last)
			}
			last = int64(s)
			got++
		}
	}
	if got != sent {
		t.Fatalf("%d frames out of %d sent", got, sent)
	}
	pmd.local.publish(pmd.counters)
	st := dp.PMDStats()[0]
	if st.Recirculations != uint64(sent) {
		t.Errorf("%d recirculations, want %d", st.Recirculations, sent)
	}
	if hits := st.EMCHits + st.MegaflowHits + st.Misses; hits != 2*uint64(sent) {
		t.Errorf("EMC %d + megaflow %d + misses %d = %d lookups, want %d (two passes each)", st.EMCHits, st.MegaflowHits, st.Misses, hits, 2*sent)
	}
	var first, second uint64
	pmd.flows.Range(func(m *flow.Match, mf *Megaflow) bool {
		if m.Key.RecircID == 0 {
			first += mf.packets.Load()
		} else {
			second += mf.packets.Load()
		}
		return true
	})
	// The upcalled packets are executed without their megaflow's count.
	if first+st.Misses < uint64(sent) || second+st.Misses < uint64(sent) || first > uint64(sent) || second > uint64(sent) {
		t.Errorf("megaflow packets: first pass %d, second %d, misses %d, for %d sent", first, second, st.Misses, sent)
	}
	var memo int
	pmd.flows.Range(func(m *flow.Match, mf *Megaflow) bool {
		for _, e := range mf.next {
			if e.mf != nil {
				memo++
				if e.inPort != 5 {
					t.Errorf("memo entry for port %d: only port 5's second pass is fixed by the first's mask and the memo key", e.inPort)
				}
			}
		}
		return true
	})
	if memo != 1 {
		t.Errorf("%d memo entries, want 1 (port 5's)", memo)
	}
	checkNoLeaks(t, dp)
}

// TestCTRecircDepth: a ct-and-recirc flow that recirculates into itself
// nests executeCTRecirc until MaxRecirculations, then drops the packet
// as DropRecirc, as the queue would.
func TestCTRecircDepth(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 1, 1, 1024)
	dp.AddPort(1, in)
	loop := Rule{Actions: actions.List{actions.CTAction(1, 0, 0, 0), actions.RecircAction(1)}}
	rules.Add(loop)
	pmd := dp.PMDs()[0]
	const batches = 3
	for b := range batches {
		var fs [][]byte
		for i := range 8 {
			fs = append(fs, udpFrame(0xc6120001, 0xc6120002, 1000, 9, uint32(b*8+i)))
		}
		in.Inject(0, fs...)
		pmd.PollOnce()
	}
	pmd.local.publish(pmd.counters)
	st := dp.PMDStats()[0]
	if n := uint64(batches * 8); st.Recirculations != n*MaxRecirculations || st.Drops[DropRecirc] != n {
		t.Fatalf("recirculations %d, recirc drops %d; want %d and %d", st.Recirculations, st.Drops[DropRecirc], n*MaxRecirculations, n)
	}
	checkNoLeaks(t, dp)
}

// TestCTRecircMemoExpiry: a second-pass megaflow removed for being idle
// while its first-pass flow stays is never taken from the memo again:
// the next packets go through an upcall to a new megaflow, which the memo
// then holds, and then through the new megaflow.
func TestCTRecircMemoExpiry(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in5, out := ring.New("in5", 1, 1, 1024), ring.New("o2", 1, 1, 4096)
	dp.AddPort(5, in5)
	dp.AddPort(2, out)
	ctRecircRules(rules)
	pmd := dp.PMDs()[0]
	seq := uint32(0)
	send := func() {
		var fs [][]byte
		for range 8 {
			fs = append(fs, udpFrame(0xc6120001, 0xc6120002, 1000, 9, seq))
			seq++
		}
		in5.Inject(0, fs...)
		pmd.PollOnce()
		if got := len(drain(out, 0)); got != len(fs) {
			t.Fatalf("%d of %d frames out", got, len(fs))
		}
	}
	secondFlow := func() (second, first *Megaflow) {
		pmd.flows.Range(func(m *flow.Match, mf *Megaflow) bool {
			if m.Key.RecircID == 0 {
				first = mf
			} else {
				second = mf
			}
			return true
		})
		return second, first
	}
	send()
	send()
	old, first := secondFlow()
	if first == nil || old == nil || first.memoLookup(5, first.next[0].ct) != old {
		t.Fatalf("no memo entry for port 5's second pass: %+v", first)
	}
	pmd.local.publish(pmd.counters)
	misses := dp.PMDStats()[0].Misses
	// Only the second-pass flow is idle.
	old.used.Store(1)
	first.used.Store(1 << 62)
	pmd.expireIdle(2)
	if !old.expired || first.expired {
		t.Fatalf("expired: second %v, first %v", old.expired, first.expired)
	}
	send()
	nw, first2 := secondFlow()
	if first2 != first || nw == nil || nw == old {
		t.Fatalf("after the expiry: first %p (was %p), second %p (was %p)", first2, first, nw, old)
	}
	pmd.local.publish(pmd.counters)
	if m := dp.PMDStats()[0].Misses; m != misses+1 {
		t.Fatalf("%d upcalls after the expiry, want 1", m-misses)
	}
	if old.packets.Load() != 16 {
		t.Errorf("the expired flow counted %d packets, want the 16 before it expired", old.packets.Load())
	}
	send()
	if got := first.memoLookup(5, first.next[0].ct); got != nw {
		t.Errorf("memo holds %p, want the new second-pass flow %p", got, nw)
	}
	// Both batches: the upcall installed it before the queued batch's
	// packets were executed, as a run of it.
	if n := nw.packets.Load(); n != 16 {
		t.Errorf("the new second-pass flow counted %d packets, want 16", n)
	}
	checkNoLeaks(t, dp)
}

// TestLastFlow: the flow the last batch went to, tried before the EMC,
// gives way to the EMC for a packet it does not match, and is never used
// once the rules change or it expires.
func TestLastFlow(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 1, 1, 1024)
	outs := map[uint32]*ring.Port{2: ring.New("o2", 1, 1, 4096), 3: ring.New("o3", 1, 1, 4096)}
	dp.AddPort(1, in)
	for n, p := range outs {
		dp.AddPort(n, p)
	}
	toDst := func(dst, out uint32) Rule {
		r := Rule{Priority: 10, Actions: actions.List{actions.OutputTo(out)}}
		r.Match.Key.EthType, r.Match.Mask.EthType = 0x0800, 0xffff
		r.Match.Key.IPv4Dst, r.Match.Mask.IPv4Dst = dst, ^uint32(0)
		return r
	}
	rules.Add(toDst(0xc6120002, 2))
	rules.Add(toDst(0xc6120003, 3))
	pmd := dp.PMDs()[0]
	seq := uint32(0)
	// send sends one batch of frames to dsts and checks that each reached
	// want(dst).
	send := func(want func(dst uint32) uint32, dsts ...uint32) {
		t.Helper()
		wantSeq := map[uint32]uint32{}
		var fs [][]byte
		for _, d := range dsts {
			fs = append(fs, udpFrame(0xc6120001, d, 1000, 9, seq))
			wantSeq[seq] = want(d)
			seq++
		}
		in.Inject(0, fs...)
		pmd.PollOnce()
		n := 0
		for port, p := range outs {
			for _, f := range drain(p, 0) {
				if s := frameSeq(f); wantSeq[s] != port {
					t.Errorf("seq %d on port %d, want %d", s, port, wantSeq[s])
				}
				n++
			}
		}
		if n != len(fs) {
			t.Fatalf("%d of %d frames out", n, len(fs))
		}
	}
	byDst := func(d uint32) uint32 { return d & 0xff }
	const d2, d3 = 0xc6120002, 0xc6120003
	send(byDst, d2, d2, d2)
	send(byDst, d2, d3, d2, d3, d3) // the last flow (to 2) misses from the second packet on
	send(byDst, d3, d2, d3)
	if len(pmd.lastFlows) <= 1 || pmd.lastFlows[1] == nil {
		t.Fatal("no last flow")
	}
	// A rule change: every packet to port 3 from now on.
	rules.Clear()
	all := Rule{Priority: 1, Actions: actions.List{actions.OutputTo(3)}}
	all.Match.Key.EthType, all.Match.Mask.EthType = 0x0800, 0xffff
	rules.Add(all)
	to3 := func(uint32) uint32 { return 3 }
	send(to3, d3, d3, d2)
	// Expired: the next packet goes through an upcall, not the old flow.
	last := pmd.lastFlows[1]
	if last == nil || last.nwords == 0 {
		t.Fatalf("last flow %+v", last)
	}
	last.used.Store(1)
	pmd.expireIdle(2)
	if !last.expired {
		t.Fatal("the last flow did not expire")
	}
	pmd.local.publish(pmd.counters)
	misses := dp.PMDStats()[0].Misses
	send(to3, d3)
	pmd.local.publish(pmd.counters)
	if m := dp.PMDStats()[0].Misses; m != misses+1 {
		t.Fatalf("%d upcalls after the last flow expired, want 1", m-misses)
	}
	checkNoLeaks(t, dp)
}

// TestCTRecircKeepsOrder: once a packet of a batch waits in the
// recirculation queue (its second pass needs an upcall), the packets
// after it are queued too rather than classified at once, so that none
// overtakes it: a connection's data must not reach the next ct (or the
// wire) after its FIN.
func TestCTRecircKeepsOrder(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 1024), ring.New("o2", 1, 1, 4096)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	dp.AddPort(3, ring.New("o3", 1, 1, 64))
	ip := Rule{Priority: 100, Actions: actions.List{actions.CTAction(1, 0, 0, 0), actions.RecircAction(1)}}
	ip.Match.Key.EthType, ip.Match.Mask.EthType = 0x0800, 0xffff
	ip.Match.Mask.RecircID = 0xffff
	rules.Add(ip)
	// A rule on the destination first: every second-pass megaflow has
	// its own destination, so a new one needs its own upcall.
	other := Rule{Priority: 20, Actions: actions.List{actions.OutputTo(3)}}
	other.Match.Key.RecircID, other.Match.Mask.RecircID = 1, 0xffff
	other.Match.Key.IPv4Dst, other.Match.Mask.IPv4Dst = 0xc6120063, ^uint32(0)
	rules.Add(other)
	rest := Rule{Priority: 10, Actions: actions.List{actions.OutputTo(2)}}
	rest.Match.Key.RecircID, rest.Match.Mask.RecircID = 1, 0xffff
	rules.Add(rest)
	pmd := dp.PMDs()[0]
	seq := uint32(0)
	send := func(dsts ...uint32) {
		var fs [][]byte
		for _, d := range dsts {
			fs = append(fs, udpFrame(0xc6120001, d, 1000, 9, seq))
			seq++
		}
		in.Inject(0, fs...)
		pmd.PollOnce()
	}
	send(0xc6120002, 0xc6120002)
	// The second-pass flow of .2 is known (memo or EMC), .3's and .4's
	// are not.
	send(0xc6120002, 0xc6120003, 0xc6120002, 0xc6120002, 0xc6120004, 0xc6120002)
	var got []uint32
	for _, f := range drain(out, 0) {
		got = append(got, frameSeq(f))
	}
	if len(got) != int(seq) {
		t.Fatalf("%d frames out of %d", len(got), seq)
	}
	for i, s := range got {
		if s != uint32(i) {
			t.Fatalf("port 2 sent %v, want the order they came in", got)
		}
	}
	checkNoLeaks(t, dp)
}

// TestLastFlowPerPort: a PMD polling two ports in turn keeps each port's
// last flow, so the batches of a wide flow per port (any number of
// connections, more than the EMC would take in) go to it without a
// megaflow lookup, even though the batches alternate between the ports.
func TestLastFlowPerPort(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	ins := []*ring.Port{ring.New("in1", 1, 1, 1024), ring.New("in2", 1, 1, 1024)}
	outs := []*ring.Port{ring.New("o3", 1, 1, 4096), ring.New("o4", 1, 1, 4096)}
	for i := range ins {
		dp.AddPort(uint32(i+1), ins[i])
		dp.AddPort(uint32(i+3), outs[i])
		r := Rule{Priority: 10, Actions: actions.List{actions.OutputTo(uint32(i + 3))}}
		r.Match.Key.EthType, r.Match.Mask.EthType = 0x0800, 0xffff
		r.Match.Key.InPort, r.Match.Mask.InPort = uint32(i+1), ^uint32(0)
		rules.Add(r)
	}
	pmd := dp.PMDs()[0]
	seq := uint32(0)
	round := func() {
		t.Helper()
		for i, in := range ins {
			var fs [][]byte
			for range 32 {
				// A new connection each frame: the EMC never knows it.
				fs = append(fs, udpFrame(0xc6120001, 0xc6120002, uint16(seq), 9, seq))
				seq++
			}
			in.Inject(0, fs...)
			pmd.PollOnce()
			if got := len(drain(outs[i], 0)); got != len(fs) {
				t.Fatalf("port %d: %d of %d frames out of port %d", i+1, got, len(fs), i+3)
			}
		}
	}
	round()
	round()
	pmd.local.publish(pmd.counters)
	before := dp.PMDStats()[0]
	for range 10 {
		round()
	}
	pmd.local.publish(pmd.counters)
	after := dp.PMDStats()[0]
	if n := after.MegaflowHits - before.MegaflowHits; n != 0 {
		t.Errorf("%d megaflow lookups over 10 rounds of alternating batches, want 0 (each port's last flow)", n)
	}
	if after.Misses != before.Misses {
		t.Errorf("%d upcalls after the warm-up", after.Misses-before.Misses)
	}
	checkNoLeaks(t, dp)
}

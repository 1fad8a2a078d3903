package datapath

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// tunnelingPort is a ring port that, like a tunnel port, attaches tunnel
// metadata (tunnel ID 7) to every frame whose sequence number is odd.
type tunnelingPort struct{ *ring.Port }

func (p tunnelingPort) Recv(qi int, pool *packet.Pool, b *packet.Batch) int {
	n := p.Port.Recv(qi, pool, b)
	for _, pkt := range b.Packets() {
		if frameSeq(pkt.Data())%2 == 1 {
			pkt.HasTunnel, pkt.TunnelID = true, 7
		}
	}
	return n
}

// vlanFrame inserts an 802.1Q tag (VID 5) into an untagged frame.
func vlanFrame(f []byte) []byte {
	v := append([]byte(nil), f[:12]...)
	v = append(v, 0x81, 0x00, 0x00, 0x05)
	return append(v, f[12:]...)
}

// TestShortKeysInTheEMC: packets whose first six key words are the same
// but that differ beyond them (tunnel metadata) or take the general parser
// (a VLAN tag) must each get their own flow from the EMC, round after
// round, now that short keys are compared on six words only.
func TestShortKeysInTheEMC(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{Manual: true, Upcall: rules, EMCInsertInvProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 1, 1, 256)
	plain, tunneled, tagged := ring.New("plain", 1, 1, 256), ring.New("tun", 1, 1, 256), ring.New("vlan", 1, 1, 256)
	dp.AddPort(1, tunnelingPort{in})
	dp.AddPort(2, plain)
	dp.AddPort(3, tunneled)
	dp.AddPort(4, tagged)
	tun := Rule{Priority: 30, Actions: actions.List{{Kind: actions.Output, Port: 3}}}
	tun.Match.Key.TunnelID, tun.Match.Mask.TunnelID = 7, ^uint64(0)
	rules.Add(tun)
	vlan := Rule{Priority: 20, Actions: actions.List{{Kind: actions.Output, Port: 4}}}
	vlan.Match.Key.VLAN[0].TPID, vlan.Match.Mask.VLAN[0].TPID = 0x8100, 0xffff
	rules.Add(vlan)
	ip := Rule{Priority: 10, Actions: actions.List{{Kind: actions.Output, Port: 2}}}
	ip.Match.Key.EthType, ip.Match.Mask.EthType = 0x0800, 0xffff
	rules.Add(ip)

	pmd := dp.PMDs()[0]
	const rounds = 4
	for r := 0; r < rounds; r++ {
		// Sequence numbers 0 (plain), 1 (tunnel metadata), 2 (VLAN-tagged);
		// one 5-tuple for all three.
		in.Inject(0, udpFrame(0xc6120001, 0xc6120002, 1000, 2000, 0),
			udpFrame(0xc6120001, 0xc6120002, 1000, 2000, 1),
			vlanFrame(udpFrame(0xc6120001, 0xc6120002, 1000, 2000, 2)))
		pmd.PollOnce()
		pmd.PollOnce()
		for _, c := range []struct {
			port *ring.Port
			seq  uint32
			tag  bool
		}{{plain, 0, false}, {tunneled, 1, false}, {tagged, 2, true}} {
			fs := drain(c.port, 0)
			if len(fs) != 1 {
				t.Fatalf("round %d: %d frames on the port for sequence %d, want 1", r, len(fs), c.seq)
			}
			f := fs[0]
			if c.tag {
				f = append(append([]byte(nil), f[:12]...), f[16:]...)
			}
			if got := frameSeq(f); got != c.seq {
				t.Fatalf("round %d: sequence %d on the port for %d", r, got, c.seq)
			}
		}
	}
	pmd.local.publish(pmd.counters)
	st := dp.PMDStats()[0]
	if st.Misses != 3 || st.EMCHits != 3*(rounds-1) {
		t.Fatalf("%d upcalls and %d EMC hits; want 3 and %d", st.Misses, st.EMCHits, 3*(rounds-1))
	}
	checkNoLeaks(t, dp)
}

// TestFlowRunsKeepOrderAndCounts: a batch is executed by one of three
// paths (a one-flow batch output in one step, runs of flows that only
// output queued per run, anything else per packet); whichever a batch
// takes, every port must get its packets in arrival order and every
// megaflow must count exactly the packets and bytes it matched.
func TestFlowRunsKeepOrderAndCounts(t *testing.T) {
	rules := &RuleTable{}
	dp, err := New(Config{Manual: true, Upcall: rules, EMCInsertInvProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out2, out3 := ring.New("in", 1, 1, 256), ring.New("out2", 1, 1, 256), ring.New("out3", 1, 1, 256)
	dp.AddPort(1, in)
	dp.AddPort(2, out2)
	dp.AddPort(3, out3)
	// Destination .1 goes to 2, .2 to 3, .3 to both (not a sole output).
	dsts := map[uint32][]uint32{0xc6120001: {2}, 0xc6120002: {3}, 0xc6120003: {2, 3}}
	for dst, outs := range dsts {
		r := Rule{Priority: 10}
		r.Match.Key.EthType, r.Match.Mask.EthType = 0x0800, 0xffff
		r.Match.Key.IPv4Dst, r.Match.Mask.IPv4Dst = dst, ^uint32(0)
		for _, o := range outs {
			r.Actions = append(r.Actions, actions.OutputTo(o))
		}
		rules.Add(r)
	}
	pmd := dp.PMDs()[0]
	want := map[uint32][]uint32{} // port -> sequence numbers
	sent := map[uint32]uint64{}   // destination -> packets
	seq := uint32(0)
	batch := func(pattern ...uint32) {
		var fs [][]byte
		for _, d := range pattern {
			dst := 0xc6120000 | d
			fs = append(fs, udpFrame(0xc6130001, dst, 1000, 2000, seq))
			for _, o := range dsts[dst] {
				want[o] = append(want[o], seq)
			}
			sent[dst]++
			seq++
		}
		in.Inject(0, fs...)
		pmd.PollOnce()
	}
	same := make([]uint32, packet.BatchSize)
	for i := range same {
		same[i] = 1
	}
	batch(1, 1, 2, 3, 2, 1) // upcalls: the per-packet path
	batch(same...)          // one flow in the EMC: one step
	batch(1, 1, 2, 2, 1, 3, 3, 1, 2)
	batch(2, 3, 1)
	for i := range same {
		same[i] = 3
	}
	batch(same...) // one flow, two outputs
	pmd.PollOnce()
	for _, c := range []struct {
		no   uint32
		port *ring.Port
	}{{2, out2}, {3, out3}} {
		var got []uint32
		for _, f := range drain(c.port, 0) {
			got = append(got, frameSeq(f))
		}
		if len(got) != len(want[c.no]) {
			t.Fatalf("port %d: %d frames %v, want %v", c.no, len(got), got, want[c.no])
		}
		for i := range got {
			if got[i] != want[c.no][i] {
				t.Fatalf("port %d: frames %v, want %v", c.no, got, want[c.no])
			}
		}
	}
	if st := dp.PMDStats()[0]; st.EMCHits == 0 || st.Misses != 3 {
		t.Fatalf("stats %+v: want EMC hits and one upcall per flow", st)
	}
	for _, f := range dp.DumpFlows() {
		n := sent[f.Key.IPv4Dst]
		if f.Packets != n || f.Bytes != 60*n {
			t.Errorf("flow to %x counted %d packets %d bytes, want %d and %d", f.Key.IPv4Dst, f.Packets, f.Bytes, n, 60*n)
		}
	}
	checkNoLeaks(t, dp)
}

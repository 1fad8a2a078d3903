package datapath

import (
	"encoding/binary"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// TestCTAheadLargeTable: with a table large enough that the tracker
// reads ahead for a batch (and the PMD hands ct the tuples it parsed
// then), a stateful SNAT pipeline still commits every new connection
// once, with its own translation, and passes every packet of the
// established ones: ct(zone=1) and recirculate (executeCTRecirc's
// flow), then ct(commit,zone=1,nat(src=198.19.0.1:1024-65535)) and out
// of port 2 for +new (executeFlow's per-packet path), out of port 3
// for +est.
func TestCTAheadLargeTable(t *testing.T) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in := ring.New("in", 1, 1, 1024)
	o2, o3 := ring.New("o2", 1, 1, 1024), ring.New("o3", 1, 1, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, o2)
	dp.AddPort(3, o3)
	first := Rule{Priority: 100, Actions: actions.List{actions.CTAction(1, 0, 0, 0), actions.RecircAction(1)}}
	first.Match.Key.EthType, first.Match.Mask.EthType = 0x0800, 0xffff
	first.Match.Mask.RecircID = 0xffff
	rules.Add(first)
	second := func(state uint8, acts ...actions.Action) Rule {
		r := Rule{Priority: 50, Actions: acts}
		r.Match.Key.RecircID, r.Match.Mask.RecircID = 1, 0xffff
		r.Match.Key.CT.State = state
		r.Match.Mask.CT.State = flow.CTTracked | flow.CTNew | flow.CTEstablished
		return r
	}
	nat := actions.Action{Kind: actions.CTNAT, Val8: actions.CTNATSrc, Val16: 1024, Val16b: 65535,
		Addr: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 19, 15: 1}}
	rules.Add(second(flow.CTTracked|flow.CTNew, nat, actions.CTAction(1, actions.CTFlagCommit|actions.CTFlagNAT, 0, 0), actions.OutputTo(2)))
	rules.Add(second(flow.CTTracked|flow.CTEstablished, actions.OutputTo(3)))
	pmd := dp.PMDs()[0]
	const conns = 20_000 // past the tracker's read-ahead threshold (16,384)
	src := func(i int) uint32 { return 0xc6120000 | uint32(i) }
	var replies [][]byte
	send := func(from, to int) {
		for i := from; i < to; i += 32 {
			var fs [][]byte
			for j := i; j < min(i+32, to); j++ {
				if replies != nil {
					fs = append(fs, replies[j])
				} else {
					fs = append(fs, udpFrame(src(j), 0xc613ff01, uint16(1024+j%30000), 53, uint32(j)))
				}
			}
			if n := in.Inject(0, fs...); n != len(fs) {
				t.Fatalf("injected %d of %d", n, len(fs))
			}
			pmd.PollOnce()
		}
	}
	translated := map[uint64]uint32{}
	got2, got3 := 0, 0
	drainAll := func() {
		for _, f := range drain(o2, 0) {
			got2++
			k := uint64(binary.BigEndian.Uint32(f[26:]))<<16 | uint64(binary.BigEndian.Uint16(f[34:]))
			if k>>16 != 0xc6130001 {
				t.Fatalf("seq %d left from %#x, not translated", frameSeq(f), k>>16)
			}
			if s, dup := translated[k]; dup {
				t.Fatalf("seq %d and %d both translated to %#x (frame %d)", s, frameSeq(f), k, got2)
			}
			translated[k] = frameSeq(f)
		}
		got3 += len(drain(o3, 0))
	}
	for i := 0; i < conns; i += 512 {
		send(i, min(i+512, conns))
		drainAll()
	}
	if got2 != conns || got3 != 0 || dp.Conntrack().Len() != conns {
		t.Fatalf("new: %d out of port 2, %d of port 3, %d connections; want %d, 0, %d", got2, got3, dp.Conntrack().Len(), conns, conns)
	}
	// The replies, to the translated tuples, then the same tuples
	// again: established, every one (a UDP flow is +new until answered).
	for k := range translated {
		replies = append(replies, udpFrame(0xc613ff01, uint32(k>>16), 53, uint16(k), 0))
	}
	for round := range 2 {
		got2, got3 = 0, 0
		for i := 0; i < conns; i += 512 {
			send(i, min(i+512, conns))
			drainAll()
		}
		if got2 != 0 || got3 != conns || dp.Conntrack().Len() != conns {
			t.Fatalf("round %d: %d out of port 2, %d of port 3, %d connections; want 0, %d, %d", round, got2, got3, dp.Conntrack().Len(), conns, conns)
		}
		replies = nil
	}
}

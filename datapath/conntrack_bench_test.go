package datapath

import (
	"fmt"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// ctRules is the stateful pipeline of a security group as megaflow rules:
// every IPv4 packet goes through ct(zone=1) and recirculates; on its
// second pass an established one is output and a new one committed and
// output. With plain, one rule outputs every packet (the same pipeline
// without ct), for the cost comparison.
func ctRules(rules *RuleTable, out uint32, plain bool) {
	ip := Rule{Priority: 10}
	ip.Match.Key.EthType, ip.Match.Mask.EthType = 0x0800, 0xffff
	ip.Match.Mask.RecircID = 0xffff
	if plain {
		ip.Actions = actions.List{actions.OutputTo(out)}
		rules.Add(ip)
		return
	}
	ip.Actions = actions.List{actions.CTAction(1, 0, 0, 0), actions.RecircAction(1)}
	rules.Add(ip)
	est := Rule{Priority: 20, Actions: actions.List{actions.OutputTo(out)}}
	est.Match.Key.RecircID, est.Match.Mask.RecircID = 1, 0xffff
	est.Match.Key.CT.State = flow.CTTracked | flow.CTEstablished
	est.Match.Mask.CT.State = flow.CTTracked | flow.CTEstablished
	rules.Add(est)
	nw := Rule{Priority: 20, Actions: actions.List{actions.CTAction(1, actions.CTFlagCommit, 0, 0), actions.OutputTo(out)}}
	nw.Match.Key.RecircID, nw.Match.Mask.RecircID = 1, 0xffff
	nw.Match.Key.CT.State = flow.CTTracked | flow.CTNew
	nw.Match.Mask.CT.State = flow.CTTracked | flow.CTNew
	rules.Add(nw)
}

// BenchmarkConntrack: 64-byte UDP of conns established connections
// (after a first packet each that commits it, and a reply: a one-way UDP
// flow stays +new) through ct(zone=1) and a recirculation to a
// ct_state=+trk+est match, one manual-mode PMD; a burst of the
// connections' packets into ring port 1 and one of their replies into
// port 2 in turn, everything out of port 2. "plain" is the same frames
// through one output rule. One op is one packet.
func BenchmarkConntrack(b *testing.B) {
	for _, conns := range []int{1, 1000, 100000} {
		b.Run(fmt.Sprintf("conns=%d/established", conns), func(b *testing.B) { benchConntrack(b, conns, false) })
		b.Run(fmt.Sprintf("conns=%d/plain", conns), func(b *testing.B) { benchConntrack(b, conns, true) })
	}
}

func benchConntrack(b *testing.B, conns int, plain bool) {
	dp, pmd, in, out := ringBench(b, Config{FlowLimit: 1000}, func(r *RuleTable, out uint32) { ctRules(r, out, plain) })
	run := ringRunnerBoth(pmd, in, out, benchFrames(conns))
	run(max(3*2*conns, 100_000))
	if !plain && dp.Conntrack().Len() != int64(conns) {
		b.Fatalf("%d connections for %d flows", dp.Conntrack().Len(), conns)
	}
	st0 := dp.PMDStats()[0]
	b.ReportAllocs()
	cpu0 := processCPUNs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	reportCPU(b, cpu0)
	pmd.PollOnce()
	st := dp.PMDStats()[0]
	if st.Misses != st0.Misses {
		b.Fatalf("%d upcalls during the measurement", st.Misses-st0.Misses)
	}
	if st.Drops != st0.Drops {
		b.Fatalf("packets dropped during the measurement: %v then %v", st0.Drops, st.Drops)
	}
	reportRate(b)
}

// ringRunnerBoth is ringRunner with replies: a batch of frames into in,
// then a batch of their replies (addresses and ports swapped) into out,
// in turn; what out sends is discarded.
func ringRunnerBoth(pmd *PMD, in, out *ring.Port, frames [][]byte) func(n int) {
	replies := make([][]byte, len(frames))
	for i, f := range frames {
		r := append([]byte(nil), f...)
		copy(r[26:30], f[30:34]) // IPv4 source and destination (the checksum is their sum)
		copy(r[30:34], f[26:30])
		copy(r[34:36], f[36:38]) // UDP ports
		copy(r[36:38], f[34:36])
		replies[i] = r
	}
	batches := func(fs [][]byte) (bs [][][]byte) {
		for i := 0; i < len(fs); i += 32 {
			var bt [][]byte
			for j := i; j < i+32; j++ {
				bt = append(bt, fs[j%len(fs)])
			}
			bs = append(bs, bt)
		}
		return bs
	}
	ob, rb := batches(frames), batches(replies)
	return func(n int) {
		for done, i := 0, 0; done < n; i++ {
			in.Inject(0, ob[i%len(ob)]...)
			out.Inject(0, rb[i%len(rb)]...)
			for in.Pending(0) > 0 || out.Pending(0) > 0 {
				done += pmd.PollOnce()
			}
			out.Discard(0)
		}
	}
}

// BenchmarkConntrackNew: every packet a new connection (a tuple not seen
// before), through the same pipeline, committed on its second pass. One
// op is one packet and one connection; b.N is capped by the tuples
// (run it with -benchtime 400000x or fewer).
func BenchmarkConntrackNew(b *testing.B) {
	const tuples = 600_000
	if b.N > tuples {
		b.Skipf("b.N %d beyond the %d distinct tuples", b.N, tuples)
	}
	dp, pmd, in, out := ringBench(b, Config{FlowLimit: 1000}, func(r *RuleTable, out uint32) { ctRules(r, out, false) })
	frames := benchFrames(tuples)
	ringRunner(pmd, in, out, frames[tuples-1000:])(1000) // the megaflows
	run := ringRunner(pmd, in, out, frames[:tuples-1000])
	n0 := dp.Conntrack().Len()
	b.ReportAllocs()
	cpu0 := processCPUNs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	reportCPU(b, cpu0)
	if made := dp.Conntrack().Len() - n0; made < int64(b.N) {
		b.Fatalf("%d connections made for %d packets", made, b.N)
	}
	reportRate(b)
}

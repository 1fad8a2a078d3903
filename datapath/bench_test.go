package datapath

import (
	"fmt"
	"sync"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/netdev/null"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// benchRules installs ten rules with ten different masks (ipv4_src prefixes
// /8../17 under ipv4_dst /24s) and one never-matching rule on the UDP
// source port that every translation consults, so each of the flows that
// benchFrames makes gets a megaflow of its own, spread over ten subtables.
func benchRules(rules *RuleTable, out uint32) {
	never := Rule{Priority: 200, Actions: actions.List{{Kind: actions.Drop}}}
	never.Match.Key.TpSrc, never.Match.Mask.TpSrc = 0, 0xffff
	rules.Add(never)
	for i := 0; i < 10; i++ {
		r := Rule{Priority: 100 - i, Actions: actions.List{actions.OutputTo(out)}}
		r.Match.Key.EthType, r.Match.Mask.EthType = 0x0800, 0xffff
		r.Match.Key.IPv4Dst, r.Match.Mask.IPv4Dst = 0xc6120001|uint32(i)<<8, 0xffffff00
		r.Match.Key.IPv4Src, r.Match.Mask.IPv4Src = 0xc6130001, ^uint32(0)<<(24-i)
		rules.Add(r)
	}
}

// benchFrames makes n 64-byte UDP frames of n distinct flows: flow j goes
// to 198.18.(j%10).1 from source port 1024+j/10.
func benchFrames(n int) [][]byte {
	fs := make([][]byte, n)
	for j := range fs {
		fs[j] = udpFrame(0xc6130001, 0xc6120001|uint32(j%10)<<8, uint16(1024+j/10), 9, uint32(j))
	}
	return fs
}

func benchForward(b *testing.B, flows, flushUs int, emcOff bool) {
	dp, pmd, in, out := ringBench(b, Config{TxFlushInterval: flushUs, EMCOff: emcOff, FlowLimit: 2 * flows}, benchRules)
	run := ringRunner(pmd, in, out, benchFrames(flows))
	// Warm up: install every megaflow (and fill the EMC as far as its
	// insertion probability goes).
	run(max(3*flows, 100_000))
	if dp.FlowCount() != flows {
		b.Fatalf("%d megaflows installed for %d flows", dp.FlowCount(), flows)
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
	pkts := float64(st.RxPackets - st0.RxPackets)
	b.ReportMetric(float64(st.EMCHits-st0.EMCHits)/pkts*100, "%emc")
	reportRate(b)
	ps := dp.Port(2).TxStats()[0]
	b.ReportMetric(ps.AvgBatch(), "pkts/batch")
}

// ringBench makes a manual-mode datapath (cfg with Manual and the rule
// table set) with ring ports 1 (in) and 2 (out), closed when b ends, and
// install's rules towards port 2.
func ringBench(b *testing.B, cfg Config, install func(*RuleTable, uint32)) (*Datapath, *PMD, *ring.Port, *ring.Port) {
	rules := &RuleTable{}
	cfg.Manual, cfg.Upcall = true, rules
	dp, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 256), ring.New("out", 1, 1, 256)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	install(rules, 2)
	return dp, dp.PMDs()[0], in, out
}

// ringRunner returns a function that pushes n frames through pmd from
// ring port in to ring port out (discarded), in batches of 32 cycling
// through frames.
func ringRunner(pmd *PMD, in, out *ring.Port, frames [][]byte) func(n int) {
	batches := make([][][]byte, 0, (len(frames)+31)/32)
	for i := 0; i < len(frames); i += 32 {
		var bt [][]byte
		for j := i; j < i+32; j++ {
			bt = append(bt, frames[j%len(frames)])
		}
		batches = append(batches, bt)
	}
	return func(n int) {
		for done, i := 0, 0; done < n; i++ {
			in.Inject(0, batches[i%len(batches)]...)
			done += pmd.PollOnce()
			out.Discard(0)
		}
	}
}

// reportRate reports Mpps and ns/pkt for a benchmark whose op is one packet.
func reportRate(b *testing.B) {
	sec := b.Elapsed().Seconds()
	if sec > 0 {
		b.ReportMetric(float64(b.N)/sec/1e6, "Mpps")
		b.ReportMetric(sec*1e9/float64(b.N), "ns/pkt")
	}
}

// reportCPU reports the process CPU time per op since cpu0 (processCPUNs),
// the figure to compare on a loaded machine.
func reportCPU(b *testing.B, cpu0 int64) {
	if cpu0 != 0 && b.N > 0 {
		b.ReportMetric(float64(processCPUNs()-cpu0)/float64(b.N), "cpu-ns/pkt")
	}
}

// BenchmarkForward: one manual-mode PMD forwarding 64-byte UDP between two
// ring ports (the injection copy counts as the NIC's DMA). One op is one
// packet.
func BenchmarkForward(b *testing.B) {
	for _, flows := range []int{1, 1000, 100000} {
		b.Run(fmt.Sprintf("flows=%d", flows), func(b *testing.B) { benchForward(b, flows, 0, false) })
		b.Run(fmt.Sprintf("flows=%d/emc=off", flows), func(b *testing.B) { benchForward(b, flows, 0, true) })
	}
	b.Run("flush=50us", func(b *testing.B) { benchForward(b, 1, 50, false) })
	b.Run("null-ports", func(b *testing.B) { benchForwardNull(b, true, benchFrames(1)[0]) })
	b.Run("null-ports/parsed", func(b *testing.B) { benchForwardNull(b, false, benchFrames(1)[0]) })
	// A VLAN tag sends the frame through the general extractor.
	b.Run("null-ports/parsed-vlan", func(b *testing.B) { benchForwardNull(b, false, vlanFrame(benchFrames(1)[0])) })
}

// benchForwardNull forwards one flow (frame) between null ports: the source copies
// a template frame into each buffer, the sink only counts — the setting of
// OVS-DPDK's net_null figure (whose rx does not even copy). With simple
// the rule matches on in_port alone, so batches take the simple-match path;
// otherwise it also matches the Ethernet type, so every packet is parsed,
// hashed and looked up in the EMC.
func benchForwardNull(b *testing.B, simple bool, frame []byte) {
	rules := &RuleTable{}
	dp, _ := New(Config{Manual: true, Upcall: rules})
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	dp.AddPort(1, null.New("src", 1, 1, [][]byte{frame}))
	dp.AddPort(2, null.New("sink", 0, 1, nil))
	r := inPortRule(1, 1, 2)
	if !simple {
		r.Match.Key.EthType, r.Match.Mask.EthType = 0x0800, 0xffff
	}
	rules.Add(r)
	pmd := dp.PMDs()[0]
	for i := 0; i < 10000; i++ {
		pmd.PollOnce()
	}
	b.ReportAllocs()
	cpu0 := processCPUNs()
	b.ResetTimer()
	for n := 0; n < b.N; {
		n += pmd.PollOnce()
	}
	b.StopTimer()
	reportCPU(b, cpu0)
	reportRate(b)
}

// BenchmarkSharedTxq: two PMDs, each polling its own endless source, both
// sending to one port that has a single tx queue (shared under its lock).
// padded keeps per-PMD shared counters on their own cache lines; unpadded
// packs them, so every flush by one PMD invalidates the other's line. The
// lock and the queue are truly shared here, which limits what padding can
// win; BenchmarkSeparateTxqs isolates the false sharing.
func BenchmarkSharedTxq(b *testing.B) { benchTwoPMDs(b, 1) }

// BenchmarkSeparateTxqs: as BenchmarkSharedTxq, but the output port has a
// tx queue per PMD, so nothing is truly shared and any difference between
// padded and unpadded is false sharing alone.
func BenchmarkSeparateTxqs(b *testing.B) { benchTwoPMDs(b, 2) }

func benchTwoPMDs(b *testing.B, sinkTxqs int) {
	for _, packed := range []bool{false, true} {
		name := "padded"
		if packed {
			name = "unpadded"
		}
		b.Run(name, func(b *testing.B) {
			rules := &RuleTable{}
			dp, _ := New(Config{Manual: true, NumPMDs: 2, Upcall: rules, PackedSharedState: packed})
			defer dp.Close()
			rules.Invalidate = dp.InvalidateFlows
			frame := [][]byte{udpFrame(1, 2, 3, 4, 5)}
			dp.AddPort(1, null.New("src1", 1, 1, frame))
			dp.AddPort(2, null.New("src2", 1, 1, frame))
			dp.AddPort(3, null.New("sink", 0, sinkTxqs, nil))
			rules.Add(inPortRule(1, 1, 3))
			rules.Add(inPortRule(1, 2, 3))
			for _, p := range dp.PMDs() {
				for i := 0; i < 1000; i++ {
					p.PollOnce()
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for _, p := range dp.PMDs() {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 0; n < b.N/2; {
						n += p.PollOnce()
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			reportRate(b)
		})
	}
}

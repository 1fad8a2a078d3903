package ofproto

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// benchDst is the IPv4 destination of benchmark rule i: 198.x.y.z counting
// up from 198.18.0.0, so that 100,000 rules stay distinct.
func benchDst(i int) uint32 { return 0xc6120000 + uint32(i) }

// benchRuleMod is in_port=1,ip,nw_dst=benchDst(i),actions=output:2 in
// table tid. Each call builds its own match and instructions, as a decoded
// message would have.
func benchRuleMod(tid uint8, i int) *ofpwire.FlowMod {
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: tid, Priority: 100, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny,
		Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{
			Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}}}}
	fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, 1))
	fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x0800))
	fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeIPv4Dst, uint64(benchDst(i))))
	return fm
}

// benchGotoMod is in_port=1,ip,actions=goto_table:tid+1 in table tid.
func benchGotoMod(tid uint8) *ofpwire.FlowMod {
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: tid, Priority: 10, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny,
		Instructions: []ofpwire.Instruction{&ofpwire.InstrGotoTable{TableID: tid + 1}}}
	fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, 1))
	fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeEthType, 0x0800))
	return fm
}

// installBenchRules fills p with a goto chain through tables 0..tables-2
// and the rules rules in the last table, so that a packet to benchDst(i)
// visits every table.
func installBenchRules(b testing.TB, p *pipeline.Pipeline, rules, tables int) {
	b.Helper()
	now := time.Now()
	for t := 0; t < tables-1; t++ {
		if _, err := p.Apply(benchGotoMod(uint8(t)), now); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < rules; i++ {
		if _, err := p.Apply(benchRuleMod(uint8(tables-1), i), now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlowMod: adding distinct flows straight into a pipeline. One op
// is one flow; the table grows to b.N entries.
func BenchmarkFlowMod(b *testing.B) {
	fms := make([]*ofpwire.FlowMod, b.N)
	for i := range fms {
		fms[i] = benchRuleMod(0, i)
	}
	p := pipeline.New(0)
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Apply(fms[i], now); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportPerSec(b, "flows/s")
}

// BenchmarkFlowModWire: the same flows as encoded FLOW_MOD messages, each
// framed, decoded and handed to a bridge's Handle (group checks, Apply and
// the datapath megaflow invalidation every change triggers). The socket and
// the ofconn read loop are not included.
func BenchmarkFlowModWire(b *testing.B) {
	_, br := benchBridge(b, 0)
	raws := make([][]byte, b.N)
	for i := range raws {
		raw, err := ofpwire.Encode(uint32(i), benchRuleMod(0, i))
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = raw
	}
	buf := make([]byte, 1<<16)
	var rd bytes.Reader
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rd.Reset(raws[i])
		h, raw, err := ofpwire.ReadMessage(&rd, buf)
		if err != nil {
			b.Fatal(err)
		}
		msg, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		if err != nil {
			b.Fatal(err)
		}
		if err := br.Handle(nil, h.Transaction, msg); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	f := pipeline.AnyFilter()
	if fl, err := br.Pipeline().Flows(&f); err != nil || len(fl) != b.N {
		b.Fatalf("%d flows installed for %d flow-mods (%v)", len(fl), b.N, err)
	}
	reportPerSec(b, "flows/s")
}

// reportPerSec reports b.N ops per second under unit.
func reportPerSec(b *testing.B, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// BenchmarkTranslate: one upcall's translation (the datapath's miss path
// minus the megaflow install) over rules exact-match rules in the last of
// tables tables, random keys that hit a rule. One op is one upcall.
func BenchmarkTranslate(b *testing.B) {
	for _, rules := range []int{1, 100, 10000} {
		for _, tables := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("rules=%d/tables=%d", rules, tables), func(b *testing.B) {
				p := pipeline.New(0)
				installBenchRules(b, p, rules, tables)
				keys := make([]flow.Key, 4096)
				rng := rand.New(rand.NewPCG(1, 2))
				for i := range keys {
					keys[i] = flow.Key{InPort: 1, EthType: 0x0800, NwProto: 17, NwTTL: 64,
						IPv4Src: 0xc6130001, IPv4Dst: benchDst(rng.IntN(rules)), TpSrc: 1000, TpDst: 2000}
				}
				opts := xlate.Options{Ports: []uint32{1, 2}}
				var res datapath.UpcallResult
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := xlate.Translate(p, &keys[i%len(keys)], &res, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if len(res.Actions) != 1 || res.Actions[0].Port != 2 {
					b.Fatalf("translation gave %+v, want output:2", res.Actions)
				}
				reportPerSec(b, "upcalls/s")
			})
		}
	}
}

// BenchmarkMemoryPerRule: live heap growth per installed rule at 100,000
// rules, the flow-mods built inside the measurement so whatever the
// pipeline keeps of them counts. Run with -benchtime=1x: each op installs
// all the rules.
func BenchmarkMemoryPerRule(b *testing.B) {
	const rules = 100_000
	var perRule float64
	for n := 0; n < b.N; n++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		p := pipeline.New(0)
		now := time.Now()
		for i := 0; i < rules; i++ {
			if _, err := p.Apply(benchRuleMod(0, i), now); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perRule = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / rules
		runtime.KeepAlive(p)
	}
	b.ReportMetric(perRule, "B/rule")
}

// benchBridge builds a Manual-mode datapath with ring ports 1 and 2 and a
// bridge over it with no OpenFlow connections. flowLimit 0 keeps the
// datapath's default.
func benchBridge(b testing.TB, flowLimit int) (*datapath.Datapath, *Bridge) {
	b.Helper()
	up := &UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up, FlowLimit: flowLimit})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { dp.Close() })
	if _, err := dp.AddPort(1, ring.New("in", 1, 1, 256)); err != nil {
		b.Fatal(err)
	}
	if _, err := dp.AddPort(2, ring.New("out", 1, 1, 256)); err != nil {
		b.Fatal(err)
	}
	br, err := NewBridge("br0", dp, BridgeConfig{Upcall: up, Conn: ofconn.Config{ProbeInterval: -1}, FailMode: FailSecure})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(br.Close)
	return dp, br
}

// BenchmarkForwardRules: one manual-mode PMD forwarding 64-byte UDP between
// ring ports under a bridge whose tables hold rules rules behind a goto
// chain of tables tables; the traffic cycles over one flow per rule, and
// every megaflow is installed before the measurement. One op is one packet.
func BenchmarkForwardRules(b *testing.B) {
	for _, rules := range []int{1, 100, 10000} {
		for _, tables := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("rules=%d/tables=%d", rules, tables), func(b *testing.B) {
				benchForwardRules(b, rules, tables)
			})
		}
	}
}

func benchForwardRules(b *testing.B, rules, tables int) {
	dp, br := benchBridge(b, 2*rules+100)
	installBenchRules(b, br.Pipeline(), rules, tables)
	in, out := dp.Port(1).Dev.(*ring.Port), dp.Port(2).Dev.(*ring.Port)
	src, dst := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	frames := make([][]byte, rules)
	for i := range frames {
		d := benchDst(i)
		frames[i] = nstest.UDPFrame(dst, src, net.IPv4(198, 19, 0, 1),
			net.IPv4(byte(d>>24), byte(d>>16), byte(d>>8), byte(d)), 1000, 2000)
	}
	batches := make([][][]byte, 0, (rules+31)/32)
	for i := 0; i < rules; i += 32 {
		bt := make([][]byte, 32)
		for j := range bt {
			bt[j] = frames[(i+j)%rules]
		}
		batches = append(batches, bt)
	}
	pmd := dp.PMDs()[0]
	run := func(n int) {
		for done, i := 0, 0; done < n; i++ {
			in.Inject(0, batches[i%len(batches)]...)
			done += pmd.PollOnce()
			out.Discard(0)
		}
	}
	run(max(3*rules, 100_000))
	if dp.FlowCount() != rules {
		b.Fatalf("%d megaflows installed for %d flows", dp.FlowCount(), rules)
	}
	st0 := dp.PMDStats()[0]
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	st := dp.PMDStats()[0]
	pkts := float64(st.RxPackets - st0.RxPackets)
	b.ReportMetric(float64(st.EMCHits-st0.EMCHits)/pkts*100, "%emc")
	// The bridge's once-a-second housekeeping may invalidate megaflows
	// (first link-state sample), so a few upcalls can land in a run.
	b.ReportMetric(float64(st.Misses-st0.Misses), "upcalls")
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec/1e6, "Mpps")
	b.ReportMetric(sec*1e9/float64(b.N), "ns/pkt")
}

// oneRuleUpcall is a bridge with a one-rule table and a key the rule
// matches (output:2).
func oneRuleUpcall(tb testing.TB) (*Bridge, flow.Key) {
	_, br := benchBridge(tb, 1000)
	installBenchRules(tb, br.Pipeline(), 1, 1)
	return br, flow.Key{InPort: 1, EthType: 0x0800, NwProto: 17, NwTTL: 64,
		IPv4Src: 0xc6130001, IPv4Dst: benchDst(0), TpSrc: 1000, TpDst: 2000}
}

// BenchmarkBridgeUpcall: one upcall through Bridge.Upcall (the bridge's
// translation options, port view and fail-open check around xlate) for a
// one-rule table. One op is one upcall.
func BenchmarkBridgeUpcall(b *testing.B) {
	br, key := oneRuleUpcall(b)
	var res datapath.UpcallResult
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := br.Upcall(&key, &res); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if len(res.Actions) != 1 || res.Actions[0].Port != 2 {
		b.Fatalf("translation gave %+v, want output:2", res.Actions)
	}
	reportPerSec(b, "upcalls/s")
}

// TestBridgeUpcallDoesNotAllocate: past its first upcall on a PMD's
// result, Bridge.Upcall allocates nothing for a table without learn
// actions (the learn hook is the result's scratch, not a closure per
// upcall).
func TestBridgeUpcallDoesNotAllocate(t *testing.T) {
	br, key := oneRuleUpcall(t)
	var res datapath.UpcallResult
	upcall := func() {
		if err := br.Upcall(&key, &res); err != nil {
			t.Fatal(err)
		}
	}
	upcall()
	if n := testing.AllocsPerRun(200, upcall); n != 0 {
		t.Errorf("%v allocations per upcall", n)
	}
}

// BenchmarkBundleCommit commits 100,000 flow-mods (in_port,ip,nw_dst,
// output) in one bundle into an empty bridge: what `ovs-ofctl --bundle
// add-flows` of bench/bundles' simple set costs inside the switch, without
// the wire and the journal. One op is one commit.
func BenchmarkBundleCommit(b *testing.B) {
	const n = 100_000
	msgs := make([]ofpwire.Message, n)
	for i := range msgs {
		msgs[i] = benchRuleMod(0, i)
	}
	benchCommitBundle(b, msgs)
}

// benchCommitBundle commits msgs in one bundle into a fresh bridge per op
// and reports the time per flow.
func benchCommitBundle(b *testing.B, msgs []ofpwire.Message) {
	for b.Loop() {
		b.StopTimer()
		_, br := benchBridge(b, 0)
		b.StartTimer()
		if failed, err := br.CommitBundle(msgs); err != nil {
			b.Fatalf("message %d: %v", failed, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/flow")
}

// ovnTestFlows returns the flow-mods of the OVN-shaped pipeline in
// xlate/testdata (10,007 ADDs).
func ovnTestFlows(b testing.TB) []*ofpwire.FlowMod {
	b.Helper()
	f, err := os.Open("xlate/testdata/ovnpipe-flows.txt.gz")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	var fms []*ofpwire.FlowMod
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			fm, err := ofptext.ParseFlow(line, ofptext.Add)
			if err != nil {
				b.Fatal(err)
			}
			fms = append(fms, fm)
		}
	}
	return fms
}

// BenchmarkDecodeFlowModOVN decodes the OVN-shaped pipeline's 10,007
// flow-mods as OpenFlow 1.5 sends them (what a bundle's adds carry).
// One op is all of them.
func BenchmarkDecodeFlowModOVN(b *testing.B) {
	var msgs [][]byte
	for i, fm := range ovnTestFlows(b) {
		m, err := ofpwire.EncodeIn(ofpwire.Version15, uint32(i), fm)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, m := range msgs {
			h := ofpwire.ParseHeader(m)
			if _, err := ofpwire.Decode(h, m[ofpwire.HeaderLen:]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/flow")
}

// BenchmarkBundleCommitOVN commits the 10,007 flows of the OVN-shaped
// pipeline in xlate/testdata (31 tables, registers, metadata,
// conjunctions: many subtables a table, unlike BenchmarkBundleCommit's
// one) in one bundle into an empty bridge. One op is one commit.
func BenchmarkBundleCommitOVN(b *testing.B) {
	var msgs []ofpwire.Message
	for _, fm := range ovnTestFlows(b) {
		msgs = append(msgs, fm)
	}
	for b.Loop() {
		b.StopTimer()
		_, br := benchBridge(b, 0)
		b.StartTimer()
		if failed, err := br.CommitBundle(msgs); err != nil {
			b.Fatalf("message %d: %v", failed, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/flow")
}

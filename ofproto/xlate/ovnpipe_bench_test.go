package xlate

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// ovnPipe loads issue 27's OVN-shaped pipeline: testdata/ovnpipe-flows.txt.gz
// is `go run ./bench/ovnpipe gen -seed 27` (10,007 flows: 31 tables chained
// by resubmit, registers loaded, moved and matched, a 100 x 100
// conjunction), so this package's benchmark walks what bench/ovnpipe's
// upcall pass walks, without the datapath around it.
func ovnPipe(tb testing.TB) *pipeline.Pipeline {
	tb.Helper()
	f, err := os.Open("testdata/ovnpipe-flows.txt.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	p := pipeline.New(0)
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		fm, err := ofptext.ParseFlow(line, ofptext.Add)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := p.Apply(fm, t0); err != nil {
			tb.Fatalf("%s: %v", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return p
}

// ovnPipeKeys returns n keys of the generator's packets' shape: port 1's
// MACs, TCP or UDP, distinct address pairs, every other one inside the
// conjunction's address sets (198.18.1.1-100 -> 198.18.2.1-100).
func ovnPipeKeys(n int) []flow.Key {
	keys := make([]flow.Key, n)
	for i := range keys {
		k := flow.Key{InPort: 1, EthType: 0x0800, NwProto: 6, NwTTL: 64,
			EthSrc: [6]byte{0x02, 0x00, 0xc6, 0x12, 0x00, 0x01},
			EthDst: [6]byte{0x02, 0x00, 0xc6, 0x12, 0x00, 0x02},
			TpSrc:  uint16(1024 + i), TpDst: []uint16{80, 443, 53, 8080, 5001}[i%5]}
		if i%3 == 0 {
			k.NwProto = 17
		}
		j := i / 2
		if i%2 == 0 {
			k.IPv4Src, k.IPv4Dst = 0xc6120100|uint32(1+j%100), 0xc6120200|uint32(1+j/100%100)
		} else {
			k.IPv4Src, k.IPv4Dst = 0xc6120400|uint32(j%256), 0xc6120500|uint32(j/256%256)
		}
		keys[i] = k
	}
	return keys
}

// BenchmarkTranslateOVNPipe is one upcall's translation through the
// OVN-shaped pipeline (issue 27's target: at least twice Open vSwitch's
// rate): every packet reaches the output table and leaves by port 2.
func BenchmarkTranslateOVNPipe(b *testing.B) {
	p := ovnPipe(b)
	keys := ovnPipeKeys(1024)
	var res datapath.UpcallResult
	for i := range keys {
		if err := Translate(p, &keys[i], &res, Options{}); err != nil {
			b.Fatal(err)
		}
		if len(res.Actions) != 1 {
			b.Fatalf("packet %d: actions %+v, want one output", i, res.Actions)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Translate(p, &keys[i%len(keys)], &res, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTranslateOVNPipeDoesNotAllocate holds the OVN-shaped pipeline's
// upcall to no allocation: registers, the stack, conjunctions and moves
// out of packet fields included.
func TestTranslateOVNPipeDoesNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 10,007 flows")
	}
	p := ovnPipe(t)
	keys := ovnPipeKeys(64)
	var res datapath.UpcallResult
	i := 0
	translate := func() {
		if err := Translate(p, &keys[i%len(keys)], &res, Options{}); err != nil {
			t.Fatal(err)
		}
		i++
	}
	for range keys { // each logical path's lookup path is made once
		translate()
	}
	if n := testing.AllocsPerRun(200, translate); n != 0 {
		t.Errorf("%v allocations per translation", n)
	}
}

// TestOVNPipeLookupPathStats: a translation lists its table lookups as one
// sink (a lookup path shared by the translations that looked up the same
// tables with the same outcomes), and the packets pushed to the refs count
// in each table exactly as the lookups a trace of the same packet shows:
// every step a lookup, a match unless it found no entry or the table-miss
// entry.
func TestOVNPipeLookupPathStats(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 10,007 flows")
	}
	p := ovnPipe(t)
	keys := ovnPipeKeys(300)
	var want [pipeline.NumTables]pipeline.TableStats
	var before [pipeline.NumTables]pipeline.TableStats
	for tid := range uint8(pipeline.NumTables) {
		before[tid] = p.TableStats(tid)
	}
	var res datapath.UpcallResult
	for i := range keys {
		tr, err := TranslateTrace(p, &keys[i], Options{})
		if err != nil {
			t.Fatal(err)
		}
		pk := uint64(1 + i%7)
		entries := 0
		for _, st := range tr.Steps {
			want[st.Table].Lookups += pk
			if st.Matched {
				entries++
				if st.Priority != 0 || st.Match != "" {
					want[st.Table].Matched += pk
				}
			}
		}
		if err := Translate(p, &keys[i], &res, Options{}); err != nil {
			t.Fatal(err)
		}
		if len(tr.Steps) < 20 || len(res.Refs) != entries+1 {
			t.Fatalf("packet %d: %d refs for %d lookups finding %d entries, want the entries and one path",
				i, len(res.Refs), len(tr.Steps), entries)
		}
		for _, r := range res.Refs {
			r.Touch(t0, pk, 100*pk)
		}
	}
	for tid := range uint8(pipeline.NumTables) {
		got := p.TableStats(tid)
		got.Lookups -= before[tid].Lookups
		got.Matched -= before[tid].Matched
		if got.Lookups != want[tid].Lookups || got.Matched != want[tid].Matched {
			t.Errorf("table %d: %d lookups %d matched, the traces say %d and %d",
				tid, got.Lookups, got.Matched, want[tid].Lookups, want[tid].Matched)
		}
	}
}

// TestLookupPathOverflow: a walk of more lookups than a path holds (81
// tables chained by goto_table, then a resubmit to an empty table) lists
// the lookups past the path's capacity one sink each; every table still
// counts each packet once, and the empty table as looked up, not matched.
func TestLookupPathOverflow(t *testing.T) {
	p := pipeline.New(0)
	var lines []string
	for tid := 0; tid < 80; tid++ {
		lines = append(lines, fmt.Sprintf("table=%d,priority=1,actions=goto_table:%d", tid, tid+1))
	}
	lines = append(lines, "table=80,priority=1,actions=resubmit(,90),output:2")
	for _, line := range lines {
		fm, err := ofptext.ParseFlow(line, ofptext.Add)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Apply(fm, t0); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	var res datapath.UpcallResult
	key := flow.Key{InPort: 1, EthType: 0x0800}
	if err := Translate(p, &key, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != 1 || res.Actions[0].Port != 2 {
		t.Fatalf("actions %+v, want output:2", res.Actions)
	}
	// 81 entries, one path of 64 lookups, 18 lookups on their own.
	if len(res.Refs) != 81+1+18 {
		t.Fatalf("%d refs, want 100", len(res.Refs))
	}
	for _, r := range res.Refs {
		r.Touch(t0, 3, 300)
	}
	for tid := range uint8(91) {
		want := pipeline.TableStats{}
		switch {
		case tid <= 80:
			want = pipeline.TableStats{Active: 1, Lookups: 3, Matched: 3}
		case tid == 90:
			want = pipeline.TableStats{Lookups: 3}
		}
		if got := p.TableStats(tid); got != want {
			t.Errorf("table %d: %+v, want %+v", tid, got, want)
		}
	}
}

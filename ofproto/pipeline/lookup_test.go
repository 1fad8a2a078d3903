package pipeline

import (
	"maps"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

var (
	propPorts = []uint32{0, 1, 2, 3}
	propTypes = []uint16{0x0800, 0x86dd}
	propAddrs = []uint32{0x0a000001, 0x0a000101, 0x0a010001, 0x0b000001}
	propTp    = []uint16{0, 1, 2, 3}
	propMeta  = []uint64{0, 1, 2, 3, 0x10, 0x11, 0x12, 0x13}
	propRegs  = []uint32{0, 1, 0x10000, 0x10001}
)

// randKey draws a key from the small value sets the random entries match
// on, with noise in a field no entry matches, and pipeline state (metadata,
// reg0 and reg7) likewise.
func randKey(r *rand.Rand) (flow.Key, ofmatch.Pipe) {
	var k flow.Key
	k.InPort = propPorts[r.Intn(len(propPorts))]
	k.EthType = propTypes[r.Intn(len(propTypes))]
	k.IPv4Src = propAddrs[r.Intn(len(propAddrs))]
	k.TpDst = propTp[r.Intn(len(propTp))]
	k.TCPFlags = uint16(r.Intn(4096))
	var p ofmatch.Pipe
	p.Metadata = propMeta[r.Intn(len(propMeta))]
	p.Regs[0] = propRegs[r.Intn(len(propRegs))]
	p.Regs[7] = propRegs[r.Intn(len(propRegs))]
	p.Regs[3] = r.Uint32()
	return k, p
}

// randMatch builds a match on a random subset of fields with random masks
// (a handful of distinct mask shapes), taking values from a random key.
func randMatch(r *rand.Rand) ofmatch.Match {
	k, md := randKey(r)
	var m ofmatch.Match
	if r.Intn(2) == 0 {
		m.Mask.InPort = ^uint32(0)
	}
	if r.Intn(3) == 0 {
		m.Mask.EthType = 0xffff
	}
	switch r.Intn(4) {
	case 1:
		m.Mask.IPv4Src = 0xff000000
	case 2:
		m.Mask.IPv4Src = 0xffff0000
	case 3:
		m.Mask.IPv4Src = 0xffffffff
	}
	if r.Intn(3) == 0 {
		m.Mask.TpDst = 0xffff
	}
	switch r.Intn(3) {
	case 1:
		m.PipeMask.Metadata = 0xf0
	case 2:
		m.PipeMask.Metadata = 0xff
	}
	switch r.Intn(3) {
	case 1:
		m.PipeMask.Regs[0] = 0xffff
	case 2:
		m.PipeMask.Regs[0] = 0xffffffff
	}
	if r.Intn(3) == 0 {
		m.PipeMask.Regs[7] = 0xffff0000
	}
	k.ApplyMask(&m.Mask, &m.Key)
	m.Pipe = md.And(&m.PipeMask)
	return m
}

// bruteForce is the reference: the best priority of any matching entry.
func bruteForce(es []*Entry, k *flow.Key, md ofmatch.Pipe) (int, bool) {
	best, found := -1, false
	for _, e := range es {
		if matches(e, k, &md) && int(e.Priority) > best {
			best, found = int(e.Priority), true
		}
	}
	return best, found
}

func mixUnder(k *flow.Key, md ofmatch.Pipe, wc *flow.Mask, wcm ofmatch.Pipe, r *flow.Key, rmd ofmatch.Pipe) (flow.Key, ofmatch.Pipe) {
	var out flow.Key
	a, b, w, o := k.Words(), r.Words(), wc.Words(), out.Words()
	for i := range o {
		o[i] = a[i]&w[i] | b[i]&^w[i]
	}
	p := ofmatch.Pipe{Metadata: md.Metadata&wcm.Metadata | rmd.Metadata&^wcm.Metadata}
	for i := range p.Regs {
		p.Regs[i] = md.Regs[i]&wcm.Regs[i] | rmd.Regs[i]&^wcm.Regs[i]
	}
	return out, p
}

func TestLookupMatchesBruteForce(t *testing.T) {
	t.Run("compact", testLookupMatchesBruteForce)
	// Every subtable on the wide path (bucketKey), as masks of more
	// than compactWords words are.
	t.Run("wide", func(t *testing.T) {
		defer func(l int) { compactLimit = l }(compactLimit)
		compactLimit = -1
		testLookupMatchesBruteForce(t)
	})
}

func testLookupMatchesBruteForce(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		r := rand.New(rand.NewSource(seed))
		p := New(0)
		tb := &p.tables[0]
		var es []*Entry
		n := 1 + r.Intn(200)
		for i := 0; i < n; i++ {
			m := randMatch(r)
			prio := uint16(r.Intn(12))
			if tb.findStrict(&m, prio) != nil {
				continue
			}
			e := &Entry{Priority: prio}
			tb.insert(e, &m)
			es = append(es, e)
			// Removals keep subtable priorities and order honest.
			if len(es) > 3 && r.Intn(5) == 0 {
				j := r.Intn(len(es))
				tb.remove(es[j])
				es = append(es[:j], es[j+1:]...)
			}
		}
		if tb.count != len(es) {
			t.Fatalf("seed %d: count %d, want %d", seed, tb.count, len(es))
		}
		for i := 1; i < len(tb.subs); i++ {
			if tb.subs[i-1].maxPrio < tb.subs[i].maxPrio {
				t.Fatalf("seed %d: subtables out of order", seed)
			}
		}
		for q := 0; q < 300; q++ {
			k, md := randKey(r)
			var wc flow.Mask
			var wcm ofmatch.Pipe
			got := p.Lookup(0, &k, &md, &wc, &wcm)
			// PeekWords finds the same entry and names every word of
			// the wildcards it set.
			var wc2 flow.Mask
			e2, touched := p.PeekWords(0, &k, &md, &wc2)
			if e2 != got || wc2 != wc {
				t.Fatalf("seed %d: PeekWords %v/%+v, Lookup %v/%+v", seed, e2, wc2, got, wc)
			}
			for i, w := range wc2.Words() {
				if w != 0 && touched&(1<<i) == 0 {
					t.Fatalf("seed %d: word %d of the wildcards set but not reported", seed, i)
				}
			}
			want, found := bruteForce(es, &k, md)
			if (got != nil) != found || got != nil && int(got.Priority) != want {
				t.Fatalf("seed %d: lookup %+v, brute force prio %d found %v", seed, got, want, found)
			}
			if got != nil && !matches(got, &k, &md) {
				t.Fatalf("seed %d: returned entry does not match", seed)
			}
			for j := 0; j < 20; j++ {
				rk, rmd := randKey(r)
				k2, md2 := mixUnder(&k, md, &wc, wcm, &rk, rmd)
				want2, found2 := bruteForce(es, &k2, md2)
				if found2 != found || found && want2 != want {
					t.Fatalf("seed %d: wildcards unsound: key agreeing under wc gets prio %d/%v, not %d/%v",
						seed, want2, found2, want, found)
				}
				if got != nil && !matches(got, &k2, &md2) {
					t.Fatalf("seed %d: entry does not match a key agreeing under wc", seed)
				}
				if got2 := p.Lookup(0, &k2, &md2, nil, nil); got2 != got {
					t.Fatalf("seed %d: key agreeing under wc gets another entry", seed)
				}
			}
		}
	}
}

// TestLookupStopsEarly checks the wildcard economy: a high-priority hit
// does not pull in the masks of subtables that cannot beat it.
func TestLookupStopsEarly(t *testing.T) {
	p := New(0)
	mustApply(t, p, add(match(inPort(1)), 100, nil))
	mustApply(t, p, add(match(ipv4, oxm(ofpwire.XMTypeIPv4Src, 5)), 10, nil))
	var wc flow.Mask
	if e := p.Lookup(0, keyInPort(1), &ofmatch.Pipe{}, &wc, nil); e == nil || e.Priority != 100 {
		t.Fatalf("got %+v", e)
	}
	if wc.IPv4Src != 0 || wc.EthType != 0 || wc.InPort != ^uint32(0) {
		t.Fatalf("wildcards %+v", wc)
	}
	wc = flow.Mask{}
	k := flow.Key{InPort: 2, EthType: 0x0800, IPv4Src: 5}
	if e := p.Lookup(0, &k, &ofmatch.Pipe{}, &wc, nil); e == nil || e.Priority != 10 {
		t.Fatalf("got %+v", e)
	}
	if wc.IPv4Src != ^uint32(0) || wc.InPort != ^uint32(0) {
		t.Fatalf("miss of the first subtable must still be in the wildcards: %+v", wc)
	}
}

func TestConcurrentReadersAndWriters(t *testing.T) {
	p := New(0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(g)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				k, md := randKey(r)
				var wc flow.Mask
				p.RLock()
				e0 := p.LookupLocked(0, &k, &md, &wc, nil)
				p.LookupLocked(1, &k, &md, &wc, nil)
				p.RUnlock()
				if e := p.Lookup(0, &k, &md, nil, nil); e != nil {
					_ = len(e.Instructions())
					e.Touch(time.Now(), 1, 64)
				}
				_ = e0
				p.TableStats(0)
			}
		}(g)
	}
	r := rand.New(rand.NewSource(99))
	for i := 0; i < 2000; i++ {
		port := uint64(r.Intn(4))
		switch r.Intn(4) {
		case 0, 1:
			fm := add(match(inPort(port)), uint16(r.Intn(3)), output(ofpwire.PortNo(i)))
			fm.IdleTimeout = 1
			if _, err := p.Apply(fm, t0); err != nil {
				t.Fatal(err)
			}
		case 2:
			fm := &ofpwire.FlowMod{Command: ofpwire.FlowModify, Match: match(inPort(port)), Instructions: output(1)}
			if _, err := p.Apply(fm, t0); err != nil {
				t.Fatal(err)
			}
		case 3:
			fm := &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: TableAll, Match: match(inPort(port)), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
			if _, err := p.Apply(fm, t0); err != nil {
				t.Fatal(err)
			}
		}
		if i%100 == 0 {
			p.Expire(t0.Add(time.Hour * 24 * 365 * 100))
		}
	}
	close(stop)
	wg.Wait()
}

// benchPipeline fills table 0 with n entries spread over 8 mask shapes,
// each shape in its own priority band.
func benchPipeline(b *testing.B, n int) (*Pipeline, []flow.Key) {
	p := New(0)
	tb := &p.tables[0]
	r := rand.New(rand.NewSource(1))
	var keys []flow.Key
	for i := 0; i < n; i++ {
		shape := i % 8
		var k flow.Key
		k.InPort = uint32(r.Intn(64))
		k.EthType = 0x0800
		k.IPv4Src = r.Uint32()
		k.IPv4Dst = r.Uint32()
		k.TpDst = uint16(r.Intn(65536))
		keys = append(keys, k)
		var m ofmatch.Match
		m.Mask.EthType = 0xffff
		switch shape {
		case 0:
			m.Mask.InPort = ^uint32(0)
			m.Mask.TpDst = 0xffff
		case 1:
			m.Mask.IPv4Src = 0xffffffff
		case 2:
			m.Mask.IPv4Src = 0xffffff00
		case 3:
			m.Mask.IPv4Src = 0xffff0000
			m.Mask.TpDst = 0xffff
		case 4:
			m.Mask.IPv4Dst = 0xffffffff
		case 5:
			m.Mask.IPv4Dst = 0xffffff00
			m.Mask.InPort = ^uint32(0)
		case 6:
			m.Mask.IPv4Src, m.Mask.IPv4Dst = 0xffffffff, 0xffffffff
		case 7:
			m.Mask.TpDst = 0xffff
			m.Mask.IPv4Dst = 0xff000000
		}
		k.ApplyMask(&m.Mask, &m.Key)
		prio := uint16(shape*100 + r.Intn(100))
		if tb.findStrict(&m, prio) == nil {
			tb.insert(&Entry{Priority: prio}, &m)
		}
	}
	if len(tb.subs) != 8 {
		b.Fatalf("%d subtables", len(tb.subs))
	}
	return p, keys
}

func BenchmarkLookup10k8Masks(b *testing.B) {
	p, keys := benchPipeline(b, 10000)
	var wc flow.Mask
	var wcm ofmatch.Pipe
	hits := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := &keys[i%len(keys)]
		if p.Lookup(0, k, &ofmatch.Pipe{}, &wc, &wcm) != nil {
			hits++
		}
	}
	if hits != b.N {
		b.Fatalf("%d hits of %d", hits, b.N)
	}
}

func BenchmarkLookup10k8MasksMiss(b *testing.B) {
	p, _ := benchPipeline(b, 10000)
	k := flow.Key{EthType: 0x86dd}
	var wc flow.Mask
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if p.Lookup(0, &k, &ofmatch.Pipe{}, &wc, nil) != nil {
			b.Fatal("hit")
		}
	}
}

func BenchmarkAdd(b *testing.B) {
	p := New(0)
	fms := make([]*ofpwire.FlowMod, b.N)
	for i := range fms {
		fms[i] = add(match(ipv4, oxm(ofpwire.XMTypeIPv4Src, uint64(i))), uint16(i%7), nil)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Apply(fms[i], t0); err != nil {
			b.Fatal(err)
		}
	}
}

// matches reports whether entry e matches a packet of key k and pipeline
// state md.
func matches(e *Entry, k *flow.Key, md *ofmatch.Pipe) bool {
	m := e.Match()
	return m.Matches(k, md)
}

// TestReplaceInPlace: an entry added over one of the same match and
// priority takes its place in its bucket (locate, then place). Against a
// model of the table: the entries, their matches as Match gives them back,
// the counts and the cookie counts, and every lookup as brute force has
// it; compact and wide subtables both.
func TestReplaceInPlace(t *testing.T) {
	t.Run("compact", testReplaceInPlace)
	t.Run("wide", func(t *testing.T) {
		defer func(l int) { compactLimit = l }(compactLimit)
		compactLimit = -1
		testReplaceInPlace(t)
	})
}

func testReplaceInPlace(t *testing.T) {
	type slotKey struct {
		m    ofmatch.Match
		prio uint16
	}
	for seed := int64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewSource(seed))
		p := New(0)
		tb := &p.tables[0]
		model := map[slotKey]*Entry{}
		var keys []slotKey
		for i := 0; i < 400; i++ {
			var k slotKey
			if len(keys) > 0 && r.Intn(3) == 0 {
				k = keys[r.Intn(len(keys))] // a replacement
			} else {
				k = slotKey{randMatch(r), uint16(r.Intn(12))}
			}
			if r.Intn(8) == 0 && model[k] != nil { // a removal
				tb.remove(model[k])
				delete(model, k)
				continue
			}
			e := &Entry{Priority: k.prio, Cookie: uint64(r.Intn(4))}
			s := tb.locate(&k.m, k.prio)
			if s.old != model[k] {
				t.Fatalf("seed %d: locate found %p, the model has %p", seed, s.old, model[k])
			}
			tb.place(&s, e, &k.m)
			if model[k] == nil {
				keys = append(keys, k)
			}
			model[k] = e
		}
		cookies := map[uint64]int{}
		var es []*Entry
		for k, e := range model {
			if got := e.Match(); got != k.m {
				t.Fatalf("seed %d: entry's match %+v, added with %+v", seed, got, k.m)
			}
			if tb.findStrict(&k.m, k.prio) != e {
				t.Fatalf("seed %d: findStrict does not find the entry", seed)
			}
			cookies[e.Cookie]++
			es = append(es, e)
		}
		if tb.count != len(model) || !maps.Equal(tb.cookies, cookies) {
			t.Fatalf("seed %d: count %d cookies %v, want %d %v", seed, tb.count, tb.cookies, len(model), cookies)
		}
		n := 0
		tb.each(func(*Entry) { n++ })
		if n != len(model) {
			t.Fatalf("seed %d: %d entries in the buckets, want %d", seed, n, len(model))
		}
		for q := 0; q < 300; q++ {
			k, md := randKey(r)
			got := p.Lookup(0, &k, &md, nil, nil)
			want, found := bruteForce(es, &k, md)
			if (got != nil) != found || got != nil && (int(got.Priority) != want || !matches(got, &k, &md)) {
				t.Fatalf("seed %d: lookup %+v, brute force prio %d found %v", seed, got, want, found)
			}
		}
	}
}

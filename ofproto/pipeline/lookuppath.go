package pipeline

import (
	"sync/atomic"
	"time"
)

// maxPathSteps is how many lookups a LookupPath records; a translation
// with more lists the rest one sink per lookup (LookupSink), as before
// paths existed.
const maxPathSteps = 64

// maxPaths bounds the distinct lookup paths a pipeline keeps. Each one is
// kept for the pipeline's life (a megaflow holding it may outlive any
// cache), and TableStats sums over them; beyond the bound a translation
// falls back to one sink per lookup.
const maxPaths = 1024

// LookupPath is the sequence of table lookups one translation made, each
// a table and whether an entry other than the table-miss entry answered.
// A megaflow's table statistics then need one sink (PathSink) instead of
// one per lookup: half of an OVN megaflow's sinks were table counters, so
// this halves what each upcall allocates for them and what each push
// touches. It is a value so that a translation keeps it on its stack.
type LookupPath struct {
	n int
	b [2 * maxPathSteps]byte
}

// Add records a lookup of table tid that found e (nil: nothing); false
// means the path is full and the lookup was not recorded.
func (lp *LookupPath) Add(tid uint8, e *Entry) bool {
	if lp.n == maxPathSteps {
		return false
	}
	var hit byte
	if e != nil && !e.IsTableMiss() {
		hit = 1
	}
	lp.b[2*lp.n], lp.b[2*lp.n+1] = tid, hit
	lp.n++
	return true
}

// Len returns the lookups recorded.
func (lp *LookupPath) Len() int { return lp.n }

// Step returns lookup i: its table and whether it hit.
func (lp *LookupPath) Step(i int) (tid uint8, hit bool) { return lp.b[2*i], lp.b[2*i+1] != 0 }

// Truncate forgets every lookup after the first n (a translation going
// back to a checkpoint).
func (lp *LookupPath) Truncate(n int) { lp.n = n }

// lookupPath counts the packets of the megaflows made from one sequence
// of lookups: one atomic add per push whatever the number of lookups. The
// tables' statistics fold it in when read (TableStats).
type lookupPath struct {
	packets atomic.Uint64
}

func (lp *lookupPath) Touch(_ time.Time, packets, _ uint64) { lp.packets.Add(packets) }

// pathShare is what one path contributes to one table per packet: the
// times the path looked the table up, and of those the times it hit.
type pathShare struct {
	path             *lookupPath
	lookups, matched uint32
}

// pathSet is an immutable index of the interned paths, replaced whole
// when one is added, so that translations read it without a lock.
type pathSet struct {
	m map[string]*lookupPath
}

// PathSink returns the sink counting, for every packet pushed to it, one
// lookup of each table in lp (and one match where it hit), or nil when
// lp is empty or the pipeline keeps maxPaths paths already (the caller
// then lists a LookupSink per lookup). Equal paths share one sink, so it
// allocates only for a path not seen before.
func (p *Pipeline) PathSink(lp *LookupPath) StatsSink {
	if lp.n == 0 {
		return nil
	}
	key := lp.b[:2*lp.n]
	if ps := p.paths.Load(); ps != nil {
		if s := ps.m[string(key)]; s != nil {
			return s
		}
	}
	return p.addPath(key)
}

func (p *Pipeline) addPath(key []byte) StatsSink {
	p.pathMu.Lock()
	defer p.pathMu.Unlock()
	old := p.paths.Load()
	if old != nil {
		if s := old.m[string(key)]; s != nil {
			return s
		}
		if len(old.m) >= maxPaths {
			return nil
		}
	}
	s := new(lookupPath)
	ps := &pathSet{m: make(map[string]*lookupPath, 1+p.npaths())}
	if old != nil {
		for k, v := range old.m {
			ps.m[k] = v
		}
	}
	ps.m[string(key)] = s
	if p.shares == nil {
		p.shares = new([NumTables][]pathShare)
	}
	var per [NumTables]struct{ lookups, matched uint32 }
	for i := 0; i < len(key); i += 2 {
		per[key[i]].lookups++
		per[key[i]].matched += uint32(key[i+1])
	}
	for tid := range per {
		if per[tid].lookups != 0 {
			p.shares[tid] = append(p.shares[tid], pathShare{s, per[tid].lookups, per[tid].matched})
		}
	}
	p.paths.Store(ps)
	return s
}

func (p *Pipeline) npaths() int {
	if ps := p.paths.Load(); ps != nil {
		return len(ps.m)
	}
	return 0
}

// pathCounts returns what the paths through table tid add to its
// lookup and matched counters.
func (p *Pipeline) pathCounts(tid uint8) (lookups, matched uint64) {
	p.pathMu.Lock()
	defer p.pathMu.Unlock()
	if p.shares == nil {
		return 0, 0
	}
	for _, sh := range p.shares[tid] {
		n := sh.path.packets.Load()
		lookups += n * uint64(sh.lookups)
		matched += n * uint64(sh.matched)
	}
	return lookups, matched
}

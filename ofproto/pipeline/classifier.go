package pipeline

import (
	"iter"
	"math/bits"
	"sort"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// bucketKey is what one subtable hashes on: a key and pipeline state
// already masked by the subtable's masks.
type bucketKey struct {
	key  flow.Key
	pipe ofmatch.Pipe
}

// subtable holds every entry of a table whose match has one particular
// (key mask, pipeline state mask) pair. Entries with the same masked key share a
// bucket, kept sorted by descending priority, so a lookup is one map probe
// per subtable and the bucket's first entry is the subtable's answer.
type subtable struct {
	mask     flow.Mask
	pipeMask ofmatch.Pipe
	count    int
	maxPrio  int // highest priority of any entry; -1 when empty

	// The buckets are in compact when the masks have at most
	// compactWords words with a bit set (key and pipeline state
	// together, as OVN's matches do), keyed by those words alone: a
	// probe masks and hashes those few words and compares 64 bytes,
	// where bucketKey's map hashed and compared 312. Every key of the
	// subtable is zero outside those words, so the compact form loses
	// nothing. compact is a chained hash table by the words' hash, a
	// power of 2 long: a probe is a slot index and a pointer walk, not a
	// Go map's probe. Wider masks use buckets.
	buckets  map[bucketKey][]*Entry
	compact  []*compactBucket
	nCompact int     // buckets in compact
	keyWords []uint8 // words of mask with a bit set
	pipeWord []uint8 // words of pipeMask (pipeWords) with a bit set
	wordBits uint32  // bit i set: word i of mask has a bit set
}

// compactWords bounds the words a subtable's compact index keys on.
const compactWords = 8

type compactKey [compactWords]uint64

// compactBucket is one bucket of a compact index: its masked words, its
// entries, and the next bucket whose words hash alike.
//
// entries starts on one, the bucket's own room for a first entry: most
// buckets hold one entry (a table of 100,000 addresses is 100,000
// buckets), and the room costs no size class over the bucket without it,
// where a separate array was an allocation per flow.
type compactBucket struct {
	key     compactKey
	hash    uint64
	entries []*Entry
	next    *compactBucket
	one     [1]*Entry
}

// hash mixes the first n words of ck. Collisions cost a chain step, never
// a wrong answer.
func (ck *compactKey) hash(n int) uint64 {
	h := hashStart(n)
	for _, w := range ck[:n] {
		h = hashWord(h, w)
	}
	return hashEnd(h)
}

func hashStart(n int) uint64 { return uint64(n) * 0x9e3779b97f4a7c15 }
func hashWord(h, w uint64) uint64 {
	return bits.RotateLeft64(h^w*0xff51afd7ed558ccd, 29) * 0xc4ceb9fe1a85ec53
}
func hashEnd(h uint64) uint64 { return h ^ h>>32 }

// compactLimit is compactWords, lowered by tests to put every subtable on
// the wide path.
var compactLimit = compactWords

// pipeWordCount is ofmatch.Pipe's size in 64-bit words.
const pipeWordCount = int(unsafe.Sizeof(ofmatch.Pipe{}) / 8)

var _ [pipeWordCount * 8]byte = [unsafe.Sizeof(ofmatch.Pipe{})]byte{}

// pipeWords views p as words (Pipe starts with a uint64 and has no
// padding: metadata, the registers two by two, conj_id and pkt_mark, dp_hash and a pad).
func pipeWords(p *ofmatch.Pipe) *[pipeWordCount]uint64 {
	return (*[pipeWordCount]uint64)(unsafe.Pointer(p))
}

// newSubtable makes the subtable of masks (m, pm), with its compact index
// when they are narrow enough.
func newSubtable(m *flow.Mask, pm *ofmatch.Pipe) *subtable {
	st := &subtable{mask: *m, pipeMask: *pm, maxPrio: -1}
	for i, w := range st.mask.Words() {
		if w != 0 {
			st.keyWords = append(st.keyWords, uint8(i))
			st.wordBits |= 1 << i
		}
	}
	for i, w := range pipeWords(&st.pipeMask) {
		if w != 0 {
			st.pipeWord = append(st.pipeWord, uint8(i))
		}
	}
	if len(st.keyWords)+len(st.pipeWord) <= compactLimit {
		st.compact = make([]*compactBucket, 4)
	} else {
		st.buckets = make(map[bucketKey][]*Entry)
	}
	return st
}

// bucket returns the entries of bucket bk.
func (st *subtable) bucket(bk *bucketKey) []*Entry {
	if st.compact != nil {
		return st.compactBucket(&bk.key, &bk.pipe)
	}
	return st.buckets[*bk]
}

// allBuckets yields every bucket; the subtable must not change meanwhile.
func (st *subtable) allBuckets() iter.Seq[[]*Entry] {
	return func(yield func([]*Entry) bool) {
		if st.compact != nil {
			for _, cb := range st.compact {
				for ; cb != nil; cb = cb.next {
					if !yield(cb.entries) {
						return
					}
				}
			}
			return
		}
		for _, b := range st.buckets {
			if !yield(b) {
				return
			}
		}
	}
}

// compactOf returns (k, pipe) masked by the subtable's masks, in compact
// form; the subtable has a compact index.
func (st *subtable) compactOf(k *flow.Key, pipe *ofmatch.Pipe) compactKey {
	var ck compactKey
	kw, mw := k.Words(), st.mask.Words()
	i := 0
	for _, w := range st.keyWords {
		ck[i] = kw[w] & mw[w]
		i++
	}
	pw, pmw := pipeWords(pipe), pipeWords(&st.pipeMask)
	for _, w := range st.pipeWord {
		ck[i] = pw[w] & pmw[w]
		i++
	}
	return ck
}

// compactBucket returns the entries of (k, pipe)'s bucket; the subtable
// has a compact index.
func (st *subtable) compactBucket(k *flow.Key, pipe *ofmatch.Pipe) []*Entry {
	// compactOf and hash in one pass, and the words compared alone.
	var ck compactKey
	n := len(st.keyWords) + len(st.pipeWord)
	h := hashStart(n)
	kw, mw := k.Words(), st.mask.Words()
	i := 0
	for _, w := range st.keyWords {
		v := kw[w] & mw[w]
		ck[i], h = v, hashWord(h, v)
		i++
	}
	pw, pmw := pipeWords(pipe), pipeWords(&st.pipeMask)
	for _, w := range st.pipeWord {
		v := pw[w] & pmw[w]
		ck[i], h = v, hashWord(h, v)
		i++
	}
	h = hashEnd(h)
	if cb := st.compactFind(&ck, h, n); cb != nil {
		return cb.entries
	}
	return nil
}

// compactFind returns the bucket of the compact key ck, of hash h and n
// words, or nil.
func (st *subtable) compactFind(ck *compactKey, h uint64, n int) *compactBucket {
next:
	for cb := st.compact[h&uint64(len(st.compact)-1)]; cb != nil; cb = cb.next {
		if cb.hash != h {
			continue
		}
		for j := range n {
			if cb.key[j] != ck[j] {
				continue next
			}
		}
		return cb
	}
	return nil
}

// setBucket stores b as the bucket of bk (none when empty).
func (st *subtable) setBucket(bk *bucketKey, b []*Entry) {
	if st.compact == nil {
		if len(b) == 0 {
			delete(st.buckets, *bk)
		} else {
			st.buckets[*bk] = b
		}
		return
	}
	ck := st.compactOf(&bk.key, &bk.pipe)
	h := ck.hash(len(st.keyWords) + len(st.pipeWord))
	slot := &st.compact[h&uint64(len(st.compact)-1)]
	for p := slot; *p != nil; p = &(*p).next {
		cb := *p
		if cb.hash != h || cb.key != ck {
			continue
		}
		if len(b) > 0 {
			cb.entries = b
		} else {
			*p = cb.next
			st.nCompact--
		}
		return
	}
	if len(b) > 0 {
		*slot = &compactBucket{key: ck, hash: h, entries: b, next: *slot}
		st.nCompact++
		if st.nCompact > len(st.compact) {
			st.growCompact()
		}
	}
}

// growCompact doubles the compact table: at most one bucket a slot on
// average.
func (st *subtable) growCompact() {
	slots := make([]*compactBucket, 2*len(st.compact))
	for _, cb := range st.compact {
		for cb != nil {
			next := cb.next
			i := cb.hash & uint64(len(slots)-1)
			cb.next, slots[i] = slots[i], cb
			cb = next
		}
	}
	st.compact = slots
}

// table is one OpenFlow flow table organised for tuple-space search: its
// subtables are kept sorted by descending maxPrio, so a lookup can stop at
// the first subtable that cannot beat the best entry found so far.
type table struct {
	subs  []*subtable
	count int
	// last is the subtable find found or made last, tried first: the
	// adds of a bundle or a file come in runs of one shape, and find
	// otherwise compares the masks of every subtable before it (nil once
	// it leaves subs).
	last *subtable
	// cookies counts the entries by cookie: a learn action's limit is
	// on the flows of its table with the cookie it learns with, checked
	// on every upcall that runs it.
	cookies map[uint64]int
}

// sameMasks reports whether the subtable holds matches with masks (m, pm).
func (st *subtable) sameMasks(m *flow.Mask, pm *ofmatch.Pipe) bool {
	return st.pipeMask == *pm && st.mask.Equal(m)
}

func bucketKeyOf(m *ofmatch.Match) bucketKey {
	return bucketKey{key: m.Key, pipe: m.Pipe}
}

// find returns the subtable with masks (m, pm), or nil.
func (t *table) find(m *flow.Mask, pm *ofmatch.Pipe) *subtable {
	if st := t.last; st != nil && st.sameMasks(m, pm) {
		return st
	}
	for _, st := range t.subs {
		if st.sameMasks(m, pm) {
			t.last = st
			return st
		}
	}
	return nil
}

// findStrict returns the entry with exactly match m and priority prio.
func (t *table) findStrict(m *ofmatch.Match, prio uint16) *Entry {
	s := t.locate(m, prio)
	return s.old
}

// slot is where a (match, priority) is in a table, or would go: locate
// finds it and place fills it, so that an add finds its subtable and
// probes the subtable's index once, where looking for the entry it
// replaces, reading the bucket and storing it back were three probes.
type slot struct {
	st    *subtable      // the subtable of the match's masks; nil: none yet
	cb    *compactBucket // st's compact index: the match's bucket; nil: none yet
	ck    compactKey     // st's compact index: the match's words and their hash
	h     uint64
	old   *Entry // the entry of exactly that match and priority, if any
	oldAt int    // its index in its bucket
}

// locate returns the slot of (m, prio) in t.
func (t *table) locate(m *ofmatch.Match, prio uint16) (s slot) {
	st := t.find(&m.Mask, &m.PipeMask)
	if st == nil {
		return s
	}
	s.st = st
	var b []*Entry
	if st.compact != nil {
		n := len(st.keyWords) + len(st.pipeWord)
		s.ck = st.compactOf(&m.Key, &m.Pipe)
		s.h = s.ck.hash(n)
		if s.cb = st.compactFind(&s.ck, s.h, n); s.cb != nil {
			b = s.cb.entries
		}
	} else {
		bk := bucketKeyOf(m)
		b = st.buckets[bk]
	}
	for i, e := range b {
		if e.Priority == prio {
			s.old, s.oldAt = e, i
			break
		}
	}
	return s
}

// insert adds e with match m; they must not duplicate an existing
// (match, priority).
func (t *table) insert(e *Entry, m *ofmatch.Match) {
	s := t.locate(m, e.Priority)
	t.place(&s, e, m)
}

// place puts e, of match m, in slot s, which locate gave for m and e's
// priority with t unchanged since. An entry already there (s.old) leaves
// the table: e takes its place in its bucket.
func (t *table) place(s *slot, e *Entry, m *ofmatch.Match) {
	st := s.st
	if st == nil {
		st = newSubtable(&m.Mask, &m.PipeMask)
		t.subs = append(t.subs, st)
		t.last = st
		if st.compact != nil {
			s.ck = st.compactOf(&m.Key, &m.Pipe)
			s.h = s.ck.hash(len(st.keyWords) + len(st.pipeWord))
		}
	}
	e.st = st
	if t.cookies == nil {
		t.cookies = make(map[uint64]int)
	}
	t.cookies[e.Cookie]++
	if old := s.old; old != nil {
		// Same match and priority: the bucket, its order, the counts and
		// the subtable's maxPrio stay as they are.
		if s.cb != nil {
			s.cb.entries[s.oldAt] = e
		} else {
			st.buckets[bucketKeyOf(m)][s.oldAt] = e
		}
		e.words = st.entryWords(s.cb, m)
		if t.cookies[old.Cookie]--; t.cookies[old.Cookie] <= 0 {
			delete(t.cookies, old.Cookie)
		}
		return
	}
	if st.compact != nil {
		cb := s.cb
		if cb == nil {
			cb = &compactBucket{key: s.ck, hash: s.h}
			cb.one[0] = e
			cb.entries = cb.one[:1:1]
			i := s.h & uint64(len(st.compact)-1)
			cb.next, st.compact[i] = st.compact[i], cb
			st.nCompact++
			if st.nCompact > len(st.compact) {
				st.growCompact()
			}
		} else {
			cb.entries = insertByPriority(cb.entries, e)
		}
		e.words = st.entryWords(cb, m)
	} else {
		e.words = st.entryWords(nil, m)
		bk := bucketKeyOf(m)
		st.buckets[bk] = insertByPriority(st.buckets[bk], e)
	}
	st.count++
	t.count++
	if int(e.Priority) > st.maxPrio {
		st.maxPrio = int(e.Priority)
		t.sortSubs()
	}
}

// insertByPriority inserts e into b, kept by descending priority.
func insertByPriority(b []*Entry, e *Entry) []*Entry {
	i := sort.Search(len(b), func(i int) bool { return b[i].Priority < e.Priority })
	b = append(b, nil)
	copy(b[i+1:], b[i:])
	b[i] = e
	return b
}

// entryWords returns the words an entry of match m in st keeps (st's
// keyWords of m's key, then its pipeWord of m's pipeline state): the
// words of cb, m's bucket, when they are the same (the key is masked, and
// the pipeline state is too unless a value had bits its mask lacks), so
// that the entries of a bucket share its words instead of a copy each.
func (st *subtable) entryWords(cb *compactBucket, m *ofmatch.Match) []uint64 {
	n := len(st.keyWords) + len(st.pipeWord)
	kw, pw := m.Key.Words(), pipeWords(&m.Pipe)
	if cb != nil {
		same := true
		for i, w := range st.keyWords {
			same = same && cb.key[i] == kw[w]
		}
		for i, w := range st.pipeWord {
			same = same && cb.key[len(st.keyWords)+i] == pw[w]
		}
		if same {
			return cb.key[:n:n]
		}
	}
	words := make([]uint64, 0, n)
	for _, w := range st.keyWords {
		words = append(words, kw[w])
	}
	for _, w := range st.pipeWord {
		words = append(words, pw[w])
	}
	return words
}

// remove takes e out of the table; e must be in it.
func (t *table) remove(e *Entry) {
	st := e.st
	m := e.Match()
	bk := bucketKeyOf(&m)
	b := st.bucket(&bk)
	for i := range b {
		if b[i] == e {
			copy(b[i:], b[i+1:])
			b[len(b)-1] = nil
			b = b[:len(b)-1]
			break
		}
	}
	st.setBucket(&bk, b)
	st.count--
	t.count--
	if t.cookies[e.Cookie]--; t.cookies[e.Cookie] <= 0 {
		delete(t.cookies, e.Cookie)
	}
	if st.count == 0 {
		if t.last == st {
			t.last = nil
		}
		for i, s := range t.subs {
			if s == st {
				t.subs = append(t.subs[:i], t.subs[i+1:]...)
				break
			}
		}
		return
	}
	if int(e.Priority) == st.maxPrio {
		st.maxPrio = -1
		for b := range st.allBuckets() {
			if p := int(b[0].Priority); p > st.maxPrio {
				st.maxPrio = p
			}
		}
		t.sortSubs()
	}
}

func (t *table) sortSubs() {
	sort.SliceStable(t.subs, func(i, j int) bool { return t.subs[i].maxPrio > t.subs[j].maxPrio })
}

// each calls fn for every entry; fn must not change the table.
func (t *table) each(fn func(*Entry)) {
	for _, st := range t.subs {
		for b := range st.allBuckets() {
			for _, e := range b {
				fn(e)
			}
		}
	}
}

// lookup returns the highest-priority entry matching (k, pipe) and ORs
// into wc and wcPipe the masks of every subtable it probed. The subtable order does
// not depend on the key and every probe depends only on bits now in wc, so a
// key equal to k under wc probes the same subtables with the same results
// and gets the same answer. Among entries of equal priority the one in the
// earliest subtable (in the current order) wins.
//
// Conjunctive matches (Open vSwitch's conjunction action) are resolved
// here: an entry whose actions are conjunction(id, k/n) is a clause, never
// an answer itself. When the best entries found include clauses of a
// higher priority than the best other entry, and at one priority every
// clause 1..n of some id matched, the answer is the lookup again with
// conj_id = id, clauses left out: the entry matching conj_id=id, or the
// best other entry if it is better. Priorities are tried from the highest
// down, each bucket's entries in turn, as Open vSwitch does.
//
// touched, when not nil, gets a bit set for every word of wc the lookup
// ORed a mask into (bit i: word i of wc.Words()).
func (t *table) lookup(k *flow.Key, pipe *ofmatch.Pipe, wc *flow.Mask, wcPipe *ofmatch.Pipe, touched *uint32) *Entry {
	var softBuf [8][]*Entry
	hard, soft := t.probe(k, pipe, wc, wcPipe, touched, softBuf[:0], true)
	// The conjunctions of one priority, kept in an array on the stack: a
	// lookup allocates nothing (a clause of more ids spills to the heap).
	type clauses struct {
		id   uint32
		seen uint64
		n    uint8
	}
	var clBuf [8]clauses
	for len(soft) > 0 {
		prio := -1
		for _, c := range soft {
			prio = max(prio, int(c[0].Priority))
		}
		if hard != nil && prio <= int(hard.Priority) {
			break
		}
		cls := clBuf[:0]
		for _, c := range soft {
			if int(c[0].Priority) != prio {
				continue
			}
			for _, in := range c[0].Instructions() {
				ap, ok := in.(*ofpwire.InstrApplyActions)
				if !ok {
					continue
				}
				for _, a := range ap.Actions {
					cj, ok := a.(*ofpwire.ActionConjunction)
					if !ok {
						continue
					}
					i := 0
					for i < len(cls) && cls[i].id != cj.ID {
						i++
					}
					if i == len(cls) {
						cls = append(cls, clauses{id: cj.ID, n: cj.NClauses})
					}
					if cls[i].n == cj.NClauses {
						cls[i].seen |= 1 << cj.Clause
					}
				}
			}
		}
		for _, cl := range cls {
			if cl.seen != 1<<cl.n-1 { // every clause (for 64, the shift wraps to all ones)
				continue
			}
			cp := *pipe
			cp.ConjID = cl.id
			if e, _ := t.probe(k, &cp, wc, wcPipe, touched, nil, false); e != nil {
				return e
			}
		}
		// No conjunction at this priority: the entries after those
		// clauses in their buckets take their place (an ordinary one
		// ends its bucket's part, as nothing after it can beat it).
		kept := soft[:0]
		for _, c := range soft {
			if int(c[0].Priority) == prio {
				c = c[1:]
				if len(c) > 0 && !c[0].conjunctive {
					if hard == nil || c[0].Priority > hard.Priority {
						hard = c[0]
					}
					continue
				}
			}
			if len(c) > 0 {
				kept = append(kept, c)
			}
		}
		soft = kept
	}
	return hard
}

// probe finds the best entry matching (k, pipe) that is not a clause of a
// conjunctive match and, with withSoft, appends to soft the buckets
// probed whose best entry is a clause better than that entry so far (each
// from that entry on).
func (t *table) probe(k *flow.Key, pipe *ofmatch.Pipe, wc *flow.Mask, wcPipe *ofmatch.Pipe, touched *uint32, soft [][]*Entry, withSoft bool) (hard *Entry, _ [][]*Entry) {
	for _, st := range t.subs {
		if hard != nil && st.maxPrio <= int(hard.Priority) {
			break
		}
		if touched != nil {
			*touched |= st.wordBits
		}
		var b []*Entry
		if st.compact != nil {
			if wc != nil {
				ww, mw := wc.Words(), st.mask.Words()
				for _, w := range st.keyWords {
					ww[w] |= mw[w]
				}
			}
			if wcPipe != nil {
				ww, mw := pipeWords(wcPipe), pipeWords(&st.pipeMask)
				for _, w := range st.pipeWord {
					ww[w] |= mw[w]
				}
			}
			b = st.compactBucket(k, pipe)
		} else {
			if wc != nil {
				wc.Or(&st.mask)
			}
			if wcPipe != nil {
				wcPipe.Metadata |= st.pipeMask.Metadata
				wcPipe.ConjID |= st.pipeMask.ConjID
				wcPipe.PktMark |= st.pipeMask.PktMark
				wcPipe.DPHash |= st.pipeMask.DPHash
				for i, r := range st.pipeMask.Regs {
					wcPipe.Regs[i] |= r
				}
			}
			var bk bucketKey
			k.ApplyMask(&st.mask, &bk.key)
			bk.pipe = pipe.And(&st.pipeMask)
			b = st.buckets[bk]
		}
		if len(b) == 0 {
			continue
		}
		e := b[0]
		if hard != nil && e.Priority <= hard.Priority {
			continue
		}
		if e.conjunctive {
			if withSoft {
				soft = append(soft, b)
			}
			continue
		}
		hard = e
	}
	return hard, soft
}

// overlaps reports whether some entry other than skip, of priority prio,
// could match a packet that m matches too.
func (t *table) overlaps(m *ofmatch.Match, prio uint16, skip *Entry) bool {
	for _, st := range t.subs {
		if st.maxPrio < int(prio) {
			break
		}
		var common flow.Mask
		m.Mask.ApplyMask(&st.mask, &common)
		cpipe := m.PipeMask.And(&st.pipeMask)
		if common.Equal(&st.mask) && cpipe == st.pipeMask {
			// The subtable's mask is within m's: only one bucket can agree.
			var bk bucketKey
			m.Key.ApplyMask(&st.mask, &bk.key)
			bk.pipe = m.Pipe.And(&st.pipeMask)
			for _, e := range st.bucket(&bk) {
				if e.Priority == prio && e != skip {
					return true
				}
			}
			continue
		}
		var mine flow.Key
		m.Key.ApplyMask(&common, &mine)
		for b := range st.allBuckets() {
			for _, e := range b {
				if e.Priority != prio || e == skip {
					continue
				}
				em := e.Match()
				if em.Pipe.And(&cpipe) == m.Pipe.And(&cpipe) && em.Key.MatchesMasked(&common, &mine) {
					return true
				}
			}
		}
	}
	return false
}

// coversEntry reports whether every packet e matches is matched by m too,
// i.e. e's match is m's or more specific: OpenFlow's non-strict
// selection. e's subtable's masks must have every bit m's have
// (selectEntries checks that first), so only the words the entry keeps
// need comparing: the others are zero in both e's key and m's masked one.
func coversEntry(m *ofmatch.Match, e *Entry) bool {
	st := e.st
	mk, mm := m.Key.Words(), m.Mask.Words()
	for i, w := range st.keyWords {
		if e.words[i]&mm[w] != mk[w] {
			return false
		}
	}
	pk, pm := pipeWords(&m.Pipe), pipeWords(&m.PipeMask)
	for i, w := range st.pipeWord {
		if e.words[len(st.keyWords)+i]&pm[w] != pk[w] {
			return false
		}
	}
	return true
}

// selectEntries appends to dst the entries m selects: with strict, the one
// entry of exactly m and prio; otherwise every entry m covers.
func (t *table) selectEntries(dst []*Entry, m *ofmatch.Match, prio uint16, strict bool) []*Entry {
	if strict {
		if e := t.findStrict(m, prio); e != nil {
			dst = append(dst, e)
		}
		return dst
	}
	mw := m.Mask.Words()
	for _, st := range t.subs {
		// A subtable whose masks lack a bit m matches on holds nothing m covers.
		sw := st.mask.Words()
		ok := st.pipeMask.Covers(&m.PipeMask)
		for i := range mw {
			if sw[i]&mw[i] != mw[i] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for b := range st.allBuckets() {
			for _, e := range b {
				if coversEntry(m, e) {
					dst = append(dst, e)
				}
			}
		}
	}
	return dst
}

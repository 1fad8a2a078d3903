package conntrack

import (
	"sync"
	"sync/atomic"
	"unsafe"
)

// index is one shard's map from tuple to connection: open addressing with
// linear probing, each slot one word holding a tuple's hash, the
// connection's number in the tracker's slab and which of its two tuples
// the slot stands for (or both: slotBoth). A lookup hashes the tuple
// once (that hash also chose the shard, from its top bits; the slot comes
// from its low bits) and compares whole tuples only on a hash match; the
// tuples themselves live in the connection, so a slot is 8 bytes, holds
// no pointer (see slab) and growing rehashes nothing. Deleting shifts the
// entries after it back, so there are no tombstones to clean up.
//
// Writers hold the shard's lock. Readers on the packet path take no lock:
// the index is a sequence lock, its counter odd while a writer moves or
// removes entries, and a reader that saw it odd or changed across its
// probe looks again under the lock. Slots are read and written atomically
// (plain moves on amd64 and arm64), and a connection's tuples never change
// once it is indexed, so a reader racing a writer reads stale values, never
// torn ones, and the counter tells it so. An emptied slot's connection
// number may name another connection soon (slab): only the sequence lock
// makes what a reader resolved it to an answer.
type index struct {
	seq atomic.Uint32
	tab atomic.Pointer[[]slot]
	n   int
	// cs is the slab the slots' numbers are connections of, ctab the
	// first element of its table (slab.attach): a lookup resolves a
	// number with one load from it instead of three through cs.
	cs   *slab
	ctab atomic.Pointer[atomic.Pointer[connChunk]]
}

// conn is the connection numbered id (from one of x's slots), nil when
// its chunk left the slab. The table x.ctab points into is as long as
// every number handed out before it was loaded: the slab publishes a
// larger table to the indexes before the first number that needs it is
// handed out, and id was read from a slot before ctab is loaded. So no
// bounds check.
func (x *index) conn(id uint32) *Conn {
	base := x.ctab.Load()
	if base == nil {
		return nil
	}
	e := (*atomic.Pointer[connChunk])(unsafe.Add(unsafe.Pointer(base), uintptr(id>>chunkBits)*unsafe.Sizeof(*base)))
	if ch := e.Load(); ch != nil {
		return &ch.conns[id&(chunkConns-1)]
	}
	return nil
}

type slot struct {
	// m is the tuple's hash, slotUsed and, for a reply tuple,
	// slotReply, or slotBoth, and the connection's number from bit
	// idShift: 0 for an empty slot.
	m atomic.Uint64
}

const (
	slotUsed  = 1 << 32
	slotReply = 1 << 33
	// slotBoth: the slot stands for both tuples of its connection,
	// which hash alike (a connection without NAT: the hash is
	// symmetric). One entry where two would sit side by side in one
	// probe sequence: half the index's memory and growth for such
	// connections. A lookup that matches the hash compares the
	// original tuple, then the reply one.
	slotBoth = 1 << 34
	idShift  = 35
)

// An index starts at firstIndex slots and, the first time that fills,
// grows straight to initIndex (a power of two): 256 KiB a shard, 16 MiB
// for the tracker's 64, address space the kernel backs only as slots are
// touched (16,384 slots when a slot held a pointer, twice a word). Growing is the costly part of setting up connections at a high
// rate (each doubling rehashes the shard and first-touches a new array,
// with the garbage collector's write barriers on when it runs meanwhile):
// about a fifth of a new SNAT connection's cost up to a million
// connections when the index doubled from 64. initIndex holds 24,576
// entries a shard (1,572,864 in all, 786,432 translated connections)
// before the next doubling. A tracker
// with few connections (and every test's and fuzz input's new tracker)
// stays at firstIndex: 1 KiB a shard.
const (
	firstIndex = 64
	initIndex  = 32768
)

func slotMeta(h uint32, reply bool) uint64 {
	m := uint64(h) | slotUsed
	if reply {
		m |= slotReply
	}
	return m
}

// id is the number of the connection slot s holds (meaningless when
// empty).
func (s *slot) id() uint32 { return uint32(s.m.Load() >> idShift) }

// entry reads slot s: its connection (nil when empty), hash and
// direction (false for a slotBoth entry).
func (x *index) entry(s *slot) (c *Conn, h uint32, reply bool) {
	m := s.m.Load()
	if m == 0 {
		return nil, 0, false
	}
	return x.conn(uint32(m >> idShift)), uint32(m), m&slotReply != 0
}

// tupleOf is c's tuple the slot direction reply stands for.
func tupleOf(c *Conn, reply bool) *Tuple {
	if reply {
		return &c.reply
	}
	return &c.orig
}

func (s *slot) clear() { s.m.Store(0) }

// slots is the current array (under the shard's lock, or in a read
// section).
func (x *index) slots() []slot {
	if p := x.tab.Load(); p != nil {
		return *p
	}
	return nil
}

// begin and end bracket a change to the slots (the shard's lock
// held): readers that overlap it look again.
func (x *index) begin() { x.seq.Add(1) }
func (x *index) end()   { x.seq.Add(1) }

// probe looks for tu (hash h) in sl: the position of its entry (found) or
// of the empty slot its probe sequence ends at (-1 when sl is empty).
// It gives up after len(sl) slots, which only a reader racing a writer
// can reach (the array is never full).
func probe(sl []slot, x *index, tu *Tuple, h uint32) (pos int, c *Conn, reply, found bool) {
	if len(sl) == 0 {
		return -1, nil, false, false
	}
	mask := uint32(len(sl) - 1)
	i := h & mask
	for range len(sl) {
		s := &sl[i]
		m := s.m.Load()
		if m == 0 {
			return int(i), nil, false, false
		}
		if uint32(m) == h {
			r := m&slotReply != 0
			if c := x.conn(uint32(m >> idShift)); c != nil {
				if tupleOf(c, r).equal(tu) {
					return int(i), c, r, true
				}
				if m&slotBoth != 0 && c.reply.equal(tu) {
					return int(i), c, true, true
				}
			}
		}
		i = (i + 1) & mask
	}
	return -1, nil, false, false
}

// get returns the connection tu (hash h) maps to and whether tu is its
// reply tuple (the shard's lock held).
func (x *index) get(tu *Tuple, h uint32) (c *Conn, reply bool) {
	_, c, reply, _ = probe(x.slots(), x, tu, h)
	return c, reply
}

// lookup is get without the lock: a read section of the sequence lock,
// and under the lock (mu, the shard's) when a writer interfered.
func (x *index) lookup(tu *Tuple, h uint32, mu *sync.Mutex) (c *Conn, reply bool) {
	if v := x.seq.Load(); v&1 == 0 {
		_, c, reply, _ = probe(x.slots(), x, tu, h)
		if x.seq.Load() == v {
			return c, reply
		}
	}
	mu.Lock()
	c, reply = x.get(tu, h)
	mu.Unlock()
	return c, reply
}

// reserve makes room for k more entries, growing the array if that would
// load it over 3/4, so that positions probe returns stay valid for k
// puts.
func (x *index) reserve(k int) {
	if n := len(x.slots()); (x.n+k)*4 > n*3 {
		switch {
		case n == 0:
			n = firstIndex
		case n < initIndex:
			n = initIndex
		default:
			n *= 2
		}
		for (x.n+k)*4 > n*3 {
			n *= 2
		}
		x.resize(n)
	}
}

// put maps the tuple at position pos (probe's answer for it, after
// reserve) to c, with slot meta m (slotMeta's, or with slotBoth). The
// caller counts the reference in c.refs; one to a connection it replaces
// is dropped.
func (x *index) put(pos int, c *Conn, m uint64) {
	s := &x.slots()[pos]
	m |= uint64(c.id) << idShift
	if old := s.m.Load(); old != 0 {
		// Replacing: a reader could pair the old direction with the
		// new connection.
		x.begin()
		s.m.Store(m)
		x.end()
		x.cs.unref(x.conn(uint32(old >> idShift)))
		return
	}
	// Filling an empty slot needs no begin/end: one word, so a reader
	// sees the slot empty or the entry whole, both answers of the
	// moment; c was set up before it (the atomic store publishes it).
	x.n++
	s.m.Store(m)
}

// set maps tu (hash h; c's reply tuple when reply) to c, in place of any
// connection it mapped to.
func (x *index) set(tu *Tuple, h uint32, c *Conn, reply bool) {
	x.reserve(1)
	pos, _, _, _ := probe(x.slots(), x, tu, h)
	c.refs.Add(1)
	x.put(pos, c, slotMeta(h, reply))
}

// delete removes tu's entry (hash h) if it maps to c.
func (x *index) delete(tu *Tuple, h uint32, c *Conn) {
	if i, got, _, ok := probe(x.slots(), x, tu, h); ok && got == c {
		x.begin()
		x.removeAt(uint32(i))
		x.end()
	}
}

// removeAt empties slot i, dropping its connection's reference, and
// moves back the entries of its cluster that may take it (those whose
// home slot is not cyclically between i and where they are). It is
// called between begin and end.
func (x *index) removeAt(i uint32) {
	sl := x.slots()
	mask := uint32(len(sl) - 1)
	c := x.conn(sl[i].id())
	sl[i].clear()
	x.n--
	x.cs.unref(c)
	for j := (i + 1) & mask; ; j = (j + 1) & mask {
		m := sl[j].m.Load()
		if m == 0 {
			return
		}
		home := uint32(m) & mask
		// The entry at j stays when its home lies in (i, j].
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		sl[i].m.Store(m)
		sl[j].clear()
		i = j
	}
}

// resize rebuilds the index with n slots (a power of two). Readers of the
// old array see it unchanged; the new one is complete when published
// (the atomic store of tab orders the plain stores before it).
func (x *index) resize(n int) {
	old := x.slots()
	sl := make([]slot, n)
	// Plain stores into the array no reader sees yet (a slot is one
	// word: TestSlotLayout).
	raw := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(sl))), n)
	mask := uint32(n - 1)
	for k := range old {
		m := old[k].m.Load()
		if m == 0 {
			continue
		}
		i := uint32(m) & mask
		for raw[i] != 0 {
			i = (i + 1) & mask
		}
		raw[i] = m
	}
	x.begin()
	x.tab.Store(&sl)
	x.end()
}

// shrink gives memory back once the index is mostly empty (after a flood
// of connections expired or a flush), down to its first size, never
// below: a burst after it pays no growth up to that size.
func (x *index) shrink() {
	n := len(x.slots())
	for n > initIndex && x.n*8 < n {
		n /= 2
	}
	if n < len(x.slots()) {
		x.resize(n)
	}
}

// removeIf removes the entries whose connection f says to, while
// iterating: an entry moved back into the slot just emptied is looked at
// next. (One moved across the end of the array may be looked at twice;
// f must not mind.)
func (x *index) removeIf(f func(c *Conn) bool) {
	sl := x.slots()
	x.begin()
	defer x.end()
	for i := 0; i < len(sl); {
		if c, _, _ := x.entry(&sl[i]); c != nil && f(c) {
			x.removeAt(uint32(i))
			continue
		}
		i++
	}
}

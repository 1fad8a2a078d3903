package conntrack

import (
	"sync"
	"sync/atomic"
)

// Connections live in chunks of chunkConns, each an array of Conn (no
// pointers: the garbage collector never scans one), and the index's
// slots name a connection by its number, not by a pointer, so that the
// index holds no pointer either. A tracker of millions of connections
// then costs each GC cycle a pointer per chunk (the slab's table), where
// a pointer per connection, and two per translated one, in the index had
// the collector find and mark every connection, and cost a fifth of a
// pass of new SNAT connections. A slot is one word (hash, direction and
// number), half the previous size: an index twice as large for the same
// memory, so growing it comes half as often.
//
// A connection's number is its chunk's number and its place in the
// chunk. A chunk hands out each place once (a bump of its next), so a
// Conn's memory never holds another connection: a goroutine holding a
// *Conn that has since been removed (a lookup racing a removal) still
// sees it dead, as when every Conn was its own allocation. A chunk leaves
// the table once every connection it handed out was released (it is in no
// slot any more: see Conn.refs) and its places are all used; its number is
// then handed out again, for a new chunk. Its memory goes back to the
// heap when no goroutine holds a pointer into it (the collector sees
// those: stacks, the shards' eviction lists).
//
// A number read from a slot is only trusted within the index's sequence
// lock: a reader that read a slot before a writer emptied it (and bumped
// the sequence) may resolve the number to a newer chunk's connection, even
// one still being set up, and the sequence check then discards what it
// read. Under the race detector, which would report that read, numbers
// are not reused (raceBuild).
const (
	chunkBits  = 5
	chunkConns = 1 << chunkBits
	// idBits: a connection's number takes a slot's bits from idShift.
	idBits    = 64 - idShift
	maxChunks = 1 << (idBits - chunkBits)
)

type connChunk struct {
	conns [chunkConns]Conn
	// next is the next place to hand out (it counts past chunkConns
	// when allocations race for the last place).
	next atomic.Int32
	// live counts the places not released yet, handed out or not: the
	// chunk leaves the table when it reaches 0.
	live atomic.Int32
	num  uint32
}

// slab is a tracker's chunks, by number.
type slab struct {
	// tab is read without a lock (resolving a slot's number); a new,
	// larger table is published when it fills.
	tab atomic.Pointer[[]atomic.Pointer[connChunk]]
	mu  sync.Mutex
	// free are the numbers of chunks that left the table, to hand out
	// again (oldest first); used is how many numbers were ever handed
	// out; chunks are those in the table.
	free   []uint32
	used   uint32
	chunks int
	// xs are the indexes that resolve numbers through the table (they
	// keep its first element: see index.conn).
	xs []*index
}

// attach makes x resolve numbers through s's table.
func (s *slab) attach(x *index) {
	s.mu.Lock()
	defer s.mu.Unlock()
	x.cs = s
	s.xs = append(s.xs, x)
	if tab := s.table(); len(tab) > 0 {
		x.ctab.Store(&tab[0])
	}
}

func (s *slab) table() []atomic.Pointer[connChunk] {
	if p := s.tab.Load(); p != nil {
		return *p
	}
	return nil
}

// conn is the connection numbered id, nil when its chunk left the table.
func (s *slab) conn(id uint32) *Conn {
	tab := s.table()
	n := id >> chunkBits
	if n >= uint32(len(tab)) {
		return nil
	}
	ch := tab[n].Load()
	if ch == nil {
		return nil
	}
	return &ch.conns[id&(chunkConns-1)]
}

// alloc hands out a zero connection from the chunk *cur (a shard's: PMDs
// committing into different shards do not share a counter), starting a
// new chunk when that one is used up. It returns nil when every number is
// taken (2^24 chunks of connections live or waiting for their chunk-mates).
func (s *slab) alloc(cur *atomic.Pointer[connChunk]) *Conn {
	for {
		ch := cur.Load()
		if ch != nil {
			if i := ch.next.Add(1) - 1; i < chunkConns {
				c := &ch.conns[i]
				c.id = ch.num<<chunkBits | uint32(i)
				return c
			}
		}
		if !s.refill(cur, ch) {
			return nil
		}
	}
}

// refill puts a new chunk in *cur in place of used (unless another
// goroutine did already).
func (s *slab) refill(cur *atomic.Pointer[connChunk], used *connChunk) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur.Load() != used {
		return true
	}
	var num uint32
	if len(s.free) > 0 && !raceBuild {
		num = s.free[0]
		s.free = s.free[1:]
	} else {
		if s.used == maxChunks {
			return false
		}
		num = s.used
		s.used++
	}
	ch := &connChunk{num: num}
	ch.live.Store(chunkConns)
	tab := s.table()
	if int(num) >= len(tab) {
		// Readers of the old table see it as it is now; changes go to
		// the new one (under mu), so a reader may miss a chunk made
		// after it loaded the table: a slot filled meanwhile, seen
		// empty.
		nt := make([]atomic.Pointer[connChunk], max(16, 2*len(tab)))
		for i := range tab {
			nt[i].Store(tab[i].Load())
		}
		s.tab.Store(&nt)
		for _, x := range s.xs {
			x.ctab.Store(&nt[0])
		}
		tab = nt
	}
	tab[num].Store(ch)
	s.chunks++
	cur.Store(ch)
	return true
}

// release gives c's place back: c is in no slot and will never be (it
// is dead, or was never indexed).
func (s *slab) release(c *Conn) {
	ch := s.table()[c.id>>chunkBits].Load()
	if ch.live.Add(-1) != 0 {
		return
	}
	s.mu.Lock()
	s.table()[ch.num].Store(nil)
	s.free = append(s.free, ch.num)
	s.chunks--
	s.mu.Unlock()
}

// unref drops one of c's references (an index slot): the last releases
// it.
func (s *slab) unref(c *Conn) {
	if c.refs.Add(-1) == 0 {
		s.release(c)
	}
}

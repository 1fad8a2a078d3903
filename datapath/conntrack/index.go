package conntrack

// index is one shard's map from tuple to connection: open addressing with
// linear probing, each slot holding a tuple's hash, the connection and
// which of its two tuples the slot stands for. A lookup hashes the tuple
// once (that hash also chose the shard, from its top bits; the slot comes
// from its low bits) and compares whole tuples only on a hash match; the
// tuples themselves live in the connection, so a slot is 16 bytes and
// growing rehashes nothing. Deleting shifts the entries after it back,
// so there are no tombstones to clean up.
type index struct {
	slots []slot
	n     int
}

type slot struct {
	c     *Conn
	h     uint32
	reply bool // the slot stands for c.reply, else c.orig
}

// minIndex is a new or shrunk index's size (a power of two).
const minIndex = 64

func (s *slot) tuple() *Tuple {
	if s.reply {
		return &s.c.reply
	}
	return &s.c.orig
}

// find returns the position of tu (hash h), or -1.
func (x *index) find(tu *Tuple, h uint32) int {
	if len(x.slots) == 0 {
		return -1
	}
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.c == nil {
			return -1
		}
		if s.h == h && *s.tuple() == *tu {
			return int(i)
		}
	}
}

// get returns the connection tu (hash h) maps to and whether tu is its
// reply tuple.
func (x *index) get(tu *Tuple, h uint32) (c *Conn, reply bool) {
	if i := x.find(tu, h); i >= 0 {
		return x.slots[i].c, x.slots[i].reply
	}
	return nil, false
}

// set maps tu (hash h; c's reply tuple when reply) to c, in place of any
// connection it mapped to.
func (x *index) set(tu *Tuple, h uint32, c *Conn, reply bool) {
	if (x.n+1)*4 > len(x.slots)*3 {
		x.resize(max(minIndex, 2*len(x.slots)))
	}
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &x.slots[i]
		if s.c == nil {
			*s = slot{c: c, h: h, reply: reply}
			x.n++
			return
		}
		if s.h == h && *s.tuple() == *tu {
			*s = slot{c: c, h: h, reply: reply}
			return
		}
	}
}

// delete removes tu's entry (hash h) if it maps to c.
func (x *index) delete(tu *Tuple, h uint32, c *Conn) {
	if i := x.find(tu, h); i >= 0 && x.slots[i].c == c {
		x.removeAt(uint32(i))
	}
}

// removeAt empties slot i and moves back the entries of its cluster that
// may take it (those whose home slot is not cyclically between i and
// where they are).
func (x *index) removeAt(i uint32) {
	mask := uint32(len(x.slots) - 1)
	x.slots[i] = slot{}
	x.n--
	for j := (i + 1) & mask; x.slots[j].c != nil; j = (j + 1) & mask {
		home := x.slots[j].h & mask
		// The entry at j stays when its home lies in (i, j].
		if i <= j && i < home && home <= j || i > j && (i < home || home <= j) {
			continue
		}
		x.slots[i], x.slots[j] = x.slots[j], slot{}
		i = j
	}
}

// resize rebuilds the index with n slots (a power of two).
func (x *index) resize(n int) {
	old := x.slots
	x.slots = make([]slot, n)
	mask := uint32(n - 1)
	for _, s := range old {
		if s.c == nil {
			continue
		}
		i := s.h & mask
		for x.slots[i].c != nil {
			i = (i + 1) & mask
		}
		x.slots[i] = s
	}
}

// shrink gives memory back after many deletions (a flush, a sweep).
func (x *index) shrink() {
	n := len(x.slots)
	for n > minIndex && x.n*8 < n {
		n /= 2
	}
	if n < len(x.slots) {
		x.resize(n)
	}
}

// removeIf removes the entries whose connection f says to, while
// iterating: an entry moved back into the slot just emptied is looked at
// next. (One moved across the end of the array may be looked at twice;
// f must not mind.)
func (x *index) removeIf(f func(c *Conn) bool) {
	for i := 0; i < len(x.slots); {
		if c := x.slots[i].c; c != nil && f(c) {
			x.removeAt(uint32(i))
			continue
		}
		i++
	}
}

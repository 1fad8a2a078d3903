package classifier

import (
	"github.com/vswitch-go/vswitch/datapath/flow"
)

// minSubtableSlots is the capacity of a new subtable. Many masks only ever
// hold a handful of flows, so starting small keeps them cheap.
const minSubtableSlots = 8

// mfEntry is one megaflow in a subtable: 128 bytes, two cache lines.
type mfEntry[V any] struct {
	key flow.Key // already masked by the subtable's mask
	val *V
}

// subtable holds every megaflow of one mask in an open-addressing hash
// table with linear probing. Deletion shifts later entries of the cluster
// back instead of leaving tombstones, so a table that sees endless
// insert/remove churn never fills with dead slots and never needs a rebuild.
type subtable[V any] struct {
	mask    flow.Mask
	shared  *flow.Mask // a copy of mask for InsertMasked's callers
	words   []uint8    // indices of the non-zero words of mask; points into wordBuf
	wordBuf [flow.KeyWords]uint8

	// ctrl[i] is 0 for an empty slot, else the hash of entries[i] (hashes
	// of 0 are stored as 1). Probing reads this compact array and touches
	// an entry only when the hash matches.
	ctrl     []uint32
	entries  []mfEntry[V]
	slotMask uint32
	count    int

	hits uint64 // lookups that ended here since the last Rank
}

func newSubtable[V any](mask *flow.Mask) *subtable[V] {
	st := &subtable[V]{mask: *mask}
	shared := *mask
	st.shared = &shared
	st.words = mask.NonZeroWords(st.wordBuf[:0])
	st.alloc(minSubtableSlots)
	return st
}

func (st *subtable[V]) alloc(n int) {
	st.ctrl = make([]uint32, n)
	st.entries = make([]mfEntry[V], n)
	st.slotMask = uint32(n - 1)
}

// hash returns the stored form of k's hash under the subtable's mask.
func (st *subtable[V]) hash(k *flow.Key) uint32 {
	h := k.MaskedHash(&st.mask, st.words)
	if h == 0 {
		h = 1
	}
	return h
}

// lookup finds the entry k falls into. Only the mask's non-zero words are
// hashed and compared: the other words of a stored key are zero and so are
// those of k & mask.
func (st *subtable[V]) lookup(k *flow.Key) *V {
	h := st.hash(k)
	kw, mw := k.Words(), st.mask.Words()
	for i := h & st.slotMask; ; i = (i + 1) & st.slotMask {
		c := st.ctrl[i]
		if c == 0 {
			return nil
		}
		if c != h {
			continue
		}
		e := &st.entries[i]
		ew := e.key.Words()
		match := true
		for _, w := range st.words {
			if kw[w]&mw[w] != ew[w] {
				match = false
				break
			}
		}
		if match {
			return e.val
		}
	}
}

// find returns the slot holding the masked key km (hashed to h), or -1.
func (st *subtable[V]) find(km *flow.Key, h uint32) int {
	for i := h & st.slotMask; ; i = (i + 1) & st.slotMask {
		c := st.ctrl[i]
		if c == 0 {
			return -1
		}
		if c == h && st.entries[i].key.Equal(km) {
			return int(i)
		}
	}
}

// place puts an entry known to be absent into the first free slot of its
// probe sequence. The caller has made room.
func (st *subtable[V]) place(km *flow.Key, h uint32, v *V) {
	i := h & st.slotMask
	for st.ctrl[i] != 0 {
		i = (i + 1) & st.slotMask
	}
	st.ctrl[i] = h
	st.entries[i] = mfEntry[V]{key: *km, val: v}
	st.count++
}

// insert adds or replaces the megaflow with masked key km.
func (st *subtable[V]) insert(km *flow.Key, v *V) (replaced *V) {
	h := st.hash(km)
	if i := st.find(km, h); i >= 0 {
		old := st.entries[i].val
		st.entries[i].val = v
		return old
	}
	if (st.count+1)*4 > len(st.ctrl)*3 {
		st.grow()
	}
	st.place(km, h, v)
	return nil
}

// grow doubles the table and rehashes every entry into it.
func (st *subtable[V]) grow() {
	oldCtrl, oldEntries := st.ctrl, st.entries
	st.alloc(2 * len(oldCtrl))
	st.count = 0
	for i, c := range oldCtrl {
		if c != 0 {
			st.place(&oldEntries[i].key, c, oldEntries[i].val)
		}
	}
}

// remove deletes the megaflow with masked key km and returns its value.
func (st *subtable[V]) remove(km *flow.Key) *V {
	h := st.hash(km)
	found := st.find(km, h)
	if found < 0 {
		return nil
	}
	old := st.entries[found].val
	// Backward-shift deletion: walk the rest of the cluster and move back
	// into the hole every entry whose home slot is not strictly between the
	// hole and where the entry sits, so each stays reachable from its home
	// without crossing an empty slot.
	hole := uint32(found)
	for j := (hole + 1) & st.slotMask; st.ctrl[j] != 0; j = (j + 1) & st.slotMask {
		home := st.ctrl[j] & st.slotMask
		if (j-home)&st.slotMask >= (j-hole)&st.slotMask {
			st.ctrl[hole] = st.ctrl[j]
			st.entries[hole] = st.entries[j]
			hole = j
		}
	}
	st.ctrl[hole] = 0
	st.entries[hole] = mfEntry[V]{}
	st.count--
	return old
}

// Megaflows is a megaflow classifier using tuple-space search: one subtable
// per distinct mask, each an exact-match hash table over the masked key. A
// lookup probes the subtables in rank order (most hit first, see Rank) and
// returns the first match.
//
// First match wins, not highest priority: the datapath only installs
// megaflows that do not overlap, or that overlap only where they have the
// same actions (translation's wildcard masks guarantee that every packet a
// megaflow covers would translate to its actions), so whichever matching
// megaflow is found first is correct.
//
// Megaflows belongs to one PMD and is not safe for concurrent use.
type Megaflows[V any] struct {
	subtables []*subtable[V]
	// spare are the subtables the last Clear emptied, kept with their
	// capacity for masks that come back: after an invalidation the same
	// masks fill again with as many flows, and regrowing each table from
	// minSubtableSlots allocated about twice its final size every time.
	// The next Clear drops those not taken again, so what is kept is
	// bounded by what the classifier held.
	spare []*subtable[V]
	count int
}

// New returns an empty classifier.
func New[V any]() *Megaflows[V] {
	return &Megaflows[V]{}
}

// Lookup returns the value of a megaflow that k matches, or nil.
func (mf *Megaflows[V]) Lookup(k *flow.Key) *V {
	for _, st := range mf.subtables {
		if v := st.lookup(k); v != nil {
			st.hits++
			return v
		}
	}
	return nil
}

// subtableFor returns the subtable of mask m and its index, or nil and -1.
func (mf *Megaflows[V]) subtableFor(m *flow.Mask) (*subtable[V], int) {
	for i, st := range mf.subtables {
		if st.mask.Equal(m) {
			return st, i
		}
	}
	return nil, -1
}

// Insert installs v for the megaflow m. m.Key is masked with m.Mask here, so
// stray bits outside the mask cannot make the flow unreachable. If the same
// mask and masked key are already installed, the value is replaced and the
// old one returned. A nil v is ignored, since Lookup reports a miss as nil.
func (mf *Megaflows[V]) Insert(m *flow.Match, v *V) (replaced *V) {
	replaced, _ = mf.InsertMasked(&m.Key, &m.Mask, v)
	return replaced
}

// InsertMasked is Insert of key k under mask m that also returns the
// classifier's copy of m (nil when v is nil): one per mask, shared by all
// of its megaflows and never written, for a caller that keeps each
// value's mask to point at rather than copy (a mask is 232 bytes).
func (mf *Megaflows[V]) InsertMasked(k *flow.Key, m *flow.Mask, v *V) (replaced *V, mask *flow.Mask) {
	if v == nil {
		return nil, nil
	}
	var km flow.Key
	k.ApplyMask(m, &km)
	st, _ := mf.subtableFor(m)
	if st == nil {
		// A new mask goes last: it has no hits yet, and the next Rank
		// moves it up if it earns them.
		st = mf.takeSpare(m)
		if st == nil {
			st = newSubtable[V](m)
		}
		mf.subtables = append(mf.subtables, st)
	}
	old := st.insert(&km, v)
	if old == nil {
		mf.count++
	}
	return old, st.shared
}

// Remove deletes the megaflow m (same mask, same key under the mask) and
// returns its value, or nil if it was not installed. A subtable left empty is
// dropped so that lookups stop paying for it.
func (mf *Megaflows[V]) Remove(m *flow.Match) *V {
	st, idx := mf.subtableFor(&m.Mask)
	if st == nil {
		return nil
	}
	var km flow.Key
	m.Key.ApplyMask(&m.Mask, &km)
	old := st.remove(&km)
	if old == nil {
		return nil
	}
	mf.count--
	if st.count == 0 {
		copy(mf.subtables[idx:], mf.subtables[idx+1:])
		mf.subtables[len(mf.subtables)-1] = nil
		mf.subtables = mf.subtables[:len(mf.subtables)-1]
	}
	return old
}

// Len returns the number of installed megaflows.
func (mf *Megaflows[V]) Len() int { return mf.count }

// Subtables returns the number of distinct masks installed.
func (mf *Megaflows[V]) Subtables() int { return len(mf.subtables) }

// takeSpare returns the spare subtable of mask m, removed from the spares,
// or nil.
func (mf *Megaflows[V]) takeSpare(m *flow.Mask) *subtable[V] {
	for i, st := range mf.spare {
		if st.mask.Equal(m) {
			last := len(mf.spare) - 1
			mf.spare[i] = mf.spare[last]
			mf.spare[last] = nil
			mf.spare = mf.spare[:last]
			return st
		}
	}
	return nil
}

// Clear removes every megaflow. The emptied subtables become the spares
// (see Megaflows.spare), replacing the previous ones; they hold no
// values any more, so the megaflows they held can be collected.
func (mf *Megaflows[V]) Clear() {
	clear(mf.spare)
	mf.spare = append(mf.spare[:0], mf.subtables...)
	for _, st := range mf.spare {
		clear(st.ctrl)
		clear(st.entries)
		st.count, st.hits = 0, 0
	}
	clear(mf.subtables)
	mf.subtables = mf.subtables[:0]
	mf.count = 0
}

// Rank reorders the subtables by the hits they took since the previous
// Rank, most first, and resets the counters, so that the masks most traffic
// matches are probed first. Ties keep their order. The PMD calls it
// periodically; it sorts in place and allocates nothing.
func (mf *Megaflows[V]) Rank() {
	s := mf.subtables
	// Insertion sort: there are few subtables, the order changes little
	// between calls, and it is stable without extra memory.
	for i := 1; i < len(s); i++ {
		st := s[i]
		j := i
		for j > 0 && s[j-1].hits < st.hits {
			s[j] = s[j-1]
			j--
		}
		s[j] = st
	}
	for _, st := range s {
		st.hits = 0
	}
}

// Range calls fn for every megaflow, in rank order, until fn returns false.
// m points at a copy that is only valid during the call. fn must not insert
// into or remove from mf. It is for the slow path (dumps, revalidation).
func (mf *Megaflows[V]) Range(fn func(m *flow.Match, v *V) bool) {
	var m flow.Match
	for _, st := range mf.subtables {
		m.Mask = st.mask
		for i, c := range st.ctrl {
			if c == 0 {
				continue
			}
			m.Key = st.entries[i].key
			if !fn(&m, st.entries[i].val) {
				return
			}
		}
	}
}

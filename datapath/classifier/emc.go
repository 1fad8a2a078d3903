// Package classifier holds the per-PMD flow caches of the datapath: an
// exact-match cache (EMC) in front of a megaflow classifier that does
// tuple-space search over one hash table per distinct wildcard mask.
//
// Both caches are generic over the value type so that the datapath stores
// its own megaflow record and gets a *V back without an interface
// conversion. Each PMD owns its own instances: nothing here takes a lock and
// no type is safe for concurrent use. Lookups never allocate; inserts may.
package classifier

import (
	"math"
	"math/bits"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// DefaultEMCEntries is the EMC size a PMD gets unless configured otherwise:
// big enough for a few thousand active flows, small enough (about 1 MiB) to
// stay largely in the CPU caches.
const DefaultEMCEntries = 8192

// DefaultEMCInsertInvProb inserts one miss in 100 into the EMC, as OVS's
// emc-insert-inv-prob does by default: with many flows, inserting every miss
// would make the cache thrash and cost more than it saves.
const DefaultEMCInsertInvProb = 100

// maxEMCEntries bounds the table so that both hash segments still come from
// the 32-bit hash.
const maxEMCEntries = 1 << 24

// emcSlot is 256 bytes, four cache lines (the slot array is big enough
// to be page-aligned). The value, the short flag and the key's first
// flow.ShortWords words share the first line, so a hit on a short key
// touches one line of slot memory plus the hash line.
type emcSlot[V any] struct {
	val   *V   // nil: slot is empty
	short bool // key.IsShort()
	_     [7]byte
	key   flow.Key
	_     [8]byte
}

// EMC is an exact-match cache: a small direct-mapped table with two
// candidate slots per key, keyed by the full flow key. A hit costs two hash
// compares and one key compare, far less than a megaflow lookup.
//
// The 32-bit hashes live in their own compact array, so a miss usually reads
// only that array and never the slots.
//
// An EMC belongs to one PMD and is not safe for concurrent use.
type EMC[V any] struct {
	hashes []uint32 // hashes[i] is the hash of slots[i].key when occupied
	slots  []emcSlot[V]
	mask   uint32 // len(slots) - 1
	shift  int    // log2(len(slots)): where the second hash segment starts
	count  int
	// size is the number of slots the cache has once something was
	// inserted: until then it has one, empty (see NewEMC).
	size int

	invProb   uint32 // 0: never insert
	threshold uint32 // insert when the PRNG draw is <= threshold
	rng       uint32 // xorshift32 state, never zero
}

// NewEMC returns an empty cache with room for entries keys. entries is
// rounded up to a power of two; 0 or less means DefaultEMCEntries.
//
// The table is allocated at the first insert: until then one empty slot
// stands in for it, which every lookup misses without a branch of its own.
// A PMD that forwards nothing, or that polls only ports without traffic
// (a switch with a thousand idle internal ports), keeps 2 MiB less.
func NewEMC[V any](entries int) *EMC[V] {
	if entries <= 0 {
		entries = DefaultEMCEntries
	}
	if entries > maxEMCEntries {
		entries = maxEMCEntries
	}
	n := 1
	for n < entries {
		n <<= 1
	}
	e := &EMC[V]{
		hashes: make([]uint32, 1),
		slots:  make([]emcSlot[V], 1),
		size:   n,
		rng:    0x9e3779b9,
	}
	e.SetInsertInvProb(DefaultEMCInsertInvProb)
	return e
}

// allocate gives the cache its full table (empty: it is called before the
// first entry goes in).
func (e *EMC[V]) allocate() {
	e.hashes = make([]uint32, e.size)
	e.slots = make([]emcSlot[V], e.size)
	e.mask = uint32(e.size - 1)
	e.shift = bits.TrailingZeros(uint(e.size))
}

// slotsFor returns the two candidate slots of a hash: the low segment and
// the next one up. The rotation keeps the second segment inside the 32 bits
// even for tables of more than 2^16 slots.
func (e *EMC[V]) slotsFor(hash uint32) (uint32, uint32) {
	return hash & e.mask, bits.RotateLeft32(hash, -e.shift) & e.mask
}

// LookupShort is Lookup for a caller that knows whether k is short
// (k.IsShort(); flow.ExtractHash says so for free). A short key matches
// only a short slot, and two short keys differ only in their first
// flow.ShortWords words, so the compare reads a third of the key. short
// false means "not known": the whole key is compared, as by Lookup.
func (e *EMC[V]) LookupShort(k *flow.Key, hash uint32, short bool) *V {
	if !short {
		return e.Lookup(k, hash)
	}
	i, j := e.slotsFor(hash)
	if e.hashes[i] == hash {
		s := &e.slots[i]
		if s.val != nil && s.short && s.key.EqualShort(k) {
			return s.val
		}
	}
	if e.hashes[j] == hash {
		s := &e.slots[j]
		if s.val != nil && s.short && s.key.EqualShort(k) {
			return s.val
		}
	}
	return nil
}

// Lookup returns the value cached for k, or nil. hash must be the hash the
// key was inserted with (the datapath uses one hash per packet for both).
func (e *EMC[V]) Lookup(k *flow.Key, hash uint32) *V {
	i, j := e.slotsFor(hash)
	if e.hashes[i] == hash {
		s := &e.slots[i]
		if s.val != nil && s.key.Equal(k) {
			return s.val
		}
	}
	if e.hashes[j] == hash {
		s := &e.slots[j]
		if s.val != nil && s.key.Equal(k) {
			return s.val
		}
	}
	return nil
}

// Insert caches v for k. If k is already cached its value is updated; else
// an empty candidate slot is taken; else the candidate whose stored hash is
// lower is evicted. Evicting by a fixed rule rather than at random means
// that of three flows fighting over two slots, one keeps its slot for good
// instead of all three thrashing. A nil v is ignored (nil marks empty slots).
func (e *EMC[V]) Insert(k *flow.Key, hash uint32, v *V) {
	if v == nil {
		return
	}
	if len(e.slots) != e.size {
		e.allocate()
	}
	i, j := e.slotsFor(hash)
	if e.hashes[i] == hash && e.slots[i].val != nil && e.slots[i].key.Equal(k) {
		e.slots[i].val = v
		return
	}
	if e.hashes[j] == hash && e.slots[j].val != nil && e.slots[j].key.Equal(k) {
		e.slots[j].val = v
		return
	}
	var dst uint32
	switch {
	case e.slots[i].val == nil:
		dst = i
	case e.slots[j].val == nil:
		dst = j
	case e.hashes[j] < e.hashes[i]:
		dst = j
	default:
		dst = i
	}
	if e.slots[dst].val == nil {
		e.count++
	}
	e.hashes[dst] = hash
	e.slots[dst].key = *k
	e.slots[dst].short = k.IsShort()
	e.slots[dst].val = v
}

// SetInsertInvProb sets how often MaybeInsert inserts: 0 never (the EMC is
// disabled and stays empty unless Insert is called directly), 1 always, N on
// average once in N calls.
func (e *EMC[V]) SetInsertInvProb(n uint32) {
	e.invProb = n
	if n != 0 {
		e.threshold = math.MaxUint32 / n
	} else {
		e.threshold = 0
	}
}

// InsertInvProb returns the value set by SetInsertInvProb.
func (e *EMC[V]) InsertInvProb() uint32 { return e.invProb }

// MaybeInsert inserts with probability 1/InsertInvProb, deciding with a
// per-cache xorshift generator so that no global state is touched.
func (e *EMC[V]) MaybeInsert(k *flow.Key, hash uint32, v *V) {
	switch e.invProb {
	case 0:
		return
	case 1:
	default:
		x := e.rng
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		e.rng = x
		if x > e.threshold {
			return
		}
	}
	e.Insert(k, hash, v)
}

// Clear empties the cache, for example when the datapath's flow table
// generation changes and every cached pointer may be stale.
func (e *EMC[V]) Clear() {
	clear(e.hashes)
	clear(e.slots)
	e.count = 0
}

// Len returns the number of occupied slots.
func (e *EMC[V]) Len() int { return e.count }

// Cap returns the number of slots (allocated or still to be).
func (e *EMC[V]) Cap() int { return e.size }

// RemoveValue drops every entry that points at v and returns how many there
// were. It scans the whole table: it is for the slow path, when a megaflow is
// deleted and the cache must not hand it out again.
func (e *EMC[V]) RemoveValue(v *V) int {
	if v == nil {
		return 0
	}
	n := 0
	for i := range e.slots {
		if e.slots[i].val == v {
			e.slots[i] = emcSlot[V]{}
			e.hashes[i] = 0
			n++
		}
	}
	e.count -= n
	return n
}

// RemoveIf drops every entry whose value dead reports true and returns how
// many there were: one scan for a whole set of deleted megaflows.
func (e *EMC[V]) RemoveIf(dead func(v *V) bool) int {
	n := 0
	for i := range e.slots {
		if v := e.slots[i].val; v != nil && dead(v) {
			e.slots[i] = emcSlot[V]{}
			e.hashes[i] = 0
			n++
		}
	}
	e.count -= n
	return n
}

package xlate

import (
	"sync"
	"time"
)

// idTable hands out small ids for values keyed by their content, for
// state the datapath can only refer to by number: recirculation's frozen
// walks (RecircTable) and packet-in contexts (PacketInTable). The same
// content gets the same id, so the megaflows of one state share it.
//
// Lifetime: the datapath's megaflows are all flushed whenever the tables
// change, so an id is only referenced by megaflows installed since the
// flush before last. retire, called at each such flush, frees the ids
// neither handed out nor looked up since the previous retire: one
// generation of grace covers an upcall that took an id just before a
// flush and installed its megaflow just after it. Ids are allocated
// round-robin, so a reused id is also the one longest free.
type idTable[K comparable, V any] struct {
	mu    sync.Mutex
	byKey map[K]*idEntry[K, V]
	byID  map[uint32]*idEntry[K, V]
	max   uint32
	next  uint32
	gen   uint64
	// minAge, when set, also keeps an id until it has been unused that
	// long (by now): for ids that wait in a queue after the megaflow
	// that used them is gone (packet-ins on their way to controllers).
	minAge time.Duration
	now    func() time.Time
}

type idEntry[K comparable, V any] struct {
	key  K
	val  V
	id   uint32
	gen  uint64
	used time.Time // set only with minAge
}

func newIDTable[K comparable, V any](max uint32) *idTable[K, V] {
	return &idTable[K, V]{byKey: map[K]*idEntry[K, V]{}, byID: map[uint32]*idEntry[K, V]{}, max: max}
}

// get returns the id of k, allocating one for (k, v) if it has none; ok
// is false when every id is taken.
func (t *idTable[K, V]) get(k K, v V) (uint32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byKey[k]; e != nil {
		t.touch(e)
		return e.id, true
	}
	if uint32(len(t.byID)) >= t.max {
		return 0, false
	}
	for {
		t.next = t.next%t.max + 1
		if t.byID[t.next] == nil {
			break
		}
	}
	e := &idEntry[K, V]{key: k, val: v, id: t.next}
	t.touch(e)
	t.byKey[k] = e
	t.byID[e.id] = e
	return e.id, true
}

// lookup returns the value id stands for, or nil.
func (t *idTable[K, V]) lookup(id uint32) *V {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil {
		return nil
	}
	t.touch(e)
	return &e.val
}

// touch marks e used now (t.mu held).
func (t *idTable[K, V]) touch(e *idEntry[K, V]) {
	e.gen = t.gen
	if t.minAge > 0 {
		e.used = t.now()
	}
}

// retire starts a new generation and frees the ids unused for a whole
// one (and for minAge).
func (t *idTable[K, V]) retire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	var now time.Time
	if t.minAge > 0 {
		now = t.now()
	}
	for id, e := range t.byID {
		if e.gen < t.gen && (t.minAge == 0 || now.Sub(e.used) >= t.minAge) {
			delete(t.byID, id)
			delete(t.byKey, e.key)
		}
	}
	t.gen++
}

func (t *idTable[K, V]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

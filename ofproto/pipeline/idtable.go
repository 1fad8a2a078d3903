package pipeline

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// idTable is what the group and meter tables share: their entries by
// 32-bit id under one RWMutex, a generation that moves with every change
// (for cache invalidation), the checks every ADD and MODIFY makes of the id
// and the id-ordered listings the multiparts and DELETE ALL want. Each
// table adds what its entries mean.
type idTable[ID ~uint32, T any] struct {
	mu   sync.RWMutex
	byID map[ID]*T
	gen  atomic.Uint64
}

// Generation moves on every change to the table, for cache invalidation.
func (t *idTable[ID, T]) Generation() uint64 { return t.gen.Load() }

// get returns entry id, or nil.
func (t *idTable[ID, T]) get(id ID) *T {
	t.mu.RLock()
	e := t.byID[id]
	t.mu.RUnlock()
	return e
}

// modErrs are a table's error type and codes for the checks admit makes.
type modErrs struct {
	typ, exists, unknown, outOf uint16
}

// admit checks an ADD (add) or MODIFY of id: an ADD of an existing id, a
// MODIFY of an unknown one and an ADD beyond limit entries are refused with
// errs' codes. It returns the entry a MODIFY replaces. Called with t.mu
// held for writing.
func (t *idTable[ID, T]) admit(add bool, id ID, limit int, errs modErrs) (*T, error) {
	if t.byID == nil {
		t.byID = make(map[ID]*T)
	}
	old := t.byID[id]
	switch {
	case add && old != nil:
		return nil, &ofpwire.OFPError{Type: errs.typ, Code: errs.exists}
	case !add && old == nil:
		return nil, &ofpwire.OFPError{Type: errs.typ, Code: errs.unknown}
	case add && len(t.byID) >= limit:
		return nil, &ofpwire.OFPError{Type: errs.typ, Code: errs.outOf}
	}
	return old, nil
}

// idsLocked returns the ids in the table in order. Called with t.mu held.
func (t *idTable[ID, T]) idsLocked() []ID {
	ids := make([]ID, 0, len(t.byID))
	for id := range t.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// removeAllLocked empties the table and returns the ids it held, in
// order. Called with t.mu held for writing.
func (t *idTable[ID, T]) removeAllLocked() []ID {
	ids := t.idsLocked()
	clear(t.byID)
	if len(ids) > 0 {
		t.gen.Add(1)
	}
	return ids
}

// sorted returns the entry id selects, or every entry in id order when id
// is all.
func (t *idTable[ID, T]) sorted(id, all ID) []*T {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if id != all {
		if e := t.byID[id]; e != nil {
			return []*T{e}
		}
		return nil
	}
	ids := t.idsLocked()
	out := make([]*T, len(ids))
	for i, id := range ids {
		out[i] = t.byID[id]
	}
	return out
}

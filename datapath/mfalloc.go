package datapath

import (
	"slices"
	"time"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/actions"
)

// mfBlock is a megaflow together with the array its actions live in: one
// allocation per install instead of two, sized by class (newMegaflow).
type mfBlock[A any] struct {
	mf   Megaflow
	acts A
}

// allocMegaflow allocates a block whose array A holds na actions; the
// megaflow's Actions are set to it, len and cap exact so that an append
// could never run over into the neighbour.
func allocMegaflow[A any](na int) *Megaflow {
	b := new(mfBlock[A])
	if na > 0 {
		b.mf.Actions = unsafe.Slice((*actions.Action)(unsafe.Pointer(&b.acts)), na)
	}
	return &b.mf
}

// maxBlockActions is the longest action list a block holds; a longer one
// gets an allocation of its own.
const maxBlockActions = 8

// newMegaflow returns a megaflow with a copy of acts, in one allocation
// up to maxBlockActions actions.
func newMegaflow(acts actions.List) *Megaflow {
	var mf *Megaflow
	switch na := len(acts); {
	case na == 0:
		return new(Megaflow)
	case na == 1:
		mf = allocMegaflow[[1]actions.Action](na)
	case na == 2:
		mf = allocMegaflow[[2]actions.Action](na)
	case na <= 4:
		mf = allocMegaflow[[4]actions.Action](na)
	case na <= maxBlockActions:
		mf = allocMegaflow[[maxBlockActions]actions.Action](na)
	default:
		mf = new(Megaflow)
		mf.Actions = make(actions.List, na)
	}
	copy(mf.Actions, acts)
	return mf
}

// refList is the refs of the megaflows a PMD installed from upcalls that
// listed the same sinks, in the same order. An OVN megaflow lists ~30
// (its OpenFlow entries and groups, its tables' lookup path), and the
// megaflows of one logical path, one per address pair or connection, all
// list the same: sharing one copy takes ~500 bytes of pointers per install
// off the heap, and a push round touches each sink once per list instead
// of once per megaflow.
type refList struct {
	sinks []StatsSink
	// packets and bytes are what a push round gathered for the sinks,
	// handed on at its end (flushRefs); queued says the list is waiting
	// in the PMD's pushQ. Guarded by the PMD's installedMu.
	packets, bytes uint64
	queued         bool
}

// maxRefLists bounds the lists a PMD keeps for sharing; past it the PMD
// starts again from none (the megaflows keep theirs). Rule changes, which
// clear the PMD's megaflows, start it again too, so that no list keeps a
// deleted rule alive for long.
const maxRefLists = 1024

// sharedRefs returns the PMD's list of refs, made on first use.
func (p *PMD) sharedRefs(refs []StatsSink) *refList {
	if len(refs) == 0 {
		return nil
	}
	// The key is the interface values' bits: equal bits, equal sinks. The
	// list the map holds keeps every sink alive, so no address in a key
	// can be reused for another sink while the key is there.
	key := unsafe.String((*byte)(unsafe.Pointer(unsafe.SliceData(refs))), len(refs)*int(unsafe.Sizeof(refs[0])))
	if r := p.refLists[key]; r != nil {
		return r
	}
	if p.refLists == nil {
		p.refLists = make(map[string]*refList)
	} else if len(p.refLists) >= maxRefLists {
		clear(p.refLists)
	}
	r := &refList{sinks: slices.Clone(refs)}
	// The stored key must not alias refs, which the Upcaller reuses.
	p.refLists[string(unsafe.Slice(unsafe.StringData(key), len(key)))] = r
	return r
}

// flushRefs hands what the pushes since the last flush gathered to the
// sinks, each list's total at once. The caller holds installedMu.
func (p *PMD) flushRefs(now time.Time) {
	for i, r := range p.pushQ {
		for _, s := range r.sinks {
			s.Touch(now, r.packets, r.bytes)
		}
		r.packets, r.bytes, r.queued = 0, 0, false
		p.pushQ[i] = nil
	}
	p.pushQ = p.pushQ[:0]
}

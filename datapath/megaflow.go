package datapath

import (
	"sync/atomic"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
)

// Megaflow is a datapath flow: a masked key and its actions, installed in
// one PMD's classifier after an upcall.
type Megaflow struct {
	// Key is the flow's key, masked by Mask.
	Key flow.Key
	// Mask is the classifier's, shared by the PMD's megaflows of that
	// mask (classifier.Megaflows.InsertMasked); it is not to be written.
	Mask    *flow.Mask
	Actions actions.List
	// out is the port of a flow whose one action is an output to it, 0
	// otherwise: the PMD then sends the flow's packets straight to the
	// port's output batch, without interpreting actions per packet.
	out     uint32
	packets atomic.Uint64
	bytes   atomic.Uint64
	// used is the datapath clock (ns) when a packet last matched, kept to
	// usedResolution: the PMD stores it at most once per step, so a flow
	// hit by every batch costs a load, not another locked write, per batch.
	used atomic.Int64

	// refs are the sinks the flow's traffic goes to, shared with the
	// PMD's other megaflows whose upcalls listed the same ones.
	refs *refList
	// expired is set by the owning PMD when it removes the flow (idle,
	// replaced, or every flow cleared), so that one EMC scan can drop
	// every expired flow and a memo (next) never hands out a removed one.
	expired bool
	// ctRecirc says the actions are one ct (no nat, no helper) and a
	// recirc: the PMD then runs the tracker over the flow's packets and
	// classifies them again at once (executeCTRecirc).
	ctRecirc bool
	// words[:nwords] are the indices of Mask's non-zero words, for
	// matches (an array: installing a flow allocates only the flow).
	words  [flow.KeyWords]uint8
	nwords uint8
	// next memoises, for a ctRecirc flow, which megaflow its packets'
	// recirculated keys hit, by what the ct and the input port make of
	// them. Every field such a megaflow matches is either one that this
	// flow's mask fixes (so equal for all its packets) or one of those
	// (memoCovers), so the memo gives the classifier's answer without a
	// hash or a key compare; only the owning PMD reads or writes it.
	next   [4]recircMemo
	nextAt uint8
	// What has been pushed to refs so far; guarded by the owning PMD's
	// registry lock.
	pushedPackets, pushedBytes uint64
}

// recircMemo is one entry of Megaflow.next: the recirculated packets of
// input port inPort whose conntrack word (ctWord) is ct hit mf.
type recircMemo struct {
	ct     uint64
	inPort uint32
	mf     *Megaflow
}

// ctWordIndex is the key word holding the conntrack state, protocol, zone
// and mark: the ct fields a recirculated pass matches most.
const ctWordIndex = int(unsafe.Offsetof(flow.Key{}.CT) / 8)

// ctWord returns k's word ctWordIndex (flow.Conntrack.Head: one load of
// the word the tracker wrote with one store). TestCTWord checks it is the
// word.
func ctWord(k *flow.Key) uint64 {
	return k.CT.Head()
}

// memoFields are the bits a memo entry is keyed on (besides the recirc_id,
// fixed by the first flow's action): the input port and word ctWordIndex.
var memoFields = func() (m flow.Mask) {
	m.InPort = ^uint32(0)
	m.RecircID = 0xffff
	w := m.Words()
	w[ctWordIndex] = ^uint64(0)
	return m
}()

// memoCovers reports whether every bit the second pass's mask (second)
// matches is one the first pass's (first) fixes or one a memo entry is
// keyed on: then all packets of a first-pass flow with the same memo key
// have equal keys under second. The ct words after ctWordIndex (label,
// original tuple) are the tracker's, whatever the first pass matched:
// second must not match them.
func memoCovers(first, second *flow.Mask) bool {
	a, b, f := first.Words(), second.Words(), memoFields.Words()
	for i := range b {
		fixed := a[i]
		if i > ctWordIndex && i < ctWordIndex+ctWords {
			fixed = 0
		}
		if b[i]&^fixed&^f[i] != 0 {
			return false
		}
	}
	return true
}

// ctWords is how many key words the conntrack fields take.
const ctWords = int(unsafe.Sizeof(flow.Conntrack{}) / 8)

// memoLookup returns the megaflow memoised for a recirculated packet of
// port inPort with conntrack word ct, or nil.
func (f *Megaflow) memoLookup(inPort uint32, ct uint64) *Megaflow {
	for i := range f.next {
		if e := &f.next[i]; e.ct == ct && e.inPort == inPort && e.mf != nil && !e.mf.expired {
			return e.mf
		}
	}
	return nil
}

// memoAdd memoises mf for port inPort and conntrack word ct, replacing an
// entry of the same key, an empty or removed one, or the oldest.
func (f *Megaflow) memoAdd(inPort uint32, ct uint64, mf *Megaflow) {
	at := -1
	for i := range f.next {
		e := &f.next[i]
		if e.ct == ct && e.inPort == inPort || e.mf == nil || e.mf.expired {
			at = i
			break
		}
	}
	if at < 0 {
		at = int(f.nextAt) % len(f.next)
		f.nextAt++
	}
	f.next[at] = recircMemo{ct: ct, inPort: inPort, mf: mf}
}

// isCTRecirc reports whether acts are one ct without nat or a helper and
// a recirc to a valid id (Megaflow.ctRecirc).
func isCTRecirc(acts actions.List) bool {
	if len(acts) != 2 || acts[0].Kind != actions.CT || acts[1].Kind != actions.Recirc {
		return false
	}
	if acts[0].Val8&(actions.CTFlagNAT|actions.CTFlagALGFTP|actions.CTFlagALGTFTP) != 0 {
		return false
	}
	id := acts[1].RecircID()
	return id != 0 && id <= 0xffff
}

// setMaskWords records the indices of Mask's non-zero words.
func (f *Megaflow) setMaskWords() {
	n := 0
	for i, w := range f.Mask.Words() {
		if w != 0 {
			f.words[n] = uint8(i)
			n++
		}
	}
	f.nwords = uint8(n)
}

// matches reports whether k matches the flow: k & Mask == Key over the
// mask's words.
func (f *Megaflow) matches(k *flow.Key) bool {
	a, m, v := k.Words(), f.Mask.Words(), f.Key.Words()
	for _, i := range f.words[:f.nwords] {
		if a[i]&m[i] != v[i] {
			return false
		}
	}
	return true
}

// soleOutput returns the port acts only output to, or 0.
func soleOutput(acts actions.List) uint32 {
	if len(acts) == 1 && acts[0].Kind == actions.Output {
		return acts[0].Port
	}
	return 0
}

// push adds the traffic not yet reported to the flow's refs, queueing
// them in *q the first time; flushRefs hands it on.
func (f *Megaflow) push(q *[]*refList) {
	pk, by := f.packets.Load(), f.bytes.Load()
	dp, db := pk-f.pushedPackets, by-f.pushedBytes
	if dp == 0 && db == 0 {
		return
	}
	f.pushedPackets, f.pushedBytes = pk, by
	r := f.refs
	if r == nil {
		return
	}
	if !r.queued {
		r.queued = true
		*q = append(*q, r)
	}
	r.packets += dp
	r.bytes += db
}

// usedResolution is how fresh Megaflow.used is kept, in ns (OVS prints
// "used" in milliseconds).
const usedResolution = 1_000_000

// touch records that the flow matched packets at now.
func (f *Megaflow) touch(now int64) {
	if now-f.used.Load() >= usedResolution {
		f.used.Store(now)
	}
}

// Stats returns the packets and bytes the flow has matched (for
// revalidation, which pushes them to the OpenFlow rules).
func (f *Megaflow) Stats() (packets, bytes uint64) { return f.packets.Load(), f.bytes.Load() }

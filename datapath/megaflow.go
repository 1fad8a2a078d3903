package datapath

import (
	"sync/atomic"

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
	// expired is set by the owning PMD when it removes the flow for being
	// idle, so that one EMC scan can drop every expired flow.
	expired bool
	// What has been pushed to refs so far; guarded by the owning PMD's
	// registry lock.
	pushedPackets, pushedBytes uint64
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

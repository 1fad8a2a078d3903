package afxdp

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is the index arithmetic of one AF_XDP ring: a power-of-two array
// shared with the kernel, a producer and a consumer index that run freely
// (wrapping at 2^32) and a flags word. Only the side that owns an index
// writes it; the other side's index is read with an atomic load (acquire)
// and ours is published with an atomic store (release), so the entries
// written before a store are visible to the kernel once it sees the index,
// and entries the kernel wrote are visible to us once we load its index.
// Go's atomics are sequentially consistent, which is stronger than needed.
//
// Each side keeps a private copy of both indexes and reloads the other
// side's only when its copy says there is not enough room or data: most
// batches then touch no shared cache line except the one store.
type ring struct {
	prod, cons, flags *uint32
	mask, size        uint32
	cachedProd        uint32
	cachedCons        uint32
}

// init points r at the shared words of a ring with size entries.
func (r *ring) init(prod, cons, flags *uint32, size uint32) {
	r.prod, r.cons, r.flags = prod, cons, flags
	r.size = size
	r.mask = size - 1
	r.cachedProd = atomic.LoadUint32(prod)
	r.cachedCons = atomic.LoadUint32(cons)
}

// free returns how many of want entries the producer may fill now.
func (r *ring) free(want uint32) uint32 {
	n := r.size - (r.cachedProd - r.cachedCons)
	if n < want {
		r.cachedCons = atomic.LoadUint32(r.cons)
		n = r.size - (r.cachedProd - r.cachedCons)
		// A consumer index ahead of ours (a broken or hostile peer) would
		// make n wrap past size; offering nothing is the safe answer.
		if n > r.size {
			n = 0
		}
	}
	return min(n, want)
}

// submit publishes n entries written at cachedProd onwards.
func (r *ring) submit(n uint32) {
	r.cachedProd += n
	atomic.StoreUint32(r.prod, r.cachedProd)
}

// avail returns how many of want entries the consumer may read now.
func (r *ring) avail(want uint32) uint32 {
	n := r.cachedProd - r.cachedCons
	if n < want {
		r.cachedProd = atomic.LoadUint32(r.prod)
		n = r.cachedProd - r.cachedCons
		// A producer more than a ring ahead is broken; its entries are
		// still bounded by the mask, and every descriptor is validated,
		// but never hand out more than one ring's worth.
		if n > r.size {
			n = r.size
		}
	}
	return min(n, want)
}

// release hands n consumed entries back to the producer.
func (r *ring) release(n uint32) {
	r.cachedCons += n
	atomic.StoreUint32(r.cons, r.cachedCons)
}

// pending returns the entries we produced that the consumer has not taken
// (as far as the last load knows, refreshed here).
func (r *ring) pending() uint32 {
	r.cachedCons = atomic.LoadUint32(r.cons)
	return r.cachedProd - r.cachedCons
}

// needWakeup reports whether the kernel asked for a syscall to make progress
// on this ring (XDP_USE_NEED_WAKEUP).
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// addrRing is a fill or completion ring: entries are UMEM addresses.
type addrRing struct {
	ring
	addrs []uint64
}

// descRing is an rx or tx ring: entries are descriptors.
type descRing struct {
	ring
	descs []unix.XDPDesc
}

// ringWords finds a ring's producer, consumer and flags words and its
// entry array in mem, the ring's mmap'ed area, at the offsets from its
// start that the kernel reports.
func ringWords(mem []byte, off unix.XDPRingOffset) (prod, cons, flags *uint32, entries unsafe.Pointer) {
	base := unsafe.Pointer(unsafe.SliceData(mem))
	return (*uint32)(unsafe.Add(base, off.Producer)),
		(*uint32)(unsafe.Add(base, off.Consumer)),
		(*uint32)(unsafe.Add(base, off.Flags)),
		unsafe.Add(base, off.Desc)
}

// newAddrRing lays an address ring over mem (which must be at least
// off.Desc + 8*size bytes).
func newAddrRing(mem []byte, off unix.XDPRingOffset, size uint32) addrRing {
	p, c, f, e := ringWords(mem, off)
	var r addrRing
	r.init(p, c, f, size)
	r.addrs = unsafe.Slice((*uint64)(e), size)
	return r
}

// newDescRing lays a descriptor ring over mem (at least off.Desc +
// 16*size bytes).
func newDescRing(mem []byte, off unix.XDPRingOffset, size uint32) descRing {
	p, c, f, e := ringWords(mem, off)
	var r descRing
	r.init(p, c, f, size)
	r.descs = unsafe.Slice((*unix.XDPDesc)(e), size)
	return r
}

// ringBytes is the mmap length of a ring of size entries of entrySize bytes.
func ringBytes(off unix.XDPRingOffset, size uint32, entrySize uintptr) int {
	return int(off.Desc) + int(size)*int(entrySize)
}

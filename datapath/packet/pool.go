package packet

import (
	"runtime"
	"sync/atomic"
)

// Pool is a fixed set of packet buffers cut from one large allocation, with a
// free list. It is not safe for concurrent use: each PMD owns its pool, and
// only the owner takes and returns packets (drivers copy frames between
// their rings and pool buffers, so packets never change hands).
//
// A large pool's buffers are a private anonymous mapping rather than Go
// heap (newSlab): its pages take memory only once a frame was written into
// them, and the free list is a stack, so a PMD that has a few batches in
// flight at a time keeps reusing the same few hundred KiB. A PMD's 4,096
// buffers and 64 big ones (13 MiB) were a third of the heap of a switch
// with 1,000 idle ports, and resident twice over under the collector's
// heap goal; the buffers hold no pointers, so the collector never needed
// to see them.
type Pool struct {
	mem  []byte
	pkts []Packet
	free []*Packet // stack of free packets; len is the free count
	big  *Pool     // big buffers for GSO frames (AttachBig), or nil
	size int       // bytes per buffer, headroom included

	doubleFrees atomic.Uint64 // Put of a packet already free (a bug; counted, not fatal)
}

// NewPool allocates count buffers of bufSize bytes each (headroom included).
func NewPool(count, bufSize int) *Pool {
	if bufSize < Headroom+64 {
		bufSize = Headroom + 64
	}
	stride := BufferStride(bufSize)
	mem, unmap := newSlab(count * stride)
	p := &Pool{
		mem:  mem,
		pkts: make([]Packet, count),
		free: make([]*Packet, count),
		size: bufSize,
	}
	for i := range p.pkts {
		pkt := &p.pkts[i]
		pkt.buf = p.mem[i*stride : i*stride+bufSize : i*stride+bufSize]
		pkt.off = Headroom
		pkt.pool = p
		pkt.inPool = true
		p.free[count-1-i] = pkt
	}
	if unmap != nil {
		// Once nothing reaches the pool no packet of it is reachable
		// either (each points back to it), so no one can still be
		// reading or writing a buffer.
		runtime.AddCleanup(p, func(f func()) { f() }, unmap)
	}
	return p
}

// Get takes a packet with an empty frame and default headroom, or returns nil
// if the pool is exhausted.
func (p *Pool) Get() *Packet {
	n := len(p.free)
	if n == 0 {
		return nil
	}
	pkt := p.free[n-1]
	p.free = p.free[:n-1]
	pkt.off, pkt.length = Headroom, 0
	pkt.State = State{}
	return pkt
}

// AttachBig gives p a second pool of big buffers (BigBufSize bytes) that
// GetBig takes from, for GSO super-frames kept whole. Packets taken from it
// belong to big, so Free returns them there. Call it before p is used.
func (p *Pool) AttachBig(big *Pool) { p.big = big }

// GetBig takes a packet with a big buffer, or returns nil if p has no big
// pool or it is exhausted: a driver then cuts the super-frame into
// segments in normal buffers instead, as it would without one.
func (p *Pool) GetBig() *Packet {
	if p.big == nil {
		return nil
	}
	return p.big.Get()
}

// GetFit takes a packet that can hold a copy of src (CopyFrom): a normal
// one if src fits one, else a big one. It returns nil if none is free.
func (p *Pool) GetFit(src *Packet) *Packet {
	if int(src.off)+int(src.length) > p.size {
		return p.GetBig()
	}
	return p.Get()
}

// Big returns the attached big pool, or nil.
func (p *Pool) Big() *Pool { return p.big }

// Put returns a packet to the pool.
func (p *Pool) Put(pkt *Packet) {
	if pkt.inPool {
		p.doubleFrees.Add(1)
		return
	}
	pkt.inPool = true
	p.free = append(p.free, pkt) // never grows: cap is the pool size
}

// Available returns how many packets are free.
func (p *Pool) Available() int { return len(p.free) }

// Size returns how many packets the pool has in all.
func (p *Pool) Size() int { return len(p.pkts) }

// DoubleFrees returns how many times a free packet was freed again.
func (p *Pool) DoubleFrees() uint64 { return p.doubleFrees.Load() }

// BufferStride returns the distance to put between buffers of size bytes
// cut from one slab: a whole number of cache lines, and an odd one. With a
// power-of-two stride such as 2048 every buffer's headers would fall into
// the same two L1 cache sets, and the few dozen buffers a PMD cycles through
// would evict each other; an odd line count spreads them over all sets.
func BufferStride(size int) int {
	lines := (size + 63) / 64
	if lines%2 == 0 {
		lines++
	}
	return lines * 64
}

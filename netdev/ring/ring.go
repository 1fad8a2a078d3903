// Package ring is an in-memory port driver for tests and benchmarks: each rx
// and tx queue is a single-producer single-consumer ring of fixed-size frame
// slots. The datapath side polls and sends like on any port; the test side
// injects frames into rx queues and drains what the switch transmitted.
package ring

import (
	"errors"
	"sync/atomic"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
)

// SlotSize is the largest frame a ring slot holds.
const SlotSize = 2048

// queue is an SPSC ring of frames. head is advanced by the producer, tail by
// the consumer; each on its own cache line.
type queue struct {
	_    [64]byte
	head atomic.Uint64
	_    [56]byte
	tail atomic.Uint64
	_    [56]byte
	mask uint64
	lens []uint32
	data []byte
}

// slotStride keeps consecutive slots in different cache sets.
var slotStride = packet.BufferStride(SlotSize)

func newQueue(depth int) *queue {
	return &queue{
		mask: uint64(depth - 1),
		lens: make([]uint32, depth),
		data: make([]byte, depth*slotStride),
	}
}

func (q *queue) slot(i uint64) []byte {
	s := int(i&q.mask) * slotStride
	return q.data[s : s+SlotSize]
}

// Port is a ring port. Its zero value is not usable; use New.
type Port struct {
	name     string
	rx, tx   []*queue
	counters []netdev.Counters // one per rx queue, then one per tx queue
	mtu      int
	up       atomic.Bool
	closed   atomic.Bool
}

// New creates a ring port with nrxq receive and ntxq transmit queues of depth
// slots each (rounded up to a power of two).
func New(name string, nrxq, ntxq, depth int) *Port {
	d := 1
	for d < depth {
		d <<= 1
	}
	p := &Port{name: name, mtu: 1500, counters: make([]netdev.Counters, nrxq+ntxq)}
	for i := 0; i < nrxq; i++ {
		p.rx = append(p.rx, newQueue(d))
	}
	for i := 0; i < ntxq; i++ {
		p.tx = append(p.tx, newQueue(d))
	}
	p.up.Store(true)
	return p
}

// Name implements netdev.Netdev.
func (p *Port) Name() string { return p.name }

// NumRxQueues implements netdev.Netdev.
func (p *Port) NumRxQueues() int { return len(p.rx) }

// NumTxQueues implements netdev.Netdev.
func (p *Port) NumTxQueues() int { return len(p.tx) }

// MTU implements netdev.Netdev.
func (p *Port) MTU() int { return p.mtu }

// LinkUp implements netdev.Netdev.
func (p *Port) LinkUp() bool { return p.up.Load() }

// SetLinkUp changes the link state that LinkUp reports.
func (p *Port) SetLinkUp(up bool) { p.up.Store(up) }

// Close implements netdev.Netdev.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return errors.New("ring: port already closed")
	}
	return nil
}

// Closed reports whether Close was called.
func (p *Port) Closed() bool { return p.closed.Load() }

// Stats implements netdev.Netdev.
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	for i := range p.counters {
		p.counters[i].AddTo(&s)
	}
	return s
}

// Recv implements netdev.Netdev: it copies waiting frames into pool buffers.
func (p *Port) Recv(qi int, pool *packet.Pool, b *packet.Batch) int {
	q := p.rx[qi]
	tail := q.tail.Load()
	avail := q.head.Load() - tail
	if avail == 0 {
		return 0
	}
	if avail > packet.BatchSize {
		avail = packet.BatchSize
	}
	n, bytes := 0, 0
	for ; uint64(n) < avail; n++ {
		pkt := pool.Get()
		if pkt == nil {
			break
		}
		i := tail + uint64(n)
		l := int(q.lens[i&q.mask])
		pkt.SetData(q.slot(i)[:l])
		bytes += l
		b.Add(pkt)
	}
	c := &p.counters[qi]
	if n == 0 {
		// No buffer for a waiting frame: leave it in the ring (it is the
		// NIC-side backlog) and count the starvation once per poll.
		c.RxDrops.Add(1)
		return 0
	}
	q.tail.Store(tail + uint64(n))
	c.RxPackets.Add(uint64(n))
	c.RxBytes.Add(uint64(bytes))
	return n
}

// Send implements netdev.Netdev: it copies frames into free tx slots and
// drops what does not fit.
func (p *Port) Send(qi int, b *packet.Batch) int {
	q := p.tx[qi]
	head := q.head.Load()
	free := uint64(len(q.lens)) - (head - q.tail.Load())
	sent, bytes := 0, 0
	for _, pkt := range b.Packets() {
		if uint64(sent) == free {
			break
		}
		i := head + uint64(sent)
		q.lens[i&q.mask] = uint32(copy(q.slot(i), pkt.Data()))
		bytes += pkt.Len()
		sent++
	}
	q.head.Store(head + uint64(sent)) // publishing the head is the kick
	c := &p.counters[len(p.rx)+qi]
	c.TxPackets.Add(uint64(sent))
	c.TxBytes.Add(uint64(bytes))
	if d := b.N - sent; d > 0 {
		c.TxDrops.Add(uint64(d))
	}
	return sent
}

// Inject copies frames into rx queue q as if they had arrived on the wire
// and returns how many fitted (the rest are not queued). Only one goroutine
// may inject into a given queue at a time.
func (p *Port) Inject(qi int, frames ...[]byte) int {
	q := p.rx[qi]
	head := q.head.Load()
	free := uint64(len(q.lens)) - (head - q.tail.Load())
	n := 0
	for _, f := range frames {
		if uint64(n) == free {
			break
		}
		i := head + uint64(n)
		q.lens[i&q.mask] = uint32(copy(q.slot(i), f))
		n++
	}
	q.head.Store(head + uint64(n))
	return n
}

// Drain calls fn with each frame transmitted on tx queue q, oldest first, and
// returns how many it consumed. fn must not keep the slice. Only one
// goroutine may drain a given queue at a time.
func (p *Port) Drain(qi int, fn func(frame []byte)) int {
	q := p.tx[qi]
	tail := q.tail.Load()
	head := q.head.Load()
	for i := tail; i != head; i++ {
		fn(q.slot(i)[:q.lens[i&q.mask]])
	}
	q.tail.Store(head)
	return int(head - tail)
}

// Discard drops every frame waiting on tx queue q and returns how many.
func (p *Port) Discard(qi int) int {
	q := p.tx[qi]
	tail := q.tail.Load()
	head := q.head.Load()
	q.tail.Store(head)
	return int(head - tail)
}

// Pending returns how many injected frames rx queue q still holds.
func (p *Port) Pending(qi int) int {
	q := p.rx[qi]
	return int(q.head.Load() - q.tail.Load())
}

var _ netdev.Netdev = (*Port)(nil)

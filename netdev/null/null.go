// Package null is an endless source and a bottomless sink: every receive
// returns a full batch copied from a fixed packet mix, every send is counted
// and discarded. It measures the datapath without any queue in between.
package null

import (
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
)

// Port is a null port. Use New.
type Port struct {
	name     string
	frames   [][]byte
	next     []int // per rx queue: index of the next frame of the mix
	counters []netdev.Counters
	nrxq     int
}

// New creates a null port whose rx queues cycle through frames (none: the
// port never receives) and whose tx queues discard.
func New(name string, nrxq, ntxq int, frames [][]byte) *Port {
	return &Port{
		name:     name,
		frames:   frames,
		next:     make([]int, nrxq),
		counters: make([]netdev.Counters, nrxq+ntxq),
		nrxq:     nrxq,
	}
}

// Name implements netdev.Netdev.
func (p *Port) Name() string { return p.name }

// NumRxQueues implements netdev.Netdev.
func (p *Port) NumRxQueues() int { return p.nrxq }

// NumTxQueues implements netdev.Netdev.
func (p *Port) NumTxQueues() int { return len(p.counters) - p.nrxq }

// MTU implements netdev.Netdev.
func (p *Port) MTU() int { return 1500 }

// LinkUp implements netdev.Netdev.
func (p *Port) LinkUp() bool { return true }

// Close implements netdev.Netdev.
func (p *Port) Close() error { return nil }

// Stats implements netdev.Netdev.
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	for i := range p.counters {
		p.counters[i].AddTo(&s)
	}
	return s
}

// Recv implements netdev.Netdev.
func (p *Port) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	if len(p.frames) == 0 {
		return 0
	}
	next := p.next[q]
	n, bytes := 0, 0
	for ; n < packet.BatchSize; n++ {
		pkt := pool.Get()
		if pkt == nil {
			break
		}
		bytes += pkt.SetData(p.frames[next])
		if next++; next == len(p.frames) {
			next = 0
		}
		b.Add(pkt)
	}
	p.next[q] = next
	c := &p.counters[q]
	c.RxPackets.Add(uint64(n))
	c.RxBytes.Add(uint64(bytes))
	return n
}

// Send implements netdev.Netdev.
func (p *Port) Send(q int, b *packet.Batch) int {
	bytes := 0
	for _, pkt := range b.Packets() {
		bytes += pkt.Len()
	}
	c := &p.counters[p.nrxq+q]
	c.TxPackets.Add(uint64(b.N))
	c.TxBytes.Add(uint64(bytes))
	return b.N
}

var _ netdev.Netdev = (*Port)(nil)

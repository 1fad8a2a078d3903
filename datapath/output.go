package datapath

import (
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// OutputBatch is one PMD's queue of packets for one port, with the deadline
// by which it must be sent: the port's last send plus its interval. Packets
// wait here until the batch is full or an iteration (busy or idle) finds
// the deadline passed; a PMD about to sleep sleeps no later than the
// earliest deadline it holds.
type OutputBatch struct {
	txPlan
	batch    packet.Batch
	deadline int64 // ns; the batch is sent by the first iteration with now ≥ deadline
	pending  bool  // listed in PMD.pending
	// merged is the batch's last packet when coalesce built it (so
	// that more segments may join it), else nil.
	merged   *packet.Packet
	counters *txCounters
	sizes    *txBatchSizes
	auto     autoInterval // used when autoFlush is set
}

// output queues pkt for port no. A batch that would exceed BatchSize is sent
// first.
func (p *PMD) output(pkt *packet.Packet, no uint32) {
	ob := p.outputBatch(no)
	if ob == nil {
		p.drop(pkt, DropNoPort)
		return
	}
	p.outputTo(ob, pkt)
}

// outputBatch returns the PMD's output batch for port no, or nil if there
// is no such port.
func (p *PMD) outputBatch(no uint32) *OutputBatch {
	if no-1 >= uint32(len(p.outs)-1) { // port 0, LOCAL or past the table
		no = portIndex(no)
	}
	if int(no) >= len(p.outs) {
		return nil
	}
	return p.outs[no]
}

// outputTo queues pkt in ob: whole, coalesced with the packet before it, or
// cut into segments for a port that does not take it whole.
func (p *PMD) outputTo(ob *OutputBatch, pkt *packet.Packet) {
	if pkt.GSO() && !ob.sendsGSO() {
		p.outputSegmented(pkt, ob)
		return
	}
	if ob.coalesce && p.coalesce(ob, pkt) {
		return
	}
	p.queue(ob, pkt)
}

// outputAll queues every packet of pkts in ob, as outputTo each would: the
// batch form for a flow that only outputs to one port, with ob resolved
// once and, for a port that never takes super-frames (nothing to coalesce),
// the packets appended in one loop.
func (p *PMD) outputAll(ob *OutputBatch, pkts []*packet.Packet) {
	if ob.gso != nil {
		for _, pkt := range pkts {
			p.outputTo(ob, pkt)
		}
		return
	}
	b := &ob.batch
	for _, pkt := range pkts {
		if pkt.GSO() {
			p.outputSegmented(pkt, ob)
			continue
		}
		if b.N == packet.BatchSize {
			p.send(ob)
		}
		b.Pkts[b.N&(packet.BatchSize-1)] = pkt // the mask: no bounds check
		b.N++
	}
	if b.N > 0 && !ob.pending {
		ob.pending = true
		p.pending = append(p.pending, ob)
	}
}

// packet.BatchSize must be a power of two for outputAll's index mask.
var _ [0]struct{} = [packet.BatchSize & (packet.BatchSize - 1)]struct{}{}

// queue adds pkt to ob's batch, sending the batch first if it is full.
func (p *PMD) queue(ob *OutputBatch, pkt *packet.Packet) {
	if ob.batch.N == packet.BatchSize {
		p.send(ob)
	}
	ob.batch.Add(pkt)
	if !ob.pending {
		ob.pending = true
		p.pending = append(p.pending, ob)
	}
}

// send hands ob's batch to the driver, frees its packets and sets the next
// deadline to now + the port's interval.
func (p *PMD) send(ob *OutputBatch) {
	n := ob.batch.N
	sent := 0
	if !ob.port.Dev.LinkUp() {
		p.local.drops[DropPortDown] += uint64(n)
	} else {
		var l *TxqLock
		if ob.shared {
			l = ob.port.txqLocks.at(ob.txq)
			l.Lock()
		}
		var kicks0 uint64
		if ob.kicker != nil {
			kicks0 = ob.kicker.TxKicks(ob.txq)
		}
		sent = ob.port.Dev.Send(ob.txq, &ob.batch)
		if ob.kicker != nil {
			ob.counters.kicks.Add(ob.kicker.TxKicks(ob.txq) - kicks0)
		}
		if l != nil {
			l.Unlock()
		}
		p.local.drops[DropTxFull] += uint64(n - sent)
	}
	ob.counters.packets.Add(uint64(sent))
	ob.counters.batches.Add(1)
	ob.sizes.n[batchSizeBucket(n)].Add(1)
	if sent < n {
		ob.counters.drops.Add(uint64(n - sent))
	}
	ob.batch.FreeAll()
	ob.merged = nil
	interval := ob.intervalNs
	if ob.autoFlush {
		interval = ob.auto.update(p.now, n)
	}
	ob.deadline = p.now + interval
}

// flush sends the pending batches whose deadline has passed (all of them if
// force is set) and forgets the ones that are empty.
func (p *PMD) flush(force bool) {
	j := 0
	for _, ob := range p.pending {
		if ob.batch.N > 0 && (force || p.now >= ob.deadline) {
			p.send(ob)
		}
		if ob.batch.N > 0 {
			p.pending[j] = ob
			j++
		} else {
			ob.pending = false
		}
	}
	clear(p.pending[j:])
	p.pending = p.pending[:j]
}

// tx-flush-interval=auto: each PMD chooses, per port, the interval that
// fills batches toward BatchSize when the port is busy and adds no latency
// when it is not. Over windows of at least autoWindowNs it measures the
// rate r at which packets reach the port's batch (which the interval does
// not change below saturation); if holding for at most AutoFlushMaxNs
// would gather fewer than autoHoldMin packets, it sends at once (interval
// 0), and otherwise it holds for the time 2 × BatchSize packets take at
// r, capped at AutoFlushMaxNs: a full batch is sent when full anyway, so
// the margin only spares the deadline the batches that an uneven rate left
// short (with 5/4 instead of 2, batches at a measured 1 Mpps averaged 24
// packets under load against 30 for a fixed 200 µs). A
// port that turns sparse sends its next packet at once even before the
// window closes, since its deadline (last send + interval) has passed.
const (
	// AutoFlushMaxNs caps the interval auto chooses.
	AutoFlushMaxNs = 100_000
	autoWindowNs   = 1_000_000
	// autoHoldMin is the packets holding must be expected to gather
	// within AutoFlushMaxNs to be worth it (80 kpps with the 100 µs cap);
	// autoReleaseMin, lower, keeps a rate near the threshold from
	// switching back and forth every window.
	autoHoldMin    = 8
	autoReleaseMin = 6
)

// autoInterval is one OutputBatch's state under tx-flush-interval=auto.
type autoInterval struct {
	ns       int64 // the interval in force
	winStart int64
	winPkts  int64
}

// update counts a send of n packets at now and returns the interval to
// hold the next batch for.
func (a *autoInterval) update(now int64, n int) int64 {
	a.winPkts += int64(n)
	el := now - a.winStart
	if el < autoWindowNs {
		return a.ns
	}
	expected := a.winPkts * AutoFlushMaxNs / el
	switch {
	case expected >= autoHoldMin || a.ns > 0 && expected >= autoReleaseMin:
		a.ns = min(AutoFlushMaxNs, el*2*packet.BatchSize/a.winPkts)
	default:
		a.ns = 0
	}
	a.winStart, a.winPkts = now, 0
	return a.ns
}

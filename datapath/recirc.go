package datapath

import (
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// MaxRecirculations bounds how often one packet may be recirculated (passes
// through the caches after its first). A translation recirculates once per
// popped header whose contents it needs, so a handful is plenty; a loop of
// recirc actions (a bug in a translator) costs at most this many lookups
// per packet before the packet is dropped as DropRecirc.
const MaxRecirculations = 6

// recircQueue holds the packets recirc actions sent back while a batch was
// executed: they are classified as a mini-batch of their own once the batch
// is done, so recirculation keeps the passes over a batch (extract, hash,
// EMC, megaflow) and allocates nothing. Two queues alternate: executing
// one mini-batch fills the other. What does not fit waits in spill, which
// has room for every buffer of the PMD's pool: a packet that leaves many
// (a super-frame cut into segments, a datagram's fragments released
// together) is never dropped for want of a slot.
type recircQueue struct {
	q     [2]packet.Batch
	cur   int // the queue recirc actions add to
	spill []*packet.Packet
}

// pending reports whether packets wait for another pass.
func (rq *recircQueue) pending() bool { return rq.q[rq.cur].N > 0 || len(rq.spill) > 0 }

// recirculate queues pkt, as its actions left it, for another pass under
// recirc_id id, or drops it when it has been recirculated too often.
func (p *PMD) recirculate(pkt *packet.Packet, id uint32) {
	if pkt.Recircs >= MaxRecirculations || id == 0 || id > 0xffff {
		p.drop(pkt, DropRecirc)
		return
	}
	rq := &p.recirc
	if !rq.q[rq.cur].Add(pkt) {
		if len(rq.spill) == cap(rq.spill) {
			p.drop(pkt, DropNoBuffer)
			return
		}
		rq.spill = append(rq.spill, pkt)
	}
	pkt.Recircs++
	pkt.Key.RecircID = uint16(id)
	p.local.recirculations++
}

// drainRecirc classifies and executes the recirculated packets until no
// recirc action adds more (MaxRecirculations bounds the rounds). It reports
// whether any of them needed an upcall.
func (p *PMD) drainRecirc() (upcalled bool) {
	rq := &p.recirc
	for rq.pending() {
		if rq.q[rq.cur].N == 0 {
			n := min(len(rq.spill), packet.BatchSize)
			for _, pkt := range rq.spill[:n] {
				rq.q[rq.cur].Add(pkt)
			}
			rq.spill = append(rq.spill[:0], rq.spill[n:]...)
		}
		b := &rq.q[rq.cur]
		rq.cur ^= 1
		pkts := b.Packets()
		for _, pkt := range pkts {
			// A valid key is what extraction would give: the actions
			// keep it in step with the bytes they rewrite.
			if pkt.KeyValid {
				pkt.HashValid = false
				continue
			}
			reextract(pkt)
		}
		if p.classify(pkts) {
			upcalled = true
		}
		clear(b.Pkts[:b.N])
		b.N = 0
	}
	return upcalled
}

// reextract parses the packet's frame afresh for its next pass, keeping
// what the frame does not carry: the input port, the tunnel metadata
// (as the actions left it), the conntrack state a ct action set and the
// recirc_id the recirc action stored.
func reextract(pkt *packet.Packet) {
	id, tid, tun, ct := pkt.Key.RecircID, pkt.Key.TunnelID, pkt.Key.Tun, pkt.Key.CT
	flow.Extract(pkt.Data(), pkt.InPort, &pkt.Key, &pkt.Offsets)
	pkt.Key.RecircID, pkt.Key.TunnelID, pkt.Key.Tun, pkt.Key.CT = id, tid, tun, ct
	pkt.KeyValid = true
	pkt.HashValid = false
}

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
// one mini-batch fills the other.
type recircQueue struct {
	q   [2]packet.Batch
	cur int // the queue recirc actions add to
}

// recirculate queues pkt, as its actions left it, for another pass under
// recirc_id id, or drops it when it has been recirculated too often.
func (p *PMD) recirculate(pkt *packet.Packet, id uint32) {
	if pkt.Recircs >= MaxRecirculations || id == 0 || id > 0xffff {
		p.drop(pkt, DropRecirc)
		return
	}
	// A mini-batch holds at most one packet per packet of the batch that
	// filled it; only a mailbox (drained after each packet-out) or a
	// NoInstall upcall executing inline could add more, and then the
	// packet is dropped rather than the queue grown.
	if !p.recirc.q[p.recirc.cur].Add(pkt) {
		p.drop(pkt, DropNoBuffer)
		return
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
	for rq.q[rq.cur].N > 0 {
		b := &rq.q[rq.cur]
		rq.cur ^= 1
		pkts := b.Packets()
		for _, pkt := range pkts {
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

package datapath

import (
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// GSO super-frames (packet.Packet.GSO) stay one packet from receive to a
// port that takes them whole (netdev.GSOSender). They are cut into
// MTU-sized segments, with the Segmenter drivers use on receive, in two
// places only:
//
//   - before the actions, when the action list has one that cannot be
//     kept right on the frame as a whole (gsoSafe);
//   - at output, for a port that does not take GSO.

// gsoSafe reports whether acts can run on a GSO frame whole. The actions
// allowed touch no byte that the L4 checksum covers (so the partial
// checksum, which holds the pseudo-header sum, stays right), and Push and
// Pull keep csum_start on the same byte. An address rewrite would need the
// pseudo-header form of the checksum update, a port rewrite none at all;
// rather than teach every setter the difference, such lists see segments.
// Meters and packet-ins count and carry packets, so they see segments too,
// as does anything not listed (a kind added later is safe by default).
func gsoSafe(acts actions.List) bool {
	for i := range acts {
		switch acts[i].Kind {
		case actions.Output, actions.Drop, actions.SetEthSrc, actions.SetEthDst,
			actions.PushVLAN, actions.PopVLAN, actions.SetVLANTCI,
			actions.SetIPTOS, actions.SetIPTTL, actions.DecIPTTL, actions.SetIPv6Label,
			actions.SetTunnelID, actions.SetTunnelSrc, actions.SetTunnelDst:
		default:
			return false
		}
	}
	return true
}

// sendsGSO reports whether dev takes GSO frames whole.
func sendsGSO(dev netdev.Netdev) bool {
	g, ok := dev.(netdev.GSOSender)
	return ok && g.SendsGSO()
}

// segmentGSO cuts pkt into segments in normal buffers and passes each to
// fn with pkt's metadata (key, offsets, tunnel, in_port: the headers are
// the same bytes at the same places). pkt stays the caller's. A frame that
// does not parse counts as a DropAction, segments that find the pool dry
// as DropNoBuffer.
func (p *PMD) segmentGSO(pkt *packet.Packet, fn func(*packet.Packet)) {
	var seg vnethdr.Segmenter
	h := vnethdr.Header(pkt.Offload)
	if seg.Reset(&h, pkt.Data()) != nil {
		p.local.drops[DropAction]++
		return
	}
	p.gsoSegmented.Add(1)
	for !seg.Done() {
		s := p.pool.Get()
		if s == nil {
			p.local.drops[DropNoBuffer]++
			break
		}
		n, ok, err := seg.Next(s.Buffer())
		if !ok || err != nil {
			s.Free()
			p.local.drops[DropAction]++
			break
		}
		s.SetLen(n)
		s.InPort = pkt.InPort
		s.Hash, s.HashValid = pkt.Hash, pkt.HashValid
		s.HasTunnel, s.TunnelID, s.Tunnel = pkt.HasTunnel, pkt.TunnelID, pkt.Tunnel
		if pkt.KeyValid {
			s.Key, s.Offsets, s.KeyValid = pkt.Key, pkt.Offsets, true
		} else {
			flow.Extract(s.Data(), s.InPort, &s.Key, &s.Offsets)
			s.KeyValid = true
		}
		fn(s)
	}
}

// executeSegmented runs acts on each segment of pkt and frees pkt.
func (p *PMD) executeSegmented(pkt *packet.Packet, acts actions.List) {
	p.segmentGSO(pkt, func(s *packet.Packet) { p.execute(s, acts) })
	pkt.Free()
}

// outputSegmented queues each segment of pkt on ob and frees pkt.
func (p *PMD) outputSegmented(pkt *packet.Packet, ob *OutputBatch) {
	p.segmentGSO(pkt, func(s *packet.Packet) { p.queue(ob, s) })
	pkt.Free()
}

// outputCopySegments queues segments of pkt for port no, keeping pkt: the
// copy for an output that is not the last action, when no big buffer is
// free to copy the frame whole.
func (p *PMD) outputCopySegments(pkt *packet.Packet, no uint32) {
	p.segmentGSO(pkt, func(s *packet.Packet) { p.output(s, no) })
}

// GSOSegmented returns how many GSO frames the PMD cut into segments in
// software (before actions or at output), as opposed to passing them on
// whole.
func (p *PMD) GSOSegmented() uint64 { return p.gsoSegmented.Load() }

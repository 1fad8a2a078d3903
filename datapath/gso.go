package datapath

import (
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
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

// gsoSafe reports whether acts can run on the GSO frame pkt whole. The
// actions allowed either touch no byte that the L4 checksum covers (so
// the partial checksum, which holds the pseudo-header sum, stays right,
// and Push and Pull keep csum_start on the same byte), or are the address
// and port rewrites that applyPartial keeps right on a TCP super-frame
// whose partial checksum is where the key says the TCP header is. Anything
// else (MPLS, meters and packet-ins, which count and carry packets, UDP
// super-frames, any action kind added later) sees segments. Conntrack
// and recirculation take a TCP super-frame whole: the tracker's sequence
// windows count bytes, so a super-frame is valid exactly when its
// segments would be, and its next pass is extracted from its headers,
// which are the first segment's. (Segmenting first would also send every
// segment through the recirculation queue, which holds one batch.)
func gsoSafe(acts actions.List, pkt *packet.Packet) bool {
	for i := range acts {
		switch acts[i].Kind {
		case actions.Output, actions.Drop, actions.SetEthSrc, actions.SetEthDst,
			actions.PushVLAN, actions.PopVLAN, actions.SetVLANTCI,
			actions.SetIPTOS, actions.SetIPTTL, actions.DecIPTTL, actions.SetIPv6Label,
			actions.SetTunnelID, actions.SetTunnelSrc, actions.SetTunnelDst,
			actions.CTClear, actions.CTLabel, actions.CTLabelMask, actions.CTNAT, actions.CTNATMax:
		case actions.CT, actions.Recirc:
			if !tcpPartial(pkt) {
				return false
			}
		case actions.SetIPv4Src, actions.SetIPv4Dst, actions.SetIPv6Src, actions.SetIPv6Dst,
			actions.SetL4Src, actions.SetL4Dst:
			if !tcpPartial(pkt) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// tcpPartial reports whether pkt is a TCP super-frame whose partial
// checksum field is the one the action setters update (the TCP checksum
// at the L4 offset of the key).
func tcpPartial(pkt *packet.Packet) bool {
	o := &pkt.Offload
	g := o.GSOType &^ vnethdr.GSOECN
	return (g == vnethdr.GSOTCPv4 || g == vnethdr.GSOTCPv6) && o.Flags&packet.OffloadNeedsCsum != 0 &&
		pkt.KeyValid && pkt.Key.NwProto == header.IPProtoTCP && pkt.Offsets.L4 != flow.NoOffset &&
		int(pkt.Offsets.L4) == int(o.CsumStart) && o.CsumOffset == header.TCPChecksumOff &&
		int(o.CsumStart)+header.TCPChecksumOff+2 <= pkt.Len()
}

// apply runs a on pkt. Only frames kept whole with a partial checksum
// (gsoSafe has vetted them) take the other path.
func (p *PMD) apply(a *actions.Action, pkt *packet.Packet) bool {
	if pkt.Offload.Flags&packet.OffloadNeedsCsum == 0 {
		return actions.Apply(a, pkt)
	}
	return applyPartial(a, pkt)
}

// applyPartial runs a on a TCP super-frame with a partial checksum. The
// setters update a checksum field as a complete checksum C (the complement
// of a sum S) by adding ~old + new to S. A partial field holds the
// pseudo-header sum P itself, uncomplemented: an address, which the
// pseudo-header covers, must add ~old + new to P, so the field is
// complemented around the setter; a port, which only the final sum over
// the segment covers, must leave P alone, so the field is put back.
func applyPartial(a *actions.Action, pkt *packet.Packet) bool {
	f := int(pkt.Offload.CsumStart) + int(pkt.Offload.CsumOffset)
	d := pkt.Data()
	switch a.Kind {
	case actions.SetIPv4Src, actions.SetIPv4Dst, actions.SetIPv6Src, actions.SetIPv6Dst:
		d[f], d[f+1] = ^d[f], ^d[f+1]
		ok := actions.Apply(a, pkt)
		d[f], d[f+1] = ^d[f], ^d[f+1]
		return ok
	case actions.SetL4Src, actions.SetL4Dst:
		c0, c1 := d[f], d[f+1]
		ok := actions.Apply(a, pkt)
		d[f], d[f+1] = c0, c1
		return ok
	}
	return actions.Apply(a, pkt)
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

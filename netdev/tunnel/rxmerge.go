package tunnel

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// Receive-side merging. A coalesced UDP_GRO read (rxgro.go) of a TCP
// stream is a run of datagrams holding consecutive segments of one flow,
// and so often are several reads in a row of one recvmmsg call: one read
// holds at most one segmented send of the peer (gso.go), and the peer's
// sends end at its batch's frame boundaries and at the 64 KB limit, which
// the datagrams' repeated headers reach before a 64 KB super-frame's
// payload does.
// Cutting it into MTU-size pool packets costs a copy and a pass through
// the datapath per segment, and the datapath's output coalescing then
// copies them again into one frame for a port that takes super-frames.
// So the port merges such a run itself, straight from the receive buffer
// into one big buffer: a TCP super-frame with GSO offload state and a
// partial checksum, as a local sender's would be, which the datapath
// keeps whole (and cuts again only for a port that cannot take it).
//
// Only what GRO would merge is merged: the same tunnel header, untagged
// Ethernet, IPv4 without options or fragmentation or IPv6 with TCP next,
// the same addresses, TOS/traffic class, TTL, ports, ack, window and TCP
// options; sequence numbers contiguous; flags ACK (PSH may end a run);
// every segment but the last as long as the first. Every segment's TCP
// checksum is verified first, since the merged frame's partial checksum
// tells the receiver there is nothing left to verify; a segment that
// fails ends the run and goes on alone, for its receiver to drop.

// mergeMax bounds a merged frame's segments (the kernel's
// UDP_MAX_SEGMENTS), a bound on the work per frame; the 64 KB bound is
// what ends a long run. A workload's 64 KB TSO frame behind a 1,450-byte
// MTU is 46 segments of 1,398 bytes (timestamps on): a bound of 44 cut
// every such frame into a 61 KB and a 3 KB one.
const mergeMax = 64

const (
	tcpACK = 0x10
	ipv4L3 = 14
)

// tcpInner is what merging reads from an inner TCP segment.
type tcpInner struct {
	l4, hl  int // TCP header offset, header length (through TCP)
	v6      bool
	payload int
	seq     uint32
	flags   byte
}

// parseInner parses an untagged Ethernet/IPv4 (no options, not a
// fragment) or IPv6 (TCP next) TCP segment whose IP length covers the
// frame exactly.
func parseInner(f []byte) (s tcpInner, ok bool) {
	if len(f) < ipv4L3+20+20 {
		return s, false
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case header.EtherTypeIPv4:
		ip := f[ipv4L3:]
		if ip[0] != 0x45 || ip[header.IPv4ProtoOff] != header.IPProtoTCP || binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 ||
			int(binary.BigEndian.Uint16(ip[2:])) != len(f)-ipv4L3 {
			return s, false
		}
		s.l4 = ipv4L3 + 20
	case header.EtherTypeIPv6:
		if len(f) < ipv4L3+40+20 {
			return s, false
		}
		ip := f[ipv4L3:]
		if ip[0]>>4 != 6 || ip[header.IPv6NextHeaderOff] != header.IPProtoTCP || int(binary.BigEndian.Uint16(ip[4:])) != len(f)-ipv4L3-40 {
			return s, false
		}
		s.l4, s.v6 = ipv4L3+40, true
	default:
		return s, false
	}
	tcp := f[s.l4:]
	s.hl = s.l4 + int(tcp[12]>>4)*4
	if s.hl < s.l4+20 || s.hl > len(f) {
		return s, false
	}
	s.payload = len(f) - s.hl
	s.seq = binary.BigEndian.Uint32(tcp[4:])
	s.flags = tcp[13]
	return s, true
}

// pseudoAddrs sums the pseudo-header's addresses and protocol.
func pseudoAddrs(f []byte, s *tcpInner) uint64 {
	a, b := ipv4L3+12, ipv4L3+20
	if s.v6 {
		a, b = ipv4L3+8, ipv4L3+40
	}
	return uint64(vnethdr.Sum(f[a:b])) + 6
}

// csumOK verifies a segment's TCP checksum.
func csumOK(f []byte, s *tcpInner) bool {
	return vnethdr.Fold(pseudoAddrs(f, s)+uint64(len(f)-s.l4)+uint64(vnethdr.Sum(f[s.l4:]))) == 0xffff
}

// sameHeaders reports whether two segments' headers differ only where
// consecutive segments of one flow may: IP length, ID and checksum, TCP
// sequence number, flags and checksum.
func sameHeaders(a, b []byte, s *tcpInner) bool {
	l4, hl := s.l4, s.hl
	if len(b) < hl {
		return false
	}
	var ip bool
	if s.v6 {
		ip = string(a[:ipv4L3+4]) == string(b[:ipv4L3+4]) && string(a[ipv4L3+6:l4]) == string(b[ipv4L3+6:l4])
	} else {
		ip = string(a[:ipv4L3+2]) == string(b[:ipv4L3+2]) && string(a[ipv4L3+6:ipv4L3+10]) == string(b[ipv4L3+6:ipv4L3+10]) &&
			string(a[ipv4L3+12:l4]) == string(b[ipv4L3+12:l4])
	}
	return ip && string(a[l4:l4+4]) == string(b[l4:l4+4]) && // ports
		string(a[l4+8:l4+13]) == string(b[l4+8:l4+13]) && // ack, data offset
		string(a[l4+14:l4+16]) == string(b[l4+14:l4+16]) && // window
		string(a[l4+18:hl]) == string(b[l4+18:hl]) // urgent pointer, options
}

// rxSpan is one received message for merging: the datagrams of msg, seg
// bytes each (the last may be shorter).
type rxSpan struct {
	msg []byte
	seg int
}

// spanPos is a position in a run of spans: message i, byte off.
type spanPos struct{ i, off int }

// nextDgram returns the datagram at p and moves p past it, on into the
// next span at a span's end; nil when the spans are used up.
func nextDgram(spans []rxSpan, p *spanPos) []byte {
	for p.i < len(spans) && p.off >= len(spans[p.i].msg) {
		p.i++
		p.off = 0
	}
	if p.i >= len(spans) {
		return nil
	}
	s := &spans[p.i]
	d := s.msg[p.off:min(p.off+max(s.seg, 1), len(s.msg))]
	p.off += len(d)
	return d
}

// mergeRun merges segments from position from on into one TCP
// super-frame in a big buffer from pool, tunnel header in front. The
// spans are consecutive messages of one recvmmsg call with the same outer
// metadata, so a run may go on from one read into the next, as GRO would
// have merged it had the reads come as one. It returns the frame and the
// position after the last datagram merged, or nil and from when fewer
// than two segments merge (or no big buffer is free).
func mergeRun(k Kind, pool *packet.Pool, spans []rxSpan, from spanPos) (*packet.Packet, spanPos) {
	pos := from
	first := nextDgram(spans, &pos)
	if first == nil {
		return nil, from
	}
	hl, _, _, _, ok := decap(k, first)
	if !ok {
		return nil, from
	}
	f0 := first[hl:]
	s0, ok := parseInner(f0)
	if !ok || s0.payload == 0 || s0.flags != tcpACK || !csumOK(f0, &s0) {
		return nil, from
	}
	n, total, end := 1, len(f0), pos
	seq := s0.seq + uint32(s0.payload)
	var lastFlags byte
	for n < mergeMax {
		d := nextDgram(spans, &pos)
		if d == nil || len(d) <= hl || string(d[:hl]) != string(first[:hl]) {
			break
		}
		f := d[hl:]
		s, ok := parseInner(f)
		if !ok || s.v6 != s0.v6 || s.hl != s0.hl || s.payload == 0 || s.payload > s0.payload || s.seq != seq ||
			s.flags&^tcpPSH != tcpACK || total+s.payload-ipv4L3 > 0xffff || !sameHeaders(f0, f, &s0) || !csumOK(f, &s) {
			break
		}
		total += s.payload
		seq += uint32(s.payload)
		lastFlags = s.flags
		n++
		end = pos
		if s.payload < s0.payload || s.flags&tcpPSH != 0 {
			break
		}
	}
	if n < 2 {
		return nil, from
	}
	big := pool.GetBig()
	if big == nil {
		return nil, from
	}
	buf := big.Buffer()
	if len(buf) < hl+total {
		big.Free()
		return nil, from
	}
	pos = from
	w := copy(buf, nextDgram(spans, &pos))
	for range n - 1 {
		w += copy(buf[w:], nextDgram(spans, &pos)[hl+s0.hl:])
	}
	big.SetLen(w)
	f := buf[hl:w]
	l4len := len(f) - s0.l4
	if s0.v6 {
		binary.BigEndian.PutUint16(f[ipv4L3+4:], uint16(l4len))
	} else {
		ip := f[ipv4L3:s0.l4]
		binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-ipv4L3))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^vnethdr.Sum(ip))
	}
	f[s0.l4+13] |= lastFlags & tcpPSH
	// The partial checksum: the pseudo-header sum over the new length.
	binary.BigEndian.PutUint16(f[s0.l4+16:], vnethdr.Fold(pseudoAddrs(f, &s0)+uint64(l4len)))
	g := uint8(vnethdr.GSOTCPv4)
	if s0.v6 {
		g = vnethdr.GSOTCPv6
	}
	// CsumStart counts from the tunnel header, which accept pulls.
	big.Offload = packet.Offload{Flags: packet.OffloadNeedsCsum, GSOType: g, HdrLen: uint16(s0.hl),
		GSOSize: uint16(s0.payload), CsumStart: uint16(hl + s0.l4), CsumOffset: 16}
	return big, end
}

// superDatagram returns, in a big packet from pool, the inner TCP
// super-frame that datagram d carries whole, or nil if d is not one. A
// sender on this host behind a veth underlay (a kernel vxlan device with
// TSO) hands the veth a TCP super-frame encapsulated once, as one GSO
// packet; no device segments it on the way, and the kernel delivers it to
// the UDP socket as one datagram longer than any on a wire, with no
// segment size. It goes on as what it is: a super-frame with the offload
// a TSO sender's has (its TCP checksum field holds the pseudo-header sum
// over its length, as mergeRun's frames do), cut by whoever must at
// segments that fill the inner MTU mtu (an inner L3 MTU).
//
// Marking the frame so makes whoever cuts it compute the checksum anew,
// which would hide a corruption from the receiver; so a complete checksum
// (what a remote sender's datagram, reassembled from IP fragments,
// carries) is verified first, and badSum reports one that fails: the
// caller drops the datagram. Only a field holding exactly the
// pseudo-header sum is taken unverified: a local sender's partial
// checksum, which says nothing about the payload and which the local
// sender's own receiver would not have verified either.
func superDatagram(k Kind, pool *packet.Pool, d []byte, mtu int) (big *packet.Packet, badSum bool) {
	hl, _, _, _, ok := decap(k, d)
	if !ok {
		return nil, false
	}
	f := d[hl:]
	s, ok := parseInner(f)
	gso := mtu - (s.hl - ipv4L3)
	if !ok || gso <= 0 || s.payload <= gso {
		return nil, false
	}
	if binary.BigEndian.Uint16(f[s.l4+16:]) != vnethdr.Fold(pseudoAddrs(f, &s)+uint64(len(f)-s.l4)) && !csumOK(f, &s) {
		return nil, true
	}
	big = pool.GetBig()
	if big == nil {
		return nil, false
	}
	if len(big.Buffer()) < len(d) || !big.SetLen(copy(big.Buffer(), d)) {
		big.Free()
		return nil, false
	}
	g := uint8(vnethdr.GSOTCPv4)
	if s.v6 {
		g = vnethdr.GSOTCPv6
	}
	// CsumStart counts from the tunnel header, which accept pulls.
	big.Offload = packet.Offload{Flags: packet.OffloadNeedsCsum, GSOType: g, HdrLen: uint16(s.hl),
		GSOSize: uint16(gso), CsumStart: uint16(hl + s.l4), CsumOffset: 16}
	return big, false
}

// markRuns sets sameTo[i] to the end (exclusive) of the run of datagrams
// from i on that carry datagram i's outer metadata: what mergeRun may
// join into one super-frame. A span with no message (a datagram found
// bad) ends a run.
func markRuns(sameTo []int, spans []rxSpan, tmpls []flow.Tunnel) {
	n := len(sameTo)
	for i := n - 1; i >= 0; i-- {
		sameTo[i] = i + 1
		if i+1 < n && spans[i+1].msg != nil && tmpls[i+1] == tmpls[i] {
			sameTo[i] = sameTo[i+1]
		}
	}
}

package conntrack

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"sync"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// FTP through NAT. An FTP control connection names addresses in its
// payload: the client's in PORT/EPRT, the server's in 227 (EPRT's and
// 227's carry it; 229's only a port). When the connection is translated,
// each end would announce an address the other cannot reach, so the
// helper writes in the address as the peer knows it: a client behind
// SNAT announces the public address, a server behind DNAT the address
// the client dialled. The text may change length ("10,0,0,1" for
// "198,18,0,200"), so from that segment on, the sender's sequence numbers
// are shifted on the wire by what its rewrites added, and the peer's
// acknowledgements (and SACK blocks) shifted back; the tracker itself
// keeps each end's sequence space as that end sent it. The data
// connections the commands announce are expected with the translation
// that makes them line up (see helperPacket), and a ct with nat
// committing one translates it that way.
//
// Each direction's shift is kept as Linux's nf_conntrack keeps it (one
// position and the offsets before and after it), so that a retransmitted
// command is rewritten again without shifting twice. Offloaded frames (a
// GSO super-frame, a partial checksum) get their sequence numbers shifted
// but no payload rewrite. The rewrite happens on the packet as it reached
// the ct, before the translation of its headers (Rewrite), which keeps
// the checksums this leaves right.

// ftpEdit is one address to write into a segment's payload: its bytes
// [from, to) become addr, in the h1,h2,h3,h4 form (commas) or as text.
type ftpEdit struct {
	from, to int
	addr     [16]byte
	commas   bool
}

// text appends the edit's address as the line writes addresses.
func (e *ftpEdit) text(buf []byte) []byte {
	if !e.commas {
		return netip.AddrFrom16(e.addr).Unmap().AppendTo(buf)
	}
	for i, b := range e.addr[12:] {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendUint(buf, uint64(b), 10)
	}
	return buf
}

// seqAdj is how the helper's rewrites moved one end's sequence numbers:
// segments up to pos (the last rewritten one's start) by before, later
// ones by after.
type seqAdj struct {
	pos           uint32
	before, after int32
}

// offset is the shift of a segment starting at seq.
func (a *seqAdj) offset(seq uint32) int32 {
	if seqGT(seq, a.pos) {
		return a.after
	}
	return a.before
}

// ackOffset is the shift to take off an acknowledgement (or SACK edge)
// of this end's data, as the peer saw it.
func (a *seqAdj) ackOffset(ack uint32) int32 {
	if seqGT(ack-uint32(a.before), a.pos) {
		return a.after
	}
	return a.before
}

// grow records a rewrite that changed the length of the segment at seq
// by delta; a retransmission of the last rewritten segment does not
// shift again.
func (a *seqAdj) grow(seq uint32, delta int32) {
	if a.before == a.after || seqGT(seq, a.pos) {
		a.pos, a.before = seq, a.after
		a.after += delta
	}
}

// skews holds the sequence shifts of the connections that have one (few:
// translated FTP control connections whose rewrites changed a length),
// off Conn so that the millions of others do not carry them.
type skews struct {
	mu sync.Mutex
	m  map[*Conn]*[2]seqAdj
}

func (s *skews) get(c *Conn) *[2]seqAdj {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[c]
}

func (s *skews) make(c *Conn) *[2]seqAdj {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[*Conn]*[2]seqAdj{}
	}
	a := s.m[c]
	if a == nil {
		a = &[2]seqAdj{}
		s.m[c] = a
	}
	return a
}

func (s *skews) drop(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
}

// len is the number of connections with a shift (for tests).
func (s *skews) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func dirIndex(reply bool) int {
	if reply {
		return 1
	}
	return 0
}

// unskewAck puts the acknowledgement of a segment of skewed c (direction
// reply) into the sequence space its peer sent in, for the tracker's
// window checks; ftpPacket writes it into the packet. c.mu is held.
func (t *Tracker) unskewAck(c *Conn, pp *parsed, reply bool) {
	if adj := t.skews.get(c); adj != nil {
		pp.ack -= uint32(adj[1-dirIndex(reply)].ackOffset(pp.ack))
	}
}

// ftpPacket runs the FTP helper on a valid segment of c and, when the ct
// translates c (nat), rewrites the announced addresses and shifts the
// sequence numbers. c.mu is held.
func (t *Tracker) ftpPacket(c *Conn, pkt *packet.Packet, pp *parsed, reply, nat bool, now int64) {
	var buf [4]ftpEdit
	edits := t.helperPacket(c, pkt, pp, reply, nat, now, buf[:])
	if !nat || !c.skewed && len(edits) == 0 {
		return
	}
	offloaded := pkt.Offload.GSOType != 0 || pkt.Offload.Flags&packet.OffloadNeedsCsum != 0
	mangled, delta := false, 0
	if len(edits) > 0 && !offloaded {
		delta, mangled = ftpMangle(pkt, pp, edits)
	}
	var adj *[2]seqAdj
	if c.skewed {
		adj = t.skews.get(c)
	}
	if delta != 0 && adj == nil {
		adj = t.skews.make(c)
		c.skewed = true
	}
	d := pkt.Data()
	l4 := int(pkt.Offsets.L4)
	tcp := d[l4:]
	dir := dirIndex(reply)
	seq := binary.BigEndian.Uint32(tcp[header.TCPSeqOff:])
	ack := binary.BigEndian.Uint32(tcp[header.TCPSeqOff+4:])
	newSeq := seq
	var acc uint32
	if adj != nil {
		newSeq = seq + uint32(adj[dir].offset(seq))
		if delta != 0 {
			adj[dir].grow(seq, int32(delta))
		}
		acc = sackAdjust(tcp, &adj[1-dir], acc)
	}
	acc = header.CsumDelta32(acc, seq, newSeq)
	acc = header.CsumDelta32(acc, ack, pp.ack)
	binary.BigEndian.PutUint32(tcp[header.TCPSeqOff:], newSeq)
	binary.BigEndian.PutUint32(tcp[header.TCPSeqOff+4:], pp.ack)
	switch {
	case mangled:
		setTCPChecksum(d, int(pkt.Offsets.L3), l4, pp.dataOff+int(pp.payload), pp.t.IPv6)
	case !offloaded:
		header.AdjustField(tcp, header.TCPChecksumOff, acc)
	}
	// A partial checksum covers the pseudo-header only, which the
	// sequence numbers are not part of: it stays.
}

// sackAdjust shifts the SACK blocks of a TCP header back into the space
// its peer sent in (o: the peer's shift) and returns the checksum delta
// accumulated onto acc.
func sackAdjust(tcp []byte, o *seqAdj, acc uint32) uint32 {
	if o.before == 0 && o.after == 0 {
		return acc
	}
	doff := int(tcp[header.TCPDataOffOff]>>4) * 4
	if doff <= header.TCPMinLen || doff > len(tcp) {
		return acc
	}
	for opts := tcp[header.TCPMinLen:doff]; len(opts) > 0; {
		switch opts[0] {
		case 0:
			return acc
		case 1:
			opts = opts[1:]
			continue
		}
		if len(opts) < 2 || opts[1] < 2 || int(opts[1]) > len(opts) {
			return acc
		}
		if opts[0] == 5 { // SACK: left and right edges
			for b := opts[2:opts[1]]; len(b) >= 4; b = b[4:] {
				v := binary.BigEndian.Uint32(b)
				nv := v - uint32(o.ackOffset(v))
				acc = header.CsumDelta32(acc, v, nv)
				binary.BigEndian.PutUint32(b, nv)
			}
		}
		opts = opts[opts[1]:]
	}
	return acc
}

// ftpMangle writes the edits (in order, within the payload) into the
// segment, moving what follows, and fixes the IP length (and IPv4 header
// checksum). It returns the change of length, and false when the packet
// was left alone (its buffer too small, its IP length too large).
func ftpMangle(pkt *packet.Packet, pp *parsed, edits []ftpEdit) (int, bool) {
	var store [4][48]byte
	var texts [4][]byte
	delta := 0
	for i := range edits {
		texts[i] = edits[i].text(store[i][:0])
		delta += len(texts[i]) - (edits[i].to - edits[i].from)
	}
	l3 := int(pkt.Offsets.L3)
	d := pkt.Data()
	n := len(d)
	end := pp.dataOff + int(pp.payload)
	ipLen := end - l3 + delta
	if pp.t.IPv6 {
		ipLen -= header.IPv6Len
	}
	if ipLen > 0xffff || n+delta > pkt.Cap() {
		return 0, false
	}
	tail := append([]byte(nil), d[pp.dataOff:]...)
	pkt.SetLen(n + delta)
	d = pkt.Data()
	w, prev := pp.dataOff, 0
	for i := range edits {
		w += copy(d[w:], tail[prev:edits[i].from])
		w += copy(d[w:], texts[i])
		prev = edits[i].to
	}
	copy(d[w:], tail[prev:])
	if pp.t.IPv6 {
		binary.BigEndian.PutUint16(d[l3+header.IPv6PayloadLenOff:], uint16(ipLen))
	} else {
		old := binary.BigEndian.Uint16(d[l3+header.IPv4TotalLenOff:])
		binary.BigEndian.PutUint16(d[l3+header.IPv4TotalLenOff:], uint16(ipLen))
		header.AdjustField(d, l3+header.IPv4ChecksumOff, header.CsumDelta(0, old, uint16(ipLen)))
	}
	pp.payload = uint32(int(pp.payload) + delta)
	return delta, true
}

// setTCPChecksum computes the checksum of the TCP segment d[l4:end] of
// the IP packet at l3 and writes it.
func setTCPChecksum(d []byte, l3, l4, end int, v6 bool) {
	var acc uint32
	if v6 {
		acc = header.CsumSum(acc, d[l3+header.IPv6SrcOff:l3+header.IPv6DstOff+16])
	} else {
		acc = header.CsumSum(acc, d[l3+header.IPv4SrcOff:l3+header.IPv4DstOff+4])
	}
	n := uint32(end - l4)
	acc += uint32(header.IPProtoTCP) + n>>16 + n&0xffff
	d[l4+header.TCPChecksumOff], d[l4+header.TCPChecksumOff+1] = 0, 0
	acc = header.CsumSum(acc, d[l4:end])
	binary.BigEndian.PutUint16(d[l4+header.TCPChecksumOff:], ^header.CsumFold(acc))
}

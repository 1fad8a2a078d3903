package tunnel

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// Segmenting TCP super-frames for a segmented send. A workload with TSO
// hands the switch TCP frames of up to 64 KiB (packet.Offload); the port
// takes them whole (netdev.GSOSender) and turns each into a run of
// tunnel datagrams for one UDP_SEGMENT sendmsg (gso.go) without copying
// the payload: every segment is two iovecs, a header slot the segmenter
// fills (the 8-byte tunnel header, then the inner Ethernet, IP and TCP
// headers with that segment's lengths, IPv4 ID, sequence number, flags and
// checksums) and a slice of the super-frame's payload. The kernel copies
// both once, into the buffer it cuts into datagrams, as it would copy the
// MTU-size frames of a run.
//
// Segment size. The inner segments carry gso_size payload bytes (the
// sender's MSS, which its interface MTU set), clamped so that an inner
// IP packet never exceeds the port's MTU (the underlay MTU minus the
// encapsulation): a workload whose MTU is larger than the tunnel allows
// gets smaller segments, not drops. Every segment but the last has the
// same length, which UDP_SEGMENT requires.
//
// What it takes: Ethernet with up to two VLAN tags, IPv4 (options allowed,
// not a fragment) or IPv6 with TCP as the next header, TCP with options.
// Anything else that comes as a super-frame (UDP GSO, IPv6 extension
// headers) goes through vnethdr.Segmenter into a copy instead.

const (
	// segHdrMax is the room for one segment's headers: tunnel header, an
	// Ethernet header with two tags, IPv4 with options or IPv6, TCP with
	// options.
	segHdrMax = maxHdrLen + 14 + 8 + 60 + 60
	tcpFIN    = 0x01
	tcpPSH    = 0x08
	tcpCWR    = 0x80
)

// tcpSegmenter cuts one TCP super-frame; the zero value is ready for
// reset. It keeps a reference to the frame until done.
type tcpSegmenter struct {
	frame    []byte
	l3, l4   int // offsets of the IP and TCP headers
	hl       int // inner header length (through the TCP header)
	thl      int // tunnel header length
	v6       bool
	mss      int
	seq      uint32
	id       uint16
	pseudo   uint64 // the pseudo-header's addresses and protocol
	pos, idx int
}

// reset starts cutting frame, a super-frame with offload state o, into
// segments whose inner frames fit 14+maxL3 bytes (the port's MTU behind
// an untagged Ethernet header), behind a tunnel header of thl bytes. It
// returns false for a frame it does not take (see above).
func (s *tcpSegmenter) reset(frame []byte, o *packet.Offload, maxL3, thl int) bool {
	g := o.GSOType &^ vnethdr.GSOECN
	if g != vnethdr.GSOTCPv4 && g != vnethdr.GSOTCPv6 || o.GSOSize == 0 {
		return false
	}
	off := 12
	et := uint16(0)
	for range 3 {
		if len(frame) < off+2 {
			return false
		}
		et = binary.BigEndian.Uint16(frame[off:])
		if et != header.EtherTypeVLAN && et != header.EtherTypeQinQ {
			break
		}
		off += 4
	}
	l3 := off + 2
	var l4 int
	switch {
	case et == header.EtherTypeIPv4 && g == vnethdr.GSOTCPv4:
		if len(frame) < l3+20 || frame[l3]>>4 != 4 || frame[l3+header.IPv4ProtoOff] != header.IPProtoTCP ||
			binary.BigEndian.Uint16(frame[l3+6:])&0x3fff != 0 {
			return false
		}
		l4 = l3 + int(frame[l3]&0xf)*4
		if l4 < l3+20 {
			return false
		}
		s.v6 = false
		s.id = binary.BigEndian.Uint16(frame[l3+4:])
		s.pseudo = uint64(binary.BigEndian.Uint32(frame[l3+12:])) + uint64(binary.BigEndian.Uint32(frame[l3+16:])) + 6
	case et == header.EtherTypeIPv6 && g == vnethdr.GSOTCPv6:
		if len(frame) < l3+40 || frame[l3]>>4 != 6 || frame[l3+header.IPv6NextHeaderOff] != header.IPProtoTCP {
			return false
		}
		l4 = l3 + 40
		s.v6 = true
		s.pseudo = 6
		for i := l3 + 8; i < l3+40; i += 4 {
			s.pseudo += uint64(binary.BigEndian.Uint32(frame[i:]))
		}
	default:
		return false
	}
	if len(frame) < l4+20 {
		return false
	}
	hl := l4 + int(frame[l4+12]>>4)*4
	if hl < l4+20 || hl > len(frame) || thl+hl > segHdrMax || hl == len(frame) {
		return false
	}
	// maxL3 assumes an untagged inner frame: VLAN tags take from it too.
	mss := min(int(o.GSOSize), maxL3-(hl-l3)-(l3-14))
	if mss <= 0 {
		return false
	}
	s.frame, s.l3, s.l4, s.hl, s.mss, s.thl = frame, l3, l4, hl, mss, thl
	s.seq = binary.BigEndian.Uint32(frame[l4+4:])
	s.pos, s.idx = hl, 0
	return true
}

// done reports whether every segment has been produced.
func (s *tcpSegmenter) done() bool { return s.pos >= len(s.frame) }

// segLen is the length of the next segment's UDP payload (tunnel header,
// inner headers, payload).
func (s *tcpSegmenter) segLen() int { return s.thl + s.hl + min(s.mss, len(s.frame)-s.pos) }

// next writes the next segment's inner headers into h (which must hold
// s.hl bytes) and returns its payload, a slice of the frame.
func (s *tcpSegmenter) next(h []byte) []byte {
	f := s.frame
	n := min(s.mss, len(f)-s.pos)
	pay := f[s.pos : s.pos+n]
	last := s.pos+n == len(f)
	h = h[:s.hl]
	copy(h, f[:s.hl])
	ip := h[s.l3:s.l4]
	if s.v6 {
		binary.BigEndian.PutUint16(ip[4:], uint16(s.hl-s.l4+n))
	} else {
		binary.BigEndian.PutUint16(ip[2:], uint16(s.hl-s.l3+n))
		binary.BigEndian.PutUint16(ip[4:], s.id+uint16(s.idx))
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ^vnethdr.Sum(ip))
	}
	tcp := h[s.l4:]
	binary.BigEndian.PutUint32(tcp[4:], s.seq+uint32(s.pos-s.hl))
	if !last {
		tcp[13] &^= tcpFIN | tcpPSH
	}
	if s.idx > 0 {
		tcp[13] &^= tcpCWR
	}
	tcp[16], tcp[17] = 0, 0
	l4len := uint64(len(tcp) + n)
	// The TCP header is a whole number of 16-bit words, so its sum and
	// the payload's add up to the segment's.
	sum := s.pseudo + l4len + uint64(vnethdr.Sum(tcp)) + uint64(vnethdr.Sum(pay))
	binary.BigEndian.PutUint16(tcp[16:], ^vnethdr.Fold(sum))
	s.pos += n
	s.idx++
	return pay
}

package vnethdr

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// segKind is the way a Segmenter cuts its frame.
type segKind uint8

const (
	kindNone segKind = iota // not GSO: the frame once
	kindTCP                 // TCP segments
	kindUSO                 // independent UDP datagrams
	kindUFO                 // IPv4 fragments of one UDP datagram
)

// TCP flag bits the segmenter rewrites.
const (
	tcpFIN = 0x01
	tcpPSH = 0x08
	tcpCWR = 0x80
)

// Segmenter cuts one GSO super-frame into MTU-sized frames with correct IP
// total length / payload length, IPv4 ID (incremented per segment) and
// header checksum, TCP sequence numbers, TCP flags (FIN/PSH only on the last
// segment, CWR only on the first), and complete L4 checksums; UDP (UFO: IPv4
// fragments; USO/GSOUDPL4: independent UDP datagrams) too. It keeps a
// reference to the frame: the caller must keep frame unchanged until Done().
//
// The segmenter works out the header length itself from the frame
// (Ethernet, VLAN tags, IP with options or extension headers, TCP with
// options, or UDP) and ignores HdrLen, CsumStart and CsumOffset of a GSO
// header: L4 checksums are computed from scratch. A segment is that header
// plus at most GSOSize payload bytes (for UFO, GSOSize rounded down to a
// multiple of 8 bytes of IP payload, the first fragment carrying the UDP
// header). UFO over IPv6 (which would need a fragment header inserted) is
// refused with ErrGSOType; Linux has not produced it since 4.14.
//
// The zero Segmenter is ready for Reset; one Segmenter per receive queue is
// enough, as it holds no state beyond the frame in progress.
type Segmenter struct {
	frame        []byte
	h            Header
	kind         segKind
	ipv6         bool
	l3off, l4off int
	hdrLen       int // bytes copied in front of every segment's payload
	pos          int // next payload byte of frame
	mss          int // payload bytes per segment (last may be fewer)
	index        int // segments produced so far
	seq          uint32
	ipID         uint16
	pseudo       uint16 // pseudo-header sum without the length
	udpLen       uint16 // UFO: the datagram's UDP length
	udpCsum      uint16 // UFO: the datagram's checksum, for fragment 0
	done         bool
}

// Reset starts segmenting frame (which begins at the Ethernet header,
// possibly VLAN-tagged) according to h. For h.GSOType == GSONone it yields
// the frame itself once (with the checksum completed if FlagNeedsCsum).
// On error the Segmenter yields nothing.
func (s *Segmenter) Reset(h *Header, frame []byte) error {
	*s = Segmenter{frame: frame, h: *h, done: true}
	gso := h.GSOType &^ GSOECN
	if gso == GSONone {
		if h.GSOType != GSONone {
			return ErrGSOType
		}
		if len(frame) < 14 {
			return ErrMalformed // not even an Ethernet header
		}
		if h.Flags&FlagNeedsCsum != 0 && int(h.CsumStart)+int(h.CsumOffset)+2 > len(frame) {
			return ErrCsumOffset
		}
		s.kind = kindNone
		s.done = false
		return nil
	}
	if h.GSOSize == 0 {
		return ErrGSOSize
	}
	var p parsed
	if !p.parse(frame, false) || p.fragment || p.routed {
		return ErrMalformed
	}
	s.ipv6 = p.ipv6
	s.l3off, s.l4off = p.l3off, p.l4off
	s.mss = int(h.GSOSize)
	switch gso {
	case GSOTCPv4, GSOTCPv6:
		if p.proto != header.IPProtoTCP || p.ipv6 != (gso == GSOTCPv6) {
			return ErrGSOType
		}
		if p.l4off+header.TCPMinLen > len(frame) {
			return ErrMalformed
		}
		doff := int(frame[p.l4off+header.TCPDataOffOff]>>4) * 4
		if doff < header.TCPMinLen || p.l4off+doff > len(frame) {
			return ErrMalformed
		}
		s.kind = kindTCP
		s.hdrLen = p.l4off + doff
		s.seq = binary.BigEndian.Uint32(frame[p.l4off+header.TCPSeqOff:])
	case GSOUDPL4:
		if p.proto != header.IPProtoUDP {
			return ErrGSOType
		}
		if p.l4off+header.UDPLen > len(frame) {
			return ErrMalformed
		}
		s.kind = kindUSO
		s.hdrLen = p.l4off + header.UDPLen
	case GSOUDP:
		if p.proto != header.IPProtoUDP || p.ipv6 {
			return ErrGSOType
		}
		if p.l4off+header.UDPLen > len(frame) {
			return ErrMalformed
		}
		// Fragment offsets count 8-byte units, and the first fragment
		// must hold the whole UDP header.
		s.mss &^= 7
		if s.mss < 8 {
			return ErrGSOSize
		}
		dgram := len(frame) - p.l4off
		if dgram > 0xffff {
			return ErrGSOSize
		}
		s.kind = kindUFO
		s.hdrLen = p.l4off
		s.udpLen = uint16(dgram)
		old := binary.BigEndian.Uint16(frame[p.l4off+header.UDPChecksumOff:])
		if h.Flags&FlagNeedsCsum != 0 || old != 0 {
			// The sum over the datagram includes its old length and
			// checksum fields; swap in the new length and a zero.
			oldLen := binary.BigEndian.Uint16(frame[p.l4off+header.UDPLengthOff:])
			sm := uint32(pseudoSum(frame[p.l3off:], false, header.IPProtoUDP, dgram)) +
				uint32(sum(frame[p.l4off:])) + uint32(^oldLen) + uint32(^old) + uint32(dgram)
			c := ^fold(sm)
			if c == 0 {
				c = 0xffff
			}
			s.udpCsum = c
		}
	default:
		return ErrGSOType
	}
	payload := len(frame) - s.hdrLen
	// A "super-frame" no larger than one segment (Linux makes these when
	// a socket's write was small) is passed on as one segment with its
	// checksum completed, never dropped.
	if s.kind == kindUFO && int(h.GSOSize) > payload {
		return ErrGSOSize
	}
	// Every segment's IP length field must hold its length.
	if s.hdrLen-s.l3off+min(s.mss, payload) > 0xffff+40*b2i(p.ipv6) {
		return ErrGSOSize
	}
	if !p.ipv6 {
		s.ipID = binary.BigEndian.Uint16(frame[p.l3off+header.IPv4IDOff:])
	}
	s.pseudo = pseudoSum(frame[p.l3off:], p.ipv6, p.proto, 0)
	s.pos = s.hdrLen
	s.done = false
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Next writes the next segment into dst and returns its length; ok is false
// when there are no more segments. n is 0 with ok true never happens. If
// dst is too small for a segment it returns ErrShortBuffer and does not
// advance, so the caller may retry with a larger buffer.
func (s *Segmenter) Next(dst []byte) (n int, ok bool, err error) {
	if s.done {
		return 0, false, nil
	}
	frame := s.frame
	if s.kind == kindNone {
		n = len(frame)
		if len(dst) < n {
			return 0, false, ErrShortBuffer
		}
		copy(dst, frame)
		// Reset checked the offsets, so this cannot fail.
		_ = CompleteChecksum(&s.h, dst[:n])
		s.done = true
		return n, true, nil
	}
	remaining := len(frame) - s.pos
	chunk := min(s.mss, remaining)
	last := chunk == remaining
	n = s.hdrLen + chunk
	if len(dst) < n {
		return 0, false, ErrShortBuffer
	}
	dst = dst[:n]
	copy(dst, frame[:s.hdrLen])
	copy(dst[s.hdrLen:], frame[s.pos:s.pos+chunk])

	ip := dst[s.l3off:s.l4off]
	if s.ipv6 {
		binary.BigEndian.PutUint16(ip[header.IPv6PayloadLenOff:], uint16(n-s.l3off-header.IPv6Len))
	} else {
		binary.BigEndian.PutUint16(ip[header.IPv4TotalLenOff:], uint16(n-s.l3off))
		if s.kind == kindUFO {
			frag := uint16((s.pos - s.hdrLen) >> 3)
			if !last {
				frag |= 0x2000 // more fragments
			}
			binary.BigEndian.PutUint16(ip[header.IPv4FragOff:], frag)
		} else {
			binary.BigEndian.PutUint16(ip[header.IPv4IDOff:], s.ipID+uint16(s.index))
		}
		clear(ip[header.IPv4ChecksumOff : header.IPv4ChecksumOff+2])
		binary.BigEndian.PutUint16(ip[header.IPv4ChecksumOff:], ^sum(ip))
	}

	l4 := dst[s.l4off:]
	switch s.kind {
	case kindTCP:
		binary.BigEndian.PutUint32(l4[header.TCPSeqOff:], s.seq+uint32(s.pos-s.hdrLen))
		flags := l4[header.TCPFlagsOff]
		if !last {
			flags &^= tcpFIN | tcpPSH
		}
		if s.index > 0 {
			flags &^= tcpCWR
		}
		l4[header.TCPFlagsOff] = flags
		clear(l4[header.TCPChecksumOff : header.TCPChecksumOff+2])
		c := ^fold(uint32(s.pseudo) + uint32(len(l4)) + uint32(sum(l4)))
		binary.BigEndian.PutUint16(l4[header.TCPChecksumOff:], c)
	case kindUSO:
		binary.BigEndian.PutUint16(l4[header.UDPLengthOff:], uint16(len(l4)))
		clear(l4[header.UDPChecksumOff : header.UDPChecksumOff+2])
		c := ^fold(uint32(s.pseudo) + uint32(len(l4)) + uint32(sum(l4)))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(l4[header.UDPChecksumOff:], c)
	case kindUFO:
		if s.index == 0 {
			binary.BigEndian.PutUint16(l4[header.UDPLengthOff:], s.udpLen)
			binary.BigEndian.PutUint16(l4[header.UDPChecksumOff:], s.udpCsum)
		}
	}
	s.pos += chunk
	s.index++
	s.done = last
	return n, true, nil
}

// L4Offset returns where the L4 header of the frame Reset accepted
// begins: a driver keeping a super-frame from an untrusted sender whole
// checks the header's csum_start against it, since segmenting does not
// use csum_start but a later sender of the whole frame does.
func (s *Segmenter) L4Offset() int { return s.l4off }

// Done reports whether every segment has been produced.
func (s *Segmenter) Done() bool { return s.done }

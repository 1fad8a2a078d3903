// Package vnethdr decodes the virtio_net_hdr that Linux puts in front of
// every frame on an AF_PACKET socket with PACKET_VNET_HDR or a tap device
// with IFF_VNET_HDR, and turns what it describes into what the switch
// handles: MTU-sized frames whose checksums are complete. The datapath
// keeps GSO super-frames whole where it can and uses the Segmenter too,
// for a super-frame that must leave through a port that cannot take it.
//
// When each function is used:
//
//   - Decode, on every received frame, reads the header in front of it.
//   - CompleteChecksum, for a received frame with FlagNeedsCsum and
//     GSOType GSONone, finishes the L4 checksum in place (no copy).
//   - Segmenter, for a received frame with a GSO type (a TCP or UDP
//     super-frame of up to 64 KiB), copies it out as MTU-sized frames with
//     complete headers and checksums, one per Next call into a buffer
//     taken from the pool.
//   - Header.Encode, on every transmitted frame: the zero Header for a
//     complete frame, or a GSO super-frame's own state (after
//     SetTxHdrLen) for the drivers that send those whole (afpacket, tap).
//   - CompletePartialL4Checksum, in drivers that get no metadata (AF_XDP),
//     completes the L4 checksum of a frame a local sender left partial,
//     and sums nothing for frames that arrive complete.
//
// Byte order: the header's 16-bit fields are little endian. Linux writes
// legacy (pre-virtio-1.0) vnet headers in host byte order, which is little
// endian on every host we support; a tap driver on a big-endian host must
// set TUNSETVNETLE so that this stays true.
//
// Nothing here allocates or panics on hostile input: malformed headers and
// frames are reported as errors for the driver to count and drop.
package vnethdr

import (
	"encoding/binary"
	"errors"
)

// Len is the size of struct virtio_net_hdr (no num_buffers field).
const Len = 10

// Flags and GSO types as in linux/virtio_net.h.
const (
	FlagNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	FlagDataValid = 2 // VIRTIO_NET_HDR_F_DATA_VALID
	GSONone       = 0
	GSOTCPv4      = 1
	GSOUDP        = 3 // UFO (rare)
	GSOTCPv6      = 4
	GSOUDPL4      = 5 // VIRTIO_NET_HDR_GSO_UDP_L4 (USO)
	GSOECN        = 0x80
)

// Errors are preallocated so that reporting one costs no allocation on the
// receive path; drivers may compare against them to count drop reasons.
var (
	// ErrShortHeader: fewer than Len bytes where a header was expected.
	ErrShortHeader = errors.New("vnethdr: short virtio_net_hdr")
	// ErrCsumOffset: csum_start/csum_offset point outside the frame.
	ErrCsumOffset = errors.New("vnethdr: checksum offsets out of range")
	// ErrGSOType: an unknown GSO type, or one that does not match the frame
	// (TCP GSO on a UDP frame, TCPv4 GSO on IPv6, ...).
	ErrGSOType = errors.New("vnethdr: bad GSO type for frame")
	// ErrGSOSize: gso_size is zero, too small, or larger than the payload.
	ErrGSOSize = errors.New("vnethdr: bad GSO size")
	// ErrMalformed: the frame's Ethernet/IP/L4 headers do not parse.
	ErrMalformed = errors.New("vnethdr: malformed frame headers")
	// ErrShortBuffer: the destination cannot hold the next segment.
	ErrShortBuffer = errors.New("vnethdr: destination buffer too small")
)

// Header is a decoded virtio_net_hdr (little endian on the wire; see the
// package comment).
type Header struct {
	Flags, GSOType        uint8
	HdrLen, GSOSize       uint16
	CsumStart, CsumOffset uint16
}

// Decode reads a header from the first Len bytes of b.
func Decode(b []byte) (Header, error) {
	if len(b) < Len {
		return Header{}, ErrShortHeader
	}
	return Header{
		Flags:      b[0],
		GSOType:    b[1],
		HdrLen:     binary.LittleEndian.Uint16(b[2:]),
		GSOSize:    binary.LittleEndian.Uint16(b[4:]),
		CsumStart:  binary.LittleEndian.Uint16(b[6:]),
		CsumOffset: binary.LittleEndian.Uint16(b[8:]),
	}, nil
}

// Encode writes h into the first Len bytes of b, which must hold them.
func (h *Header) Encode(b []byte) {
	_ = b[Len-1]
	b[0] = h.Flags
	b[1] = h.GSOType
	binary.LittleEndian.PutUint16(b[2:], h.HdrLen)
	binary.LittleEndian.PutUint16(b[4:], h.GSOSize)
	binary.LittleEndian.PutUint16(b[6:], h.CsumStart)
	binary.LittleEndian.PutUint16(b[8:], h.CsumOffset)
}

// SetTxHdrLen sets h.HdrLen for sending frame with h's GSO and checksum
// state: the bytes the kernel puts in the skb's linear part, which must
// reach past the checksum field and, for TCP GSO, cover the TCP header
// (received headers carry the sender's skb_headlen, which says nothing
// about the frame after the switch pushed or popped tags). It returns
// false if the offsets lie outside frame.
func (h *Header) SetTxHdrLen(frame []byte) bool {
	end := int(h.CsumStart) + int(h.CsumOffset) + 2
	if g := h.GSOType &^ GSOECN; (g == GSOTCPv4 || g == GSOTCPv6) && int(h.CsumStart)+13 <= len(frame) {
		end = max(end, int(h.CsumStart)+int(frame[h.CsumStart+12]>>4)*4)
	}
	if end > len(frame) {
		return false
	}
	h.HdrLen = uint16(end)
	return true
}

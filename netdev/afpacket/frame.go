package afpacket

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// Layouts shared with the kernel (linux/if_packet.h). Fields are in host
// byte order; every host we support is little endian.
const (
	// blockDescLen is sizeof(struct tpacket_block_desc) rounded to 8: the
	// kernel puts the first frame of a block no earlier than this.
	blockDescLen = 48
	// Offsets in struct tpacket_block_desc (hdr.bh1 starts at 8).
	blkStatusOff   = 8
	blkNumPktsOff  = 12
	blkFirstPktOff = 16

	// tp3HdrLen is sizeof(struct tpacket3_hdr).
	tp3HdrLen = 48
	// Offsets in struct tpacket3_hdr.
	tp3NextOff    = 0
	tp3SnaplenOff = 12
	tp3LenOff     = 16
	tp3StatusOff  = 20
	tp3MacOff     = 24
	tp3VlanTCIOff = 32
	tp3VlanTPID   = 36

	// tp2HdrLen is TPACKET_ALIGN(sizeof(struct tpacket2_hdr)): where the
	// kernel expects a tx frame's data (tp_hdrlen - sizeof(sockaddr_ll))
	// when PACKET_TX_HAS_OFF is not set, and the least offset of a
	// received frame in its slot.
	tp2HdrLen = 32
	// tp2HdrLenAddr is TPACKET2_HDRLEN: the header and a sockaddr_ll,
	// which the kernel places the received frame behind.
	tp2HdrLenAddr = 52
	// Offsets in struct tpacket2_hdr.
	tp2StatusOff   = 0
	tp2LenOff      = 4
	tp2SnaplenOff  = 8
	tp2MacOff      = 12
	tp2VlanTCIOff  = 24
	tp2VlanTPIDOff = 26
	// tpAlign is TPACKET_ALIGNMENT.
	tpAlign = 16

	// Status bits (TP_STATUS_*).
	statusKernel        = 0
	statusUser          = 1
	statusCopy          = 1 << 1 // the whole frame waits on the socket's queue
	statusLosing        = 1 << 2
	statusVLANValid     = 1 << 4
	statusVLANTPIDValid = 1 << 6
	statusAvailable     = 0
	statusSendRequest   = 1
)

// frameDesc is what the receive path needs from one tpacket3_hdr or
// tpacket2_hdr, with offsets made absolute within the region the frame
// lies in (a V3 block, a V2 slot).
type frameDesc struct {
	mac    int // offset of the frame (Ethernet header) in the region
	snap   int // bytes of the frame present in the region
	wire   int // length of the frame on the wire
	next   int // V3: distance to the next frame's header (0 for the last)
	status uint32
	tci    uint16
	tpid   uint16
}

// parseBlockHeader reads a retired block's packet count and first packet
// offset. The kernel's word is not trusted: ok is false when the first
// packet's header would not fit in the block or would overlap the block
// descriptor, and the count is capped at what the block could hold, so a
// hostile count cannot make a walk run long.
func parseBlockHeader(blk []byte) (num uint32, first int, ok bool) {
	if len(blk) < blockDescLen {
		return 0, 0, false
	}
	num = binary.LittleEndian.Uint32(blk[blkNumPktsOff:])
	if num == 0 {
		return 0, 0, true
	}
	first = int(binary.LittleEndian.Uint32(blk[blkFirstPktOff:]))
	if first < blockDescLen || first > len(blk)-tp3HdrLen {
		return 0, 0, false
	}
	if maxPkts := uint32((len(blk) - first) / tp3HdrLen); num > maxPkts {
		num = maxPkts
	}
	return num, first, true
}

// parseFrameV3 reads the tpacket3_hdr at off in blk. Nothing the kernel wrote
// is trusted: ok is false unless the header and the frame lie inside the
// block, past the block descriptor, with room in front of the frame for
// headroom bytes (the vnet header, and a VLAN tag inserted in place), and
// unless a frame that is not the last one points forward to a next header.
func parseFrameV3(blk []byte, off, headroom int, last bool) (d frameDesc, ok bool) {
	if off < blockDescLen || off > len(blk)-tp3HdrLen {
		return d, false
	}
	h := blk[off : off+tp3HdrLen]
	d.next = int(binary.LittleEndian.Uint32(h[tp3NextOff:]))
	d.snap = int(binary.LittleEndian.Uint32(h[tp3SnaplenOff:]))
	d.wire = int(binary.LittleEndian.Uint32(h[tp3LenOff:]))
	d.status = binary.LittleEndian.Uint32(h[tp3StatusOff:])
	mac := int(binary.LittleEndian.Uint16(h[tp3MacOff:]))
	d.tci = uint16(binary.LittleEndian.Uint32(h[tp3VlanTCIOff:]))
	d.tpid = binary.LittleEndian.Uint16(h[tp3VlanTPID:])
	if mac < tp3HdrLen+headroom {
		return d, false
	}
	d.mac = off + mac
	if d.snap > len(blk)-d.mac {
		return d, false
	}
	if !last && d.next < tp3HdrLen {
		return d, false
	}
	if last {
		d.next = 0
	}
	return d, true
}

// parseFrameV2 reads the tpacket2_hdr at the start of slot, whose status
// word the caller has loaded. As with V3, nothing the kernel wrote is
// trusted: ok is false unless the frame lies inside the slot behind the
// header, with headroom bytes free in front of it.
func parseFrameV2(slot []byte, status uint32, headroom int) (d frameDesc, ok bool) {
	if len(slot) < tp2HdrLen {
		return d, false
	}
	h := slot[:tp2HdrLen]
	d.status = status
	d.wire = int(binary.LittleEndian.Uint32(h[tp2LenOff:]))
	d.snap = int(binary.LittleEndian.Uint32(h[tp2SnaplenOff:]))
	d.mac = int(binary.LittleEndian.Uint16(h[tp2MacOff:]))
	d.tci = binary.LittleEndian.Uint16(h[tp2VlanTCIOff:])
	d.tpid = binary.LittleEndian.Uint16(h[tp2VlanTPIDOff:])
	if d.mac < tp2HdrLen+headroom || d.snap > len(slot)-d.mac {
		return d, false
	}
	return d, true
}

// insertVLAN re-inserts the tag the kernel stripped into tp_vlan_tci: it
// moves the two MAC addresses of the frame at blk[mac:] 4 bytes towards
// the start of blk, into the bytes in front of the frame (the caller has checked they are free) and
// writes the tag between them and the EtherType. It returns the new offset
// of the frame. The frame must be at least 12 bytes long.
func insertVLAN(blk []byte, mac int, tpid, tci uint16) int {
	copy(blk[mac-header.VLANTagLen:mac+12-header.VLANTagLen], blk[mac:mac+12])
	binary.BigEndian.PutUint16(blk[mac+8:], tpid)
	binary.BigEndian.PutUint16(blk[mac+10:], tci)
	return mac - header.VLANTagLen
}

// loadStatus reads a status word the kernel hands over with a store
// barrier (block_status, tp_status), with acquire ordering.
func loadStatus(b []byte) uint32 {
	_ = b[3]
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&b[0])))
}

// storeStatus hands a status word back to the kernel with release
// ordering, after every other write to the block or frame.
func storeStatus(b []byte, v uint32) {
	_ = b[3]
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&b[0])), v)
}

package afpacket

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// rxQueue is one receive socket and its ring, in one of two formats:
//
//   - TPACKET_V2 (v3 false): frameNr slots of frameSize bytes,
//     framesPerBlock to a block of blockSize bytes (the rest of a block is
//     unused). Every slot has its own status word; the kernel fills slots
//     in order and hands each over as soon as it is written. The PMD
//     takes the frame out and hands the slot back.
//   - TPACKET_V3 (v3 true): blockNr blocks of blockSize bytes, each
//     holding a variable number of frames. The kernel fills blocks in
//     order and hands one over when it is full or its retire timer fires;
//     the PMD walks the frames and hands the block back when it has taken
//     everything out of it.
//
// Both walks feed the same per-frame step (take), so VLAN restore, vnet
// header handling and copying behave alike.
type rxQueue struct {
	fd        int
	ring      []byte
	v3        bool
	blockSize int
	blockNr   int
	vnet      bool // frames are preceded by a struct virtio_net_hdr

	// V2 geometry.
	frameSize      int
	framesPerBlock int
	frameNr        int

	// The walk. V2: slot cur is the next to look at. V3: block cur is
	// open when open is set, with left frames still to take, the next
	// one at off.
	cur  int
	open bool
	left uint32
	off  int
	next int // distance from off to the frame after it

	// A GSO super-frame being cut into segments; it lives in slot or
	// block cur, which stays ours until the last segment has been taken.
	segmenting bool
	seg        vnethdr.Segmenter
	// The GSO frame take found (valid until frameDone) and its header,
	// for recv to copy whole into a big buffer instead of segmenting.
	gsoFrame []byte
	gsoHdr   vnethdr.Header

	// copyBuf holds a frame too large for its V2 slot, which the kernel
	// queued on the socket (TP_STATUS_COPY, see readCopied); allocated on
	// the first such frame. Like a slot, it stays the current frame's
	// until frameDone.
	copyBuf []byte
	// copyPkt is a big pool buffer that holds the current frame instead
	// of copyBuf: a frame that comes by copy is read straight into one
	// when the port keeps GSO frames whole, so that a super-frame (which
	// always comes so: no slot holds 64 KB) is handed on in the buffer it
	// was read into, where reading it into copyBuf cost a second copy
	// into a big buffer. It is the current frame's until frameDone, which
	// gives it back unless takeWhole handed it on.
	copyPkt *packet.Packet
	gsoOff  int // where gsoFrame starts in its region

	gso *netdev.GSOCounters

	c *netdev.Counters
}

// block returns V3 block i, capped so that no slice of it reaches past it.
func (q *rxQueue) block(i int) []byte {
	s := i * q.blockSize
	return q.ring[s : s+q.blockSize : s+q.blockSize]
}

// slot returns V2 slot i, capped so that no slice of it reaches past it.
// Slots do not straddle blocks, so the stride changes at block borders.
func (q *rxQueue) slot(i int) []byte {
	s := i/q.framesPerBlock*q.blockSize + i%q.framesPerBlock*q.frameSize
	return q.ring[s : s+q.frameSize : s+q.frameSize]
}

// openBlock opens V3 block cur if the kernel has handed it over. It
// reports whether the walk may go on (a block is open, or a malformed or
// empty one was handed back and the next may be ready) and counts
// malformed blocks in *errs.
func (q *rxQueue) openBlock(errs *int) (progress bool) {
	blk := q.block(q.cur)
	if loadStatus(blk[blkStatusOff:])&statusUser == 0 {
		return false
	}
	num, first, ok := parseBlockHeader(blk)
	if !ok || num == 0 {
		if !ok {
			*errs++
		}
		q.releaseBlock()
		return true
	}
	q.open = true
	q.left = num
	q.off = first
	return true
}

// releaseBlock hands V3 block cur back to the kernel and moves to the
// next.
func (q *rxQueue) releaseBlock() {
	storeStatus(q.block(q.cur)[blkStatusOff:], statusKernel)
	q.open = false
	q.left = 0
	q.cur++
	if q.cur == q.blockNr {
		q.cur = 0
	}
}

// releaseSlot hands V2 slot cur back to the kernel and moves to the next.
func (q *rxQueue) releaseSlot() {
	storeStatus(q.slot(q.cur)[tp2StatusOff:], statusKernel)
	q.cur++
	if q.cur == q.frameNr {
		q.cur = 0
	}
}

// peek finds the next frame the kernel has handed over: the region it lies
// in (a V3 block or a V2 slot) and its descriptor. With ok false there is
// no frame; more then reports whether the walk may go on (something
// malformed was given back, counted in *errs, or an empty block skipped).
func (q *rxQueue) peek(headroom int, pool *packet.Pool, errs *int) (region []byte, d frameDesc, ok, more bool) {
	if !q.v3 {
		s := q.slot(q.cur)
		st := loadStatus(s[tp2StatusOff:])
		if st&statusUser == 0 {
			return nil, d, false, false
		}
		if d, ok = parseFrameV2(s, st, headroom); !ok {
			*errs++
			q.releaseSlot()
			return nil, d, false, true
		}
		if st&statusCopy != 0 {
			if region, d, ok = q.readCopied(d, headroom, pool); !ok {
				*errs++
				q.releaseSlot()
				return nil, d, false, true
			}
			return region, d, true, true
		}
		return s, d, true, true
	}
	if !q.open {
		return nil, d, false, q.openBlock(errs)
	}
	blk := q.block(q.cur)
	if d, ok = parseFrameV3(blk, q.off, headroom, q.left == 1); !ok {
		// The rest of the block cannot be found: give it back.
		*errs++
		q.releaseBlock()
		return nil, d, false, true
	}
	q.next = d.next
	return blk, d, true, true
}

// copyBufLen holds the largest frame a packet socket delivers (a 65,535-byte
// IP datagram behind a link header of up to 28 bytes) behind the headroom
// and vnet header, with room to spare so that a longer one shows as such.
const copyBufLen = 16 + vnethdr.Len + 28 + 65535 + 64

// readCopied reads the frame of V2 slot d, marked TP_STATUS_COPY, from the
// socket: with PACKET_COPY_THRESH set, a frame that does not fit its slot
// (a GSO super-frame in a slot sized for MTU frames) gets a truncated copy
// in the slot and is queued whole on the socket, in slot order, where a
// recvfrom returns it behind its vnet header. The slot's header still
// describes it (tp_len, the VLAN tag), so only the frame's place changes:
// it returns the region the frame now lies in (copyPkt's buffer or
// copyBuf) and d pointing into it, or false if no frame of the slot's
// length was queued.
func (q *rxQueue) readCopied(d frameDesc, headroom int, pool *packet.Pool) ([]byte, frameDesc, bool) {
	hl := 0
	if q.vnet {
		hl = vnethdr.Len
	}
	var region []byte
	if q.vnet && q.gso != nil && pool != nil {
		// The whole big buffer, headroom included, so that the frame
		// starts at the pool's usual headroom (room for a VLAN tag
		// take inserts and for what the datapath pushes later).
		q.dropCopyPkt()
		if bp := pool.GetBig(); bp != nil {
			room := bp.Headroom()
			if bp.Push(room) != nil && room >= hl+header.VLANTagLen && len(bp.Buffer()) >= room+hl+d.wire {
				q.copyPkt, region, headroom = bp, bp.Buffer(), room
			} else {
				bp.Free()
			}
		}
	}
	if region == nil {
		if q.copyBuf == nil {
			q.copyBuf = make([]byte, copyBufLen)
		}
		region = q.copyBuf
	}
	dst := region[headroom-hl:]
	// MSG_TRUNC: the frame's real length, so that one longer than the
	// buffer does not pass for a shorter one.
	r, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(q.fd), uintptr(unsafe.Pointer(&dst[0])), uintptr(len(dst)),
		unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
	n := int(r)
	if e != 0 || n > len(dst) || n-hl != d.wire {
		q.dropCopyPkt()
		return nil, d, false
	}
	d.mac, d.snap = headroom, n-hl
	return region, d, true
}

// unpinCopyPkt moves a GSO frame that is to be segmented out of copyPkt
// into copyBuf and gives copyPkt back, so that no pool buffer stays with
// the queue across calls of recv (a port closed in the middle of a frame
// would keep it from its PMD's pool for good). Frames come here only when
// takeWhole declines them, which a port that keeps GSO frames whole does
// only for kinds Linux does not send, so the copy is rare. It reports
// false if the segmenter refuses the copy (it cannot: the same bytes).
func (q *rxQueue) unpinCopyPkt() bool {
	if q.copyPkt == nil {
		return true
	}
	if q.copyBuf == nil {
		q.copyBuf = make([]byte, copyBufLen)
	}
	frame := q.copyBuf[:copy(q.copyBuf, q.gsoFrame)]
	h := q.gsoHdr
	q.dropCopyPkt()
	if len(frame) != len(q.gsoFrame) || q.seg.Reset(&h, frame) != nil {
		return false
	}
	q.gsoFrame, q.gsoOff = frame, 0
	return true
}

// dropCopyPkt gives copyPkt, if held, back to its pool.
func (q *rxQueue) dropCopyPkt() {
	if q.copyPkt != nil {
		q.copyPkt.Free()
		q.copyPkt = nil
	}
}

// frameDone moves the walk past the current frame, handing its slot, or
// its block if it was the block's last, back to the kernel.
func (q *rxQueue) frameDone() {
	q.dropCopyPkt()
	if !q.v3 {
		q.releaseSlot()
		return
	}
	q.left--
	if q.left == 0 {
		q.releaseBlock()
		return
	}
	q.off += q.next
}

// pending reports whether a frame is waiting (for pool-starvation
// accounting): a super-frame in progress, an open block, or a ready block
// or slot.
func (q *rxQueue) pending() bool {
	if q.segmenting {
		return true
	}
	if !q.v3 {
		return loadStatus(q.slot(q.cur)[tp2StatusOff:])&statusUser != 0
	}
	return q.open || loadStatus(q.block(q.cur)[blkStatusOff:])&statusUser != 0
}

// Outcomes of take.
const (
	takeCopied     = iota // the frame is in the buffer
	takeSegmenting        // a GSO super-frame: the segmenter has it
	takeError             // the frame is unusable (counted by the caller)
)

// take turns the frame d in region (a block or slot) into what the switch
// forwards: it copies it into buf, or hands a GSO super-frame to the
// segmenter, whose segments the caller then takes one by one. On the way
// it re-inserts a VLAN tag the kernel stripped (in place, in front of the
// frame: region is ours until the caller releases it) and completes a
// partial checksum. It returns the outcome and, for takeCopied, the frame's
// length in buf.
func (q *rxQueue) take(region []byte, d *frameDesc, buf []byte) (l, outcome int) {
	if d.snap < d.wire {
		return 0, takeError // truncated: the slot or block was too small for it
	}
	var h vnethdr.Header
	if q.vnet {
		h, _ = vnethdr.Decode(region[d.mac-vnethdr.Len : d.mac])
	}
	mac, l := d.mac, d.snap
	if l < header.EthernetLen {
		// A runt, also if the kernel took a tag out of it: what is left
		// must still be a whole Ethernet header.
		return 0, takeError
	}
	if d.status&statusVLANValid != 0 {
		tpid := uint16(header.EtherTypeVLAN)
		if d.status&statusVLANTPIDValid != 0 && d.tpid != 0 {
			tpid = d.tpid
		}
		mac = insertVLAN(region, mac, tpid, d.tci)
		l += header.VLANTagLen
		// The kernel measured csum_start without the tag.
		if h.Flags&vnethdr.FlagNeedsCsum != 0 {
			h.CsumStart += header.VLANTagLen
		}
	}
	frame := region[mac : mac+l]
	if h.GSOType != vnethdr.GSONone {
		// Reset checks the frame's headers against the GSO type, also
		// for a frame recv then keeps whole.
		if q.seg.Reset(&h, frame) != nil {
			return 0, takeError
		}
		q.gsoFrame, q.gsoHdr, q.gsoOff = frame, h, mac
		return 0, takeSegmenting
	}
	if l > len(buf) {
		return 0, takeError
	}
	copy(buf, frame)
	if h.Flags&vnethdr.FlagNeedsCsum != 0 && vnethdr.CompleteChecksum(&h, buf[:l]) != nil {
		return 0, takeError
	}
	return l, takeCopied
}

// takeWhole copies the GSO frame take found into a big buffer, keeping its
// offload state, and returns it; or returns nil (and counts it when a big
// buffer was wanted) for the frame to be segmented instead: when the pool
// has no big buffer free, or the frame is of a kind that ports taking GSO
// do not get whole (UFO, or no partial checksum, which Linux never sends
// with TCP or UDP GSO).
func (q *rxQueue) takeWhole(pool *packet.Pool) *packet.Packet {
	h := &q.gsoHdr
	switch h.GSOType &^ vnethdr.GSOECN {
	case vnethdr.GSOTCPv4, vnethdr.GSOTCPv6, vnethdr.GSOUDPL4:
	default:
		return nil
	}
	if h.Flags&vnethdr.FlagNeedsCsum == 0 || pool.Big() == nil || q.gso == nil {
		return nil
	}
	if bp := q.copyPkt; bp != nil {
		// Read into a big buffer already (readCopied): hand it on.
		if !bp.SetLen(q.gsoOff+len(q.gsoFrame)) || !bp.Pull(q.gsoOff) {
			// Cannot happen (the frame is in the buffer); it stays the
			// frame's for the segmenter, which reads it from there.
			return nil
		}
		q.copyPkt = nil
		bp.Offload = packet.Offload(*h)
		q.gso.RxWhole.Add(1)
		return bp
	}
	bp := pool.GetBig()
	if bp == nil {
		q.gso.RxSegmented.Add(1)
		return nil
	}
	if !bp.SetLen(len(q.gsoFrame)) {
		bp.Free()
		q.gso.RxSegmented.Add(1)
		return nil
	}
	copy(bp.Data(), q.gsoFrame)
	bp.Offload = packet.Offload(*h)
	q.gso.RxWhole.Add(1)
	return bp
}

// recv takes up to packet.BatchSize frames out of the ring into buffers
// from pool, appended to b. Frames the kernel could not deliver whole
// (truncated), runts, frames larger than a pool buffer that are not GSO,
// and frames whose metadata does not add up are counted as RxErrors and
// skipped. It makes no system call.
func (q *rxQueue) recv(pool *packet.Pool, b *packet.Batch) int {
	n, bytes, errs := 0, 0, 0
	starved := false
	var spare *packet.Packet // a buffer taken from the pool, not yet filled
	headroom := 0
	if q.vnet {
		headroom = vnethdr.Len
	}
	if headroom < header.VLANTagLen {
		headroom = header.VLANTagLen
	}
	for b.N < packet.BatchSize {
		if spare == nil {
			if spare = pool.Get(); spare == nil {
				starved = true
				break
			}
		}
		var l int
		if q.segmenting {
			var ok bool
			var err error
			l, ok, err = q.seg.Next(spare.Buffer())
			if err != nil || !ok {
				if err != nil {
					errs++
				}
				q.segmenting = false
				q.frameDone()
				continue
			}
		} else {
			region, d, ok, more := q.peek(headroom, pool, &errs)
			if !ok {
				if more {
					continue
				}
				break
			}
			var outcome int
			l, outcome = q.take(region, &d, spare.Buffer())
			switch outcome {
			case takeSegmenting:
				if bp := q.takeWhole(pool); bp != nil {
					q.frameDone()
					b.Add(bp)
					n++
					bytes += bp.Len()
					continue
				}
				if !q.unpinCopyPkt() {
					errs++
					q.frameDone()
					continue
				}
				q.segmenting = true
				continue
			case takeError:
				errs++
				q.frameDone()
				continue
			}
			q.frameDone()
		}
		spare.SetLen(l)
		b.Add(spare)
		spare = nil
		n++
		bytes += l
	}
	if spare != nil {
		spare.Free()
	}
	c := q.c
	if starved && n == 0 && q.pending() {
		// Frames wait in the ring but the pool is dry: they stay there
		// (the kernel drops what no longer fits, counted via
		// PACKET_STATISTICS); count the starved poll once, as ring does.
		c.RxDrops.Add(1)
	}
	if errs > 0 {
		c.RxErrors.Add(uint64(errs))
	}
	if n > 0 {
		c.RxPackets.Add(uint64(n))
		c.RxBytes.Add(uint64(bytes))
	}
	return n
}

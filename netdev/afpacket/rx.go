package afpacket

import (
	"vswitch/datapath/packet"
	"vswitch/netdev"
	"vswitch/netdev/vnethdr"
)

// rxQueue is one receive socket and its TPACKET_V3 ring: blockNr blocks of
// blockSize bytes, each holding a variable number of frames. The kernel
// fills blocks in order and hands one over when it is full or its retire
// timer fires; the PMD walks the frames and hands the block back when it
// has taken everything out of it.
type rxQueue struct {
	fd        int
	ring      []byte
	blockSize int
	blockNr   int
	vnet      bool // frames are preceded by a struct virtio_net_hdr

	// The walk: block cur is open when open is set, with left frames
	// still to take, the next one at off.
	cur  int
	open bool
	left uint32
	off  int
	next int // distance from off to the frame after it

	// A GSO super-frame being cut into segments; it lives in block cur,
	// which stays ours until the last segment has been taken.
	segmenting bool
	seg        vnethdr.Segmenter

	c *netdev.Counters
}

// block returns block i, capped so that no slice of it reaches past it.
func (q *rxQueue) block(i int) []byte {
	s := i * q.blockSize
	return q.ring[s : s+q.blockSize : s+q.blockSize]
}

// openBlock opens block cur if the kernel has handed it over. It reports
// whether the walk may go on (a block is open, or a malformed or empty one
// was handed back and the next may be ready) and counts malformed blocks in
// *errs.
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

// releaseBlock hands block cur back to the kernel and moves to the next.
func (q *rxQueue) releaseBlock() {
	storeStatus(q.block(q.cur)[blkStatusOff:], statusKernel)
	q.open = false
	q.left = 0
	q.cur++
	if q.cur == q.blockNr {
		q.cur = 0
	}
}

// frameDone moves the walk past the frame at off.
func (q *rxQueue) frameDone() {
	q.left--
	if q.left == 0 {
		q.releaseBlock()
		return
	}
	q.off += q.next
}

// pending reports whether a frame is waiting (for pool-starvation
// accounting): a super-frame in progress, an open block or a ready one.
func (q *rxQueue) pending() bool {
	return q.segmenting || q.open || loadStatus(q.block(q.cur)[blkStatusOff:])&statusUser != 0
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
	if headroom < vlanLen {
		headroom = vlanLen
	}
	for b.N < packet.BatchSize {
		if spare == nil {
			if spare = pool.Get(); spare == nil {
				starved = true
				break
			}
		}
		if q.segmenting {
			l, ok, err := q.seg.Next(spare.Buffer())
			if err != nil || !ok {
				if err != nil {
					errs++
				}
				q.segmenting = false
				q.frameDone()
				continue
			}
			spare.SetLen(l)
			b.Add(spare)
			spare = nil
			n++
			bytes += l
			continue
		}
		if !q.open {
			if !q.openBlock(&errs) {
				break
			}
			continue
		}
		blk := q.block(q.cur)
		d, ok := parseFrame(blk, q.off, headroom, q.left == 1)
		if !ok {
			// The rest of the block cannot be found: give it back.
			errs++
			q.releaseBlock()
			continue
		}
		q.next = d.next
		if d.snap < d.wire {
			errs++ // truncated: the ring block was too small for it
			q.frameDone()
			continue
		}
		var h vnethdr.Header
		if q.vnet {
			h, _ = vnethdr.Decode(blk[d.mac-vnethdr.Len : d.mac])
		}
		mac, l := d.mac, d.snap
		if l < ethHdrLen {
			// A runt, also if the kernel took a tag out of it: what is
			// left must still be a whole Ethernet header.
			errs++
			q.frameDone()
			continue
		}
		if d.status&statusVLANValid != 0 {
			tpid := uint16(tpid8021Q)
			if d.status&statusVLANTPIDValid != 0 && d.tpid != 0 {
				tpid = d.tpid
			}
			mac = insertVLAN(blk, mac, tpid, d.tci)
			l += vlanLen
			// The kernel measured csum_start without the tag.
			if h.Flags&vnethdr.FlagNeedsCsum != 0 {
				h.CsumStart += vlanLen
			}
		}
		frame := blk[mac : mac+l]
		if h.GSOType != vnethdr.GSONone {
			if q.seg.Reset(&h, frame) != nil {
				errs++
				q.frameDone()
				continue
			}
			q.segmenting = true
			continue
		}
		buf := spare.Buffer()
		if l > len(buf) {
			errs++
			q.frameDone()
			continue
		}
		packet.CopyFrame(buf, frame)
		q.frameDone()
		spare.SetLen(l)
		if h.Flags&vnethdr.FlagNeedsCsum != 0 && vnethdr.CompleteChecksum(&h, spare.Data()) != nil {
			errs++
			continue
		}
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

package virtq

import (
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// scratchSize holds the largest frame a transmit chain may carry with
// offloads: a 65,535-byte IP datagram behind an Ethernet header with two
// tags (what a big buffer holds).
const scratchSize = 14 + 8 + 65535 + 1

// Guest transmit with offloads (Config.TxOffload). The frontend negotiated
// VIRTIO_NET_F_CSUM (and HOST_TSO4/6), so a chain's virtio-net header may
// ask for a checksum (NEEDS_CSUM) or describe a GSO super-frame of up to
// 64 KiB. The frontend is untrusted: the header is read once, the frame is
// copied out of guest memory before anything checks it, and the checks
// are vnethdr's (CompleteChecksum for a single frame, Segmenter.Reset for
// a super-frame), the same as for a kernel socket's header.

// chainHeader copies the first len(hb) bytes of a transmit chain (the
// start of its virtio-net header) into hb. ok is false for a malformed
// chain or one shorter than hb.
func (q *Queue) chainHeader(head uint32, hb []byte) bool {
	table, n, idx := q.desc, q.size, head
	got := 0
	indirect := false
	for count := uint32(0); got < len(hb); count++ {
		if idx >= n || count >= n {
			return false
		}
		addr, ln, flags, next := desc(table, idx)
		if flags&DescFIndirect != 0 {
			if indirect {
				return false
			}
			if table, n = q.indirectTable(addr, ln, flags); table == nil {
				return false
			}
			indirect, idx, count = true, 0, ^uint32(0)
			continue
		}
		if flags&DescFWrite != 0 {
			return false
		}
		if ln > 0 {
			buf := q.guest(addr, uint64(ln))
			if buf == nil {
				return false
			}
			got += copy(hb[got:], buf)
		}
		if flags&DescFNext == 0 {
			break
		}
		idx = uint32(next)
	}
	return got == len(hb)
}

// readFrame copies the frame of the chain at head into dst: from src, the
// chain's one buffer, when it has one and the frame fits, else by walking
// the chain.
func (q *Queue) readFrame(head uint32, src, dst []byte) (int, bool) {
	if src != nil && len(src)-q.hdrLen <= len(dst) {
		return copy(dst, src[q.hdrLen:]), true
	}
	return q.readChain(head, dst)
}

// takeOffload dequeues the chain at head (src: its one buffer, or nil)
// whose header may carry offloads. A frame without GSO goes into spare,
// with its checksum completed if the header asks for it; a TCP or UDP-L4
// super-frame with a partial checksum goes whole into a big buffer with
// its offload state; any other super-frame, or one that finds no big
// buffer free, is copied to the queue's scratch buffer and cut into
// segments (nextSegments). It reports whether spare went into b.
func (q *Queue) takeOffload(head uint32, src []byte, spare *packet.Packet, pool *packet.Pool, b *packet.Batch, r *Result) bool {
	var hb [vnethdr.Len]byte
	if src != nil {
		copy(hb[:], src)
	} else if !q.chainHeader(head, hb[:]) {
		r.Errors++
		return false
	}
	h, _ := vnethdr.Decode(hb[:])
	if h.GSOType == vnethdr.GSONone {
		dst := spare.Buffer()
		l, ok := q.readFrame(head, src, dst)
		if !ok {
			r.Errors++
			return false
		}
		if l < 14 || h.Flags&vnethdr.FlagNeedsCsum != 0 && vnethdr.CompleteChecksum(&h, dst[:l]) != nil {
			r.Errors++
			r.BadOffloads++
			return false
		}
		spare.SetLen(l)
		b.Add(spare)
		r.Packets++
		r.Bytes += l
		return true
	}
	whole := false
	switch h.GSOType &^ vnethdr.GSOECN {
	case vnethdr.GSOTCPv4, vnethdr.GSOTCPv6, vnethdr.GSOUDPL4:
		whole = h.Flags&vnethdr.FlagNeedsCsum != 0 && pool.Big() != nil
	}
	if whole {
		if bp := pool.GetBig(); bp != nil {
			dst := bp.Buffer()
			l, ok := q.readFrame(head, src, dst)
			if !ok {
				bp.Free()
				r.Errors++
				return false
			}
			if !q.resetSegmenter(&h, dst[:l]) {
				bp.Free()
				r.Errors++
				r.BadOffloads++
				return false
			}
			q.seg = vnethdr.Segmenter{} // holds no reference to bp
			bp.SetLen(l)
			bp.Offload = packet.Offload(h)
			b.Add(bp)
			r.Packets++
			r.Bytes += l
			r.RxWhole++
			return false
		}
		r.RxSegmented++
	}
	if q.scratch == nil {
		q.scratch = make([]byte, scratchSize)
	}
	l, ok := q.readFrame(head, src, q.scratch)
	if !ok {
		r.Errors++
		return false
	}
	if !q.resetSegmenter(&h, q.scratch[:l]) {
		r.Errors++
		r.BadOffloads++
		return false
	}
	q.segmenting = true
	return false
}

// resetSegmenter checks a super-frame against its header: Reset checks
// the frame's headers against the GSO type and size (as for a kernel
// socket's frame), and a partial checksum of a TCP or UDP-L4 super-frame
// must be the L4 header's, where the next sender of the whole frame (a
// kernel socket, another guest) will complete it. Whether the frame then
// goes on whole or cut must not change which frames are refused.
func (q *Queue) resetSegmenter(h *vnethdr.Header, frame []byte) bool {
	if q.seg.Reset(h, frame) != nil {
		return false
	}
	if h.Flags&vnethdr.FlagNeedsCsum == 0 {
		return true
	}
	switch h.GSOType &^ vnethdr.GSOECN {
	case vnethdr.GSOTCPv4, vnethdr.GSOTCPv6, vnethdr.GSOUDPL4:
		return partialAtL4(h, q.seg.L4Offset())
	}
	return int(h.CsumStart)+int(h.CsumOffset)+2 <= len(frame)
}

// partialAtL4 reports whether the partial checksum of a TCP or UDP-L4
// super-frame h describes is the L4 header's checksum field, the L4
// header beginning at l4.
func partialAtL4(h *vnethdr.Header, l4 int) bool {
	off := uint16(header.TCPChecksumOff)
	if h.GSOType&^vnethdr.GSOECN == vnethdr.GSOUDPL4 {
		off = header.UDPChecksumOff
	}
	return int(h.CsumStart) == l4 && h.CsumOffset == off
}

// nextSegments appends the segments of the super-frame in progress to b
// while it has fewer than room packets and the pool has buffers; what is
// left waits for the next Dequeue (the chain is already back with the
// frontend: its bytes are in the scratch buffer).
func (q *Queue) nextSegments(pool *packet.Pool, b *packet.Batch, r *Result, room int) {
	for q.segmenting && r.Packets < room {
		if q.seg.Done() {
			q.segmenting = false
			return
		}
		p := pool.Get()
		if p == nil {
			return
		}
		l, ok, err := q.seg.Next(p.Buffer())
		if err != nil || !ok {
			p.Free()
			if err != nil {
				r.Errors++
			}
			q.segmenting = false
			return
		}
		p.SetLen(l)
		b.Add(p)
		r.Packets++
		r.Bytes += l
	}
	if q.segmenting && q.seg.Done() {
		q.segmenting = false
	}
}

// Guest receive with offloads (Config.RxOffload). A TCP super-frame goes to
// the frontend whole: its header carries NEEDS_CSUM with csum_start and
// csum_offset (the frame's L4 checksum field holds the pseudo-header sum,
// as the datapath keeps it), the GSO type and size, and hdr_len
// recomputed for the frame as it is now; with mergeable buffers it spans
// as many receive buffers as it needs. Any other super-frame (UDP-L4, ECN
// without GUEST_ECN, or one reaching a queue without offloads) is cut
// here, each segment going out as a frame of its own.

// putGSO writes the super-frame pkt into the receive ring, whole or as
// segments; results as for putFrame. A frame whose segments do not all
// fit is cut short: the segments that went stay, and it counts as dropped.
func (q *Queue) putGSO(pkt *packet.Packet, availIdx uint16, last, used *uint16, r *Result) (sent, empty bool) {
	frame := pkt.Data()
	h := vnethdr.Header(pkt.Offload)
	if q.takesWhole(&h) && h.SetTxHdrLen(frame) {
		h.Flags = vnethdr.FlagNeedsCsum
		h.Encode(q.rxHdr[:])
		sent, empty = q.putFrame(frame, availIdx, last, used, r)
		q.rxHdr = [12]byte{}
		if sent {
			r.TxWhole++
		}
		return sent, empty
	}
	if q.rxSeg.Reset(&h, frame) != nil {
		r.Errors++
		return false, false
	}
	if q.rxScratch == nil {
		q.rxScratch = make([]byte, scratchSize)
	}
	for !q.rxSeg.Done() {
		n, ok, err := q.rxSeg.Next(q.rxScratch)
		if err != nil || !ok {
			r.Errors++
			return false, false
		}
		if sent, empty = q.putFrame(q.rxScratch[:n], availIdx, last, used, r); !sent {
			return false, empty
		}
	}
	q.rxSeg = vnethdr.Segmenter{} // holds no reference to pkt
	return true, false
}

// takesWhole reports whether the frontend takes the super-frame h
// describes whole: a TCP one with its partial checksum, of a kind it
// negotiated.
func (q *Queue) takesWhole(h *vnethdr.Header) bool {
	if !q.rxOffload || h.Flags&vnethdr.FlagNeedsCsum == 0 || (h.GSOType&vnethdr.GSOECN != 0 && !q.rxECN) {
		return false
	}
	g := h.GSOType &^ vnethdr.GSOECN
	return g == vnethdr.GSOTCPv4 || g == vnethdr.GSOTCPv6
}

package virtq

import (
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Result is what one Dequeue or Enqueue batch did.
type Result struct {
	Packets, Bytes int
	// Errors counts malformed descriptor chains (dropped, and handed back
	// to the frontend with length 0) and frames too large for a buffer.
	Errors int
	// Drops counts frames not moved for want of room: no pool buffer
	// (Dequeue, once per batch) or no receive buffer in the ring (Enqueue).
	Drops int
	// Signal says the frontend asked for an interrupt for this batch; the
	// caller calls Signal before it leaves the batch.
	Signal bool
	// With offloads (Dequeue, Config.TxOffload): GSO super-frames taken
	// whole into a big buffer, and cut into segments because none was
	// free; BadOffloads counts frames dropped because their virtio-net
	// header did not match them (also counted in Errors).
	RxWhole, RxSegmented, BadOffloads int
	// TxWhole counts super-frames Enqueue handed the frontend whole
	// (Config.RxOffload).
	TxWhole int
}

// desc reads descriptor i of table t. Every field is read once, so a
// frontend rewriting the table meanwhile cannot make a check and a use see
// different values.
func desc(t []byte, i uint32) (addr uint64, n uint32, flags, next uint16) {
	d := t[16*i : 16*i+16]
	return le.Uint64(d), le.Uint32(d[8:]), le.Uint16(d[12:]), le.Uint16(d[14:])
}

// indirectTable checks and translates an indirect descriptor.
func (q *Queue) indirectTable(addr uint64, n uint32, flags uint16) ([]byte, uint32) {
	if !q.indirect || flags&DescFNext != 0 || n == 0 || n%16 != 0 || n/16 > MaxIndirect {
		return nil, 0
	}
	t := q.guest(addr, uint64(n))
	if t == nil {
		return nil, 0
	}
	return t, n / 16
}

// readChain copies the frame a transmit chain carries into dst, skipping
// the virtio-net header. ok is false for a malformed chain or a frame
// larger than dst.
func (q *Queue) readChain(head uint32, dst []byte) (int, bool) {
	table, n, idx := q.desc, q.size, head
	skip, out := q.hdrLen, 0
	indirect := false
	for count := uint32(0); ; count++ {
		if idx >= n || count >= n {
			return 0, false // out of the table, or a loop
		}
		addr, ln, flags, next := desc(table, idx)
		if flags&DescFIndirect != 0 {
			if indirect {
				return 0, false // nested indirect tables are forbidden
			}
			if table, n = q.indirectTable(addr, ln, flags); table == nil {
				return 0, false
			}
			indirect, idx, count = true, 0, ^uint32(0)
			continue
		}
		if flags&DescFWrite != 0 {
			return 0, false
		}
		if ln > 0 {
			buf := q.guest(addr, uint64(ln))
			if buf == nil {
				return 0, false
			}
			if skip > 0 {
				s := min(skip, len(buf))
				buf, skip = buf[s:], skip-s
			}
			if len(buf) > len(dst)-out {
				return 0, false
			}
			out += copy(dst[out:], buf)
		}
		if flags&DescFNext == 0 {
			break
		}
		idx = uint32(next)
	}
	if skip > 0 {
		return 0, false
	}
	return out, true
}

// batchMax is the most ring entries one gather pass looks at: a packet
// batch.
const batchMax = packet.BatchSize

// entry is one avail ring entry seen by a gather pass: its head and, for
// the fast case (a chain of one descriptor: header and frame to transmit,
// or one writable receive buffer), the checked guest buffer. A nil buf
// sends the entry down the general chain walk.
type entry struct {
	buf  []byte
	head uint32
}

// noRegion matches no address: the inline region check's stand-in for an
// empty memory table.
var noRegion Region

// hotRegion is the region the last buffer was in, for an inline check.
func (q *Queue) hotRegion() *Region {
	if uint(q.region) < uint(len(q.mem.regions)) {
		return &q.mem.regions[q.region]
	}
	return &noRegion
}

// gather reads the avail entries last..last+n-1 and their head
// descriptors, translates the buffers of one-descriptor chains whose flags
// are exactly want and which are longer than the virtio-net header, and
// prefetches bytes from to span-1 of every such buffer (for writing if
// write is set), and the used entries from used on (for writing). The
// loops hold no copy, so the descriptor loads of several entries are in
// flight at once, and the buffers' lines are all requested before the
// first copy: the cache misses on lines the frontend's core just wrote
// overlap instead of being paid one after the other per packet. Each
// descriptor is read once: what is checked here is what the caller uses.
func (q *Queue) gather(s *[batchMax]entry, last, used uint16, n int, want uint16, from, span int, write bool) {
	for i := 0; i < n; i++ {
		s[i].head = q.availEntry(last + uint16(i))
	}
	lines := &q.lines
	nl := 0
	// The region of the last buffer, checked inline (q.guest does not
	// inline); a miss takes q.guest's scan, which moves the hint.
	hot := q.hotRegion()
	for i := 0; i < n; i++ {
		s[i].buf = nil
		h := s[i].head
		if h >= q.size {
			continue // the chain walk reports it
		}
		d := q.desc[16*h : 16*h+16]
		addr, ln, flags := le.Uint64(d), le.Uint32(d[8:]), le.Uint16(d[12:])
		if flags != want || ln <= uint32(q.hdrLen) {
			continue
		}
		b := guestIn(hot, addr, uint64(ln))
		if b == nil {
			if b = q.guest(addr, uint64(ln)); b == nil {
				continue
			}
			hot = &q.mem.regions[q.region]
		}
		s[i].buf = b
		p := uintptr(unsafe.Pointer(&b[from]))
		e := uintptr(unsafe.Pointer(&b[0])) + uintptr(min(len(b), span)) - 1
		lines[nl] = p
		nl++
		if e&^63 != p&^63 {
			lines[nl] = e
			nl++
		}
	}
	if write {
		prefetchW(&lines[0], nl)
	} else {
		prefetch(&lines[0], nl)
	}
	// The used entries this batch will write: the frontend reads them, so
	// their lines are in its core's cache.
	var ul [batchMax/8 + 2]uintptr
	nu := 0
	for i := 0; i < n; i += 8 {
		ul[nu] = q.usedElemAddr(used + uint16(i))
		nu++
	}
	ul[nu] = q.usedElemAddr(used + uint16(n-1))
	prefetchW(&ul[0], nu+1)
}

// Dequeue takes up to max frames the frontend transmitted, copies each into
// a buffer from pool and appends it to b. Every consumed chain goes back to
// the used ring at once; the used idx is published once for the batch.
//
// With offloads (Config.TxOffload) a chain whose header is not zero takes
// takeOffload's path; the segments of a super-frame cut on receive may
// fill the batch, and the rest come first in the next call.
func (q *Queue) Dequeue(pool *packet.Pool, b *packet.Batch, max int) (r Result) {
	if q.broken {
		return r
	}
	if q.segmenting {
		if q.nextSegments(pool, b, &r, max); q.segmenting {
			return r
		}
	}
	last := q.lastAvail
	avail := q.loadAvailIdx() - last
	if avail == 0 {
		return r
	}
	if uint32(avail) > q.size {
		q.broken = true
		r.Errors++
		return r
	}
	n := int(avail)
	if n > max-r.Packets {
		n = max - r.Packets
	}
	old := q.usedIdx
	used := old
	hdr := q.hdrLen
	var pkt *packet.Packet
	s := &q.ents
	for n > 0 {
		k := min(n, batchMax)
		n -= k
		// The fast case: header and frame in one read-only descriptor.
		q.gather(s, last, used, k, 0, hdr, MaxSize, false)
		for i := 0; i < k; i++ {
			if r.Packets >= max {
				n = 0 // segments filled the batch
				break
			}
			if pkt == nil {
				if pkt = pool.Get(); pkt == nil {
					r.Drops++
					n = 0
					break
				}
			}
			head := s[i].head
			dst := pkt.Buffer()
			if src := s[i].buf; q.txOffload && (src == nil || src[0]|src[1] != 0 || len(src)-hdr > len(dst)) {
				if q.takeOffload(head, src, pkt, pool, b, &r) {
					pkt = nil
				}
				last++
				q.putUsed(used, head, 0)
				used++
				if q.segmenting {
					q.nextSegments(pool, b, &r, max)
				}
				if q.segmenting || r.Packets >= max {
					n = 0
					break
				}
				continue
			}
			var l int
			ok := true
			if src := s[i].buf; src != nil && len(src)-hdr <= len(dst) {
				l = copy(dst, src[hdr:])
			} else {
				l, ok = q.readChain(head, dst)
			}
			last++
			q.putUsed(used, head, 0)
			used++
			if !ok {
				r.Errors++
				continue
			}
			pkt.SetLen(l)
			b.Add(pkt)
			pkt = nil
			r.Packets++
			r.Bytes += l
		}
	}
	if pkt != nil {
		pkt.Free()
	}
	q.lastAvail = last
	if used != old {
		q.publishUsed(used)
		r.Signal = q.needSignal(old, used)
	}
	return r
}

// putHeader writes a zero virtio-net header whose num_buffers (if the
// header has one) is 1, as two stores.
func (q *Queue) putHeader(dst []byte) {
	le.PutUint64(dst, 0)
	if q.hdrLen == 12 {
		le.PutUint32(dst[8:], 1<<16) // csum_offset 0, num_buffers 1
	} else {
		le.PutUint16(dst[8:], 0)
	}
}

// put writes the stream "virtio-net header, then frame" from stream
// offset pos into dst and returns the bytes written. The header is
// q.rxHdr (zero but for a super-frame's offload state) and num_buffers,
// whose location it records.
func (q *Queue) put(dst []byte, pos int, frame []byte) int {
	n := 0
	if pos < q.hdrLen {
		n = min(q.hdrLen-pos, len(dst))
		copy(dst[:n], q.rxHdr[pos:])
		if q.hdrLen == 12 {
			if pos <= 10 && 10 < pos+n {
				q.nbLo = &dst[10-pos]
			}
			if 11 < pos+n {
				q.nbHi = &dst[11-pos]
			}
		}
	}
	if n < len(dst) {
		n += copy(dst[n:], frame[pos+n-q.hdrLen:])
	}
	return n
}

// writeChain fills the writable buffers of a receive chain with the stream
// from pos up to total and returns the bytes written. ok is false for a
// malformed chain.
func (q *Queue) writeChain(head uint32, frame []byte, pos, total int) (int, bool) {
	table, n, idx := q.desc, q.size, head
	indirect := false
	w := 0
	for count := uint32(0); pos+w < total; count++ {
		if idx >= n || count >= n {
			return 0, false
		}
		addr, ln, flags, next := desc(table, idx)
		if flags&DescFIndirect != 0 {
			if indirect {
				return 0, false
			}
			if table, n = q.indirectTable(addr, ln, flags); table == nil {
				return 0, false
			}
			indirect, idx, count = true, 0, ^uint32(0)
			continue
		}
		if flags&DescFWrite == 0 {
			return 0, false
		}
		if ln > 0 {
			buf := q.guest(addr, uint64(ln))
			if buf == nil {
				return 0, false
			}
			if room := total - pos - w; len(buf) > room {
				buf = buf[:room]
			}
			w += q.put(buf, pos+w, frame)
		}
		if flags&DescFNext == 0 {
			break
		}
		idx = uint32(next)
	}
	return w, w > 0
}

// Enqueue copies frames into the frontend's receive buffers: each frame
// gets a zero virtio-net header and, with mergeable buffers, as many avail
// chains as it needs (num_buffers says how many). A GSO super-frame goes
// whole, its offload state in the header, if the frontend takes its kind
// (Config.RxOffload), else as segments (putGSO). The used idx is
// published once for the batch. Frames that find no room are dropped
// (counted in Drops) without waiting.
func (q *Queue) Enqueue(pkts []*packet.Packet) (r Result) {
	if q.broken {
		r.Drops = len(pkts)
		return r
	}
	availIdx := q.loadAvailIdx()
	if uint32(availIdx-q.lastAvail) > q.size {
		q.broken = true
		r.Errors++
		r.Drops = len(pkts)
		return r
	}
	last, old := q.lastAvail, q.usedIdx
	used := old
	// The fast case, for as long as it holds: each frame fits in the one
	// writable descriptor of the next avail chain.
	hdr := q.hdrLen
	var pkts0 []byte // the first frame, whose length sizes the prefetches
	if len(pkts) > 0 {
		pkts0 = pkts[0].Data()
	}
	for len(pkts) > 0 {
		k := min(len(pkts), batchMax, int(availIdx-last))
		if k == 0 {
			break
		}
		s := &q.ents
		q.gather(s, last, used, k, DescFWrite, 0, hdr+len(pkts[0].Data()), true)
		done := 0
		for i := 0; i < k; i++ {
			frame := pkts[i].Data()
			dst := s[i].buf
			if dst == nil || len(dst)-hdr < len(frame) || pkts[i].Offload.GSOType != 0 {
				break
			}
			q.putHeader(dst)
			copy(dst[hdr:], frame)
			q.putUsed(used, s[i].head, uint32(hdr+len(frame)))
			used++
			last++
			r.Packets++
			r.Bytes += len(frame)
			done++
		}
		pkts = pkts[done:]
		if done < k {
			break
		}
	}
	for i, pkt := range pkts {
		frame := pkt.Data()
		var sent, empty bool
		if pkt.Offload.GSOType != 0 {
			sent, empty = q.putGSO(pkt, availIdx, &last, &used, &r)
		} else {
			sent, empty = q.putFrame(frame, availIdx, &last, &used, &r)
		}
		if !sent {
			r.Drops++
			if empty {
				r.Drops += len(pkts) - i - 1
				break
			}
			continue
		}
		r.Packets++
		r.Bytes += len(frame)
	}
	q.lastAvail = last
	if used != old {
		q.publishUsed(used)
		r.Signal = q.needSignal(old, used)
	}
	if ahead := int(availIdx - last); ahead > 0 && !r.Signal && r.Packets > 0 {
		q.touchAhead(last, min(ahead, batchMax), hdr+len(pkts0))
	}
	return r
}

// putFrame writes frame behind the header q.rxHdr into as many receive
// chains as it needs (more than one with mergeable buffers; num_buffers
// says how many), from avail entry *last on, and puts them in the used
// ring from *used on. It reports whether the frame went out, and empty
// when the frontend had run out of receive buffers (later frames will not
// go either). Bad chains are handed back empty and counted in r.Errors.
func (q *Queue) putFrame(frame []byte, availIdx uint16, last, used *uint16, r *Result) (sent, empty bool) {
	total := q.hdrLen + len(frame)
	startAvail, startUsed := *last, *used
	pos, np := 0, 0
	hadBad, ok := false, true
	q.nbLo, q.nbHi = nil, nil
	for pos < total {
		if *last == availIdx {
			ok, empty = false, true
			break
		}
		if np == len(q.pend) {
			ok = false
			break
		}
		head := q.availEntry(*last)
		*last++
		w, good := q.writeChain(head, frame, pos, total)
		if !good {
			// Hand the chain back empty on its own: the frame's
			// own entries must stay consecutive in the used ring.
			q.putUsed(*used, head, 0)
			*used++
			r.Errors++
			hadBad = true
			continue
		}
		q.pend[np] = usedElem{head, uint32(w)}
		np++
		pos += w
		if !q.mergeable && pos < total {
			ok = false
			break
		}
	}
	if !ok {
		if !hadBad {
			*last, *used = startAvail, startUsed // untouched by the frontend's view
		} else {
			for j := 0; j < np; j++ {
				q.putUsed(*used, q.pend[j].id, 0)
				*used++
			}
		}
		return false, empty
	}
	if q.nbLo != nil && q.nbHi != nil {
		*q.nbLo, *q.nbHi = byte(np), byte(np>>8)
	}
	for j := 0; j < np; j++ {
		q.putUsed(*used, q.pend[j].id, q.pend[j].len)
		*used++
	}
	return true, false
}

// touchAhead prefetches for writing the buffers of the next n receive
// chains the frontend has made available (avail entries last..last+n-1),
// after a batch was written and published. A polling frontend posts its
// receive buffers well ahead, and their lines sit in its core's cache
// (it read the frames they last held): requested now, they move while the
// PMD classifies and forwards its next batches, instead of stalling the
// stores of the next Enqueue. Only the one-descriptor case in the region
// of the last buffer is looked at; this is a hint, and Enqueue checks the
// chains again when it uses them. It is skipped when the frontend is to
// be interrupted, so the interrupt is not delayed.
//
// A polling frontend's bursts are often smaller than a batch, so the
// window of one call mostly overlaps the last one's: entries already
// touched (up to q.touched) are not looked at again.
func (q *Queue) touchAhead(last uint16, n, span int) {
	from := 0
	if d := int(q.touched - last); d <= n {
		from = d // d > n: stale (a reset ring, or wrapped); touch all
	}
	q.touched = last + uint16(n)
	if from >= n {
		return
	}
	hot := q.hotRegion()
	lines := &q.lines
	nl := 0
	for i := from; i < n; i++ {
		h := q.availEntry(last + uint16(i))
		if h >= q.size {
			continue
		}
		d := q.desc[16*h : 16*h+16]
		addr, ln, flags := le.Uint64(d), le.Uint32(d[8:]), le.Uint16(d[12:])
		if flags != DescFWrite || ln <= uint32(q.hdrLen) {
			continue
		}
		b := guestIn(hot, addr, uint64(ln))
		if b == nil {
			continue
		}
		p := uintptr(unsafe.Pointer(&b[0]))
		e := p + uintptr(min(len(b), span)) - 1
		lines[nl] = p
		nl++
		if e&^63 != p&^63 {
			lines[nl] = e
			nl++
		}
	}
	prefetchW(&lines[0], nl)
}

package virtq

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

const (
	testGPA  = 0x1_0000_0000
	testUVA  = 0x7f00_0000_0000
	pageSize = 4096
)

// guarded maps a region of n pages between two PROT_NONE guard pages: any
// access outside the region faults, so a test or fuzz run that passes
// proves the queue stayed inside.
func guarded(t testing.TB, pages int) []byte {
	m, err := unix.Mmap(-1, 0, (pages+2)*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	if err := unix.Mprotect(m[:pageSize], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(m[(pages+1)*pageSize:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return m[pageSize : (pages+1)*pageSize]
}

// ring is a test driver's view of a queue laid out at the start of a
// region: descriptors, avail ring, used ring, then buffers.
type ring struct {
	t                 testing.TB
	mem               []byte
	size              int
	desc, avail, used int
	bufs              int
	q                 *Queue
	availIdx          uint16
}

func newRing(t testing.TB, size int, cfg Config) *ring {
	mem := guarded(t, 16)
	r := &ring{t: t, mem: mem, size: size}
	r.desc = 0
	r.avail = 16 * size
	r.used = (r.avail + 6 + 2*size + 2 + 4095) &^ 4095
	r.bufs = (r.used + 6 + 8*size + 2 + 4095) &^ 4095
	cfg.Mem = NewMemory([]Region{{GuestAddr: testGPA, UserAddr: testUVA, Data: mem}})
	cfg.Size = size
	cfg.DescAddr, cfg.AvailAddr, cfg.UsedAddr = testUVA+uint64(r.desc), testUVA+uint64(r.avail), testUVA+uint64(r.used)
	if cfg.HdrLen == 0 {
		cfg.HdrLen = 12
	}
	cfg.CallFD, cfg.KickFD = -1, -1
	q, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.q = q
	return r
}

// buf returns the guest address and bytes of buffer i (512 bytes each).
func (r *ring) buf(i int) (uint64, []byte) {
	off := r.bufs + 512*i
	return testGPA + uint64(off), r.mem[off : off+512]
}

func (r *ring) setDesc(i int, addr uint64, n uint32, flags, next uint16) {
	d := r.mem[r.desc+16*i:]
	le.PutUint64(d, addr)
	le.PutUint32(d[8:], n)
	le.PutUint16(d[12:], flags)
	le.PutUint16(d[14:], next)
}

func (r *ring) publish(heads ...uint16) {
	for _, h := range heads {
		le.PutUint16(r.mem[r.avail+4+2*(int(r.availIdx)%r.size):], h)
		r.availIdx++
	}
	le.PutUint16(r.mem[r.avail+2:], r.availIdx)
}

func (r *ring) usedIdx() uint16 { return le.Uint16(r.mem[r.used+2:]) }

func (r *ring) usedElem(i int) (uint32, uint32) {
	e := r.mem[r.used+4+8*(i%r.size):]
	return le.Uint32(e), le.Uint32(e[4:])
}

// txFrame puts header+frame into buffer i as a one-descriptor chain at
// descriptor i.
func (r *ring) txFrame(i int, frame []byte) {
	a, b := r.buf(i)
	clear(b[:12])
	copy(b[12:], frame)
	r.setDesc(i, a, uint32(12+len(frame)), 0, 0)
}

func frame(n int, tag byte) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = tag + byte(i)
	}
	return f
}

func dequeue(q *Queue, pool *packet.Pool) ([][]byte, Result) {
	var b packet.Batch
	r := q.Dequeue(pool, &b, packet.BatchSize)
	var out [][]byte
	for _, p := range b.Packets() {
		out = append(out, append([]byte(nil), p.Data()...))
	}
	b.FreeAll()
	return out, r
}

// TestHostileDescriptors: each malformed chain is counted, handed back with
// length 0, and the good chains around it still arrive.
func TestHostileDescriptors(t *testing.T) {
	cases := []struct {
		name  string
		build func(r *ring) // sets up descriptor 1 (the bad chain's head)
	}{
		{"address outside the regions", func(r *ring) { r.setDesc(1, 0x1234, 64, 0, 0) }},
		{"buffer runs past the region", func(r *ring) { r.setDesc(1, testGPA+uint64(len(r.mem))-8, 64, 0, 0) }},
		{"address+length overflows", func(r *ring) { r.setDesc(1, ^uint64(0)-4, 64, 0, 0) }},
		{"huge length", func(r *ring) { a, _ := r.buf(1); r.setDesc(1, a, 0xffffffff, 0, 0) }},
		{"chain loop", func(r *ring) {
			a, _ := r.buf(1)
			r.setDesc(1, a, 12, DescFNext, 4)
			r.setDesc(4, a, 4, DescFNext, 5)
			r.setDesc(5, a, 4, DescFNext, 4)
		}},
		{"chain longer than the ring", func(r *ring) {
			a, _ := r.buf(1)
			// 1 → 3 → 4 → 5 → 6 → 7 → 1 …: zero-length descriptors, so
			// only the chain bound stops it.
			r.setDesc(1, a, 0, DescFNext, 3)
			for i := 3; i < r.size; i++ {
				r.setDesc(i, a, 0, DescFNext, uint16(i+1))
			}
			r.setDesc(r.size-1, a, 0, DescFNext, 1)
		}},
		{"next out of the table", func(r *ring) { a, _ := r.buf(1); r.setDesc(1, a, 20, DescFNext, 999) }},
		{"frame longer than a packet buffer", func(r *ring) {
			a, _ := r.buf(1)
			r.setDesc(1, a, 4000, 0, 0) // inside the region, too big for the pool buffer
		}},
		{"shorter than the header", func(r *ring) { a, _ := r.buf(1); r.setDesc(1, a, 6, 0, 0) }},
		{"device-writable buffer", func(r *ring) { a, _ := r.buf(1); r.setDesc(1, a, 64, DescFWrite, 0) }},
		{"indirect table outside the regions", func(r *ring) { r.setDesc(1, 0x10, 64, DescFIndirect, 0) }},
		{"indirect length not a multiple of 16", func(r *ring) { a, _ := r.buf(1); r.setDesc(1, a, 20, DescFIndirect, 0) }},
		{"indirect with next", func(r *ring) { a, _ := r.buf(1); r.setDesc(1, a, 32, DescFIndirect|DescFNext, 2) }},
		{"indirect too large", func(r *ring) { r.setDesc(1, testGPA, 16*(MaxIndirect+1), DescFIndirect, 0) }},
		{"nested indirect", func(r *ring) {
			ta, tb := r.buf(3)
			le.PutUint64(tb, ta)
			le.PutUint32(tb[8:], 16)
			le.PutUint16(tb[12:], DescFIndirect)
			r.setDesc(1, ta, 16, DescFIndirect, 0)
		}},
		{"indirect entry out of range", func(r *ring) {
			ta, tb := r.buf(3)
			le.PutUint64(tb, 0xdead_0000)
			le.PutUint32(tb[8:], 64)
			r.setDesc(1, ta, 16, DescFIndirect, 0)
		}},
		{"indirect loop", func(r *ring) {
			ta, tb := r.buf(3)
			a, _ := r.buf(1)
			for i := 0; i < 2; i++ {
				e := tb[16*i:]
				le.PutUint64(e, a)
				le.PutUint32(e[8:], 12)
				le.PutUint16(e[12:], DescFNext)
				le.PutUint16(e[14:], uint16(1-i))
			}
			r.setDesc(1, ta, 32, DescFIndirect, 0)
		}},
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRing(t, 8, Config{Indirect: true})
			good0, good2 := frame(60, 1), frame(70, 2)
			r.txFrame(0, good0)
			c.build(r)
			r.txFrame(2, good2)
			r.publish(0, 1, 2)
			got, res := dequeue(r.q, pool)
			if res.Errors != 1 {
				t.Fatalf("errors %d, want 1", res.Errors)
			}
			want := [][]byte{good0, good2}
			if len(got) != len(want) {
				t.Fatalf("received %d frames, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("frame %d differs", i)
				}
			}
			if int(r.usedIdx()) != len(want)+1 {
				t.Errorf("used idx %d: every chain must go back", r.usedIdx())
			}
			if pool.Available() != pool.Size() {
				t.Error("pool leak")
			}
		})
	}
}

// TestHostileAvailIdx: an avail idx more than a ring ahead breaks the queue
// (counted once), it does not make the PMD process garbage.
func TestHostileAvailIdx(t *testing.T) {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	r := newRing(t, 8, Config{})
	le.PutUint16(r.mem[r.avail+2:], 100)
	if _, res := dequeue(r.q, pool); res.Errors != 1 || res.Packets != 0 || !r.q.Broken() {
		t.Fatalf("result %+v broken %v", res, r.q.Broken())
	}
	if _, res := dequeue(r.q, pool); res.Errors != 0 {
		t.Errorf("a broken queue counted again: %+v", res)
	}
	var b packet.Batch
	pkt := pool.Get()
	pkt.SetData(frame(60, 0))
	b.Add(pkt)
	if res := r.q.Enqueue(b.Packets()); res.Drops != 1 {
		t.Errorf("enqueue on a broken queue: %+v", res)
	}
	b.FreeAll()
}

// TestIndirectTx: a chain through an indirect table with the header in its
// own descriptor arrives whole.
func TestIndirectTx(t *testing.T) {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	r := newRing(t, 8, Config{Indirect: true})
	ta, tb := r.buf(0)
	ha, hb := r.buf(1)
	da, db := r.buf(2)
	clear(hb[:12])
	f := frame(300, 5)
	copy(db, f[:200])
	ea, eb := r.buf(3)
	copy(eb, f[200:])
	entries := [][3]uint64{{ha, 12, DescFNext}, {da, 200, DescFNext}, {ea, 100, 0}}
	for i, e := range entries {
		d := tb[16*i:]
		le.PutUint64(d, e[0])
		le.PutUint32(d[8:], uint32(e[1]))
		le.PutUint16(d[12:], uint16(e[2]))
		le.PutUint16(d[14:], uint16(i+1))
	}
	r.setDesc(5, ta, 48, DescFIndirect, 0)
	r.publish(5)
	got, res := dequeue(r.q, pool)
	if res.Errors != 0 || len(got) != 1 || !bytes.Equal(got[0], f) {
		t.Fatalf("result %+v, %d frames", res, len(got))
	}
	// Without the feature negotiated an indirect descriptor is hostile.
	r2 := newRing(t, 8, Config{})
	r2.setDesc(0, testGPA+uint64(r2.bufs), 48, DescFIndirect, 0)
	r2.publish(0)
	if _, res := dequeue(r2.q, pool); res.Errors != 1 {
		t.Errorf("indirect without the feature: %+v", res)
	}
}

// TestHostileRxChains: malformed receive chains are handed back empty and
// counted; the frame goes into the next good chain.
func TestHostileRxChains(t *testing.T) {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	r := newRing(t, 8, Config{Mergeable: true})
	a, _ := r.buf(0)
	r.setDesc(0, a, 512, 0, 0) // device-readable: not a receive buffer
	r.setDesc(1, 0x99, 512, DescFWrite, 0)
	b2, bb := r.buf(2)
	r.setDesc(2, b2, 512, DescFWrite, 0)
	r.publish(0, 1, 2)
	var b packet.Batch
	pkt := pool.Get()
	f := frame(100, 3)
	pkt.SetData(f)
	b.Add(pkt)
	res := r.q.Enqueue(b.Packets())
	b.FreeAll()
	if res.Errors != 2 || res.Packets != 1 {
		t.Fatalf("result %+v", res)
	}
	if r.usedIdx() != 3 {
		t.Fatalf("used idx %d", r.usedIdx())
	}
	id, n := r.usedElem(2)
	if id != 2 || n != 112 || !bytes.Equal(bb[12:112], f) || le.Uint16(bb[10:]) != 1 {
		t.Errorf("good chain: id %d len %d", id, n)
	}
	for i := 0; i < 2; i++ {
		if _, n := r.usedElem(i); n != 0 {
			t.Errorf("bad chain %d handed back with length %d", i, n)
		}
	}
}

// TestRxRingFull: frames beyond the posted buffers are dropped at once and
// a frame never occupies part of the ring when it cannot fit whole.
func TestRxRingFull(t *testing.T) {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	r := newRing(t, 8, Config{Mergeable: true})
	for i := 0; i < 2; i++ {
		a, _ := r.buf(i)
		r.setDesc(i, a, 512, DescFWrite, 0)
	}
	r.publish(0, 1)
	var b packet.Batch
	for _, n := range []int{400, 1000, 60} { // 1000 needs 2 buffers, only 1 left
		pkt := pool.Get()
		pkt.SetData(frame(n, 0))
		b.Add(pkt)
	}
	res := r.q.Enqueue(b.Packets())
	b.FreeAll()
	if res.Packets != 1 || res.Drops != 2 || r.usedIdx() != 1 || r.q.LastAvail() != 1 {
		t.Fatalf("result %+v used %d last avail %d", res, r.usedIdx(), r.q.LastAvail())
	}
}

// TestRxTouchAheadHostile: the entries Enqueue looks at ahead of the
// batch (to prefetch their buffers) may be anything; they change nothing:
// the batch is delivered, and the hostile entries are left for the next
// Enqueue, which reports them.
func TestRxTouchAheadHostile(t *testing.T) {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	r := newRing(t, 64, Config{Mergeable: true})
	for i := 0; i < 4; i++ {
		a, _ := r.buf(i)
		r.setDesc(i, a, 512, DescFWrite, 0)
	}
	a, _ := r.buf(4)
	r.setDesc(4, testGPA+uint64(len(r.mem))-8, 512, DescFWrite, 0) // runs past the region
	r.setDesc(5, a, 512, 0, 0)                                     // read-only
	r.setDesc(6, ^uint64(0)-4, 512, DescFWrite, 0)                 // wraps
	r.setDesc(7, a, 4, DescFWrite, 0)                              // shorter than the header
	b8, _ := r.buf(8)
	r.setDesc(8, b8, 512, DescFWrite, 0)             // a good one among them
	r.publish(0, 1, 2, 3, 4, 5, 6, 7, 8, 200)        // 200: outside the table
	le.PutUint16(r.mem[r.avail:], AvailFNoInterrupt) // a polling frontend: look ahead
	var b packet.Batch
	for i := 0; i < 4; i++ {
		pkt := pool.Get()
		pkt.SetData(frame(60, byte(i)))
		b.Add(pkt)
	}
	res := r.q.Enqueue(b.Packets())
	if res.Packets != 4 || res.Errors != 0 || r.q.LastAvail() != 4 || r.usedIdx() != 4 {
		t.Fatalf("result %+v, last avail %d, used %d", res, r.q.LastAvail(), r.usedIdx())
	}
	res = r.q.Enqueue(b.Packets())
	b.FreeAll()
	if res.Errors == 0 {
		t.Fatalf("hostile entries: result %+v", res)
	}
}

// FuzzVirtqDequeue drives both directions with hostile descriptor tables,
// rings and region layouts. The region sits between guard pages, so any
// access outside it crashes the run.
func FuzzVirtqDequeue(f *testing.F) {
	seed := make([]byte, 16*8+6+16)
	le.PutUint64(seed[0:], testGPA+4096)
	le.PutUint32(seed[8:], 100)
	le.PutUint16(seed[16*8+2:], 1)
	f.Add(seed, uint8(3), uint8(7), uint64(testGPA))
	f.Add(seed, uint8(0), uint8(0), uint64(0))
	f.Add(seed, uint8(3), uint8(7|16|32), uint64(testGPA))
	// Offloads (flags bit 6): one-descriptor chains whose headers ask for
	// a checksum or GSO of a TCP frame (kept whole with bit 7, which
	// attaches big buffers; else cut), an indirect chain, and hostile
	// header values.
	for i, h := range []vnethdr.Header{
		{Flags: vnethdr.FlagNeedsCsum, CsumStart: 34, CsumOffset: 16},
		{Flags: vnethdr.FlagNeedsCsum, GSOType: vnethdr.GSOTCPv4, GSOSize: 100, CsumStart: 34, CsumOffset: 16, HdrLen: 54},
		{Flags: vnethdr.FlagNeedsCsum, GSOType: vnethdr.GSOTCPv4, GSOSize: 0, CsumStart: 34, CsumOffset: 16},
		{Flags: vnethdr.FlagNeedsCsum, GSOType: vnethdr.GSOUDP, GSOSize: 8, CsumStart: 0xffff, CsumOffset: 0xffff},
	} {
		s := make([]byte, 4096+12+54+400)
		le.PutUint64(s[0:], testGPA+4096)
		le.PutUint32(s[8:], 12+54+400)
		if i == 3 {
			le.PutUint16(s[12:], DescFIndirect) // an indirect table at 4096
			le.PutUint32(s[8:], 16)
			le.PutUint64(s[4096:], testGPA+4096+16)
			le.PutUint32(s[4096+8:], 12+54+384)
		}
		le.PutUint16(s[2048+2:], 1)
		b := s[4096+16*(i/3):]
		h.Encode(b)
		fr := b[12:]
		fr[12], fr[13], fr[14] = 0x08, 0x00, 0x45
		fr[16], fr[17] = 0x01, 0xb8 // IP total length 440
		fr[22], fr[23] = 64, 6
		fr[34+12] = 5 << 4
		f.Add(s, uint8(3), uint8(64|128*uint8(i&1)|4), uint64(testGPA))
	}
	mem := guarded(f, 4) // shared by the runs of this process, cleared each time
	withBig := packet.NewPool(40, packet.DefaultBufSize)
	withBig.AttachBig(packet.NewPool(2, packet.BigBufSize))
	plain := packet.NewPool(40, packet.DefaultBufSize)
	f.Fuzz(func(t *testing.T, data []byte, sizeLog, flags uint8, gpa uint64) {
		clear(mem)
		size := 1 << (sizeLog % 8)
		copy(mem, data)
		// Rings at fixed places; the fuzz data covers them and the
		// buffers, so every field is hostile.
		descOff, availOff, usedOff := 0, 2048, 3072
		if 16*size > availOff {
			descOff, availOff, usedOff = 0, 8192, 12288
		}
		m := NewMemory([]Region{{GuestAddr: gpa, UserAddr: testUVA, Data: mem}})
		if flags&16 != 0 {
			// Two regions, contiguous for the rings' user addresses, in
			// guest space 0..7 pages apart (0: adjacent, so a buffer
			// can straddle them), for the queue's region hint.
			gpa2 := gpa + 8192 + uint64(flags>>5)*pageSize
			m = NewMemory([]Region{
				{GuestAddr: gpa, UserAddr: testUVA, Data: mem[:8192]},
				{GuestAddr: gpa2, UserAddr: testUVA + 8192, Data: mem[8192:]},
			})
		}
		q, err := New(Config{
			Mem: m, Size: size, HdrLen: 10 + 2*int(flags&1),
			DescAddr: testUVA + uint64(descOff), AvailAddr: testUVA + uint64(availOff), UsedAddr: testUVA + uint64(usedOff),
			LastAvail: uint16(len(data)), Mergeable: flags&2 != 0, Indirect: flags&4 != 0, EventIdx: flags&8 != 0,
			TxOffload: flags&64 != 0, RxOffload: flags&64 != 0, RxECN: flags&32 != 0, CallFD: -1, KickFD: -1,
		})
		if err != nil {
			return
		}
		pool := withBig
		if flags&128 == 0 {
			pool = plain
		}
		for round := 0; round < 3; round++ {
			var b packet.Batch
			r := q.Dequeue(pool, &b, packet.BatchSize)
			if r.Packets != b.N || r.Packets > packet.BatchSize {
				t.Fatalf("dequeue result %+v with %d packets", r, b.N)
			}
			for _, p := range b.Packets() {
				if p.GSO() {
					// What the datapath does with a frame kept whole
					// (cut it for a port that cannot take it) works.
					var s vnethdr.Segmenter
					h := vnethdr.Header(p.Offload)
					if err := s.Reset(&h, p.Data()); err != nil || int(h.CsumStart)+int(h.CsumOffset)+2 > p.Len() {
						t.Fatalf("kept whole a frame its header does not fit: %+v (%v)", h, err)
					}
				}
			}
			b.FreeAll()
			for i := 0; i < 4; i++ {
				p := pool.Get()
				p.SetData(data[:min(len(data), 1500-i*300)])
				b.Add(p)
			}
			if h, err := vnethdr.Decode(data); err == nil && h.GSOType != 0 && flags&64 != 0 {
				// A super-frame with whatever state the data says, its
				// frame the data behind the header.
				if p := withBig.GetBig(); p != nil {
					p.SetData(data[vnethdr.Len:])
					p.Offload = packet.Offload(h)
					b.Add(p)
				}
			}
			e := q.Enqueue(b.Packets())
			if e.Packets+e.Drops != b.N {
				t.Fatalf("enqueue result %+v for %d frames", e, b.N)
			}
			b.FreeAll()
			q.SetKickNotify(round%2 == 0)
		}
		if withBig.Available() != withBig.Size() || plain.Available() != plain.Size() || withBig.Big().Available() != withBig.Big().Size() {
			t.Fatal("pool leak")
		}
	})
}

// TestRxOneBufferEdges: the one-buffer case and the chain walk agree at
// their boundary: a buffer of exactly header+frame takes the frame with a
// clean header whatever the buffer held before; one byte less spills into
// a second buffer (mergeable) or drops the frame without using the ring;
// multi-descriptor chains between one-buffer chains keep the order.
func TestRxOneBufferEdges(t *testing.T) {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	enqueue := func(r *ring, frames ...[]byte) Result {
		var b packet.Batch
		for _, f := range frames {
			p := pool.Get()
			p.SetData(f)
			b.Add(p)
		}
		defer b.FreeAll()
		return r.q.Enqueue(b.Packets())
	}
	dirty := func(r *ring, i int) (uint64, []byte) {
		a, bb := r.buf(i)
		for j := range bb {
			bb[j] = 0xff
		}
		return a, bb
	}
	f := frame(64, 9)
	for _, hdr := range []int{10, 12} {
		r := newRing(t, 8, Config{Mergeable: true, HdrLen: hdr})
		a0, b0 := dirty(r, 0)
		r.setDesc(0, a0, uint32(hdr+64), DescFWrite, 0) // exact fit
		r.publish(0)
		if res := enqueue(r, f); res.Packets != 1 || res.Errors != 0 {
			t.Fatalf("hdr %d: exact fit: %+v", hdr, res)
		}
		if id, n := r.usedElem(0); id != 0 || n != uint32(hdr+64) {
			t.Errorf("hdr %d: used %d/%d", hdr, id, n)
		}
		want := make([]byte, hdr)
		if hdr == 12 {
			want[10] = 1 // num_buffers
		}
		if !bytes.Equal(b0[:hdr], want) || !bytes.Equal(b0[hdr:hdr+64], f) || b0[hdr+64] != 0xff {
			t.Errorf("hdr %d: buffer % x", hdr, b0[:hdr+66])
		}
	}

	// One byte short, mergeable: two buffers, num_buffers 2.
	r := newRing(t, 8, Config{Mergeable: true})
	a0, b0 := dirty(r, 0)
	a1, b1 := dirty(r, 1)
	r.setDesc(0, a0, 12+63, DescFWrite, 0)
	r.setDesc(1, a1, 512, DescFWrite, 0)
	r.publish(0, 1)
	if res := enqueue(r, f); res.Packets != 1 {
		t.Fatalf("spill: %+v", res)
	}
	_, n0 := r.usedElem(0)
	_, n1 := r.usedElem(1)
	if r.usedIdx() != 2 || n0 != 75 || n1 != 1 || le.Uint16(b0[10:]) != 2 ||
		!bytes.Equal(b0[12:75], f[:63]) || b1[0] != f[63] {
		t.Errorf("spill: used idx %d lens %d %d num_buffers %d", r.usedIdx(), n0, n1, le.Uint16(b0[10:]))
	}

	// One byte short, not mergeable: dropped, nothing used.
	r = newRing(t, 8, Config{})
	a0, _ = r.buf(0)
	r.setDesc(0, a0, 12+63, DescFWrite, 0)
	r.publish(0)
	if res := enqueue(r, f); res.Packets != 0 || res.Drops != 1 || r.usedIdx() != 0 || r.q.LastAvail() != 0 {
		t.Fatalf("short, not mergeable: %+v used %d last avail %d", res, r.usedIdx(), r.q.LastAvail())
	}

	// One-buffer, two-descriptor, one-buffer chains: order kept.
	r = newRing(t, 8, Config{Mergeable: true})
	a0, b0 = r.buf(0)
	r.setDesc(0, a0, 512, DescFWrite, 0)
	a1, b1 = r.buf(1)
	a2, b2 := r.buf(2)
	r.setDesc(1, a1, 12, DescFWrite|DescFNext, 2) // header alone, then the frame
	r.setDesc(2, a2, 512, DescFWrite, 0)
	a3, b3 := r.buf(3)
	r.setDesc(3, a3, 512, DescFWrite, 0)
	r.publish(0, 1, 3)
	f1, f2, f3 := frame(60, 1), frame(61, 2), frame(62, 3)
	if res := enqueue(r, f1, f2, f3); res.Packets != 3 || res.Errors != 0 {
		t.Fatalf("mixed: %+v", res)
	}
	for i, c := range []struct {
		id  uint32
		buf []byte
		f   []byte
	}{{0, b0[12:], f1}, {1, b2, f2}, {3, b3[12:], f3}} {
		id, n := r.usedElem(i)
		if id != c.id || n != uint32(12+len(c.f)) || !bytes.Equal(c.buf[:len(c.f)], c.f) {
			t.Errorf("mixed entry %d: id %d len %d", i, id, n)
		}
	}
	if le.Uint16(b1[10:]) != 1 {
		t.Error("two-descriptor chain: num_buffers not 1")
	}
}

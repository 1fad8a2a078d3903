package afxdp

import (
	"bytes"
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// TestRingWrap: producer and consumer indexes wrap at 2^32 while the free
// and available counts stay right.
func TestRingWrap(t *testing.T) {
	var prod, cons, flags uint32 = 0xfffffff0, 0xfffffff0, 0
	var p, c ring // the two sides of one ring
	p.init(&prod, &cons, &flags, 16)
	c.init(&prod, &cons, &flags, 16)
	for round := 0; round < 10; round++ {
		if n := p.free(16); n != 16 {
			t.Fatalf("round %d: free %d, want 16", round, n)
		}
		p.submit(10)
		if n := p.free(16); n != 6 {
			t.Fatalf("round %d: free after 10 %d, want 6", round, n)
		}
		if n := c.avail(32); n != 10 {
			t.Fatalf("round %d: avail %d, want 10", round, n)
		}
		c.release(4)
		if n := p.free(16); n != 10 {
			t.Fatalf("round %d: free after release %d, want 10", round, n)
		}
		if n := c.avail(32); n != 6 {
			t.Fatalf("round %d: avail after release %d, want 6", round, n)
		}
		c.release(6)
	}
	if prod > 0x100 {
		t.Fatalf("producer %#x did not wrap", prod)
	}
}

// TestRingCachedIndexes: the other side's index is reloaded only when the
// cached copy says there is not enough, so a batch that fits costs no
// shared load.
func TestRingCachedIndexes(t *testing.T) {
	var prod, cons, flags uint32
	var p ring
	p.init(&prod, &cons, &flags, 8)
	p.submit(8)
	cons = 3 // the consumer moved, but nothing asked
	if n := p.free(0); n != 0 || p.cachedCons != 0 {
		t.Fatalf("free(0) = %d, cached consumer %d: reloaded without need", n, p.cachedCons)
	}
	if n := p.free(2); n != 2 || p.cachedCons != 3 {
		t.Fatalf("free(2) = %d, cached consumer %d, want 2 and 3", n, p.cachedCons)
	}
	var c ring
	c.init(&prod, &cons, &flags, 8)
	c.cachedCons = 3
	prod = 8
	if n := c.avail(4); n != 4 {
		t.Fatalf("avail(4) = %d", n)
	}
	prod = 9 // not looked at while the cache has enough
	if n := c.avail(5); n != 5 || c.cachedProd != 8 {
		t.Fatalf("avail(5) = %d with cached producer %d, want 5 from the cache", n, c.cachedProd)
	}
}

// TestRingHostileIndexes: a peer that moves its index out of the possible
// range cannot make us overrun the ring.
func TestRingHostileIndexes(t *testing.T) {
	var prod, cons, flags uint32
	var p ring
	p.init(&prod, &cons, &flags, 8)
	p.submit(8) // full: the next free() must look at the consumer
	cons = 100  // consumer ahead of the producer
	if n := p.free(8); n != 0 {
		t.Fatalf("free with consumer ahead = %d, want 0", n)
	}
	var c ring
	prod, cons = 0, 0
	c.init(&prod, &cons, &flags, 8)
	prod = 1000 // more than a ring ahead
	if n := c.avail(1 << 20); n != 8 {
		t.Fatalf("avail with producer far ahead = %d, want the ring size", n)
	}
	flags = unix.XDP_RING_NEED_WAKEUP
	if !c.needWakeup() {
		t.Fatal("need-wakeup flag not seen")
	}
}

var testLayout = layout{frameSize: 2048, rxFrames: 8, txFrames: 8}
var testSizes = ringSizes{fill: 8, comp: 8, rx: 8, tx: 8}

// frameAt writes data into the UMEM at addr.
func frameAt(x *xsk, addr uint64, data []byte) unix.XDPDesc {
	copy(x.umem[addr:], data)
	return unix.XDPDesc{Addr: addr, Len: uint32(len(data))}
}

func testFrame(seq byte, n int) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = seq + byte(i)
	}
	return f
}

// TestRecvCopiesAndRefills: frames on the rx ring end up in pool buffers,
// and their UMEM frames go straight back to the fill ring.
func TestRecvCopiesAndRefills(t *testing.T) {
	p, k := newFakePort(testLayout, testSizes, false)
	x := p.xsks[0]
	f1, f2 := testFrame(1, 60), testFrame(2, 1500)
	k.deliver(frameAt(x, 0*2048+256, f1), frameAt(x, 3*2048+256, f2))
	pool := packet.NewPool(8, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 2 {
		t.Fatalf("Recv = %d, want 2", n)
	}
	if !bytes.Equal(b.Pkts[0].Data(), f1) || !bytes.Equal(b.Pkts[1].Data(), f2) {
		t.Fatal("frame contents differ")
	}
	if got := k.takeFill(); len(got) != 2 || got[0] != 0 || got[1] != 3*2048 {
		t.Fatalf("fill ring got %v, want [0 6144]", got)
	}
	if k.load(2, 1) != 2 {
		t.Fatalf("rx consumer %d, want 2", k.load(2, 1))
	}
	s := p.Stats()
	if s.RxPackets != 2 || s.RxBytes != 1560 || s.RxDrops != 0 || s.RxErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
	b.FreeAll()
	if n := p.Recv(0, pool, &b); n != 0 {
		t.Fatalf("Recv on an empty ring = %d", n)
	}
}

// TestRecvHostileDescriptors: descriptors pointing outside the rx frames
// or running past a frame's end are counted, never followed; frames that
// are ours still go back to the fill ring.
func TestRecvHostileDescriptors(t *testing.T) {
	p, k := newFakePort(testLayout, testSizes, false)
	good := frameAt(p.xsks[0], 2*2048, testFrame(7, 100))
	k.deliver(
		unix.XDPDesc{Addr: 1 << 40, Len: 64},        // outside the UMEM
		unix.XDPDesc{Addr: 8 * 2048, Len: 64},       // a tx frame
		unix.XDPDesc{Addr: 1*2048 + 2000, Len: 100}, // runs past its frame
		unix.XDPDesc{Addr: ^uint64(0), Len: ^uint32(0)},
		good,
	)
	pool := packet.NewPool(8, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 1 || !bytes.Equal(b.Pkts[0].Data(), testFrame(7, 100)) {
		t.Fatalf("Recv = %d, want only the good frame", n)
	}
	if got := k.takeFill(); len(got) != 2 || got[0] != 2048 || got[1] != 2*2048 {
		t.Fatalf("fill ring got %v, want the two frames that are ours", got)
	}
	if s := p.Stats(); s.RxErrors != 4 || s.RxPackets != 1 {
		t.Fatalf("stats %+v, want 4 errors", s)
	}
}

// TestRecvPoolDry: frames that find no pool buffer are dropped and
// counted, and their UMEM frames are still recycled.
func TestRecvPoolDry(t *testing.T) {
	p, k := newFakePort(testLayout, testSizes, false)
	x := p.xsks[0]
	for i := uint64(0); i < 4; i++ {
		k.deliver(frameAt(x, i*2048, testFrame(byte(i), 64)))
	}
	pool := packet.NewPool(1, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 1 {
		t.Fatalf("Recv = %d, want 1", n)
	}
	if s := p.Stats(); s.RxDrops != 3 {
		t.Fatalf("RxDrops %d, want 3", s.RxDrops)
	}
	if got := k.takeFill(); len(got) != 4 {
		t.Fatalf("%d frames recycled, want 4", len(got))
	}
}

// TestRecvFixesChecksum: with FixChecksums a UDP frame carrying only the
// pseudo-header sum (what a veth peer with tx offload sends) leaves Recv
// with a valid checksum.
func TestRecvFixesChecksum(t *testing.T) {
	for _, fix := range []bool{false, true} {
		p, k := newFakePort(testLayout, testSizes, fix)
		f := partialUDP()
		k.deliver(frameAt(p.xsks[0], 0, f))
		pool := packet.NewPool(2, packet.DefaultBufSize)
		var b packet.Batch
		p.Recv(0, pool, &b)
		got := append([]byte(nil), b.Pkts[0].Data()...)
		changed := vnethdr.FixL4Checksum(got)
		if changed == fix {
			t.Errorf("fix=%v: frame after Recv still needed fixing: %v", fix, changed)
		}
	}
}

// partialUDP is an Ethernet/IPv4/UDP frame whose UDP checksum field holds
// only the pseudo-header sum.
func partialUDP() []byte {
	f := make([]byte, 60)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 46)
	copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^nstest.Checksum(ip, 0))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], 1000)
	binary.BigEndian.PutUint16(udp[2:], 2000)
	binary.BigEndian.PutUint16(udp[4:], 26)
	copy(udp[8:], "partial checksum")
	binary.BigEndian.PutUint16(udp[6:], nstest.Checksum(ip[12:20], 17+26))
	return f
}

func batchOf(pool *packet.Pool, frames ...[]byte) *packet.Batch {
	var b packet.Batch
	for _, f := range frames {
		pkt := pool.Get()
		pkt.SetData(f)
		b.Add(pkt)
	}
	return &b
}

// TestSendCopiesAndReclaims: Send copies frames into tx frames and
// publishes descriptors; frames come back through the completion ring;
// without free frames or ring slots packets are TxDrops, too-large ones
// TxErrors, and bogus completions are counted and ignored.
func TestSendCopiesAndReclaims(t *testing.T) {
	p, k := newFakePort(testLayout, testSizes, false)
	x := p.xsks[0]
	pool := packet.NewPool(32, packet.DefaultBufSize)
	f1, f2 := testFrame(1, 60), testFrame(2, 1000)
	b := batchOf(pool, f1, f2)
	if n := p.Send(0, b); n != 2 {
		t.Fatalf("Send = %d", n)
	}
	b.FreeAll()
	ds := k.takeTx()
	if len(ds) != 2 {
		t.Fatalf("%d descriptors on the tx ring", len(ds))
	}
	for i, f := range [][]byte{f1, f2} {
		d := ds[i]
		if !testLayout.txAddr(d.Addr) || int(d.Len) != len(f) || !bytes.Equal(x.umem[d.Addr:d.Addr+uint64(d.Len)], f) {
			t.Fatalf("descriptor %d %+v wrong", i, d)
		}
	}
	// Use up the remaining 6 frames, then one more batch finds none.
	var six [][]byte
	for i := 0; i < 6; i++ {
		six = append(six, f1)
	}
	b = batchOf(pool, six...)
	if n := p.Send(0, b); n != 6 {
		t.Fatalf("Send = %d, want 6", n)
	}
	b.FreeAll()
	b = batchOf(pool, f1, f2)
	if n := p.Send(0, b); n != 0 {
		t.Fatalf("Send with no free frame = %d", n)
	}
	b.FreeAll()
	if s := p.Stats(); s.TxPackets != 8 || s.TxDrops != 2 {
		t.Fatalf("stats %+v", s)
	}
	// The kernel completes two frames, plus two addresses that are not
	// tx frames; the next Send can use exactly the two.
	k.takeTx()
	k.complete(ds[0].Addr, 5, ds[1].Addr, 0)
	b = batchOf(pool, f1, f1, f1)
	if n := p.Send(0, b); n != 2 {
		t.Fatalf("Send after completions = %d, want 2", n)
	}
	b.FreeAll()
	if s := p.Stats(); s.TxErrors != 2 || s.TxDrops != 3 {
		t.Fatalf("stats %+v, want 2 errors (bogus completions) and 3 drops", s)
	}
	// Too large for a frame.
	k.takeTx()
	k.complete(ds[0].Addr)
	b = batchOf(pool, make([]byte, 1900))
	if n := p.Send(0, b); n != 0 {
		t.Fatalf("Send of an oversize frame = %d", n)
	}
	b.FreeAll()
	if s := p.Stats(); s.TxErrors != 3 {
		t.Fatalf("stats %+v, want the oversize frame as an error", s)
	}
}

// TestSendRingFull: with free frames but no tx ring slots, packets are
// dropped and counted.
func TestSendRingFull(t *testing.T) {
	p, _ := newFakePort(layout{frameSize: 2048, rxFrames: 4, txFrames: 16}, ringSizes{fill: 4, comp: 16, rx: 4, tx: 4}, false)
	pool := packet.NewPool(32, packet.DefaultBufSize)
	b := batchOf(pool, testFrame(1, 64), testFrame(2, 64), testFrame(3, 64), testFrame(4, 64), testFrame(5, 64), testFrame(6, 64))
	if n := p.Send(0, b); n != 4 {
		t.Fatalf("Send = %d, want 4 (the tx ring size)", n)
	}
	b.FreeAll()
	if s := p.Stats(); s.TxDrops != 2 || s.TxPackets != 4 {
		t.Fatalf("stats %+v", s)
	}
}

// TestLayoutRxDesc: every accepted descriptor lies inside one rx frame.
func TestLayoutRxDesc(t *testing.T) {
	l := testLayout
	cases := []struct {
		d   unix.XDPDesc
		res int
	}{
		{unix.XDPDesc{Addr: 256, Len: 1792}, descOK},
		{unix.XDPDesc{Addr: 256, Len: 1793}, descBadLen},
		{unix.XDPDesc{Addr: 7 * 2048, Len: 2048}, descOK},
		{unix.XDPDesc{Addr: 8 * 2048, Len: 1}, descBadAddr},
		{unix.XDPDesc{Addr: ^uint64(0), Len: 1}, descBadAddr},
	}
	for _, c := range cases {
		if _, _, _, res := l.rxDesc(c.d); res != c.res {
			t.Errorf("rxDesc(%+v) = %d, want %d", c.d, res, c.res)
		}
	}
}

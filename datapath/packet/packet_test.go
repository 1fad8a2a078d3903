package packet

import (
	"bytes"
	"runtime"
	"testing"
)

func TestPoolGetPutExhaustion(t *testing.T) {
	p := NewPool(4, DefaultBufSize)
	var got []*Packet
	for i := 0; i < 4; i++ {
		pkt := p.Get()
		if pkt == nil {
			t.Fatalf("Get %d returned nil with buffers left", i)
		}
		got = append(got, pkt)
	}
	if p.Get() != nil || p.Available() != 0 {
		t.Fatal("exhausted pool handed out a packet")
	}
	for _, pkt := range got {
		pkt.Free()
	}
	if p.Available() != 4 {
		t.Fatalf("available %d after returning all", p.Available())
	}
	got[0].Free() // double free: counted, not corrupting
	if p.DoubleFrees() != 1 || p.Available() != 4 {
		t.Fatalf("double free: count %d available %d", p.DoubleFrees(), p.Available())
	}
}

func TestBuffersDoNotOverlap(t *testing.T) {
	p := NewPool(8, 256)
	var pkts []*Packet
	for i := 0; i < 8; i++ {
		pkt := p.Get()
		b := pkt.Buffer()
		for j := range b {
			b[j] = byte(i)
		}
		pkt.SetLen(len(b))
		pkts = append(pkts, pkt)
	}
	for i, pkt := range pkts {
		for _, c := range pkt.Data() {
			if c != byte(i) {
				t.Fatalf("buffer %d was overwritten by another", i)
			}
		}
	}
}

func TestBufferStrideOddLines(t *testing.T) {
	for _, size := range []int{64, 256, 2048, 2049, 4096} {
		s := BufferStride(size)
		if s < size || s%64 != 0 || (s/64)%2 == 0 {
			t.Errorf("BufferStride(%d) = %d: want an odd number of lines covering the size", size, s)
		}
	}
}

func TestPushPullHeadroom(t *testing.T) {
	p := NewPool(1, DefaultBufSize)
	pkt := p.Get()
	pkt.SetData([]byte{1, 2, 3, 4})
	if pkt.Headroom() != Headroom {
		t.Fatalf("headroom %d", pkt.Headroom())
	}
	h := pkt.Push(2)
	h[0], h[1] = 9, 8
	if !bytes.Equal(pkt.Data(), []byte{9, 8, 1, 2, 3, 4}) {
		t.Fatalf("after push: %v", pkt.Data())
	}
	if !pkt.Pull(3) || !bytes.Equal(pkt.Data(), []byte{2, 3, 4}) {
		t.Fatalf("after pull: %v", pkt.Data())
	}
	if pkt.Pull(4) || pkt.Push(Headroom+10) != nil {
		t.Fatal("pull past the end or push past the headroom accepted")
	}
	if pkt.SetLen(len(pkt.Buffer()) + 1) {
		t.Fatal("SetLen past the buffer accepted")
	}
}

func TestCopyFromKeepsMetadata(t *testing.T) {
	p := NewPool(2, DefaultBufSize)
	a, b := p.Get(), p.Get()
	a.SetData([]byte("hello"))
	a.InPort = 7
	a.Push(3)
	if !b.CopyFrom(a) || !bytes.Equal(b.Data(), a.Data()) || b.InPort != 7 || b.Headroom() != a.Headroom() {
		t.Fatalf("copy: %q in_port %d headroom %d", b.Data(), b.InPort, b.Headroom())
	}
}

func BenchmarkPoolGetPut(b *testing.B) {
	p := NewPool(64, DefaultBufSize)
	var batch Batch
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for batch.N < BatchSize {
			batch.Add(p.Get())
		}
		batch.FreeAll()
	}
}

// TestBigPool: big buffers come from the attached pool, go back to it on
// Free, run out without touching the normal pool, and GetFit picks one
// only for a frame that needs it.
func TestBigPool(t *testing.T) {
	p := NewPool(2, DefaultBufSize)
	if p.GetBig() != nil {
		t.Fatal("GetBig without a big pool returned a packet")
	}
	p.AttachBig(NewPool(1, BigBufSize))
	b := p.GetBig()
	if b == nil || b.Cap() < 65535+14+8 {
		t.Fatalf("big packet %v with room for %d bytes", b, b.Cap())
	}
	if p.GetBig() != nil {
		t.Fatal("exhausted big pool handed out a packet")
	}
	if p.Available() != 2 {
		t.Fatal("GetBig took from the normal pool")
	}
	b.SetLen(60000)
	b.Offload = Offload{Flags: OffloadNeedsCsum, GSOType: 1, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	if p.GetFit(b) != nil {
		t.Fatal("GetFit found a big buffer in an exhausted big pool")
	}
	b.Free()
	if p.Big().Available() != 1 {
		t.Fatal("a big packet did not go back to the big pool")
	}
	c := p.GetBig()
	if c.GSO() || c.Offload != (Offload{}) {
		t.Fatalf("a reused big buffer kept offload state %+v", c.Offload)
	}
	small := p.Get()
	small.SetData(make([]byte, 100))
	if f := p.GetFit(small); f == nil || f.Pool() != p {
		t.Fatal("GetFit took a big buffer for a small frame")
	} else {
		f.Free()
	}
	c.Free()
	small.Free()
}

// TestOffloadFollowsPushPull: csum_start counts from the start of the
// frame, so a push or pull in front moves it with the headers, and
// SetData and CopyFrom treat the state like other metadata.
func TestOffloadFollowsPushPull(t *testing.T) {
	p := NewPool(3, DefaultBufSize)
	pkt := p.Get()
	pkt.SetData(make([]byte, 200))
	pkt.Offload = Offload{Flags: OffloadNeedsCsum, GSOType: 4, CsumStart: 54, CsumOffset: 16}
	pkt.Push(4)
	if pkt.Offload.CsumStart != 58 {
		t.Fatalf("csum_start %d after a 4-byte push, want 58", pkt.Offload.CsumStart)
	}
	pkt.Pull(8)
	if pkt.Offload.CsumStart != 50 {
		t.Fatalf("csum_start %d after an 8-byte pull, want 50", pkt.Offload.CsumStart)
	}
	c := p.Get()
	c.CopyFrom(pkt)
	if c.Offload != pkt.Offload || !c.GSO() {
		t.Fatalf("CopyFrom gave %+v, want %+v", c.Offload, pkt.Offload)
	}
	pkt.SetData([]byte{1, 2, 3})
	if pkt.GSO() || pkt.Offload != (Offload{}) {
		t.Fatal("SetData kept offload state")
	}
	dv := p.Get()
	dv.Offload = Offload{Flags: OffloadDataValid, CsumStart: 10}
	dv.Push(4)
	if dv.Offload.CsumStart != 10 {
		t.Fatal("Push moved csum_start without NEEDS_CSUM")
	}
	pkt.Free()
	c.Free()
	dv.Free()
}

// TestStateClearedOnReuse: Pool.Get hands out a packet with no metadata
// of its last use, and SetData forgets the old frame's but keeps the
// packet's recirculation count and its pool bookkeeping.
func TestStateClearedOnReuse(t *testing.T) {
	p := NewPool(1, DefaultBufSize)
	dirty := func(pkt *Packet) {
		pkt.KeyValid, pkt.HashValid, pkt.HasTunnel, pkt.Recircs = true, true, true, 3
		pkt.Offload = Offload{Flags: OffloadNeedsCsum, GSOType: 1, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	}
	pkt := p.Get()
	dirty(pkt)
	pkt.SetData([]byte{1, 2, 3})
	if pkt.KeyValid || pkt.HashValid || pkt.HasTunnel || pkt.Offload != (Offload{}) || pkt.Recircs != 3 {
		t.Fatalf("after SetData: %+v", pkt.State)
	}
	if pkt.Len() != 3 || pkt.Headroom() != Headroom {
		t.Fatalf("after SetData: length %d headroom %d", pkt.Len(), pkt.Headroom())
	}
	pkt.Free()
	pkt.SetData([]byte{4}) // a driver's bug, but the pool must still see it as free
	if p.Get() != pkt {
		t.Fatal("the pool lost its only packet")
	}
	if p.Get() != nil {
		t.Fatal("a free packet handed out twice")
	}
	dirty(pkt)
	pkt.Free()
	pkt = p.Get()
	if pkt.State != (State{}) || pkt.Len() != 0 || pkt.Headroom() != Headroom {
		t.Fatalf("from Get: state %+v length %d headroom %d", pkt.State, pkt.Len(), pkt.Headroom())
	}
	if pkt.Free(); p.DoubleFrees() != 0 {
		t.Fatal("double free counted")
	}
}

// TestMappedPool: a pool big enough to be mapped hands out every buffer,
// each its own, and its memory goes away with it without a fault.
func TestMappedPool(t *testing.T) {
	const n = 4096
	p := NewPool(n, DefaultBufSize)
	if p.Available() != n || p.Size() != n {
		t.Fatalf("new pool: %d of %d available", p.Available(), p.Size())
	}
	pkts := make([]*Packet, n)
	for i := range pkts {
		pkts[i] = p.Get()
		if pkts[i] == nil {
			t.Fatalf("Get %d of %d: nil", i, n)
		}
		b := pkts[i].Buffer()
		for j := range b {
			b[j] = byte(i)
		}
		pkts[i].SetLen(len(b))
	}
	for i, pkt := range pkts {
		if d := pkt.Data(); d[0] != byte(i) || d[len(d)-1] != byte(i) {
			t.Fatalf("buffer %d was overwritten by another", i)
		}
		pkt.Free()
	}
	if p.Available() != n {
		t.Fatalf("%d of %d back", p.Available(), n)
	}
	pkts, p = nil, nil
	for range 3 {
		runtime.GC() // runs the unmapping cleanup
	}
	q := NewPool(n, DefaultBufSize)
	if pkt := q.Get(); pkt == nil || len(pkt.Buffer()) == 0 {
		t.Fatal("a new pool after one was unmapped")
	}
}

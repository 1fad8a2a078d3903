package afxdp

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// FuzzRxDescriptors feeds Recv hostile rx rings: arbitrary descriptors and
// an arbitrary producer index. Recv must never touch memory outside the
// UMEM (a bad slice would panic), must hand out only frames that fit a
// UMEM frame, and must give back to the fill ring only base addresses of
// rx frames.
func FuzzRxDescriptors(f *testing.F) {
	seed := make([]byte, 1+12*3)
	seed[0] = 3
	binary.LittleEndian.PutUint64(seed[1:], 256)
	binary.LittleEndian.PutUint32(seed[9:], 60)
	binary.LittleEndian.PutUint64(seed[13:], 7*2048+2000)
	binary.LittleEndian.PutUint32(seed[21:], 100)
	binary.LittleEndian.PutUint64(seed[25:], 1<<63)
	binary.LittleEndian.PutUint32(seed[33:], 1<<31)
	f.Add(seed)
	f.Add([]byte{255})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		p, k := newFakePort(testLayout, testSizes, true)
		r := &p.xsks[0].r.rx
		var i uint32
		for rest := data[1:]; len(rest) >= 12; rest = rest[12:] {
			r.descs[i&r.mask] = unix.XDPDesc{Addr: binary.LittleEndian.Uint64(rest), Len: binary.LittleEndian.Uint32(rest[8:])}
			i++
		}
		k.store(2, 0, uint32(data[0])) // any producer index, even past the ring
		pool := packet.NewPool(64, packet.DefaultBufSize)
		for round := 0; round < 3; round++ {
			var b packet.Batch
			p.Recv(0, pool, &b)
			for _, pkt := range b.Packets() {
				if pkt.Len() > p.maxFrame+unix.XDP_PACKET_HEADROOM {
					t.Fatalf("frame of %d bytes from a %d-byte UMEM frame", pkt.Len(), testLayout.frameSize)
				}
			}
			b.FreeAll()
			for _, a := range k.takeFill() {
				if a%testLayout.frameSize != 0 || a >= testLayout.rxBytes() {
					t.Fatalf("fill ring got %#x, not an rx frame base", a)
				}
			}
		}
		if pool.Available() != pool.Size() {
			t.Fatal("Recv leaked pool buffers")
		}
	})
}

// FuzzCompletions feeds Send hostile completion rings: the free list must
// only ever hold tx frame bases, never more than there are tx frames.
func FuzzCompletions(f *testing.F) {
	f.Add([]byte{8, 0, 0x40, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		p, k := newFakePort(testLayout, testSizes, false)
		tx := &p.xsks[0].t
		var addrs []uint64
		for rest := data[1:]; len(rest) >= 8; rest = rest[8:] {
			addrs = append(addrs, binary.LittleEndian.Uint64(rest))
		}
		if len(addrs) > int(testSizes.comp) {
			addrs = addrs[:testSizes.comp]
		}
		pool := packet.NewPool(64, packet.DefaultBufSize)
		for round := 0; round < 3; round++ {
			k.complete(addrs...)
			k.store(1, 0, k.load(1, 0)+uint32(data[0])%32) // and a producer jump
			b := batchOf(pool, testFrame(1, 64), testFrame(2, 64), testFrame(3, 64))
			p.Send(0, b)
			b.FreeAll()
			if len(tx.free) > int(testLayout.txFrames) {
				t.Fatalf("free list holds %d frames, there are %d", len(tx.free), testLayout.txFrames)
			}
			for _, a := range tx.free {
				if !testLayout.txAddr(a) {
					t.Fatalf("free list holds %#x", a)
				}
			}
			for _, d := range k.takeTx() {
				if !testLayout.txAddr(d.Addr) || uint64(d.Len) > testLayout.frameSize {
					t.Fatalf("tx descriptor %+v outside the tx frames", d)
				}
			}
		}
	})
}

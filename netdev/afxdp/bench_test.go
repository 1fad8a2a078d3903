package afxdp

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// BenchmarkRecv measures one Recv of a full batch of 64-byte UDP frames
// (ring handling, copy, fill-ring refill) over fake rings, with and without
// checksum completion; the frames carry partial checksums, so the fix
// really rewrites each one.
func BenchmarkRecv(b *testing.B) {
	for _, fix := range []bool{false, true} {
		name := "nofix"
		if fix {
			name = "fixchecksums"
		}
		b.Run(name, func(b *testing.B) {
			lay := layout{frameSize: 2048, rxFrames: 64, txFrames: 64}
			p, k := newFakePort(lay, ringSizes{fill: 64, comp: 64, rx: 64, tx: 64}, fix)
			x := p.xsks[0]
			frame := partialUDP()
			var ds [packet.BatchSize]unix.XDPDesc
			for i := range ds {
				ds[i] = frameAt(x, uint64(i)*2048+256, frame)
			}
			pool := packet.NewPool(256, packet.DefaultBufSize)
			var batch packet.Batch
			rx := &x.r.rx
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// The "kernel" delivers the batch and takes the refills.
				// Recv fixes its copy, so the UMEM frames stay partial.
				prod := k.load(2, 0)
				for j := range ds {
					rx.descs[(prod+uint32(j))&rx.mask] = ds[j]
				}
				k.store(2, 0, prod+packet.BatchSize)
				batch.N = 0
				if n := p.Recv(0, pool, &batch); n != packet.BatchSize {
					b.Fatalf("Recv = %d", n)
				}
				batch.FreeAll()
				k.store(0, 1, k.load(0, 0))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.BatchSize), "ns/pkt")
		})
	}
}

// BenchmarkSend measures one Send of a full batch of 64-byte frames over
// fake rings (copy, descriptors, completion reclaim).
func BenchmarkSend(b *testing.B) {
	lay := layout{frameSize: 2048, rxFrames: 64, txFrames: 64}
	p, k := newFakePort(lay, ringSizes{fill: 64, comp: 64, rx: 64, tx: 64}, false)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	for i := 0; i < packet.BatchSize; i++ {
		pkt := pool.Get()
		pkt.SetData(partialUDP())
		batch.Add(pkt)
	}
	tx, comp := &p.xsks[0].t.tx, &p.xsks[0].t.comp
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n := p.Send(0, &batch); n != packet.BatchSize {
			b.Fatalf("Send = %d", n)
		}
		// The "kernel" transmits and completes everything.
		cons, prod := k.load(3, 1), k.load(3, 0)
		cp := k.load(1, 0)
		for j := cons; j != prod; j++ {
			comp.addrs[cp&comp.mask] = tx.descs[j&tx.mask].Addr
			cp++
		}
		k.store(3, 1, prod)
		k.store(1, 0, cp)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.BatchSize), "ns/pkt")
}

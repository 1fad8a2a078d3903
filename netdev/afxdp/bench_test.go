package afxdp

import (
	"testing"
	"time"

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

// BenchmarkE2EOpenClose measures New and Close of a port on a veth, with
// no other port open ("alone": the first port attaches the program, which
// updates the kernel's XDP dispatcher) and with another port holding the
// shared program ("shared", an add-port on a running switch). Between
// rounds the timer stops until the background close is done and the
// kernel has freed the queue, so open-ms is the open itself.
func BenchmarkE2EOpenClose(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "alone"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			port, _ := vethPair(b)
			if shared {
				other, _ := vethPair(b)
				o, err := New(other, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { o.Close() })
			}
			var open, cls time.Duration
			for b.Loop() {
				t0 := time.Now()
				p, err := New(port, Options{})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
				cls += time.Since(t1)
				open += t1.Sub(t0) - p.BusyWaited()
				b.StopTimer()
				WaitClosed()
				time.Sleep(100 * time.Millisecond)
				b.StartTimer()
			}
			b.ReportMetric(float64(open.Microseconds())/1e3/float64(b.N), "open-ms")
			b.ReportMetric(float64(cls.Microseconds())/1e3/float64(b.N), "close-ms")
		})
	}
}

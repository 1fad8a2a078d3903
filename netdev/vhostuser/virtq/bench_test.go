package virtq

import (
	"testing"

	"vswitch/datapath/packet"
)

// benchRing is a 256-entry ring with 64-byte frames: descriptors 0..31 are
// transmit chains (header + frame in one buffer), 32..63 receive buffers.
func benchRing(b *testing.B, mergeable bool) *ring {
	r := newRing(b, 256, Config{Mergeable: mergeable})
	for i := 0; i < 32; i++ {
		r.txFrame(i, frame(64, byte(i)))
		a, _ := r.buf(32 + i)
		r.setDesc(32+i, a, 512, DescFWrite, 0)
	}
	return r
}

// republish makes heads first..first+31 available again, in ring order.
func (r *ring) republish(first uint16) {
	for i := uint16(0); i < 32; i++ {
		le.PutUint16(r.mem[r.avail+4+2*(int(r.availIdx)%r.size):], first+i)
		r.availIdx++
	}
	le.PutUint16(r.mem[r.avail+2:], r.availIdx)
}

// BenchmarkDequeue: one op takes 32 one-descriptor 64-byte frames from the
// ring into pool buffers.
func BenchmarkDequeue(b *testing.B) {
	r := benchRing(b, true)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.republish(0)
		res := r.q.Dequeue(pool, &batch, packet.BatchSize)
		if res.Packets != 32 {
			b.Fatalf("dequeued %+v", res)
		}
		batch.FreeAll()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
}

// BenchmarkEnqueue: one op writes 32 64-byte frames into one-descriptor
// receive buffers, with and without mergeable buffers.
func BenchmarkEnqueue(b *testing.B) {
	for _, c := range []struct {
		name      string
		mergeable bool
	}{{"mergeable", true}, {"plain", false}} {
		b.Run(c.name, func(b *testing.B) {
			r := benchRing(b, c.mergeable)
			pool := packet.NewPool(64, packet.DefaultBufSize)
			var batch packet.Batch
			for i := 0; i < 32; i++ {
				p := pool.Get()
				p.SetData(frame(64, byte(i)))
				batch.Add(p)
			}
			pkts := batch.Packets()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.republish(32)
				res := r.q.Enqueue(pkts)
				if res.Packets != 32 {
					b.Fatalf("enqueued %+v", res)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
			batch.FreeAll()
		})
	}
}

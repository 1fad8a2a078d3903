package vhostuser

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// BenchmarkRecvSend: one op is a 32-frame batch received from the guest's
// transmit ring and sent into its receive ring (64-byte frames). The
// frontend's work is reduced to bumping avail indices, so the figure is the
// port's cost. With interrupts the call eventfd is written once per batch.
func BenchmarkRecvSend(b *testing.B) {
	for _, c := range []struct {
		name   string
		noIntr bool
	}{{"noInterrupts", true}, {"interrupts", false}} {
		b.Run(c.name, func(b *testing.B) {
			p, path := newServerPort(b, 1)
			f := dialFrontend(b, path, feCfg{noIntr: c.noIntr})
			f.setup()
			waitFor(b, "link up", p.LinkUp)
			tq, rq := f.tx(0), f.rx(0)
			for i := 0; i < 32; i++ {
				tq.txFrameAt(uint16(i), testFrame(60, uint32(i)))
			}
			pool := packet.NewPool(256, packet.DefaultBufSize)
			var batch packet.Batch
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tq.republish(32)
				n := p.Recv(0, pool, &batch)
				if n != 32 {
					b.Fatalf("received %d", n)
				}
				if p.Send(0, &batch) != 32 {
					b.Fatal("send")
				}
				batch.FreeAll()
				rq.store16(rq.avail+2, rq.load16(rq.used+2)+uint16(rq.size)) // recycle every receive buffer
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*32), "ns/frame")
		})
	}
}

// txFrameAt writes a one-descriptor transmit chain at descriptor id.
func (q *fvq) txFrameAt(id uint16, frame []byte) {
	bb := q.buf(id)
	clear(bb[:12])
	n := copy(bb[12:], frame)
	q.setDesc(id, q.bufGPA(id), uint32(12+n), 0, 0)
	le.PutUint16(q.f.mem[q.avail+4+2*uint64(id):], id)
}

// republish makes descriptors 0..n-1 available again, in ring order, with
// no allocation (ring entry k holds id k%n).
func (q *fvq) republish(n int) {
	for i := 0; i < n; i++ {
		le.PutUint16(q.f.mem[q.avail+4+2*uint64((int(q.availIdx)+i)%q.size):], uint16(i))
	}
	q.availIdx += uint16(n)
	q.store16(q.avail+2, q.availIdx)
}

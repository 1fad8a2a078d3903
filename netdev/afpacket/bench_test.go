package afpacket

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// benchRecv measures the receive path over a synthetic ring, filled with
// frames (V3: every block holds all of them; V2: one frame per slot,
// cycling through them), handed back to "the kernel" and re-armed
// whenever the walk has drained it. One op is one Recv call.
func benchRecv(b *testing.B, q *rxQueue, frames []synthFrame) {
	r := &synthRing{q: q}
	if q.v3 {
		for i := 0; i < q.blockNr; i++ {
			r.feed(b, frames...)
		}
	} else {
		for i := 0; i < q.frameNr; i++ {
			r.feed(b, frames[i%len(frames)])
		}
	}
	tmpl := append([]byte{}, q.ring...)
	pool := packet.NewPool(256, packet.DefaultBufSize)
	var batch packet.Batch
	pkts := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		batch.Reset()
		n := q.recv(pool, &batch)
		if n == 0 {
			b.StopTimer()
			copy(q.ring, tmpl) // the kernel refills the ring
			b.StartTimer()
			continue
		}
		pkts += n
		batch.FreeAll()
	}
	if pkts > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(pkts), "ns/pkt")
	}
}

// benchRings runs a receive benchmark over a V2 ring of the default
// geometry (two 4 MiB blocks) and over a V3 ring of two 256 KiB blocks,
// each filled with as many of the frame as fit.
func benchRings(b *testing.B, frame synthFrame) {
	b.Run("V2", func(b *testing.B) {
		benchRecv(b, newSynthQueueV2(bigSlot, maxRxBlockSize, 2), []synthFrame{frame})
	})
	b.Run("V3", func(b *testing.B) {
		const bs = 1 << 18
		per := (synthMacOff + len(frame.data) + 15) &^ 15
		frames := make([]synthFrame, (bs-blockDescLen)/per)
		for i := range frames {
			frames[i] = frame
		}
		benchRecv(b, newSynthQueue(bs, 2), frames)
	})
}

func BenchmarkRecv64(b *testing.B) {
	benchRings(b, synthFrame{data: sized(60, 1)})
}

func BenchmarkRecvVLANPartialCsum(b *testing.B) {
	f, vh := partialUDP(1400)
	benchRings(b, synthFrame{data: f, vh: vh, vlan: true, tci: 100})
}

func BenchmarkRecvGSO64K(b *testing.B) {
	super, vh := tcpSuper(44*1448, 1448)
	benchRings(b, synthFrame{data: super, vh: vh})
}

// BenchmarkSend64 sends batches of 32 64-byte frames through the tx ring
// of a real veth port (one sendto per batch); the far end drops them.
func BenchmarkSend64(b *testing.B) {
	a, _ := nstest.TwoHosts(b)
	p, err := New(a.Port, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	for i := 0; i < packet.BatchSize; i++ {
		pkt := pool.Get()
		pkt.SetData(nstest.UDPFrame(nstest.UnusedMAC, macA, ipA, ipB, uint16(i), 9))
		batch.Add(pkt)
	}
	sent := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sent += p.Send(0, &batch)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.BatchSize), "ns/pkt")
	st := p.Stats()
	if st.TxErrors != 0 {
		b.Errorf("tx errors: %+v", st)
	}
	b.Logf("sent %d of %d, %+v", sent, b.N*packet.BatchSize, st)
	batch.FreeAll()
}

// BenchmarkE2EOpenClose measures New and Close of a port (one queue pair)
// on a veth. Between rounds the timer stops until the background close
// is done.
func BenchmarkE2EOpenClose(b *testing.B) {
	nstest.RequireRoot(b)
	port, peer := nstest.Name("afb"), nstest.Name("afc")
	nstest.Run(b, "ip", "link", "add", port, "type", "veth", "peer", "name", peer)
	b.Cleanup(func() { nstest.Output("ip", "link", "del", port) })
	nstest.Run(b, "ip", "link", "set", port, "up")
	nstest.Run(b, "ip", "link", "set", peer, "up")
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
		open += t1.Sub(t0)
		b.StopTimer()
		WaitClosed()
		b.StartTimer()
	}
	b.ReportMetric(float64(open.Microseconds())/1e3/float64(b.N), "open-ms")
	b.ReportMetric(float64(cls.Microseconds())/1e3/float64(b.N), "close-ms")
}

package afpacket

import (
	"testing"

	"vswitch/datapath/packet"
	"vswitch/internal/nstest"
)

// benchRecv measures the receive path over a synthetic ring of two blocks
// filled with frames, handed back to "the kernel" and re-armed whenever
// the walk has drained them. One op is one Recv call.
func benchRecv(b *testing.B, frames []synthFrame, blockSize int) {
	q := newSynthQueue(blockSize, 2)
	for i := 0; i < 2; i++ {
		fillBlock(b, q.block(i), frames)
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
			copy(q.ring, tmpl) // the kernel refills both blocks
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

func BenchmarkRecv64(b *testing.B) {
	var frames []synthFrame
	for i := 0; i < (1<<18-blockDescLen)/160; i++ {
		frames = append(frames, synthFrame{data: sized(60, uint16(i))})
	}
	benchRecv(b, frames, 1<<18)
}

func BenchmarkRecvVLANPartialCsum(b *testing.B) {
	f, vh := partialUDP(1400)
	var frames []synthFrame
	for i := 0; i < (1<<18-blockDescLen)/1600; i++ {
		frames = append(frames, synthFrame{data: f, vh: vh, vlan: true, tci: 100})
	}
	benchRecv(b, frames, 1<<18)
}

func BenchmarkRecvGSO64K(b *testing.B) {
	super, vh := tcpSuper(44*1448, 1448)
	frames := []synthFrame{{data: super, vh: vh}, {data: super, vh: vh}, {data: super, vh: vh}}
	benchRecv(b, frames, 1<<18)
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
		pkt.SetData(udpFrame(unusedMAC, macA, ipA, ipB, uint16(i), 9))
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

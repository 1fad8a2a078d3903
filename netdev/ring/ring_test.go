package ring

import (
	"bytes"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

func TestInjectRecvSendDrain(t *testing.T) {
	p := New("r", 2, 1, 4) // depth 4
	pool := packet.NewPool(64, packet.DefaultBufSize)
	frames := [][]byte{{1}, {2, 2}, {3, 3, 3}, {4}, {5}}
	if n := p.Inject(1, frames...); n != 4 {
		t.Fatalf("injected %d into a ring of 4", n)
	}
	if p.Pending(1) != 4 || p.Pending(0) != 0 {
		t.Fatal("pending counts wrong")
	}
	var b packet.Batch
	if n := p.Recv(1, pool, &b); n != 4 {
		t.Fatalf("received %d", n)
	}
	for i, pkt := range b.Packets() {
		if !bytes.Equal(pkt.Data(), frames[i]) {
			t.Fatalf("frame %d: %v", i, pkt.Data())
		}
	}
	// tx ring of 4: the fifth packet is dropped and counted.
	b.Add(pool.Get())
	b.Pkts[4].SetData([]byte{9})
	if sent := p.Send(0, &b); sent != 4 {
		t.Fatalf("sent %d into a ring of 4", sent)
	}
	b.FreeAll()
	var got [][]byte
	p.Drain(0, func(f []byte) { got = append(got, append([]byte(nil), f...)) })
	if len(got) != 4 || !bytes.Equal(got[2], frames[2]) {
		t.Fatalf("drained %v", got)
	}
	st := p.Stats()
	if st.RxPackets != 4 || st.TxPackets != 4 || st.TxDrops != 1 || st.RxBytes != 7 {
		t.Fatalf("stats %+v", st)
	}
	if pool.Available() != pool.Size() {
		t.Fatal("buffers leaked")
	}
}

func TestRecvStopsWhenPoolEmpty(t *testing.T) {
	p := New("r", 1, 1, 8)
	pool := packet.NewPool(2, packet.DefaultBufSize)
	p.Inject(0, []byte{1}, []byte{2}, []byte{3})
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 2 {
		t.Fatalf("received %d with 2 buffers", n)
	}
	if p.Pending(0) != 1 {
		t.Fatal("the frame without a buffer must stay queued")
	}
	if n := p.Recv(0, pool, &packet.Batch{}); n != 0 || p.Stats().RxDrops != 1 {
		t.Fatalf("starved recv: %d, drops %d", n, p.Stats().RxDrops)
	}
}

func TestCloseTwice(t *testing.T) {
	p := New("r", 1, 1, 2)
	if p.Close() != nil || p.Close() == nil || !p.Closed() {
		t.Fatal("Close must succeed once and report the second call")
	}
}

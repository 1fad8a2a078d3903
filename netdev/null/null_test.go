package null

import (
	"bytes"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

func TestSourceCyclesAndSinkCounts(t *testing.T) {
	frames := [][]byte{{1}, {2, 2}, {3, 3, 3}}
	p := New("n", 1, 1, frames)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != packet.BatchSize {
		t.Fatalf("received %d, want a full batch", n)
	}
	for i, pkt := range b.Packets() {
		if !bytes.Equal(pkt.Data(), frames[i%3]) {
			t.Fatalf("packet %d: %v", i, pkt.Data())
		}
	}
	if sent := p.Send(0, &b); sent != packet.BatchSize {
		t.Fatalf("sink accepted %d", sent)
	}
	b.FreeAll()
	st := p.Stats()
	if st.RxPackets != 32 || st.TxPackets != 32 || st.TxBytes != st.RxBytes {
		t.Fatalf("stats %+v", st)
	}
	if New("empty", 1, 1, nil).Recv(0, pool, &packet.Batch{}) != 0 {
		t.Fatal("a source without frames received something")
	}
}

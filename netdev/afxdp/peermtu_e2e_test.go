package afxdp

import (
	"net"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestE2EPeerRefusesFrame sends, in one batch, frames that fit the
// port's veth end (MTU 1500) but not its peer (MTU 1450, as the user guide
// has workloads do under an overlay), each followed by a normal frame:
// the kernel drops the big ones in the veth, and every normal frame must
// still reach the peer within the same Send, with no later traffic to
// push it out. The port is used directly, without a datapath, so that the
// batch is exactly the one built here.
func TestE2EPeerRefusesFrame(t *testing.T) {
	_, b := nstest.TwoHosts(t)
	b.NS.Run(t, "ip", "link", "set", b.Dev, "mtu", "1450")
	p, err := New(b.Port, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Logf("port in %s XDP mode, zero-copy %v", p.AttachMode(), p.ZeroCopy())
	rx := nstest.NewReceiver(t, b.NS, b.Dev)
	frame := func(sport uint16, payload int) []byte {
		return nstest.UDP{
			Dst: nstest.UnusedMAC, Src: net.HardwareAddr{2, 0, 0xc6, 0x12, 0, 1},
			SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2),
			SrcPort: sport, DstPort: 9, Payload: make([]byte, payload),
		}.Frame()
	}
	pool := packet.NewPool(16, packet.DefaultBufSize)
	var batch packet.Batch
	const rounds = 3
	for i := range rounds {
		for _, f := range [][]byte{frame(31000, 1480-28), frame(uint16(31001+i), 18)} {
			pkt := pool.Get()
			if pkt.SetData(f) != len(f) {
				t.Fatalf("%d-byte frame does not fit a pool buffer", len(f))
			}
			batch.Add(pkt)
		}
	}
	before := p.Stats()
	p.Send(0, &batch)
	batch.FreeAll()
	for i := range rounds {
		sport := uint16(31001 + i)
		if _, ok := rx.Await(3*time.Second, func(f []byte) bool {
			sp, _, ok := nstest.UDPPorts(f)
			return ok && sp == sport
		}); !ok {
			t.Fatalf("frame %d, sent behind a frame the peer's MTU refuses, never reached the peer (port %+v)", i, p.Stats())
		}
	}
	after := p.Stats()
	if got := after.TxRefused - before.TxRefused; got != rounds {
		t.Errorf("port counted %d refused frames, sent %d (%+v)", got, rounds, after)
	}
	if got := after.TxDrops - before.TxDrops; got != rounds {
		t.Errorf("port counted %d tx drops, want the %d refused frames (%+v)", got, rounds, after)
	}
}

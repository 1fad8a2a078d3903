package afpacket

import (
	"net"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestE2EPeerRefusesFrame puts host B behind an MTU of 1450 while the
// switch's end of its veth keeps 1500, as the user guide has workloads do
// under an overlay, and sends frames that fit the switch's end but not
// B's: the kernel drops each in the veth (B's rx_dropped) and refuses it to
// the tx ring. A normal frame sent right after each must still reach B,
// and each refused frame must be counted on port 2.
func TestE2EPeerRefusesFrame(t *testing.T) {
	s := newSwitchTopo(t, Options{}, 1)
	s.B.NS.Run(t, "ip", "link", "set", s.B.Dev, "mtu", "1450")
	rx := nstest.NewReceiver(t, s.B.NS, s.B.Dev)
	tx := nstest.NewSender(t, s.A.NS, s.A.Dev, false)
	src, _ := net.ParseMAC(s.A.MAC)
	frame := func(sport uint16, payload int) []byte {
		return nstest.UDP{
			Dst: nstest.UnusedMAC, Src: src,
			SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2),
			SrcPort: sport, DstPort: 9, Payload: make([]byte, payload),
		}.Frame()
	}
	// 1494 bytes: IP length 1480, over B's 1450 (the veth takes up to
	// MTU+18 bytes of frame), under the switch end's 1500.
	big := frame(31000, 1480-28)
	before := s.P2.Stats()
	const rounds = 3
	for i := range rounds {
		sport := uint16(31001 + i)
		if err := tx.Send(big); err != nil {
			t.Fatalf("send big frame: %v", err)
		}
		if err := tx.Send(frame(sport, 18)); err != nil {
			t.Fatalf("send frame: %v", err)
		}
		if _, ok := rx.Await(3*time.Second, func(f []byte) bool {
			sp, _, ok := nstest.UDPPorts(f)
			return ok && sp == sport
		}); !ok {
			t.Fatalf("round %d: the frame sent after a frame B's MTU refuses never reached B (port 2 %+v)", i, s.P2.Stats())
		}
	}
	nstest.WaitFor(t, 3*time.Second, "the refused frames counted on port 2", func() bool {
		return s.P2.Stats().TxRefused-before.TxRefused >= rounds
	})
	after := s.P2.Stats()
	if got := after.TxRefused - before.TxRefused; got != rounds {
		t.Errorf("port 2 counted %d refused frames, sent %d", got, rounds)
	}
	if got := after.TxDrops - before.TxDrops; got != rounds {
		t.Errorf("port 2 counted %d tx drops, want the %d refused frames", got, rounds)
	}
}

// TestE2EPeerRefusesFrameInBatch is TestE2EPeerRefusesFrame with the
// refused frames and the normal ones behind them in one batch, sent
// through the port directly (no datapath, so the batch is exactly this
// one): every normal frame must leave in that same Send, with no later
// traffic to push it out.
func TestE2EPeerRefusesFrameInBatch(t *testing.T) {
	_, b := nstest.TwoHosts(t)
	b.NS.Run(t, "ip", "link", "set", b.Dev, "mtu", "1450")
	p, err := New(b.Port, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rx := nstest.NewReceiver(t, b.NS, b.Dev)
	frame := func(sport uint16, payload int) []byte {
		return nstest.UDP{
			Dst: nstest.UnusedMAC, Src: macA, SrcIP: ipA, DstIP: ipB,
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

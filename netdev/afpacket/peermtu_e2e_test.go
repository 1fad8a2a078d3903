package afpacket

import (
	"net"
	"testing"
	"time"

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

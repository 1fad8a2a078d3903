//go:build linux

package datapath

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/netdev/tunnel"
)

// TestSleepingPMDWakesForTunnelDatagram: a PMD whose only input is a
// tunnel port sleeps on the port's UDP socket (the idle timer is an hour)
// and a datagram that arrives while it sleeps wakes it and is forwarded.
// The tunnel lives on loopback in the test's own namespace and sends
// nothing, so the test needs no privilege.
func TestSleepingPMDWakesForTunnelDatagram(t *testing.T) {
	old := idleWakeNs
	idleWakeNs = int64(time.Hour)
	t.Cleanup(func() { idleWakeNs = old })
	lo := netip.MustParseAddr("127.0.0.1")
	var tp *tunnel.Port
	for try := 0; tp == nil; try++ {
		// A free UDP port: what the kernel gives an ephemeral bind.
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		port := uint16(c.LocalAddr().(*net.UDPAddr).Port)
		c.Close()
		tp, err = tunnel.New("vx", tunnel.Options{Kind: tunnel.VXLAN, Local: lo, Remote: lo, Key: 100, DstPort: port, NoDF: true})
		if err != nil && try == 10 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { tp.Close() })
	rules := &RuleTable{}
	dp, err := New(Config{Upcall: rules, EMCInsertInvProb: 1, PMDSleepMax: -1})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	out := newWakingPort(t, "out", dp.clock)
	if _, err := dp.AddPort(1, tp); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(3, out); err != nil {
		t.Fatal(err)
	}
	rules.Add(inPortRule(10, 1, 3))
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	pmd := dp.PMDs()[0]
	// Asleep for the hour of the idle timer: only the socket in its poll
	// set can wake it for the datagram. (The poll set itself is not read
	// here: the sleeping PMD writes its first entry.)
	waitFor(t, "the PMD to sleep", pmd.sleeping.Load)
	s, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(tp.Options().DstPort)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := make([]byte, 8, 8+60)
	d[0] = 0x08 // VXLAN: VNI valid
	binary.BigEndian.PutUint32(d[4:], 100<<8)
	if _, err := s.Write(append(d, udpFrame(1, 2, 0, 9, 1)...)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the datagram to be forwarded", func() bool { return (&liveRig{ports: map[uint32]*wakingPort{3: out}}).sentPackets(3) == 1 })
}

package tap

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/afpacket"
)

// tapHost is a namespace whose own interface is a tap port of the switch:
// the host stack sends out of the tap into the switch and the switch writes
// frames into the tap towards the host stack.
type tapHost struct {
	NS   *nstest.Netns
	Dev  string
	IP   string
	MAC  net.HardwareAddr
	Port *Port
}

// twoTapHosts creates namespaces with taps 198.18.0.1/24 and 198.18.0.2/24.
func twoTapHosts(t *testing.T, opts Options) (a, b *tapHost) {
	t.Helper()
	nstest.RequireRoot(t)
	mk := func(i int) *tapHost {
		ns := nstest.NewNetns(t, fmt.Sprintf("tpns%d", i))
		// No IPv6: DAD and router solicitations would disturb exact counts.
		ns.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
		ns.Run(t, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1")
		h := &tapHost{
			NS:  ns,
			Dev: nstest.Name(fmt.Sprintf("tap%d", i)),
			IP:  fmt.Sprintf("198.18.0.%d", i),
			MAC: net.HardwareAddr{0x02, 0, 0xc6, 0x12, 0, byte(i)},
		}
		o := opts
		o.Netns = ns.Name
		o.MAC = h.MAC
		p, err := New(h.Dev, o)
		if err != nil {
			t.Fatal(err)
		}
		h.Port = p
		t.Cleanup(func() { p.Close() })
		ns.Run(t, "ip", "addr", "add", h.IP+"/24", "dev", h.Dev)
		return h
	}
	return mk(1), mk(2)
}

// testFrame is a 60-byte Ethernet/IPv4/UDP frame (64 with a tag) from
// src to a MAC nobody has, so the far host's stack drops it silently after
// counting it; seq is at the start of its payload.
func testFrame(src net.HardwareAddr, seq uint32, tags ...nstest.Tag) []byte {
	return nstest.UDP{
		Dst: nstest.UnusedMAC, Src: src,
		SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2),
		SrcPort: 12345, DstPort: 9,
		Tags: tags, Payload: nstest.SeqPayload(seq),
	}.Frame()
}

// TestE2ETwoTaps forwards between two tap ports, each the interface of a
// host namespace: ping, TCP with the host's default offloads (GSO frames
// into the driver), an exactly accounted UDP flood, and VLAN traffic.
func TestE2ETwoTaps(t *testing.T) {
	a, b := twoTapHosts(t, Options{})
	dp := nstest.CrossConnect(t, 1, a.Port, b.Port)
	if !a.Port.LinkUp() || !b.Port.LinkUp() {
		t.Fatal("taps not up")
	}
	if a.Port.MTU() != 1500 {
		t.Errorf("MTU %d, want 1500", a.Port.MTU())
	}

	t.Run("ping", func(t *testing.T) {
		nstest.Ping(t, a.NS, b.IP)
		nstest.Ping(t, b.NS, a.IP)
	})

	t.Run("tcp", func(t *testing.T) {
		ga, gb := a.Port.GSOStats(), b.Port.GSOStats()
		gbps := nstest.IperfTCP(t, a.NS, b.NS, b.IP, 3) / 1e9
		t.Logf("iperf3 TCP %s -> %s: %.2f Gbit/s (USO offered: %v)", a.IP, b.IP, gbps, a.Port.USO())
		// The super-frames crossed whole: read from tap a as one
		// packet, written to tap b as one.
		ea, eb := a.Port.GSOStats(), b.Port.GSOStats()
		t.Logf("GSO frames: a rx whole %d, segmented %d; b tx whole %d", ea.RxWhole-ga.RxWhole, ea.RxSegmented-ga.RxSegmented, eb.TxWhole-gb.TxWhole)
		if ea.RxWhole == ga.RxWhole || eb.TxWhole == gb.TxWhole {
			t.Errorf("no GSO frame crossed whole: a %+v → %+v, b %+v → %+v", ga, ea, gb, eb)
		}
		gbps = nstest.IperfTCP(t, b.NS, a.NS, a.IP, 3) / 1e9
		t.Logf("iperf3 TCP %s -> %s: %.2f Gbit/s", b.IP, a.IP, gbps)
	})

	t.Run("udp-flood", func(t *testing.T) {
		// The counts are exact: no ARP of the hosts' own (a reachability
		// probe after the pings, and its answer) may cross meanwhile.
		nstest.StaticNeighbour(t, a.NS, a.Dev, b.IP, b.MAC.String())
		nstest.StaticNeighbour(t, b.NS, b.Dev, a.IP, a.MAC.String())
		snd := nstest.NewSender(t, a.NS, a.Dev, false)
		frames := [][]byte{testFrame(a.MAC, 0)}
		rx2 := func() uint64 { return nstest.Counter(t, b.NS, b.Dev, "rx_packets") }
		txDrop1 := func() uint64 { return nstest.Counter(t, a.NS, a.Dev, "tx_dropped") }
		rx0, txd0 := nstest.WaitStable(rx2), txDrop1()
		s0a, s0b, pd0 := a.Port.Stats(), b.Port.Stats(), nstest.PMDDrops(dp)
		stop := make(chan struct{})
		time.AfterFunc(2*time.Second, func() { close(stop) })
		start := time.Now()
		sent := nstest.Flood(snd.FD(), frames, 0, stop)
		dur := time.Since(start)
		// The switch drains the taps after the last send: read the
		// counters until every frame sent is delivered or counted as a
		// drop, or 5 s.
		var rx, txd, pd, drvLoss uint64
		s1a, s1b := s0a, s0b
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			rx, txd = rx2()-rx0, txDrop1()-txd0
			s1a, s1b = a.Port.Stats(), b.Port.Stats()
			pd = nstest.PMDDrops(dp) - pd0
			drvLoss = (s1a.RxErrors - s0a.RxErrors) + (s1a.RxDrops - s0a.RxDrops) +
				(s1b.TxDrops - s0b.TxDrops) + (s1b.TxErrors - s0b.TxErrors)
			if rx+txd+drvLoss+pd >= sent || time.Now().After(deadline) {
				break
			}
		}
		t.Logf("UDP flood: sent %d in %v (%.0f pps offered), delivered %d (%.0f pps), kernel tap queue drops %d, driver drops %d, PMD drops %d",
			sent, dur.Round(time.Millisecond), float64(sent)/dur.Seconds(), rx, float64(rx)/dur.Seconds(), txd, drvLoss, pd)
		if sent == 0 || rx == 0 {
			t.Fatalf("nothing sent (%d) or delivered (%d)", sent, rx)
		}
		if sent != rx+txd+drvLoss+pd {
			t.Errorf("loss not accounted: sent %d != delivered %d + tap drops %d + driver %d + PMD %d", sent, rx, txd, drvLoss, pd)
		}
		if got := s1b.TxPackets - s0b.TxPackets; got != rx {
			t.Errorf("driver sent %d frames into %s, the kernel counted %d", got, b.Dev, rx)
		}
		if got := s1a.RxPackets - s0a.RxPackets; got != sent-txd {
			t.Errorf("driver received %d frames from %s, kernel passed %d", got, a.Dev, sent-txd)
		}
	})

	t.Run("vlan", func(t *testing.T) {
		// This kernel may lack 802.1Q subinterfaces (no 8021q), so tagged
		// frames are sent and received on packet sockets; the receiver reads
		// the tag from PACKET_AUXDATA, where Linux puts it after untagging.
		snd := nstest.NewSender(t, a.NS, a.Dev, false)
		rcv := nstest.NewReceiver(t, b.NS, b.Dev)
		const n = 50
		tag := nstest.Dot1Q(3<<13 | 100)
		for i := 0; i < n; i++ {
			if err := snd.Send(testFrame(a.MAC, uint32(i), tag)); err != nil {
				t.Fatal(err)
			}
		}
		var got [][]byte
		end := time.Now().Add(3 * time.Second)
		for len(got) < n {
			f, ok := rcv.Await(time.Until(end), func(f []byte) bool {
				_, dport, ok := nstest.UDPPorts(f)
				return ok && dport == 9
			})
			if !ok {
				break
			}
			got = append(got, f)
		}
		if len(got) != n {
			t.Fatalf("received %d tagged frames, want %d", len(got), n)
		}
		for i, f := range got {
			if tags := nstest.FrameTags(f); len(tags) != 1 || tags[0] != tag {
				t.Fatalf("frame %d: tags %04x, want %04x", i, tags, tag)
			}
			if seq, _ := nstest.ReadSeq(f); seq != uint32(i) {
				t.Fatalf("frame %d carries sequence %d", i, seq)
			}
		}
	})

	dp.Stop()
	nstest.CheckPools(t, dp)
}

// TestE2ERemoveUnderTraffic deletes a tap inside its namespace while a flood
// crosses the switch towards it: the datapath must remove the port, the PMD
// must keep forwarding what it still can, and no buffer may leak.
func TestE2ERemoveUnderTraffic(t *testing.T) {
	a, b := twoTapHosts(t, Options{})
	dp := nstest.CrossConnect(t, 1, a.Port, b.Port)
	nstest.Ping(t, a.NS, b.IP)

	snd := nstest.NewSender(t, a.NS, a.Dev, false)
	frames := [][]byte{testFrame(a.MAC, 0)}
	stop := make(chan struct{})
	var sent atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent.Store(nstest.Flood(snd.FD(), frames, 0, stop))
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	time.Sleep(300 * time.Millisecond)
	b.NS.Run(t, "ip", "link", "del", b.Dev)
	nstest.WaitFor(t, 5*time.Second, "port 2 is removed from the datapath after its tap was deleted",
		func() bool { return dp.Port(2) == nil })
	select {
	case <-b.Port.Removed():
	default:
		t.Error("Removed not closed")
	}
	if b.Port.LinkUp() {
		t.Error("removed tap reports link up")
	}
	// The PMD keeps polling port 1: the flood still arrives (and is dropped
	// for want of port 2).
	rx0 := dp.PMDStats()[0].RxPackets
	time.Sleep(300 * time.Millisecond)
	if rx1 := dp.PMDStats()[0].RxPackets; rx1 <= rx0 {
		t.Errorf("PMD stopped receiving after the removal (%d -> %d)", rx0, rx1)
	}
	close(stop)
	wg.Wait()
	if b.Port.Close() == nil {
		t.Error("the datapath did not close the removed port")
	}
	t.Logf("flood sent %d frames; port 1 stats %+v; removed port stats %+v", sent.Load(), a.Port.Stats(), b.Port.Stats())
	dp.Stop()
	nstest.CheckPools(t, dp)
}

// TestE2ETCPWithoutOffloads measures what the driver's own segmentation is
// worth: with the tap's offloads off the host stack segments and sums every
// frame itself and the driver reads one MTU frame per syscall.
func TestE2ETCPWithoutOffloads(t *testing.T) {
	a, b := twoTapHosts(t, Options{NoOffloads: true})
	dp := nstest.CrossConnect(t, 1, a.Port, b.Port)
	nstest.Ping(t, a.NS, b.IP)
	gbps := nstest.IperfTCP(t, a.NS, b.NS, b.IP, 3) / 1e9
	t.Logf("iperf3 TCP %s -> %s with tap offloads off: %.2f Gbit/s", a.IP, b.IP, gbps)
	dp.Stop()
	nstest.CheckPools(t, dp)
}

// TestE2ETapToAFPacket joins a tap host to a veth host driven by the
// AF_PACKET driver: the internal port talking to a container-style port.
func TestE2ETapToAFPacket(t *testing.T) {
	_, vb := nstest.TwoHosts(t) // only the second host (198.18.0.2) is used
	a, _ := twoTapHosts(t, Options{})
	pb, err := afpacket.New(vb.Port, afpacket.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dp := nstest.CrossConnect(t, 1, a.Port, pb)
	nstest.Ping(t, a.NS, vb.IP)
	nstest.Ping(t, vb.NS, a.IP)
	gbps := nstest.IperfTCP(t, a.NS, vb.NS, vb.IP, 3) / 1e9
	t.Logf("iperf3 TCP tap %s -> veth/AF_PACKET %s: %.2f Gbit/s", a.IP, vb.IP, gbps)
	gbps = nstest.IperfTCP(t, vb.NS, a.NS, a.IP, 3) / 1e9
	t.Logf("iperf3 TCP veth/AF_PACKET %s -> tap %s: %.2f Gbit/s", vb.IP, a.IP, gbps)
	dp.Stop()
	nstest.CheckPools(t, dp)
}

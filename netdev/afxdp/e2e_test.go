package afxdp

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestE2EPingIperf: ping both ways and a TCP stream with default offloads
// (partial checksums from the senders) through two native-XDP veth ports.
func TestE2EPingIperf(t *testing.T) {
	s := newSwitch(t, Options{})
	if s.P1.AttachMode() != ModeNative {
		t.Errorf("veth attached in %s mode, want native", s.P1.AttachMode())
	}
	if on, mode := xdpAttached(t, s.A.Port); !on || mode != 1 { // XDP_ATTACHED_DRV
		t.Errorf("xdp on %s: attached %v mode %d, want driver mode", s.A.Port, on, mode)
	}
	nstest.Ping(t, s.A.NS, s.B.IP)
	nstest.Ping(t, s.B.NS, s.A.IP)
	gbps := nstest.IperfTCP(t, s.A.NS, s.B.NS, s.B.IP, 3) / 1e9
	t.Logf("iperf3 a→b: %.2f Gbit/s", gbps)
	gbps = nstest.IperfTCP(t, s.B.NS, s.A.NS, s.A.IP, 3) / 1e9
	t.Logf("iperf3 b→a: %.2f Gbit/s", gbps)
	st := s.P1.Stats()
	t.Logf("port 1 stats %+v kernel %+v", st, s.P1.KernelStats())
}

// TestE2EUDPFlood sends N minimum-size UDP frames from a to b and accounts
// for every one: delivered to b's interface, or counted as a drop by the
// kernel's veth, the XDP socket, the driver or the PMD.
func TestE2EUDPFlood(t *testing.T) {
	s := newSwitch(t, Options{})
	nstest.Ping(t, s.A.NS, s.B.IP)
	// The counts below are exact: no ARP of the hosts' own (b's probe for
	// a, about 5 s after the ping, and a's answer) may cross meanwhile.
	nstest.StaticNeighbour(t, s.A.NS, s.A.Dev, s.B.IP, s.B.MAC)
	nstest.StaticNeighbour(t, s.B.NS, s.B.Dev, s.A.IP, s.A.MAC)
	snd := nstest.NewSender(t, s.A.NS, s.A.Dev, false)

	type snap struct {
		aTx, aTxDrop, pRxDrop, p2TxDrop, bRx, bRxDrop, pmd uint64
		s1, s2                                             []uint64
	}
	take := func() snap {
		st1, st2 := s.P1.Stats(), s.P2.Stats()
		return snap{
			aTx:      nstest.Counter(t, s.A.NS, s.A.Dev, "tx_packets"),
			aTxDrop:  nstest.Counter(t, s.A.NS, s.A.Dev, "tx_dropped"),
			pRxDrop:  nstest.Counter(t, nil, s.A.Port, "rx_dropped"),
			p2TxDrop: nstest.Counter(t, nil, s.B.Port, "tx_dropped"),
			bRx:      nstest.Counter(t, s.B.NS, s.B.Dev, "rx_packets"),
			bRxDrop:  nstest.Counter(t, s.B.NS, s.B.Dev, "rx_dropped"),
			pmd:      nstest.PMDDrops(s.DP),
			s1:       []uint64{st1.RxPackets, st1.RxDrops, st1.RxErrors},
			s2:       []uint64{st2.TxPackets, st2.TxDrops, st2.TxErrors},
		}
	}
	before := take()
	const n = 300000
	accepted := 0
	start := time.Now()
	for i := 0; i < n; i++ {
		if snd.Send(udpFrame(s.A, s.B, uint32(i))) == nil {
			accepted++
		}
	}
	el := time.Since(start)
	d := func(a, b uint64) uint64 { return a - b }
	// The switch drains its rings after the last send: read the counters
	// until every frame sent is delivered or counted as a drop, or 5 s.
	var after snap
	var sent, recv, rxDrops, txDrops, lost uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		after = take()
		sent = d(after.aTx, before.aTx)
		recv = d(after.bRx, before.bRx)
		rxDrops = d(after.s1[1], before.s1[1]) + d(after.s1[2], before.s1[2])
		txDrops = d(after.s2[1], before.s2[1]) + d(after.s2[2], before.s2[2])
		lost = rxDrops + d(after.pmd, before.pmd) + txDrops + d(after.p2TxDrop, before.p2TxDrop) + d(after.bRxDrop, before.bRxDrop)
		if recv+lost >= sent || time.Now().After(deadline) {
			break
		}
	}
	t.Logf("sent %d frames in %v (%.0f pps offered, %d accepted by the sender's socket)", sent, el, float64(sent)/el.Seconds(), accepted)
	t.Logf("switch rx %d, tx %d; delivered %d (%.0f pps)", d(after.s1[0], before.s1[0]), d(after.s2[0], before.s2[0]), recv, float64(recv)/el.Seconds())
	t.Logf("drops: sender veth tx %d, switch veth rx %d, xsk/driver rx %d, pmd %d, driver tx %d, veth tx %d, receiver rx %d",
		d(after.aTxDrop, before.aTxDrop), d(after.pRxDrop, before.pRxDrop), rxDrops, d(after.pmd, before.pmd), txDrops,
		d(after.p2TxDrop, before.p2TxDrop), d(after.bRxDrop, before.bRxDrop))
	t.Logf("kernel xsk stats port 1 %+v port 2 %+v", s.P1.KernelStats(), s.P2.KernelStats())
	if sent == 0 {
		t.Fatal("nothing sent")
	}
	if sent != recv+lost {
		t.Errorf("sent %d != delivered %d + counted drops %d", sent, recv, lost)
	}
}

// TestE2EVLAN: 802.1Q-tagged frames cross the switch with their tag (VLAN
// id and priority) intact, both ways. The kernel here has no 802.1Q module
// (CONFIG_VLAN_8021Q is off, so nstest's Host.VLAN cannot create
// subinterfaces): tagged frames are sent and received on AF_PACKET sockets,
// and the receiver reads the tag the kernel stripped from PACKET_AUXDATA.
func TestE2EVLAN(t *testing.T) {
	s := newSwitch(t, Options{})
	for _, dir := range []struct {
		from, to *nstest.Host
	}{{s.A, s.B}, {s.B, s.A}} {
		snd := nstest.NewSender(t, dir.from.NS, dir.from.Dev, false)
		rcv := nstest.NewReceiver(t, dir.to.NS, dir.to.Dev)
		const tci = 3<<13 | 100
		for seq := uint32(1); seq <= 5; seq++ {
			want := udpFrame(dir.from, dir.to, seq)
			if err := snd.Send(nstest.InsertTag(want, nstest.Dot1Q(tci))); err != nil {
				t.Fatal("send failed:", err)
			}
			got, ok := rcv.Next()
			if !ok {
				t.Fatalf("%s → %s: tagged frame %d not delivered", dir.from.IP, dir.to.IP, seq)
			}
			if tags := nstest.FrameTags(got); len(tags) != 1 || tags[0] != nstest.Dot1Q(tci) {
				t.Fatalf("%s → %s: frame %d arrived with tags %04x, want one 802.1Q tag with tci %#x", dir.from.IP, dir.to.IP, seq, tags, tci)
			}
			if got = nstest.StripTags(got); string(got) != string(want) {
				t.Fatalf("frame %d changed:\n got %x\nwant %x", seq, got, want)
			}
		}
	}
}

// TestE2EChecksums shows why FixChecksums exists: with it off, a UDP
// datagram from a socket behind a veth with tx checksum offload (the
// default) arrives with only the pseudo-header sum and the receiver drops
// it; turning the offload off on the sender's veth (ethtool -K <dev> tx
// off) is the alternative. With it on (the default), the datagram arrives.
func TestE2EChecksums(t *testing.T) {
	s := newSwitch(t, Options{FixChecksums: Off})
	nstest.Ping(t, s.A.NS, s.B.IP)
	src, dst := udpPair(t, s.A, s.B)
	if udpDelivered(t, src, dst, "partial") {
		t.Error("a datagram with a partial checksum was delivered without FixChecksums: the premise of the option is gone")
	}
	s.A.NS.Run(t, "ethtool", "-K", s.A.Dev, "tx", "off")
	if !udpDelivered(t, src, dst, "complete") {
		t.Error("a datagram with a software checksum was not delivered")
	}

	s2 := newSwitch(t, Options{})
	nstest.Ping(t, s2.A.NS, s2.B.IP)
	src, dst = udpPair(t, s2.A, s2.B)
	if !udpDelivered(t, src, dst, "fixed") {
		t.Error("with FixChecksums the datagram was not delivered")
	}
}

// TestE2EOversizeCounted: a frame too large for a UMEM frame is dropped by
// the kernel and shows up in the port's RxDrops, not lost silently.
func TestE2EOversizeCounted(t *testing.T) {
	s := newSwitch(t, Options{})
	nstest.Run(t, "ip", "link", "set", s.A.Port, "mtu", "3000")
	s.A.NS.Run(t, "ip", "link", "set", s.A.Dev, "mtu", "3000")
	snd := nstest.NewSender(t, s.A.NS, s.A.Dev, false)
	big := udpFrame(s.A, s.B, 1)
	big = append(big, make([]byte, 2500-len(big))...)
	before := s.P1.Stats()
	const n = 10
	for i := 0; i < n; i++ {
		if err := snd.Send(big); err != nil {
			t.Fatal("send failed:", err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	after := s.P1.Stats()
	if d := after.RxDrops - before.RxDrops; d != n {
		t.Errorf("RxDrops grew by %d after %d oversize frames, want %d (kernel %+v)", d, n, n, s.P1.KernelStats())
	}
	if after.RxPackets != before.RxPackets {
		t.Errorf("oversize frames were received: %d", after.RxPackets-before.RxPackets)
	}
	if s.P1.MTU() > DefaultFrameSize-256-18 {
		t.Errorf("MTU %d is more than a UMEM frame holds", s.P1.MTU())
	}
}

// TestE2ELinkDetachedOnCrash: the program is attached through a BPF link,
// so a process that dies without Close leaves no XDP program behind, and a
// switch restarted at once gets its ports back: the dead process's sockets
// still hold their queues for a while (the kernel frees them from a work
// item), and New waits for that within its BusyWait bound instead of
// failing with EBUSY. Traffic then flows through the new ports.
func TestE2ELinkDetachedOnCrash(t *testing.T) {
	a, b := nstest.TwoHosts(t)
	cmd := startCrashChild(t, a.Port, b.Port)
	for _, port := range []string{a.Port, b.Port} {
		if on, _ := xdpAttached(t, port); !on {
			t.Fatalf("no XDP program attached to %s while the child runs", port)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for _, port := range []string{a.Port, b.Port} {
		nstest.WaitFor(t, 3*time.Second, "the killed process's XDP program is detached from "+port,
			func() bool { on, _ := xdpAttached(t, port); return !on })
	}
	// Reopen at once, as a restarted switch does: the queues may still be
	// held by the dead process's sockets.
	var ports []*Port
	for _, port := range []string{a.Port, b.Port} {
		p, err := New(port, Options{})
		if err != nil {
			t.Fatalf("port %s not back after the crash: %v", port, err)
		}
		t.Logf("%s reopened; waited %v for a busy queue", port, p.BusyWaited())
		ports = append(ports, p)
	}
	dp := nstest.CrossConnect(t, 1, ports[0], ports[1])
	nstest.Ping(t, a.NS, b.IP)
	nstest.Ping(t, b.NS, a.IP)
	dp.Stop()
	for i, p := range ports {
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if on, _ := xdpAttached(t, []string{a.Port, b.Port}[i]); on {
			t.Fatal("XDP program still attached after Close")
		}
	}
}

// TestE2EReopenAfterClose: Close returns before the kernel has freed the
// socket's queue, so an immediate New meets EBUSY; it must wait for the
// queue (within BusyWait) rather than fail. This is what a datapath
// rebuild does to every AF_XDP port.
func TestE2EReopenAfterClose(t *testing.T) {
	port, _ := vethPair(t)
	busy := 0
	for i := 0; i < 5; i++ {
		p, err := New(port, Options{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if p.BusyWaited() > 0 {
			busy++
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d of 5 opens found the queue still busy", busy)
	// A queue held by a live socket stays busy: New gives up after
	// BusyWait with an error that says so.
	l, err := net.InterfaceByName(port)
	if err != nil {
		t.Fatal(err)
	}
	lay := layout{frameSize: DefaultFrameSize, rxFrames: 64, txFrames: 64}
	holder, err := openXSK(l.Index, 0, lay, ringSizes{64, 64, 64, 64}, unix.XDP_COPY, DefaultBusyWait)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.close()
	p, err := New(port, Options{BusyWait: 100 * time.Millisecond})
	if err == nil {
		p.Close()
		t.Fatal("a queue held by an open socket was bound again")
	}
	if !errors.Is(err, syscall.EBUSY) || !errors.Is(err, ErrQueueBusy) || !strings.Contains(err.Error(), "still busy") {
		t.Fatalf("open of a held queue: %v, want EBUSY saying the queue stays busy", err)
	}
	t.Log(err)
}

// TestE2EPeerOffloads: attaching native XDP to a veth turns the software
// GSO features of its peer off (so no super-frame reaches the socket) and
// Close turns them back on; tx checksum offload stays on, which is why
// FixChecksums defaults to on for veth.
func TestE2EPeerOffloads(t *testing.T) {
	port, peer := vethPair(t)
	feats := []string{"tcp-segmentation-offload", "generic-segmentation-offload", "tx-checksumming"}
	state := func() map[string]string {
		m := map[string]string{}
		for _, f := range feats {
			m[f] = ethtoolFeature(t, nil, peer, f)
		}
		return m
	}
	before := state()
	p, err := New(port, Options{})
	if err != nil {
		t.Fatal(err)
	}
	during := state()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	after := state()
	t.Logf("peer %s features before %v, with XDP (%s) %v, after Close %v", peer, before, p.AttachMode(), during, after)
	if before["tcp-segmentation-offload"] != "on" || during["tcp-segmentation-offload"] != "off" || after["tcp-segmentation-offload"] != "on" {
		t.Errorf("TSO on the peer: %s → %s → %s, want on → off → on", before["tcp-segmentation-offload"], during["tcp-segmentation-offload"], after["tcp-segmentation-offload"])
	}
	if during["tx-checksumming"] != "on" {
		t.Errorf("tx checksumming on the peer is %s with XDP attached; the checksum strategy assumes on", during["tx-checksumming"])
	}
	if !p.FixesChecksums() {
		t.Error("FixChecksums should default to on for veth")
	}
}

// TestE2EInterfaceRemoval deletes the interfaces of both ports while a
// flood runs through the switch: the datapath removes the ports, the PMD
// keeps running, and every buffer comes back.
func TestE2EInterfaceRemoval(t *testing.T) {
	s := newSwitch(t, Options{})
	nstest.Ping(t, s.A.NS, s.B.IP)
	snd := nstest.NewSender(t, s.A.NS, s.A.Dev, false)
	stop := make(chan struct{})
	done := make(chan int)
	go func() {
		n := 0
		for seq := uint32(0); ; seq++ {
			select {
			case <-stop:
				done <- n
				return
			default:
			}
			if snd.Send(udpFrame(s.A, s.B, seq)) == nil {
				n++
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-done
		}
	}()
	waitRemoved := func(no uint32) {
		t.Helper()
		nstest.WaitFor(t, 5*time.Second, fmt.Sprintf("port %d is removed from the datapath after its interface was deleted", no),
			func() bool { return s.DP.Port(no) == nil })
	}
	time.Sleep(300 * time.Millisecond)
	if s.P2.Stats().TxPackets == 0 {
		t.Fatal("no traffic forwarded before the removal")
	}
	nstest.Run(t, "ip", "link", "del", s.B.Port) // the output port
	waitRemoved(2)
	it := s.DP.PMDStats()[0].Iterations
	rx := s.P1.Stats().RxPackets
	time.Sleep(300 * time.Millisecond)
	if s.DP.PMDStats()[0].Iterations <= it {
		t.Error("PMD stopped iterating after port 2 was removed")
	}
	if s.P1.Stats().RxPackets <= rx {
		t.Error("port 1 stopped receiving after port 2 was removed")
	}
	nstest.Run(t, "ip", "link", "del", s.A.Port) // the input port, under traffic
	waitRemoved(1)
	close(stop)
	sent := <-done
	time.Sleep(100 * time.Millisecond)
	if s.DP.PMDStats()[0].Iterations <= it {
		t.Error("PMD stopped iterating")
	}
	s.DP.Stop()
	nstest.CheckPools(t, s.DP)
	t.Logf("flood sent %d frames; port 1 %+v; port 2 %+v; pmd drops %d", sent, s.P1.Stats(), s.P2.Stats(), nstest.PMDDrops(s.DP))
	if err := s.P1.Close(); err == nil {
		t.Error("port 1 was not closed by the datapath after its removal")
	}
}

// TestE2EGenericMode: forced generic (SKB) XDP, with zero-copy asked for
// (veth cannot, so the sockets fall back to copy mode). Generic XDP does
// not make the kernel turn TSO off on the veth's peer, so TCP super-frames
// reach the socket, do not fit a UMEM frame and are dropped — counted in
// RxDrops. With TSO off on the peers (ethtool -K <peer> tso off) TCP flows.
func TestE2EGenericMode(t *testing.T) {
	s := newSwitch(t, Options{Mode: ModeGeneric, ZeroCopy: true})
	if s.P1.AttachMode() != ModeGeneric || s.P1.ZeroCopy() {
		t.Fatalf("mode %s zero-copy %v, want generic without zero-copy", s.P1.AttachMode(), s.P1.ZeroCopy())
	}
	if on, mode := xdpAttached(t, s.A.Port); !on || mode != 2 { // XDP_ATTACHED_SKB
		t.Errorf("xdp on %s: attached %v mode %d, want generic", s.A.Port, on, mode)
	}
	if tso := ethtoolFeature(t, s.A.NS, s.A.Dev, "tcp-segmentation-offload"); tso != "on" {
		t.Errorf("peer TSO is %s with generic XDP; expected the kernel to leave it on", tso)
	}
	nstest.Ping(t, s.A.NS, s.B.IP)
	nstest.Ping(t, s.B.NS, s.A.IP)
	before := s.P1.Stats().RxDrops
	gbps := nstest.IperfTCP(t, s.A.NS, s.B.NS, s.B.IP, 3) / 1e9
	drops := s.P1.Stats().RxDrops - before
	t.Logf("iperf3 a→b in generic mode with peer TSO on: %.3f Gbit/s, %d oversize frames dropped (kernel %+v)", gbps, drops, s.P1.KernelStats())
	if drops == 0 {
		t.Error("no super-frame drops counted with TSO on the peer")
	}
	s.A.NS.Run(t, "ethtool", "-K", s.A.Dev, "tso", "off")
	s.B.NS.Run(t, "ethtool", "-K", s.B.Dev, "tso", "off")
	before = s.P1.Stats().RxDrops
	gbps = nstest.IperfTCP(t, s.A.NS, s.B.NS, s.B.IP, 3) / 1e9
	t.Logf("iperf3 a→b in generic mode with peer TSO off: %.2f Gbit/s, %d drops", gbps, s.P1.Stats().RxDrops-before)
}

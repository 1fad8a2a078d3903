package afpacket

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"vswitch/datapath"
	"vswitch/datapath/actions"
	"vswitch/internal/nstest"
)

// switchTopo is two hosts joined by the datapath through two afpacket ports
// (1 and 2) with rules in_port=1 → 2 and in_port=2 → 1.
type switchTopo struct {
	a, b   *nstest.Host
	dp     *datapath.Datapath
	p1, p2 *Port
}

func newSwitchTopo(t *testing.T, opts Options, npmd int) *switchTopo {
	t.Helper()
	a, b := nstest.TwoHosts(t)
	s := &switchTopo{a: a, b: b}
	var err error
	if s.p1, err = New(a.Port, opts); err != nil {
		t.Fatal(err)
	}
	if s.p2, err = New(b.Port, opts); err != nil {
		s.p1.Close()
		t.Fatal(err)
	}
	rules := &datapath.RuleTable{}
	s.dp, err = datapath.New(datapath.Config{NumPMDs: npmd, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = s.dp.InvalidateFlows
	t.Cleanup(func() { s.dp.Close() })
	for no, p := range map[uint32]*Port{1: s.p1, 2: s.p2} {
		if _, err := s.dp.AddPort(no, p); err != nil {
			p.Close()
			t.Fatal(err)
		}
	}
	for in, out := range map[uint32]uint32{1: 2, 2: 1} {
		r := datapath.Rule{Priority: 10, Actions: actions.List{{Kind: actions.Output, Port: out}}}
		r.Match.Key.InPort = in
		r.Match.Mask.InPort = ^uint32(0)
		rules.Add(r)
	}
	if err := s.dp.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// rings are the receive ring versions every e2e test runs with.
var rings = []RingVersion{RingV2, RingV3}

// TestE2ESingleQueue runs the whole end-to-end suite through ports with one
// queue pair and one PMD, for each receive ring version.
func TestE2ESingleQueue(t *testing.T) {
	for _, ring := range rings {
		t.Run(ring.String(), func(t *testing.T) {
			s := runSuite(t, Options{RxRing: ring}, 1)
			if s.p1.NumRxQueues() != 1 || s.p1.NumTxQueues() != 1 {
				t.Errorf("queues %d/%d, want 1/1", s.p1.NumRxQueues(), s.p1.NumTxQueues())
			}
			if s.p1.rx[0].v3 != (ring == RingV3) {
				t.Errorf("rx ring is not %v", ring)
			}
		})
	}
}

// TestE2EFanout runs it with two queue pairs per port (a PACKET_FANOUT
// hash group on receive) and two PMDs, for each receive ring version.
func TestE2EFanout(t *testing.T) {
	for _, ring := range rings {
		t.Run(ring.String(), func(t *testing.T) {
			s := runSuite(t, Options{Queues: 2, RxRing: ring}, 2)
			// The flood's 64 source ports must have been spread over both
			// sockets of the fanout group.
			for _, p := range []*Port{s.p1, s.p2} {
				for q := range p.rx {
					if p.counters[q].RxPackets.Load() == 0 {
						t.Errorf("%s rx queue %d received nothing", p.Name(), q)
					}
				}
			}
		})
	}
}

// runSuite checks, through one topology: exact accounting of a UDP flood,
// ping both ways, ping across VLAN subinterfaces, iperf3 TCP with default
// offloads (GSO super-frames and partial checksums), iperf3 over the VLAN,
// and removal of both ports' interfaces under traffic.
func runSuite(t *testing.T, opts Options, npmd int) *switchTopo {
	s := newSwitchTopo(t, opts, npmd)
	// The flood first: before any IP traffic there is no ARP or other
	// background frame to blur the exact count.
	t.Run("UDPFlood", func(t *testing.T) { floodAccounting(t, s) })
	t.Run("Ping", func(t *testing.T) {
		for _, h := range [][2]*nstest.Host{{s.a, s.b}, {s.b, s.a}} {
			out := h[0].NS.Run(t, "ping", "-c", "5", "-i", "0.2", "-W", "2", h[1].IP)
			t.Logf("ping %s → %s: %s", h[0].IP, h[1].IP, lastLine(out))
		}
	})
	t.Run("TCP", func(t *testing.T) {
		bps := iperf(t, s.a, s.b, s.b.IP, 3)
		t.Logf("iperf3 TCP %s → %s, default offloads: %.2f Gbit/s", s.a.IP, s.b.IP, bps/1e9)
	})
	// This kernel has no 802.1Q module, so Host.VLAN subinterfaces (and a
	// ping across them) cannot exist: tagged frames are sent and checked
	// with packet sockets instead.
	t.Run("VLAN", func(t *testing.T) {
		vlanTags(t, s.a, s.b)
		vlanTags(t, s.b, s.a)
	})
	st1, st2 := s.p1.Stats(), s.p2.Stats()
	t.Logf("port1 %+v", st1)
	t.Logf("port2 %+v", st2)
	if st1.RxErrors != 0 || st2.RxErrors != 0 || st1.TxErrors != 0 || st2.TxErrors != 0 {
		t.Errorf("errors on a healthy path: port1 %+v port2 %+v", st1, st2)
	}
	t.Run("RemovalUnderTraffic", func(t *testing.T) { removal(t, s) })
	return s
}

// floodAccounting sends a UDP flood from host a's namespace and checks that
// every frame is either received by host b's interface or counted as a
// drop somewhere on the way.
func floodAccounting(t *testing.T, s *switchTopo) {
	before := s.counters(t)
	pmdBefore := pmdDrops(s.dp)
	d1, d2 := s.p1.Stats(), s.p2.Stats()
	start := time.Now()
	sent, err := flood(s.a, unusedMAC, 2*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	var after map[string]uint64
	var got, lost uint64
	deadline := time.Now().Add(5 * time.Second)
	for {
		after = s.counters(t)
		e1, e2 := s.p1.Stats(), s.p2.Stats()
		got = after["b.rx_packets"] - before["b.rx_packets"]
		lost = after["a.tx_dropped"] - before["a.tx_dropped"] +
			(e1.RxDrops - d1.RxDrops) + (e1.RxErrors - d1.RxErrors) +
			(pmdDrops(s.dp) - pmdBefore) +
			after["p2.tx_dropped"] - before["p2.tx_dropped"]
		if got+lost >= sent || time.Now().After(deadline) {
			t.Logf("port1 rx drops %d errors %d, port2 tx drops %d errors %d",
				e1.RxDrops-d1.RxDrops, e1.RxErrors-d1.RxErrors, e2.TxDrops-d2.TxDrops, e2.TxErrors-d2.TxErrors)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if tx := after["a.tx_packets"] - before["a.tx_packets"] + after["a.tx_dropped"] - before["a.tx_dropped"]; tx != sent {
		t.Errorf("host a's interface counted %d frames sent or dropped, the sender sent %d", tx, sent)
	}
	t.Logf("flood: sent %d in %v (%.0f pps), received %d (%.0f pps), lost and counted %d",
		sent, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), got, float64(got)/elapsed.Seconds(), lost)
	if got+lost != sent {
		t.Errorf("sent %d != received %d + counted drops %d (diff %d)", sent, got, lost, int64(sent)-int64(got+lost))
	}
	if got == 0 {
		t.Errorf("none of %d frames arrived", sent)
	}
}

// counters reads the interface counters the flood accounting needs.
func (s *switchTopo) counters(t *testing.T) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	read := func(key string, ns *nstest.Netns, dev, stat string) {
		path := "/sys/class/net/" + dev + "/statistics/" + stat
		var out string
		var err error
		if ns == nil {
			var b []byte
			b, err = os.ReadFile(path)
			out = string(b)
		} else {
			out, err = ns.Output("cat", path)
		}
		if err != nil {
			t.Fatalf("%s: %v %s", path, err, out)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		m[key] = v
	}
	read("a.tx_packets", s.a.NS, s.a.Dev, "tx_packets")
	read("a.tx_dropped", s.a.NS, s.a.Dev, "tx_dropped")
	read("b.rx_packets", s.b.NS, s.b.Dev, "rx_packets")
	read("p2.tx_dropped", nil, s.b.Port, "tx_dropped")
	return m
}

func pmdDrops(dp *datapath.Datapath) uint64 {
	var n uint64
	for _, s := range dp.PMDStats() {
		for _, d := range s.Drops {
			n += d
		}
	}
	return n
}

// unusedMAC is a destination no host has: the far host drops the flood
// silently instead of answering it.
var unusedMAC = net.HardwareAddr{0x02, 0, 0xc6, 0x12, 0, 0x99}

// flood sends 60-byte UDP frames (source ports varying, so a fanout group
// spreads them) out of host h's interface for d, or until stop is closed,
// and returns how many the kernel accepted. Errors (the interface may be
// deleted under it) end the flood early.
func flood(h *nstest.Host, dst net.HardwareAddr, d time.Duration, stop <-chan struct{}) (uint64, error) {
	fd, err := packetSocketIn(h.NS.Name, h.Dev, 0, false)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	src, _ := net.ParseMAC(h.MAC)
	const burst = 64
	frames := make([][]byte, burst)
	iovs := make([]unix.Iovec, burst)
	msgs := make([]mmsghdr, burst)
	for i := range frames {
		frames[i] = udpFrame(dst, src, net.ParseIP(h.IP).To4(), net.IPv4(198, 18, 0, 250).To4(), uint16(10000+i), 9)
		iovs[i].Base = &frames[i][0]
		iovs[i].SetLen(len(frames[i]))
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
	}
	var sent uint64
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		select {
		case <-stop:
			return sent, nil
		default:
		}
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), burst, 0, 0, 0)
		runtime.KeepAlive(frames)
		if e != 0 {
			if e == unix.ENOBUFS || e == unix.EAGAIN || e == unix.EINTR {
				time.Sleep(10 * time.Microsecond)
				continue
			}
			return sent, nil
		}
		sent += uint64(n)
	}
	return sent, nil
}

type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// packetSocketIn opens an AF_PACKET socket on dev inside namespace ns
// (sockets keep the namespace they were made in), bound to protocol proto
// (0: send only), with PACKET_VNET_HDR if vnet. The thread that enters the
// namespace is never unlocked, so it dies with its goroutine.
func packetSocketIn(ns, dev string, proto uint16, vnet bool) (int, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result)
	go func() {
		runtime.LockOSThread()
		r := result{fd: -1}
		defer func() { ch <- r }()
		nsfd, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			r.err = err
			return
		}
		defer unix.Close(nsfd)
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			r.err = err
			return
		}
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			r.err = err
			return
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			r.err = err
			return
		}
		if vnet {
			if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
				unix.Close(fd)
				r.err = err
				return
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(proto)}); err != nil {
			unix.Close(fd)
			r.err = err
			return
		}
		r.fd = fd
	}()
	r := <-ch
	return r.fd, r.err
}

// udpFrame builds a 60-byte Ethernet/IPv4/UDP frame with valid checksums.
func udpFrame(dst, src net.HardwareAddr, sip, dip net.IP, sport, dport uint16) []byte {
	f := make([]byte, 60)
	copy(f[0:], dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 46)
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:], sip)
	copy(ip[16:], dip)
	binary.BigEndian.PutUint16(ip[10:], ^csum(ip, 0))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], 26)
	ps := csum(ip[12:20], 17+26)
	c := ^csum(udp, uint32(ps))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return f
}

func csum(b []byte, init uint32) uint16 {
	s := init
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// iperf runs an iperf3 TCP test from client to server's address ip for
// secs seconds and returns the received bits per second.
func iperf(t *testing.T, client, server *nstest.Host, ip string, secs int) float64 {
	t.Helper()
	port := strconv.Itoa(20000 + rand.IntN(40000))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(secs+20)*time.Second)
	defer cancel()
	srv := server.NS.Cmd(ctx, "iperf3", "-s", "-1", "-p", port)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var waitOnce sync.Once
	wait := func() { waitOnce.Do(func() { srv.Wait() }) }
	t.Cleanup(func() { srv.Process.Kill(); wait() })
	var out string
	var err error
	for try := 0; try < 50; try++ {
		out, err = client.NS.Output("iperf3", "-c", ip, "-p", port, "-t", strconv.Itoa(secs), "-J")
		// The server may not be listening yet.
		if !strings.Contains(out, "unable to connect") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 client: %v\n%s\nserver: %s", err, out, srvOut.String())
	}
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Bytes         uint64  `json:"bytes"`
			} `json:"sum_received"`
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	if res.Error != "" {
		t.Fatalf("iperf3: %s", res.Error)
	}
	if res.End.SumReceived.BitsPerSecond <= 0 || res.End.SumReceived.Bytes == 0 {
		t.Fatalf("iperf3 moved nothing: %s", out)
	}
	t.Logf("iperf3: %d bytes received, %d retransmits", res.End.SumReceived.Bytes, res.End.SumSent.Retransmits)
	return res.End.SumReceived.BitsPerSecond
}

// removal deletes the interfaces of both ports, one after the other, while
// host a floods: the datapath must remove each port, the PMDs keep
// running, and once stopped every PMD has all its buffers back.
func removal(t *testing.T, s *switchTopo) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var floodErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, floodErr = flood(s.a, unusedMAC, 20*time.Second, stop)
	}()
	defer func() {
		close(stop)
		wg.Wait()
		if floodErr != nil {
			t.Error(floodErr)
		}
	}()
	waitFor(t, "flood reaches port 1", func() bool { return s.p1.Stats().RxPackets > 0 })
	rx0 := s.p1.Stats().RxPackets
	waitFor(t, "traffic forwarded", func() bool { return s.p1.Stats().RxPackets > rx0+1000 })

	// The tx side vanishes under traffic.
	nstest.Run(t, "ip", "link", "del", s.b.Port)
	waitFor(t, "port 2 removed", func() bool { return s.dp.Port(2) == nil })
	iters := totalIterations(s.dp)
	rx1 := s.p1.Stats().RxPackets
	waitFor(t, "port 1 still receiving", func() bool { return s.p1.Stats().RxPackets > rx1+1000 })
	waitFor(t, "PMDs still running", func() bool { return totalIterations(s.dp) > iters })

	// Then the rx side.
	nstest.Run(t, "ip", "link", "del", s.a.Port)
	waitFor(t, "port 1 removed", func() bool { return s.dp.Port(1) == nil })
	iters = totalIterations(s.dp)
	waitFor(t, "PMDs still running", func() bool { return totalIterations(s.dp) > iters })

	s.dp.Stop()
	for _, pmd := range s.dp.PMDs() {
		if pl := pmd.Pool(); pl.Available() != pl.Size() {
			t.Errorf("PMD %d: %d of %d buffers back", pmd.ID(), pl.Available(), pl.Size())
		}
	}
	// Close ran when the datapath removed the ports: closing again is refused.
	if s.p1.Close() == nil || s.p2.Close() == nil {
		t.Error("ports not closed by the datapath on removal")
	}
}

func totalIterations(dp *datapath.Datapath) uint64 {
	var n uint64
	for _, s := range dp.PMDStats() {
		n += s.Iterations
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndex(s, "\n")+1:]
}

package tap

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vswitch/datapath"
	"vswitch/datapath/actions"
	"vswitch/internal/nstest"
	"vswitch/netdev"
	"vswitch/netdev/afpacket"
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

// crossConnect builds a datapath forwarding port 1 <-> port 2.
func crossConnect(t *testing.T, d1, d2 netdev.Netdev) *datapath.Datapath {
	t.Helper()
	rules := &datapath.RuleTable{}
	dp, err := datapath.New(datapath.Config{NumPMDs: 1, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	for _, r := range [][2]uint32{{1, 2}, {2, 1}} {
		var rule datapath.Rule
		rule.Priority = 10
		rule.Match.Key.InPort = r[0]
		rule.Match.Mask.InPort = ^uint32(0)
		rule.Actions = actions.List{{Kind: actions.Output, Port: r[1]}}
		rules.Add(rule)
	}
	if _, err := dp.AddPort(1, d1); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(2, d2); err != nil {
		t.Fatal(err)
	}
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	return dp
}

func checkPools(t *testing.T, dp *datapath.Datapath) {
	t.Helper()
	for _, p := range dp.PMDs() {
		if p.Pool().Available() != p.Pool().Size() {
			t.Errorf("PMD %d: %d of %d buffers not returned", p.ID(), p.Pool().Size()-p.Pool().Available(), p.Pool().Size())
		}
		if d := p.Pool().DoubleFrees(); d != 0 {
			t.Errorf("PMD %d: %d double frees", p.ID(), d)
		}
	}
}

func ping(t *testing.T, from *nstest.Netns, to string) {
	t.Helper()
	from.Run(t, "ping", "-c", "5", "-i", "0.2", "-W", "2", to)
}

// iperfTCP runs a ~3 s TCP stream from cli to srv and returns Gbit/s.
func iperfTCP(t *testing.T, srv, cli *tapHost) float64 {
	t.Helper()
	port := strconv.Itoa(20000 + rand.IntN(40000))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	s := srv.NS.Cmd(ctx, "iperf3", "-s", "-1", "-p", port)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { s.Process.Kill(); s.Wait() }()
	var out []byte
	var err error
	for try := 0; try < 20; try++ {
		time.Sleep(150 * time.Millisecond)
		out, err = cli.NS.Cmd(ctx, "iperf3", "-c", srv.IP, "-p", port, "-t", "3", "-J").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "connect") {
			break
		}
	}
	if err != nil {
		t.Fatalf("iperf3: %v\n%s", err, out)
	}
	var res struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("iperf3 output: %v\n%s", err, out)
	}
	if res.Error != "" {
		t.Fatalf("iperf3: %s", res.Error)
	}
	gbps := res.End.SumReceived.BitsPerSecond / 1e9
	if gbps <= 0 {
		t.Fatalf("iperf3 received nothing:\n%s", out)
	}
	return gbps
}

// devStat reads a /sys/class/net statistic of a device inside ns.
func devStat(t *testing.T, h *tapHost, dev, name string) uint64 {
	t.Helper()
	out := h.NS.Run(t, "cat", "/sys/class/net/"+dev+"/statistics/"+name)
	v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// packetSender is an AF_PACKET socket inside a host's namespace, bound to
// its tap: what it writes leaves the tap towards the switch.
type packetSender struct{ fd int }

func newPacketSender(t *testing.T, h *tapHost) *packetSender {
	t.Helper()
	var fd int
	err := inNetns(h.NS.Name, func() error {
		ifi, err := net.InterfaceByName(h.Dev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0x0300, Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &packetSender{fd: fd}
}

// udpFrame is a 60-byte Ethernet/IPv4/UDP frame from src to a MAC nobody
// has, so the far host's stack drops it silently after counting it.
func udpFrame(src net.HardwareAddr, tci int) []byte {
	f := make([]byte, 0, 64)
	if tci == 0 {
		f = f[:0:60]
	}
	f = append(f, 0x02, 0, 0xc6, 0x12, 0xff, 0xfe)
	f = append(f, src...)
	if tci != 0 {
		f = binary.BigEndian.AppendUint16(f, 0x8100)
		f = binary.BigEndian.AppendUint16(f, uint16(tci))
	}
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	ip := []byte{0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2}
	binary.BigEndian.PutUint16(ip[10:], ^ipSum(ip))
	f = append(f, ip...)
	f = append(f, 0x30, 0x39, 0, 9, 0, 26, 0, 0)
	for len(f) < cap(f) && len(f) < 64 {
		f = append(f, 0)
	}
	return f
}

func ipSum(b []byte) uint16 {
	var s uint32
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

// flood writes frame until stop is closed or count frames were sent
// (count 0: no limit) and returns how many the kernel accepted.
func (s *packetSender) flood(frame []byte, count uint64, stop <-chan struct{}) uint64 {
	var sent uint64
	for count == 0 || sent < count {
		if sent%256 == 0 {
			select {
			case <-stop:
				return sent
			default:
			}
		}
		if _, err := unix.Write(s.fd, frame); err == nil {
			sent++
		} else if err != unix.ENOBUFS && err != unix.EAGAIN && err != unix.EINTR {
			return sent
		}
	}
	return sent
}

// waitStable polls f until it returns the same value twice 300 ms apart.
func waitStable(f func() uint64) uint64 {
	prev := f()
	for i := 0; i < 50; i++ {
		time.Sleep(300 * time.Millisecond)
		v := f()
		if v == prev {
			return v
		}
		prev = v
	}
	return prev
}

func pmdDrops(dp *datapath.Datapath) uint64 {
	var d uint64
	for _, s := range dp.PMDStats() {
		for _, x := range s.Drops {
			d += x
		}
	}
	return d
}

// TestE2ETwoTaps forwards between two tap ports, each the interface of a
// host namespace: ping, TCP with the host's default offloads (GSO frames
// into the driver), an exactly accounted UDP flood, and VLAN traffic.
func TestE2ETwoTaps(t *testing.T) {
	a, b := twoTapHosts(t, Options{})
	dp := crossConnect(t, a.Port, b.Port)
	if !a.Port.LinkUp() || !b.Port.LinkUp() {
		t.Fatal("taps not up")
	}
	if a.Port.MTU() != 1500 {
		t.Errorf("MTU %d, want 1500", a.Port.MTU())
	}

	t.Run("ping", func(t *testing.T) {
		ping(t, a.NS, b.IP)
		ping(t, b.NS, a.IP)
	})

	t.Run("tcp", func(t *testing.T) {
		gbps := iperfTCP(t, b, a)
		t.Logf("iperf3 TCP %s -> %s: %.2f Gbit/s (USO offered: %v)", a.IP, b.IP, gbps, a.Port.USO())
		gbps = iperfTCP(t, a, b)
		t.Logf("iperf3 TCP %s -> %s: %.2f Gbit/s", b.IP, a.IP, gbps)
	})

	t.Run("udp-flood", func(t *testing.T) {
		snd := newPacketSender(t, a)
		frame := udpFrame(a.MAC, 0)
		rx2 := func() uint64 { return devStat(t, b, b.Dev, "rx_packets") }
		txDrop1 := func() uint64 { return devStat(t, a, a.Dev, "tx_dropped") }
		rx0, txd0 := waitStable(rx2), txDrop1()
		s0a, s0b, pd0 := a.Port.Stats(), b.Port.Stats(), pmdDrops(dp)
		stop := make(chan struct{})
		time.AfterFunc(2*time.Second, func() { close(stop) })
		start := time.Now()
		sent := snd.flood(frame, 0, stop)
		dur := time.Since(start)
		rx := waitStable(rx2) - rx0
		txd := txDrop1() - txd0
		s1a, s1b := a.Port.Stats(), b.Port.Stats()
		pd := pmdDrops(dp) - pd0
		drvLoss := (s1a.RxErrors - s0a.RxErrors) + (s1a.RxDrops - s0a.RxDrops) +
			(s1b.TxDrops - s0b.TxDrops) + (s1b.TxErrors - s0b.TxErrors)
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
		snd := newPacketSender(t, a)
		rcv := newTagReceiver(t, b)
		const n = 50
		frame := udpFrame(a.MAC, 3<<13|100)
		for i := 0; i < n; i++ {
			binary.BigEndian.PutUint32(frame[46:], uint32(i))
			if _, err := unix.Write(snd.fd, frame); err != nil {
				t.Fatal(err)
			}
		}
		got := rcv.collect(t, n, 3*time.Second)
		if len(got) != n {
			t.Fatalf("received %d tagged frames, want %d", len(got), n)
		}
		for i, f := range got {
			if f.tci != 3<<13|100 || f.tpid != 0x8100 {
				t.Fatalf("frame %d: tag tpid %#x tci %#x, want 0x8100/%#x", i, f.tpid, f.tci, 3<<13|100)
			}
			if f.seq != uint32(i) {
				t.Fatalf("frame %d carries sequence %d", i, f.seq)
			}
		}
	})

	dp.Stop()
	checkPools(t, dp)
}

// tagReceiver is a packet socket on a host's tap that reports the VLAN tag
// of each test frame it receives.
type tagReceiver struct{ fd int }

type taggedFrame struct {
	tpid, tci uint16
	seq       uint32
}

func newTagReceiver(t *testing.T, h *tapHost) *tagReceiver {
	t.Helper()
	var fd int
	err := inNetns(h.NS.Name, func() error {
		ifi, err := net.InterfaceByName(h.Dev)
		if err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
		tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0x0300, Ifindex: ifi.Index})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &tagReceiver{fd: fd}
}

// collect returns the test frames (UDP port 9, as udpFrame builds them)
// received within d, up to n.
func (r *tagReceiver) collect(t *testing.T, n int, d time.Duration) []taggedFrame {
	t.Helper()
	var out []taggedFrame
	buf := make([]byte, 2048)
	oob := make([]byte, 256)
	end := time.Now().Add(d)
	for len(out) < n && time.Now().Before(end) {
		l, oobn, _, _, err := unix.Recvmsg(r.fd, buf, oob, 0)
		if err != nil {
			continue
		}
		f := buf[:l]
		// Untagged on the socket: Ethernet, IPv4 (20), UDP dport 9.
		if l < 46 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || binary.BigEndian.Uint16(f[36:]) != 9 {
			continue
		}
		tf := taggedFrame{seq: binary.BigEndian.Uint32(f[42:])}
		cms, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range cms {
			if cm.Header.Level != unix.SOL_PACKET || cm.Header.Type != unix.PACKET_AUXDATA || len(cm.Data) < 20 {
				continue
			}
			// struct tpacket_auxdata: status, len, snaplen (u32), mac, net,
			// vlan_tci, vlan_tpid (u16).
			st := binary.NativeEndian.Uint32(cm.Data[0:])
			if st&unix.TP_STATUS_VLAN_VALID != 0 {
				tf.tci = binary.NativeEndian.Uint16(cm.Data[16:])
				tf.tpid = 0x8100 // the only TPID without TP_STATUS_VLAN_TPID_VALID
				if st&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
					tf.tpid = binary.NativeEndian.Uint16(cm.Data[18:])
				}
			}
		}
		out = append(out, tf)
	}
	return out
}

// TestE2ERemoveUnderTraffic deletes a tap inside its namespace while a flood
// crosses the switch towards it: the datapath must remove the port, the PMD
// must keep forwarding what it still can, and no buffer may leak.
func TestE2ERemoveUnderTraffic(t *testing.T) {
	a, b := twoTapHosts(t, Options{})
	dp := crossConnect(t, a.Port, b.Port)
	ping(t, a.NS, b.IP)

	snd := newPacketSender(t, a)
	frame := udpFrame(a.MAC, 0)
	stop := make(chan struct{})
	var sent atomic.Uint64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sent.Store(snd.flood(frame, 0, stop))
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
	deadline := time.Now().Add(5 * time.Second)
	for dp.Port(2) != nil {
		if time.Now().After(deadline) {
			t.Fatal("port 2 still in the datapath 5 s after its tap was deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	checkPools(t, dp)
}

// TestE2ETCPWithoutOffloads measures what the driver's own segmentation is
// worth: with the tap's offloads off the host stack segments and sums every
// frame itself and the driver reads one MTU frame per syscall.
func TestE2ETCPWithoutOffloads(t *testing.T) {
	a, b := twoTapHosts(t, Options{NoOffloads: true})
	dp := crossConnect(t, a.Port, b.Port)
	ping(t, a.NS, b.IP)
	gbps := iperfTCP(t, b, a)
	t.Logf("iperf3 TCP %s -> %s with tap offloads off: %.2f Gbit/s", a.IP, b.IP, gbps)
	dp.Stop()
	checkPools(t, dp)
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
	dp := crossConnect(t, a.Port, pb)
	ping(t, a.NS, vb.IP)
	ping(t, vb.NS, a.IP)
	b := &tapHost{NS: vb.NS, IP: vb.IP}
	gbps := iperfTCP(t, b, a)
	t.Logf("iperf3 TCP tap %s -> veth/AF_PACKET %s: %.2f Gbit/s", a.IP, b.IP, gbps)
	gbps = iperfTCP(t, a, b)
	t.Logf("iperf3 TCP veth/AF_PACKET %s -> tap %s: %.2f Gbit/s", b.IP, a.IP, gbps)
	dp.Stop()
	checkPools(t, dp)
}

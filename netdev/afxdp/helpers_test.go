package afxdp

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"vswitch/datapath"
	"vswitch/datapath/actions"
	"vswitch/internal/nstest"
)

// sw is a datapath with two AF_XDP ports (1 = host a's port, 2 = host b's)
// and rules forwarding everything from each to the other.
type sw struct {
	dp   *datapath.Datapath
	p1   *Port
	p2   *Port
	a, b *nstest.Host
}

func inPortRule(in, out uint32) datapath.Rule {
	r := datapath.Rule{Priority: 10}
	r.Match.Key.InPort = in
	r.Match.Mask.InPort = ^uint32(0)
	r.Actions = actions.List{{Kind: actions.Output, Port: out}}
	return r
}

// newSwitch builds two hosts and a switch between them.
func newSwitch(t *testing.T, opts Options) *sw {
	t.Helper()
	a, b := nstest.TwoHosts(t)
	s := &sw{a: a, b: b}
	var err error
	if s.p1, err = New(a.Port, opts); err != nil {
		t.Fatal(err)
	}
	if s.p2, err = New(b.Port, opts); err != nil {
		s.p1.Close()
		t.Fatal(err)
	}
	rules := &datapath.RuleTable{}
	s.dp, err = datapath.New(datapath.Config{NumPMDs: 1, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = s.dp.InvalidateFlows
	t.Cleanup(func() { s.dp.Close() }) // closes the ports it still has
	if _, err := s.dp.AddPort(1, s.p1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.dp.AddPort(2, s.p2); err != nil {
		t.Fatal(err)
	}
	rules.Add(inPortRule(1, 2))
	rules.Add(inPortRule(2, 1))
	if err := s.dp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ports in %s XDP mode, zero-copy %v, fixing checksums %v", s.p1.AttachMode(), s.p1.ZeroCopy(), s.p1.FixesChecksums())
	return s
}

// ping pings dst from h and fails the test if any reply is missing.
func ping(t *testing.T, h *nstest.Host, dst string) {
	t.Helper()
	out, err := h.NS.Output("ping", "-c", "5", "-i", "0.2", "-W", "2", dst)
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("ping %s from %s: %v\n%s", dst, h.IP, err, out)
	}
}

// iperf runs a ~3 s TCP stream from a to b and returns the receiver's
// throughput in Gbit/s.
func iperf(t *testing.T, a, b *nstest.Host, dst string) float64 {
	t.Helper()
	port := strconv.Itoa(20000 + rand.Intn(40000))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := b.NS.Cmd(ctx, "iperf3", "-s", "-1", "-p", port, "-B", dst)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	var out []byte
	var err error
	for i := 0; i < 50; i++ { // the server needs a moment to listen
		out, err = a.NS.Cmd(ctx, "iperf3", "-c", dst, "-p", port, "-t", "3", "-J").CombinedOutput()
		if !strings.Contains(string(out), "unable to connect") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || strings.Contains(string(out), `"error"`) {
		t.Fatalf("iperf3 client: %v\n%s\nserver: %s", err, out, srvOut.String())
	}
	i := strings.Index(string(out), `"sum_received"`)
	if i < 0 {
		t.Fatalf("iperf3: no sum_received in\n%s", out)
	}
	rest := string(out[i:])
	j := strings.Index(rest, `"bits_per_second":`)
	if j < 0 {
		t.Fatalf("iperf3: no bits_per_second in\n%s", rest)
	}
	rest = strings.TrimSpace(rest[j+len(`"bits_per_second":`):])
	end := strings.IndexAny(rest, ",\n}")
	bps, err := strconv.ParseFloat(strings.TrimSpace(rest[:end]), 64)
	if err != nil {
		t.Fatal(err)
	}
	if bps <= 0 {
		t.Fatalf("iperf3 throughput %v", bps)
	}
	return bps / 1e9
}

// counter reads /sys/class/net/<dev>/statistics/<name>, inside ns if set.
func counter(t *testing.T, ns *nstest.Netns, dev, name string) uint64 {
	t.Helper()
	path := "/sys/class/net/" + dev + "/statistics/" + name
	var out string
	var err error
	if ns != nil {
		out, err = ns.Output("cat", path)
	} else {
		var b []byte
		b, err = os.ReadFile(path)
		out = string(b)
	}
	if err != nil {
		t.Fatalf("%s: %v %s", path, err, out)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// inNetns runs fn on a thread that has joined namespace ns.
func inNetns(t *testing.T, ns string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer unix.Close(orig)
	target, err := unix.Open("/var/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		// Leave the thread locked: the runtime discards it when the
		// goroutine ends, so no other goroutine runs in the wrong netns.
		t.Fatal(err)
	}
	runtime.UnlockOSThread()
}

// rawSender is an AF_PACKET socket bound to a device inside a namespace.
type rawSender struct {
	fd int
	sa unix.SockaddrLinklayer
}

func newRawSender(t *testing.T, h *nstest.Host, dev string) *rawSender {
	t.Helper()
	s := &rawSender{fd: -1}
	inNetns(t, h.NS.Name, func() {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			t.Error(err)
			return
		}
		s.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		s.sa = unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(unix.ETH_P_ALL)}
	})
	if s.fd < 0 {
		t.FailNow()
	}
	t.Cleanup(func() { unix.Close(s.fd) })
	return s
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// send transmits f once; it reports whether the kernel took it.
func (s *rawSender) send(f []byte) bool {
	return unix.Sendto(s.fd, f, 0, &s.sa) == nil
}

// udpFrame builds a minimum-size Ethernet/IPv4/UDP frame from host a to
// host b with a complete UDP checksum and seq in the payload.
func udpFrame(a, b *nstest.Host, seq uint32) []byte {
	f := make([]byte, 60)
	dst, _ := net.ParseMAC(b.MAC)
	src, _ := net.ParseMAC(a.MAC)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 46)
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], net.ParseIP(a.IP).To4())
	copy(ip[16:20], net.ParseIP(b.IP).To4())
	binary.BigEndian.PutUint16(ip[10:], ^csum(ip, 0))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], 9999)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 26)
	binary.BigEndian.PutUint32(udp[8:], seq)
	ps := uint32(17 + 26)
	ps += uint32(csum(ip[12:20], 0))
	c := ^csum(udp, ps)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return f
}

// csum is the one's-complement sum of b plus s, folded.
func csum(b []byte, s uint32) uint16 {
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

// xdpAttached reports whether an XDP program is attached to dev (in the
// test's namespace) and in which mode (netlink XDP_ATTACHED_*).
func xdpAttached(t *testing.T, dev string) (bool, uint32) {
	t.Helper()
	l, err := netlink.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	x := l.Attrs().Xdp
	if x == nil {
		return false, 0
	}
	return x.Attached, x.AttachMode
}

// ethtoolFeature returns the state ("on"/"off") of a feature of dev in ns.
func ethtoolFeature(t *testing.T, ns *nstest.Netns, dev, feature string) string {
	t.Helper()
	var out string
	if ns != nil {
		out = ns.Run(t, "ethtool", "-k", dev)
	} else {
		out = nstest.Run(t, "ethtool", "-k", dev)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), feature+":") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), feature+":"))
			if len(f) > 0 {
				return f[0]
			}
		}
	}
	t.Fatalf("ethtool -k %s: no %s in\n%s", dev, feature, out)
	return ""
}

// checkNoLeaks fails unless every PMD pool has all its buffers back.
func checkNoLeaks(t *testing.T, dp *datapath.Datapath) {
	t.Helper()
	for _, p := range dp.PMDs() {
		if p.Pool().Available() != p.Pool().Size() {
			t.Errorf("PMD %d: %d of %d buffers not returned", p.ID(), p.Pool().Size()-p.Pool().Available(), p.Pool().Size())
		}
	}
}

// pmdDrops sums every drop cause of every PMD.
func pmdDrops(dp *datapath.Datapath) uint64 {
	var n uint64
	for _, s := range dp.PMDStats() {
		for _, d := range s.Drops {
			n += d
		}
	}
	return n
}

// vethPair creates a veth pair in the test's namespace, both ends up,
// deleted when the test ends.
func vethPair(t *testing.T) (port, peer string) {
	t.Helper()
	nstest.RequireRoot(t)
	port, peer = nstest.Name("vxp"), nstest.Name("vxq")
	nstest.Run(t, "ip", "link", "add", port, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { nstest.Output("ip", "link", "del", port) })
	nstest.Run(t, "ip", "link", "set", port, "up")
	nstest.Run(t, "ip", "link", "set", peer, "up")
	return port, peer
}

// crashChildEnv names the interface a re-executed test binary attaches to
// before it waits to be killed (see TestMain).
const crashChildEnv = "AFXDP_TEST_CRASH_CHILD"

// TestMain lets the crash test re-execute this binary as a process that
// opens a port and is then killed without closing it.
func TestMain(m *testing.M) {
	if ifname := os.Getenv(crashChildEnv); ifname != "" {
		p, err := New(ifname, Options{})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("attached", p.AttachMode())
		time.Sleep(time.Minute)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// startCrashChild re-executes the test binary to attach to ifname and
// returns once it has.
func startCrashChild(t *testing.T, ifname string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+ifname)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	buf := make([]byte, 256)
	n, _ := out.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "attached") {
		t.Fatalf("child: %q", buf[:n])
	}
	return cmd
}

// rawReceiver is an AF_PACKET socket that reports each frame's VLAN tag
// from PACKET_AUXDATA (the kernel moves the tag out of the frame on
// receive).
type rawReceiver struct{ fd int }

func newRawReceiver(t *testing.T, h *nstest.Host) *rawReceiver {
	t.Helper()
	r := &rawReceiver{fd: -1}
	inNetns(t, h.NS.Name, func() {
		ifi, err := net.InterfaceByName(h.Dev)
		if err != nil {
			t.Error(err)
			return
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
		if err != nil {
			t.Error(err)
			return
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(unix.ETH_P_ALL)}); err != nil {
			unix.Close(fd)
			t.Error(err)
			return
		}
		r.fd = fd
	})
	if r.fd < 0 {
		t.FailNow()
	}
	t.Cleanup(func() { unix.Close(r.fd) })
	if err := unix.SetsockoptInt(r.fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(r.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return r
}

// recv returns the next incoming frame with its tag reinserted as the
// kernel found it (tagged reports whether there was one), or ok false
// after the receive timeout.
func (r *rawReceiver) recv() (frame []byte, tci uint16, tagged, ok bool) {
	buf := make([]byte, 4096)
	oob := make([]byte, 256)
	for {
		n, oobn, _, from, err := unix.Recvmsg(r.fd, buf, oob, 0)
		if err != nil {
			return nil, 0, false, false
		}
		if ll, _ := from.(*unix.SockaddrLinklayer); ll != nil && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		frame = buf[:n]
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level == unix.SOL_PACKET && m.Header.Type == unix.PACKET_AUXDATA && len(m.Data) >= int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
				if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 {
					return frame, aux.Vlan_tci, true, true
				}
			}
		}
		if n >= 18 && binary.BigEndian.Uint16(frame[12:]) == 0x8100 {
			return append(frame[:12:12], frame[16:]...), binary.BigEndian.Uint16(frame[14:]), true, true
		}
		return frame, 0, false, true
	}
}

// tagged returns f with an 802.1Q tag tci inserted after the MACs.
func tagged(f []byte, tci uint16) []byte {
	out := make([]byte, 0, len(f)+4)
	out = append(out, f[:12]...)
	out = binary.BigEndian.AppendUint16(out, 0x8100)
	out = binary.BigEndian.AppendUint16(out, tci)
	return append(out, f[12:]...)
}

// udpPair is a UDP socket in each namespace: src in a, dst in b bound to
// b's address and a fresh port.
func udpPair(t *testing.T, a, b *nstest.Host) (src, dst *net.UDPConn) {
	t.Helper()
	inNetns(t, b.NS.Name, func() {
		var err error
		dst, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(b.IP), Port: 20000 + rand.Intn(40000)})
		if err != nil {
			t.Error(err)
		}
	})
	inNetns(t, a.NS.Name, func() {
		var err error
		src, err = net.DialUDP("udp4", nil, dst.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Error(err)
		}
	})
	if src == nil || dst == nil {
		t.FailNow()
	}
	t.Cleanup(func() { src.Close(); dst.Close() })
	return src, dst
}

// udpDelivered sends one datagram over the pair and reports whether it
// arrived within half a second.
func udpDelivered(t *testing.T, src, dst *net.UDPConn, msg string) bool {
	t.Helper()
	if _, err := src.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	dst.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	for {
		n, err := dst.Read(buf)
		if err != nil {
			return false
		}
		if string(buf[:n]) == msg {
			return true
		}
	}
}

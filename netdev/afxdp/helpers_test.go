package afxdp

import (
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// sw is a datapath with two AF_XDP ports (1 = host a's port, 2 = host b's)
// and rules forwarding everything from each to the other.
type sw = nstest.Switch[*Port]

// newSwitch builds two hosts and a switch between them.
func newSwitch(t *testing.T, opts Options) *sw {
	t.Helper()
	s := nstest.NewSwitch(t, 1, func(ifname string) (*Port, error) { return New(ifname, opts) })
	t.Logf("ports in %s XDP mode, zero-copy %v, fixing checksums %v", s.P1.AttachMode(), s.P1.ZeroCopy(), s.P1.FixesChecksums())
	return s
}

// udpFrame builds a minimum-size Ethernet/IPv4/UDP frame from host a to
// host b with a complete UDP checksum and seq in the payload.
func udpFrame(a, b *nstest.Host, seq uint32) []byte {
	dst, _ := net.ParseMAC(b.MAC)
	src, _ := net.ParseMAC(a.MAC)
	return nstest.UDP{
		Dst: dst, Src: src, SrcIP: net.ParseIP(a.IP), DstIP: net.ParseIP(b.IP),
		SrcPort: 9999, DstPort: 9, Payload: nstest.SeqPayload(seq),
	}.Frame()
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

// vethPair creates a veth pair in the test's namespace, both ends up,
// deleted when the test ends.
func vethPair(t testing.TB) (port, peer string) {
	t.Helper()
	nstest.RequireRoot(t)
	port, peer = nstest.Name("vxp"), nstest.Name("vxq")
	nstest.Run(t, "ip", "link", "add", port, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { nstest.Output("ip", "link", "del", port) })
	nstest.Run(t, "ip", "link", "set", port, "up")
	nstest.Run(t, "ip", "link", "set", peer, "up")
	return port, peer
}

// crashChildEnv names the interfaces (comma-separated) a re-executed test
// binary attaches to before it waits to be killed (see TestMain).
const crashChildEnv = "AFXDP_TEST_CRASH_CHILD"

// TestMain lets the crash test re-execute this binary as a process that
// opens a port and is then killed without closing it.
func TestMain(m *testing.M) {
	if ifnames := os.Getenv(crashChildEnv); ifnames != "" {
		var p *Port
		for _, ifname := range strings.Split(ifnames, ",") {
			var err error
			if p, err = New(ifname, Options{}); err != nil {
				fmt.Println("error:", err)
				os.Exit(1)
			}
		}
		fmt.Println("attached", p.AttachMode())
		time.Sleep(time.Minute)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// startCrashChild re-executes the test binary to attach to the interfaces
// and returns once it has.
func startCrashChild(t *testing.T, ifnames ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+strings.Join(ifnames, ","))
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

// udpPair is a UDP socket in each namespace: src in a, dst in b bound to
// b's address and a fresh port.
func udpPair(t *testing.T, a, b *nstest.Host) (src, dst *net.UDPConn) {
	t.Helper()
	err := b.NS.Do(func() (err error) {
		dst, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(b.IP), Port: 20000 + rand.Intn(40000)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = a.NS.Do(func() (err error) {
		src, err = net.DialUDP("udp4", nil, dst.LocalAddr().(*net.UDPAddr))
		return err
	})
	if err != nil {
		dst.Close()
		t.Fatal(err)
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

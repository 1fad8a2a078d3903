package tunnel

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/afpacket"
)

// TestE2EVXLANPeerRefusesFrame is issue 30's remote trigger: a sender on
// the underlay sends one VXLAN datagram whose inner frame (1,490 bytes)
// fits the switch side of a workload's veth but not the workload's MTU
// (1450), as two IP fragments; the switch forwards it from the tunnel port
// to the workload's afpacket port, where the kernel refuses it. The
// normal frame sent right after must reach the workload, and the refused
// one is counted on the port (TxRefused, TxDrops).
func TestE2EVXLANPeerRefusesFrame(t *testing.T) {
	u := newUnderlay(t)
	tp := openIn(t, u.a, Options{Kind: VXLAN, KeyFlow: true, Local: u.a4})

	// The workload: a veth from host A (the switch side, MTU 1500) into
	// a namespace of its own (MTU 1450).
	w := nstest.NewNetns(t, "tunw")
	sw, wl := nstest.Name("tusw"), nstest.Name("tuwl")
	u.a.Run(t, "ip", "link", "add", sw, "type", "veth", "peer", "name", wl, "netns", w.Name)
	u.a.Run(t, "ip", "link", "set", sw, "up")
	w.Run(t, "ip", "link", "set", wl, "mtu", "1450", "up")
	var ap *afpacket.Port
	if err := u.a.Do(func() (err error) { ap, err = afpacket.New(sw, afpacket.Options{}); return err }); err != nil {
		t.Fatal(err)
	}
	nstest.CrossConnect(t, 1, tp, ap)
	rx := nstest.NewReceiver(t, w, wl)

	// The sender: a UDP socket on host B that lets the kernel fragment.
	var fd int
	if err := u.b.Do(func() (err error) {
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT); err != nil {
		t.Fatal(err)
	}
	to := &unix.SockaddrInet4{Port: int(VXLAN.DefaultPort()), Addr: u.a4.As4()}
	hdr := hdr(VXLAN, 7)
	src, _ := net.ParseMAC("02:00:00:00:30:01")
	inner := func(sport uint16, payload int) []byte {
		return nstest.UDP{
			Dst: nstest.UnusedMAC, Src: src,
			SrcIP: net.IPv4(10, 30, 0, 1), DstIP: net.IPv4(10, 30, 0, 2),
			SrcPort: sport, DstPort: 9, Payload: make([]byte, payload),
		}.Frame()
	}
	// 1,490 bytes: IP length 1476, over the workload's 1450; the
	// datagram (1,498 bytes of UDP payload) takes two IP fragments.
	big := inner(31000, 1476-28)
	if len(big) != 1490 {
		t.Fatalf("inner frame of %d bytes", len(big))
	}
	before, reasm := ap.Stats(), reassembled(t, u.a)
	const rounds = 3
	for i := range rounds {
		sport := uint16(31001 + i)
		for _, f := range [][]byte{big, inner(sport, 18)} {
			if err := unix.Sendto(fd, append(hdr[:], f...), 0, to); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		if _, ok := rx.Await(3*time.Second, func(f []byte) bool {
			sp, _, ok := nstest.UDPPorts(f)
			return ok && sp == sport
		}); !ok {
			t.Fatalf("round %d: the frame sent after a refused one never reached the workload (tunnel %+v %v, workload port %+v)",
				i, tp.Stats(), tp.DropsByCause(), ap.Stats())
		}
	}
	nstest.WaitFor(t, 3*time.Second, "the refused frames counted on the workload's port", func() bool {
		return ap.Stats().TxRefused-before.TxRefused >= rounds
	})
	after := ap.Stats()
	if got := after.TxRefused - before.TxRefused; got != rounds {
		t.Errorf("workload port counted %d refused frames, sent %d", got, rounds)
	}
	if got := after.TxDrops - before.TxDrops; got != rounds {
		t.Errorf("workload port counted %d tx drops, want the %d refused frames", got, rounds)
	}
	if got := reassembled(t, u.a) - reasm; got != rounds {
		t.Errorf("host A reassembled %d datagrams, want the %d big ones: they did not come as fragments", got, rounds)
	}
}

// reassembled reads Ip ReasmOKs, the datagrams the namespace's stack
// reassembled from fragments.
func reassembled(t *testing.T, ns *nstest.Netns) uint64 {
	t.Helper()
	out := ns.Run(t, "cat", "/proc/net/snmp")
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Ip:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "ReasmOKs" && i < len(f) {
				v, err := strconv.ParseUint(f[i], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
		}
	}
	t.Fatalf("no Ip ReasmOKs in /proc/net/snmp:\n%s", out)
	return 0
}

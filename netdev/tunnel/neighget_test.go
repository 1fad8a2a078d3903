package tunnel

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestNeighGet asks the kernel for single neighbour entries: a permanent
// one (IPv4 and IPv6), a STALE one with its state, and an address with no
// entry, and checks that a lookup allocates nothing.
func TestNeighGet(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.NewNetns(t, "ngh")
	dev := nstest.Name("ngv")
	ns.Run(t, "ip", "link", "add", dev, "type", "veth", "peer", "name", dev+"p")
	ns.Run(t, "ip", "link", "set", dev, "up")
	ns.Run(t, "ip", "addr", "add", "198.18.90.1/24", "dev", dev)
	ns.Run(t, "ip", "neigh", "add", "198.18.90.2", "lladdr", "02:00:00:00:90:02", "dev", dev, "nud", "permanent")
	ns.Run(t, "ip", "neigh", "add", "198.18.90.3", "lladdr", "02:00:00:00:90:03", "dev", dev, "nud", "stale")
	ns.Run(t, "ip", "neigh", "add", "2001:db8:90::2", "lladdr", "02:00:00:00:90:62", "dev", dev, "nud", "permanent")
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		c, err := openNeighConn()
		if err != nil {
			return err
		}
		defer c.close()
		for _, tc := range []struct {
			ip    string
			mac   string
			state uint16
		}{
			{"198.18.90.2", "02:00:00:00:90:02", unix.NUD_PERMANENT},
			{"198.18.90.3", "02:00:00:00:90:03", unix.NUD_STALE},
			{"2001:db8:90::2", "02:00:00:00:90:62", unix.NUD_PERMANENT},
		} {
			ip := net.ParseIP(tc.ip)
			if v4 := ip.To4(); v4 != nil {
				ip = v4
			}
			mac, state, err := c.get(ifi.Index, ip)
			if err != nil {
				t.Errorf("%s: %v", tc.ip, err)
				continue
			}
			if net.HardwareAddr(mac[:]).String() != tc.mac || state != tc.state {
				t.Errorf("%s: got %s state %#x, want %s state %#x", tc.ip, net.HardwareAddr(mac[:]), state, tc.mac, tc.state)
			}
		}
		if _, _, err := c.get(ifi.Index, net.ParseIP("198.18.90.9").To4()); !errors.Is(err, errNoNeigh) {
			t.Errorf("address without an entry: err %v, want errNoNeigh", err)
		}
		ip := net.ParseIP("198.18.90.2").To4()
		if n := testing.AllocsPerRun(20, func() { c.get(ifi.Index, ip) }); n != 0 {
			t.Errorf("%v allocations per lookup", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// neighReply builds a netlink datagram answering seq with an RTM_NEWNEIGH
// for mac in state.
func neighReply(seq uint32, state uint16, mac []byte) []byte {
	l := nlmsgHdrLen + ndmsgLen + 4 + len(mac)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint32(b[0:], uint32(l))
	binary.NativeEndian.PutUint16(b[4:], unix.RTM_NEWNEIGH)
	binary.NativeEndian.PutUint32(b[8:], seq)
	binary.NativeEndian.PutUint16(b[nlmsgHdrLen+8:], state)
	a := b[nlmsgHdrLen+ndmsgLen:]
	binary.NativeEndian.PutUint16(a[0:], uint16(4+len(mac)))
	binary.NativeEndian.PutUint16(a[2:], ndaLLAddr)
	copy(a[4:], mac)
	return b
}

// TestParseNeighReply: a late reply to an earlier request is skipped, the
// answer after it read, and an error message is the kernel's errno.
func TestParseNeighReply(t *testing.T) {
	mac := []byte{2, 0, 0, 0, 0, 7}
	b := append(neighReply(6, unix.NUD_STALE, []byte{2, 0, 0, 0, 0, 6}), neighReply(7, unix.NUD_REACHABLE, mac)...)
	got, state, done, err := parseNeighReply(b, 7)
	if !done || err != nil || state != unix.NUD_REACHABLE || string(got[:]) != string(mac) {
		t.Errorf("got %x state %#x done %v err %v", got, state, done, err)
	}
	if _, _, done, _ := parseNeighReply(b[:len(b)/2], 7); done {
		t.Error("a datagram with only an earlier request's reply was taken as the answer")
	}
	e := make([]byte, nlmsgHdrLen+4)
	binary.NativeEndian.PutUint32(e[0:], uint32(len(e)))
	binary.NativeEndian.PutUint16(e[4:], unix.NLMSG_ERROR)
	binary.NativeEndian.PutUint32(e[8:], 7)
	errno := -int32(unix.EINVAL)
	binary.NativeEndian.PutUint32(e[nlmsgHdrLen:], uint32(errno))
	if _, _, done, err := parseNeighReply(e, 7); !done || !errors.Is(err, unix.EINVAL) {
		t.Errorf("error message: done %v err %v", done, err)
	}
}

// FuzzParseNeighReply: any datagram is read without a panic or a read
// out of bounds, and one that holds no answer reports no error.
func FuzzParseNeighReply(f *testing.F) {
	f.Add(neighReply(1, unix.NUD_REACHABLE, []byte{2, 0, 0, 0, 0, 1}), uint32(1))
	f.Add(neighReply(1, unix.NUD_STALE, []byte{2, 0, 0}), uint32(1))
	f.Add([]byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, seq uint32) {
		if _, _, done, err := parseNeighReply(b, seq); !done && err != nil {
			t.Fatalf("no answer but an error %v from %x", err, b)
		}
	})
}

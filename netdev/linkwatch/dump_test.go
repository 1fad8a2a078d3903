package linkwatch

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestTableMatchesNetlink: in a namespace of its own with links of several
// kinds (loopback, veths, a tap), the
// table holds what vishvananda/netlink's LinkList reports of each, follows
// a change of MTU, address and state at the next dump, and drops a deleted
// link; a dump that finds nothing changed allocates nothing per link.
func TestTableMatchesNetlink(t *testing.T) {
	ns := nstest.NewNetns(t, "lwd")
	ns.Run(t, "ip", "link", "add", "va", "type", "veth", "peer", "name", "vb")
	ns.Run(t, "ip", "link", "add", "d0", "mtu", "9000", "type", "veth", "peer", "name", "e0")
	ns.Run(t, "ip", "tuntap", "add", "t0", "mode", "tap")
	for i := range 25 {
		ns.Run(t, "ip", "link", "add", fmt.Sprintf("d%d", i+1), "type", "veth", "peer", "name", fmt.Sprintf("e%d", i+1))
	}
	ns.Run(t, "ip", "link", "set", "va", "up")
	ns.Run(t, "ip", "link", "set", "d0", "up")

	var tab Table
	check := func(when string) {
		t.Helper()
		var links []netlink.Link
		err := ns.Do(func() error {
			if err := tab.Dump(); err != nil {
				return err
			}
			var err error
			links, err = netlink.LinkList()
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if tab.Len() != len(links) {
			t.Errorf("%s: %d links in the table, %d listed", when, tab.Len(), len(links))
		}
		for _, l := range links {
			a := l.Attrs()
			got, ok := tab.Get(a.Name)
			want := Attrs{Index: a.Index, MTU: a.MTU, Flags: a.RawFlags, MAC: a.HardwareAddr.String()}
			if !ok || got != want {
				t.Errorf("%s: %s: %+v (found %v), want %+v", when, a.Name, got, ok, want)
			}
		}
	}
	check("first dump")
	ns.Run(t, "ip", "link", "set", "vb", "mtu", "1400", "address", "02:00:c6:12:00:99", "up")
	ns.Run(t, "ip", "link", "del", "t0")
	check("after changes")
	if _, ok := tab.Get("t0"); ok {
		t.Error("a deleted link is still in the table")
	}
	if a, _ := tab.Get("vb"); a.MTU != 1400 || a.MAC != "02:00:c6:12:00:99" || a.Flags&unix.IFF_UP == 0 {
		t.Errorf("vb after the change: %+v", a)
	}
	// A link a failed dump saw (it had started the next generation)
	// and the next dump does not see is gone after it.
	tab.gen++
	tab.update([]byte("ghost"), &Attrs{Index: 999}, nil, tab.gen)
	check("after a failed dump")
	if _, ok := tab.Get("ghost"); ok {
		t.Error("a link only a failed dump saw survived the next dump")
	}
	var err error
	allocs := testing.AllocsPerRun(5, func() {
		ns.Do(func() error { err = tab.Dump(); return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	// ns.Do's goroutine and thread, the socket, a sockaddr per read: a
	// few dozen however many links (each would cost more than one).
	if allocs > 40 {
		t.Errorf("a dump of %d unchanged links allocates %v times", tab.Len(), allocs)
	}
}

// nlMsg builds one netlink message of type typ with sequence seq.
func nlMsg(typ, flags uint16, seq uint32, body []byte) []byte {
	b := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body)+4)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(unix.SizeofNlMsghdr+len(body)))
	ne.PutUint16(b[4:], typ)
	ne.PutUint16(b[6:], flags)
	ne.PutUint32(b[8:], seq)
	b = append(b, body...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func rtAttr(typ uint16, v []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofRtAttr+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func linkMsg(seq uint32, index int32, flags uint32, name string, mtu uint32, mac []byte) []byte {
	body := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(body[4:], uint32(index))
	binary.NativeEndian.PutUint32(body[8:], flags)
	body = append(body, rtAttr(unix.IFLA_IFNAME, append([]byte(name), 0))...)
	body = append(body, rtAttr(unix.IFLA_MTU, binary.NativeEndian.AppendUint32(nil, mtu))...)
	if mac != nil {
		body = append(body, rtAttr(unix.IFLA_ADDRESS, mac)...)
	}
	return nlMsg(unix.RTM_NEWLINK, unix.NLM_F_MULTI, seq, body)
}

// TestParseLinks: links of the dump's sequence are reported with their
// attributes, other sequences' messages skipped, the done message ends
// the dump, and an error or an interrupted dump is an error.
func TestParseLinks(t *testing.T) {
	var b []byte
	b = append(b, linkMsg(7, 3, unix.IFF_UP, "eth0", 1500, []byte{2, 0, 0, 0, 0, 1})...)
	b = append(b, linkMsg(6, 4, 0, "stale", 1500, nil)...)
	b = append(b, linkMsg(7, 5, 0, "ip6tnl0", 1452, make([]byte, 16))...)
	b = append(b, nlMsg(unix.NLMSG_DONE, unix.NLM_F_MULTI, 7, make([]byte, 4))...)
	var got []string
	done, err := parseLinks(b, 7, func(name []byte, a *Attrs, mac []byte) {
		got = append(got, fmt.Sprintf("%s %d %d %#x %x", name, a.Index, a.MTU, a.Flags, mac))
	})
	want := []string{"eth0 3 1500 0x1 020000000001", "ip6tnl0 5 1452 0x0 "}
	if !done || err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("done %v err %v links %q, want %q", done, err, got, want)
	}
	eperm := -int32(unix.EPERM)
	errMsg := nlMsg(unix.NLMSG_ERROR, 0, 7, binary.NativeEndian.AppendUint32(make([]byte, 0, 20), uint32(eperm)))
	if _, err := parseLinks(errMsg, 7, func([]byte, *Attrs, []byte) {}); err != unix.EPERM {
		t.Errorf("error message: %v, want EPERM", err)
	}
	intr := linkMsg(7, 3, 0, "eth0", 1500, nil)
	binary.NativeEndian.PutUint16(intr[6:], unix.NLM_F_MULTI|unix.NLM_F_DUMP_INTR)
	if _, err := parseLinks(intr, 7, func([]byte, *Attrs, []byte) {}); err != errDumpInterrupted {
		t.Errorf("interrupted dump: %v", err)
	}
	if done, err := parseLinks(b[:len(b)-3], 7, func([]byte, *Attrs, []byte) {}); done || err == nil {
		t.Errorf("a cut message: done %v, err %v", done, err)
	}
}

// FuzzParseLinks: any read's worth of bytes is parsed without a panic, and
// the slices handed out stay within the input.
func FuzzParseLinks(f *testing.F) {
	f.Add(linkMsg(1, 3, unix.IFF_UP, "eth0", 1500, []byte{2, 0, 0, 0, 0, 1}))
	f.Add(append(linkMsg(1, 1, 0, "lo", 65536, make([]byte, 6)), nlMsg(unix.NLMSG_DONE, 0, 1, make([]byte, 4))...))
	f.Add(nlMsg(unix.NLMSG_ERROR, 0, 1, make([]byte, 20)))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseLinks(b, 1, func(name []byte, a *Attrs, mac []byte) {
			if len(name) == 0 || len(name) > len(b) || len(mac) > len(b) {
				t.Fatalf("name of %d bytes, address of %d, from %d", len(name), len(mac), len(b))
			}
		})
	})
}

package tunnel

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestXDPPortToPort: two ports with underlay=afxdp exchange frames through
// their AF_XDP sockets once the kernel knows the neighbours (the first
// packets go the raw path, which makes it resolve them), while the host's
// own traffic on the interface (ping) still works.
func TestXDPPortToPort(t *testing.T) {
	nstest.RequireTool(t, "ping")
	u := newUnderlay(t)
	for _, c := range []struct {
		kind Kind
		v6   bool
	}{{VXLAN, false}, {Geneve, false}, {VXLAN, true}, {Geneve, true}} {
		la, lb := u.a4, u.b4
		if c.v6 {
			la, lb = u.ip6(t)
		}
		kind := c.kind
		t.Run(kind.String()+map[bool]string{false: "4", true: "6"}[c.v6], func(t *testing.T) {
			pa := openIn(t, u.a, Options{Kind: kind, Remote: lb, Local: la, Key: 100, TTL: 33, TOS: 0x10, Csum: true, Underlay: UnderlayAFXDP})
			pb := openIn(t, u.b, Options{Kind: kind, Remote: la, Local: lb, Key: 100, Underlay: UnderlayAFXDP})
			pool := packet.NewPool(256, packet.DefaultBufSize)
			// The host's traffic passes the program both ways.
			u.a.Run(t, "ping", "-c1", "-W2", lb.String())
			nstest.WaitFor(t, 5*time.Second, "frames through the AF_XDP sockets", func() bool {
				sendEach(t, pa, pool, 8)
				sendEach(t, pb, pool, 8)
				got := recvAll(t, pb, pool, 8)
				recvAll(t, pa, pool, 8)
				if len(got) == 0 {
					return false
				}
				for i, pkt := range got {
					if !bytes.Equal(pkt.Data(), frame(byte(i%8))) {
						t.Fatalf("frame %d: %x", i, pkt.Data())
					}
					want := flow.Tunnel{Src: mapped(la), Dst: mapped(lb), Flags: flow.TunFlagKey, TTL: 33, TOS: 0x10}
					if !pkt.HasTunnel || pkt.TunnelID != 100 || pkt.Tunnel != want {
						t.Fatalf("frame %d metadata: %v %d %+v, want %+v", i, pkt.HasTunnel, pkt.TunnelID, pkt.Tunnel, want)
					}
				}
				sa, sb := pa.UnderlayStats(), pb.UnderlayStats()
				return sa.TxPackets > 0 && sb.RxPackets > 0 && sb.TxPackets > 0 && sa.RxPackets > 0
			})
			if d := pb.Drops(); d != ([NumCauses]uint64{}) {
				t.Errorf("drops %v", d)
			}
			// A run a single datagram could carry (eight 64-byte
			// frames) goes through the ring frame by frame; a longer one
			// leaves as one segmented send on the raw path, which the
			// peer's program passes to the kernel whole (generic XDP on a
			// veth: longer than the MTU) or sees datagram by datagram
			// (native). All of both arrives.
			for _, c := range []struct{ n, raw int }{{8, 0}, {32, 32}} {
				before := pa.UnderlayStats().FallbackTx
				if n := sendFrames(t, pa, pool, c.n, nil); n != c.n {
					t.Fatalf("run of %d: sent %d", c.n, n)
				}
				if d := pa.UnderlayStats().FallbackTx - before; d != uint64(c.raw) {
					t.Errorf("run of %d: %d packets on the raw path, want %d", c.n, d, c.raw)
				}
				recvRun(t, pb, pool, c.n)
			}
			if d := pb.Drops(); d != ([NumCauses]uint64{}) {
				t.Errorf("drops after the runs %v", d)
			}
			u.b.Run(t, "ping", "-c1", "-W2", la.String())
			if m := pa.Status(); m["underlay"] != "afxdp" || m["underlay_iface"] != u.devA {
				t.Errorf("status %v", m)
			}
		})
	}
}

// recvRun polls every rx queue of p (AF_XDP sockets and the UDP socket)
// until n frames arrived, and frees them.
func recvRun(t *testing.T, p *Port, pool *packet.Pool, n int) {
	t.Helper()
	got := 0
	nstest.WaitFor(t, 5*time.Second, "the run", func() bool {
		for q := range p.NumRxQueues() {
			var b packet.Batch
			p.Recv(q, pool, &b)
			got += b.N
			b.FreeAll()
		}
		return got >= n
	})
	if got != n {
		t.Errorf("run: received %d frames, want %d", got, n)
	}
}

// TestXDPShortRunFromSocketPort: a socket-underlay port never sends a
// segmented send a single datagram could carry, so a peer whose generic
// XDP program (on a veth) sees such a send as one frame gets every frame
// of a short run, datagram by datagram (one 600-byte frame with a
// partial checksum would be dropped as a bad header).
func TestXDPShortRunFromSocketPort(t *testing.T) {
	u := newUnderlay(t)
	pa := openIn(t, u.a, Options{Remote: u.b4, Local: u.a4, Key: 7, Csum: true})
	pb := openIn(t, u.b, Options{Remote: u.a4, Local: u.b4, Key: 7, Underlay: UnderlayAFXDP})
	if m := pb.Status(); m["underlay_xdp_mode"] != "generic" {
		t.Fatalf("on a veth the program should be generic: status %v", m)
	}
	pool := packet.NewPool(256, packet.DefaultBufSize)
	nstest.WaitFor(t, 5*time.Second, "the first frames", func() bool {
		sendEach(t, pa, pool, 1)
		return len(recvAll(t, pb, pool, 1)) > 0
	})
	for range 3 {
		if n := sendFrames(t, pa, pool, 8, nil); n != 8 {
			t.Fatalf("sent %d of 8", n)
		}
		recvRun(t, pb, pool, 8)
	}
	if d := pb.Drops(); d != ([NumCauses]uint64{}) {
		t.Errorf("drops %v", d)
	}
}

// TestXDPOptions: underlay=afxdp refuses what it cannot serve, and a
// second port on one interface.
func TestXDPOptions(t *testing.T) {
	u := newUnderlay(t)
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Remote: u.b4, Underlay: UnderlayAFXDP}, "local_ip"},
		{Options{Remote: u.b6, Local: u.a4, Underlay: UnderlayAFXDP}, "different families"},
		{Options{Remote: u.b4, Local: u.a4, NoDF: true, Underlay: UnderlayAFXDP}, "df_default"},
		{Options{Remote: u.b4, Local: netipMust("198.18.21.1"), Underlay: UnderlayAFXDP}, "no interface"},
	} {
		err := u.a.Do(func() error {
			p, err := New("tun", c.o)
			if p != nil {
				p.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one about %s", c.o, err, c.want)
		}
	}
	openIn(t, u.a, Options{Remote: u.b4, Local: u.a4, Underlay: UnderlayAFXDP})
	err := u.a.Do(func() error {
		p, err := New("tun2", Options{Remote: u.b4, Local: u.a4, DstPort: 4790, Underlay: UnderlayAFXDP})
		if p != nil {
			p.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "already carries tunnel port tun") {
		t.Errorf("second port on one interface: %v", err)
	}
	if _, err := ParseUnderlay("dpdk"); err == nil {
		t.Error("underlay dpdk accepted")
	}
}

// sendEach sends n frames one per batch, as sparse traffic comes.
func sendEach(t *testing.T, p *Port, pool *packet.Pool, n int) {
	t.Helper()
	for i := range n {
		var b packet.Batch
		pkt := pool.Get()
		pkt.SetData(frame(byte(i)))
		flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
		pkt.KeyValid = true
		b.Add(pkt)
		p.Send(0, &b)
		pkt.Free()
	}
}

func netipMust(s string) netip.Addr { return netip.MustParseAddr(s) }

// TestXDPNoAllocs: a batch sent and received through the AF_XDP sockets
// allocates nothing once the neighbour is cached.
func TestXDPNoAllocs(t *testing.T) {
	u := newUnderlay(t)
	pa := openIn(t, u.a, Options{Remote: u.b4, Key: 1, Local: u.a4, Underlay: UnderlayAFXDP})
	pb := openIn(t, u.b, Options{Remote: u.a4, Key: 1, Local: u.b4, Underlay: UnderlayAFXDP})
	pool := packet.NewPool(1024, packet.DefaultBufSize)
	u.a.Run(t, "ping", "-c1", "-W2", u.b4.String()) // the neighbour
	nstest.WaitFor(t, 5*time.Second, "a frame through the AF_XDP socket", func() bool {
		sendFrames(t, pa, pool, 1, nil)
		recvAll(t, pb, pool, 1)
		return pa.UnderlayStats().TxPackets > 0
	})
	// The count is the process's: a notification resolved during it (an
	// IPv6 address finishing DAD adds a route) would count the
	// resolver's allocations. The published entries stay.
	pa.xdp.neigh.close()
	pb.xdp.neigh.close()
	f := frame(7)
	var sb, rb packet.Batch
	allocs := testing.AllocsPerRun(50, func() {
		// One frame per batch: sparse traffic, the AF_XDP ring's (runs
		// of one flow go the raw path).
		pkt := pool.Get()
		pkt.SetData(f)
		sb.Add(pkt)
		pa.Send(0, &sb)
		for _, p := range sb.Packets() {
			p.Free()
		}
		sb.N = 0
		for range 1000 {
			pb.Recv(0, pool, &rb)
			if rb.N > 0 {
				break
			}
		}
		for _, p := range rb.Packets() {
			p.Free()
		}
		rb.N = 0
	})
	if allocs != 0 {
		t.Errorf("%v allocations per send+recv batch", allocs)
	}
	if s := pa.UnderlayStats(); s.TxPackets < 50 {
		t.Errorf("underlay stats %+v: the frames did not go through the socket", s)
	}
}

// TestXDPFragmentsToSocket: a fragmented underlay datagram passes the
// program (the kernel reassembles it) and arrives on the port's UDP
// socket queue, the one after the AF_XDP queues.
func TestXDPFragmentsToSocket(t *testing.T) {
	u := newUnderlay(t)
	pa := openIn(t, u.a, Options{Remote: u.b4, Key: 100, Local: u.a4, Underlay: UnderlayAFXDP})
	if pa.NumRxQueues() != pa.xq+1 || pa.xq < 1 {
		t.Fatalf("%d rx queues, %d of them AF_XDP", pa.NumRxQueues(), pa.xq)
	}
	inner := make([]byte, 1600)
	copy(inner, frame(9))
	msg := encap100(inner)
	err := u.b.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DONT); err != nil {
			return err
		}
		return unix.Sendto(fd, msg, 0, &unix.SockaddrInet4{Port: 4789, Addr: u.a4.As4()})
	})
	if err != nil {
		t.Fatal(err)
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var got []byte
	nstest.WaitFor(t, 5*time.Second, "the reassembled datagram on the socket queue", func() bool {
		var b packet.Batch
		pa.Recv(pa.xq, pool, &b)
		for _, pkt := range b.Packets() {
			got = append([]byte(nil), pkt.Data()...)
			pkt.Free()
		}
		return got != nil
	})
	if !bytes.Equal(got, inner) {
		t.Errorf("received %d bytes, want the %d-byte inner frame", len(got), len(inner))
	}
}

// published is the port's published entry for dst, nil if none.
func published(p *Port, dst netip.Addr) *neighEntry {
	d := dst.As16()
	if dst.Is4() {
		d = mapped(dst)
	}
	if e := p.xdp.neigh.slots[neighSlot(&d)].Load(); e != nil && e.dst == d {
		return e
	}
	return nil
}

// xdpFlowing opens a port in a towards b with underlay=afxdp and waits
// until its frames leave through the AF_XDP socket.
func xdpFlowing(t *testing.T, u *underlay) (*Port, *packet.Pool) {
	t.Helper()
	pa := openIn(t, u.a, Options{Remote: u.b4, Key: 1, Local: u.a4, Underlay: UnderlayAFXDP})
	pool := packet.NewPool(256, packet.DefaultBufSize)
	u.a.Run(t, "ping", "-c1", "-W2", u.b4.String()) // the neighbour
	nstest.WaitFor(t, 5*time.Second, "a frame through the AF_XDP socket", func() bool {
		sendEach(t, pa, pool, 1)
		return pa.UnderlayStats().TxPackets > 0
	})
	return pa, pool
}

// TestXDPNeighbourChange: a neighbour entry replaced in the kernel is
// republished from the notification, without a packet asking for it.
func TestXDPNeighbourChange(t *testing.T) {
	nstest.RequireTool(t, "ping")
	u := newUnderlay(t)
	pa, pool := xdpFlowing(t, u)
	want := [6]byte{0x02, 0x5e, 0x10, 0x20, 0x30, 0x40}
	u.a.Run(t, "ip", "neigh", "replace", u.b4.String(), "lladdr", net.HardwareAddr(want[:]).String(), "dev", u.devA, "nud", "permanent")
	nstest.WaitFor(t, 10*time.Second, "the new MAC in the published entry", func() bool {
		e := published(pa, u.b4)
		return e != nil && e.ok && [6]byte(e.eth[0:6]) == want && !e.nudge.Load()
	})
	// An entry the kernel does not confirm is published with the nudge,
	// and the first packet that finds it goes the raw path.
	u.a.Run(t, "ip", "neigh", "replace", u.b4.String(), "lladdr", net.HardwareAddr(want[:]).String(), "dev", u.devA, "nud", "stale")
	var e *neighEntry
	nstest.WaitFor(t, 10*time.Second, "the STALE entry published with the nudge", func() bool {
		e = published(pa, u.b4)
		return e != nil && e.ok && e.nudge.Load()
	})
	raw := pa.UnderlayStats().FallbackTx
	sendEach(t, pa, pool, 1)
	if got := pa.UnderlayStats().FallbackTx; got != raw+1 || e.nudge.Load() {
		t.Errorf("raw path packets %d -> %d, nudge %v after one packet", raw, got, e.nudge.Load())
	}
}

// TestXDPRouteChange: a route that moves the destination to another
// interface sends it the raw path.
func TestXDPRouteChange(t *testing.T) {
	nstest.RequireTool(t, "ping")
	u := newUnderlay(t)
	pa, pool := xdpFlowing(t, u)
	dum, peer := nstest.Name("tudm"), nstest.Name("tudp")
	u.a.Run(t, "ip", "link", "add", dum, "type", "veth", "peer", "name", peer)
	u.a.Run(t, "ip", "link", "set", dum, "up")
	u.a.Run(t, "ip", "link", "set", peer, "up")
	u.a.Run(t, "ip", "route", "add", u.b4.String()+"/32", "dev", dum)
	nstest.WaitFor(t, 10*time.Second, "the destination unpublished", func() bool {
		e := published(pa, u.b4)
		return e != nil && !e.ok
	})
	raw := pa.UnderlayStats().FallbackTx
	sendEach(t, pa, pool, 1)
	if got := pa.UnderlayStats().FallbackTx; got <= raw {
		t.Errorf("raw path packets %d -> %d after the route change", raw, got)
	}
	// And back once the route goes.
	u.a.Run(t, "ip", "route", "del", u.b4.String()+"/32", "dev", dum)
	nstest.WaitFor(t, 10*time.Second, "the destination published again", func() bool {
		e := published(pa, u.b4)
		return e != nil && e.ok
	})
}

// FuzzNeighEventRelevant: the notification filter reads only within its
// buffer, whatever the kernel (or a corrupt datagram) hands it.
func FuzzNeighEventRelevant(f *testing.F) {
	msg := make([]byte, nlmsgHdrLen+ndmsgLen)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.RTM_NEWNEIGH)
	binary.NativeEndian.PutUint32(msg[nlmsgHdrLen+4:], 7)
	f.Add(msg, 7)
	f.Add(msg[:10], 7)
	f.Add(append(append([]byte{}, msg...), msg...), 3)
	f.Fuzz(func(t *testing.T, b []byte, ifindex int) {
		neighEventRelevant(b, ifindex)
	})
}

func TestNeighEventRelevant(t *testing.T) {
	mk := func(typ uint16, ifindex uint32) []byte {
		m := make([]byte, nlmsgHdrLen+ndmsgLen)
		binary.NativeEndian.PutUint32(m[0:], uint32(len(m)))
		binary.NativeEndian.PutUint16(m[4:], typ)
		binary.NativeEndian.PutUint32(m[nlmsgHdrLen+4:], ifindex)
		return m
	}
	for _, c := range []struct {
		b    []byte
		want bool
	}{
		{mk(unix.RTM_NEWNEIGH, 7), true},
		{mk(unix.RTM_DELNEIGH, 7), true},
		{mk(unix.RTM_NEWNEIGH, 8), false},
		{mk(unix.RTM_NEWROUTE, 8), true},
		{mk(unix.RTM_DELROUTE, 0), true},
		{mk(unix.RTM_NEWLINK, 7), false},
		{append(mk(unix.RTM_NEWNEIGH, 8), mk(unix.RTM_NEWNEIGH, 7)...), true},
		{mk(unix.RTM_NEWNEIGH, 7)[:nlmsgHdrLen+4], false},
	} {
		if got := neighEventRelevant(c.b, 7); got != c.want {
			t.Errorf("%x: %v, want %v", c.b, got, c.want)
		}
	}
}

// TestRunMinFollowsLocalMTU: a port with local_ip never sends a
// segmented run a single datagram on local_ip's interface could carry,
// however large that interface's MTU (a peer's generic XDP program tells
// runs from datagrams by length); without local_ip the underlay MTU
// (1500) stands.
func TestRunMinFollowsLocalMTU(t *testing.T) {
	u := newUnderlay(t)
	u.a.Run(t, "ip", "link", "set", u.devA, "mtu", "9000")
	jumbo := openIn(t, u.a, Options{Remote: u.b4, Local: u.a4, Key: 7})
	plain := openIn(t, u.a, Options{Remote: u.b4, Key: 7, DstPort: 4790})
	if jumbo.runMin != 9000-28 || plain.runMin != 1500-28 {
		t.Fatalf("runMin %d with local_ip on a 9000-byte interface, %d without local_ip", jumbo.runMin, plain.runMin)
	}
	b := frameBatch(packet.NewPool(64, packet.DefaultBufSize), runFrames, nil)
	defer b.FreeAll()
	dst := mapped(u.b4)
	if n := jumbo.gsoRun(b.Packets(), &dst, hdrKey(7), nil); n != 1 {
		t.Errorf("%d frames (%d bytes) make a run under a 9000-byte MTU", n, runFrames*(hdrLen+64))
	}
	if n := plain.gsoRun(b.Packets(), &dst, hdrKey(7), nil); n != runFrames {
		t.Errorf("%d of %d frames make a run under a 1500-byte MTU", n, runFrames)
	}
}

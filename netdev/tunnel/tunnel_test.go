package tunnel

import (
	"bytes"
	"fmt"
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev"
)

// underlay is two namespaces ("hosts") joined by a veth pair, with IPv4
// addresses 198.18.20.1/.2 and IPv6 2001:db8:20::1/::2.
type underlay struct {
	a, b       *nstest.Netns
	devA, devB string
	a4, b4     netip.Addr
	a6, b6     netip.Addr
	ready6     bool // b6 answered a ping from a (ip6)
}

func newUnderlay(t testing.TB) *underlay {
	t.Helper()
	nstest.RequireRoot(t)
	u := &underlay{a: nstest.NewNetns(t, "tuna"), b: nstest.NewNetns(t, "tunb"),
		devA: nstest.Name("tuva"), devB: nstest.Name("tuvb"),
		a4: netip.MustParseAddr("198.18.20.1"), b4: netip.MustParseAddr("198.18.20.2"),
		a6: netip.MustParseAddr("2001:db8:20::1"), b6: netip.MustParseAddr("2001:db8:20::2")}
	nstest.Run(t, "ip", "link", "add", u.devA, "netns", u.a.Name, "type", "veth", "peer", "name", u.devB, "netns", u.b.Name)
	for _, h := range []struct {
		ns       *nstest.Netns
		dev      string
		ip4, ip6 netip.Addr
	}{{u.a, u.devA, u.a4, u.a6}, {u.b, u.devB, u.b4, u.b6}} {
		h.ns.Run(t, "ip", "addr", "add", h.ip4.String()+"/24", "dev", h.dev)
		h.ns.Run(t, "ip", "addr", "add", h.ip6.String()+"/64", "dev", h.dev, "nodad")
		h.ns.Run(t, "ip", "link", "set", h.dev, "up")
	}
	// The underlay carries IPv4 before a test sends (IPv6: ip6). A
	// tunnel's first frames otherwise race the link's readiness, and a
	// neighbour solicitation lost then drops everything queued behind it.
	nstest.WaitFor(t, 10*time.Second, "the underlay to answer ping "+u.b4.String(), func() bool {
		_, err := u.a.Output("ping", "-c", "1", "-W", "0.1", u.b4.String())
		return err == nil
	})
	return u
}

// ip6 returns the IPv6 addresses of a and b once b answers a ping from
// a: here IPv6 answers about a second after the link is up (the first
// neighbour solicitation goes unanswered), and a tunnel test's frames
// sent before then waited in the neighbour queue, or were lost with it
// under load (TestGeneveOption/raw6 once received 0 of 64 in CI).
func (u *underlay) ip6(t testing.TB) (a, b netip.Addr) {
	t.Helper()
	if !u.ready6 {
		nstest.WaitFor(t, 10*time.Second, "the underlay to answer ping "+u.b6.String(), func() bool {
			_, err := u.a.Output("ping", "-c", "1", "-W", "0.1", u.b6.String())
			return err == nil
		})
		u.ready6 = true
	}
	return u.a6, u.b6
}

func openIn(t testing.TB, ns *nstest.Netns, o Options) *Port {
	t.Helper()
	var p *Port
	if err := ns.Do(func() (err error) { p, err = New("tun", o); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// frame is an inner Ethernet frame with a recognisable payload.
func frame(i byte) []byte {
	f := make([]byte, 64)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x88, 0xb5})
	f[20] = i
	return f
}

// runFrames is how many of frame's frames make a run a single datagram
// could not carry (gsoRun sends no shorter one segmented).
const runFrames = 32

// frameBatch is a batch of n of frame's frames from pool, each passed to
// set if not nil.
func frameBatch(pool *packet.Pool, n int, set func(*packet.Packet)) *packet.Batch {
	var b packet.Batch
	for i := range n {
		pkt := pool.Get()
		pkt.SetData(frame(byte(i)))
		flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
		pkt.KeyValid = true
		if set != nil {
			set(pkt)
		}
		b.Add(pkt)
	}
	return &b
}

func sendFrames(t *testing.T, p *Port, pool *packet.Pool, n int, set func(*packet.Packet)) int {
	t.Helper()
	b := frameBatch(pool, n, set)
	sent := p.Send(0, b)
	for _, pkt := range b.Packets() {
		pkt.Free()
	}
	return sent
}

// recvAll polls p until want frames arrived (or a bound passes) and
// returns them, freed after the test looks at them.
func recvAll(t *testing.T, p *Port, pool *packet.Pool, want int) []*packet.Packet {
	t.Helper()
	var got []*packet.Packet
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		var b packet.Batch
		p.Recv(0, pool, &b)
		got = append(got, b.Packets()...)
		if b.N == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	t.Cleanup(func() {
		for _, pkt := range got {
			pkt.Free()
		}
	})
	return got
}

func mapped(a netip.Addr) [16]byte { return a.As16() }

func TestPortToPort(t *testing.T) {
	u := newUnderlay(t)
	for _, c := range []struct {
		name       string
		kind       Kind
		v6         bool
		csum, nodf bool
		nooffload  bool
	}{
		{name: "vxlan4", kind: VXLAN}, {name: "vxlan6", kind: VXLAN, v6: true},
		{name: "geneve4", kind: Geneve}, {name: "geneve6", kind: Geneve, v6: true},
		// The kernel's UDP socket verifies the checksum the raw path
		// computed; with df_default=false the port sends on its socket.
		{name: "vxlan4-csum", kind: VXLAN, csum: true},
		{name: "vxlan4-nodf", kind: VXLAN, nodf: true}, {name: "geneve6-nodf", kind: Geneve, v6: true, nodf: true},
		{name: "vxlan4-nooffload", kind: VXLAN, nooffload: true}, {name: "geneve6-nooffload", kind: Geneve, v6: true, nooffload: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			la, lb := u.a4, u.b4
			if c.v6 {
				la, lb = u.ip6(t)
			}
			pa := openIn(t, u.a, Options{Kind: c.kind, Remote: lb, Key: 100, TTL: 33, TOS: 0x10, Csum: c.csum, NoDF: c.nodf, NoOffload: c.nooffload})
			if pa.raw == c.nodf {
				t.Fatalf("raw send path %v with NoDF %v", pa.raw, c.nodf)
			}
			pb := openIn(t, u.b, Options{Kind: c.kind, Remote: la, Key: 100, NoOffload: c.nooffload})
			if c.nooffload && (pa.tx[0].gso.on || pb.rx[0].gro != nil) {
				t.Fatalf("udp offload on with NoOffload")
			}
			pool := packet.NewPool(256, packet.DefaultBufSize)
			if n := sendFrames(t, pa, pool, runFrames, nil); n != runFrames {
				t.Fatalf("sent %d of %d; drops %v", n, runFrames, pa.Drops())
			}
			got := recvAll(t, pb, pool, runFrames)
			if len(got) != runFrames {
				t.Fatalf("received %d of %d; drops %v", len(got), runFrames, pb.Drops())
			}
			for i, pkt := range got {
				if !bytes.Equal(pkt.Data(), frame(byte(i))) {
					t.Errorf("frame %d: %x", i, pkt.Data())
				}
				want := flow.Tunnel{Src: mapped(la), Dst: mapped(lb), Flags: flow.TunFlagKey, TTL: 33, TOS: 0x10}
				if !pkt.HasTunnel || pkt.TunnelID != 100 || pkt.Tunnel != want {
					t.Errorf("frame %d metadata: %v %d %+v, want %+v", i, pkt.HasTunnel, pkt.TunnelID, pkt.Tunnel, want)
				}
			}
			if s := pb.Stats(); s.RxPackets != runFrames || s.RxBytes != runFrames*64 {
				t.Errorf("rx stats %+v", s)
			}
			if s := pa.Stats(); s.TxPackets != runFrames || s.TxBytes != runFrames*64 {
				t.Errorf("tx stats %+v", s)
			}
			// The frames of one flow left as one run, copied into one
			// buffer (small frames).
			if pa.tx[0].gso.on && pa.tx[0].gso.runs != 1 {
				t.Errorf("%d segmented sends, want 1", pa.tx[0].gso.runs)
			}
		})
	}
}

// TestBadInput: a wrong VNI, an unknown remote, a remote_ip=flow output
// without a destination and an oversize frame are each counted and
// dropped, and never delivered.
func TestBadInput(t *testing.T) {
	u := newUnderlay(t)
	pool := packet.NewPool(256, packet.DefaultBufSize)
	pb := openIn(t, u.b, Options{Remote: u.a4, Key: 100})
	wrongKey := openIn(t, u.a, Options{Remote: u.b4, Key: 200})
	if n := sendFrames(t, wrongKey, pool, 3, nil); n != 3 {
		t.Fatal("send failed")
	}
	nstest.WaitFor(t, 5*time.Second, "wrong VNI drops", func() bool {
		var b packet.Batch
		pb.Recv(0, pool, &b)
		if b.N != 0 {
			t.Fatalf("delivered a wrong-VNI frame")
		}
		return pb.Drops()[CauseWrongVNI] == 3
	})
	wrongKey.Close()

	// A second address on host A is not the port's remote: the kernel
	// does not deliver its datagrams to the port's socket (connected to
	// the remote), so they end as "no port" in host B's UDP counters.
	u.a.Run(t, "ip", "addr", "add", "198.18.20.3/24", "dev", u.devA)
	stranger := openIn(t, u.a, Options{Remote: u.b4, Key: 100, Local: netip.MustParseAddr("198.18.20.3")})
	noPorts := udpNoPorts(t, u.b)
	// Two flows: a run of one would leave as one segmented datagram,
	// which the receiver counts once.
	sendFrames(t, stranger, pool, 2, func(p *packet.Packet) { p.Hash, p.HashValid = uint32(p.Data()[20]), true })
	nstest.WaitFor(t, 5*time.Second, "host B to refuse the stranger's datagrams", func() bool {
		return udpNoPorts(t, u.b) >= noPorts+2
	})
	var sb packet.Batch
	if pb.Recv(0, pool, &sb); sb.N != 0 {
		t.Fatalf("delivered %d frames from an unknown remote", sb.N)
	}
	stranger.Close()

	flowPort := openIn(t, u.a, Options{KeyFlow: true})
	if n := sendFrames(t, flowPort, pool, 2, nil); n != 0 || flowPort.Drops()[CauseNoRemote] != 2 {
		t.Errorf("flow port without tun_dst sent %d, drops %v", n, flowPort.Drops())
	}
	// With tun_dst and tun_id set by the pipeline, it reaches pb.
	n := sendFrames(t, flowPort, pool, 2, func(p *packet.Packet) {
		p.Key.Tun.Dst = mapped(u.b4)
		p.Key.TunnelID = 100
	})
	if n != 2 {
		t.Fatalf("flow-based send %d, drops %v", n, flowPort.Drops())
	}
	if got := recvAll(t, pb, pool, 2); len(got) != 2 || got[0].TunnelID != 100 {
		t.Fatalf("flow-based output: received %d", len(got))
	}

	// Oversize: a 1600-byte inner frame on a 1500-byte underlay with DF.
	var b packet.Batch
	pkt := pool.Get()
	big := make([]byte, 1600)
	pkt.SetData(big)
	b.Add(pkt)
	fixed := openIn(t, u.a, Options{Remote: u.b4, Key: 100, DstPort: 4790})
	if n := fixed.Send(0, &b); n != 0 || fixed.Drops()[CauseMTU] != 1 {
		t.Errorf("oversize frame: sent %d, drops %v", n, fixed.Drops())
	}
	pkt.Free()
}

// TestRecvNoAllocs: a received batch allocates nothing.
func TestRecvNoAllocs(t *testing.T) {
	u := newUnderlay(t)
	// local_ip set: no source lookups (whose cache misses, once per
	// destination per second, may allocate).
	pa := openIn(t, u.a, Options{Remote: u.b4, Key: 1, Local: u.a4})
	pb := openIn(t, u.b, Options{Remote: u.a4, Key: 1})
	pool := packet.NewPool(1024, packet.DefaultBufSize)
	var sb, rb packet.Batch
	allocs := testing.AllocsPerRun(50, func() {
		for range 16 {
			pkt := pool.Get()
			pkt.SetLen(60)
			pkt.KeyValid = false
			sb.Add(pkt)
		}
		pa.Send(0, &sb)
		for _, p := range sb.Packets() {
			p.Free()
		}
		sb.N = 0
		for range 100 {
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
}

// TestSourcePortEntropy: on the raw path the outer UDP source port comes
// from the inner flow's hash, within Linux's range, so that the underlay's
// ECMP and the receiver's RSS see the tunnel's flows apart.
func TestSourcePortEntropy(t *testing.T) {
	u := newUnderlay(t)
	for _, v6 := range []bool{false, true} {
		la, lb := u.a4, u.b4
		if v6 {
			la, lb = u.ip6(t)
		}
		pa := openIn(t, u.a, Options{Remote: lb, Key: 5})
		var fd int
		if err := u.b.Do(func() (err error) {
			if fd, err = unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0); err != nil {
				return err
			}
			unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
			unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
			return unix.Bind(fd, &unix.SockaddrInet6{Port: 4789})
		}); err != nil {
			t.Fatal(err)
		}
		pool := packet.NewPool(64, packet.DefaultBufSize)
		sendFrames(t, pa, pool, 16, func(p *packet.Packet) { p.Hash, p.HashValid = uint32(p.Data()[20])*0x9e3779b9, true })
		ports := map[int]bool{}
		buf := make([]byte, 2048)
		for range 16 {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
			sa := from.(*unix.SockaddrInet6)
			if netip.AddrFrom16(sa.Addr) != netip.AddrFrom16(mapped(la)) || sa.Port < srcPortMin || sa.Port >= srcPortMax {
				t.Errorf("datagram from [%s]:%d", netip.AddrFrom16(sa.Addr), sa.Port)
			}
			if n != hdrLen+64 || buf[0] != vxlanFlagI || buf[6] != 5 {
				t.Errorf("payload %x", buf[:min(n, 16)])
			}
			ports[sa.Port] = true
		}
		unix.Close(fd)
		if len(ports) < 8 {
			t.Errorf("16 flows used only %d source ports: %v", len(ports), ports)
		}
		pa.Close()
	}
}

// udpNoPorts is the UDP NoPorts counter of a namespace: datagrams no
// socket took.
func udpNoPorts(t *testing.T, ns *nstest.Netns) uint64 {
	t.Helper()
	out := ns.Run(t, "cat", "/proc/net/snmp")
	var names []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "NoPorts" && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	t.Fatalf("no Udp NoPorts in /proc/net/snmp:\n%s", out)
	return 0
}

// TestSharedUDPPort: ports to different peers share UDP port 4789 on one
// host, each receiving its own peer's packets, and a remote_ip=flow port on
// the same UDP port receives everyone else's.
func TestSharedUDPPort(t *testing.T) {
	u := newUnderlay(t)
	u.a.Run(t, "ip", "addr", "add", "198.18.20.3/24", "dev", u.devA)
	u.a.Run(t, "ip", "addr", "add", "198.18.20.4/24", "dev", u.devA)
	a3, a4 := netip.MustParseAddr("198.18.20.3"), netip.MustParseAddr("198.18.20.4")
	// Host B: one port per peer (.1 and .3) and a flow port.
	p1 := openIn(t, u.b, Options{Remote: u.a4, Key: 1})
	p3 := openIn(t, u.b, Options{Remote: a3, Key: 3})
	pf := openIn(t, u.b, Options{KeyFlow: true})
	pool := packet.NewPool(256, packet.DefaultBufSize)
	for _, c := range []struct {
		local netip.Addr
		key   uint32
		to    *Port
	}{{u.a4, 1, p1}, {a3, 3, p3}, {a4, 4, pf}} {
		s := openIn(t, u.a, Options{Remote: u.b4, Key: c.key, Local: c.local, DstPort: 4789})
		if n := sendFrames(t, s, pool, 4, nil); n != 4 {
			t.Fatalf("send from %s: %d", c.local, n)
		}
		got := recvAll(t, c.to, pool, 4)
		if len(got) != 4 {
			t.Fatalf("frames from %s: %d of 4 on the right port", c.local, len(got))
		}
		for _, pkt := range got {
			if pkt.TunnelID != uint64(c.key) || pkt.Tunnel.Src != mapped(c.local) {
				t.Errorf("from %s: tun_id %d src %v", c.local, pkt.TunnelID, netip.AddrFrom16(pkt.Tunnel.Src))
			}
		}
		s.Close()
	}
	for _, p := range []*Port{p1, p3, pf} {
		if d := p.Drops(); d != ([NumCauses]uint64{}) {
			t.Errorf("drops %v", d)
		}
	}
}

// TestSegmentedSend: a run of equal-size frames of one flow (the last
// shorter) leaves with one segmented send and arrives as separate
// datagrams, in order, with their metadata; a run too big for the path
// falls back to single sends and is counted as oversize, not lost
// silently.
func TestSegmentedSend(t *testing.T) {
	u := newUnderlay(t)
	for _, v6 := range []bool{false, true} {
		la, lb := u.a4, u.b4
		if v6 {
			la, lb = u.ip6(t)
		}
		pa := openIn(t, u.a, Options{Remote: lb, Key: 7})
		pb := openIn(t, u.b, Options{Remote: la, Key: 7})
		if !pa.tx[0].gso.on {
			t.Skip("the kernel has no UDP segmentation offload")
		}
		pool := packet.NewPool(256, packet.DefaultBufSize)
		var b packet.Batch
		const n = 20
		for i := range n {
			pkt := pool.Get()
			f := make([]byte, 1400)
			if i == n-1 {
				f = f[:900]
			}
			copy(f, frame(byte(i)))
			pkt.SetData(f)
			pkt.Hash, pkt.HashValid = 42, true
			b.Add(pkt)
		}
		if sent := pa.Send(0, &b); sent != n {
			t.Fatalf("sent %d of %d, drops %v", sent, n, pa.Drops())
		}
		if pa.tx[0].gso.runs != 1 || pa.TxKicks(0) != 1 {
			t.Errorf("%d segmented sends, %d kicks; want 1, 1", pa.tx[0].gso.runs, pa.TxKicks(0))
		}
		sentRun := b
		// Batches with room for 7: a coalesced run is handed out over
		// several calls.
		var got []*packet.Packet
		filler := make([]*packet.Packet, packet.BatchSize-7)
		for i := range filler {
			filler[i] = pool.Get()
		}
		nstest.WaitFor(t, 5*time.Second, "the run", func() bool {
			var b packet.Batch
			for _, f := range filler {
				b.Add(f)
			}
			if k := pb.Recv(0, pool, &b); k > 7 {
				t.Fatalf("Recv added %d to a batch with room for 7", k)
			}
			got = append(got, b.Packets()[len(filler):]...)
			return len(got) >= n
		})
		for _, f := range filler {
			f.Free()
		}
		t.Cleanup(func() {
			for _, pkt := range got {
				pkt.Free()
			}
		})
		if len(got) != n {
			t.Fatalf("received %d of %d, drops %v", len(got), n, pb.Drops())
		}
		if g := pb.rx[0].gro; g != nil {
			t.Logf("coalesced receives: %d", g.coalesced)
		}
		if g := pb.rx[0].gro; g != nil && g.coalesced == 0 {
			t.Errorf("the run was not received coalesced")
		}
		for i, pkt := range got {
			want := 1400
			if i == n-1 {
				want = 900
			}
			if pkt.Len() != want || pkt.Data()[20] != byte(i) || pkt.TunnelID != 7 {
				t.Errorf("datagram %d: len %d, mark %d, vni %d", i, pkt.Len(), pkt.Data()[20], pkt.TunnelID)
			}
		}
		if s := pa.Stats(); s.TxPackets != n || s.TxBytes != (n-1)*1400+900 {
			t.Errorf("tx stats %+v", s)
		}
		// Once more, to a UDP port of host B nobody listens on (now that
		// the neighbour is known), to count allocations: none per
		// packet, none per run.
		quiet := openIn(t, u.a, Options{Remote: lb, Key: 7, DstPort: 4999})
		if a := testing.AllocsPerRun(20, func() { quiet.Send(0, &sentRun) }); a != 0 {
			t.Errorf("a segmented send allocates %.1f times", a)
		}
		if quiet.tx[0].gso.runs == 0 {
			t.Errorf("the allocation check sent no segmented run")
		}
		for _, pkt := range sentRun.Packets() {
			pkt.Free()
		}

		b = packet.Batch{}
		for range 3 {
			pkt := pool.Get()
			pkt.SetData(make([]byte, 1600))
			pkt.Hash, pkt.HashValid = 42, true
			b.Add(pkt)
		}
		if sent := pa.Send(0, &b); sent != 0 || pa.Drops()[CauseMTU] != 3 {
			t.Errorf("oversize run: sent %d, drops %v", sent, pa.Drops())
		}
		for _, pkt := range b.Packets() {
			pkt.Free()
		}
		if !pa.tx[0].gso.on {
			t.Errorf("one oversize run turned segmentation off")
		}
	}
}

// ipFrame is an inner Ethernet frame holding an IPv4 (or IPv6) packet with
// the given TOS (traffic class) and TTL (hop limit).
func ipFrame(v6 bool, tos, ttl uint8, i byte) []byte {
	f := make([]byte, 14+40+26)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1})
	ip := f[14:]
	if v6 {
		f[12], f[13] = 0x86, 0xdd
		ip[0], ip[1] = 0x60|tos>>4, tos<<4
		ip[4], ip[5], ip[6], ip[7] = 0, 26, 59, ttl
	} else {
		f[12], f[13] = 0x08, 0x00
		ip[0], ip[1], ip[3], ip[8], ip[9] = 0x45, tos, 66, ttl, 253
	}
	f[len(f)-1] = i
	return f
}

func TestOuterTOSTTL(t *testing.T) {
	for _, c := range []struct {
		name             string
		o                Options
		frame            []byte
		wantTOS, wantTTL uint8
	}{
		{"fixed, not-ECT", Options{TOS: 0x20, TTL: 64}, ipFrame(false, 0xb8, 9, 0), 0x20, 64},
		{"fixed, ECT(1) copied", Options{TOS: 0x20, TTL: 64}, ipFrame(false, 0xb9, 9, 0), 0x21, 64},
		{"fixed, CE as ECT(0)", Options{TOS: 0x20, TTL: 64}, ipFrame(true, 0xbb, 9, 0), 0x22, 64},
		{"fixed ECN bits kept for not-ECT", Options{TOS: 0x21, TTL: 64}, ipFrame(false, 0x00, 9, 0), 0x21, 64},
		{"inherit v4", Options{TOSInherit: true, TTLInherit: true, TTL: 64}, ipFrame(false, 0xb8, 9, 0), 0xb8, 9},
		{"inherit v6 ECT(0)", Options{TOSInherit: true, TTLInherit: true, TTL: 64}, ipFrame(true, 0x2a, 200, 0), 0x2a, 200},
		{"inherit, non-IP", Options{TOS: 0x10, TOSInherit: true, TTLInherit: true, TTL: 64}, frame(1), 0x10, 64},
		{"inherit behind a VLAN tag", Options{TOSInherit: true, TTLInherit: true, TTL: 64},
			append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0, 0, 5}, ipFrame(false, 0x48, 3, 0)[12:]...), 0x48, 3},
		{"short IPv4 header", Options{TOSInherit: true, TTLInherit: true, TTL: 64}, ipFrame(false, 0x48, 3, 0)[:30], 0, 64},
	} {
		p := &Port{opt: c.o}
		if tos, ttl := p.outerTOSTTL(c.frame); tos != c.wantTOS || ttl != c.wantTTL {
			t.Errorf("%s: tos %#x ttl %d, want %#x %d", c.name, tos, ttl, c.wantTOS, c.wantTTL)
		}
	}
}

// TestInheritOnTheWire: with tos=inherit and ttl=inherit every send path
// (raw, segmented, the UDP socket of df_default=false) puts the inner
// packet's DSCP, ECN and TTL in the outer header, as the receiver sees it.
func TestInheritOnTheWire(t *testing.T) {
	u := newUnderlay(t)
	for _, c := range []struct {
		name    string
		v6      bool
		nodf    bool
		oneFlow bool // one hash: the run goes segmented
	}{
		{name: "raw4"}, {name: "raw6", v6: true},
		{name: "gso4", oneFlow: true}, {name: "gso6", v6: true, oneFlow: true},
		{name: "socket4", nodf: true}, {name: "socket6", v6: true, nodf: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			la, lb := u.a4, u.b4
			if c.v6 {
				la, lb = u.ip6(t)
			}
			pa := openIn(t, u.a, Options{Remote: lb, Key: 7, TOSInherit: true, TTLInherit: true, NoDF: c.nodf})
			pb := openIn(t, u.b, Options{Remote: la, Key: 7})
			pool := packet.NewPool(256, packet.DefaultBufSize)
			var b packet.Batch
			// Inner TOS DSCP 46 with ECT(1), CE and not-ECT, and TTLs.
			inner := []struct{ tos, ttl, wantTOS uint8 }{{0xb9, 17, 0xb9}, {0xbb, 18, 0xba}, {0xb8, 19, 0xb8}}
			n := 4
			if c.oneFlow {
				n = runFrames // a run no datagram could carry
			}
			for i := range n {
				in := inner[0]
				if !c.oneFlow {
					in = inner[i%len(inner)]
				}
				pkt := pool.Get()
				pkt.SetData(ipFrame(c.v6, in.tos, in.ttl, byte(i)))
				pkt.Hash, pkt.HashValid = uint32(i), true
				if c.oneFlow {
					pkt.Hash = 1
				}
				b.Add(pkt)
			}
			runs := pa.tx[0].gso.runs
			if sent := pa.Send(0, &b); sent != n {
				t.Fatalf("sent %d of %d; drops %v", sent, n, pa.Drops())
			}
			for _, pkt := range b.Packets() {
				pkt.Free()
			}
			if c.oneFlow && pa.tx[0].gso.on && pa.tx[0].gso.runs == runs {
				t.Errorf("the run did not go segmented")
			}
			got := recvAll(t, pb, pool, n)
			if len(got) != n {
				t.Fatalf("received %d of %d; drops %v", len(got), n, pb.Drops())
			}
			for _, pkt := range got {
				i := int(pkt.Data()[len(pkt.Data())-1])
				in := inner[0]
				if !c.oneFlow {
					in = inner[i%len(inner)]
				}
				if pkt.Tunnel.TOS != in.wantTOS || pkt.Tunnel.TTL != in.ttl {
					t.Errorf("frame %d: outer tos %#x ttl %d, want %#x %d", i, pkt.Tunnel.TOS, pkt.Tunnel.TTL, in.wantTOS, in.ttl)
				}
			}
		})
	}
}

// TestStatus: a fixed-remote port reports the underlay interface towards
// its remote, its carrier and the outer source; it follows the link going
// down and the route going away.
func TestStatus(t *testing.T) {
	u := newUnderlay(t)
	pa := openIn(t, u.a, Options{Remote: u.b4, Key: 1})
	status := func() (m map[string]string) {
		u.a.Do(func() error { m = pa.Status(); return nil })
		return m
	}
	want := map[string]string{"tunnel_egress_iface": u.devA, "tunnel_egress_iface_carrier": "up", "tunnel_egress_src": u.a4.String()}
	if m := status(); !maps.Equal(m, want) {
		t.Errorf("status %v, want %v", m, want)
	}
	// The peer's end going down takes the carrier away.
	u.b.Run(t, "ip", "link", "set", u.devB, "down")
	nstest.WaitFor(t, 5*time.Second, "carrier down in the status", func() bool {
		return status()["tunnel_egress_iface_carrier"] == "down"
	})
	u.a.Run(t, "ip", "addr", "flush", "dev", u.devA)
	if m := status(); m["tunnel_egress_error"] == "" || m["tunnel_egress_iface"] != "" {
		t.Errorf("status without a route: %v", m)
	}
	if m := openIn(t, u.a, Options{Key: 1}).Status(); m != nil {
		t.Errorf("remote_ip=flow status %v", m)
	}
}

// pollIdle polls p's idle queue 0 until it must be backing off.
func pollIdle(t *testing.T, p *Port, pool *packet.Pool, b *packet.Batch) {
	t.Helper()
	for range 4 * PollBackoff {
		if p.Recv(0, pool, b) != 0 {
			t.Fatal("a frame on an idle tunnel")
		}
	}
}

// TestArmRxEndsBackoff: a queue that polled empty long enough to skip
// polls (PollBackoff) reads its socket at the first poll after ArmRx, so a
// PMD woken from its sleep by a datagram receives it at once.
func TestArmRxEndsBackoff(t *testing.T) {
	u := newUnderlay(t)
	for _, nooffload := range []bool{false, true} {
		t.Run(fmt.Sprintf("nooffload=%v", nooffload), func(t *testing.T) {
			pa := openIn(t, u.a, Options{Kind: VXLAN, Remote: u.b4, Key: 100, NoOffload: nooffload})
			pb := openIn(t, u.b, Options{Kind: VXLAN, Remote: u.a4, Key: 100, NoOffload: nooffload})
			pool := packet.NewPool(256, packet.DefaultBufSize)
			var b packet.Batch
			pollIdle(t, pb, pool, &b)
			if pb.rx[0].skip == 0 {
				t.Fatal("an idle queue polled without backing off")
			}
			if pb.ArmRx(0) {
				t.Error("ArmRx reported frames pending")
			}
			if n := sendFrames(t, pa, pool, 1, nil); n != 1 {
				t.Fatalf("sent %d of 1; drops %v", n, pa.Drops())
			}
			fds := []unix.PollFd{{Fd: int32(pb.RxFD(0)), Events: unix.POLLIN}}
			nstest.WaitFor(t, 5*time.Second, "the socket to poll readable", func() bool {
				n, _ := unix.Poll(fds, 100)
				return n == 1
			})
			if n := pb.Recv(0, pool, &b); n != 1 {
				t.Fatalf("first poll after ArmRx received %d frames, want 1", n)
			}
			b.Packets()[0].Free()
		})
	}
}

// TestArmRxKeepsBackoffLength: ArmRx ends the current skip but not the
// back-off's length, so a wake-up the tunnel did not cause costs one empty
// poll, after which the queue skips the long back-off again instead of
// climbing back to it one empty recvmmsg at a time.
func TestArmRxKeepsBackoffLength(t *testing.T) {
	u := newUnderlay(t)
	for _, nooffload := range []bool{false, true} {
		t.Run(fmt.Sprintf("nooffload=%v", nooffload), func(t *testing.T) {
			pb := openIn(t, u.b, Options{Kind: VXLAN, Remote: u.a4, Key: 100, NoOffload: nooffload})
			pool := packet.NewPool(256, packet.DefaultBufSize)
			var b packet.Batch
			pollIdle(t, pb, pool, &b)
			pb.ArmRx(0)
			if pb.rx[0].skip != 0 {
				t.Fatalf("skip %d after ArmRx, want 0", pb.rx[0].skip)
			}
			if pb.Recv(0, pool, &b) != 0 {
				t.Fatal("a frame on an idle tunnel")
			}
			if got := pb.rx[0].skip; got != PollBackoff {
				t.Errorf("skip %d after an empty poll following ArmRx, want %d", got, PollBackoff)
			}
		})
	}
}

// TestGSOConnected: with local_ip and remote_ip the segmentation sockets
// are connected (no route lookup per run); runs still arrive, and the
// port-unreachable error a connected socket collects when the peer had no
// socket costs no run: the send that collects it is tried again.
func TestGSOConnected(t *testing.T) {
	u := newUnderlay(t)
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("v6=%v", v6), func(t *testing.T) {
			la, lb := u.a4, u.b4
			if v6 {
				la, lb = u.ip6(t)
			}
			pa := openIn(t, u.a, Options{Kind: VXLAN, Local: la, Remote: lb, Key: 100})
			if !pa.tx[0].gso.on {
				t.Skip("no UDP segmentation offload")
			}
			if !pa.tx[0].gso.connected {
				t.Fatal("segmentation sockets not connected with local_ip and remote_ip")
			}
			pool := packet.NewPool(256, packet.DefaultBufSize)
			// Nobody listens on B yet: the run draws a port unreachable,
			// which the socket the flow's hash picks reports as an error.
			if n := sendFrames(t, pa, pool, runFrames, nil); n != runFrames {
				t.Fatalf("sent %d of %d; drops %v", n, runFrames, pa.Drops())
			}
			fd := pa.tx[0].gso.fds[flowHash(framePkt(t, pool))%gsoSockets]
			fds := []unix.PollFd{{Fd: int32(fd), Events: 0}}
			nstest.WaitFor(t, 5*time.Second, "the port unreachable to reach the socket", func() bool {
				n, _ := unix.Poll(fds, 100)
				return n == 1 && fds[0].Revents&unix.POLLERR != 0
			})
			pb := openIn(t, u.b, Options{Kind: VXLAN, Local: lb, Remote: la, Key: 100})
			if n := sendFrames(t, pa, pool, runFrames, nil); n != runFrames {
				t.Fatalf("sent %d of %d after the error; drops %v", n, runFrames, pa.Drops())
			}
			if got := recvAll(t, pb, pool, runFrames); len(got) != runFrames {
				t.Fatalf("received %d of %d; drops %v", len(got), runFrames, pb.Drops())
			}
			if pa.tx[0].gso.runs != 2 {
				t.Errorf("%d segmented sends, want 2", pa.tx[0].gso.runs)
			}
		})
	}
}

// framePkt is a packet as sendFrames builds its first one, for its hash.
func framePkt(t *testing.T, pool *packet.Pool) *packet.Packet {
	pkt := pool.Get()
	t.Cleanup(pkt.Free)
	pkt.SetData(frame(0))
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	pkt.KeyValid = true
	return pkt
}

// TestGeneveOption: with a TLV mapping on both ends, a packet carrying the
// mapped tun_metadata field leaves with the Geneve option (critical, as
// OVN's) and arrives with the field set, on the raw path (runs and single
// sends alike) and the socket path; one without the field arrives without
// it. A receiver without the mapping drops the critical option, counted.
func TestGeneveOption(t *testing.T) {
	u := newUnderlay(t)
	m := &netdev.TunnelOption{Class: 0x0102, Type: 0x80, Len: 4, Index: 3}
	for _, c := range []struct {
		name      string
		nodf, v6  bool
		nooffload bool
	}{{name: "raw"}, {name: "raw6", v6: true}, {name: "socket", nodf: true}, {name: "nooffload", nooffload: true}} {
		t.Run(c.name, func(t *testing.T) {
			la, lb := u.a4, u.b4
			if c.v6 {
				la, lb = u.ip6(t)
			}
			pa := openIn(t, u.a, Options{Kind: Geneve, Remote: lb, Key: 5, NoDF: c.nodf, NoOffload: c.nooffload})
			pb := openIn(t, u.b, Options{Kind: Geneve, Remote: la, Key: 5})
			pa.MapTunnelOption(m)
			pb.MapTunnelOption(m)
			pool := packet.NewPool(256, packet.DefaultBufSize)
			// One value for all, so that on the raw path the frames with
			// the option leave as one segmented run.
			val := func(int) [4]byte { return [4]byte{0, 1, 0xfe, 2} }
			// Frames 0..runFrames-1 carry the option; then runFrames
			// without it.
			withOpt := func(pkt *packet.Packet) {
				i := int(pkt.Data()[20])
				pkt.Key.Tun.SetOpt(3, val(i))
			}
			if n := sendFrames(t, pa, pool, runFrames, withOpt); n != runFrames {
				t.Fatalf("sent %d; drops %v", n, pa.Drops())
			}
			if n := sendFrames(t, pa, pool, runFrames, nil); n != runFrames {
				t.Fatalf("sent %d; drops %v", n, pa.Drops())
			}
			if pa.tx[0].gso.on && pa.tx[0].gso.runs != 2 {
				t.Errorf("%d segmented sends, want 2 (one run with the option, one without)", pa.tx[0].gso.runs)
			}
			got := recvAll(t, pb, pool, 2*runFrames)
			if len(got) != 2*runFrames {
				t.Fatalf("received %d of %d; drops %v", len(got), 2*runFrames, pb.Drops())
			}
			for i, pkt := range got {
				j := i % runFrames
				if !bytes.Equal(pkt.Data(), frame(byte(j))) {
					t.Fatalf("frame %d: %x", i, pkt.Data())
				}
				if i < runFrames {
					if pkt.Tunnel.OptIndex() != 3 || pkt.Tunnel.Opt != val(j) {
						t.Errorf("frame %d: option index %d value %x, want 3 and %x", i, pkt.Tunnel.OptIndex(), pkt.Tunnel.Opt, val(j))
					}
				} else if pkt.Tunnel.OptIndex() != -1 {
					t.Errorf("frame %d sent without the option arrived with index %d", i, pkt.Tunnel.OptIndex())
				}
			}
			// Without the mapping the critical option is not understood.
			pb.MapTunnelOption(nil)
			sendFrames(t, pa, pool, 2, withOpt)
			nstest.WaitFor(t, 5*time.Second, "the critical option dropped", func() bool {
				var b packet.Batch
				pb.Recv(0, pool, &b)
				b.FreeAll()
				return pb.Drops()[CauseCritical] == 2
			})
		})
	}
	// A VXLAN port takes no mapping.
	pv := openIn(t, u.a, Options{Kind: VXLAN, Remote: u.b4, Key: 9})
	pv.MapTunnelOption(m)
	if pv.optMap.Load() != nil {
		t.Error("a VXLAN port took a Geneve option mapping")
	}
}

// TestOptions: the mapped option is read whatever others surround it; an
// unknown critical option, or the mapped one with another length, fails.
func TestOptions(t *testing.T) {
	m := &netdev.TunnelOption{Class: 0x0102, Type: 0x80, Len: 4, Index: 0}
	other := []byte{0x01, 0x03, 0x01, 0x01, 9, 9, 9, 9} // non-critical, 4 bytes
	mine := []byte{0x01, 0x02, 0x80, 0x01, 0xa, 0xb, 0xc, 0xd}
	if v, found, ok := options(append(append([]byte{}, other...), mine...), m); !ok || !found || v != [4]byte{0xa, 0xb, 0xc, 0xd} {
		t.Errorf("mapped option after another: %x %v %v", v, found, ok)
	}
	if _, found, ok := options(other, m); !ok || found {
		t.Errorf("only a non-critical unknown option: found %v ok %v", found, ok)
	}
	if _, _, ok := options(mine, nil); ok {
		t.Error("a critical option with no mapping was accepted")
	}
	long := []byte{0x01, 0x02, 0x80, 0x02, 1, 2, 3, 4, 5, 6, 7, 8}
	if _, _, ok := options(long, m); ok {
		t.Error("the mapped critical option with another length was accepted")
	}
	var h [maxHdrLen]byte
	n := encapHeader(Geneve, &h, hdrKey(7)|hdrOpt|hdrKey(0x0a0b0c0d)<<32, m)
	if n != maxHdrLen || h[1] != geneveFlagC {
		t.Fatalf("encapHeader with the option: %d bytes, %x", n, h[:n])
	}
	hl, vni, _, _, ok := decap(Geneve, append(h[:n:n], innerFrame...))
	if v, found, ok2 := options(h[hdrLen:hl], m); !ok || !ok2 || !found || vni != 7 || v != [4]byte{0xa, 0xb, 0xc, 0xd} {
		t.Errorf("round trip: vni %d value %x found %v", vni, v, found)
	}
}

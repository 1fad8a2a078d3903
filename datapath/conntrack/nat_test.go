package conntrack

import (
	"net"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

func mapped(ip net.IP) (a [16]byte) {
	copy(a[:], ip.To16())
	return a
}

// trackNAT runs frame b through ct with p and applies the translation;
// it returns the conntrack fields and the key of the packet as it leaves.
func trackNAT(tb testing.TB, tr *Tracker, b []byte, p Params, pool *packet.Pool) (flow.Conntrack, flow.Key) {
	tb.Helper()
	k, _ := runNAT(tb, tr, b, p, pool)
	return k.CT, k
}

// runNAT is trackNAT returning the key and the frame as it leaves.
func runNAT(tb testing.TB, tr *Tracker, b []byte, p Params, pool *packet.Pool) (flow.Key, []byte) {
	tb.Helper()
	pkt := pool.Get()
	defer pkt.Free()
	pkt.SetData(b)
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	pkt.KeyValid = true
	rw := tr.Process(pkt, &p, 0)
	if !actions.ApplyList(rw.Actions(&pkt.Key, nil), pkt) {
		tb.Fatal("a NAT rewrite dropped the packet")
	}
	// The rewritten frame must extract to the key the rewrite left.
	var k flow.Key
	var off flow.Offsets
	flow.Extract(pkt.Data(), 1, &k, &off)
	k.CT = pkt.Key.CT
	if k != pkt.Key {
		tb.Fatalf("after NAT the key is not the frame's:\n key   %+v\n frame %+v", pkt.Key, k)
	}
	return pkt.Key, append([]byte(nil), pkt.Data()...)
}

func ip4u(ip net.IP) uint32 {
	v := ip.To4()
	return uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3])
}

func TestSNAT(t *testing.T) {
	tr, pool := New(), packet.NewPool(2, 2048)
	ext := net.IP{198, 18, 9, 9}
	snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(ext)}}
	ct, k := trackNAT(t, tr, udpFrame(t, ipA, ipB, 1000, 53), snat, pool)
	if ct.State != trk|nw|flow.CTSrcNAT || k.IPv4Src != ip4u(ext) || k.TpSrc != 1000 {
		t.Fatalf("out: %s, src %#x:%d", stateString(ct.State), k.IPv4Src, k.TpSrc)
	}
	// The reply comes to the outside address and goes back to A.
	ct, k = trackNAT(t, tr, udpFrame(t, ipB, ext, 53, 1000), Params{HasNAT: true}, pool)
	if ct.State != trk|est|rpl|flow.CTSrcNAT || k.IPv4Dst != ip4u(ipA) || k.TpDst != 1000 {
		t.Fatalf("back: %s, dst %#x:%d", stateString(ct.State), k.IPv4Dst, k.TpDst)
	}
	// Its original tuple is A's, before translation.
	if net.IP(ct.Src[12:]).String() != ipA.String() {
		t.Errorf("ct_nw_src %v, want %v", net.IP(ct.Src[12:]), ipA)
	}
	// Without nat in the ct, the packet is tracked but not translated.
	if _, k = trackNAT(t, tr, udpFrame(t, ipA, ipB, 1000, 53), Params{}, pool); k.IPv4Src != ip4u(ipA) {
		t.Errorf("ct without nat translated the packet")
	}
}

// TestSNATManyToOne: 10,000 hosts behind one address, all using the same
// source port: each connection gets its own port, none collides, and each
// reply finds its host.
func TestSNATManyToOne(t *testing.T) {
	tr, pool := New(), packet.NewPool(2, 2048)
	ext := net.IP{198, 18, 9, 9}
	snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(ext), MinPort: 20000, MaxPort: 40000}}
	ports := map[uint16]int{}
	for i := range 10_000 {
		src := net.IP{198, 19, byte(i >> 8), byte(i)}
		_, k := trackNAT(t, tr, udpFrame(t, src, ipB, 5000, 53), snat, pool)
		if k.IPv4Src != ip4u(ext) || k.TpSrc < 20000 || k.TpSrc > 40000 {
			t.Fatalf("connection %d translated to %#x:%d", i, k.IPv4Src, k.TpSrc)
		}
		if j, dup := ports[k.TpSrc]; dup {
			t.Fatalf("connections %d and %d both got port %d", j, i, k.TpSrc)
		}
		ports[k.TpSrc] = i
	}
	for p, i := range ports {
		_, k := trackNAT(t, tr, udpFrame(t, ipB, ext, 53, p), Params{HasNAT: true}, pool)
		if want := ip4u(net.IP{198, 19, byte(i >> 8), byte(i)}); k.IPv4Dst != want || k.TpDst != 5000 {
			t.Fatalf("reply to port %d went to %#x:%d, want host %d", p, k.IPv4Dst, k.TpDst, i)
		}
	}
	if tr.Len() != 10_000 {
		t.Errorf("%d connections", tr.Len())
	}
}

// TestDNAT: a virtual address translated to a backend, both ways, TCP.
func TestDNAT(t *testing.T) {
	tr, pool := New(), packet.NewPool(2, 2048)
	vip := net.IP{198, 18, 100, 1}
	dnat := Params{Commit: true, HasNAT: true, NAT: NAT{Dst: true, MinAddr: mapped(ipB), MinPort: 8080, MaxPort: 8080}}
	syn := seg{src: ipA, dst: vip, sport: 4000, dport: 80, seq: 10, syn: true, wscale: -1}
	ct, k := trackNAT(t, tr, tcpFrame(t, syn), dnat, pool)
	if ct.State != trk|nw|flow.CTDstNAT || k.IPv4Dst != ip4u(ipB) || k.TpDst != 8080 {
		t.Fatalf("SYN: %s, dst %#x:%d", stateString(ct.State), k.IPv4Dst, k.TpDst)
	}
	synack := seg{src: ipB, dst: ipA, sport: 8080, dport: 4000, seq: 99, ack: 11, syn: true, ackf: true, wscale: -1}
	ct, k = trackNAT(t, tr, tcpFrame(t, synack), Params{HasNAT: true}, pool)
	if ct.State != trk|est|rpl|flow.CTDstNAT || k.IPv4Src != ip4u(vip) || k.TpSrc != 80 {
		t.Fatalf("SYN-ACK: %s, src %#x:%d", stateString(ct.State), k.IPv4Src, k.TpSrc)
	}
	ack := seg{src: ipA, dst: vip, sport: 4000, dport: 80, seq: 11, ack: 100, ackf: true, payload: 10, wscale: -1}
	ct, k = trackNAT(t, tr, tcpFrame(t, ack), Params{HasNAT: true}, pool)
	if ct.State != trk|est|flow.CTDstNAT || k.IPv4Dst != ip4u(ipB) || k.TpDst != 8080 {
		t.Fatalf("data: %s, dst %#x:%d", stateString(ct.State), k.IPv4Dst, k.TpDst)
	}
	if d := tr.Dump(nil, 0); len(d) != 1 || d[0].String() != "tcp,orig=(src=198.18.0.1,dst=198.18.100.1,sport=4000,dport=80),reply=(src=198.18.0.2,dst=198.18.0.1,sport=8080,dport=4000),protoinfo=(state=ESTABLISHED)" {
		t.Errorf("dump: %v", d)
	}
}

// TestZeroSNAT: nat(src) without an address keeps the address and the
// port, and moves the port only when two connections would clash after
// translation (here: two hosts' connections SNATed to one address with
// the same port, then a third keeping its own).
func TestZeroSNAT(t *testing.T) {
	tr, pool := New(), packet.NewPool(2, 2048)
	ext := net.IP{198, 18, 9, 9}
	toExt := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(ext)}}
	zero := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true}}
	// A:1000 -> B:53 becomes ext:1000 -> B:53.
	if _, k := trackNAT(t, tr, udpFrame(t, ipA, ipB, 1000, 53), toExt, pool); k.IPv4Src != ip4u(ext) || k.TpSrc != 1000 {
		t.Fatalf("SNAT to ext: %#x:%d", k.IPv4Src, k.TpSrc)
	}
	// ext itself connecting from port 1000 to B:53 would clash with it.
	_, k := trackNAT(t, tr, udpFrame(t, ext, ipB, 1000, 53), zero, pool)
	if k.IPv4Src != ip4u(ext) || k.TpSrc == 1000 || k.TpSrc < 1024 {
		t.Fatalf("zero SNAT of a clashing connection: %#x:%d", k.IPv4Src, k.TpSrc)
	}
	// Without a clash nothing changes.
	if _, k = trackNAT(t, tr, udpFrame(t, ipB, ipA, 7, 8), zero, pool); k.IPv4Src != ip4u(ipB) || k.TpSrc != 7 {
		t.Fatalf("zero SNAT without a clash: %#x:%d", k.IPv4Src, k.TpSrc)
	}
}

func TestAddrRange(t *testing.T) {
	r := addrRange(ptr(mapped(net.IP{198, 18, 0, 254})), ptr(mapped(net.IP{198, 18, 1, 1})))
	if r.n != 4 {
		t.Fatalf("%d addresses, want 4", r.n)
	}
	for i, want := range []string{"198.18.0.254", "198.18.0.255", "198.18.1.0", "198.18.1.1"} {
		if a := r.at(uint64(i)); net.IP(a[:]).String() != want {
			t.Errorf("at(%d) = %v, want %s", i, net.IP(a[:]), want)
		}
	}
	// Carry into the high half of an IPv6 address; a huge range is capped.
	lo, hi := mapped(net.ParseIP("2001:db8::ffff:ffff:ffff:ffff")), mapped(net.ParseIP("2001:db9::"))
	if r = addrRange(&lo, &hi); r.n != 1<<16 {
		t.Fatalf("%d addresses, want the cap", r.n)
	}
	if a := r.at(1); net.IP(a[:]).String() != "2001:db8:0:1::" {
		t.Errorf("at(1) = %v", net.IP(a[:]))
	}
	if r = addrRange(&lo, &lo); r.n != 1 {
		t.Errorf("a one-address range has %d", r.n)
	}
	// Upside down (in either word) or without a top: the bottom alone.
	if r = addrRange(&hi, &lo); r.n != 1 || r.lo != hi {
		t.Errorf("an upside-down range: %d addresses from %v", r.n, net.IP(r.lo[:]))
	}
	if r = addrRange(ptr(mapped(net.IP{198, 18, 1, 1})), ptr(mapped(net.IP{198, 18, 0, 254}))); r.n != 1 {
		t.Errorf("an upside-down IPv4 range has %d", r.n)
	}
	if r = addrRange(&lo, &[16]byte{}); r.n != 1 {
		t.Errorf("a range without a top has %d", r.n)
	}
}

// TestNATPersistent: with persistent, a client's connections to every
// peer leave with one address of the range (the source address alone
// picks it); without it, one client's connections spread over the range.
func TestNATPersistent(t *testing.T) {
	lo, hi := net.IP{198, 18, 9, 1}, net.IP{198, 18, 9, 16}
	for _, persistent := range []bool{true, false} {
		tr, pool := New(), packet.NewPool(2, 2048)
		snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(lo), MaxAddr: mapped(hi), Persistent: persistent}}
		perClient := map[uint32]map[uint32]bool{}
		for c := range 8 {
			client := net.IP{198, 19, 0, byte(c + 1)}
			perClient[ip4u(client)] = map[uint32]bool{}
			for i := range 50 {
				peer := net.IP{198, 19, 1, byte(i + 1)}
				_, k := trackNAT(t, tr, udpFrame(t, client, peer, uint16(1000+i), 53), snat, pool)
				if k.IPv4Src < ip4u(lo) || k.IPv4Src > ip4u(hi) {
					t.Fatalf("translated to %#x, outside the range", k.IPv4Src)
				}
				perClient[ip4u(client)][k.IPv4Src] = true
			}
		}
		all := map[uint32]bool{}
		for client, addrs := range perClient {
			if persistent && len(addrs) != 1 {
				t.Errorf("persistent: client %#x got %d addresses, want 1", client, len(addrs))
			}
			if !persistent && len(addrs) < 2 {
				t.Errorf("not persistent: client %#x's 50 connections all got one address", client)
			}
			for a := range addrs {
				all[a] = true
			}
		}
		if len(all) < 2 {
			t.Errorf("persistent=%v: 8 clients share one address of 16", persistent)
		}
	}
}

// TestNATRandomPort: the same connection made again after a flush gets
// the same port with the default hash and (almost surely) another with
// random; either way the port is from the range and every reply finds
// its connection.
func TestNATRandomPort(t *testing.T) {
	ext := net.IP{198, 18, 9, 9}
	for _, random := range []bool{false, true} {
		tr, pool := New(), packet.NewPool(2, 2048)
		snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(ext), MinPort: 20000, MaxPort: 60000, Random: random}}
		ports := map[uint16]bool{}
		for range 20 {
			_, k := trackNAT(t, tr, udpFrame(t, ipA, ipB, 5000, 53), snat, pool)
			if k.TpSrc < 20000 || k.TpSrc > 60000 {
				t.Fatalf("port %d outside the range", k.TpSrc)
			}
			_, back := trackNAT(t, tr, udpFrame(t, ipB, ext, 53, k.TpSrc), Params{HasNAT: true}, pool)
			if back.IPv4Dst != ip4u(ipA) || back.TpDst != 5000 {
				t.Fatalf("reply to port %d went to %#x:%d", k.TpSrc, back.IPv4Dst, back.TpDst)
			}
			ports[k.TpSrc] = true
			tr.Flush(nil)
		}
		if !random && len(ports) != 1 {
			t.Errorf("hash: one connection made 20 times got %d ports, want 1", len(ports))
		}
		if random && len(ports) < 2 {
			t.Errorf("random: one connection made 20 times always got port %v", ports)
		}
	}
}

// TestFlushKeepsCapacityNoLeak: SNAT connections in every shard's index,
// flushed and swept: nothing left counted or indexed, every
// shard's index its size still (a sweep shrinks no index below its first
// size), and the same tuples commit as new connections again with the
// same translations free.
func TestFlushKeepsCapacityNoLeak(t *testing.T) {
	tr := New()
	ext := net.IP{198, 19, 0, 1}
	snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(ext), MinPort: 1024, MaxPort: 65535}}
	pkt := packet.NewPool(1, 2048).Get()
	defer pkt.Free()
	const conns = 40_000 // ~1,250 entries a shard, two per connection
	commitAll := func(round int) {
		for i := range conns {
			pkt.SetData(udpFrame(t, net.IP{198, 18, byte(i >> 8), byte(i)}, ipB, uint16(1024+i%1000), 53))
			flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
			pkt.KeyValid = true
			tr.Process(pkt, &snat, sec)
			if pkt.Key.CT.State != trk|nw|flow.CTSrcNAT {
				t.Fatalf("round %d, connection %d: %s", round, i, stateString(pkt.Key.CT.State))
			}
		}
		if tr.Len() != conns {
			t.Fatalf("round %d: %d connections, want %d", round, tr.Len(), conns)
		}
	}
	commitAll(1)
	var sizes [numShards]int
	entries := 0
	for i := range tr.shards {
		sizes[i] = len(tr.shards[i].x.slots())
		entries += tr.shards[i].x.n
	}
	if entries != 2*conns {
		t.Fatalf("%d index entries for %d translated connections", entries, conns)
	}
	if n := tr.Flush(nil); n != conns {
		t.Fatalf("flushed %d, want %d", n, conns)
	}
	for r := range sweepRounds + 1 {
		tr.Sweep(int64(r+2) * sec)
	}
	for i := range tr.shards {
		x := &tr.shards[i].x
		if x.n != 0 || len(x.slots()) != sizes[i] {
			t.Fatalf("shard %d: %d entries in %d slots, want 0 in %d", i, x.n, len(x.slots()), sizes[i])
		}
		for j := range x.slots() {
			if c, _, _ := x.entry(&x.slots()[j]); c != nil {
				t.Fatalf("shard %d slot %d: %v left", i, j, c.orig)
			}
		}
		if len(tr.shards[i].unassured) != 0 {
			t.Fatalf("shard %d: %d connections left on the eviction list", i, len(tr.shards[i].unassured))
		}
	}
	if tr.Len() != 0 {
		t.Fatalf("%d connections after the flush", tr.Len())
	}
	commitAll(2)
}

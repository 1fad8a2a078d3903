package conntrack

import (
	"math/rand/v2"
	"net"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/header"
)

func ptr[T any](v T) *T { return &v }

// TestNATCandidatesOrder: natCandidates, which writes each candidate in
// place as a reply tuple, tries the translations in the order the
// search that passed each translated tuple to its callback did (kept
// below as natCandidatesRef): no port, address or start moved by the
// rewrite. Ranges with and without ports and addresses, SNAT and DNAT,
// zero SNAT, persistent, TCP, UDP, ICMP and another protocol, IPv4 and
// IPv6; the first 300 candidates of each, and a search run to its end.
func TestNATCandidatesOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	k := newHashKey()
	a4, b4 := mapped(net.IP{198, 19, 0, 1}), mapped(net.IP{198, 19, 0, 3})
	a6, b6 := [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}, [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 2}
	nats := []NAT{
		{Src: true, MinAddr: a4},
		{Src: true, MinAddr: a4, MaxAddr: b4},
		{Src: true, MinAddr: a4, MaxAddr: b4, MinPort: 2000, MaxPort: 2009},
		{Src: true, MinAddr: a4, MinPort: 5000},
		{Src: true},
		{Dst: true},
		{Dst: true, MinAddr: a4, MaxAddr: b4},
		{Dst: true, MinAddr: a4, MinPort: 80, MaxPort: 81},
		{Src: true, MinAddr: a4, MaxAddr: b4, Persistent: true},
		{Src: true, MinAddr: a6, MaxAddr: b6, MinPort: 1, MaxPort: 3},
	}
	for range 50 {
		orig := randTuple(rng)
		orig.Proto = []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoICMP, 47}[rng.IntN(4)]
		if orig.Proto == header.IPProtoICMP {
			orig.ICMPType, orig.DstPort = 8, orig.SrcPort
		}
		h := orig.hash(&k)
		for _, n := range nats {
			var want []Tuple
			natCandidatesRef(&orig, h, &n, func(tr Tuple) bool {
				want = append(want, tr.reverse())
				return len(want) == 300
			})
			var got []Tuple
			var r Tuple
			natCandidates(&orig, h, &n, &r, func() bool {
				got = append(got, r)
				return len(got) == 300
			})
			if len(got) != len(want) {
				t.Fatalf("%+v %+v: %d candidates, want %d", orig, n, len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%+v %+v: candidate %d is %+v, want %+v", orig, n, i, got[i], want[i])
				}
			}
			if f, w := natFirst(&orig, h, &n), want[0].reverse(); f != w {
				t.Fatalf("%+v %+v: natFirst %+v, want %+v", orig, n, f, w)
			}
		}
	}
}

// natCandidatesRef is the search as it was before it wrote candidates in
// place (the reference for TestNATCandidatesOrder).
func natCandidatesRef(orig *Tuple, h uint32, n *NAT, try func(translated Tuple) bool) bool {
	ah := h
	if n.Persistent {
		// The same address after a restart: a fixed key, not the
		// tracker's (this hash indexes nothing).
		src := Tuple{Src: orig.Src}
		ah = src.hash(&fixedKey)
	}
	lo, hi := n.MinAddr, n.MaxAddr
	if lo == ([16]byte{}) {
		// nat(src) or nat(dst) without an address (Open vSwitch's
		// "zero SNAT"): the address stays, only a port clash moves
		// the port.
		lo, hi = orig.Dst, [16]byte{}
		if n.Src {
			lo = orig.Src
		}
	}
	addrs := addrRange(&lo, &hi)
	ports := uint32(1)
	var base uint16
	// SNAT moves a query's ICMP identifier as it moves a source port.
	icmpID := n.Src && isICMP(orig.Proto)
	portNAT := orig.Proto == header.IPProtoTCP || orig.Proto == header.IPProtoUDP || orig.Proto == header.IPProtoSCTP || icmpID
	if portNAT && n.MinPort != 0 {
		base = n.MinPort
		ports = uint32(max(n.MaxPort, n.MinPort)-n.MinPort) + 1
	}
	// Each range's start is the hash scaled to it (a multiply, not a
	// division), and no candidate divides: a commit's only try is
	// usually the first. Ranges are at most 2^16 long.
	ai := uint64(0)
	if addrs.n > 1 {
		ai = uint64(ah) * addrs.n >> 32
	}
	for range addrs.n {
		addr := addrs.lo
		if ai != 0 {
			addr = addrs.at(ai)
		}
		if ai++; ai == addrs.n {
			ai = 0
		}
		t := *orig
		if n.Src {
			t.Src = addr
		} else {
			t.Dst = addr
		}
		if ports == 1 && base == 0 {
			// No port range: the original port, then (SNAT of a
			// port protocol) any unprivileged one.
			if try(t) {
				return true
			}
			if !(n.Src && portNAT) {
				continue
			}
			base, ports = 1024, 65536-1024
		}
		start := uint32(uint64(h) * uint64(ports) >> 32)
		if n.Random {
			start = rand.Uint32() % ports
		}
		pi := start
		for range ports {
			p := base + uint16(pi)
			if pi++; pi == ports {
				pi = 0
			}
			tt := t
			switch {
			case icmpID:
				tt.SrcPort, tt.DstPort = p, p
			case n.Src:
				tt.SrcPort = p
			default:
				tt.DstPort = p
			}
			if try(tt) {
				return true
			}
		}
		if n.MinPort == 0 {
			base, ports = 0, 1
		}
	}
	return false
}

// TestSetReverse: setReverse is reverse, for every protocol and ICMP
// type.
func TestSetReverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := range 2000 {
		tu := randTuple(rng)
		tu.Proto = uint8(i % 64)
		if i%3 == 0 {
			tu.Proto = []uint8{header.IPProtoICMP, header.IPProtoICMPv6}[i%2]
		}
		tu.ICMPType = uint8(rng.IntN(256))
		r := Tuple{Src: [16]byte{1}, ICMPType: 99} // overwritten whole
		setReverse(&r, &tu)
		if r != tu.reverse() {
			t.Fatalf("%+v: setReverse %+v, reverse %+v", tu, r, tu.reverse())
		}
	}
}

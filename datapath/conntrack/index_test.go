package conntrack

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// TestIndex against a Go map: random sets and deletes with colliding
// hashes (few hash values, so clusters form, wrap and shift back), then
// every key found where the map says and nothing else.
func TestIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := newTestIndex()
	want := map[Tuple]*Conn{}
	conns := map[Tuple]*Conn{}
	hash := func(tu *Tuple) uint32 { return uint32(tu.SrcPort) % 37 * 0x01000193 } // collides on purpose
	for step := range 200_000 {
		tu := Tuple{SrcPort: uint16(rng.IntN(3000)), Proto: 17}
		c := conns[tu]
		if c == nil {
			c = x.testConn(tu)
			conns[tu] = c
		}
		h := hash(&tu)
		if rng.IntN(3) == 0 {
			x.delete(&tu, h, c)
			delete(want, tu)
		} else {
			x.set(&tu, h, c, false)
			want[tu] = c
		}
		if step%5000 == 0 {
			x.removeIf(func(c *Conn) bool { return c.orig.SrcPort%7 == 0 })
			for tu := range want {
				if tu.SrcPort%7 == 0 {
					delete(want, tu)
				}
			}
			x.resize(len(x.slots())) // a rehash in place
		}
	}
	if x.n != len(want) {
		t.Fatalf("index holds %d, want %d", x.n, len(want))
	}
	for tu := range conns {
		if got, _ := x.get(&tu, hash(&tu)); got != want[tu] {
			t.Fatalf("%v: got %p, want %p", tu, got, want[tu])
		}
	}
}

// TestIndexReadersDuringWrites: lock-free lookups of entries that stay
// find them every time while a writer inserts, deletes (shifting entries
// back) and resizes the same index (run with -race).
func TestIndexReadersDuringWrites(t *testing.T) {
	var s shard
	new(slab).attach(&s.x)
	hash := func(tu *Tuple) uint32 { return uint32(tu.SrcPort) % 61 * 0x01000193 } // clusters
	// The entries that stay go in behind others of their clusters, so
	// that deleting those shifts them back under the readers.
	churn := map[uint16]*Conn{}
	for p := uint16(1000); p < 2000; p++ {
		c := s.x.testConn(Tuple{SrcPort: p, Proto: 17})
		churn[p] = c
		s.x.set(&c.orig, hash(&c.orig), c, false)
	}
	stay := make([]*Conn, 200)
	for i := range stay {
		c := s.x.testConn(Tuple{SrcPort: uint16(i), Proto: 17})
		stay[i] = c
		s.mu.Lock()
		s.x.set(&c.orig, hash(&c.orig), c, false)
		s.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(3, 4))
		for step := range 200_000 {
			tu := Tuple{SrcPort: uint16(1000 + rng.IntN(1000)), Proto: 17}
			s.mu.Lock()
			if c := churn[tu.SrcPort]; c != nil {
				s.x.delete(&tu, hash(&tu), c)
				delete(churn, tu.SrcPort)
			} else {
				c = s.x.testConn(tu)
				churn[tu.SrcPort] = c
				s.x.set(&c.orig, hash(&c.orig), c, false)
			}
			if step%2000 == 0 {
				s.x.resize(len(s.x.slots())) // a rehash in place
			}
			s.mu.Unlock()
		}
	}()
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		default:
		}
		c := stay[n%len(stay)]
		if got, _ := s.x.lookup(&c.orig, hash(&c.orig), &s.mu); got != c {
			t.Fatalf("lookup %d of port %d: got %p, want %p", n, c.orig.SrcPort, got, c)
		}
	}
}

// TestSlotLayout: resize fills a new array through a []uint64, which
// must lay slots out as []slot does.
func TestSlotLayout(t *testing.T) {
	if unsafe.Sizeof(slot{}) != 8 || unsafe.Alignof(slot{}) != 8 {
		t.Fatalf("slot: %d bytes, aligned to %d", unsafe.Sizeof(slot{}), unsafe.Alignof(slot{}))
	}
}

// testCurs are the chunks testConn allocates from, by slab.
var testCurs sync.Map

// newTestIndex is an index with a slab of its own.
func newTestIndex() *index {
	x := new(index)
	new(slab).attach(x)
	return x
}

// testConn is a connection of x's slab with tuple tu, held by the test
// (a reference no slot stands for), so that it keeps its number when no
// slot holds it, as a tracker's connection never does.
func (x *index) testConn(tu Tuple) *Conn {
	cur, _ := testCurs.LoadOrStore(x.cs, new(atomic.Pointer[connChunk]))
	c := x.cs.alloc(cur.(*atomic.Pointer[connChunk]))
	c.orig = tu
	c.refs.Store(1)
	return c
}

// TestTupleEqual: equal is ==, for tuples alike but in one bit of one
// field.
func TestTupleEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20_000 {
		var a Tuple
		for i := range a.Src {
			a.Src[i], a.Dst[i] = byte(rng.IntN(4)), byte(rng.IntN(4))
		}
		a.SrcPort, a.DstPort, a.Zone = uint16(rng.IntN(4)), uint16(rng.IntN(4)), uint16(rng.IntN(4))
		a.Proto, a.ICMPType, a.IPv6 = uint8(rng.IntN(4)), uint8(rng.IntN(4)), rng.IntN(2) == 0
		b := a
		switch rng.IntN(9) { // 8: none
		case 0:
			b.Src[rng.IntN(16)] ^= 1 << rng.IntN(8)
		case 1:
			b.Dst[rng.IntN(16)] ^= 1 << rng.IntN(8)
		case 2:
			b.SrcPort ^= 1 << rng.IntN(16)
		case 3:
			b.DstPort ^= 1 << rng.IntN(16)
		case 4:
			b.Zone ^= 1 << rng.IntN(16)
		case 5:
			b.Proto ^= 1 << rng.IntN(8)
		case 6:
			b.ICMPType ^= 1 << rng.IntN(8)
		case 7:
			b.IPv6 = !b.IPv6
		}
		if a.equal(&b) != (a == b) || b.equal(&a) != (a == b) {
			t.Fatalf("%+v vs %+v: equal %v, == %v", a, b, a.equal(&b), a == b)
		}
	}
}

// entries is the index entries of every shard.
func entries(tr *Tracker) (n int) {
	for i := range tr.shards {
		n += tr.shards[i].x.n
	}
	return n
}

// TestOneEntryWithoutNAT: a connection without NAT (its tuples hash
// alike) takes one index entry for both tuples, and its replies find it;
// one with SNAT takes two; a reply tuple taken over from an expired
// connection's entry still finds the new one.
func TestOneEntryWithoutNAT(t *testing.T) {
	tr, pool := New(), packet.NewPool(2, 2048)
	const conns = 1000
	for i := range conns {
		track(t, tr, udpFrame(t, net.IP{198, 18, 3, byte(i)}, ipB, uint16(2000+i), 53), commit, 0)
	}
	if n := entries(tr); n != conns {
		t.Fatalf("%d entries for %d connections", n, conns)
	}
	for i := range conns {
		if ct := track(t, tr, udpFrame(t, ipB, net.IP{198, 18, 3, byte(i)}, 53, uint16(2000+i)), Params{}, 1); ct.State != trk|est|rpl {
			t.Fatalf("reply %d: %s", i, stateString(ct.State))
		}
	}
	ext := net.IP{198, 18, 9, 9}
	snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(ext)}}
	trackNAT(t, tr, udpFrame(t, ipA, ipB, 1000, 53), snat, pool)
	if n := entries(tr); n != conns+2 {
		t.Fatalf("%d entries after an SNAT connection, want %d", n, conns+2)
	}
	if ct, _ := trackNAT(t, tr, udpFrame(t, ipB, ext, 53, 1000), Params{HasNAT: true}, pool); ct.State != trk|est|rpl|flow.CTSrcNAT {
		t.Fatalf("SNAT reply: %s", stateString(ct.State))
	}
	// A's connection to B expires; B then starts one to A whose tuple is
	// the old reply tuple: it takes the old entry over, and its reply
	// (A's packet, the old original tuple) finds it.
	late := DefaultTimeouts().UDPFirst * 10
	track(t, tr, udpFrame(t, ipA, ipB, 7, 8), commit, 0)
	if ct := track(t, tr, udpFrame(t, ipB, ipA, 8, 7), commit, late); ct.State != trk|nw {
		t.Fatalf("the new connection: %s", stateString(ct.State))
	}
	if ct := track(t, tr, udpFrame(t, ipA, ipB, 7, 8), Params{}, late); ct.State != trk|est|rpl {
		t.Fatalf("its reply: %s", stateString(ct.State))
	}
	checkInvariants(t, tr)
	tr.Flush(nil)
	if n := entries(tr); n != 0 {
		t.Fatalf("%d entries after a flush", n)
	}
}

// TestIndexGrowsAndShrinks: an index grown past its first size finds
// every entry; emptied, every slot is empty, and filling it again needs
// no growth; emptied and shrunk, it is back to its first size, never
// below.
func TestIndexGrowsAndShrinks(t *testing.T) {
	x := newTestIndex()
	key := newHashKey()
	const n = initIndex // more than 3/4 of the first size: one doubling
	conns := make([]*Conn, n)
	for i := range conns {
		c := x.testConn(Tuple{Src: mapped(net.IP{198, 18, byte(i >> 8), byte(i)}), SrcPort: uint16(i), Proto: 17})
		c.oh = c.orig.hash(&key)
		conns[i] = c
		x.set(&c.orig, c.oh, c, false)
	}
	size := len(x.slots())
	if size <= initIndex {
		t.Fatalf("%d entries in %d slots: no growth", n, size)
	}
	for _, c := range conns {
		if got, _ := x.get(&c.orig, c.oh); got != c {
			t.Fatalf("%v: got %p, want %p", c.orig, got, c)
		}
	}
	for _, c := range conns {
		x.delete(&c.orig, c.oh, c)
	}
	if x.n != 0 || len(x.slots()) != size {
		t.Fatalf("emptied: %d entries in %d slots, want 0 in %d", x.n, len(x.slots()), size)
	}
	for i := range x.slots() {
		if c, _, _ := x.entry(&x.slots()[i]); c != nil {
			t.Fatalf("slot %d still holds %v", i, c.orig)
		}
	}
	for _, c := range conns {
		x.set(&c.orig, c.oh, c, false)
	}
	if len(x.slots()) != size {
		t.Errorf("refilled: %d slots, want %d", len(x.slots()), size)
	}
	x.shrink()
	if len(x.slots()) != size {
		t.Errorf("full index shrunk: %d slots, want %d", len(x.slots()), size)
	}
	for _, c := range conns {
		x.delete(&c.orig, c.oh, c)
	}
	x.shrink()
	if len(x.slots()) != initIndex {
		t.Errorf("emptied and shrunk: %d slots, want the first size %d", len(x.slots()), initIndex)
	}
	for _, c := range conns {
		x.set(&c.orig, c.oh, c, false)
	}
	for _, c := range conns {
		if got, _ := x.get(&c.orig, c.oh); got != c {
			t.Fatalf("after shrinking, %v: got %p, want %p", c.orig, got, c)
		}
	}
}

package conntrack

import (
	"net"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// TestSlabPlacesNeverReused: connections removed (a flush, then the
// sweeps) give their chunks back, so the slab does not grow with the
// connections made over time, but a *Conn held across the removal still
// shows its own connection, dead, however many connections come after:
// a place is handed out once, and a number reused names a new chunk.
func TestSlabPlacesNeverReused(t *testing.T) {
	tr := New()
	pkt := packet.NewPool(1, 2048).Get()
	defer pkt.Free()
	plain := Params{Commit: true}
	snat := Params{Commit: true, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(net.IP{198, 19, 0, 1}), MinPort: 1024, MaxPort: 65535}}
	const conns = 4000
	commitAll := func(round int) []*Conn {
		out := make([]*Conn, 0, 2*conns)
		for i := range 2 * conns {
			p := &plain
			if i%2 == 1 {
				p = &snat
			}
			pkt.SetData(udpFrame(t, net.IP{198, 18, byte(round), byte(i >> 8)}, ipB, uint16(1024+i), 53))
			flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
			pkt.KeyValid = true
			tr.Process(pkt, p, sec)
			tu := parsedTuple(t, pkt, 0)
			c, reply := tr.lookup(&tu)
			if c == nil || reply {
				t.Fatalf("round %d, connection %d: not found after its commit", round, i)
			}
			out = append(out, c)
		}
		return out
	}
	drain := func() {
		tr.Flush(nil)
		for r := range sweepRounds + 1 {
			tr.Sweep(int64(r+2) * sec)
		}
		// Only the shards' current chunks stay: each has places not
		// handed out yet.
		if tr.slab.chunks > numShards {
			t.Fatalf("%d chunks left in the slab after every connection was removed", tr.slab.chunks)
		}
	}
	old := commitAll(1)
	tuples := make([]Tuple, len(old))
	for i, c := range old {
		tuples[i] = c.orig
	}
	drain()
	used := tr.slab.used
	seen := map[*Conn]bool{}
	for _, c := range old {
		seen[c] = true
	}
	for round := 2; round < 6; round++ {
		for _, c := range commitAll(round) {
			if seen[c] {
				t.Fatalf("round %d: connection %v got the place of a removed one", round, c.orig)
			}
		}
		checkInvariants(t, tr)
		drain()
	}
	for i, c := range old {
		c.mu.Lock()
		dead, orig := c.dead, c.orig
		c.mu.Unlock()
		if !dead || orig != tuples[i] {
			t.Fatalf("a removed connection's memory changed: dead %v, tuple %v, was %v", dead, orig, tuples[i])
		}
	}
	if !raceBuild && tr.slab.used > used+numShards {
		t.Errorf("chunk numbers not reused: %d handed out after one round, %d after five", used, tr.slab.used)
	}
}

// parsedTuple is pkt's tuple for ct in zone.
func parsedTuple(tb testing.TB, pkt *packet.Packet, zone uint16) Tuple {
	tb.Helper()
	var pp parsed
	if !parse(pkt, zone, &pp) {
		tb.Fatalf("packet not trackable")
	}
	return pp.t
}

// TestSlabNumbers: a connection's number finds it until its place is
// released, and a chunk leaves the table once all its places are, not
// before.
func TestSlabNumbers(t *testing.T) {
	var s slab
	var cur shard
	var cs []*Conn
	for range 3*chunkConns - 1 { // the third chunk has a place left
		c := s.alloc(&cur.cur)
		c.refs.Store(1)
		cs = append(cs, c)
	}
	if s.chunks != 3 {
		t.Fatalf("%d chunks for %d connections", s.chunks, len(cs))
	}
	for _, c := range cs {
		if s.conn(c.id) != c {
			t.Fatalf("number %#x does not find its connection", c.id)
		}
	}
	for _, c := range cs[:chunkConns-1] {
		s.unref(c)
	}
	if s.chunks != 3 || s.conn(cs[0].id) != cs[0] {
		t.Fatalf("a chunk left with a place still held: %d chunks", s.chunks)
	}
	s.unref(cs[chunkConns-1])
	if s.chunks != 2 || s.conn(cs[0].id) != nil {
		t.Fatalf("a chunk every place of which was released: %d chunks, number still found", s.chunks)
	}
	// The current chunk stays while it has places to hand out.
	for _, c := range cs[2*chunkConns:] {
		s.unref(c)
	}
	if s.chunks != 2 {
		t.Fatalf("the current chunk left: %d chunks", s.chunks)
	}
	if c := s.alloc(&cur.cur); c.id>>chunkBits != cs[2*chunkConns].id>>chunkBits || s.conn(c.id) != c {
		t.Fatalf("the current chunk's last place not handed out")
	}
	c := s.alloc(&cur.cur) // a new chunk
	if c.id>>chunkBits == cs[0].id>>chunkBits && raceBuild {
		t.Fatalf("a number reused under the race detector")
	}
	if s.conn(c.id) != c || s.chunks != 3 {
		t.Fatalf("a new chunk's connection not found by its number")
	}
}

// TestConnLayout: a Conn is three cache lines, the fields the lock-free
// path reads in the first two, and a chunk's connections start on a
// line (its size class is a multiple of 64 bytes: Go places an object of
// such a class on a 64-byte boundary).
func TestConnLayout(t *testing.T) {
	var c Conn
	line := func(off uintptr) uintptr { return off / 64 }
	if unsafe.Sizeof(c) != 192 {
		t.Fatalf("Conn is %d bytes, want 192", unsafe.Sizeof(c))
	}
	for _, f := range []struct {
		name string
		off  uintptr
		size uintptr
		line uintptr
	}{
		{"orig", unsafe.Offsetof(c.orig), unsafe.Sizeof(c.orig), 0},
		{"proto", unsafe.Offsetof(c.proto), 1, 0},
		{"nat", unsafe.Offsetof(c.nat), 1, 0},
		{"fast", unsafe.Offsetof(c.fast), 8, 0},
		{"expires", unsafe.Offsetof(c.expires), 8, 0},
		{"reply", unsafe.Offsetof(c.reply), unsafe.Sizeof(c.reply), 1},
		{"mark", unsafe.Offsetof(c.mark), 4, 1},
		{"label", unsafe.Offsetof(c.label), unsafe.Sizeof(c.label), 1},
	} {
		if line(f.off) != f.line || line(f.off+f.size-1) != f.line {
			t.Errorf("%s at bytes %d-%d, want it within line %d", f.name, f.off, f.off+f.size-1, f.line)
		}
	}
	var s slab
	var cur atomic.Pointer[connChunk]
	for range 8 * chunkConns {
		if p := uintptr(unsafe.Pointer(s.alloc(&cur))); p%64 != 0 {
			t.Fatalf("a connection at %#x straddles lines", p)
		}
	}
}

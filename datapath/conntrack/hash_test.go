package conntrack

import (
	"math/rand/v2"
	"net"
	"testing"
	"unsafe"
)

// randTuple is a random IPv4 or IPv6 tuple of TCP, UDP or an ICMP query
// or reply.
func randTuple(rng *rand.Rand) Tuple {
	var tu Tuple
	tu.Zone = uint16(rng.IntN(3))
	if tu.IPv6 = rng.IntN(2) == 0; tu.IPv6 {
		for i := range tu.Src {
			tu.Src[i], tu.Dst[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
	} else {
		tu.Src[10], tu.Src[11], tu.Dst[10], tu.Dst[11] = 0xff, 0xff, 0xff, 0xff
		for i := 12; i < 16; i++ {
			tu.Src[i], tu.Dst[i] = byte(rng.Uint32()), byte(rng.Uint32())
		}
	}
	switch rng.IntN(3) {
	case 0:
		tu.Proto, tu.SrcPort, tu.DstPort = 6, uint16(rng.Uint32()), uint16(rng.Uint32())
	case 1:
		tu.Proto, tu.SrcPort, tu.DstPort = 17, uint16(rng.Uint32()), uint16(rng.Uint32())
	default:
		tu.Proto, tu.ICMPType = 1, [...]uint8{8, 0, 13, 14}[rng.IntN(4)]
		if tu.IPv6 {
			tu.Proto, tu.ICMPType = 58, uint8(128+rng.IntN(2))
		}
		id := uint16(rng.Uint32())
		tu.SrcPort, tu.DstPort = id, id
	}
	return tu
}

// TestHashSymmetricUnderKeys: under every key, a tuple hashes as its
// reverse does (what keeps a connection without NAT in one shard and one
// probe sequence).
func TestHashSymmetricUnderKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		k := newHashKey()
		for range 2000 {
			tu := randTuple(rng)
			r := tu.reverse()
			if h, rh := tu.hash(&k), r.hash(&k); h != rh {
				t.Fatalf("key %+v: %+v hashes to %#x, its reverse %+v to %#x", k, tu, h, r, rh)
			}
		}
	}
}

// TestTrackersHaveTheirOwnKeys: two trackers draw different keys, so a
// tuple's hash (its shard and slot) differs between them, and tuples
// that collide on all 32 bits under one tracker's key (as a sender who
// knew the key could craft) do not under the other's.
func TestTrackersHaveTheirOwnKeys(t *testing.T) {
	a, b := New(), New()
	if a.key == b.key {
		t.Fatalf("two trackers with the key %+v", a.key)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	differ := 0
	seen := map[uint32]Tuple{}
	var x, y Tuple
	found := false
	for range 1 << 20 {
		tu := randTuple(rng)
		if a.hash(&tu) != b.hash(&tu) {
			differ++
		}
		h := a.hash(&tu)
		if o, ok := seen[h]; ok && o != tu && o != tu.reverse() {
			x, y, found = o, tu, true
			break
		}
		seen[h] = tu
	}
	if differ == 0 {
		t.Fatal("every tuple hashed the same in both trackers")
	}
	if !found {
		t.Fatal("no 32-bit collision among 2^20 tuples (the birthday bound says about 2^16)")
	}
	if a.hash(&x) != a.hash(&y) || b.hash(&x) == b.hash(&y) {
		t.Fatalf("%+v and %+v: %#x, %#x under one key, %#x, %#x under the other", x, y, a.hash(&x), a.hash(&y), b.hash(&x), b.hash(&y))
	}
}

// TestPersistentNATKeyFixed: a persistent NAT's address choice does not
// depend on the tracker's key, so a client keeps its address in every
// tracker (after a restart).
func TestPersistentNATKeyFixed(t *testing.T) {
	n := NAT{Src: true, MinAddr: mapped(net.IPv4(198, 19, 0, 1)), MaxAddr: mapped(net.IPv4(198, 19, 0, 200)), Persistent: true}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100 {
		tu := randTuple(rng)
		tu.IPv6, tu.Proto = false, 17
		tu.Src = mapped(net.IPv4(198, 18, byte(rng.IntN(256)), byte(rng.IntN(256))))
		tu.Dst = mapped(net.IPv4(198, 18, 1, 1))
		a, b := New(), New()
		fa, fb := natFirst(&tu, a.hash(&tu), &n), natFirst(&tu, b.hash(&tu), &n)
		if fa.Src != fb.Src {
			t.Fatalf("%+v: address %v in one tracker, %v in another", tu, fa.Src[12:], fb.Src[12:])
		}
	}
}

// TestPlainExpiresStore: create writes a new connection's expiry through
// a plain *int64 at the atomic's address (before the connection is
// indexed); the atomic reads it back.
func TestPlainExpiresStore(t *testing.T) {
	var c Conn
	*(*int64)(unsafe.Pointer(&c.expires)) = 12345
	if got := c.expires.Load(); got != 12345 || unsafe.Sizeof(c.expires) != 8 {
		t.Fatalf("expires %d, size %d", got, unsafe.Sizeof(c.expires))
	}
}

package conntrack

import (
	"math/rand/v2"
	"testing"
)

// TestIndex against a Go map: random sets and deletes with colliding
// hashes (few hash values, so clusters form, wrap and shift back), then
// every key found where the map says and nothing else.
func TestIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x index
	want := map[Tuple]*Conn{}
	conns := map[Tuple]*Conn{}
	hash := func(tu *Tuple) uint32 { return uint32(tu.SrcPort) % 37 * 0x01000193 } // collides on purpose
	for step := range 200_000 {
		tu := Tuple{SrcPort: uint16(rng.IntN(3000)), Proto: 17}
		c := conns[tu]
		if c == nil {
			c = &Conn{orig: tu}
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
			x.shrink()
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

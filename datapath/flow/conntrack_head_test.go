package flow

import (
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestConntrackHead: SetHead writes exactly the four fields it names and
// Head reads them back as the key word they share.
func TestConntrackHead(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		var c, want Conntrack
		for i := range c.Label {
			c.Label[i] = byte(r.Uint32())
		}
		c.TpSrc, c.TpDst, c.Src[3] = uint16(r.Uint32()), uint16(r.Uint32()), byte(r.Uint32())
		c.State, c.NwProto, c.Zone, c.Mark = 0xff, 0xff, 0xffff, 0xffffffff
		want = c
		want.State, want.NwProto = uint8(r.Uint32()), uint8(r.Uint32())
		want.Zone, want.Mark = uint16(r.Uint32()), r.Uint32()
		c.SetHead(want.State, want.NwProto, want.Zone, want.Mark)
		if c != want {
			t.Fatalf("SetHead gave %+v, want %+v", c, want)
		}
		var k Key
		k.CT = c
		if got, w := k.CT.Head(), k.Words()[unsafe.Offsetof(k.CT)/8]; got != w {
			t.Fatalf("Head %#x, the key's word %#x", got, w)
		}
	}
}

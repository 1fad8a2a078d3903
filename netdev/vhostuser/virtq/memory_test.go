package virtq

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// threeRegions is a memory table with gaps between its regions and one
// region right behind another (guest-adjacent, separate mappings), so a
// buffer can straddle two regions.
func threeRegions(t *testing.T) *Memory {
	a, b, c := guarded(t, 1), guarded(t, 2), guarded(t, 1)
	return NewMemory([]Region{
		{GuestAddr: 0x1000, UserAddr: testUVA, Data: a},
		{GuestAddr: 0x10000, UserAddr: testUVA + 0x10000, Data: b},
		{GuestAddr: 0x12000, UserAddr: testUVA + 0x20000, Data: c}, // right behind b
	})
}

// refGuest is the translation by definition: the one region holding all
// n bytes, if any.
func refGuest(m *Memory, addr, n uint64) []byte {
	for _, r := range m.regions {
		if addr >= r.GuestAddr && addr-r.GuestAddr < uint64(len(r.Data)) && n <= uint64(len(r.Data))-(addr-r.GuestAddr) {
			off := addr - r.GuestAddr
			return r.Data[off : off+n]
		}
	}
	return nil
}

func sameBytes(a, b []byte) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return len(a) == len(b) && cap(a) == len(a) && unsafe.Pointer(&a[0]) == unsafe.Pointer(&b[0])
}

// TestGuestRegionHint checks that the queue's remembered region changes
// only the order of the search: from any remembered region (including one
// out of range), an address gets exactly the bytes the definition gives,
// and an address outside every region, straddling two, or wrapping gets
// nil.
func TestGuestRegionHint(t *testing.T) {
	m := threeRegions(t)
	q := &Queue{mem: m}
	edges := []uint64{0, 0x1000, 0x2000, 0x10000, 0x12000, 0x13000, ^uint64(0)}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		addr := edges[rng.IntN(len(edges))] + uint64(rng.IntN(64)) - 32
		if rng.IntN(4) == 0 {
			addr = rng.Uint64()
		}
		n := uint64(1 + rng.IntN(96))
		if rng.IntN(8) == 0 {
			n = rng.Uint64()>>rng.IntN(64) | 1
		}
		q.region = rng.IntN(5) - 1 // -1 and 3 are out of range
		got, want := q.guest(addr, n), refGuest(m, addr, n)
		if !sameBytes(got, want) {
			t.Fatalf("guest(%#x, %d) from region %d: got %d bytes, want %d", addr, n, q.region, len(got), len(want))
		}
		if got2 := m.Guest(addr, n); !sameBytes(got2, want) {
			t.Fatalf("Memory.Guest(%#x, %d): got %d bytes, want %d", addr, n, len(got2), len(want))
		}
	}
	// A buffer straddling the adjacent regions b and c is refused from
	// either side.
	for _, hint := range []int{1, 2} {
		q.region = hint
		if b := q.guest(0x12000-8, 16); b != nil {
			t.Fatalf("straddling buffer translated from region %d", hint)
		}
	}
}

// TestGatherAcrossRegions runs transmit frames whose buffers alternate
// between two regions through Dequeue's inline region check.
func TestGatherAcrossRegions(t *testing.T) {
	r := newRing(t, 64, Config{})
	other := guarded(t, 1)
	const otherGPA = 0x4000_0000
	m := NewMemory(append([]Region{{GuestAddr: otherGPA, UserAddr: 0x1000, Data: other}}, r.q.mem.regions...))
	r.q.mem = m
	var want [][]byte
	for i := 0; i < 8; i++ {
		f := frame(60, byte(i))
		want = append(want, f)
		if i%2 == 0 {
			r.txFrame(i, f)
			continue
		}
		off := 512 * (i / 2)
		clear(other[off : off+12])
		copy(other[off+12:], f)
		r.setDesc(i, otherGPA+uint64(off), uint32(12+len(f)), 0, 0)
	}
	r.publish(0, 1, 2, 3, 4, 5, 6, 7)
	got, res := dequeue(r.q, packet.NewPool(64, packet.DefaultBufSize))
	if res.Packets != 8 || res.Errors != 0 {
		t.Fatalf("dequeued %+v", res)
	}
	for i := range want {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("frame %d: got %x, want %x", i, got[i], want[i])
		}
	}
}

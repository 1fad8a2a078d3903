package classifier

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// The layout LookupShort's one-line hit relies on.
func TestEMCSlotLayout(t *testing.T) {
	var s emcSlot[cached]
	if sz := unsafe.Sizeof(s); sz != 256 {
		t.Errorf("slot is %d bytes, want 256 (four whole cache lines)", sz)
	}
	if end := unsafe.Offsetof(s.key) + flow.ShortWords*8; end > 64 {
		t.Errorf("the key's short words end at byte %d of the slot, past the first line", end)
	}
}

// TestEMCLookupShort: whatever keys share a hash, LookupShort with the
// key's true shortness, or with "not known", answers as Lookup does.
func TestEMCLookupShort(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	// Variants of a few short keys that differ from them only beyond the
	// short words, or in one short word.
	variant := func(i int) flow.Key {
		k := emcKey(i % 5)
		switch r.IntN(6) {
		case 1:
			k.RecircID = uint16(1 + r.IntN(2))
		case 2:
			k.TunnelID = uint64(1 + r.IntN(2))
		case 3:
			k.Tun.Dst[15] = byte(1 + r.IntN(2))
		case 4:
			k.TCPFlags = uint16(r.IntN(2))
		case 5:
			k.ArpTHA[0] = 1
		}
		return k
	}
	for round := 0; round < 200; round++ {
		e := NewEMC[cached](8)
		e.SetInsertInvProb(1)
		for i := 0; i < 12; i++ {
			k := variant(r.Int())
			e.Insert(&k, uint32(r.IntN(3)), &cached{key: k, id: i})
		}
		for i := 0; i < 50; i++ {
			k := variant(r.Int())
			h := uint32(r.IntN(3))
			want := e.Lookup(&k, h)
			if want != nil && want.key != k {
				t.Fatalf("Lookup returned another key's value")
			}
			if got := e.LookupShort(&k, h, k.IsShort()); got != want {
				t.Fatalf("LookupShort(short=%v) = %v, Lookup = %v for %s", k.IsShort(), got, want, k.String())
			}
			if got := e.LookupShort(&k, h, false); got != want {
				t.Fatalf("LookupShort(not known) = %v, Lookup = %v", got, want)
			}
		}
	}
}

func BenchmarkEMCLookupShort(b *testing.B) {
	e := NewEMC[cached](0)
	e.SetInsertInvProb(1)
	k := emcKey(1)
	h := k.Hash()
	e.Insert(&k, h, &cached{key: k})
	q := k
	b.ReportAllocs()
	for b.Loop() {
		if e.LookupShort(&q, h, true) == nil {
			b.Fatal("miss")
		}
	}
}

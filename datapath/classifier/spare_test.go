package classifier

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// TestClearKeepsSpares: after Clear nothing matches, a mask that comes
// back refills its old subtable without allocating (the capacity the
// flows had grown it to is kept), InsertMasked hands out one mask per
// subtable, equal to the caller's, and a spare whose mask did not come
// back is gone after the next Clear.
func TestClearKeepsSpares(t *testing.T) {
	mf := New[megaflow]()
	ma := flow.Mask{InPort: ^uint32(0), IPv4Src: ^uint32(0)}
	mb := flow.Mask{InPort: ^uint32(0), TpDst: 0xffff}
	const n = 1000
	vals := make([]megaflow, n)
	key := func(i int) flow.Key { return flow.Key{InPort: 1, IPv4Src: uint32(i), TpDst: uint16(i)} }
	fill := func() {
		for i := range vals {
			k := key(i)
			_, shared := mf.InsertMasked(&k, &ma, &vals[i])
			if shared == nil || *shared != ma {
				t.Fatalf("shared mask %v, want %v", shared, ma)
			}
			if i > 0 {
				if _, again := mf.InsertMasked(&k, &ma, &vals[i]); again != shared {
					t.Fatal("one mask, two shared copies")
				}
			}
		}
	}
	fill()
	kb := key(0)
	mf.InsertMasked(&kb, &mb, &vals[0])
	if mf.Len() != n+1 || mf.Subtables() != 2 {
		t.Fatalf("%d flows in %d subtables", mf.Len(), mf.Subtables())
	}
	mf.Clear()
	if k := key(5); mf.Lookup(&k) != nil || mf.Len() != 0 || mf.Subtables() != 0 {
		t.Fatal("a flow left after Clear")
	}
	if len(mf.spare) != 2 {
		t.Fatalf("%d spares, want 2", len(mf.spare))
	}
	fill()
	if k := key(7); mf.Lookup(&k) != &vals[7] {
		t.Fatal("refilled subtable misses")
	}
	mf.Clear()
	if len(mf.spare) != 1 || !mf.spare[0].mask.Equal(&ma) {
		t.Fatalf("spares after the second Clear: %d, want only the mask that came back", len(mf.spare))
	}
	if a := testing.AllocsPerRun(3, func() { fill(); mf.Clear() }); a != 0 {
		t.Errorf("%v allocations filling and clearing again", a)
	}
}

package classifier

import (
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// cached is the value type the EMC tests store: it remembers the key it was
// inserted for, so a lookup can prove it got the right one.
type cached struct {
	key flow.Key
	id  int
}

func emcKey(i int) flow.Key {
	var k flow.Key
	k.InPort = uint32(i % 7)
	k.EthType = 0x0800
	k.NwProto = 17
	k.IPv4Src = 0x0a000000 | uint32(i)
	k.IPv4Dst = 0x0a010000 | uint32(i*31)
	k.TpSrc = uint16(i)
	k.TpDst = 4789
	return k
}

func TestNewEMCSize(t *testing.T) {
	for _, c := range []struct{ in, want int }{
		{0, DefaultEMCEntries}, {-5, DefaultEMCEntries}, {1, 1}, {1000, 1024}, {4096, 4096},
	} {
		if got := NewEMC[cached](c.in).Cap(); got != c.want {
			t.Errorf("NewEMC(%d).Cap() = %d, want %d", c.in, got, c.want)
		}
	}
	if got := NewEMC[cached](0).InsertInvProb(); got != DefaultEMCInsertInvProb {
		t.Errorf("default inv prob = %d, want %d", got, DefaultEMCInsertInvProb)
	}
}

// TestEMCNoFalsePositives fills a small cache far past its size, with
// hashes drawn from a tiny range so that many different keys share a hash,
// and checks that a lookup never returns the value of another key.
func TestEMCNoFalsePositives(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	e := NewEMC[cached](64)
	e.SetInsertInvProb(1)
	const nkeys = 2000
	keys := make([]flow.Key, nkeys)
	hashes := make([]uint32, nkeys)
	vals := make([]*cached, nkeys)
	for i := range keys {
		keys[i] = emcKey(i)
		hashes[i] = rng.Uint32N(16) // heavy hash sharing
		if i%2 == 0 {
			hashes[i] = keys[i].Hash()
		}
		vals[i] = &cached{key: keys[i], id: i}
	}
	hitsSeen := 0
	for round := 0; round < 5; round++ {
		for n := 0; n < nkeys; n++ {
			i := rng.IntN(nkeys)
			e.MaybeInsert(&keys[i], hashes[i], vals[i])
			if got := e.Lookup(&keys[i], hashes[i]); got != vals[i] {
				t.Fatalf("key %d not found right after insert with inv prob 1 (got %v)", i, got)
			}
			for p := 0; p < 8; p++ {
				j := rng.IntN(nkeys)
				got := e.Lookup(&keys[j], hashes[j])
				if got == nil {
					continue
				}
				hitsSeen++
				if got != vals[j] || !got.key.Equal(&keys[j]) {
					t.Fatalf("lookup of key %d returned value of key %d", j, got.id)
				}
			}
			// A lookup with the right hash but a different key must miss
			// unless that key is cached too.
			j := (i + 1) % nkeys
			if got := e.Lookup(&keys[j], hashes[i]); got != nil && got != vals[j] {
				t.Fatalf("lookup of key %d under hash of %d returned value of key %d", j, i, got.id)
			}
		}
		if e.Len() > e.Cap() || e.Len() == 0 {
			t.Fatalf("Len() = %d with Cap() = %d", e.Len(), e.Cap())
		}
	}
	if hitsSeen == 0 {
		t.Fatal("random lookups never hit: the test checked nothing")
	}
}

func TestEMCUpdateInPlace(t *testing.T) {
	e := NewEMC[cached](16)
	k := emcKey(1)
	h := k.Hash()
	a, b := &cached{id: 1}, &cached{id: 2}
	e.Insert(&k, h, a)
	e.Insert(&k, h, b)
	if e.Len() != 1 {
		t.Fatalf("Len() = %d after inserting one key twice, want 1", e.Len())
	}
	if got := e.Lookup(&k, h); got != b {
		t.Fatalf("Lookup returned %v, want the second value", got)
	}
	e.Insert(&k, h, nil)
	if got := e.Lookup(&k, h); got != b {
		t.Fatal("inserting nil changed the cached value")
	}
}

// TestEMCEviction pins down the replacement rule: with both candidate
// slots taken by other keys, the one holding the lower hash is evicted.
func TestEMCEviction(t *testing.T) {
	e := NewEMC[cached](16) // 4-bit segments
	ka, kb, kc := emcKey(1), emcKey(2), emcKey(3)
	const ha, hb, hc = 0x021, 0x012, 0x121 // a: slots 1,2  b: slots 2,1  c: slots 1,2
	va, vb, vc := &cached{id: 1}, &cached{id: 2}, &cached{id: 3}
	e.Insert(&ka, ha, va) // slot 1
	e.Insert(&kb, hb, vb) // slot 2
	if e.Len() != 2 || e.Lookup(&ka, ha) != va || e.Lookup(&kb, hb) != vb {
		t.Fatal("two keys with two free candidate slots did not both stay")
	}
	e.Insert(&kc, hc, vc) // evicts b (0x012 < 0x021)
	if e.Lookup(&kb, hb) != nil {
		t.Error("key with the lower hash was not evicted")
	}
	if e.Lookup(&ka, ha) != va || e.Lookup(&kc, hc) != vc {
		t.Error("surviving or new key not found")
	}
	if e.Len() != 2 {
		t.Errorf("Len() = %d, want 2", e.Len())
	}
}

func TestEMCInvProbZeroNeverInserts(t *testing.T) {
	e := NewEMC[cached](256)
	e.SetInsertInvProb(0)
	for i := 0; i < 10000; i++ {
		k := emcKey(i)
		e.MaybeInsert(&k, k.Hash(), &cached{id: i})
	}
	if e.Len() != 0 {
		t.Fatalf("Len() = %d with inv prob 0, want 0", e.Len())
	}
	k := emcKey(5)
	if e.Lookup(&k, k.Hash()) != nil {
		t.Fatal("lookup hit in a disabled cache")
	}
}

func TestEMCInsertProbability(t *testing.T) {
	e := NewEMC[cached](1 << 16)
	e.SetInsertInvProb(10)
	const n = 20000
	for i := 0; i < n; i++ {
		k := emcKey(i)
		e.MaybeInsert(&k, uint32(i), &cached{id: i}) // distinct slots
	}
	// Expect n/10 = 2000; the binomial standard deviation is about 42.
	if got := e.Len(); got < 1700 || got > 2300 {
		t.Fatalf("inv prob 10 inserted %d of %d, want about %d", got, n, n/10)
	}
}

func TestEMCRemoveValueAndClear(t *testing.T) {
	e := NewEMC[cached](1024)
	e.SetInsertInvProb(1)
	shared := &cached{id: -1}
	own := make([]*cached, 100)
	for i := 0; i < 100; i++ {
		k := emcKey(i)
		v := shared
		if i%4 != 0 {
			own[i] = &cached{id: i}
			v = own[i]
		}
		e.MaybeInsert(&k, uint32(i), v)
	}
	if e.Len() != 100 {
		t.Fatalf("Len() = %d, want 100", e.Len())
	}
	if n := e.RemoveValue(shared); n != 25 {
		t.Fatalf("RemoveValue removed %d, want 25", n)
	}
	if e.Len() != 75 {
		t.Fatalf("Len() = %d after RemoveValue, want 75", e.Len())
	}
	for i := 0; i < 100; i++ {
		k := emcKey(i)
		got := e.Lookup(&k, uint32(i))
		if i%4 == 0 && got != nil {
			t.Fatalf("key %d still cached after RemoveValue", i)
		}
		if i%4 != 0 && got != own[i] {
			t.Fatalf("key %d lost by RemoveValue of another value", i)
		}
	}
	if n := e.RemoveValue(shared); n != 0 {
		t.Fatalf("second RemoveValue removed %d", n)
	}
	e.Clear()
	if e.Len() != 0 {
		t.Fatalf("Len() = %d after Clear", e.Len())
	}
	for i := 0; i < 100; i++ {
		k := emcKey(i)
		if e.Lookup(&k, uint32(i)) != nil {
			t.Fatalf("key %d cached after Clear", i)
		}
	}
}

func TestEMCLookupDoesNotAllocate(t *testing.T) {
	e := NewEMC[cached](0)
	e.SetInsertInvProb(1)
	k := emcKey(1)
	h := k.Hash()
	v := &cached{}
	e.Insert(&k, h, v)
	miss := emcKey(2)
	allocs := testing.AllocsPerRun(100, func() {
		e.Lookup(&k, h)
		e.Lookup(&miss, miss.Hash())
		e.MaybeInsert(&k, h, v)
	})
	if allocs != 0 {
		t.Fatalf("Lookup/MaybeInsert allocate %v times per run", allocs)
	}
}

// TestEMCTableAtFirstInsert: the table is allocated by the first insert;
// before it every lookup misses, and the cache reports its full size.
func TestEMCTableAtFirstInsert(t *testing.T) {
	e := NewEMC[cached](1024)
	if e.Cap() != 1024 || len(e.slots) != 1 {
		t.Fatalf("new cache: Cap %d with %d slots allocated, want 1024 and 1", e.Cap(), len(e.slots))
	}
	for i := range 100 {
		k := emcKey(i)
		if e.Lookup(&k, k.Hash()) != nil || e.LookupShort(&k, k.Hash(), true) != nil {
			t.Fatalf("key %d found in an empty cache", i)
		}
	}
	var zero flow.Key
	if e.Lookup(&zero, 0) != nil || e.RemoveValue(&cached{}) != 0 {
		t.Fatal("the stand-in slot matched")
	}
	e.Clear()
	k := emcKey(1)
	v := &cached{}
	e.Insert(&k, k.Hash(), v)
	if len(e.slots) != 1024 || e.Lookup(&k, k.Hash()) != v || e.Len() != 1 {
		t.Fatalf("after an insert: %d slots, Len %d", len(e.slots), e.Len())
	}
}

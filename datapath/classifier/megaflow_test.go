package classifier

import (
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

// megaflow is the value type the classifier tests store: it remembers the
// match it was installed under, so a lookup result can be checked.
type megaflow struct {
	m  flow.Match
	id int
}

// Fields a random mask may cover.
const (
	fInPort = 1 << iota
	fEthSrc
	fEthDst
	fEthType
	fIPv4Src
	fIPv4Dst
	fNwProto
	fTpSrc
	fTpDst
	fVLAN
	numFields = iota
)

func prefixMask(n int) uint32 {
	if n == 0 {
		return 0
	}
	return ^uint32(0) << (32 - n)
}

// randomMask returns a mask over a random non-empty subset of fields, with
// random prefix lengths for the IPv4 addresses.
func randomMask(rng *rand.Rand) flow.Mask {
	var m flow.Mask
	fields := 1 + rng.IntN(1<<numFields-1)
	if fields&fInPort != 0 {
		m.InPort = ^uint32(0)
	}
	if fields&fEthSrc != 0 {
		m.EthSrc = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if fields&fEthDst != 0 {
		m.EthDst = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	if fields&fEthType != 0 {
		m.EthType = 0xffff
	}
	if fields&fIPv4Src != 0 {
		m.IPv4Src = prefixMask(1 + rng.IntN(32))
	}
	if fields&fIPv4Dst != 0 {
		m.IPv4Dst = prefixMask(1 + rng.IntN(32))
	}
	if fields&fNwProto != 0 {
		m.NwProto = 0xff
	}
	if fields&fTpSrc != 0 {
		m.TpSrc = 0xffff
	}
	if fields&fTpDst != 0 {
		m.TpDst = 0xffff
		if rng.IntN(4) == 0 {
			m.TpDst = 0xff00
		}
	}
	if fields&fVLAN != 0 {
		m.VLAN[0].TCI = 0x0fff
	}
	return m
}

// randomKey draws every field from a small pool of values so that random
// keys often collide with installed megaflows.
func randomKey(rng *rand.Rand) flow.Key {
	var k flow.Key
	k.InPort = 1 + rng.Uint32N(4)
	k.EthSrc = [6]byte{0x02, 0, 0, 0, 0, byte(rng.IntN(8))}
	k.EthDst = [6]byte{0x02, 0, 0, 0, 1, byte(rng.IntN(8))}
	k.EthType = [...]uint16{0x0800, 0x86dd, 0x0806}[rng.IntN(3)]
	k.IPv4Src = 0x0a000000 | rng.Uint32N(1<<10)<<rng.UintN(20)
	k.IPv4Dst = 0xc0a80000 | rng.Uint32N(256)
	k.NwProto = [...]uint8{1, 6, 17}[rng.IntN(3)]
	k.TpSrc = uint16(1000 + rng.IntN(16))
	k.TpDst = uint16(rng.IntN(4))<<8 | uint16(rng.IntN(4))
	k.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: uint16(rng.IntN(16))}
	k.NwTTL = uint8(rng.IntN(256))
	return k
}

// reference is the model of a megaflow table: a Go map from match to
// value, looked up by trying every installed mask in turn.
type reference struct {
	byMatch map[flow.Match]*megaflow
}

func (r *reference) maskSet() map[flow.Mask]bool {
	seen := map[flow.Mask]bool{}
	for m := range r.byMatch {
		seen[m.Mask] = true
	}
	return seen
}

func (r *reference) lookupAny(masks map[flow.Mask]bool, k *flow.Key) bool {
	var m flow.Match
	for mask := range masks {
		m.Mask = mask
		k.ApplyMask(&mask, &m.Key)
		if r.byMatch[m] != nil {
			return true
		}
	}
	return false
}

// probe derives a packet key: mostly from an installed megaflow with the
// wildcarded bits randomised (a hit), sometimes with one bit flipped
// anywhere (a hit or a near miss), sometimes from scratch.
func probe(rng *rand.Rand, installed []*megaflow) flow.Key {
	if len(installed) == 0 || rng.IntN(10) == 0 {
		return randomKey(rng)
	}
	e := installed[rng.IntN(len(installed))]
	var k flow.Key
	kw, ew, mw := k.Words(), e.m.Key.Words(), e.m.Mask.Words()
	for i := range kw {
		kw[i] = ew[i] | rng.Uint64()&^mw[i]
	}
	if rng.IntN(3) == 0 {
		w := rng.IntN(flow.KeyWords)
		kw[w] ^= 1 << rng.IntN(64)
	}
	return k
}

// checkInvariants verifies the open-addressing structure directly: counts
// add up, stored hashes are right, and every entry is reachable from its
// home slot without crossing an empty slot.
func checkInvariants(t *testing.T, mf *Megaflows[megaflow]) {
	t.Helper()
	total := 0
	for si, st := range mf.subtables {
		n := 0
		for i, c := range st.ctrl {
			if c == 0 {
				if st.entries[i].val != nil {
					t.Fatalf("subtable %d slot %d empty but holds a value", si, i)
				}
				continue
			}
			n++
			e := &st.entries[i]
			if h := st.hash(&e.key); h != c {
				t.Fatalf("subtable %d slot %d: stored hash %#x, key hashes to %#x", si, i, c, h)
			}
			for j := c & st.slotMask; j != uint32(i); j = (j + 1) & st.slotMask {
				if st.ctrl[j] == 0 {
					t.Fatalf("subtable %d slot %d: empty slot %d between home and entry", si, i, j)
				}
			}
		}
		if n != st.count || n == 0 {
			t.Fatalf("subtable %d: %d occupied slots, count %d", si, n, st.count)
		}
		if n*4 > len(st.ctrl)*3 {
			t.Fatalf("subtable %d: load %d/%d above 3/4", si, n, len(st.ctrl))
		}
		total += n
	}
	if total != mf.Len() {
		t.Fatalf("Len() = %d, entries %d", mf.Len(), total)
	}
}

func checkAgainstReference(t *testing.T, rng *rand.Rand, mf *Megaflows[megaflow], ref *reference, installed []*megaflow, probes int) (hits int) {
	t.Helper()
	checkInvariants(t, mf)
	if mf.Len() != len(ref.byMatch) {
		t.Fatalf("Len() = %d, reference has %d", mf.Len(), len(ref.byMatch))
	}
	masks := ref.maskSet()
	if got, want := mf.Subtables(), len(masks); got != want {
		t.Fatalf("Subtables() = %d, reference has %d masks", got, want)
	}
	for i := 0; i < probes; i++ {
		k := probe(rng, installed)
		got := mf.Lookup(&k)
		want := ref.lookupAny(masks, &k)
		if (got != nil) != want {
			t.Fatalf("probe %d: Lookup returned %v, reference match %v", i, got, want)
		}
		if got == nil {
			continue
		}
		hits++
		if !k.MatchesMasked(&got.m.Mask, &got.m.Key) {
			t.Fatalf("probe %d: Lookup returned megaflow %d that does not match the key", i, got.id)
		}
		if ref.byMatch[got.m] != got {
			t.Fatalf("probe %d: Lookup returned megaflow %d that is not installed", i, got.id)
		}
	}
	return hits
}

func TestMegaflowsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	for trial := 0; trial < 6; trial++ {
		mf := New[megaflow]()
		ref := &reference{byMatch: map[flow.Match]*megaflow{}}
		masks := make([]flow.Mask, 1+rng.IntN(10))
		for i := range masks {
			masks[i] = randomMask(rng)
		}
		nextID := 0
		var installed []*megaflow
		insert := func() {
			var m flow.Match
			m.Mask = masks[rng.IntN(len(masks))]
			m.Key = randomKey(rng) // unmasked on purpose: Insert masks it
			v := &megaflow{id: nextID}
			nextID++
			m.Key.ApplyMask(&m.Mask, &v.m.Key)
			v.m.Mask = m.Mask
			old := mf.Insert(&m, v)
			if old != ref.byMatch[v.m] {
				t.Fatalf("Insert replaced %v, reference had %v", old, ref.byMatch[v.m])
			}
			if old != nil {
				for i, e := range installed {
					if e == old {
						installed[i] = v
					}
				}
			} else {
				installed = append(installed, v)
			}
			ref.byMatch[v.m] = v
		}
		remove := func() {
			i := rng.IntN(len(installed))
			e := installed[i]
			m := e.m
			// Stray bits outside the mask must not matter.
			mw, kw := m.Mask.Words(), m.Key.Words()
			w := rng.IntN(flow.KeyWords)
			kw[w] |= rng.Uint64() &^ mw[w]
			if got := mf.Remove(&m); got != e {
				t.Fatalf("Remove returned %v, want megaflow %d", got, e.id)
			}
			if got := mf.Remove(&m); got != nil {
				t.Fatalf("second Remove returned %v", got)
			}
			delete(ref.byMatch, e.m)
			installed[i] = installed[len(installed)-1]
			installed = installed[:len(installed)-1]
		}

		for i := 0; i < 3000; i++ {
			insert()
		}
		hits := checkAgainstReference(t, rng, mf, ref, installed, 3000)
		for round := 0; round < 30; round++ {
			for i, n := 0, rng.IntN(800); i < n && len(installed) > 0; i++ {
				remove()
			}
			for i, n := 0, rng.IntN(800); i < n; i++ {
				insert()
			}
			if rng.IntN(2) == 0 {
				mf.Rank()
			}
			hits += checkAgainstReference(t, rng, mf, ref, installed, 1000)
		}
		// Drain completely: every subtable must go.
		for len(installed) > 0 {
			remove()
		}
		checkAgainstReference(t, rng, mf, ref, installed, 200)
		if mf.Subtables() != 0 || mf.Len() != 0 {
			t.Fatalf("after removing everything: %d subtables, %d flows", mf.Subtables(), mf.Len())
		}
		if hits == 0 {
			t.Fatal("no probe ever hit: the test checked nothing")
		}
	}
}

// TestMegaflowsChurn hammers one subtable with insert/remove cycles over a
// small key space, so that probe clusters form, wrap around the table end
// and get shifted back by deletions many times.
func TestMegaflowsChurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	mf := New[megaflow]()
	var mask flow.Mask
	mask.InPort = ^uint32(0)
	mask.TpSrc = 0xffff
	const space = 300
	matches := make([]flow.Match, space)
	for i := range matches {
		matches[i].Mask = mask
		matches[i].Key.InPort = uint32(i % 5)
		matches[i].Key.TpSrc = uint16(i)
	}
	vals := make([]*megaflow, space)
	present := make([]bool, space)
	n := 0
	for step := 0; step < 30000; step++ {
		i := rng.IntN(space)
		// Bias towards about 2/3 full so the table neither empties nor
		// only grows.
		if present[i] && (n > 2*space/3 || rng.IntN(2) == 0) {
			if got := mf.Remove(&matches[i]); got != vals[i] {
				t.Fatalf("step %d: Remove(%d) = %v, want %v", step, i, got, vals[i])
			}
			present[i] = false
			n--
		} else if !present[i] {
			vals[i] = &megaflow{m: matches[i], id: step}
			if old := mf.Insert(&matches[i], vals[i]); old != nil {
				t.Fatalf("step %d: Insert(%d) replaced %v", step, i, old)
			}
			present[i] = true
			n++
		}
		if mf.Len() != n {
			t.Fatalf("step %d: Len() = %d, want %d", step, mf.Len(), n)
		}
		if step%500 == 0 {
			checkInvariants(t, mf)
			for j := range matches {
				got := mf.Lookup(&matches[j].Key)
				if present[j] && got != vals[j] || !present[j] && got != nil {
					t.Fatalf("step %d: Lookup(%d) = %v, present %v", step, j, got, present[j])
				}
			}
		}
	}
}

func TestMegaflowsReplace(t *testing.T) {
	mf := New[megaflow]()
	var m flow.Match
	m.Mask.EthType = 0xffff
	m.Mask.IPv4Dst = 0xffffff00
	m.Key.EthType = 0x0800
	m.Key.IPv4Dst = 0x0a000001
	a, b := &megaflow{id: 1}, &megaflow{id: 2}
	if old := mf.Insert(&m, a); old != nil {
		t.Fatalf("first Insert replaced %v", old)
	}
	// Same megaflow with different bits outside the mask.
	m2 := m
	m2.Key.IPv4Dst = 0x0a0000fe
	m2.Key.TpDst = 80
	if old := mf.Insert(&m2, b); old != a {
		t.Fatalf("Insert of the same masked key replaced %v, want the first value", old)
	}
	if mf.Len() != 1 || mf.Subtables() != 1 {
		t.Fatalf("Len() = %d, Subtables() = %d, want 1, 1", mf.Len(), mf.Subtables())
	}
	k := m.Key
	k.IPv4Dst = 0x0a000077
	k.InPort = 9
	if got := mf.Lookup(&k); got != b {
		t.Fatalf("Lookup = %v, want the replacing value", got)
	}
	k.IPv4Dst = 0x0a000177
	if got := mf.Lookup(&k); got != nil {
		t.Fatalf("Lookup outside the prefix = %v, want nil", got)
	}
	if old := mf.Insert(&m, nil); old != nil || mf.Lookup(&m.Key) != b {
		t.Fatal("inserting nil changed the table")
	}
}

func TestMegaflowsSubtableRemoval(t *testing.T) {
	mf := New[megaflow]()
	var ma, mb flow.Match
	ma.Mask.InPort = ^uint32(0)
	mb.Mask.EthType = 0xffff
	var as []flow.Match
	for i := 0; i < 20; i++ {
		m := ma
		m.Key.InPort = uint32(i)
		as = append(as, m)
		mf.Insert(&m, &megaflow{id: i})
	}
	mb.Key.EthType = 0x0800
	vb := &megaflow{id: 100}
	mf.Insert(&mb, vb)
	if mf.Subtables() != 2 || mf.Len() != 21 {
		t.Fatalf("Subtables() = %d, Len() = %d, want 2, 21", mf.Subtables(), mf.Len())
	}
	// Right key, wrong mask: not the same megaflow.
	wrong := mb
	wrong.Mask.EthType = 0xff00
	if got := mf.Remove(&wrong); got != nil {
		t.Fatalf("Remove under another mask = %v", got)
	}
	absent := ma
	absent.Key.InPort = 99
	if got := mf.Remove(&absent); got != nil {
		t.Fatalf("Remove of an absent key = %v", got)
	}
	for i := range as {
		if mf.Remove(&as[i]) == nil {
			t.Fatalf("Remove(%d) found nothing", i)
		}
		if want := 2; i < len(as)-1 && mf.Subtables() != want {
			t.Fatalf("subtable count %d with flows left in it", mf.Subtables())
		}
	}
	if mf.Subtables() != 1 || mf.Len() != 1 {
		t.Fatalf("after emptying a mask: Subtables() = %d, Len() = %d, want 1, 1", mf.Subtables(), mf.Len())
	}
	k := as[3].Key
	k.EthType = 0x0800
	if got := mf.Lookup(&k); got != vb {
		t.Fatalf("Lookup = %v, want the remaining megaflow", got)
	}
	mf.Clear()
	if mf.Subtables() != 0 || mf.Len() != 0 || mf.Lookup(&k) != nil {
		t.Fatal("Clear left something behind")
	}
	// The classifier still works after Clear.
	mf.Insert(&mb, vb)
	if mf.Lookup(&k) != vb {
		t.Fatal("Insert after Clear not found")
	}
}

// TestMegaflowsRank uses two overlapping megaflows, which makes the probe
// order visible: the one in the higher-ranked subtable wins.
func TestMegaflowsRank(t *testing.T) {
	mf := New[megaflow]()
	var ma, mb flow.Match
	ma.Mask.InPort = ^uint32(0)
	ma.Key.InPort = 1
	mb.Mask.EthType = 0xffff
	mb.Key.EthType = 0x0800
	va, vb := &megaflow{id: 1}, &megaflow{id: 2}
	mf.Insert(&ma, va)
	mf.Insert(&mb, vb)

	var both, onlyB flow.Key
	both.InPort, both.EthType = 1, 0x0800
	onlyB.InPort, onlyB.EthType = 2, 0x0800
	if mf.Lookup(&both) != va {
		t.Fatal("first-inserted mask is not probed first")
	}
	for i := 0; i < 10; i++ {
		if mf.Lookup(&onlyB) != vb {
			t.Fatal("Lookup of the second mask failed")
		}
	}
	// Hits so far: a 1, b 10.
	mf.Rank()
	if mf.Lookup(&both) != vb {
		t.Fatal("after Rank the more-hit subtable is not probed first")
	}
	if mf.subtables[0].hits != 1 || mf.subtables[1].hits != 0 {
		t.Fatalf("hit counters not reset by Rank: %d, %d", mf.subtables[0].hits, mf.subtables[1].hits)
	}
	// Ties keep their order.
	mf.subtables[0].hits, mf.subtables[1].hits = 0, 0
	mf.Rank()
	if mf.Lookup(&both) != vb {
		t.Fatal("Rank with equal hits changed the order")
	}
	if allocs := testing.AllocsPerRun(100, mf.Rank); allocs != 0 {
		t.Fatalf("Rank allocates %v times", allocs)
	}
}

func TestMegaflowsRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	mf := New[megaflow]()
	want := map[flow.Match]*megaflow{}
	masks := []flow.Mask{randomMask(rng), randomMask(rng), randomMask(rng)}
	for i := 0; i < 500; i++ {
		var m flow.Match
		m.Mask = masks[i%3]
		k := randomKey(rng)
		k.ApplyMask(&m.Mask, &m.Key)
		v := &megaflow{m: m, id: i}
		mf.Insert(&m, v)
		want[m] = v
	}
	got := map[flow.Match]*megaflow{}
	mf.Range(func(m *flow.Match, v *megaflow) bool {
		if _, dup := got[*m]; dup {
			t.Fatalf("Range visited %v twice", *m)
		}
		got[*m] = v
		return true
	})
	if len(got) != len(want) {
		t.Fatalf("Range visited %d megaflows, want %d", len(got), len(want))
	}
	for m, v := range want {
		if got[m] != v {
			t.Fatalf("Range gave %v for megaflow %d", got[m], v.id)
		}
	}
	n := 0
	mf.Range(func(*flow.Match, *megaflow) bool { n++; return n < 7 })
	if n != 7 {
		t.Fatalf("Range did not stop when told: %d calls", n)
	}
}

func TestMegaflowsLookupDoesNotAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	mf := New[megaflow]()
	for i := 0; i < 1000; i++ {
		var m flow.Match
		m.Mask = randomMask(rng)
		m.Key = randomKey(rng)
		mf.Insert(&m, &megaflow{id: i})
	}
	keys := make([]flow.Key, 64)
	for i := range keys {
		keys[i] = randomKey(rng)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		mf.Lookup(&keys[i%len(keys)])
		i++
	})
	if allocs != 0 {
		t.Fatalf("Lookup allocates %v times per run", allocs)
	}
}

// TestMegaflowsHashCollision finds two megaflows whose masked keys have the
// same 32-bit hash, so that lookups must tell them apart by comparing keys.
func TestMegaflowsHashCollision(t *testing.T) {
	var mask flow.Mask
	mask.IPv4Src = ^uint32(0)
	mask.IPv4Dst = ^uint32(0)
	mask.TpSrc = 0xffff
	st := newSubtable[megaflow](&mask)
	seen := map[uint32]flow.Key{}
	var a, b flow.Key
	found := false
	for i := uint64(0); i < 1<<22 && !found; i++ {
		var k flow.Key
		k.IPv4Src = uint32(i)
		k.IPv4Dst = uint32(i >> 32)
		k.TpSrc = uint16(i * 0x9e37)
		h := st.hash(&k)
		if prev, ok := seen[h]; ok {
			a, b, found = prev, k, true
		}
		seen[h] = k
	}
	if !found {
		t.Fatal("no 32-bit hash collision among 4M keys")
	}
	mf := New[megaflow]()
	va := &megaflow{m: flow.Match{Key: a, Mask: mask}, id: 1}
	vb := &megaflow{m: flow.Match{Key: b, Mask: mask}, id: 2}
	mf.Insert(&va.m, va)
	if got := mf.Lookup(&b); got != nil {
		t.Fatalf("key with the same hash as an installed megaflow matched it: %v", got)
	}
	mf.Insert(&vb.m, vb)
	if mf.Len() != 2 {
		t.Fatalf("Len() = %d, want 2: colliding megaflow replaced the other", mf.Len())
	}
	if mf.Lookup(&a) != va || mf.Lookup(&b) != vb {
		t.Fatal("colliding megaflows not told apart")
	}
	if mf.Remove(&va.m) != va || mf.Lookup(&a) != nil || mf.Lookup(&b) != vb {
		t.Fatal("removing one of two colliding megaflows went wrong")
	}
}

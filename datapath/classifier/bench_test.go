package classifier

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

var sink *megaflow

// randomFullKey fills every field a benchmark mask may cover with random
// bits, so masked keys are distinct with high probability.
func randomFullKey(rng *rand.Rand) flow.Key {
	var k flow.Key
	k.InPort = rng.Uint32()
	k.EthType = uint16(rng.Uint32())
	k.NwProto = uint8(rng.Uint32())
	for i := range k.EthSrc {
		k.EthSrc[i] = byte(rng.Uint32())
		k.EthDst[i] = byte(rng.Uint32())
	}
	k.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: uint16(rng.Uint32())}
	k.IPv4Src, k.IPv4Dst = rng.Uint32(), rng.Uint32()
	k.TpSrc, k.TpDst = uint16(rng.Uint32()), uint16(rng.Uint32())
	k.NwTTL = uint8(rng.Uint32())
	return k
}

// benchMasks returns n distinct masks of the shapes translation produces
// (L2 forwarding, L3 routing by prefix, 5-tuple ACLs, ...). Every mask
// covers in_port, and the benchmarks give the flows of mask i in_port i+1,
// so each packet can match only in the subtable its flow was built for.
func benchMasks(n int) []flow.Mask {
	ff6 := [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	shapes := []func(m *flow.Mask){
		func(m *flow.Mask) { m.EthType, m.IPv4Dst = 0xffff, 0xffffff00 },
		func(m *flow.Mask) { m.EthDst = ff6 },
		func(m *flow.Mask) { m.EthSrc, m.EthDst = ff6, ff6 },
		func(m *flow.Mask) { m.EthType, m.NwProto, m.TpDst = 0xffff, 0xff, 0xffff },
		func(m *flow.Mask) {
			m.EthType, m.NwProto = 0xffff, 0xff
			m.IPv4Src, m.IPv4Dst, m.TpSrc, m.TpDst = ^uint32(0), ^uint32(0), 0xffff, 0xffff
		},
		func(m *flow.Mask) { m.VLAN[0].TCI, m.EthDst = 0x0fff, ff6 },
		func(m *flow.Mask) { m.EthType, m.IPv4Src = 0xffff, 0xffff0000 },
		func(m *flow.Mask) { m.EthType, m.IPv4Dst, m.NwProto = 0xffff, ^uint32(0), 0xff },
		func(m *flow.Mask) { m.EthType, m.IPv4Src, m.TpDst = 0xffff, 0xff000000, 0xffff },
		func(m *flow.Mask) {
			m.EthSrc, m.EthDst, m.EthType, m.NwProto = ff6, ff6, 0xffff, 0xff
			m.IPv4Src, m.IPv4Dst, m.TpSrc, m.TpDst = ^uint32(0), ^uint32(0), 0xffff, 0xffff
			m.VLAN[0].TCI = 0x0fff
		},
	}
	masks := make([]flow.Mask, n)
	for i := range masks {
		masks[i].InPort = ^uint32(0)
		shapes[i%len(shapes)](&masks[i])
	}
	return masks
}

// buildMegaflows installs entries flows spread evenly over the masks and
// returns up to maxProbes packet keys that hit them (wildcarded bits
// randomised), in random order.
func buildMegaflows(masks []flow.Mask, entries, maxProbes int) (*Megaflows[megaflow], []flow.Key) {
	rng := rand.New(rand.NewPCG(11, uint64(entries)))
	mf := New[megaflow]()
	var probes []flow.Key
	for i := 0; i < entries; i++ {
		mi := i % len(masks)
		k := randomFullKey(rng)
		k.InPort = uint32(mi + 1)
		m := flow.Match{Mask: masks[mi]}
		k.ApplyMask(&m.Mask, &m.Key)
		mf.Insert(&m, &megaflow{m: m, id: i})
		if len(probes) < maxProbes {
			p := randomFullKey(rng)
			pw, kw, mw := p.Words(), m.Key.Words(), m.Mask.Words()
			for w := range pw {
				pw[w] = kw[w] | pw[w]&^mw[w]
			}
			probes = append(probes, p)
		}
	}
	rng.Shuffle(len(probes), func(i, j int) { probes[i], probes[j] = probes[j], probes[i] })
	return mf, probes
}

// pow2Prefix trims keys to a power-of-two count so the loop can index with
// a mask.
func pow2Prefix(keys []flow.Key) []flow.Key {
	n := 1
	for n*2 <= len(keys) {
		n *= 2
	}
	return keys[:n]
}

func benchLookup(b *testing.B, mf *Megaflows[megaflow], keys []flow.Key, wantHit bool) {
	keys = pow2Prefix(keys)
	for i := range keys {
		if (mf.Lookup(&keys[i]) != nil) != wantHit {
			b.Fatalf("probe %d: hit = %v, want %v", i, !wantHit, wantHit)
		}
	}
	mask := len(keys) - 1
	b.ReportAllocs()
	b.ResetTimer()
	var v *megaflow
	for i := 0; i < b.N; i++ {
		v = mf.Lookup(&keys[i&mask])
	}
	sink = v
}

func BenchmarkMegaflowLookup(b *testing.B) {
	b.Run("masks=1", func(b *testing.B) {
		mf, keys := buildMegaflows(benchMasks(1), 1000, 1<<10)
		benchLookup(b, mf, keys, true)
	})
	for _, entries := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("masks=10/entries=%d", entries), func(b *testing.B) {
			mf, keys := buildMegaflows(benchMasks(10), entries, 1<<16)
			benchLookup(b, mf, keys, true)
		})
	}
	b.Run("masks=10/entries=1000/first-subtable", func(b *testing.B) {
		mf, keys := buildMegaflows(benchMasks(10), 1000, 1<<16)
		// Only flows of mask 3, ranked first.
		var first []flow.Key
		for _, k := range keys {
			if k.InPort == 4 {
				first = append(first, k)
			}
		}
		for i := range first {
			mf.Lookup(&first[i])
		}
		mf.Rank()
		if want := benchMasks(10)[3]; !mf.subtables[0].mask.Equal(&want) {
			b.Fatal("Rank did not move the hit subtable first")
		}
		benchLookup(b, mf, first, true)
	})
	b.Run("miss/masks=10", func(b *testing.B) {
		mf, keys := buildMegaflows(benchMasks(10), 1000, 1<<10)
		for i := range keys {
			keys[i].InPort = 1000 // no megaflow has this port
		}
		benchLookup(b, mf, keys, false)
	})
}

func BenchmarkEMCLookup(b *testing.B) {
	rng := rand.New(rand.NewPCG(21, 22))
	e := NewEMC[megaflow](DefaultEMCEntries)
	e.SetInsertInvProb(1)
	v := &megaflow{}
	const flows = 4096
	var hits, misses []flow.Key
	var hitHashes, missHashes []uint32
	for i := 0; i < flows; i++ {
		k := randomFullKey(rng)
		e.MaybeInsert(&k, k.Hash(), v)
	}
	// Re-generate the same keys: keep those still cached (two-way slots
	// evict a few), and make near-identical keys that are not.
	rng = rand.New(rand.NewPCG(21, 22))
	for i := 0; i < flows; i++ {
		k := randomFullKey(rng)
		if e.Lookup(&k, k.Hash()) != nil {
			hits = append(hits, k)
			hitHashes = append(hitHashes, k.Hash())
		}
		k.TpSrc++
		if e.Lookup(&k, k.Hash()) == nil {
			misses = append(misses, k)
			missHashes = append(missHashes, k.Hash())
		}
	}
	run := func(b *testing.B, keys []flow.Key, hashes []uint32) {
		n := len(pow2Prefix(keys))
		mask := n - 1
		b.ReportAllocs()
		b.ResetTimer()
		var got *megaflow
		for i := 0; i < b.N; i++ {
			got = e.Lookup(&keys[i&mask], hashes[i&mask])
		}
		sink = got
	}
	b.Run("hit", func(b *testing.B) { run(b, hits, hitHashes) })
	b.Run("miss", func(b *testing.B) { run(b, misses, missHashes) })
}

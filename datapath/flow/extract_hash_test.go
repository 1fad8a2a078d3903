package flow

import (
	"math/rand/v2"
	"testing"
)

// checkExtractHash asserts that ExtractHash is Extract, Hash and IsShort,
// starting from a key and offsets full of garbage, and reports whether the
// frame took the fast path.
func checkExtractHash(t *testing.T, data []byte, port uint32) bool {
	t.Helper()
	var want Key
	var wantOff Offsets
	wantSt := Extract(data, port, &want, &wantOff)
	var k Key
	for i := range k.Words() {
		k.Words()[i] = ^uint64(i)
	}
	off := Offsets{1, 2}
	st, h, short := ExtractHash(data, port, &k, &off)
	if st != wantSt || k != want || off != wantOff {
		t.Fatalf("ExtractHash differs from Extract on % x:\n status %d, want %d\n got  %s\n want %s\n%s\n offsets %+v, want %+v",
			data, st, wantSt, k.String(), want.String(), keyDiff(&k, &want), off, wantOff)
	}
	if h != want.Hash() {
		t.Fatalf("ExtractHash's hash %#x, Hash %#x, on % x", h, want.Hash(), data)
	}
	if short != want.IsShort() {
		t.Fatalf("short %v, IsShort %v, on % x", short, want.IsShort(), data)
	}
	// ExtractFast either agrees or leaves everything as it was.
	var fk Key
	for i := range fk.Words() {
		fk.Words()[i] = ^uint64(i)
	}
	garbage, foff := fk, Offsets{1, 2}
	if fh, ok := ExtractFast(data, port, &fk, &foff); ok {
		if fk != want || foff != wantOff || fh != h || wantSt != 0 {
			t.Fatalf("ExtractFast differs from Extract on % x", data)
		}
	} else if fk != garbage || foff != (Offsets{1, 2}) {
		t.Fatalf("ExtractFast refused % x but wrote the key or offsets", data)
	}
	slow := false
	slowPathHook = func() { slow = true }
	defer func() { slowPathHook = nil }()
	var k2 Key
	var off2 Offsets
	ExtractHash(data, port, &k2, &off2)
	return !slow
}

func TestExtractHashCases(t *testing.T) {
	for _, c := range extractCases(t) {
		fast := checkExtractHash(t, c.frame, 7)
		if (c.name == "udp4" || c.name == "tcp4" || c.name == "udp4-padded") && !fast {
			t.Errorf("%s: did not take the fast path", c.name)
		}
		for n := 0; n < len(c.frame); n++ {
			checkExtractHash(t, c.frame[:n:n], 7)
		}
	}
}

// TestExtractHashMutations flips the bytes the fast path decides on (and
// random others) in frames that take it: whichever path a mutant takes,
// the result is Extract's.
func TestExtractHashMutations(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fastSeen, slowSeen := 0, 0
	for _, base := range [][]byte{frameUDP4(t, 18), frameUDP4(t, 0), frameTCP4(t)} {
		for i := 0; i < 3000; i++ {
			f := append([]byte(nil), base...)
			for m := r.IntN(3) + 1; m > 0; m-- {
				at := []int{12, 13, 14, 16, 17, 20, 21, 23, 46, r.IntN(len(f))}[r.IntN(10)]
				if r.IntN(2) == 0 {
					f[at] = byte(r.Uint32())
				} else {
					f[at] ^= 1 << r.IntN(8)
				}
			}
			if checkExtractHash(t, f, r.Uint32()) {
				fastSeen++
			} else {
				slowSeen++
			}
		}
	}
	if fastSeen < 100 || slowSeen < 100 {
		t.Fatalf("fast path %d times, general path %d times: mutations do not exercise both", fastSeen, slowSeen)
	}
}

func TestExtractHashAllocs(t *testing.T) {
	f := frameUDP4(t, 18)
	var k Key
	var off Offsets
	if a := testing.AllocsPerRun(100, func() { ExtractHash(f, 1, &k, &off) }); a != 0 {
		t.Fatalf("%v allocs per ExtractHash", a)
	}
}

func TestEqualShort(t *testing.T) {
	a, b := ip4Key(17), ip4Key(17)
	if !a.IsShort() || !a.EqualShort(&b) {
		t.Fatal("equal IPv4 keys")
	}
	for w := 0; w < ShortWords; w++ {
		c := b
		c.Words()[w] ^= 1 << 40
		if a.EqualShort(&c) {
			t.Fatalf("word %d differs, EqualShort says equal", w)
		}
	}
	b.RecircID = 1
	if b.IsShort() {
		t.Fatal("a recirculated key is short")
	}
}

func FuzzExtractHash(f *testing.F) {
	for _, c := range extractCases(f) {
		f.Add(c.frame, uint32(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, port uint32) {
		checkExtractHash(t, data, port)
	})
}

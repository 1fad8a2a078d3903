package vnethdr

import (
	"math/rand"
	"testing"
)

// refSumLong is refSum with a 64-bit accumulator, for inputs of more than
// 128 KiB whose 16-bit words would overflow refSum's 32 bits.
func refSumLong(b []byte) uint16 {
	var s uint64
	for i := 0; i+1 < len(b); i += 2 {
		s += uint64(b[i])<<8 | uint64(b[i+1])
	}
	if len(b)%2 == 1 {
		s += uint64(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// sameSum compares one's-complement sums, where 0 and 0xffff are the same
// value.
func sameSum(a, b uint16) bool {
	return a == b || a == 0 && b == 0xffff || a == 0xffff && b == 0
}

// TestSumVector checks the vector sum (where the machine has one) against
// the reference and the portable code over lengths around its thresholds
// and chunk size, unaligned starts, and inputs of all ones, which fill its
// 32-bit lanes fastest.
func TestSumVector(t *testing.T) {
	if !haveAVX2 {
		t.Log("no vector sum on this machine: checking the portable code alone")
	}
	rng := rand.New(rand.NewSource(2))
	buf := make([]byte, 3*avx2Chunk+200)
	lens := []int{0, 1, 63, 64, 65, avx2Min - 1, avx2Min, avx2Min + 1, 1398, 1399, 65535, 65536,
		avx2Chunk - 1, avx2Chunk, avx2Chunk + 64, avx2Chunk + 65, 3 * avx2Chunk}
	for range 40 {
		lens = append(lens, rng.Intn(70000))
	}
	for i, n := range lens {
		for fill := range 3 {
			off := (i + fill) % 37
			b := buf[off : off+n]
			switch fill {
			case 0:
				rng.Read(b)
			case 1:
				for j := range b {
					b[j] = 0xff
				}
			case 2:
				for j := range b {
					b[j] = byte(rng.Intn(2) * 0xff)
				}
			}
			got, want := sum(b), refSumLong(b)
			saved := haveAVX2
			haveAVX2 = false
			portable := sum(b)
			haveAVX2 = saved
			if !sameSum(got, want) || !sameSum(portable, want) {
				t.Fatalf("len %d off %d fill %d: sum %#04x, portable %#04x, reference %#04x", n, off, fill, got, portable, want)
			}
		}
	}
}

// FuzzSum checks sum, vector code included, against the reference on any
// input and start offset.
func FuzzSum(f *testing.F) {
	f.Add([]byte{0xff, 0xff, 0x01}, uint8(1))
	f.Add(make([]byte, 1000), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, off uint8) {
		b = b[min(int(off), len(b)):]
		if got, want := sum(b), refSumLong(b); !sameSum(got, want) {
			t.Fatalf("len %d: sum %#04x, reference %#04x", len(b), got, want)
		}
	})
}

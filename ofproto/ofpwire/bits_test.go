package ofpwire

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// bitsRef and putBitsRef are Bits and PutBits one bit at a time, the
// definition the byte-wise versions must agree with.
func bitsRef(b []byte, ofs, n int) uint64 {
	var v uint64
	for i := n - 1; i >= 0; i-- {
		bit := ofs + i
		v = v<<1 | uint64(b[len(b)-1-bit/8]>>(bit%8)&1)
	}
	return v
}

func putBitsRef(b []byte, ofs, n int, v uint64) {
	for i := range n {
		bit := ofs + i
		byt := &b[len(b)-1-bit/8]
		*byt = *byt&^(1<<(bit%8)) | byte(v>>i&1)<<(bit%8)
	}
}

// TestBitsAgainstBitwise checks every offset and width (0-64 bits) of
// fields of 1 to 16 bytes against the bit-at-a-time definition, on random
// contents, for both reading and writing.
func TestBitsAgainstBitwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for size := 1; size <= 16; size++ {
		b := make([]byte, size)
		for ofs := 0; ofs <= 8*size; ofs++ {
			for n := 0; n <= min(64, 8*size-ofs); n++ {
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				if got, want := Bits(b, ofs, n), bitsRef(b, ofs, n); got != want {
					t.Fatalf("Bits(%x, %d, %d) = %#x, want %#x", b, ofs, n, got, want)
				}
				v := rng.Uint64()
				got, want := append([]byte(nil), b...), append([]byte(nil), b...)
				PutBits(got, ofs, n, v)
				putBitsRef(want, ofs, n, v)
				if !bytes.Equal(got, want) {
					t.Fatalf("PutBits(%x, %d, %d, %#x) = %x, want %x", b, ofs, n, v, got, want)
				}
			}
		}
	}
}

func BenchmarkBitsPutBits(b *testing.B) {
	src, dst := make([]byte, 16), make([]byte, 16)
	for i := range src {
		src[i] = byte(i * 37)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		PutBits(dst, 64+i%8, 32, Bits(src, 96-i%8, 32))
	}
}

package vnethdr

import (
	"fmt"
	"testing"
)

func BenchmarkSegment(b *testing.B) {
	cases := []struct {
		name string
		spec frameSpec
		h    Header
	}{
		{"tcp4-64k", frameSpec{flags: "AP", tcpOpts: true, payload: pattern(65483, 1)}, Header{GSOType: GSOTCPv4, GSOSize: 1448}},
		{"tcp6-64k", frameSpec{ipv6: true, flags: "AP", tcpOpts: true, payload: pattern(65463, 1)}, Header{GSOType: GSOTCPv6, GSOSize: 1428}},
		{"uso4-64k", frameSpec{udp: true, payload: pattern(65000, 1)}, Header{GSOType: GSOUDPL4, GSOSize: 1472}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			frame, _, _ := build(b, c.spec)
			dst := make([]byte, 2048)
			var s Segmenter
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			segs := 0
			for b.Loop() {
				if err := s.Reset(&c.h, frame); err != nil {
					b.Fatal(err)
				}
				for {
					_, ok, err := s.Next(dst)
					if err != nil {
						b.Fatal(err)
					}
					if !ok {
						break
					}
					segs++
				}
			}
			b.ReportMetric(float64(segs)/float64(b.N), "segments/op")
		})
	}
}

func BenchmarkFixL4Checksum(b *testing.B) {
	frame, _, _ := build(b, frameSpec{flags: "A", payload: pattern(1460, 1)})
	b.Run("1500", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if FixL4Checksum(frame) {
				b.Fatal("changed a correct frame")
			}
		}
	})
}

// BenchmarkCompletePartialL4Checksum is the cost per already complete
// frame, the common case behind a sender with tx checksum offload off.
func BenchmarkCompletePartialL4Checksum(b *testing.B) {
	frame, _, _ := build(b, frameSpec{flags: "A", payload: pattern(1460, 1)})
	b.Run("1500", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			if CompletePartialL4Checksum(frame) {
				b.Fatal("changed a correct frame")
			}
		}
	})
}

func BenchmarkCompleteChecksum(b *testing.B) {
	spec := frameSpec{flags: "A", payload: pattern(1460, 1)}
	frame, l3off, l4off := build(b, spec)
	h := seedPseudo(frame, spec, l3off, l4off)
	b.Run("1500", func(b *testing.B) {
		b.SetBytes(int64(len(frame)))
		b.ReportAllocs()
		for b.Loop() {
			// Re-seeding is two byte writes; the sum dominates.
			frame[l4off+16], frame[l4off+17] = 0, 0
			if err := CompleteChecksum(&h, frame); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Sum against memmove in bytes per second, for the sizes a tunnel port
// sees (a segment's payload, a super-frame): the figures that say whether
// fusing a copy with a sum could pay. On an AMD EPYC the sum runs at about
// 20 GB/s (one add-with-carry per 8 bytes), memmove at 50-100 GB/s, and a
// Go loop that stores each word it sums ran at 10-13 GB/s, slower than
// copy then Sum.
func BenchmarkSum(b *testing.B) {
	for _, n := range []int{1398, 65000} {
		src := pattern(n, 3)
		dst := make([]byte, n)
		b.Run(fmt.Sprintf("sum-%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				sink16 += Sum(src)
			}
		})
		b.Run(fmt.Sprintf("copy-%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, src)
			}
		})
		b.Run(fmt.Sprintf("copy+sum-%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, src)
				sink16 += Sum(dst)
			}
		})
	}
}

var sink16 uint16

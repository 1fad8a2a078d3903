package flow

import "testing"

// BenchmarkExtract measures per-packet key extraction. udp4-64 is a minimum
// Ethernet frame (64 bytes on the wire, 60 without the FCS).
func BenchmarkExtract(b *testing.B) {
	cases := []struct {
		name  string
		frame []byte
	}{
		{"udp4-64", frameUDP4(b, 18)},
		{"tcp4", frameTCP4(b)},
		{"udp6", frameUDP6(b)},
		{"vlan-udp4", frameVLANUDP4(b)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var k Key
			var off Offsets
			if st := Extract(c.frame, 1, &k, &off); st != 0 || off.L4 == NoOffset {
				b.Fatalf("frame does not parse cleanly: status %d, offsets %+v", st, off)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(c.frame)))
			for b.Loop() {
				Extract(c.frame, 1, &k, &off)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pkt")
		})
	}
}

package ofpwire

import "testing"

func BenchmarkDecodeFlowMod(b *testing.B) {
	msg, _ := Encode(1, ovsFlowMod())
	h := Header{Version: msg[0], Type: 14, Length: uint16(len(msg)), Transaction: 1}
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for i := 0; i < b.N; i++ {
		if _, err := Decode(h, msg[HeaderLen:]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeFlowMod(b *testing.B) {
	m := ovsFlowMod()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Encode(1, m); err != nil {
			b.Fatal(err)
		}
	}
}

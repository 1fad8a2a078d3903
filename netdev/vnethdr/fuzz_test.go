package vnethdr

import (
	"testing"
)

// FuzzSegment feeds arbitrary header bytes and frames to the segmenter and
// the checksum helpers: nothing may panic, every segment must fit dst, and
// a GSO segment is never longer than its header part plus GSOSize.
func FuzzSegment(f *testing.F) {
	add := func(h Header, spec frameSpec) {
		frame, _, _ := build(f, spec)
		hb := make([]byte, Len)
		h.Encode(hb)
		f.Add(hb, frame)
	}
	add(Header{GSOType: GSOTCPv4, GSOSize: 100}, frameSpec{flags: "APF", tcpOpts: true, payload: pattern(450, 1)})
	add(Header{GSOType: GSOTCPv6 | GSOECN, GSOSize: 64}, frameSpec{ipv6: true, vlans: 1, flags: "AC", payload: pattern(300, 2)})
	add(Header{GSOType: GSOUDPL4, GSOSize: 50}, frameSpec{udp: true, vlans: 2, payload: pattern(170, 3)})
	add(Header{GSOType: GSOUDP, GSOSize: 64}, frameSpec{udp: true, ipv4Opts: true, payload: pattern(200, 4)})
	add(Header{Flags: FlagNeedsCsum, CsumStart: 34, CsumOffset: 16}, frameSpec{flags: "A", payload: pattern(20, 5)})
	f.Add([]byte{1, 1, 0xff, 0xff, 1, 0, 0xff, 0xff, 0xff, 0xff}, []byte{})

	dst := make([]byte, 70000)
	f.Fuzz(func(t *testing.T, hb, frame []byte) {
		if len(hb) < Len {
			hb = append(hb, make([]byte, Len-len(hb))...)
		}
		h, err := Decode(hb)
		if err != nil {
			t.Fatal(err)
		}
		var s Segmenter
		err = s.Reset(&h, frame)
		for i := 0; ; i++ {
			n, ok, nerr := s.Next(dst)
			if nerr != nil {
				t.Fatalf("Next into %d bytes: %v", len(dst), nerr)
			}
			if !ok {
				break
			}
			if err != nil {
				t.Fatal("segment produced after a failed Reset")
			}
			if n <= 0 || n > len(dst) {
				t.Fatalf("segment length %d", n)
			}
			if s.kind == kindNone {
				if n != len(frame) {
					t.Fatalf("non-GSO frame of %d bytes yielded %d", len(frame), n)
				}
			} else if n > s.hdrLen+int(h.GSOSize) {
				t.Fatalf("segment of %d bytes exceeds header %d + gso_size %d", n, s.hdrLen, h.GSOSize)
			}
			if i > len(frame) {
				t.Fatal("segmenter does not terminate")
			}
			if s.kind != kindNone && s.kind != kindUFO {
				// Whatever the input, produced segments carry a valid
				// IPv4 header checksum and L4 checksum.
				var p parsed
				if !p.parse(dst[:n], true) {
					t.Fatalf("segment does not parse: % x", dst[:n])
				}
				if FixL4Checksum(dst[:n]) {
					t.Fatal("segment's L4 checksum was wrong")
				}
			}
		}
		if err == nil && !s.Done() {
			t.Fatal("not Done after the last segment")
		}
		h2 := h
		if h2.SetTxHdrLen(frame) && int(h2.HdrLen) > len(frame) {
			t.Fatalf("SetTxHdrLen gave hdr_len %d for a %d-byte frame", h2.HdrLen, len(frame))
		}
		// Whatever CompletePartialL4Checksum completes verifies.
		pc := append([]byte(nil), frame...)
		if CompletePartialL4Checksum(pc) && FixL4Checksum(pc) {
			t.Fatal("CompletePartialL4Checksum left a checksum that does not verify")
		}
		c := append([]byte(nil), frame...)
		_ = CompleteChecksum(&h, c)
		FixL4Checksum(c)
		if FixL4Checksum(c) {
			t.Fatal("FixL4Checksum changed a frame it had just fixed")
		}
		if CompletePartialL4Checksum(c) {
			t.Fatal("CompletePartialL4Checksum changed a frame FixL4Checksum had fixed")
		}
	})
}

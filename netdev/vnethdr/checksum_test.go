package vnethdr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"testing"
)

func TestSumMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 4200)
	for round := 0; round < 3000; round++ {
		switch round % 3 {
		case 0:
			rng.Read(buf)
		case 1: // all ones: every add carries
			for i := range buf {
				buf[i] = 0xff
			}
		case 2:
			for i := range buf {
				buf[i] = byte(rng.Intn(2) * 0xff)
			}
		}
		off := rng.Intn(8) // unaligned starts
		n := rng.Intn(300)
		if round%50 == 0 {
			n = rng.Intn(len(buf) - 8)
		}
		b := buf[off : off+n]
		got, want := sum(b), refSum(b)
		// 0 and 0xffff are the same one's-complement value, but only an
		// all-zero input may fold to 0.
		if got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("len %d off %d: sum %#04x, reference %#04x", n, off, got, want)
		}
	}
	if sum(nil) != 0 || sum([]byte{0x12}) != 0x1200 || sum([]byte{0x12, 0x34, 0x56}) != 0x6834 {
		t.Fatal("small sums wrong")
	}
}

func TestDecodeEncode(t *testing.T) {
	wire := []byte{1, 0x84, 0x36, 0x00, 0xa8, 0x05, 0x22, 0x00, 0x10, 0x00}
	h, err := Decode(wire)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{Flags: FlagNeedsCsum, GSOType: GSOTCPv6 | GSOECN, HdrLen: 0x36, GSOSize: 1448, CsumStart: 0x22, CsumOffset: 16}
	if h != want {
		t.Fatalf("Decode: %+v, want %+v (little-endian fields)", h, want)
	}
	out := make([]byte, Len)
	h.Encode(out)
	if !bytes.Equal(out, wire) {
		t.Fatalf("Encode: % x, want % x", out, wire)
	}
	var zero Header
	zero.Encode(out)
	if !bytes.Equal(out, make([]byte, Len)) {
		t.Fatal("zero Header does not encode as zeros")
	}
}

func TestCompleteChecksum(t *testing.T) {
	specs := []frameSpec{
		{flags: "AP", tcpOpts: true, payload: pattern(1000, 21)},
		{vlans: 2, flags: "A", payload: pattern(333, 22)},
		{ipv6: true, flags: "AP", payload: pattern(1201, 23)},
		{udp: true, ipv4Opts: true, payload: pattern(77, 24)},
		{udp: true, ipv6: true, vlans: 1, payload: pattern(1400, 25)},
		{udp: true, payload: nil},
	}
	for _, spec := range specs {
		t.Run(fmt.Sprintf("%+v", spec)[:60], func(t *testing.T) {
			frame, l3off, l4off := build(t, spec)
			want := append([]byte(nil), frame...)
			h := seedPseudo(frame, spec, l3off, l4off)
			if bytes.Equal(frame, want) {
				t.Fatal("seeding did not change the checksum field")
			}
			if err := CompleteChecksum(&h, frame); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(frame, want) {
				t.Fatalf("checksum %#04x, gopacket's %#04x",
					binary.BigEndian.Uint16(frame[l4off+l4CsumField(spec):]), binary.BigEndian.Uint16(want[l4off+l4CsumField(spec):]))
			}
			// Without NEEDS_CSUM the frame is left alone.
			seedPseudo(frame, spec, l3off, l4off)
			seeded := append([]byte(nil), frame...)
			if err := CompleteChecksum(&Header{CsumStart: h.CsumStart, CsumOffset: h.CsumOffset}, frame); err != nil || !bytes.Equal(frame, seeded) {
				t.Fatal("CompleteChecksum changed a frame without NEEDS_CSUM")
			}
		})
	}
}

func TestFixL4Checksum(t *testing.T) {
	specs := []frameSpec{
		{flags: "AP", tcpOpts: true, payload: pattern(1000, 31)},
		{ipv6: true, vlans: 2, flags: "A", payload: pattern(1001, 32)},
		{udp: true, vlans: 1, payload: pattern(500, 33)},
		{udp: true, ipv6: true, payload: pattern(99, 34)},
		{icmp: true, payload: pattern(56, 35)},
		{icmp: true, ipv6: true, vlans: 1, payload: pattern(57, 36)},
		{udp: true, payload: pattern(3, 37)}, // gopacket pads it to 60 bytes
	}
	for _, spec := range specs {
		t.Run(fmt.Sprintf("%+v", spec)[:60], func(t *testing.T) {
			good, _, l4off := build(t, spec)
			// Trailing bytes past the IP length (Ethernet padding, here
			// non-zero) must not enter the sum.
			good = append(good, 0xee, 0xee, 0xee, 0xee, 0xee)
			field := l4off + l4CsumField(spec)
			frame := append([]byte(nil), good...)
			if FixL4Checksum(frame) || !bytes.Equal(frame, good) {
				t.Fatal("a correct checksum was changed")
			}
			for _, bad := range []uint16{0x1234, 0, 0xffff, ^binary.BigEndian.Uint16(good[field:])} {
				binary.BigEndian.PutUint16(frame[field:], bad)
				if bad == binary.BigEndian.Uint16(good[field:]) {
					continue
				}
				if spec.udp && !spec.ipv6 && bad == 0 {
					if FixL4Checksum(frame) {
						t.Fatal("UDP/IPv4 checksum 0 (none) was rewritten")
					}
					continue
				}
				if !FixL4Checksum(frame) {
					t.Fatalf("checksum %#04x not fixed", bad)
				}
				if !bytes.Equal(frame, good) {
					t.Fatalf("fixed checksum %#04x, gopacket's %#04x", binary.BigEndian.Uint16(frame[field:]), binary.BigEndian.Uint16(good[field:]))
				}
			}
		})
	}
}

func TestFixL4ChecksumLeavesAlone(t *testing.T) {
	tcp4, _, l4 := build(t, frameSpec{flags: "A", payload: pattern(100, 41)})
	udp6, l3, l4u := build(t, frameSpec{udp: true, ipv6: true, payload: pattern(100, 42)})
	mk := func(b []byte, edit func([]byte)) []byte {
		c := append([]byte(nil), b...)
		edit(c)
		return c
	}
	cases := map[string][]byte{
		"ipv4-later-fragment": mk(tcp4, func(b []byte) { b[14+7] = 1; b[l4+16]++ }),
		"ipv4-first-fragment": mk(tcp4, func(b []byte) { b[14+6] |= 0x20; b[l4+16]++ }),
		"ipv4-length-beyond":  mk(tcp4, func(b []byte) { binary.BigEndian.PutUint16(b[16:], 2000); b[l4+16]++ }),
		"ipv6-routed":         mk(udp6, func(b []byte) {}),
		"arp":                 mk(tcp4, func(b []byte) { b[12], b[13] = 8, 6; b[l4+16]++ }),
		"truncated":           tcp4[:l4+10],
		"short":               tcp4[:10],
	}
	// IPv6 routing header with segments left: the checksum uses the final
	// destination, so the frame must be left alone.
	rh := append(append(append([]byte(nil), udp6[:l4u]...), 17, 0, 4, 1, 0, 0, 0, 0), udp6[l4u:]...)
	rh[l3+6] = 43
	binary.BigEndian.PutUint16(rh[l3+4:], binary.BigEndian.Uint16(rh[l3+4:])+8)
	rh[l4u+8+6]++
	cases["ipv6-routed"] = rh
	for name, frame := range cases {
		orig := append([]byte(nil), frame...)
		if FixL4Checksum(frame) || !bytes.Equal(frame, orig) {
			t.Errorf("%s: frame changed", name)
		}
	}
	// Sanity: the same routing header with no segments left is fixed.
	rh[l4u+3] = 0
	if !FixL4Checksum(rh) {
		t.Error("routing header with segments left 0: bad checksum not fixed")
	}
	if refSum(refPseudo(rh[l3:], true, 17, len(rh)-l4u-8), rh[l4u+8:]) != 0xffff {
		t.Fatal("checksum behind a routing header does not verify after the fix")
	}
}

func TestCompletePartialL4Checksum(t *testing.T) {
	specs := []frameSpec{
		{flags: "AP", tcpOpts: true, payload: pattern(1000, 51)},
		{ipv6: true, vlans: 2, flags: "A", payload: pattern(1001, 52)},
		{udp: true, vlans: 1, payload: pattern(500, 53)},
		{udp: true, ipv6: true, payload: pattern(99, 54)},
		{udp: true, payload: pattern(3, 55)}, // padded to 60 bytes
	}
	for _, spec := range specs {
		t.Run(fmt.Sprintf("%+v", spec)[:60], func(t *testing.T) {
			good, l3off, l4off := build(t, spec)
			good = append(good, 0xee, 0xee, 0xee) // padding past the IP length
			field := l4off + l4CsumField(spec)
			frame := append([]byte(nil), good...)
			if CompletePartialL4Checksum(frame) || !bytes.Equal(frame, good) {
				t.Fatal("a complete checksum was changed")
			}
			seedPseudo(frame, spec, l3off, l4off)
			if !CompletePartialL4Checksum(frame) {
				t.Fatal("the pseudo-header sum was not completed")
			}
			if !bytes.Equal(frame, good) {
				t.Fatalf("completed checksum %#04x, gopacket's %#04x", binary.BigEndian.Uint16(frame[field:]), binary.BigEndian.Uint16(good[field:]))
			}
			// Any other wrong value is the sender's (or the wire's)
			// business: it stays as it is.
			for _, bad := range []uint16{0x1234, ^binary.BigEndian.Uint16(good[field:])} {
				binary.BigEndian.PutUint16(frame[field:], bad)
				orig := append([]byte(nil), frame...)
				if CompletePartialL4Checksum(frame) || !bytes.Equal(frame, orig) {
					t.Fatalf("wrong checksum %#04x was rewritten", bad)
				}
			}
		})
	}
}

func TestCompletePartialL4ChecksumLeavesOthers(t *testing.T) {
	for _, spec := range []frameSpec{
		{icmp: true, payload: pattern(56, 61)},
		{icmp: true, ipv6: true, payload: pattern(56, 62)},
	} {
		frame, _, l4off := build(t, spec)
		// An ICMP checksum is never left partial; even a zero field is
		// not this function's to fix.
		binary.BigEndian.PutUint16(frame[l4off+l4CsumField(spec):], 0)
		orig := append([]byte(nil), frame...)
		if CompletePartialL4Checksum(frame) || !bytes.Equal(frame, orig) {
			t.Errorf("%+v: frame changed", spec)
		}
	}
	// A fragment whose field happens to hold the pseudo-header sum: the
	// checksum covers the whole datagram, so it is left alone.
	spec := frameSpec{flags: "A", payload: pattern(100, 63)}
	frag, l3off, l4off := build(t, spec)
	frag[14+6] |= 0x20
	seedPseudo(frag, spec, l3off, l4off)
	orig := append([]byte(nil), frag...)
	if CompletePartialL4Checksum(frag) || !bytes.Equal(frag, orig) {
		t.Error("fragment changed")
	}
}

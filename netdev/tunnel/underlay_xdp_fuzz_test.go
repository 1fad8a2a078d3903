package tunnel

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// vxlan100 is a VXLAN header with VNI 100.
var vxlan100 = []byte{0x08, 0, 0, 0, 0, 0, 100, 0}

// encap100 is inner behind vxlan100, in a new slice.
func encap100(inner []byte) []byte { return append(append([]byte{}, vxlan100...), inner...) }

// bigPool is a pool of small buffers with big ones attached.
func bigPool(small, big int) *packet.Pool {
	pool := packet.NewPool(small, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(big, packet.BigBufSize))
	return pool
}

// outerFrame is an Ethernet/IPv4/UDP frame to 198.18.20.2:4789 around
// payload, with a correct IPv4 header checksum and, if csum, UDP checksum.
func outerFrame(payload []byte, csum bool) []byte {
	f := make([]byte, 14+20+8+len(payload))
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[1] = 0x45, 0x10
	binary.BigEndian.PutUint16(ip[2:], uint16(20+8+len(payload)))
	ip[6], ip[8], ip[9] = 0x40, 33, 17
	copy(ip[12:], []byte{198, 18, 20, 1, 198, 18, 20, 2})
	binary.BigEndian.PutUint16(ip[10:], ^vnethdr.Sum(ip))
	u := f[34:]
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], 4789)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	if csum {
		var ph [12]byte
		copy(ph[0:8], ip[12:20])
		ph[9] = 17
		binary.BigEndian.PutUint16(ph[10:], uint16(len(u)))
		c := ^csumAdd(vnethdr.Sum(ph[:]), vnethdr.Sum(u))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(u[6:], c)
	}
	return f
}

var local4 = [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: 20, 15: 2}

func TestParseOuter4(t *testing.T) {
	payload := encap100(frame(1))
	for _, csum := range []bool{false, true} {
		f := append(outerFrame(payload, csum), 0, 0, 0, 0) // Ethernet padding
		var tn flow.Tunnel
		hdr, end, ok := parseOuter4(VXLAN, f, &local4, 4789, &tn)
		if !ok || hdr != 42 || end != len(f)-4 {
			t.Fatalf("csum %v: parseOuter4 = %d, %d, %v", csum, hdr, end, ok)
		}
		want := flow.Tunnel{Src: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 14: 20, 15: 1}, Dst: local4, TTL: 33, TOS: 0x10}
		if tn != want {
			t.Errorf("metadata %+v, want %+v", tn, want)
		}
	}
	bad := map[string]func(f []byte){
		"udp checksum":  func(f []byte) { f[len(f)-1] ^= 1 },
		"ip checksum":   func(f []byte) { f[14+8]-- },
		"fragment":      func(f []byte) { f[14+6] |= 0x20 },
		"other port":    func(f []byte) { f[36]++ },
		"other address": func(f []byte) { f[33]++ },
		"not ipv4":      func(f []byte) { f[12] = 0x86 },
		"udp too long":  func(f []byte) { f[38]++ },
		"ip too long":   func(f []byte) { f[16]++ },
	}
	for name, corrupt := range bad {
		f := outerFrame(payload, true)
		corrupt(f)
		var tn flow.Tunnel
		if _, _, ok := parseOuter4(VXLAN, f, &local4, 4789, &tn); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseOuter4: any frame either fails or yields offsets within it.
func FuzzParseOuter4(f *testing.F) {
	payload := encap100(frame(1))
	f.Add(outerFrame(payload, true))
	f.Add(outerFrame(payload, false))
	f.Add(outerFrame(nil, true))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tn flow.Tunnel
		hdr, end, ok := parseOuter4(VXLAN, b, &local4, 4789, &tn)
		if ok && (hdr < 42 || hdr > end || end > len(b) || tn.Dst != local4) {
			t.Fatalf("parseOuter4 = %d, %d on %d bytes", hdr, end, len(b))
		}
	})
}

// outerFrame6 is outerFrame on IPv6, 2001:db8:20::1 → ::2.
func outerFrame6(payload []byte) []byte {
	f := make([]byte, 14+40+8+len(payload))
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:54]
	binary.BigEndian.PutUint32(ip[0:], 6<<28|0x10<<20)
	binary.BigEndian.PutUint16(ip[4:], uint16(8+len(payload)))
	ip[6], ip[7] = 17, 33
	copy(ip[8:], netip.MustParseAddr("2001:db8:20::1").AsSlice())
	copy(ip[24:], local6[:])
	u := f[54:]
	binary.BigEndian.PutUint16(u[0:], 40000)
	binary.BigEndian.PutUint16(u[2:], 4789)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	copy(u[8:], payload)
	var ph [8]byte
	binary.BigEndian.PutUint32(ph[0:], uint32(len(u)))
	ph[7] = 17
	c := ^csumAdd(csumAdd(vnethdr.Sum(ip[8:40]), vnethdr.Sum(ph[:])), vnethdr.Sum(u))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return f
}

var local6 = netip.MustParseAddr("2001:db8:20::2").As16()

func TestParseOuter6(t *testing.T) {
	payload := encap100(frame(1))
	f := outerFrame6(payload)
	var tn flow.Tunnel
	hdr, end, ok := parseOuter6(VXLAN, f, &local6, 4789, &tn)
	if !ok || hdr != 62 || end != len(f) {
		t.Fatalf("parseOuter6 = %d, %d, %v", hdr, end, ok)
	}
	want := flow.Tunnel{Src: netip.MustParseAddr("2001:db8:20::1").As16(), Dst: local6, TTL: 33, TOS: 0x10}
	if tn != want {
		t.Errorf("metadata %+v, want %+v", tn, want)
	}
	for name, corrupt := range map[string]func(f []byte){
		"udp checksum":  func(f []byte) { f[len(f)-1] ^= 1 },
		"zero checksum": func(f []byte) { f[60], f[61] = 0, 0 },
		"next header":   func(f []byte) { f[20] = 44 },
		"other port":    func(f []byte) { f[57]++ },
		"other address": func(f []byte) { f[53]++ },
		"too long":      func(f []byte) { f[19]++ },
	} {
		f := outerFrame6(payload)
		corrupt(f)
		if _, _, ok := parseOuter6(VXLAN, f, &local6, 4789, &tn); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzParseOuter6: any frame either fails or yields offsets within it.
func FuzzParseOuter6(f *testing.F) {
	payload := encap100(frame(1))
	f.Add(outerFrame6(payload))
	f.Add(outerFrame6(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var tn flow.Tunnel
		hdr, end, ok := parseOuter6(VXLAN, b, &local6, 4789, &tn)
		if ok && (hdr != 62 || hdr > end || end > len(b) || tn.Dst != local6) {
			t.Fatalf("parseOuter6 = %d, %d on %d bytes", hdr, end, len(b))
		}
	})
}

// innerIPFrame is an Ethernet/IPv4 frame of n bytes (n-14 of them the IP
// packet), or Ethernet/IPv6 when v6.
func innerIPFrame(n int, v6 bool) []byte {
	f := make([]byte, n)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1})
	if v6 {
		binary.BigEndian.PutUint16(f[12:], 0x86dd)
		binary.BigEndian.PutUint16(f[14+4:], uint16(n-14-40))
	} else {
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		binary.BigEndian.PutUint16(f[14+2:], uint16(n-14))
	}
	return f
}

// TestRunSeenWhole: a UDP payload made of several segments (tunnel
// header and inner IP frame, again and again) is told from one datagram,
// padded or not, for VXLAN and Geneve with options.
func TestRunSeenWhole(t *testing.T) {
	gn := []byte{0x02, 0, 0x65, 0x58, 0, 0, 100, 0, 0, 1, 2, 1, 9, 9, 9, 9} // one option, 8 bytes
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, c := range []struct {
		name string
		kind Kind
		d    []byte
		want bool
	}{
		{"vxlan datagram", VXLAN, cat(vxlan100, innerIPFrame(100, false)), false},
		{"vxlan padded datagram", VXLAN, cat(vxlan100, innerIPFrame(60, false)[:60]), false},
		{"vxlan run", VXLAN, cat(vxlan100, innerIPFrame(100, false), vxlan100, innerIPFrame(100, false)), true},
		{"vxlan run of padded frames", VXLAN, cat(vxlan100, innerIPFrame(42, false), make([]byte, 18), vxlan100, innerIPFrame(42, false)), true},
		{"vxlan run v6", VXLAN, cat(vxlan100, innerIPFrame(120, true), vxlan100, innerIPFrame(90, true)), true},
		{"vxlan trailing bytes", VXLAN, cat(vxlan100, innerIPFrame(100, false), make([]byte, 8)), false},
		{"vxlan non-ip", VXLAN, cat(vxlan100, frame(1), vxlan100, frame(2)), false},
		{"geneve datagram", Geneve, cat(gn, innerIPFrame(100, false)), false},
		{"geneve run", Geneve, cat(gn, innerIPFrame(100, false), gn, innerIPFrame(100, false)), true},
	} {
		if got := runSeenWhole(c.kind, c.d); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// FuzzRunSeenWhole: any payload, either kind, without a panic.
func FuzzRunSeenWhole(f *testing.F) {
	f.Add(false, append(encap100(innerIPFrame(100, false)), vxlan100...))
	f.Add(true, []byte{0x3f, 0, 0x65, 0x58})
	f.Fuzz(func(t *testing.T, geneve bool, d []byte) {
		k := VXLAN
		if geneve {
			k = Geneve
		}
		runSeenWhole(k, d)
	})
}

// partialTCP sets the TCP checksum of Ethernet/IPv4 (no options) frame f
// to the pseudo-header sum alone, as a sender with checksum offload
// leaves it.
func partialTCP(f []byte) {
	var ph [12]byte
	copy(ph[0:8], f[26:34])
	ph[9] = 6
	binary.BigEndian.PutUint16(ph[10:], uint16(len(f)-34))
	binary.BigEndian.PutUint16(f[34+16:], vnethdr.Sum(ph[:]))
}

// TestParseOuterLocalOffload: what a kernel vxlan device behind a veth
// sends is accepted — the outer UDP checksum computed over an inner TCP
// checksum left to the device (local checksum offload; the inner one is
// completed), or the outer one left to the device — and a frame corrupted
// outside the inner TCP segment is not. (Within it, the outer checksum of
// a local-offload frame cannot tell: it covers the inner checksum, which
// is what makes local checksum offload work.)
func TestParseOuterLocalOffload(t *testing.T) {
	inner, _, _ := superFrame(t, superSpec{payload: 300})
	payload := encap100(inner)
	complete := outerFrame(payload, true)
	var tn flow.Tunnel

	lco := append([]byte{}, complete...)
	partialTCP(lco[42+8:])
	if _, _, ok := parseOuter4(VXLAN, lco, &local4, 4789, &tn); !ok {
		t.Error("outer checksum over an inner one left to the device: refused")
	}
	if !bytes.Equal(lco, complete) {
		t.Error("the inner checksum was not completed")
	}

	// Corrupted where the inner checksum does not reach (the inner
	// Ethernet header): completing the inner one cannot make it check.
	bad := append([]byte{}, complete...)
	partialTCP(bad[42+8:])
	bad[42+8+6]++
	if _, _, ok := parseOuter4(VXLAN, bad, &local4, 4789, &tn); ok {
		t.Error("corrupted frame accepted")
	}

	outer := append([]byte{}, complete...)
	var ph [12]byte
	copy(ph[0:8], outer[26:34])
	ph[9] = 17
	binary.BigEndian.PutUint16(ph[10:], uint16(len(outer)-34))
	binary.BigEndian.PutUint16(outer[40:], vnethdr.Sum(ph[:]))
	if _, _, ok := parseOuter4(VXLAN, outer, &local4, 4789, &tn); !ok {
		t.Error("outer checksum left to the device: refused")
	}
}

// TestSuperDatagram: a datagram that carries one inner TCP super-frame
// (a local sender's TSO frame, encapsulated once) becomes a super-frame
// with the TSO offload, cut at the inner MTU; a datagram of wire size, or
// one whose inner packet is not TCP, does not.
func TestSuperDatagram(t *testing.T) {
	pool := bigPool(4, 2)
	inner, _, _ := superFrame(t, superSpec{payload: 8000})
	d := encap100(inner)
	big, _ := superDatagram(VXLAN, pool, d, 1450)
	if big == nil {
		t.Fatal("super-frame datagram not taken")
	}
	defer big.Free()
	hl := 14 + 20 + 32 // Ethernet, IPv4, TCP with timestamps
	want := packet.Offload{Flags: packet.OffloadNeedsCsum, GSOType: vnethdr.GSOTCPv4, HdrLen: uint16(hl),
		GSOSize: uint16(1450 - (hl - 14)), CsumStart: uint16(8 + 34), CsumOffset: 16}
	if big.Offload != want || !bytes.Equal(big.Data(), d) {
		t.Errorf("offload %+v, want %+v; data equal %v", big.Offload, want, bytes.Equal(big.Data(), d))
	}
	small, _, _ := superFrame(t, superSpec{payload: 1000})
	if p, _ := superDatagram(VXLAN, pool, encap100(small), 1450); p != nil {
		p.Free()
		t.Error("a datagram of wire size taken as a super-frame")
	}
	notTCP := encap100(inner)
	notTCP[8+14+9] = 17
	if p, _ := superDatagram(VXLAN, pool, notTCP, 1450); p != nil {
		p.Free()
		t.Error("a non-TCP datagram taken as a super-frame")
	}
}

// TestSuperDatagramChecksum: a super-frame datagram whose inner TCP
// checksum is complete is verified before it is marked for the checksum
// to be computed again (which would hide a corruption from the
// receiver): one with a payload byte changed is refused as a bad
// checksum. One whose checksum field holds only the pseudo-header sum (a
// local sender's partial checksum, which nothing can verify) is taken.
func TestSuperDatagramChecksum(t *testing.T) {
	pool := bigPool(4, 2)
	inner, _, _ := superFrame(t, superSpec{payload: 8000})
	bad := encap100(inner)
	bad[len(bad)-100] ^= 0x20
	if p, badSum := superDatagram(VXLAN, pool, bad, 1450); p != nil || !badSum {
		if p != nil {
			p.Free()
		}
		t.Error("a super-frame datagram with a corrupted payload taken (its checksum would be made valid again)")
	}
	const csumOff = 14 + 20 + 16 // inner Ethernet, IPv4, TCP checksum field
	partial := append([]byte(nil), inner...)
	s, ok := parseInner(partial)
	if !ok {
		t.Fatal("test frame not parsed")
	}
	binary.BigEndian.PutUint16(partial[csumOff:], vnethdr.Fold(pseudoAddrs(partial, &s)+uint64(len(partial)-s.l4)))
	d := encap100(partial)
	d[len(d)-100] ^= 0x20
	p, badSum := superDatagram(VXLAN, pool, d, 1450)
	if p == nil || badSum {
		t.Fatal("a super-frame datagram with a partial checksum refused")
	}
	p.Free()
}

// FuzzSuperDatagram: any datagram is either refused or taken whole with
// an offload that lies within it.
func FuzzSuperDatagram(f *testing.F) {
	pool := bigPool(4, 2)
	inner, _, _ := superFrame(f, superSpec{payload: 3000})
	f.Add(encap100(inner))
	f.Fuzz(func(t *testing.T, d []byte) {
		big, _ := superDatagram(VXLAN, pool, d, 1450)
		if big == nil {
			return
		}
		defer big.Free()
		o := big.Offload
		if !bytes.Equal(big.Data(), d) || int(o.CsumStart)+int(o.CsumOffset)+2 > len(d) || o.GSOSize == 0 {
			t.Fatalf("offload %+v on %d bytes", o, len(d))
		}
	})
}

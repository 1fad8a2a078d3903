package vnethdr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// segmentAll runs a Segmenter over frame and returns copies of the segments.
func segmentAll(t testing.TB, h Header, frame []byte) [][]byte {
	t.Helper()
	orig := append([]byte(nil), frame...)
	var s Segmenter
	if err := s.Reset(&h, frame); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	dst := make([]byte, 70000)
	var segs [][]byte
	for i := 0; ; i++ {
		if i > len(frame) {
			t.Fatal("segmenter does not terminate")
		}
		n, ok, err := s.Next(dst)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if !ok {
			break
		}
		if n == 0 {
			t.Fatal("n == 0 with ok")
		}
		segs = append(segs, append([]byte(nil), dst[:n]...))
	}
	if !s.Done() {
		t.Fatal("not Done after the last segment")
	}
	if !bytes.Equal(orig, frame) {
		t.Fatal("segmenter modified the source frame")
	}
	return segs
}

// gopacketL4Checksum has gopacket compute the checksum the L4 layer of pkt
// should carry.
func gopacketL4Checksum(t testing.TB, pkt gopacket.Packet) uint16 {
	t.Helper()
	nl := pkt.NetworkLayer()
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{ComputeChecksums: true}
	var err error
	switch l := pkt.TransportLayer().(type) {
	case *layers.TCP:
		c := *l
		_ = c.SetNetworkLayerForChecksum(nl)
		err = gopacket.SerializeLayers(buf, opts, &c, gopacket.Payload(l.Payload))
		if err == nil {
			return binary.BigEndian.Uint16(buf.Bytes()[16:])
		}
	case *layers.UDP:
		c := *l
		_ = c.SetNetworkLayerForChecksum(nl)
		err = gopacket.SerializeLayers(buf, opts, &c, gopacket.Payload(l.Payload))
		if err == nil {
			return binary.BigEndian.Uint16(buf.Bytes()[6:])
		}
	default:
		t.Fatalf("no transport layer in %v", pkt)
	}
	t.Fatal(err)
	return 0
}

// checkSegment decodes seg with gopacket and verifies every header field
// the segmenter rewrites; it returns the decoded packet.
func checkSegment(t *testing.T, seg []byte, ipv6 bool, l3off int) gopacket.Packet {
	t.Helper()
	pkt := gopacket.NewPacket(seg, layers.LayerTypeEthernet, gopacket.Default)
	if el := pkt.ErrorLayer(); el != nil {
		t.Fatalf("gopacket: %v", el.Error())
	}
	if ipv6 {
		ip := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
		if int(ip.Length) != len(seg)-l3off-40 {
			t.Fatalf("IPv6 payload length %d, segment carries %d", ip.Length, len(seg)-l3off-40)
		}
	} else {
		ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if int(ip.Length) != len(seg)-l3off {
			t.Fatalf("IPv4 total length %d, segment carries %d", ip.Length, len(seg)-l3off)
		}
		if refSum(seg[l3off:l3off+int(ip.IHL)*4]) != 0xffff {
			t.Fatal("bad IPv4 header checksum")
		}
	}
	return pkt
}

// verifyL4 checks the L4 checksum of a segment against the reference sum
// and against gopacket.
func verifyL4(t *testing.T, pkt gopacket.Packet, seg []byte, ipv6 bool, l3off, l4off int, proto uint8, field int) {
	t.Helper()
	if refSum(refPseudo(seg[l3off:], ipv6, proto, len(seg)-l4off), seg[l4off:]) != 0xffff {
		t.Fatal("L4 checksum does not verify")
	}
	got := binary.BigEndian.Uint16(seg[l4off+field:])
	if want := gopacketL4Checksum(t, pkt); got != want && !(got == 0xffff && want == 0) {
		t.Fatalf("L4 checksum %#04x, gopacket computes %#04x", got, want)
	}
}

func TestSegmentTCP(t *testing.T) {
	cases := []struct {
		name  string
		spec  frameSpec
		mss   int
		seed  bool // pseudo-header seeded, as with NEEDS_CSUM
		ecn   bool
		extV6 bool // insert an IPv6 destination options header
	}{
		{name: "v4-plain", spec: frameSpec{flags: "APF", seq: 1000, ipID: 77, payload: pattern(10000, 1)}, mss: 1448, seed: true},
		{name: "v4-exact-multiple", spec: frameSpec{flags: "AP", seq: 5, ipID: 1, payload: pattern(4000, 2)}, mss: 1000},
		{name: "v4-vlan-opts", spec: frameSpec{vlans: 1, tcpOpts: true, ipv4Opts: true, flags: "AP", seq: 0xfffff000, ipID: 0xfffe, payload: pattern(9001, 3)}, mss: 1436, seed: true},
		{name: "v4-qinq-cwr", spec: frameSpec{vlans: 2, tcpOpts: true, flags: "ACEPF", seq: 42, ipID: 9, payload: pattern(3333, 4)}, mss: 1200, seed: true, ecn: true},
		{name: "v4-one-segment", spec: frameSpec{flags: "AF", payload: pattern(1448, 5)}, mss: 1448, seed: true},
		{name: "v6-plain", spec: frameSpec{ipv6: true, flags: "APF", seq: 7, payload: pattern(65000, 6)}, mss: 1440, seed: true},
		{name: "v6-vlan-opts-cwr", spec: frameSpec{ipv6: true, vlans: 1, tcpOpts: true, flags: "ACP", seq: 0xffffffff, payload: pattern(7001, 7)}, mss: 1428, ecn: true},
		{name: "v6-ext-hdr", spec: frameSpec{ipv6: true, vlans: 2, tcpOpts: true, flags: "AP", seq: 99, payload: pattern(5000, 8)}, mss: 1400, seed: true, extV6: true},
		{name: "small-mss", spec: frameSpec{flags: "AP", payload: pattern(100, 9)}, mss: 1, seed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frame, l3off, l4off := build(t, tc.spec)
			if tc.extV6 {
				frame, l4off = insertDestOpts(frame, l3off)
			}
			origTCP := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default).Layer(layers.LayerTypeTCP).(*layers.TCP)
			h := Header{GSOType: GSOTCPv4, GSOSize: uint16(tc.mss), HdrLen: 1} // HdrLen is deliberately wrong
			if tc.spec.ipv6 {
				h.GSOType = GSOTCPv6
			}
			if tc.ecn {
				h.GSOType |= GSOECN
			}
			if tc.seed {
				sh := seedPseudo(frame, tc.spec, l3off, l4off)
				h.Flags, h.CsumStart, h.CsumOffset = sh.Flags, sh.CsumStart, sh.CsumOffset
			}
			segs := segmentAll(t, h, frame)
			payload := tc.spec.payload
			want := (len(payload) + tc.mss - 1) / tc.mss
			if len(segs) != want {
				t.Fatalf("%d segments, want %d", len(segs), want)
			}
			var joined []byte
			for i, seg := range segs {
				last := i == len(segs)-1
				pkt := checkSegment(t, seg, tc.spec.ipv6, l3off)
				if !tc.spec.ipv6 {
					ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
					if ip.Id != tc.spec.ipID+uint16(i) {
						t.Fatalf("segment %d: IPv4 ID %d, want %d", i, ip.Id, tc.spec.ipID+uint16(i))
					}
					if ip.Flags != layers.IPv4DontFragment || ip.TOS != 0x02 || len(ip.Options) != len(origOpts(tc.spec)) {
						t.Fatalf("segment %d: IPv4 flags/TOS/options not preserved: %v %v %v", i, ip.Flags, ip.TOS, ip.Options)
					}
				}
				tcp := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
				if tcp.Seq != tc.spec.seq+uint32(i*tc.mss) {
					t.Fatalf("segment %d: seq %d, want %d", i, tcp.Seq, tc.spec.seq+uint32(i*tc.mss))
				}
				if tcp.Ack != origTCP.Ack || !tcp.ACK || tcp.ECE != origTCP.ECE || tcp.Window != origTCP.Window {
					t.Fatalf("segment %d: ack/window/ACK/ECE not preserved", i)
				}
				if tcp.FIN != (origTCP.FIN && last) || tcp.PSH != (origTCP.PSH && last) {
					t.Fatalf("segment %d (last %v): FIN %v PSH %v", i, last, tcp.FIN, tcp.PSH)
				}
				if tcp.CWR != (origTCP.CWR && i == 0) {
					t.Fatalf("segment %d: CWR %v", i, tcp.CWR)
				}
				if !bytes.Equal(seg[l4off+20:l4off+int(tcp.DataOffset)*4], frame[l4off+20:l4off+int(origTCP.DataOffset)*4]) {
					t.Fatalf("segment %d: TCP options not preserved", i)
				}
				if len(tcp.Payload) > tc.mss || (!last && len(tcp.Payload) != tc.mss) {
					t.Fatalf("segment %d: payload %d bytes with mss %d", i, len(tcp.Payload), tc.mss)
				}
				if tc.extV6 && !bytes.Equal(seg[l3off+40:l4off], frame[l3off+40:l4off]) {
					t.Fatalf("segment %d: extension header not preserved", i)
				}
				verifyL4(t, pkt, seg, tc.spec.ipv6, l3off, l4off, 6, 16)
				joined = append(joined, tcp.Payload...)
			}
			if !bytes.Equal(joined, payload) {
				t.Fatal("concatenated payloads differ from the original")
			}
		})
	}
}

func origOpts(f frameSpec) []int {
	if f.ipv4Opts {
		return []int{0, 0}
	}
	return nil
}

// insertDestOpts puts an 8-byte IPv6 destination options header (PadN)
// between the IPv6 header and the TCP header.
func insertDestOpts(frame []byte, l3off int) ([]byte, int) {
	l4 := l3off + 40
	ext := []byte{frame[l3off+6], 0, 1, 4, 0, 0, 0, 0}
	out := append(append(append([]byte(nil), frame[:l4]...), ext...), frame[l4:]...)
	out[l3off+6] = 60
	binary.BigEndian.PutUint16(out[l3off+4:], binary.BigEndian.Uint16(out[l3off+4:])+8)
	return out, l4 + 8
}

func TestSegmentUSO(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ipv6=%v", v6), func(t *testing.T) {
			spec := frameSpec{ipv6: v6, udp: true, vlans: 1, ipID: 500, payload: pattern(4000, 11)}
			frame, l3off, l4off := build(t, spec)
			h := seedPseudo(frame, spec, l3off, l4off)
			h.GSOType, h.GSOSize = GSOUDPL4, 1200
			segs := segmentAll(t, h, frame)
			if len(segs) != 4 {
				t.Fatalf("%d datagrams, want 4", len(segs))
			}
			var joined []byte
			for i, seg := range segs {
				pkt := checkSegment(t, seg, v6, l3off)
				if !v6 && pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4).Id != 500+uint16(i) {
					t.Fatalf("datagram %d: IPv4 ID not incremented", i)
				}
				udp := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
				if int(udp.Length) != len(seg)-l4off || udp.SrcPort != 5000 || udp.DstPort != 9999 {
					t.Fatalf("datagram %d: UDP header %+v", i, udp)
				}
				if want := min(1200, 4000-i*1200); len(udp.Payload) != want {
					t.Fatalf("datagram %d: %d payload bytes, want %d", i, len(udp.Payload), want)
				}
				verifyL4(t, pkt, seg, v6, l3off, l4off, 17, 6)
				joined = append(joined, udp.Payload...)
			}
			if !bytes.Equal(joined, spec.payload) {
				t.Fatal("concatenated payloads differ")
			}
		})
	}
}

func TestSegmentUFO(t *testing.T) {
	for _, seed := range []bool{false, true} {
		t.Run(fmt.Sprintf("seeded=%v", seed), func(t *testing.T) {
			spec := frameSpec{udp: true, ipID: 4242, payload: pattern(3500, 12)}
			frame, l3off, l4off := build(t, spec)
			want := append([]byte(nil), frame[l4off:]...) // the complete datagram
			h := Header{GSOType: GSOUDP, GSOSize: 1485}   // rounds down to 1480
			if seed {
				h = seedPseudo(frame, spec, l3off, l4off)
				h.GSOType, h.GSOSize = GSOUDP, 1485
			}
			segs := segmentAll(t, h, frame)
			if len(segs) != 3 {
				t.Fatalf("%d fragments, want 3", len(segs))
			}
			var joined []byte
			for i, seg := range segs {
				pkt := checkSegment(t, seg, false, l3off)
				ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
				if ip.Id != 4242 {
					t.Fatalf("fragment %d: ID %d, fragments must share the datagram's", i, ip.Id)
				}
				if int(ip.FragOffset)*8 != len(joined) {
					t.Fatalf("fragment %d: offset %d, want %d", i, int(ip.FragOffset)*8, len(joined))
				}
				if mf := ip.Flags&layers.IPv4MoreFragments != 0; mf != (i < len(segs)-1) {
					t.Fatalf("fragment %d: MF %v", i, mf)
				}
				if i < len(segs)-1 && len(seg)-l4off != 1480 {
					t.Fatalf("fragment %d: %d bytes of IP payload, want 1480", i, len(seg)-l4off)
				}
				joined = append(joined, seg[l4off:]...)
			}
			if !bytes.Equal(joined, want) {
				t.Fatal("reassembled datagram differs from the original (with its correct checksum)")
			}
		})
	}
}

func TestSegmentNone(t *testing.T) {
	spec := frameSpec{vlans: 1, flags: "AP", tcpOpts: true, payload: pattern(700, 13)}
	frame, l3off, l4off := build(t, spec)
	want := append([]byte(nil), frame...)
	h := seedPseudo(frame, spec, l3off, l4off)
	segs := segmentAll(t, h, frame)
	if len(segs) != 1 || !bytes.Equal(segs[0], want) {
		t.Fatal("GSONone with NEEDS_CSUM did not yield the frame with its checksum completed")
	}
	h = Header{}
	segs = segmentAll(t, h, want)
	if len(segs) != 1 || !bytes.Equal(segs[0], want) {
		t.Fatal("GSONone did not yield the frame unchanged")
	}
}

func TestSegmentShortBuffer(t *testing.T) {
	spec := frameSpec{flags: "A", payload: pattern(3000, 14)}
	frame, _, _ := build(t, spec)
	var s Segmenter
	h := Header{GSOType: GSOTCPv4, GSOSize: 1000}
	if err := s.Reset(&h, frame); err != nil {
		t.Fatal(err)
	}
	small := make([]byte, 1053)
	if _, ok, err := s.Next(small); !errors.Is(err, ErrShortBuffer) || ok {
		t.Fatalf("Next into a too small buffer: ok %v err %v", ok, err)
	}
	big := make([]byte, 1054)
	for i := 0; i < 3; i++ {
		if n, ok, err := s.Next(big); err != nil || !ok || n != 1054 {
			t.Fatalf("segment %d after retry: n %d ok %v err %v", i, n, ok, err)
		}
	}
	if _, ok, _ := s.Next(big); ok || !s.Done() {
		t.Fatal("more than 3 segments")
	}
}

func TestSegmentHostile(t *testing.T) {
	tcp4, _, l4 := build(t, frameSpec{flags: "A", payload: pattern(3000, 15)})
	tcp6, _, _ := build(t, frameSpec{ipv6: true, flags: "A", payload: pattern(3000, 15)})
	udp4, _, _ := build(t, frameSpec{udp: true, payload: pattern(3000, 15)})
	udp6, _, _ := build(t, frameSpec{ipv6: true, udp: true, payload: pattern(3000, 15)})
	badIHL := append([]byte(nil), tcp4...)
	badIHL[14] = 0x43
	badDoff := append([]byte(nil), tcp4...)
	badDoff[l4+12] = 0x20
	bigDoff := append([]byte(nil), tcp4[:l4+30]...)
	bigDoff[l4+12] = 0xf0
	frag := append([]byte(nil), tcp4...)
	frag[14+6] |= 0x20
	notIP := append([]byte(nil), tcp4...)
	notIP[12], notIP[13] = 0x08, 0x06
	cases := []struct {
		name  string
		h     Header
		frame []byte
		err   error
	}{
		{"gso-size-0", Header{GSOType: GSOTCPv4}, tcp4, ErrGSOSize},
		{"tcp-gso-on-udp", Header{GSOType: GSOTCPv4, GSOSize: 1000}, udp4, ErrGSOType},
		{"tcpv4-gso-on-ipv6", Header{GSOType: GSOTCPv4, GSOSize: 1000}, tcp6, ErrGSOType},
		{"tcpv6-gso-on-ipv4", Header{GSOType: GSOTCPv6, GSOSize: 1000}, tcp4, ErrGSOType},
		{"uso-on-tcp", Header{GSOType: GSOUDPL4, GSOSize: 1000}, tcp4, ErrGSOType},
		{"ufo-on-ipv6", Header{GSOType: GSOUDP, GSOSize: 1000}, udp6, ErrGSOType},
		{"ufo-tiny", Header{GSOType: GSOUDP, GSOSize: 7}, udp4, ErrGSOSize},
		{"unknown-type", Header{GSOType: 2, GSOSize: 1000}, tcp4, ErrGSOType},
		{"ecn-without-gso", Header{GSOType: GSOECN}, tcp4, ErrGSOType},
		{"truncated-ip", Header{GSOType: GSOTCPv4, GSOSize: 10}, tcp4[:30], ErrMalformed},
		{"truncated-tcp", Header{GSOType: GSOTCPv4, GSOSize: 1}, tcp4[:l4+10], ErrMalformed},
		{"bad-ihl", Header{GSOType: GSOTCPv4, GSOSize: 1000}, badIHL, ErrMalformed},
		{"bad-doff", Header{GSOType: GSOTCPv4, GSOSize: 1000}, badDoff, ErrMalformed},
		{"doff-beyond-frame", Header{GSOType: GSOTCPv4, GSOSize: 1}, bigDoff, ErrMalformed},
		{"ipv4-fragment", Header{GSOType: GSOTCPv4, GSOSize: 1000}, frag, ErrMalformed},
		{"not-ip", Header{GSOType: GSOTCPv4, GSOSize: 1000}, notIP, ErrMalformed},
		{"empty", Header{GSOType: GSOTCPv4, GSOSize: 1000}, nil, ErrMalformed},
		{"none-empty", Header{}, nil, ErrMalformed},
		{"none-runt", Header{}, tcp4[:13], ErrMalformed},
		{"csum-beyond-frame", Header{Flags: FlagNeedsCsum, CsumStart: 3040, CsumOffset: 13}, tcp4, ErrCsumOffset},
		{"csum-start-max", Header{Flags: FlagNeedsCsum, CsumStart: 0xffff, CsumOffset: 0xffff}, tcp4, ErrCsumOffset},
	}
	dst := make([]byte, 70000)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s Segmenter
			if err := s.Reset(&tc.h, tc.frame); !errors.Is(err, tc.err) {
				t.Fatalf("Reset: %v, want %v", err, tc.err)
			}
			if n, ok, err := s.Next(dst); ok || n != 0 || err != nil {
				t.Fatalf("Next after a failed Reset: %d %v %v", n, ok, err)
			}
			if !s.Done() {
				t.Fatal("not Done after a failed Reset")
			}
		})
	}
	if _, err := Decode(make([]byte, Len-1)); !errors.Is(err, ErrShortHeader) {
		t.Fatalf("Decode of a short header: %v", err)
	}
	if err := CompleteChecksum(&Header{Flags: FlagNeedsCsum, CsumStart: 3100}, tcp4); !errors.Is(err, ErrCsumOffset) {
		t.Fatalf("CompleteChecksum out of range: %v", err)
	}
}

func TestZeroAllocs(t *testing.T) {
	frame, _, _ := build(t, frameSpec{flags: "AP", payload: pattern(20000, 16)})
	fix, _, _ := build(t, frameSpec{udp: true, ipv6: true, payload: pattern(1000, 16)})
	dst := make([]byte, 2000)
	var s Segmenter
	h := Header{GSOType: GSOTCPv4, GSOSize: 1448}
	ch := Header{Flags: FlagNeedsCsum, CsumStart: 54, CsumOffset: 6}
	allocs := testing.AllocsPerRun(50, func() {
		if err := s.Reset(&h, frame); err != nil {
			t.Fatal(err)
		}
		for {
			if _, ok, err := s.Next(dst); err != nil || !ok {
				break
			}
		}
		fix[60] ^= 1
		FixL4Checksum(fix)
		_ = CompleteChecksum(&ch, fix)
		_ = s.Reset(&Header{GSOType: GSOTCPv6, GSOSize: 1}, frame) // error path
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

// TestSegmentSmallSuperFrame: a GSO frame whose payload fits one segment is
// passed on whole, not dropped.
func TestSegmentSmallSuperFrame(t *testing.T) {
	frame, _, _ := build(t, frameSpec{payload: pattern(300, 3)})
	var s Segmenter
	if err := s.Reset(&Header{GSOType: GSOTCPv4, GSOSize: 1448}, frame); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 2048)
	n, ok, err := s.Next(dst)
	if err != nil || !ok || n != len(frame) || !s.Done() {
		t.Fatalf("n=%d ok=%v err=%v done=%v, want the whole %d-byte frame once", n, ok, err, s.Done(), len(frame))
	}
	if _, ok, _ := s.Next(dst); ok {
		t.Fatal("a second segment from a one-segment frame")
	}
}

package tunnel

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

var innerFrame = make([]byte, 60)

// hdr is the header encapHeader writes for vni without an option.
func hdr(k Kind, vni uint32) []byte {
	var h [maxHdrLen]byte
	n := encapHeader(k, &h, hdrKey(vni), nil)
	return h[:n:n]
}

func TestDecapVXLAN(t *testing.T) {
	h := hdr(VXLAN, 0x123456)
	n, vni, flags, _, ok := decap(VXLAN, append(h[:], innerFrame...))
	if !ok || n != 8 || vni != 0x123456 || flags != flow.TunFlagKey {
		t.Fatalf("decap = %d %#x %#x %v", n, vni, flags, ok)
	}
	bad := append(h[:], innerFrame...)
	bad[0] = 0
	if _, _, _, c, ok := decap(VXLAN, bad); ok || c != CauseBadHeader {
		t.Errorf("no I flag: ok %v cause %v", ok, c)
	}
	if _, _, _, c, ok := decap(VXLAN, append(h[:], innerFrame[:13]...)); ok || c != CauseBadHeader {
		t.Errorf("short inner frame: ok %v cause %v", ok, c)
	}
}

func TestDecapGeneve(t *testing.T) {
	h := hdr(Geneve, 100)
	n, vni, flags, _, ok := decap(Geneve, append(h[:], innerFrame...))
	if !ok || n != 8 || vni != 100 || flags != flow.TunFlagKey {
		t.Fatalf("decap = %d %d %#x %v", n, vni, flags, ok)
	}
	// Two options (8 and 4 bytes), OAM.
	opts := []byte{0x01, 0x02, 0x03, 0x01, 1, 2, 3, 4, 0x01, 0x02, 0x04, 0x00}
	g := append([]byte{byte(len(opts) / 4), geneveFlagO, 0x65, 0x58, 0, 0, 7, 0}, opts...)
	n, vni, flags, _, ok = decap(Geneve, append(g, innerFrame...))
	if !ok || n != 8+len(opts) || vni != 7 || flags != flow.TunFlagKey|flow.TunFlagOAM {
		t.Fatalf("with options: %d %d %#x %v", n, vni, flags, ok)
	}
	cases := []struct {
		name  string
		b     []byte
		cause Cause
	}{
		{"truncated options", append([]byte{4, 0, 0x65, 0x58, 0, 0, 7, 0}, 1, 2, 3, 4), CauseBadHeader},
		{"option past its space", append([]byte{1, 0, 0x65, 0x58, 0, 0, 7, 0}, append([]byte{1, 2, 3, 2}, innerFrame...)...), CauseBadHeader},
		{"version 1", append([]byte{0x40, 0, 0x65, 0x58, 0, 0, 7, 0}, innerFrame...), CauseBadHeader},
		{"not Ethernet", append([]byte{0, 0, 0x08, 0x00, 0, 0, 7, 0}, innerFrame...), CauseBadHeader},
		{"short", []byte{0, 0, 0x65}, CauseBadHeader},
	}
	for _, c := range cases {
		if _, _, _, cause, ok := decap(Geneve, c.b); ok || cause != c.cause {
			t.Errorf("%s: ok %v cause %v, want %v", c.name, ok, cause, c.cause)
		}
	}
}

// FuzzDecap checks that decap never reads past its input, that what it
// accepts leaves an Ethernet header's worth of inner frame, and that a
// header it writes parses back.
func FuzzDecap(f *testing.F) {
	f.Add(uint8(0), append(hdr(VXLAN, 100), innerFrame...))
	f.Add(uint8(1), append(hdr(Geneve, 100), innerFrame...))
	f.Add(uint8(1), append([]byte{1, 0, 0x65, 0x58, 0, 0, 7, 0, 1, 2, 3, 0}, innerFrame...))
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		k := Kind(kind % 2)
		n, vni, _, _, ok := decap(k, b)
		if !ok {
			return
		}
		if n < hdrLen || n > len(b)-14 || vni > 0xffffff {
			t.Fatalf("decap(%v, %x) = %d, vni %#x", k, b, n, vni)
		}
		out := hdr(k, vni)
		n2, vni2, _, _, ok2 := decap(k, append(out, b[n:]...))
		if !ok2 || n2 != hdrLen || vni2 != vni {
			t.Fatalf("re-encapsulated header does not parse: %x", out)
		}
	})
}

func TestPushText(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Kind: VXLAN, Remote: netip.MustParseAddr("198.18.60.2"), Local: netip.MustParseAddr("198.18.60.1"), Key: 100, DstPort: 4789, TTL: 64},
			"tnl_push(tnl_port(vx0),header(ipv4(src=198.18.60.1,dst=198.18.60.2,tos=0x0,ttl=64,df),udp(src=hash,dst=4789),vxlan(vni=0x64)),out_port(3))"},
		{Options{Kind: Geneve, KeyFlow: true, DstPort: 6081, TTL: 64, NoDF: true, Csum: true},
			"tnl_push(tnl_port(vx0),header(ipv4(src=route,dst=tun_dst,tos=0x0,ttl=64),udp(src=hash,dst=6081,csum),geneve(vni=tun_id)),out_port(3))"},
		{Options{Kind: VXLAN, Remote: netip.MustParseAddr("2001:db8::2"), Key: 5, DstPort: 4789, TTL: 9, TOS: 0x10},
			"tnl_push(tnl_port(vx0),header(ipv6(src=route,dst=2001:db8::2,tos=0x10,ttl=9),udp(src=hash,dst=4789,csum),vxlan(vni=0x5)),out_port(3))"},
		{Options{Kind: VXLAN, Remote: netip.MustParseAddr("198.18.60.2"), Key: 5, DstPort: 4789, TTL: 64, TOSInherit: true, TTLInherit: true},
			"tnl_push(tnl_port(vx0),header(ipv4(src=route,dst=198.18.60.2,tos=inherit,ttl=inherit,df),udp(src=hash,dst=4789),vxlan(vni=0x5)),out_port(3))"},
	} {
		p := &Port{name: "vx0", opt: c.o}
		if got := p.PushText(3); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// FuzzAccept feeds arbitrary datagrams to the receive checks of a port with
// a fixed key: each is either delivered, with its header stripped and the
// port's VNI, or dropped with exactly one cause counted.
func FuzzAccept(f *testing.F) {
	f.Add(uint8(0), append(hdr(VXLAN, 100), innerFrame...))
	f.Add(uint8(0), append(hdr(VXLAN, 101), innerFrame...))                                 // wrong VNI
	f.Add(uint8(1), append([]byte{2, 0, 0x65, 0x58, 0, 0, 100, 0, 1, 2, 3}, innerFrame...)) // options cut short
	f.Add(uint8(1), []byte{0, 0, 0x65, 0x58, 0, 0, 100, 0})                                 // no inner frame
	pool := packet.NewPool(1, packet.DefaultBufSize)
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		p := &Port{opt: Options{Kind: Kind(kind % 2), Key: 100}}
		var causes causeCounters
		pkt := pool.Get()
		defer pkt.Free()
		if pkt.SetData(b) != len(b) {
			return
		}
		tmpl := flow.Tunnel{TTL: 9}
		ok := p.accept(&causes, pkt, &tmpl)
		var counted uint64
		for i := range causes.n {
			counted += causes.n[i].Load()
		}
		switch {
		case ok && (counted != 0 || pkt.TunnelID != 100 || !pkt.HasTunnel || pkt.Tunnel.TTL != 9 || pkt.Len() > len(b)-hdrLen):
			t.Fatalf("delivered %x: vni %d, counted %d, len %d", b, pkt.TunnelID, counted, pkt.Len())
		case !ok && counted != 1:
			t.Fatalf("dropped %x with %d causes counted", b, counted)
		}
	})
}

// FuzzParseControl: control messages as the kernel might lay them out, or
// not, are read without reading past them.
func FuzzParseControl(f *testing.F) {
	f.Add([]byte{20, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 104, 0, 0, 0, 0xb8, 5, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Aligned as the kernel's buffer is.
		buf := make([]uint64, (len(b)+7)/8)
		c := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), len(b))
		copy(c, b)
		var tn flow.Tunnel
		parseControl(c, &tn)
	})
}

// FuzzOuterTOSTTL feeds arbitrary inner frames to the outer TOS/TTL choice:
// it reads only within the frame, a frame that is not IPv4/IPv6 gets the
// port's values, and the outer ECN is never CE (RFC 6040: a mark made
// before the tunnel is not the underlay's).
func FuzzOuterTOSTTL(f *testing.F) {
	f.Add([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0xbb, 0, 20, 0, 0, 0, 0, 9, 17, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2}, true)
	f.Add([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0, 0, 1, 0x86, 0xdd, 0x6b, 0xb0}, false)
	f.Fuzz(func(t *testing.T, frame []byte, inherit bool) {
		p := &Port{opt: Options{TOS: 0x20, TTL: 64, TOSInherit: inherit, TTLInherit: inherit}}
		tos, ttl := p.outerTOSTTL(frame)
		if _, _, ok := innerIP(frame); !ok && (tos != 0x20 || ttl != 64) {
			t.Fatalf("non-IP frame got tos %#x ttl %d", tos, ttl)
		}
		if tos&ecnMask == ecnCE {
			t.Fatalf("outer CE from %x", frame)
		}
	})
}

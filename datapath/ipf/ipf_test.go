package ipf

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// datagram is an Ethernet frame with a UDP datagram of n payload bytes.
func datagram(tb testing.TB, v6 bool, n int) []byte {
	tb.Helper()
	pl := make([]byte, n)
	for i := range pl {
		pl[i] = byte(i * 13)
	}
	udp := &layers.UDP{SrcPort: 4000, DstPort: 53}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	var l3 gopacket.SerializableLayer
	if v6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolUDP,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		udp.SetNetworkLayerForChecksum(ip)
		l3 = ip
	} else {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: 0x1234, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
		udp.SetNetworkLayerForChecksum(ip)
		l3 = ip
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, l3, udp, gopacket.Payload(pl)); err != nil {
		tb.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// piece is a fragment to cut: payload bytes [start, end) of the datagram.
type piece struct{ start, end int }

// fragment cuts frame (from datagram) into fragments holding the given
// byte ranges of its IP payload, the last range's end being the payload's
// end unless more says otherwise.
func fragment(tb testing.TB, frame []byte, v6 bool, pieces []piece) [][]byte {
	tb.Helper()
	var out [][]byte
	if v6 {
		hdr, pl := frame[:14+40], frame[14+40:]
		for _, p := range pieces {
			f := append([]byte(nil), hdr...)
			f[14+6] = 44 // next: fragment header
			fh := make([]byte, 8)
			fh[0] = 17
			off := uint16(p.start)
			if p.end < len(pl) {
				off |= 1
			}
			binary.BigEndian.PutUint16(fh[2:], off)
			binary.BigEndian.PutUint32(fh[4:], 0xabcdef)
			f = append(append(f, fh...), pl[p.start:p.end]...)
			binary.BigEndian.PutUint16(f[14+4:], uint16(8+p.end-p.start))
			out = append(out, f)
		}
		return out
	}
	hdr, pl := frame[:14+20], frame[14+20:]
	for _, p := range pieces {
		f := append(append([]byte(nil), hdr...), pl[p.start:p.end]...)
		ip := f[14:]
		binary.BigEndian.PutUint16(ip[2:], uint16(20+p.end-p.start))
		fo := uint16(p.start / 8)
		if p.end < len(pl) {
			fo |= 0x2000
		}
		binary.BigEndian.PutUint16(ip[6:], fo)
		header.SetIPv4Checksum(ip)
		out = append(out, f)
	}
	return out
}

func pkt(tb testing.TB, pool *packet.Pool, f []byte) *packet.Packet {
	p := pool.Get()
	if p == nil {
		tb.Fatal("pool empty")
	}
	p.SetData(f)
	flow.Extract(p.Data(), 1, &p.Key, &p.Offsets)
	p.KeyValid = true
	return p
}

func newTest(poolSize int) (*Reassembler, *packet.Pool) {
	pool := packet.NewPool(poolSize, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(2, packet.BigBufSize))
	return New(NewSettings(), poolSize/2), pool
}

// TestReassemble: a 3,000-byte UDP datagram in three fragments, arriving
// out of order, is put back together byte for byte, both families.
func TestReassemble(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		r, pool := newTest(16)
		whole := datagram(t, v6, 3000)
		plen := 3008 // UDP header and payload
		frags := fragment(t, whole, v6, []piece{{0, 1480}, {1480, 2960}, {2960, plen}})
		order := []int{2, 0, 1}
		var done []*packet.Packet
		for i, n := range order {
			out, res := r.Add(pkt(t, pool, frags[n]), 5, 0)
			want := Held
			if i == len(order)-1 {
				want = Complete
			}
			if res != want {
				t.Fatalf("v6=%v fragment %d: %v, want %v", v6, n, res, want)
			}
			done = out
		}
		if len(done) != 3 || !bytes.Equal(done[0].Data(), frags[0]) {
			t.Fatalf("v6=%v: %d fragments back, first in order %v", v6, len(done), len(done) > 0 && bytes.Equal(done[0].Data(), frags[0]))
		}
		big := pool.GetBig()
		if !Reassemble(done, big) {
			t.Fatal("Reassemble refused")
		}
		if !bytes.Equal(big.Data(), whole) {
			t.Errorf("v6=%v: reassembled %d bytes differ from the %d-byte datagram", v6, big.Len(), len(whole))
		}
		big.Free()
		for _, p := range done {
			p.Free()
		}
		st := r.V4.Load()
		if v6 {
			st = r.V6.Load()
		}
		if st.Accepted != 3 || st.Completed != 3 || r.Held() != 0 || pool.Available() != 16 {
			t.Errorf("v6=%v: stats %+v, held %d, pool %d free", v6, st, r.Held(), pool.Available())
		}
	}
}

// TestHostileFragments: overlapping fragments fail their datagram, a
// duplicate is dropped alone, small ones and those beyond the limits are
// not held, and nothing leaks.
func TestHostileFragments(t *testing.T) {
	whole := datagram(t, false, 3000)
	plen := 3008
	t.Run("overlap", func(t *testing.T) {
		r, pool := newTest(16)
		fs := fragment(t, whole, false, []piece{{0, 1480}, {1472, 2952}, {2952, plen}})
		r.Add(pkt(t, pool, fs[0]), 0, 0)
		if _, res := r.Add(pkt(t, pool, fs[1]), 0, 0); res != Dropped {
			t.Errorf("overlapping fragment: %v", res)
		}
		// The datagram is gone: its last fragment starts a new one.
		if _, res := r.Add(pkt(t, pool, fs[2]), 0, 0); res != Held {
			t.Errorf("after the overlap: %v", res)
		}
		if st := r.V4.Load(); st.Overlapped != 1 || st.Purged != 1 {
			t.Errorf("stats %+v", st)
		}
		r.Expire(ExpiryTimeout + 1)
		if r.Held() != 0 || pool.Available() != 16 || r.V4.Load().Expired != 1 {
			t.Errorf("after expiry: %d held, pool %d free, %+v", r.Held(), pool.Available(), r.V4.Load())
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		r, pool := newTest(16)
		fs := fragment(t, whole, false, []piece{{0, 1480}, {1480, 2960}, {2960, plen}})
		r.Add(pkt(t, pool, fs[0]), 0, 0)
		if _, res := r.Add(pkt(t, pool, fs[0]), 0, 0); res != Dropped {
			t.Errorf("duplicate: %v", res)
		}
		r.Add(pkt(t, pool, fs[1]), 0, 0)
		out, res := r.Add(pkt(t, pool, fs[2]), 0, 0)
		if res != Complete || len(out) != 3 {
			t.Errorf("after a duplicate: %v, %d fragments", res, len(out))
		}
		for _, p := range out {
			p.Free()
		}
		if pool.Available() != 16 {
			t.Errorf("pool %d free", pool.Available())
		}
	})
	t.Run("too small", func(t *testing.T) {
		r, pool := newTest(16)
		fs := fragment(t, whole, false, []piece{{0, 400}, {400, 1880}, {1880, plen}})
		p := pkt(t, pool, fs[0])
		if _, res := r.Add(p, 0, 0); res != Pass {
			t.Errorf("400-byte fragment: %v", res)
		}
		p.Free()
		if r.V4.Load().TooSmall != 1 {
			t.Errorf("stats %+v", r.V4.Load())
		}
		r.set.MinFragV4.Store(400)
		r.Add(pkt(t, pool, fs[0]), 0, 0)
		r.Add(pkt(t, pool, fs[1]), 0, 0)
		if out, res := r.Add(pkt(t, pool, fs[2]), 0, 0); res != Complete || len(out) != 3 {
			t.Errorf("with min-frag 400: %v", res)
		}
	})
	t.Run("held limit", func(t *testing.T) {
		r, pool := newTest(8) // holds 4
		for i := range 6 {
			f := fragment(t, whole, false, []piece{{0, 1480}})[0]
			binary.BigEndian.PutUint16(f[14+4:], uint16(i)) // another datagram each
			p := pkt(t, pool, f)
			_, res := r.Add(p, 0, 0)
			if want := map[bool]Result{true: Held, false: Pass}[i < 4]; res != want {
				t.Errorf("fragment %d: %v, want %v", i, res, want)
			}
			if res == Pass {
				p.Free()
			}
		}
	})
	t.Run("different ends", func(t *testing.T) {
		r, pool := newTest(16)
		a := fragment(t, whole, false, []piece{{2960, plen}})[0]
		b := fragment(t, datagram(t, false, 4000), false, []piece{{2960, 4008}})[0]
		r.Add(pkt(t, pool, a), 0, 0)
		if _, res := r.Add(pkt(t, pool, b), 0, 0); res != Dropped {
			t.Errorf("a second last fragment with another end: %v", res)
		}
		if r.Held() != 0 || pool.Available() != 16 {
			t.Errorf("%d held, pool %d free", r.Held(), pool.Available())
		}
	})
}

// TestZonesApart: the same fragments met in two zones are two datagrams.
func TestZonesApart(t *testing.T) {
	r, pool := newTest(16)
	fs := fragment(t, datagram(t, false, 3000), false, []piece{{0, 1480}, {1480, 3008}})
	r.Add(pkt(t, pool, fs[0]), 1, 0)
	if _, res := r.Add(pkt(t, pool, fs[1]), 2, 0); res != Held {
		t.Errorf("the rest in another zone: %v", res)
	}
}

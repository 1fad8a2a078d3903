package vhostuser

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vhostuser/virtq"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// tcpFrame builds an IPv4 (or IPv6) TCP frame with payload bytes of
// payload, as a guest stack hands it over with checksum offload: the TCP
// checksum field holds the pseudo-header sum (over the whole segment
// length), the rest is complete.
func tcpFrame(ipv6 bool, payload int) []byte {
	l3 := header.IPv4MinLen
	et := uint16(header.EtherTypeIPv4)
	if ipv6 {
		l3, et = header.IPv6Len, header.EtherTypeIPv6
	}
	f := make([]byte, header.EthernetLen+l3+header.TCPMinLen+payload)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], et)
	ip := f[header.EthernetLen:]
	l4len := header.TCPMinLen + payload
	var ps uint32
	if ipv6 {
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(l4len))
		ip[6], ip[7] = header.IPProtoTCP, 64
		ip[8], ip[23] = 0xfd, 1
		ip[24], ip[39] = 0xfd, 2
		ps = uint32(vnethdr.Sum(ip[8:40]))
	} else {
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(l3+l4len))
		binary.BigEndian.PutUint16(ip[4:], 0x1234)
		ip[8], ip[9] = 64, header.IPProtoTCP
		copy(ip[12:], []byte{198, 18, 0, 1, 198, 18, 0, 2})
		binary.BigEndian.PutUint16(ip[10:], ^vnethdr.Sum(ip[:20]))
		ps = uint32(vnethdr.Sum(ip[12:20]))
	}
	tcp := ip[l3:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12], tcp[13] = 5<<4, 0x18 // ACK|PSH
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	for i := range payload {
		tcp[header.TCPMinLen+i] = byte(i * 7)
	}
	ps += uint32(header.IPProtoTCP) + uint32(l4len)
	for ps > 0xffff {
		ps = ps&0xffff + ps>>16
	}
	binary.BigEndian.PutUint16(tcp[header.TCPChecksumOff:], uint16(ps))
	return f
}

// tcpHdr is the virtio-net header a guest sends frame with: NEEDS_CSUM at
// the TCP header, and GSO of mss if mss > 0.
func tcpHdr(frame []byte, mss int) vnethdr.Header {
	ipv6 := binary.BigEndian.Uint16(frame[12:]) == header.EtherTypeIPv6
	l4 := header.EthernetLen + header.IPv4MinLen
	h := vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, CsumStart: uint16(l4), CsumOffset: header.TCPChecksumOff}
	if ipv6 {
		h.CsumStart = header.EthernetLen + header.IPv6Len
	}
	if mss > 0 {
		h.GSOType, h.GSOSize = vnethdr.GSOTCPv4, uint16(mss)
		if ipv6 {
			h.GSOType = vnethdr.GSOTCPv6
		}
		h.HdrLen = h.CsumStart + header.TCPMinLen
	}
	return h
}

// l4Valid reports whether a received IPv4/IPv6 TCP frame's checksum is
// complete and right.
func l4Valid(f []byte) bool {
	ipv6 := binary.BigEndian.Uint16(f[12:]) == header.EtherTypeIPv6
	ip := f[header.EthernetLen:]
	var s uint32
	var l4 []byte
	if ipv6 {
		l4 = ip[header.IPv6Len:]
		s = uint32(vnethdr.Sum(ip[8:40]))
	} else {
		if vnethdr.Sum(ip[:20]) != 0xffff {
			return false
		}
		l4 = ip[header.IPv4MinLen:]
		s = uint32(vnethdr.Sum(ip[12:20]))
	}
	s += uint32(header.IPProtoTCP) + uint32(len(l4)) + uint32(vnethdr.Sum(l4))
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return s == 0xffff
}

// transmitOffload queues one frame behind header h on the frontend's
// transmit ring: in one descriptor, or (split) through an indirect table
// whose first descriptor holds the header alone and the rest the frame in
// pieces of at most 4 KiB, as a guest's scatter-gather list does.
func (q *fvq) transmitOffload(h vnethdr.Header, frame []byte, split bool) {
	q.f.t.Helper()
	q.reclaim()
	if len(q.freeList) == 0 {
		q.f.t.Fatal("transmit ring full")
	}
	id := q.freeList[len(q.freeList)-1]
	q.freeList = q.freeList[:len(q.freeList)-1]
	m := q.f.mem
	off := q.f.alloc(12+len(frame), 64)
	h.Encode(m[off:])
	le.PutUint16(m[off+10:], 0)
	copy(m[off+12:], frame)
	gpa := q.f.gpa + off
	if !split {
		q.setDesc(id, gpa, uint32(12+len(frame)), 0, 0)
		q.publish(id)
		return
	}
	type d struct {
		a uint64
		n uint32
	}
	ds := []d{{gpa, 12}}
	for p := 0; p < len(frame); p += 4096 {
		ds = append(ds, d{gpa + 12 + uint64(p), uint32(min(4096, len(frame)-p))})
	}
	tbl := q.f.alloc(16*len(ds), 16)
	for i, e := range ds {
		var fl, next uint16
		if i < len(ds)-1 {
			fl, next = virtq.DescFNext, uint16(i+1)
		}
		t := m[tbl+16*uint64(i):]
		le.PutUint64(t, e.a)
		le.PutUint32(t[8:], e.n)
		le.PutUint16(t[12:], fl)
		le.PutUint16(t[14:], next)
	}
	q.setDesc(id, q.f.gpa+tbl, uint32(16*len(ds)), virtq.DescFIndirect, 0)
	q.publish(id)
}

// recvPackets polls rx queue 0 until want packets arrived and returns
// them, still the caller's to free.
func recvPackets(t *testing.T, p *Port, pool *packet.Pool, want int) []*packet.Packet {
	t.Helper()
	var out []*packet.Packet
	waitFor(t, "packets", func() bool {
		var b packet.Batch
		p.Recv(0, pool, &b)
		out = append(out, b.Packets()...)
		return len(out) >= want
	})
	return out
}

func offloadPort(t *testing.T) (*Port, *frontend) {
	return offloadPortMask(t, 0)
}

// offloadPortMask connects a frontend that acks the offered features in
// mask (0: all).
func offloadPortMask(t *testing.T, mask uint64) (*Port, *frontend) {
	p, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{size: 64, memSize: 16 << 20, featMask: mask})
	f.setup()
	waitFor(t, "link up", p.LinkUp)
	if f.feats&(1<<featNetCsum|1<<featNetHostTSO4|1<<featNetHostTSO6) != 1<<featNetCsum|1<<featNetHostTSO4|1<<featNetHostTSO6 {
		t.Fatalf("offloads not negotiated: %#x", f.feats)
	}
	return p, f
}

// TestGuestTSOWhole: a TCP super-frame the guest transmits, in one buffer
// or scattered over an indirect table, arrives as one packet in a big
// buffer with the header's offload state, byte for byte.
func TestGuestTSOWhole(t *testing.T) {
	p, f := offloadPort(t)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(4, packet.BigBufSize))
	n := 0
	for _, ipv6 := range []bool{false, true} {
		for _, split := range []bool{false, true} {
			fr := tcpFrame(ipv6, 60000)
			h := tcpHdr(fr, 1448)
			f.tx(0).transmitOffload(h, fr, split)
			n++
			got := recvPackets(t, p, pool, 1)
			if len(got) != 1 {
				t.Fatalf("ipv6=%v split=%v: %d packets", ipv6, split, len(got))
			}
			pk := got[0]
			if !pk.GSO() || vnethdr.Header(pk.Offload) != h || !bytes.Equal(pk.Data(), fr) {
				t.Fatalf("ipv6=%v split=%v: offload %+v (sent %+v), %d bytes (sent %d), equal %v",
					ipv6, split, pk.Offload, h, pk.Len(), len(fr), bytes.Equal(pk.Data(), fr))
			}
			pk.Free()
		}
	}
	if g := p.GSOStats(); g.RxWhole != uint64(n) || g.RxSegmented != 0 {
		t.Errorf("GSO stats %+v, want %d whole", g, n)
	}
	if st := p.Stats(); st.RxPackets != uint64(n) || st.RxErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	if pool.Available() != pool.Size() || pool.Big().Available() != pool.Big().Size() {
		t.Error("pool leak")
	}
}

// TestGuestTSOSegmented: with no big buffer free, a super-frame is cut on
// receive into MSS-sized segments with complete checksums, more than one
// batch holds (the rest come in the next Recv), counted; frames the guest
// sent after it follow its segments.
func TestGuestTSOSegmented(t *testing.T) {
	p, f := offloadPort(t)
	pool := packet.NewPool(256, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(1, packet.BigBufSize))
	held := pool.GetBig()
	defer held.Free()
	const payload, mss = 60000, 1448
	segs := (payload + mss - 1) / mss
	if segs <= packet.BatchSize {
		t.Fatalf("%d segments fit one batch: the test needs more", segs)
	}
	fr := tcpFrame(false, payload)
	f.tx(0).transmitOffload(tcpHdr(fr, mss), fr, true)
	after := testFrame(100, 77)
	f.tx(0).transmit(after)
	got := recvPackets(t, p, pool, segs+1)
	if len(got) != segs+1 {
		t.Fatalf("%d packets, want %d segments and one frame", len(got), segs)
	}
	var data []byte
	for i, s := range got[:segs] {
		d := s.Data()
		if s.GSO() || !l4Valid(d) || (i < segs-1 && len(d) != 54+mss) {
			t.Fatalf("segment %d: %d bytes, gso %v, checksum valid %v", i, len(d), s.GSO(), l4Valid(d))
		}
		data = append(data, d[54:]...)
	}
	if !bytes.Equal(data, fr[54:]) {
		t.Error("segments do not carry the payload")
	}
	if !bytes.Equal(got[segs].Data(), after) {
		t.Error("the frame after the super-frame differs")
	}
	for _, pk := range got {
		pk.Free()
	}
	if g := p.GSOStats(); g.RxSegmented != 1 || g.RxWhole != 0 {
		t.Errorf("GSO stats %+v, want 1 segmented", g)
	}
}

// TestGuestPartialChecksum: a single frame with NEEDS_CSUM arrives with
// its checksum completed and no offload state.
func TestGuestPartialChecksum(t *testing.T) {
	p, f := offloadPort(t)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	for _, ipv6 := range []bool{false, true} {
		fr := tcpFrame(ipv6, 333)
		f.tx(0).transmitOffload(tcpHdr(fr, 0), fr, ipv6)
		got := recvPackets(t, p, pool, 1)
		if len(got) != 1 || got[0].GSO() || got[0].Offload != (packet.Offload{}) || !l4Valid(got[0].Data()) {
			t.Fatalf("ipv6=%v: %d packets, first %+v", ipv6, len(got), got[0].Offload)
		}
		if !bytes.Equal(got[0].Data()[:50], fr[:50]) {
			t.Error("headers changed")
		}
		got[0].Free()
	}
}

// TestGuestBadOffloads: headers that do not match their frame are counted
// and dropped, big buffer or not, and the frames after them arrive.
func TestGuestBadOffloads(t *testing.T) {
	v4, v6 := tcpFrame(false, 5000), tcpFrame(true, 5000)
	cases := []struct {
		name  string
		frame []byte
		edit  func(h *vnethdr.Header)
	}{
		{"gso_size 0", v4, func(h *vnethdr.Header) { h.GSOSize = 0 }},
		{"TCPv4 GSO on IPv6", v6, func(h *vnethdr.Header) { h.GSOType = vnethdr.GSOTCPv4 }},
		{"TCPv6 GSO on IPv4", v4, func(h *vnethdr.Header) { h.GSOType = vnethdr.GSOTCPv6 }},
		{"unknown GSO type", v4, func(h *vnethdr.Header) { h.GSOType = 9 }},
		{"UDP GSO on TCP", v4, func(h *vnethdr.Header) { h.GSOType = vnethdr.GSOUDPL4 }},
		{"csum_start not at L4", v4, func(h *vnethdr.Header) { h.CsumStart += 4 }},
		{"csum_start past the frame", v4, func(h *vnethdr.Header) { h.CsumStart = 60000 }},
		{"csum_offset not TCP's", v4, func(h *vnethdr.Header) { h.CsumOffset = 6 }},
		{"single frame, csum_offset past the end", v4[:200], func(h *vnethdr.Header) { *h = tcpHdr(v4, 0); h.CsumOffset = 400 }},
		{"single frame, csum_start past the end", v6[:100], func(h *vnethdr.Header) { *h = tcpHdr(v6, 0); h.CsumStart = 0xfff0 }},
		{"truncated headers", v4[:40], func(*vnethdr.Header) {}},
	}
	for _, big := range []bool{true, false} {
		p, f := offloadPort(t)
		pool := packet.NewPool(256, packet.DefaultBufSize)
		if big {
			pool.AttachBig(packet.NewPool(4, packet.BigBufSize))
		}
		for i, c := range cases {
			h := tcpHdr(c.frame, 1000)
			c.edit(&h)
			f.tx(0).transmitOffload(h, c.frame, i%2 == 1)
			good := testFrame(80, uint32(i))
			f.tx(0).transmit(good)
			got := recvPackets(t, p, pool, 1)
			if len(got) != 1 || !bytes.Equal(got[0].Data(), good) {
				t.Fatalf("big=%v %s: got %d packets", big, c.name, len(got))
			}
			got[0].Free()
			if n := p.BadOffloads(); n != uint64(i+1) {
				t.Fatalf("big=%v %s: %d bad offloads counted, want %d", big, c.name, n, i+1)
			}
		}
		if st := p.Stats(); st.RxErrors != uint64(len(cases)) || st.RxPackets != uint64(len(cases)) {
			t.Errorf("big=%v: stats %+v", big, st)
		}
		if g := p.GSOStats(); g.RxWhole+g.RxSegmented != 0 {
			t.Errorf("big=%v: GSO stats %+v", big, g)
		}
	}
}

// superFrame is a big packet from pool holding frame with GSO state h.
func superFrame(t *testing.T, pool *packet.Pool, frame []byte, h vnethdr.Header) *packet.Packet {
	t.Helper()
	pk := pool.GetBig()
	if pk == nil || !pk.SetLen(len(frame)) {
		t.Fatal("no big buffer")
	}
	copy(pk.Data(), frame)
	pk.Offload = packet.Offload(h)
	return pk
}

// TestGuestRxTSOWhole: to a guest that negotiated GUEST_CSUM/TSO4/TSO6
// and mergeable buffers, a TCP super-frame goes whole over as many
// receive buffers as it needs, with its offload state and a hdr_len for
// the frame in the header; frames around it keep their order.
func TestGuestRxTSOWhole(t *testing.T) {
	p, f := offloadPort(t)
	if !p.SendsGSO() {
		t.Fatalf("SendsGSO false with features %#x", f.feats)
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(4, packet.BigBufSize))
	rx := f.rx(0)
	n := 0
	for _, ipv6 := range []bool{false, true} {
		fr := tcpFrame(ipv6, 60000)
		h := tcpHdr(fr, 1448)
		h.HdrLen = 999 // the sender's: says nothing about the frame now
		before, after := testFrame(100, 1), testFrame(200, 2)
		var b packet.Batch
		for _, x := range []*packet.Packet{pool.Get(), superFrame(t, pool, fr, h), pool.Get()} {
			b.Add(x)
		}
		b.Packets()[0].SetData(before)
		b.Packets()[2].SetData(after)
		if sent := p.Send(0, &b); sent != 3 {
			t.Fatalf("ipv6=%v: sent %d of 3", ipv6, sent)
		}
		b.FreeAll()
		n++
		var got [][]byte
		rx.hdrs = nil
		waitFor(t, "frames", func() bool { got = append(got, rx.receive()...); return len(got) >= 3 })
		if len(got) != 3 || !bytes.Equal(got[0], before) || !bytes.Equal(got[1], fr) || !bytes.Equal(got[2], after) {
			t.Fatalf("ipv6=%v: %d frames, lengths %v", ipv6, len(got), lens(got))
		}
		gh, _ := vnethdr.Decode(rx.hdrs[1][:])
		want := tcpHdr(fr, 1448)
		want.HdrLen = want.CsumStart + header.TCPMinLen
		if gh != want {
			t.Errorf("ipv6=%v: header %+v, want %+v", ipv6, gh, want)
		}
		if nb := le.Uint16(rx.hdrs[1][10:]); nb < 2 {
			t.Errorf("num_buffers %d", nb)
		}
		for _, i := range []int{0, 2} {
			if gh, _ := vnethdr.Decode(rx.hdrs[i][:]); gh != (vnethdr.Header{}) {
				t.Errorf("ipv6=%v frame %d: header %+v", ipv6, i, gh)
			}
		}
	}
	if g := p.GSOStats(); g.TxWhole != uint64(n) {
		t.Errorf("GSO stats %+v, want %d sent whole", g, n)
	}
	if st := p.Stats(); st.TxPackets != uint64(3*n) || st.TxErrors != 0 || st.TxDrops != 0 {
		t.Errorf("stats %+v", st)
	}
}

func lens(fs [][]byte) []int {
	var l []int
	for _, f := range fs {
		l = append(l, len(f))
	}
	return l
}

// TestGuestRxTSOSegmented: a guest without GUEST_TSO gets no GSO from the
// port (SendsGSO false); a super-frame that reaches Send anyway, or one of
// a kind the guest did not negotiate (ECN without GUEST_ECN), goes as
// segments with complete checksums and zero headers.
func TestGuestRxTSOSegmented(t *testing.T) {
	const payload, mss = 20000, 1448
	segs := (payload + mss - 1) / mss
	for _, c := range []struct {
		name string
		mask uint64
		ecn  bool
	}{
		{"no GUEST_TSO", ^uint64(1<<featNetGuestTSO4 | 1<<featNetGuestTSO6), false},
		{"no GUEST_ECN", ^uint64(1 << featNetGuestECN), true},
	} {
		p, f := offloadPortMask(t, c.mask)
		if p.SendsGSO() != c.ecn {
			t.Fatalf("%s: SendsGSO %v", c.name, p.SendsGSO())
		}
		pool := packet.NewPool(64, packet.DefaultBufSize)
		pool.AttachBig(packet.NewPool(4, packet.BigBufSize))
		rx := f.rx(0)
		fr := tcpFrame(false, payload)
		h := tcpHdr(fr, mss)
		if c.ecn {
			h.GSOType |= vnethdr.GSOECN
		}
		var b packet.Batch
		b.Add(superFrame(t, pool, fr, h))
		if sent := p.Send(0, &b); sent != 1 {
			t.Fatalf("%s: sent %d", c.name, sent)
		}
		b.FreeAll()
		var got [][]byte
		rx.hdrs = nil
		waitFor(t, "segments", func() bool { got = append(got, rx.receive()...); return len(got) >= segs })
		var data []byte
		for i, s := range got {
			if !l4Valid(s) || [10]byte(rx.hdrs[i][:10]) != [10]byte{} || (i < segs-1 && len(s) != 54+mss) {
				t.Fatalf("%s: segment %d of %d: %d bytes, header %x", c.name, i, len(got), len(s), rx.hdrs[i])
			}
			data = append(data, s[54:]...)
		}
		if len(got) != segs || !bytes.Equal(data, fr[54:]) {
			t.Errorf("%s: %d segments (want %d), payload equal %v", c.name, len(got), segs, bytes.Equal(data, fr[54:]))
		}
		if g := p.GSOStats(); g.TxWhole != 0 {
			t.Errorf("%s: GSO stats %+v", c.name, g)
		}
	}
}

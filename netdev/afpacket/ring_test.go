package afpacket

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"vswitch/datapath/packet"
	"vswitch/netdev"
	"vswitch/netdev/vnethdr"
)

// synthFrame is one frame as the kernel would write it into a V3 block.
type synthFrame struct {
	data       []byte // the frame as captured (tag stripped)
	wire       int    // tp_len; 0 means len(data)
	vh         vnethdr.Header
	vlan       bool
	tpidValid  bool
	tpid, tci  uint16
	statusBits uint32
}

// synthMacOff is where the kernel puts the frame relative to its
// tpacket3_hdr with PACKET_VNET_HDR: TPACKET_ALIGN(68+16) + 10 - 14.
const synthMacOff = 82

// fillBlock writes frames into blk the way tpacket_rcv does and hands the
// block to user space.
func fillBlock(t testing.TB, blk []byte, frames []synthFrame) {
	t.Helper()
	clear(blk)
	off := blockDescLen
	for i, f := range frames {
		end := off + synthMacOff + len(f.data)
		if end > len(blk) {
			t.Fatalf("frame %d does not fit the block", i)
		}
		h := blk[off:]
		next := 0
		if i < len(frames)-1 {
			next = (synthMacOff + len(f.data) + 15) &^ 15
		}
		wire := f.wire
		if wire == 0 {
			wire = len(f.data)
		}
		st := uint32(statusUser) | f.statusBits
		if f.vlan {
			st |= statusVLANValid
			binary.LittleEndian.PutUint32(h[tp3VlanTCIOff:], uint32(f.tci))
			if f.tpidValid {
				st |= statusVLANTPIDValid
				binary.LittleEndian.PutUint16(h[tp3VlanTPID:], f.tpid)
			}
		}
		binary.LittleEndian.PutUint32(h[tp3NextOff:], uint32(next))
		binary.LittleEndian.PutUint32(h[tp3SnaplenOff:], uint32(len(f.data)))
		binary.LittleEndian.PutUint32(h[tp3LenOff:], uint32(wire))
		binary.LittleEndian.PutUint32(h[tp3StatusOff:], st)
		binary.LittleEndian.PutUint16(h[tp3MacOff:], synthMacOff)
		f.vh.Encode(h[synthMacOff-vnethdr.Len:])
		copy(h[synthMacOff:], f.data)
		off += next
	}
	binary.LittleEndian.PutUint32(blk[blkNumPktsOff:], uint32(len(frames)))
	binary.LittleEndian.PutUint32(blk[blkFirstPktOff:], blockDescLen)
	storeStatus(blk[blkStatusOff:], statusUser)
}

// newSynthQueue returns an rx queue over a Go-allocated ring.
func newSynthQueue(blockSize, blockNr int) *rxQueue {
	return &rxQueue{
		fd:        -1,
		ring:      make([]byte, blockSize*blockNr),
		blockSize: blockSize,
		blockNr:   blockNr,
		vnet:      true,
		c:         new(netdev.Counters),
	}
}

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ipA  = net.IPv4(198, 18, 0, 1).To4()
	ipB  = net.IPv4(198, 18, 0, 2).To4()
)

// sized returns a valid UDP frame of n bytes (n >= 42) with source port sport.
func sized(n int, sport uint16) []byte {
	f := udpFrame(macB, macA, ipA, ipB, sport, 9)
	if n <= len(f) {
		return f[:n]
	}
	f = append(f, make([]byte, n-len(f))...)
	binary.BigEndian.PutUint16(f[16:], uint16(n-14))
	binary.BigEndian.PutUint16(f[24:], 0)
	binary.BigEndian.PutUint16(f[24:], ^csum(f[14:34], 0))
	binary.BigEndian.PutUint16(f[38:], uint16(n-34))
	binary.BigEndian.PutUint16(f[40:], 0) // no UDP checksum
	return f
}

func recvAll(q *rxQueue, pool *packet.Pool) [][]byte {
	var out [][]byte
	for {
		var b packet.Batch
		n := q.recv(pool, &b)
		for _, p := range b.Packets() {
			out = append(out, append([]byte{}, p.Data()...))
		}
		b.FreeAll()
		if n == 0 {
			return out
		}
	}
}

func TestRxWalkReleasesBlocksInOrder(t *testing.T) {
	q := newSynthQueue(4096, 2)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	f1, f2, f3 := sized(60, 1), sized(1000, 2), sized(200, 3)
	fillBlock(t, q.block(0), []synthFrame{{data: f1}, {data: f2}})
	fillBlock(t, q.block(1), []synthFrame{{data: f3}})
	got := recvAll(q, pool)
	if len(got) != 3 || !bytes.Equal(got[0], f1) || !bytes.Equal(got[1], f2) || !bytes.Equal(got[2], f3) {
		t.Fatalf("got %d frames, want f1 f2 f3 in order", len(got))
	}
	for i := 0; i < 2; i++ {
		if st := loadStatus(q.block(i)[blkStatusOff:]); st != statusKernel {
			t.Errorf("block %d status %d after the walk, want handed back", i, st)
		}
	}
	// The walk wraps round to block 0 and waits for the kernel.
	if q.cur != 0 || q.open {
		t.Errorf("walk at block %d (open %v), want 0 closed", q.cur, q.open)
	}
	f4 := sized(100, 4)
	fillBlock(t, q.block(0), []synthFrame{{data: f4}})
	if got := recvAll(q, pool); len(got) != 1 || !bytes.Equal(got[0], f4) {
		t.Fatalf("after wrap got %d frames", len(got))
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxPackets != 4 || s.RxBytes != 60+1000+200+100 || s.RxErrors != 0 {
		t.Errorf("counters %+v", s)
	}
	if pool.Available() != pool.Size() {
		t.Errorf("pool leak: %d of %d", pool.Available(), pool.Size())
	}
}

func TestRxVLANRestore(t *testing.T) {
	q := newSynthQueue(8192, 1)
	pool := packet.NewPool(8, packet.DefaultBufSize)
	f := sized(64, 7)
	fillBlock(t, q.block(0), []synthFrame{
		{data: f, vlan: true, tci: 5<<13 | 100},                        // TPID not reported: 802.1Q
		{data: f, vlan: true, tpidValid: true, tpid: 0x88a8, tci: 200}, // 802.1ad
		{data: f, vlan: true, tpidValid: true, tpid: 0x8100, tci: 0},   // priority tag
		{data: f}, // untagged stays so
		{data: f[:12], vlan: true, tpidValid: true, tpid: 0x8100, tci: 300}, // runt even with its tag
	})
	got := recvAll(q, pool)
	want := [][2]uint16{{0x8100, 5<<13 | 100}, {0x88a8, 200}, {0x8100, 0}}
	if len(got) != 4 {
		t.Fatalf("got %d frames, want 4", len(got))
	}
	for i, w := range want {
		g := got[i]
		if len(g) != len(f)+4 || !bytes.Equal(g[:12], f[:12]) || !bytes.Equal(g[16:], f[12:]) {
			t.Errorf("frame %d: tag not inserted between MACs and EtherType: % x", i, g[:20])
		}
		if tp, tci := binary.BigEndian.Uint16(g[12:]), binary.BigEndian.Uint16(g[14:]); tp != w[0] || tci != w[1] {
			t.Errorf("frame %d: tag %04x/%04x want %04x/%04x", i, tp, tci, w[0], w[1])
		}
	}
	if !bytes.Equal(got[3], f) {
		t.Errorf("untagged frame changed")
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxErrors != 1 {
		t.Errorf("RxErrors %d, want 1 (the runt)", s.RxErrors)
	}
}

// partialUDP returns a UDP frame whose checksum field holds the
// pseudo-header sum, and the vnet header the kernel would give it.
func partialUDP(payload int) ([]byte, vnethdr.Header) {
	f := sized(42+payload, 9)
	for i := 42; i < len(f); i++ {
		f[i] = byte(i)
	}
	ps := csum(f[26:34], uint32(17+8+payload))
	binary.BigEndian.PutUint16(f[40:], ps)
	return f, vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}
}

func TestRxPartialChecksum(t *testing.T) {
	q := newSynthQueue(8192, 1)
	pool := packet.NewPool(8, packet.DefaultBufSize)
	f, vh := partialUDP(100)
	bad := vh
	bad.CsumStart = 2000 // points past the frame
	fillBlock(t, q.block(0), []synthFrame{
		{data: f, vh: vh},
		{data: f, vh: vh, vlan: true, tci: 10}, // csum_start measured without the tag
		{data: f, vh: bad},
	})
	got := recvAll(q, pool)
	if len(got) != 2 {
		t.Fatalf("got %d frames, want 2", len(got))
	}
	for i, g := range got {
		if !udpChecksumOK(g) {
			t.Errorf("frame %d: UDP checksum not completed: % x", i, g[34+4*i:46+4*i])
		}
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxErrors != 1 {
		t.Errorf("RxErrors %d, want 1 (bad csum_start)", s.RxErrors)
	}
}

func TestRxErrorsCounted(t *testing.T) {
	q := newSynthQueue(16384, 1)
	pool := packet.NewPool(8, packet.DefaultBufSize)
	good := sized(100, 1)
	fillBlock(t, q.block(0), []synthFrame{
		{data: sized(60, 2)[:13]},        // runt
		{data: good},                     // fine
		{data: sized(500, 3), wire: 600}, // truncated by the kernel
		{data: sized(3000, 4)},           // larger than a pool buffer, not GSO
		{data: good, vh: vnethdr.Header{GSOType: vnethdr.GSOTCPv4, GSOSize: 100}}, // GSO type on a UDP frame
		{data: good},
	})
	got := recvAll(q, pool)
	if len(got) != 2 || !bytes.Equal(got[0], good) || !bytes.Equal(got[1], good) {
		t.Fatalf("got %d frames, want the 2 good ones", len(got))
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxErrors != 4 || s.RxPackets != 2 {
		t.Errorf("counters %+v, want 4 errors and 2 packets", s)
	}
}

// tcpSuper returns a TCPv4 GSO super-frame with payload bytes of payload,
// and its vnet header (segments of mss bytes).
func tcpSuper(payload, mss int) ([]byte, vnethdr.Header) {
	f := make([]byte, 14+20+20+payload)
	copy(f, macB)
	copy(f[6:], macA)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(40+payload))
	ip[8], ip[9] = 64, 6
	copy(ip[12:], ipA)
	copy(ip[16:], ipB)
	binary.BigEndian.PutUint16(ip[10:], ^csum(ip, 0))
	tcp := f[34:54]
	binary.BigEndian.PutUint16(tcp[0:], 5001)
	binary.BigEndian.PutUint16(tcp[2:], 80)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12] = 5 << 4
	tcp[13] = 0x18 // PSH ACK
	for i := 54; i < len(f); i++ {
		f[i] = byte(i * 13)
	}
	return f, vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, GSOType: vnethdr.GSOTCPv4, GSOSize: uint16(mss), HdrLen: 54, CsumStart: 34, CsumOffset: 16}
}

func TestRxGSOSpansBatches(t *testing.T) {
	q := newSynthQueue(1<<17, 2)
	pool := packet.NewPool(128, packet.DefaultBufSize)
	const mss, nseg = 1000, 40
	super, vh := tcpSuper(mss*nseg, mss)
	after := sized(80, 5)
	fillBlock(t, q.block(0), []synthFrame{{data: super, vh: vh, vlan: true, tci: 42}, {data: after}})

	var b packet.Batch
	if n := q.recv(pool, &b); n != packet.BatchSize {
		t.Fatalf("first batch %d, want %d", n, packet.BatchSize)
	}
	if loadStatus(q.block(0)[blkStatusOff:]) != statusUser || !q.segmenting {
		t.Fatal("block released (or segmenting stopped) while the super-frame still has segments")
	}
	segs := b.Packets()
	var b2 packet.Batch
	if n := q.recv(pool, &b2); n != nseg-packet.BatchSize+1 {
		t.Fatalf("second batch %d, want %d", n, nseg-packet.BatchSize+1)
	}
	if loadStatus(q.block(0)[blkStatusOff:]) != statusKernel {
		t.Error("block not handed back after its last frame")
	}
	all := append(append([]*packet.Packet{}, segs...), b2.Packets()[:b2.N-1]...)
	for i, p := range all {
		d := p.Data()
		if len(d) != 18+40+mss {
			t.Fatalf("segment %d: %d bytes", i, len(d))
		}
		if binary.BigEndian.Uint16(d[12:]) != 0x8100 || binary.BigEndian.Uint16(d[14:]) != 42 {
			t.Errorf("segment %d lost its VLAN tag", i)
		}
		tcp := d[38:58]
		if seq := binary.BigEndian.Uint32(tcp[4:]); seq != uint32(1000+i*mss) {
			t.Errorf("segment %d: seq %d", i, seq)
		}
		if !bytes.Equal(d[58:], super[54+i*mss:54+(i+1)*mss]) {
			t.Errorf("segment %d: payload differs", i)
		}
		l := len(d) - 38
		if csum(d[38:], uint32(csum(d[30:38], uint32(6+l)))) != 0xffff {
			t.Errorf("segment %d: bad TCP checksum", i)
		}
	}
	if last := b2.Pkts[b2.N-1].Data(); !bytes.Equal(last, after) {
		t.Error("frame after the super-frame not delivered")
	}
	b.FreeAll()
	b2.FreeAll()
	if pool.Available() != pool.Size() {
		t.Errorf("pool leak")
	}
}

func TestRxPoolStarvationLosesNothing(t *testing.T) {
	q := newSynthQueue(8192, 1)
	pool := packet.NewPool(2, packet.DefaultBufSize)
	var frames []synthFrame
	for i := 0; i < 5; i++ {
		frames = append(frames, synthFrame{data: sized(64, uint16(i))})
	}
	fillBlock(t, q.block(0), frames)
	var seen []uint16
	for round := 0; round < 10; round++ {
		var b packet.Batch
		q.recv(pool, &b)
		for _, p := range b.Packets() {
			seen = append(seen, binary.BigEndian.Uint16(p.Data()[34:]))
		}
		if b.N > 2 {
			t.Fatalf("batch of %d from a pool of 2", b.N)
		}
		// Starve once with both buffers held.
		if round == 0 {
			var b3 packet.Batch
			if n := q.recv(pool, &b3); n != 0 {
				t.Fatalf("received %d with an empty pool", n)
			}
		}
		b.FreeAll()
	}
	if len(seen) != 5 {
		t.Fatalf("saw %d frames, want 5: %v", len(seen), seen)
	}
	for i, s := range seen {
		if s != uint16(i) {
			t.Errorf("frame %d has source port %d", i, s)
		}
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxDrops != 1 {
		t.Errorf("RxDrops %d, want 1 (one starved poll)", s.RxDrops)
	}
}

func TestParseRejectsHostileOffsets(t *testing.T) {
	blk := make([]byte, 4096)
	cases := []struct {
		name      string
		off, mac  int
		snap, nxt uint32
		last      bool
	}{
		{"header past block", 4096 - 40, 82, 10, 0, true},
		{"header over block descriptor", 8, 82, 10, 0, true},
		{"mac inside header", 48, 20, 10, 0, true},
		{"no room for vnet header", 48, 52, 10, 0, true},
		{"frame past block", 48, 82, 4096, 0, true},
		{"next points backwards", 48, 82, 10, 0, false},
		{"next inside header", 48, 82, 10, 16, false},
	}
	for _, c := range cases {
		clear(blk)
		if c.off+tp3HdrLen <= len(blk) && c.off >= 0 {
			h := blk[c.off:]
			binary.LittleEndian.PutUint32(h[tp3NextOff:], c.nxt)
			binary.LittleEndian.PutUint32(h[tp3SnaplenOff:], c.snap)
			binary.LittleEndian.PutUint16(h[tp3MacOff:], uint16(c.mac))
		}
		if _, ok := parseFrame(blk, c.off, vnethdr.Len, c.last); ok {
			t.Errorf("%s: accepted", c.name)
		}
	}
	binary.LittleEndian.PutUint32(blk[blkNumPktsOff:], 1<<31)
	binary.LittleEndian.PutUint32(blk[blkFirstPktOff:], blockDescLen)
	if n, _, ok := parseBlockHeader(blk); !ok || n > uint32(len(blk)/tp3HdrLen) {
		t.Errorf("hostile packet count not capped: %d", n)
	}
	binary.LittleEndian.PutUint32(blk[blkFirstPktOff:], 4090)
	if _, _, ok := parseBlockHeader(blk); ok {
		t.Error("first packet past the block accepted")
	}
}

func TestNewRejectsBadOptionsAndInterfaces(t *testing.T) {
	for _, o := range []Options{
		{RxBlockSize: 5000},
		{TxFrameSize: 3000},
		{TxFrameSize: 1024},
		{Queues: 65},
	} {
		if p, err := New("lo", o); err == nil {
			p.Close()
			t.Errorf("New with %+v succeeded", o)
		}
	}
	if p, err := New("nosuchif0", Options{}); err == nil {
		p.Close()
		t.Error("New on a missing interface succeeded")
	}
	o, err := Options{TxFrames: 100, TxFrameSize: 4096}.withDefaults()
	if err != nil || o.TxFrames != 112 || o.Queues != 1 || o.RxBlockSize != DefaultRxBlockSize {
		t.Errorf("defaults: %+v %v (tx frames must round up to whole 64 KiB blocks)", o, err)
	}
}

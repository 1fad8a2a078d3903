package afpacket

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// synthFrame is one frame as the kernel would write it into a ring.
type synthFrame struct {
	data       []byte // the frame as captured (tag stripped)
	wire       int    // tp_len; 0 means len(data)
	vh         vnethdr.Header
	vlan       bool
	tpidValid  bool
	tpid, tci  uint16
	statusBits uint32
}

// status returns the tp_status the kernel would give f.
func (f *synthFrame) status() uint32 {
	st := uint32(statusUser) | f.statusBits
	if f.vlan {
		st |= statusVLANValid
		if f.tpidValid {
			st |= statusVLANTPIDValid
		}
	}
	return st
}

func (f *synthFrame) wireLen() int {
	if f.wire == 0 {
		return len(f.data)
	}
	return f.wire
}

// synthMacOff is where the kernel puts an untagged Ethernet frame relative
// to its tpacket3_hdr with PACKET_VNET_HDR: TPACKET_ALIGN(68+16) + 10 - 14.
const synthMacOff = 92

// bigSlot is a V2 slot that holds a super-frame (the default before slots
// were sized for MTU frames).
const bigSlot = 66048

// synthMacOffV2 is the same for a tpacket2_hdr: TPACKET_ALIGN(52+16) + 10
// - 14.
const synthMacOffV2 = 76

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
		if f.vlan {
			binary.LittleEndian.PutUint32(h[tp3VlanTCIOff:], uint32(f.tci))
			if f.tpidValid {
				binary.LittleEndian.PutUint16(h[tp3VlanTPID:], f.tpid)
			}
		}
		binary.LittleEndian.PutUint32(h[tp3NextOff:], uint32(next))
		binary.LittleEndian.PutUint32(h[tp3SnaplenOff:], uint32(len(f.data)))
		binary.LittleEndian.PutUint32(h[tp3LenOff:], uint32(f.wireLen()))
		binary.LittleEndian.PutUint32(h[tp3StatusOff:], f.status())
		binary.LittleEndian.PutUint16(h[tp3MacOff:], synthMacOff)
		f.vh.Encode(h[synthMacOff-vnethdr.Len:])
		copy(h[synthMacOff:], f.data)
		off += next
	}
	binary.LittleEndian.PutUint32(blk[blkNumPktsOff:], uint32(len(frames)))
	binary.LittleEndian.PutUint32(blk[blkFirstPktOff:], blockDescLen)
	storeStatus(blk[blkStatusOff:], statusUser)
}

// fillSlot writes f into a V2 slot the way tpacket_rcv does (truncating
// it to the slot, as the kernel does) and hands the slot to user space.
func fillSlot(t testing.TB, slot []byte, f synthFrame) {
	t.Helper()
	clear(slot)
	snap := min(len(f.data), len(slot)-synthMacOffV2)
	binary.LittleEndian.PutUint32(slot[tp2LenOff:], uint32(f.wireLen()))
	binary.LittleEndian.PutUint32(slot[tp2SnaplenOff:], uint32(snap))
	binary.LittleEndian.PutUint16(slot[tp2MacOff:], synthMacOffV2)
	binary.LittleEndian.PutUint16(slot[tp2MacOff+2:], synthMacOffV2+header.EthernetLen) // tp_net
	if f.vlan {
		binary.LittleEndian.PutUint16(slot[tp2VlanTCIOff:], f.tci)
		if f.tpidValid {
			binary.LittleEndian.PutUint16(slot[tp2VlanTPIDOff:], f.tpid)
		}
	}
	f.vh.Encode(slot[synthMacOffV2-vnethdr.Len:])
	copy(slot[synthMacOffV2:], f.data[:snap])
	storeStatus(slot[tp2StatusOff:], f.status())
}

// newSynthQueue returns a V3 rx queue over a Go-allocated ring.
func newSynthQueue(blockSize, blockNr int) *rxQueue {
	return &rxQueue{
		fd:        -1,
		v3:        true,
		ring:      make([]byte, blockSize*blockNr),
		blockSize: blockSize,
		blockNr:   blockNr,
		vnet:      true,
		c:         new(netdev.Counters),
	}
}

// newSynthQueueV2 returns a V2 rx queue over a Go-allocated ring of
// blockNr blocks of blockSize bytes, each holding as many slots of
// frameSize bytes as fit.
func newSynthQueueV2(frameSize, blockSize, blockNr int) *rxQueue {
	per := blockSize / frameSize
	return &rxQueue{
		fd:             -1,
		ring:           make([]byte, blockSize*blockNr),
		blockSize:      blockSize,
		blockNr:        blockNr,
		frameSize:      frameSize,
		framesPerBlock: per,
		frameNr:        per * blockNr,
		vnet:           true,
		c:              new(netdev.Counters),
	}
}

// synthRing plays the kernel's side of a ring of either version: feed
// writes frames where the kernel would write them next and hands them
// over (a V3 block per call, a V2 slot per frame).
type synthRing struct {
	q    *rxQueue
	head int
	// peer, when not -1, is the other end of a datagram socket pair whose
	// end q reads: a V2 frame too large for its slot is written there
	// whole and the slot marked TP_STATUS_COPY, as the kernel does with
	// PACKET_COPY_THRESH.
	peer int
}

// newSynthRing returns a ring of the given version with room for at least
// 8 feeds of frames up to 64 KiB: V3 blocks of 128 KiB; V2 slots of the
// default size, two to a block of 33 pages, so that the block stride
// differs from the slot stride.
func newSynthRing(v RingVersion) *synthRing {
	if v == RingV3 {
		return &synthRing{q: newSynthQueue(1<<17, 8), peer: -1}
	}
	return &synthRing{q: newSynthQueueV2(bigSlot, 33*4096, 4), peer: -1}
}

// newSynthRingCopy returns a V2 ring of the default 2,048-byte slots whose
// larger frames come through a socket pair, closed at the end of the test.
func newSynthRingCopy(t *testing.T) *synthRing {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	q := newSynthQueueV2(DefaultRxFrameSize, 8192, 4)
	q.fd = fds[0]
	return &synthRing{q: q, peer: fds[1]}
}

func (r *synthRing) feed(t testing.TB, frames ...synthFrame) {
	t.Helper()
	q := r.q
	if q.v3 {
		blk := q.block(r.head)
		if loadStatus(blk[blkStatusOff:]) != statusKernel {
			t.Fatalf("block %d still belongs to user space", r.head)
		}
		fillBlock(t, blk, frames)
		r.head = (r.head + 1) % q.blockNr
		return
	}
	for _, f := range frames {
		s := q.slot(r.head)
		if loadStatus(s[tp2StatusOff:]) != statusKernel {
			t.Fatalf("slot %d still belongs to user space", r.head)
		}
		if r.peer >= 0 && synthMacOffV2+len(f.data) > len(s) {
			dg := make([]byte, vnethdr.Len+len(f.data))
			f.vh.Encode(dg)
			copy(dg[vnethdr.Len:], f.data)
			if err := unix.Send(r.peer, dg, 0); err != nil {
				t.Fatal(err)
			}
			f.statusBits |= statusCopy
		}
		fillSlot(t, s, f)
		r.head = (r.head + 1) % q.frameNr
	}
}

// userOwned reports whether region i (a V3 block, a V2 slot) is still
// with user space.
func (r *synthRing) userOwned(i int) bool {
	if r.q.v3 {
		return loadStatus(r.q.block(i)[blkStatusOff:]) != statusKernel
	}
	return loadStatus(r.q.slot(i)[tp2StatusOff:]) != statusKernel
}

// forEachRing runs f as a subtest for each ring version.
func forEachRing(t *testing.T, f func(t *testing.T, r *synthRing)) {
	for _, v := range []RingVersion{RingV2, RingV3} {
		t.Run(v.String(), func(t *testing.T) { f(t, newSynthRing(v)) })
	}
	t.Run("V2copy", func(t *testing.T) { f(t, newSynthRingCopy(t)) })
}

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ipA  = net.IPv4(198, 18, 0, 1).To4()
	ipB  = net.IPv4(198, 18, 0, 2).To4()
)

// sized returns a valid UDP frame of n bytes (n >= 42) with source port sport.
func sized(n int, sport uint16) []byte {
	f := nstest.UDPFrame(macB, macA, ipA, ipB, sport, 9)
	if n <= len(f) {
		return f[:n]
	}
	f = append(f, make([]byte, n-len(f))...)
	binary.BigEndian.PutUint16(f[16:], uint16(n-14))
	binary.BigEndian.PutUint16(f[24:], 0)
	binary.BigEndian.PutUint16(f[24:], ^nstest.Checksum(f[14:34], 0))
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

func TestRxV2WalkReleasesSlotsInOrder(t *testing.T) {
	r := newSynthRing(RingV2)
	q := r.q
	// Two slots per block, and the block is longer than two slots: the
	// third slot starts at the second block, not at 2*frameSize.
	if &q.slot(1)[0] != &q.ring[q.frameSize] || &q.slot(2)[0] != &q.ring[q.blockSize] || q.blockSize == 2*q.frameSize {
		t.Fatal("slots do not follow the kernel's block layout")
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var want [][]byte
	var frames []synthFrame
	for i := 0; i < q.frameNr-1; i++ {
		f := sized(60+i*100, uint16(i))
		want = append(want, f)
		frames = append(frames, synthFrame{data: f})
	}
	// A lone frame is taken at once, without waiting for the others.
	r.feed(t, frames[0])
	if got := recvAll(q, pool); len(got) != 1 || !bytes.Equal(got[0], want[0]) {
		t.Fatalf("lone frame: got %d frames", len(got))
	}
	r.feed(t, frames[1:]...)
	got := recvAll(q, pool)
	if len(got) != len(want)-1 {
		t.Fatalf("got %d frames, want %d", len(got), len(want)-1)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i+1]) {
			t.Errorf("frame %d differs", i+1)
		}
	}
	for i := 0; i < q.frameNr; i++ {
		if r.userOwned(i) {
			t.Errorf("slot %d not handed back", i)
		}
	}
	if q.cur != q.frameNr-1 {
		t.Fatalf("walk at slot %d, want %d", q.cur, q.frameNr-1)
	}
	// The walk stops at a slot the kernel still owns even if a later one
	// is ready (the kernel fills slots in order; it never skips one).
	fillSlot(t, q.slot(0), synthFrame{data: sized(70, 99)})
	if got := recvAll(q, pool); len(got) != 0 {
		t.Fatalf("took %d frames past a slot the kernel owns", len(got))
	}
	// Wrap round: the last slot, then slot 0.
	last := sized(80, 98)
	fillSlot(t, q.slot(q.frameNr-1), synthFrame{data: last})
	got = recvAll(q, pool)
	if len(got) != 2 || !bytes.Equal(got[0], last) || binary.BigEndian.Uint16(got[1][34:]) != 99 {
		t.Fatalf("after wrap got %d frames", len(got))
	}
	if q.cur != 1 {
		t.Errorf("walk at slot %d after wrapping, want 1", q.cur)
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxPackets != uint64(q.frameNr+1) || s.RxErrors != 0 {
		t.Errorf("counters %+v", s)
	}
	if pool.Available() != pool.Size() {
		t.Errorf("pool leak: %d of %d", pool.Available(), pool.Size())
	}
}

// TestRxV2LosingIsInformational checks that TP_STATUS_LOSING (the kernel
// dropped frames before this one) and the checksum status bits do not get
// a frame rejected.
func TestRxV2LosingIsInformational(t *testing.T) {
	r := newSynthRing(RingV2)
	pool := packet.NewPool(8, packet.DefaultBufSize)
	f := sized(64, 1)
	const csumValid = 1 << 7 // TP_STATUS_CSUM_VALID
	r.feed(t, synthFrame{data: f, statusBits: statusLosing}, synthFrame{data: f, statusBits: csumValid})
	if got := recvAll(r.q, pool); len(got) != 2 || !bytes.Equal(got[0], f) || !bytes.Equal(got[1], f) {
		t.Fatalf("got %d frames, want 2", len(got))
	}
}

// TestRxV2SuperFrameFitsDefaultSlot feeds the largest GSO super-frame
// (a 65,535-byte IP datagram, QinQ with the inner tag left in the frame)
// at the offset the kernel would use into a slot of the default size.
func TestRxV2SuperFrameFitsDefaultSlot(t *testing.T) {
	if MinRxFrameSize != 65632 || bigSlot < MinRxFrameSize || bigSlot%tpAlign != 0 {
		t.Fatalf("MinRxFrameSize %d, test slot %d", MinRxFrameSize, bigSlot)
	}
	const mss = 1448
	super, vh := tcpSuper(65535-40, mss)
	// Put an inner 802.1Q tag into the frame: the link header grows to
	// 18 bytes, and the kernel moves the frame 4 bytes back
	// (TPACKET_ALIGN(52+18) + 10 - 18 = 72).
	inner := append(append(append([]byte{}, super[:12]...), 0x81, 0x00, 0, 7), super[12:]...)
	vh.HdrLen += header.VLANTagLen
	vh.CsumStart += header.VLANTagLen
	q := newSynthQueueV2(bigSlot, maxRxBlockSize, 1)
	slot := q.slot(0)
	fillSlot(t, slot, synthFrame{data: inner, vh: vh, vlan: true, tpidValid: true, tpid: header.EtherTypeQinQ, tci: 5})
	const mac = 72
	if mac+len(inner) > len(slot) {
		t.Fatalf("a %d-byte frame at %d does not fit a %d-byte slot", len(inner), mac, len(slot))
	}
	// Redo the layout at the kernel's offset.
	copy(slot[mac-vnethdr.Len:], slot[synthMacOffV2-vnethdr.Len:synthMacOffV2+len(inner)])
	binary.LittleEndian.PutUint16(slot[tp2MacOff:], mac)
	pool := packet.NewPool(128, packet.DefaultBufSize)
	got := recvAll(q, pool)
	if want := (65535 - 40 + mss - 1) / mss; len(got) != want {
		t.Fatalf("got %d segments, want %d", len(got), want)
	}
	for i, g := range got {
		if tags := nstest.FrameTags(g); len(tags) != 2 || tags[0] != (nstest.Tag{TPID: header.EtherTypeQinQ, TCI: 5}) || tags[1] != (nstest.Tag{TPID: header.EtherTypeVLAN, TCI: 7}) {
			t.Fatalf("segment %d: tags %04x", i, tags)
		}
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxErrors != 0 {
		t.Errorf("RxErrors %d", s.RxErrors)
	}
}

func TestRxVLANRestore(t *testing.T) { forEachRing(t, testRxVLANRestore) }

func testRxVLANRestore(t *testing.T, r *synthRing) {
	q := r.q
	pool := packet.NewPool(8, packet.DefaultBufSize)
	f := sized(64, 7)
	r.feed(t, []synthFrame{
		{data: f, vlan: true, tci: 5<<13 | 100},                        // TPID not reported: 802.1Q
		{data: f, vlan: true, tpidValid: true, tpid: 0x88a8, tci: 200}, // 802.1ad
		{data: f, vlan: true, tpidValid: true, tpid: 0x8100, tci: 0},   // priority tag
		{data: f}, // untagged stays so
		{data: f[:12], vlan: true, tpidValid: true, tpid: 0x8100, tci: 300}, // runt even with its tag
	}...)
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
	ps := nstest.Checksum(f[26:34], uint32(17+8+payload))
	binary.BigEndian.PutUint16(f[40:], ps)
	return f, vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}
}

func TestRxPartialChecksum(t *testing.T) { forEachRing(t, testRxPartialChecksum) }

func testRxPartialChecksum(t *testing.T, r *synthRing) {
	q := r.q
	pool := packet.NewPool(8, packet.DefaultBufSize)
	f, vh := partialUDP(100)
	bad := vh
	bad.CsumStart = 2000 // points past the frame
	r.feed(t, []synthFrame{
		{data: f, vh: vh},
		{data: f, vh: vh, vlan: true, tci: 10}, // csum_start measured without the tag
		{data: f, vh: bad},
	}...)
	got := recvAll(q, pool)
	if len(got) != 2 {
		t.Fatalf("got %d frames, want 2", len(got))
	}
	for i, g := range got {
		if !nstest.UDPChecksumOK(g) {
			t.Errorf("frame %d: UDP checksum not completed: % x", i, g[34+4*i:46+4*i])
		}
	}
	s := netdev.Stats{}
	q.c.AddTo(&s)
	if s.RxErrors != 1 {
		t.Errorf("RxErrors %d, want 1 (bad csum_start)", s.RxErrors)
	}
}

func TestRxErrorsCounted(t *testing.T) { forEachRing(t, testRxErrorsCounted) }

func testRxErrorsCounted(t *testing.T, r *synthRing) {
	q := r.q
	pool := packet.NewPool(8, packet.DefaultBufSize)
	good := sized(100, 1)
	r.feed(t, []synthFrame{
		{data: sized(60, 2)[:13]},        // runt
		{data: good},                     // fine
		{data: sized(500, 3), wire: 600}, // truncated by the kernel
		{data: sized(3000, 4)},           // larger than a pool buffer, not GSO
		{data: good, vh: vnethdr.Header{GSOType: vnethdr.GSOTCPv4, GSOSize: 100}}, // GSO type on a UDP frame
		{data: good},
	}...)
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
	binary.BigEndian.PutUint16(ip[10:], ^nstest.Checksum(ip, 0))
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

func TestRxGSOSpansBatches(t *testing.T) { forEachRing(t, testRxGSOSpansBatches) }

func testRxGSOSpansBatches(t *testing.T, r *synthRing) {
	q := r.q
	pool := packet.NewPool(128, packet.DefaultBufSize)
	const mss, nseg = 1000, 40
	super, vh := tcpSuper(mss*nseg, mss)
	after := sized(80, 5)
	r.feed(t, synthFrame{data: super, vh: vh, vlan: true, tci: 42}, synthFrame{data: after})

	var b packet.Batch
	if n := q.recv(pool, &b); n != packet.BatchSize {
		t.Fatalf("first batch %d, want %d", n, packet.BatchSize)
	}
	if !r.userOwned(0) || !q.segmenting {
		t.Fatal("ring region released (or segmenting stopped) while the super-frame still has segments")
	}
	segs := b.Packets()
	var b2 packet.Batch
	if n := q.recv(pool, &b2); n != nseg-packet.BatchSize+1 {
		t.Fatalf("second batch %d, want %d", n, nseg-packet.BatchSize+1)
	}
	if r.userOwned(0) || r.userOwned(1) {
		t.Error("ring region not handed back after its last frame")
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
		if nstest.Checksum(d[38:], uint32(nstest.Checksum(d[30:38], uint32(6+l)))) != 0xffff {
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

func TestRxPoolStarvationLosesNothing(t *testing.T) { forEachRing(t, testRxPoolStarvationLosesNothing) }

func testRxPoolStarvationLosesNothing(t *testing.T, r *synthRing) {
	q := r.q
	pool := packet.NewPool(2, packet.DefaultBufSize)
	var frames []synthFrame
	for i := 0; i < 5; i++ {
		frames = append(frames, synthFrame{data: sized(64, uint16(i))})
	}
	r.feed(t, frames...)
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
		if _, ok := parseFrameV3(blk, c.off, vnethdr.Len, c.last); ok {
			t.Errorf("%s: accepted", c.name)
		}
	}
	slot := make([]byte, 2048)
	for _, c := range []struct {
		name string
		mac  int
		snap uint32
	}{
		{"mac inside header", 20, 10},
		{"no room for vnet header", tp2HdrLen + 4, 10},
		{"frame past slot", 76, 2048 - 75},
		{"mac past slot", 4000, 0},
		{"huge snaplen", 76, 1 << 31},
	} {
		clear(slot)
		binary.LittleEndian.PutUint16(slot[tp2MacOff:], uint16(c.mac))
		binary.LittleEndian.PutUint32(slot[tp2SnaplenOff:], c.snap)
		if _, ok := parseFrameV2(slot, statusUser, vnethdr.Len); ok {
			t.Errorf("V2 %s: accepted", c.name)
		}
	}
	binary.LittleEndian.PutUint16(slot[tp2MacOff:], 76)
	binary.LittleEndian.PutUint32(slot[tp2SnaplenOff:], 2048-76)
	if d, ok := parseFrameV2(slot, statusUser, vnethdr.Len); !ok || d.mac != 76 || d.snap != 2048-76 {
		t.Errorf("V2 frame filling its slot exactly rejected: %+v", d)
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
		{RxBlockSize: 5000, RxRing: RingV3},
		{RxFrameSize: 2056 + 4},
		{RxFrameSize: 1024},
		{RxFrameSize: 8 << 20},
		{RxRing: 7},
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
	o, err := Options{TxFrames: 100, TxFrameSize: 4096, RxRing: RingV3}.withDefaults()
	if err != nil || o.TxFrames != 112 || o.Queues != 1 || o.RxBlockSize != DefaultRxBlockSize || o.RxBlocks != DefaultRxBlocks {
		t.Errorf("V3 defaults: %+v %v (tx frames must round up to whole 64 KiB blocks)", o, err)
	}
	// V2 by default: 8,192 slots of 2,048 bytes, 16 MiB per queue; a V3
	// block size set by hand is ignored.
	o, err = Options{RxBlockSize: 5000}.withDefaults()
	if err != nil || o.RxRing != RingV2 || o.RxFrameSize != 2048 || o.RxFrames != 8192 || o.RxBlockSize*o.RxBlocks != 16<<20 {
		t.Errorf("V2 defaults: %+v %v", o, err)
	}
	if o, err := (Options{RxFrames: 256}).withDefaults(); err != nil || o.RxFrames < 256 || o.RxFrames%(o.RxBlockSize/o.RxFrameSize) != 0 {
		t.Errorf("V2 frames not rounded up to whole blocks: %+v %v", o, err)
	}
}

// TestV2Geometry checks that the V2 ring's block size is a power of two
// pages no larger than 4 MiB, holds at least the frames asked for, and
// that no other such block size would need less memory.
func TestV2Geometry(t *testing.T) {
	const page = 4096
	for _, c := range []struct{ frameSize, frames int }{
		{66048, 252}, {66048, 256}, {66048, 1}, {65632, 100}, {2048, 100}, {2048, 1000}, {9216, 333}, {1 << 20, 10},
	} {
		bs, n := v2Geometry(c.frameSize, c.frames, page)
		per := bs / max(c.frameSize, 1)
		if bs < page || bs > maxRxBlockSize || bs&(bs-1) != 0 || per == 0 || n*per < c.frames {
			t.Errorf("%+v: %d blocks of %d bytes", c, n, bs)
			continue
		}
		for alt := page; alt <= maxRxBlockSize; alt *= 2 {
			if ap := alt / c.frameSize; ap > 0 && (c.frames+ap-1)/ap*alt < n*bs {
				t.Errorf("%+v: %d blocks of %d bytes, but blocks of %d need less", c, n, bs, alt)
			}
		}
	}
	if bs, n := v2Geometry(66048, 252, page); bs != 4<<20 || n != 4 {
		t.Errorf("default geometry: %d blocks of %d bytes, want 4 of 4 MiB", n, bs)
	}
}

// TestNewV2GeometryAcceptedByKernel opens V2 ports with several slot sizes
// and counts: the kernel refuses a ring whose block size, slot size and
// slot count do not add up, so New succeeding is the check.
func TestNewV2GeometryAcceptedByKernel(t *testing.T) {
	a, _ := nstest.TwoHosts(t)
	for _, o := range []Options{
		{},
		{RxFrameSize: MinRxFrameSize, RxFrames: 100},
		{RxFrameSize: 2048, RxFrames: 1000},
		{RxFrameSize: 9216, RxFrames: 333, Queues: 2},
	} {
		want, err := o.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(a.Port, o)
		if err != nil {
			t.Errorf("%+v: %v", o, err)
			continue
		}
		for _, q := range p.rx {
			if q.v3 || q.frameNr != want.RxFrames || q.frameNr < o.RxFrames || len(q.ring) != want.RxBlockSize*want.RxBlocks ||
				q.framesPerBlock*q.blockNr != q.frameNr {
				t.Errorf("%+v: ring of %d slots of %d in %d blocks of %d (%d bytes)", o, q.frameNr, q.frameSize, q.blockNr, q.blockSize, len(q.ring))
			}
		}
		t.Logf("%d slots of %d bytes: %d blocks of %d KiB, %.1f MiB per queue",
			want.RxFrames, want.RxFrameSize, want.RxBlocks, want.RxBlockSize>>10, float64(want.RxBlockSize*want.RxBlocks)/(1<<20))
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestRxGSOWhole(t *testing.T) { forEachRing(t, testRxGSOWhole) }

// gsoPool makes q count its super-frames and returns a pool of 64
// buffers with one big one, all of which must be back by the test's end.
func gsoPool(t *testing.T, q *rxQueue) *packet.Pool {
	q.gso = &netdev.GSOCounters{}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(1, packet.BigBufSize))
	t.Cleanup(func() {
		if pool.Available() != pool.Size() || pool.Big().Available() != 1 {
			t.Error("pool leak")
		}
	})
	return pool
}

// testRxGSOWhole: with a big buffer free, a super-frame is handed over as
// one packet carrying its offload state (csum_start moved past the VLAN
// tag put back in front); with the big pool exhausted the next one is
// segmented as before, and counted.
func testRxGSOWhole(t *testing.T, r *synthRing) {
	q := r.q
	pool := gsoPool(t, q)
	const mss, nseg = 1000, 10
	super, vh := tcpSuper(mss*nseg, mss)
	after := sized(80, 5)
	r.feed(t, synthFrame{data: super, vh: vh, vlan: true, tci: 42})
	r.feed(t, synthFrame{data: super, vh: vh}, synthFrame{data: after})

	var b packet.Batch
	if n := q.recv(pool, &b); n != 1+nseg+1 {
		t.Fatalf("batch of %d, want the whole frame, %d segments and the frame after", n, nseg)
	}
	whole := b.Pkts[0]
	d := whole.Data()
	if !whole.GSO() || len(d) != len(super)+4 {
		t.Fatalf("first packet: GSO %v, %d bytes; want the %d-byte super-frame whole", whole.GSO(), len(d), len(super)+4)
	}
	if binary.BigEndian.Uint16(d[12:]) != 0x8100 || binary.BigEndian.Uint16(d[14:]) != 42 || !bytes.Equal(d[18:], super[14:]) {
		t.Error("whole frame differs from the super-frame with its tag restored")
	}
	want := packet.Offload(vh)
	want.CsumStart += 4
	if whole.Offload != want {
		t.Errorf("offload %+v, want %+v", whole.Offload, want)
	}
	for i, p := range b.Packets()[1 : 1+nseg] {
		if p.GSO() || p.Len() != 54+mss {
			t.Errorf("segment %d: GSO %v, %d bytes", i, p.GSO(), p.Len())
		}
	}
	if !bytes.Equal(b.Pkts[b.N-1].Data(), after) {
		t.Error("frame after the super-frames not delivered")
	}
	if g := q.gso.Load(); g.RxWhole != 1 || g.RxSegmented != 1 {
		t.Errorf("counters %+v, want 1 whole and 1 segmented", g)
	}
	b.FreeAll()
}

// TestRxCopyIntoBigBuffer: a super-frame that comes by copy is read
// straight into a big buffer and handed on in it, never through copyBuf;
// frames that are not kept whole (a full big pool) still are.
func TestRxCopyIntoBigBuffer(t *testing.T) {
	r := newSynthRingCopy(t)
	q := r.q
	pool := gsoPool(t, q)
	super, vh := tcpSuper(60000, 1000)
	r.feed(t, synthFrame{data: super, vh: vh})
	var b packet.Batch
	if n := q.recv(pool, &b); n != 1 {
		t.Fatalf("batch of %d, want the whole frame", n)
	}
	whole := b.Pkts[0]
	if !whole.GSO() || !bytes.Equal(whole.Data(), super) || whole.Offload != packet.Offload(vh) {
		t.Fatalf("got GSO %v, %d bytes, offload %+v; want the %d-byte super-frame with %+v",
			whole.GSO(), whole.Len(), whole.Offload, len(super), packet.Offload(vh))
	}
	if whole.Headroom() != packet.Headroom {
		t.Errorf("headroom %d, want the pool's %d", whole.Headroom(), packet.Headroom)
	}
	if q.copyBuf != nil || q.copyPkt != nil {
		t.Error("the frame went through copyBuf, or the queue still holds the big buffer")
	}
	// The big pool is empty now: the next one goes through copyBuf and
	// is segmented.
	r.feed(t, synthFrame{data: super, vh: vh})
	segs := 0
	for range 4 {
		var b2 packet.Batch
		n := q.recv(pool, &b2)
		if n > 0 && b2.Pkts[0].GSO() {
			t.Fatal("second frame kept whole with no big buffer free")
		}
		segs += n
		b2.FreeAll()
	}
	if segs != 60 || q.copyBuf == nil {
		t.Fatalf("second frame: %d segments (want 60), through copyBuf %v", segs, q.copyBuf != nil)
	}
	b.FreeAll()
}

// TestRxCopyDeclinedGiveBack: a super-frame read into a big buffer that
// takeWhole declines (here: no partial checksum) is cut into segments from
// a copy, and the big buffer is back in the pool before the last segment
// is taken, so that none stays with the queue between calls.
func TestRxCopyDeclinedGiveBack(t *testing.T) {
	r := newSynthRingCopy(t)
	q := r.q
	pool := gsoPool(t, q)
	super, vh := tcpSuper(60000, 1000)
	vh.Flags = 0
	r.feed(t, synthFrame{data: super, vh: vh})
	var segs [][]byte
	for i := range 4 {
		var b packet.Batch
		q.recv(pool, &b)
		if i == 0 && (b.N != packet.BatchSize || pool.Big().Available() != 1 || q.copyPkt != nil) {
			t.Fatalf("first call: %d packets, big buffers free %d, held %v", b.N, pool.Big().Available(), q.copyPkt != nil)
		}
		for _, p := range b.Packets() {
			if p.GSO() {
				t.Fatal("a super-frame without a partial checksum kept whole")
			}
			segs = append(segs, bytes.Clone(p.Data()))
		}
		b.FreeAll()
	}
	if len(segs) != 60 {
		t.Fatalf("%d segments, want 60", len(segs))
	}
	var payload []byte
	for _, s := range segs {
		payload = append(payload, s[54:]...)
	}
	if !bytes.Equal(payload, super[54:]) {
		t.Error("the segments' payloads differ from the super-frame's")
	}
}

// TestRxCopyWithoutQueuedFrame: a slot marked TP_STATUS_COPY whose frame
// is not on the socket's queue (or is of another length) is an RxError,
// its slot is handed back, and the walk goes on with the next frame.
func TestRxCopyWithoutQueuedFrame(t *testing.T) {
	r := newSynthRingCopy(t)
	q := r.q
	super, vh := tcpSuper(5000, 1000)
	// A queued frame one byte shorter than the slot says.
	dg := make([]byte, vnethdr.Len+len(super)-1)
	vh.Encode(dg)
	copy(dg[vnethdr.Len:], super)
	if err := unix.Send(r.peer, dg, 0); err != nil {
		t.Fatal(err)
	}
	after := sized(80, 9)
	r.feed(t,
		synthFrame{data: super[:1500], wire: len(super), vh: vh, statusBits: statusCopy},
		synthFrame{data: super[:1500], wire: len(super), vh: vh, statusBits: statusCopy}, // nothing queued
		synthFrame{data: after})
	q.gso = &netdev.GSOCounters{}
	pool := packet.NewPool(16, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(2, packet.BigBufSize))
	var b packet.Batch
	if n := q.recv(pool, &b); n != 1 || !bytes.Equal(b.Pkts[0].Data(), after) {
		t.Fatalf("got %d frames, want only the one after the bad slots", n)
	}
	var s netdev.Stats
	q.c.AddTo(&s)
	if s.RxErrors != 2 {
		t.Errorf("RxErrors %d, want 2", s.RxErrors)
	}
	for i := range 3 {
		if r.userOwned(i) {
			t.Errorf("slot %d not handed back", i)
		}
	}
	b.FreeAll()
	if pool.Big().Available() != 2 {
		t.Error("a big buffer read into for a bad slot was not given back")
	}
}

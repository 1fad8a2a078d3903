package vhostuser

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/netdev/vhostuser/virtq"
)

// frontend is a minimal virtio-net driver plus vhost-user front-end, the
// role QEMU or DPDK's virtio-user plays: it owns memfd-backed memory, lays
// out split rings in it, speaks the protocol and moves frames.
type frontend struct {
	t      testing.TB
	conn   *net.UnixConn
	memfd  int
	mem    []byte
	gpa    uint64 // guest-physical base: descriptor addresses
	uva    uint64 // "virtual" base the frontend claims: ring addresses
	next   uint64 // bump allocator (offset into mem)
	vqs    []*fvq
	feats  uint64
	proto  uint64
	cfg    feCfg
	closed bool
}

// feCfg selects what the frontend negotiates and how it lays out rings.
type feCfg struct {
	queues     int
	size       int
	bufSize    int    // receive buffer size
	features   uint64 // acked features (0: everything offered)
	featMask   uint64 // if set, ack only the offered features in it (a foreign backend's packed rings, offloads...)
	eventIdx   bool
	noIntr     bool // set VRING_AVAIL_F_NO_INTERRUPT on every ring
	memSize    int
	noEnable   bool // do not send SET_VRING_ENABLE
	noDriverOK bool // end setup before SET_STATUS(DRIVER_OK)
	splitRegs  bool // describe memory as two regions with a non-zero mmap offset
}

// fvq is the driver side of one virtqueue.
type fvq struct {
	f                  *frontend
	idx, size          int
	desc, avail, used  uint64 // offsets in mem
	bufs               uint64 // offset of size buffers of bufSize bytes
	bufSize            int
	kick, call         int
	availIdx, lastUsed uint16
	kicks              int
	freeList           []uint16   // free descriptor ids (tx rings)
	hdrs               [][12]byte // receive: the virtio-net header of each frame receive returned
}

func (c *feCfg) defaults() {
	if c.queues == 0 {
		c.queues = 1
	}
	if c.size == 0 {
		c.size = 256
	}
	if c.bufSize == 0 {
		c.bufSize = 2048
	}
	if c.memSize == 0 {
		c.memSize = 8 << 20
	}
}

func newFrontendMem(t testing.TB, cfg feCfg) *frontend {
	cfg.defaults()
	fd, err := unix.MemfdCreate("vhu-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, int64(cfg.memSize)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, cfg.memSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	f := &frontend{t: t, memfd: fd, mem: mem, gpa: 0x4000_0000, uva: 0x7f12_3400_0000, next: 4096, cfg: cfg}
	t.Cleanup(func() {
		f.close()
		unix.Munmap(mem)
		unix.Close(fd)
	})
	return f
}

// dialFrontend connects a frontend to a server-mode port's socket.
func dialFrontend(t testing.TB, path string, cfg feCfg) *frontend {
	f := newFrontendMem(t, cfg)
	var err error
	for i := 0; i < 200; i++ {
		f.conn, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *frontend) close() {
	if f.closed {
		return
	}
	f.closed = true
	if f.conn != nil {
		f.conn.Close()
	}
	for _, q := range f.vqs {
		unix.Close(q.kick)
		unix.Close(q.call)
	}
}

func (f *frontend) alloc(n, align int) uint64 {
	f.next = (f.next + uint64(align) - 1) &^ uint64(align-1)
	off := f.next
	f.next += uint64(n)
	if f.next > uint64(len(f.mem)) {
		f.t.Fatalf("frontend memory exhausted")
	}
	return off
}

// send writes one request; with reply it returns the reply payload.
func (f *frontend) send(req uint32, payload []byte, fds []int, needReply bool) ([]byte, error) {
	flags := uint32(flagVersion)
	if needReply {
		flags |= flagNeedReply
	}
	b := le.AppendUint32(nil, req)
	b = le.AppendUint32(b, flags)
	b = le.AppendUint32(b, uint32(len(payload)))
	b = append(b, payload...)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := f.conn.WriteMsgUnix(b, oob, nil); err != nil {
		return nil, err
	}
	if !needReply {
		return nil, nil
	}
	f.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [hdrSize]byte
	if _, err := readFull(f.conn, hdr[:]); err != nil {
		return nil, err
	}
	if r := le.Uint32(hdr[:]); r != req || le.Uint32(hdr[4:])&flagReply == 0 {
		return nil, fmt.Errorf("reply %d flags %#x to request %d", r, le.Uint32(hdr[4:]), req)
	}
	out := make([]byte, le.Uint32(hdr[8:]))
	_, err := readFull(f.conn, out)
	return out, err
}

func readFull(c *net.UnixConn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// must sends a request that must succeed (asking for REPLY_ACK when
// negotiated, so failures surface here).
func (f *frontend) must(req uint32, payload []byte, fds ...int) []byte {
	f.t.Helper()
	ack := f.proto&(1<<protoReplyAck) != 0 && !hasReply(req)
	r, err := f.send(req, payload, fds, ack || hasReply(req))
	if err != nil {
		f.t.Fatalf("request %d: %v", req, err)
	}
	if ack && (len(r) != 8 || le.Uint64(r) != 0) {
		f.t.Fatalf("request %d refused: %x", req, r)
	}
	return r
}

func u64b(v uint64) []byte         { return le.AppendUint64(nil, v) }
func state(i int, n uint32) []byte { return le.AppendUint32(le.AppendUint32(nil, uint32(i)), n) }

// memTable encodes SET_MEM_TABLE for the frontend's memory.
func (f *frontend) memTable() ([]byte, []int) {
	size := uint64(len(f.mem))
	if !f.cfg.splitRegs {
		b := le.AppendUint64(nil, 1)
		for _, v := range []uint64{f.gpa, size, f.uva, 0} {
			b = le.AppendUint64(b, v)
		}
		return b, []int{f.memfd}
	}
	// Two regions of the same file: the second starts at a non-zero
	// mmap offset, like QEMU's layouts.
	h := size / 2
	b := le.AppendUint64(nil, 2)
	for _, v := range []uint64{f.gpa, h, f.uva, 0, f.gpa + h, size - h, f.uva + h, h} {
		b = le.AppendUint64(b, v)
	}
	return b, []int{f.memfd, f.memfd}
}

// setup runs the whole negotiation and starts every ring, in DPDK's order
// (SET_VRING_CALL before SET_FEATURES).
func (f *frontend) setup() {
	f.t.Helper()
	f.must(reqSetOwner, nil)
	offered := le.Uint64(f.must(reqGetFeatures, nil))
	if offered&(1<<featVersion1) == 0 {
		f.t.Fatalf("VERSION_1 not offered: %#x", offered)
	}
	proto := le.Uint64(f.must(reqGetProtocolFeatures, nil))
	want := uint64(1<<protoReplyAck | 1<<protoMQ | 1<<protoStatus | 1<<protoMTU)
	f.must(reqSetProtocolFeatures, u64b(proto&want))
	f.proto = proto & want
	if n := le.Uint64(f.must(reqGetQueueNum, nil)); n < uint64(f.cfg.queues) {
		f.t.Fatalf("backend has %d queue pairs, want %d", n, f.cfg.queues)
	}
	f.must(reqSetStatus, u64b(1|2|8)) // ACKNOWLEDGE|DRIVER|FEATURES_OK
	feats := f.cfg.features
	if feats == 0 {
		feats = offered
	}
	if f.cfg.featMask != 0 {
		feats &= f.cfg.featMask
	}
	if f.cfg.eventIdx {
		feats |= 1 << featRingEventIdx
	} else {
		feats &^= 1 << featRingEventIdx
	}
	f.feats = feats
	if f.vqs == nil {
		for i := 0; i < 2*f.cfg.queues; i++ {
			f.vqs = append(f.vqs, f.newVQ(i))
		}
	}
	for _, q := range f.vqs {
		f.must(reqSetVringCall, u64b(uint64(q.idx)), q.call)
	}
	f.must(reqSetFeatures, u64b(feats))
	mt, fds := f.memTable()
	f.must(reqSetMemTable, mt, fds...)
	f.must(reqNetSetMTU, u64b(1500))
	for _, q := range f.vqs {
		q.start()
	}
	if !f.cfg.noDriverOK {
		f.must(reqSetStatus, u64b(1|2|8|4)) // DRIVER_OK
	}
}

func (f *frontend) newVQ(i int) *fvq {
	n := f.cfg.size
	q := &fvq{f: f, idx: i, size: n, bufSize: f.cfg.bufSize}
	q.desc = f.alloc(16*n, 16)
	q.avail = f.alloc(6+2*n+2, 4)
	q.used = f.alloc(6+8*n+2, 4096)
	q.bufs = f.alloc(n*q.bufSize, 64)
	var err error
	if q.kick, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		f.t.Fatal(err)
	}
	if q.call, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		f.t.Fatal(err)
	}
	q.reset()
	return q
}

// reset clears the ring memory and driver state (a fresh driver).
func (q *fvq) reset() {
	m := q.f.mem
	clear(m[q.desc : q.desc+uint64(16*q.size)])
	clear(m[q.avail : q.avail+uint64(8+2*q.size)])
	clear(m[q.used : q.used+uint64(8+8*q.size)])
	q.availIdx, q.lastUsed = 0, 0
	q.freeList = q.freeList[:0]
	for i := q.size - 1; i >= 0; i-- {
		q.freeList = append(q.freeList, uint16(i))
	}
	if q.f.cfg.noIntr {
		q.store16(q.avail, virtq.AvailFNoInterrupt)
	}
}

func (q *fvq) start() {
	f := q.f
	f.must(reqSetVringNum, state(q.idx, uint32(q.size)))
	f.must(reqSetVringBase, state(q.idx, uint32(q.availIdx)))
	a := le.AppendUint32(nil, uint32(q.idx))
	a = le.AppendUint32(a, 0)
	for _, v := range []uint64{f.uva + q.desc, f.uva + q.used, f.uva + q.avail, 0} {
		a = le.AppendUint64(a, v)
	}
	f.must(reqSetVringAddr, a)
	f.must(reqSetVringKick, u64b(uint64(q.idx)), q.kick)
	if !f.cfg.noEnable {
		f.must(reqSetVringEnable, state(q.idx, 1))
	}
	if q.idx%2 == 0 {
		q.fill()
	}
}

func (q *fvq) word(off uint64) *uint32 {
	return (*uint32)(unsafe.Pointer(&q.f.mem[off&^3]))
}

func (q *fvq) load16(off uint64) uint16 {
	return uint16(atomic.LoadUint32(q.word(off)) >> ((off & 3) * 8))
}

func (q *fvq) store16(off uint64, v uint16) {
	w, sh := q.word(off), (off&3)*8
	for {
		o := atomic.LoadUint32(w)
		if atomic.CompareAndSwapUint32(w, o, o&^(0xffff<<sh)|uint32(v)<<sh) {
			return
		}
	}
}

func (q *fvq) setDesc(i uint16, addr uint64, n uint32, flags, next uint16) {
	d := q.f.mem[q.desc+16*uint64(i):]
	le.PutUint64(d, addr)
	le.PutUint32(d[8:], n)
	le.PutUint16(d[12:], flags)
	le.PutUint16(d[14:], next)
}

func (q *fvq) buf(i uint16) []byte {
	o := q.bufs + uint64(i)*uint64(q.bufSize)
	return q.f.mem[o : o+uint64(q.bufSize)]
}

func (q *fvq) bufGPA(i uint16) uint64 { return q.f.gpa + q.bufs + uint64(i)*uint64(q.bufSize) }

// publish adds head to the avail ring and kicks if the device wants it.
func (q *fvq) publish(heads ...uint16) {
	old := q.availIdx
	for _, h := range heads {
		le.PutUint16(q.f.mem[q.avail+4+2*uint64(q.availIdx%uint16(q.size)):], h)
		q.availIdx++
	}
	q.store16(q.avail+2, q.availIdx)
	q.notify(old)
}

// notify kicks the device, if it wants it, after the avail index moved
// from old to q.availIdx.
func (q *fvq) notify(old uint16) {
	if q.f.feats&(1<<featRingEventIdx) != 0 {
		e := q.load16(q.used + 4 + 8*uint64(q.size))
		if uint16(q.availIdx-e-1) < uint16(q.availIdx-old) {
			q.doKick()
		}
		return
	}
	if q.load16(q.used)&virtq.UsedFNoNotify == 0 {
		q.doKick()
	}
}

func (q *fvq) doKick() {
	q.kicks++
	unix.Write(q.kick, u64b(1))
}

// fill posts every free buffer of a receive ring.
func (q *fvq) fill() {
	var heads []uint16
	for i := 0; i < q.size; i++ {
		q.setDesc(uint16(i), q.bufGPA(uint16(i)), uint32(q.bufSize), virtq.DescFWrite, 0)
		heads = append(heads, uint16(i))
	}
	q.publish(heads...)
}

// reclaim takes back transmit descriptors the device has used.
func (q *fvq) reclaim() {
	usedIdx := q.load16(q.used + 2)
	for ; q.lastUsed != usedIdx; q.lastUsed++ {
		id := le.Uint32(q.f.mem[q.used+4+8*uint64(q.lastUsed%uint16(q.size)):])
		q.freeList = append(q.freeList, uint16(id))
	}
}

// transmit queues frames on a transmit ring (header and frame in one
// descriptor) and returns how many fitted.
func (q *fvq) transmit(frames ...[]byte) int {
	q.reclaim()
	var heads []uint16
	for _, fr := range frames {
		if len(q.freeList) == 0 {
			break
		}
		id := q.freeList[len(q.freeList)-1]
		q.freeList = q.freeList[:len(q.freeList)-1]
		b := q.buf(id)
		clear(b[:12])
		n := copy(b[12:], fr)
		q.setDesc(id, q.bufGPA(id), uint32(12+n), 0, 0)
		heads = append(heads, id)
	}
	if len(heads) > 0 {
		q.publish(heads...)
	}
	return len(heads)
}

// receive collects the frames the device put in a receive ring, joining
// mergeable buffers, and reposts the buffers.
func (q *fvq) receive() [][]byte {
	var out [][]byte
	var repost []uint16
	usedIdx := q.load16(q.used + 2)
	for q.lastUsed != usedIdx {
		e := q.f.mem[q.used+4+8*uint64(q.lastUsed%uint16(q.size)):]
		id, n := uint16(le.Uint32(e)), le.Uint32(e[4:])
		q.lastUsed++
		repost = append(repost, id)
		b := q.buf(id)[:n]
		nb := int(le.Uint16(b[10:]))
		q.hdrs = append(q.hdrs, [12]byte(b[:12]))
		frame := append([]byte(nil), b[12:]...)
		for j := 1; j < nb && q.lastUsed != usedIdx; j++ {
			e := q.f.mem[q.used+4+8*uint64(q.lastUsed%uint16(q.size)):]
			id, n := uint16(le.Uint32(e)), le.Uint32(e[4:])
			q.lastUsed++
			repost = append(repost, id)
			frame = append(frame, q.buf(id)[:n]...)
		}
		out = append(out, frame)
	}
	if q.f.feats&(1<<featRingEventIdx) != 0 {
		q.store16(q.avail+4+2*uint64(q.size), q.lastUsed) // used_event
	}
	if len(repost) > 0 {
		for _, id := range repost {
			q.setDesc(id, q.bufGPA(id), uint32(q.bufSize), virtq.DescFWrite, 0)
		}
		q.publish(repost...)
	}
	return out
}

// calls returns and clears the interrupt count of the ring.
func (q *fvq) calls() uint64 {
	var b [8]byte
	if _, err := unix.Read(q.call, b[:]); err != nil {
		return 0
	}
	return le.Uint64(b[:])
}

func (f *frontend) tx(pair int) *fvq { return f.vqs[2*pair+1] }
func (f *frontend) rx(pair int) *fvq { return f.vqs[2*pair] }

// testFrame is an Ethernet frame of n bytes carrying seq.
func testFrame(n int, seq uint32) []byte {
	b := make([]byte, n, max(n, 64))
	copy(b, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00})
	for i := 14; i < n; i++ {
		b[i] = byte(i)
	}
	binary.BigEndian.PutUint32(b[14:], seq)
	return b
}

func sockPath(t testing.TB) string {
	return filepath.Join(t.TempDir(), "vhu.sock")
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// memfdMappings counts this process's mappings of test memfds.
func memfdMappings(t testing.TB) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "memfd:vhu-test") {
			n++
		}
	}
	return n
}

// readable polls fd for up to ms milliseconds.
func readable(t testing.TB, fd, ms int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, ms)
	if err != nil && err != unix.EINTR {
		t.Fatal(err)
	}
	return n > 0
}

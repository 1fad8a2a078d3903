package vhostuser

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

var portSeq atomic.Int32

func newServerPort(t testing.TB, queues int) (*Port, string) {
	t.Helper()
	path := sockPath(t)
	p, err := New(fmt.Sprintf("vhu%d", portSeq.Add(1)), Options{SocketPath: path, Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, path
}

// recvFrames polls rx queue q until want frames arrived (or 5 s passed) and
// returns copies of them; every buffer goes back to pool.
func recvFrames(t testing.TB, p *Port, q int, pool *packet.Pool, want int) [][]byte {
	t.Helper()
	var out [][]byte
	deadline := time.Now().Add(5 * time.Second)
	for first := true; first || len(out) < want && time.Now().Before(deadline); first = false {
		var b packet.Batch
		if p.Recv(q, pool, &b) == 0 {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		for _, pkt := range b.Packets() {
			out = append(out, append([]byte(nil), pkt.Data()...))
		}
		b.FreeAll()
	}
	return out
}

// sendFrames sends frames through tx queue q in batches and returns how
// many the port accepted.
func sendFrames(p *Port, q int, pool *packet.Pool, frames [][]byte) int {
	sent := 0
	for len(frames) > 0 {
		var b packet.Batch
		for len(frames) > 0 && !b.Full() {
			pkt := pool.Get()
			pkt.SetData(frames[0])
			b.Add(pkt)
			frames = frames[1:]
		}
		sent += p.Send(q, &b)
		b.FreeAll()
	}
	return sent
}

func seqOf(f []byte) uint32 { return binary.BigEndian.Uint32(f[14:]) }

func TestFeatureNegotiation(t *testing.T) {
	_, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{})
	offered := le.Uint64(f.must(reqGetFeatures, nil))
	for _, bit := range []uint{featVersion1, featNetMrgRxbuf, featNetMQ, featRingIndirect, featRingEventIdx, featProtocolFeature} {
		if offered&(1<<bit) == 0 {
			t.Errorf("feature bit %d not offered (%#x)", bit, offered)
		}
	}
	for _, bit := range []uint{featNetCsum, featNetHostTSO4, featNetHostTSO6, featNetGuestCsum, featNetGuestTSO4, featNetGuestTSO6, featNetGuestECN, featNetHostECN} {
		if offered&(1<<bit) == 0 {
			t.Errorf("offload bit %d not offered (%#x)", bit, offered)
		}
	}
	for _, bit := range []uint{featNetHostUFO, 10 /* GUEST_UFO */} {
		if offered&(1<<bit) != 0 {
			t.Errorf("offload bit %d offered", bit)
		}
	}
	f.must(reqSetProtocolFeatures, u64b(1<<protoReplyAck))
	f.proto = 1 << protoReplyAck
	// A frontend that insists on UDP fragmentation offload is refused in-band...
	r, err := f.send(reqSetFeatures, u64b(1<<featVersion1|1<<featNetHostUFO), nil, true)
	if err != nil || len(r) != 8 || le.Uint64(r) == 0 {
		t.Fatalf("SET_FEATURES with HOST_UFO: reply %x err %v, want a failure", r, err)
	}
	// ...and the session carries on.
	if n := le.Uint64(f.must(reqGetQueueNum, nil)); n != 1 {
		t.Errorf("GET_QUEUE_NUM = %d", n)
	}
	f.must(reqSetFeatures, u64b(1<<featVersion1))
	// An unknown request with REPLY_ACK is refused in-band too.
	r, err = f.send(77, nil, nil, true)
	if err != nil || le.Uint64(r) == 0 {
		t.Fatalf("unknown request: reply %x err %v", r, err)
	}
	// Without REPLY_ACK a refused SET_FEATURES ends the session.
	if _, err := f.send(reqSetFeatures, u64b(1<<featNetHostUFO), nil, false); err != nil {
		t.Fatal(err)
	}
	f.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	if n, err := f.conn.Read(b[:]); err == nil {
		t.Fatalf("connection still open after a refused request (read %d bytes)", n)
	}
}

func TestTrafficBothWays(t *testing.T) {
	for _, ev := range []bool{false, true} {
		p, path := newServerPort(t, 1)
		f := dialFrontend(t, path, feCfg{eventIdx: ev})
		f.setup()
		waitFor(t, "link up", p.LinkUp)
		if p.MTU() != 1500 {
			t.Errorf("MTU %d", p.MTU())
		}
		pool := packet.NewPool(512, packet.DefaultBufSize)
		const n = 200
		var got [][]byte
		for i := 0; i < n; {
			i += f.tx(0).transmit(testFrame(60+i, uint32(i)))
			got = append(got, recvFrames(t, p, 0, pool, 0)...)
		}
		got = append(got, recvFrames(t, p, 0, pool, n-len(got))...)
		if len(got) != n {
			t.Fatalf("event idx %v: received %d of %d", ev, len(got), n)
		}
		for i, fr := range got {
			if seqOf(fr) != uint32(i) || len(fr) != 60+i {
				t.Fatalf("frame %d: seq %d len %d", i, seqOf(fr), len(fr))
			}
		}
		var frames [][]byte
		for i := 0; i < n; i++ {
			frames = append(frames, testFrame(60+i, uint32(i)))
		}
		if s := sendFrames(p, 0, pool, frames); s != n {
			t.Fatalf("sent %d of %d", s, n)
		}
		rx := f.rx(0).receive()
		if len(rx) != n {
			t.Fatalf("frontend received %d of %d", len(rx), n)
		}
		for i, fr := range rx {
			if !bytes.Equal(fr, frames[i]) {
				t.Fatalf("frame %d differs: %x", i, fr[:20])
			}
		}
		if pool.Available() != pool.Size() {
			t.Errorf("pool leak: %d of %d", pool.Available(), pool.Size())
		}
		st := p.Stats()
		if st.TxPackets != n || st.TxDrops != 0 || st.RxErrors != 0 {
			t.Errorf("stats %+v", st)
		}
	}
}

// TestRecvContents: every frame the frontend transmits arrives intact, in
// order, across ring wrap-around.
func TestRecvContents(t *testing.T) {
	p, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{size: 64})
	f.setup()
	waitFor(t, "link up", p.LinkUp)
	pool := packet.NewPool(256, packet.DefaultBufSize)
	seq := uint32(0)
	for round := 0; round < 20; round++ {
		var want [][]byte
		for i := 0; i < 40; i++ {
			fr := testFrame(60+int(seq%1400), seq)
			seq++
			want = append(want, fr)
		}
		if n := f.tx(0).transmit(want...); n != len(want) {
			t.Fatalf("round %d: ring took %d of %d", round, n, len(want))
		}
		got := recvFrames(t, p, 0, pool, len(want))
		if len(got) != len(want) {
			t.Fatalf("round %d: got %d of %d", round, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d frame %d differs", round, i)
			}
		}
	}
	if st := p.Stats(); st.RxPackets != uint64(seq) || st.RxErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestMergeable: a 1500-byte frame spans three 600-byte receive buffers
// and num_buffers says so.
func TestMergeable(t *testing.T) {
	p, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{bufSize: 600, size: 64})
	f.setup()
	waitFor(t, "link up", p.LinkUp)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	fr := testFrame(1500, 7)
	if sendFrames(p, 0, pool, [][]byte{fr, testFrame(100, 8)}) != 2 {
		t.Fatal("send failed")
	}
	q := f.rx(0)
	used := q.load16(q.used + 2)
	if used != 4 { // 1512 bytes in 3 buffers, then one for the small frame
		t.Fatalf("used idx %d, want 4", used)
	}
	first := f.mem[q.used+4:]
	id := le.Uint32(first)
	if nb := le.Uint16(q.buf(uint16(id))[10:]); nb != 3 {
		t.Errorf("num_buffers %d, want 3", nb)
	}
	rx := q.receive()
	if len(rx) != 2 || !bytes.Equal(rx[0], fr) || seqOf(rx[1]) != 8 {
		t.Fatalf("received %d frames", len(rx))
	}
	// Without mergeable buffers a frame too big for one buffer is dropped
	// (counted), and the buffer stays for the next frame.
	p2, path2 := newServerPort(t, 1)
	f2 := dialFrontend(t, path2, feCfg{bufSize: 600, size: 64, features: 1<<featVersion1 | 1<<featProtocolFeature})
	f2.setup()
	waitFor(t, "link up", p2.LinkUp)
	if s := sendFrames(p2, 0, pool, [][]byte{fr, testFrame(100, 9)}); s != 1 {
		t.Fatalf("sent %d, want 1", s)
	}
	if st := p2.Stats(); st.TxDrops != 1 {
		t.Errorf("TxDrops %d, want 1", st.TxDrops)
	}
	rx = f2.rx(0).receive()
	if len(rx) != 1 || seqOf(rx[0]) != 9 {
		t.Fatalf("received %d frames", len(rx))
	}
}

// TestInterrupts: the call eventfd is written once per batch when the
// frontend wants interrupts, never with NO_INTERRUPT, and with EVENT_IDX
// only when the used idx crosses used_event.
func TestInterrupts(t *testing.T) {
	pool := packet.NewPool(64, packet.DefaultBufSize)
	batch := func(n int) [][]byte {
		var fs [][]byte
		for i := 0; i < n; i++ {
			fs = append(fs, testFrame(64, uint32(i)))
		}
		return fs
	}
	t.Run("flags", func(t *testing.T) {
		p, path := newServerPort(t, 1)
		f := dialFrontend(t, path, feCfg{})
		f.setup()
		waitFor(t, "link up", p.LinkUp)
		q := f.rx(0)
		q.calls()
		sendFrames(p, 0, pool, batch(32))
		if c := q.calls(); c != 1 {
			t.Errorf("%d calls for one batch, want 1", c)
		}
		q.receive()
		q.store16(q.avail, 1) // NO_INTERRUPT
		sendFrames(p, 0, pool, batch(32))
		if c := q.calls(); c != 0 {
			t.Errorf("%d calls with NO_INTERRUPT", c)
		}
		if got := len(q.receive()); got != 32 {
			t.Errorf("received %d", got)
		}
		// The transmit side: completions are signalled per batch too.
		tq := f.tx(0)
		tq.calls()
		tq.transmit(batch(10)...)
		recvFrames(t, p, 0, pool, 10)
		if c := tq.calls(); c != 1 {
			t.Errorf("%d tx completion calls, want 1", c)
		}
	})
	t.Run("noIntr", func(t *testing.T) {
		p, path := newServerPort(t, 1)
		f := dialFrontend(t, path, feCfg{noIntr: true})
		f.setup()
		waitFor(t, "link up", p.LinkUp)
		sendFrames(p, 0, pool, batch(20))
		f.tx(0).transmit(batch(5)...)
		recvFrames(t, p, 0, pool, 5)
		if c := f.rx(0).calls() + f.tx(0).calls(); c != 0 {
			t.Errorf("%d calls with NO_INTERRUPT", c)
		}
	})
	t.Run("eventIdx", func(t *testing.T) {
		p, path := newServerPort(t, 1)
		f := dialFrontend(t, path, feCfg{eventIdx: true})
		f.setup()
		waitFor(t, "link up", p.LinkUp)
		q := f.rx(0)
		q.calls()
		eventOff := q.avail + 4 + 2*uint64(q.size)
		q.store16(eventOff, 100)          // interrupt once entry 100 is used
		sendFrames(p, 0, pool, batch(32)) // used 0 → 32
		if c := q.calls(); c != 0 {
			t.Errorf("%d calls before used_event", c)
		}
		sendFrames(p, 0, pool, batch(32)) // 32 → 64
		sendFrames(p, 0, pool, batch(32)) // 64 → 96
		if c := q.calls(); c != 0 {
			t.Errorf("%d calls before used_event", c)
		}
		sendFrames(p, 0, pool, batch(32)) // 96 → 128 crosses 100
		if c := q.calls(); c != 1 {
			t.Errorf("%d calls crossing used_event, want 1", c)
		}
		if got := len(q.receive()); got != 128 {
			t.Errorf("received %d", got)
		}
		// Kick suppression on the transmit ring: once the PMD is
		// about to sleep (ArmRx), avail_event asks for the next kick.
		if p.ArmRx(0) {
			t.Fatal("ArmRx reports frames on an empty ring")
		}
		tq := f.tx(0)
		tq.kicks = 0
		tq.transmit(batch(1)...)
		if tq.kicks != 1 {
			t.Errorf("%d kicks for the first frame after idle, want 1", tq.kicks)
		}
	})
}

// TestKickWakesPMD: kicks are asked for only when the PMD is about to
// sleep (ArmRx): then a frame sent makes the port's RxFD poll readable.
// Frames received disarm the ring, so a polling PMD's frontend makes no
// kick syscalls; arming again clears old kicks and reports frames that
// arrived meanwhile.
func TestKickWakesPMD(t *testing.T) {
	p, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{})
	f.setup()
	waitFor(t, "link up", p.LinkUp)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	fd := p.RxFD(0)
	if fd < 0 {
		t.Fatal("no RxFD")
	}
	tq := f.tx(0)
	// The ring starts armed (the PMD may be asleep): the first frame kicks.
	tq.kicks = 0
	tq.transmit(testFrame(64, 1))
	if tq.kicks != 1 || !readable(t, fd, 1000) {
		t.Fatalf("%d kicks for the first frame, RxFD readable %v; want 1, true", tq.kicks, readable(t, fd, 0))
	}
	if got := recvFrames(t, p, 0, pool, 1); len(got) != 1 {
		t.Fatal("frame not received")
	}
	// Polling: no kicks, however many empty polls.
	for i := 0; i < 1000; i++ {
		var b packet.Batch
		p.Recv(0, pool, &b)
	}
	tq.transmit(testFrame(64, 2))
	if tq.kicks != 1 {
		t.Errorf("%d kicks while the PMD polls, want none after the first", tq.kicks)
	}
	// Arming with a frame waiting reports it, and clears the old kick.
	if !p.ArmRx(0) {
		t.Error("ArmRx missed a waiting frame")
	}
	if readable(t, fd, 0) {
		t.Error("RxFD readable after ArmRx cleared the kicks")
	}
	if got := recvFrames(t, p, 0, pool, 1); len(got) != 1 || seqOf(got[0]) != 2 {
		t.Fatal("second frame not received")
	}
	// Armed on an empty ring: the next frame kicks and wakes.
	if p.ArmRx(0) {
		t.Error("ArmRx reports frames on an empty ring")
	}
	if readable(t, fd, 0) {
		t.Fatal("RxFD readable while armed and empty")
	}
	tq.transmit(testFrame(64, 3))
	if tq.kicks != 2 || !readable(t, fd, 1000) {
		t.Errorf("%d kicks after arming (want 2), RxFD readable %v", tq.kicks, readable(t, fd, 0))
	}
	if got := recvFrames(t, p, 0, pool, 1); len(got) != 1 || seqOf(got[0]) != 3 {
		t.Fatal("third frame not received")
	}
}

// TestMemTableRemap: a new memory table (two regions, one at a non-zero
// mmap offset) replaces the old one while the rings run; the old mapping
// is gone and traffic continues.
func TestMemTableRemap(t *testing.T) {
	p, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{})
	f.setup()
	waitFor(t, "link up", p.LinkUp)
	base := memfdMappings(t) // the frontend's own mapping + the port's
	f.cfg.splitRegs = true
	mt, fds := f.memTable()
	f.must(reqSetMemTable, mt, fds...)
	if n := memfdMappings(t); n != base+1 {
		t.Errorf("%d memfd mappings after remap, want %d (old one unmapped, two new)", n, base+1)
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	f.tx(0).transmit(testFrame(100, 1), testFrame(200, 2))
	if got := recvFrames(t, p, 0, pool, 2); len(got) != 2 || seqOf(got[1]) != 2 {
		t.Fatalf("received %d after remap", len(got))
	}
	if sendFrames(p, 0, pool, [][]byte{testFrame(300, 3)}) != 1 {
		t.Fatal("send after remap failed")
	}
	if rx := f.rx(0).receive(); len(rx) != 1 || seqOf(rx[0]) != 3 {
		t.Fatalf("frontend received %d", len(rx))
	}
}

// TestReconnect: the frontend goes away (memory unmapped, sends dropped)
// and a new one on the same socket gets traffic going again.
func TestReconnect(t *testing.T) {
	before := memfdMappings(t)
	p, path := newServerPort(t, 1)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	for round := 0; round < 3; round++ {
		f := dialFrontend(t, path, feCfg{})
		f.setup()
		waitFor(t, "link up", p.LinkUp)
		f.tx(0).transmit(testFrame(80, uint32(round)))
		if got := recvFrames(t, p, 0, pool, 1); len(got) != 1 || seqOf(got[0]) != uint32(round) {
			t.Fatalf("round %d: received %d", round, len(got))
		}
		if sendFrames(p, 0, pool, [][]byte{testFrame(90, 9)}) != 1 {
			t.Fatalf("round %d: send failed", round)
		}
		f.close()
		waitFor(t, "link down", func() bool { return !p.LinkUp() })
		waitFor(t, "session end", func() bool { return !p.connected.Load() })
		if sendFrames(p, 0, pool, [][]byte{testFrame(90, 9)}) != 0 {
			t.Fatalf("round %d: send accepted with no frontend", round)
		}
		var b packet.Batch
		if p.Recv(0, pool, &b) != 0 {
			t.Fatal("received with no frontend")
		}
	}
	// Only the test's own frontend mappings remain (they go at cleanup).
	if n := memfdMappings(t); n != before+3 {
		t.Errorf("%d memfd mappings, want %d: the port kept some", n, before+3)
	}
	if st := p.Stats(); st.TxDrops != 3 {
		t.Errorf("TxDrops %d, want 3", st.TxDrops)
	}
	if pool.Available() != pool.Size() {
		t.Error("pool leak")
	}
}

// TestClientReconnect: in client mode the port keeps dialling with
// back-off until the frontend listens, and dials again when it goes.
func TestClientReconnect(t *testing.T) {
	path := sockPath(t)
	p, err := New("vhuc", Options{SocketPath: path, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	time.Sleep(150 * time.Millisecond)
	d := p.dials.Load()
	// 10, 20, 40, 80 ms: about 4 attempts in 150 ms, not hundreds.
	if d < 2 || d > 8 {
		t.Errorf("%d dial attempts in 150 ms, want back-off", d)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pool := packet.NewPool(64, packet.DefaultBufSize)
	for round := 0; round < 2; round++ {
		ln.SetDeadline(time.Now().Add(5 * time.Second))
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		f := newFrontendMem(t, feCfg{})
		f.conn = c
		f.setup()
		waitFor(t, "link up", p.LinkUp)
		f.tx(0).transmit(testFrame(70, uint32(round)))
		if got := recvFrames(t, p, 0, pool, 1); len(got) != 1 {
			t.Fatalf("round %d: received %d", round, len(got))
		}
		if round == 1 {
			ln.Close() // no third session
		}
		f.close()
		waitFor(t, "link down", func() bool { return !p.LinkUp() })
	}
	if s := p.sessions.Load(); s != 2 {
		t.Errorf("%d sessions, want 2", s)
	}
}

// TestMultiQueue: both queue pairs carry traffic independently.
func TestMultiQueue(t *testing.T) {
	p, path := newServerPort(t, 2)
	f := dialFrontend(t, path, feCfg{queues: 2})
	f.setup()
	waitFor(t, "link up", p.LinkUp)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	for q := 0; q < 2; q++ {
		f.tx(q).transmit(testFrame(64, uint32(10+q)))
		if got := recvFrames(t, p, q, pool, 1); len(got) != 1 || seqOf(got[0]) != uint32(10+q) {
			t.Fatalf("queue %d: received %d", q, len(got))
		}
		sendFrames(p, q, pool, [][]byte{testFrame(64, uint32(20+q))})
		if rx := f.rx(q).receive(); len(rx) != 1 || seqOf(rx[0]) != uint32(20+q) {
			t.Fatalf("queue %d: frontend received %d", q, len(rx))
		}
	}
	if p.RxFD(1) < 0 || p.RxFD(1) == p.RxFD(0) {
		t.Error("queue 1 has no RxFD of its own")
	}
}

// TestDisabledRing: with protocol features the rings wait for
// SET_VRING_ENABLE (or DRIVER_OK, TestEnableAtDriverOK); until then
// nothing moves and sends count as drops.
func TestDisabledRing(t *testing.T) {
	p, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{noEnable: true, noDriverOK: true})
	f.setup()
	time.Sleep(20 * time.Millisecond)
	if p.LinkUp() {
		t.Fatal("link up with disabled rings")
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	if sendFrames(p, 0, pool, [][]byte{testFrame(64, 1)}) != 0 {
		t.Fatal("sent on a disabled ring")
	}
	for _, q := range f.vqs {
		f.must(reqSetVringEnable, state(q.idx, 1))
	}
	waitFor(t, "link up", p.LinkUp)
	// GET_VRING_BASE stops the ring and reports where it stopped.
	sendFrames(p, 0, pool, [][]byte{testFrame(64, 1), testFrame(64, 2)})
	r := f.must(reqGetVringBase, state(0, 0))
	if le.Uint32(r) != 0 || le.Uint32(r[4:]) != 2 {
		t.Errorf("GET_VRING_BASE = %x, want index 0 base 2", r)
	}
	if p.LinkUp() {
		t.Error("link up after GET_VRING_BASE")
	}
	if sendFrames(p, 0, pool, [][]byte{testFrame(64, 3)}) != 0 {
		t.Error("sent on a stopped ring")
	}
}

// TestEnableAtDriverOK: a ring the frontend set up but never enabled or
// disabled starts when the frontend sets DRIVER_OK (DPDK virtio-user's
// reconnect in server mode sends no SET_VRING_ENABLE), while a ring it
// explicitly disabled stays stopped.
func TestEnableAtDriverOK(t *testing.T) {
	p, path := newServerPort(t, 1)
	f := dialFrontend(t, path, feCfg{noEnable: true, noDriverOK: true})
	f.setup()
	f.must(reqSetVringEnable, state(0, 0)) // the guest's receive ring: explicitly off
	time.Sleep(10 * time.Millisecond)
	if p.slots[0].q.Load() != nil || p.slots[1].q.Load() != nil {
		t.Fatal("a ring runs before DRIVER_OK and without SET_VRING_ENABLE")
	}
	f.must(reqSetStatus, u64b(1|2|8|4))
	if p.slots[1].q.Load() == nil {
		t.Error("the never-enabled transmit ring did not start at DRIVER_OK")
	}
	if p.slots[0].q.Load() != nil {
		t.Error("the explicitly disabled receive ring started at DRIVER_OK")
	}
	f.tx(0).transmit(testFrame(64, 7))
	pool := packet.NewPool(64, packet.DefaultBufSize)
	if got := recvFrames(t, p, 0, pool, 1); len(got) != 1 || seqOf(got[0]) != 7 {
		t.Fatalf("received %d frames through the ring started at DRIVER_OK", len(got))
	}
}

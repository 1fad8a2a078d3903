package patch

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/packet"

	"golang.org/x/sys/unix"
)

func pair(t *testing.T) (*Hub, *Port, *Port) {
	t.Helper()
	h := NewHub()
	a, err := h.Open("pa", "pb")
	if err != nil {
		t.Fatal(err)
	}
	if a.LinkUp() {
		t.Fatal("a port whose peer is not open is up")
	}
	b, err := h.Open("pb", "pa")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	if !a.LinkUp() || !b.LinkUp() {
		t.Fatal("a pair is not up once both ends are open")
	}
	return h, a, b
}

// frame is a frame of n bytes whose content says its sequence number.
func frame(seq, n int) []byte {
	f := make([]byte, n)
	for i := range f {
		f[i] = byte(seq + i)
	}
	binary.BigEndian.PutUint32(f, uint32(seq))
	return f
}

func newPool() *packet.Pool {
	p := packet.NewPool(256, packet.DefaultBufSize)
	p.AttachBig(packet.NewPool(4, packet.BigBufSize))
	return p
}

// send sends frames through p from pool and frees them.
func send(p *Port, pool *packet.Pool, frames ...[]byte) int {
	var b packet.Batch
	for _, f := range frames {
		pkt := pool.Get()
		if len(f) > pkt.Cap() {
			pkt.Free()
			pkt = pool.GetBig()
		}
		pkt.SetData(f)
		b.Add(pkt)
	}
	n := p.Send(0, &b)
	b.FreeAll()
	return n
}

func recvAll(p *Port, pool *packet.Pool) [][]byte {
	var out [][]byte
	for {
		var b packet.Batch
		if p.Recv(0, pool, &b) == 0 {
			return out
		}
		for _, pkt := range b.Packets() {
			out = append(out, bytes.Clone(pkt.Data()))
		}
		b.FreeAll()
	}
}

func TestPairCarriesFramesBothWays(t *testing.T) {
	_, a, b := pair(t)
	pool := newPool()
	in := [][]byte{frame(1, 60), frame(2, 1514), frame(3, 9000), frame(4, 65000)}
	if n := send(a, pool, in...); n != len(in) {
		t.Fatalf("sent %d of %d", n, len(in))
	}
	got := recvAll(b, pool)
	if len(got) != len(in) {
		t.Fatalf("received %d frames, want %d", len(got), len(in))
	}
	for i := range in {
		if !bytes.Equal(got[i], in[i]) {
			t.Fatalf("frame %d differs (len %d, want %d)", i, len(got[i]), len(in[i]))
		}
	}
	if len(recvAll(a, pool)) != 0 {
		t.Fatal("the sender received its own frames")
	}
	send(b, pool, frame(5, 100))
	if got := recvAll(a, pool); len(got) != 1 || !bytes.Equal(got[0], frame(5, 100)) {
		t.Fatalf("the other way: got %d frames", len(got))
	}
	if st := a.Stats(); st.TxPackets != 4 || st.RxPackets != 1 || st.TxDrops != 0 {
		t.Fatalf("stats %+v", st)
	}
	if pool.Available() != 256 || pool.Big().Available() != 4 {
		t.Fatalf("buffers not all returned: %d, %d", pool.Available(), pool.Big().Available())
	}
}

func TestOffloadAndHopsCross(t *testing.T) {
	_, a, b := pair(t)
	pool := newPool()
	pkt := pool.GetBig()
	pkt.SetData(frame(1, 30000))
	off := packet.Offload{Flags: packet.OffloadNeedsCsum, GSOType: 1, HdrLen: 54, GSOSize: 1448, CsumStart: 34, CsumOffset: 16}
	pkt.Offload = off
	pkt.Hops = 3
	var bt packet.Batch
	bt.Add(pkt)
	a.Send(0, &bt)
	bt.FreeAll()
	var rb packet.Batch
	if b.Recv(0, pool, &rb) != 1 {
		t.Fatal("nothing received")
	}
	got := rb.Packets()[0]
	if got.Offload != off || got.Hops != 4 {
		t.Fatalf("offload %+v hops %d, want %+v and 4", got.Offload, got.Hops, off)
	}
	rb.FreeAll()

	// A packet that has crossed MaxHops ports is dropped, not sent.
	pkt = pool.Get()
	pkt.SetData(frame(2, 60))
	pkt.Hops = MaxHops
	bt.Add(pkt)
	if a.Send(0, &bt) != 0 {
		t.Fatal("a packet past MaxHops was sent")
	}
	bt.FreeAll()
	if a.Loops() != 1 || a.Stats().TxDrops != 1 || len(recvAll(b, pool)) != 0 {
		t.Fatalf("loops %d, drops %d", a.Loops(), a.Stats().TxDrops)
	}
}

func TestUnlinkedAndFull(t *testing.T) {
	h := NewHub()
	a, _ := h.Open("pa", "pb")
	defer a.Close()
	pool := newPool()
	if send(a, pool, frame(1, 60)) != 0 || a.Stats().TxDrops != 1 {
		t.Fatal("a port with no peer sent a frame")
	}
	// A port naming a peer that names another is not linked.
	c, _ := h.Open("pc", "pa")
	defer c.Close()
	if a.LinkUp() || c.LinkUp() {
		t.Fatal("ports that do not name each other are linked")
	}
	b, _ := h.Open("pb", "pa")
	defer b.Close()
	// Fill the ring: what does not fit is dropped and counted, and the
	// frames that did fit arrive whole and in order.
	const n = 2 * ringBytes / 20000
	sent := 0
	for i := 0; i < n; i++ {
		sent += send(a, pool, frame(i, 20000))
	}
	if sent == 0 || sent == n {
		t.Fatalf("sent %d of %d frames of 20 kB into a %d-byte ring", sent, n, ringBytes)
	}
	if d := a.Stats().TxDrops; d != uint64(1+n-sent) {
		t.Fatalf("drops %d, want %d", d, 1+n-sent)
	}
	got := recvAll(b, pool)
	if len(got) != sent {
		t.Fatalf("received %d, sent %d", len(got), sent)
	}
	for i, f := range got {
		if !bytes.Equal(f, frame(i, 20000)) {
			t.Fatalf("frame %d differs", i)
		}
	}
}

func TestCloseAndReopenRelink(t *testing.T) {
	h, a, b := pair(t)
	b.Close()
	if a.LinkUp() {
		t.Fatal("still up after the peer closed")
	}
	b2, err := h.Open("pb", "pa")
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	pool := newPool()
	if !a.LinkUp() || send(a, pool, frame(1, 64)) != 1 || len(recvAll(b2, pool)) != 1 {
		t.Fatal("the reopened peer is not linked")
	}
	// Opening a name again replaces the old end (a port reopened before
	// the old one is closed); closing the old one then leaves the new.
	a2, _ := h.Open("pa", "pb")
	defer a2.Close()
	a.Close()
	if !a2.LinkUp() || send(b2, pool, frame(2, 64)) != 1 || len(recvAll(a2, pool)) != 1 {
		t.Fatal("the replacing end is not linked")
	}
	if _, err := h.Open("x", "x"); err == nil {
		t.Fatal("a port that is its own peer was opened")
	}
	if _, err := h.Open("x", ""); err == nil {
		t.Fatal("a port with no peer was opened")
	}
}

func TestRecvWithoutBigBufferDropsBigFrame(t *testing.T) {
	_, a, b := pair(t)
	send(a, newPool(), frame(1, 5000), frame(2, 100))
	small := packet.NewPool(8, packet.DefaultBufSize)
	got := recvAll(b, small)
	if len(got) != 1 || !bytes.Equal(got[0], frame(2, 100)) || b.Stats().RxDrops != 1 {
		t.Fatalf("got %d frames, rx drops %d", len(got), b.Stats().RxDrops)
	}
	// A starved pool leaves frames queued for later.
	send(a, newPool(), frame(3, 100), frame(4, 100))
	empty := packet.NewPool(1, packet.DefaultBufSize)
	hold := empty.Get()
	var bt packet.Batch
	if b.Recv(0, empty, &bt) != 0 {
		t.Fatal("received with no buffer")
	}
	hold.Free()
	if got := recvAll(b, small); len(got) != 2 {
		t.Fatalf("after the starvation got %d frames, want 2", len(got))
	}
}

func TestArmedReceiverIsWoken(t *testing.T) {
	_, a, b := pair(t)
	pool := newPool()
	if b.ArmRx(0) {
		t.Fatal("pending reported on an empty ring")
	}
	send(a, pool, frame(1, 60))
	fds := []unix.PollFd{{Fd: int32(b.RxFD(0)), Events: unix.POLLIN}}
	if n, err := unix.Poll(fds, int((10 * time.Second).Milliseconds())); n != 1 || err != nil {
		t.Fatalf("the armed receiver's eventfd did not become readable: %d %v", n, err)
	}
	if !b.ArmRx(0) {
		t.Fatal("a queued frame is not reported pending")
	}
	if n, _ := unix.Poll(fds, 0); n != 0 {
		t.Fatal("ArmRx left the old wake-up readable")
	}
	recvAll(b, pool)
	// Not armed: a send writes nothing.
	send(a, pool, frame(2, 60))
	if n, _ := unix.Poll(fds, 0); n != 0 {
		t.Fatal("a send woke a receiver that did not ask")
	}
}

// TestRandomSizesAcrossWraps sends frames of random sizes from one
// goroutine while another receives, over many laps of the ring: every
// frame sent arrives once, whole and in order.
func TestRandomSizesAcrossWraps(t *testing.T) {
	_, a, b := pair(t)
	const total = 20000
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, total)
	for i := range sizes {
		sizes[i] = 14 + rng.IntN(1500)
		if rng.IntN(50) == 0 {
			sizes[i] = 1600 + rng.IntN(60000)
		}
	}
	sentAll := make(chan int, 1)
	done := make(chan []int)
	go func() {
		pool := newPool()
		var got []int
		want := -1
		deadline := time.Now().Add(time.Minute)
		for (want < 0 || len(got) < want) && time.Now().Before(deadline) {
			select {
			case want = <-sentAll:
			default:
			}
			for _, f := range recvAll(b, pool) {
				seq := int(binary.BigEndian.Uint32(f))
				if seq >= total || !bytes.Equal(f, frame(seq, sizes[seq])) {
					t.Errorf("frame %d corrupted", seq)
					continue
				}
				got = append(got, seq)
			}
		}
		done <- got
	}()
	pool := newPool()
	var sent []int
	for i := 0; i < total; {
		var fs [][]byte
		for j := i; j < min(i+1+rng.IntN(packet.BatchSize), total); j++ {
			fs = append(fs, frame(j, sizes[j]))
		}
		k := send(a, pool, fs...)
		for j := range k {
			sent = append(sent, i+j)
		}
		i += len(fs)
	}
	// A full ring drops the end of a batch; what was sent must arrive.
	sentAll <- len(sent)
	got := <-done
	if len(got) != len(sent) {
		t.Fatalf("received %d, sent %d", len(got), len(sent))
	}
	for i := range got {
		if got[i] != sent[i] {
			t.Fatalf("frame %d is %d, want %d", i, got[i], sent[i])
		}
	}
}

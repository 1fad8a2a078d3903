package datapath

import (
	"bytes"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// TestControllerQueueBuffersOnUse: a slot's buffer is allocated when the
// slot is first used, and packets that come one at a time keep reusing
// the first slot, while a burst still fills the queue up to its depth and
// every packet comes out whole and in order.
func TestControllerQueueBuffersOnUse(t *testing.T) {
	q := NewControllerQueue(8, packet.DefaultBufSize)
	pool := packet.NewPool(16, packet.DefaultBufSize)
	a := actions.ControllerAction(7, 1, 2)
	push := func(b byte) bool {
		pkt := pool.Get()
		pkt.SetData(bytes.Repeat([]byte{b}, 60+int(b)))
		defer pkt.Free()
		return q.push(pkt, &a)
	}
	allocated := func() int {
		n := 0
		for _, b := range q.bufs {
			if b != nil {
				n++
			}
		}
		return n
	}
	if allocated() != 0 {
		t.Fatalf("%d buffers before any packet", allocated())
	}
	for i := range 100 {
		if !push(byte(i)) {
			t.Fatalf("push %d refused by an empty queue", i)
		}
		p, ok := q.Pop()
		if !ok || len(p.Data) != 60+i || p.Data[0] != byte(i) || p.Arg != 7 {
			t.Fatalf("packet %d came out as %d bytes (ok %v)", i, len(p.Data), ok)
		}
	}
	if allocated() != 1 {
		t.Fatalf("one packet at a time used %d buffers, want 1", allocated())
	}
	for i := range 10 {
		if push(byte(i)) != (i < 8) {
			t.Fatalf("push %d into a queue of depth 8 holding %d", i, min(i, 8))
		}
	}
	if allocated() != 8 || q.Overflows() != 2 {
		t.Fatalf("a burst: %d buffers, %d overflows, want 8 and 2", allocated(), q.Overflows())
	}
	for i := range 8 {
		p, ok := q.Pop()
		if !ok || len(p.Data) != 60+i || p.Data[0] != byte(i) {
			t.Fatalf("burst packet %d came out as %d bytes (ok %v)", i, len(p.Data), ok)
		}
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("a packet out of an emptied queue")
	}
}

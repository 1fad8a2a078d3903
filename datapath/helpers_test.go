package datapath

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// udpFrame builds a 64-byte (without FCS: 60) Ethernet/IPv4/UDP frame whose
// payload starts with seq (big endian), so tests can follow each packet.
func udpFrame(src, dst uint32, sport, dport uint16, seq uint32) []byte {
	f := make([]byte, 60)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 46)
	ip[8] = 64
	ip[9] = 17
	binary.BigEndian.PutUint32(ip[12:], src)
	binary.BigEndian.PutUint32(ip[16:], dst)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := ip[20:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], 26)
	binary.BigEndian.PutUint32(udp[8:], seq)
	return f
}

// frameSeq returns the sequence number udpFrame put in f.
func frameSeq(f []byte) uint32 { return binary.BigEndian.Uint32(f[42:]) }

// inPortRule is a rule "in_port=in, actions=output:outs...".
func inPortRule(prio int, in uint32, outs ...uint32) Rule {
	r := Rule{Priority: prio}
	r.Match.Key.InPort = in
	r.Match.Mask.InPort = ^uint32(0)
	for _, o := range outs {
		r.Actions = append(r.Actions, actions.Action{Kind: actions.Output, Port: o})
	}
	return r
}

// recordingPort wraps a ring port and remembers, for every Send, the batch
// size and the (fake) time it happened.
type recordingPort struct {
	*ring.Port
	clock func() int64
	mu    sync.Mutex
	sends []sendRecord
	kicks atomic.Uint64 // one per Send, as a driver with a doorbell would
}

type sendRecord struct {
	at   int64
	size int
}

func (r *recordingPort) Send(q int, b *packet.Batch) int {
	r.mu.Lock()
	r.sends = append(r.sends, sendRecord{at: r.clock(), size: b.N})
	r.mu.Unlock()
	r.kicks.Add(1)
	return r.Port.Send(q, b)
}

func (r *recordingPort) TxKicks(int) uint64 { return r.kicks.Load() }

// wakingPort is a recordingPort whose rx queue 0 has a descriptor, as a
// kernel port's does: an eventfd that Inject makes readable and Recv
// resets before it looks at the ring, so a frame injected at any moment
// either is received or leaves the descriptor readable.
type wakingPort struct {
	*recordingPort
	fd int
}

func newWakingPort(t *testing.T, name string, clock func() int64) *wakingPort {
	fd, err := newWakeFD()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeWakeFD(fd) })
	return &wakingPort{recordingPort: &recordingPort{Port: ring.New(name, 1, 1, 4096), clock: clock}, fd: fd}
}

func (w *wakingPort) RxFD(int) int { return w.fd }

func (w *wakingPort) Inject(q int, frames ...[]byte) int {
	n := w.recordingPort.Inject(q, frames...)
	signalWake(w.fd)
	return n
}

func (w *wakingPort) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	drainWake(w.fd)
	return w.recordingPort.Recv(q, pool, b)
}

var (
	_ netdev.Netdev   = (*recordingPort)(nil)
	_ netdev.TxKicker = (*recordingPort)(nil)
	_ netdev.Waiter   = (*wakingPort)(nil)
)

// fakeClock is a manually advanced clock.
type fakeClock struct{ ns int64 }

func (c *fakeClock) now() int64 { return c.ns }

// checkNoLeaks fails the test if a PMD's pool does not have every buffer back.
func checkNoLeaks(t *testing.T, dp *Datapath) {
	t.Helper()
	for _, p := range dp.PMDs() {
		if p.Pool().Available() != p.Pool().Size() {
			t.Errorf("PMD %d: %d of %d buffers not returned", p.ID(), p.Pool().Size()-p.Pool().Available(), p.Pool().Size())
		}
		if d := p.Pool().DoubleFrees(); d != 0 {
			t.Errorf("PMD %d: %d double frees", p.ID(), d)
		}
	}
}

// keyOf extracts the flow key of a frame.
func keyOf(f []byte, inPort uint32) flow.Key {
	var k flow.Key
	var off flow.Offsets
	flow.Extract(f, inPort, &k, &off)
	return k
}

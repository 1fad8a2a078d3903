// Package patch is the patch port driver: two ports, usually in two
// bridges, joined so that what one sends the other receives, as Open
// vSwitch's patch ports (Interface type "patch", options:peer) join
// br-int to br-ex for OVN's localnet networks.
//
// Open vSwitch crosses a patch port inside one flow translation. Here
// each bridge has its own datapath and PMDs, so a frame crosses through
// a ring the receiving end's PMD polls, like a veth pair inside the
// process: the receiving bridge sees a fresh packet on its patch port
// (registers, metadata and conntrack state do not cross, as in OVS), with
// its GSO and checksum offload state kept, so a TCP super-frame stays one
// frame across.
package patch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"

	"golang.org/x/sys/unix"
)

// MaxHops is how many patch ports a packet crosses before it is dropped,
// so that patch ports joined into a loop (with flooding flows) do not
// circulate a packet forever. Open vSwitch bounds the same loop by its
// translation depth and total work; ten hops bound a packet doubled at
// each hop (two patch pairs between two flooding bridges) to 1,024 copies,
// near the 4,096 translation steps OVS allows one packet.
const MaxHops = 10

// ringBytes is the size of each end's receive ring: 64 GSO super-frames
// of 64 KiB, or 2,700 frames of 1,500 bytes. A TCP stream's frames cross
// coalesced (the datapath merges them for a port that takes GSO) at about
// 28 KB each; a 512 KiB ring held 18 of them, less than two sending
// batches, and dropped one in eight under an iperf3 stream
// (bench/patch/patch.sh).
const ringBytes = 4 << 20

// recHdr is the size of a record's header in the ring: frame length,
// hops and offload state, padded so that records stay 16-byte aligned.
const recHdr = 16

// wrapMark in a record's length field sends the reader back to the ring's
// start: a record never wraps.
const wrapMark = ^uint32(0)

// ring is one direction of a pair: a byte ring of records written by the
// peer's Send (any of its tx queues, serialised by mu, once per batch)
// and read by this end's Recv (one PMD).
type ring struct {
	_    [64]byte
	head atomic.Uint64 // bytes written, published after each batch
	_    [56]byte
	tail atomic.Uint64 // bytes read
	_    [56]byte
	// armed is set by a PMD about to sleep (ArmRx): the next Send writes
	// the eventfd then.
	armed atomic.Bool
	_     [63]byte
	mu    sync.Mutex // producers
	buf   []byte
	efd   int
}

// Hub pairs patch ports by name: a port whose peer names a port whose
// peer names it back is linked to it. One Hub serves a daemon; ports of
// different hubs never link.
type Hub struct {
	mu   sync.Mutex
	ends map[string]*Port
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{ends: map[string]*Port{}} }

// Port is one end of a patch pair. It has one rx and one tx queue.
type Port struct {
	hub        *Hub
	name, peer string
	in         *ring
	// out is the peer's ring while the two are linked, else nil: frames
	// sent then are dropped and counted, as on a cable with no far end.
	out      atomic.Pointer[ring]
	counters [2]netdev.Counters // rx, tx
	// loops counts frames dropped for crossing more than MaxHops ports.
	loops  atomic.Uint64
	closed atomic.Bool
}

// Open creates the patch port name, whose peer is the port named peer,
// and links the two if the peer is open and names this port back. A
// port of the same name still open (being replaced) is unlinked first.
func (h *Hub) Open(name, peer string) (*Port, error) {
	if name == "" || peer == "" {
		return nil, errors.New("patch port needs a name and options:peer")
	}
	if name == peer {
		return nil, fmt.Errorf("patch port %s is its own peer", name)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("patch port %s: eventfd: %w", name, err)
	}
	p := &Port{hub: h, name: name, peer: peer, in: &ring{buf: make([]byte, ringBytes), efd: efd}}
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.ends[name]; old != nil {
		h.unlinkLocked(old)
	}
	h.ends[name] = p
	if q := h.ends[peer]; q != nil && q.peer == name {
		p.out.Store(q.in)
		q.out.Store(p.in)
	}
	return p, nil
}

// unlinkLocked takes p out of the hub and cuts its link.
func (h *Hub) unlinkLocked(p *Port) {
	if h.ends[p.name] != p {
		return
	}
	delete(h.ends, p.name)
	p.out.Store(nil)
	if q := h.ends[p.peer]; q != nil && q.out.Load() == p.in {
		q.out.Store(nil)
	}
}

// Name implements netdev.Netdev.
func (p *Port) Name() string { return p.name }

// Peer is the name of the port this one is joined to (options:peer).
func (p *Port) Peer() string { return p.peer }

// NumRxQueues implements netdev.Netdev.
func (p *Port) NumRxQueues() int { return 1 }

// NumTxQueues implements netdev.Netdev.
func (p *Port) NumTxQueues() int { return 1 }

// MTU implements netdev.Netdev: a patch port carries any frame a pool
// buffer holds, GSO super-frames included.
func (p *Port) MTU() int { return 65535 }

// LinkUp reports whether the peer is there, as Open vSwitch shows a patch
// port without its peer as down.
func (p *Port) LinkUp() bool { return p.out.Load() != nil }

// SendsGSO implements netdev.GSOSender: a super-frame crosses whole.
func (p *Port) SendsGSO() bool { return true }

// RxFD implements netdev.Waiter: the eventfd a Send writes while the
// receiving PMD sleeps.
func (p *Port) RxFD(int) int { return p.in.efd }

// ArmRx implements netdev.RxArmer.
func (p *Port) ArmRx(int) bool {
	r := p.in
	r.armed.Store(true)
	var b [8]byte
	unix.Read(r.efd, b[:]) // clear an old wake-up; EAGAIN when there is none
	return r.head.Load() != r.tail.Load()
}

// Loops returns the frames dropped for having crossed MaxHops patch ports.
func (p *Port) Loops() uint64 { return p.loops.Load() }

// Stats implements netdev.Netdev.
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	p.counters[0].AddTo(&s)
	p.counters[1].AddTo(&s)
	return s
}

// Close implements netdev.Netdev: it unlinks the port. The datapath has
// stopped polling it; a peer's Send still holding the ring finishes into
// a ring nobody reads.
func (p *Port) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.hub.mu.Lock()
	p.hub.unlinkLocked(p)
	p.hub.mu.Unlock()
	// A peer's Send that loaded the link before it was cut takes the
	// ring's lock and finds the eventfd gone.
	p.in.mu.Lock()
	unix.Close(p.in.efd)
	p.in.efd = -1
	p.in.mu.Unlock()
	return nil
}

func align(n int) int { return (n + recHdr - 1) &^ (recHdr - 1) }

// Send implements netdev.Netdev: it copies the batch into the peer's ring
// and wakes the peer's PMD if it sleeps. Frames that do not fit, or that
// have crossed MaxHops patch ports, are dropped and counted.
func (p *Port) Send(_ int, b *packet.Batch) int {
	c := &p.counters[1]
	r := p.out.Load()
	if r == nil {
		c.CountTx(0, 0, uint64(b.N))
		return 0
	}
	r.mu.Lock()
	if r.efd < 0 { // the peer closed between the load and the lock
		r.mu.Unlock()
		c.CountTx(0, 0, uint64(b.N))
		return 0
	}
	size := uint64(len(r.buf))
	head, tail := r.head.Load(), r.tail.Load()
	sent, bytes, loops := 0, uint64(0), uint64(0)
	for _, pkt := range b.Packets() {
		if pkt.Hops >= MaxHops {
			loops++
			continue
		}
		need := uint64(align(recHdr + pkt.Len()))
		pos := head % size
		skip := uint64(0)
		if pos+need > size {
			skip = size - pos
		}
		if head+skip+need-tail > size {
			break // full: the rest is dropped
		}
		if skip > 0 {
			binary.LittleEndian.PutUint32(r.buf[pos:], wrapMark)
			head += skip
			pos = 0
		}
		h := r.buf[pos : pos+recHdr]
		binary.LittleEndian.PutUint32(h[0:], uint32(pkt.Len()))
		h[4] = pkt.Hops + 1
		o := &pkt.Offload
		h[5], h[6] = o.Flags, o.GSOType
		binary.LittleEndian.PutUint16(h[8:], o.HdrLen)
		binary.LittleEndian.PutUint16(h[10:], o.GSOSize)
		binary.LittleEndian.PutUint16(h[12:], o.CsumStart)
		binary.LittleEndian.PutUint16(h[14:], o.CsumOffset)
		copy(r.buf[pos+recHdr:], pkt.Data())
		head += need
		sent++
		bytes += uint64(pkt.Len())
	}
	r.head.Store(head)
	if sent > 0 && r.armed.Load() && r.armed.Swap(false) {
		var one [8]byte
		one[0] = 1
		unix.Write(r.efd, one[:])
	}
	r.mu.Unlock()
	if loops > 0 {
		p.loops.Add(loops)
	}
	c.CountTx(sent, bytes, uint64(b.N-sent))
	return sent
}

// Recv implements netdev.Netdev: it copies waiting frames into pool
// buffers (a big one for a frame a normal buffer cannot hold). When the
// pool has no buffer for the next frame it stops and leaves it queued.
func (p *Port) Recv(_ int, pool *packet.Pool, b *packet.Batch) int {
	r := p.in
	tail, head := r.tail.Load(), r.head.Load()
	if tail == head {
		return 0
	}
	r.armed.Store(false)
	size := uint64(len(r.buf))
	n, bytes, drops := 0, uint64(0), uint64(0)
	for tail != head && n < packet.BatchSize {
		pos := tail % size
		h := r.buf[pos : pos+recHdr]
		l := binary.LittleEndian.Uint32(h)
		if l == wrapMark {
			tail += size - pos
			continue
		}
		pkt := pool.Get()
		if pkt != nil && int(l) > pkt.Cap() {
			pkt.Free()
			pkt = pool.GetBig()
			if pkt != nil && int(l) > pkt.Cap() || pkt == nil && pool.Big() == nil {
				// Nowhere to put it, now or later.
				if pkt != nil {
					pkt.Free()
				}
				drops++
				tail += uint64(align(recHdr + int(l)))
				continue
			}
		}
		if pkt == nil {
			drops++ // starved: the frame waits for the next poll
			break
		}
		pkt.SetData(r.buf[pos+recHdr : pos+recHdr+uint64(l)])
		pkt.Hops = h[4]
		pkt.Offload = packet.Offload{Flags: h[5], GSOType: h[6],
			HdrLen: binary.LittleEndian.Uint16(h[8:]), GSOSize: binary.LittleEndian.Uint16(h[10:]),
			CsumStart: binary.LittleEndian.Uint16(h[12:]), CsumOffset: binary.LittleEndian.Uint16(h[14:])}
		b.Add(pkt)
		n++
		bytes += uint64(l)
		tail += uint64(align(recHdr + int(l)))
	}
	r.tail.Store(tail)
	p.counters[0].CountRx(n, bytes, drops)
	return n
}

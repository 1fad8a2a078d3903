package tunnel

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// UDP receive coalescing. A run of datagrams a peer sent with one
// segmented send (gso.go) crosses a veth or a GRO-capable NIC as one
// buffer; a socket without UDP_GRO makes the kernel cut it back into
// datagrams, one socket buffer and one queue operation each, before
// recvmmsg copies them out one by one. With UDP_GRO the socket receives
// the whole run in one read, with the segment size in a control message,
// and the port cuts it itself, copying each datagram into a pool buffer:
// a memcpy of the frame instead of the kernel's per-datagram work.
//
// Any datagram may then arrive coalesced, so every receive buffer must
// hold the largest (64 KiB); the port reads into groBufs such buffers of
// its own and copies out, where the plain path receives straight into
// pool buffers. What does not fit the caller's batch waits in the queue
// for the next Recv.

const (
	groBufs   = packet.BatchSize
	groBufLen = 65536
	groCtrl   = ctrlLen + 32 // room for the UDP_GRO message
)

// groRx is one rx queue's coalescing receive state.
type groRx struct {
	buf   []byte // groBufs buffers of groBufLen, allocated once
	msgs  [groBufs]mmsghdr
	iovs  [groBufs]unix.Iovec
	names [groBufs]unix.RawSockaddrInet6
	ctrl  [groBufs][groCtrl]byte
	// got messages came with the last recvmmsg; cur is the one being cut,
	// at offset off in segments of seg bytes, with metadata tmpl.
	got, cur, off, seg int
	tmpl               flow.Tunnel
	// spans and tmpls hold every message's datagrams and metadata, read
	// once after recvmmsg, so that a merge can run on from message cur
	// into the next ones; a message to be skipped has a nil msg.
	spans [groBufs]rxSpan
	tmpls [groBufs]flow.Tunnel
	// sameTo[i] is the end of the messages from i on with message i's
	// metadata, where a merge starting in message i may run on to:
	// found once per recvmmsg in prepare, not per datagram (comparing
	// the metadata of every following message for every 64-byte
	// datagram was a tenth of a receiving PMD's user time).
	sameTo    [groBufs]int
	coalesced uint64 // messages that held more than one datagram, for tests
	// supers counts datagrams that each carried one inner TCP
	// super-frame whole (superDatagram).
	supers atomic.Uint64
	// merged counts TCP super-frames built from runs (rxmerge.go).
	merged atomic.Uint64
}

// noMerge turns receive-side merging off, for tests and benchmarks that
// compare.
var noMerge bool

// enableGRO turns coalescing on for the socket of rx queue q; a kernel
// without it (before 5.0) leaves the queue on the plain path.
func (p *Port) enableGRO(q int) {
	rq := &p.rx[q]
	if unix.SetsockoptInt(rq.fd, unix.SOL_UDP, unix.UDP_GRO, 1) != nil {
		return
	}
	g := &groRx{buf: make([]byte, groBufs*groBufLen)}
	for i := range g.msgs {
		g.iovs[i].Base = &g.buf[i*groBufLen]
		g.iovs[i].SetLen(groBufLen)
	}
	rq.gro = g
}

// recvGRO is Recv on a coalescing queue.
func (p *Port) recvGRO(q int, pool *packet.Pool, b *packet.Batch) int {
	rq := &p.rx[q]
	g := rq.gro
	ctr, causes := &p.ctr[q], &p.causes[q]
	var t rxTally
	polled := false
	for !b.Full() {
		if g.cur >= g.got {
			// Everything received is handed out: read more, once per
			// call, no more messages than the batch has room for.
			if polled {
				break
			}
			polled = true
			if rq.skip > 0 {
				rq.skip--
				break
			}
			n := packet.BatchSize - b.N
			for i := range n {
				setRecvHdr(&g.msgs[i].hdr, &g.names[i], &g.iovs[i], g.ctrl[i][:groCtrl])
			}
			r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(rq.fd), uintptr(unsafe.Pointer(&g.msgs[0])), uintptr(n),
				unix.MSG_DONTWAIT, 0, 0)
			runtime.KeepAlive(g)
			got := int(r)
			if e != 0 {
				got = 0
			}
			if got == 0 {
				rq.backoff = min(max(2*rq.backoff, 1), PollBackoff)
				rq.skip = rq.backoff
				break
			}
			rq.backoff = 0
			g.got, g.cur = got, 0
			g.prepare(&p.local)
			t.drops += g.start(causes)
			continue
		}
		m := &g.msgs[g.cur]
		l := int(m.len)
		if g.off == 0 && g.seg == l && l > p.runMin {
			// Longer than any datagram and not coalesced: one inner
			// super-frame (superDatagram), or nothing this port can use.
			big, badSum := superDatagram(p.opt.Kind, pool, g.spans[g.cur].msg, p.mtu)
			if badSum {
				causes.n[CauseBadChecksum].Add(1)
				t.drops++
			} else if big != nil && p.handOn(causes, big, &g.tmpl, b, &t) {
				g.supers.Add(1)
			}
			if big != nil || badSum {
				g.cur++
				t.drops += g.start(causes)
				continue
			}
		}
		if !noMerge && (g.seg < l-g.off || g.cur+1 < g.got) {
			// Two or more datagrams left: one TCP flow's run goes on
			// as one super-frame (rxmerge.go), across the following
			// messages from the same outer source and metadata.
			e := g.sameTo[g.cur]
			if big, end := mergeRun(p.opt.Kind, pool, g.spans[g.cur:e], spanPos{0, g.off}); big != nil {
				if p.handOn(causes, big, &g.tmpl, b, &t) {
					g.merged.Add(1)
				}
				if end.off >= len(g.spans[g.cur+end.i].msg) {
					g.cur += end.i + 1
					t.drops += g.start(causes)
				} else if end.i > 0 {
					g.cur += end.i
					t.drops += g.start(causes)
					g.off = end.off
				} else {
					g.off = end.off
				}
				continue
			}
		}
		seg := min(g.seg, l-g.off)
		pkt := pool.Get()
		if pkt == nil {
			break // the pool is dry: what is left waits for the next call
		}
		buf := pkt.Buffer()
		data := g.buf[g.cur*groBufLen+g.off : g.cur*groBufLen+g.off+seg]
		g.off += seg
		if len(buf) < seg || !pkt.SetLen(copy(buf, data)) {
			causes.n[CauseBadHeader].Add(1)
			t.drops++
			pkt.Free()
		} else {
			p.handOn(causes, pkt, &g.tmpl, b, &t)
		}
		if g.off >= l {
			g.cur++
			t.drops += g.start(causes)
		}
	}
	ctr.CountRx(t.added, t.bytes, t.drops)
	return t.added
}

// prepare reads the metadata and segment size of every message the last
// recvmmsg brought. A truncated or empty message (truncation cannot happen
// with buffers of the largest size, but a kernel surprise must not become
// a misparse) gets a nil span, for start to skip.
func (g *groRx) prepare(local *[16]byte) {
	for i := range g.got {
		m := &g.msgs[i]
		l := int(m.len)
		if m.hdr.Flags&unix.MSG_TRUNC != 0 || l == 0 {
			g.spans[i] = rxSpan{}
			continue
		}
		g.tmpls[i] = flow.Tunnel{Src: g.names[i].Addr, Dst: *local}
		seg := parseControl(g.ctrl[i][:min(int(m.hdr.Controllen), groCtrl)], &g.tmpls[i])
		if seg <= 0 || seg >= l {
			seg = l
		} else {
			g.coalesced++
		}
		g.spans[i] = rxSpan{msg: g.buf[i*groBufLen : i*groBufLen+l], seg: seg}
	}
	markRuns(g.sameTo[:g.got], g.spans[:g.got], g.tmpls[:g.got])
}

// start prepares message g.cur (if any is left) for cutting, skipping
// (and counting) the messages prepare found bad; it returns how many it
// skipped.
func (g *groRx) start(causes *causeCounters) (skipped uint64) {
	for ; g.cur < g.got; g.cur++ {
		sp := &g.spans[g.cur]
		if sp.msg == nil {
			causes.n[CauseBadHeader].Add(1)
			skipped++
			continue
		}
		g.tmpl = g.tmpls[g.cur]
		g.seg = sp.seg
		g.off = 0
		break
	}
	return skipped
}

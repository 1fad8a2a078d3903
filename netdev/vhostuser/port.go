// Package vhostuser is the vhost-user port driver: the switch is the
// vhost-user backend of a VM (QEMU) or of a DPDK application with a
// virtio-user device, and frames move through split virtqueues in the
// frontend's shared memory.
//
// Queue pair n of the port is the frontend's virtqueues 2n (the guest's
// receive ring, fed by the port's tx queue n) and 2n+1 (the guest's
// transmit ring, drained by the port's rx queue n).
//
// Handover between the control goroutine (which speaks the protocol and
// maps memory) and the PMDs: each virtqueue has a slot holding an atomic
// pointer to the running virtq.Queue and an epoch counter that the PMD
// increments when it enters and when it leaves a batch (odd = inside). To
// stop a ring the control side swaps the pointer to nil and, if the epoch
// is odd, waits until it changes; after that no PMD can touch the old
// queue, and only then are its memory unmapped and its eventfds closed.
// The PMD pays two atomic adds and one load per batch for this.
package vhostuser

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/acceptloop"
	"github.com/vswitch-go/vswitch/internal/statedir"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vhostuser/virtq"
)

// Options configures a vhost-user port.
type Options struct {
	// SocketPath is the unix socket: the switch listens on it (type
	// vhostuser) or, with Client, connects to the frontend's (type
	// vhostuserclient).
	SocketPath string
	// Client selects client mode: connect, and reconnect with back-off.
	Client bool
	// Queues is the most queue pairs the port offers (default 1).
	Queues int
	// Logf, if set, receives accept errors of a server socket (rate
	// limited) and its recovery from them.
	Logf func(format string, args ...any)
}

// MaxQueues bounds Options.Queues.
const MaxQueues = 64

// Client-mode reconnect back-off bounds.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// slot is the PMD-side handle of one virtqueue, on its own cache lines.
type slot struct {
	_     [64]byte
	q     atomic.Pointer[virtq.Queue]
	epoch atomic.Uint64 // odd while a PMD is inside a batch on q
	_     [48]byte
}

// enter and leave bracket a PMD batch on the slot.
func (s *slot) enter() *virtq.Queue {
	s.epoch.Add(1)
	return s.q.Load()
}

func (s *slot) leave() { s.epoch.Add(1) }

// take unpublishes the slot's queue and returns it once no PMD can be
// using it any more.
func (s *slot) take() *virtq.Queue {
	q := s.q.Swap(nil)
	if q == nil {
		return nil
	}
	e := s.epoch.Load()
	for e&1 == 1 && s.epoch.Load() == e {
		time.Sleep(time.Microsecond)
	}
	return q
}

// Port is a vhost-user port. Use New.
type Port struct {
	name   string
	opts   Options
	slots  []slot            // by virtqueue index
	epfd   []int             // per rx queue: an epoll set holding the guest TX ring's kick fd
	counts []netdev.Counters // rx queues, then tx queues
	gso    netdev.GSOCounters
	badOff atomic.Uint64 // frames dropped for a virtio-net header that did not match them

	mtu       atomic.Int32
	connected atomic.Bool

	mu      sync.Mutex // guards ln, conn, closed
	ln      *net.UnixListener
	conn    *net.UnixConn
	closed  bool
	closing chan struct{}
	done    chan struct{}

	// Observability for tests and logs.
	dials    atomic.Uint64 // client-mode connection attempts
	sessions atomic.Uint64 // connections served
	lastErr  atomic.Pointer[string]
	memTable atomic.Pointer[[]memRegion] // the current session's, for logs and tests
	features atomic.Uint64               // the current session's negotiated virtio features
}

// memRegion is one entry of a frontend's memory table as it sent it.
type memRegion struct {
	GuestAddr, Size, UserAddr, Offset uint64
}

// newPort builds a port without its control goroutine or socket.
func newPort(name string, opts Options) (*Port, error) {
	if opts.Queues == 0 {
		opts.Queues = 1
	}
	if opts.Queues < 0 || opts.Queues > MaxQueues {
		return nil, fmt.Errorf("vhostuser: %d queue pairs out of range 1..%d", opts.Queues, MaxQueues)
	}
	p := &Port{
		name:    name,
		opts:    opts,
		slots:   make([]slot, 2*opts.Queues),
		epfd:    make([]int, opts.Queues),
		counts:  make([]netdev.Counters, 2*opts.Queues),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	p.mtu.Store(1500)
	for i := range p.epfd {
		p.epfd[i] = -1
	}
	for i := range p.epfd {
		fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			p.closeEpoll()
			return nil, fmt.Errorf("vhostuser: epoll: %w", err)
		}
		p.epfd[i] = fd
	}
	return p, nil
}

func (p *Port) closeEpoll() {
	for i, fd := range p.epfd {
		if fd >= 0 {
			unix.Close(fd)
			p.epfd[i] = -1
		}
	}
}

// New creates a vhost-user port. In server mode the socket exists when New
// returns; in client mode the port keeps trying to connect in the
// background. Either way the port serves one frontend at a time and waits
// for the next when it goes.
func New(name string, opts Options) (*Port, error) {
	if opts.SocketPath == "" {
		return nil, errors.New("vhostuser: no socket path")
	}
	p, err := newPort(name, opts)
	if err != nil {
		return nil, err
	}
	if !opts.Client {
		// Mode 0600 whatever the umask, a stale socket from an earlier
		// run replaced, a symlink or file in its place refused.
		ln, err := statedir.ListenUnix(opts.SocketPath)
		if err != nil {
			p.closeEpoll()
			return nil, fmt.Errorf("vhostuser: %w", err)
		}
		p.ln = ln
	}
	go p.run()
	return p, nil
}

// run is the control goroutine: connect, serve, repeat.
func (p *Port) run() {
	defer close(p.done)
	backoff := minBackoff
	ab := acceptloop.Backoff{Name: "vhostuser " + p.name + " " + p.opts.SocketPath, Logf: p.opts.Logf}
	for {
		conn, err := p.connect()
		if err != nil {
			if p.isClosed() {
				return
			}
			p.setErr(err)
			if !p.opts.Client {
				// Accept failed without Close (out of descriptors, say):
				// wait, doubling, and accept again. An error that does
				// not pass is retried too, at the slowest rate: the
				// socket is the port's only way to get a frontend.
				// (LastError shows it.)
				if !ab.Wait(err, p.closing) {
					if !p.sleep(acceptloop.MaxDelay) {
						return
					}
				}
				continue
			}
			t := time.NewTimer(backoff)
			select {
			case <-p.closing:
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		backoff = minBackoff
		if !p.opts.Client {
			ab.Success()
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			conn.Close()
			return
		}
		p.conn = conn
		p.mu.Unlock()
		p.sessions.Add(1)
		p.serve(conn)
		p.mu.Lock()
		p.conn = nil
		p.mu.Unlock()
		conn.Close()
	}
}

func (p *Port) connect() (*net.UnixConn, error) {
	if !p.opts.Client {
		return p.ln.AcceptUnix()
	}
	// Dial under the lock, and not at all once closed: a connection made
	// by a closed port would sit in the frontend's listen backlog, dead,
	// and the frontend (DPDK's virtio-user in server mode) would take it
	// for the backend coming back.
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, net.ErrClosed
	}
	p.dials.Add(1)
	return net.DialUnix("unix", nil, &net.UnixAddr{Name: p.opts.SocketPath, Net: "unix"})
}

// sleep waits d or until the port closes; false if it closed.
func (p *Port) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.closing:
		return false
	case <-t.C:
		return true
	}
}

func (p *Port) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

func (p *Port) setErr(err error) {
	s := err.Error()
	p.lastErr.Store(&s)
}

// LastError returns the last protocol or connection error, for logs.
func (p *Port) LastError() string {
	if s := p.lastErr.Load(); s != nil {
		return *s
	}
	return ""
}

// Features returns the virtio feature bits the current frontend
// negotiated (0 with no frontend).
func (p *Port) Features() uint64 { return p.features.Load() }

// Name implements netdev.Netdev.
func (p *Port) Name() string { return p.name }

// NumRxQueues implements netdev.Netdev.
func (p *Port) NumRxQueues() int { return p.opts.Queues }

// NumTxQueues implements netdev.Netdev.
func (p *Port) NumTxQueues() int { return p.opts.Queues }

// MTU implements netdev.Netdev: 1500 unless the frontend set one.
func (p *Port) MTU() int { return int(p.mtu.Load()) }

// LinkUp implements netdev.Netdev: a frontend is connected and both rings
// of queue pair 0 run.
func (p *Port) LinkUp() bool {
	return p.connected.Load() && p.slots[0].q.Load() != nil && p.slots[1].q.Load() != nil
}

// Stats implements netdev.Netdev.
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	for i := range p.counts {
		p.counts[i].AddTo(&s)
	}
	return s
}

// RxFD implements netdev.Waiter. The descriptor is an epoll set that holds
// the guest transmit ring's kick eventfd while the ring runs: it stays the
// same across frontend reconnects (the datapath reads it once), and it is
// never a descriptor the port closes under a sleeping PMD.
func (p *Port) RxFD(q int) int {
	if q < 0 || q >= len(p.epfd) {
		return -1
	}
	return p.epfd[q]
}

// Recv implements netdev.Netdev: it drains the guest's transmit ring of
// queue pair qi.
func (p *Port) Recv(qi int, pool *packet.Pool, b *packet.Batch) int {
	if uint(qi) >= uint(p.opts.Queues) {
		return 0
	}
	s := &p.slots[2*qi+1]
	q := s.enter()
	if q == nil {
		s.leave()
		return 0
	}
	max := packet.BatchSize - b.N
	r := q.Dequeue(pool, b, max)
	c := &p.counts[qi]
	if r.Packets > 0 && q.KickNotify() {
		q.SetKickNotify(false) // the PMD polls: no kicks until it sleeps
	}
	if r.Signal && !q.Signal() {
		c.RxErrors.Add(1)
	}
	s.leave()
	if r.Packets > 0 {
		c.RxPackets.Add(uint64(r.Packets))
		c.RxBytes.Add(uint64(r.Bytes))
	}
	if r.Errors > 0 {
		c.RxErrors.Add(uint64(r.Errors))
	}
	if r.Drops > 0 {
		c.RxDrops.Add(uint64(r.Drops))
	}
	if r.RxWhole|r.RxSegmented|r.BadOffloads != 0 {
		p.countOffloads(&r)
	}
	return r.Packets
}

// countOffloads adds a batch's offload counts to the port's, off the hot
// path: they change at most once per 64 KiB frame.
func (p *Port) countOffloads(r *virtq.Result) {
	p.gso.RxWhole.Add(uint64(r.RxWhole))
	p.gso.RxSegmented.Add(uint64(r.RxSegmented))
	p.badOff.Add(uint64(r.BadOffloads))
}

// GSOStats returns the port's GSO counters: super-frames the guest sent
// that the port took whole or cut on receive, and those it sent whole.
func (p *Port) GSOStats() netdev.GSOStats { return p.gso.Load() }

// BadOffloads returns how many frames the guest sent with a virtio-net
// header that did not match the frame (bad GSO type or size, checksum
// offsets outside it): dropped, and counted in RxErrors too.
func (p *Port) BadOffloads() uint64 { return p.badOff.Load() }

// ArmRx implements netdev.RxArmer: it asks the frontend to kick on its
// next transmit, clears the kicks already counted (so the PMD's RxFD polls
// readable only for new ones), and looks once more for frames added before
// the frontend saw the request.
func (p *Port) ArmRx(qi int) bool {
	if uint(qi) >= uint(p.opts.Queues) {
		return false
	}
	s := &p.slots[2*qi+1]
	q := s.enter()
	pending := false
	if q != nil {
		if !q.KickNotify() {
			q.SetKickNotify(true)
		}
		q.DrainKick()
		pending = q.Pending()
	}
	s.leave()
	return pending
}

// Send implements netdev.Netdev: it fills the guest's receive ring of queue
// pair qi and interrupts the frontend if it asked for it.
func (p *Port) Send(qi int, b *packet.Batch) int {
	if uint(qi) >= uint(p.opts.Queues) {
		return 0
	}
	c := &p.counts[p.opts.Queues+qi]
	s := &p.slots[2*qi]
	q := s.enter()
	if q == nil {
		s.leave()
		if b.N > 0 {
			c.TxDrops.Add(uint64(b.N))
		}
		return 0
	}
	r := q.Enqueue(b.Packets())
	if r.Signal {
		c.TxKicks.Add(1)
		if !q.Signal() {
			r.Errors++
		}
	}
	s.leave()
	if r.Packets > 0 {
		c.TxPackets.Add(uint64(r.Packets))
		c.TxBytes.Add(uint64(r.Bytes))
	}
	if r.Drops > 0 {
		c.TxDrops.Add(uint64(r.Drops))
	}
	if r.Errors > 0 {
		c.TxErrors.Add(uint64(r.Errors))
	}
	if r.TxWhole > 0 {
		p.gso.TxWhole.Add(uint64(r.TxWhole))
	}
	return r.Packets
}

// SendsGSO implements netdev.GSOSender: TCP super-frames go to the guest
// whole when the current frontend negotiated the features for it (the
// datapath checks before every output, so a frontend without them, or a
// reconnect, is picked up at once). Other super-frames that reach Send
// anyway, in the gap of a reconnect or of a kind the guest did not take
// (UDP-L4), are cut in virtq.
func (p *Port) SendsGSO() bool { return rxOffload(p.features.Load()) }

// Close implements netdev.Netdev: it disconnects the frontend, unmaps its
// memory, closes every descriptor and, in server mode, removes the socket.
func (p *Port) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("vhostuser: port already closed")
	}
	p.closed = true
	close(p.closing)
	if p.ln != nil {
		p.ln.Close()
	}
	if p.conn != nil {
		p.conn.Close()
	}
	p.mu.Unlock()
	<-p.done
	p.closeEpoll()
	return nil
}

// TxKicks implements netdev.TxKicker: the call eventfd writes that
// interrupted the frontend for queue pair qi.
func (p *Port) TxKicks(qi int) uint64 {
	if uint(qi) >= uint(p.opts.Queues) {
		return 0
	}
	return p.counts[p.opts.Queues+qi].TxKicks.Load()
}

var (
	_ netdev.Netdev    = (*Port)(nil)
	_ netdev.Waiter    = (*Port)(nil)
	_ netdev.TxKicker  = (*Port)(nil)
	_ netdev.GSOSender = (*Port)(nil)
)

package tunnel

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The AF_XDP underlay's outer Ethernet headers, one per destination, kept
// off the PMD. A netlink request costs 10–25 µs, which on the PMD is a
// stall of every queue it serves; so a goroutine per port (neighCache)
// owns all netlink work: it resolves the destinations the PMDs ask for,
// and it listens to the kernel's neighbour and route notifications and
// resolves every known destination again when one comes. The PMDs read
// published, immutable entries through atomic pointers: no lock, no
// syscall, no allocation. A PMD that finds no entry for a destination
// posts it without waiting and sends that packet on the raw path, which
// also makes the kernel resolve the neighbour if it has to.

// neighRefresh is the safety refresh: notifications can be lost (the
// socket's buffer overflows, ENOBUFS), and then every destination is
// resolved again at once; this catches anything else.
const neighRefresh = 10 * time.Second

// neighEntry is a published outer Ethernet header for a destination; ok
// false means "send this destination on the raw path". Only nudge changes
// after publication.
type neighEntry struct {
	dst [16]byte
	eth [14]byte
	ok  bool
	// nudge: the kernel does not confirm the neighbour (STALE, DELAY,
	// PROBE). Frames sent through the AF_XDP socket bypass its neighbour
	// code, which would therefore never re-check the address: a peer
	// whose MAC changed would be sent to at the old one for good. The
	// first packet that finds nudge set clears it and goes the raw path,
	// so the kernel sees traffic and probes; the notification of the
	// outcome republishes the entry.
	nudge atomic.Bool
}

// neighCache is a port's published entries and the goroutine that keeps
// them.
type neighCache struct {
	slots   [routeSlots]atomic.Pointer[neighEntry]
	ask     chan [16]byte // destinations the PMDs found no entry for
	ifindex int
	mac     [6]byte
	v6      bool

	nl     *netlink.Handle // routes, in the port's namespace
	nconn  *neighConn      // neighbours (neighget.go)
	events *os.File        // neighbour and route notifications
	kick   chan struct{}   // a relevant notification came (coalesced)
	stop   chan struct{}
	wg     sync.WaitGroup
	closed sync.Once
}

func neighSlot(dst *[16]byte) int {
	h := binary.BigEndian.Uint32(dst[12:]) ^ binary.BigEndian.Uint32(dst[8:])
	return int((h ^ h>>8 ^ h>>16) % routeSlots)
}

// openNeighCache opens the netlink sockets in the calling thread's
// namespace (the port's) and starts the goroutines.
func openNeighCache(ifindex int, mac [6]byte, v6 bool) (*neighCache, error) {
	c := &neighCache{ask: make(chan [16]byte, 64), ifindex: ifindex, mac: mac, v6: v6,
		kick: make(chan struct{}, 1), stop: make(chan struct{})}
	var err error
	if c.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
		return nil, err
	}
	if c.nconn, err = openNeighConn(); err != nil {
		c.nl.Close()
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_ROUTE)
	if err == nil {
		err = unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK,
			Groups: unix.RTMGRP_NEIGH | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE})
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		c.nl.Close()
		c.nconn.close()
		return nil, err
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	// Non-blocking: the runtime's poller waits for it, and Close wakes
	// the reader.
	c.events = os.NewFile(uintptr(fd), "netlink-events")
	c.wg.Add(2)
	go c.read()
	go c.run()
	return c, nil
}

// close stops the goroutines and closes the sockets.
// The published entries stay readable.
func (c *neighCache) close() {
	c.closed.Do(func() {
		close(c.stop)
		c.events.Close()
		c.wg.Wait()
		c.nl.Close()
		c.nconn.close()
	})
}

// lookup is the PMD's side: the entry for dst, or nil for the raw path.
func (c *neighCache) lookup(dst *[16]byte) *neighEntry {
	e := c.slots[neighSlot(dst)].Load()
	if e == nil || e.dst != *dst {
		select {
		case c.ask <- *dst:
		default: // the resolver is behind; a later packet asks again
		}
		return nil
	}
	if !e.ok || e.nudge.Load() && e.nudge.CompareAndSwap(true, false) {
		return nil
	}
	return e
}

// read forwards relevant notifications to run, coalesced; a lost one
// (ENOBUFS) counts as relevant.
func (c *neighCache) read() {
	defer c.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.events.Read(buf)
		switch {
		case err == nil:
			if neighEventRelevant(buf[:n], c.ifindex) {
				c.signal()
			}
		case errors.Is(err, os.ErrClosed):
			return
		case errors.Is(err, io.EOF):
		case errors.Is(err, unix.ENOBUFS):
			c.signal()
		default:
			// Unknown trouble: resolve again, and do not spin.
			c.signal()
			select {
			case <-c.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}
}

func (c *neighCache) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// neighEventRelevant reports whether a datagram of rtnetlink notifications
// holds a route change or a neighbour change on ifindex. It reads only
// within b.
func neighEventRelevant(b []byte, ifindex int) bool {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < nlmsgHdrLen || l > len(b) {
			return false
		}
		switch binary.NativeEndian.Uint16(b[4:]) {
		case unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
			return true
		case unix.RTM_NEWNEIGH, unix.RTM_DELNEIGH:
			if l >= nlmsgHdrLen+ndmsgLen && int(int32(binary.NativeEndian.Uint32(b[nlmsgHdrLen+4:]))) == ifindex {
				return true
			}
		}
		l = (l + 3) &^ 3
		if l > len(b) {
			return false
		}
		b = b[l:]
	}
	return false
}

// run is the resolver: it serves the PMDs' requests and re-resolves the
// published destinations on a notification and every neighRefresh.
func (c *neighCache) run() {
	defer c.wg.Done()
	tick := time.NewTicker(neighRefresh)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case dst := <-c.ask:
			// Requests queued before the entry was published repeat it.
			if e := c.slots[neighSlot(&dst)].Load(); e == nil || e.dst != dst {
				c.publish(&dst)
			}
		case <-c.kick:
			c.refresh()
		case <-tick.C:
			c.refresh()
		}
	}
}

func (c *neighCache) refresh() {
	for i := range c.slots {
		if e := c.slots[i].Load(); e != nil {
			c.publish(&e.dst)
		}
	}
}

// publish resolves dst (its route, then the next hop's neighbour entry)
// and publishes the result in its slot.
func (c *neighCache) publish(dst *[16]byte) {
	e := &neighEntry{dst: *dst}
	c.resolve(e)
	c.slots[neighSlot(dst)].Store(e)
}

func (c *neighCache) resolve(e *neighEntry) {
	ip, etype := net.IP(e.dst[12:16]), uint16(0x0800)
	if c.v6 {
		ip, etype = net.IP(e.dst[:]), 0x86dd
	}
	rs, err := c.nl.RouteGet(ip)
	if err != nil || len(rs) == 0 || rs[0].LinkIndex != c.ifindex {
		return
	}
	nh := ip
	if rs[0].Gw != nil {
		nh = rs[0].Gw
	}
	ipb := nh.To4()
	if c.v6 {
		ipb = nh.To16()
	}
	if ipb == nil {
		return
	}
	mac, state, err := c.nconn.get(c.ifindex, ipb)
	if err != nil {
		return
	}
	const (
		confirmed = netlink.NUD_REACHABLE | netlink.NUD_PERMANENT | netlink.NUD_NOARP
		usable    = confirmed | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE
	)
	if state&usable == 0 {
		return
	}
	copy(e.eth[0:6], mac[:])
	copy(e.eth[6:12], c.mac[:])
	binary.BigEndian.PutUint16(e.eth[12:], etype)
	e.ok = true
	e.nudge.Store(state&confirmed == 0)
}

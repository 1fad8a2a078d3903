package tunnel

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"
)

// One neighbour entry from the kernel. The AF_XDP underlay's neighbour
// cache (neighcache.go) looks up each destination's next hop again on
// every neighbour or route notification; a dump of the interface's
// neighbour table (netlink's NeighList) costs time and allocations in
// proportion to the table, which on a hypervisor's underlay holds every
// other host: with N destinations that is N² work per notification.
// RTM_GETNEIGH with NDA_DST (Linux 4.18 and later, as `ip neigh get`)
// answers for one address, in a buffer reused from call to call.

const (
	nlmsgHdrLen = 16
	ndmsgLen    = 12
	ndaDst      = 1
	ndaLLAddr   = 2
)

// neighConn is a NETLINK_ROUTE socket for single neighbour requests, in
// the namespace of the thread that opened it.
type neighConn struct {
	fd  int
	seq uint32
	req [nlmsgHdrLen + ndmsgLen + 4 + 16]byte
	buf [4096]byte
}

func openNeighConn() (*neighConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	// A reply that never comes must not hold the PMD.
	tv := unix.Timeval{Usec: 100_000}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Connected to the kernel, so that requests and replies are plain
	// writes and reads (no address to allocate per call).
	if err := unix.Connect(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &neighConn{fd: fd}, nil
}

func (c *neighConn) close() error { return unix.Close(c.fd) }

var errNoNeigh = errors.New("no neighbour entry")

// get returns the link-layer address and NUD state of ip (4 or 16 bytes)
// on interface ifindex; errNoNeigh when the kernel has no entry.
func (c *neighConn) get(ifindex int, ip []byte) (mac [6]byte, state uint16, err error) {
	c.seq++
	n := nlmsgHdrLen + ndmsgLen + 4 + len(ip)
	r := c.req[:n]
	clear(r)
	binary.NativeEndian.PutUint32(r[0:], uint32(n))
	binary.NativeEndian.PutUint16(r[4:], unix.RTM_GETNEIGH)
	binary.NativeEndian.PutUint16(r[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(r[8:], c.seq)
	m := r[nlmsgHdrLen:]
	m[0] = unix.AF_INET
	if len(ip) == 16 {
		m[0] = unix.AF_INET6
	}
	binary.NativeEndian.PutUint32(m[4:], uint32(ifindex))
	a := m[ndmsgLen:]
	binary.NativeEndian.PutUint16(a[0:], uint16(4+len(ip)))
	binary.NativeEndian.PutUint16(a[2:], ndaDst)
	copy(a[4:], ip)
	if _, err = unix.Write(c.fd, r); err != nil {
		return mac, 0, err
	}
	for {
		k, err := unix.Read(c.fd, c.buf[:])
		if err != nil {
			return mac, 0, err
		}
		mac, state, done, err := parseNeighReply(c.buf[:k], c.seq)
		if done {
			return mac, state, err
		}
	}
}

// parseNeighReply reads the reply to request seq from one datagram: the
// entry's address and state, or the kernel's error. done is false when
// the datagram holds no answer to seq (a late reply to an earlier request
// that timed out).
func parseNeighReply(b []byte, seq uint32) (mac [6]byte, state uint16, done bool, err error) {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b[0:]))
		if l < nlmsgHdrLen || l > len(b) {
			return mac, 0, true, errors.New("neighbour reply: bad netlink length")
		}
		m, typ := b[:l], binary.NativeEndian.Uint16(b[4:])
		b = b[min((l+3)&^3, len(b)):]
		if binary.NativeEndian.Uint32(m[8:]) != seq {
			continue
		}
		switch typ {
		case unix.NLMSG_ERROR:
			if len(m) < nlmsgHdrLen+4 {
				return mac, 0, true, errors.New("neighbour reply: short error")
			}
			if e := unix.Errno(-int32(binary.NativeEndian.Uint32(m[nlmsgHdrLen:]))); e != 0 && e != unix.ENOENT {
				return mac, 0, true, e
			}
			return mac, 0, true, errNoNeigh
		case unix.RTM_NEWNEIGH:
			if len(m) < nlmsgHdrLen+ndmsgLen {
				return mac, 0, true, errors.New("neighbour reply: short message")
			}
			state = binary.NativeEndian.Uint16(m[nlmsgHdrLen+8:])
			for a := m[nlmsgHdrLen+ndmsgLen:]; len(a) >= 4; {
				al := int(binary.NativeEndian.Uint16(a[0:]))
				if al < 4 || al > len(a) {
					return mac, 0, true, errors.New("neighbour reply: bad attribute length")
				}
				if binary.NativeEndian.Uint16(a[2:])&0x3fff == ndaLLAddr && al == 4+6 {
					copy(mac[:], a[4:al])
					return mac, state, true, nil
				}
				a = a[min((al+3)&^3, len(a)):]
			}
			return mac, state, true, errNoNeigh
		}
	}
	return mac, 0, false, nil
}

package linkwatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// Attrs is what a Table keeps of one link: the few attributes a switch
// reports of its ports' kernel interfaces.
type Attrs struct {
	Index int
	MTU   int
	// Flags are the link's IFF_* flags (net.Interface's RawFlags).
	Flags uint32
	// MAC is the link-layer address as net.HardwareAddr prints it ("" for
	// none).
	MAC string
}

// Table is every link of the caller's network namespace by name, as of the
// last Dump, which updates it in place. A dump through vishvananda/netlink
// (LinkList) decodes every attribute of every link, statistics and XDP
// state included, into new objects: 8 MB of garbage each time for 1,000
// links, most of an idle switch's allocation, which asks for one every few
// seconds. A Table asks the kernel to leave the statistics out, parses
// only what Attrs holds, and allocates only for a link that is new or
// whose address changed. It is not safe for concurrent use.
type Table struct {
	links map[string]*entry
	gen   uint32
	buf   []byte
	seq   uint32
}

type entry struct {
	Attrs
	mac  [32]byte // the address MAC was formatted from (its first 32 bytes)
	nmac int      // its length; -1: MAC was not formatted from mac
	gen  uint32   // the last dump that saw the link
}

// rtextFilterSkipStats (linux/rtnetlink.h) leaves the statistics
// attributes out of a link dump; older kernels ignore the flag.
const rtextFilterSkipStats = 1 << 3

// dumpBufSize holds the largest message batch a dump reply comes in (the
// kernel sends up to 32 KiB per read when the buffer has room).
const dumpBufSize = 64 << 10

// Get returns the link called name as of the last Dump.
func (t *Table) Get(name string) (Attrs, bool) {
	e, ok := t.links[name]
	if !ok {
		return Attrs{}, false
	}
	return e.Attrs, true
}

// Set records a link read by other means (one link asked for alone).
func (t *Table) Set(name string, a Attrs) {
	if t.links == nil {
		t.links = map[string]*entry{}
	}
	e := t.links[name]
	if e == nil {
		e = &entry{}
		t.links[name] = e
	}
	e.Attrs, e.nmac, e.gen = a, -1, t.gen
}

// Delete forgets the link called name.
func (t *Table) Delete(name string) { delete(t.links, name) }

// Len returns the number of links in the table.
func (t *Table) Len() int { return len(t.links) }

// Dump reads every link of the namespace with one RTM_GETLINK dump. On
// error the table keeps what it had.
func (t *Table) Dump() error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("link dump: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("link dump: %w", err)
	}
	t.seq++
	var req [unix.SizeofNlMsghdr + unix.SizeofIfInfomsg + 8]byte
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.RTM_GETLINK)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], t.seq)
	// ifinfomsg all zero: every family, every link.
	a := req[unix.SizeofNlMsghdr+unix.SizeofIfInfomsg:]
	ne.PutUint16(a[0:], 8)
	ne.PutUint16(a[2:], unix.IFLA_EXT_MASK)
	ne.PutUint32(a[4:], rtextFilterSkipStats)
	if err := unix.Sendto(fd, req[:], 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("link dump: %w", err)
	}
	if t.buf == nil {
		t.buf = make([]byte, dumpBufSize)
	}
	if t.links == nil {
		t.links = map[string]*entry{}
	}
	// A generation of its own even if this dump fails part-way: links
	// it saw must not pass for seen by the next one.
	t.gen++
	gen := t.gen
	for {
		n, _, err := unix.Recvfrom(fd, t.buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("link dump: %w", err)
		}
		done, err := parseLinks(t.buf[:n], t.seq, func(name []byte, a *Attrs, mac []byte) {
			t.update(name, a, mac, gen)
		})
		if err != nil {
			return fmt.Errorf("link dump: %w", err)
		}
		if done {
			break
		}
	}
	for name, e := range t.links {
		if e.gen != gen {
			delete(t.links, name)
		}
	}
	return nil
}

// update records one dumped link, allocating only for a new name or a
// changed address.
func (t *Table) update(name []byte, a *Attrs, mac []byte, gen uint32) {
	e := t.links[string(name)]
	if e == nil {
		e = &entry{nmac: -1}
		t.links[string(name)] = e
	}
	e.Index, e.MTU, e.Flags, e.gen = a.Index, a.MTU, a.Flags, gen
	if e.nmac != len(mac) || string(e.mac[:e.nmac]) != string(mac) {
		e.nmac = copy(e.mac[:], mac)
		e.MAC = net.HardwareAddr(mac).String()
	}
}

var errDumpInterrupted = errors.New("the link list changed during the dump (NLM_F_DUMP_INTR)")

// parseLinks walks one read's worth of netlink messages of a link dump
// with sequence number seq, calling fn for each link with its name, its
// attributes (MAC unset) and its address (nil for none or all zeros);
// the arguments are only valid during the call. done is set by the message that ends the dump.
func parseLinks(b []byte, seq uint32, fn func(name []byte, a *Attrs, mac []byte)) (done bool, err error) {
	ne := binary.NativeEndian
	var a Attrs // one for all: fn may keep nothing
	for len(b) >= unix.SizeofNlMsghdr {
		l := int(ne.Uint32(b[0:]))
		typ, flags, s := ne.Uint16(b[4:]), ne.Uint16(b[6:]), ne.Uint32(b[8:])
		if l < unix.SizeofNlMsghdr || l > len(b) {
			return false, fmt.Errorf("netlink message of %d bytes in a read of %d", l, len(b))
		}
		msg := b[unix.SizeofNlMsghdr:l]
		b = b[min(nlAlign(l), len(b)):]
		if s != seq {
			continue // not the reply to this dump
		}
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			return false, errDumpInterrupted
		}
		switch typ {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			if len(msg) < 4 {
				return false, errors.New("short netlink error message")
			}
			if e := int32(ne.Uint32(msg)); e != 0 {
				return false, unix.Errno(-e)
			}
			return true, nil
		case unix.RTM_NEWLINK:
		default:
			continue
		}
		if len(msg) < unix.SizeofIfInfomsg {
			return false, fmt.Errorf("link message of %d bytes", len(msg))
		}
		a = Attrs{Index: int(int32(ne.Uint32(msg[4:]))), Flags: ne.Uint32(msg[8:])}
		var name, mac []byte
		for at := msg[unix.SizeofIfInfomsg:]; len(at) >= unix.SizeofRtAttr; {
			al, atyp := int(ne.Uint16(at[0:])), ne.Uint16(at[2:])
			if al < unix.SizeofRtAttr || al > len(at) {
				return false, fmt.Errorf("link attribute of %d bytes in %d", al, len(at))
			}
			v := at[unix.SizeofRtAttr:al]
			at = at[min(nlAlign(al), len(at)):]
			switch atyp {
			case unix.IFLA_IFNAME:
				name = v
				for i, c := range v {
					if c == 0 {
						name = v[:i]
						break
					}
				}
			case unix.IFLA_MTU:
				if len(v) >= 4 {
					a.MTU = int(ne.Uint32(v))
				}
			case unix.IFLA_ADDRESS:
				// An all-zero address (the loopback's) is none, as
				// vishvananda/netlink reports it.
				for _, c := range v {
					if c != 0 {
						mac = v
						break
					}
				}
			}
		}
		if len(name) > 0 {
			fn(name, &a, mac)
		}
	}
	return false, nil
}

func nlAlign(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

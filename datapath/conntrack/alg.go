package conntrack

import (
	"bytes"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Application-layer helpers (ct(commit,alg=ftp|tftp)): a connection
// committed with one announces the data connections it will open, which
// the tracker then expects; such a connection is +rel (+new+rel first,
// +est+rel after), so that a firewall allowing related traffic lets it in
// without opening the data ports to everyone. Translating the addresses
// inside FTP's commands (NAT with an ALG) is not done: a NATed FTP
// control connection's data connections are not expected.
const (
	HelperNone uint8 = iota
	HelperFTP
	HelperTFTP
)

// expectKey is a data connection an ALG expects: its original tuple with
// any source port, and any source address when src is zero.
type expectKey struct {
	src, dst [16]byte
	dstPort  uint16
	zone     uint16
	proto    uint8
}

// expectations are the data connections announced and not yet made.
// They are few and short-lived; a new connection checks them only when
// there are any (one atomic load).
type expectations struct {
	mu sync.Mutex
	m  map[expectKey]int64 // expiry
	n  atomic.Int32
}

const (
	expectTimeout   = 60 * sec
	maxExpectations = 4096 // a control connection cannot grow the table without bound
)

func (e *expectations) add(k expectKey, now int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[expectKey]int64{}
	}
	if len(e.m) >= maxExpectations {
		for k, exp := range e.m { // drop the expired, else refuse
			if exp <= now {
				delete(e.m, k)
			}
		}
		if len(e.m) >= maxExpectations {
			return
		}
	}
	e.m[k] = now + expectTimeout
	e.n.Store(int32(len(e.m)))
}

// match reports whether a connection with original tuple t is expected,
// and with take removes the expectation (the connection is made).
func (e *expectations) match(t *Tuple, now int64, take bool) bool {
	if e.n.Load() == 0 {
		return false
	}
	k := expectKey{src: t.Src, dst: t.Dst, dstPort: t.DstPort, zone: t.Zone, proto: t.Proto}
	e.mu.Lock()
	defer e.mu.Unlock()
	exp, ok := e.m[k]
	if !ok {
		k.src = [16]byte{}
		exp, ok = e.m[k]
	}
	if !ok {
		return false
	}
	if exp <= now || take {
		delete(e.m, k)
		e.n.Store(int32(len(e.m)))
	}
	return exp > now
}

// helperCommit runs the helper of a connection just committed: TFTP's
// data comes back from the server's new port to the client's. c.mu is
// held.
func (t *Tracker) helperCommit(c *Conn, now int64) {
	if c.helper == HelperTFTP && c.proto == header.IPProtoUDP {
		t.expect.add(expectKey{src: c.orig.Dst, dst: c.orig.Src, dstPort: c.orig.SrcPort,
			zone: c.orig.Zone, proto: header.IPProtoUDP}, now)
	}
}

// helperPacket runs an established connection's FTP helper on one of its
// packets: FTP's PORT/EPRT (from the client: the server will connect to
// the client) and 227/229 replies (from the server: the client will
// connect to the server). The announced address must be the sender's own
// (no FTP bounce). c.mu is held.
func (t *Tracker) helperPacket(c *Conn, pkt *packet.Packet, pp *parsed, reply bool, now int64) {
	if pp.t.Proto != header.IPProtoTCP || pp.payload == 0 {
		return
	}
	d := pkt.Data()
	end := pp.dataOff + int(pp.payload)
	if pp.dataOff <= 0 || end > len(d) {
		return
	}
	data := d[pp.dataOff:min(end, pp.dataOff+512)]
	var client, server = c.orig.Src, c.orig.Dst
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		var addr [16]byte
		var port uint16
		var ok bool
		if !reply {
			if addr, port, ok = ftpPort(line, c.orig.IPv6); ok && addr == client {
				// Active: from the server (port 20) to the client.
				t.expect.add(expectKey{src: server, dst: client, dstPort: port, zone: c.orig.Zone, proto: header.IPProtoTCP}, now)
			}
			continue
		}
		if addr, port, ok = ftpPassive(line, server, c.orig.IPv6); ok && addr == server {
			// Passive: from the client to the server's announced port.
			t.expect.add(expectKey{src: client, dst: server, dstPort: port, zone: c.orig.Zone, proto: header.IPProtoTCP}, now)
		}
	}
}

// ftpPort reads "PORT h1,h2,h3,h4,p1,p2" or "EPRT |af|addr|port|".
func ftpPort(line []byte, v6 bool) ([16]byte, uint16, bool) {
	line = bytes.TrimRight(line, "\r")
	switch {
	case len(line) > 5 && bytes.EqualFold(line[:5], []byte("PORT ")):
		return ftpHostPort(line[5:])
	case len(line) > 5 && bytes.EqualFold(line[:5], []byte("EPRT ")):
		f := bytes.Split(line[5:], line[5:6])
		if len(f) != 5 {
			return [16]byte{}, 0, false
		}
		a, err := netip.ParseAddr(string(f[2]))
		p, perr := strconv.ParseUint(string(f[3]), 10, 16)
		if err != nil || perr != nil || a.Is4() == v6 {
			return [16]byte{}, 0, false
		}
		return a.As16(), uint16(p), true
	}
	return [16]byte{}, 0, false
}

// ftpPassive reads "227 ... (h1,h2,h3,h4,p1,p2)" or "229 ... (|||port|)"
// (whose address is the server's).
func ftpPassive(line []byte, server [16]byte, v6 bool) ([16]byte, uint16, bool) {
	line = bytes.TrimRight(line, "\r")
	open, close := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if len(line) < 4 || open < 0 || close < open {
		return [16]byte{}, 0, false
	}
	inner := line[open+1 : close]
	switch string(line[:4]) {
	case "227 ":
		if v6 {
			return [16]byte{}, 0, false
		}
		return ftpHostPort(inner)
	case "229 ":
		f := bytes.Split(inner, inner[:min(1, len(inner))])
		if len(f) != 5 {
			return [16]byte{}, 0, false
		}
		p, err := strconv.ParseUint(string(f[3]), 10, 16)
		if err != nil {
			return [16]byte{}, 0, false
		}
		return server, uint16(p), true
	}
	return [16]byte{}, 0, false
}

// ftpHostPort reads "h1,h2,h3,h4,p1,p2" into an IPv4-mapped address and
// a port.
func ftpHostPort(b []byte) ([16]byte, uint16, bool) {
	f := bytes.Split(bytes.TrimSpace(b), []byte(","))
	if len(f) != 6 {
		return [16]byte{}, 0, false
	}
	var v [6]byte
	for i, s := range f {
		n, err := strconv.ParseUint(string(bytes.TrimSpace(s)), 10, 8)
		if err != nil {
			return [16]byte{}, 0, false
		}
		v[i] = byte(n)
	}
	addr := [16]byte{10: 0xff, 11: 0xff, 12: v[0], 13: v[1], 14: v[2], 15: v[3]}
	return addr, uint16(v[4])<<8 | uint16(v[5]), true
}

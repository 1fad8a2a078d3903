package conntrack

import (
	"bytes"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Application-layer helpers (ct(commit,alg=ftp|tftp)): a connection
// committed with one announces the data connections it will open, which
// the tracker then expects; such a connection is +rel (+new+rel first,
// +est+rel after), so that a firewall allowing related traffic lets it in
// without opening the data ports to everyone. A translated FTP control
// connection has the addresses inside its commands translated too, and
// its data connections translated as it is (ftpnat.go).
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

// expectation is what an expected data connection gets: when its
// control connection is translated, the translation that makes it look,
// to each end, like a connection between the addresses that end knows.
type expectation struct {
	expires int64
	// nat (natSrc or natDst, 0 for none) and to: the data connection's
	// source (natSrc) or destination (natDst) becomes to, its port kept
	// when free.
	nat uint8
	to  [16]byte
}

// expectations are the data connections announced and not yet made.
// They are few and short-lived; a new connection checks them only when
// there are any (one atomic load).
type expectations struct {
	mu sync.Mutex
	m  map[expectKey]expectation
	n  atomic.Int32
}

const (
	expectTimeout   = 60 * sec
	maxExpectations = 4096 // a control connection cannot grow the table without bound
)

func (e *expectations) add(k expectKey, x expectation, now int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[expectKey]expectation{}
	}
	if len(e.m) >= maxExpectations {
		for k, x := range e.m { // drop the expired, else refuse
			if x.expires <= now {
				delete(e.m, k)
			}
		}
		if len(e.m) >= maxExpectations {
			return
		}
	}
	x.expires = now + expectTimeout
	e.m[k] = x
	e.n.Store(int32(len(e.m)))
}

// match reports whether a connection with original tuple t is expected,
// and how, and with take removes the expectation (the connection is
// made).
func (e *expectations) match(t *Tuple, now int64, take bool) (expectation, bool) {
	if e.n.Load() == 0 {
		return expectation{}, false
	}
	k := expectKey{src: t.Src, dst: t.Dst, dstPort: t.DstPort, zone: t.Zone, proto: t.Proto}
	e.mu.Lock()
	defer e.mu.Unlock()
	x, ok := e.m[k]
	if !ok {
		k.src = [16]byte{}
		x, ok = e.m[k]
	}
	if !ok {
		return expectation{}, false
	}
	if x.expires <= now || take {
		delete(e.m, k)
		e.n.Store(int32(len(e.m)))
	}
	return x, x.expires > now
}

// helperCommit runs the helper of a connection just committed: TFTP's
// data comes back from the server's new port to the client's. c.mu is
// held.
func (t *Tracker) helperCommit(c *Conn, now int64) {
	if c.helper == HelperTFTP && c.proto == header.IPProtoUDP {
		t.expect.add(expectKey{src: c.orig.Dst, dst: c.orig.Src, dstPort: c.orig.SrcPort,
			zone: c.orig.Zone, proto: header.IPProtoUDP}, expectation{}, now)
	}
}

// ftpLineMax is how much of a segment the FTP helper reads: commands
// and replies that announce a data connection are short, and are the
// first thing in their segment when a client and a server talk in turn.
const ftpLineMax = 512

// helperPacket runs an established connection's FTP helper on one of its
// packets: FTP's PORT/EPRT (from the client: the server will connect to
// the client) and 227/229 replies (from the server: the client will
// connect to the server). The announced address must be the sender's own
// (no FTP bounce), as the sender knows it or as its peer sees it. Only
// whole lines count: a command split across segments is left alone, as
// Open vSwitch leaves it. With nat (the ct translates c's packets), the
// address in the line is rewritten to the one the peer knows, and the
// edits to make are returned (into buf). c.mu is held.
func (t *Tracker) helperPacket(c *Conn, pkt *packet.Packet, pp *parsed, reply, nat bool, now int64, buf []ftpEdit) []ftpEdit {
	edits := buf[:0]
	if pp.t.Proto != header.IPProtoTCP || pp.payload == 0 {
		return edits
	}
	d := pkt.Data()
	end := pp.dataOff + int(pp.payload)
	if pp.dataOff <= 0 || end > len(d) {
		return edits
	}
	data := d[pp.dataOff:min(end, pp.dataOff+ftpLineMax)]
	o, r := &c.orig, &c.reply
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			break
		}
		line := data[off : off+i]
		at := off
		off += i + 1
		if !reply {
			// Active: the server, as the client sees it, connects
			// to the client, as the server sees it.
			addr, port, sp, ok := ftpPort(line, o.IPv6)
			if !ok || addr != o.Src && addr != r.Dst {
				continue
			}
			x := expectation{}
			switch {
			case r.Dst != o.Src:
				x.nat, x.to = natDst, o.Src
			case r.Src != o.Dst:
				x.nat, x.to = natSrc, o.Dst
			}
			t.expect.add(expectKey{src: r.Src, dst: r.Dst, dstPort: port, zone: o.Zone, proto: header.IPProtoTCP}, x, now)
			if nat && addr != r.Dst && sp.to > sp.from && len(edits) < cap(edits) {
				edits = append(edits, ftpEdit{from: at + sp.from, to: at + sp.to, addr: r.Dst, commas: sp.commas})
			}
			continue
		}
		// Passive: the client connects to the server, as the client
		// sees it.
		addr, port, sp, ok := ftpPassive(line, r.Src, o.IPv6)
		if !ok || addr != r.Src && addr != o.Dst {
			continue
		}
		x := expectation{}
		switch {
		case r.Dst != o.Src:
			x.nat, x.to = natSrc, r.Dst
		case r.Src != o.Dst:
			x.nat, x.to = natDst, r.Src
		}
		t.expect.add(expectKey{src: o.Src, dst: o.Dst, dstPort: port, zone: o.Zone, proto: header.IPProtoTCP}, x, now)
		if nat && addr != o.Dst && sp.to > sp.from && len(edits) < cap(edits) {
			edits = append(edits, ftpEdit{from: at + sp.from, to: at + sp.to, addr: o.Dst, commas: sp.commas})
		}
	}
	return edits
}

// span is where in a line an announced address is written: [from, to),
// in the h1,h2,h3,h4 form (commas) or as text (EPRT's). An empty span:
// the line carries no address (229's).
type span struct {
	from, to int
	commas   bool
}

// ftpPort reads "PORT h1,h2,h3,h4,p1,p2" or "EPRT |af|addr|port|".
func ftpPort(line []byte, v6 bool) ([16]byte, uint16, span, bool) {
	line = bytes.TrimRight(line, "\r")
	switch {
	case len(line) > 5 && bytes.EqualFold(line[:5], []byte("PORT ")):
		if v6 {
			return [16]byte{}, 0, span{}, false
		}
		a, p, sp, ok := ftpHostPort(line[5:])
		sp.from, sp.to = sp.from+5, sp.to+5
		return a, p, sp, ok
	case len(line) > 5 && bytes.EqualFold(line[:5], []byte("EPRT ")):
		f := bytes.Split(line[5:], line[5:6])
		if len(f) != 5 {
			return [16]byte{}, 0, span{}, false
		}
		a, err := netip.ParseAddr(string(f[2]))
		p, perr := strconv.ParseUint(string(f[3]), 10, 16)
		if err != nil || perr != nil || a.Is4() == v6 || a.Zone() != "" {
			return [16]byte{}, 0, span{}, false
		}
		from := 5 + len(f[0]) + 1 + len(f[1]) + 1
		return a.As16(), uint16(p), span{from: from, to: from + len(f[2])}, true
	}
	return [16]byte{}, 0, span{}, false
}

// ftpPassive reads "227 ... (h1,h2,h3,h4,p1,p2)" or "229 ... (|||port|)"
// (whose address is the server's).
func ftpPassive(line []byte, server [16]byte, v6 bool) ([16]byte, uint16, span, bool) {
	line = bytes.TrimRight(line, "\r")
	open, close := bytes.IndexByte(line, '('), bytes.LastIndexByte(line, ')')
	if len(line) < 4 || open < 0 || close < open {
		return [16]byte{}, 0, span{}, false
	}
	inner := line[open+1 : close]
	switch string(line[:4]) {
	case "227 ":
		if v6 {
			return [16]byte{}, 0, span{}, false
		}
		a, p, sp, ok := ftpHostPort(inner)
		sp.from, sp.to = sp.from+open+1, sp.to+open+1
		return a, p, sp, ok
	case "229 ":
		f := bytes.Split(inner, inner[:min(1, len(inner))])
		if len(f) != 5 {
			return [16]byte{}, 0, span{}, false
		}
		p, err := strconv.ParseUint(string(f[3]), 10, 16)
		if err != nil {
			return [16]byte{}, 0, span{}, false
		}
		return server, uint16(p), span{}, true
	}
	return [16]byte{}, 0, span{}, false
}

// ftpHostPort reads "h1,h2,h3,h4,p1,p2" into an IPv4-mapped address and
// a port, and where in b the address (h1 to h4) is.
func ftpHostPort(b []byte) ([16]byte, uint16, span, bool) {
	lead := len(b) - len(bytes.TrimLeftFunc(b, unicode.IsSpace))
	f := bytes.Split(bytes.TrimSpace(b), []byte(","))
	if len(f) != 6 {
		return [16]byte{}, 0, span{}, false
	}
	var v [6]byte
	for i, s := range f {
		n, err := strconv.ParseUint(string(bytes.TrimSpace(s)), 10, 8)
		if err != nil {
			return [16]byte{}, 0, span{}, false
		}
		v[i] = byte(n)
	}
	addr := [16]byte{10: 0xff, 11: 0xff, 12: v[0], 13: v[1], 14: v[2], 15: v[3]}
	sp := span{from: lead, to: lead + len(f[0]) + len(f[1]) + len(f[2]) + len(f[3]) + 3, commas: true}
	return addr, uint16(v[4])<<8 | uint16(v[5]), sp, true
}

package conntrack

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
)

// NAT is a ct action's nat(...). With neither Src nor Dst it only applies
// the translation a connection was committed with; with one, a new
// connection committed by this ct gets an address (and port) from the
// range. Addresses are IPv4-mapped for IPv4, as in Tuple.
type NAT struct {
	Src, Dst         bool
	MinAddr, MaxAddr [16]byte // MaxAddr zero: MinAddr only
	MinPort, MaxPort uint16   // 0: keep the port if it is free
	// Persistent picks the address from the source address alone, so a
	// client keeps its translated address across its connections, to
	// every peer, and after a restart (nat(...,persistent)); otherwise
	// connections spread over the range by their whole tuple.
	Persistent bool
	// Random starts the search for a free port at a fresh random number
	// (nat(...,random)) instead of the tuple's hash (hash, the default),
	// so the port a connection gets cannot be predicted from its tuple.
	Random bool
}

// natKind says how a connection is translated.
const (
	natSrc = 1 << 0
	natDst = 1 << 1
)

// Rewrite is what NAT does to one packet: the addresses and ports its
// headers must get (the datapath applies it with its set actions, which
// keep checksums and the flow key right).
type Rewrite struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16
	Valid            bool
}

// Actions appends the set actions that perform the rewrite on a packet
// whose key is k to acts.
func (r *Rewrite) Actions(k *flow.Key, acts []actions.Action) []actions.Action {
	if !r.Valid {
		return acts
	}
	if k.EthType == header.EtherTypeIPv4 {
		var s, d [16]byte
		copy(s[:4], r.Src[12:])
		copy(d[:4], r.Dst[12:])
		if binary.BigEndian.Uint32(r.Src[12:]) != k.IPv4Src {
			acts = append(acts, actions.Action{Kind: actions.SetIPv4Src, Addr: s})
		}
		if binary.BigEndian.Uint32(r.Dst[12:]) != k.IPv4Dst {
			acts = append(acts, actions.Action{Kind: actions.SetIPv4Dst, Addr: d})
		}
	} else {
		if r.Src != k.IPv6Src {
			acts = append(acts, actions.Action{Kind: actions.SetIPv6Src, Addr: r.Src})
		}
		if r.Dst != k.IPv6Dst {
			acts = append(acts, actions.Action{Kind: actions.SetIPv6Dst, Addr: r.Dst})
		}
	}
	switch k.NwProto {
	case header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP:
		if r.SrcPort != k.TpSrc {
			acts = append(acts, actions.Action{Kind: actions.SetL4Src, Val16: r.SrcPort})
		}
		if r.DstPort != k.TpDst {
			acts = append(acts, actions.Action{Kind: actions.SetL4Dst, Val16: r.DstPort})
		}
	case header.IPProtoICMP, header.IPProtoICMPv6:
		// A query's identifier is both "ports" of its tuple; SNAT moves
		// it when another host behind the address uses the same one.
		acts = append(acts, actions.Action{Kind: actions.SetICMPID, Val16: r.SrcPort})
	}
	return acts
}

// natRewrite is the rewrite of a packet of c in direction reply: towards
// the translated tuple going out, back to the original coming back. c.mu
// is held.
func (c *Conn) natRewrite(reply bool, rw *Rewrite) {
	var want Tuple
	if reply {
		want = c.orig.reverse()
	} else {
		want = c.reply.reverse()
	}
	rw.Src, rw.Dst, rw.SrcPort, rw.DstPort, rw.Valid = want.Src, want.Dst, want.SrcPort, want.DstPort, true
}

// natState is the ct_state bits of a packet of a translated connection.
func (c *Conn) natState() uint8 {
	var s uint8
	if c.nat&natSrc != 0 {
		s |= flow.CTSrcNAT
	}
	if c.nat&natDst != 0 {
		s |= flow.CTDstNAT
	}
	return s
}

// natCandidates writes into *reply each reply tuple (the reverse of a
// translated tuple) that nat allows for a connection with original tuple
// orig, from a start that spreads connections over the range, and calls
// try after each, until try accepts one. It reports whether one was
// accepted. h is orig's hash (Tracker.hash).
//
// The candidates are written in place, a field or two each, and try
// takes no argument: a commit's candidate is its connection's reply
// tuple as it will be indexed, with no copy of a tuple per candidate (a
// tuple passed by value was two copies, and loads of each copy's
// 16-byte words straddled the stores that made it).
func natCandidates(orig *Tuple, h uint32, n *NAT, reply *Tuple, try func() bool) bool {
	ah := h
	if n.Persistent {
		// The same address after a restart: a fixed key, not the
		// tracker's (this hash indexes nothing).
		src := Tuple{Src: orig.Src}
		ah = src.hash(&fixedKey)
	}
	lo, hi := &n.MinAddr, &n.MaxAddr
	if *lo == ([16]byte{}) {
		// nat(src) or nat(dst) without an address (Open vSwitch's
		// "zero SNAT"): the address stays, only a port clash moves
		// the port.
		lo, hi = &orig.Dst, &[16]byte{}
		if n.Src {
			lo = &orig.Src
		}
	}
	nAddrs := rangeSize(lo, hi)
	ports := uint32(1)
	var base uint16
	// SNAT moves a query's ICMP identifier as it moves a source port.
	icmpID := n.Src && isICMP(orig.Proto)
	portNAT := orig.Proto == header.IPProtoTCP || orig.Proto == header.IPProtoUDP || orig.Proto == header.IPProtoSCTP || icmpID
	if portNAT && n.MinPort != 0 {
		base = n.MinPort
		ports = uint32(max(n.MaxPort, n.MinPort)-n.MinPort) + 1
	}
	setReverse(reply, orig)
	// The translated side of the reply tuple: SNAT's destination (the
	// translated source), DNAT's source.
	addr, port := &reply.Dst, &reply.DstPort
	if !n.Src {
		addr, port = &reply.Src, &reply.SrcPort
	}
	// Each range's start is the hash scaled to it (a multiply, not a
	// division), and no candidate divides: a commit's only try is
	// usually the first. Ranges are at most 2^16 long.
	ai := uint64(0)
	if nAddrs > 1 {
		ai = uint64(ah) * nAddrs >> 32
	}
	for range nAddrs {
		if ai == 0 {
			*addr = *lo
		} else {
			addrAt(addr, lo, ai)
		}
		if ai++; ai == nAddrs {
			ai = 0
		}
		if ports == 1 && base == 0 {
			// No port range: the original port, then (SNAT of a
			// port protocol) any unprivileged one.
			if icmpID {
				reply.SrcPort, reply.DstPort = orig.DstPort, orig.SrcPort
			} else if n.Src {
				*port = orig.SrcPort
			} else {
				*port = orig.DstPort
			}
			if try() {
				return true
			}
			if !(n.Src && portNAT) {
				continue
			}
			base, ports = 1024, 65536-1024
		}
		start := uint32(uint64(h) * uint64(ports) >> 32)
		if n.Random {
			start = rand.Uint32() % ports
		}
		pi := start
		for range ports {
			p := base + uint16(pi)
			if pi++; pi == ports {
				pi = 0
			}
			if icmpID {
				reply.SrcPort, reply.DstPort = p, p
			} else {
				*port = p
			}
			if try() {
				return true
			}
		}
		if n.MinPort == 0 {
			base, ports = 0, 1
		}
	}
	return false
}

// setReverse sets *r to t.reverse() field by field: reverse's result is
// built in a temporary by field stores and copied out in 16-byte words,
// loads that straddle those stores and wait for them (a stall on every
// commit).
func setReverse(r, t *Tuple) {
	r.Src, r.Dst = t.Dst, t.Src
	r.SrcPort, r.DstPort = t.DstPort, t.SrcPort
	r.Zone, r.Proto, r.ICMPType, r.IPv6 = t.Zone, t.Proto, t.ICMPType, t.IPv6
	if t.Proto == header.IPProtoICMP || t.Proto == header.IPProtoICMPv6 {
		r.ICMPType = replyType(t.IPv6, t.ICMPType)
	}
}

// natFirst is the first translation natCandidates tries for orig (n not
// Random).
// h is orig's hash (Tracker.hash).
func natFirst(orig *Tuple, h uint32, n *NAT) Tuple {
	var r Tuple
	natCandidates(orig, h, n, &r, func() bool { return true })
	return r.reverse()
}

// addrs is an address range; at most 2^16 addresses of it are used.
type addrs struct {
	lo [16]byte
	n  uint64
}

func addrRange(lo, hi *[16]byte) addrs { return addrs{lo: *lo, n: rangeSize(lo, hi)} }

// rangeSize is the number of addresses from lo to hi, capped at 2^16 (1
// when hi is zero or below lo). natCandidates uses it and addrAt, not
// addrs: the compiler copies a struct in 16-byte words, which straddled
// the stores that had just made it (a stalled load per commit).
func rangeSize(lo, hi *[16]byte) uint64 {
	// As two big-endian words: a string comparison of the arrays is a
	// call per commit.
	be := binary.BigEndian
	lh, ll := be.Uint64(lo[:8]), be.Uint64(lo[8:])
	hh, hl := be.Uint64(hi[:8]), be.Uint64(hi[8:])
	if hh|hl == 0 || hh < lh || hh == lh && hl <= ll {
		return 1
	}
	// The range's size fits the low word when the high ones agree;
	// otherwise it is over 2^64, far above the cap.
	n := uint64(1 << 16)
	if hh == lh {
		if d := hl - ll; d < n {
			n = d + 1
		}
	}
	return n
}

// at is the address i after lo (i < n).
func (a addrs) at(i uint64) (out [16]byte) {
	addrAt(&out, &a.lo, i)
	return out
}

// addrAt writes the address i after lo into dst, carrying across the 16
// bytes.
func addrAt(dst, lo *[16]byte, i uint64) {
	be := binary.BigEndian
	hi, low := be.Uint64(lo[:8]), be.Uint64(lo[8:])
	sum := low + i
	if sum < low {
		hi++
	}
	be.PutUint64(dst[:8], hi)
	be.PutUint64(dst[8:], sum)
}

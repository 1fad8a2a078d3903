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

// natCandidates calls try with each translated tuple nat allows for a
// connection with original tuple orig (its reply tuple: the reverse),
// from a start that spreads connections over the range, until try
// accepts one. It reports whether one was accepted. h is orig's hash (Tracker.hash).
func natCandidates(orig *Tuple, h uint32, n *NAT, try func(translated Tuple) bool) bool {
	ah := h
	if n.Persistent {
		// The same address after a restart: a fixed key, not the
		// tracker's (this hash indexes nothing).
		src := Tuple{Src: orig.Src}
		ah = src.hash(&fixedKey)
	}
	lo, hi := n.MinAddr, n.MaxAddr
	if lo == ([16]byte{}) {
		// nat(src) or nat(dst) without an address (Open vSwitch's
		// "zero SNAT"): the address stays, only a port clash moves
		// the port.
		lo, hi = orig.Dst, [16]byte{}
		if n.Src {
			lo = orig.Src
		}
	}
	addrs := addrRange(lo, hi)
	ports := uint32(1)
	var base uint16
	// SNAT moves a query's ICMP identifier as it moves a source port.
	icmpID := n.Src && isICMP(orig.Proto)
	portNAT := orig.Proto == header.IPProtoTCP || orig.Proto == header.IPProtoUDP || orig.Proto == header.IPProtoSCTP || icmpID
	if portNAT && n.MinPort != 0 {
		base = n.MinPort
		ports = uint32(max(n.MaxPort, n.MinPort)-n.MinPort) + 1
	}
	// Each range's start is the hash scaled to it (a multiply, not a
	// division), and no candidate divides: a commit's only try is
	// usually the first. Ranges are at most 2^16 long.
	ai := uint64(0)
	if addrs.n > 1 {
		ai = uint64(ah) * addrs.n >> 32
	}
	for range addrs.n {
		addr := addrs.lo
		if ai != 0 {
			addr = addrs.at(ai)
		}
		if ai++; ai == addrs.n {
			ai = 0
		}
		t := *orig
		if n.Src {
			t.Src = addr
		} else {
			t.Dst = addr
		}
		if ports == 1 && base == 0 {
			// No port range: the original port, then (SNAT of a
			// port protocol) any unprivileged one.
			if try(t) {
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
			tt := t
			switch {
			case icmpID:
				tt.SrcPort, tt.DstPort = p, p
			case n.Src:
				tt.SrcPort = p
			default:
				tt.DstPort = p
			}
			if try(tt) {
				return true
			}
		}
		if n.MinPort == 0 {
			base, ports = 0, 1
		}
	}
	return false
}

// natFirst is the first translation natCandidates tries for orig (n not
// Random).
// h is orig's hash (Tracker.hash).
func natFirst(orig *Tuple, h uint32, n *NAT) (first Tuple) {
	natCandidates(orig, h, n, func(t Tuple) bool { first = t; return true })
	return first
}

// addrs is an address range; at most 2^16 addresses of it are used.
type addrs struct {
	lo [16]byte
	n  uint64
}

func addrRange(lo, hi [16]byte) addrs {
	if hi == ([16]byte{}) || string(hi[:]) <= string(lo[:]) {
		return addrs{lo: lo, n: 1}
	}
	// The range's size fits the low 8 bytes when the high ones agree;
	// otherwise it is over 2^64, far above the cap.
	n := uint64(1 << 16)
	if [8]byte(hi[:8]) == [8]byte(lo[:8]) {
		if d := binary.BigEndian.Uint64(hi[8:]) - binary.BigEndian.Uint64(lo[8:]); d < n {
			n = d + 1
		}
	}
	return addrs{lo: lo, n: n}
}

// at is the address i after lo (i < n), carrying across the 16 bytes.
func (a addrs) at(i uint64) [16]byte {
	out := a.lo
	low := binary.BigEndian.Uint64(out[8:])
	sum := low + i
	binary.BigEndian.PutUint64(out[8:], sum)
	if sum < low {
		binary.BigEndian.PutUint64(out[:8], binary.BigEndian.Uint64(out[:8])+1)
	}
	return out
}

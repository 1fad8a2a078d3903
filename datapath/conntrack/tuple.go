package conntrack

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Tuple is one direction of a connection as the tracker looks it up:
// addresses (IPv4 ones IPv4-mapped, as the flow key holds them), ports,
// protocol and zone. An ICMP query has its identifier in both ports and its
// type in ICMPType, so that a request and its reply are each other's
// reverse. It is a plain comparable value: a map key, no allocation.
type Tuple struct {
	Src, Dst         [16]byte
	SrcPort, DstPort uint16 // TCP/UDP/SCTP ports; ICMP query: the identifier
	Zone             uint16
	Proto            uint8
	ICMPType         uint8 // ICMP query: the type; 0 otherwise
	IPv6             bool
}

// equal is t == u, as words: the compiler's comparison of the struct
// calls memequal for the addresses.
func (t *Tuple) equal(u *Tuple) bool {
	le := binary.LittleEndian
	x := (le.Uint64(t.Src[:8]) ^ le.Uint64(u.Src[:8])) | (le.Uint64(t.Src[8:]) ^ le.Uint64(u.Src[8:])) |
		(le.Uint64(t.Dst[:8]) ^ le.Uint64(u.Dst[:8])) | (le.Uint64(t.Dst[8:]) ^ le.Uint64(u.Dst[8:]))
	return x == 0 && t.SrcPort == u.SrcPort && t.DstPort == u.DstPort && t.Zone == u.Zone &&
		t.Proto == u.Proto && t.ICMPType == u.ICMPType && t.IPv6 == u.IPv6
}

// mapped4 is the last 8 bytes of IPv4 address a's IPv4-mapped form
// (0, 0, 0xff, 0xff, then a), as a little-endian word.
func mapped4(a uint32) uint64 {
	return 0xffff0000 | uint64(bits.ReverseBytes32(a))<<32
}

// reverse is the tuple of the other direction.
func (t *Tuple) reverse() Tuple {
	r := *t
	r.Src, r.Dst = t.Dst, t.Src
	r.SrcPort, r.DstPort = t.DstPort, t.SrcPort
	if t.Proto == header.IPProtoICMP || t.Proto == header.IPProtoICMPv6 {
		r.ICMPType = replyType(t.IPv6, t.ICMPType)
	}
	return r
}

// hashKey is a tracker's random hash key (newHashKey): tuples a sender
// crafted to collide under one key spread under another, so no one can
// lengthen a tracker's probe chains or pile its connections into one
// shard without knowing the key.
type hashKey struct {
	// a, b and p key each endpoint's mix (p odd); z the rest.
	a, b, p, z uint64
}

// newHashKey draws a key (math/rand/v2's generator, seeded from the
// runtime's random source).
func newHashKey() hashKey {
	return hashKey{a: rand.Uint64(), b: rand.Uint64(), p: rand.Uint64() | 1, z: rand.Uint64()}
}

// fixedKey hashes what must hash the same in every tracker and after a
// restart: a persistent NAT's address choice, by the client's address.
var fixedKey = hashKey{a: 0x9e3779b97f4a7c15, b: 0xbf58476d1ce4e5b9, p: 0x94d049bb133111eb, z: 0x2545f4914f6cdd1d}

// mixEndpoint is one endpoint's (an address's two words and a port) keyed
// mix: one 64x64->128 multiply of the key-blinded words, folded (the
// multiply-mix of wyhash), with the port blinded into one of them by an
// odd multiplier of the key.
func mixEndpoint(k *hashKey, hi, lo uint64, port uint16) uint64 {
	x, y := bits.Mul64(hi^k.a, lo^k.b^uint64(port)*k.p)
	return x ^ y
}

// hash spreads tuples over the shards: a few multiplies, no allocation.
// It is the same for a tuple and its reverse (the endpoints' mixes are
// added, the ICMP query and reply types count as one), so that a
// connection without NAT has both its index entries in one shard, side
// by side in one probe sequence: committing it locks one shard and
// misses the cache once where two random slots cost two misses. k is the
// tracker's key (Tracker.key): the endpoints' mixes are keyed, so two
// tuples that collide under one key are unrelated under another.
func (t *Tuple) hash(k *hashKey) uint32 {
	le := binary.LittleEndian
	s := mixEndpoint(k, le.Uint64(t.Src[:8]), le.Uint64(t.Src[8:]), t.SrcPort)
	d := mixEndpoint(k, le.Uint64(t.Dst[:8]), le.Uint64(t.Dst[8:]), t.DstPort)
	typ := t.ICMPType
	if typ != 0 {
		typ = min(typ, replyType(t.IPv6, typ))
	}
	h := s + d
	h ^= (uint64(t.Zone) | uint64(t.Proto)<<16 | uint64(typ)<<24) * 0x94d049bb133111eb
	h ^= k.z
	// A finalizer (murmur3's) so that every input bit reaches the low
	// bits the index's slots come from: without it, tuples that differ
	// only in the low bits of an IPv4 address and the port (a load
	// generator's walk) clustered into long probe chains.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return uint32(h)
}

// replyType is the ICMP type answering query type typ, and the query
// type a reply answers (echo, timestamp, information and address-mask
// requests; ICMPv6 echo); other types map to themselves.
func replyType(v6 bool, typ uint8) uint8 {
	if v6 {
		switch typ {
		case 128:
			return 129
		case 129:
			return 128
		}
		return typ
	}
	switch typ {
	case 8:
		return 0
	case 0:
		return 8
	case 13, 15, 17:
		return typ + 1
	case 14, 16, 18:
		return typ - 1
	}
	return typ
}

// isICMPQuery reports whether typ is a query (request) type.
func isICMPQuery(v6 bool, typ uint8) bool {
	if v6 {
		return typ == 128
	}
	return typ == 8 || typ == 13 || typ == 15 || typ == 17
}

// isICMPError reports whether typ is an error message about another packet.
func isICMPError(v6 bool, typ uint8) bool {
	if v6 {
		return typ >= 1 && typ <= 4
	}
	switch typ {
	case 3, 4, 5, 11, 12:
		return true
	}
	return false
}

// parsed is what the tracker reads from one packet.
type parsed struct {
	t Tuple
	// related: the packet is an ICMP error and t is the tuple of the
	// packet it is about (as that packet travelled).
	related bool
	// For TCP: the header fields sequence tracking needs.
	flags    uint16
	seq, ack uint32
	win      uint16
	wscale   uint8 // window-scale option; wscaleNone when absent
	payload  uint32
	dataOff  int // where a TCP payload starts in the frame
}

const wscaleNone = 0xff

// parse reads the tuple and, for TCP, the sequence fields. It fails for
// packets the tracker cannot follow (not IP, a fragment, a truncated
// transport header, an ICMP type that is neither a query, its reply nor an
// error about a trackable packet): ct marks those invalid.
func parse(pkt *packet.Packet, zone uint16, out *parsed) bool {
	k := &pkt.Key
	*out = parsed{}
	t := &out.t
	t.Zone = zone
	d := pkt.Data()
	l3, l4 := int(pkt.Offsets.L3), int(pkt.Offsets.L4)
	switch k.EthType {
	case header.EtherTypeIPv4:
		// The IPv4-mapped address's last 8 bytes in one store each:
		// hash and compare read them as a word, and a load spanning
		// several narrower stores waits for them to retire (no
		// store-to-load forwarding), which cost more than the hash.
		binary.LittleEndian.PutUint64(t.Src[8:], mapped4(k.IPv4Src))
		binary.LittleEndian.PutUint64(t.Dst[8:], mapped4(k.IPv4Dst))
	case header.EtherTypeIPv6:
		t.Src, t.Dst, t.IPv6 = k.IPv6Src, k.IPv6Dst, true
	default:
		return false
	}
	if k.NwFrag&flow.FragAny != 0 || l3 == flow.NoOffset {
		return false
	}
	t.Proto = k.NwProto
	switch t.Proto {
	case header.IPProtoTCP:
		if l4 == flow.NoOffset || len(d) < l4+header.TCPMinLen {
			return false
		}
		return parseTCP(d, l3, l4, t.IPv6, pkt.GSO(), out)
	case header.IPProtoUDP, header.IPProtoSCTP, 136: // 136: UDP-Lite
		if l4 == flow.NoOffset || len(d) < l4+4 {
			return false
		}
		t.SrcPort, t.DstPort = k.TpSrc, k.TpDst
	case header.IPProtoICMP, header.IPProtoICMPv6:
		if l4 == flow.NoOffset || len(d) < l4+8 {
			return false
		}
		v6 := t.Proto == header.IPProtoICMPv6
		if v6 != t.IPv6 {
			return false
		}
		typ := d[l4]
		switch {
		case isICMPQuery(v6, typ) || isICMPQuery(v6, replyType(v6, typ)):
			t.ICMPType = typ
			id := binary.BigEndian.Uint16(d[l4+4:])
			t.SrcPort, t.DstPort = id, id
		case isICMPError(v6, typ):
			out.related = true
			return parseInner(d[l4+8:], zone, v6, t)
		default:
			return false
		}
	}
	return true
}

// parseTCP reads the TCP fields of the header at l4.
func parseTCP(d []byte, l3, l4 int, v6, gso bool, out *parsed) bool {
	tcp := d[l4:]
	doff := int(tcp[header.TCPDataOffOff]>>4) * 4
	if doff < header.TCPMinLen || len(tcp) < doff {
		return false
	}
	out.t.SrcPort = binary.BigEndian.Uint16(tcp[0:])
	out.t.DstPort = binary.BigEndian.Uint16(tcp[2:])
	out.seq = binary.BigEndian.Uint32(tcp[4:])
	out.ack = binary.BigEndian.Uint32(tcp[8:])
	out.flags = binary.BigEndian.Uint16(tcp[12:]) & 0x0fff
	out.win = binary.BigEndian.Uint16(tcp[14:])
	out.wscale = wscaleNone
	for o := tcp[header.TCPMinLen:doff]; len(o) > 0; {
		switch o[0] {
		case 0: // end of options
			o = nil
			continue
		case 1: // no-op
			o = o[1:]
			continue
		}
		if len(o) < 2 || o[1] < 2 || int(o[1]) > len(o) {
			break
		}
		if o[0] == 3 && o[1] == 3 {
			out.wscale = min(o[2], 14)
		}
		o = o[o[1]:]
	}
	// The IP length, not the frame's, says where the payload ends
	// (Ethernet pads short frames); a GSO super-frame is never padded,
	// and its IP length may not cover it all.
	var ipEnd int
	switch {
	case gso:
		ipEnd = len(d)
	case v6:
		ipEnd = l3 + header.IPv6Len + int(binary.BigEndian.Uint16(d[l3+header.IPv6PayloadLenOff:]))
	default:
		ipEnd = l3 + int(binary.BigEndian.Uint16(d[l3+header.IPv4TotalLenOff:]))
	}
	if ipEnd < l4+doff {
		return false
	}
	out.payload = uint32(ipEnd - l4 - doff)
	out.dataOff = l4 + doff
	return true
}

// parseInner reads the tuple of the packet an ICMP error carries (its IP
// header and the first eight bytes behind it) into t.
func parseInner(b []byte, zone uint16, v6 bool, t *Tuple) bool {
	*t = Tuple{Zone: zone, IPv6: v6}
	var l4 []byte
	if v6 {
		if len(b) < header.IPv6Len || b[0]>>4 != 6 {
			return false
		}
		copy(t.Src[:], b[header.IPv6SrcOff:header.IPv6SrcOff+16])
		copy(t.Dst[:], b[header.IPv6DstOff:header.IPv6DstOff+16])
		t.Proto = b[header.IPv6NextHeaderOff]
		l4 = b[header.IPv6Len:]
	} else {
		if len(b) < header.IPv4MinLen || b[0]>>4 != 4 {
			return false
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < header.IPv4MinLen || len(b) < ihl {
			return false
		}
		if binary.BigEndian.Uint16(b[header.IPv4FragOff:])&0x1fff != 0 {
			return false // not the first fragment: no transport header
		}
		t.Src[10], t.Src[11], t.Dst[10], t.Dst[11] = 0xff, 0xff, 0xff, 0xff
		copy(t.Src[12:], b[header.IPv4SrcOff:header.IPv4SrcOff+4])
		copy(t.Dst[12:], b[header.IPv4DstOff:header.IPv4DstOff+4])
		t.Proto = b[header.IPv4ProtoOff]
		l4 = b[ihl:]
	}
	switch t.Proto {
	case header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, 136:
		if len(l4) < 4 {
			return false
		}
		t.SrcPort = binary.BigEndian.Uint16(l4[0:])
		t.DstPort = binary.BigEndian.Uint16(l4[2:])
	case header.IPProtoICMP, header.IPProtoICMPv6:
		if len(l4) < 8 || (t.Proto == header.IPProtoICMPv6) != v6 {
			return false
		}
		// Only a query can have caused an error (never an error).
		if !isICMPQuery(v6, l4[0]) && !isICMPQuery(v6, replyType(v6, l4[0])) {
			return false
		}
		t.ICMPType = l4[0]
		id := binary.BigEndian.Uint16(l4[4:])
		t.SrcPort, t.DstPort = id, id
	}
	return true
}

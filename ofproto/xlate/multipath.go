package xlate

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Open vSwitch's multipath and bundle actions. Both resolve during
// translation: the hash of the packet's fields (the ones the action's
// HashFields names, as the packet is at that point) picks a link number,
// written into a field like a load, or a bundle member, output to or
// loaded, and the fields the hash read join the megaflow mask, so every
// packet the megaflow matches hashes the same. The hashes are Open
// vSwitch's own (flow_hash_fields of lib/flow.c with the portable
// hash_add of lib/hash.h and jhash of lib/jhash.c, on a little-endian
// host), so that the same packet picks the same link or member in both
// switches: the differential tests against ovs-vswitchd depend on it.
//
// Bundle members are live as Options.PortLive says (in Open vSwitch, the
// port exists and may be enabled); IN_PORT, TABLE, NORMAL, FLOOD, ALL and
// NONE always are, CONTROLLER never. Liveness is not in the megaflow: the
// caller invalidates megaflows when it changes, as for select groups.

// multipath executes multipath: the link goes into the destination.
func (x *xlator) multipath(a *ofpwire.ActionMultipath) error {
	if !a.Fields.Valid() || a.DstNBits == 0 || a.DstNBits > 64 {
		return fmt.Errorf("%w: multipath with fields %d into %d bits", ErrUnsupported, a.Fields, a.DstNBits)
	}
	h := x.hashFields(a.Fields, a.Basis)
	link := multipathLink(h, a.Algorithm, a.Links(), a.Arg)
	if x.tr != nil {
		x.traceNote(TraceAction, fmt.Sprintf("multipath: hash %#08x picks link %d of %d", h, link, a.Links()))
	}
	return x.loadBits(a.Dst, int(a.DstOfs), int(a.DstNBits), uint64(link))
}

// bundle executes bundle (output to the member chosen; none live: drop)
// and bundle_load (its 16-bit port number, 0xffff for none, into the
// destination).
func (x *xlator) bundle(a *ofpwire.ActionBundle, table uint8, miss bool) error {
	p := x.bundleMember(a)
	if x.tr != nil {
		if p == ofpwire.PortAny {
			x.traceNote(TraceAction, "bundle: no member is live")
		} else {
			x.traceNote(TraceAction, fmt.Sprintf("bundle: member %d chosen", p))
		}
	}
	if a.Load {
		if a.DstNBits == 0 || a.DstNBits > 64 {
			return fmt.Errorf("%w: bundle_load into %d bits", ErrUnsupported, a.DstNBits)
		}
		return x.loadBits(a.Dst, int(a.DstOfs), int(a.DstNBits), uint64(uint16(p)))
	}
	if p == ofpwire.PortAny {
		return nil
	}
	out := ofpwire.ActionOutput{Port: p}
	return x.output(&out, table, miss)
}

// bundleMember picks a's member: OFPP_ANY (OpenFlow 1.0's OFPP_NONE)
// when none is live.
func (x *xlator) bundleMember(a *ofpwire.ActionBundle) ofpwire.PortNo {
	switch a.Algorithm {
	case ofpwire.BundleActiveBackup:
		for _, m := range a.Members {
			if x.memberLive(m) {
				return m
			}
		}
	case ofpwire.BundleHRW:
		var h uint32
		if len(a.Members) > 1 && a.Fields.Valid() {
			// With one member the hash decides nothing: it is not
			// computed, and the megaflow does not depend on it.
			h = x.hashFields(a.Fields, a.Basis)
		}
		best, bestW := -1, uint32(0)
		for i, m := range a.Members {
			if !x.memberLive(m) {
				continue
			}
			if w := hash2Words(uint32(i), h); best < 0 || w > bestW {
				best, bestW = i, w
			}
		}
		if best >= 0 {
			return a.Members[best]
		}
	}
	return ofpwire.PortAny
}

// memberLive reports whether bundle member m may be chosen.
func (x *xlator) memberLive(m ofpwire.PortNo) bool {
	live := x.opts.PortLive
	if live == nil {
		live = allLive
	}
	switch m {
	case ofpwire.PortIn, ofpwire.PortTable, ofpwire.PortNormal, ofpwire.PortFlood, ofpwire.PortAll, ofpwire.PortAny:
		return true
	case ofpwire.PortController:
		return false
	case ofpwire.PortLocal:
		return x.opts.LocalPort != 0 && live(x.opts.LocalPort)
	}
	return m <= ofpwire.PortMax && live(uint32(m))
}

// loadBits writes the low n bits of v into bits ofs..ofs+n-1 of field f,
// as a load does.
func (x *xlator) loadBits(f ofpwire.XMType, ofs, n int, v uint64) error {
	size, _, ok := ofpwire.FieldSize(f)
	if !ok || n == 0 || n > 64 || ofs+n > 8*size {
		return fmt.Errorf("%w: load into bits %d..%d of field %d", ErrUnsupported, ofs, ofs+n-1, f)
	}
	val, mask := make([]byte, size), make([]byte, size)
	ofpwire.PutBits(val, ofs, n, v)
	ofpwire.PutBits(mask, ofs, n, ^uint64(0))
	return x.setMasked(f, val, mask)
}

// multipathLink turns hash into one of n links by alg (lib/multipath.c).
func multipathLink(hash uint32, alg ofpwire.MultipathAlgorithm, n int, arg uint32) uint16 {
	switch alg {
	case ofpwire.MultipathModuloN:
		return uint16(hash % uint32(n))
	case ofpwire.MultipathHashThreshold:
		if n == 1 {
			return 0
		}
		return uint16(hash / (0xffffffff/uint32(n) + 1))
	case ofpwire.MultipathHRW:
		if n > 64 {
			return iterHash(hash, n, 0)
		}
		best, bestW := 0, hash2Words(hash, 0)
		for l := 1; l < n; l++ {
			if w := hash2Words(hash, uint32(l)); w > bestW {
				best, bestW = l, w
			}
		}
		return uint16(best)
	case ofpwire.MultipathIterHash:
		return iterHash(hash, n, arg)
	}
	return 0
}

// iterHash rehashes hash until its value modulo m (arg, or the power of
// two at or above n when arg is below n or more than twice it) is a link.
func iterHash(hash uint32, n int, arg uint32) uint16 {
	m := uint64(arg)
	if m < uint64(n) || m/2 > uint64(n) {
		m = 1
		for m < uint64(n) {
			m <<= 1
		}
	}
	for i := uint32(0); ; i++ {
		if l := uint64(hash2Words(hash, i)) % m; l < uint64(n) {
			return uint16(l)
		}
	}
}

// hashFields hashes the packet's fields that f names with basis, as Open
// vSwitch's flow_hash_fields does, consulting what it reads.
func (x *xlator) hashFields(f ofpwire.HashFields, basis uint16) uint32 {
	k, b := &x.key, uint32(basis)
	switch f {
	case ofpwire.HashEthSrc:
		x.consult(&flow.Mask{EthSrc: ones6})
		return jhashBytes(k.EthSrc[:], b)
	case ofpwire.HashSymmetricL4:
		return x.hashSymmetricL4(b)
	case ofpwire.HashSymmetricL3L4, ofpwire.HashSymmetricL3L4UDP:
		return x.hashSymmetricL3L4(b, f == ofpwire.HashSymmetricL3L4UDP)
	case ofpwire.HashNwSrc, ofpwire.HashNwDst:
		src := f == ofpwire.HashNwSrc
		x.consult(&flow.Mask{EthType: 0xffff})
		switch k.EthType {
		case header.EtherTypeIPv4:
			var a [4]byte
			if src {
				x.consult(&flow.Mask{IPv4Src: ^uint32(0)})
				binary.BigEndian.PutUint32(a[:], k.IPv4Src)
			} else {
				x.consult(&flow.Mask{IPv4Dst: ^uint32(0)})
				binary.BigEndian.PutUint32(a[:], k.IPv4Dst)
			}
			return jhashBytes(a[:], b)
		case header.EtherTypeIPv6:
			if src {
				x.consult(&flow.Mask{IPv6Src: ones16})
				return jhashBytes(k.IPv6Src[:], b)
			}
			x.consult(&flow.Mask{IPv6Dst: ones16})
			return jhashBytes(k.IPv6Dst[:], b)
		}
		return b
	case ofpwire.HashSymmetricL3:
		// struct { union { be32; in6_addr }; be16 eth_type; }: 20 bytes.
		var s [20]byte
		x.xorAddrs(s[:16])
		binary.BigEndian.PutUint16(s[16:], k.EthType)
		return jhashBytes(s[:], b)
	}
	return b
}

// xorAddrs puts the XOR of the packet's IPv4 or IPv6 source and
// destination into a (16 bytes: an IPv4 one in the first 4), consulting
// the Ethernet type and the addresses; a non-IP packet leaves a zero.
func (x *xlator) xorAddrs(a []byte) (ip bool) {
	k := &x.key
	x.consult(&flow.Mask{EthType: 0xffff})
	switch k.EthType {
	case header.EtherTypeIPv4:
		x.consult(&flow.Mask{IPv4Src: ^uint32(0), IPv4Dst: ^uint32(0)})
		binary.BigEndian.PutUint32(a, k.IPv4Src^k.IPv4Dst)
		return true
	case header.EtherTypeIPv6:
		x.consult(&flow.Mask{IPv6Src: ones16, IPv6Dst: ones16})
		for i := range 16 {
			a[i] = k.IPv6Src[i] ^ k.IPv6Dst[i]
		}
		return true
	}
	return false
}

// l2Symmetric consults and returns what the symmetric hashes take from
// L2: the XOR of the Ethernet addresses and of the tags' VLAN IDs.
func (x *xlator) l2Symmetric() (eth [6]byte, vid uint16) {
	k := &x.key
	var m flow.Mask
	m.EthSrc, m.EthDst = ones6, ones6
	m.VLAN[0].TCI, m.VLAN[1].TCI = 0x0fff, 0x0fff
	x.consult(&m)
	for i := range eth {
		eth[i] = k.EthSrc[i] ^ k.EthDst[i]
	}
	return eth, (k.VLAN[0].TCI ^ k.VLAN[1].TCI) & 0x0fff
}

// hashSymmetricL4 is flow_hash_symmetric_l4: jhash of
// struct { union { be32; in6_addr }; be16 eth_type, vlan_tci, tp_port;
// eth_addr; u8 ip_proto; } (32 bytes with its padding).
func (x *xlator) hashSymmetricL4(basis uint32) uint32 {
	k := &x.key
	var s [32]byte
	eth, vid := x.l2Symmetric()
	if x.xorAddrs(s[:16]) {
		x.consult(&flow.Mask{NwProto: 0xff})
		s[28] = k.NwProto
		if k.NwProto == header.IPProtoTCP || k.NwProto == header.IPProtoSCTP {
			x.consult(&flow.Mask{TpSrc: 0xffff, TpDst: 0xffff})
			binary.BigEndian.PutUint16(s[20:], k.TpSrc^k.TpDst)
		}
	}
	binary.BigEndian.PutUint16(s[16:], k.EthType)
	binary.BigEndian.PutUint16(s[18:], vid)
	copy(s[22:28], eth[:])
	return jhashBytes(s[:], basis)
}

// hashSymmetricL3L4 is flow_hash_symmetric_l3l4: the addresses, protocol
// and (unfragmented TCP and SCTP, and UDP when udp) ports, word by word;
// for a non-IP packet, flow_hash_symmetric_l2.
func (x *xlator) hashSymmetricL3L4(basis uint32, udp bool) uint32 {
	k := &x.key
	var a [16]byte
	if !x.xorAddrs(a[:]) {
		eth, vid := x.l2Symmetric()
		// struct { be16 eth_type, vlan_tci; eth_addr; be16 pad; } as
		// three host (little-endian) words.
		var s [12]byte
		binary.BigEndian.PutUint16(s[0:], k.EthType)
		binary.BigEndian.PutUint16(s[2:], vid)
		copy(s[4:10], eth[:])
		h := basis
		for i := 0; i < 12; i += 4 {
			h = hashAdd(h, binary.LittleEndian.Uint32(s[i:]))
		}
		return hashFinish(h, basis)
	}
	h := basis
	if k.EthType == header.EtherTypeIPv4 {
		h = hashAdd(h, binary.LittleEndian.Uint32(a[:4]))
	} else {
		for i := 0; i < 16; i += 4 {
			h = hashAdd(h, binary.LittleEndian.Uint32(a[i:]))
		}
	}
	x.consult(&flow.Mask{NwProto: 0xff, NwFrag: flow.FragAny})
	h = hashAdd(h, uint32(k.NwProto))
	p := k.NwProto
	if k.NwFrag&flow.FragAny == 0 && (p == header.IPProtoTCP || p == header.IPProtoSCTP || udp && p == header.IPProtoUDP) {
		x.consult(&flow.Mask{TpSrc: 0xffff, TpDst: 0xffff})
		h = hashAdd(h, uint32(bits.ReverseBytes16(k.TpSrc^k.TpDst)))
	}
	return hashFinish(h, basis)
}

// Open vSwitch's portable hash primitives (lib/hash.h without SSE 4.2,
// as Debian builds it): a murmur3-style word step and finish.

func hashAdd(h, d uint32) uint32 {
	if d != 0 {
		d *= 0xcc9e2d51
		d = bits.RotateLeft32(d, 15)
		d *= 0x1b873593
		h ^= d
	}
	h = bits.RotateLeft32(h, 13)
	return h*5 + 0xe6546b64
}

func hashFinish(h, final uint32) uint32 {
	h ^= final
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func hash2Words(a, b uint32) uint32 {
	return hashFinish(hashAdd(hashAdd(a, 0), b), 8)
}

// jhashBytes is Bob Jenkins' lookup3 over p as Open vSwitch runs it
// (lib/jhash.c): little-endian words, the tail zero-padded, and no final
// mix when p is a whole number of 12-byte blocks.
func jhashBytes(p []byte, basis uint32) uint32 {
	a := 0xdeadbeef + uint32(len(p)) + basis
	b, c := a, a
	for len(p) >= 12 {
		a += binary.LittleEndian.Uint32(p)
		b += binary.LittleEndian.Uint32(p[4:])
		c += binary.LittleEndian.Uint32(p[8:])
		a, b, c = jhashMix(a, b, c)
		p = p[12:]
	}
	if len(p) > 0 {
		var t [12]byte
		copy(t[:], p)
		a += binary.LittleEndian.Uint32(t[:])
		b += binary.LittleEndian.Uint32(t[4:])
		c += binary.LittleEndian.Uint32(t[8:])
		_, _, c = jhashFinal(a, b, c)
	}
	return c
}

func jhashMix(a, b, c uint32) (uint32, uint32, uint32) {
	a -= c
	a ^= bits.RotateLeft32(c, 4)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 6)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 8)
	b += a
	a -= c
	a ^= bits.RotateLeft32(c, 16)
	c += b
	b -= a
	b ^= bits.RotateLeft32(a, 19)
	a += c
	c -= b
	c ^= bits.RotateLeft32(b, 4)
	b += a
	return a, b, c
}

func jhashFinal(a, b, c uint32) (uint32, uint32, uint32) {
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return a, b, c
}

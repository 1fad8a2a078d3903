// Package flow defines the datapath flow key: the fixed-layout record of every
// header field a packet is classified on, its masks, and extraction from raw
// frames. It is a leaf package: the packet, classifier and datapath packages
// build on it, and it imports nothing of theirs.
package flow

import (
	"math/bits"
	"unsafe"
)

// KeyWords is the size of a Key in 64-bit words. Masking, hashing and
// comparison work word by word, so the layout below has no implicit padding:
// every byte belongs to a named field (explicit pad fields are always zero).
// Words 0-14 describe the frame; words 15-20 are tunnel metadata and words
// 21-28 connection-tracking state, neither of which the frame carries (see
// Tunnel and Conntrack).
const KeyWords = 29

// Tunnel flag bits in Tunnel.Flags: Open vSwitch's FLOW_TNL_F_* values, so
// that OpenFlow's tun_flags (NXM_NX_TUN_FLAGS, whose only public bit is
// OAM) maps onto the field bit for bit. TunFlagKey says the tunnel header
// carried a key (VXLAN's I flag; a Geneve VNI is always present).
const (
	TunFlagOAM          = 1 << 0 // Geneve O bit: control traffic
	TunFlagDontFragment = 1 << 1 // outer IPv4 DF set (or to be set)
	TunFlagCsum         = 1 << 2 // outer UDP checksum present (or to compute)
	TunFlagKey          = 1 << 3 // the header carried a key (VNI)

	// TunFlagOptIndex holds, plus one, the index N of the tun_metadataN
	// field whose Geneve option Tunnel.Opt carries (0: none). Open
	// vSwitch keeps up to 64 options in 256 bytes; this key has room for
	// one 4-byte option, what OVN maps (class 0x0102, type 0x80), and
	// tracks which field it is, so a match on tun_metadataN is a match
	// on these bits and Opt with no mapping table in the classifier.
	TunFlagOptIndex      = 0x7f << TunFlagOptIndexShift
	TunFlagOptIndexShift = 8

	// TunFlagsPublic are the bits OpenFlow's tun_flags can match.
	TunFlagsPublic = TunFlagOAM
)

// Tunnel is the outer header of a packet that arrived through a tunnel port,
// or the outer header set-field chose for a later output to a flow-based
// tunnel port (remote_ip=flow). It is part of the key so that flows match
// on it, but Extract never fills it: the tunnel port hands it to the PMD
// beside the inner frame (packet.Packet.Tunnel).
//
// Both address families share one 16-byte field per address: an IPv4
// address is stored IPv4-mapped (::ffff:a.b.c.d). A match on OpenFlow's
// tun_src (IPv4) then constrains the ::ffff: prefix too, so it never
// matches an IPv6 underlay, and the key spends four words on addresses
// instead of five.
type Tunnel struct {
	Src, Dst [16]byte // outer source and destination; zero = unset
	Flags    uint16   // TunFlag*
	TOS      uint8    // outer IPv4 TOS / IPv6 traffic class
	TTL      uint8    // outer TTL / hop limit (0 on output: the port's default)
	// Opt is the data of the Geneve option the TLV table maps to the
	// field TunFlagOptIndex names, right-aligned (a shorter option leaves
	// the first bytes zero).
	Opt [4]byte
}

// OptIndex returns N when t carries tun_metadataN, else -1.
func (t *Tunnel) OptIndex() int {
	return int(t.Flags&TunFlagOptIndex>>TunFlagOptIndexShift) - 1
}

// SetOpt makes t carry tun_metadataN (n in 0..63) with value v, or none
// when n is negative.
func (t *Tunnel) SetOpt(n int, v [4]byte) {
	t.Flags &^= TunFlagOptIndex
	t.Opt = [4]byte{}
	if n >= 0 {
		t.Flags |= uint16(n+1) << TunFlagOptIndexShift
		t.Opt = v
	}
}

// IsZero reports whether no tunnel metadata is set.
func (t *Tunnel) IsZero() bool { return *t == Tunnel{} }

// Connection-tracking state bits in Conntrack.State: Open vSwitch's CS_*
// values, so that OpenFlow's ct_state maps onto the field bit for bit.
const (
	CTNew         = 1 << 0 // the packet starts a connection (or would)
	CTEstablished = 1 << 1 // part of a connection seen both ways
	CTRelated     = 1 << 2 // related to a connection (an ICMP error about it)
	CTReply       = 1 << 3 // in the reply direction
	CTInvalid     = 1 << 4 // the tracker could not make sense of it
	CTTracked     = 1 << 5 // ct has seen the packet: the other fields are set
	CTSrcNAT      = 1 << 6 // its connection's source is translated
	CTDstNAT      = 1 << 7 // its connection's destination is translated
)

// Conntrack is what the connection tracker said about the packet: zero
// (untracked) until a ct action runs, then the state and the connection's
// zone, mark, label and original-direction tuple, which later passes
// (recirculation after ct) match on. Like Tunnel, it is part of the key
// but never extracted from the frame.
//
// Src and Dst hold both address families as Tunnel does: an IPv4 address
// IPv4-mapped, so a match on ct_nw_src constrains the ::ffff: prefix.
type Conntrack struct {
	State   uint8 // CT* bits
	NwProto uint8 // original direction's IP protocol
	Zone    uint16
	Mark    uint32
	Label   [16]byte // 128-bit ct_label, most significant byte first
	TpSrc   uint16   // original direction's ports (ICMP: type, code)
	TpDst   uint16
	Pad     uint32 // always zero
	Src     [16]byte
	Dst     [16]byte
}

// Head returns c's first word: State, NwProto, Zone and Mark, the fields
// a recirculated pass matches most, in the byte order of the machine (the
// key's words are read in place). One load: the tracker writes the word
// with one store (SetHead), so the load takes it from the store buffer,
// where one wide load over several narrow stores would wait for them to
// reach the cache (~4 ns a packet).
func (c *Conntrack) Head() uint64 {
	return *(*uint64)(unsafe.Pointer(c))
}

// SetHead writes State, NwProto, Zone and Mark in one store (see Head;
// field by field on a big-endian machine).
func (c *Conntrack) SetHead(state, nwProto uint8, zone uint16, mark uint32) {
	if !nativeLE {
		c.State, c.NwProto, c.Zone, c.Mark = state, nwProto, zone, mark
		return
	}
	*(*uint64)(unsafe.Pointer(c)) = uint64(state) | uint64(nwProto)<<8 | uint64(zone)<<16 | uint64(mark)<<32
}

// VLANTag is one 802.1Q/802.1ad tag as seen on the wire. A tag that is
// present always has TPID != 0; an absent tag is all zero.
//
// Every TPID Extract stores (0x8100, 0x88a8, 0x9100) has bit 15 set, so
// "a tag is present" is the plain bitmask test TPID&TPIDPresent ==
// TPIDPresent and "no tag" is TPID&TPIDPresent == 0. OpenFlow's
// OFPVID_PRESENT maps onto that bit: a match on tag presence is then one
// bit of a megaflow mask, like any other field bit, instead of a special
// case.
type VLANTag struct {
	TPID uint16 // 0x8100 or 0x88a8 (0x9100 accepted as the outer tag); 0 = no tag
	TCI  uint16 // PCP(3) DEI(1) VID(12)
}

// TPIDPresent is the TPID bit that every tag Extract stores has set (see
// VLANTag).
const TPIDPresent = 0x8000

// Fragment bits in Key.NwFrag, as in Open vSwitch.
const (
	FragAny   = 1 << 0 // the packet is an IP fragment (first or later)
	FragLater = 1 << 1 // not the first fragment: no L4 header
)

// IPv6 extension-header bits in Key.IPv6ExtHdr: OpenFlow 1.3's
// OFPIEH_* values, so that OXM_OF_IPV6_EXTHDR maps onto the field bit for
// bit. They describe the extension headers Extract walked over (a later
// fragment hides the headers behind its fragment header).
const (
	ExtHdrNoNext = 1 << 0 // a "no next header" value was reached
	ExtHdrESP    = 1 << 1 // encapsulating security payload
	ExtHdrAuth   = 1 << 2 // authentication header
	ExtHdrDest   = 1 << 3 // one or two destination options headers
	ExtHdrFrag   = 1 << 4 // fragment header
	ExtHdrRouter = 1 << 5 // routing header
	ExtHdrHop    = 1 << 6 // hop-by-hop options header
	ExtHdrUnrep  = 1 << 7 // a header type appeared more often than allowed
	ExtHdrUnseq  = 1 << 8 // headers not in RFC 2460's preferred order
)

// Key is the flow key of one packet. Field semantics follow Open vSwitch's
// struct flow where they overlap:
//   - ARP: NwProto holds the opcode (low 8 bits), IPv4Src/IPv4Dst the sender
//     and target protocol addresses, ArpSHA/ArpTHA the hardware addresses.
//   - ICMPv4/ICMPv6: TpSrc holds the type, TpDst the code.
//   - IPv6 neighbour discovery: NDTarget, and the source/target link-layer
//     address options in ArpSHA/ArpTHA.
//   - EthType is the type after all VLAN tags (and 0x05ff for 802.3 frames
//     without a SNAP/Ethernet II type, as OVS does).
//   - Fields OpenFlow 1.3 matches on and OVS's struct flow lacks:
//     IPv6ExtHdr (OXM_OF_IPV6_EXTHDR), PBBISID (OXM_OF_PBB_ISID) and
//     TunnelID (OXM_OF_TUNNEL_ID, set by tunnel ports, not by Extract).
//     OpenFlow's metadata register is pipeline state, not part of the key.
//
// Integer fields are in host byte order; address fields are byte arrays in
// network order.
type Key struct {
	// word 0
	InPort  uint32 // datapath port number the packet arrived on
	EthType uint16
	NwProto uint8
	NwFrag  uint8 // FragAny|FragLater
	// words 1-2
	EthDst   [6]byte
	NwTOS    uint8 // DSCP (high 6 bits) and ECN (low 2 bits)
	NwTTL    uint8 // IPv4 TTL / IPv6 hop limit
	EthSrc   [6]byte
	TCPFlags uint16 // low 12 bits of the TCP flags field
	// word 3
	VLAN [2]VLANTag // outer first
	// words 4-5
	IPv4Src   uint32
	IPv4Dst   uint32
	TpSrc     uint16
	TpDst     uint16
	IPv6Label uint32 // 20-bit flow label
	// words 6-11
	IPv6Src  [16]byte
	IPv6Dst  [16]byte
	NDTarget [16]byte
	// words 12-13
	ArpSHA     [6]byte
	IPv6ExtHdr uint16 // ExtHdr* bits; zero unless EthType is IPv6
	ArpTHA     [6]byte
	// RecircID is 0 for a packet's first pass through the caches and the
	// id of a recirc action for the passes after (see datapath's
	// recirculation); it has no bytes in the frame. 16 bits is what the
	// key had spare without a 22nd word.
	RecircID uint16
	// word 14
	MPLSLse uint32 // top MPLS label stack entry as on the wire (0 = none)
	PBBISID uint32 // 24-bit I-SID of a PBB I-TAG (EthType 0x88e7)
	// word 15
	TunnelID uint64 // tunnel key (VNI) the packet came in with or is to be sent with (0 = none)
	// words 16-20
	Tun Tunnel
	// words 21-28
	CT Conntrack
}

// The key must be exactly KeyWords words: Words() views it as an array.
var _ [KeyWords * 8]byte = [unsafe.Sizeof(Key{})]byte{}

// Mask has the layout of Key: a 1 bit means the field bit is significant.
type Mask = Key

// Match is a key with the mask it is to be compared under. Key is expected to
// be already masked (Key == Key & Mask).
type Match struct {
	Key  Key
	Mask Mask
}

// Words views a key as its 64-bit words, for masking, hashing and comparing.
func (k *Key) Words() *[KeyWords]uint64 {
	return (*[KeyWords]uint64)(unsafe.Pointer(k))
}

// Equal reports whether two keys are identical.
//
// The struct comparison compiles to one vectorised memory compare, cheaper
// than a word loop with a branch per word now that the key has 29 words.
func (k *Key) Equal(o *Key) bool {
	return *k == *o
}

// ApplyMask sets dst to k & m.
func (k *Key) ApplyMask(m *Mask, dst *Key) {
	a, mw, d := k.Words(), m.Words(), dst.Words()
	for i := range a {
		d[i] = a[i] & mw[i]
	}
}

// MatchesMasked reports whether k & m == masked (masked must already be
// masked by m).
func (k *Key) MatchesMasked(m *Mask, masked *Key) bool {
	a, mw, b := k.Words(), m.Words(), masked.Words()
	for i := range a {
		if a[i]&mw[i] != b[i] {
			return false
		}
	}
	return true
}

// IsZero reports whether every bit of k is zero.
func (k *Key) IsZero() bool {
	for _, w := range k.Words() {
		if w != 0 {
			return false
		}
	}
	return true
}

// Or sets k to k | o (used to accumulate the wildcard masks of every field a
// translation consulted).
func (k *Key) Or(o *Key) {
	a, b := k.Words(), o.Words()
	for i := range a {
		a[i] |= b[i]
	}
}

// hashSeeds gives every key word its own pair of odd constants, so that
// each word is mixed independently of the others: the multiplies do not
// depend on each other and the CPU runs them in parallel (a serial chain
// over all the words cost more than the rest of the fast path together).
var hashSeeds = func() (s [KeyWords][2]uint64) {
	x := uint64(0x243f6a8885a308d3)
	next := func() uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	for i := range s {
		s[i] = [2]uint64{next(), next() | 1}
	}
	return s
}()

// mixWord multiplies by an odd per-word constant: one single-uop multiply,
// independent of the other words. The low product bits depend only on low
// input bits, so finish folds the high half back in with a full multiply.
func mixWord(i int, w uint64) uint64 {
	return (w ^ hashSeeds[i][0]) * hashSeeds[i][1]
}

func finish(h uint64) uint32 {
	hi, lo := bits.Mul64(h^h>>32, 0x9e3779b97f4a7c15)
	return uint32(hi ^ lo)
}

// Hash returns a 32-bit hash of the whole key, for the exact-match cache.
// (ExtractFast computes the same function in registers for the keys it
// builds; the two must change together.) It folds the 29 words into five
// lanes with rotate-and-xor (one cycle each) and multiplies each lane
// once, independently: every bit of the key counts and the cost is a
// handful of cycles. Collisions only cost a cache miss, since lookups
// compare the whole key.
func (k *Key) Hash() uint32 {
	w := k.Words()
	rl := bits.RotateLeft64
	l0 := (w[0] ^ rl(w[1], 17) ^ rl(w[15], 53)) * hashM0
	// Words 16-20 (tunnel metadata) are zero for most packets; they share
	// lane 1 so a non-tunnel key costs four extra xors, no multiply. The
	// conntrack words 21-28 share lanes 3 and 4, zero unless tracked.
	l1 := (w[4] ^ rl(w[2], 29) ^ w[16] ^ rl(w[17], 19) ^ rl(w[18], 37) ^ rl(w[19], 51) ^ rl(w[20], 5)) * hashM1
	l2 := (w[5] ^ rl(w[3], 41) ^ rl(w[14], 7)) * hashM2
	l3 := (w[6] ^ rl(w[7], 11) ^ rl(w[8], 23) ^ rl(w[9], 37) ^ rl(w[21], 3) ^ rl(w[22], 17) ^ rl(w[23], 29) ^ rl(w[24], 43)) * hashM3
	l4 := (w[10] ^ rl(w[11], 13) ^ rl(w[12], 31) ^ rl(w[13], 47) ^ rl(w[25], 7) ^ rl(w[26], 21) ^ rl(w[27], 39) ^ rl(w[28], 55)) * hashM4
	return finish(l0 + rl(l1, 13) + rl(l2, 26) + rl(l3, 39) + rl(l4, 52))
}

// MaskedHash hashes k & m over only the listed word indices (the words where
// m is non-zero, precomputed by the caller). Two keys equal under m hash the
// same when given the same index list.
func (k *Key) MaskedHash(m *Mask, words []uint8) uint32 {
	a, mw := k.Words(), m.Words()
	var h uint64
	for _, i := range words {
		h += mixWord(int(i), a[i]&mw[i])
	}
	return finish(h)
}

// NonZeroWords appends to dst the indices of the words of m that are not
// zero and returns the result.
func (m *Key) NonZeroWords(dst []uint8) []uint8 {
	for i, w := range m.Words() {
		if w != 0 {
			dst = append(dst, uint8(i))
		}
	}
	return dst
}

// Offsets records where the headers of a parsed packet start, as byte offsets
// from the start of the frame; a header that is absent has offset NoOffset.
// Actions use them to rewrite fields without parsing the packet again.
type Offsets struct {
	L3 uint16 // network header (after all VLAN/MPLS headers)
	L4 uint16 // transport header (TCP/UDP/SCTP/ICMP); NoOffset for later fragments
}

// NoOffset marks an absent header in Offsets.
const NoOffset = 0xffff

// Status reports what extraction found wrong with a packet. The key is
// filled as far as the packet parsed, so a packet with a non-zero status is
// still classifiable; the datapath counts it.
type Status uint8

const (
	// Truncated: a header was cut short by the end of the frame.
	Truncated Status = 1 << iota
	// Malformed: a header had an impossible value (bad IHL, bad lengths, ...).
	Malformed
)

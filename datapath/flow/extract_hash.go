package flow

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// ShortWords is how many leading words of a key hold every field of an
// Ethernet/IPv4 (or VLAN) key without tunnel metadata, ARP, IPv6, MPLS or
// PBB fields, and not recirculated: a key whose words from ShortWords on
// are all zero is "short". Comparing two short keys needs only their first
// ShortWords words, a third of the whole.
const ShortWords = 6

// hash multipliers of Hash's five lanes.
const (
	hashM0 = 0x9e3779b97f4a7c15
	hashM1 = 0xc2b2ae3d27d4eb4f
	hashM2 = 0x165667b19e3779f9
	hashM3 = 0xd6e8feb86659fd93
	hashM4 = 0xff51afd7ed558ccd
)

// IsShort reports whether every word of k from ShortWords on is zero.
func (k *Key) IsShort() bool {
	w := k.Words()
	return w[6]|w[7]|w[8]|w[9]|w[10]|w[11]|w[12]|w[13]|w[14]|w[15]|w[16]|w[17]|w[18]|w[19]|w[20]|
		w[21]|w[22]|w[23]|w[24]|w[25]|w[26]|w[27]|w[28] == 0
}

// EqualShort reports whether two short keys (IsShort) are identical: for
// such keys it is Equal at a third of the loads.
func (k *Key) EqualShort(o *Key) bool {
	a := (*[ShortWords]uint64)(unsafe.Pointer(k))
	b := (*[ShortWords]uint64)(unsafe.Pointer(o))
	return (a[0]^b[0])|(a[1]^b[1])|(a[2]^b[2])|(a[3]^b[3])|(a[4]^b[4])|(a[5]^b[5]) == 0
}

// nativeLE: the fast path builds key words as integers, which matches the
// struct's memory only on a little-endian machine.
var nativeLE = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// ExtractHash is Extract followed by Hash: it fills k and off as Extract
// does and returns Extract's status, k.Hash() and k.IsShort(). Frames that
// ExtractFast takes cost what it costs; every other frame takes Extract and
// Hash back to back (see ExtractFast for why a batch should not).
func ExtractHash(data []byte, inPort uint32, k *Key, off *Offsets) (st Status, hash uint32, short bool) {
	if h, ok := ExtractFast(data, inPort, k, off); ok {
		return 0, h, true
	}
	if slowPathHook != nil {
		slowPathHook()
	}
	st = Extract(data, inPort, k, off)
	return st, k.Hash(), k.IsShort()
}

// ExtractFast is Extract and Hash for the packets a switch forwards most,
// untagged IPv4 TCP or UDP with a 20-byte header, no fragment and no
// truncation: it reads the frame once, builds the six non-zero key words
// in registers and hashes them there, fills k and off as Extract would, and
// returns the hash of k, which is short (IsShort). For any other frame it
// reports false and writes nothing.
//
// Hashing a key right after Extract filled it is slow: the hash loads whole
// words that Extract stored field by field, and such a load waits until
// those stores reach the cache. A caller with a batch should Extract every
// frame ExtractFast refused before hashing any of them.
func ExtractFast(data []byte, inPort uint32, k *Key, off *Offsets) (hash uint32, ok bool) {
	if len(data) < 54 || !nativeLE {
		return 0, false
	}
	f := (*[54]byte)(data)
	totLen := int(f[16])<<8 | int(f[17])
	frag := (uint16(f[20])<<8 | uint16(f[21])) & 0x3fff
	// EtherType IPv4, version 4 with a 20-byte header, all of the IP
	// length in the frame, not a fragment.
	if f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || totLen < 20 || 14+totLen > len(data) || frag != 0 {
		return 0, false
	}
	proto := f[23]
	var flags uint64
	switch proto {
	case header.IPProtoUDP: // the whole 8-byte header inside the IP length
		if totLen < 28 {
			return 0, false
		}
	case header.IPProtoTCP: // 20 bytes, data offset at least 5
		if totLen < 40 || f[46]>>4 < 5 {
			return 0, false
		}
		flags = uint64(f[46]&0x0f)<<8 | uint64(f[47])
	default:
		return 0, false
	}
	const m48 = 1<<48 - 1
	w0 := uint64(inPort) | header.EtherTypeIPv4<<32 | uint64(proto)<<48
	w1 := binary.LittleEndian.Uint64(f[0:8])&m48 | uint64(f[15])<<48 | uint64(f[22])<<56
	w2 := binary.LittleEndian.Uint64(f[4:12])>>16 | flags<<48
	w4 := uint64(binary.BigEndian.Uint32(f[26:30])) | uint64(binary.BigEndian.Uint32(f[30:34]))<<32
	w5 := uint64(bits.RotateLeft32(binary.BigEndian.Uint32(f[34:38]), 16)) // TpSrc | TpDst<<16
	// Word by word: a composite literal is built on the stack and copied,
	// and the copy's 16-byte loads stall on the 8-byte stores before them.
	kw := k.Words()
	kw[0], kw[1], kw[2], kw[3], kw[4], kw[5] = w0, w1, w2, 0, w4, w5
	clear(kw[ShortWords:])
	off.L3, off.L4 = 14, 34
	// Hash with words 3 and 6-28 zero: lanes 3 and 4 vanish, and so do
	// the zero terms of the others. Must stay Hash's function.
	rl := bits.RotateLeft64
	l0 := (w0 ^ rl(w1, 17)) * hashM0
	l1 := (w4 ^ rl(w2, 29)) * hashM1
	l2 := w5 * hashM2
	return finish(l0 + rl(l1, 13) + rl(l2, 26)), true
}

// slowPathHook, set only by tests, runs on every frame of ExtractHash that
// ExtractFast refused, so that tests can check the fast path is taken, not
// only that both paths agree.
var slowPathHook func()

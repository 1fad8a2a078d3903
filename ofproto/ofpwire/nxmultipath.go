package ofpwire

import (
	"fmt"
	"strings"

	"github.com/netrack/openflow/ofp"
)

// Open vSwitch's multipath and bundle actions (NXAST_MULTIPATH,
// NXAST_BUNDLE, NXAST_BUNDLE_LOAD): a hash of chosen packet fields picks
// a link number into a field (multipath), or one port of a list, by
// liveness and optionally the hash, to output to (bundle) or to write
// into a field (bundle_load). Decoding refuses what Open vSwitch refuses,
// with its codes (lib/ofp-actions.c, lib/bundle.c, lib/multipath.c).

const (
	nxastMultipath  = 10
	nxastBundle     = 12
	nxastBundleLoad = 13
)

// HashFields says which packet fields multipath and bundle hash (Open
// vSwitch's NX_HASH_FIELDS_*).
type HashFields uint16

// The NX_HASH_FIELDS_* values.
const (
	// HashEthSrc hashes the Ethernet source only.
	HashEthSrc HashFields = iota
	// HashSymmetricL4 hashes the Ethernet addresses, type and VLAN IDs,
	// and for IP the protocol, addresses and TCP/SCTP ports, the same
	// both ways.
	HashSymmetricL4
	// HashSymmetricL3L4 hashes the IP addresses and protocol and the
	// TCP/SCTP ports of an unfragmented packet, the same both ways; the
	// L2 fields of a non-IP packet.
	HashSymmetricL3L4
	// HashSymmetricL3L4UDP is HashSymmetricL3L4 with UDP ports too.
	HashSymmetricL3L4UDP
	// HashNwSrc hashes the IPv4 or IPv6 source.
	HashNwSrc
	// HashNwDst hashes the IPv4 or IPv6 destination.
	HashNwDst
	// HashSymmetricL3 hashes the IP addresses, the same both ways.
	HashSymmetricL3
	numHashFields
)

var hashFieldNames = [numHashFields]string{"eth_src", "symmetric_l4", "symmetric_l3l4", "symmetric_l3l4+udp", "nw_src", "nw_dst", "symmetric_l3"}

// Valid reports whether h is one of the NX_HASH_FIELDS_* values.
func (h HashFields) Valid() bool { return h < numHashFields }

// String is the name ovs-ofctl gives h ("<unknown>" for an invalid one).
func (h HashFields) String() string {
	if !h.Valid() {
		return "<unknown>"
	}
	return hashFieldNames[h]
}

// HashFieldsByName finds the HashFields ovs-ofctl names name (any case).
func HashFieldsByName(name string) (HashFields, bool) {
	for i, n := range hashFieldNames {
		if strings.EqualFold(n, name) {
			return HashFields(i), true
		}
	}
	return 0, false
}

// MultipathAlgorithm is how multipath turns the hash into a link
// (NX_MP_ALG_*).
type MultipathAlgorithm uint16

// The NX_MP_ALG_* values.
const (
	// MultipathModuloN is hash mod n_links.
	MultipathModuloN MultipathAlgorithm = iota
	// MultipathHashThreshold divides the hash space into n_links equal
	// ranges.
	MultipathHashThreshold
	// MultipathHRW is highest random weight: the link whose hash with
	// the flow's hash is largest (iterated hashing beyond 64 links).
	MultipathHRW
	// MultipathIterHash rehashes until the value mod Arg (a power of 2
	// at least n_links) is a link.
	MultipathIterHash
	numMultipathAlgs
)

var multipathAlgNames = [numMultipathAlgs]string{"modulo_n", "hash_threshold", "hrw", "iter_hash"}

// String is the name ovs-ofctl gives a ("<unknown>" for others).
func (a MultipathAlgorithm) String() string {
	if a >= numMultipathAlgs {
		return "<unknown>"
	}
	return multipathAlgNames[a]
}

// MultipathAlgorithmByName finds the algorithm ovs-ofctl names name.
func MultipathAlgorithmByName(name string) (MultipathAlgorithm, bool) {
	for i, n := range multipathAlgNames {
		if strings.EqualFold(n, name) {
			return MultipathAlgorithm(i), true
		}
	}
	return 0, false
}

// BundleAlgorithm is how bundle picks a member (NX_BD_ALG_*).
type BundleAlgorithm uint16

// The NX_BD_ALG_* values.
const (
	// BundleActiveBackup picks the first live member.
	BundleActiveBackup BundleAlgorithm = 0
	// BundleHRW picks the live member of highest random weight: the
	// largest hash of the flow's hash with the member's index.
	BundleHRW BundleAlgorithm = 1
)

// String is the name ovs-ofctl gives a.
func (a BundleAlgorithm) String() string {
	switch a {
	case BundleActiveBackup:
		return "active_backup"
	case BundleHRW:
		return "hrw"
	}
	return "<unknown>"
}

// BundleAlgorithmByName finds the algorithm ovs-ofctl names name.
func BundleAlgorithmByName(name string) (BundleAlgorithm, bool) {
	switch {
	case strings.EqualFold(name, "active_backup"):
		return BundleActiveBackup, true
	case strings.EqualFold(name, "hrw"):
		return BundleHRW, true
	}
	return 0, false
}

// MaxBundleMembers bounds a bundle's member list, as in Open vSwitch.
const MaxBundleMembers = 2048

// errBadOutPort refuses a bundle member no output may name.
var errBadOutPort = newErr(ETBadAction, BACBadOutPort)

// nxmInPort is the NXM header of NXM_OF_IN_PORT, the only member type.
const nxmInPort = 0x00000002

// ActionMultipath hashes Fields of the packet (with basis Basis), picks
// one of MaxLink+1 links from the hash by Algorithm (Arg is iter_hash's
// modulus), and writes the link number into bits DstOfs..DstOfs+DstNBits-1
// of field Dst.
type ActionMultipath struct {
	Fields           HashFields
	Basis            uint16
	Algorithm        MultipathAlgorithm
	MaxLink          uint16
	Arg              uint32
	Dst              ofp.XMType
	DstOfs, DstNBits uint16
}

// ActionBundle picks one of Members (OpenFlow port numbers; reserved
// ports as their 32-bit OFPP_* values, OFPP_ANY standing for OpenFlow
// 1.0's OFPP_NONE) by Algorithm, hashing Fields with basis Basis for
// hrw, and outputs to it (bundle) or, with Load, writes its 16-bit
// number into bits DstOfs..DstOfs+DstNBits-1 of Dst (bundle_load). When
// no member is live the choice is OFPP_NONE: bundle drops, bundle_load
// writes 0xffff.
type ActionBundle struct {
	Algorithm        BundleAlgorithm
	Fields           HashFields
	Basis            uint16
	Members          []ofp.PortNo
	Load             bool
	Dst              ofp.XMType
	DstOfs, DstNBits uint16
}

// ActionType implements Action.
func (*ActionMultipath) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// ActionType implements Action.
func (*ActionBundle) ActionType() ofp.ActionType { return ofp.ActionTypeExperimenter }

// Links is the number of links multipath chooses among.
func (a *ActionMultipath) Links() int { return int(a.MaxLink) + 1 }

func (a *ActionMultipath) appendTo(b []byte) ([]byte, error) {
	h, err := subfieldHeader("multipath", a.Dst, a.DstOfs, a.DstNBits)
	if err != nil {
		return b, err
	}
	b = nxHeader(b, 32, nxastMultipath)
	b = be.AppendUint16(b, uint16(a.Fields))
	b = be.AppendUint16(b, a.Basis)
	b = be.AppendUint16(b, 0)
	b = be.AppendUint16(b, uint16(a.Algorithm))
	b = be.AppendUint16(b, a.MaxLink)
	b = be.AppendUint32(b, a.Arg)
	b = be.AppendUint16(b, 0)
	b = be.AppendUint16(b, a.DstOfs<<6|(a.DstNBits-1))
	return be.AppendUint32(b, h), nil
}

func (a *ActionBundle) appendTo(b []byte) ([]byte, error) {
	if len(a.Members) > MaxBundleMembers {
		return b, fmt.Errorf("ofpwire: bundle with %d members (at most %d)", len(a.Members), MaxBundleMembers)
	}
	var h uint32
	var ofsNBits uint16
	st := uint16(nxastBundle)
	if a.Load {
		var err error
		if h, err = subfieldHeader("bundle_load", a.Dst, a.DstOfs, a.DstNBits); err != nil {
			return b, err
		}
		ofsNBits, st = a.DstOfs<<6|(a.DstNBits-1), nxastBundleLoad
	}
	for _, p := range a.Members {
		if p >= 0xff00 && p < 0xffffff00 {
			return b, fmt.Errorf("ofpwire: bundle member %d has no 16-bit port number", p)
		}
	}
	n := 32 + roundUp8(2*len(a.Members))
	b = nxHeader(b, n, st)
	b = be.AppendUint16(b, uint16(a.Algorithm))
	b = be.AppendUint16(b, uint16(a.Fields))
	b = be.AppendUint16(b, a.Basis)
	b = be.AppendUint32(b, nxmInPort)
	b = be.AppendUint16(b, uint16(len(a.Members)))
	b = be.AppendUint16(b, ofsNBits)
	b = be.AppendUint32(b, h)
	b = appendZeros(b, 4)
	for _, p := range a.Members {
		b = be.AppendUint16(b, port16(p))
	}
	return appendZeros(b, roundUp8(2*len(a.Members))-2*len(a.Members)), nil
}

// subfieldHeader is the NXM/OXM header of the destination of an action
// that writes bits ofs..ofs+n-1 of f, which must be within it.
func subfieldHeader(what string, f ofp.XMType, ofs, n uint16) (uint32, error) {
	size, _, ok := FieldSize(f)
	if !ok || n == 0 || n > 64 || int(ofs)+int(n) > 8*size {
		return 0, fmt.Errorf("ofpwire: %s into bits %d..%d of field %d", what, ofs, int(ofs)+int(n)-1, f)
	}
	return OXMHeader(ClassOf(f), f, false, size), nil
}

// dstBits checks that bits ofs..ofs+n-1 of the destination f of
// multipath or bundle_load are within it: BAD_SET_LEN otherwise, as Open
// vSwitch says.
func dstBits(f ofp.XMType, ofs, n int) error {
	if ofs+n > FieldBits(f) {
		return errSetLen
	}
	return nil
}

// parseNXMultipath decodes the multipath and bundle subtypes (a is the
// whole action); ok false for other subtypes.
func parseNXMultipath(st uint16, a []byte) (Action, bool, error) {
	switch st {
	case nxastMultipath:
		if len(a) != 32 {
			return nil, true, errActionLen
		}
		on := be.Uint16(a[26:])
		mp := &ActionMultipath{Fields: HashFields(be.Uint16(a[10:])), Basis: be.Uint16(a[12:]),
			Algorithm: MultipathAlgorithm(be.Uint16(a[16:])), MaxLink: be.Uint16(a[18:]), Arg: be.Uint32(a[20:]),
			DstOfs: on >> 6, DstNBits: on&0x3f + 1}
		f, err := fieldByHeader(be.Uint32(a[28:]))
		if err != nil {
			return nil, true, errSetType
		}
		mp.Dst = f
		if !mp.Fields.Valid() || mp.Algorithm >= numMultipathAlgs || int(mp.DstNBits) < bitsFor(mp.Links()) {
			return nil, true, errActionArg
		}
		if err := dstBits(f, int(mp.DstOfs), int(mp.DstNBits)); err != nil {
			return nil, true, err
		}
		return mp, true, nil
	case nxastBundle, nxastBundleLoad:
		bd, err := parseBundle(st == nxastBundleLoad, a)
		return bd, true, err
	}
	return nil, false, nil
}

// parseBundle decodes NXAST_BUNDLE or (load) NXAST_BUNDLE_LOAD, choosing
// among Open vSwitch's errors as it does: an unknown destination field
// first, then a member list longer than the action (BAD_LEN), then bad
// arguments, then the destination's bits and the member ports.
func parseBundle(load bool, a []byte) (Action, error) {
	if len(a) < 32 {
		return nil, errActionLen
	}
	bd := &ActionBundle{Algorithm: BundleAlgorithm(be.Uint16(a[10:])), Fields: HashFields(be.Uint16(a[12:])),
		Basis: be.Uint16(a[14:]), Load: load}
	n := int(be.Uint16(a[20:]))
	on, dst := be.Uint16(a[22:]), be.Uint32(a[24:])
	var argErr error
	if !bd.Fields.Valid() || n > MaxBundleMembers || bd.Algorithm > BundleHRW || be.Uint32(a[16:]) != nxmInPort ||
		a[28]|a[29]|a[30]|a[31] != 0 {
		argErr = errActionArg
	}
	if load {
		bd.DstOfs, bd.DstNBits = on>>6, on&0x3f+1
		f, err := fieldByHeader(dst)
		if err != nil {
			return nil, errSetType
		}
		bd.Dst = f
		if bd.DstNBits < 16 {
			argErr = errActionArg
		}
	} else if on != 0 || dst != 0 {
		argErr = errActionArg
	}
	if len(a)-32 < 2*n {
		return nil, errActionLen
	}
	if argErr != nil {
		return nil, argErr
	}
	if load {
		if err := dstBits(bd.Dst, int(bd.DstOfs), int(bd.DstNBits)); err != nil {
			return nil, err
		}
	}
	bd.Members = make([]ofp.PortNo, n)
	for i := range bd.Members {
		p := be.Uint16(a[32+2*i:])
		if !bundleMemberOK(p) {
			return nil, errBadOutPort
		}
		bd.Members[i] = port32(p)
	}
	return bd, nil
}

// bundleMemberOK is Open vSwitch's check of a bundle member: a port
// number below OFPP_MAX, a reserved port output allows (but not
// CONTROLLER, which has no max_len here) or OFPP_NONE.
func bundleMemberOK(p uint16) bool {
	switch p {
	case 0xfff8, 0xfff9, 0xfffa, 0xfffb, 0xfffc, 0xfffe, 0xffff: // IN_PORT TABLE NORMAL FLOOD ALL LOCAL NONE
		return true
	}
	return p < 0xff00
}

// bitsFor is the number of bits that hold every value below n (Open
// vSwitch's log_2_ceil: 0 for 1).
func bitsFor(n int) int {
	b := 0
	for 1<<b < n {
		b++
	}
	return b
}

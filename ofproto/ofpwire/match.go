package ofpwire

import (
	"fmt"

	"github.com/netrack/openflow/ofp"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// OFPMT_OXM: the only match type OpenFlow 1.3 allows on the wire.
const matchTypeOXM = uint16(ofp.MatchTypeXM)

// NumBasicFields is the number of OXM_OF_* fields defined by OpenFlow 1.3.
const NumBasicFields = 40

// ClassNXM1 is Open vSwitch's NXM_NX class (0x0001). OpenFlow 1.3 clients
// such as "ovs-ofctl -O OpenFlow13" put the Nicira fields they have no
// basic OXM for (tun_src, tun_dst, registers, ...) in OXM TLVs of this
// class.
const ClassNXM1 ofp.XMClass = 0x0001

// ClassNXM0 is Open vSwitch's NXM_OF class (0x0000): the standard fields
// as Nicira numbered them before OXM, which the Nicira actions (reg_move,
// reg_load, ...) still name fields by. Only field headers use it here;
// a match never does.
const ClassNXM0 ofp.XMClass = 0x0000

// ClassPacketRegs is OpenFlow 1.5's OFPXMC_PACKET_REGS (0x8001): the 64-bit
// packet registers xreg0-7 (OXM_OF_PKT_REG<N>).
const ClassPacketRegs ofp.XMClass = 0x8001

// The pipeline's register file: sixteen 32-bit registers reg0-15, viewed
// also as eight 64-bit xreg0-7 (xregN is reg2N:reg2N+1, reg2N the high
// half) and four 128-bit xxreg0-3 (xxregN is reg4N..reg4N+3, reg4N the
// highest word), as in Open vSwitch. Registers are pipeline state, zero
// when a packet enters the pipeline, like metadata.
const (
	NumRegs   = 16
	NumXRegs  = NumRegs / 2
	NumXXRegs = NumRegs / 4
)

// Fields outside OpenFlow 1.3's basic class that this switch knows. An
// OXM of such a field holds one of these internal numbers in Field (they
// continue the basic numbering, so that tables indexed by field never see
// two fields with one number); parsing and encoding translate them to and
// from their class and field number on the wire (OVS's
// NXM_NX_TUN_IPV4_SRC(31), _DST(32), NXM_NX_TUN_IPV6_SRC(109), _DST(110),
// NXM_NX_TUN_FLAGS(104), NXM_OF_IN_PORT(0), NXM_NX_IP_TTL(29),
// NXM_NX_IP_FRAG(26), NXM_NX_REG0-15(0-15), NXM_NX_XXREG0-3(111-114),
// OXM_OF_PKT_REG0-7(0-7)).
const (
	XMTypeTunIPv4Src ofp.XMType = NumBasicFields + iota
	XMTypeTunIPv4Dst
	XMTypeTunIPv6Src
	XMTypeTunIPv6Dst
	XMTypeTunFlags
	// XMTypeInPort16 is NXM_OF_IN_PORT, the 16-bit in_port Open vSwitch's
	// controllers write (OVN sets it to 0 to allow output back to the
	// input port); reserved ports are 0xff00 and up.
	XMTypeInPort16
	// XMTypeIPTTL is NXM_NX_IP_TTL: the IPv4 TTL or IPv6 hop limit.
	XMTypeIPTTL
	// XMTypeIPFrag is NXM_NX_IP_FRAG: bit 0 a fragment, bit 1 a later one.
	XMTypeIPFrag
	// The conntrack fields: NXM_NX_CT_MARK (107) and _LABEL (108), which
	// ct's exec writes, and NXM_NX_CT_STATE (105), _ZONE (106),
	// _NW_PROTO (119), _NW_SRC (120), _NW_DST (121), _IPV6_SRC (122),
	// _IPV6_DST (123), _TP_SRC (124), _TP_DST (125). All are matchable;
	// every packet has them zero (untracked) until the switch has a
	// connection tracker.
	XMTypeCTMark
	XMTypeCTLabel
	XMTypeCTState
	XMTypeCTZone
	XMTypeCTNwProto
	XMTypeCTNwSrc
	XMTypeCTNwDst
	XMTypeCTIPv6Src
	XMTypeCTIPv6Dst
	XMTypeCTTpSrc
	XMTypeCTTpDst
	// XMTypeTCPFlags is NXM_NX_TCP_FLAGS (34), OpenFlow 1.5's
	// OXM_OF_TCP_FLAGS (basic 42) read as the same field: the 12 flag
	// bits of a TCP header.
	XMTypeTCPFlags
	// XMTypePktMark is NXM_NX_PKT_MARK (33): a 32-bit mark the pipeline
	// gives a packet (zero when it arrives; pipeline state here).
	XMTypePktMark
	// XMTypeConjID is NXM_NX_CONJ_ID: the id of the conjunctive match
	// that matched (pipeline state; 0 until conjunctions are evaluated).
	XMTypeConjID
	// XMTypeDPHash is NXM_NX_DP_HASH (35), which Open vSwitch also reads
	// as the Nicira experimenter OXM NXOXM_ET_DP_HASH (0): the hash a
	// select group chose its bucket by (pipeline state here, 0 until a
	// select group hashed the packet, as in Open vSwitch). Read-only.
	XMTypeDPHash
	// XMTypeRecircID is NXM_NX_RECIRC_ID (36): 0 on a packet's first
	// pass, the datapath's recirculation id on the passes after
	// (flow.Key.RecircID, 16 bits: larger values are refused as values
	// the switch never allocates). Read-only, not maskable.
	XMTypeRecircID
	// XMTypeNwTOS is NXM_OF_IP_TOS (5), Open vSwitch's nw_tos: the IP
	// TOS byte with the ECN bits read as 0 and never written (only its
	// DSCP bits 2-7 are the field's); what move and load name.
	XMTypeNwTOS
	// XMTypeReg0 is reg0; reg N is XMTypeReg0+N.
	XMTypeReg0
	// XMTypeXReg0 is xreg0; xreg N is XMTypeXReg0+N.
	XMTypeXReg0 = XMTypeReg0 + NumRegs
	// XMTypeXXReg0 is xxreg0; xxreg N is XMTypeXXReg0+N.
	XMTypeXXReg0 = XMTypeXReg0 + NumXRegs
	// XMTypeTunMetadata0 is NXM_NX_TUN_METADATA0 (40); tun_metadataN is
	// XMTypeTunMetadata0+N (wire number 40+N). On the wire these fields
	// have any length up to 124 bytes, the value right-aligned; this
	// switch carries 4 bytes of option data (flow.Tunnel.Opt), so a field
	// is held here as its last 4 bytes and longer ones must have the
	// bytes before zero.
	XMTypeTunMetadata0 = XMTypeXXReg0 + NumXXRegs
)

// oxmTCPFlags15 is OpenFlow 1.5's OXM_OF_TCP_FLAGS, past 1.3's basic
// fields; 1.3 has it as ONF's experimenter field of the same number.
const (
	oxmTCPFlags15     = 42
	classExperimenter = 0xffff
	onfExperimenter   = 0x4f4e4600
	// nxoxmDPHash is NXOXM_ET_DP_HASH: dp_hash as the Nicira
	// experimenter OXM (experimenter NXVendor), which Open vSwitch
	// decodes as NXM_NX_DP_HASH.
	nxoxmDPHash = 0
)

// NumFields bounds every field number, basic or extension (untyped, for
// array sizes and int comparisons alike).
const NumFields = NumBasicFields + 25 + NumRegs + NumXRegs + NumXXRegs + NumTunMetadata

var _ = [1]int{}[int(XMTypeTunMetadata0)+NumTunMetadata-NumFields] // NumFields counts every field above

// extField is an extension field: its class and number on the wire, size
// and maskability.
type extField struct {
	class ofp.XMClass
	wire  ofp.XMType
	fieldInfo
}

// extFields are the extension fields by internal number.
var extFields = func() (fs [NumFields - NumBasicFields]extField) {
	fs[XMTypeTunIPv4Src-NumBasicFields] = extField{ClassNXM1, 31, fieldInfo{4, true, 0}}
	fs[XMTypeTunIPv4Dst-NumBasicFields] = extField{ClassNXM1, 32, fieldInfo{4, true, 0}}
	fs[XMTypeTunIPv6Src-NumBasicFields] = extField{ClassNXM1, 109, fieldInfo{16, true, 0}}
	fs[XMTypeTunIPv6Dst-NumBasicFields] = extField{ClassNXM1, 110, fieldInfo{16, true, 0}}
	fs[XMTypeTunFlags-NumBasicFields] = extField{ClassNXM1, 104, fieldInfo{2, true, 0}}
	fs[XMTypeInPort16-NumBasicFields] = extField{ClassNXM0, 0, fieldInfo{2, false, 0}}
	fs[XMTypeIPTTL-NumBasicFields] = extField{ClassNXM1, 29, fieldInfo{1, false, 0}}
	fs[XMTypeIPFrag-NumBasicFields] = extField{ClassNXM1, 26, fieldInfo{1, true, 3}}
	fs[XMTypeCTMark-NumBasicFields] = extField{ClassNXM1, 107, fieldInfo{4, true, 0}}
	fs[XMTypeCTLabel-NumBasicFields] = extField{ClassNXM1, 108, fieldInfo{16, true, 0}}
	fs[XMTypeCTState-NumBasicFields] = extField{ClassNXM1, 105, fieldInfo{4, true, 0}}
	fs[XMTypeCTZone-NumBasicFields] = extField{ClassNXM1, 106, fieldInfo{2, false, 0}}
	fs[XMTypeCTNwProto-NumBasicFields] = extField{ClassNXM1, 119, fieldInfo{1, false, 0}}
	fs[XMTypeCTNwSrc-NumBasicFields] = extField{ClassNXM1, 120, fieldInfo{4, true, 0}}
	fs[XMTypeCTNwDst-NumBasicFields] = extField{ClassNXM1, 121, fieldInfo{4, true, 0}}
	fs[XMTypeCTIPv6Src-NumBasicFields] = extField{ClassNXM1, 122, fieldInfo{16, true, 0}}
	fs[XMTypeCTIPv6Dst-NumBasicFields] = extField{ClassNXM1, 123, fieldInfo{16, true, 0}}
	fs[XMTypeCTTpSrc-NumBasicFields] = extField{ClassNXM1, 124, fieldInfo{2, true, 0}}
	fs[XMTypeCTTpDst-NumBasicFields] = extField{ClassNXM1, 125, fieldInfo{2, true, 0}}
	fs[XMTypeTCPFlags-NumBasicFields] = extField{ClassNXM1, 34, fieldInfo{2, true, 0x0fff}}
	fs[XMTypePktMark-NumBasicFields] = extField{ClassNXM1, 33, fieldInfo{4, true, 0}}
	fs[XMTypeConjID-NumBasicFields] = extField{ClassNXM1, 37, fieldInfo{4, false, 0}}
	fs[XMTypeDPHash-NumBasicFields] = extField{ClassNXM1, 35, fieldInfo{4, true, 0}}
	fs[XMTypeRecircID-NumBasicFields] = extField{ClassNXM1, 36, fieldInfo{4, false, 0xffff}}
	fs[XMTypeNwTOS-NumBasicFields] = extField{ClassNXM0, 5, fieldInfo{1, false, 0xfc}}
	for i := range NumRegs {
		fs[XMTypeReg0+ofp.XMType(i)-NumBasicFields] = extField{ClassNXM1, ofp.XMType(i), fieldInfo{4, true, 0}}
	}
	for i := range NumXRegs {
		fs[XMTypeXReg0+ofp.XMType(i)-NumBasicFields] = extField{ClassPacketRegs, ofp.XMType(i), fieldInfo{8, true, 0}}
	}
	for i := range NumXXRegs {
		fs[XMTypeXXReg0+ofp.XMType(i)-NumBasicFields] = extField{ClassNXM1, 111 + ofp.XMType(i), fieldInfo{16, true, 0}}
	}
	for i := range NumTunMetadata {
		fs[XMTypeTunMetadata0+ofp.XMType(i)-NumBasicFields] = extField{ClassNXM1, 40 + ofp.XMType(i), fieldInfo{tunMetadataSize, true, 0}}
	}
	return fs
}()

// extByWire finds an extension field by class and wire number.
func extByWire(class ofp.XMClass, wire ofp.XMType) (ofp.XMType, bool) {
	for i, f := range extFields {
		if f.class == class && f.wire == wire {
			return NumBasicFields + ofp.XMType(i), true
		}
	}
	return 0, false
}

// tunMetadataSize is the size a tun_metadata field is held at.
const tunMetadataSize = 4

// IsTunMetadata reports whether f is a tun_metadata field, and its N.
func IsTunMetadata(f ofp.XMType) (n int, ok bool) {
	if f >= XMTypeTunMetadata0 && f < XMTypeTunMetadata0+NumTunMetadata {
		return int(f - XMTypeTunMetadata0), true
	}
	return 0, false
}

// tunMetadataLen checks a wire length (value or value+mask bytes) of a
// tun_metadata field.
func tunMetadataLen(plen int, hasMask bool) (valueLen int, ok bool) {
	if hasMask {
		if plen%2 != 0 {
			return 0, false
		}
		plen /= 2
	}
	return plen, plen >= 1 && plen <= MaxTLVOptLen
}

// shortenTunMetadata gives a right-aligned tun_metadata value of any
// length as the field's last tunMetadataSize bytes, or false when a byte
// before them is not zero.
func shortenTunMetadata(v []byte) ([]byte, bool) {
	out := make([]byte, tunMetadataSize)
	if len(v) > tunMetadataSize {
		for _, c := range v[:len(v)-tunMetadataSize] {
			if c != 0 {
				return nil, false
			}
		}
		v = v[len(v)-tunMetadataSize:]
	}
	copy(out[tunMetadataSize-len(v):], v)
	return out, true
}

// IsNXM reports whether f is one of the extension fields above (Nicira's
// or OpenFlow 1.5's packet registers).
func IsNXM(f ofp.XMType) bool { return f >= NumBasicFields && f < NumFields }

// IsReg reports whether f is a view of the register file (reg, xreg or
// xxreg), and if so which registers it covers: count 32-bit registers
// from first, the first the most significant.
func IsReg(f ofp.XMType) (first, count int, ok bool) {
	switch {
	case f >= XMTypeReg0 && f < XMTypeXReg0:
		return int(f - XMTypeReg0), 1, true
	case f >= XMTypeXReg0 && f < XMTypeXXReg0:
		return 2 * int(f-XMTypeXReg0), 2, true
	case f >= XMTypeXXReg0 && f < XMTypeXXReg0+NumXXRegs:
		return 4 * int(f-XMTypeXXReg0), 4, true
	}
	return 0, 0, false
}

// ClassOf returns the class an OXM of field f is encoded in.
func ClassOf(f ofp.XMType) ofp.XMClass {
	if IsNXM(f) {
		return extFields[f-NumBasicFields].class
	}
	return ofp.XMClassOpenflowBasic
}

// knownField reports whether o is a field this package describes (a basic
// field, or an extension field under its internal number).
func knownField(o OXM) bool {
	if o.Class == ofp.XMClassOpenflowBasic {
		return int(o.Field) < NumBasicFields
	}
	return IsNXM(o.Field) && ClassOf(o.Field) == o.Class
}

func info(f ofp.XMType) fieldInfo {
	if IsNXM(f) {
		return extFields[f-NumBasicFields].fieldInfo
	}
	return basicFields[f]
}

// VLAN_VID bits: OFPVID_PRESENT marks "a tag is present"; OFPVID_NONE (0)
// with no mask means "no tag".
const (
	VIDPresent uint16 = 0x1000
	VIDNone    uint16 = 0x0000
)

type fieldInfo struct {
	size     uint8
	maskable bool
	// valid holds the bits a value may have (0 = every bit of size bytes).
	// Fields narrower than their container (VLAN_PCP: 3 bits in a byte)
	// reject values outside it with BAD_VALUE.
	valid uint64
}

// basicFields is table 12 of the 1.3 spec: payload size and maskability.
var basicFields = [NumBasicFields]fieldInfo{
	ofp.XMTypeInPort:        {4, false, 0},
	ofp.XMTypeInPhyPort:     {4, false, 0},
	ofp.XMTypeMetadata:      {8, true, 0},
	ofp.XMTypeEthDst:        {6, true, 0},
	ofp.XMTypeEthSrc:        {6, true, 0},
	ofp.XMTypeEthType:       {2, false, 0},
	ofp.XMTypeVlanID:        {2, true, 0x1fff},
	ofp.XMTypeVlanPCP:       {1, false, 0x7},
	ofp.XMTypeIPDSCP:        {1, false, 0x3f},
	ofp.XMTypeIPECN:         {1, false, 0x3},
	ofp.XMTypeIPProto:       {1, false, 0},
	ofp.XMTypeIPv4Src:       {4, true, 0},
	ofp.XMTypeIPv4Dst:       {4, true, 0},
	ofp.XMTypeTCPSrc:        {2, false, 0},
	ofp.XMTypeTCPDst:        {2, false, 0},
	ofp.XMTypeUDPSrc:        {2, false, 0},
	ofp.XMTypeUDPDst:        {2, false, 0},
	ofp.XMTypeSCTPSrc:       {2, false, 0},
	ofp.XMTypeSCTPDst:       {2, false, 0},
	ofp.XMTypeICMPv4Type:    {1, false, 0},
	ofp.XMTypeICMPv4Code:    {1, false, 0},
	ofp.XMTypeARPOpcode:     {2, false, 0},
	ofp.XMTypeARPSPA:        {4, true, 0},
	ofp.XMTypeARPTPA:        {4, true, 0},
	ofp.XMTypeARPSHA:        {6, true, 0},
	ofp.XMTypeARPTHA:        {6, true, 0},
	ofp.XMTypeIPv6Src:       {16, true, 0},
	ofp.XMTypeIPv6Dst:       {16, true, 0},
	ofp.XMTypeIPv6FLabel:    {4, true, 0xfffff},
	ofp.XMTypeICMPv6Type:    {1, false, 0},
	ofp.XMTypeICMPv6Code:    {1, false, 0},
	ofp.XMTypeIPv6NDTarget:  {16, false, 0},
	ofp.XMTypeIPv6NDSLL:     {6, false, 0},
	ofp.XMTypeIPv6NDTLL:     {6, false, 0},
	ofp.XMTypeMPLSLabel:     {4, false, 0xfffff},
	ofp.XMTypeMPLSTC:        {1, false, 0x7},
	ofp.XMTypeMPLSBOS:       {1, false, 0x1},
	ofp.XMTypePBBISID:       {3, true, 0},
	ofp.XMTypeTunnelID:      {8, true, 0},
	ofp.XMTypeIPv6ExtHeader: {2, true, 0x1ff},
}

// FieldSize reports the payload size of a basic OXM field (without mask) and
// whether the 1.3 spec allows it to be masked; ok is false for unknown fields.
//
// The Nicira fields (IsNXM) answer too, under their internal numbers.
func FieldSize(f ofp.XMType) (size int, maskable, ok bool) {
	if int(f) >= NumFields {
		return 0, false, false
	}
	fi := info(f)
	return int(fi.size), fi.maskable, true
}

// OXM is one TLV of an OpenFlow extensible match. Value and Mask hold the
// payload in network byte order; Mask is nil unless HasMask.
type OXM struct {
	Class   ofp.XMClass
	Field   ofp.XMType
	HasMask bool
	Value   []byte
	Mask    []byte
}

// Header returns the 32-bit OXM header (class, field, hasmask, length) as
// it appears on the wire and in table-features properties.
func (o OXM) Header() uint32 {
	return OXMHeader(o.Class, o.Field, o.HasMask, len(o.Value)+len(o.Mask))
}

// OXMHeader builds a 32-bit OXM header. An extension field given by its
// internal number is written with its number on the wire.
func OXMHeader(class ofp.XMClass, field ofp.XMType, hasMask bool, length int) uint32 {
	if IsNXM(field) && ClassOf(field) == class {
		field = extFields[field-NumBasicFields].wire
	}
	h := uint32(class)<<16 | uint32(field&0x7f)<<9 | uint32(length&0xff)
	if hasMask {
		h |= 1 << 8
	}
	return h
}

// Uint returns the value as a big-endian unsigned integer (first 8 bytes).
func (o OXM) Uint() uint64 { return beUint(o.Value) }

// MaskUint returns the mask as an integer; an unmasked field yields all
// ones over its width, so callers need not special-case exact matches.
func (o OXM) MaskUint() uint64 {
	if !o.HasMask {
		if len(o.Value) >= 8 {
			return ^uint64(0)
		}
		return 1<<(8*uint(len(o.Value))) - 1
	}
	return beUint(o.Mask)
}

func beUint(b []byte) uint64 {
	var v uint64
	for i := 0; i < len(b) && i < 8; i++ {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func uintBytes(v uint64, size int) []byte {
	b := make([]byte, size)
	for i := size - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

// NewOXM returns an exact-match field (basic, or Nicira by internal
// number); value must have the field's size.
func NewOXM(f ofp.XMType, value []byte) OXM {
	return OXM{Class: ClassOf(f), Field: f, Value: value}
}

// NewMaskedOXM returns a masked field.
func NewMaskedOXM(f ofp.XMType, value, mask []byte) OXM {
	return OXM{Class: ClassOf(f), Field: f, HasMask: true, Value: value, Mask: mask}
}

// OXMUint returns an exact-match basic field from an integer, sized per the
// spec table (so OXMUint(XMTypeEthType, 0x800) is two bytes).
func OXMUint(f ofp.XMType, v uint64) OXM {
	size, _, _ := FieldSize(f)
	return NewOXM(f, uintBytes(v, size))
}

// OXMUintMasked is OXMUint with a mask.
func OXMUintMasked(f ofp.XMType, v, mask uint64) OXM {
	size, _, _ := FieldSize(f)
	return NewMaskedOXM(f, uintBytes(v, size), uintBytes(mask, size))
}

// Match is an OpenFlow 1.3 match: OXM fields in wire order.
type Match struct {
	Fields []OXM
}

// Field returns field f (basic, or Nicira by internal number) if the match
// has it.
func (m Match) Field(f ofp.XMType) (OXM, bool) {
	for _, o := range m.Fields {
		if o.Class == ClassOf(f) && o.Field == f {
			return o, true
		}
	}
	return OXM{}, false
}

// Add appends a field.
func (m *Match) Add(o OXM) { m.Fields = append(m.Fields, o) }

// parseOXM decodes one TLV at the front of b, checking it against the basic
// field table. It returns match error codes; callers in other contexts
// (set-field) translate them.
func parseOXM(b []byte) (OXM, int, error) { return parseOXMMask(b, false) }

// parseOXMMask is parseOXM; anyMask lets a field Open vSwitch cannot
// match masked carry a mask anyway, as the masked set-field of a load
// into part of it does (NXAST_REG_LOAD2, OpenFlow 1.5's masked
// OFPAT_SET_FIELD: load:0->NXM_OF_IP_TOS[2..7] is sent so).
func parseOXMMask(b []byte, anyMask bool) (OXM, int, error) {
	return parseOXMOwned(b, anyMask, false)
}

// parseOXMOwned is parseOXMMask; owned says b is the caller's to keep
// (parseMatch copies a whole match once), so the value and mask are
// sliced out of it rather than copied, one allocation per match instead
// of one per field: a bundle of 100,000 flow-mods decodes that many
// matches at once.
func parseOXMOwned(b []byte, anyMask, owned bool) (OXM, int, error) {
	if len(b) < 4 {
		return OXM{}, 0, errMatchLen
	}
	hdr := be.Uint32(b)
	o := OXM{
		Class:   ofp.XMClass(hdr >> 16),
		Field:   ofp.XMType(hdr >> 9 & 0x7f),
		HasMask: hdr&(1<<8) != 0,
	}
	plen := int(hdr & 0xff)
	if plen > len(b)-4 {
		return OXM{}, 0, errMatchLen
	}
	if o.Class == classExperimenter && o.Field == oxmTCPFlags15 && plen >= 4 && be.Uint32(b[4:]) == onfExperimenter {
		// OpenFlow 1.3's tcp_flags, ONF's experimenter field (EXT-109),
		// as ovs-ofctl sends it: the same field, behind 4 bytes of
		// experimenter id.
		o2, n, err := parseOXMMask(append(be.AppendUint32(nil, uint32(ClassNXM1)<<16|34<<9|hdr&0x1ff-4), b[8:4+plen]...), anyMask)
		if err != nil {
			return OXM{}, 0, err
		}
		return o2, n + 4, nil
	}
	if o.Class == classExperimenter && o.Field == nxoxmDPHash && plen >= 4 && be.Uint32(b[4:]) == NXVendor {
		// NXOXM_ET_DP_HASH: NXM_NX_DP_HASH behind 4 bytes of
		// experimenter id, as Open vSwitch reads it in any version.
		o2, n, err := parseOXMMask(append(be.AppendUint32(nil, uint32(ClassNXM1)<<16|35<<9|hdr&0x1ff-4), b[8:4+plen]...), anyMask)
		if err != nil {
			return OXM{}, 0, err
		}
		return o2, n + 4, nil
	}
	if o.Class != ofp.XMClassOpenflowBasic {
		f, ok := extByWire(o.Class, o.Field)
		if !ok {
			return OXM{}, 0, errMatchField
		}
		o.Field = f
	} else if o.Field == oxmTCPFlags15 {
		o.Class, o.Field = ClassNXM1, XMTypeTCPFlags
	} else if int(o.Field) >= NumBasicFields {
		return OXM{}, 0, errMatchField
	}
	fi := info(o.Field)
	if _, ok := IsTunMetadata(o.Field); ok {
		l, ok := tunMetadataLen(plen, o.HasMask)
		if !ok {
			return OXM{}, 0, errMatchLen
		}
		v, ok1 := shortenTunMetadata(b[4 : 4+l])
		o.Value = v
		ok = ok1
		if o.HasMask {
			o.Mask, ok = shortenTunMetadata(b[4+l : 4+plen])
			ok = ok && ok1
		}
		if !ok {
			return OXM{}, 0, errMatchValue
		}
		for i := range o.Value {
			if o.HasMask && o.Value[i]&^o.Mask[i] != 0 {
				return OXM{}, 0, errMatchWildcards
			}
		}
		return o, 4 + plen, nil
	}
	want := int(fi.size)
	if o.HasMask {
		want *= 2
	}
	if plen != want {
		return OXM{}, 0, errMatchLen
	}
	if o.HasMask && !fi.maskable && !anyMask {
		return OXM{}, 0, errMatchMask
	}
	var payload []byte
	if owned {
		payload = b[4 : 4+plen : 4+plen]
	} else {
		payload = cloneBytes(b[4 : 4+plen])
	}
	size := int(fi.size)
	o.Value = payload[:size:size]
	if o.HasMask {
		o.Mask = payload[size:]
	}
	if fi.valid != 0 && beUint(o.Value)&^fi.valid != 0 {
		return OXM{}, 0, errMatchValue
	}
	if o.HasMask {
		for i := range o.Value {
			if o.Value[i]&^o.Mask[i] != 0 {
				return OXM{}, 0, errMatchWildcards
			}
		}
	}
	return o, 4 + plen, nil
}

// appendOXM encodes o, refusing values whose sizes contradict the spec table
// (an encoder that silently wrote them would produce messages nobody can
// decode).
func appendOXM(b []byte, o OXM) ([]byte, error) {
	if o.HasMask != (o.Mask != nil) || (o.HasMask && len(o.Mask) != len(o.Value)) {
		return b, fmt.Errorf("ofpwire: OXM %v: mask does not match value", o.Field)
	}
	if o.Class == ofp.XMClassOpenflowBasic || knownField(o) {
		size, maskable, ok := FieldSize(o.Field)
		ok = ok && knownField(o)
		if !ok || len(o.Value) != size || (o.HasMask && !maskable) {
			return b, fmt.Errorf("ofpwire: OXM %v: bad length %d or mask", o.Field, len(o.Value))
		}
	}
	n := len(o.Value) + len(o.Mask)
	if n > 255 {
		return b, fmt.Errorf("ofpwire: OXM payload too long")
	}
	b = be.AppendUint32(b, OXMHeader(o.Class, o.Field, o.HasMask, n))
	b = append(b, o.Value...)
	return append(b, o.Mask...), nil
}

// parseMatch decodes an ofp_match (with its padding) at the front of b and
// returns the number of bytes it occupied.
func parseMatch(b []byte) (Match, int, error) {
	if len(b) < 4 {
		return Match{}, 0, errMatchLen
	}
	if be.Uint16(b) != matchTypeOXM {
		return Match{}, 0, errMatchType
	}
	length := int(be.Uint16(b[2:]))
	if length < 4 || roundUp8(length) > len(b) {
		return Match{}, 0, errMatchLen
	}
	// The fields are counted first (a malformed TLV stops the count; the
	// parse below reports it) so that the slice is made once, and the
	// match's bytes are copied once for all of them.
	count := 0
	for rest := b[4:length]; len(rest) >= 4; count++ {
		plen := 4 + int(rest[3])
		if plen > len(rest) {
			break
		}
		rest = rest[plen:]
	}
	var m Match
	if count > 0 {
		m.Fields = make([]OXM, 0, count)
	}
	var seen [NumFields]bool
	body := cloneBytes(b[4:length])
	for len(body) > 0 {
		o, n, err := parseOXMOwned(body, false, true)
		if err != nil {
			return Match{}, 0, err
		}
		if seen[o.Field] {
			return Match{}, 0, errMatchDup
		}
		seen[o.Field] = true
		m.Fields = append(m.Fields, o)
		body = body[n:]
	}
	return m, roundUp8(length), nil
}

// appendMatch encodes m as an ofp_match including trailing padding.
func appendMatch(b []byte, m Match) ([]byte, error) {
	start := len(b)
	b = be.AppendUint16(b, matchTypeOXM)
	b = be.AppendUint16(b, 0)
	var err error
	for _, o := range m.Fields {
		if b, err = appendOXM(b, o); err != nil {
			return b, err
		}
	}
	n := len(b) - start
	if n > 0xffff {
		return b, fmt.Errorf("ofpwire: match too long")
	}
	putLen16(b, start+2, n)
	return appendZeros(b, roundUp8(n)-n), nil
}

// exactValue returns the value of f if the match constrains it exactly.
func exactValue(m Match, f ofp.XMType) (uint64, bool) {
	o, ok := m.Field(f)
	if !ok || o.HasMask && o.MaskUint() != (OXM{Value: o.Value}).MaskUint() {
		return 0, false
	}
	return o.Uint(), true
}

func ethTypeIs(m Match, types ...uint64) bool {
	v, ok := exactValue(m, ofp.XMTypeEthType)
	if !ok {
		return false
	}
	for _, t := range types {
		if v == t {
			return true
		}
	}
	return false
}

func ipProtoIs(m Match, proto uint64) bool {
	v, ok := exactValue(m, ofp.XMTypeIPProto)
	return ok && v == proto && ethTypeIs(m, header.EtherTypeIPv4, header.EtherTypeIPv6)
}

func icmpv6TypeIs(m Match, types ...uint64) bool {
	v, ok := exactValue(m, ofp.XMTypeICMPv6Type)
	if !ok || !ipProtoIs(m, header.IPProtoICMPv6) {
		return false
	}
	for _, t := range types {
		if v == t {
			return true
		}
	}
	return false
}

// prereqOK reports whether the prerequisites of field f (table 12 of the 1.3
// spec, applied transitively) are met by m.
func prereqOK(m Match, f ofp.XMType) bool {
	switch f {
	case ofp.XMTypeInPhyPort:
		_, ok := m.Field(ofp.XMTypeInPort)
		return ok
	case ofp.XMTypeVlanPCP:
		// VLAN_VID != NONE: the match must insist on a tag being present.
		o, ok := m.Field(ofp.XMTypeVlanID)
		return ok && uint16(o.Uint()&o.MaskUint())&VIDPresent != 0
	case ofp.XMTypeIPDSCP, ofp.XMTypeIPECN, ofp.XMTypeIPProto, XMTypeNwTOS:
		return ethTypeIs(m, header.EtherTypeIPv4, header.EtherTypeIPv6)
	case ofp.XMTypeIPv4Src, ofp.XMTypeIPv4Dst:
		return ethTypeIs(m, header.EtherTypeIPv4)
	case ofp.XMTypeTCPSrc, ofp.XMTypeTCPDst:
		return ipProtoIs(m, header.IPProtoTCP)
	case ofp.XMTypeUDPSrc, ofp.XMTypeUDPDst:
		return ipProtoIs(m, header.IPProtoUDP)
	case ofp.XMTypeSCTPSrc, ofp.XMTypeSCTPDst:
		return ipProtoIs(m, header.IPProtoSCTP)
	case ofp.XMTypeICMPv4Type, ofp.XMTypeICMPv4Code:
		return ipProtoIs(m, header.IPProtoICMP)
	case ofp.XMTypeARPOpcode, ofp.XMTypeARPSPA, ofp.XMTypeARPTPA,
		ofp.XMTypeARPSHA, ofp.XMTypeARPTHA:
		// RARP too, as Open vSwitch allows (its layout is ARP's).
		return ethTypeIs(m, header.EtherTypeARP, header.EtherTypeRARP)
	case ofp.XMTypeIPv6Src, ofp.XMTypeIPv6Dst, ofp.XMTypeIPv6FLabel,
		ofp.XMTypeIPv6ExtHeader:
		return ethTypeIs(m, header.EtherTypeIPv6)
	case ofp.XMTypeICMPv6Type, ofp.XMTypeICMPv6Code:
		return ipProtoIs(m, header.IPProtoICMPv6)
	case ofp.XMTypeIPv6NDTarget:
		return icmpv6TypeIs(m, header.ICMPv6NeighborSolicit, header.ICMPv6NeighborAdvert)
	case ofp.XMTypeIPv6NDSLL:
		return icmpv6TypeIs(m, header.ICMPv6NeighborSolicit)
	case ofp.XMTypeIPv6NDTLL:
		return icmpv6TypeIs(m, header.ICMPv6NeighborAdvert)
	case ofp.XMTypeMPLSLabel, ofp.XMTypeMPLSTC, ofp.XMTypeMPLSBOS:
		return ethTypeIs(m, header.EtherTypeMPLS, header.EtherTypeMPLSMcast)
	case XMTypeIPTTL, XMTypeIPFrag:
		return ethTypeIs(m, header.EtherTypeIPv4, header.EtherTypeIPv6)
	case XMTypeTCPFlags:
		return ipProtoIs(m, header.IPProtoTCP)
	case ofp.XMTypePBBISID:
		return ethTypeIs(m, header.EtherTypePBB)
	}
	return true
}

// CheckPrerequisites returns BAD_MATCH/BAD_PREREQ if some field of m lacks
// the fields the spec requires with it (e.g. TCP_SRC without IP_PROTO=6 and
// ETH_TYPE IPv4/IPv6). Prerequisites must be exact matches; their order in
// the match does not matter. Decode does not call it, so that the caller
// chooses which messages it applies to.
func CheckPrerequisites(m Match) error {
	if _, missing := MissingPrerequisite(m); missing {
		return errMatchPrereq
	}
	return nil
}

// MissingPrerequisite returns the first field of m whose prerequisites m
// lacks, so that a tool can say which field is the trouble.
func MissingPrerequisite(m Match) (field ofp.XMType, missing bool) {
	for _, o := range m.Fields {
		if knownField(o) && !prereqOK(m, o.Field) {
			return o.Field, true
		}
	}
	return 0, false
}

package ofpwire

import "github.com/netrack/openflow"

// Open vSwitch's TLV table messages (NXT_TLV_TABLE_MOD, _REQUEST, _REPLY):
// a controller maps a Geneve option (class, type, length) to a
// tun_metadataN field, which flows then match and set. ovn-controller
// maps its one option (class 0x0102, type 0x80, 4 bytes) on connect.
const (
	NXTTLVTableMod     = 24
	NXTTLVTableRequest = 25
	NXTTLVTableReply   = 26
)

// TLV table mod commands (NXTTMC_*).
const (
	TLVAdd    = 0
	TLVDelete = 1
	TLVClear  = 2
)

// NumTunMetadata is how many tun_metadata fields there are, and
// MaxTLVOptLen the longest option a mapping may name.
const (
	NumTunMetadata = 64
	MaxTLVOptLen   = 124
)

// NX experimenter error codes of OFPET_TLV_TABLE_MOD_FAILED (NXTTMFC_*),
// sent as experimenter errors of Nicira's id in OpenFlow 1.2 and later.
const (
	TTMFCBadCommand    = 16
	TTMFCBadOptLen     = 17
	TTMFCBadFieldIdx   = 18
	TTMFCTableFull     = 19
	TTMFCAlreadyMapped = 20
	TTMFCDupEntry      = 21
	TTMFCInvalidTLVDel = 38
)

// NXError is a Nicira experimenter error with code code.
func NXError(code uint16, reason string) *OFPError {
	return &OFPError{Type: ETExperimenter, Code: code, Experimenter: NXVendor, Reason: reason}
}

// TLVMap is one mapping: the option (class, type, data length in bytes)
// and N of the tun_metadataN field it fills.
type TLVMap struct {
	Class uint16
	Type  uint8
	Len   uint8
	Index uint16
}

// TLVTableMod is NXT_TLV_TABLE_MOD.
type TLVTableMod struct {
	Command uint16
	Maps    []TLVMap
}

// TLVTableRequest is NXT_TLV_TABLE_REQUEST.
type TLVTableRequest struct{}

// TLVTableReply is NXT_TLV_TABLE_REPLY: the switch's limits (option bytes
// in all, fields) and its mappings.
type TLVTableReply struct {
	MaxSpace  uint32
	MaxFields uint16
	Maps      []TLVMap
}

// MsgType implements Message: these are experimenter messages.
func (*TLVTableMod) MsgType() openflow.Type     { return openflow.TypeExperiment }
func (*TLVTableRequest) MsgType() openflow.Type { return openflow.TypeExperiment }
func (*TLVTableReply) MsgType() openflow.Type   { return openflow.TypeExperiment }

func appendTLVMaps(b []byte, maps []TLVMap) []byte {
	for _, m := range maps {
		b = be.AppendUint16(b, m.Class)
		b = append(b, m.Type, m.Len)
		b = be.AppendUint16(b, m.Index)
		b = append(b, 0, 0)
	}
	return b
}

func (m *TLVTableMod) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(be.AppendUint32(b, NXVendor), NXTTLVTableMod)
	b = appendZeros(be.AppendUint16(b, m.Command), 6)
	return appendTLVMaps(b, m.Maps), nil
}

func (*TLVTableRequest) appendBody(b []byte) ([]byte, error) {
	return be.AppendUint32(be.AppendUint32(b, NXVendor), NXTTLVTableRequest), nil
}

func (m *TLVTableReply) appendBody(b []byte) ([]byte, error) {
	b = be.AppendUint32(be.AppendUint32(b, NXVendor), NXTTLVTableReply)
	b = appendZeros(be.AppendUint16(be.AppendUint32(b, m.MaxSpace), m.MaxFields), 10)
	return appendTLVMaps(b, m.Maps), nil
}

func (m *TLVTableMod) decodeBody(b []byte) error {
	if len(b) < 8 || be.Uint32(b) != NXVendor || be.Uint32(b[4:]) != NXTTLVTableMod {
		return errBadLen
	}
	r, err := ParseTLVTableMod(b[8:])
	if err == nil {
		*m = *r
	}
	return err
}

func (*TLVTableRequest) decodeBody(b []byte) error {
	if len(b) != 8 || be.Uint32(b) != NXVendor || be.Uint32(b[4:]) != NXTTLVTableRequest {
		return errBadLen
	}
	return nil
}

func (m *TLVTableReply) decodeBody(b []byte) error {
	if len(b) < 24 || be.Uint32(b) != NXVendor || be.Uint32(b[4:]) != NXTTLVTableReply {
		return errBadLen
	}
	b = b[8:]
	m.MaxSpace, m.MaxFields = be.Uint32(b), be.Uint16(b[4:])
	maps, err := parseTLVMaps(b[16:], int(m.MaxFields))
	m.Maps = maps
	return err
}

// ParseTLVTableMod decodes NXT_TLV_TABLE_MOD's body after the
// experimenter header, with Open vSwitch's checks and errors: a known
// command, option lengths a multiple of 4 up to 124, indexes below 64.
func ParseTLVTableMod(b []byte) (*TLVTableMod, error) {
	if len(b) < 8 {
		return nil, &OFPError{Type: ETBadRequest, Code: BRCBadLen}
	}
	m := &TLVTableMod{Command: be.Uint16(b)}
	if m.Command > TLVClear {
		return nil, NXError(TTMFCBadCommand, "")
	}
	maps, err := parseTLVMaps(b[8:], NumTunMetadata)
	m.Maps = maps
	return m, err
}

func parseTLVMaps(b []byte, maxFields int) ([]TLVMap, error) {
	if len(b)%8 != 0 {
		return nil, &OFPError{Type: ETBadRequest, Code: BRCBadLen}
	}
	var maps []TLVMap
	for ; len(b) > 0; b = b[8:] {
		m := TLVMap{Class: be.Uint16(b), Type: b[2], Len: b[3], Index: be.Uint16(b[4:])}
		if m.Len%4 != 0 || m.Len > MaxTLVOptLen {
			return nil, NXError(TTMFCBadOptLen, "")
		}
		if int(m.Index) >= maxFields {
			return nil, NXError(TTMFCBadFieldIdx, "")
		}
		maps = append(maps, m)
	}
	return maps, nil
}

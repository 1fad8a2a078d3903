package ofpwire

import (
	"fmt"
	"slices"

	"github.com/netrack/openflow"
)

// The OpenFlow versions a connection may speak. The codec's messages are
// OpenFlow 1.3-shaped whatever the version on the wire: a 1.4 or 1.5 body
// is rewritten into the 1.3 layout before decoding and out of it after
// encoding (version_bodies.go), as Open vSwitch's ofp-util layer turns every
// version into one internal form. Most messages are the same in the three
// versions; the rewriting touches only those that differ.
const (
	Version13 = Version
	Version14 = 0x05
	Version15 = 0x06
)

// Versions are the versions this codec speaks, lowest first.
var Versions = []uint8{Version10, Version13, Version14, Version15}

// Supported reports whether v is one of Versions.
func Supported(v uint8) bool { return v == Version10 || v >= Version13 && v <= Version15 }

// VersionName is the name ovs-vsctl's Bridge.protocols and ovs-ofctl's -O
// use for a version ("OpenFlow13").
func VersionName(v uint8) string {
	switch v {
	case 0x01:
		return "OpenFlow10"
	case 0x02:
		return "OpenFlow11"
	case 0x03:
		return "OpenFlow12"
	}
	return fmt.Sprintf("OpenFlow1%d", v-1)
}

// VersionByName is the version VersionName calls name; ok is false for
// names of versions this codec does not speak.
func VersionByName(name string) (v uint8, ok bool) {
	for _, v := range Versions {
		if VersionName(v) == name {
			return v, true
		}
	}
	return 0, false
}

// Negotiate returns the version a connection speaks given the versions
// this side allows (any order) and the peer's HELLO (OpenFlow 1.3.5
// §6.3.1): the highest version in both version bitmaps or, when the peer
// sent no bitmap, the smaller of the two header versions, which this side
// must then allow. ok is false when there is none.
func Negotiate(allowed []uint8, peerVersion uint8, peer *Hello) (v uint8, ok bool) {
	if peer == nil || peer.VersionBitmap == nil {
		ours := uint8(0)
		for _, a := range allowed {
			ours = max(ours, a)
		}
		if v = min(ours, peerVersion); Supported(v) && slices.Contains(allowed, v) {
			return v, true
		}
		return 0, false
	}
	for _, a := range allowed {
		if peer.Supports(a) && Supported(a) && a >= v {
			v, ok = a, true
		}
	}
	return v, ok
}

// EncodeIn is Encode for a connection that speaks version v.
func EncodeIn(v uint8, xid uint32, m Message) ([]byte, error) {
	if v == Version {
		if e, ok := bundleAsExperimenter(m); ok {
			m = e // 1.3 has bundles as ONF's extension only
		}
		return Encode(xid, m)
	}
	if !Supported(v) {
		return nil, fmt.Errorf("ofpwire: cannot encode OpenFlow version 0x%02x", v)
	}
	if v == Version10 {
		return encode10(xid, m)
	}
	switch m := m.(type) {
	case *MultipartReply:
		return m.encodeSplitIn(v, xid, MaxMessageLen)
	case *GetAsyncReply:
		return frame(v, openflow.TypeGetAsyncReply, xid, appendAsyncProps(nil, AsyncConfig(*m)))
	case *GroupMod:
		if v >= Version15 {
			body, err := m.appendBody15(nil)
			if err != nil {
				return nil, err
			}
			return frame(v, openflow.TypeGroupMod, xid, body)
		}
	}
	b, err := encodeOne(nil, xid, m)
	if err != nil {
		return nil, err
	}
	body, err := downgradeBody(v, m.MsgType(), b[HeaderLen:])
	if err != nil {
		return nil, err
	}
	return frame(v, m.MsgType(), xid, body)
}

// ErrorMessageIn is ErrorMessage for a connection that speaks version v:
// the error layout is the same in every version.
func ErrorMessageIn(v uint8, xid uint32, err error, offending []byte) []byte {
	if oe, ok := err.(*OFPError); ok && oe.Type == etMonitorFailed && v != 0 && v < Version14 {
		var prefix []byte
		err, prefix = monitorErrorOld(v, oe)
		offending = append(prefix, offending...)
	}
	b := ErrorMessage(xid, err, offending)
	if len(b) > 0 && v != 0 {
		b[0] = v
	}
	if v == Version {
		b = bundleErrorIn13(b)
	}
	if v == Version10 && len(b) >= 12 {
		typ, code := errorTo10(be.Uint16(b[8:]), be.Uint16(b[10:]))
		be.PutUint16(b[8:], typ)
		be.PutUint16(b[10:], code)
	}
	return b
}

// frame puts an OpenFlow header of version v before body.
func frame(v uint8, t openflow.Type, xid uint32, body []byte) ([]byte, error) {
	n := HeaderLen + len(body)
	if n > MaxMessageLen {
		return nil, fmt.Errorf("ofpwire: %v message of %d bytes exceeds %d", t, n, MaxMessageLen)
	}
	b := make([]byte, 0, n)
	b = append(b, v, byte(t), byte(n>>8), byte(n))
	b = be.AppendUint32(b, xid)
	return append(b, body...), nil
}

// ErrBadVersion is the error for a message whose header version is not
// the connection's (OFPBRC_BAD_VERSION).
var ErrBadVersion error = errBadVersion

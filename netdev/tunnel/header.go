package tunnel

import (
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/netdev"
)

// Kind is the encapsulation a port speaks.
type Kind uint8

const (
	// VXLAN is RFC 7348: an 8-byte header (flags with the I bit, 24-bit VNI)
	// in front of an Ethernet frame, over UDP port 4789.
	VXLAN Kind = iota
	// Geneve is RFC 8926: an 8-byte base header (version, option length,
	// O and C flags, protocol type 0x6558, 24-bit VNI) plus up to 252
	// bytes of options, over UDP port 6081.
	Geneve
)

// String is the port type name, as vsctl spells it.
func (k Kind) String() string {
	if k == Geneve {
		return "geneve"
	}
	return "vxlan"
}

// DefaultPort is the IANA UDP port of the encapsulation.
func (k Kind) DefaultPort() uint16 {
	if k == Geneve {
		return 6081
	}
	return 4789
}

// hdrLen is the size of the base header (VXLAN's, Geneve's without
// options); maxHdrLen that of the longest header Send writes: Geneve with
// the one 4-byte option a tun_metadata field maps (netdev.TunnelOption).
const (
	hdrLen    = 8
	maxHdrLen = hdrLen + 4 + 4
)

// maxHdr is the longest header the kind's Send writes, what its inner MTU
// leaves room for.
func (k Kind) maxHdr() int {
	if k == Geneve {
		return maxHdrLen
	}
	return hdrLen
}

// hdrKey is what a packet's tunnel header is made of: the VNI in the low
// 24 bits and, when hdrOpt is set, the mapped Geneve option's data in the
// high 32. Packets with equal keys get identical headers, so a run of them
// (gso.go) shares one.
type hdrKey uint64

const hdrOpt hdrKey = 1 << 24

func (h hdrKey) vni() uint32 { return uint32(h) & 0xffffff }

// len is the length of the header h makes.
func (h hdrKey) len() int {
	if h&hdrOpt != 0 {
		return maxHdrLen
	}
	return hdrLen
}

// Header bits.
const (
	vxlanFlagI     = 0x08 // VXLAN: the VNI is valid
	geneveFlagO    = 0x80 // Geneve byte 1: OAM (control) packet
	geneveFlagC    = 0x40 // Geneve byte 1: critical options present
	geneveCritical = 0x80 // Geneve option type bit: critical option
)

// Cause is why a tunnel port dropped a packet.
type Cause uint8

// Drop causes, counted per port.
const (
	// CauseBadHeader: the UDP payload is not a well-formed header of the
	// port's kind (too short, VXLAN without the I flag, Geneve version
	// not 0, not Ethernet, options running past the payload, inner frame
	// shorter than an Ethernet header), or the datagram did not fit a
	// buffer.
	CauseBadHeader Cause = iota
	// CauseCritical: a Geneve packet with critical options, which a
	// receiver that does not implement them must drop (RFC 8926 3.5.1).
	CauseCritical
	// CauseWrongVNI: the VNI is not the port's fixed key.
	CauseWrongVNI
	// CauseUnknownRemote: the outer source is not the port's fixed
	// remote_ip.
	CauseUnknownRemote
	// CauseNoRemote: output to a remote_ip=flow port without a tunnel
	// destination in the packet's metadata (set_field:...->tun_dst).
	CauseNoRemote
	// CauseMTU: the encapsulated packet is larger than the path allows
	// (EMSGSIZE with df_default=true); never fragmented or truncated.
	CauseMTU
	// CauseNoRoute: the kernel has no route to the remote
	// (ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL).
	CauseNoRoute
	// CauseTxError: any other send error, or a full socket buffer.
	CauseTxError
	// CauseBadChecksum: a datagram carrying one inner TCP super-frame
	// whose complete TCP checksum is wrong (superDatagram). Kept whole it
	// would be marked for the checksum to be computed anew, hiding the
	// corruption from the receiver.
	CauseBadChecksum
	numCauses
)

var causeNames = [numCauses]string{"bad_header", "critical_option", "wrong_vni", "unknown_remote",
	"no_remote", "mtu", "no_route", "tx_error", "bad_checksum"}

// String is the cause's metric label.
func (c Cause) String() string {
	if c < numCauses {
		return causeNames[c]
	}
	return "unknown"
}

// decap parses the tunnel header at the front of a UDP payload. It returns
// the header's length (the inner Ethernet frame follows), the VNI and the
// flow.TunFlag* bits the header carries, or ok false and the drop cause.
// Geneve options are checked for their framing only: which are known is
// the port's to say (options). It reads only within b and never writes.
func decap(k Kind, b []byte) (n int, vni uint32, flags uint16, cause Cause, ok bool) {
	if len(b) < hdrLen {
		return 0, 0, 0, CauseBadHeader, false
	}
	vni = uint32(b[4])<<16 | uint32(b[5])<<8 | uint32(b[6])
	switch k {
	case VXLAN:
		// Reserved bits are ignored on receipt (RFC 7348 5); the I flag
		// must be set for the VNI to mean anything.
		if b[0]&vxlanFlagI == 0 {
			return 0, 0, 0, CauseBadHeader, false
		}
		n, flags = hdrLen, flow.TunFlagKey
	case Geneve:
		if b[0]>>6 != 0 || uint16(b[2])<<8|uint16(b[3]) != header.EtherTypeTEB {
			return 0, 0, 0, CauseBadHeader, false
		}
		optLen := int(b[0]&0x3f) * 4
		if len(b) < hdrLen+optLen {
			return 0, 0, 0, CauseBadHeader, false
		}
		// The options must tile the option space exactly.
		for o := b[hdrLen : hdrLen+optLen]; len(o) > 0; {
			if len(o) < 4 {
				return 0, 0, 0, CauseBadHeader, false
			}
			l := 4 + int(o[3]&0x1f)*4
			if l > len(o) {
				return 0, 0, 0, CauseBadHeader, false
			}
			o = o[l:]
		}
		n, flags = hdrLen+optLen, flow.TunFlagKey
		if b[1]&geneveFlagO != 0 {
			flags |= flow.TunFlagOAM
		}
	default:
		return 0, 0, 0, CauseBadHeader, false
	}
	if len(b)-n < 14 {
		return 0, 0, 0, CauseBadHeader, false
	}
	return n, vni, flags, 0, true
}

// options reads the Geneve options opts (framing checked by decap): the
// data of the option m maps, right-aligned, and found when it is there.
// An option that is critical (RFC 8926 3.5: the receiver must drop a
// packet with a critical option it does not implement) and not m's, or
// m's with another length, makes ok false.
func options(opts []byte, m *netdev.TunnelOption) (v [4]byte, found, ok bool) {
	for len(opts) > 0 {
		l := 4 + int(opts[3]&0x1f)*4
		class, typ := uint16(opts[0])<<8|uint16(opts[1]), opts[2]
		switch {
		case m != nil && class == m.Class && typ == m.Type && l-4 == int(m.Len):
			copy(v[4-m.Len:], opts[4:l])
			found = true
		case typ&geneveCritical != 0:
			return v, false, false
		}
		opts = opts[l:]
	}
	return v, found, true
}

// encapHeader writes the header Send puts in front of an inner frame into
// h and returns its length: h's VNI and, with hdrOpt, m's option.
func encapHeader(k Kind, h *[maxHdrLen]byte, key hdrKey, m *netdev.TunnelOption) int {
	vni := key.vni()
	if k != Geneve {
		*(*[hdrLen]byte)(h[:]) = [hdrLen]byte{vxlanFlagI, 0, 0, 0, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}
		return hdrLen
	}
	*(*[hdrLen]byte)(h[:]) = [hdrLen]byte{0, 0, header.EtherTypeTEB >> 8, header.EtherTypeTEB & 0xff, byte(vni >> 16), byte(vni >> 8), byte(vni), 0}
	if key&hdrOpt == 0 || m == nil || m.Len > 4 {
		return hdrLen
	}
	h[0] = byte(1 + m.Len/4) // option length in 4-byte words
	if m.Type&geneveCritical != 0 {
		h[1] = geneveFlagC
	}
	o := h[hdrLen:]
	o[0], o[1], o[2], o[3] = byte(m.Class>>8), byte(m.Class), m.Type, m.Len/4
	d := uint32(key >> 32)
	o[4], o[5], o[6], o[7] = byte(d>>24), byte(d>>16), byte(d>>8), byte(d)
	return hdrLen + 4 + int(m.Len)
}

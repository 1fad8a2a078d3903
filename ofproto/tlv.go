package ofproto

import (
	"slices"

	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// The TLV table (NXT_TLV_TABLE_MOD): which Geneve option fills which
// tun_metadata field. The flow key has room for one 4-byte option
// (flow.Tunnel.Opt), what OVN maps; matching and setting tun_metadataN
// need no table (the key names the field by its index), so only the
// Geneve ports use it, to read and write the option on the wire.
//
// The table is not saved with the flows: a controller adds it again when
// it reconnects after a restart (ovn-controller asks for the table on
// every connection and maps its option when it is missing).

// tlvSpace is the option data the key carries, what the table reply
// offers as max_option_space.
const tlvSpace = 4

// tlvMod applies a TLV table mod, all of it or nothing, with Open
// vSwitch's errors, and gives the ports the new mapping.
func (b *Bridge) tlvMod(m *ofpwire.TLVTableMod) error {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	next := slices.Clone(b.tlv)
	switch m.Command {
	case ofpwire.TLVAdd:
		for _, e := range m.Maps {
			for _, o := range next {
				if o.Index == e.Index {
					return ofpwire.NXError(ofpwire.TTMFCAlreadyMapped, "")
				}
				if o.Class == e.Class && o.Type == e.Type {
					return ofpwire.NXError(ofpwire.TTMFCDupEntry, "")
				}
			}
			next = append(next, e)
		}
		space := 0
		for _, e := range next {
			space += int(e.Len)
		}
		if space > tlvSpace || len(next) > 1 {
			return ofpwire.NXError(ofpwire.TTMFCTableFull, "this switch carries one Geneve option of up to 4 bytes")
		}
	case ofpwire.TLVDelete:
		for _, e := range m.Maps {
			next = slices.DeleteFunc(next, func(o ofpwire.TLVMap) bool { return o.Index == e.Index })
		}
	case ofpwire.TLVClear:
		next = nil
	default:
		return ofpwire.NXError(ofpwire.TTMFCBadCommand, "")
	}
	b.tlv = next
	o := b.tunnelOptionLocked()
	for no := range b.recs {
		if p := b.dp.Port(no); p != nil {
			if mp, ok := p.Dev.(netdev.TunnelOptionMapper); ok {
				mp.MapTunnelOption(o)
			}
		}
	}
	return nil
}

// tunnelOptionLocked is the mapping the Geneve ports carry, nil for none.
func (b *Bridge) tunnelOptionLocked() *netdev.TunnelOption {
	if len(b.tlv) == 0 {
		return nil
	}
	e := b.tlv[0]
	return &netdev.TunnelOption{Class: e.Class, Type: e.Type, Len: e.Len, Index: int(e.Index)}
}

// tlvReply answers NXT_TLV_TABLE_REQUEST.
func (b *Bridge) tlvReply() *ofpwire.TLVTableReply {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	return &ofpwire.TLVTableReply{MaxSpace: tlvSpace, MaxFields: ofpwire.NumTunMetadata, Maps: slices.Clone(b.tlv)}
}

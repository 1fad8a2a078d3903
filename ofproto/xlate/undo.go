package xlate

import (
	"encoding/binary"
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
)

var ones16 = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// undo emits the actions that take the packet back to saved (the walk's
// state before a bucket or an output to TABLE) and resets the walk's state
// to it. A field is restored when it was written for the first time (its
// value may differ packet to packet) or changed its value; the restored
// values are consulted, as seen before. A field unknown before and known
// after was written too, whatever the values say (an unknown field's value
// in the key is meaningless): restoring it needs the unknown value.
func (x *xlator) undo(saved *savedState) error {
	var ch flow.Mask
	cw, kw, sk, nw, ow := ch.Words(), x.key.Words(), saved.key.Words(), x.written.Words(), saved.written.Words()
	uw, su := x.unknown.Words(), saved.unknown.Words()
	for i := range cw {
		cw[i] = nw[i]&^ow[i] | (kw[i] ^ sk[i]) | su[i]&^uw[i]
	}
	cur, net := x.key, x.tags-saved.tags
	x.key, x.written, x.unknown, x.tags, x.inner = saved.key, saved.written, saved.unknown, saved.tags, saved.inner
	var need flow.Mask
	err := x.undoFields(&cur, &saved.key, &ch, &need, net)
	x.consult(&need)
	return err
}

func (x *xlator) undoFields(cur, saved *flow.Key, ch, need *flow.Mask, net int) error {
	// VLAN tags: push/pop already consulted every tag bit.
	switch net {
	case 0:
		if ch.VLAN[0].TCI == 0 && ch.VLAN[0].TPID == 0 {
			break
		}
		if cur.VLAN[0].TPID != saved.VLAN[0].TPID || cur.VLAN[1] != saved.VLAN[1] {
			return errTags
		}
		if m := ch.VLAN[0].TCI; m != 0 && saved.VLAN[0].TPID&flow.TPIDPresent != 0 {
			need.VLAN[0].TCI |= m
			if err := x.emit(actions.Action{Kind: actions.SetVLANTCI, Val16: m, Val16b: saved.VLAN[0].TCI & m}); err != nil {
				return err
			}
		}
	case 1:
		if cur.VLAN[1] != saved.VLAN[0] {
			return errTags
		}
		if err := x.emit(actions.Action{Kind: actions.PopVLAN}); err != nil {
			return err
		}
	case -1:
		inner := saved.VLAN[1]
		if cur.VLAN[0].TPID != inner.TPID {
			return errTags
		}
		if cur.VLAN[0].TCI != inner.TCI {
			if err := x.emit(actions.Action{Kind: actions.SetVLANTCI, Val16: 0xffff, Val16b: inner.TCI}); err != nil {
				return err
			}
		}
		if err := x.emit(actions.Action{Kind: actions.PushVLAN, Val16: saved.VLAN[0].TPID, Val16b: saved.VLAN[0].TCI}); err != nil {
			return err
		}
	default:
		return errTags
	}

	return x.undoHeaders(saved, ch, need)
}

// errARPOpUndo reports a bucket that rewrote the ARP opcode of a packet
// whose opcode the key does not hold (above 255, kept as 0).
var errARPOpUndo = fmt.Errorf("%w: group bucket ARP opcode change that cannot be undone", ErrUnsupported)

// undoHeaders emits the restores of every header field but the VLAN tags.
// The ICMP type and code go back before the neighbour discovery fields,
// which the datapath only rewrites in an ND message.
func (x *xlator) undoHeaders(saved *flow.Key, ch, need *flow.Mask) error {
	var acts [26]actions.Action
	n := 0
	add := func(a actions.Action) {
		acts[n] = a
		n++
	}
	addr := func(kind actions.Kind, b []byte) {
		a := actions.Action{Kind: kind}
		copy(a.Addr[:], b)
		add(a)
	}
	be32 := func(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
	arp := saved.EthType == header.EtherTypeARP
	icmp := saved.EthType == header.EtherTypeIPv4 && saved.NwProto == header.IPProtoICMP || saved.EthType == header.EtherTypeIPv6 && saved.NwProto == header.IPProtoICMPv6
	if ch.EthSrc != ([6]byte{}) {
		addr(actions.SetEthSrc, saved.EthSrc[:])
		need.EthSrc = ones6
	}
	if ch.EthDst != ([6]byte{}) {
		addr(actions.SetEthDst, saved.EthDst[:])
		need.EthDst = ones6
	}
	if m := ch.NwTOS; m != 0 {
		add(actions.Action{Kind: actions.SetIPTOS, Val8: saved.NwTOS & m, Mask8: m})
		need.NwTOS |= m
	}
	if ch.NwTTL != 0 {
		add(actions.Action{Kind: actions.SetIPTTL, Val8: saved.NwTTL})
		need.NwTTL = 0xff
	}
	if ch.IPv4Src != 0 {
		addr(ipv4SetKind(arp, true), be32(saved.IPv4Src))
		need.IPv4Src = ^uint32(0)
	}
	if ch.IPv4Dst != 0 {
		addr(ipv4SetKind(arp, false), be32(saved.IPv4Dst))
		need.IPv4Dst = ^uint32(0)
	}
	if ch.IPv6Src != ([16]byte{}) {
		addr(actions.SetIPv6Src, saved.IPv6Src[:])
		need.IPv6Src = ones16
	}
	if ch.IPv6Dst != ([16]byte{}) {
		addr(actions.SetIPv6Dst, saved.IPv6Dst[:])
		need.IPv6Dst = ones16
	}
	if ch.TpSrc != 0 {
		if icmp {
			add(actions.Action{Kind: actions.SetICMPType, Val8: uint8(saved.TpSrc)})
		} else {
			add(actions.Action{Kind: actions.SetL4Src, Val16: saved.TpSrc})
		}
		need.TpSrc = 0xffff
	}
	if ch.TpDst != 0 {
		if icmp {
			add(actions.Action{Kind: actions.SetICMPCode, Val8: uint8(saved.TpDst)})
		} else {
			add(actions.Action{Kind: actions.SetL4Dst, Val16: saved.TpDst})
		}
		need.TpDst = 0xffff
	}
	if ch.NwProto != 0 && arp {
		if saved.NwProto == 0 {
			return errARPOpUndo
		}
		add(actions.Action{Kind: actions.SetARPOp, Val16: uint16(saved.NwProto)})
		need.NwProto = 0xff
	}
	if ch.NDTarget != ([16]byte{}) {
		addr(actions.SetNDTarget, saved.NDTarget[:])
		need.NDTarget = ones16
	}
	if ch.ArpSHA != ([6]byte{}) {
		kind := actions.SetNDSLL
		if arp {
			kind = actions.SetARPSHA
		}
		addr(kind, saved.ArpSHA[:])
		need.ArpSHA = ones6
	}
	if ch.ArpTHA != ([6]byte{}) {
		kind := actions.SetNDTLL
		if arp {
			kind = actions.SetARPTHA
		}
		addr(kind, saved.ArpTHA[:])
		need.ArpTHA = ones6
	}
	if ch.IPv6Label != 0 {
		add(actions.Action{Kind: actions.SetIPv6Label, Val32: saved.IPv6Label})
		need.IPv6Label = ^uint32(0)
	}
	lse := saved.MPLSLse
	if ch.MPLSLse&lseLabel != 0 {
		add(actions.Action{Kind: actions.SetMPLSLabel, Val32: lse >> 12})
		need.MPLSLse |= lseLabel
	}
	if ch.MPLSLse&lseTC != 0 {
		add(actions.Action{Kind: actions.SetMPLSTC, Val8: uint8(lse>>9) & 7})
		need.MPLSLse |= lseTC
	}
	if ch.MPLSLse&lseTTL != 0 {
		add(actions.Action{Kind: actions.SetMPLSTTL, Val8: uint8(lse)})
		need.MPLSLse |= lseTTL
	}
	if ch.MPLSLse&lseBoS != 0 {
		add(actions.Action{Kind: actions.SetMPLSBoS, Val8: uint8(lse>>8) & 1})
		need.MPLSLse |= lseBoS
	}
	if ch.PBBISID != 0 {
		add(actions.Action{Kind: actions.SetPBBISID, Val32: saved.PBBISID})
		need.PBBISID = ^uint32(0)
	}
	if ch.TunnelID != 0 {
		a := actions.Action{Kind: actions.SetTunnelID}
		binary.BigEndian.PutUint64(a.Addr[:8], saved.TunnelID)
		add(a)
		need.TunnelID = ^uint64(0)
	}
	if ch.Tun.Src != ([16]byte{}) {
		add(actions.Action{Kind: actions.SetTunnelSrc, Addr: saved.Tun.Src})
		need.Tun.Src = ones16
	}
	if ch.Tun.Dst != ([16]byte{}) {
		add(actions.Action{Kind: actions.SetTunnelDst, Addr: saved.Tun.Dst})
		need.Tun.Dst = ones16
	}
	if ch.Tun.Flags&flow.TunFlagOptIndex != 0 || ch.Tun.Opt != ([4]byte{}) {
		o := saved.Tun.Opt
		add(actions.Action{Kind: actions.SetTunnelOpt, Val8: uint8(saved.Tun.OptIndex() + 1),
			Val32: uint32(o[0])<<24 | uint32(o[1])<<16 | uint32(o[2])<<8 | uint32(o[3])})
		need.Tun.Flags |= flow.TunFlagOptIndex
		need.Tun.Opt = [4]byte{0xff, 0xff, 0xff, 0xff}
	}
	for _, a := range acts[:n] {
		if err := x.emit(a); err != nil {
			return err
		}
	}
	return nil
}

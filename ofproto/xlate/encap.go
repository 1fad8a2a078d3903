package xlate

import (
	"errors"
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
)

// MPLS, PBB and the TTL copies. The package doc says what the walk knows
// of the packet after each.

const (
	lseLabel = 0xfffff000
	lseTC    = 0x00000e00
	lseBoS   = 0x00000100
	lseTTL   = 0x000000ff
)

func isMPLSType(t uint16) bool { return t == header.EtherTypeMPLS || t == header.EtherTypeMPLSMcast }

// isVLANType reports the Ethernet types extraction takes for a VLAN tag.
func isVLANType(t uint16) bool {
	return t == header.EtherTypeVLAN || t == header.EtherTypeQinQ || t == header.EtherTypeQinQOld
}

// isMPLS reports whether the packet is MPLS, consulting eth_type.
func (x *xlator) isMPLS() bool {
	x.consult(&flow.Mask{EthType: 0xffff})
	return isMPLSType(x.key.EthType)
}

// Whether the walk knows the TTL that the top MPLS entry covers (the next
// entry's, or the IP TTL under the bottom of the stack).
const (
	innerUnknown = iota // the packet came in with the stack, or it was popped
	innerNone           // the payload has no TTL: copies do nothing
	innerKnown
)

// innerTTL is the TTL the top MPLS entry covers, as far as the walk knows.
// It is only known for an entry this translation pushed, and its value was
// consulted then.
type innerTTL struct {
	state uint8
	ttl   uint8
}

// l3Fields is every key field extraction fills from behind the Ethernet
// type, except the MPLS entry and I-SID, which the pushes handle
// themselves.
var l3Fields = func() (m flow.Mask) {
	m.NwProto, m.NwFrag, m.NwTOS, m.NwTTL, m.TCPFlags = 0xff, 0xff, 0xff, 0xff, 0xffff
	m.IPv4Src, m.IPv4Dst, m.TpSrc, m.TpDst, m.IPv6Label = ^uint32(0), ^uint32(0), 0xffff, 0xffff, ^uint32(0)
	m.IPv6Src, m.IPv6Dst, m.NDTarget = ones16, ones16, ones16
	m.ArpSHA, m.ArpTHA, m.IPv6ExtHdr = ones6, ones6, 0xffff
	return m
}()

// Fields extraction fills behind each Ethernet type: what becomes unknown
// when a pop MPLS exposes a header of that type.
var (
	ipv4Fields = func() (m flow.Mask) {
		m.NwProto, m.NwFrag, m.NwTOS, m.NwTTL, m.TCPFlags = 0xff, 0xff, 0xff, 0xff, 0xffff
		m.IPv4Src, m.IPv4Dst, m.TpSrc, m.TpDst = ^uint32(0), ^uint32(0), 0xffff, 0xffff
		return m
	}()
	ipv6Fields = func() (m flow.Mask) {
		m = l3Fields
		m.IPv4Src, m.IPv4Dst = 0, 0
		return m
	}()
	arpFields = func() (m flow.Mask) {
		m.NwProto, m.IPv4Src, m.IPv4Dst, m.ArpSHA, m.ArpTHA = 0xff, ^uint32(0), ^uint32(0), ones6, ones6
		return m
	}()
)

// overwrite sets the bits of m in the key to zero and records them as
// written and known: what a re-extraction gives that parses nothing there.
func (x *xlator) overwrite(m *flow.Mask) {
	k, w, u, mw := x.key.Words(), x.written.Words(), x.unknown.Words(), m.Words()
	for i := range mw {
		k[i] &^= mw[i]
		w[i] |= mw[i]
		u[i] &^= mw[i]
	}
}

// blank makes the bits of m unknown (and written: they are no longer the
// original packet's).
func (x *xlator) blank(m *flow.Mask) {
	w, u, mw := x.written.Words(), x.unknown.Words(), m.Words()
	for i := range mw {
		w[i] |= mw[i]
		u[i] |= mw[i]
	}
}

// setLSE writes the bits of the top entry under msk.
func (x *xlator) setLSE(msk, val uint32) {
	x.key.MPLSLse = x.key.MPLSLse&^msk | val&msk
	x.written.MPLSLse |= msk
	x.unknown.MPLSLse &^= msk
}

func (x *xlator) pushMPLS(typ uint16) error {
	x.consult(&flow.Mask{EthType: 0xffff})
	old := x.key.EthType
	if old < 0x0600 {
		return nil // an 802.3 frame has no type to put behind the entry
	}
	if typ != header.EtherTypeMPLSMcast {
		typ = header.EtherTypeMPLS
	}
	var lse uint32
	var in innerTTL
	switch {
	case isMPLSType(old):
		// The new entry copies the old top one, whose bits stay the
		// original packet's unless written; its TTL is the inner TTL now.
		x.consult(&flow.Mask{MPLSLse: lseTTL})
		lse = x.key.MPLSLse &^ lseBoS
		in = innerTTL{state: innerKnown, ttl: uint8(x.key.MPLSLse)}
		x.written.MPLSLse |= lseBoS
		x.unknown.MPLSLse &^= lseBoS
	case old == header.EtherTypeIPv4 || old == header.EtherTypeIPv6:
		x.consult(&flow.Mask{NwTTL: 0xff})
		lse = lseBoS | uint32(x.key.NwTTL)
		in = innerTTL{state: innerKnown, ttl: x.key.NwTTL}
		x.written.MPLSLse, x.unknown.MPLSLse = ^uint32(0), 0
	default:
		// The datapath's TTL copies go by the payload's first nibble,
		// whatever the old type said (a frame retyped by pop MPLS or
		// set eth_type may still carry an IP header): unknown, not none.
		lse = lseBoS
		in = innerTTL{state: innerUnknown}
		x.written.MPLSLse, x.unknown.MPLSLse = ^uint32(0), 0
	}
	m := l3Fields
	m.EthType, m.PBBISID = 0xffff, ^uint32(0)
	x.overwrite(&m)
	x.key.EthType, x.key.MPLSLse = typ, lse
	x.inner = in
	x.irrev++
	return x.emit(actions.Action{Kind: actions.PushMPLS, Val16: typ})
}

func (x *xlator) popMPLS(typ uint16) error {
	if !x.isMPLS() {
		return nil
	}
	if typ < 0x0600 || isVLANType(typ) {
		// Re-extraction would see a length or a tag there: the walk would
		// not even know the Ethernet type.
		return fmt.Errorf("%w: pop_mpls to Ethernet type %#x", ErrUnsupported, typ)
	}
	x.retype(typ)
	return x.emit(actions.Action{Kind: actions.PopMPLS, Val16: typ})
}

// pushPBB inserts an I-TAG in front of any VLAN tags. OpenFlow 1.3's copy
// rules give it the I-SID of an outer I-TAG (0 without one) and the PCP of
// the outer VLAN tag (0 untagged) as its I-PCP.
func (x *xlator) pushPBB() error {
	x.consult(&flow.Mask{EthType: 0xffff, VLAN: [2]flow.VLANTag{{TPID: flow.TPIDPresent}}})
	k := &x.key
	var pcp uint8
	if k.VLAN[0].TPID&flow.TPIDPresent != 0 {
		x.consult(&flow.Mask{VLAN: [2]flow.VLANTag{{TCI: 0xe000}}})
		pcp = uint8(k.VLAN[0].TCI >> 13)
	}
	var isid uint32
	if k.EthType == header.EtherTypePBB {
		x.consult(&flow.Mask{PBBISID: ^uint32(0)})
		isid = k.PBBISID
	}
	m := l3Fields
	m.EthType, m.PBBISID, m.MPLSLse, m.VLAN = 0xffff, ^uint32(0), ^uint32(0), allVLAN
	x.overwrite(&m)
	k.EthType, k.PBBISID = header.EtherTypePBB, isid
	x.inner = innerTTL{}
	x.irrev++
	return x.emit(actions.Action{Kind: actions.PushPBB, Val16: header.EtherTypePBB, Val8: pcp << 5, Val32: isid})
}

// popPBB leaves the customer frame, of which the key knew nothing.
func (x *xlator) popPBB() error {
	if !x.ethTypeIs(header.EtherTypePBB) {
		return nil
	}
	var m flow.Mask
	mw := m.Words()
	for i := range mw {
		mw[i] = ^uint64(0)
	}
	m.InPort, m.TunnelID = 0, 0
	x.blank(&m)
	x.inner = innerTTL{}
	x.irrev++
	return x.emit(actions.Action{Kind: actions.PopPBB})
}

func (x *xlator) setMPLSTTL(ttl uint8) error {
	if !x.isMPLS() {
		return nil
	}
	x.setLSE(lseTTL, uint32(ttl))
	return x.emit(actions.Action{Kind: actions.SetMPLSTTL, Val8: ttl})
}

// decMPLSTTL decrements the top entry's TTL; at 0 or 1 the packet goes to
// the controller with OFPR_INVALID_TTL instead and processing stops. On a
// packet that is not MPLS it does nothing, as dec NW TTL on non-IP.
func (x *xlator) decMPLSTTL(table uint8) error {
	if !x.isMPLS() {
		return nil
	}
	x.consult(&flow.Mask{MPLSLse: lseTTL})
	ttl := uint8(x.key.MPLSLse)
	if ttl <= 1 {
		return x.invalidTTL(table, ttl)
	}
	x.setLSE(lseTTL, uint32(ttl-1))
	return x.emit(actions.Action{Kind: actions.DecMPLSTTL})
}

func (x *xlator) copyTTLOut() error {
	if !x.isMPLS() {
		return nil
	}
	switch x.inner.state {
	case innerNone:
		return nil
	case innerKnown:
		x.setLSE(lseTTL, uint32(x.inner.ttl))
	default:
		x.blank(&flow.Mask{MPLSLse: lseTTL})
	}
	return x.emit(actions.Action{Kind: actions.CopyTTLOut})
}

func (x *xlator) copyTTLIn() error {
	if !x.isMPLS() || x.inner.state == innerNone {
		return nil
	}
	x.consult(&flow.Mask{MPLSLse: lseTTL})
	if x.inner.state == innerKnown {
		x.inner.ttl = uint8(x.key.MPLSLse)
	}
	x.irrev++
	return x.emit(actions.Action{Kind: actions.CopyTTLIn})
}

// savedState is the walk's packet state at some point, to go back to after
// a group bucket or an output to TABLE.
type savedState struct {
	key, written, unknown flow.Key
	tags, irrev           int
	inner                 innerTTL
	pipe                  ofmatch.Pipe
}

func (x *xlator) save() savedState {
	return savedState{key: x.key, written: x.written, unknown: x.unknown,
		tags: x.tags, irrev: x.irrev, inner: x.inner, pipe: x.pipe}
}

// errIrreversible reports a group bucket, or an output to TABLE followed by
// more actions, that changed the packet in a way the datapath cannot undo.
var errIrreversible = fmt.Errorf("%w: MPLS/PBB push or pop, or copy TTL inwards, before actions that need the packet unchanged", ErrUnsupported)

// outputTable submits the packet as rewritten so far to Options.Table, as
// a packet-out's output to OFPP_TABLE does. The packet-out's later
// actions see the packet as it was: the restore is left pending and
// emitted only if something follows.
func (x *xlator) outputTable() error {
	tbl := x.opts.Table
	if tbl == nil {
		return fmt.Errorf("%w: output to TABLE outside a packet-out", ErrUnsupported)
	}
	if x.depth > 0 {
		return fmt.Errorf("%w: output to TABLE in a group bucket", ErrUnsupported)
	}
	saved := x.save()
	entry := x.checkpoint()
	set, table, miss, p, cookie := x.set, x.table, x.miss, x.p, x.cookie
	x.set, x.opts.Table, x.p = actionSet{}, nil, tbl
	if tbl != p {
		tbl.RLock()
	}
	if x.tr != nil {
		x.traceNote(TraceAction, "resubmitting the packet to table 0")
	}
	x.nested++
	err := x.walkTables()
	x.nested--
	if tbl != p {
		tbl.RUnlock()
	}
	x.set, x.opts.Table, x.p, x.table, x.miss, x.cookie = set, tbl, p, table, miss, cookie
	x.pipe = saved.pipe
	x.stopped = false // an invalid TTL ends the submitted copy only
	if err == nil && x.irrev != saved.irrev && x.opts.Recirc != nil {
		// The tables pushed or popped: the packet-out's later actions
		// could not get the packet back, so the tables run on a
		// recirculated copy (at the cost of a recirculation when
		// nothing follows).
		err = errFreezeCopy
	}
	if errors.Is(err, errFreezeCopy) {
		// The tables needed a field behind a header they popped: a
		// copy of the packet, as submitted, recirculates to go
		// through them from table 0, where the walk can freeze in
		// place; the packet-out's later actions see the original.
		x.out, x.refs = x.out[:entry.out], x.refs[:entry.refs]
		x.path.Truncate(entry.path)
		x.key, x.written, x.unknown = saved.key, saved.written, saved.unknown
		x.tags, x.irrev, x.inner = saved.tags, saved.irrev, saved.inner
		x.blind = false
		return x.freezeCopy(frozenKey{stage: stageTable, p: tbl}, nil)
	}
	if err != nil {
		return err
	}
	x.pending = &saved
	return nil
}

// flushPending emits the restore an output to TABLE left pending, now
// that another action or lookup needs the packet as it was.
func (x *xlator) flushPending() error {
	s := x.pending
	if s == nil {
		return nil
	}
	x.pending = nil
	if x.irrev != s.irrev {
		return errIrreversible
	}
	err := x.undo(s)
	if x.blind {
		// Putting back a field behind a pop needs its value: neither
		// the key nor a recirculation (the packet is not put back yet)
		// has it.
		x.noFreeze = true
	}
	return err
}

// retype records that the frame's Ethernet type became typ over bytes
// that were parsed as something else (pop_mpls, set eth_type): every
// field behind the type is overwritten, and those the new type would
// parse are unknown until the datapath extracts the frame again.
func (x *xlator) retype(typ uint16) {
	m := l3Fields
	m.EthType, m.PBBISID, m.MPLSLse = 0xffff, ^uint32(0), ^uint32(0)
	x.overwrite(&m)
	x.key.EthType = typ
	var behind flow.Mask
	switch {
	case typ == header.EtherTypeIPv4:
		behind = ipv4Fields
	case typ == header.EtherTypeIPv6:
		behind = ipv6Fields
	case typ == header.EtherTypeARP:
		behind = arpFields
	case isMPLSType(typ):
		behind.MPLSLse = ^uint32(0)
	case typ == header.EtherTypePBB:
		behind.PBBISID = ^uint32(0)
	}
	x.blank(&behind)
	x.inner = innerTTL{}
	x.irrev++
}

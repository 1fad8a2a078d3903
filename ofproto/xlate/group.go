package xlate

import (
	"errors"
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// errTags reports a group bucket whose VLAN pushes and pops undo cannot
// reverse.
var errTags = fmt.Errorf("%w: group bucket VLAN changes that cannot be undone", ErrUnsupported)

// maxGroupDepth bounds groups run inside group buckets; GROUP_MOD refuses
// loops, so this only guards that invariant.
const maxGroupDepth = 32

func allLive(uint32) bool { return true }

// group translates the group action for group id; final is set when it is
// the last thing the translation does (from the action set), so the last
// bucket need not undo its rewrites.
func (x *xlator) group(id ofpwire.Group, table uint8, miss, final bool) error {
	if x.opts.Groups == nil {
		return fmt.Errorf("%w: group action", ErrUnsupported)
	}
	if x.depth >= maxGroupDepth {
		return ErrLoop
	}
	t := x.opts.Groups
	g := t.Get(id)
	if g == nil {
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("group %d does not exist: dropped", id))
		}
		return nil // unknown group: drop
	}
	x.refs = append(x.refs, g) // the group counts the megaflow's traffic
	x.depth++
	err := x.runGroup(t, g, table, miss, final)
	x.depth--
	return err
}

func (x *xlator) runGroup(t *pipeline.GroupTable, g *pipeline.Group, table uint8, miss, final bool) error {
	live := x.opts.PortLive
	if live == nil {
		live = allLive
	}
	switch g.Type() {
	case ofpwire.GroupTypeAll:
		bs := g.Buckets()
		for i := range bs {
			if x.tr != nil {
				x.traceGroup(g, &bs[i])
			}
			if err := x.bucket(&bs[i], table, miss, final && i == len(bs)-1); err != nil {
				return err
			}
		}
		return nil
	case ofpwire.GroupTypeIndirect:
		var b *pipeline.Bucket
		if bs := g.Buckets(); len(bs) > 0 {
			b = &bs[0]
		}
		return x.chosenBucket(g, b, table, miss, final)
	case ofpwire.GroupTypeFastFailover:
		return x.chosenBucket(g, t.FirstLive(g, live), table, miss, final)
	case ofpwire.GroupTypeSelect:
		return x.chosenBucket(g, t.SelectBucket(g, x.selectHash(g.Selection()), x.opts.PortLive), table, miss, final)
	}
	return fmt.Errorf("%w: group type %d", ErrUnsupported, g.Type())
}

// chosenBucket runs b, the one bucket an INDIRECT, FAST_FAILOVER or
// SELECT group picked; nil (no bucket, none live) drops.
func (x *xlator) chosenBucket(g *pipeline.Group, b *pipeline.Bucket, table uint8, miss, final bool) error {
	if x.tr != nil {
		x.traceGroup(g, b)
	}
	if b == nil {
		return nil
	}
	return x.bucket(b, table, miss, final)
}

// flowHash hashes the packet (as rewritten so far) for SELECT groups,
// consulting the fields it hashes: the Ethernet addresses, type and VLAN
// IDs always, so that traffic varying only at L2 spreads too; then, when
// present, the IP protocol and addresses (IPv4, IPv6, or ARP's protocol
// addresses) and the transport ports (ICMP type and code). Fields a packet
// cannot have are left out, to keep its megaflows as wide as they can be.
func (x *xlator) flowHash() uint32 {
	var m flow.Mask
	m.EthSrc, m.EthDst, m.EthType = ones6, ones6, 0xffff
	m.VLAN[0].TCI, m.VLAN[1].TCI = 0x0fff, 0x0fff
	x.consult(&flow.Mask{EthType: 0xffff})
	switch x.key.EthType {
	case header.EtherTypeIPv4, header.EtherTypeIPv6:
		m.NwProto = 0xff
		if x.key.EthType == header.EtherTypeIPv4 {
			m.IPv4Src, m.IPv4Dst = ^uint32(0), ^uint32(0)
		} else {
			m.IPv6Src, m.IPv6Dst = ones16, ones16
		}
		x.consult(&flow.Mask{NwProto: 0xff, NwFrag: flow.FragLater})
		switch x.key.NwProto {
		case header.IPProtoTCP, header.IPProtoUDP, header.IPProtoSCTP, header.IPProtoICMP, header.IPProtoICMPv6:
			if x.key.NwFrag&flow.FragLater == 0 {
				m.TpSrc, m.TpDst = 0xffff, 0xffff
			}
		}
	case header.EtherTypeARP:
		m.IPv4Src, m.IPv4Dst = ^uint32(0), ^uint32(0)
	}
	x.consult(&m)
	var k flow.Key
	x.key.ApplyMask(&m, &k)
	return k.Hash()
}

// selectHash is what a select group picks its bucket by: with Open
// vSwitch's selection_method=hash, a hash of the packet fields it names
// (the bits their masks select, consulted), seeded with its parameter;
// otherwise (dp_hash, or no method) flowHash. Pipeline fields are not
// hashed, and a field the packet lacks hashes as what the key holds there.
//
// The dp_hash selection (any but hash with fields, as Open vSwitch's
// default is dp_hash too) leaves its hash in dp_hash for what follows, the
// bucket and the rest of the walk, to match on, and picks by the dp_hash an
// earlier select group left, as Open vSwitch's datapath hash is computed
// once. The value is never 0, which means "not computed" in Open vSwitch.
// It derives from key bits flowHash consulted, so dp_hash is pipeline
// state like the registers: matching on it adds no megaflow bits, and the
// megaflow is exact.
func (x *xlator) selectHash(sel *ofpwire.GroupSelection) uint32 {
	if sel == nil || sel.Method != "hash" || len(sel.Fields) == 0 {
		if x.pipe.DPHash == 0 {
			x.pipe.DPHash = max(x.flowHash(), 1)
		}
		return x.pipe.DPHash
	}
	var m flow.Mask
	mw := m.Words()
	for _, o := range sel.Fields {
		if int(o.Field) >= len(fieldKeyBits()) {
			continue
		}
		for i, kb := range fieldKeyBits()[o.Field] {
			if kb.ok && i < 8*len(o.Value) && ofpwire.Bits(o.Value, i, 1) == 1 {
				mw[kb.word] |= 1 << kb.bit
			}
		}
	}
	x.consult(&m)
	var k flow.Key
	x.key.ApplyMask(&m, &k)
	h := uint64(k.Hash()) ^ sel.Param*0x9e3779b97f4a7c15
	return uint32(h ^ h>>32)
}

// bucket runs one bucket's actions on a clone of the packet and, unless
// final, emits the actions that undo its rewrites. A bucket that needs a
// field behind a header it popped goes on after recirculation: the last
// thing a translation does freezes in place; any other bucket sends a
// copy of the packet, as it entered the bucket, to a recirculation that
// runs the whole bucket (and freezes in place there), and the original
// goes on as if the bucket had done nothing. A bucket that is followed by
// more work and made a change the datapath cannot undo (an MPLS or PBB
// push or pop) recirculates a copy the same way.
func (x *xlator) bucket(b *pipeline.Bucket, table uint8, miss, final bool) error {
	x.refs = append(x.refs, b)
	return x.clone(b.Actions, table, miss, final)
}

// clone runs acts on a clone of the packet and its pipeline state, as a
// group bucket or Open vSwitch's clone action does (see bucket).
func (x *xlator) clone(acts []ofpwire.Action, table uint8, miss, final bool) error {
	saved := x.save()
	entry := x.checkpoint()
	x.tind++
	inPlace := final && x.nested == 0 && x.pending == nil
	err := x.runActs(acts, 0, table, miss, inPlace)
	x.tind--
	x.stopped = false   // an invalid TTL ends this clone only
	x.pipe = saved.pipe // metadata and registers a bucket wrote do not leave it
	x.exited = false    // nor does an exit in it
	if err == nil && !final {
		if x.irrev != saved.irrev {
			err = errIrreversible
		} else {
			err = x.undo(&saved)
		}
		if x.blind || errors.Is(err, errIrreversible) {
			// The datapath cannot put the packet back for what follows
			// (a push or pop, or a rewrite of a field behind a pop):
			// the bucket runs on a recirculated copy instead.
			if x.opts.Recirc != nil && x.pending == nil {
				err = errFreezeCopy
			} else if err == nil {
				err = errBlind
			}
		}
	}
	if errors.Is(err, errFreezeCopy) && len(acts) > 0 {
		x.out, x.refs = x.out[:entry.out], x.refs[:entry.refs]
		x.path.Truncate(entry.path)
		x.key, x.written, x.unknown = saved.key, saved.written, saved.unknown
		x.tags, x.irrev, x.inner = saved.tags, saved.irrev, saved.inner
		x.blind = false
		return x.freezeCopy(frozenKey{stage: stageActs, table: table, miss: miss, cookie: x.cookie,
			pipe: saved.pipe, acts0: &acts[0]}, acts)
	}
	return err
}

// runActs runs acts from action from on, for a bucket (or the rest of one,
// thawed). An action that needs a field the walk does not know freezes
// the walk before it when inPlace (nothing follows the bucket), and asks
// for a copy to be recirculated (errFreezeCopy) otherwise.
func (x *xlator) runActs(acts []ofpwire.Action, from int, table uint8, miss, inPlace bool) error {
	for j := from; j < len(acts); j++ {
		ck := x.checkpoint()
		err := x.doAction(acts[j], table, miss)
		if x.blind {
			if errors.Is(err, errFreezeCopy) || !inPlace {
				return errFreezeCopy
			}
			x.freezing = acts
			return x.freeze(ck, frozenKey{stage: stageActs, table: table, miss: miss, cookie: x.cookie,
				pipe: x.pipe, act: uint16(j), acts0: &acts[0]}, nil)
		}
		if err != nil || x.stopped {
			return err
		}
	}
	return nil
}

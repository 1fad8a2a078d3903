package xlate

import (
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// check_pkt_larger(N)->dst[bit] (Open vSwitch's NXAST_CHECK_PKT_LARGER).
//
// The packet's length is not in the flow key, and must not be in the
// megaflow: one megaflow per pipeline would otherwise become one per
// packet size. Open vSwitch translates the rest of the pipeline twice,
// once with the bit set and once clear, into the two branches of a
// datapath check_pkt_len action. Our datapath action list is flat, so the
// two translations are frozen instead (the machinery of recirc.go): the
// walk ends with a CheckPktLen action that recirculates the packet, as
// rewritten so far, under one recirc_id or the other by its length, and
// each recirculated pass thaws the walk with the bit set accordingly. The
// cost is a second pass through the caches for every packet; each pass's
// megaflow stays independent of the length.
//
// What each branch runs is what Open vSwitch puts in it: the rest of the
// action list the check sits in and the rest of its entry's instructions
// (goto-table included), then the action set. Like Open vSwitch, the
// check ends that action list in the walk itself: an entry that
// resubmitted to it (or a clone or group bucket around that resubmit)
// goes on with its own later actions, on the packet without the bit,
// after the CheckPktLen, which then takes a copy. At the top of the walk
// nothing follows and the action set is not executed again (it ran in
// the branches).
//
// A check directly in a clone's or group bucket's action list, in the
// action set, in a packet-out's own actions or under an output to TABLE
// is refused as unsupported, as is a destination outside the pipeline
// state (registers, metadata, pkt_mark): a frozen state holds no packet
// field. Without a Recirculator it is refused too.

// forkPoint is where a check_pkt_larger at action j of apply-actions
// ins[i] of entry e lets the walk go on in its branches, or nil where
// that cannot be frozen as an entry's rest (a packet-out's own actions,
// whose scratch pipeline does not outlive the packet-out).
func (x *xlator) forkPoint(e *pipeline.Entry, ins []ofpwire.Instruction, i, j int) *Frozen {
	if x.opts.Table != nil {
		return nil
	}
	return &Frozen{key: frozenKey{p: x.p, stage: stageEntry, table: x.table, miss: x.miss, cookie: x.cookie,
		entry: e, instr: uint16(i), act: uint16(j + 1), ins0: &ins[0]}, ins: ins}
}

func (x *xlator) checkPktLarger(a *ofpwire.ActionCheckPktLarger) error {
	at := x.forkAt
	switch {
	case x.opts.Recirc == nil:
		return fmt.Errorf("%w: check_pkt_larger without recirculation", ErrUnsupported)
	case at == nil || x.nested > 0 || x.pending != nil:
		return fmt.Errorf("%w: check_pkt_larger outside a flow entry's apply-actions", ErrUnsupported)
	case !pipeField(a.Dst) || a.Dst == ofpwire.XMTypeConjID:
		return fmt.Errorf("%w: check_pkt_larger into field %d (not a register, metadata or pkt_mark)", ErrUnsupported, a.Dst)
	}
	saved := x.pipe
	var ids [2]uint32
	for i, bit := range [2]uint64{1, 0} {
		x.pipe = saved
		if err := x.loadBits(a.Dst, int(a.Ofs), 1, bit); err != nil {
			x.pipe = saved
			return err
		}
		f := *at
		f.key.pipe, f.key.set = x.pipe, x.set
		f.key.fork = forkState{stack: encodeStack(x.stackEntries())}
		if x.written.InPort != 0 {
			f.key.fork.inPort, f.key.fork.inPortSet = x.key.InPort, true
		}
		id, ok := x.opts.Recirc.Freeze(&f)
		if !ok {
			x.pipe = saved
			return fmt.Errorf("%w: no free recirc_id", ErrUnsupported)
		}
		ids[i] = id
	}
	// The walk goes on (where something resubmitted here) without the
	// bit, as Open vSwitch's does.
	x.pipe = saved
	x.forked = true
	if x.tr != nil {
		x.tr.forkKeys = append(x.tr.forkKeys, x.key)
		x.traceNote(TraceRecirc, fmt.Sprintf("check_pkt_larger(%d): the rest of this entry runs after a recirculation, as recirc(%#x) when the packet is longer, recirc(%#x) otherwise, to resume at %s",
			a.PktLen, ids[0], ids[1], at.String()))
	}
	return x.emit(actions.CheckPktLenAction(a.PktLen, ids[0], ids[1]))
}

// encodeStack packs the push:/pop: stack into a comparable string: per
// entry, its bit count then its 16 value bytes.
func encodeStack(st []stackEntry) string {
	if len(st) == 0 {
		return ""
	}
	b := make([]byte, 0, len(st)*18)
	for _, e := range st {
		b = append(b, byte(e.nbits>>8), byte(e.nbits))
		b = append(b, e.v[:]...)
	}
	return string(b)
}

// decodeStack undoes encodeStack.
func decodeStack(s string) []stackEntry {
	var st []stackEntry
	for ; len(s) >= 18; s = s[18:] {
		e := stackEntry{nbits: int(s[0])<<8 | int(s[1])}
		copy(e.v[:], s[2:18])
		st = append(st, e)
	}
	return st
}

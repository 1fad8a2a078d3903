package xlate

import (
	"fmt"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// learn builds the flow a learn action describes from the packet as the
// walk has it now (registers included) and hands it to Options.Learn,
// which applies it once the walk is over. The source bits a spec reads
// join the megaflow mask, so every packet that would learn something
// else gets a megaflow of its own (the datapath cannot learn). A trace
// shows the flow and learns nothing.
//
// With limit=N the flow is learned only while its table holds fewer than
// N flows with its cookie, unless it is there already (Open vSwitch's
// rule); result_dst gets 1 when it was learned or already there, 0 when
// the limit refused it. That is decided here, from the tables as the walk
// sees them: the megaflow holds the outcome, and stays right because any
// change to the tables (a flow learned, one expiring) drops every
// megaflow. Options.Learn applies the flow under the same limit, so
// translations running at once cannot learn past it; one that lost that
// race keeps its megaflow out of the datapath (see ofproto).
func (x *xlator) learn(a *ofpwire.ActionLearn) error {
	fm := &ofpwire.FlowMod{
		Command: ofpwire.FlowAdd, TableID: a.TableID, Priority: a.Priority, Cookie: a.Cookie,
		IdleTimeout: a.IdleTimeout, HardTimeout: a.HardTimeout,
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny,
	}
	if a.Flags&ofpwire.LearnSendFlowRem != 0 {
		fm.Flags = ofpwire.FlowFlagSendFlowRem
	}
	var acts []ofpwire.Action
	if a.FinIdleTimeout != 0 || a.FinHardTimeout != 0 {
		acts = append(acts, &ofpwire.ActionFinTimeout{IdleTimeout: a.FinIdleTimeout, HardTimeout: a.FinHardTimeout})
	}
	m, err := learnedMatch(a.Specs, x.learnSource)
	if err != nil {
		return err
	}
	fm.Match = m
	for i := range a.Specs {
		s := &a.Specs[i]
		n := int(s.NBits)
		switch s.Dst {
		case ofpwire.LearnDstLoad:
			size := ofpwire.FieldBits(s.DstField) / 8
			val, mask := make([]byte, size), make([]byte, size)
			copyBits(val, mask, int(s.DstOfs), x.learnSource(s), n)
			acts = append(acts, &ofpwire.ActionSetField{Field: ofpwire.NewMaskedOXM(s.DstField, val, mask)})
		case ofpwire.LearnDstOutput:
			// Open vSwitch's rule: a 16-bit port, a switch port or
			// IN_PORT, FLOOD, LOCAL or ALL; anything else outputs nothing.
			v := x.learnSource(s)
			if n > 16 && ofpwire.Bits(v, 16, n-16) != 0 {
				continue
			}
			p := uint16(ofpwire.Bits(v, 0, min(n, 16)))
			if p < 0xff00 || p == 0xfff8 || p == 0xfffb || p == 0xfffe || p == 0xfffc {
				acts = append(acts, &ofpwire.ActionOutput{Port: ofpwire.PortNo(ofmatch.InPort32(p))})
			}
		}
	}
	if len(acts) > 0 {
		fm.Instructions = []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: acts}}
	}
	if x.opts.Learn == nil && x.tr == nil {
		return fmt.Errorf("%w: learn without a table to learn into", ErrUnsupported)
	}
	allowed := x.learnAllowed(fm, a.Limit)
	switch {
	case x.tr != nil && allowed:
		x.traceNote(TraceAction, fmt.Sprintf("learned into table %d (not applied by a trace): %d match fields, %d actions", a.TableID, len(fm.Match.Fields), len(acts)))
	case x.tr != nil:
		x.traceNote(TraceAction, fmt.Sprintf("learn limit %d of table %d reached: nothing learned", a.Limit, a.TableID))
	case allowed:
		x.opts.Learn(fm, a.Limit)
	}
	if a.Flags&ofpwire.LearnWriteResult != 0 {
		bit := uint64(0)
		if allowed {
			bit = 1
		}
		return x.loadBits(a.ResultDst, int(a.ResultDstOfs), 1, bit)
	}
	return nil
}

// learnAllowed says whether a learn action with limit may learn fm now.
// The tables asked are the bridge's: x.p, locked by the walk, or, for a
// packet-out's own actions (x.p is their scratch pipeline), the one
// output to TABLE reaches.
func (x *xlator) learnAllowed(fm *ofpwire.FlowMod, limit uint32) bool {
	if limit == 0 {
		return true
	}
	if t := x.opts.Table; t != nil && t != x.p {
		t.RLock()
		defer t.RUnlock()
		return t.LearnAllowedLocked(fm, limit)
	}
	return x.p.LearnAllowedLocked(fm, limit)
}

// learnedMatch builds a learned flow's match from the match specs, each
// value (from val) at its bits; fields come in the order the specs first
// name them. NXM_OF_IN_PORT becomes the OpenFlow in_port, whole only.
func learnedMatch(specs []ofpwire.LearnSpec, val func(*ofpwire.LearnSpec) []byte) (ofpwire.Match, error) {
	var m ofpwire.Match
	var order []ofpwire.XMType
	vms := map[ofpwire.XMType]*[2][]byte{} // value, mask
	for i := range specs {
		s := &specs[i]
		if s.Dst != ofpwire.LearnDstMatch {
			continue
		}
		vm := vms[s.DstField]
		if vm == nil {
			size := ofpwire.FieldBits(s.DstField) / 8
			vm = &[2][]byte{make([]byte, size), make([]byte, size)}
			vms[s.DstField] = vm
			order = append(order, s.DstField)
		}
		copyBits(vm[0], vm[1], int(s.DstOfs), val(s), int(s.NBits))
	}
	for _, f := range order {
		vm := vms[f]
		full := true
		for _, b := range vm[1] {
			full = full && b == 0xff
		}
		switch {
		case f == ofpwire.XMTypeInPort16 && !full:
			return m, fmt.Errorf("%w: learn matching part of in_port", ErrUnsupported)
		case f == ofpwire.XMTypeInPort16:
			m.Fields = append(m.Fields, ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(ofmatch.InPort32(uint16(ofpwire.Bits(vm[0], 0, 16))))))
		case full:
			m.Fields = append(m.Fields, ofpwire.NewOXM(f, vm[0]))
		default:
			m.Fields = append(m.Fields, ofpwire.NewMaskedOXM(f, vm[0], vm[1]))
		}
	}
	return m, nil
}

// learnSource is the value a spec takes, in its low NBits bits: its
// immediate, or the bits of its source field (consulted).
func (x *xlator) learnSource(s *ofpwire.LearnSpec) []byte {
	if s.Imm != nil {
		return s.Imm
	}
	return x.subfield(s.SrcField, int(s.SrcOfs), int(s.NBits))
}

// subfield reads n bits of field f from bit ofs, right-aligned in (n+7)/8
// bytes, consulting exactly those bits when they are the packet's.
func (x *xlator) subfield(f ofpwire.XMType, ofs, n int) []byte {
	sel := make([]byte, ofpwire.FieldBits(f)/8)
	v := make([]byte, (n+7)/8)
	for done := 0; done < n; done += 64 {
		ofpwire.PutBits(sel, ofs+done, min(64, n-done), ^uint64(0))
	}
	src := x.fieldValue(f, sel)
	for done := 0; done < n; done += 64 {
		c := min(64, n-done)
		ofpwire.PutBits(v, done, c, ofpwire.Bits(src, ofs+done, c))
	}
	return v
}

// copyBits writes the low n bits of v into val from bit ofs and sets
// those bits of mask.
func copyBits(val, mask []byte, ofs int, v []byte, n int) {
	for done := 0; done < n; done += 64 {
		c := min(64, n-done)
		ofpwire.PutBits(val, ofs+done, c, ofpwire.Bits(v, done, c))
		ofpwire.PutBits(mask, ofs+done, c, ^uint64(0))
	}
}

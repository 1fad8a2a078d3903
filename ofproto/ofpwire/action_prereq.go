package ofpwire

import (
	"slices"

	"github.com/netrack/openflow/ofp"
)

// OpenFlow 1.3.5 §7.2.5 (ofp_action_set_field): "The match of the flow
// entry must contain the OXM prerequisite corresponding to the field to be
// set, otherwise an error must be generated", which §6.4 names
// OFPET_BAD_ACTION/OFPBAC_MATCH_INCONSISTENT. Open vSwitch holds the
// Nicira actions that read or write a field to the same rule and the
// same error (its ofpacts_check, mf_check_src/dst): a load (a set-field
// of any class), move, stack push or pop, output:reg, multipath,
// bundle_load or learn naming a field whose prerequisites the match
// lacks; and a learn whose learned match or loads name a field whose
// prerequisites the learned match's immediate values do not give. The match is
// followed through the actions: a push or pop of VLAN, MPLS or PBB, or a
// set-field of a prerequisite field, changes what the packet is (push
// MPLS makes an IP flow an MPLS one; pop MPLS to 0x0800 an IPv4 one whose
// IP protocol is unknown); a clone's actions see the match as it is where
// the clone is and change nothing after it. Conntrack fields' own
// prerequisite (a tracked connection) is not required, nor Open vSwitch's
// rules that are not a field's prerequisites (ct or fin_timeout on a
// match that is not IP or TCP, pop_vlan without a VLAN match): the
// OpenFlow 1.3 specification asks none of them.

var errMatchInconsistent = newErr(ETBadAction, BACMatchInconsistent)

// CheckActionPrerequisites returns the error above for the first action
// of ins (apply-actions in list order; write-actions in action-set order,
// after the apply-actions) that names a field whose prerequisites the
// flow's match m, as the earlier actions changed it, lacks.
func CheckActionPrerequisites(m Match, ins []Instruction) error {
	// st shares m's fields until an action changes them (own): most
	// flows only read fields, and a bundle checks 100,000 of them.
	st := Match{Fields: m.Fields}
	own := false
	var write []Action
	for _, in := range ins {
		switch in := in.(type) {
		case *InstrApplyActions:
			for _, a := range in.Actions {
				if err := st.followAction(a, &own); err != nil {
					return err
				}
			}
		case *InstrWriteActions:
			write = in.Actions
		}
	}
	// The action set runs pops, then pushes (MPLS, PBB, VLAN), then
	// set-fields (§5.10).
	rank := func(a Action) int {
		switch a.(type) {
		case *ActionPopVLAN, *ActionPopMPLS, *ActionPopPBB:
			return 0
		case *ActionPushMPLS:
			return 1
		case *ActionPushPBB:
			return 2
		case *ActionPushVLAN:
			return 3
		case *ActionSetField:
			return 4
		}
		return 5
	}
	set := slices.Clone(write)
	slices.SortStableFunc(set, func(a, b Action) int { return rank(a) - rank(b) })
	for _, a := range set {
		if err := st.followAction(a, &own); err != nil {
			return err
		}
	}
	return nil
}

// followAction checks the fields action a names against the match so far
// and applies what a (a set-field, a push or a pop) does to the packet's
// type. *own says m's fields are its own; they are copied before the
// first change when not.
func (m *Match) followAction(a Action, own *bool) error {
	mutate := func() {
		if !*own {
			// Room for the fields the change and a few more append: one
			// allocation, not a copy and then a grown copy.
			m.Fields = append(make([]OXM, 0, len(m.Fields)+4), m.Fields...)
			*own = true
		}
	}
	reads := func(fs ...ofp.XMType) error {
		for _, f := range fs {
			if !prereqOK(*m, f) {
				return errMatchInconsistent
			}
		}
		return nil
	}
	switch a := a.(type) {
	case *ActionRegMove:
		return reads(a.Src, a.Dst)
	case *ActionStack:
		return reads(a.Field)
	case *ActionOutputReg:
		return reads(a.Field)
	case *ActionMultipath:
		return reads(a.Dst)
	case *ActionBundle:
		if a.Load {
			return reads(a.Dst)
		}
	case *ActionLearn:
		return m.followLearn(a)
	case *ActionClone:
		inner := Match{Fields: m.Fields}
		innerOwn := false
		for _, b := range a.Actions {
			if err := inner.followAction(b, &innerOwn); err != nil {
				return err
			}
		}
	case *ActionSetField:
		f := a.Field
		if !prereqOK(*m, f.Field) {
			return errMatchInconsistent
		}
		if f.Class != ofp.XMClassOpenflowBasic {
			return nil
		}
		mutate()
		m.without(f.Field)
		m.Fields = append(m.Fields, OXM{Class: f.Class, Field: f.Field, Value: f.Value})
		if f.Field == ofp.XMTypeEthType {
			m.without(ofp.XMTypeIPProto, ofp.XMTypeICMPv6Type)
		}
	case *ActionPushVLAN:
		mutate()
		m.without(ofp.XMTypeVlanID)
		m.Fields = append(m.Fields, OXMUintMasked(ofp.XMTypeVlanID, uint64(VIDPresent), uint64(VIDPresent)))
	case *ActionPopVLAN:
		mutate()
		m.without(ofp.XMTypeVlanID, ofp.XMTypeVlanPCP) // an inner tag, if any, is not in the match
	case *ActionPushMPLS:
		mutate()
		m.retype(uint64(a.EtherType))
	case *ActionPopMPLS:
		mutate()
		m.retype(uint64(a.EtherType))
	case *ActionPushPBB:
		mutate()
		m.retype(uint64(a.EtherType))
	case *ActionPopPBB:
		mutate()
		m.without(ofp.XMTypeEthType, ofp.XMTypeIPProto, ofp.XMTypeICMPv6Type)
	}
	return nil
}

// retype makes the packet one of Ethernet type et whose upper layers the
// match no longer knows.
func (m *Match) retype(et uint64) {
	m.without(ofp.XMTypeEthType, ofp.XMTypeIPProto, ofp.XMTypeICMPv6Type)
	m.Fields = append(m.Fields, OXMUint(ofp.XMTypeEthType, et))
}

// without removes fields fs from m.
func (m *Match) without(fs ...ofp.XMType) {
	m.Fields = slices.DeleteFunc(m.Fields, func(o OXM) bool {
		return o.Class == ofp.XMClassOpenflowBasic && slices.Contains(fs, o.Field)
	})
}

// followLearn checks a learn action: the fields its specs copy from the
// packet against the match so far, and the fields of the flow it learns
// against that flow's match as its immediate values make it (a field a
// spec copies from the packet gives no prerequisite: its value is not
// known until then).
func (m *Match) followLearn(a *ActionLearn) error {
	var learned Match
	for _, sp := range a.Specs {
		if sp.Imm == nil && !prereqOK(*m, sp.SrcField) {
			return errMatchInconsistent
		}
		if sp.Dst == LearnDstOutput {
			continue
		}
		if !prereqOK(learned, sp.DstField) {
			return errMatchInconsistent
		}
		if sp.Dst == LearnDstMatch && sp.Imm != nil && sp.DstOfs == 0 && int(sp.NBits) == FieldBits(sp.DstField) {
			size, _, _ := FieldSize(sp.DstField)
			v := make([]byte, size)
			copy(v[max(0, size-len(sp.Imm)):], sp.Imm[max(0, len(sp.Imm)-size):])
			learned.Add(NewOXM(sp.DstField, v))
		}
	}
	return nil
}

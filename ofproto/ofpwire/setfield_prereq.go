package ofpwire

import (
	"slices"

	"github.com/netrack/openflow/ofp"
)

// OpenFlow 1.3.5 §7.2.5 (ofp_action_set_field): "The match of the flow
// entry must contain the OXM prerequisite corresponding to the field to be
// set, otherwise an error must be generated", which §6.4 names
// OFPET_BAD_ACTION/OFPBAC_MATCH_INCONSISTENT. The match is followed through
// the actions before the set-field: a push or pop of VLAN, MPLS or PBB, or
// a set-field of a prerequisite field, changes what the packet is (push
// MPLS makes an IP flow an MPLS one; pop MPLS to 0x0800 an IPv4 one whose
// IP protocol is unknown).

var errMatchInconsistent = newErr(ETBadAction, BACMatchInconsistent)

// CheckSetFieldPrerequisites returns BAD_ACTION/MATCH_INCONSISTENT when a
// set-field action of ins (apply-actions in list order; write-actions in
// action-set order, after the apply-actions) names a field whose
// prerequisites the flow's match m, as the earlier actions changed it,
// lacks.
func CheckSetFieldPrerequisites(m Match, ins []Instruction) error {
	st := Match{Fields: slices.Clone(m.Fields)}
	var write []Action
	for _, in := range ins {
		switch in := in.(type) {
		case *InstrApplyActions:
			for _, a := range in.Actions {
				if err := st.followAction(a); err != nil {
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
		if err := st.followAction(a); err != nil {
			return err
		}
	}
	return nil
}

// followAction checks a set-field against the match so far and applies
// what a (the set-field, a push or a pop) does to the packet's type.
func (m *Match) followAction(a Action) error {
	switch a := a.(type) {
	case *ActionSetField:
		f := a.Field
		if f.Class != ofp.XMClassOpenflowBasic {
			return nil
		}
		if !prereqOK(*m, f.Field) {
			return errMatchInconsistent
		}
		m.without(f.Field)
		m.Fields = append(m.Fields, OXM{Class: f.Class, Field: f.Field, Value: f.Value})
		if f.Field == ofp.XMTypeEthType {
			m.without(ofp.XMTypeIPProto, ofp.XMTypeICMPv6Type)
		}
	case *ActionPushVLAN:
		m.without(ofp.XMTypeVlanID)
		m.Fields = append(m.Fields, OXMUintMasked(ofp.XMTypeVlanID, uint64(VIDPresent), uint64(VIDPresent)))
	case *ActionPopVLAN:
		m.without(ofp.XMTypeVlanID, ofp.XMTypeVlanPCP) // an inner tag, if any, is not in the match
	case *ActionPushMPLS:
		m.retype(uint64(a.EtherType))
	case *ActionPopMPLS:
		m.retype(uint64(a.EtherType))
	case *ActionPushPBB:
		m.retype(uint64(a.EtherType))
	case *ActionPopPBB:
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

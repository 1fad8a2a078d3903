package xlate

import (
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// CheckActions validates an action list before it is accepted: a flow-mod's
// (packetOut false) or a packet-out's. It refuses, with the OpenFlow 1.3
// error a controller expects (an *ofpwire.OFPError of type BAD_ACTION),
// what Translate would refuse on every packet, so that the controller hears
// of it at once instead of the flow's packets being dropped:
//
//   - output to OFPP_ANY, port 0, an undefined reserved port, or OFPP_TABLE
//     outside a packet-out: BAD_OUT_PORT;
//   - push VLAN with a TPID other than 0x8100/0x88a8, push MPLS with an
//     Ethernet type other than 0x8847/0x8848, push PBB other than 0x88e7,
//     pop MPLS to an 802.3 length or a VLAN TPID: BAD_ARGUMENT;
//   - set-field on a field that cannot be written (IN_PORT, IN_PHY_PORT,
//     IPV6_EXTHDR) or of an experimenter class: BAD_SET_TYPE; with a value
//     of the wrong size: BAD_SET_LEN; masked where only VLAN_VID and
//     METADATA may be, an ETH_TYPE below 0x0600 or of a VLAN TPID, an
//     MPLS_BOS above 1: BAD_SET_ARGUMENT;
//   - multipath or bundle_load into a field no action writes:
//     BAD_SET_ARGUMENT; a bundle member that is CONTROLLER or an
//     undefined reserved port: BAD_OUT_PORT;
//   - experimenter actions: BAD_EXPERIMENTER.
//
// Whether a group exists, and set-field prerequisites against the match,
// are not checked here: a set-field whose prerequisites a packet lacks
// does nothing.
func CheckActions(acts []ofpwire.Action, packetOut bool) error {
	conj := 0
	for _, a := range acts {
		if _, ok := a.(*ofpwire.ActionConjunction); ok {
			conj++
		}
	}
	if conj > 0 && (conj != len(acts) || packetOut) {
		// Open vSwitch's rule: a clause flow does nothing else.
		return badAction(ofpwire.BACBadArgument)
	}
	for _, a := range acts {
		if err := checkAction(a, packetOut); err != nil {
			return err
		}
	}
	return nil
}

// CheckInstructions is CheckActions (for a flow-mod) over the action lists
// of apply-actions and write-actions instructions.
func CheckInstructions(ins []ofpwire.Instruction) error {
	for _, in := range ins {
		var err error
		switch in := in.(type) {
		case *ofpwire.InstrApplyActions:
			err = CheckActions(in.Actions, false)
		case *ofpwire.InstrWriteActions:
			err = CheckActions(in.Actions, false)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func badAction(code uint16) error {
	return &ofpwire.OFPError{Type: ofpwire.ETBadAction, Code: code}
}

func checkAction(a ofpwire.Action, packetOut bool) error {
	switch a := a.(type) {
	case *ofpwire.ActionOutput:
		switch a.Port {
		case ofpwire.PortIn, ofpwire.PortNormal, ofpwire.PortFlood, ofpwire.PortAll, ofpwire.PortController, ofpwire.PortLocal:
			return nil
		case ofpwire.PortTable:
			if packetOut {
				return nil
			}
		default:
			if a.Port != 0 && a.Port <= ofpwire.PortMax {
				return nil
			}
		}
		return badAction(ofpwire.BACBadOutPort)
	case *ofpwire.ActionPushVLAN:
		if a.EtherType != header.EtherTypeVLAN && a.EtherType != header.EtherTypeQinQ {
			return badAction(ofpwire.BACBadArgument)
		}
	case *ofpwire.ActionPushMPLS:
		if !isMPLSType(a.EtherType) {
			return badAction(ofpwire.BACBadArgument)
		}
	case *ofpwire.ActionPopMPLS:
		if a.EtherType < 0x0600 || isVLANType(a.EtherType) {
			return badAction(ofpwire.BACBadArgument)
		}
	case *ofpwire.ActionPushPBB:
		if a.EtherType != header.EtherTypePBB {
			return badAction(ofpwire.BACBadArgument)
		}
	case *ofpwire.ActionSetField:
		f := a.Field
		if f.Class != ofpwire.ClassOf(f.Field) || !settable(f.Field) {
			return badAction(ofpwire.BACBadSetType)
		}
		size, _, _ := ofpwire.FieldSize(f.Field)
		if len(f.Value) != size || f.HasMask && len(f.Mask) != size {
			return badAction(ofpwire.BACBadSetLen)
		}
		if f.HasMask && !maskedSettable(f.Field) || !setFieldArgOK(f) {
			return badAction(ofpwire.BACBadSetArgument)
		}
	case *ofpwire.ActionExperimenter:
		if a.Experimenter == ofpwire.NXVendor {
			return badAction(ofpwire.BACBadExpType)
		}
		return badAction(ofpwire.BACBadExperimenter)
	case *ofpwire.ActionNAT:
		return badAction(ofpwire.BACBadArgument) // only inside ct
	case *ofpwire.ActionCT:
		return checkCT(a)
	case *ofpwire.ActionClone:
		return CheckActions(a.Actions, packetOut)
	case *ofpwire.ActionResubmit:
		if a.Table != ofpwire.TableCurrent && int(a.Table) >= pipeline.NumTables {
			return badAction(ofpwire.BACBadArgument)
		}
	case *ofpwire.ActionLearn:
		return checkLearn(a)
	case *ofpwire.ActionRegMove:
		if !writable(a.Dst) {
			return badAction(ofpwire.BACBadSetArgument)
		}
	case *ofpwire.ActionStack:
		if a.Pop && !writable(a.Field) {
			return badAction(ofpwire.BACBadSetArgument)
		}
	case *ofpwire.ActionMultipath:
		if !writable(a.Dst) {
			return badAction(ofpwire.BACBadSetArgument)
		}
	case *ofpwire.ActionBundle:
		if a.Load && !writable(a.Dst) {
			return badAction(ofpwire.BACBadSetArgument)
		}
		for _, m := range a.Members {
			if m == ofpwire.PortController || m > ofpwire.PortMax && m < ofpwire.PortIn {
				return badAction(ofpwire.BACBadOutPort)
			}
		}
	}
	return nil
}

// writable reports whether move, pop and learn's load may write field f:
// what set-field may, and the pipeline fields (but conj_id and dp_hash)
// and NXM_OF_IN_PORT.
func writable(f ofpwire.XMType) bool {
	return pipeField(f) && f != ofpwire.XMTypeConjID && f != ofpwire.XMTypeDPHash || f == ofpwire.XMTypeInPort16 || settable(f)
}

// checkLearn refuses a learn action whose flows could never be added: a
// table that does not exist, a load into a field no action writes, or a
// match whose prerequisites the specs' immediates do not give (Open
// vSwitch's learn_check: an IP field needs eth_type=0x800 among them).
func checkLearn(l *ofpwire.ActionLearn) error {
	if int(l.TableID) >= pipeline.NumTables {
		return badAction(ofpwire.BACBadArgument)
	}
	for _, s := range l.Specs {
		if s.Dst == ofpwire.LearnDstLoad && !writable(s.DstField) {
			return badAction(ofpwire.BACBadSetType)
		}
	}
	m, err := learnedMatch(l.Specs, func(s *ofpwire.LearnSpec) []byte {
		if s.Imm != nil {
			return s.Imm
		}
		return make([]byte, (int(s.NBits)+7)/8)
	})
	if err != nil {
		return badAction(ofpwire.BACBadArgument)
	}
	if _, err := ofmatch.FromOXM(m); err != nil {
		return badAction(ofpwire.BACMatchInconsistent)
	}
	return nil
}

// checkCT validates ct's nested actions as Open vSwitch does: nat first
// (at most one), then only writes of ct_mark and ct_label (exec).
func checkCT(ct *ofpwire.ActionCT) error {
	if ct.RecircTable != ofpwire.CTRecircNone && int(ct.RecircTable) >= pipeline.NumTables {
		return badAction(ofpwire.BACBadArgument)
	}
	for i, a := range ct.Actions {
		switch a := a.(type) {
		case *ofpwire.ActionNAT:
			if i != 0 {
				return badAction(ofpwire.BACBadArgument)
			}
		case *ofpwire.ActionSetField:
			if f := a.Field.Field; f != ofpwire.XMTypeCTMark && f != ofpwire.XMTypeCTLabel {
				return badAction(ofpwire.BACBadSetArgument)
			}
		case *ofpwire.ActionRegMove:
			if a.Dst != ofpwire.XMTypeCTMark && a.Dst != ofpwire.XMTypeCTLabel {
				return badAction(ofpwire.BACBadSetArgument)
			}
		default:
			return badAction(ofpwire.BACBadArgument)
		}
	}
	return nil
}

package ofproto

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// decodes reports whether the OpenFlow codec takes last, the final len(raw
// tail) bytes of the encoded message raw, when their first two bytes say
// type typ: the codec's answer for a type it does not know is BAD_TYPE
// (actions) or UNKNOWN_INST (instructions), and a known type sent with the
// wrong length is BAD_LEN; anything else means the type decodes.
func decodes(t *testing.T, raw []byte, tail int, typ uint16, unknown, badLen [2]uint16) bool {
	t.Helper()
	m := bytes.Clone(raw)
	m[len(m)-tail], m[len(m)-tail+1] = byte(typ>>8), byte(typ)
	h, msg, err := ofpwire.ReadMessage(bytes.NewReader(m), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ofpwire.Decode(h, msg[ofpwire.HeaderLen:])
	var oe *ofpwire.OFPError
	if errors.As(err, &oe) && ([2]uint16{oe.Type, oe.Code} == unknown || [2]uint16{oe.Type, oe.Code} == badLen) {
		return false
	}
	return true
}

// knownActionTypes returns every action type the codec decodes, found by
// sending each of the 65536 types in a flow-mod, with the lengths of the
// fixed-size actions (8 and 16 bytes).
func knownActionTypes(t *testing.T) map[ofpwire.ActionType]bool {
	known := map[ofpwire.ActionType]bool{}
	var raws [][]byte
	for _, a := range []ofpwire.Action{&ofpwire.ActionPopVLAN{}, &ofpwire.ActionOutput{Port: 2}} {
		raw, err := ofpwire.Encode(1, outputFlow(1, a)) // the action ends the message
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	for typ := 0; typ <= 0xffff; typ++ {
		for i, raw := range raws {
			if decodes(t, raw, 8+8*i, uint16(typ), [2]uint16{ofpwire.ETBadAction, ofpwire.BACBadType},
				[2]uint16{ofpwire.ETBadAction, ofpwire.BACBadLen}) {
				known[ofpwire.ActionType(typ)] = true
			}
		}
	}
	return known
}

// knownInstructionTypes is knownActionTypes for instructions (8 and 24
// bytes long).
func knownInstructionTypes(t *testing.T) map[ofpwire.InstructionType]bool {
	known := map[ofpwire.InstructionType]bool{}
	var raws [][]byte
	for _, in := range []ofpwire.Instruction{&ofpwire.InstrClearActions{}, &ofpwire.InstrWriteMetadata{}} {
		fm := outputFlow(1)
		fm.Instructions = []ofpwire.Instruction{in}
		raw, err := ofpwire.Encode(1, fm)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, raw)
	}
	for typ := 0; typ <= 0xffff; typ++ {
		for i, raw := range raws {
			if decodes(t, raw, 8+16*i, uint16(typ), [2]uint16{ofpwire.ETBadInstruction, ofpwire.BICUnknownInst},
				[2]uint16{ofpwire.ETBadInstruction, ofpwire.BICBadLen}) {
				known[ofpwire.InstructionType(typ)] = true
			}
		}
	}
	return known
}

// TestAdvertisedActionsAreAccepted checks TABLE_FEATURES and
// GROUP_FEATURES against what the switch does: every action type the codec
// decodes goes into an apply-actions list, an action set and a group
// bucket, and is advertised for each exactly when the switch takes it
// there; the same for instruction types in a flow entry. A controller
// that believes the replies must neither miss an action (MPLS, PBB) nor be
// refused one it was offered.
func TestAdvertisedActionsAreAccepted(t *testing.T) {
	tb := newTestBridge(t)
	// What the group and meter samples name.
	if r := tb.c.request(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 1,
		Buckets: []ofpwire.Bucket{bucketOut(2)}}); len(r) != 0 {
		t.Fatalf("group-mod replies %#v", r)
	}
	if r := tb.c.request(&ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: ofpwire.MeterFlagKBitPerSec, MeterID: 1,
		Bands: []ofpwire.MeterBand{{Type: ofpwire.MeterBandTypeDrop, Rate: 1000}}}); len(r) != 0 {
		t.Fatalf("meter-mod replies %#v", r)
	}

	// One well-formed action of each type the codec knows, with a match
	// that meets its prerequisites.
	type sample struct {
		a     ofpwire.Action
		match []ofpwire.OXM
	}
	ethType := func(v uint64) []ofpwire.OXM { return []ofpwire.OXM{ofpwire.OXMUint(ofpwire.XMTypeEthType, v)} }
	experimenter := &ofpwire.ActionExperimenter{Experimenter: 0x2320}
	samples := map[ofpwire.ActionType]sample{
		ofpwire.ActionTypeOutput:     {&ofpwire.ActionOutput{Port: 2}, nil},
		ofpwire.ActionTypeCopyTTLOut: {&ofpwire.ActionCopyTTLOut{}, ethType(0x8847)},
		ofpwire.ActionTypeCopyTTLIn:  {&ofpwire.ActionCopyTTLIn{}, ethType(0x8847)},
		ofpwire.ActionTypeSetMPLSTTL: {&ofpwire.ActionSetMPLSTTL{TTL: 9}, ethType(0x8847)},
		ofpwire.ActionTypeDecMPLSTTL: {&ofpwire.ActionDecMPLSTTL{}, ethType(0x8847)},
		ofpwire.ActionTypePushVLAN:   {&ofpwire.ActionPushVLAN{EtherType: 0x8100}, nil},
		ofpwire.ActionTypePopVLAN:    {&ofpwire.ActionPopVLAN{}, []ofpwire.OXM{ofpwire.OXMUint(ofpwire.XMTypeVlanID, 0x1000|10)}},
		ofpwire.ActionTypePushMPLS:   {&ofpwire.ActionPushMPLS{EtherType: 0x8847}, nil},
		ofpwire.ActionTypePopMPLS:    {&ofpwire.ActionPopMPLS{EtherType: 0x0800}, ethType(0x8847)},
		ofpwire.ActionTypeSetQueue:   {&ofpwire.ActionSetQueue{Queue: 1}, nil},
		ofpwire.ActionTypeGroup:      {&ofpwire.ActionGroup{Group: 1}, nil},
		ofpwire.ActionTypeSetNwTTL:   {&ofpwire.ActionSetNwTTL{TTL: 9}, ethType(0x0800)},
		ofpwire.ActionTypeDecNwTTL:   {&ofpwire.ActionDecNwTTL{}, ethType(0x0800)},
		ofpwire.ActionTypeSetField:   {&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeEthDst, mac2)}, nil},
		ofpwire.ActionTypePushPBB:    {&ofpwire.ActionPushPBB{EtherType: 0x88e7}, nil},
		ofpwire.ActionTypePopPBB:     {&ofpwire.ActionPopPBB{}, ethType(0x88e7)},
		experimenter.ActionType():    {experimenter, nil},
	}
	known := knownActionTypes(t)
	if len(known) < 2 {
		t.Fatalf("the codec decodes %d action types: the probe is broken", len(known))
	}

	tf := tb.c.multipart(&ofpwire.TableFeaturesRequest{}).(*ofpwire.TableFeaturesReply)
	gf := tb.c.multipart(&ofpwire.GroupFeaturesRequest{}).(*ofpwire.GroupFeaturesReply)
	// The action types each table advertises, per property.
	applyAdv := make([]map[ofpwire.ActionType]bool, len(tf.Tables))
	writeAdv := make([]map[ofpwire.ActionType]bool, len(tf.Tables))
	for table := range tf.Tables {
		applyAdv[table], writeAdv[table] = map[ofpwire.ActionType]bool{}, map[ofpwire.ActionType]bool{}
		for _, p := range tf.Tables[table].Properties {
			for _, id := range p.ActionIDs {
				switch p.Type {
				case ofpwire.TablePropTypeApplyActions:
					applyAdv[table][id.Type] = true
				case ofpwire.TablePropTypeWriteActions:
					writeAdv[table][id.Type] = true
				}
			}
		}
	}
	for typ := range known {
		s, ok := samples[typ]
		if !ok {
			t.Errorf("the codec decodes action type %d, which has no sample here", typ)
			continue
		}
		flow := func(ins ofpwire.Instruction) *ofpwire.FlowMod {
			fm := outputFlow(1)
			fm.Match.Fields = append(fm.Match.Fields, s.match...)
			fm.Priority = 100 + uint16(typ)
			fm.Instructions = []ofpwire.Instruction{ins}
			return fm
		}
		took := map[string]bool{
			"apply-actions": len(tb.c.request(flow(&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{s.a}}))) == 0,
			"write-actions": len(tb.c.request(flow(&ofpwire.InstrWriteActions{Actions: []ofpwire.Action{s.a}}))) == 0,
			"bucket": len(tb.c.request(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll,
				GroupID: ofpwire.Group(100 + uint32(typ)), Buckets: []ofpwire.Bucket{{WatchPort: ofpwire.PortAny,
					WatchGroup: ofpwire.GroupAny, Actions: []ofpwire.Action{s.a}}}})) == 0,
		}
		for where, adv := range map[string][]map[ofpwire.ActionType]bool{"apply-actions": applyAdv, "write-actions": writeAdv} {
			var wrong []int
			for table := range tf.Tables {
				if adv[table][typ] != took[where] {
					wrong = append(wrong, table)
				}
			}
			if len(wrong) > 0 {
				t.Errorf("action type %d taken in %s: %v, but %d tables (first: table %d) say otherwise", typ, where, took[where], len(wrong), wrong[0])
			}
		}
		for gt, bits := range gf.Actions {
			if ok := typ < 32 && bits&(1<<uint(typ)) != 0; ok != took["bucket"] {
				t.Errorf("group type %d: action type %d advertised for buckets: %v, taken there: %v", gt, typ, ok, took["bucket"])
			}
		}
	}
	// Nothing advertised that the codec cannot even decode.
	for table := range tf.Tables {
		for _, adv := range []map[ofpwire.ActionType]bool{applyAdv[table], writeAdv[table]} {
			for typ := range adv {
				if !known[typ] {
					t.Errorf("table %d advertises action type %d, which does not decode", table, typ)
				}
			}
		}
	}
	for typ := 0; typ < 32; typ++ {
		if gf.Actions[0]&(1<<uint(typ)) != 0 && !known[ofpwire.ActionType(typ)] {
			t.Errorf("GROUP_FEATURES advertises action type %d, which does not decode", typ)
		}
	}

	// Instructions, in table 0 (whose goto can go forward).
	instSamples := map[ofpwire.InstructionType]ofpwire.Instruction{
		ofpwire.InstructionTypeGotoTable:     &ofpwire.InstrGotoTable{TableID: 1},
		ofpwire.InstructionTypeWriteMetadata: &ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 1},
		ofpwire.InstructionTypeWriteActions:  &ofpwire.InstrWriteActions{},
		ofpwire.InstructionTypeApplyActions:  &ofpwire.InstrApplyActions{},
		ofpwire.InstructionTypeClearActions:  &ofpwire.InstrClearActions{},
		ofpwire.InstructionTypeMeter:         &ofpwire.InstrMeter{MeterID: 1},
	}
	instExperimenter := &ofpwire.InstrExperimenter{Experimenter: 0x2320}
	instSamples[instExperimenter.InstructionType()] = instExperimenter
	advInst := map[ofpwire.InstructionType]bool{}
	for _, p := range tf.Tables[0].Properties {
		if p.Type == ofpwire.TablePropTypeInstructions {
			for _, id := range p.InstructionIDs {
				advInst[id.Type] = true
			}
		}
	}
	knownInst := knownInstructionTypes(t)
	for typ := range knownInst {
		in, ok := instSamples[typ]
		if !ok {
			t.Errorf("the codec decodes instruction type %d, which has no sample here", typ)
			continue
		}
		fm := outputFlow(1)
		fm.Priority = 200 + uint16(typ)
		fm.Instructions = []ofpwire.Instruction{in}
		took := len(tb.c.request(fm)) == 0
		if took != advInst[typ] {
			t.Errorf("instruction type %d advertised: %v, taken: %v", typ, advInst[typ], took)
		}
	}
	for typ := range advInst {
		if !knownInst[typ] {
			t.Errorf("instruction type %d advertised, which does not decode", typ)
		}
	}
}

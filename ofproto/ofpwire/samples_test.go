package ofpwire

import (
	"net"

	"github.com/netrack/openflow/ofp"
)

// richMatch exercises every basic field at least once across the samples.
func richMatch() Match {
	return Match{Fields: []OXM{
		OXMUint(ofp.XMTypeInPort, 1),
		OXMUint(ofp.XMTypeEthType, 0x0800),
		NewMaskedOXM(ofp.XMTypeEthDst, []byte{0, 1, 2, 0, 0, 0}, []byte{0xff, 0xff, 0xff, 0, 0, 0}),
		OXMUintMasked(ofp.XMTypeVlanID, uint64(VIDPresent|10), 0x1fff),
		OXMUint(ofp.XMTypeVlanPCP, 3),
		OXMUint(ofp.XMTypeIPProto, 6),
		OXMUintMasked(ofp.XMTypeIPv4Src, 0x0a000000, 0xff000000),
		OXMUint(ofp.XMTypeIPv4Dst, 0x0a000001),
		OXMUint(ofp.XMTypeIPDSCP, 46),
		OXMUint(ofp.XMTypeIPECN, 1),
		OXMUint(ofp.XMTypeTCPSrc, 1234),
		OXMUint(ofp.XMTypeTCPDst, 80),
		OXMUintMasked(ofp.XMTypeMetadata, 0x1234, 0xffff),
		OXMUintMasked(ofp.XMTypeTunnelID, 7, 0xff),
	}}
}

func allActions() []Action {
	return []Action{
		&ActionOutput{Port: 2, MaxLen: 128},
		&ActionCopyTTLOut{}, &ActionCopyTTLIn{},
		&ActionSetMPLSTTL{TTL: 9}, &ActionDecMPLSTTL{},
		&ActionPushVLAN{EtherType: 0x8100}, &ActionPopVLAN{},
		&ActionPushMPLS{EtherType: 0x8847}, &ActionPopMPLS{EtherType: 0x0800},
		&ActionSetQueue{Queue: 3}, &ActionGroup{Group: 4},
		&ActionSetNwTTL{TTL: 64}, &ActionDecNwTTL{},
		&ActionSetField{Field: OXMUint(ofp.XMTypeIPv4Dst, 0xc0a80001)},
		&ActionSetField{Field: NewOXM(ofp.XMTypeIPv6Src, make([]byte, 16))},
		&ActionPushPBB{EtherType: 0x88e7}, &ActionPopPBB{},
		&ActionExperimenter{Experimenter: 0x2320, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		&ActionOutput{Port: ofp.PortController, MaxLen: 0xffff},
	}
}

func allInstructions() []Instruction {
	return []Instruction{
		&InstrMeter{MeterID: 5},
		&InstrApplyActions{Actions: allActions()},
		&InstrClearActions{},
		&InstrWriteActions{Actions: []Action{&ActionOutput{Port: 1}, &ActionGroup{Group: 2}}},
		&InstrWriteMetadata{Metadata: 0xab, Mask: 0xff},
		&InstrGotoTable{TableID: 3},
		&InstrExperimenter{Experimenter: 0x2320, Data: []byte{9, 9, 9, 9, 9, 9, 9, 9}},
	}
}

func samplePort(n uint32) Port {
	return Port{
		PortNo: ofp.PortNo(n), HWAddr: net.HardwareAddr{2, 0, 0, 0, 0, byte(n)}, Name: "eth1",
		Config: ofp.PortConfigNoFwd, State: ofp.PortStateLive, Curr: ofp.PortFeature10GbitFullDuplex,
		Advertised: ofp.PortFeatureCopper, Supported: ofp.PortFeatureFiber, Peer: ofp.PortFeatureAutoneg,
		CurrSpeed: 10000000, MaxSpeed: 10000000,
	}
}

func sampleTableFeatures() TableFeatures {
	return TableFeatures{
		TableID: 0, Name: "classifier", MetadataMatch: ^uint64(0), MetadataWrite: ^uint64(0),
		MaxEntries: 1000000,
		Properties: []TableFeatureProp{
			{Type: ofp.TablePropTypeInstructions, InstructionIDs: []InstructionID{
				{Type: ofp.InstructionTypeGotoTable}, {Type: ofp.InstructionTypeApplyActions},
				{Type: ofp.InstructionTypeExperimenter, Experimenter: 0x2320}}},
			{Type: ofp.TablePropTypeNextTablesMiss, NextTables: []uint8{1, 2, 3}},
			{Type: ofp.TablePropTypeApplyActions, ActionIDs: []ActionID{
				{Type: ofp.ActionTypeOutput}, {Type: ofp.ActionTypeExperimenter, Experimenter: 7}}},
			{Type: ofp.TablePropTypeMatch, OXMIDs: []uint32{
				OXMHeader(ofp.XMClassOpenflowBasic, ofp.XMTypeInPort, false, 4),
				OXMHeader(ofp.XMClassOpenflowBasic, ofp.XMTypeEthDst, true, 12)}},
			{Type: ofp.TablePropTypeExperimenterMiss, Experimenter: 1, ExpType: 2, Data: []byte{1, 2, 3}},
		},
	}
}

// sampleMessages holds one representative of every message type, in both
// directions, built so that decoding their encoding gives them back.
func sampleMessages() []Message {
	return []Message{
		NewHello(1, 4),
		&Hello{},
		&ErrorMsg{Type: ETBadMatch, Code: BMCBadPrereq, Data: []byte{4, 14, 0, 8, 0, 0, 0, 1}},
		&EchoRequest{Data: []byte("ping")},
		&EchoReply{Data: []byte("ping")},
		&EchoRequest{},
		&Experimenter{Experimenter: 0x2320, ExpType: 5, Data: []byte{1, 2}},
		&FeaturesRequest{},
		&FeaturesReply{DatapathID: 0x1122334455667788, NumBuffers: 256, NumTables: 254, AuxiliaryID: 0,
			Capabilities: ofp.CapabilityFlowStats | ofp.CapabilityPortStats},
		&GetConfigRequest{},
		&GetConfigReply{Flags: ofp.ConfigFlagFragDrop, MissSendLength: 128},
		&SetConfig{Flags: ofp.ConfigFlagFragNormal, MissSendLength: 0xffff},
		&PacketIn{BufferID: NoBuffer, TotalLen: 60, Reason: ofp.PacketInReasonAction, TableID: 2,
			Cookie: 0xdeadbeef, Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeInPort, 7)}}, Data: make([]byte, 60)},
		&FlowRemoved{Cookie: 1, Priority: 100, Reason: ofp.FlowReasonIdleTimeout, TableID: 1,
			DurationSec: 10, DurationNSec: 500, IdleTimeout: 10, HardTimeout: 0, PacketCount: 5, ByteCount: 300,
			Match: richMatch()},
		&PortStatus{Reason: ofp.PortReasonModify, Port: samplePort(3)},
		&PacketOut{BufferID: NoBuffer, InPort: ofp.PortController, Actions: allActions(), Data: []byte{1, 2, 3}},
		&PacketOut{BufferID: 7, InPort: 1},
		&FlowMod{Cookie: 0x1234, CookieMask: 0, TableID: 0, Command: ofp.FlowAdd, IdleTimeout: 60,
			HardTimeout: 300, Priority: 1000, BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
			Flags: ofp.FlowFlagSendFlowRem, Match: richMatch(), Instructions: allInstructions()},
		&FlowMod{Command: ofp.FlowDelete, TableID: 0xff, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny},
		&GroupMod{Command: ofp.GroupAdd, Type: ofp.GroupTypeSelect, GroupID: 1, Buckets: []Bucket{
			{Weight: 1, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: []Action{&ActionOutput{Port: 1}}},
			{Weight: 2, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: allActions()},
			{Weight: 3},
		}},
		&PortMod{PortNo: 3, HWAddr: net.HardwareAddr{2, 0, 0, 0, 0, 3}, Config: ofp.PortConfigDown,
			Mask: ofp.PortConfigDown, Advertise: ofp.PortFeatureFiber},
		&TableMod{Table: 1, Config: ofp.TableConfigDeprecatedMask},
		&MultipartRequest{Body: &DescRequest{}},
		&MultipartRequest{Body: &FlowStatsRequest{TableID: 0xff, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
			Cookie: 1, CookieMask: 1, Match: richMatch()}},
		&MultipartRequest{Body: &AggregateStatsRequest{TableID: 1, OutPort: 2, OutGroup: 3}},
		&MultipartRequest{Body: &TableStatsRequest{}},
		&MultipartRequest{Body: &PortStatsRequest{PortNo: ofp.PortAny}},
		&MultipartRequest{Body: &QueueStatsRequest{Port: ofp.PortAny, Queue: ofp.QueueAll}},
		&MultipartRequest{Body: &GroupStatsRequest{Group: ofp.GroupAll}},
		&MultipartRequest{Body: &GroupDescRequest{}},
		&MultipartRequest{Body: &GroupFeaturesRequest{}},
		&MultipartRequest{Body: &MeterStatsRequest{Meter: ofp.MeterAll}},
		&MultipartRequest{Body: &MeterConfigRequest{Meter: 9}},
		&MultipartRequest{Body: &MeterFeaturesRequest{}},
		&MultipartRequest{Body: &TableFeaturesRequest{}},
		&MultipartRequest{Flags: MultipartRequestMore, Body: &TableFeaturesRequest{Tables: []TableFeatures{sampleTableFeatures()}}},
		&MultipartRequest{Body: &PortDescRequest{}},
		&MultipartRequest{Body: &ExperimenterMultipart{Experimenter: 1, ExpType: 2, Data: []byte{3}}},
		&MultipartReply{Body: &DescReply{Manufacturer: "vswitch", Hardware: "hw", Software: "sw", SerialNum: "sn", Datapath: "br0"}},
		&MultipartReply{Body: &FlowStatsReply{Flows: []FlowStats{
			{TableID: 1, DurationSec: 2, DurationNSec: 3, Priority: 4, IdleTimeout: 5, HardTimeout: 6,
				Flags: ofp.FlowFlagSendFlowRem, Cookie: 7, PacketCount: 8, ByteCount: 9,
				Match: richMatch(), Instructions: allInstructions()},
			{TableID: 2},
		}}},
		&MultipartReply{Body: &FlowStatsReply{}},
		&MultipartReply{Body: &AggregateStatsReply{PacketCount: 1, ByteCount: 2, FlowCount: 3}},
		&MultipartReply{Body: &TableStatsReply{Tables: []ofp.TableStats{{Table: 0, ActiveCount: 1, LookupCount: 2, MatchedCount: 3}}}},
		&MultipartReply{Body: &PortStatsReply{Ports: []ofp.PortStats{{PortNo: 1, RxPackets: 2, TxPackets: 3, Collisions: 4, DurationSec: 5, DurationNSec: 6}}}},
		&MultipartReply{Body: &QueueStatsReply{Queues: []ofp.QueueStats{{Port: 1, Queue: 2, TxBytes: 3, TxPackets: 4, TxErrors: 5, DurationSec: 6, DurationNSec: 7}}}},
		&MultipartReply{Body: &GroupStatsReply{Groups: []GroupStats{{GroupID: 1, RefCount: 2, PacketCount: 3, ByteCount: 4,
			DurationSec: 5, DurationNSec: 6, BucketStats: []ofp.BucketCounter{{PacketCount: 1, ByteCount: 2}, {PacketCount: 3, ByteCount: 4}}}}}},
		&MultipartReply{Body: &GroupDescReply{Groups: []GroupDesc{{Type: ofp.GroupTypeAll, GroupID: 1, Buckets: []Bucket{{Actions: []Action{&ActionOutput{Port: 1}}}}}}}},
		&MultipartReply{Body: &GroupFeaturesReply{Types: 0xf, Capabilities: 3, MaxGroups: [4]uint32{1, 2, 3, 4}, Actions: [4]uint32{5, 6, 7, 8}}},
		&MultipartReply{Body: &MeterStatsReply{Meters: []MeterStats{{MeterID: 1, FlowCount: 2, PacketInCount: 3, ByteInCount: 4,
			DurationSec: 5, DurationNSec: 6, BandStats: []ofp.MeterBandStats{{PacketBandCount: 7, ByteBandCount: 8}}}}}},
		&MultipartReply{Body: &MeterConfigReply{Meters: []MeterConfig{{Flags: ofp.MeterFlagKBitPerSec, MeterID: 1, Bands: []MeterBand{
			{Type: ofp.MeterBandTypeDrop, Rate: 1000, BurstSize: 100}}}}}},
		&MultipartReply{Body: &MeterFeaturesReply{MaxMeter: 100, BandTypes: 3, Capabilities: 0xf, MaxBands: 4, MaxColor: 2}},
		&MultipartReply{Body: &TableFeaturesReply{Tables: []TableFeatures{sampleTableFeatures(), {TableID: 1, Name: "t1"}}}},
		&MultipartReply{Flags: MultipartReplyMore, Body: &PortDescReply{Ports: []Port{samplePort(1), samplePort(2)}}},
		&MultipartReply{Body: &ExperimenterMultipart{Experimenter: 1, ExpType: 2}},
		&BarrierRequest{},
		&BarrierReply{},
		&QueueGetConfigRequest{Port: 1},
		&QueueGetConfigReply{Port: 1, Queues: []PacketQueue{
			{QueueID: 1, Port: 1, Properties: []QueueProp{{Type: ofp.QueuePropTypeMinRate, Rate: 100}, {Type: ofp.QueuePropTypeMaxRate, Rate: 900}}},
			{QueueID: 2, Port: 1, Properties: []QueueProp{{Type: ofp.QueuePropTypeExperimenter, Experimenter: 5, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}},
			{QueueID: 3, Port: 1},
		}},
		&RoleRequest{Role: ofp.ControllerRoleMaster, GenerationID: 42},
		&RoleReply{Role: ofp.ControllerRoleSlave, GenerationID: 43},
		&GetAsyncRequest{},
		&GetAsyncReply{PacketInMask: [2]uint32{7, 0}, PortStatusMask: [2]uint32{7, 7}, FlowRemovedMask: [2]uint32{0xf, 0}},
		&SetAsync{PacketInMask: [2]uint32{1, 2}, PortStatusMask: [2]uint32{3, 4}, FlowRemovedMask: [2]uint32{5, 6}},
		&MeterMod{Command: ofp.MeterAdd, Flags: ofp.MeterFlagPacketPerSec | ofp.MeterFlagBurst, MeterID: 1, Bands: []MeterBand{
			{Type: ofp.MeterBandTypeDrop, Rate: 100, BurstSize: 10},
			{Type: ofp.MeterBandTypeDSCPRemark, Rate: 50, BurstSize: 5, PrecLevel: 1},
			{Type: ofp.MeterBandTypeExperimenter, Rate: 1, BurstSize: 2, Experimenter: 3, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		}},
	}
}

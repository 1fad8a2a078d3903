package ofpwire

import (
	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// The rest of the switch speaks OpenFlow through this package only, so that
// netrack's packages stay a detail of the codec that could be replaced in
// one place (internal/layering checks that nothing else imports them). The
// names below are netrack's, re-exported unchanged: aliases, not new types,
// so values pass between the two without conversions. Add a name here when
// another package needs one.

// MsgType is the OFPT_* message type of an ofp_header.
type MsgType = openflow.Type

// OFPT_* message types.
const (
	TypeBarrierReply          = openflow.TypeBarrierReply
	TypeBarrierRequest        = openflow.TypeBarrierRequest
	TypeEchoReply             = openflow.TypeEchoReply
	TypeEchoRequest           = openflow.TypeEchoRequest
	TypeError                 = openflow.TypeError
	TypeExperiment            = openflow.TypeExperiment
	TypeFeaturesReply         = openflow.TypeFeaturesReply
	TypeFeaturesRequest       = openflow.TypeFeaturesRequest
	TypeFlowMod               = openflow.TypeFlowMod
	TypeFlowRemoved           = openflow.TypeFlowRemoved
	TypeGetAsyncReply         = openflow.TypeGetAsyncReply
	TypeGetAsyncRequest       = openflow.TypeGetAsyncRequest
	TypeGetConfigReply        = openflow.TypeGetConfigReply
	TypeGetConfigRequest      = openflow.TypeGetConfigRequest
	TypeGroupMod              = openflow.TypeGroupMod
	TypeHello                 = openflow.TypeHello
	TypeMeterMod              = openflow.TypeMeterMod
	TypeMultipartReply        = openflow.TypeMultipartReply
	TypeMultipartRequest      = openflow.TypeMultipartRequest
	TypePacketIn              = openflow.TypePacketIn
	TypePacketOut             = openflow.TypePacketOut
	TypePortMod               = openflow.TypePortMod
	TypePortStatus            = openflow.TypePortStatus
	TypeQueueGetConfigReply   = openflow.TypeQueueGetConfigReply
	TypeQueueGetConfigRequest = openflow.TypeQueueGetConfigRequest
	TypeRoleReply             = openflow.TypeRoleReply
	TypeRoleRequest           = openflow.TypeRoleRequest
	TypeSetAsync              = openflow.TypeSetAsync
	TypeSetConfig             = openflow.TypeSetConfig
	TypeTableMod              = openflow.TypeTableMod
)

// Enumerations and fixed-layout structures of the 1.3 spec.
type (
	ActionType        = ofp.ActionType
	Capability        = ofp.Capability
	AsyncConfig       = ofp.AsyncConfig
	BucketCounter     = ofp.BucketCounter
	ConfigFlag        = ofp.ConfigFlag
	ControllerRole    = ofp.ControllerRole
	FlowModCommand    = ofp.FlowModCommand
	FlowModFlag       = ofp.FlowModFlag
	FlowRemovedReason = ofp.FlowRemovedReason
	Group             = ofp.Group
	GroupCapability   = ofp.GroupCapability
	GroupCommand      = ofp.GroupCommand
	GroupType         = ofp.GroupType
	InstructionType   = ofp.InstructionType
	Meter             = ofp.Meter
	MeterBandStats    = ofp.MeterBandStats
	MeterBandType     = ofp.MeterBandType
	MeterCommand      = ofp.MeterCommand
	MeterFlag         = ofp.MeterFlag
	PacketInReason    = ofp.PacketInReason
	PortConfig        = ofp.PortConfig
	PortFeature       = ofp.PortFeature
	PortNo            = ofp.PortNo
	PortReason        = ofp.PortReason
	PortState         = ofp.PortState
	PortStats         = ofp.PortStats
	Queue             = ofp.Queue
	Table             = ofp.Table
	TableStats        = ofp.TableStats
	XMClass           = ofp.XMClass
	XMType            = ofp.XMType
)

// ActionType values.
const (
	ActionTypeCopyTTLIn  = ofp.ActionTypeCopyTTLIn
	ActionTypeCopyTTLOut = ofp.ActionTypeCopyTTLOut
	ActionTypeDecMPLSTTL = ofp.ActionTypeDecMPLSTTL
	ActionTypeDecNwTTL   = ofp.ActionTypeDecNwTTL
	ActionTypeGroup      = ofp.ActionTypeGroup
	ActionTypeOutput     = ofp.ActionTypeOutput
	ActionTypePopMPLS    = ofp.ActionTypePopMPLS
	ActionTypePopPBB     = ofp.ActionTypePopPBB
	ActionTypePopVLAN    = ofp.ActionTypePopVLAN
	ActionTypePushMPLS   = ofp.ActionTypePushMPLS
	ActionTypePushPBB    = ofp.ActionTypePushPBB
	ActionTypePushVLAN   = ofp.ActionTypePushVLAN
	ActionTypeSetField   = ofp.ActionTypeSetField
	ActionTypeSetMPLSTTL = ofp.ActionTypeSetMPLSTTL
	ActionTypeSetNwTTL   = ofp.ActionTypeSetNwTTL
	ActionTypeSetQueue   = ofp.ActionTypeSetQueue
)

// Capability values.
const (
	CapabilityFlowStats  = ofp.CapabilityFlowStats
	CapabilityGroupStats = ofp.CapabilityGroupStats
	CapabilityPortStats  = ofp.CapabilityPortStats
	CapabilityQueueStats = ofp.CapabilityQueueStats
	CapabilityTableStats = ofp.CapabilityTableStats
)

// ConfigFlag values.
const (
	ConfigFlagFragDrop   = ofp.ConfigFlagFragDrop
	ConfigFlagFragMask   = ofp.ConfigFlagFragMask
	ConfigFlagFragNormal = ofp.ConfigFlagFragNormal
	ConfigFlagFragReasm  = ofp.ConfigFlagFragReasm
)

// ControllerRole values.
const (
	ControllerRoleEqual    = ofp.ControllerRoleEqual
	ControllerRoleMaster   = ofp.ControllerRoleMaster
	ControllerRoleNoChange = ofp.ControllerRoleNoChange
	ControllerRoleSlave    = ofp.ControllerRoleSlave
)

// FlowModCommand values.
const (
	FlowAdd          = ofp.FlowAdd
	FlowDelete       = ofp.FlowDelete
	FlowDeleteStrict = ofp.FlowDeleteStrict
	FlowModify       = ofp.FlowModify
	FlowModifyStrict = ofp.FlowModifyStrict
)

// FlowModFlag values.
const (
	FlowFlagCheckOverlap = ofp.FlowFlagCheckOverlap
	FlowFlagNoByteCounts = ofp.FlowFlagNoByteCounts
	FlowFlagNoPktCounts  = ofp.FlowFlagNoPktCounts
	FlowFlagResetCounts  = ofp.FlowFlagResetCounts
	FlowFlagSendFlowRem  = ofp.FlowFlagSendFlowRem
)

// FlowRemovedReason values.
const (
	FlowReasonDelete      = ofp.FlowReasonDelete
	FlowReasonGroupDelete = ofp.FlowReasonGroupDelete
	FlowReasonHardTimeout = ofp.FlowReasonHardTimeout
	FlowReasonIdleTimeout = ofp.FlowReasonIdleTimeout
)

// Group values.
const (
	GroupAll = ofp.GroupAll
	GroupAny = ofp.GroupAny
	GroupMax = ofp.GroupMax
)

// GroupCapability values.
const (
	GroupCapabilityChaining       = ofp.GroupCapabilityChaining
	GroupCapabilityChainingChecks = ofp.GroupCapabilityChainingChecks
	GroupCapabilitySelectLiveness = ofp.GroupCapabilitySelectLiveness
	GroupCapabilitySelectWeight   = ofp.GroupCapabilitySelectWeight
)

// GroupCommand values.
const (
	GroupAdd    = ofp.GroupAdd
	GroupDelete = ofp.GroupDelete
	GroupModify = ofp.GroupModify
	// OpenFlow 1.5's OFPGC15_INSERT_BUCKET and OFPGC15_REMOVE_BUCKET:
	// buckets added to or taken from an existing group, where
	// GroupMod.CommandBucketID says.
	GroupInsertBucket ofp.GroupCommand = 3
	GroupRemoveBucket ofp.GroupCommand = 5
)

// OpenFlow 1.5's bucket ids (Bucket.ID, GroupMod.CommandBucketID): the
// largest an actual bucket may have, and the special values of
// command_bucket_id.
const (
	BucketMax   uint32 = 0xffffff00 // OFPG15_BUCKET_MAX
	BucketFirst uint32 = 0xfffffffd // OFPG15_BUCKET_FIRST
	BucketLast  uint32 = 0xfffffffe // OFPG15_BUCKET_LAST
	BucketAll   uint32 = 0xffffffff // OFPG15_BUCKET_ALL
)

// GroupType values.
const (
	GroupTypeAll          = ofp.GroupTypeAll
	GroupTypeFastFailover = ofp.GroupTypeFastFailover
	GroupTypeIndirect     = ofp.GroupTypeIndirect
	GroupTypeSelect       = ofp.GroupTypeSelect
)

// InstructionType values.
const (
	InstructionTypeApplyActions  = ofp.InstructionTypeApplyActions
	InstructionTypeClearActions  = ofp.InstructionTypeClearActions
	InstructionTypeGotoTable     = ofp.InstructionTypeGotoTable
	InstructionTypeMeter         = ofp.InstructionTypeMeter
	InstructionTypeWriteActions  = ofp.InstructionTypeWriteActions
	InstructionTypeWriteMetadata = ofp.InstructionTypeWriteMetadata
)

// Meter values.
const (
	MeterAll        = ofp.MeterAll
	MeterController = ofp.MeterController
	MeterMax        = ofp.MeterMax
	MeterSlowpath   = ofp.MeterSlowpath
)

// MeterBandType values.
const (
	MeterBandTypeDSCPRemark   = ofp.MeterBandTypeDSCPRemark
	MeterBandTypeDrop         = ofp.MeterBandTypeDrop
	MeterBandTypeExperimenter = ofp.MeterBandTypeExperimenter
)

// MeterCommand values.
const (
	MeterAdd    = ofp.MeterAdd
	MeterDelete = ofp.MeterDelete
	MeterModify = ofp.MeterModify
)

// MeterFlag values.
const (
	MeterFlagBurst        = ofp.MeterFlagBurst
	MeterFlagKBitPerSec   = ofp.MeterFlagKBitPerSec
	MeterFlagPacketPerSec = ofp.MeterFlagPacketPerSec
	MeterFlagStats        = ofp.MeterFlagStats
)

// PacketInReason values.
const (
	PacketInReasonAction     = ofp.PacketInReasonAction
	PacketInReasonInvalidTTL = ofp.PacketInReasonInvalidTTL
	PacketInReasonNoMatch    = ofp.PacketInReasonNoMatch
)

// PortConfig values.
const (
	PortConfigDown       = ofp.PortConfigDown
	PortConfigNoFlood    = ofp.PortConfigNoFlood
	PortConfigNoFwd      = ofp.PortConfigNoFwd
	PortConfigNoPacketIn = ofp.PortConfigNoPacketIn
	PortConfigNoRcv      = ofp.PortConfigNoRcv
	PortConfigNoSTP      = ofp.PortConfigNoSTP
)

// PortFeature values.
const (
	PortFeature100GbitFullDuplex = ofp.PortFeature100GbitFullDuplex
	PortFeature100MbitFullDuplex = ofp.PortFeature100MbitFullDuplex
	PortFeature100MbitHalfDuplex = ofp.PortFeature100MbitHalfDuplex
	PortFeature10GbitFullDuplex  = ofp.PortFeature10GbitFullDuplex
	PortFeature10MbitFullDuplex  = ofp.PortFeature10MbitFullDuplex
	PortFeature10MbitHalfDuplex  = ofp.PortFeature10MbitHalfDuplex
	PortFeature1GbitFullDuplex   = ofp.PortFeature1GbitFullDuplex
	PortFeature1GbitHalfDuplex   = ofp.PortFeature1GbitHalfDuplex
	PortFeature1TbitFullDuplex   = ofp.PortFeature1TbitFullDuplex
	PortFeature40GbitFullDuplex  = ofp.PortFeature40GbitFullDuplex
	PortFeatureCopper            = ofp.PortFeatureCopper
	PortFeatureOther             = ofp.PortFeatureOther
)

// PortNo values.
const (
	PortAll        = ofp.PortAll
	PortAny        = ofp.PortAny
	PortController = ofp.PortController
	PortFlood      = ofp.PortFlood
	PortIn         = ofp.PortIn
	PortLocal      = ofp.PortLocal
	PortMax        = ofp.PortMax
	PortNormal     = ofp.PortNormal
	PortTable      = ofp.PortTable
)

// PortReason values.
const (
	PortReasonAdd    = ofp.PortReasonAdd
	PortReasonDelete = ofp.PortReasonDelete
	PortReasonModify = ofp.PortReasonModify
)

// PortState values.
const (
	PortStateLinkDown = ofp.PortStateLinkDown
	PortStateLive     = ofp.PortStateLive
)

// Queue values.
const (
	QueueAll = ofp.QueueAll
)

// Table values.
const (
	TableAll = ofp.TableAll
)

// TablePropType values.
const (
	TablePropTypeApplyActions = ofp.TablePropTypeApplyActions
	TablePropTypeInstructions = ofp.TablePropTypeInstructions
	TablePropTypeMatch        = ofp.TablePropTypeMatch
	TablePropTypeNextTables   = ofp.TablePropTypeNextTables
	TablePropTypeWriteActions = ofp.TablePropTypeWriteActions
)

// XMClass values.
const (
	XMClassNicira0       = ofp.XMClassNicira0
	XMClassOpenflowBasic = ofp.XMClassOpenflowBasic
)

// XMType values.
const (
	XMTypeARPOpcode     = ofp.XMTypeARPOpcode
	XMTypeARPSHA        = ofp.XMTypeARPSHA
	XMTypeARPSPA        = ofp.XMTypeARPSPA
	XMTypeARPTHA        = ofp.XMTypeARPTHA
	XMTypeARPTPA        = ofp.XMTypeARPTPA
	XMTypeEthDst        = ofp.XMTypeEthDst
	XMTypeEthSrc        = ofp.XMTypeEthSrc
	XMTypeEthType       = ofp.XMTypeEthType
	XMTypeICMPv4Code    = ofp.XMTypeICMPv4Code
	XMTypeICMPv4Type    = ofp.XMTypeICMPv4Type
	XMTypeICMPv6Code    = ofp.XMTypeICMPv6Code
	XMTypeICMPv6Type    = ofp.XMTypeICMPv6Type
	XMTypeIPDSCP        = ofp.XMTypeIPDSCP
	XMTypeIPECN         = ofp.XMTypeIPECN
	XMTypeIPProto       = ofp.XMTypeIPProto
	XMTypeIPv4Dst       = ofp.XMTypeIPv4Dst
	XMTypeIPv4Src       = ofp.XMTypeIPv4Src
	XMTypeIPv6Dst       = ofp.XMTypeIPv6Dst
	XMTypeIPv6ExtHeader = ofp.XMTypeIPv6ExtHeader
	XMTypeIPv6FLabel    = ofp.XMTypeIPv6FLabel
	XMTypeIPv6NDSLL     = ofp.XMTypeIPv6NDSLL
	XMTypeIPv6NDTLL     = ofp.XMTypeIPv6NDTLL
	XMTypeIPv6NDTarget  = ofp.XMTypeIPv6NDTarget
	XMTypeIPv6Src       = ofp.XMTypeIPv6Src
	XMTypeInPhyPort     = ofp.XMTypeInPhyPort
	XMTypeInPort        = ofp.XMTypeInPort
	XMTypeMPLSBOS       = ofp.XMTypeMPLSBOS
	XMTypeMPLSLabel     = ofp.XMTypeMPLSLabel
	XMTypeMPLSTC        = ofp.XMTypeMPLSTC
	XMTypeMetadata      = ofp.XMTypeMetadata
	XMTypePBBISID       = ofp.XMTypePBBISID
	XMTypeSCTPDst       = ofp.XMTypeSCTPDst
	XMTypeSCTPSrc       = ofp.XMTypeSCTPSrc
	XMTypeTCPDst        = ofp.XMTypeTCPDst
	XMTypeTCPSrc        = ofp.XMTypeTCPSrc
	XMTypeTunnelID      = ofp.XMTypeTunnelID
	XMTypeUDPDst        = ofp.XMTypeUDPDst
	XMTypeUDPSrc        = ofp.XMTypeUDPSrc
	XMTypeVlanID        = ofp.XMTypeVlanID
	XMTypeVlanPCP       = ofp.XMTypeVlanPCP
)

// ContentLenNoBuffer is the packet-in max_len that asks for the whole packet.
const (
	ContentLenNoBuffer = ofp.ContentLenNoBuffer
)

// Table feature property types netrack leaves untyped.
const (
	TablePropTypeApplySetField = ofp.TablePropTypeApplySetField
	TablePropTypeWildcards     = ofp.TablePropTypeWildcards
	TablePropTypeWriteSetField = ofp.TablePropTypeWriteSetField
)

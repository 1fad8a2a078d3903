package ofproto

import (
	"fmt"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// flowStatsPerReply bounds the flow statistics in one MULTIPART_REPLY so that
// a reply stays well under the 64 KiB message limit (an entry with a large
// match and a few actions encodes to a few hundred bytes).
const flowStatsPerReply = 64

// Features implements ofconn.Handler.
func (b *Bridge) Features() ofpwire.FeaturesReply {
	return ofpwire.FeaturesReply{
		DatapathID: b.cfg.DatapathID,
		NumTables:  NumTables,
		Capabilities: ofpwire.CapabilityFlowStats | ofpwire.CapabilityTableStats | ofpwire.CapabilityPortStats |
			ofpwire.CapabilityGroupStats | ofpwire.CapabilityQueueStats,
	}
}

// queuePort checks the port of a queue request: OFPP_ANY or a port the
// bridge has, else OFPET_QUEUE_OP_FAILED/OFPQOFC_BAD_PORT (OpenFlow 1.3
// §7.3.6). The switch configures no queues on its ports (set-queue is
// accepted and does nothing), so every valid request is answered with
// none: an empty, valid reply.
func (b *Bridge) queuePort(no ofpwire.PortNo) error {
	if no == ofpwire.PortAny {
		return nil
	}
	for _, p := range b.dp.Ports() {
		if ofpwire.PortNo(p.No) == no {
			return nil
		}
	}
	return ofpErr(ofpwire.ETQueueOpFailed, ofpwire.QOFCBadPort)
}

// queueStats answers OFPMP_QUEUE (§7.3.5.8): the queues of the port (or
// of every port for OFPP_ANY), of which there are none. A port that does
// not exist is OFPQOFC_BAD_PORT; a single queue asked of an existing port
// does not exist either: OFPQOFC_BAD_QUEUE, as Open vSwitch answers.
func (b *Bridge) queueStats(c *ofconn.Conn, xid uint32, req *ofpwire.QueueStatsRequest) error {
	if err := b.queuePort(req.Port); err != nil {
		return err
	}
	if req.Queue != ofpwire.QueueAll {
		return ofpErr(ofpwire.ETQueueOpFailed, ofpwire.QOFCBadQueue)
	}
	return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.QueueStatsReply{}})
}

func (b *Bridge) multipart(c *ofconn.Conn, xid uint32, m *ofpwire.MultipartRequest) error {
	switch req := m.Body.(type) {
	case *ofpwire.DescRequest:
		return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.DescReply{
			Manufacturer: "vswitch",
			Hardware:     "userspace datapath",
			Software:     "vswitch ofproto",
			SerialNum:    "None",
			Datapath:     b.name,
		}})
	case *ofpwire.FlowStatsRequest:
		return b.flowStats(c, xid, req)
	case *ofpwire.AggregateStatsRequest:
		entries, err := b.selectFlows((*ofpwire.FlowStatsRequest)(req))
		if err != nil {
			return err
		}
		agg := &ofpwire.AggregateStatsReply{FlowCount: uint32(len(entries))}
		for _, e := range entries {
			agg.PacketCount += e.Packets.Load()
			agg.ByteCount += e.Bytes.Load()
		}
		return c.Send(xid, &ofpwire.MultipartReply{Body: agg})
	case *ofpwire.TableStatsRequest:
		b.dp.PushStats(time.Now()) // lookups are counted per packet through the megaflows
		reply := &ofpwire.TableStatsReply{Tables: make([]ofpwire.TableStats, NumTables)}
		for i := range NumTables {
			s := b.pipe.TableStats(uint8(i))
			reply.Tables[i] = ofpwire.TableStats{Table: ofpwire.Table(i), ActiveCount: s.Active,
				LookupCount: s.Lookups, MatchedCount: s.Matched}
		}
		return c.Send(xid, &ofpwire.MultipartReply{Body: reply})
	case *ofpwire.PortDescRequest:
		return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.PortDescReply{Ports: b.PortDesc()}})
	case *ofpwire.PortStatsRequest:
		return b.portStats(c, xid, ofpwire.PortNo(req.PortNo))
	case *ofpwire.QueueStatsRequest:
		return b.queueStats(c, xid, req)
	case *ofpwire.GroupDescRequest:
		return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.GroupDescReply{Groups: b.groups.Desc()}})
	case *ofpwire.GroupStatsRequest:
		return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.GroupStatsReply{Groups: b.groupStats(req.Group)}})
	case *ofpwire.GroupFeaturesRequest:
		f := b.groups.Features()
		return c.Send(xid, &ofpwire.MultipartReply{Body: &f})
	case *ofpwire.MeterConfigRequest:
		return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.MeterConfigReply{Meters: b.meters.Config(req.Meter)}})
	case *ofpwire.MeterStatsRequest:
		return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.MeterStatsReply{Meters: b.meterStats(req.Meter)}})
	case *ofpwire.MeterFeaturesRequest:
		f := b.meters.Features()
		return c.Send(xid, &ofpwire.MultipartReply{Body: &f})
	case *ofpwire.TableFeaturesRequest:
		// ovs-ofctl asks for the table features before a flow-mod.
		// Changing the pipeline through this request is not supported.
		if len(req.Tables) > 0 {
			return ofpErr(ofpwire.ETTableFeaturesFailed, ofpwire.TFFCEperm)
		}
		return b.tableFeatures(c, xid)
	case *ofpwire.ExperimenterMultipart:
		// §7.4.4: an experimenter id the switch does not support, in a
		// multipart request too, is BAD_EXPERIMENTER (it supports none).
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadExperimenter)
	}
	return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadMultipart)
}

// tableFeatures describes every table as Open vSwitch's tools want it: with
// the eight required properties (instructions, next tables, write/apply
// actions, match, wildcards, write/apply set-field), listing what the
// translation supports.
func (b *Bridge) tableFeatures(c *ofconn.Conn, xid uint32) error {
	const perReply = 32 // a description is about 1.2 KiB
	common := tableFeatureProps()
	for first := 0; first < NumTables; first += perReply {
		last := min(first+perReply, NumTables)
		body := &ofpwire.TableFeaturesReply{Tables: make([]ofpwire.TableFeatures, 0, last-first)}
		for i := first; i < last; i++ {
			next := make([]uint8, 0, NumTables-1-i)
			for n := i + 1; n < NumTables; n++ {
				next = append(next, uint8(n))
			}
			props := append([]ofpwire.TableFeatureProp{{Type: ofpwire.TablePropTypeNextTables, NextTables: next}}, common...)
			body.Tables = append(body.Tables, ofpwire.TableFeatures{
				TableID:       uint8(i),
				Name:          fmt.Sprintf("table%d", i),
				MetadataMatch: ^uint64(0),
				MetadataWrite: ^uint64(0),
				MaxEntries:    1 << 20,
				Properties:    props,
			})
		}
		reply := &ofpwire.MultipartReply{Body: body}
		if last < NumTables {
			reply.Flags = ofpwire.MultipartReplyMore
		}
		if err := c.Send(xid, reply); err != nil {
			return err
		}
	}
	return nil
}

// tableFeatureProps lists the properties shared by every table.
func tableFeatureProps() []ofpwire.TableFeatureProp {
	var insts []ofpwire.InstructionID
	for _, t := range pipeline.InstructionTypes() {
		insts = append(insts, ofpwire.InstructionID{Type: t})
	}
	var acts []ofpwire.ActionID
	for _, t := range pipeline.ActionTypes() {
		acts = append(acts, ofpwire.ActionID{Type: t})
	}
	oxmID := func(f ofpwire.XMType, masked bool) uint32 {
		size, maskable, _ := ofpwire.FieldSize(f)
		if masked && maskable {
			return ofpwire.OXMHeader(ofpwire.XMClassOpenflowBasic, f, true, 2*size)
		}
		return ofpwire.OXMHeader(ofpwire.XMClassOpenflowBasic, f, false, size)
	}
	var match, wild []uint32
	for f := ofpwire.XMType(0); f < ofpwire.NumBasicFields; f++ {
		if _, _, ok := ofpwire.FieldSize(f); !ok {
			continue
		}
		match = append(match, oxmID(f, true))
		wild = append(wild, oxmID(f, false))
	}
	var set []uint32
	for f := ofpwire.XMType(0); f < ofpwire.NumBasicFields; f++ {
		if xlate.Settable(f) {
			set = append(set, oxmID(f, false))
		}
	}
	return []ofpwire.TableFeatureProp{
		{Type: ofpwire.TablePropTypeInstructions, InstructionIDs: insts},
		{Type: ofpwire.TablePropTypeWriteActions, ActionIDs: acts},
		{Type: ofpwire.TablePropTypeApplyActions, ActionIDs: acts},
		{Type: ofpwire.TablePropTypeMatch, OXMIDs: match},
		{Type: ofpwire.TablePropTypeWildcards, OXMIDs: wild},
		{Type: ofpwire.TablePropTypeWriteSetField, OXMIDs: set},
		{Type: ofpwire.TablePropTypeApplySetField, OXMIDs: set},
	}
}

func (b *Bridge) selectFlows(req *ofpwire.FlowStatsRequest) ([]*pipeline.Entry, error) {
	b.dp.PushStats(time.Now()) // counters as of this request
	match, err := ofmatch.FromOXM(req.Match)
	if err != nil {
		return nil, err
	}
	return b.pipe.Flows(&pipeline.Filter{
		TableID:    req.TableID,
		Match:      match,
		OutPort:    req.OutPort,
		OutGroup:   req.OutGroup,
		Cookie:     req.Cookie,
		CookieMask: req.CookieMask,
	})
}

func (b *Bridge) flowStats(c *ofconn.Conn, xid uint32, req *ofpwire.FlowStatsRequest) error {
	entries, err := b.selectFlows(req)
	if err != nil {
		return err
	}
	now := time.Now()
	stats := make([]ofpwire.FlowStats, len(entries))
	for i, e := range entries {
		d := e.Duration(now)
		idle, hard := e.Timeouts()
		stats[i] = ofpwire.FlowStats{
			TableID:      e.TableID,
			DurationSec:  uint32(d / time.Second),
			DurationNSec: uint32(d % time.Second),
			Priority:     e.Priority,
			IdleTimeout:  idle,
			HardTimeout:  hard,
			Flags:        e.Flags,
			Cookie:       e.Cookie,
			PacketCount:  e.Packets.Load(),
			ByteCount:    e.Bytes.Load(),
			Match:        e.MatchOXM(),
			Instructions: e.Instructions(),
		}
	}
	for {
		n := min(len(stats), flowStatsPerReply)
		reply := &ofpwire.MultipartReply{Body: &ofpwire.FlowStatsReply{Flows: stats[:n]}}
		stats = stats[n:]
		if len(stats) > 0 {
			reply.Flags = ofpwire.MultipartReplyMore
		}
		if err := c.Send(xid, reply); err != nil || len(stats) == 0 {
			return err
		}
	}
}

// PortDesc describes every datapath port as OFPMP_PORT_DESC reports it:
// its name and hardware address (PortOptions; zero when none was given,
// drivers do not expose one), its OFPPC_* config and its state (LIVE when
// the link is up and the port not administratively down, LINK_DOWN when
// the link is down).
func (b *Bridge) PortDesc() []ofpwire.Port {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	ps := b.dp.Ports()
	out := make([]ofpwire.Port, len(ps))
	for i, p := range ps {
		out[i] = b.describeLocked(p)
	}
	return out
}

func (b *Bridge) portStats(c *ofconn.Conn, xid uint32, no ofpwire.PortNo) error {
	var stats []ofpwire.PortStats
	for _, p := range b.dp.Ports() {
		if no != ofpwire.PortAny && ofpwire.PortNo(p.No) != no {
			continue
		}
		s := p.Dev.Stats()
		st := ofpwire.PortStats{
			PortNo:    ofpwire.PortNo(p.No),
			RxPackets: s.RxPackets, TxPackets: s.TxPackets,
			RxBytes: s.RxBytes, TxBytes: s.TxBytes,
			RxDropped: s.RxDrops, TxDropped: s.TxDrops,
			RxErrors: s.RxErrors, TxErrors: s.TxErrors,
		}
		b.portMu.Lock()
		rec := b.adoptLocked(p)
		b.portMu.Unlock()
		d := time.Since(rec.added)
		st.DurationSec, st.DurationNSec = uint32(d/time.Second), uint32(d%time.Second)
		stats = append(stats, st)
	}
	if no != ofpwire.PortAny && len(stats) == 0 {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPort)
	}
	return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.PortStatsReply{Ports: stats}})
}

package ofproto

import (
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// Apply makes a FLOW_MOD, GROUP_MOD or METER_MOD as if a connection had
// sent it (replaying a journal of them, for instance), without calling
// OnTableMod; the error is what the connection would have been sent.
func (b *Bridge) Apply(msg ofpwire.Message) error {
	switch m := msg.(type) {
	case *ofpwire.FlowMod:
		return b.flowMod(m)
	case *ofpwire.GroupMod:
		return b.groupMod(m)
	case *ofpwire.MeterMod:
		return b.meterMod(m)
	}
	return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadType)
}

// groupMod applies a GROUP_MOD. Flows forwarding to a deleted group are
// deleted with it (OpenFlow 1.3 §6.5), and every megaflow is invalidated
// since translations may have run through the changed group.
func (b *Bridge) groupMod(gm *ofpwire.GroupMod) error {
	removed, err := b.applyGroupMod(gm)
	b.sendRemoved(removed)
	return err
}

// applyGroupMod is groupMod that returns the flows it removed instead of
// reporting them.
func (b *Bridge) applyGroupMod(gm *ofpwire.GroupMod) ([]*pipeline.Entry, error) {
	if gm.Command == ofpwire.GroupAdd || gm.Command == ofpwire.GroupModify || gm.Command == ofpwire.GroupInsertBucket {
		for i := range gm.Buckets {
			if err := xlate.CheckActions(gm.Buckets[i].Actions, false); err != nil {
				return nil, err
			}
		}
	}
	now := time.Now()
	if gm.Command == ofpwire.GroupDelete {
		b.dp.PushStats(now) // the FLOW_REMOVED of its flows carry their last packets
	}
	deleted, err := b.groups.ApplyGroupMod(gm, now)
	if err != nil {
		return nil, err
	}
	var all []*pipeline.Entry
	for _, id := range deleted {
		removed, err := b.pipe.DeleteGroupFlows(id, now)
		if err != nil {
			return all, err
		}
		all = append(all, removed...)
	}
	b.tablesChanged() // a group change is no pipeline change: the pipeline's OnChange may not have run
	return all, nil
}

// checkGroupRefs refuses a flow-mod whose actions forward to a group that
// does not exist (OFPBAC_BAD_OUT_GROUP).
func (b *Bridge) checkGroupRefs(fm *ofpwire.FlowMod) error {
	if fm.Command != ofpwire.FlowAdd && fm.Command != ofpwire.FlowModify && fm.Command != ofpwire.FlowModifyStrict {
		return nil
	}
	for _, in := range fm.Instructions {
		for _, a := range ofpwire.InstructionActions(in) {
			if ga, ok := a.(*ofpwire.ActionGroup); ok && b.groups.Get(ga.Group) == nil {
				return ofpErr(ofpwire.ETBadAction, ofpwire.BACBadOutGroup)
			}
		}
	}
	return nil
}

func (b *Bridge) flowMod(fm *ofpwire.FlowMod) error {
	removed, err := b.applyFlowMod(fm)
	if err != nil {
		return err
	}
	b.sendRemoved(removed)
	// The bridge keeps no buffered packets, so a buffer id can only be
	// stale; the flow-mod itself still applies (1.3 §6.4).
	if fm.BufferID != ofpwire.NoBuffer {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
	}
	return nil
}

// applyFlowMod is flowMod that returns the flows it removed instead of
// reporting them, and ignores the buffer id.
func (b *Bridge) applyFlowMod(fm *ofpwire.FlowMod) ([]*pipeline.Entry, error) {
	if err := b.checkFlowMod(fm); err != nil {
		return nil, err
	}
	return b.pipe.Apply(fm, time.Now())
}

// checkFlowMod makes the checks of a flow-mod the pipeline does not (its
// instructions, their prerequisites, its group and meter references) and
// pushes the datapath's counts to the entries a delete or a reset will
// report or clear.
func (b *Bridge) checkFlowMod(fm *ofpwire.FlowMod) error {
	if fm.Command == ofpwire.FlowAdd || fm.Command == ofpwire.FlowModify || fm.Command == ofpwire.FlowModifyStrict {
		if err := xlate.CheckInstructions(fm.Instructions); err != nil {
			return err
		}
		if err := ofpwire.CheckActionPrerequisites(fm.Match, fm.Instructions); err != nil {
			return err
		}
	}
	if err := b.checkGroupRefs(fm); err != nil {
		return err
	}
	if err := b.checkMeter(fm); err != nil {
		return err
	}
	if fm.Command == ofpwire.FlowDelete || fm.Command == ofpwire.FlowDeleteStrict || fm.Flags&ofpwire.FlowFlagResetCounts != 0 {
		// FLOW_REMOVED reports, and a reset clears, the packets the
		// datapath has counted but not yet handed to the entries.
		b.dp.PushStats(time.Now())
	}
	return nil
}

func (b *Bridge) sendRemoved(removed []*pipeline.Entry) {
	if len(removed) == 0 {
		return
	}
	now := time.Now()
	for _, e := range removed {
		if !e.SendFlowRemoved() {
			continue
		}
		d := e.Duration(now)
		idle, hard := e.Timeouts()
		b.mgr.SendFlowRemoved(ofpwire.FlowRemoved{
			Cookie:       e.Cookie,
			Priority:     e.Priority,
			Reason:       e.RemovedReason,
			TableID:      e.TableID,
			DurationSec:  uint32(d / time.Second),
			DurationNSec: uint32(d % time.Second),
			IdleTimeout:  idle,
			HardTimeout:  hard,
			PacketCount:  e.Packets.Load(),
			ByteCount:    e.Bytes.Load(),
			Match:        e.MatchOXM(),
		})
	}
}

// tableModDeprecated is OFPTC_DEPRECATED_MASK: the only config bits of
// OpenFlow 1.3, kept from 1.1/1.2's table-miss settings and ignored.
const tableModDeprecated = 3

// tableMod answers an OFPT_TABLE_MOD (OpenFlow 1.3.5 §7.3.3). In 1.3 a
// table has no configuration left to change (table-miss is an entry), so
// an accepted TABLE_MOD changes nothing; it is refused for a table the
// switch does not have (TABLE_MOD_FAILED/BAD_TABLE) or a config bit 1.3
// does not define (BAD_CONFIG).
func tableMod(m *ofpwire.TableMod) error {
	if m.Table != ofpwire.TableAll && int(m.Table) >= pipeline.NumTables {
		return ofpErr(ofpwire.ETTableModFailed, ofpwire.TMFCBadTable)
	}
	if m.Config&^tableModDeprecated != 0 {
		return ofpErr(ofpwire.ETTableModFailed, ofpwire.TMFCBadConfig)
	}
	return nil
}

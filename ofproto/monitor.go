package ofproto

import (
	"sync"

	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// flowMonitors tells the connections' flow monitors of the changes to the
// bridge's tables (Open vSwitch's ovs-ofctl monitor br watch:). It is the
// pipeline's Watcher: every change, whatever made it (a flow-mod, a
// bundle commit, a timeout, a learn action, a group or meter deletion),
// passes through it in order, and while no connection monitors anything
// the pipeline records nothing.
type flowMonitors struct {
	b *Bridge
	// causes maps a flow-mod being applied to the connection and xid
	// that sent it, so that the sender's monitors get an abbreviated
	// update (NXFME_ABBREV) unless they asked for their own changes in
	// full. Filled only while someone monitors.
	mu     sync.Mutex
	causes map[*ofpwire.FlowMod]modCause
}

type modCause struct {
	c   *ofconn.Conn
	xid uint32
}

// Watching implements pipeline.Watcher.
func (fm *flowMonitors) Watching() bool { return fm.b.mgr != nil && fm.b.mgr.Monitoring() }

// setCause records that c sent mod with xid; the returned func forgets it.
func (fm *flowMonitors) setCause(mod *ofpwire.FlowMod, c *ofconn.Conn, xid uint32) func() {
	fm.mu.Lock()
	if fm.causes == nil {
		fm.causes = make(map[*ofpwire.FlowMod]modCause)
	}
	fm.causes[mod] = modCause{c, xid}
	fm.mu.Unlock()
	return func() {
		fm.mu.Lock()
		delete(fm.causes, mod)
		fm.mu.Unlock()
	}
}

func (fm *flowMonitors) cause(mod *ofpwire.FlowMod) (modCause, bool) {
	if mod == nil {
		return modCause{}, false
	}
	fm.mu.Lock()
	defer fm.mu.Unlock()
	mc, ok := fm.causes[mod]
	return mc, ok
}

// Changed implements pipeline.Watcher: each monitoring connection gets,
// in one message, an update for every change one of its monitors
// selects (monitors selecting the same change share one update, with
// actions if any of them wants them).
func (fm *flowMonitors) Changed(chs []pipeline.Change) {
	for _, c := range fm.b.mgr.MonitoringConns() {
		mons := c.Monitors()
		var ups []ofpwire.FlowUpdate
		abbrevXID, abbrev := uint32(0), false
		for i := range chs {
			ch := &chs[i]
			flags := uint16(0)
			for _, m := range mons {
				if monitorSelects(m, ch) {
					flags |= m.Flags
				}
			}
			if flags == 0 {
				continue
			}
			if mc, ok := fm.cause(ch.Mod); ok && mc.c == c && flags&ofpwire.FlowMonitorOwn == 0 {
				// One abbreviated update per request, however many
				// flows it changed.
				if !abbrev || abbrevXID != mc.xid {
					ups = append(ups, ofpwire.FlowUpdate{Event: ofpwire.FlowUpdateAbbrev, XID: mc.xid})
					abbrevXID, abbrev = mc.xid, true
				}
				continue
			}
			ev := ofpwire.FlowUpdateAdded
			switch ch.Kind {
			case pipeline.EntryModified:
				ev = ofpwire.FlowUpdateModified
			case pipeline.EntryRemoved:
				ev = ofpwire.FlowUpdateRemoved
			}
			ups = append(ups, flowUpdate(ch.Entry, ev, flags&ofpwire.FlowMonitorInstructions != 0 && ev != ofpwire.FlowUpdateRemoved))
		}
		if len(ups) > 0 {
			c.SendFlowUpdates(0, ups)
		}
	}
}

// monitorSelects reports whether m wants to hear of ch: its kind of
// event, its table, its match covering the entry's, and its out_port and
// out_group among the entry's actions (before or after a modification).
func monitorSelects(m *ofconn.Monitor, ch *pipeline.Change) bool {
	var want uint16
	switch ch.Kind {
	case pipeline.EntryAdded:
		want = ofpwire.FlowMonitorAdd
	case pipeline.EntryModified:
		want = ofpwire.FlowMonitorModify
	default:
		want = ofpwire.FlowMonitorRemoved
	}
	e := ch.Entry
	if m.Flags&want == 0 || (m.TableID != uint8(ofpwire.TableAll) && m.TableID != e.TableID) || !e.CoveredBy(&m.Filter) {
		return false
	}
	if m.OutPort != ofpwire.PortAny && !e.OutputsTo(m.OutPort) &&
		!(ch.Kind == pipeline.EntryModified && outputsTo(ch.OldInstructions, m.OutPort)) {
		return false
	}
	return m.OutGroup == ofpwire.GroupAny || e.UsesGroup(m.OutGroup)
}

// outputsTo reports whether instructions output to port.
func outputsTo(ins []ofpwire.Instruction, port ofpwire.PortNo) bool {
	for _, in := range ins {
		for _, a := range ofpwire.InstructionActions(in) {
			if o, ok := a.(*ofpwire.ActionOutput); ok && o.Port == port {
				return true
			}
		}
	}
	return false
}

// flowUpdate is the full update of e.
func flowUpdate(e *pipeline.Entry, ev ofpwire.FlowUpdateEvent, actions bool) ofpwire.FlowUpdate {
	idle, hard := e.Timeouts()
	u := ofpwire.FlowUpdate{
		Event: ev, TableID: e.TableID, Priority: e.Priority, IdleTimeout: idle, HardTimeout: hard,
		Cookie: e.Cookie, Match: e.MatchOXM(),
	}
	if ev == ofpwire.FlowUpdateRemoved {
		u.Reason = e.RemovedReason
	}
	if actions {
		u.Instructions = e.Instructions()
	}
	return u
}

// flowMonitorRequest adds, changes or cancels the request's monitors on
// c and answers with the flows the new ones select now (those with
// initial set; each flow once), in the request's version.
func (b *Bridge) flowMonitorRequest(c *ofconn.Conn, xid uint32, req *ofpwire.FlowMonitorRequest) error {
	// Check every monitor before changing any.
	filters := make([]ofmatch.Match, len(req.Monitors))
	for i := range req.Monitors {
		m := &req.Monitors[i]
		if m.Command == ofpwire.FlowMonitorCmdDelete {
			continue
		}
		if int(m.TableID) >= pipeline.NumTables && m.TableID != uint8(ofpwire.TableAll) {
			return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadTableID)
		}
		f, err := ofmatch.FromOXM(m.Match)
		if err != nil {
			return err
		}
		filters[i] = f
	}
	// Changes made between registering and reading the flows reach
	// the peer after the reply.
	c.HoldFlowUpdates()
	defer c.ReleaseFlowUpdates()
	var initial []*pipeline.Entry
	seen := make(map[*pipeline.Entry]bool)
	actions := make(map[*pipeline.Entry]bool)
	for i := range req.Monitors {
		m := req.Monitors[i]
		if m.Command == ofpwire.FlowMonitorCmdDelete {
			if err := c.CancelMonitor(m.ID); err != nil {
				return err
			}
			continue
		}
		mon := &ofconn.Monitor{FlowMonitor: m, Filter: filters[i]}
		if err := c.AddMonitor(mon, m.Command == ofpwire.FlowMonitorCmdModify); err != nil {
			return err
		}
		if m.Flags&ofpwire.FlowMonitorInitial == 0 {
			continue
		}
		entries, err := b.pipe.Flows(&pipeline.Filter{TableID: m.TableID, Match: filters[i], OutPort: m.OutPort, OutGroup: m.OutGroup})
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !seen[e] {
				seen[e] = true
				initial = append(initial, e)
			}
			if m.Flags&ofpwire.FlowMonitorInstructions != 0 {
				actions[e] = true
			}
		}
	}
	ups := make([]ofpwire.FlowUpdate, len(initial))
	for i, e := range initial {
		ups[i] = flowUpdate(e, ofpwire.FlowUpdateInitial, actions[e])
	}
	return c.SendFlowUpdates(xid, ups)
}

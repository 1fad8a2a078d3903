package ofconn

import (
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Monitor is one flow monitor of a connection (OpenFlow 1.4 §7.3.5.19,
// Open vSwitch's NXST_FLOW_MONITOR): it lives as long as the connection,
// or until cancelled.
type Monitor struct {
	ofpwire.FlowMonitor
	// Filter is the monitor's match as the tables read it.
	Filter ofmatch.Match
}

// Monitors returns the connection's flow monitors; the slice is never
// changed in place (adding or cancelling installs a new one), so any
// goroutine may read it.
func (c *Conn) Monitors() []*Monitor {
	if p := c.monitors.Load(); p != nil {
		return *p
	}
	return nil
}

// AddMonitor adds mon, or with replace changes the monitor of its id
// (1.4's OFPFMC_MODIFY). A new id already in use is MONITOR_EXISTS, a
// replaced one unknown UNKNOWN_MONITOR. Only the connection's reader
// goroutine (its Handler) changes its monitors.
func (c *Conn) AddMonitor(mon *Monitor, replace bool) error {
	cur := c.Monitors()
	next := make([]*Monitor, 0, len(cur)+1)
	found := false
	for _, m := range cur {
		if m.ID == mon.ID {
			found = true
			if replace {
				continue
			}
		}
		next = append(next, m)
	}
	switch {
	case found && !replace:
		return ofpwire.ErrMonitorExists
	case !found && replace:
		return ofpwire.ErrUnknownMonitor
	}
	next = append(next, mon)
	c.setMonitors(cur, next)
	return nil
}

// CancelMonitor removes the monitor id (UNKNOWN_MONITOR if none).
func (c *Conn) CancelMonitor(id uint32) error {
	cur := c.Monitors()
	for i, m := range cur {
		if m.ID == id {
			next := append(append([]*Monitor(nil), cur[:i]...), cur[i+1:]...)
			c.setMonitors(cur, next)
			return nil
		}
	}
	return ofpwire.ErrUnknownMonitor
}

// setMonitors installs next and keeps the Manager's count of monitoring
// connections.
func (c *Conn) setMonitors(cur, next []*Monitor) {
	c.monitors.Store(&next)
	switch {
	case len(cur) == 0 && len(next) > 0:
		c.m.monitoring.Add(1)
	case len(cur) > 0 && len(next) == 0:
		c.m.monitoring.Add(-1)
	}
}

// dropMonitors forgets the monitors of a connection that ended.
func (c *Conn) dropMonitors() { c.setMonitors(c.Monitors(), nil) }

// Monitoring reports whether any connection has a flow monitor: one
// atomic load, asked on every flow-table change.
func (m *Manager) Monitoring() bool { return m.monitoring.Load() > 0 }

// MonitoringConns returns the handshaken connections that have flow
// monitors.
func (m *Manager) MonitoringConns() []*Conn {
	var out []*Conn
	for _, c := range *m.active.Load() {
		if len(c.Monitors()) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// SendFlowUpdates sends flow updates in the connection's version: the
// reply to a monitor request (xid its, waiting for room like any reply)
// or, with xid 0, unsolicited updates, which never wait: when the queue
// is full they are dropped and counted as asynchronous messages are
// (Open vSwitch would pause the monitor instead). Unsolicited updates
// are held back while a monitor request is being answered
// (HoldFlowUpdates).
func (c *Conn) SendFlowUpdates(xid uint32, ups []ofpwire.FlowUpdate) error {
	if xid == 0 {
		c.monMu.Lock()
		defer c.monMu.Unlock()
		if c.monHolding {
			c.monHeld = append(c.monHeld, ups...)
			return nil
		}
	}
	return c.sendFlowUpdates(xid, ups)
}

func (c *Conn) sendFlowUpdates(xid uint32, ups []ofpwire.FlowUpdate) error {
	bs, err := ofpwire.EncodeFlowUpdates(c.Version(), xid, ups)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if xid == 0 {
			c.sendAsync(asyncFlowRemoved, b)
			continue
		}
		if err := c.enqueue(b); err != nil {
			return err
		}
	}
	return nil
}

// HoldFlowUpdates holds the connection's unsolicited flow updates back
// until ReleaseFlowUpdates: a monitor request registers its monitors
// before reading the flows present, and a change in between must reach
// the peer after the reply, which ovs-ofctl waits for while dropping
// anything else.
func (c *Conn) HoldFlowUpdates() {
	c.monMu.Lock()
	c.monHolding = true
	c.monMu.Unlock()
}

// ReleaseFlowUpdates sends what HoldFlowUpdates held, in order.
func (c *Conn) ReleaseFlowUpdates() {
	c.monMu.Lock()
	defer c.monMu.Unlock()
	c.monHolding = false
	if len(c.monHeld) > 0 {
		c.sendFlowUpdates(0, c.monHeld)
		c.monHeld = nil
	}
}

package ofproto

import (
	"bytes"
	"fmt"
	"net"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// SupportedPortConfig are the OFPPC_* bits PORT_MOD and SetPortConfig
// accept. NO_FLOOD is OpenFlow 1.0's bit, which Open vSwitch also honours
// under 1.3 (ovs-ofctl mod-port ... no-flood); the 1.0 STP bits are
// refused, since the bridge runs no spanning tree.
const SupportedPortConfig = ofpwire.PortConfigDown | ofpwire.PortConfigNoRcv | ofpwire.PortConfigNoFwd |
	ofpwire.PortConfigNoPacketIn | ofpwire.PortConfigNoFlood

// PortOptions describe a port beyond its netdev.
type PortOptions struct {
	// Name is the port's OpenFlow name (PORT_DESC, PORT_STATUS); empty
	// means the netdev's Name. OpenFlow carries at most 15 bytes.
	Name string
	// HWAddr is the address PORT_DESC reports and PORT_MOD must quote;
	// nil means all zeros (the drivers do not expose one).
	HWAddr net.HardwareAddr
	// Curr, CurrSpeed and MaxSpeed (kb/s) are the link's features and
	// speed as the kernel reports them (ethtool), for PORT_DESC; zero
	// when unknown.
	Curr                ofpwire.PortFeature
	CurrSpeed, MaxSpeed uint32
}

// portRec is what the bridge knows of a port present in the datapath.
type portRec struct {
	name string
	hw   [6]byte
	// curr, currSpeed and maxSpeed are PortOptions' link description.
	curr                ofpwire.PortFeature
	currSpeed, maxSpeed uint32
	// link is the link state last announced (PORT_STATUS) and the one
	// fast-failover decisions were last invalidated for.
	link bool
	// added is when the bridge took the port on: port statistics'
	// duration (OpenFlow 1.3 §7.3.5.6, "time port has been alive").
	added time.Time
}

// portSettings is the configuration of a port number, kept while the port
// is absent (set before AddPort, or across an interface that vanished)
// and dropped by RemovePort.
type portSettings struct {
	config ofpwire.PortConfig
	normal *normal.PortConfig
}

// portView is what translations read about the ports, replaced as a whole
// (never modified) so that upcalls read it without a lock.
type portView struct {
	config map[uint32]ofpwire.PortConfig // non-zero configs by port number
	// src is the datapath port snapshot all and flood were built from;
	// a different snapshot (ports added or removed) rebuilds them.
	src        []*datapath.Port
	all, flood []uint32
	local      uint32 // datapath.LocalPort if the bridge has its interface, else 0
	// configOf is config's lookup as a func value built once per view, so
	// a translation's Options cost no allocation for it.
	configOf func(port uint32) ofpwire.PortConfig
}

func newPortView(config map[uint32]ofpwire.PortConfig, src []*datapath.Port) *portView {
	v := &portView{config: config, src: src, all: make([]uint32, 0, len(src))}
	for _, p := range src {
		v.all = append(v.all, p.No)
		if p.No == datapath.LocalPort {
			v.local = p.No
		}
	}
	v.flood = v.all
	for _, c := range config {
		if c&ofpwire.PortConfigNoFlood != 0 {
			v.flood = make([]uint32, 0, len(src))
			for _, p := range src {
				if config[p.No]&ofpwire.PortConfigNoFlood == 0 {
					v.flood = append(v.flood, p.No)
				}
			}
			break
		}
	}
	v.configOf = func(no uint32) ofpwire.PortConfig { return config[no] }
	return v
}

// sameSnapshot reports whether two datapath port snapshots are the same
// slice (the datapath replaces its snapshot on every port change).
func sameSnapshot(a, b []*datapath.Port) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// ports returns the port view for the datapath's current port set.
func (b *Bridge) ports() *portView {
	ps := b.dp.Ports()
	v := b.view.Load()
	if sameSnapshot(v.src, ps) {
		return v
	}
	nv := newPortView(v.config, ps)
	b.view.CompareAndSwap(v, nv) // a config change that won the race rebuilds on the next call
	return nv
}

// publishLocked installs a view with the current settings and invalidates
// the megaflows translated under the old one. Caller holds portMu.
func (b *Bridge) publishLocked() {
	cfg := make(map[uint32]ofpwire.PortConfig)
	for no, s := range b.settings {
		if s.config != 0 {
			cfg[no] = s.config
		}
	}
	b.view.Store(newPortView(cfg, b.dp.Ports()))
	b.invalidate()
}

// Batch runs f, in which ports are added (AddPortWith, SetNormalPort,
// and the datapath's settings, as datapath.Batch), with NORMAL's port
// table and the ports' view rebuilt once at its end rather than after
// each port: each rebuild is O(ports), which made adding a thousand ports
// in one transaction quadratic. Both are rebuilt before the datapath's
// PMDs take the new ports, so no packet of theirs meets a stale table.
// Removals inside f take effect at once.
func (b *Bridge) Batch(f func()) {
	b.portMu.Lock()
	b.batching++
	b.portMu.Unlock()
	b.dp.Batch(func() {
		defer func() {
			b.portMu.Lock()
			defer b.portMu.Unlock()
			if b.batching--; b.batching == 0 && b.portsDirty {
				b.portsDirty = false
				b.syncNormalLocked()
				b.publishLocked()
			}
		}()
		f()
	})
}

// portsChangedLocked brings NORMAL and the view up to date after a port
// change, or at the end of the Batch under way. Caller holds portMu.
func (b *Bridge) portsChangedLocked() {
	if b.batching > 0 {
		b.portsDirty = true
		return
	}
	b.syncNormalLocked()
	b.publishLocked()
}

// syncNormalLocked gives NORMAL the ports present in the datapath, with
// their SetNormalPort configuration (default: access port of VLAN 0) and
// NO_FLOOD. MACs learned on ports that left are forgotten. Caller holds
// portMu.
func (b *Bridge) syncNormalLocked() {
	ps := b.dp.Ports()
	cfgs := make([]normal.PortConfig, len(ps))
	for i, p := range ps {
		c := normal.PortConfig{No: p.No, Mode: normal.Access}
		s := b.settings[p.No]
		if s.normal != nil {
			c = *s.normal
			c.No = p.No
		}
		if s.config&ofpwire.PortConfigNoFlood != 0 {
			c.NoFlood = true
		}
		cfgs[i] = c
	}
	b.cfg.Normal.SetPorts(cfgs)
}

// describeLocked is the ofp_port of datapath port p. Caller holds portMu.
func (b *Bridge) describeLocked(p *datapath.Port) ofpwire.Port {
	rec := b.recs[p.No]
	if rec == nil {
		rec = &portRec{name: p.Dev.Name()}
	}
	return b.describe(p.No, rec, p.Dev.LinkUp())
}

// describe builds a port description from its record and link state.
// Live means usable: link up and not administratively down.
func (b *Bridge) describe(no uint32, rec *portRec, linkUp bool) ofpwire.Port {
	cfg := b.settings[no].config
	var state ofpwire.PortState
	switch {
	case !linkUp:
		state = ofpwire.PortStateLinkDown
	case cfg&ofpwire.PortConfigDown == 0:
		state = ofpwire.PortStateLive
	}
	return ofpwire.Port{
		PortNo:    ofpwire.PortNo(no),
		HWAddr:    net.HardwareAddr(bytes.Clone(rec.hw[:])),
		Name:      rec.name,
		Config:    cfg,
		State:     state,
		Curr:      rec.curr,
		CurrSpeed: rec.currSpeed,
		MaxSpeed:  rec.maxSpeed,
	}
}

func (b *Bridge) sendPortStatus(reason ofpwire.PortReason, p ofpwire.Port) {
	b.mgr.SendPortStatus(ofpwire.PortStatus{Reason: reason, Port: p})
}

// AddPort adds dev to the datapath as port no under the netdev's name and
// announces it (PORT_STATUS ADD). NORMAL sees it as an untagged access
// port of VLAN 0 unless SetNormalPort said otherwise. On error the caller
// still owns dev.
func (b *Bridge) AddPort(no uint32, dev netdev.Netdev) error {
	return b.AddPortWith(no, dev, PortOptions{})
}

// AddPortWith is AddPort with an OpenFlow name and hardware address.
func (b *Bridge) AddPortWith(no uint32, dev netdev.Netdev, opts PortOptions) error {
	if len(opts.HWAddr) != 0 && len(opts.HWAddr) != 6 {
		return fmt.Errorf("ofproto: port %d: hardware address %v is not 6 bytes", no, opts.HWAddr)
	}
	b.portMu.Lock()
	defer b.portMu.Unlock()
	p, err := b.dp.AddPort(no, dev)
	if err != nil {
		return err
	}
	rec := &portRec{name: opts.Name, link: dev.LinkUp(), curr: opts.Curr, currSpeed: opts.CurrSpeed,
		maxSpeed: opts.MaxSpeed, added: time.Now()}
	if rec.name == "" {
		rec.name = dev.Name()
	}
	copy(rec.hw[:], opts.HWAddr)
	b.recs[no] = rec
	if mp, ok := dev.(netdev.TunnelOptionMapper); ok {
		mp.MapTunnelOption(b.tunnelOptionLocked())
	}
	b.portsChangedLocked()
	b.sendPortStatus(ofpwire.PortReasonAdd, b.describe(no, rec, p.Dev.LinkUp()))
	return nil
}

// RemovePort removes port no from the datapath (closing its netdev),
// forgets its settings (PORT_MOD config, NORMAL VLANs) and the MACs learned
// on it, and announces it (PORT_STATUS DELETE). Flows naming the port stay.
func (b *Bridge) RemovePort(no uint32) error {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	p := b.dp.Port(no)
	if p == nil {
		return fmt.Errorf("ofproto: no port %d", no)
	}
	desc := b.describeLocked(p)
	if err := b.dp.RemovePort(no); err != nil {
		return err
	}
	delete(b.recs, no)
	delete(b.settings, no)
	b.syncNormalLocked()
	b.publishLocked()
	b.sendPortStatus(ofpwire.PortReasonDelete, desc)
	return nil
}

// PortGone tells the bridge that port no left the datapath without
// RemovePort: the datapath removes a port whose interface disappeared and
// calls its Config.OnPortRemoved, from which the daemon should call this.
// The port is announced with PORT_STATUS DELETE (it is no longer in
// PORT_DESC) and leaves NORMAL; its settings are kept for when the
// interface comes back and the daemon adds it again. Housekeeping notices
// such ports by itself within a second; PortGone only makes it immediate.
// A port still in the datapath is left alone.
func (b *Bridge) PortGone(no uint32) {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	b.portGoneLocked(no)
}

func (b *Bridge) portGoneLocked(no uint32) bool {
	rec := b.recs[no]
	if rec == nil || b.dp.Port(no) != nil {
		return false
	}
	desc := b.describe(no, rec, false)
	delete(b.recs, no)
	b.syncNormalLocked()
	b.publishLocked()
	b.sendPortStatus(ofpwire.PortReasonDelete, desc)
	return true
}

// SetNormalPort sets how NORMAL treats port cfg.No (access VLAN, trunk
// VLANs, native VLAN: Open vSwitch's tag, trunks and vlan_mode). It may be
// called before the port is added and lasts until RemovePort. NO_FLOOD
// set by PORT_MOD applies on top of cfg.NoFlood.
func (b *Bridge) SetNormalPort(cfg normal.PortConfig) {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	s := b.settings[cfg.No]
	c := cfg
	c.Trunks = append([]uint16(nil), cfg.Trunks...)
	s.normal = &c
	b.settings[cfg.No] = s
	b.portsChangedLocked()
}

// SetPortConfig replaces the OFPPC_* bits of port no, as a PORT_MOD with
// every supported bit in its mask would, for the daemon (restoring saved
// port configuration, or ovs-vsctl-style settings). Bits outside
// SupportedPortConfig are ignored. It may be called before the port is
// added and lasts until RemovePort; a present port is announced with
// PORT_STATUS MODIFY when its config changes.
func (b *Bridge) SetPortConfig(no uint32, cfg ofpwire.PortConfig) {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	b.setConfigLocked(no, cfg&SupportedPortConfig)
}

// setConfigLocked applies a port config: NORMAL's flood set, the
// translation view (which invalidates the megaflows) and PORT_STATUS.
func (b *Bridge) setConfigLocked(no uint32, cfg ofpwire.PortConfig) {
	s := b.settings[no]
	if s.config == cfg {
		return
	}
	s.config = cfg
	b.settings[no] = s
	b.syncNormalLocked()
	b.publishLocked()
	if p := b.dp.Port(no); p != nil {
		b.sendPortStatus(ofpwire.PortReasonModify, b.describeLocked(p))
	}
}

// PortConfig returns the OFPPC_* bits set on port no.
func (b *Bridge) PortConfig(no uint32) ofpwire.PortConfig {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	return b.settings[no].config
}

func pmErr(code uint16) error { return ofpErr(ofpwire.ETPortModFailed, code) }

// portMod applies an OFPT_PORT_MOD. The advertise field is ignored: the
// drivers expose no link features to advertise.
func (b *Bridge) portMod(pm *ofpwire.PortMod) error {
	no := uint32(pm.PortNo)
	if no == 0 || no > uint32(ofpwire.PortMax) && no != datapath.LocalPort {
		return pmErr(ofpwire.PMFCBadPort)
	}
	b.portMu.Lock()
	defer b.portMu.Unlock()
	p := b.dp.Port(no)
	if p == nil {
		return pmErr(ofpwire.PMFCBadPort)
	}
	rec := b.adoptLocked(p)
	var hw [6]byte
	if len(pm.HWAddr) != 6 {
		return pmErr(ofpwire.PMFCBadHWAddr)
	}
	copy(hw[:], pm.HWAddr)
	if hw != rec.hw {
		return pmErr(ofpwire.PMFCBadHWAddr)
	}
	if pm.Mask&^SupportedPortConfig != 0 {
		return pmErr(ofpwire.PMFCBadConfig)
	}
	old := b.settings[no].config
	b.setConfigLocked(no, old&^pm.Mask|pm.Config&pm.Mask)
	return nil
}

// adoptLocked returns the record of datapath port p, creating one under
// the netdev's name for a port added to the datapath behind the bridge's
// back (or before NewBridge).
func (b *Bridge) adoptLocked(p *datapath.Port) *portRec {
	rec := b.recs[p.No]
	if rec == nil {
		rec = &portRec{name: p.Dev.Name(), link: p.Dev.LinkUp(), added: time.Now()}
		b.recs[p.No] = rec
	}
	return rec
}

// checkPorts reconciles the bridge's port records with the datapath at a
// housekeeping tick: ports that appeared are announced (ADD), ports that
// vanished too (DELETE, see PortGone), link changes as MODIFY. It reports
// whether anything changed that translations depend on.
func (b *Bridge) checkPorts() bool {
	b.portMu.Lock()
	defer b.portMu.Unlock()
	changed := false
	for no := range b.recs {
		if b.portGoneLocked(no) {
			changed = true
		}
	}
	added := false
	for _, p := range b.dp.Ports() {
		rec := b.recs[p.No]
		up := p.Dev.LinkUp()
		if rec == nil {
			rec = b.adoptLocked(p)
			added = true
			b.sendPortStatus(ofpwire.PortReasonAdd, b.describe(p.No, rec, up))
			continue
		}
		if rec.link != up {
			rec.link = up
			changed = true
			b.sendPortStatus(ofpwire.PortReasonModify, b.describe(p.No, rec, up))
		}
	}
	if added {
		b.syncNormalLocked()
		b.publishLocked()
	}
	return changed || added
}

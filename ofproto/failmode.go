package ofproto

import (
	"fmt"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"

	"github.com/netrack/openflow/ofp"
)

// Fail modes, as Open vSwitch spells them (ovs-vsctl set-fail-mode).
const (
	// FailStandalone makes the bridge a learning switch when it has no
	// controller, and when its controllers have been unreachable for the
	// fail-open delay.
	FailStandalone = "standalone"
	// FailSecure keeps the bridge on its flow tables whatever happens to
	// its controllers.
	FailSecure = "secure"
)

// failOpenProbes is how many probe intervals of disconnection make a
// standalone bridge fail open (Open vSwitch's choice).
const failOpenProbes = 3

func checkFailMode(m string) (string, error) {
	switch m {
	case "", FailStandalone:
		return FailStandalone, nil
	case FailSecure:
		return FailSecure, nil
	}
	return "", fmt.Errorf("ofproto: fail mode %q: want %q or %q", m, FailStandalone, FailSecure)
}

// normalFlow is the visible flow a standalone bridge without controllers
// gets: everything to NORMAL, below any flow someone adds.
func normalFlow() *ofpwire.FlowMod {
	return &ofpwire.FlowMod{
		Command:  ofp.FlowAdd,
		Priority: 0,
		BufferID: ofp.NoBuffer,
		OutPort:  ofp.PortAny,
		OutGroup: ofp.GroupAny,
		Instructions: []ofpwire.Instruction{
			&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: ofp.PortNormal}}},
		},
	}
}

// newFailOpenPipeline is the hidden table translations use while failed
// open: one entry sending everything to NORMAL.
func newFailOpenPipeline() *pipeline.Pipeline {
	p := pipeline.New(0)
	if _, err := p.Apply(normalFlow(), time.Now()); err != nil {
		panic(err) // a constant, valid flow-mod
	}
	return p
}

// failOpenDelay is how long controllers must have been disconnected
// before a standalone bridge fails open.
func (b *Bridge) failOpenDelay() time.Duration {
	if b.cfg.FailOpenDelay > 0 {
		return b.cfg.FailOpenDelay
	}
	probe := b.cfg.Conn.ProbeInterval
	if probe <= 0 {
		probe = ofconn.DefaultProbeInterval
	}
	return failOpenProbes * probe
}

// hasControllersLocked reports whether controller targets are configured.
func (b *Bridge) hasControllersLocked() bool {
	for _, s := range b.mgr.Status() {
		if !s.Management {
			return true
		}
	}
	return false
}

// flushLocked deletes every flow and, in standalone mode without
// controllers, installs the visible NORMAL flow: what Open vSwitch does
// when a bridge is created, when its fail mode changes while it has no
// controller, and when it gains its first or loses its last controller.
func (b *Bridge) flushLocked() {
	now := time.Now()
	removed, err := b.pipe.Apply(&ofpwire.FlowMod{Command: ofp.FlowDelete, TableID: uint8(ofp.TableAll),
		BufferID: ofp.NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny}, now)
	if err == nil {
		b.sendRemoved(removed)
	}
	b.installNormalFlowLocked()
}

func (b *Bridge) installNormalFlowLocked() {
	if b.failMode == FailStandalone && !b.hasControllers {
		if _, err := b.pipe.Apply(normalFlow(), time.Now()); err != nil {
			b.logf("ofproto: %s: cannot install the NORMAL flow: %v", b.name, err)
		}
	}
}

// SetFailMode switches between FailStandalone and FailSecure ("" means
// standalone). Without controllers this flushes the flow tables, then
// standalone gets its NORMAL flow back (Open vSwitch does the same); with
// controllers the flows stay, and secure ends a fail-open at once.
func (b *Bridge) SetFailMode(mode string) error {
	m, err := checkFailMode(mode)
	if err != nil {
		return err
	}
	b.failMu.Lock()
	defer b.failMu.Unlock()
	if m == b.failMode {
		return nil
	}
	b.failMode = m
	if !b.hasControllers {
		b.flushLocked()
	}
	b.updateFailOpenLocked()
	return nil
}

// FailMode is the bridge's fail mode, FailStandalone or FailSecure.
func (b *Bridge) FailMode() string {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	return b.failMode
}

// SetControllers replaces the controller targets (ofconn.Manager's
// SetTargets). Prefer it to Manager().SetTargets, which the fail mode
// logic only notices at the next housekeeping tick: when the bridge goes from no controller to
// some, or back, every flow is deleted and a standalone bridge left
// without controllers gets the NORMAL flow (Open vSwitch's behaviour). A
// passive target (ptcp:, punix:) counts as a controller.
func (b *Bridge) SetControllers(targets []string) error {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	err := b.mgr.SetTargets(targets)
	b.syncControllersLocked()
	return err
}

// syncControllers catches up with controller targets changed through
// Manager().SetTargets (housekeeping calls it every tick).
func (b *Bridge) syncControllers() {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	b.syncControllersLocked()
}

func (b *Bridge) syncControllersLocked() {
	had := b.hasControllers
	b.hasControllers = b.hasControllersLocked()
	if had != b.hasControllers {
		b.flushLocked()
	}
	b.updateFailOpenLocked()
}

// Controllers describes the controller targets and their connections
// (management targets left out), for get-controller and metrics.
func (b *Bridge) Controllers() []ofconn.Status {
	var out []ofconn.Status
	for _, s := range b.mgr.Status() {
		if !s.Management {
			out = append(out, s)
		}
	}
	return out
}

// FailOpen reports whether the bridge is failed open: standalone, with
// controllers configured and none connected for the fail-open delay, so
// that every packet is forwarded by NORMAL instead of the flow tables.
func (b *Bridge) FailOpen() bool { return b.failOpen.Load() }

// onControllers follows the number of connected controllers (ofconn's
// OnControllers).
func (b *Bridge) onControllers(n int) {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	b.connected = n
	b.updateFailOpenLocked()
}

// updateFailOpenLocked starts the fail-open timer when a standalone
// bridge's controllers are all disconnected, and leaves fail-open (or
// stops the timer) as soon as that is no longer so. Caller holds failMu.
func (b *Bridge) updateFailOpenLocked() {
	want := !b.closed && b.failMode == FailStandalone && b.hasControllers && b.connected == 0
	if want {
		if b.failOpen.Load() || b.failTimer != nil {
			return // already open, or the disconnection is being timed
		}
		b.failSeq++
		seq := b.failSeq
		b.failTimer = time.AfterFunc(b.failOpenDelay(), func() { b.failOpenExpired(seq) })
		return
	}
	b.stopFailTimerLocked()
	if b.failOpen.Swap(false) {
		b.logf("ofproto: %s: leaving fail-open", b.name)
		b.invalidate()
	}
}

func (b *Bridge) stopFailTimerLocked() {
	if b.failTimer != nil {
		b.failTimer.Stop()
		b.failTimer = nil
		b.failSeq++ // a timer that already fired finds itself stale
	}
}

func (b *Bridge) failOpenExpired(seq uint64) {
	b.failMu.Lock()
	defer b.failMu.Unlock()
	if seq != b.failSeq {
		return
	}
	b.failTimer = nil
	b.logf("ofproto: %s: no controller for %v, failing open", b.name, b.failOpenDelay())
	b.failOpen.Store(true)
	b.invalidate()
}

func (b *Bridge) logf(format string, args ...any) {
	if b.cfg.Conn.Logf != nil {
		b.cfg.Conn.Logf(format, args...)
	}
}

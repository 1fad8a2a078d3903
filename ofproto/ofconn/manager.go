// Package ofconn is the switch side of OpenFlow 1.3 connections: targets
// (listeners and reconnecting controller connections), the handshake,
// echo and inactivity probes, roles, asynchronous-message filtering and
// rate limiting. It knows nothing about flow tables: every request it does
// not answer itself goes, in arrival order, to a Handler (the bridge).
//
// Controllers and management connections. Targets given to SetTargets are
// controllers; targets given to SetManagementTargets (the bridge's local
// socket for ovs-ofctl and similar tools) are not. Both kinds are served
// identically, but only controller connections that completed the
// handshake count for Connected and the OnControllers callback. That is
// what fail-mode handling needs: in fail-mode standalone the bridge starts
// a grace timer (Open vSwitch uses three probe intervals) when the count
// drops to zero, falls back to NORMAL (MAC learning) when it expires while
// still disconnected, and drops the fallback as soon as the count becomes
// positive again; in fail-mode secure it does nothing. A local tool on the
// management socket therefore never keeps a bridge out of standalone mode.
// A peer accepted by a passive controller target (ptcp:/pssl:/punix: given
// to SetTargets) is a controller.
package ofconn

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/internal/acceptloop"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Handler is implemented by the bridge: it processes every request the
// connection layer does not handle itself.
type Handler interface {
	// Handle processes one request, on the connection's reader goroutine,
	// so requests of one connection are handled strictly in order (which
	// is what makes barriers work). Replies go out with c.Send. A returned
	// *ofpwire.OFPError is sent back as an ERROR reply carrying the
	// offending message; other errors too (as BAD_REQUEST/EPERM).
	Handle(c *Conn, xid uint32, msg ofpwire.Message) error
	// Features returns what a FEATURES_REPLY carries; the auxiliary id is
	// forced to 0 (no auxiliary connections).
	Features() ofpwire.FeaturesReply
}

// Config sets up a Manager. Zero fields take the documented defaults.
type Config struct {
	// Handler receives the requests the connection layer does not answer.
	// Nil answers them all with BAD_REQUEST/BAD_TYPE.
	Handler Handler
	// ProbeInterval: after this long without receiving anything an
	// ECHO_REQUEST is sent, and the connection is closed when another
	// interval passes in silence. Default 5 s; negative disables probing.
	ProbeInterval time.Duration
	// Versions are the OpenFlow versions connections may negotiate (as
	// Bridge.protocols limits them); nil means every version ofpwire
	// speaks.
	Versions []uint8
	// MinBackoff and MaxBackoff bound the reconnect delay of active
	// targets, which doubles after each failed attempt. Defaults 1 s, 8 s.
	MinBackoff, MaxBackoff time.Duration
	// PacketInRate (per second) and PacketInBurst configure each
	// connection's packet-in token bucket. Defaults 1000 and 100; a
	// negative rate disables the limit.
	PacketInRate  float64
	PacketInBurst int
	// QueueLen is the per-connection send queue, in messages; asynchronous
	// messages that find it full are dropped and counted. Default 256.
	QueueLen int
	// MaxQueueBytes bounds the bytes waiting in one connection's send
	// queue (default DefaultMaxQueueBytes). A reply that would go past it
	// disconnects the peer, which is not reading what it asked for; an
	// asynchronous message is dropped and counted instead. A message
	// larger than the bound is still sent when the queue is empty, so a
	// peer that reads can always get a large reply.
	MaxQueueBytes int
	// Budget bounds the bytes queued over every connection sharing it
	// (the same rule as MaxQueueBytes applies when it is exhausted). Nil
	// is the process-wide DefaultBudget.
	Budget *QueueBudget
	// MaxConns bounds the connections of each passive target (listener)
	// at once (default DefaultMaxConns); one more is closed as accepted,
	// counted and logged. SetMaxConns changes it at run time.
	MaxConns int
	// TLS holds the files for ssl: and pssl: targets (SetTLS changes them).
	TLS TLSFiles
	// OnControllers is called, from a goroutine of the Manager and never
	// concurrently, with the number of connected controllers whenever it
	// changes (see the package documentation for its use by fail modes).
	OnControllers func(n int)
	// OnBarrier, if set, runs before each BARRIER_REPLY is sent, on the
	// connection's reader goroutine: what it makes durable is durable when
	// the peer learns its earlier requests are complete. It must not wait
	// for this Manager (Close, SetTargets). An error is sent instead of
	// the reply: the earlier requests are complete but not durable.
	OnBarrier func() error
	// OnSwitchConfig, if set, is called with the new configuration after
	// a SET_CONFIG changed it, on the connection's reader goroutine:
	// what translation derives from it (fragment handling) is stale.
	OnSwitchConfig func(SwitchConfig)
	// Observe, if set, sees the header of every message received on any
	// connection (for tracing and tests). It must not block.
	Observe func(c *Conn, h ofpwire.Header)
	// Logf, if set, receives connection events.
	Logf func(format string, args ...any)
	// ManagementLogf, if set, receives the connection events of management
	// targets (the short-lived sessions of ovs-ofctl and vsctl) instead of
	// Logf, so that they can be logged below the controllers' events.
	ManagementLogf func(format string, args ...any)
	// Warnf, if set, receives what an operator must see even when routine
	// connection events are not logged: accept errors (rate limited),
	// refused connections (rate limited), disconnected slow readers. Nil
	// sends them to Logf.
	Warnf func(format string, args ...any)
}

// TargetOptions are one controller's settings, which override the
// Manager's (Open vSwitch's Controller inactivity_probe and max_backoff
// columns). Zero fields keep the Manager's.
type TargetOptions struct {
	// Probe is the inactivity probe interval; negative disables probing.
	Probe time.Duration
	// MaxBackoff bounds the reconnect delay of an active target.
	MaxBackoff time.Duration
}

// SetTargetOptions sets the controllers' own settings, by target name
// (replacing all earlier ones). A connection that probes takes a new
// interval, or stops probing, at its next probe; turning probing on for
// a connection that had it off waits for its next connection.
func (m *Manager) SetTargetOptions(opts map[string]TargetOptions) {
	m.mu.Lock()
	m.opts = maps.Clone(opts)
	m.mu.Unlock()
}

// probeFor is target t's inactivity probe interval.
func (m *Manager) probeFor(t *target) time.Duration {
	m.mu.Lock()
	o := m.opts[t.name]
	m.mu.Unlock()
	probe := m.cfg.ProbeInterval
	if o.Probe != 0 {
		probe = o.Probe
	}
	if t.management && probe > 0 {
		// A management (service) connection, such as ovn-controller's on
		// BRIDGE.mgmt, is probed every minute, as Open vSwitch probes it:
		// a client busy recomputing for seconds is not dead.
		probe = max(probe, ManagementProbeInterval)
	}
	return probe
}

// maxBackoffLocked is target t's longest reconnect delay.
func (m *Manager) maxBackoffLocked(t *target) time.Duration {
	if b := m.opts[t.name].MaxBackoff; b > 0 {
		return max(b, m.cfg.MinBackoff)
	}
	return m.cfg.MaxBackoff
}

// Defaults of Config.
const (
	DefaultProbeInterval = 5 * time.Second
	// ManagementProbeInterval is the least probe interval of management
	// connections (Open vSwitch's 60 s for BRIDGE.mgmt).
	ManagementProbeInterval = 60 * time.Second
	DefaultMinBackoff       = time.Second
	DefaultMaxBackoff       = 8 * time.Second
	DefaultPacketInRate     = 1000
	DefaultPacketInBurst    = 100
	DefaultQueueLen         = 256
	// DefaultMaxQueueBytes is MaxQueueBytes's default: room for a few
	// full-size replies, far beyond what a peer that reads ever has queued.
	DefaultMaxQueueBytes = 4 << 20
	// DefaultTotalQueueBytes is DefaultBudget's size.
	DefaultTotalQueueBytes = 64 << 20
	// DefaultMaxConns is MaxConns's default.
	DefaultMaxConns = 256
	// DefaultMissSendLen is the 1.3 spec's initial miss_send_len
	// (OFP_DEFAULT_MISS_SEND_LEN).
	DefaultMissSendLen = 128
)

// SwitchConfig is the switch-wide part of OFPT_SET_CONFIG: the IP fragment
// handling flags and miss_send_len, which the bridge applies to table-miss
// packet-ins.
type SwitchConfig struct {
	Flags       uint16
	MissSendLen uint16
}

// Manager owns the OpenFlow connections of one bridge.
type Manager struct {
	cfg     Config
	handler Handler
	// allowed is what SetVersions set (nil: Config.Versions).
	allowed atomic.Pointer[[]uint8]

	mu      sync.Mutex
	closed  bool
	targets map[targetKey]*target
	// retired are the targets at Close: Status goes on reporting their
	// final counters, which the daemon carries over to the manager of a
	// rebuilt bridge.
	retired    map[targetKey]*target
	conns      map[*Conn]struct{}
	genDefined bool   // a master/slave role request has set the generation
	gen        uint64 // the highest generation_id seen
	nextID     uint64
	// opts are the controllers' own settings (SetTargetOptions), by
	// target name.
	opts map[string]TargetOptions

	tls         atomic.Pointer[TLSFiles]
	active      atomic.Pointer[[]*Conn] // handshaken connections, for Send*
	monitoring  atomic.Int32            // connections with flow monitors
	controllers atomic.Int32
	swcfg       atomic.Uint32 // flags<<16 | miss_send_len
	maxConns    atomic.Int64

	refused, slowReaders atomic.Uint64
	refusedLog           acceptloop.LogLimit

	notify chan struct{}
	stop   chan struct{}
	wg     sync.WaitGroup
}

type targetKey struct {
	name       string
	management bool
}

// ErrClosed is returned when sending on a closed connection.
var ErrClosed = errors.New("ofconn: connection closed")

// New starts a Manager with no targets.
func New(cfg Config) *Manager {
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = DefaultProbeInterval
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = cfg.MinBackoff
	}
	if cfg.PacketInRate == 0 {
		cfg.PacketInRate = DefaultPacketInRate
	}
	if cfg.PacketInBurst <= 0 {
		cfg.PacketInBurst = DefaultPacketInBurst
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = DefaultQueueLen
	}
	if cfg.MaxQueueBytes <= 0 {
		cfg.MaxQueueBytes = DefaultMaxQueueBytes
	}
	if cfg.Budget == nil {
		cfg.Budget = DefaultBudget
	}
	m := &Manager{
		cfg:     cfg,
		handler: cfg.Handler,
		targets: make(map[targetKey]*target),
		conns:   make(map[*Conn]struct{}),
		notify:  make(chan struct{}, 1),
		stop:    make(chan struct{}),
	}
	if m.handler == nil {
		m.handler = rejectAll{}
	}
	m.tls.Store(&cfg.TLS)
	m.swcfg.Store(DefaultMissSendLen)
	m.SetMaxConns(cfg.MaxConns)
	m.active.Store(new([]*Conn))
	m.wg.Add(1)
	go m.notifier()
	return m
}

// rejectAll is the Handler of a Manager configured without one.
type rejectAll struct{}

func (rejectAll) Handle(*Conn, uint32, ofpwire.Message) error {
	return &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadType}
}
func (rejectAll) Features() ofpwire.FeaturesReply { return ofpwire.FeaturesReply{} }

func (m *Manager) logf(format string, args ...any) {
	if m.cfg.Logf != nil {
		m.cfg.Logf(format, args...)
	}
}

// logf logs an event of one of t's connections, through ManagementLogf
// for a management target.
func (t *target) logf(format string, args ...any) {
	if t.management && t.m.cfg.ManagementLogf != nil {
		t.m.cfg.ManagementLogf(format, args...)
		return
	}
	t.m.logf(format, args...)
}

func (m *Manager) warnf(format string, args ...any) {
	if m.cfg.Warnf != nil {
		m.cfg.Warnf(format, args...)
		return
	}
	m.logf(format, args...)
}

// SetMaxConns changes the per-listener connection limit; n ≤ 0 restores
// DefaultMaxConns. Connections over a lowered limit are left to finish.
func (m *Manager) SetMaxConns(n int) {
	if n <= 0 {
		n = DefaultMaxConns
	}
	m.maxConns.Store(int64(n))
}

// Stats are a Manager's counts of connections it refused or cut off.
type Stats struct {
	// Refused counts connections closed as accepted because their
	// listener had MaxConns connections.
	Refused uint64
	// SlowReaderDisconnects counts connections closed because a reply
	// found their send queue over MaxQueueBytes or the Budget exhausted.
	SlowReaderDisconnects uint64
	// QueuedBytes is what the Manager's connections have queued now.
	QueuedBytes int64
}

// Stats returns the Manager's counters.
func (m *Manager) Stats() Stats {
	m.mu.Lock()
	var q int64
	for c := range m.conns {
		q += c.queuedBytes()
	}
	m.mu.Unlock()
	return Stats{Refused: m.refused.Load(), SlowReaderDisconnects: m.slowReaders.Load(), QueuedBytes: q}
}

func (m *Manager) tlsFiles() TLSFiles { return *m.tls.Load() }

// SetTLS replaces the files of ssl: and pssl: targets. Those targets start
// over at once (connections closed, listeners reopened, no back-off
// left to wait), so that new certificates apply now: a target that failed
// for want of files connects as soon as they are given. Other targets are
// untouched.
func (m *Manager) SetTLS(f TLSFiles) {
	m.tls.Store(&f)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	for k, t := range m.targets {
		if t.p.kind.tls() {
			t.stopLocked()
			m.startTargetLocked(k, t.p)
		}
	}
}

// SetTargets replaces the controller targets. Targets present before and
// after keep their listeners and connections; removed ones are closed
// with all their connections. Nothing changes if any target is invalid.
func (m *Manager) SetTargets(targets []string) error {
	return m.setTargets(targets, false)
}

// SetManagementTargets replaces the management targets (typically one
// punix: socket per bridge for local tools). Their connections are served
// like controllers' but never count as connected controllers.
func (m *Manager) SetManagementTargets(targets []string) error {
	return m.setTargets(targets, true)
}

func (m *Manager) setTargets(names []string, management bool) error {
	want := make(map[string]parsedTarget, len(names))
	var errs []error
	for _, n := range names {
		p, err := parseTarget(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		want[n] = p
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return errors.New("ofconn: manager closed")
	}
	for k, t := range m.targets {
		if k.management != management {
			continue
		}
		if _, keep := want[k.name]; !keep {
			delete(m.targets, k)
			t.stopLocked()
		}
	}
	for n, p := range want {
		k := targetKey{n, management}
		if _, ok := m.targets[k]; ok {
			continue
		}
		m.startTargetLocked(k, p)
	}
	return nil
}

// startTargetLocked creates target k and starts its goroutine.
func (m *Manager) startTargetLocked(k targetKey, p parsedTarget) {
	ctx, cancel := context.WithCancel(context.Background())
	t := &target{m: m, name: k.name, p: p, management: k.management, ctx: ctx, cancel: cancel,
		conns: make(map[*Conn]struct{})}
	if old := m.targets[k]; old != nil {
		// Restarted (SetTLS): the counters go on.
		t.reconnects, t.closedIn, t.closedOut, t.tlsFailures = old.reconnects, old.closedIn, old.closedOut, old.tlsFailures
		t.lastErr = old.lastErr
	}
	m.targets[k] = t
	m.wg.Add(1)
	if p.kind.passive() {
		go t.runPassive()
	} else {
		go t.runActive()
	}
}

// Close stops every target and connection and waits for all goroutines.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.closed = true
	m.retired = m.targets
	m.targets = map[targetKey]*target{}
	for _, t := range m.retired {
		t.stopLocked()
	}
	m.mu.Unlock()
	close(m.stop)
	m.wg.Wait()
}

// Connected reports whether at least one controller connection (not a
// management one) has completed the handshake.
func (m *Manager) Connected() bool { return m.controllers.Load() > 0 }

// Controllers is the number of connected controllers.
func (m *Manager) Controllers() int { return int(m.controllers.Load()) }

// SwitchConfig returns the configuration last set by OFPT_SET_CONFIG.
func (m *Manager) SwitchConfig() SwitchConfig {
	v := m.swcfg.Load()
	return SwitchConfig{Flags: uint16(v >> 16), MissSendLen: uint16(v)}
}

func (m *Manager) setSwitchConfig(c SwitchConfig) {
	v := uint32(c.Flags)<<16 | uint32(c.MissSendLen)
	if m.swcfg.Swap(v) != v && m.cfg.OnSwitchConfig != nil {
		m.cfg.OnSwitchConfig(c)
	}
}

// notifier calls OnControllers outside every lock, in order, with the
// latest count; bursts of changes may be coalesced into one call.
func (m *Manager) notifier() {
	defer m.wg.Done()
	last := 0
	for {
		select {
		case <-m.notify:
			n := int(m.controllers.Load())
			if n != last {
				last = n
				if m.cfg.OnControllers != nil {
					m.cfg.OnControllers(n)
				}
			}
		case <-m.stop:
			return
		}
	}
}

func (m *Manager) poke() {
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// register adds a new connection of t; false if t is being stopped.
func (m *Manager) register(t *target, c *Conn) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.ctx.Err() != nil {
		return false
	}
	m.registerLocked(t, c)
	return true
}

// registerPassive adds a connection accepted by t unless t has MaxConns
// already: ok false then, with full telling why.
func (m *Manager) registerPassive(t *target, c *Conn) (ok, full bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.ctx.Err() != nil {
		return false, false
	}
	if int64(len(t.conns)) >= m.maxConns.Load() {
		return false, true
	}
	m.registerLocked(t, c)
	return true, false
}

func (m *Manager) registerLocked(t *target, c *Conn) {
	m.nextID++
	c.id = m.nextID
	m.conns[c] = struct{}{}
	t.conns[c] = struct{}{}
}

// activate makes a handshaken connection visible to Send* and Connected.
func (m *Manager) activate(c *Conn) {
	m.mu.Lock()
	c.connectedAt = time.Now()
	c.state = StateActive
	c.active.Store(true)
	m.rebuildActiveLocked()
	if !c.t.management {
		m.controllers.Add(1)
	}
	m.mu.Unlock()
	m.poke()
	c.t.logf("ofconn: %s: connected to %s", c.t.name, c.nc.RemoteAddr())
}

func (m *Manager) unregister(c *Conn) {
	m.mu.Lock()
	delete(m.conns, c)
	delete(c.t.conns, c)
	c.t.closedIn += c.msgsIn.Load()
	c.t.closedOut += c.msgsOut.Load()
	wasActive := c.active.Swap(false)
	c.state = StateClosed
	if wasActive {
		m.rebuildActiveLocked()
		if !c.t.management {
			m.controllers.Add(-1)
		}
	}
	m.mu.Unlock()
	if wasActive {
		m.poke()
	}
	c.t.logf("ofconn: %s: connection closed: %s", c.t.name, c.CloseReason())
}

func (m *Manager) rebuildActiveLocked() {
	list := make([]*Conn, 0, len(m.conns))
	for c := range m.conns {
		if c.active.Load() {
			list = append(list, c)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	m.active.Store(&list)
}

// changeRole applies a ROLE_REQUEST of c (OpenFlow 1.3 §6.3.5).
func (m *Manager) changeRole(c *Conn, req *ofpwire.RoleRequest) (*ofpwire.RoleReply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch req.Role {
	case ofpwire.ControllerRoleNoChange:
	case ofpwire.ControllerRoleEqual:
		c.role.Store(uint32(ofpwire.ControllerRoleEqual))
	case ofpwire.ControllerRoleMaster, ofpwire.ControllerRoleSlave:
		// Generation ids wrap: compare by signed distance, as the spec asks.
		if m.genDefined && int64(req.GenerationID-m.gen) < 0 {
			return nil, &ofpwire.OFPError{Type: ofpwire.ETRoleRequestFailed, Code: ofpwire.RRFCStale}
		}
		m.gen, m.genDefined = req.GenerationID, true
		if req.Role == ofpwire.ControllerRoleMaster {
			// 1.3 has no role-status message: the old master just
			// becomes a slave; the demotion is recorded in its status.
			for o := range m.conns {
				if o != c && o.role.CompareAndSwap(uint32(ofpwire.ControllerRoleMaster), uint32(ofpwire.ControllerRoleSlave)) {
					o.demotions.Add(1)
				}
			}
		}
		c.role.Store(uint32(req.Role))
	default:
		return nil, &ofpwire.OFPError{Type: ofpwire.ETRoleRequestFailed, Code: ofpwire.RRFCBadRole}
	}
	return &ofpwire.RoleReply{Role: c.Role(), GenerationID: m.gen}, nil
}

// State is where a target or connection is in its life.
type State uint8

// States reported by Status.
const (
	StateConnecting State = iota // active target dialling
	StateBackoff                 // active target waiting to redial
	StateListening               // passive target's listener
	StateHandshake               // connected, HELLO not yet exchanged
	StateActive                  // handshake done, exchanging messages
	StateClosed                  // connection finished
)

var stateNames = [...]string{"connecting", "backoff", "listening", "handshake", "active", "closed"}

// String names the state as Status printouts show it.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", s)
}

// Status describes one listener, one active target or one connection.
// Passive targets give one entry for the listener and one per accepted
// peer; active targets one entry, describing the current connection when
// there is one.
type Status struct {
	Target     string
	Management bool
	State      State
	Role       ofpwire.ControllerRole
	LocalAddr  string
	RemoteAddr string
	// ConnectedSince is when the handshake completed (zero if it has not).
	ConnectedSince time.Time
	// MsgsIn and MsgsOut count messages received and sent. A connection's
	// entry counts its own; the target's entry (an active target's only
	// entry, a passive target's listener entry) adds those of the target's
	// connections that have closed, so the sum over a target's entries
	// never goes down.
	MsgsIn  uint64
	MsgsOut uint64
	// Reconnects counts connection attempts of an active target after the
	// first.
	Reconnects uint64
	// PacketInsRateLimited and PacketInsDropped (send queue full) count
	// packet-ins not delivered; AsyncDropped counts port-status and
	// flow-removed messages dropped on a full queue.
	PacketInsRateLimited uint64
	PacketInsDropped     uint64
	AsyncDropped         uint64
	// Demotions counts how often another controller becoming master made
	// this connection a slave.
	Demotions uint64
	// TLSHandshakeFailures counts TLS handshakes of an ssl: or pssl:
	// target that failed (a certificate refused either way, or a peer not
	// speaking TLS): on the target's entry, over its life.
	TLSHandshakeFailures uint64
	LastError            string
}

// Status returns a snapshot of every target and connection, sorted by target.
func (m *Manager) Status() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.targets
	if m.closed {
		all = m.retired
	}
	ts := make([]*target, 0, len(all))
	for _, t := range all {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].management != ts[j].management {
			return !ts[i].management
		}
		return ts[i].name < ts[j].name
	})
	var out []Status
	for _, t := range ts {
		base := Status{Target: t.name, Management: t.management, Reconnects: t.reconnects, LastError: t.lastErr,
			MsgsIn: t.closedIn, MsgsOut: t.closedOut, TLSHandshakeFailures: t.tlsFailures}
		if t.p.kind.passive() {
			s := base
			s.State = StateConnecting
			if t.ln != nil {
				s.State, s.LocalAddr = StateListening, t.ln.Addr().String()
			}
			out = append(out, s)
			cs := make([]*Conn, 0, len(t.conns))
			for c := range t.conns {
				cs = append(cs, c)
			}
			sort.Slice(cs, func(i, j int) bool { return cs[i].id < cs[j].id })
			for _, c := range cs {
				out = append(out, c.statusLocked(Status{Target: t.name, Management: t.management}))
			}
			continue
		}
		if t.cur != nil {
			out = append(out, t.cur.statusLocked(base))
			continue
		}
		base.State = t.state
		out = append(out, base)
	}
	return out
}

// SendPacketIn delivers pi to every connection whose role and async
// configuration accept its reason and whose packet-in budget allows it.
// It never blocks; it returns the number of connections it was queued on.
func (m *Manager) SendPacketIn(pi ofpwire.PacketIn) int {
	return m.broadcast(asyncPacketIn, uint32(pi.Reason), &pi)
}

// SendFlowRemoved delivers fr like SendPacketIn (without rate limit).
func (m *Manager) SendFlowRemoved(fr ofpwire.FlowRemoved) int {
	return m.broadcast(asyncFlowRemoved, uint32(fr.Reason), &fr)
}

// SendPortStatus delivers ps like SendPacketIn (without rate limit).
func (m *Manager) SendPortStatus(ps ofpwire.PortStatus) int {
	return m.broadcast(asyncPortStatus, uint32(ps.Reason), &ps)
}

func (m *Manager) broadcast(kind asyncKind, reason uint32, msg ofpwire.Message) int {
	conns := *m.active.Load()
	// By version, and packet-in format: every connection of a version
	// shares the bytes.
	var enc [2][8][]byte
	var pin2 ofpwire.Message
	n := 0
	for _, c := range conns {
		if !c.wants(kind, reason) {
			continue
		}
		m2 := msg
		f := 0
		if pi, ok := msg.(*ofpwire.PacketIn); ok && c.packetIn2.Load() {
			if pin2 == nil {
				x, err := pi.PacketIn2()
				if err != nil {
					m.logf("ofconn: cannot encode packet-in2: %v", err)
					return 0
				}
				pin2 = x
			}
			m2, f = pin2, 1
		}
		b := enc[f][c.Version()&7]
		if b == nil {
			var err error
			if b, err = ofpwire.EncodeIn(c.Version(), 0, m2); err != nil {
				m.logf("ofconn: cannot encode %v: %v", m2.MsgType(), err)
				return 0
			}
			enc[f][c.Version()&7] = b
		}
		if c.sendAsync(kind, b) {
			n++
		}
	}
	return n
}

// refuse closes a connection over t's limit, counted and logged (rate
// limited: a flood of them must not flood the log too).
func (m *Manager) refuse(t *target, nc net.Conn) {
	remote := nc.RemoteAddr()
	nc.Close()
	m.refused.Add(1)
	if n, ok := m.refusedLog.Allow(); ok {
		m.warnf("ofconn: %s: refused connection from %v: %d connections open, the limit (%d refused since the last report)",
			t.name, remote, m.maxConns.Load(), n)
	}
}

// target is one configured target with its listener or reconnect loop.
type target struct {
	m          *Manager
	name       string
	p          parsedTarget
	management bool
	ctx        context.Context
	cancel     context.CancelFunc

	// Guarded by m.mu.
	ln         net.Listener
	conns      map[*Conn]struct{}
	cur        *Conn // active targets: the current connection
	state      State
	reconnects uint64
	// closedIn and closedOut are the messages of the target's connections
	// that have closed, so that its counts only grow (Status).
	closedIn, closedOut uint64
	tlsFailures         uint64
	lastErr             string
}

// stopLocked ends the target: its goroutine sees the cancelled context,
// the listener stops accepting and every connection closes.
func (t *target) stopLocked() {
	t.cancel()
	if t.ln != nil {
		t.ln.Close()
	}
	for c := range t.conns {
		c.close("target removed")
	}
}

func (t *target) setErr(err error) {
	var he *HandshakeError
	t.m.mu.Lock()
	t.lastErr = err.Error()
	if errors.As(err, &he) {
		t.tlsFailures++
	}
	t.m.mu.Unlock()
	t.logf("ofconn: %s: %v", t.name, err)
}

// sleep waits d or until the target stops; false if it stopped.
func (t *target) sleep(d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-t.ctx.Done():
		return false
	}
}

func (t *target) runActive() {
	defer t.m.wg.Done()
	m := t.m
	backoff := m.cfg.MinBackoff
	for attempt := 0; ; attempt++ {
		m.mu.Lock()
		if attempt > 0 {
			t.reconnects++
		}
		t.state = StateConnecting
		m.mu.Unlock()
		ok := false
		nc, err := m.dial(t.ctx, t.p)
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			t.setErr(err)
		} else {
			c := newConn(m, t, nc)
			if !m.register(t, c) {
				nc.Close()
				return
			}
			m.mu.Lock()
			t.cur = c
			m.mu.Unlock()
			ok = c.serve()
			m.mu.Lock()
			t.cur = nil
			if r := c.CloseReason(); r != "" {
				t.lastErr = r
			}
			m.mu.Unlock()
		}
		if ok {
			backoff = m.cfg.MinBackoff
		}
		m.mu.Lock()
		t.state = StateBackoff
		m.mu.Unlock()
		if !t.sleep(backoff) {
			return
		}
		if !ok {
			m.mu.Lock()
			backoff = min(2*backoff, m.maxBackoffLocked(t))
			m.mu.Unlock()
		}
	}
}

func (t *target) runPassive() {
	defer t.m.wg.Done()
	m := t.m
	backoff := m.cfg.MinBackoff
	for {
		ln, err := m.listen(t.p)
		if err != nil {
			t.setErr(err)
			if !t.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, m.cfg.MaxBackoff)
			continue
		}
		m.mu.Lock()
		if t.ctx.Err() != nil {
			m.mu.Unlock()
			ln.Close()
			return
		}
		t.ln = ln
		m.mu.Unlock()
		if host, port, _ := net.SplitHostPort(t.p.addr); t.p.kind == kindPTCP && host == "" {
			// Open vSwitch's meaning, kept: every address. But plain
			// TCP has no authentication, so whoever reaches the port
			// controls the switch; say so every time it starts.
			m.warnf("ofconn: %s: listening on every address without authentication: anyone who can reach port %s can change the flows; use ptcp:%s:127.0.0.1 for local controllers or pssl: for remote ones",
				t.name, port, port)
		}
		backoff = m.cfg.MinBackoff
		ab := acceptloop.Backoff{Name: "ofconn: " + t.name, Logf: m.warnf}
		for {
			nc, err := ln.Accept()
			if err != nil {
				if t.ctx.Err() != nil {
					return
				}
				// Out of descriptors and the like: keep the listener
				// (binding again would need a descriptor too) and retry.
				if ab.Wait(err, t.ctx.Done()) {
					continue
				}
				t.setErr(err)
				m.mu.Lock()
				t.ln = nil
				m.mu.Unlock()
				ln.Close()
				if !t.sleep(backoff) {
					return
				}
				break
			}
			ab.Success()
			// Counted against the listener's cap before the TLS
			// handshake, so that a flood of handshakes is refused too.
			c := newConn(m, t, nc)
			ok, full := m.registerPassive(t, c)
			if full {
				m.refuse(t, nc)
				continue
			}
			if !ok {
				nc.Close()
				return
			}
			// The TLS handshake runs on the peer's goroutine: a slow or
			// silent peer must not hold up the next accept.
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				if err := serverHandshake(t.ctx, nc); err != nil {
					m.unregister(c)
					nc.Close()
					if t.ctx.Err() == nil {
						t.setErr(err)
					}
					return
				}
				c.serve()
			}()
		}
	}
}

// versions are the OpenFlow versions this manager's connections offer.
func (m *Manager) versions() []uint8 {
	if v := m.allowed.Load(); v != nil && len(*v) > 0 {
		return *v
	}
	if len(m.cfg.Versions) == 0 {
		return ofpwire.Versions
	}
	return m.cfg.Versions
}

// SetVersions changes the OpenFlow versions connections may negotiate
// (nil: all), as a change of Bridge.protocols does: new connections offer
// the new set, and open connections whose version left it are closed, so
// that their peers reconnect and negotiate again.
func (m *Manager) SetVersions(vs []uint8) {
	vs = slices.Clone(vs)
	m.allowed.Store(&vs)
	m.mu.Lock()
	var gone []*Conn
	for c := range m.conns {
		if c.Version() != 0 && !slices.Contains(m.versions(), c.Version()) {
			gone = append(gone, c)
		}
	}
	m.mu.Unlock()
	for _, c := range gone {
		c.close("OpenFlow version no longer allowed by the bridge's protocols")
	}
}

// maxVersion is the highest of versions(), the version of our HELLO.
func (m *Manager) maxVersion() uint8 {
	v := uint8(0)
	for _, x := range m.versions() {
		v = max(v, x)
	}
	return v
}

// versionNames lists versions() for messages ("OpenFlow13, OpenFlow14").
func (m *Manager) versionNames() string {
	names := make([]string, 0, len(m.versions()))
	for _, v := range m.versions() {
		names = append(names, ofpwire.VersionName(v))
	}
	return strings.Join(names, ", ")
}

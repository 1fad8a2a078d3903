// Package ofproto is the OpenFlow agent of one bridge: it joins the OpenFlow
// connections (ofconn), the flow tables (pipeline) and the translation
// (xlate) to a datapath. The Bridge answers the requests ofconn passes on,
// translates the datapath's upcalls through its tables and relays the
// packets Controller actions queue as PACKET_INs.
//
// Port numbers: OpenFlow port N is datapath port N. The pipeline, xlate and
// the datapath all use one numbering, so no translation table sits on the
// upcall path; BridgeConfig.Ports exists to make that contract explicit and
// NewBridge rejects any entry that is not the identity.
//
// Ports: AddPort and RemovePort change the datapath's ports at run time and
// announce them with PORT_STATUS (ADD, DELETE); link changes seen by the
// once-a-second housekeeping are announced as MODIFY, and ports whose
// interface vanished as DELETE (PortGone makes that immediate). PORT_MOD
// sets the OFPPC_* bits of SupportedPortConfig; translation honours them
// (xlate.Options.PortConfig, FloodPorts) and every change invalidates the
// datapath's megaflows. NORMAL's ports follow the datapath's, each an
// untagged access port of VLAN 0 unless SetNormalPort says otherwise.
//
// Fail modes, as in Open vSwitch. A standalone bridge (the default) with
// no controller target holds a visible flow "priority=0 actions=NORMAL" in
// table 0, installed when the bridge is created, and again whenever its
// tables are flushed for a fail-mode change or for losing its last
// controller target (gaining the first flushes them too): it is a
// learning switch that dump-flows shows and del-flows can remove. A
// standalone bridge with controller targets none of which has been
// connected for the fail-open delay (BridgeConfig.FailOpenDelay, by
// default three probe intervals) fails open: until a controller connects,
// every packet is translated through a hidden table holding only that
// NORMAL flow instead of the bridge's tables, which stay untouched (like
// Open vSwitch's fail-open rule, which outranks every OpenFlow priority).
// A secure bridge never does either: without controllers it starts with
// empty tables, and table misses do what its flows say. Unlike Open
// vSwitch, a passive target (ptcp:) counts as a controller, as in ofconn.
//
// Counters: flow statistics report the entries' Packets and Bytes, which
// grow when the datapath pushes megaflow statistics into the entries
// (Datapath.PushStats, at housekeeping and before statistics replies).
// Group reference counts are computed from the tables when asked (flows
// and groups forwarding to the group directly). Group and bucket packet
// and byte counters grow the same way as the entries': translation lists
// the groups and buckets a megaflow runs through among its refs.
//
// Groups: GROUP_MOD edits the group table that translation runs group
// actions through; deleting a group deletes the flows forwarding to it, and
// every group change invalidates the datapath's megaflows, as does a port
// link-state change (seen by the once-a-second housekeeping, so failover
// lags a link going down by up to a second).
//
// Meters (meters.go): METER_MOD edits the meter table and programs the
// datapath, which enforces the meters — translation turns a flow's meter
// instruction into a datapath meter action ahead of the flow's actions —
// and counts their traffic for the meter statistics. A flow-mod naming a
// meter that does not exist is refused (METER_MOD_FAILED/UNKNOWN_METER);
// deleting a meter deletes the flows that use it.
//
// Persistence (snapshot.go): FlowMods/GroupDescs/MeterMods and their
// Restore counterparts snapshot and restore the tables as messages (the
// daemon saves them as ovs-ofctl lines);
// BridgeConfig.OnTableMod reports every OpenFlow change as it is made (for
// a journal) and TablesGeneration moves with any change, including the
// bridge's own (timeouts, fail-mode flushes). Megaflows unused for MaxIdle are removed
// from the datapath by the housekeeping.
package ofproto

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// DefaultMaxIdle is how long an unused datapath megaflow lives (OVS's
// default max-idle).
const DefaultMaxIdle = 10 * time.Second

// NumTables is what FEATURES_REPLY announces: the pipeline's table count.
const NumTables = pipeline.NumTables

// housekeepingInterval is how often timeouts are expired and the port list
// used by upcalls is refreshed.
const housekeepingInterval = time.Second

// BridgeConfig configures a Bridge.
type BridgeConfig struct {
	// DatapathID is the 64-bit id FEATURES_REPLY announces.
	DatapathID uint64
	// Targets are the controller targets (tcp:, ssl:, unix:, ptcp:, ...)
	// and ManagementTargets the local ones (punix: for ovs-ofctl), handed
	// to the bridge's ofconn.Manager.
	// Change the controllers later with SetControllers, which the fail
	// mode follows.
	Targets, ManagementTargets []string
	// Ports maps OpenFlow port numbers to datapath port numbers. Only the
	// identity is supported (see the package documentation); nil means
	// every datapath port under its own number.
	Ports map[uint32]uint32
	// Upcall, if set, is bound to the new bridge, so that a datapath
	// created with it as Config.Upcall starts translating through the
	// bridge's tables.
	Upcall *UpcallAdapter
	// Conn overrides the ofconn.Manager settings; its Handler is replaced
	// by the bridge.
	Conn ofconn.Config
	// Normal is the switch output to OFPP_NORMAL consults (nil: one with
	// the default MAC table options). The bridge owns its port
	// configuration: it calls SetPorts whenever ports come and go or
	// SetNormalPort and NO_FLOOD change them.
	Normal *normal.Switch
	// FailMode is FailStandalone (also "") or FailSecure; see the package
	// documentation.
	FailMode string
	// FailOpenDelay is how long a standalone bridge's controllers must
	// all have been disconnected before it fails open; 0 means three
	// times Conn.ProbeInterval (three times the default interval when
	// probing is disabled).
	FailOpenDelay time.Duration
	// MaxIdle is how long a datapath megaflow may go unused before the
	// housekeeping removes it (OVS's other_config:max-idle); 0 means
	// DefaultMaxIdle, negative never.
	MaxIdle time.Duration
	// OnTableMod, if set, is called with every FLOW_MOD, GROUP_MOD and
	// METER_MOD a connection sent, on that connection's goroutine (so
	// before any later BARRIER_REPLY), with apply, which makes the change
	// and returns what the connection is to be answered. It returns the
	// answer: a journal writes the change ahead, applies it, and takes the
	// record back if the change failed, or refuses a change it cannot
	// record without applying it. Changes the bridge makes itself
	// (timeouts, fail-mode flushes, restores) are not reported;
	// TablesGeneration covers those.
	OnTableMod func(msg ofpwire.Message, apply func() error) error
	// OnBundleCommit, if set, is called with each bundle commit's
	// messages and apply, which makes the commit, all or nothing, and
	// returns its error; like OnTableMod, a journal records the commit
	// ahead and takes the record back if apply fails. wire, when not nil,
	// holds the messages as the peer sent them (ofconn.WireBundleCommitter),
	// which a journal can record as they are.
	OnBundleCommit func(msgs []ofpwire.Message, wire [][]byte, apply func() error) error
}

// UpcallAdapter breaks the construction cycle between a datapath (which
// needs its Upcaller at New) and a Bridge (which needs the datapath): create
// the adapter, pass it as datapath.Config.Upcall, then pass it to NewBridge
// in BridgeConfig.Upcall. Until a bridge is bound every upcall fails with
// datapath.ErrNoUpcaller (the packet is dropped).
type UpcallAdapter struct {
	bridge atomic.Pointer[Bridge]
}

// Upcall implements datapath.Upcaller by forwarding to the bound bridge.
func (u *UpcallAdapter) Upcall(key *flow.Key, res *datapath.UpcallResult) error {
	b := u.bridge.Load()
	if b == nil {
		return datapath.ErrNoUpcaller
	}
	return b.Upcall(key, res)
}

// Bridge is one OpenFlow bridge over a datapath.
type Bridge struct {
	name string
	dp   *datapath.Datapath
	cfg  BridgeConfig
	pipe *pipeline.Pipeline
	mgr  *ofconn.Manager
	// mon reports table changes to flow monitors (monitor.go).
	mon flowMonitors
	// modMu is held shared by every table change and exclusively by a
	// bundle commit, so that a commit's rollback never undoes a change
	// another connection made meanwhile.
	modMu sync.RWMutex
	// groups and meters are the bridge's group and meter tables; the
	// datapath enforces the meters (meters.go). meterMu keeps meter-mods
	// in one order for the table and the datapath.
	groups  *pipeline.GroupTable
	meters  *pipeline.MeterTable
	meterMu sync.Mutex
	// learnFailures counts learned flows the tables refused.
	learnFailures atomic.Uint64
	// stalePacketIns counts packet-ins dropped because their context
	// (registers, userdata) was retired before they were relayed.
	stalePacketIns atomic.Uint64
	// maxIdle is cfg.MaxIdle, changed in place by SetMaxIdle.
	maxIdle atomic.Int64
	// failPipe is the hidden table translations use while failed open.
	failPipe *pipeline.Pipeline
	// recirc holds the walks frozen for recirculation (after a pop MPLS
	// or PBB); tablesChanged retires the ids no megaflow can still use.
	recirc *xlate.RecircTable
	// pins holds the registers and userdata of packet-ins (packetio.go);
	// tablesChanged retires them with the recirc_ids.
	pins *xlate.PacketInTable
	// pinNonce tells this bridge's continuations from others' (random).
	pinNonce uint64

	// portMu serialises port changes; recs and settings are guarded by
	// it, view is what upcalls read instead.
	portMu sync.Mutex
	recs   map[uint32]*portRec
	// tlv is the TLV table (tlv.go), guarded by portMu.
	tlv      []ofpwire.TLVMap
	settings map[uint32]portSettings
	view     atomic.Pointer[portView]
	// batching counts Batch calls under way; portsDirty says a port
	// change inside one still has to reach NORMAL and the view.
	batching   int
	portsDirty bool
	// portLiveFn is portLive as a func value made once.
	portLiveFn func(uint32) bool

	// failMu guards the fail-mode state below; failOpen is read by
	// upcalls without it.
	failMu         sync.Mutex
	failMode       string
	hasControllers bool
	connected      int
	failTimer      *time.Timer
	failSeq        uint64
	closed         bool
	failOpen       atomic.Bool

	// poMu serialises packet-outs, which share one scratch pipeline.
	poMu sync.Mutex

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// NewBridge creates the bridge name over dp, starts its OpenFlow
// connections and its packet-in and timeout goroutines.
func NewBridge(name string, dp *datapath.Datapath, cfg BridgeConfig) (*Bridge, error) {
	for of, d := range cfg.Ports {
		if of != d {
			return nil, fmt.Errorf("ofproto: OpenFlow port %d mapped to datapath port %d: only identical numbers are supported", of, d)
		}
	}
	mode, err := checkFailMode(cfg.FailMode)
	if err != nil {
		return nil, err
	}
	b := &Bridge{name: name, dp: dp, cfg: cfg, pipe: pipeline.New(0), stop: make(chan struct{}),
		groups: pipeline.NewGroupTable(), meters: newMeterTable(), failPipe: newFailOpenPipeline(),
		recirc: xlate.NewRecircTable(), pins: xlate.NewPacketInTable(),
		recs: make(map[uint32]*portRec), settings: make(map[uint32]portSettings),
		failMode: mode}
	b.maxIdle.Store(int64(cfg.MaxIdle))
	b.portLiveFn = b.portLive
	b.pinNonce = rand.Uint64()
	b.pipe.OnChange = b.tablesChanged
	b.mon.b = b
	b.pipe.SetWatcher(&b.mon)
	if b.cfg.Normal == nil {
		b.cfg.Normal = normal.New(normal.Options{})
	}
	b.portMu.Lock()
	for _, p := range dp.Ports() {
		b.adoptLocked(p) // the starting state, so the first tick sees no change
	}
	b.syncNormalLocked()
	b.publishLocked()
	b.portMu.Unlock()

	cc := cfg.Conn
	cc.Handler = b
	cc.OnControllers = func(n int) {
		b.onControllers(n)
		if cfg.Conn.OnControllers != nil {
			cfg.Conn.OnControllers(n)
		}
	}
	cc.OnSwitchConfig = func(sc ofconn.SwitchConfig) {
		b.invalidate() // fragment handling is part of every translation
		if cfg.Conn.OnSwitchConfig != nil {
			cfg.Conn.OnSwitchConfig(sc)
		}
	}
	b.mgr = ofconn.New(cc)
	b.failMu.Lock()
	err = b.mgr.SetTargets(cfg.Targets)
	b.hasControllers = b.hasControllersLocked()
	b.installNormalFlowLocked()
	b.updateFailOpenLocked()
	b.failMu.Unlock()
	if err == nil {
		err = b.mgr.SetManagementTargets(cfg.ManagementTargets)
	}
	if err != nil {
		b.failMu.Lock()
		b.closed = true
		b.stopFailTimerLocked()
		b.failMu.Unlock()
		b.mgr.Close()
		return nil, err
	}
	if cfg.Upcall != nil {
		cfg.Upcall.bridge.Store(b)
	}
	b.wg.Add(2)
	go b.packetIns()
	go b.housekeeping()
	return b, nil
}

// Close stops the bridge's goroutines and connections and unbinds its
// upcall adapter. It does not close the datapath.
func (b *Bridge) Close() {
	b.once.Do(func() {
		if b.cfg.Upcall != nil {
			b.cfg.Upcall.bridge.CompareAndSwap(b, nil)
		}
		close(b.stop)
		b.wg.Wait()
		b.mgr.Close()
		b.failMu.Lock()
		b.closed = true
		b.stopFailTimerLocked()
		b.failMu.Unlock()
	})
}

// Name is the bridge's name (DESC's dp_desc).
func (b *Bridge) Name() string { return b.name }

// Pipeline is the bridge's flow tables.
func (b *Bridge) Pipeline() *pipeline.Pipeline { return b.pipe }

// Normal is the switch behind output to OFPP_NORMAL.
func (b *Bridge) Normal() *normal.Switch { return b.cfg.Normal }

// SetMaxIdle changes BridgeConfig.MaxIdle in place: the next housekeeping
// pass removes the megaflows unused for d.
func (b *Bridge) SetMaxIdle(d time.Duration) { b.maxIdle.Store(int64(d)) }

// MaxIdle is the max-idle in force.
func (b *Bridge) MaxIdle() time.Duration { return time.Duration(b.maxIdle.Load()) }

// FDB lists NORMAL's MAC table (port, VLAN, MAC, age) for fdb-show.
func (b *Bridge) FDB() []normal.Entry { return b.cfg.Normal.Entries(time.Now()) }

// Groups is the bridge's group table.
func (b *Bridge) Groups() *pipeline.GroupTable { return b.groups }

// Meters is the bridge's meter table.
func (b *Bridge) Meters() *pipeline.MeterTable { return b.meters }

// xlateOptions is the bridge state a translation at time now needs.
// dp.Ports reads a lock-free snapshot and the port view is an atomic
// pointer, so this is safe in an upcall; the datapath invalidates its
// flows when the port set changes, the bridge when port config does.
func (b *Bridge) xlateOptions(now time.Time) xlate.Options {
	v := b.ports()
	return xlate.Options{Ports: v.all, FloodPorts: v.flood, LocalPort: v.local, PortConfig: v.configOf,
		Normal: b.cfg.Normal, Now: now, Groups: b.groups, PortLive: b.portLiveFn, Recirc: b.recirc, PacketIns: b.pins}
}

// dropFragments reports whether SET_CONFIG asked for OFPC_FRAG_DROP
// (OpenFlow 1.3.5 §7.3.2): received IP fragments are dropped.
func (b *Bridge) dropFragments() bool {
	return b.mgr != nil && b.mgr.SwitchConfig().Flags&uint16(ofpwire.ConfigFlagFragMask) == uint16(ofpwire.ConfigFlagFragDrop)
}

// activePipeline is the table translations walk: the bridge's, or the
// hidden NORMAL table while failed open.
func (b *Bridge) activePipeline() *pipeline.Pipeline {
	if b.failOpen.Load() {
		return b.failPipe
	}
	return b.pipe
}

// portLive reports whether port no exists, its link is up and it is not
// administratively down, for fast-failover and select groups. housekeeping
// invalidates the megaflows when any port's link state changes, PORT_MOD
// when its config does.
func (b *Bridge) portLive(no uint32) bool {
	p := b.dp.Port(no)
	return p != nil && p.Dev.LinkUp() && b.ports().config[no]&ofpwire.PortConfigDown == 0
}

// invalidate is the one way ofproto tells the datapath that something a
// translation reads has changed (the tables, NORMAL's MAC table, the port
// view or a port's config, fail-open, a meter): every installed megaflow
// was decided under the old state, so the PMDs drop their caches at their
// next iteration and upcall again. Callers name no cause, because the
// datapath's answer is the same for all of them.
func (b *Bridge) invalidate() { b.dp.InvalidateFlows() }

// Manager is the bridge's OpenFlow connection manager.
func (b *Bridge) Manager() *ofconn.Manager { return b.mgr }

// Upcall implements datapath.Upcaller: the key is translated through the
// bridge's tables. When NORMAL learned or moved a MAC in the process, the
// megaflows decided under the old MAC table are invalidated.
func (b *Bridge) Upcall(key *flow.Key, res *datapath.UpcallResult) error {
	gen := b.cfg.Normal.Generation()
	now := time.Now()
	opts := b.xlateOptions(now)
	opts.DropFragments = b.dropFragments()
	sc := upcallScratchOf(res)
	sc.learned = sc.learned[:0]
	opts.Learn = sc.learn
	err := xlate.Translate(b.activePipeline(), key, res, opts)
	if err == nil && len(sc.learned) > 0 && !b.applyLearned(sc.learned, now, &res.Refs) {
		res.NoInstall = true // learn again on the next packet
	}
	clear(sc.learned) // the flow-mods went to the tables; hold none here
	if b.cfg.Normal.Generation() != gen {
		b.invalidate()
	}
	return err
}

// upcallScratch is what an upcall reuses from the last one on the same
// PMD (datapath.UpcallResult.Scratch): the learned flows' slice and the
// method value the translation appends to it, which a closure per upcall
// allocated.
type upcallScratch struct {
	learned []learnedFlow
	learn   func(*ofpwire.FlowMod, uint32)
}

func upcallScratchOf(res *datapath.UpcallResult) *upcallScratch {
	if sc, ok := res.Scratch.(*upcallScratch); ok {
		return sc
	}
	sc := &upcallScratch{}
	sc.learn = func(fm *ofpwire.FlowMod, limit uint32) { sc.learned = append(sc.learned, learnedFlow{fm, limit}) }
	res.Scratch = sc
	return sc
}

// learnedFlow is a flow a learn action built and the action's limit.
type learnedFlow struct {
	fm    *ofpwire.FlowMod
	limit uint32
}

// applyLearned adds the flows a translation's learn actions built
// (pipeline.Learn: a new flow changes the tables, which invalidates the
// megaflows; one already there has its timeouts restarted) and adds to
// refs what keeps them alive while the megaflow being installed carries
// traffic. A flow the tables refuse (no room, bad prerequisites) is
// counted in LearnFailures. It returns false, applying nothing, while a
// bundle commit holds the tables, since the commit's rollback could undo
// the learned flow: the caller then installs no megaflow, so that a later
// packet learns again. It returns false too when a learn limit the
// translation found room under was filled meanwhile by another
// translation: the megaflow would say the flow was learned, so none is
// installed, and the next packet is translated against the full table.
func (b *Bridge) applyLearned(mods []learnedFlow, now time.Time, refs *[]datapath.StatsSink) bool {
	if !b.modMu.TryRLock() {
		return false
	}
	defer b.modMu.RUnlock()
	ok := true
	for _, l := range mods {
		e, _, err := b.pipe.LearnLimit(l.fm, l.limit, now)
		if errors.Is(err, pipeline.ErrLearnLimit) {
			ok = false
			continue
		}
		if err != nil {
			b.learnFailures.Add(1)
			continue
		}
		if refs != nil {
			*refs = append(*refs, e.LearnRefresher())
		}
	}
	return ok
}

// LearnFailures counts the flows learn actions built that the tables
// refused.
func (b *Bridge) LearnFailures() uint64 { return b.learnFailures.Load() }

// StalePacketIns counts the packet-ins dropped because their context
// (registers, userdata) was retired before they were relayed.
func (b *Bridge) StalePacketIns() uint64 { return b.stalePacketIns.Load() }

func ofpErr(t, c uint16) *ofpwire.OFPError { return &ofpwire.OFPError{Type: t, Code: c} }

// Handle implements ofconn.Handler.
func (b *Bridge) Handle(c *ofconn.Conn, xid uint32, msg ofpwire.Message) error {
	switch m := msg.(type) {
	case *ofpwire.FlowMod, *ofpwire.GroupMod, *ofpwire.MeterMod:
		b.modMu.RLock()
		defer b.modMu.RUnlock()
		if fm, ok := m.(*ofpwire.FlowMod); ok && b.mon.Watching() {
			defer b.mon.setCause(fm, c, xid)()
		}
		if b.cfg.OnTableMod != nil {
			return b.cfg.OnTableMod(m, func() error { return b.Apply(m) })
		}
		return b.Apply(m)
	case *ofpwire.FlowMonitorRequest:
		return b.flowMonitorRequest(c, xid, m)
	case *ofpwire.FlowMonitorCancel:
		return c.CancelMonitor(m.ID)
	case *ofpwire.PacketOut:
		return b.packetOut(m)
	case *ofpwire.Resume:
		return b.resume(m)
	case *ofpwire.CTFlushZone:
		b.dp.Conntrack().Flush(&m.Zone)
		return nil
	case *ofpwire.CTFlush:
		b.dp.Conntrack().FlushMatch(m.Zone, ctMatch(m))
		return nil
	case *ofpwire.TLVTableMod:
		return b.tlvMod(m)
	case *ofpwire.TLVTableRequest:
		return c.Send(xid, b.tlvReply())
	case *ofpwire.MultipartRequest:
		return b.multipart(c, xid, m)
	case *ofpwire.PortMod:
		return b.portMod(m)
	case *ofpwire.TableMod:
		return tableMod(m)
	case *ofpwire.QueueGetConfigRequest:
		if err := b.queuePort(m.Port); err != nil {
			return err
		}
		return c.Send(xid, &ofpwire.QueueGetConfigReply{Port: m.Port})
	}
	return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadType)
}

// housekeeping expires timed-out entries and aged MACs, pushes datapath
// statistics and follows the ports' link states (checkPorts).
func (b *Bridge) housekeeping() {
	defer b.wg.Done()
	t := time.NewTicker(housekeepingInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			// Traffic first, so that busy entries do not idle out.
			b.dp.PushStats(now)
			b.sendRemoved(b.pipe.Expire(now))
			if idle := time.Duration(b.maxIdle.Load()); idle >= 0 {
				b.dp.ExpireIdleFlows(cmp.Or(idle, DefaultMaxIdle))
			}
			b.dp.SweepConntrack()
			aged := b.cfg.Normal.Expire(now) > 0
			if b.checkPorts() || aged {
				b.invalidate()
			}
			b.syncControllers()
		}
	}
}

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
// a journal) and OnFlowTableChange any change, including the bridge's own
// (timeouts, fail-mode flushes). Megaflows unused for MaxIdle are removed
// from the datapath by the housekeeping.
package ofproto

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// DefaultMaxIdle is how long an unused datapath megaflow lives (OVS's
// default max-idle).
const DefaultMaxIdle = 10 * time.Second

// NumTables is what FEATURES_REPLY announces: the pipeline's table count.
const NumTables = pipeline.NumTables

// flowStatsPerReply bounds the flow statistics in one MULTIPART_REPLY so that
// a reply stays well under the 64 KiB message limit (an entry with a large
// match and a few actions encodes to a few hundred bytes).
const flowStatsPerReply = 64

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
	// OnFlowTableChange covers those.
	OnTableMod func(msg ofpwire.Message, apply func() error) error
	// OnFlowTableChange, if set, is called after the flow or group tables
	// changed (flow-mods, expiry, group-mods, flushes, RestoreFlowMods), from
	// a goroutine of the bridge, never concurrently; changes made during
	// a call bring one more call, so bursts cost few calls. Traffic (flow
	// counters) never calls it. It must not call Close.
	OnFlowTableChange func()
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
	// groups and meters are the bridge's group and meter tables; the
	// datapath enforces the meters (meters.go). meterMu keeps meter-mods
	// in one order for the table and the datapath.
	groups  *pipeline.GroupTable
	meters  *pipeline.MeterTable
	meterMu sync.Mutex
	// failPipe is the hidden table translations use while failed open.
	failPipe *pipeline.Pipeline
	// recirc holds the walks frozen for recirculation (after a pop MPLS
	// or PBB); tablesChanged retires the ids no megaflow can still use.
	recirc *xlate.RecircTable

	// portMu serialises port changes; recs and settings are guarded by
	// it, view is what upcalls read instead.
	portMu   sync.Mutex
	recs     map[uint32]*portRec
	settings map[uint32]portSettings
	view     atomic.Pointer[portView]
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

	tablesDirty chan struct{}

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
		recirc: xlate.NewRecircTable(),
		recs:   make(map[uint32]*portRec), settings: make(map[uint32]portSettings),
		failMode: mode, tablesDirty: make(chan struct{}, 1)}
	b.portLiveFn = b.portLive
	b.pipe.OnChange = b.tablesChanged
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
	if cfg.OnFlowTableChange != nil {
		b.wg.Add(1)
		go b.tableNotifier()
	}
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
		Normal: b.cfg.Normal, Now: now, Groups: b.groups, PortLive: b.portLiveFn, Recirc: b.recirc}
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

// Manager is the bridge's OpenFlow connection manager.
func (b *Bridge) Manager() *ofconn.Manager { return b.mgr }

// Upcall implements datapath.Upcaller: the key is translated through the
// bridge's tables. When NORMAL learned or moved a MAC in the process, the
// megaflows decided under the old MAC table are invalidated.
func (b *Bridge) Upcall(key *flow.Key, res *datapath.UpcallResult) error {
	gen := b.cfg.Normal.Generation()
	err := xlate.Translate(b.activePipeline(), key, res, b.xlateOptions(time.Now()))
	if b.cfg.Normal.Generation() != gen {
		b.dp.InvalidateFlows()
	}
	return err
}

// Features implements ofconn.Handler.
func (b *Bridge) Features() ofpwire.FeaturesReply {
	return ofpwire.FeaturesReply{
		DatapathID: b.cfg.DatapathID,
		NumTables:  NumTables,
		Capabilities: ofpwire.CapabilityFlowStats | ofpwire.CapabilityTableStats | ofpwire.CapabilityPortStats |
			ofpwire.CapabilityGroupStats | ofpwire.CapabilityQueueStats,
	}
}

func ofpErr(t, c uint16) *ofpwire.OFPError { return &ofpwire.OFPError{Type: t, Code: c} }

// Handle implements ofconn.Handler.
func (b *Bridge) Handle(c *ofconn.Conn, xid uint32, msg ofpwire.Message) error {
	switch m := msg.(type) {
	case *ofpwire.FlowMod, *ofpwire.GroupMod, *ofpwire.MeterMod:
		if b.cfg.OnTableMod != nil {
			return b.cfg.OnTableMod(m, func() error { return b.Apply(m) })
		}
		return b.Apply(m)
	case *ofpwire.PacketOut:
		return b.packetOut(m)
	case *ofpwire.MultipartRequest:
		return b.multipart(c, xid, m)
	case *ofpwire.PortMod:
		return b.portMod(m)
	case *ofpwire.QueueGetConfigRequest:
		if err := b.queuePort(m.Port); err != nil {
			return err
		}
		return c.Send(xid, &ofpwire.QueueGetConfigReply{Port: m.Port})
	}
	return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadType)
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
	if gm.Command == ofpwire.GroupAdd || gm.Command == ofpwire.GroupModify {
		for i := range gm.Buckets {
			if err := xlate.CheckActions(gm.Buckets[i].Actions, false); err != nil {
				return err
			}
		}
	}
	now := time.Now()
	if gm.Command == ofpwire.GroupDelete {
		b.dp.PushStats(now) // the FLOW_REMOVED of its flows carry their last packets
	}
	deleted, err := b.groups.ApplyGroupMod(gm, now)
	if err != nil {
		return err
	}
	for _, id := range deleted {
		removed, err := b.pipe.Apply(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll),
			BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: id}, now)
		if err != nil {
			return err
		}
		for _, e := range removed {
			e.RemovedReason = ofpwire.FlowReasonGroupDelete
		}
		b.sendRemoved(removed)
	}
	b.tablesChanged() // a group change is no pipeline change: the pipeline's OnChange may not have run
	return nil
}

// checkGroupRefs refuses a flow-mod whose actions forward to a group that
// does not exist (OFPBAC_BAD_OUT_GROUP).
func (b *Bridge) checkGroupRefs(fm *ofpwire.FlowMod) error {
	if fm.Command != ofpwire.FlowAdd && fm.Command != ofpwire.FlowModify && fm.Command != ofpwire.FlowModifyStrict {
		return nil
	}
	for _, in := range fm.Instructions {
		var acts []ofpwire.Action
		switch in := in.(type) {
		case *ofpwire.InstrApplyActions:
			acts = in.Actions
		case *ofpwire.InstrWriteActions:
			acts = in.Actions
		}
		for _, a := range acts {
			if ga, ok := a.(*ofpwire.ActionGroup); ok && b.groups.Get(ga.Group) == nil {
				return ofpErr(ofpwire.ETBadAction, ofpwire.BACBadOutGroup)
			}
		}
	}
	return nil
}

func (b *Bridge) flowMod(fm *ofpwire.FlowMod) error {
	if fm.Command == ofpwire.FlowAdd || fm.Command == ofpwire.FlowModify || fm.Command == ofpwire.FlowModifyStrict {
		if err := xlate.CheckInstructions(fm.Instructions); err != nil {
			return err
		}
		if err := ofpwire.CheckSetFieldPrerequisites(fm.Match, fm.Instructions); err != nil {
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
	removed, err := b.pipe.Apply(fm, time.Now())
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
		b.mgr.SendFlowRemoved(ofpwire.FlowRemoved{
			Cookie:       e.Cookie,
			Priority:     e.Priority,
			Reason:       e.RemovedReason,
			TableID:      e.TableID,
			DurationSec:  uint32(d / time.Second),
			DurationNSec: uint32(d % time.Second),
			IdleTimeout:  e.IdleTimeout,
			HardTimeout:  e.HardTimeout,
			PacketCount:  e.Packets.Load(),
			ByteCount:    e.Bytes.Load(),
			Match:        ofmatch.ToOXM(&e.Match),
		})
	}
}

// packetOut runs the message's actions on its packet with the translation's
// full semantics: the actions become the only entry of a scratch pipeline,
// the packet's key is translated through it, and the datapath executes the
// result. in_port OFPP_CONTROLLER (or any reserved port) stands for "no
// port" in the datapath.
func (b *Bridge) packetOut(po *ofpwire.PacketOut) error {
	if po.BufferID != ofpwire.NoBuffer {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
	}
	inPort := uint32(po.InPort)
	if inPort > uint32(ofpwire.PortMax) && inPort != datapath.LocalPort {
		inPort = 0
	}
	if len(po.Data) < 14 {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPacket)
	}
	if err := xlate.CheckActions(po.Actions, true); err != nil {
		return err
	}
	fm := &ofpwire.FlowMod{
		Command:      ofpwire.FlowAdd,
		BufferID:     ofpwire.NoBuffer,
		OutPort:      ofpwire.PortAny,
		OutGroup:     ofpwire.GroupAny,
		Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: po.Actions}},
	}
	if err := b.checkGroupRefs(fm); err != nil {
		return err
	}
	b.poMu.Lock()
	defer b.poMu.Unlock()
	scratch := pipeline.New(0)
	if _, err := scratch.Apply(fm, time.Now()); err != nil {
		return err
	}
	var key flow.Key
	var off flow.Offsets
	flow.Extract(po.Data, inPort, &key, &off)
	var res datapath.UpcallResult
	opts := b.xlateOptions(time.Now())
	opts.Table = b.activePipeline() // output to OFPP_TABLE runs the bridge's tables
	if err := xlate.Translate(scratch, &key, &res, opts); err != nil {
		if errors.Is(err, xlate.ErrUnsupported) {
			return ofpErr(ofpwire.ETBadAction, ofpwire.BACBadType)
		}
		if errors.Is(err, xlate.ErrTooManyActions) {
			return ofpErr(ofpwire.ETBadAction, ofpwire.BACTooMany)
		}
		return err
	}
	// The tables an output to OFPP_TABLE went through count the packet,
	// as the datapath's statistics push does for forwarded traffic.
	now := time.Now()
	for _, r := range res.Refs {
		r.Touch(now, 1, uint64(len(po.Data)))
	}
	if len(res.Actions) == 0 {
		return nil
	}
	if err := b.dp.Execute(po.Data, inPort, res.Actions); err != nil {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPacket)
	}
	return nil
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
	for _, t := range []ofpwire.InstructionType{ofpwire.InstructionTypeGotoTable, ofpwire.InstructionTypeWriteMetadata,
		ofpwire.InstructionTypeWriteActions, ofpwire.InstructionTypeApplyActions, ofpwire.InstructionTypeClearActions,
		ofpwire.InstructionTypeMeter} {
		insts = append(insts, ofpwire.InstructionID{Type: t})
	}
	var acts []ofpwire.ActionID
	for _, t := range []ofpwire.ActionType{ofpwire.ActionTypeOutput, ofpwire.ActionTypePushVLAN, ofpwire.ActionTypePopVLAN,
		ofpwire.ActionTypeSetNwTTL, ofpwire.ActionTypeDecNwTTL, ofpwire.ActionTypeSetField, ofpwire.ActionTypeGroup} {
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
	for f := ofpwire.XMType(0); f < 40; f++ {
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
		stats[i] = ofpwire.FlowStats{
			TableID:      e.TableID,
			DurationSec:  uint32(d / time.Second),
			DurationNSec: uint32(d % time.Second),
			Priority:     e.Priority,
			IdleTimeout:  e.IdleTimeout,
			HardTimeout:  e.HardTimeout,
			Flags:        e.Flags,
			Cookie:       e.Cookie,
			PacketCount:  e.Packets.Load(),
			ByteCount:    e.Bytes.Load(),
			Match:        ofmatch.ToOXM(&e.Match),
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

// packetIns relays the datapath's to-controller packets as PACKET_INs.
func (b *Bridge) packetIns() {
	defer b.wg.Done()
	q := b.dp.ControllerQueue()
	for {
		for {
			cp, ok := q.Pop()
			if !ok {
				break
			}
			b.mgr.SendPacketIn(PacketIn(cp))
		}
		select {
		case <-b.stop:
			return
		case <-q.Ready():
		}
	}
}

// PacketIn builds the PACKET_IN for a packet a Controller action queued:
// reason, table and max_len come from the action's argument (see
// xlate.ControllerArg). No packet is buffered, so the data is the packet cut
// to max_len (OFPCML_NO_BUFFER: whole). The cookie is the sending entry's
// and the match holds in_port and, when not zero, the metadata, both
// carried through the datapath in the Controller action, and the tunnel
// metadata (tun_id, tun_src/tun_dst or their IPv6 forms).
func PacketIn(cp datapath.ControllerPacket) ofpwire.PacketIn {
	reason, table, maxLen := xlate.ParseControllerArg(cp.Arg)
	data := cp.Data
	if maxLen != ofpwire.ContentLenNoBuffer && int(maxLen) < len(data) {
		data = data[:maxLen]
	}
	pi := ofpwire.PacketIn{
		BufferID: ofpwire.NoBuffer,
		TotalLen: uint16(min(len(cp.Data), 0xffff)),
		Reason:   reason,
		TableID:  table,
		Cookie:   cp.Cookie,
		Data:     data,
	}
	pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(cp.InPort)))
	if cp.Metadata != 0 {
		pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeMetadata, cp.Metadata))
	}
	if cp.TunnelID != 0 {
		pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeTunnelID, cp.TunnelID))
	}
	for _, a := range []struct {
		addr   [16]byte
		f4, f6 ofpwire.XMType
	}{{cp.Tunnel.Src, ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv6Src}, {cp.Tunnel.Dst, ofpwire.XMTypeTunIPv4Dst, ofpwire.XMTypeTunIPv6Dst}} {
		switch ip := netip.AddrFrom16(a.addr); {
		case a.addr == [16]byte{}:
		case ip.Is4In6():
			b := ip.Unmap().As4()
			pi.Match.Add(ofpwire.NewOXM(a.f4, b[:]))
		default:
			pi.Match.Add(ofpwire.NewOXM(a.f6, a.addr[:]))
		}
	}
	return pi
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
			if b.cfg.MaxIdle >= 0 {
				b.dp.ExpireIdleFlows(cmp.Or(b.cfg.MaxIdle, DefaultMaxIdle))
			}
			aged := b.cfg.Normal.Expire(now) > 0
			if b.checkPorts() || aged {
				b.dp.InvalidateFlows()
			}
			b.syncControllers()
		}
	}
}

package vswitchd

import (
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/classifier"
	"github.com/vswitch-go/vswitch/internal/ifinfo"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/tap"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/flowjournal"
	"github.com/vswitch-go/vswitch/vswitchd/metrics"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// bridge is one running bridge: its datapath, its OpenFlow agent and the
// ports opened for it.
type bridge struct {
	d    *Daemon
	name string
	// cfg is the configuration the bridge runs, settings what its datapath
	// was built with.
	cfg      *config.Bridge
	settings datapathSettings
	dp       *datapath.Datapath
	of       *ofproto.Bridge
	// local is set when the bridge's own interface is its port LOCAL;
	// localMAC is that interface's address.
	local    bool
	localMAC net.HardwareAddr

	// portsMu guards ports against the readers outside d.mu (metrics,
	// introspection and the datapath's port-removed callback).
	portsMu sync.RWMutex
	ports   map[string]*port
	byNo    map[uint32]*port
	// portErrs says why configured ports that do not run are not running
	// (the error opening them, or their interface vanishing): what the
	// Interface's error column shows.
	portErrs map[string]string

	// savedGen is the tables' generation (ofproto's TablesGeneration,
	// which also moves with changes no journal record describes:
	// timeouts, fail-mode flushes) that the tables file holds; flowsDirty
	// asks for a snapshot whatever the generation (a change that could
	// not be journaled, a failed snapshot). saveMu serialises the journal
	// and snapshots; lastMod is when a record was last journaled (unix ns)
	// and snapSize the flows in the last snapshot.
	savedGen   atomic.Uint64
	flowsDirty atomic.Bool
	saveMu     sync.Mutex
	journal    *flowjournal.Journal
	// unjournaled (under saveMu) is set when a change could not be
	// journaled or the journal not synced: the next barrier then takes a
	// snapshot instead, so what it acknowledges is still durable.
	unjournaled bool
	lastMod     atomic.Int64
	snapSize    int
	controllers atomic.Int32
	// sync is the durability level (flow-sync) and syncEvery the most a
	// written record waits for its background fsync (flow-sync-interval).
	sync      atomic.Int32
	syncEvery atomic.Int64
	syncStop  chan struct{}
	syncDone  chan struct{}
	// snapshots counts the snapshots taken, snapFlows the flows in the
	// last (for the saver, which reads them without saveMu).
	snapshots atomic.Uint64
	snapFlows atomic.Int64

	// carry are the totals of the counters of objects this bridge replaced
	// (a previous datapath, ports reopened), added at read time so that
	// exported counters never go down (metrics.Bridge.Carry); pmdCarry is
	// the same for pmd-stats-show. Both are replaced whole under carryMu,
	// never modified, so readers load them without a lock. localPort is
	// the datapath port of the bridge's own interface.
	carryMu   sync.Mutex
	carry     atomic.Pointer[metrics.Totals]
	pmdCarry  atomic.Pointer[statsSnapshot]
	localPort *datapath.Port
}

// port is one opened port.
type port struct {
	cfg *config.Port
	no  uint32
	dev netdev.Netdev
	// driver is the driver actually used (the type may be automatic).
	driver string
	// dp is the port in the datapath, kept to read its final counters
	// once the datapath has removed it.
	dp *datapath.Port
}

// newBridge builds and starts the bridge nb of configuration c, with the
// tables t (nil: none saved) and its journal's records on top. With
// lenient set (restoring at start, or after a failed change) a port that
// cannot be opened is logged and skipped; otherwise it fails the whole
// bridge, unless its interface does not exist yet: it waits for it.
func (d *Daemon) newBridge(c *config.Config, nb *config.Bridge, t *config.Tables, lenient bool) (*bridge, error) {
	b := &bridge{d: d, name: nb.Name, cfg: nb.Clone(), settings: switchDatapathSettings(c),
		ports: map[string]*port{}, byNo: map[uint32]*port{}, portErrs: map[string]string{}}
	j, records, err := flowjournal.Open(d.journalPath(nb.Name), d.opts.Recover, d.log.With("bridge", nb.Name))
	if err != nil {
		return nil, fmt.Errorf("bridge %q: flow journal: %w", nb.Name, err)
	}
	b.journal = j
	b.setFlowSync(c.OtherConfig)
	devs, failed, err := d.openPorts(nb, slices.Sorted(maps.Keys(nb.Ports)), lenient)
	if err != nil {
		j.Close()
		return nil, err
	}
	b.notRunning(failed)
	closeAll := func() {
		for _, p := range devs {
			p.dev.Close()
		}
		j.Close()
	}
	dpid, err := config.DatapathID(nb)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("bridge %q: datapath id: %w", nb.Name, err)
	}
	cpus, err := config.ParseCPUMask(b.settings.cpus)
	if err != nil {
		closeAll()
		return nil, err
	}
	oc := c.OtherConfig
	up := &ofproto.UpcallAdapter{}
	dcfg := datapath.Config{
		NumPMDs:          b.settings.nPMD,
		CPUs:             cpus,
		PMDSleepMax:      intOption(oc, "pmd-sleep-max", datapath.DefaultPMDSleepMax),
		TxFlushInterval:  flushInterval(oc, 0),
		FlowLimit:        flowLimit(oc),
		EMCInsertInvProb: emcInsertInvProb(oc),
		EMCOff:           emcInsertInvProb(oc) == 0,
		Upcall:           up,
		OnPortRemoved:    b.portRemoved,
		Conntrack:        d.ct,
		Fragments:        d.ipf,
	}
	dp, err := datapath.New(dcfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	b.dp = dp
	if err := dp.SetLatencyProbe(intOption(oc, "latency-probe", 0)); err != nil {
		closeAll()
		return nil, err
	}
	boc := nb.OtherConfig
	sw := normal.New(normal.Options{
		MaxAge:     time.Duration(intOption(boc, "mac-aging-time", int(normal.DefaultMaxAge/time.Second))) * time.Second,
		MaxEntries: intOption(boc, "mac-table-size", normal.DefaultMaxEntries),
	})
	of, err := ofproto.NewBridge(nb.Name, dp, ofproto.BridgeConfig{
		DatapathID:        dpid,
		Targets:           nb.Controllers,
		ManagementTargets: []string{"punix:" + d.bridgeSocket(nb.Name)},
		Upcall:            up,
		Normal:            sw,
		FailMode:          nb.FailMode,
		MaxIdle:           maxIdle(oc),
		OnTableMod:        b.logTableMod,
		OnBundleCommit:    b.saveBundle,
		Conn: ofconn.Config{
			Versions:      protocolVersions(nb.Protocols),
			TLS:           tlsFiles(c.SSL),
			OnBarrier:     b.syncJournal,
			OnControllers: func(n int) { b.controllers.Store(int32(n)) },
			// Controllers' events at info, the management socket's
			// short-lived vsctl connections at debug.
			Logf:           func(f string, a ...any) { d.log.Info(fmt.Sprintf(f, a...), "bridge", nb.Name) },
			ManagementLogf: func(f string, a ...any) { d.log.Debug(fmt.Sprintf(f, a...), "bridge", nb.Name) },
			Warnf:          func(f string, a ...any) { d.log.Warn(fmt.Sprintf(f, a...), "bridge", nb.Name) },
			MaxConns:       intOption(c.OtherConfig, "openflow-max-connections", ofconn.DefaultMaxConns),
		},
	})
	if err != nil {
		dp.Close()
		closeAll()
		return nil, err
	}
	b.of = of
	of.Manager().SetTargetOptions(targetOptions(nb.ControllerOptions))
	if attachErr := b.attachAll(devs); attachErr != nil {
		b.close()
		for _, q := range devs {
			if b.byNo[q.no] != q {
				q.dev.Close()
			}
		}
		return nil, attachErr
	}
	b.localMAC = localMAC(dpid)
	b.attachLocal()
	if err := dp.Start(); err != nil {
		b.close()
		return nil, err
	}
	b.restoreTables(t, records)
	b.syncStop, b.syncDone = make(chan struct{}), make(chan struct{})
	go b.syncLoop()
	return b, nil
}

// attachLocal gives the bridge its own interface, a tap named after it, as
// port LOCAL (OFPP_LOCAL), as Open vSwitch does: the host reaches the
// bridge through it (ip link set BR up; ip addr add ... dev BR). It starts
// administratively down and is persistent, so a datapath rebuild or a
// restart after a crash finds it with the addresses the host gave it;
// removeLocal deletes it with the bridge or at shutdown. A name taken by
// another kind of interface leaves the bridge without LOCAL (logged).
func (b *bridge) attachLocal() {
	dev, err := tap.New(b.name, tap.Options{Down: true, Persist: true, MAC: b.localMAC, PollBackoff: localPollBackoff})
	if err == nil {
		markTap(b.d.log, b.d.opts.StateDir, b.name)
		if err = b.of.AddPortWith(datapath.LocalPort, dev, ofproto.PortOptions{Name: b.name, HWAddr: b.localMAC}); err != nil {
			dev.Close()
		}
	}
	if err != nil {
		b.d.log.Warn("bridge has no LOCAL port (its own interface)", "bridge", b.name, "err", err)
		return
	}
	b.local = true
	b.localPort = b.dp.Port(datapath.LocalPort)
}

// localPollBackoff bounds the polls a PMD skips on the bridge's own
// interface after finding it empty: each poll of a tap is a read syscall,
// which a busy PMD would otherwise pay every iteration for a device that
// mostly carries the host's management traffic. Open vSwitch keeps such
// ports off its PMDs altogether.
const localPollBackoff = 64

// localMAC is the address of a bridge's own interface: the datapath id's
// low 48 bits, as in Open vSwitch, made locally administered and unicast,
// so it stays the same across rebuilds and restarts (neighbours' ARP
// caches stay right).
func localMAC(dpid uint64) net.HardwareAddr {
	m := net.HardwareAddr{byte(dpid >> 40), byte(dpid >> 32), byte(dpid >> 24), byte(dpid >> 16), byte(dpid >> 8), byte(dpid)}
	m[0] = m[0]&^0x01 | 0x02
	return m
}

// reattachLocal recreates the bridge's own interface if it had one that
// vanished (deleted from outside), as a configuration change recreates
// tap ports.
func (b *bridge) reattachLocal() {
	if b.local && b.dp.Port(datapath.LocalPort) == nil {
		b.attachLocal()
	}
}

// removeLocal deletes the bridge's own interface once the bridge is
// closed (the datapath closed the tap, which persists).
func (b *bridge) removeLocal() {
	if b.local {
		b.d.removeTap(b.name)
	}
}

// restoreTables brings back the saved tables: the snapshot t (nil: none),
// then the journal's records in order, then a new snapshot so that the
// journal starts empty. A record that no longer applies (a group added
// twice because the snapshot already held it) is logged and skipped.
func (b *bridge) restoreTables(t *config.Tables, records []string) {
	log := b.d.log.With("bridge", b.name)
	snapshot := 0
	if t != nil {
		if err := b.installTables(t.Flows, t.Groups, t.Meters, nil); err != nil {
			log.Error("saved tables not fully restored", "err", err)
		}
		snapshot = len(t.Flows)
		b.snapSize = snapshot
	}
	replayed, unreadable := 0, 0
	for i, r := range records {
		msgs, bundle, err := flowjournal.ParseChange(r)
		if err != nil {
			// The checksum was right: a record this version cannot read.
			log.Error("journal record not understood", "record", i+1, "text", r, "err", err)
			unreadable++
			continue
		}
		if bundle {
			_, err = b.of.CommitBundle(msgs)
		} else {
			err = b.of.Apply(msgs[0])
		}
		if err != nil {
			log.Debug("journal record not replayed", "record", i+1, "text", r, "err", err)
			continue
		}
		replayed++
	}
	if t != nil || len(records) > 0 {
		log.Info("flows restored", "snapshot", snapshot, "journal", replayed, "journal-records", len(records))
	}
	if unreadable > 0 {
		log.Error("journal records not understood were dropped", "count", unreadable)
	}
	if len(records) > 0 {
		if err := b.snapshot(true); err != nil {
			log.Error("tables not saved after replaying the journal (it is kept)", "err", err)
		}
	} else {
		b.savedGen.Store(b.of.TablesGeneration()) // the file holds what was just restored
		b.flowsDirty.Store(false)
	}
}

// journalPath is the path of a bridge's flow table journal.
func (d *Daemon) journalPath(name string) string {
	return filepath.Join(d.opts.StateDir, name+flowjournal.Suffix)
}

// bridgeSocket is the path of a bridge's OpenFlow management socket.
func (d *Daemon) bridgeSocket(name string) string {
	return filepath.Join(d.runDir(), name+mgmt.BridgeSocketSuffix)
}

// openPorts opens the named ports of nb. A kernel port whose interface
// does not exist is left out, not refused: as in Open vSwitch it is
// configured and waits for its interface, which starts it (ifwatch.go).
// With lenient set any port that fails is left out; otherwise the first
// other failure closes what was opened and is returned. failed says why
// each port left out is not running.
func (d *Daemon) openPorts(nb *config.Bridge, names []string, lenient bool) (out []*port, failed map[string]error, err error) {
	failed = map[string]error{}
	open := func(pc *config.Port) (netdev.Netdev, string, error) {
		return openNetdev(d.opts.StateDir, d.log.With("bridge", nb.Name), d.patches, pc)
	}
	if d.opts.OpenPort != nil {
		open = d.opts.OpenPort
	}
	for _, name := range names {
		pc := nb.Ports[name]
		dev, driver, err := open(pc)
		if err != nil {
			switch {
			case errors.Is(err, errNoDevice):
				d.log.Warn("port waits for its interface", "bridge", nb.Name, "port", name, "ofport", pc.OFPort, "err", err)
			case lenient:
				d.log.Error("port not restored", "bridge", nb.Name, "port", name, "err", err)
			default:
				for _, p := range out {
					p.dev.Close()
				}
				return nil, nil, fmt.Errorf("port %q: %w", name, err)
			}
			failed[name] = err
			continue
		}
		out = append(out, &port{cfg: pc.Clone(), no: pc.OFPort, dev: dev, driver: driver})
	}
	return out, failed, nil
}

// notRunning records why the ports in failed do not run.
func (b *bridge) notRunning(failed map[string]error) {
	b.portsMu.Lock()
	defer b.portsMu.Unlock()
	for name, err := range failed {
		b.portErrs[name] = err.Error()
	}
}

// portError is why configured port name does not run, if it is known.
func (b *bridge) portError(name string) (string, bool) {
	b.portsMu.RLock()
	defer b.portsMu.RUnlock()
	e, ok := b.portErrs[name]
	return e, ok
}

// attach adds an opened port to the running bridge.
func (b *bridge) attach(p *port) error {
	aff, err := b.affinity(p.cfg, p.dev.NumRxQueues())
	if err != nil {
		return fmt.Errorf("port %q: %w", p.cfg.Name, err)
	}
	b.of.SetNormalPort(normalPort(p.no, p.cfg))
	var po ofproto.PortOptions
	if p.cfg.Type == config.PortTypePatch {
		// No interface to take an address from: a stable local one, as
		// Open vSwitch gives its patch ports a random one.
		h := fnv.New64a()
		h.Write([]byte(p.cfg.Name))
		po.HWAddr = localMAC(h.Sum64())
	} else {
		po = kernelPortOptions(p.dev.Name())
	}
	if err := b.of.AddPortWith(p.no, p.dev, po); err != nil {
		return fmt.Errorf("port %q: %w", p.cfg.Name, err)
	}
	p.dp = b.dp.Port(p.no)
	if us := flushInterval(p.cfg.OtherConfig, -1); us != -1 {
		b.dp.SetPortTxFlushInterval(p.no, us)
	}
	if len(aff) > 0 {
		b.dp.SetRxqAffinity(p.no, aff) // checked above
	}
	b.portsMu.Lock()
	b.ports[p.cfg.Name] = p
	b.byNo[p.no] = p
	delete(b.portErrs, p.cfg.Name)
	b.portsMu.Unlock()
	b.d.log.Info("port added", "bridge", b.name, "port", p.cfg.Name, "ofport", p.no, "driver", p.driver)
	return nil
}

// attachAll attaches ps, stopping at the first that fails. The PMDs take
// them in one plan, and NORMAL its port table once (ofproto.Bridge.Batch):
// a transaction may add a thousand.
func (b *bridge) attachAll(ps []*port) error {
	var err error
	b.of.Batch(func() {
		for _, p := range ps {
			if err = b.attach(p); err != nil {
				return
			}
		}
	})
	return err
}

// affinity reads the port's pmd-rxq-affinity (nil without one) and checks
// it against the datapath's PMDs and the port's nrxq rx queues.
func (b *bridge) affinity(pc *config.Port, nrxq int) (map[int]int, error) {
	v := pc.OtherConfig["pmd-rxq-affinity"]
	if v == "" {
		return nil, nil
	}
	aff, err := config.ParseAffinity(v)
	if err == nil {
		err = b.dp.CheckRxqAffinity(nrxq, aff)
	}
	if err != nil {
		return nil, fmt.Errorf("pmd-rxq-affinity=%s: %w (PMD CPUs come from other_config:pmd-cpu-mask)", v, err)
	}
	return aff, nil
}

// detach removes a port from the running bridge (the datapath closes it).
// With reopen set the port is to be opened again (its configuration
// changed) and its counters are carried over to the next one; otherwise
// it is deleted and its series go (a port of that name added later starts
// from zero).
func (b *bridge) detach(p *port, reopen bool) {
	if err := b.of.RemovePort(p.no); err != nil {
		b.d.log.Warn("port removal", "bridge", b.name, "port", p.cfg.Name, "err", err)
	}
	b.carryPort(p.cfg.Name, p.dp, reopen)
	b.portsMu.Lock()
	delete(b.ports, p.cfg.Name)
	delete(b.byNo, p.no)
	b.portsMu.Unlock()
	b.d.log.Info("port deleted", "bridge", b.name, "port", p.cfg.Name)
}

// portRemoved is the datapath's callback for an interface that vanished:
// the port stays configured but no longer runs, until its interface comes
// back (ifwatch.go), the next configuration change or a restart.
func (b *bridge) portRemoved(no uint32, name string) {
	// The totals are carried before the port leaves byNo: nothing reopens
	// it while it is there, so the next one never runs without them.
	b.portsMu.RLock()
	p := b.byNo[no]
	b.portsMu.RUnlock()
	switch {
	case p != nil:
		b.carryPort(p.cfg.Name, p.dp, true)
	case no == datapath.LocalPort:
		b.carryPort(b.name, b.localPort, true)
	}
	b.portsMu.Lock()
	if p := b.byNo[no]; p != nil {
		delete(b.ports, p.cfg.Name)
		delete(b.byNo, no)
		b.portErrs[p.cfg.Name] = fmt.Sprintf("could not open network device %s (%v)", name, errNoDevice)
	}
	b.portsMu.Unlock()
	if of := b.of; of != nil {
		of.PortGone(no)
	}
	b.d.log.Warn("interface disappeared; port stopped", "bridge", b.name, "port", name, "ofport", no)
	b.d.refreshDB([]string{name})
	// An interface of that name may already be back: its link event may
	// have come before this removal and been taken for the running port.
	b.d.ifw.note(name)
}

// carried is the bridge's carried counter totals (nil before any).
func (b *bridge) carried() metrics.Totals {
	if t := b.carry.Load(); t != nil {
		return *t
	}
	return nil
}

// carryPort takes the final counters of datapath port dp (named name),
// removed from the datapath: with keep into the totals its next port
// starts from, else dropping the port's series. What its PMDs sent to it
// goes into pmd-stats-show's totals either way, since those are per PMD.
func (b *bridge) carryPort(name string, dp *datapath.Port, keep bool) {
	if dp == nil {
		return
	}
	b.carryMu.Lock()
	defer b.carryMu.Unlock()
	cur := b.carried()
	var next metrics.Totals
	if keep {
		next = cur.Merge(metrics.CapturePort(b.name, name, dp, cur))
	} else {
		next = cur.Keep(func(port string) bool { return port != name })
	}
	b.carry.Store(&next)
	pc := &statsSnapshot{}
	if old := b.pmdCarry.Load(); old != nil {
		pc.pmd, pc.tx = slices.Clone(old.pmd), slices.Clone(old.tx)
	}
	for _, t := range dp.TxStats() {
		for len(pc.tx) <= t.PMD {
			pc.tx = append(pc.tx, txTotals{})
			pc.pmd = append(pc.pmd, datapath.PMDStats{PMD: len(pc.pmd)})
		}
		pc.tx[t.PMD].add(txOf(t))
	}
	b.pmdCarry.Store(pc)
}

// pruneCarry drops the carried totals of ports nb no longer has (one whose
// interface had vanished, then deleted from the configuration).
func (b *bridge) pruneCarry(nb *config.Bridge) {
	b.carryMu.Lock()
	defer b.carryMu.Unlock()
	if cur := b.carried(); len(cur) > 0 {
		next := cur.Keep(func(port string) bool { return nb.Ports[port] != nil || port == b.name })
		b.carry.Store(&next)
	}
}

// portName maps an OpenFlow port number to its name (metrics labels).
func (b *bridge) portName(no uint32) string {
	b.portsMu.RLock()
	defer b.portsMu.RUnlock()
	if p := b.byNo[no]; p != nil {
		return p.cfg.Name
	}
	if no == datapath.LocalPort {
		return b.name
	}
	return strconv.FormatUint(uint64(no), 10)
}

// portByName returns the running port called name.
func (b *bridge) portByName(name string) *port {
	b.portsMu.RLock()
	defer b.portsMu.RUnlock()
	return b.ports[name]
}

// portNumber resolves a port name in flow text the daemon reads (trace):
// a running port's number, or LOCAL for the bridge's own name when it has
// its internal port.
func (b *bridge) portNumber(name string) (uint32, bool) {
	if name == b.name && b.local {
		return uint32(ofpwire.PortLocal), true
	}
	if p := b.portByName(name); p != nil {
		return uint32(p.no), true
	}
	return 0, false
}

// sortedPorts returns the running ports in OpenFlow number order.
func (b *bridge) sortedPorts() []*port {
	b.portsMu.RLock()
	defer b.portsMu.RUnlock()
	ps := slices.Collect(maps.Values(b.byNo))
	slices.SortFunc(ps, func(x, y *port) int { return int(x.no) - int(y.no) })
	return ps
}

// needsRebuild reports whether going to nb under c needs a new datapath.
func (b *bridge) needsRebuild(c *config.Config, nb *config.Bridge) bool {
	if switchDatapathSettings(c) != b.settings {
		return true
	}
	old, _ := config.DatapathID(b.cfg)
	next, _ := config.DatapathID(nb)
	if old != next {
		return true
	}
	for _, k := range []string{"mac-aging-time", "mac-table-size"} {
		if b.cfg.OtherConfig[k] != nb.OtherConfig[k] {
			return true
		}
	}
	return false
}

// update changes a running bridge to nb under c without a new datapath.
// Ports are compared with what runs, not with the last configuration, so
// that a change rolled back half way is undone too and a port that could
// not be opened earlier (its interface was missing) is tried again.
func (b *bridge) update(c *config.Config, nb *config.Bridge) error {
	var removed, changed, added, retry []string
	b.portsMu.RLock()
	for name, p := range b.ports {
		switch np := nb.Ports[name]; {
		case np == nil:
			removed = append(removed, name)
		case config.PortNeedsReopen(p.cfg, np):
			changed = append(changed, name)
		}
	}
	for name := range nb.Ports {
		switch {
		case b.ports[name] != nil:
		case b.cfg.Ports[name] == nil || config.PortNeedsReopen(b.cfg.Ports[name], nb.Ports[name]):
			added = append(added, name) // new in this change: it must open
		case kernelPortType(nb.Ports[name].Type) && interfaceExists(name) != nil:
			// Still waiting for its interface (portErrs says so): the
			// interface's arrival starts it (ifwatch.go).
		default:
			retry = append(retry, name) // configured before but not running
		}
	}
	b.portsMu.RUnlock()
	for _, l := range [][]string{removed, changed, added, retry} {
		slices.Sort(l)
	}
	// A changed port is closed before it is reopened: a kernel interface
	// can carry only one XDP program or socket set of ours.
	for _, name := range changed {
		if p := b.portByName(name); p != nil {
			b.detach(p, true)
		}
	}
	opened, failed, err := b.d.openPorts(nb, append(changed, added...), false)
	if err != nil {
		return err
	}
	retried, failedAgain, _ := b.d.openPorts(nb, retry, true)
	opened = append(opened, retried...)
	b.notRunning(failed)
	b.notRunning(failedAgain)
	// Removed ports go once the others have opened, so that a change that
	// fails there leaves them running, counters and all; and before the
	// others attach, which may take their OpenFlow numbers.
	for _, name := range removed {
		if p := b.portByName(name); p != nil {
			b.detach(p, false)
		}
	}
	b.reattachLocal()
	if attachErr := b.attachAll(opened); attachErr != nil {
		for _, q := range opened {
			if b.portByName(q.cfg.Name) != q {
				q.dev.Close()
			}
		}
		return attachErr
	}
	// Port settings that apply in place.
	for name, np := range nb.Ports {
		p := b.portByName(name)
		if p == nil {
			continue
		}
		if p.cfg.OtherConfig["tx-flush-interval"] != np.OtherConfig["tx-flush-interval"] {
			if err := b.dp.SetPortTxFlushInterval(p.no, flushInterval(np.OtherConfig, -1)); err != nil {
				return err
			}
		}
		if p.cfg.OtherConfig["pmd-rxq-affinity"] != np.OtherConfig["pmd-rxq-affinity"] {
			aff, err := b.affinity(np, p.dev.NumRxQueues())
			if err == nil {
				err = b.dp.SetRxqAffinity(p.no, aff)
			}
			if err != nil {
				return fmt.Errorf("port %q: %w", name, err)
			}
		}
		if p.cfg.Tag != np.Tag || !slices.Equal(p.cfg.Trunks, np.Trunks) {
			b.of.SetNormalPort(normalPort(p.no, np))
		}
		b.portsMu.Lock()
		p.cfg = np.Clone()
		b.portsMu.Unlock()
	}
	oc := c.OtherConfig
	b.setFlowSync(oc)
	b.of.SetMaxIdle(maxIdle(oc))
	b.dp.SetFlowLimit(flowLimit(oc))
	if err := b.dp.SetEMCInsertInvProb(emcInsertInvProb(oc)); err != nil {
		return err
	}
	if err := b.dp.SetTxFlushInterval(flushInterval(oc, 0)); err != nil {
		return err
	}
	if err := b.dp.SetPMDSleepMax(intOption(oc, "pmd-sleep-max", datapath.DefaultPMDSleepMax)); err != nil {
		return err
	}
	if err := b.dp.SetLatencyProbe(intOption(oc, "latency-probe", 0)); err != nil {
		return err
	}
	b.of.Manager().SetMaxConns(intOption(oc, "openflow-max-connections", ofconn.DefaultMaxConns))
	if !slices.Equal(b.cfg.Protocols, nb.Protocols) {
		b.of.Manager().SetVersions(protocolVersions(nb.Protocols))
	}
	if !maps.Equal(b.cfg.ControllerOptions, nb.ControllerOptions) {
		b.of.Manager().SetTargetOptions(targetOptions(nb.ControllerOptions))
	}
	if !slices.Equal(b.cfg.Controllers, nb.Controllers) {
		if err := b.of.SetControllers(nb.Controllers); err != nil {
			return err
		}
	}
	flushed := !slices.Equal(b.cfg.Controllers, nb.Controllers)
	if b.cfg.FailMode != nb.FailMode {
		if err := b.of.SetFailMode(nb.FailMode); err != nil {
			return err
		}
		flushed = true
	}
	b.cfg = nb.Clone()
	b.pruneCarry(nb)
	b.portsMu.Lock()
	for name := range b.portErrs {
		if nb.Ports[name] == nil {
			delete(b.portErrs, name)
		}
	}
	b.portsMu.Unlock()
	if flushed {
		// Fail-mode flushes are in no journal record: save them now.
		b.snapshot(true)
	}
	return nil
}

// targetOptions are the controllers' settings as the connection layer
// takes them.
func targetOptions(m map[string]config.ControllerOptions) map[string]ofconn.TargetOptions {
	out := make(map[string]ofconn.TargetOptions, len(m))
	for t, o := range m {
		out[t] = ofconn.TargetOptions{Probe: time.Duration(o.InactivityProbe) * time.Millisecond,
			MaxBackoff: time.Duration(o.MaxBackoff) * time.Millisecond}
	}
	return out
}

// normalPort is the NORMAL action's view of a configured port (OVS's
// tag/trunks semantics, see config.Port).
func normalPort(no uint32, p *config.Port) normal.PortConfig {
	if len(p.Trunks) > 0 {
		return normal.PortConfig{No: no, Mode: normal.Trunk, Trunks: p.Trunks, NativeVLAN: p.Tag}
	}
	return normal.PortConfig{No: no, Mode: normal.Access, Tag: p.Tag}
}

// installTables replaces the flow, group and meter tables with the ones
// the lines describe (flowLines, groupLines and meterLines output): meters
// and groups first, since flows refer to them. Flows found in states (a
// rebuild's old bridge) keep their install time and counters. It goes on
// past a table that fails, so that the others still come back.
func (b *bridge) installTables(flows, groups, meters []string, states map[string]pipeline.EntryState) error {
	var errs []error
	for _, step := range []struct {
		what  string
		apply func([]string) error
		lines []string
	}{
		{"meters", func(l []string) error { return restoreMeters(b.of, l) }, meters},
		{"groups", func(l []string) error { return restoreGroups(b.of, l) }, groups},
		{"flows", func(l []string) error { return restoreFlows(b.of, l, states) }, flows},
	} {
		if err := step.apply(step.lines); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", step.what, err))
		}
	}
	return errors.Join(errs...)
}

// logTableMod journals an OpenFlow table change ahead of applying it (on
// the connection's goroutine, before any later barrier reply). A change
// the journal cannot take (a full disk, an I/O error) is refused with an
// OpenFlow error carrying the cause and is not applied: nothing runs that
// a restart would not bring back. A change the tables refuse is cut back
// off the journal. saveMu is held throughout, so the journal's order is
// the order changes were applied in, whatever the connection. Nothing is
// journaled while a controller is connected: it owns the tables and
// reprograms them when it reconnects.
// saveBundle is logTableMod for a bundle commit: the bundle is one
// journal record (its messages as the peer sent them, EncodeBundleWire, or
// in OpenFlow's encoding, EncodeBundleRecord, when they were not given),
// written ahead and taken back if the commit fails, so that a crash
// replays all of it or none. A bundle too large for one record, or with a
// change not recordable, is saved by a snapshot of the whole tables before
// the commit is answered instead.
func (b *bridge) saveBundle(msgs []ofpwire.Message, wire [][]byte, apply func() error) error {
	if b.controllers.Load() > 0 {
		return apply()
	}
	// The messages as the peer sent them are recorded as they are:
	// encoding 100,000 flow-mods again was a third of the commit.
	var rec []byte
	var ferr error
	if wire != nil {
		rec, ferr = flowjournal.EncodeBundleWire(nil, wire, len(msgs))
	} else {
		rec, ferr = flowjournal.EncodeBundleRecord(nil, msgs)
	}
	b.saveMu.Lock()
	if ferr != nil {
		err := apply()
		if err == nil {
			b.flowsDirty.Store(true)
			b.lastMod.Store(time.Now().UnixNano())
		}
		b.saveMu.Unlock()
		if err != nil {
			return err
		}
		if serr := b.snapshot(true); serr != nil {
			b.saveMu.Lock()
			b.unjournaled = true
			b.saveMu.Unlock()
			b.d.log.Error("flow tables not saved after a bundle commit; the next barrier retries", "bridge", b.name, "err", serr)
		}
		return nil
	}
	defer b.saveMu.Unlock()
	return b.writeAhead(rec, len(msgs), apply, func(err error) error {
		return &ofpwire.OFPError{Type: ofpwire.ETBundleFailed, Code: ofpwire.BFCEperm,
			Reason: "bundle not saved, so not committed: flow journal: " + err.Error()}
	})
}

// writeAhead journals rec (a whole record of n changes), applies the
// change and takes the record back if the change failed; a record the
// journal refuses is answered refusal(err) and the change is not applied.
// The caller holds saveMu.
func (b *bridge) writeAhead(rec []byte, n int, apply func() error, refusal func(error) error) error {
	if err := b.journal.AppendRecord(rec, n); err != nil {
		b.d.log.Error("flow journal: change refused, not applied", "bridge", b.name, "err", err)
		return refusal(err)
	}
	if err := apply(); err != nil {
		if uerr := b.journal.UndoLast(rec, n); uerr != nil {
			b.d.log.Error("flow journal: refused change not taken back; appends stop until the next snapshot",
				"bridge", b.name, "err", uerr)
		}
		return err
	}
	b.lastMod.Store(time.Now().UnixNano())
	return nil
}

func (b *bridge) logTableMod(m ofpwire.Message, apply func() error) error {
	if b.controllers.Load() > 0 {
		return apply()
	}
	line, ferr := flowjournal.FormatMod(m)
	var rec []byte
	if ferr == nil {
		rec, ferr = flowjournal.ChangeRecord(line)
	}
	b.saveMu.Lock()
	defer b.saveMu.Unlock()
	if ferr != nil {
		// Not expressible as a record: the next barrier's snapshot covers it.
		if err := apply(); err != nil {
			return err
		}
		b.flowsDirty.Store(true)
		b.unjournaled = true
		b.d.log.Error("flow journal: change not recordable; the next barrier saves the tables", "bridge", b.name, "err", ferr)
		return nil
	}
	return b.writeAhead(rec, 1, apply, func(err error) error { return journalRefusal(m, err) })
}

// journalRefusal is the OpenFlow error for a change the journal could not
// take. OpenFlow 1.3 has no code for a switch's storage failure; the
// "unspecified" code of the message's own error type (OFPFMFC_UNKNOWN,
// OFPMMFC_UNKNOWN) says the request itself was fine, and groups, which
// have no such code, get OFPGMFC_EPERM (the switch declines). The cause
// travels as the error's reason.
func journalRefusal(m ofpwire.Message, err error) error {
	e := &ofpwire.OFPError{Type: ofpwire.ETFlowModFailed, Code: ofpwire.FMFCUnknown,
		Reason: "change not saved, so not applied: flow journal: " + err.Error()}
	switch m.(type) {
	case *ofpwire.GroupMod:
		e.Type, e.Code = ofpwire.ETGroupModFailed, ofpwire.GMFCEperm
	case *ofpwire.MeterMod:
		e.Type, e.Code = ofpwire.ETMeterModFailed, ofpwire.MMFCUnknown
	}
	return e
}

// Durability levels of other_config:flow-sync.
const (
	// flowSyncWritten acknowledges a barrier once its changes are written
	// to the journal file (they survive the daemon's death: the kernel
	// holds them) and fsyncs in the background every flow-sync-interval,
	// which bounds what a host crash or power loss can take.
	flowSyncWritten int32 = iota
	// flowSyncFsync fsyncs the journal before every barrier reply: what a
	// barrier acknowledges survives a host crash too.
	flowSyncFsync
)

// DefaultFlowSyncInterval is flow-sync-interval's default, in ms.
const DefaultFlowSyncInterval = 1000

// setFlowSync reads flow-sync and flow-sync-interval (validated by the
// store) from the switch's other_config.
func (b *bridge) setFlowSync(oc map[string]string) {
	level := flowSyncWritten
	if oc["flow-sync"] == config.FlowSyncFsync {
		level = flowSyncFsync
	}
	b.sync.Store(level)
	b.syncEvery.Store(int64(intOption(oc, "flow-sync-interval", DefaultFlowSyncInterval)) * int64(time.Millisecond))
}

// syncJournal runs before every barrier reply: at level fsync it makes the
// journaled changes durable. When the journal failed, a snapshot of the
// tables stands in for it; when that fails too, the barrier is answered
// with an error (OFPBRC_EPERM, the switch declines to confirm; 1.3 has no
// barrier-specific code) carrying the cause, never with a reply.
func (b *bridge) syncJournal() error {
	b.saveMu.Lock()
	if b.sync.Load() == flowSyncFsync {
		if err := b.journal.Sync(); err != nil {
			b.unjournaled = true
			b.d.log.Error("flow journal not synced; saving the tables instead", "bridge", b.name, "err", err)
		}
	}
	failed := b.unjournaled
	b.saveMu.Unlock()
	if !failed {
		return nil
	}
	if err := b.snapshot(true); err != nil {
		return &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCEperm,
			Reason: "earlier changes applied but not saved: " + err.Error()}
	}
	return nil
}

// syncLoop fsyncs written journal records in the background at most
// flow-sync-interval after they were written.
func (b *bridge) syncLoop() {
	defer close(b.syncDone)
	t := time.NewTimer(time.Duration(b.syncEvery.Load()))
	defer t.Stop()
	for {
		select {
		case <-b.syncStop:
			return
		case <-t.C:
		}
		b.backgroundSync()
		t.Reset(time.Duration(b.syncEvery.Load()))
	}
}

// backgroundSync fsyncs the journal outside saveMu, so changes are not
// held up behind the disk. A failure falls back to a snapshot; if that
// fails too the next barrier reports it.
func (b *bridge) backgroundSync() {
	b.saveMu.Lock()
	j := b.journal
	f := j.StartSync()
	b.saveMu.Unlock()
	if f == nil {
		return
	}
	if err := f.Sync(); err != nil {
		b.saveMu.Lock()
		j.SyncFailed()
		b.unjournaled = true
		b.saveMu.Unlock()
		b.d.log.Error("flow journal not synced; saving the tables instead", "bridge", b.name, "err", err)
		b.snapshot(true)
	}
}

// Snapshot policy: the periodic saver takes one when the tables changed and
// either no change came for snapshotQuiet or the journal has grown to the
// size of the tables (at least snapshotMinRecords), so the work of
// snapshots stays proportional to the changes made.
const (
	snapshotQuiet      = time.Second
	snapshotMinRecords = 10_000
)

// snapshot saves the flow, group and meter tables in the bridge's tables
// file and empties the journal: with force always (shutdown, fail-mode
// changes), else by the policy above. A bridge the configuration no
// longer has loses both: its tables go with it. It never takes d.mu: it runs on the saver and
// on configuration paths that hold it. The error is why the tables could
// not be saved (nil when there was nothing to do).
func (b *bridge) snapshot(force bool) error {
	b.saveMu.Lock()
	defer b.saveMu.Unlock()
	if b.controllers.Load() > 0 {
		return nil
	}
	if !force {
		if !b.flowsDirty.Load() && b.of.TablesGeneration() == b.savedGen.Load() && b.journal.Records() == 0 && b.journal.Broken() == nil {
			return nil
		}
		quiet := time.Since(time.Unix(0, b.lastMod.Load())) >= snapshotQuiet
		if !quiet && b.journal.Changes() < max(snapshotMinRecords, b.snapSize) {
			return nil
		}
	}
	b.flowsDirty.Store(false)
	gen := b.of.TablesGeneration() // before the entries are taken: a change after them saves again
	var err error
	nflows := 0
	path := b.d.tablesPath(b.name)
	if b.d.store.HasBridge(b.name) {
		// Written as the lines are made: a large table is never held
		// as text whole. The entries are taken at once, and saveMu holds
		// back the changes the journal would record meanwhile.
		nflows, err = flowjournal.WriteSnapshotLines(path, ofptext.FlowLineSeq(b.of.FlowModSeq()), groupLines(b.of), meterLines(b.of))
	} else if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	if err == nil {
		// The tables are saved: what a barrier acknowledges is durable even
		// if the journal cannot be emptied (its records then replay on top
		// of the snapshot, as after a crash between the two steps).
		b.savedGen.Store(gen)
		b.snapSize = nflows
		b.snapFlows.Store(int64(nflows))
		b.snapshots.Add(1)
		b.unjournaled = false
		if rerr := b.journal.Reset(); rerr != nil {
			b.flowsDirty.Store(true)
			b.d.log.Error("flow journal not emptied after a snapshot", "bridge", b.name, "err", rerr)
		}
		return nil
	}
	b.flowsDirty.Store(true)
	b.d.log.Error("flow tables not saved", "bridge", b.name, "err", err)
	return err
}

// close stops the bridge: its OpenFlow agent, then its datapath, whose
// PMDs flush their batches before the ports are closed.
func (b *bridge) close() {
	if b.of != nil {
		b.of.Close()
	}
	if b.dp != nil {
		b.dp.Close()
	}
	if b.syncStop != nil {
		close(b.syncStop)
		<-b.syncDone
	}
	b.journal.Sync()
	b.journal.Close()
}

// intOption reads a numeric option (validated by the store) or def.
func intOption(m map[string]string, key string, def int) int {
	if v, ok := m[key]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// maxIdle is other_config's max-idle (ms): how long a megaflow may go
// unused. It applies in place, as in Open vSwitch.
func maxIdle(oc map[string]string) time.Duration {
	return time.Duration(intOption(oc, "max-idle", int(ofproto.DefaultMaxIdle/time.Millisecond))) * time.Millisecond
}

// flowLimit is other_config's flow-limit, the datapath's default if unset.
func flowLimit(oc map[string]string) int {
	return intOption(oc, "flow-limit", datapath.DefaultFlowLimit)
}

// emcInsertInvProb is other_config's emc-insert-inv-prob (0: the EMC
// off), Open vSwitch's default of 100 if unset.
func emcInsertInvProb(oc map[string]string) int {
	return intOption(oc, "emc-insert-inv-prob", classifier.DefaultEMCInsertInvProb)
}

// flushInterval is other_config's tx-flush-interval as the datapath takes
// it (µs, or datapath.TxFlushAuto), def if unset.
func flushInterval(oc map[string]string, def int) int {
	if oc["tx-flush-interval"] == config.TxFlushAuto {
		return datapath.TxFlushAuto
	}
	return intOption(oc, "tx-flush-interval", def)
}

// kernelPortOptions describes a port's kernel interface for PORT_DESC as
// Open vSwitch does: its MAC address and ethtool speed (a veth is
// 10GB-FD). Ports without one (vhost-user) get zeros.
func kernelPortOptions(name string) ofproto.PortOptions {
	l, err := linkByName(name)
	if err != nil {
		return ofproto.PortOptions{}
	}
	o := ofproto.PortOptions{}
	if mac := l.Attrs().HardwareAddr; len(mac) == 6 {
		o.HWAddr = mac
	}
	mbps, full := ifinfo.Speed(name)
	o.CurrSpeed = mbps * 1000
	o.MaxSpeed = o.CurrSpeed
	o.Curr = speedFeature(mbps, full)
	return o
}

// speedFeature is the OpenFlow feature bit of a link speed, with the
// copper bit, as the kernel's ethtool settings map to it.
func speedFeature(mbps uint32, full bool) ofpwire.PortFeature {
	var f ofpwire.PortFeature
	switch {
	case mbps == 10 && full:
		f = ofpwire.PortFeature10MbitFullDuplex
	case mbps == 10:
		f = ofpwire.PortFeature10MbitHalfDuplex
	case mbps == 100 && full:
		f = ofpwire.PortFeature100MbitFullDuplex
	case mbps == 100:
		f = ofpwire.PortFeature100MbitHalfDuplex
	case mbps == 1000 && full:
		f = ofpwire.PortFeature1GbitFullDuplex
	case mbps == 1000:
		f = ofpwire.PortFeature1GbitHalfDuplex
	case mbps == 10000:
		f = ofpwire.PortFeature10GbitFullDuplex
	case mbps == 40000:
		f = ofpwire.PortFeature40GbitFullDuplex
	case mbps == 100000:
		f = ofpwire.PortFeature100GbitFullDuplex
	case mbps == 1000000:
		f = ofpwire.PortFeature1TbitFullDuplex
	case mbps > 0:
		f = ofpwire.PortFeatureOther
	}
	if f != 0 {
		f |= ofpwire.PortFeatureCopper
	}
	return f
}

// protocolVersions are the OpenFlow versions Bridge.protocols names (the
// reconciler has dropped the names this switch does not speak); nil, all
// versions, when it names none.
func protocolVersions(protocols []string) []uint8 {
	var vs []uint8
	for _, p := range protocols {
		if v, ok := ofpwire.VersionByName(p); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// Package vswitchd is the switch daemon: it keeps the running bridges,
// ports and controllers equal to the Open_vSwitch database it follows
// (through the crash-safe configuration store), serves the management API
// and ovs-appctl, exports Prometheus metrics and saves the flow tables of
// bridges, so that a restart brings everything back.
//
// Each bridge has a datapath of its own (its PMDs, caches and ports), whose
// port numbers are the bridge's OpenFlow port numbers. Settings that shape
// the PMDs (n-pmd, pmd-cpu-mask) rebuild the bridges' datapaths when they
// change, keeping their flows; tx-flush-interval, pmd-sleep-max, max-idle,
// flow-limit, emc-insert-inv-prob, controllers, fail mode and ports change
// at run time. A
// port whose kernel interface disappears stops, and starts again by itself
// under the same OpenFlow number when the interface comes back; one added
// before its interface exists waits for it the same way, as in Open
// vSwitch. A change the running switch cannot follow is rolled back, and
// what it closed comes back as it ran (see change).
package vswitchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/datapath/ipf"
	"github.com/vswitch-go/vswitch/internal/statedir"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/patch"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/flowjournal"
	"github.com/vswitch-go/vswitch/vswitchd/metrics"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbserver"
	"github.com/vswitch-go/vswitch/vswitchd/unixctl"
)

// File names inside the state directory (the sockets' are in mgmt, for
// clients).
const (
	// pidFileName holds the daemon's pid, for scripts.
	pidFileName = "vswitchd.pid"
)

// DefaultMetricsAddr is where /metrics is served unless configured.
const DefaultMetricsAddr = "127.0.0.1:9477"

// flowSaveInterval is how often the saver looks at the bridges without a
// connected controller, to snapshot tables that changed (snapshot's
// policy decides). A quarter of snapshotQuiet, so a quiet table is saved,
// and the memory its load left behind returned, soon after it went quiet.
const flowSaveInterval = snapshotQuiet / 4

// Options configure a Daemon.
type Options struct {
	// StateDir holds the config store, the management sockets and the
	// vhost-user sockets of ports that name none.
	StateDir string
	// MetricsAddr is the host:port of the Prometheus endpoint; "" disables it.
	MetricsAddr string
	// DefaultBridge, if set, is created (fail mode standalone) when the
	// store holds no bridge at all: the embedded default of `make run`.
	DefaultBridge string
	// Logger receives the daemon's logs; nil discards them.
	Logger *slog.Logger
	// LogLevel, if set, is what the log-level command changes.
	LogLevel *slog.LevelVar
	// Version is what the version command prints.
	Version string
	// Recover starts despite damaged flow journals: each keeps the records
	// before its damage and is moved aside (BRIDGE.journal.corrupt-TIME).
	// Without it a damaged journal stops Start, files untouched.
	Recover bool
	// DB, if set ("unix:PATH", "tcp:IP:PORT"), is the Open_vSwitch OVSDB
	// database the configuration comes from, as for ovs-vswitchd; the
	// configuration commands of the management socket are written to it.
	DB string
	// RunDir holds the bridges' OpenFlow sockets (BRIDGE.mgmt), where
	// Open vSwitch's tools look for them ($OVS_RUNDIR); "" is StateDir.
	RunDir string
	// Unixctl is the path of the control socket ovs-appctl talks to; ""
	// is StateDir/ovs-vswitchd.ctl.
	Unixctl string
	// LogDest is the vlog destination Logger writes to ("console" or
	// "file"), the one vlog/set and vlog/list speak of; "" is console.
	LogDest string
	// ReopenLog, if set, reopens the log file (vlog/reopen, which
	// Debian's logrotate configuration runs after rotating it).
	ReopenLog func() error
	// OpenPort, if set, opens every port instead of the drivers (its
	// name, the driver it reports): tests run the whole daemon on ring
	// ports, without root or kernel interfaces.
	OpenPort func(p *config.Port) (netdev.Netdev, string, error)
}

// Daemon is a running vswitchd.
type Daemon struct {
	opts  Options
	log   *slog.Logger
	store *config.Store
	mgmt  *mgmt.Server
	http  *http.Server
	// ctl is the ovs-appctl control socket (unixctlcmds.go); exitReq is
	// closed by its exit command.
	ctl      *unixctl.Server
	exitReq  chan struct{}
	exitOnce sync.Once

	// mu serialises configuration changes and the bridges map. It is never
	// taken on a path an OpenFlow connection's goroutine waits on (see
	// logTableMod and syncJournal), since closing a bridge waits for those
	// goroutines.
	mu      sync.Mutex
	bridges map[string]*bridge
	// retired are the bridges the change being applied closed (d.mu held):
	// kept until it is committed or rolled back, so that a rollback brings
	// one back as it ran (retire, revive).
	retired map[string]*retiredBridge
	// view is a snapshot of the bridges for readers that must not wait
	// for a configuration change (metrics, introspection).
	view atomic.Pointer[[]*bridge]

	// statsBase are the counters at the last pmd-stats-clear, per bridge.
	baseMu    sync.Mutex
	statsBase map[string]*statsSnapshot

	// ifw follows interfaces that come back for stopped ports (ifwatch.go).
	ifw *ifWatch

	// links are the kernel's links for the OVSDB write-back.
	links linkCache
	// started is closed once Start has set everything up, the database's
	// reconciler included: the management socket serves before that, and
	// a configuration command must know whether it goes through the
	// database (one that did not, while the reconciler was being started,
	// was undone by its first pass).
	started chan struct{}

	// db follows the OVSDB database of Options.DB (nil without); dbsrv
	// serves the embedded one, kept in dbfile (Options.EmbeddedDB).
	db     *ovsdb.Reconciler
	dbsrv  *dbserver.Server
	dbfile *dbserver.Database

	// ct is the connection tracker every bridge's datapath shares, and
	// ipf the settings of the fragment reassembly in front of it.
	ct  *conntrack.Tracker
	ipf *ipf.Settings
	// patches pairs the patch ports of every bridge by name.
	patches *patch.Hub

	// storeKick asks storeWriter to write config.json.
	storeKick chan struct{}

	stop chan struct{}
	wg   sync.WaitGroup
}

// Start opens the state directory, brings up every configured bridge and
// starts serving. A bridge or port that cannot be brought up is logged and
// left out rather than keeping the others down.
func Start(opts Options) (*Daemon, error) {
	if opts.StateDir == "" {
		return nil, errors.New("no state directory")
	}
	dir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	opts.StateDir = dir
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The metrics port is taken before the state directory is touched:
	// a second daemon started on a busy port must fail without having
	// created the directory or written its default bridge into it.
	var metricsLn net.Listener
	if opts.MetricsAddr != "" {
		metricsLn, err = net.Listen("tcp", opts.MetricsAddr)
		if err != nil {
			return nil, fmt.Errorf("metrics: %w (another vswitchd? choose another --metrics-addr, or \"\" for none)", err)
		}
	}
	served := false
	defer func() {
		if metricsLn != nil && !served {
			metricsLn.Close()
		}
	}()
	store, err := config.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := moveLegacyTables(dir, store, log); err != nil {
		store.Close()
		return nil, err
	}
	d := &Daemon{opts: opts, log: log, store: store, bridges: map[string]*bridge{},
		statsBase: map[string]*statsSnapshot{}, ifw: newIfWatch(), stop: make(chan struct{}), started: make(chan struct{}), storeKick: make(chan struct{}, 1),
		exitReq: make(chan struct{}), ct: conntrack.New(), ipf: ipf.NewSettings(), patches: patch.NewHub()}
	d.publish()
	if opts.DefaultBridge != "" && len(store.Get().Bridges) == 0 {
		if _, err := store.Update(func(c *config.Config) error {
			if c.Bridges == nil {
				c.Bridges = map[string]*config.Bridge{}
			}
			c.Bridges[opts.DefaultBridge] = &config.Bridge{FailMode: config.FailModeStandalone}
			return nil
		}); err != nil {
			store.Close()
			return nil, err
		}
	}
	if opts.DB == "" {
		if err := d.openEmbeddedDB(); err != nil {
			d.Close()
			return nil, err
		}
	}
	d.removeOrphanTaps(store.Get())
	saved, err := d.readSaved(store.Get())
	if err != nil {
		d.Close()
		return nil, err
	}
	d.mu.Lock()
	d.restore(store.Get(), saved)
	d.mu.Unlock()
	d.wg.Add(2)
	go d.watchLinks()
	go d.reviveLoop()

	d.mgmt = mgmt.NewServer()
	d.mgmt.Logf = func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) }
	d.mgmt.SetMaxConns(intOption(store.Get().OtherConfig, "mgmt-max-connections", mgmt.DefaultMaxConns))
	d.registerCommands()
	if err := d.mgmt.Listen(filepath.Join(dir, mgmt.SocketName)); err != nil {
		d.Close()
		return nil, err
	}
	if err := d.listenUnixctl(); err != nil {
		d.Close()
		return nil, err
	}
	if metricsLn != nil {
		ln := metricsLn
		mux := http.NewServeMux()
		col := metrics.NewCollector(d.metricsView)
		col.SetVersion(opts.Version)
		col.SetConntrack(func() *conntrack.Tracker { return d.ct })
		col.SetMgmt(func() metrics.Mgmt {
			s := d.mgmt.Stats()
			return metrics.Mgmt{Connections: s.Connections, Refused: s.Refused, IdleClosed: s.IdleClosed, TooLong: s.TooLong}
		})
		mux.Handle("/metrics", metrics.Handler(metrics.NewRegistry(col)))
		// net/http already backs off on accept errors (5 ms doubling to
		// 1 s); ErrorLog puts its "Accept error ... retrying" lines in
		// the daemon's log instead of bare stderr.
		d.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		served = true
		go d.http.Serve(ln)
		log.Info("metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	}
	// 0644 as pid files are; never through a symlink.
	if err := statedir.WriteFile(filepath.Join(dir, pidFileName), fmt.Appendf(nil, "%d\n", os.Getpid()), 0o644); err != nil {
		d.Close()
		return nil, fmt.Errorf("pid file: %w", err)
	}
	d.wg.Add(3)
	go d.flowSaver()
	go d.storeWriter()
	go d.memoryReturner()
	d.kickStore() // what adoptDatabase took from the database
	if err := d.followDB(); err != nil {
		d.Close()
		return nil, err
	}
	close(d.started)
	// The database's reconciler may be adding bridges already.
	d.mu.Lock()
	nbridges := len(d.bridges)
	d.mu.Unlock()
	log.Info("vswitchd started", "state-dir", dir, "bridges", nbridges, "version", opts.Version)
	return d, nil
}

// MetricsAddr is the address /metrics is served on, or "".
func (d *Daemon) MetricsAddr() string {
	if d.http == nil {
		return ""
	}
	return d.opts.MetricsAddr
}

// readSaved reads the saved tables of every bridge of c and checks its
// flow journal, before anything starts: like a corrupt config store, a
// damaged journal (*JournalDamage) or tables file stops the daemon rather
// than lose acknowledged flows, and is left as it is for inspection.
// With opts.Recover the daemon starts anyway: a damaged journal is
// replayed up to the damage (openJournal), and a bridge whose tables file
// cannot be read starts without it, the file moved aside.
func (d *Daemon) readSaved(c *config.Config) (map[string]*config.Tables, error) {
	saved := map[string]*config.Tables{}
	for _, name := range slices.Sorted(maps.Keys(c.Bridges)) {
		path := d.tablesPath(name)
		t, err := flowjournal.ReadSnapshot(path)
		if err != nil && d.opts.Recover {
			aside := path + ".damaged"
			d.log.Error("bridge starts without its saved tables (--recover)", "bridge", name, "err", err, "moved-to", aside)
			os.Rename(path, aside)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("bridge %q: %w (start with --recover to go on without them)", name, err)
		}
		saved[name] = t
		if d.opts.Recover {
			continue
		}
		if err := flowjournal.Check(d.journalPath(name)); err != nil {
			return nil, fmt.Errorf("bridge %q: %w", name, err)
		}
	}
	return saved, nil
}

// restore brings up every bridge of c with its saved tables, logging
// what fails.
func (d *Daemon) restore(c *config.Config, saved map[string]*config.Tables) {
	d.setMaxConns(c)
	if msg := config.PMDCountConflict(c.OtherConfig); msg != "" {
		d.log.Warn("stored PMD settings: " + msg)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Bridges)) {
		b, err := d.newBridge(c, c.Bridges[name], saved[name], true)
		if err != nil {
			d.log.Error("bridge not restored", "bridge", name, "err", err)
			continue
		}
		d.bridges[name] = b
	}
	d.publish()
}

// setMaxConns applies other_config:ct-max-conns, Open vSwitch's default
// when unset.
func (d *Daemon) setMaxConns(c *config.Config) {
	d.ct.SetMaxConns(int64(intOption(c.OtherConfig, "ct-max-conns", conntrack.DefaultMaxConns)))
}

// publish refreshes the readers' snapshot of the bridges and the names of
// the interfaces the daemon watches for (d.mu held).
func (d *Daemon) publish() {
	list := make([]*bridge, 0, len(d.bridges))
	for _, name := range slices.Sorted(maps.Keys(d.bridges)) {
		list = append(list, d.bridges[name])
	}
	d.view.Store(&list)
	d.publishWatchedNames()
}

// bridgeList is the readers' snapshot, sorted by name.
func (d *Daemon) bridgeList() []*bridge { return *d.view.Load() }

func (d *Daemon) metricsView() []metrics.Bridge {
	bs := d.bridgeList()
	out := make([]metrics.Bridge, len(bs))
	for i, b := range bs {
		out[i] = b.metricsView()
	}
	return out
}

func (b *bridge) metricsView() metrics.Bridge {
	return metrics.Bridge{Name: b.name, Datapath: b.dp, OpenFlow: b.of, PortName: b.portName, Carry: b.carried()}
}

// finalTotals reads the counters of a bridge closed for a rebuild (ports
// are its datapath's ports before Close), carry included: what its next
// datapath starts from. Ports nb no longer has are left out.
func (b *bridge) finalTotals(ports []*datapath.Port, nb *config.Bridge) (metrics.Totals, *statsSnapshot) {
	carry := metrics.CaptureBridge(b.metricsView(), ports)
	carry = carry.Keep(func(port string) bool { return nb.Ports[port] != nil || port == b.name })
	return carry, snapshotWithCarry(b, ports)
}

// change applies fn to the configuration: validated first (durable
// already: it comes from the database, which has it before the daemon;
// config.json gets it in the background, storeWriter), then made true in
// the running switch. If the running switch cannot
// follow (a port that cannot be opened), the previous configuration is
// committed and applied again, so a failed command changes nothing: what
// certainly fails is refused before anything is touched
// (checkPortsOpenable), and a bridge closed on the way (deleted, or
// rebuilt and failed) comes back from what it ran, not from the store, so
// its flows keep their counters and ages (retire, revive).
func (d *Daemon) change(fn func(c *config.Config) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.store.Get()
	next, err := d.store.ApplyUpdate(func(c *config.Config) error {
		if err := fn(c); err != nil {
			return err
		}
		if err := config.CheckPortLimits(old, c); err != nil {
			return err
		}
		return config.CheckMachine(old, c)
	})
	if err != nil {
		return err
	}
	d.retired = map[string]*retiredBridge{}
	if err := d.apply(old, next); err != nil {
		d.log.Warn("configuration change failed, rolling back", "err", err)
		if _, rerr := d.store.ApplyUpdate(func(c *config.Config) error { config.Replace(c, old); return nil }); rerr != nil {
			d.log.Error("rollback not stored", "err", rerr)
		}
		if rerr := d.apply(next, old); rerr != nil {
			d.log.Error("rollback not applied", "err", rerr)
		}
		d.bury(old)
		d.removeDroppedTaps(old, next, old)
		return err
	}
	d.bury(next)
	d.removeDroppedTaps(old, next, next)
	// The database holds the change; config.json (port numbers) catches
	// up in the background.
	d.kickStore()
	d.links.touch(changedInterfaces(old, next))
	if d.mgmt != nil {
		d.mgmt.SetMaxConns(intOption(next.OtherConfig, "mgmt-max-connections", mgmt.DefaultMaxConns))
	}
	return nil
}

// changedInterfaces names the bridges and ports whose configuration
// differs between old and next (added, removed or changed): their kernel
// interfaces may have changed with them.
func changedInterfaces(old, next *config.Config) []string {
	var names []string
	diff := func(a, b *config.Config) {
		for bn, nb := range b.Bridges {
			ob := a.Bridges[bn]
			if ob == nil || !maps.Equal(ob.OtherConfig, nb.OtherConfig) {
				names = append(names, bn)
			}
			for pn, np := range nb.Ports {
				if ob == nil || !reflect.DeepEqual(ob.Ports[pn], np) {
					names = append(names, pn)
				}
			}
		}
	}
	diff(old, next)
	diff(next, old)
	return names
}

// apply moves the running bridges from configuration old to next (d.mu held).
func (d *Daemon) apply(old, next *config.Config) error {
	defer d.publish()
	if old.OtherConfig["ct-max-conns"] != next.OtherConfig["ct-max-conns"] {
		d.setMaxConns(next)
	}
	if !sameSSL(old.SSL, next.SSL) {
		// Running bridges' ssl: and pssl: targets start over with the
		// new files; bridges built below get them at creation.
		for _, b := range d.bridges {
			b.of.Manager().SetTLS(tlsFiles(next.SSL))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.bridges)) {
		if next.Bridges[name] == nil {
			d.retired[name] = d.retire(d.bridges[name])
			d.log.Info("bridge deleted", "bridge", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(next.Bridges)) {
		nb := next.Bridges[name]
		b := d.bridges[name]
		if r := d.retired[name]; b == nil && r != nil {
			// A rollback: the bridge comes back as it ran, tables and
			// counters kept; a port that no longer opens waits.
			if err := d.revive(r, next, nb, true); err != nil {
				return err
			}
			// Its tables saved again: retire's snapshot found the bridge
			// gone from the configuration and removed them.
			d.bridges[name].snapshot(true)
			delete(d.retired, name)
			d.log.Info("bridge restored", "bridge", name)
			continue
		}
		if b == nil && old.Bridges[name] != nil {
			// Configured but not running: it could not be brought up
			// before (at start, on a full disk). It is tried again with
			// its saved tables; failing again leaves it down, logged,
			// and refuses nothing else: the change is not about it.
			d.retryBridge(next, nb)
			continue
		}
		if b == nil {
			// A bridge added starts empty, whatever an earlier bridge of
			// its name left behind (a crash before its deletion finished).
			d.discardSaved(name)
			nbr, err := d.newBridge(next, nb, nil, false)
			if err != nil {
				return err
			}
			d.bridges[name] = nbr
			d.log.Info("bridge added", "bridge", name)
			continue
		}
		if b.needsRebuild(next, nb) {
			if err := d.rebuild(b, old, next, nb); err != nil {
				return err
			}
			continue
		}
		if err := b.update(next, nb); err != nil {
			return err
		}
	}
	return nil
}

// retiredBridge is a closed bridge with what it ran: its tables with the
// flows' states (install time, last use, counters) and its datapath's
// ports (their final counters).
type retiredBridge struct {
	b                     *bridge
	flows, groups, meters []string
	states                map[string]pipeline.EntryState
	ports                 []*datapath.Port
}

// retire closes bridge b (d.mu held), saving its tables first, and keeps
// what revive needs to build it again. Its own interface and its journal
// stay until bury: a bridge brought back keeps the interface's addresses.
func (d *Daemon) retire(b *bridge) *retiredBridge {
	r := &retiredBridge{b: b, flows: flowLines(b.of), groups: groupLines(b.of), meters: meterLines(b.of), states: flowStates(b.of)}
	b.snapshot(true) // the journal starts empty, the store holds the tables
	r.ports = b.dp.Ports()
	b.close()
	delete(d.bridges, b.name)
	return r
}

// revive builds retired bridge r for nb under c (d.mu held), with r's
// tables, flows' states and port counters: the flows go on counting and
// ageing as if nothing happened.
func (d *Daemon) revive(r *retiredBridge, c *config.Config, nb *config.Bridge, lenient bool) error {
	carry, pmdCarry := r.b.finalTotals(r.ports, nb)
	// The running tables, not an older snapshot, come back first;
	// installTables then gives them their states.
	t := &config.Tables{Flows: r.flows, Groups: r.groups, Meters: r.meters}
	if t.Flows == nil {
		t.Flows = []string{}
	}
	nbr, err := d.newBridge(c, nb, t, lenient)
	if err != nil {
		return err
	}
	// Set before the bridge is published: no reader sees it without.
	nbr.carry.Store(&carry)
	nbr.pmdCarry.Store(pmdCarry)
	if err := nbr.installTables(r.flows, r.groups, r.meters, r.states); err != nil {
		d.log.Warn("tables not fully carried over", "bridge", nb.Name, "err", err)
	}
	d.bridges[nb.Name] = nbr
	return nil
}

// bury finishes a change whose configuration is now final (d.mu held):
// the retired bridges final does not have lose their own interface and
// their journal; one it has but that could not be brought back keeps
// them, for a restart.
func (d *Daemon) bury(final *config.Config) {
	for name, r := range d.retired {
		if final.Bridges[name] == nil {
			r.b.removeLocal()
			d.discardSaved(name)
		}
	}
	d.retired = nil
}

// retryBridge brings up bridge nb of configuration next, which is
// configured but not running, from its saved tables (d.mu held). A
// failure is logged and leaves it down until the next change or restart.
func (d *Daemon) retryBridge(next *config.Config, nb *config.Bridge) {
	t, err := flowjournal.ReadSnapshot(d.tablesPath(nb.Name))
	if err == nil {
		var b *bridge
		if b, err = d.newBridge(next, nb, t, true); err == nil {
			d.bridges[nb.Name] = b
			d.log.Info("bridge up again", "bridge", nb.Name)
			return
		}
	}
	d.log.Warn("bridge still not running", "bridge", nb.Name, "err", err)
}

// discardSaved removes the saved tables and the journal of a bridge that
// is not running.
func (d *Daemon) discardSaved(name string) {
	for _, path := range []string{d.tablesPath(name), d.journalPath(name)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.log.Warn("saved state of a deleted bridge not removed", "path", path, "err", err)
		}
	}
}

// rebuild replaces bridge b by one built for nb under next, carrying over
// its tables (flows with their counters and install times, groups,
// meters) and its ports' counters. The old datapath must close first (a
// kernel interface takes one XDP program or socket set of ours), so when
// the new one cannot be built (a port that will not open) nothing would
// run: b is then built again as it ran, under old, from the same tables
// and counters. The caller rolls the change back, and a command that
// failed leaves the bridge as it was rather than with every flow's
// counters and age back at zero, which rebuilding it from the store would.
func (d *Daemon) rebuild(b *bridge, old, next *config.Config, nb *config.Bridge) error {
	r := d.retire(b)
	if err := d.revive(r, next, nb, false); err != nil {
		if rerr := d.revive(r, old, b.cfg, true); rerr != nil {
			d.log.Error("bridge not restored after a failed rebuild", "bridge", b.name, "err", rerr)
			d.retired[b.name] = r // the rollback tries again
		} else {
			d.log.Warn("rebuild failed; bridge restored as it ran, tables and counters kept", "bridge", b.name, "err", err)
		}
		return err
	}
	d.log.Info("bridge rebuilt", "bridge", b.name)
	return nil
}

// freeMemoryAfter is the table size (flows) from which a snapshot is
// followed by returning freed memory to the system.
const freeMemoryAfter = 10_000

func sameSSL(a, b *config.SSL) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// flowSaver saves, every flowSaveInterval, the flow tables that changed.
func (d *Daemon) flowSaver() {
	defer d.wg.Done()
	t := time.NewTicker(flowSaveInterval)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			if d.store.Unwritten() != nil {
				d.kickStore() // a write that failed, tried again
			}
			big := false
			for _, b := range d.bridgeList() {
				n := b.snapshots.Load()
				b.snapshot(false)
				if b.snapshots.Load() != n && b.snapFlows.Load() >= freeMemoryAfter {
					big = true
				}
			}
			if big {
				// A snapshot of a large table leaves tens of MB of garbage
				// (its text, the encoded store) on top of what loading the
				// flows left; the Go runtime would keep the pages for a
				// while. Give them back once the saver is done with them.
				debug.FreeOSMemory()
			}
		}
	}
}

// storeWriteDelay is how long after a change config.json is written: after
// the database's write-back (which ovs-vsctl waits for) rather than on
// the same CPU at the same time, and once for a burst of changes.
const storeWriteDelay = 50 * time.Millisecond

func (d *Daemon) kickStore() {
	select {
	case d.storeKick <- struct{}{}:
	default:
	}
}

// storeWriter writes into config.json the changes made from the database
// (config.Store.ApplyUpdate keeps them in memory): the database has each
// durably before the switch sees it, and the daemon starts on the
// database's rows (adoptDatabase), so the file, which keeps the port
// numbers and serves when the database cannot be read, need not be
// written before a change applies. Close writes what is left.
func (d *Daemon) storeWriter() {
	defer d.wg.Done()
	failed := false
	for {
		select {
		case <-d.stop:
			return
		case <-d.storeKick:
		}
		select {
		case <-d.stop:
			return
		case <-time.After(storeWriteDelay):
		}
		err := d.store.Flush()
		switch {
		case err != nil && !failed:
			d.log.Warn("configuration applied, but not yet recorded in the state directory; retrying", "err", err)
		case err == nil && failed:
			d.log.Info("configuration recorded in the state directory again")
		}
		failed = err != nil
	}
}

// Close stops serving, saves pending flow tables, stops every bridge
// (PMDs flush their batches, ports are detached: XDP programs removed,
// sockets closed) and closes the store.
func (d *Daemon) Close() error {
	select {
	case <-d.stop:
		return nil
	default:
	}
	d.stopOVSDB()
	close(d.stop)
	d.wg.Wait()
	if d.mgmt != nil {
		d.mgmt.Close()
	}
	if d.ctl != nil {
		d.ctl.Close()
	}
	if d.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		d.http.Shutdown(ctx)
		cancel()
	}
	// A clean stop takes the switch's interfaces with it, as Open vSwitch
	// does; a crash, or a start that failed, leaves them for the next
	// start.
	clean := d.isStarted()
	d.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(d.bridges)) {
		b := d.bridges[name]
		b.snapshot(true)
		b.close()
		if clean {
			b.removeLocal()
		}
		delete(d.bridges, name)
	}
	if clean {
		for _, b := range d.store.Get().Bridges {
			for pn, p := range b.Ports {
				if p.Type == config.PortTypeInternal {
					d.removeTap(pn)
				}
			}
		}
	}
	d.publish()
	d.mu.Unlock()
	os.Remove(filepath.Join(d.opts.StateDir, pidFileName))
	if err := d.store.Flush(); err != nil {
		d.log.Warn("configuration not recorded in the state directory at stop; the database has it", "err", err)
	}
	return d.store.Close()
}

// isStarted reports whether Start finished.
func (d *Daemon) isStarted() bool {
	select {
	case <-d.started:
		return true
	default:
		return false
	}
}

// datapathSettings are the switch-wide settings a datapath is built with;
// a bridge is rebuilt when they change.
type datapathSettings struct {
	nPMD int
	cpus string
}

func switchDatapathSettings(c *config.Config) datapathSettings {
	oc := c.OtherConfig
	return datapathSettings{
		nPMD: pmdCount(oc),
		cpus: oc["pmd-cpu-mask"],
	}
}

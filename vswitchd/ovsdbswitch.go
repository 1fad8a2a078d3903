package vswitchd

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/netdev/linkwatch"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbserver"
)

// The embedded database's file and socket in the state directory.
const (
	EmbeddedDBName   = "conf.db"
	EmbeddedDBSocket = mgmt.DBSocketName
)

// dbSwitch is the daemon as the OVSDB reconciler drives it (ovsdb.Switch):
// the database's configuration goes through the same change path as a
// vsctl command (validated, stored, applied, rolled back on failure), so
// the flow journal and crash safety work the same whichever configures.
type dbSwitch struct{ d *Daemon }

var _ ovsdb.Switch = dbSwitch{}

func (s dbSwitch) Reconcile(fn func(*config.Config) error) error {
	return s.d.change(fn)
}

func (s dbSwitch) Config() *config.Config { return s.d.store.Get() }

func (s dbSwitch) Version() string { return s.d.opts.Version }

func (s dbSwitch) DatapathID(bridge string) string {
	b := s.d.runningBridge(bridge)
	if b == nil {
		return ""
	}
	id, ok := s.d.store.DatapathID(bridge)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%016x", id)
}

func (s dbSwitch) SetZoneTimeouts(m map[uint16]conntrack.Timeouts) {
	for id := range s.d.ct.ZoneTimeouts() {
		if _, ok := m[id]; !ok {
			s.d.ct.SetZoneTimeouts(id, nil)
		}
	}
	for id, to := range m {
		s.d.ct.SetZoneTimeouts(id, &to)
	}
}

// ControllerStatus reads the bridge's connection to target as
// ovs-vswitchd reports it: state ACTIVE when connected (a passive target:
// when a controller is connected to it), else BACKOFF or CONNECTING (IDLE
// for a listener nobody is connected to), and the last error.
func (s dbSwitch) ControllerStatus(bridge, target string) ovsdb.ControllerStatus {
	b := s.d.runningBridge(bridge)
	if b == nil {
		return ovsdb.ControllerStatus{}
	}
	var out ovsdb.ControllerStatus
	state, lastErr := "", ""
	for _, st := range b.of.Manager().Status() {
		if st.Target != target || st.Management {
			continue
		}
		if st.LastError != "" {
			lastErr = st.LastError
		}
		switch st.State {
		case ofconn.StateActive:
			out.Connected, state = true, "ACTIVE"
			switch st.Role {
			case ofpwire.ControllerRoleMaster:
				out.Role = "master"
			case ofpwire.ControllerRoleSlave:
				out.Role = "slave"
			default:
				out.Role = "other"
			}
		case ofconn.StateBackoff:
			if state == "" {
				state = "BACKOFF"
			}
		case ofconn.StateConnecting, ofconn.StateHandshake:
			if state == "" || state == "IDLE" {
				state = "CONNECTING"
			}
		case ofconn.StateListening:
			if state == "" {
				state = "IDLE"
			}
		}
	}
	if state == "" {
		return out
	}
	out.Status = map[string]string{"state": state}
	if lastErr != "" && !out.Connected {
		out.Status["last_error"] = lastErr
	}
	return out
}

func (s dbSwitch) PortStatus(bridge, name string, stats bool) ovsdb.PortStatus {
	b := s.d.runningBridge(bridge)
	if b == nil {
		return ovsdb.PortStatus{Error: "bridge not running"}
	}
	var st ovsdb.PortStatus
	if name == bridge {
		if !b.local {
			return ovsdb.PortStatus{Error: "the bridge's own interface is not running"}
		}
		st = ovsdb.PortStatus{Running: true, OFPort: dbconfig.LocalOFPort, AdminState: "up", LinkState: "up"}
	} else {
		p := b.portByName(name)
		if p == nil {
			why, ok := b.portError(name)
			if !ok {
				why = "not running"
			}
			return ovsdb.PortStatus{Error: why}
		}
		st = ovsdb.PortStatus{Running: true, OFPort: p.no, AdminState: "up", LinkState: upDown(p.dev.LinkUp())}
		if stats {
			c := p.dev.Stats()
			// The keys ovs-vswitchd writes for a userspace port.
			st.Stats = map[string]int{"rx_packets": int(c.RxPackets), "rx_bytes": int(c.RxBytes), "rx_dropped": int(c.RxDrops),
				"rx_errors": int(c.RxErrors), "tx_packets": int(c.TxPackets), "tx_bytes": int(c.TxBytes),
				"tx_dropped": int(c.TxDrops), "tx_errors": int(c.TxErrors)}
		}
		if tp, ok := p.dev.(*tunnel.Port); ok {
			st.Status = tp.Status()
		}
	}
	// The kernel's view where there is a kernel interface (not for a
	// vhost-user or tunnel port), from one dump of the links shared by
	// the write-back's calls (no ethtool).
	if p := b.portByName(name); p != nil && p.cfg.Type == config.PortTypePatch {
		return st // no kernel interface, whatever one of its name says
	}
	if a, ok := s.d.links.get(name); ok {
		st.Ifindex, st.MTU = a.Index, a.MTU
		st.MAC = a.MAC
		st.AdminState = upDown(a.Flags&unix.IFF_UP != 0)
		if name == bridge {
			st.LinkState = upDown(a.Flags&unix.IFF_RUNNING != 0)
		}
	}
	return st
}

// openEmbeddedDB opens the database the daemon serves itself when given
// none (conf.db in the state directory), creating it from the stored
// configuration the first time, and makes the stored configuration the
// database's before any bridge comes up: a change the database
// acknowledged is what the switch starts on, even when a full disk kept
// config.json from recording it before a crash.
func (d *Daemon) openEmbeddedDB() error {
	path := filepath.Join(d.opts.StateDir, EmbeddedDBName)
	db, created, err := dbserver.Open(path, d.log)
	if err != nil {
		return err
	}
	srv := dbserver.New(db, d.log)
	d.dbsrv, d.dbfile = srv, db
	if created {
		c := d.store.Get()
		ops, err := dbconfig.InitOps(c)
		if err != nil {
			return err
		}
		for _, r := range srv.Transact(ops) {
			if r != nil && r.Error != "" {
				return fmt.Errorf("database %s: writing the configuration into it: %s: %s", path, r.Error, r.Details)
			}
		}
		d.log.Info("database created from the configuration", "path", path, "bridges", len(c.Bridges))
		return nil
	}
	d.adoptDatabase(srv)
	return nil
}

// adoptDatabase makes the stored configuration the one the database's
// rows want, keeping the stored port numbers (a port new to the store
// takes the number the database reports for it, if free). What the switch
// refuses as a whole is left to the reconciler's first pass, which
// applies it row by row and reports each refusal in the database.
func (d *Daemon) adoptDatabase(db dbconfig.Lister) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := dbconfig.Read(ctx, db)
	if err == nil && rs.Dangling() != "" {
		err = fmt.Errorf("row %s referenced but missing", rs.Dangling())
	}
	if err != nil {
		d.log.Warn("database not read at start; starting on the stored configuration", "err", err)
		return
	}
	p := dbconfig.Wanted(rs)
	want := p.Config
	// A port the stored configuration does not know (added while it
	// could not be written) prefers the number the database reported for
	// it: flows and controllers already use that one.
	for u, at := range p.IfaceAt {
		ri, b := rs.Ifaces[u], want.Bridges[at.Bridge]
		if at.Local || ri == nil || ri.Ofport == nil || *ri.Ofport <= 0 || b == nil || b.Ports[at.Port] == nil {
			continue
		}
		b.Ports[at.Port].OFPort = uint32(*ri.Ofport)
	}
	old := d.store.Get()
	if _, err := d.store.ApplyUpdate(func(c *config.Config) error {
		config.Replace(c, want)
		if err := config.CheckPortLimits(old, c); err != nil {
			return err
		}
		return config.CheckMachine(old, c)
	}); err != nil {
		d.log.Warn("the database's configuration is not taken whole at start; the reconciler applies what it can", "err", err)
	}
}

// followDB serves the embedded database, if any, and follows the
// database the daemon was given (or that one).
func (d *Daemon) followDB() error {
	if d.dbsrv != nil {
		sock := filepath.Join(d.opts.StateDir, EmbeddedDBSocket)
		if err := d.dbsrv.ListenUnix(sock); err != nil {
			return fmt.Errorf("database socket: %w", err)
		}
		d.opts.DB = "unix:" + sock
		d.log.Info("serving the Open_vSwitch database", "db", d.opts.DB, "file", filepath.Join(d.opts.StateDir, EmbeddedDBName))
	}
	r, err := ovsdb.Start(d.opts.DB, dbSwitch{d}, d.log)
	if err != nil {
		return err
	}
	d.db = r
	return nil
}

// refreshDB has the write-back report ports names again soon (their
// interfaces came or went), read afresh from the kernel.
func (d *Daemon) refreshDB(names []string) {
	d.links.touch(names)
	select {
	case <-d.started: // d.db is set
	default:
		return // the first pass reports everything
	}
	if d.db != nil {
		d.db.Refresh()
	}
}

// stopOVSDB stops following the database before the bridges close, so
// that no reconcile runs against a closing daemon; then the embedded
// server stops.
func (d *Daemon) stopOVSDB() {
	if d.db != nil {
		d.db.Close()
	}
	if d.dbsrv != nil {
		d.dbsrv.Close()
		d.dbfile.Close()
	}
}

// linkCache holds the kernel's links by name from one RTM_GETLINK dump:
// a write-back asks for every port's state, and one request per port (a
// netlink socket each) made a pass O(ports) in system calls. A dump is
// reused for linkCacheAge; the links a configuration change touched (its
// ports and bridges, whose MTU, address or existence it may have changed)
// are read again, each alone (or all in one dump when a change touched
// many), the next time they are asked for, so a change's effect is read
// fresh without dumping a thousand links after every port added. The table is linkwatch's, updated in place: a dump
// through vishvananda/netlink was 8 MB of garbage with 1,000 links.
type linkCache struct {
	mu    sync.Mutex
	at    time.Time
	links linkwatch.Table
	stale map[string]bool
}

// linkCacheAge bounds how late a change made outside the switch (ip link
// set ... mtu, down) shows in the write-back: the operational state does
// not come from here (the port follows it live).
const linkCacheAge = 5 * time.Second

// linkCacheMaxStale is how many touched links are read one by one; past
// it the next get dumps them all: a transaction adding 1,000 internal
// ports made its write-back ask for 1,000 links one request (and one
// netlink socket) each, 60 ms of the daemon's CPU, where one dump of them
// all takes a few.
const linkCacheMaxStale = 32

// touch marks links to be read again at their next get.
func (c *linkCache) touch(names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stale == nil {
		c.stale = map[string]bool{}
	}
	for _, n := range names {
		c.stale[n] = true
	}
}

// get returns the link called name.
func (c *linkCache) get(name string) (linkwatch.Attrs, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) > linkCacheAge || len(c.stale) > linkCacheMaxStale {
		if err := c.links.Dump(); err != nil {
			return linkwatch.Attrs{}, false
		}
		c.at = time.Now()
		clear(c.stale)
	}
	if c.stale[name] {
		delete(c.stale, name)
		if l, err := linkByName(name); err == nil {
			a := l.Attrs()
			c.links.Set(name, linkwatch.Attrs{Index: a.Index, MTU: a.MTU, Flags: a.RawFlags, MAC: a.HardwareAddr.String()})
		} else {
			c.links.Delete(name)
		}
	}
	return c.links.Get(name)
}

package ovsdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/database/inmemory"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/ovn-kubernetes/libovsdb/server"

	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// fakeSwitch is a configuration in memory with the store's rules that
// matter here: validation, port numbers kept across changes, requests
// honoured.
type fakeSwitch struct {
	mu  sync.Mutex
	cfg *config.Config
	// refuse, if set, fails a change the real switch would (a port that
	// cannot open).
	refuse func(*config.Config) error
	// timeouts are the zones' timeout policies last set.
	timeouts map[uint16]conntrack.Timeouts
}

func (f *fakeSwitch) Reconcile(fn func(*config.Config) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := f.cfg.Clone()
	if err := fn(next); err != nil {
		return err
	}
	for bname, b := range next.Bridges {
		used := map[uint32]bool{}
		var ob *config.Bridge
		if f.cfg.Bridges != nil {
			ob = f.cfg.Bridges[bname]
		}
		for _, pname := range slices.Sorted(maps.Keys(b.Ports)) {
			p := b.Ports[pname]
			p.OFPort = 0
			if ob != nil && ob.Ports[pname] != nil {
				p.OFPort = ob.Ports[pname].OFPort
			}
			if p.OFPortRequest != 0 {
				if used[p.OFPortRequest] {
					return fmt.Errorf("port %q: ofport_request %d is already used", pname, p.OFPortRequest)
				}
				p.OFPort = p.OFPortRequest
			}
			if p.OFPort != 0 {
				used[p.OFPort] = true
			}
		}
		next := uint32(1)
		for _, pname := range slices.Sorted(maps.Keys(b.Ports)) {
			p := b.Ports[pname]
			if p.OFPort != 0 {
				continue
			}
			for used[next] {
				next++
			}
			p.OFPort = next
			used[next] = true
		}
	}
	if err := config.Validate(next); err != nil {
		return err
	}
	if f.refuse != nil {
		if err := f.refuse(next); err != nil {
			return err
		}
	}
	f.cfg = next
	return nil
}

func (f *fakeSwitch) Config() *config.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg.Clone()
}

func (f *fakeSwitch) PortStatus(bridge, port string, _ bool) PortStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.cfg.Bridges[bridge]
	if b == nil {
		return PortStatus{Error: "no such bridge"}
	}
	if port == bridge {
		return PortStatus{Running: true, AdminState: "up", LinkState: "up", MTU: 1500}
	}
	p := b.Ports[port]
	if p == nil {
		return PortStatus{Error: "not running"}
	}
	return PortStatus{Running: true, OFPort: p.OFPort, AdminState: "up", LinkState: "up", MAC: "02:00:00:00:00:01", MTU: 1500, Ifindex: 7,
		Stats: map[string]int{"rx_packets": 42}}
}

func (f *fakeSwitch) DatapathID(bridge string) string {
	if f.Config().Bridges[bridge] == nil {
		return ""
	}
	return "0000aabbccddeeff"
}

// ControllerStatus: a controller at this one target is connected, as
// master; the others are backing off.
func (f *fakeSwitch) ControllerStatus(_, target string) ControllerStatus {
	if target == "tcp:192.0.2.9:6653" {
		return ControllerStatus{Connected: true, Role: "master", Status: map[string]string{"state": "ACTIVE"}}
	}
	return ControllerStatus{Status: map[string]string{"state": "BACKOFF", "last_error": "Connection refused"}}
}
func (f *fakeSwitch) Version() string { return "test" }

func (f *fakeSwitch) SetZoneTimeouts(m map[uint16]conntrack.Timeouts) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.timeouts = maps.Clone(m)
}

func (f *fakeSwitch) bridge(name string) *config.Bridge { return f.Config().Bridges[name] }

// startServer serves an empty Open_vSwitch database in memory on a unix
// socket and returns its endpoint.
func startServer(t *testing.T) string {
	t.Helper()
	return serveAt(t, filepath.Join(t.TempDir(), "db.sock"))
}

// serveAt serves an empty Open_vSwitch database in memory at sock.
func serveAt(t *testing.T, sock string) string {
	t.Helper()
	dbModel, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	schema := vswitchdb.Schema()
	logger := logr.Discard()
	db := inmemory.NewDatabase(map[string]model.ClientDBModel{schema.Name: dbModel}, &logger)
	dbMod, errs := model.NewDatabaseModel(schema, dbModel)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	srv, err := server.NewOvsdbServer(db, &logger, dbMod)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve("unix", sock) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
	})
	waitFor(t, "the server to listen", func() bool { return srv.Ready() })
	return "unix:" + sock
}

// waitFor waits, bounded, for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// vsctl is the test's ovs-vsctl: a second client writing rows.
type vsctl struct {
	t   *testing.T
	cli client.Client
}

func newVsctl(t *testing.T, endpoint string) *vsctl {
	t.Helper()
	dbModel, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cli.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cli.Close)
	if _, err := cli.MonitorAll(ctx); err != nil {
		t.Fatal(err)
	}
	return &vsctl{t: t, cli: cli}
}

func (v *vsctl) transact(ops []ovsdb.Operation, err error) {
	v.t.Helper()
	if err != nil {
		v.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := v.cli.Transact(ctx, ops...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, ops)
	}
	if err != nil {
		v.t.Fatal(err)
	}
}

// create inserts rows of several tables (libovsdb's Create takes one).
func (v *vsctl) create(models ...model.Model) ([]ovsdb.Operation, error) {
	var ops []ovsdb.Operation
	for _, m := range models {
		o, err := v.cli.Create(m)
		if err != nil {
			return nil, err
		}
		ops = append(ops, o...)
	}
	return ops, nil
}

func (v *vsctl) ovs() vswitchdb.OpenvSwitch {
	var l []vswitchdb.OpenvSwitch
	if err := v.cli.List(context.Background(), &l); err != nil || len(l) != 1 {
		v.t.Fatalf("Open_vSwitch rows: %v %v", l, err)
	}
	return l[0]
}

func (v *vsctl) iface(name string) vswitchdb.Interface {
	v.t.Helper()
	var l []vswitchdb.Interface
	if err := v.cli.List(context.Background(), &l); err != nil {
		v.t.Fatal(err)
	}
	for _, i := range l {
		if i.Name == name {
			return i
		}
	}
	v.t.Fatalf("no interface %q", name)
	return vswitchdb.Interface{}
}

// bump makes ops a change ovs-vsctl would make: next_cfg incremented in
// the same transaction; it returns the value to wait for in cur_cfg.
func (v *vsctl) bump(ops []ovsdb.Operation) ([]ovsdb.Operation, int) {
	o := v.ovs()
	o.NextCfg++
	m, err := v.cli.Where(&o).Update(&o, &o.NextCfg)
	if err != nil {
		v.t.Fatal(err)
	}
	return append(ops, m...), o.NextCfg
}

// waitFollowing waits until the reconciler has written back once
// (ovs_version): its monitor is then set up. libovsdb's in-memory server
// may leave out of a monitor a transaction committed while the monitor
// is being set up, which Open vSwitch's ovsdb-server does not.
func (v *vsctl) waitFollowing() {
	v.t.Helper()
	waitFor(v.t, "the reconciler to follow the database", func() bool { return v.ovs().OVSVersion != nil })
}

func (v *vsctl) waitCurCfg(n int) {
	v.t.Helper()
	waitFor(v.t, fmt.Sprintf("cur_cfg %d", n), func() bool { return v.ovs().CurCfg >= n })
}

// portRows are the rows of a port of one interface; its UUIDs are named
// so that one transaction inserts them and the bridge referencing them.
func portRows(name, typ string, tag *int) (*vswitchdb.Port, *vswitchdb.Interface) {
	i := &vswitchdb.Interface{UUID: "i" + name, Name: name, Type: typ}
	return &vswitchdb.Port{UUID: "p" + name, Name: name, Interfaces: []string{i.UUID}, Tag: tag}, i
}

func intp(v int) *int { return &v }

// TestReconcileAppliesAndReports: a bridge made like ovs-vsctl add-br and
// add-port makes it runs; cur_cfg follows next_cfg; an unsupported type
// and a value the switch refuses are reported on their interface with
// ofport -1 while the rest applies.
func TestReconcileAppliesAndReports(t *testing.T) {
	endpoint := startServer(t)
	v := newVsctl(t, endpoint)
	v.transact(v.cli.Create(&vswitchdb.OpenvSwitch{UUID: "ovs"}))

	sw := &fakeSwitch{cfg: &config.Config{}}
	r, err := Start(endpoint, sw, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	v.waitFollowing()

	var models []model.Model
	var portUUIDs []string
	add := func(p *vswitchdb.Port, i *vswitchdb.Interface) {
		models = append(models, p, i)
		portUUIDs = append(portUUIDs, p.UUID)
	}
	add(portRows("br0", "internal", nil))
	add(portRows("p1", "", nil))
	add(portRows("p2", "stt", nil))
	// A patch port with a name longer than an interface's, and one
	// without its peer.
	pp, ip := portRows("patch-provnet-0123456789-to-br-int", "patch", nil)
	ip.Options = map[string]string{"peer": "patch-br-int-to-provnet-0123456789"}
	add(pp, ip)
	add(portRows("p5", "patch", nil))
	add(portRows("p3", "", intp(4095))) // the schema allows 4095, 802.1Q reserves it
	p4, i4 := portRows("p4", "vxlan", intp(10))
	i4.Options = map[string]string{"remote_ip": "192.0.2.1"}
	i4.OfportRequest = intp(9)
	add(p4, i4)
	ctlUp := &vswitchdb.Controller{UUID: "c1", Target: "tcp:192.0.2.9:6653", InactivityProbe: intp(0), MaxBackoff: intp(3000)}
	ctlDown := &vswitchdb.Controller{UUID: "c2", Target: "tcp:192.0.2.10:6653", InactivityProbe: intp(30000),
		ConnectionMode: new(vswitchdb.ControllerConnectionModeOutOfBand)}
	models = append(models, ctlUp, ctlDown)
	br := &vswitchdb.Bridge{UUID: "br", Name: "br0", DatapathType: "netdev", Ports: portUUIDs,
		OtherConfig: map[string]string{"mac-aging-time": "30"}, Controller: []string{"c1", "c2"}}
	ovs := v.ovs()
	ovs.Bridges = []string{br.UUID}
	ops, err := v.create(append(models, br)...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := v.cli.Where(&ovs).Update(&ovs, &ovs.Bridges)
	if err != nil {
		t.Fatal(err)
	}
	ops, want := v.bump(append(ops, m...))
	v.transact(ops, nil)
	v.waitCurCfg(want)

	b := sw.bridge("br0")
	if b == nil {
		t.Fatal("bridge br0 not applied")
	}
	if got := slices.Sorted(maps.Keys(b.Ports)); !slices.Equal(got, []string{"p1", "p4", "patch-provnet-0123456789-to-br-int"}) {
		t.Errorf("ports applied %v, want [p1 p4 patch-provnet-0123456789-to-br-int] (br0 is the bridge's own, p2, p3 and p5 refused)", got)
	}
	if p := b.Ports["patch-provnet-0123456789-to-br-int"]; p == nil || p.Type != config.PortTypePatch || p.Options["peer"] != "patch-br-int-to-provnet-0123456789" {
		t.Errorf("patch port applied as %+v", p)
	}
	if i := v.iface("p5"); deref(i.Ofport) != -1 || !strings.Contains(deref(i.Error), "needs options:peer") {
		t.Errorf("p5: ofport %v error %v, want -1 and the missing peer said", deref(i.Ofport), deref(i.Error))
	}
	if p := b.Ports["p4"]; p == nil || p.Type != config.PortTypeVXLAN || p.OFPort != 9 || p.Tag != 10 || p.Options["remote_ip"] != "192.0.2.1" {
		t.Errorf("p4 applied as %+v", p)
	}
	if b.OtherConfig["mac-aging-time"] != "30" {
		t.Errorf("bridge other_config %v", b.OtherConfig)
	}
	if !slices.Equal(b.Controllers, []string{"tcp:192.0.2.10:6653", "tcp:192.0.2.9:6653"}) {
		t.Errorf("controllers applied %v", b.Controllers)
	}
	var ctls []vswitchdb.Controller
	if err := v.cli.List(context.Background(), &ctls); err != nil {
		t.Fatal(err)
	}
	for _, c := range ctls {
		up := c.Target == "tcp:192.0.2.9:6653"
		if c.IsConnected != up {
			t.Errorf("controller %s is_connected %v", c.Target, c.IsConnected)
		}
		if want := map[bool]string{true: "ACTIVE", false: "BACKOFF"}[up]; c.Status["state"] != want || (c.Role != nil) != up {
			t.Errorf("controller %s: status %v role %v, want state %s and a role only when connected", c.Target, c.Status, deref(c.Role), want)
		}
	}
	wantOpts := map[string]config.ControllerOptions{"tcp:192.0.2.9:6653": {InactivityProbe: -1, MaxBackoff: 3000},
		"tcp:192.0.2.10:6653": {InactivityProbe: 30000}}
	if !maps.Equal(b.ControllerOptions, wantOpts) {
		t.Errorf("controller options applied %v, want %v", b.ControllerOptions, wantOpts)
	}
	for name, want := range map[string]int{"br0": dbconfig.LocalOFPort, "p1": 1, "p4": 9} {
		i := v.iface(name)
		if i.Ofport == nil || *i.Ofport != want || i.Error != nil {
			t.Errorf("interface %s: ofport %v error %v, want %d and no error", name, deref(i.Ofport), deref(i.Error), want)
		}
	}
	if i := v.iface("p1"); deref(i.LinkState) != "up" || deref(i.MTU) != 1500 || deref(i.Ifindex) != 7 {
		t.Errorf("p1 run-time columns: link_state %v mtu %v ifindex %v", deref(i.LinkState), deref(i.MTU), deref(i.Ifindex))
	}
	waitFor(t, "p1's statistics", func() bool { return v.iface("p1").Statistics["rx_packets"] == 42 })
	i := v.iface("p2")
	if deref(i.Ofport) != -1 || deref(i.Error) != "unsupported interface type: stt" {
		t.Errorf("p2: ofport %v error %v, want -1 and unsupported interface type: stt", deref(i.Ofport), deref(i.Error))
	}
	i = v.iface("p3")
	if deref(i.Ofport) != -1 || !strings.Contains(deref(i.Error), "tag 4095") {
		t.Errorf("p3: ofport %v error %v, want -1 and the tag refused", deref(i.Ofport), deref(i.Error))
	}
	o := v.ovs()
	if !slices.Contains(o.IfaceTypes, "vxlan") || !slices.Contains(o.IfaceTypes, "patch") || slices.Contains(o.IfaceTypes, "stt") || !slices.Equal(o.DatapathTypes, dbconfig.DatapathTypes) || deref(o.OVSVersion) != "test" || deref(o.DbVersion) != "8.3.1" {
		t.Errorf("Open_vSwitch: iface_types %v datapath_types %v ovs_version %v db_version %v", o.IfaceTypes, o.DatapathTypes, deref(o.OVSVersion), deref(o.DbVersion))
	}

	// Fixing p2's type applies it with the rest untouched.
	i2 := new(vswitchdb.Interface)
	*i2 = v.iface("p2")
	i2.Type = ""
	ops, err = v.cli.Where(i2).Update(i2, &i2.Type)
	if err != nil {
		t.Fatal(err)
	}
	ops, want = v.bump(ops)
	v.transact(ops, nil)
	v.waitCurCfg(want)
	b = sw.bridge("br0")
	if b.Ports["p2"] == nil || b.Ports["p1"].OFPort != 1 {
		t.Errorf("after fixing p2: ports %v", slices.Sorted(maps.Keys(b.Ports)))
	}
	if i := v.iface("p2"); deref(i.Ofport) <= 0 || i.Error != nil {
		t.Errorf("p2 after fix: ofport %v error %v", deref(i.Ofport), deref(i.Error))
	}
}

// TestReconcileQuiescesAfterWriteBack: the write-back's own update does
// not make the reconciler apply again, endlessly.
func TestReconcileQuiescesAfterWriteBack(t *testing.T) {
	endpoint := startServer(t)
	v := newVsctl(t, endpoint)
	v.transact(v.cli.Create(&vswitchdb.OpenvSwitch{UUID: "ovs"}))
	sw := &fakeSwitch{cfg: &config.Config{}}
	r, err := Start(endpoint, sw, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	v.waitFollowing()
	p, i := portRows("p1", "", nil)
	br := &vswitchdb.Bridge{UUID: "br", Name: "br1", Ports: []string{p.UUID}}
	ovs := v.ovs()
	ovs.Bridges = []string{br.UUID}
	ops, err := v.create(p, i, br)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := v.cli.Where(&ovs).Update(&ovs, &ovs.Bridges)
	ops, want := v.bump(append(ops, m...))
	v.transact(ops, nil)
	v.waitCurCfg(want)
	n, w := r.Stats()
	// A change of next_cfg alone is one write-back (cur_cfg) and no
	// apply: had the write-back's own update made the loop write or
	// apply again, the counts would have run ahead.
	ops, want = v.bump(nil)
	v.transact(ops, nil)
	v.waitCurCfg(want)
	if got, gotW := r.Stats(); got != n || gotW != w+1 {
		t.Errorf("after a change of next_cfg alone: %d applies and %d writes, want 0 and 1", got-n, gotW-w)
	}
	// Passes without an update (the once-a-second resync) write back
	// against the rows as the last write left them: they neither read
	// the database nor write what is already there.
	r.mu.Lock()
	passes, reads := r.passes, r.reads
	r.mu.Unlock()
	waitFor(t, "two more passes", func() bool { return r.passCount() >= passes+2 })
	r.mu.Lock()
	gotReads := r.reads
	r.mu.Unlock()
	if _, gotW := r.Stats(); gotReads != reads || gotW != w+1 {
		t.Errorf("quiet passes: %d reads and %d writes, want none", gotReads-reads, gotW-w-1)
	}
}

// TestReconcileRowByRowWhenRefused: when the switch refuses the whole
// (two ports asking for one OpenFlow number), the others apply and the
// refused one says why.
func TestReconcileRowByRowWhenRefused(t *testing.T) {
	endpoint := startServer(t)
	v := newVsctl(t, endpoint)
	v.transact(v.cli.Create(&vswitchdb.OpenvSwitch{UUID: "ovs"}))
	sw := &fakeSwitch{cfg: &config.Config{}, refuse: func(c *config.Config) error {
		for _, b := range c.Bridges {
			if b.Ports["bad"] != nil {
				return errors.New("port \"bad\": cannot open")
			}
		}
		return nil
	}}
	r, err := Start(endpoint, sw, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	v.waitFollowing()
	pa, ia := portRows("good", "", nil)
	pb, ib := portRows("bad", "", nil)
	br := &vswitchdb.Bridge{UUID: "br", Name: "br2", Ports: []string{pa.UUID, pb.UUID}}
	ovs := v.ovs()
	ovs.Bridges = []string{br.UUID}
	ops, err := v.create(pa, ia, pb, ib, br)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := v.cli.Where(&ovs).Update(&ovs, &ovs.Bridges)
	ops, want := v.bump(append(ops, m...))
	v.transact(ops, nil)
	v.waitCurCfg(want)
	b := sw.bridge("br2")
	if b == nil || b.Ports["good"] == nil || b.Ports["bad"] != nil {
		t.Fatalf("applied %+v, want br2 with port good only", b)
	}
	if i := v.iface("bad"); deref(i.Ofport) != -1 || !strings.Contains(deref(i.Error), "cannot open") {
		t.Errorf("bad: ofport %v error %v", deref(i.Ofport), deref(i.Error))
	}
	if i := v.iface("good"); deref(i.Ofport) != 1 {
		t.Errorf("good: ofport %v", deref(i.Ofport))
	}
}

// deref is *p, or T's zero value when the column is empty.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestUnsupportedDatapathType: a bridge of another datapath type is left
// out, with its interfaces saying why.
func TestUnsupportedDatapathType(t *testing.T) {
	p, i := portRows("q1", "", nil)
	rs := &dbconfig.Rows{OVS: &vswitchdb.OpenvSwitch{Bridges: []string{"b"}, NextCfg: 3},
		Bridges: map[string]*vswitchdb.Bridge{"b": {UUID: "b", Name: "brx", DatapathType: "dpdk", Ports: []string{p.UUID}}},
		Ports:   map[string]*vswitchdb.Port{p.UUID: p}, Ifaces: map[string]*vswitchdb.Interface{i.UUID: i}}
	pl := dbconfig.Wanted(rs)
	if len(pl.Config.Bridges) != 0 || !strings.Contains(pl.IfaceErr[i.UUID], "datapath_type") || pl.NextCfg != 3 {
		t.Errorf("plan %+v, errors %v", pl.Config, pl.IfaceErr)
	}
}

// testLog sends the reconciler's log to the test's.
func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestWantedConfigRefusals: each row the switch cannot run is left out
// with its reason on its interfaces, the others kept.
func TestWantedConfigRefusals(t *testing.T) {
	ifs := map[string]*vswitchdb.Interface{}
	ports := map[string]*vswitchdb.Port{}
	port := func(uuid, name string, ifaces ...*vswitchdb.Interface) string {
		p := &vswitchdb.Port{UUID: uuid, Name: name}
		for _, i := range ifaces {
			ifs[i.UUID] = i
			p.Interfaces = append(p.Interfaces, i.UUID)
		}
		ports[p.UUID] = p
		return p.UUID
	}
	iface := func(uuid, name, typ string) *vswitchdb.Interface {
		return &vswitchdb.Interface{UUID: uuid, Name: name, Type: typ}
	}
	b1 := &vswitchdb.Bridge{UUID: "b1", Name: "bra", Ports: []string{
		port("p1", "bra", iface("i-local", "bra", "")), // the bridge's own, not internal
		port("p2", "bond0", iface("i-bond-a", "eth8", ""), iface("i-bond-b", "eth9", "")),
		port("p3", "pn", iface("i-named", "other", "")),
		port("p4", "dup", iface("i-dup1", "dup", "")),
		port("p5", "ok1", iface("i-ok1", "ok1", "internal")),
		port("p8", "nt", iface("i-nt", "nt", "")),
		port("p9", "acc", iface("i-acc", "acc", "")),
	}}
	b1.Protocols = []string{"OpenFlow15", "OpenFlow11", "OpenFlow10"}
	b2 := &vswitchdb.Bridge{UUID: "b2", Name: "brb", Protocols: []string{"OpenFlow12"}, Ports: []string{
		port("p6", "dup", iface("i-dup2", "dup", "")), // also in bra
		port("p7", "bra", iface("i-brname", "bra", "")),
	}}
	rs := &dbconfig.Rows{OVS: &vswitchdb.OpenvSwitch{Bridges: []string{"b1", "b2"}},
		Bridges: map[string]*vswitchdb.Bridge{"b1": b1, "b2": b2}, Ports: ports, Ifaces: ifs}
	ports["p8"].VLANMode = new(vswitchdb.PortVLANModeNativeTagged)
	ports["p8"].Tag = intp(5)
	ports["p9"].VLANMode = new(vswitchdb.PortVLANModeAccess)
	ports["p9"].Tag, ports["p9"].Trunks = intp(7), []int{8, 9} // access ignores trunks
	ifs["i-ok1"].MTURequest = intp(9000)
	pl := dbconfig.Wanted(rs)
	for uuid, want := range map[string]string{
		"i-local":  "must be of type internal",
		"i-bond-a": "bonds",
		"i-bond-b": "bonds",
		"i-named":  "differs from its port",
		"i-dup2":   `already used in bridge "bra"`,
		"i-brname": `already used in bridge "bra"`,
		"i-nt":     "vlan_mode native-tagged is not supported yet",
	} {
		if got := pl.IfaceErr[uuid]; !strings.Contains(got, want) {
			t.Errorf("%s: error %q, want it to say %q", uuid, got, want)
		}
	}
	for _, uuid := range []string{"i-dup1", "i-ok1"} {
		if e, ok := pl.IfaceErr[uuid]; ok {
			t.Errorf("%s refused: %s", uuid, e)
		}
	}
	if a := pl.Config.Bridges["bra"]; a == nil || len(a.Ports) != 3 || a.Ports["dup"] == nil || a.Ports["ok1"] == nil {
		t.Errorf("bridge bra applied as %+v", a)
	} else if p := a.Ports["acc"]; p == nil || p.Tag != 7 || p.Trunks != nil {
		t.Errorf("access port applied as %+v, want tag 7 and no trunks", p)
	} else if a.Ports["ok1"].MTURequest != 9000 {
		t.Errorf("ok1's mtu_request applied as %d", a.Ports["ok1"].MTURequest)
	} else if !slices.Equal(a.Protocols, []string{"OpenFlow10", "OpenFlow15"}) {
		t.Errorf("bridge bra's protocols applied as %v, want OpenFlow10 and OpenFlow15", a.Protocols)
	}
	// What is applied but not honoured is said, not ignored silently.
	for _, want := range []string{`bridge "bra": protocols: OpenFlow11 is not supported`, `bridge "brb": protocols [OpenFlow12]: none is supported`} {
		if !slices.ContainsFunc(pl.Problems, func(m string) bool { return strings.Contains(m, want) }) {
			t.Errorf("problems %q, want one saying %q", pl.Problems, want)
		}
	}
	if b := pl.Config.Bridges["brb"]; b == nil || len(b.Ports) != 0 {
		t.Errorf("bridge brb applied as %+v", b)
	}
}

// TestReconcileWaitsForTheServer: a daemon started before its database
// server keeps running and follows the database once it is there.
func TestReconcileWaitsForTheServer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "db.sock")
	sw := &fakeSwitch{cfg: &config.Config{}}
	r, err := Start("unix:"+sock, sw, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	endpoint := serveAt(t, sock)
	v := newVsctl(t, endpoint)
	v.transact(v.create(&vswitchdb.OpenvSwitch{UUID: "ovs"}))
	v.waitFollowing()
	ovs := v.ovs()
	ovs.Bridges = []string{"br"}
	m, err := v.cli.Where(&ovs).Update(&ovs, &ovs.Bridges)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := v.create(&vswitchdb.Bridge{UUID: "br", Name: "brlate"})
	if err != nil {
		t.Fatal(err)
	}
	ops, want := v.bump(append(ops, m...))
	v.transact(ops, nil)
	v.waitCurCfg(want)
	if sw.bridge("brlate") == nil {
		t.Error("bridge of a database that came late not applied")
	}
}

// TestWantedSwitchSettings: Open_vSwitch other_config and SSL apply when
// valid; refused, they are said and the rest still applies.
func TestWantedSwitchSettings(t *testing.T) {
	ssl := &vswitchdb.SSL{UUID: "s", PrivateKey: "/k.pem", Certificate: "/c.pem", CaCert: "/ca.pem"}
	rs := &dbconfig.Rows{OVS: &vswitchdb.OpenvSwitch{SSL: new("s"), Bridges: []string{"b"},
		OtherConfig: map[string]string{"pmd-sleep-max": "50", "n-pmd": "1"}},
		Bridges: map[string]*vswitchdb.Bridge{"b": {UUID: "b", Name: "brs", OtherConfig: map[string]string{"mac-aging-time": "60"}}},
		SSL:     map[string]*vswitchdb.SSL{"s": ssl}}
	pl := dbconfig.Wanted(rs)
	if pl.Config.OtherConfig["pmd-sleep-max"] != "50" || pl.Config.SSL == nil || pl.Config.SSL.CACert != "/ca.pem" || len(pl.Problems) != 0 {
		t.Errorf("valid settings: other_config %v ssl %+v problems %q", pl.Config.OtherConfig, pl.Config.SSL, pl.Problems)
	}
	rs.OVS.OtherConfig["pmd-sleep-max"] = "forever"
	rs.Bridges["b"].OtherConfig["mac-table-size"] = "0"
	ssl.PrivateKey = "k.pem"
	pl = dbconfig.Wanted(rs)
	// Each refused value is left out alone: the other keys, the
	// bridge and its other keys apply.
	if !maps.Equal(pl.Config.OtherConfig, map[string]string{"n-pmd": "1"}) || pl.Config.SSL != nil || len(pl.Problems) != 3 {
		t.Errorf("refused settings: other_config %v ssl %+v problems %q", pl.Config.OtherConfig, pl.Config.SSL, pl.Problems)
	}
	if b := pl.Config.Bridges["brs"]; b == nil || !maps.Equal(b.OtherConfig, map[string]string{"mac-aging-time": "60"}) {
		t.Errorf("bridge with a refused other_config key applied as %+v", b)
	}
}

// TestReconcileErrorLoggedOnce: a database without its Open_vSwitch row
// (before ovs-vsctl init) is said once, not at every pass, and its end
// is said too.
func TestReconcileErrorLoggedOnce(t *testing.T) {
	endpoint := startServer(t)
	var buf syncBuf
	r, err := Start(endpoint, &fakeSwitch{cfg: &config.Config{}}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	waitFor(t, "three passes", func() bool { return r.passCount() >= 3 })
	if n := strings.Count(buf.String(), "no Open_vSwitch row"); n != 1 {
		t.Errorf("the missing row logged %d times, want once:\n%s", n, buf.String())
	}
	v := newVsctl(t, endpoint)
	v.transact(v.create(&vswitchdb.OpenvSwitch{UUID: "ovs", NextCfg: 1}))
	v.waitCurCfg(1)
	waitFor(t, "the recovery logged", func() bool { return strings.Contains(buf.String(), "succeeds again") })
}

// syncBuf is a log destination the test reads while the reconciler writes.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestReconcileBridgeByBridgeWhenRefused: a bridge the switch cannot
// build leaves the other bridges and their ports applied, and its own
// interfaces say why.
func TestReconcileBridgeByBridgeWhenRefused(t *testing.T) {
	endpoint := startServer(t)
	v := newVsctl(t, endpoint)
	v.transact(v.create(&vswitchdb.OpenvSwitch{UUID: "ovs"}))
	sw := &fakeSwitch{cfg: &config.Config{}, refuse: func(c *config.Config) error {
		if c.Bridges["brbad"] != nil {
			return errors.New("bridge \"brbad\": cannot build")
		}
		return nil
	}}
	r, err := Start(endpoint, sw, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	v.waitFollowing()
	pg, ig := portRows("pgood", "", nil)
	pb, ib := portRows("pbad", "", nil)
	good := &vswitchdb.Bridge{UUID: "bg", Name: "brgood", Ports: []string{pg.UUID}}
	bad := &vswitchdb.Bridge{UUID: "bb", Name: "brbad", Ports: []string{pb.UUID}}
	ovs := v.ovs()
	ovs.Bridges = []string{good.UUID, bad.UUID}
	ovs.OtherConfig = map[string]string{"pmd-sleep-max": "40"}
	ops, err := v.create(pg, ig, pb, ib, good, bad)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := v.cli.Where(&ovs).Update(&ovs, &ovs.Bridges, &ovs.OtherConfig)
	ops, want := v.bump(append(ops, m...))
	v.transact(ops, nil)
	v.waitCurCfg(want)
	c := sw.Config()
	if c.Bridges["brbad"] != nil || c.Bridges["brgood"] == nil || c.Bridges["brgood"].Ports["pgood"] == nil || c.OtherConfig["pmd-sleep-max"] != "40" {
		t.Fatalf("applied %+v, want brgood with its port and the settings, no brbad", c)
	}
	if i := v.iface("pbad"); deref(i.Ofport) != -1 || !strings.Contains(deref(i.Error), "cannot build") {
		t.Errorf("pbad: ofport %v error %q", deref(i.Ofport), deref(i.Error))
	}
	if i := v.iface("pgood"); deref(i.Ofport) != 1 || i.Error != nil {
		t.Errorf("pgood: ofport %v error %v", deref(i.Ofport), deref(i.Error))
	}
}

// TestReconcileConntrackSettings: a Datapath row as "ovs-vsctl
// add-zone-tp netdev zone=5 ..." makes it gets the datapath's
// capabilities written (ct_zero_snat, ct_flush: what ovn-controller
// reads) and its zone's timeout policy applied; a key the tracker cannot
// honour is reported, and removing the policy puts the zone back on the
// defaults.
func TestReconcileConntrackSettings(t *testing.T) {
	endpoint := startServer(t)
	v := newVsctl(t, endpoint)
	v.transact(v.cli.Create(&vswitchdb.OpenvSwitch{UUID: "ovs"}))
	sw := &fakeSwitch{cfg: &config.Config{}}
	r, err := Start(endpoint, sw, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	v.waitFollowing()
	tp := &vswitchdb.CTTimeoutPolicy{UUID: "tp", Timeouts: map[string]int{"udp_first": 5, "tcp_established": 60, "tcp_unack": 9}}
	zone := &vswitchdb.CTZone{UUID: "z5", TimeoutPolicy: &tp.UUID}
	dp := &vswitchdb.Datapath{UUID: "dp", CTZones: map[int]string{5: zone.UUID}}
	ops, err := v.create(tp, zone, dp)
	if err != nil {
		t.Fatal(err)
	}
	ovs := v.ovs()
	ovs.Datapaths = map[string]string{"netdev": dp.UUID}
	m, _ := v.cli.Where(&ovs).Update(&ovs, &ovs.Datapaths)
	ops, want := v.bump(append(ops, m...))
	v.transact(ops, nil)
	v.waitCurCfg(want)
	waitFor(t, "Datapath.capabilities", func() bool {
		var dps []vswitchdb.Datapath
		if err := v.cli.List(context.Background(), &dps); err != nil || len(dps) != 1 {
			return false
		}
		c := dps[0].Capabilities
		return c["ct_zero_snat"] == "true" && c["ct_flush"] == "true" && c["recirc"] == "true" &&
			c["check_pkt_len"] == "false" && dps[0].DatapathVersion == "<built-in>"
	})
	sw.mu.Lock()
	got := sw.timeouts
	sw.mu.Unlock()
	def := conntrack.DefaultTimeouts()
	if to, ok := got[5]; !ok || len(got) != 1 || to.UDPFirst != 5e9 || to.TCPEstablished != 60e9 || to.UDPMultiple != def.UDPMultiple {
		t.Errorf("zone timeouts %+v", got)
	}
	// The policy's row goes: the zone has the defaults again.
	var dps []vswitchdb.Datapath
	if err := v.cli.List(context.Background(), &dps); err != nil || len(dps) != 1 {
		t.Fatalf("datapaths %v %v", dps, err)
	}
	dpRow := dps[0]
	dpRow.CTZones = map[int]string{}
	m, _ = v.cli.Where(&dpRow).Update(&dpRow, &dpRow.CTZones)
	ops, want = v.bump(m)
	v.transact(ops, nil)
	v.waitCurCfg(want)
	waitFor(t, "the zone's policy removed", func() bool {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		return len(sw.timeouts) == 0
	})
}

// TestRuntimeOnly: an update of only the columns the switch writes back
// starts no pass; one that also changes a configured column does.
func TestRuntimeOnly(t *testing.T) {
	one, two := 1, 2
	name := "p1"
	old := &vswitchdb.Interface{UUID: "u", Name: name, Ofport: &one, Statistics: map[string]int{"rx_packets": 1}}
	echo := &vswitchdb.Interface{UUID: "u", Name: name, Ofport: &two, Statistics: map[string]int{"rx_packets": 5}, Error: new("x")}
	if !runtimeOnly(old, echo) {
		t.Error("ofport, statistics and error changed: not taken for a write-back's echo")
	}
	conf := *echo
	conf.MTURequest = &two
	if runtimeOnly(old, &conf) {
		t.Error("mtu_request changed with them: taken for an echo")
	}
	o := &vswitchdb.OpenvSwitch{UUID: "o", NextCfg: 3, CurCfg: 2}
	if n := (&vswitchdb.OpenvSwitch{UUID: "o", NextCfg: 3, CurCfg: 3}); !runtimeOnly(o, n) {
		t.Error("cur_cfg changed: not an echo")
	}
	if n := (&vswitchdb.OpenvSwitch{UUID: "o", NextCfg: 4, CurCfg: 2}); runtimeOnly(o, n) {
		t.Error("next_cfg changed: taken for an echo")
	}
	if runtimeOnly(&vswitchdb.Port{UUID: "p"}, &vswitchdb.Port{UUID: "p"}) {
		t.Error("a Port update taken for an echo (the switch writes no Port column)")
	}
}

// TestUpdateOp: the write-back's update is the one libovsdb's Update
// makes: the same row (its mapper's NewRow of the fields) for the model's
// uuid.
func TestUpdateOp(t *testing.T) {
	cdb, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	schema := vswitchdb.Schema()
	dbm, errs := model.NewDatabaseModel(schema, cdb)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	one := 7
	ri := &vswitchdb.Interface{UUID: "2b64caf0-4f3d-4569-a40c-8b6f5abc6fb6", Name: "p1", Ofport: &one,
		Statistics: map[string]int{"rx_packets": 3}, AdminState: new("up")}
	fields := []any{&ri.Ofport, &ri.Statistics, &ri.Error, &ri.AdminState}
	got, err := updateOp(&schema, ri, fields...)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dbm.NewModelInfo(ri)
	if err != nil {
		t.Fatal(err)
	}
	row, err := dbm.Mapper.NewRow(info, fields...)
	if err != nil {
		t.Fatal(err)
	}
	want := ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Interface", Row: row,
		Where: []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: ri.UUID})}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %#v\nwant %#v", got, want)
	}
	if _, err := updateOp(&schema, ri, &one); err == nil {
		t.Error("a pointer outside the model was taken for a column")
	}
}

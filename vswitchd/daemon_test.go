package vswitchd

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/vswitch-go/vswitch/vswitchd/flowjournal"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ctl/dbctl"
	"github.com/vswitch-go/vswitch/ctl/ofctl"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// call runs one management command against a daemon in this process.
func call(t *testing.T, d *Daemon, args ...string) (*mgmt.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, ok := dbctl.Lookup(args[0]); ok {
		return callDB(ctx, t, d, [][]string{args})
	}
	c, err := mgmt.Dial(ctx, d.opts.StateDir+"/"+mgmt.SocketName)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.Call(ctx, args[0], args[1:]...)
}

func mustCall(t *testing.T, d *Daemon, args ...string) string {
	t.Helper()
	r, err := call(t, d, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r.Text
}

// callChain runs configuration commands as one transaction.
func callChain(t *testing.T, d *Daemon, cmds [][]string) (*mgmt.Response, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return callDB(ctx, t, d, cmds)
}

// callDB runs configuration commands as vsctl does: one transaction on
// the daemon's database, waiting until the daemon has applied it.
func callDB(ctx context.Context, t *testing.T, d *Daemon, cmds [][]string) (*mgmt.Response, error) {
	t.Helper()
	c, err := dbctl.Dial(ctx, d.opts.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Run(ctx, cmds, dbctl.Options{})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	return &mgmt.Response{Text: r.Text, Data: b}, nil
}

// savedFlows are the flows saved in bridge br's tables file.
func savedFlows(t *testing.T, d *Daemon, br string) []string {
	t.Helper()
	tb, err := flowjournal.ReadSnapshot(d.tablesPath(br))
	if err != nil {
		t.Fatal(err)
	}
	if tb == nil {
		return nil
	}
	return tb.Flows
}

// TestDaemonConfigCommands runs the configuration commands on a daemon in
// this process (so -race sees the daemon's goroutines), with bridges that
// have no ports, and checks that a restart brings everything back.
func TestDaemonConfigCommands(t *testing.T) {
	dir := t.TempDir()
	d, err := Start(Options{StateDir: dir, DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustCall(t, d, "list-br"); got != "br0\n" {
		t.Fatalf("default bridge: %q", got)
	}
	mustCall(t, d, "add-br", "br1", "fail_mode=secure", "other_config:datapath-id=00000000000000aa")
	mustCall(t, d, "add-br", "br1", "--may-exist")
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:tx-flush-interval=50", "other_config:pmd-sleep-max=20")
	mustCall(t, d, "set", "Bridge", "br1", "other_config:mac-aging-time=30")
	mustCall(t, d, "remove", "Bridge", "br1", "other_config", "mac-aging-time")
	mustCall(t, d, "set-controller", "br1", "tcp:198.18.0.99:6653", "ptcp:0:127.0.0.1")
	mustCall(t, d, "remove", "Bridge", "br1", "controller", "ptcp:0:127.0.0.1")
	if got := mustCall(t, d, "get", "Bridge", "br1", "datapath_id", "fail_mode", "other_config", "controller"); got != "00000000000000aa\nsecure\n{datapath-id=\"00000000000000aa\"}\n[\"tcp:198.18.0.99:6653\"]\n" {
		t.Fatalf("get: %q", got)
	}
	// As with ovs-vsctl, removing what is not there succeeds and changes
	// nothing; an unknown column is still an error.
	mustCall(t, d, "remove", "Bridge", "br1", "other_config", "nope")
	if got := mustCall(t, d, "get", "Bridge", "br1", "other_config"); got != "{datapath-id=\"00000000000000aa\"}\n" {
		t.Fatalf("after removing a missing key: %q", got)
	}
	if _, err := call(t, d, "remove", "Bridge", "br1", "nope", "x"); err == nil {
		t.Fatal("removing from an unknown column succeeded")
	}
	r, err := call(t, d, "get-controller", "br1")
	if err != nil {
		t.Fatal(err)
	}
	var st []ControllerStatus
	if err := json.Unmarshal(r.Data, &st); err != nil || len(st) != 1 || st[0].Connected {
		t.Fatalf("get-controller data %s: %v", r.Data, err)
	}
	mustCall(t, d, "del-br", "br0")
	mustCall(t, d, "del-br", "br0", "--if-exists")
	if out := mustCall(t, d, "show"); !strings.Contains(out, "Bridge br1") || strings.Contains(out, "Bridge br0") {
		t.Fatalf("show:\n%s", out)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, err = Start(Options{StateDir: dir, DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := mustCall(t, d, "list-br"); got != "br1\n" {
		t.Fatalf("after restart list-br = %q (the default bridge is only for an empty store)", got)
	}
	if got := mustCall(t, d, "get", "Open_vSwitch", ".", "other_config:pmd-sleep-max"); got != "20\n" {
		t.Fatalf("after restart pmd-sleep-max %q", got)
	}
	if got := mustCall(t, d, "get-fail-mode", "br1"); got != "secure\n" {
		t.Fatalf("after restart fail mode %q", got)
	}
	if got := d.runningBridge("br1").dp.PMDSleepMax(); got != 20 {
		t.Fatalf("running pmd-sleep-max %d", got)
	}
}

// TestBarrierSnapshotsWhenJournalFails: at flow-sync=fsync, when the
// journal cannot sync a change, the barrier that acknowledges it saves the
// tables in the store instead, so the change is durable when the barrier
// reply arrives. A change the journal cannot even take is refused with
// the cause and not applied.
func TestBarrierSnapshotsWhenJournalFails(t *testing.T) {
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:flow-sync=fsync")
	b := d.runningBridge("br0")
	saved := func(flow string) bool {
		return slices.ContainsFunc(savedFlows(t, d, "br0"), func(l string) bool { return strings.Contains(l, flow) })
	}
	inTable := func(flow string) bool {
		return slices.ContainsFunc(flowLines(b.of), func(l string) bool { return strings.Contains(l, flow) })
	}
	addFlow := func(flow string) error {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return ofctl.Run(ctx, "unix:"+d.bridgeSocket("br0"), "add-flow", []string{flow}, io.Discard, ofctl.Options{})
	}

	// A pipe takes the record but cannot be fsynced.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go io.Copy(io.Discard, r)
	b.saveMu.Lock()
	good := b.journal.SwapFile(w)
	b.saveMu.Unlock()
	if err := addFlow("priority=7,in_port=1,actions=drop"); err != nil {
		t.Fatal(err)
	}
	if !saved("priority=7") {
		t.Fatalf("sync failed and the acknowledged flow is not in the saved tables: %q", savedFlows(t, d, "br0"))
	}

	// A closed file cannot even take the record: the flow-mod is refused
	// with the reason and the flow not installed.
	b.saveMu.Lock()
	w.Close()
	b.saveMu.Unlock()
	err = addFlow("priority=8,in_port=2,actions=drop")
	if err == nil || !strings.Contains(err.Error(), "OFPFMFC_UNKNOWN") || !strings.Contains(err.Error(), "file already closed") {
		t.Fatalf("add-flow with a closed journal: %v", err)
	}
	if inTable("priority=8") {
		t.Fatal("a change the journal refused was applied")
	}

	// A working journal again: changes are records again.
	b.saveMu.Lock()
	b.journal.SwapFile(good)
	b.saveMu.Unlock()
	if err := addFlow("priority=9,in_port=3,actions=drop"); err != nil {
		t.Fatal(err)
	}
	b.saveMu.Lock()
	unj := b.unjournaled
	b.saveMu.Unlock()
	if unj || !inTable("priority=9") {
		t.Fatalf("after the journal recovered: unjournaled %v", unj)
	}
}

// TestRxqAffinityCommands: pmd-rxq-affinity pins a port's rx queue to the
// PMD on a CPU (pmd-rxq-show marks it); an affinity no PMD can serve, and a
// pmd-cpu-mask that would strand an existing one, are refused with the
// reason and change nothing; removing the key unpins.
func TestRxqAffinityCommands(t *testing.T) {
	nstest.RequireRoot(t)
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	port := nstest.Name("vsaf")
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x3")
	mustCall(t, d, "add-port", "br0", port, "type=internal", "options:n_rxq=2")
	rxqs := func() []RxqView {
		t.Helper()
		var v []RxqView
		r, err := call(t, d, "pmd-rxq-show")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(r.Data, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	mustCall(t, d, "set", "Port", port, "other_config:pmd-rxq-affinity=1:1")
	var onPMD1 []string
	for _, v := range rxqs() {
		if v.Port == port && v.Queue == 1 && (!v.Pinned || v.PMD != 1) {
			t.Fatalf("queue 1 %+v: want pinned on PMD 1 (CPU 1)", v)
		}
		if v.PMD == 1 {
			onPMD1 = append(onPMD1, fmt.Sprintf("%s/%d", v.Port, v.Queue))
		}
	}
	if want := []string{port + "/1"}; !slices.Equal(onPMD1, want) {
		t.Fatalf("PMD 1 polls %v, want only %v (isolated)", onPMD1, want)
	}
	if out := mustCall(t, d, "pmd-rxq-show"); !strings.Contains(out, "(pinned)") {
		t.Fatalf("pmd-rxq-show does not mark the pinned queue:\n%s", out)
	}
	for _, bad := range [][]string{
		{"set", "Port", port, "other_config:pmd-rxq-affinity=1:7"},
		{"set", "Port", port, "other_config:pmd-rxq-affinity=5:1"},
		{"set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x1"},
	} {
		if _, err := call(t, d, bad...); err == nil || !strings.Contains(err.Error(), "pmd-rxq-affinity") {
			t.Errorf("%v: error %v, want one naming pmd-rxq-affinity", bad, err)
		}
	}
	if got := mustCall(t, d, "get", "Port", port, "other_config:pmd-rxq-affinity"); got != "\"1:1\"\n" && got != "1:1\n" {
		t.Fatalf("a refused change altered the affinity: %q", got)
	}
	mustCall(t, d, "remove", "Port", port, "other_config", "pmd-rxq-affinity")
	for _, v := range rxqs() {
		if v.Pinned {
			t.Fatalf("still pinned after removal: %+v", v)
		}
	}
}

// TestFlowSyncSetting: flow-sync and flow-sync-interval are checked when
// set (a typo is refused with the accepted values) and apply to running
// bridges at once; removing them goes back to the default, written.
func TestFlowSyncSetting(t *testing.T) {
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := d.runningBridge("br0")
	if b.sync.Load() != flowSyncWritten || b.syncEvery.Load() != int64(DefaultFlowSyncInterval*time.Millisecond) {
		t.Fatalf("default level %d interval %d", b.sync.Load(), b.syncEvery.Load())
	}
	for _, bad := range []string{"other_config:flow-sync=always", "other_config:flow-sync-interval=0", "other_config:flow-sync-interval=x"} {
		if _, err := call(t, d, "set", "Open_vSwitch", ".", bad); err == nil {
			t.Errorf("%s accepted", bad)
		} else if strings.Contains(bad, "=always") && !strings.Contains(err.Error(), `"written" or "fsync"`) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:flow-sync=fsync", "other_config:flow-sync-interval=50")
	if b.sync.Load() != flowSyncFsync || b.syncEvery.Load() != int64(50*time.Millisecond) {
		t.Fatalf("after set: level %d interval %d", b.sync.Load(), b.syncEvery.Load())
	}
	mustCall(t, d, "remove", "Open_vSwitch", ".", "other_config", "flow-sync")
	if b.sync.Load() != flowSyncWritten {
		t.Fatalf("after remove: level %d", b.sync.Load())
	}
}

// TestMaxIdleInPlace: other_config:max-idle, flow-limit and
// emc-insert-inv-prob apply to the running bridge, as in Open vSwitch,
// without rebuilding it (which would reopen every port).
func TestMaxIdleInPlace(t *testing.T) {
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := d.runningBridge("br0")
	if b == nil {
		t.Fatal("br0 not running")
	}
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:max-idle=2500",
		"other_config:flow-limit=3000", "other_config:emc-insert-inv-prob=0")
	if d.runningBridge("br0") != b {
		t.Fatal("setting max-idle, flow-limit and emc-insert-inv-prob rebuilt the bridge")
	}
	if got := b.of.MaxIdle(); got != 2500*time.Millisecond {
		t.Errorf("max-idle in force %v, want 2.5s", got)
	}
	if got := b.dp.FlowLimit(); got != 3000 {
		t.Errorf("flow-limit in force %d, want 3000", got)
	}
	if got := b.dp.EMCInsertInvProb(); got != 0 {
		t.Errorf("emc-insert-inv-prob in force %d, want 0", got)
	}
}

// TestShowDuringChange: show reads the published view and the store, never
// the lock a configuration change holds while it opens ports, so it
// answers while a long change (300 ports being created) is under way.
func TestShowDuringChange(t *testing.T) {
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.mu.Lock() // what Daemon.change holds throughout
	done := make(chan error, 1)
	go func() {
		_, err := d.cmdShow(context.Background(), nil)
		done <- err
	}()
	select {
	case err := <-done:
		d.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		d.mu.Unlock()
		t.Fatal("show waited for the configuration change's lock")
	}
}

// TestStartsOnTheDatabase: the database, not config.json, is what a
// restart brings up. A full disk can leave config.json behind a change
// the database acknowledged; the daemon must start on the change, not
// start on the older record and rebuild the bridge at its first pass
// (its management socket gone, its flows empty, while clients that found
// the daemon answering already read it).
func TestStartsOnTheDatabase(t *testing.T) {
	nstest.RequireRoot(t)
	dir := t.TempDir()
	d, err := Start(Options{StateDir: dir, DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, "add-br", "br1")
	pa, pb := nstest.Name("sda"), nstest.Name("sdb")
	mustCall(t, d, "add-port", "br0", pa, "type=internal") // ofport 1
	stale, err := os.ReadFile(filepath.Join(dir, config.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	// A setting that rebuilds a bridge, one that applies in place, and a
	// bridge deleted.
	mustCall(t, d, "set", "Bridge", "br0", "other_config:mac-aging-time=77")
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:emc-insert-inv-prob=7")
	mustCall(t, d, "del-br", "br1")
	// A port added after config.json's record took number 2, and keeps
	// it; the store alone would give it 1, free again.
	mustCall(t, d, "add-port", "br0", pb, "type=internal")
	mustCall(t, d, "del-port", "br0", pa)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, config.StateFile), stale, 0o600); err != nil {
		t.Fatal(err)
	}

	d, err = Start(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	b := d.runningBridge("br0")
	if b == nil {
		t.Fatal("br0 not running")
	}
	if got := b.cfg.OtherConfig["mac-aging-time"]; got != "77" {
		t.Errorf("br0 started with mac-aging-time %q, want the database's 77", got)
	}
	if got := b.dp.EMCInsertInvProb(); got != 7 {
		t.Errorf("br0 started with emc-insert-inv-prob %d, want the database's 7", got)
	}
	if d.runningBridge("br1") != nil {
		t.Error("br1, deleted in the database, started")
	}
	if p := d.store.Get().Bridges["br0"].Ports[pb]; p == nil || p.OFPort != 2 {
		t.Errorf("port %s: %+v, want it with the number the database reported, 2", pb, p)
	}
	select {
	case <-d.db.FirstPass():
	case <-time.After(10 * time.Second):
		t.Fatal("no first pass over the database in 10 s")
	}
	if d.runningBridge("br0") != b {
		t.Error("the first pass over the database rebuilt br0")
	}
}

// TestConfigRecordedAfterChange: a change made through the database
// reaches config.json after it applies, off its path (storeWriter), and
// one still in memory at a stop is written by Close.
func TestConfigRecordedAfterChange(t *testing.T) {
	nstest.RequireRoot(t)
	dir := t.TempDir()
	d, err := Start(Options{StateDir: dir, DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	recorded := func(bridge string) bool {
		s, err := os.ReadFile(filepath.Join(dir, config.StateFile))
		return err == nil && strings.Contains(string(s), `"name": "`+bridge+`"`)
	}
	mustCall(t, d, "add-br", "rec1")
	until(t, "rec1 in config.json", func() bool { return recorded("rec1") })
	if err := d.store.Unwritten(); err != nil {
		t.Errorf("Unwritten once recorded: %v", err)
	}
	mustCall(t, d, "add-br", "rec2")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !recorded("rec2") {
		t.Fatal("a change in memory at Close is not in config.json")
	}
}

// TestDaemonOnRingPorts: the whole daemon (database, reconciler, bridges,
// flow journal) runs on ring ports through Options.OpenPort, without root
// or kernel interfaces: ports added through the database forward what a
// flow says, and after a restart the same ports, reopened, forward again
// under the saved flow.
func TestDaemonOnRingPorts(t *testing.T) {
	var mu sync.Mutex
	rings := map[string]*ring.Port{}
	open := func(p *config.Port) (netdev.Netdev, string, error) {
		r := ring.New(p.Name, 1, 1, 64)
		mu.Lock()
		rings[p.Name] = r
		mu.Unlock()
		return r, "ring", nil
	}
	ringOf := func(name string) *ring.Port {
		mu.Lock()
		defer mu.Unlock()
		return rings[name]
	}
	p1, p2 := nstest.Name("rgp"), nstest.Name("rgp")
	frame := nstest.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1},
		net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), 1000, 2000)
	forwards := func() {
		t.Helper()
		ringOf(p1).Inject(0, frame)
		nstest.WaitFor(t, 10*time.Second, "the frame out of "+p2, func() bool { return ringOf(p2).Discard(0) == 1 })
	}
	dir := t.TempDir()
	d, err := Start(Options{StateDir: dir, DefaultBridge: "br0", OpenPort: open})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, "set-fail-mode", "br0", "secure")
	mustCall(t, d, "add-port", "br0", p1, "type=internal", "ofport_request=1")
	mustCall(t, d, "add-port", "br0", p2, "type=internal", "ofport_request=2")
	addFlows(t, d, "br0", "in_port=1,actions=output:2")
	forwards()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	d, err = Start(Options{StateDir: dir, OpenPort: open})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	forwards()
}

// TestBridgeDownBlocksNothing: a bridge configured but not running (it
// could not be brought up at start: its journal, of an older format, must
// be rewritten, and here the rewrite's temporary file cannot be made, as
// on a full disk) is tried again at each change, and failing again refuses
// nothing else: a port added to another bridge is added. Its saved
// tables are kept for when it comes up.
func TestBridgeDownBlocksNothing(t *testing.T) {
	open := func(p *config.Port) (netdev.Netdev, string, error) { return ring.New(p.Name, 1, 1, 64), "ring", nil }
	dir := savedFlowDir(t, Options{OpenPort: open})
	journal := filepath.Join(dir, "br1"+flowjournal.Suffix)
	if err := os.WriteFile(journal, []byte("vswitchd-flow-journal 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	blocker := journal + ".tmp"
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o700); err != nil {
		t.Fatal(err)
	}

	d, err := Start(Options{StateDir: dir, OpenPort: open})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.runningBridge("br1") != nil {
		t.Fatal("br1 came up with a journal that cannot be opened")
	}
	p := nstest.Name("bdp")
	if _, err := call(t, d, "add-port", "br0", p, "type=internal"); err != nil {
		t.Fatalf("a change to br0 while br1 is down: %v", err)
	}
	if b := d.runningBridge("br0"); b == nil || b.portByName(p) == nil {
		t.Fatal("the port added to br0 is not running")
	}
	if got := savedFlows(t, d, "br1"); len(got) != 1 {
		t.Fatalf("br1's saved flows %q, want its one flow kept", got)
	}
	// Once it can, it comes up with them at the next change.
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-sleep-max=50")
	if !hasFlow(d, "br1", "priority=5,udp") {
		t.Fatal("br1 did not come up with its saved flow")
	}
}

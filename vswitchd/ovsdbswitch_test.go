package vswitchd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbserver/dbtest"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// TestDaemonFollowsOVSDB: with Options.DB the daemon's bridges are the
// database's, cur_cfg follows next_cfg, the bridge's datapath_id is
// written back, and the management socket's configuration commands are
// written to the database (the one configuration) and applied from it.
func TestDaemonFollowsOVSDB(t *testing.T) {
	dbModel, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	_, endpoint := dbtest.Serve(t, nil)

	cli, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cli.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.MonitorAll(ctx); err != nil {
		t.Fatal(err)
	}
	transact := func(ops []ovsdb.Operation) {
		t.Helper()
		res, err := cli.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// A unique name: as root the bridge's own interface is a kernel one.
	name := nstest.Name("brdb")
	br := &vswitchdb.Bridge{UUID: "br", Name: name, FailMode: new(vswitchdb.BridgeFailModeSecure),
		OtherConfig: map[string]string{"datapath-id": "00000000000000ab"}}
	ops, err := cli.Create(br)
	if err != nil {
		t.Fatal(err)
	}
	ovsOps, err := cli.Create(&vswitchdb.OpenvSwitch{UUID: "ovs", Bridges: []string{"br"}, NextCfg: 1})
	if err != nil {
		t.Fatal(err)
	}
	transact(append(ops, ovsOps...))

	d, err := Start(Options{StateDir: t.TempDir(), DB: endpoint, Version: "9.9"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ovsRow := func() vswitchdb.OpenvSwitch {
		var l []vswitchdb.OpenvSwitch
		if err := cli.List(ctx, &l); err != nil || len(l) != 1 {
			t.Fatalf("Open_vSwitch: %v %v", l, err)
		}
		return l[0]
	}
	until(t, "cur_cfg 1", func() bool { return ovsRow().CurCfg == 1 })
	if b := d.runningBridge(name); b == nil {
		t.Fatalf("bridge %s of the database is not running", name)
	}
	if v := ovsRow().OVSVersion; v == nil || *v != "9.9" {
		t.Errorf("ovs_version %v", v)
	}
	var brs []vswitchdb.Bridge
	if err := cli.List(ctx, &brs); err != nil || len(brs) != 1 || brs[0].DatapathID == nil || *brs[0].DatapathID != "00000000000000ab" {
		t.Errorf("Bridge datapath_id: %+v %v", brs, err)
	}
	// The daemon's own commands write the database, and return once the
	// switch runs what they wrote.
	mustCall(t, d, "add-br", "brx")
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:tx-flush-interval=50")
	if d.runningBridge("brx") == nil {
		t.Fatal("add-br through the database: brx not running when the command returned")
	}
	// The test's client sees the database a little later.
	until(t, "brx and other_config in the test's client", func() bool {
		brs = nil
		return cli.List(ctx, &brs) == nil && len(brs) == 2 && ovsRow().OtherConfig["tx-flush-interval"] == "50"
	})
	// A refused command writes nothing.
	if _, err := call(t, d, "set", "Open_vSwitch", ".", "other_config:tx-flush-interval=abc"); err == nil {
		t.Error("a bad tx-flush-interval was accepted")
	}
	if v := ovsRow().OtherConfig["tx-flush-interval"]; v != "50" {
		t.Errorf("a refused command changed the database: %q", v)
	}
	if got := mustCall(t, d, "list-br"); got != "brx\n"+name+"\n" && got != name+"\nbrx\n" {
		t.Errorf("list-br = %q", got)
	}
	mustCall(t, d, "del-br", "brx")
	until(t, "brx gone from the database", func() bool {
		brs = nil
		return cli.List(ctx, &brs) == nil && len(brs) == 1
	})
}

// TestEmbeddedDatabase: with EmbeddedDB the daemon serves its own
// database, created from what the state directory held, and keeps it
// across a restart; the daemon's commands go through it.
func TestEmbeddedDatabase(t *testing.T) {
	dir := t.TempDir()
	d, err := Start(Options{StateDir: dir, DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "br0 from the database", func() bool { n, _ := d.db.Stats(); return n > 0 })
	mustCall(t, d, "add-br", "br1")
	mustCall(t, d, "set-fail-mode", "br1", "secure")
	mustCall(t, d, "add-port", "br1", "p1", "type=patch", "options:peer=p2")
	if got := mustCall(t, d, "list-ports", "br1"); got != "p1\n" {
		t.Fatalf("list-ports br1 = %q", got)
	}
	d.Close()
	d, err = Start(Options{StateDir: dir, DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	until(t, "the database applied after a restart", func() bool { n, _ := d.db.Stats(); return n > 0 })
	if got := mustCall(t, d, "list-br"); got != "br0\nbr1\n" {
		t.Fatalf("list-br after restart = %q", got)
	}
	if got := mustCall(t, d, "get-fail-mode", "br1"); got != "secure\n" {
		t.Fatalf("fail mode after restart = %q", got)
	}
	mustCall(t, d, "del-port", "p1")
	if got := mustCall(t, d, "list-ports", "br1"); got != "" {
		t.Fatalf("list-ports br1 after del-port = %q", got)
	}
}

func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A change that touched many links is read back in one dump, which also
// finds the links it did not touch; a few touched links are read alone.
func TestLinkCacheManyStale(t *testing.T) {
	var c linkCache
	if _, ok := c.get("lo"); !ok {
		t.Fatal("lo not found")
	}
	c.touch([]string{"lo"})
	if _, ok := c.get("lo"); !ok || len(c.stale) != 0 {
		t.Fatalf("one stale link: found %v, %d left stale", ok, len(c.stale))
	}
	var names []string
	for i := range linkCacheMaxStale + 1 {
		names = append(names, fmt.Sprintf("nolink%d", i))
	}
	c.touch(append(names, "lo"))
	at := c.at
	if _, ok := c.get("lo"); !ok {
		t.Fatal("lo not found after the dump")
	}
	if len(c.stale) != 0 || !c.at.After(at) {
		t.Fatalf("%d stale links: not dumped (%d left stale)", len(names)+1, len(c.stale))
	}
	if _, ok := c.get(names[0]); ok {
		t.Fatalf("%s found", names[0])
	}
}

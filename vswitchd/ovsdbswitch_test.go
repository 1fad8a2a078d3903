package vswitchd

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/database/inmemory"
	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"github.com/ovn-kubernetes/libovsdb/server"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// TestDaemonFollowsOVSDB: with Options.DB the daemon's bridges are the
// database's, cur_cfg follows next_cfg, the bridge's datapath_id is
// written back, and the management socket refuses configuration
// commands (the database is the one configuration) while it still
// answers the others.
func TestDaemonFollowsOVSDB(t *testing.T) {
	dbModel, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	schema := vswitchdb.Schema()
	logger := logr.Discard()
	dbMod, errs := model.NewDatabaseModel(schema, dbModel)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	srv, err := server.NewOvsdbServer(inmemory.NewDatabase(map[string]model.ClientDBModel{schema.Name: dbModel}, &logger), &logger, dbMod)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "db.sock")
	served := make(chan error, 1)
	go func() { served <- srv.Serve("unix", sock) }()
	t.Cleanup(func() { srv.Close(); <-served })
	until(t, "the OVSDB server", srv.Ready)

	cli, err := client.NewOVSDBClient(dbModel, client.WithEndpoint("unix:"+sock))
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

	d, err := Start(Options{StateDir: t.TempDir(), DB: "unix:" + sock, Version: "9.9"})
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
	_, err = call(t, d, "add-br", "brx")
	if err == nil || !strings.Contains(err.Error(), "configuration comes from the OVSDB database at unix:"+sock) {
		t.Errorf("add-br with a database: %v, want refused", err)
	}
	if got := mustCall(t, d, "list-br"); got != name+"\n" {
		t.Errorf("list-br = %q", got)
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

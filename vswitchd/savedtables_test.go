package vswitchd

import (
	"context"
	"errors"
	"github.com/vswitch-go/vswitch/vswitchd/flowjournal"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ctl/ofctl"
	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

func savedTablesBridge(t *testing.T) *ofproto.Bridge {
	t.Helper()
	up := &ofproto.UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	of, err := ofproto.NewBridge("br0", dp, ofproto.BridgeConfig{DatapathID: 1, FailMode: ofproto.FailSecure,
		ManagementTargets: []string{"punix:" + filepath.Join(t.TempDir(), "br0.mgmt")},
		Upcall:            up, Conn: ofconn.Config{ProbeInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(of.Close)
	return of
}

// TestSavedTablesRoundTrip: the tables saved as lines come back on another
// bridge as the same lines, and a restore that fails names the line at
// fault in the words the daemon has always logged.
func TestSavedTablesRoundTrip(t *testing.T) {
	src := savedTablesBridge(t)
	meters := []string{"meter=1,pktps,bands=type=drop,rate=100,burst_size=10"}
	groups := []string{"group_id=1,type=indirect,bucket=actions=group:2", "group_id=2,type=all,bucket=actions=drop"}
	flows := []string{"table=1,priority=5,tcp,tp_dst=80 actions=drop", "priority=10,in_port=1 actions=meter:1,group:1"}
	if err := restoreMeters(src, meters); err != nil {
		t.Fatal(err)
	}
	if err := restoreGroups(src, groups); err != nil {
		t.Fatal(err)
	}
	if err := restoreFlows(src, flows, nil); err != nil {
		t.Fatal(err)
	}
	fl, gl, ml := flowLines(src), groupLines(src), meterLines(src)
	if len(fl) != 2 || len(gl) != 2 || len(ml) != 1 || !strings.HasPrefix(fl[0], "priority=10,in_port=1 ") {
		t.Fatalf("saved flows %q groups %q meters %q", fl, gl, ml)
	}
	dst := savedTablesBridge(t)
	if err := restoreMeters(dst, ml); err != nil {
		t.Fatal(err)
	}
	if err := restoreGroups(dst, gl); err != nil {
		t.Fatal(err)
	}
	if err := restoreFlows(dst, fl, flowStates(src)); err != nil {
		t.Fatal(err)
	}
	if got := flowLines(dst); !slices.Equal(got, fl) {
		t.Fatalf("restored flows %q, want %q", got, fl)
	}
	if got := groupLines(dst); !slices.Equal(got, gl) {
		t.Fatalf("restored groups %q, want %q", got, gl)
	}

	for _, c := range []struct {
		err  error
		want string
	}{
		{restoreFlows(dst, []string{"actions=drop", "frob actions=drop"}, nil), `ofproto: restoring flow 2: bad flow "frob actions=drop": unknown keyword "frob"`},
		{restoreFlows(dst, []string{"actions=drop", "actions=group:9"}, nil), `ofproto: restoring flow 2 "actions=group:9": `},
		{restoreGroups(dst, []string{"group_id=5,type=all,bucket=actions=group:9"}), `ofproto: restoring "group_id=5,type=all,bucket=actions=group:9": `},
		{restoreMeters(dst, []string{"meter=3,frobnicate"}), "ofproto: restoring meter 1: "},
	} {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.want) {
			t.Errorf("error %v, want it to start %q", c.err, c.want)
		}
	}
	if got := flowLines(dst); !slices.Equal(got, fl) {
		t.Fatalf("failed restores changed the flows to %q", got)
	}
}

// addFlows adds ovs-ofctl flow lines to bridge br of an in-process daemon.
func addFlows(t *testing.T, d *Daemon, br string, flows ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, f := range flows {
		if err := ofctl.Run(ctx, "unix:"+d.bridgeSocket(br), "add-flow", []string{f}, io.Discard, ofctl.Options{}); err != nil {
			t.Fatalf("add-flow %s: %v", f, err)
		}
	}
}

// hasFlow says whether a running bridge's tables hold a flow containing s.
func hasFlow(d *Daemon, br, s string) bool {
	b := d.runningBridge(br)
	return b != nil && slices.ContainsFunc(flowLines(b.of), func(l string) bool { return strings.Contains(l, s) })
}

// TestLegacyTablesMoved: a state directory whose config.json holds the
// saved tables (as older daemons wrote it) starts with them, and from
// then on they are in the bridge's own file, config.json without them.
func TestLegacyTablesMoved(t *testing.T) {
	dir := t.TempDir()
	old := `{"format": 1, "generation": 2, "config": {"bridges": {"br0": {"name": "br0", "fail_mode": "secure",
		"flows": ["priority=9,ip,actions=group:4"], "groups": ["group_id=4,type=all,bucket=actions=drop"]}}}}`
	if err := os.WriteFile(filepath.Join(dir, config.StateFile), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Start(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if !hasFlow(d, "br0", "priority=9,ip") {
		t.Fatalf("the flow config.json held is not installed: %q", flowLines(d.runningBridge("br0").of))
	}
	tb, err := flowjournal.ReadSnapshot(d.tablesPath("br0"))
	if err != nil || tb == nil || len(tb.Flows) != 1 || len(tb.Groups) != 1 {
		t.Fatalf("br0's tables file: %+v, %v", tb, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, config.StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "priority=9") || strings.Contains(string(data), "group_id") {
		t.Fatalf("config.json still holds the tables:\n%s", data)
	}
}

// savedFlowDir is a state directory a daemon of opts (its StateDir and
// DefaultBridge set here) left behind with bridges br0 and br1, br1 in
// fail mode secure with one saved flow, priority=5,udp,actions=drop.
func savedFlowDir(t *testing.T, opts Options) string {
	t.Helper()
	opts.StateDir, opts.DefaultBridge = t.TempDir(), "br0"
	d, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, "add-br", "br1")
	mustCall(t, d, "set-fail-mode", "br1", "secure")
	addFlows(t, d, "br1", "priority=5,udp,actions=drop")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	return opts.StateDir
}

// TestSavedTablesFollowTheBridge: a bridge's tables survive a restart in
// its file; a configuration change does not write it; deleting the bridge
// removes it, and a bridge added again under the name starts empty.
func TestSavedTablesFollowTheBridge(t *testing.T) {
	dir := savedFlowDir(t, Options{})
	path := filepath.Join(dir, "br1"+flowjournal.SnapshotSuffix)
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}

	d, err := Start(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d.Close() }()
	if !hasFlow(d, "br1", "priority=5,udp") {
		t.Fatal("br1's flow not restored")
	}
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-sleep-max=50")
	if after, err := os.Stat(path); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("a configuration change rewrote br1's tables (%v)", err)
	}
	mustCall(t, d, "del-br", "br1")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("br1 deleted, its tables file: %v", err)
	}
	mustCall(t, d, "add-br", "br1")
	mustCall(t, d, "set-fail-mode", "br1", "secure")
	if hasFlow(d, "br1", "priority=5") {
		t.Fatal("br1 added again came back with the deleted bridge's flow")
	}
}

// TestDamagedTablesFile: saved tables that cannot be read stop the start,
// naming the file, and are left as they are; --recover starts without
// them and moves them aside.
func TestDamagedTablesFile(t *testing.T) {
	dir := savedFlowDir(t, Options{})
	path := filepath.Join(dir, "br1"+flowjournal.SnapshotSuffix)
	if err := os.WriteFile(path, []byte(`{"format": 1, "flows": ["priority=5,udp,actions=drop"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err := Start(Options{StateDir: dir}); err == nil || !strings.Contains(err.Error(), path) {
		if d != nil {
			d.Close()
		}
		t.Fatalf("start on damaged tables: %v, want an error naming %s", err, path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the damaged file was not left as it was: %v", err)
	}
	d, err := Start(Options{StateDir: dir, Recover: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.runningBridge("br1") == nil || hasFlow(d, "br1", "priority=5") {
		t.Fatal("--recover: want br1 running without the damaged tables")
	}
	if _, err := os.Stat(path + ".damaged"); err != nil {
		t.Fatalf("the damaged file was not moved aside: %v", err)
	}
}

package vswitchd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
	"github.com/vswitch-go/vswitch/vswitchd/unixctl"
)

func appctl(t *testing.T, path, method string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return unixctl.Call(ctx, path, method, args...)
}

func mustAppctl(t *testing.T, path, method string, args ...string) string {
	t.Helper()
	out, err := appctl(t, path, method, args...)
	if err != nil {
		t.Fatalf("%s %q: %v", method, args, err)
	}
	return out
}

// TestUnixctlCommands: the control socket answers Open vSwitch's command
// names with the daemon's handlers, bridges' OpenFlow sockets are made in
// RunDir, and exit asks the caller to stop.
func TestUnixctlCommands(t *testing.T) {
	state, run := t.TempDir(), t.TempDir()
	level := new(slog.LevelVar)
	ctlPath := filepath.Join(run, "ovs-vswitchd.123.ctl")
	var reopened atomic.Int32
	d, err := Start(Options{StateDir: state, RunDir: run, Unixctl: ctlPath, DefaultBridge: "brx0",
		LogLevel: level, LogDest: unixctl.DestFile, Version: "9.9",
		ReopenLog: func() error { reopened.Add(1); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := os.Stat(filepath.Join(run, "brx0"+mgmt.BridgeSocketSuffix)); err != nil {
		t.Errorf("bridge socket not in the run directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(state, "brx0"+mgmt.BridgeSocketSuffix)); err == nil {
		t.Errorf("bridge socket in the state directory too")
	}
	if got := mustAppctl(t, ctlPath, "version"); got != "ovs-vswitchd (vswitch-go) 9.9\n" {
		t.Errorf("version: %q", got)
	}
	list := mustAppctl(t, ctlPath, "list-commands")
	for _, c := range d.unixctlCommands() {
		if !strings.Contains(list, "  "+c.Name+" ") {
			t.Errorf("list-commands lacks %s", c.Name)
		}
	}
	if got := mustAppctl(t, ctlPath, "dpif/show"); !strings.HasPrefix(got, "netdev@ovs-netdev: hit:0 missed:0\n  brx0:\n") {
		t.Errorf("dpif/show:\n%s", got)
	}
	if got := mustAppctl(t, ctlPath, "fdb/show", "brx0"); got != " port  VLAN  MAC                Age\n" {
		t.Errorf("fdb/show: %q", got)
	}
	var se *unixctl.ServerError
	if _, err := appctl(t, ctlPath, "fdb/show", "nope"); !errors.As(err, &se) || !strings.Contains(se.Text, `no such bridge "nope"`) {
		t.Errorf("fdb/show of an unknown bridge: %v", err)
	}
	if got := mustAppctl(t, ctlPath, "fdb/flush"); got != "table successfully flushed\n" {
		t.Errorf("fdb/flush: %q", got)
	}
	mustAppctl(t, ctlPath, "dpctl/dump-flows", "netdev@ovs-netdev")
	mustAppctl(t, ctlPath, "dpctl/dump-flows", "-m", "brx0")
	if _, err := appctl(t, ctlPath, "dpctl/dump-flows", "nope"); !errors.As(err, &se) {
		t.Errorf("dpctl/dump-flows of an unknown datapath: %v", err)
	}
	mustAppctl(t, ctlPath, "dpif-netdev/pmd-stats-show")
	mustAppctl(t, ctlPath, "dpif-netdev/pmd-stats-show", "netdev@ovs-netdev")
	mustAppctl(t, ctlPath, "dpif-netdev/pmd-rxq-show", "-s", "ovs-netdev")
	for _, args := range [][]string{{"-pmd", "3"}, {"netdev@other"}, {"-x"}} {
		if _, err := appctl(t, ctlPath, "dpif-netdev/pmd-rxq-show", args...); !errors.As(err, &se) {
			t.Errorf("pmd-rxq-show %q: %v, want an error reply", args, err)
		}
	}
	mustAppctl(t, ctlPath, "coverage/show")

	// vlog/set changes the level of the destination the daemon writes
	// to, not another's; a bad spec changes nothing.
	mustAppctl(t, ctlPath, "vlog/set", "console:err")
	if level.Level() != slog.LevelInfo {
		t.Errorf("console spec changed the file's level to %v", level.Level())
	}
	mustAppctl(t, ctlPath, "vlog/set", "ANY:file:dbg")
	if level.Level() != slog.LevelDebug {
		t.Errorf("after vlog/set file:dbg, level %v", level.Level())
	}
	if _, err := appctl(t, ctlPath, "vlog/set", "warn", "info:err"); err == nil || level.Level() != slog.LevelDebug {
		t.Errorf("bad spec: err %v, level %v", err, level.Level())
	}
	mustAppctl(t, ctlPath, "vlog/set", "warn")
	if got := mustAppctl(t, ctlPath, "vlog/list"); !strings.Contains(got, "vswitchd          OFF        OFF       WARN\n") {
		t.Errorf("vlog/list:\n%s", got)
	}

	mustAppctl(t, ctlPath, "vlog/reopen")
	if n := reopened.Load(); n != 1 {
		t.Errorf("vlog/reopen reopened the log %d times", n)
	}

	select {
	case <-d.ExitRequested():
		t.Fatal("exit requested before exit")
	default:
	}
	if got := mustAppctl(t, ctlPath, "exit"); got != "" {
		t.Errorf("exit: %q", got)
	}
	select {
	case <-d.ExitRequested():
	case <-time.After(10 * time.Second):
		t.Fatal("exit did not request the daemon to exit")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := appctl(t, ctlPath, "version"); err == nil {
		t.Error("control socket still answers after Close")
	}
}

// TestUnixctlDefaultPath: without Options.Unixctl the control socket is
// in the state directory, beside the management socket.
func TestUnixctlDefaultPath(t *testing.T) {
	state := t.TempDir()
	d, err := Start(Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := mustAppctl(t, filepath.Join(state, UnixctlSocketName), "version"); got != "ovs-vswitchd (vswitch-go) dev\n" {
		t.Errorf("version: %q", got)
	}
	// Logging to stderr: there is no file to reopen.
	if _, err := appctl(t, filepath.Join(state, UnixctlSocketName), "vlog/reopen"); err == nil {
		t.Error("vlog/reopen without a log file succeeded")
	}
}

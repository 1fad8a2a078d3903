package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestFlowMonitor runs ovs-ofctl monitor BR watch: (Open vSwitch's flow
// monitor, in each of its encodings: NXST 1.0, ONF's 1.3 extension,
// 1.4+'s OFPMP_FLOW_MONITOR) against the daemon and reads what it prints
// while another ovs-ofctl adds, modifies and deletes flows, and a flow
// times out.
func TestFlowMonitor(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	d := newDaemon(t)
	d.start()
	br := nstest.Name("brmon")
	d.vsctl("add-br", br)
	sock := "unix:" + filepath.Join(d.stateDir, br+".mgmt")

	// OpenFlow10 is ovs-ofctl's default (no -O).
	for _, v := range []string{"OpenFlow10", "OpenFlow13", "OpenFlow14", "OpenFlow15"} {
		t.Run(v, func(t *testing.T) {
			nstest.Run(t, "ovs-ofctl", "del-flows", sock)
			nstest.Run(t, "ovs-ofctl", "add-flow", sock, "priority=5,in_port=1,actions=output:7")
			all := startMonitor(t, v, sock, "watch:")
			// Only flows that output to port 3, and none of the present ones.
			port3 := startMonitor(t, v, sock, "watch:!initial,out_port=3")

			initial := "event=ADDED"
			if v == "OpenFlow14" || v == "OpenFlow15" {
				initial = "event=INITIAL"
			}
			all.waitLine(initial, "in_port=1", "actions=output:7")

			nstest.Run(t, "ovs-ofctl", "add-flow", sock, "priority=7,in_port=2,actions=output:3")
			all.waitLine("event=ADDED", "in_port=2", "actions=output:3")
			port3.waitLine("event=ADDED", "in_port=2", "actions=output:3")

			nstest.Run(t, "ovs-ofctl", "mod-flows", sock, "in_port=2,actions=output:4")
			all.waitLine("event=MODIFIED", "in_port=2", "actions=output:4")
			port3.waitLine("event=MODIFIED", "in_port=2", "actions=output:4") // the old actions output to 3

			nstest.Run(t, "ovs-ofctl", "add-flow", sock, "priority=8,in_port=5,actions=output:5")
			all.waitLine("event=ADDED", "in_port=5")

			nstest.Run(t, "ovs-ofctl", "del-flows", sock, "in_port=2")
			all.waitLine("event=DELETED", "reason=delete", "in_port=2")

			if v != "OpenFlow10" {
				// Deleting a group deletes the flows that use it.
				nstest.Run(t, "ovs-ofctl", "-O", v, "add-group", sock, "group_id=1,type=all,bucket=output:8")
				nstest.Run(t, "ovs-ofctl", "-O", v, "add-flow", sock, "priority=4,in_port=4,actions=group:1")
				all.waitLine("event=ADDED", "in_port=4", "actions=group:1")
				nstest.Run(t, "ovs-ofctl", "-O", v, "del-groups", sock)
				all.waitLine("event=DELETED", "reason=group_delete", "in_port=4")
			}

			// A bundle's flows once it commits; a failed bundle's none.
			nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow14", "--bundle", "add-flow", sock, "priority=6,in_port=6,actions=output:6")
			all.waitLine("event=ADDED", "in_port=6", "actions=output:6")
			if _, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow14", "--bundle", "add-flows", sock, writeFlows(t,
				"priority=6,in_port=16,actions=output:6", "priority=6,in_port=17,actions=group:99")); err == nil {
				t.Fatal("bundle with a missing group committed")
			}

			nstest.Run(t, "ovs-ofctl", "add-flow", sock, "hard_timeout=1,priority=9,in_port=9,actions=output:7")
			all.waitLine("event=DELETED", "reason=hard", "in_port=9")

			if all.has("in_port=16") || all.has("in_port=6 ", "event=DELETED") {
				t.Errorf("a failed bundle was reported:\n%s", all.out.String())
			}
			if port3.has("in_port=1") || port3.has("in_port=5") || port3.has("in_port=9") {
				t.Errorf("out_port=3 monitor saw flows without output:3:\n%s", port3.out.String())
			}
		})
	}
}

// writeFlows writes flows to a file for add-flows.
func writeFlows(t *testing.T, flows ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "flows")
	if err := os.WriteFile(p, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type monitorProc struct {
	t   *testing.T
	out *nstest.SyncBuffer
}

// startMonitor runs ovs-ofctl monitor in version v until the test ends.
func startMonitor(t *testing.T, v, sock string, args ...string) *monitorProc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := []string{"-O", v}
	if v == "OpenFlow10" {
		opts = nil // ovs-ofctl's default
	}
	cmd := exec.CommandContext(ctx, "ovs-ofctl", append(append(opts, "monitor", sock), args...)...)
	p := &monitorProc{t: t, out: &nstest.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// Its control socket goes to a directory of the test's own.
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("ovs-ofctl monitor %s %v:\n%s", v, args, p.out.String())
		}
	})
	return p
}

// has reports whether a line printed so far holds every one of words.
func (p *monitorProc) has(words ...string) bool {
	for _, l := range strings.Split(p.out.String(), "\n") {
		ok := true
		for _, w := range words {
			if !strings.Contains(l, w) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// waitLine waits (bounded) for a line holding every one of words.
func (p *monitorProc) waitLine(words ...string) {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !p.has(words...) {
		if time.Now().After(deadline) {
			p.t.Fatalf("ovs-ofctl monitor printed no line with %q:\n%s", words, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

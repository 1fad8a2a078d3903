package ofproto

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

// ovsOfctlMayFail runs ovs-ofctl and returns its output and error.
func ovsOfctlMayFail(t *testing.T, args ...string) (string, error) {
	t.Helper()
	nstest.RequireTool(t, "ovs-ofctl")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", args...).CombinedOutput()
	return string(out), err
}

// TestBundlesWithOvsOfctl: ovs-ofctl --bundle in 1.3 (ONF's extension),
// 1.4 and 1.5 commits flows and groups together, in order (a flow may use
// a group the same bundle adds); a bundle with one bad message changes
// nothing, not even the counters of the flows it would have deleted, and
// says which message failed.
func TestBundlesWithOvsOfctl(t *testing.T) {
	for _, v := range []string{"OpenFlow13", "OpenFlow14", "OpenFlow15"} {
		t.Run(v, func(t *testing.T) {
			mb := newMeterBridge(t)
			target := "unix:" + mb.sock
			dir := t.TempDir()
			file := func(name string, lines ...string) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			ovsOfctlIn(t, v, "--bundle", "add-flows", target, file("good",
				"priority=5,in_port=1,udp,actions=output:2",
				"priority=1,actions=drop"))
			if n := mb.burst(t, frame(), 4); n != 4 {
				t.Fatalf("%d of 4 forwarded by the bundled flow", n)
			}
			before := flowLines(ovsOfctlIn(t, v, "dump-flows", target))
			if len(before) != 2 || !strings.Contains(strings.Join(before, "\n"), "n_packets=4,") {
				t.Fatalf("flows after the first bundle:\n%s", strings.Join(before, "\n"))
			}
			// The second line deletes the forwarding flow, the third
			// names a group nobody has: nothing may change.
			out, err := ovsOfctlMayFail(t, "-O", v, "--bundle", "add-flows", target, file("bad",
				"priority=9,arp,actions=drop",
				"delete_strict priority=5,in_port=1,udp",
				"priority=8,arp,actions=group:99"))
			if err == nil || !strings.Contains(out, "OFPBAC_BAD_OUT_GROUP") || !strings.Contains(out, "OFPBFC_MSG_FAILED") {
				t.Fatalf("bad bundle: %v\n%s", err, out)
			}
			after := flowLines(ovsOfctlIn(t, v, "dump-flows", target))
			if strings.Join(stripDurations(after), "\n") != strings.Join(stripDurations(before), "\n") {
				t.Fatalf("a failed bundle changed the tables:\nbefore:\n%s\nafter:\n%s",
					strings.Join(before, "\n"), strings.Join(after, "\n"))
			}
			if n := mb.burst(t, frame(), 2); n != 2 {
				t.Fatalf("%d of 2 forwarded after the failed bundle", n)
			}
			// Groups and the flows using them in one ordered bundle.
			ovsOfctlIn(t, v, "--bundle", "add-groups", target, file("groups", "group_id=3,type=all,bucket=output:2"))
			ovsOfctlIn(t, v, "--bundle", "replace-flows", target, file("repl", "priority=6,in_port=1,actions=group:3"))
			flows := flowLines(ovsOfctlIn(t, v, "dump-flows", target))
			if len(flows) != 1 || !strings.Contains(flows[0], "priority=6,in_port=1 actions=group:3") {
				t.Fatalf("flows after replace-flows:\n%s", strings.Join(flows, "\n"))
			}
			if n := mb.burst(t, frame(), 3); n != 3 {
				t.Fatalf("%d of 3 forwarded through the bundled group", n)
			}
		})
	}
}

// stripDurations drops the duration field, the one thing that moves.
func stripDurations(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		var keep []string
		for _, f := range strings.Split(l, ", ") {
			if !strings.HasPrefix(strings.TrimSpace(f), "duration=") {
				keep = append(keep, f)
			}
		}
		out[i] = strings.Join(keep, ", ")
	}
	return out
}

package ofproto

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// ovsOfctl runs Open vSwitch's ovs-ofctl against the switch (OpenFlow 1.3);
// the test needs it (nstest.RequireTool).
func ovsOfctl(t *testing.T, args ...string) string {
	t.Helper()
	nstest.RequireTool(t, "ovs-ofctl")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", append([]string{"-O", "OpenFlow13"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// flowLines returns the flow lines of a dump-flows printout.
func flowLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "actions=") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	return lines
}

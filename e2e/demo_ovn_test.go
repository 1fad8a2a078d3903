package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestDemoOVNScript runs scripts/demo-ovn.sh (make demo-ovn) as users
// would: OVN central and three chassis over VXLAN, each with this switch
// as its ovs-vswitchd and Debian's ovn-controller; the script checks every
// step with traffic (pings across chassis and across the router with its
// TTL, TCP, a stateful ACL, a load balancer answering from backends on
// several chassis and to a backend itself, a kill -9 and restart of one
// chassis' switch) and ovn-controller's logs, and must leave no namespace
// behind.
func TestDemoOVNScript(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovn-northd", "ovn-controller", "ovn-nbctl", "ovsdb-server", "busybox", "python3")
	vd, _ := binaries(t)
	// A guard against a hung script, not a bound on its speed.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../scripts/demo-ovn.sh")
	cmd.Env = append(cmd.Environ(), "BIN="+filepath.Dir(vd))
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("demo-ovn took %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("demo-ovn: %v\n%s", err, out.String())
	}
	for _, want := range []string{"TTL 63: one router hop", "TCP to w3: dropped, as the ACL says",
		"reached the backends: ", "traffic through chassis 2 again", "demo-ovn done"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	ns, err := nstest.Output("ip", "netns", "list")
	if err != nil {
		t.Fatal(err)
	}
	if suffix := fmt.Sprintf("-%d", cmd.Process.Pid); strings.Contains(ns, suffix+" ") || strings.Contains(ns, suffix+"\n") {
		t.Errorf("namespaces left behind:\n%s", ns)
	}
}

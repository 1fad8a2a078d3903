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

// TestDemoOverlayScript runs scripts/demo-overlay.sh (make demo-overlay)
// as users would, so that the script cannot rot as the switch changes: it
// must pass its own checks (pings within each tenant across three hosts,
// no frame from tenant 100's MACs captured in tenant 200's workloads while
// the same capture in tenant 100's counts its frames) and leave no
// namespace behind.
func TestDemoOverlayScript(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "tcpdump")
	vd, _ := binaries(t)
	// A guard against a hung script, not a bound on its speed: it took
	// 14-30 s on a shared 2-core machine, and a loaded one can be slower.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../scripts/demo-overlay.sh")
	cmd.Env = append(cmd.Environ(), "BIN="+filepath.Dir(vd))
	// On timeout the script gets SIGTERM, not SIGKILL, so that its trap
	// removes the namespaces and stops the daemons.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 20 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("demo-overlay took %v", time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("demo-overlay: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		", 0% packet loss",
		"no frame from tenant 100 reached tenant 200's workloads",
		"demo-overlay done",
	} {
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

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
	// The timeout guards against a hung script, not a bound on its
	// speed: it took 14-30 s on a shared 2-core machine.
	runDemoScript(t, "demo-overlay", 5*time.Minute, ", 0% packet loss",
		"no frame from tenant 100 reached tenant 200's workloads", "demo-overlay done")
}

// runDemoScript runs scripts/NAME.sh with the test's binaries, as make
// NAME would, and checks that it succeeds, prints every one of wants and
// leaves none of its namespaces (named after its pid) behind, and returns
// its output. On timeout
// the script gets SIGTERM, not SIGKILL, so that its trap removes the
// namespaces and stops the daemons.
func runDemoScript(t *testing.T, name string, timeout time.Duration, wants ...string) string {
	t.Helper()
	return runDemoScriptEnv(t, name, nil, timeout, wants...)
}

// runDemoScriptEnv is runDemoScript with variables env (NAME=VALUE) set.
func runDemoScriptEnv(t *testing.T, name string, env []string, timeout time.Duration, wants ...string) string {
	t.Helper()
	vd, _ := binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "../scripts/"+name+".sh")
	cmd.Env = append(append(cmd.Environ(), "BIN="+filepath.Dir(vd)), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s took %v", name, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out.String())
	}
	for _, want := range wants {
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
	return out.String()
}

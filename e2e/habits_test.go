package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// A second daemon on a metrics port that is taken exits 1 before it
// touches its state directory (nothing created, no default bridge
// written), and its message carries one "vswitchd:" prefix.
func TestSecondDaemonOnBusyMetricsPort(t *testing.T) {
	d := newDaemon(t)
	d.start()
	dir := filepath.Join(t.TempDir(), "second")
	out, err := exec.Command(d.bin, "--state-dir", dir, "--metrics-addr", d.metrics).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("second daemon: %v, want exit status 1\n%s", err, out)
	}
	msg := string(out)
	if strings.Count(msg, "vswitchd:") != 1 || !strings.Contains(msg, "metrics: ") || !strings.Contains(msg, "--metrics-addr") {
		t.Errorf("message %q: want one vswitchd: prefix, the metrics cause and the way out", msg)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the refused daemon created its state directory %s (%v)", dir, err)
	}
}

// vsctl's errors carry one prefix per layer ("vsctl: add-flows: FILE:1:
// ..."), and a line of chained commands is all or nothing.
func TestVsctlHabits(t *testing.T) {
	d := newDaemon(t)
	br, port := nstest.Name("hb"), nstest.Name("hbp")
	d.start("--default-bridge", br)
	flows := filepath.Join(t.TempDir(), "flows.txt")
	os.WriteFile(flows, []byte("priority=1,bogus=1,actions=drop\n"), 0o600)
	_, errOut, code := d.vsctlRaw("add-flows", br, flows)
	if code != 1 || strings.Count(errOut, "add-flows:") != 1 || !strings.HasPrefix(errOut, "vsctl: add-flows: ") {
		t.Errorf("add-flows error (exit %d): %q, want one add-flows: prefix", code, errOut)
	}
	_, errOut, code = d.vsctlRaw("--may-exist", "add-br", br, "--", "add-port", br, port, "--", "set", "Interface", port, "type=internal", "ofport_request=0")
	if code != 1 || !strings.Contains(errOut, "set: ") {
		t.Errorf("chain with a bad set: exit %d, %q", code, errOut)
	}
	if got := d.vsctl("list-ports", br); got != "" {
		t.Errorf("the failed chain left ports: %q", got)
	}
	d.vsctl("--may-exist", "add-br", br, "--", "add-port", br, port, "--", "set", "Interface", port, "type=internal", "ofport_request=9")
	if got := d.vsctl("get", "Interface", port, "ofport", "type"); got != "9\ninternal\n" {
		t.Errorf("after the chain: %q", got)
	}
	d.vsctl("--if-exists", "del-port", "nope")
	d.vsctl("del-port", br, port, "--if-exists")
	if out, _, code := d.vsctlRaw("--version"); code != 0 || !strings.HasPrefix(out, "vsctl ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	if _, errOut, code := d.vsctlRaw("--bogus", "show"); code != 2 || !strings.Contains(errOut, "--bogus") {
		t.Errorf("--bogus show: exit %d, %q", code, errOut)
	}
	if _, errOut, code := d.vsctlRaw("list-br", "--", "pmd-stats-show"); code != 2 || !strings.Contains(errOut, "cannot be chained") {
		t.Errorf("chained datapath command: exit %d, %q", code, errOut)
	}
}

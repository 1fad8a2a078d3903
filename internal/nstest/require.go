package nstest

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// The tests of this tree fall in two kinds. Unit tests need nothing but Go.
// End-to-end tests need root (namespaces, veths, raw sockets) or a tool
// (Open vSwitch, iperf3, testpmd, QEMU, ...); on a laptop without them
// they skip with the reason, so that `go test ./...` is usable there, and
// with VSWITCH_E2E=1 (what CI sets) a missing requirement fails the test
// instead, so that CI never passes by skipping. With -short (make
// test-unit) the ones that need root skip whoever runs them: that is the
// quick part (comparisons with an installed tool such as ovs-ofctl are
// quick and stay).

// E2EEnv is the environment variable that makes requirements strict.
const E2EEnv = "VSWITCH_E2E"

// Strict reports whether a missing requirement fails the test
// (VSWITCH_E2E=1) rather than skipping it.
func Strict() bool { return os.Getenv(E2EEnv) == "1" }

// Unavailable ends the test for want of something it needs: it fails in
// strict mode and skips otherwise, saying what is missing either way. For
// requirements RequireRoot and RequireTool do not cover (a tmpfs mount, a
// kernel feature).
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("%s (required: %s=1)", msg, E2EEnv)
	}
	t.Skipf("%s (skipped; %s=1 makes this a failure)", msg, E2EEnv)
}

// skipShort skips an end-to-end test in -short mode.
func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped with -short")
	}
}

// RequireRoot ends the test (Unavailable) unless it runs as root: end-to-end
// tests create namespaces and interfaces. With -short it skips.
func RequireRoot(t testing.TB) {
	t.Helper()
	skipShort(t)
	if os.Geteuid() != 0 {
		Unavailable(t, "needs root (network namespaces, veth pairs, raw sockets)")
	}
}

// RequireTool ends the test (Unavailable) unless every named program is on
// PATH, and returns the path of the first.
func RequireTool(t testing.TB, names ...string) string {
	t.Helper()
	var first string
	for i, name := range names {
		path, err := exec.LookPath(name)
		if err != nil {
			Unavailable(t, "needs %s on PATH", name)
			return ""
		}
		if i == 0 {
			first = path
		}
	}
	return first
}

// HasTool reports whether name is on PATH, for a test that checks more with
// it but runs without it; in strict mode it is required like RequireTool.
func HasTool(t testing.TB, name string) bool {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if Strict() {
			t.Fatalf("needs %s on PATH (required: %s=1)", name, E2EEnv)
		}
		t.Logf("%s not on PATH: the checks that use it are left out", name)
		return false
	}
	return true
}

package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestEmbeddedDatabase: started with no database, the daemon serves the
// Open_vSwitch database from its state directory. The real ovs-vsctl,
// without --no-wait, and vsctl both configure it; traffic passes;
// ovsdb-tool reads the file; a command that cannot apply changes
// nothing; after kill -9 the daemon comes back with everything.
func TestEmbeddedDatabase(t *testing.T) {
	nstest.RequireTool(t, "ovs-vsctl", "ovs-ofctl", "ovsdb-tool")
	d := newDaemon(t)
	br := nstest.Name("brem")
	d.start("--default-bridge", br)
	db := "--db=unix:" + filepath.Join(d.stateDir, "db.sock")
	ovsVsctl := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(nstest.Run(t, "ovs-vsctl", append([]string{db, "--timeout=30"}, args...)...))
	}
	a, b := nstest.TwoHosts(t)
	ovsVsctl("add-port", br, a.Port, "--", "set", "Interface", a.Port, "ofport_request=11")
	d.vsctl("add-port", br, b.Port)
	nstest.Ping(t, a.NS, b.IP)
	if got := ovsVsctl("list-ports", br); got != strings.Join(sortedPair(a.Port, b.Port), "\n") {
		t.Errorf("ovs-vsctl list-ports: %q", got)
	}
	if got := ovsVsctl("get", "Interface", a.Port, "ofport"); got != "11" {
		t.Errorf("ofport of %s: %q", a.Port, got)
	}
	if got := ovsVsctl("get", "Interface", b.Port, "ofport"); got == "-1" || got == "[]" {
		t.Errorf("ofport of %s: %q", b.Port, got)
	}
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "unix:"+filepath.Join(d.stateDir, br+".mgmt"))
	if out := nstest.Run(t, "ovsdb-tool", "show-log", filepath.Join(d.stateDir, "conf.db")); !strings.Contains(out, "add-port") {
		t.Errorf("ovsdb-tool show-log lacks ovs-vsctl's add-port:\n%s", out)
	}

	// A bad value: vsctl refuses it and writes nothing.
	if _, errOut, code := d.vsctlRaw("set", "Interface", a.Port, "ofport_request=70000"); code == 0 || !strings.Contains(errOut, "ofport_request") {
		t.Errorf("ofport_request=70000: exit %d, %q", code, errOut)
	}
	if got := ovsVsctl("get", "Interface", a.Port, "ofport_request"); got != "11" {
		t.Errorf("a refused set changed the database: ofport_request %q", got)
	}
	// An interface that does not exist yet: the port waits for it, and
	// the database says why it does not run, as with Open vSwitch.
	ghost := nstest.Name("vsgh")
	d.vsctl("add-port", br, ghost)
	if got := ovsVsctl("get", "Interface", ghost, "ofport", "error"); !strings.HasPrefix(got, "-1\n") || !strings.Contains(got, "No such device") {
		t.Errorf("port without its interface: ofport, error %q", got)
	}
	ovsVsctl("del-port", br, ghost)

	d.kill9()
	d.start("--default-bridge", br)
	nstest.Ping(t, a.NS, b.IP)
	if got := ovsVsctl("get", "Interface", a.Port, "ofport"); got != "11" {
		t.Errorf("ofport of %s after kill -9: %q", a.Port, got)
	}
	ovsVsctl("del-port", br, b.Port)
	if got := d.vsctl("list-ports", br); strings.TrimSpace(got) != a.Port {
		t.Errorf("vsctl list-ports after ovs-vsctl del-port: %q", got)
	}
	if out, err := a.NS.Output("ping", "-c", "1", "-W", "1", b.IP); err == nil {
		t.Errorf("ping crossed a deleted port:\n%s", out)
	}
	if _, err := exec.LookPath("ovs-appctl"); err == nil {
		nstest.Run(t, "ovs-appctl", "-t", filepath.Join(d.stateDir, "ovs-vswitchd.ctl"), "dpif/show")
	}
}

func sortedPair(a, b string) []string {
	if b < a {
		return []string{b, a}
	}
	return []string{a, b}
}

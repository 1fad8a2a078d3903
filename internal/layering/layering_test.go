// Package layering holds only a test: the import rules between the
// repository's layers, checked on what the go command resolves, so that a
// new import cannot break them unnoticed.
package layering

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/vswitch-go/vswitch/"

// deps lists the packages of this module that pkgs depend on (themselves
// included), as `go list -deps` resolves them for this platform.
func deps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pkgs...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var ours []string
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, module) {
			ours = append(ours, strings.TrimPrefix(p, module))
		}
	}
	return ours
}

// TestLowerLayersDoNotImportUpper: the datapath, the port drivers and the
// OpenFlow layer never import the clients (ctl/), the binaries (cmd/) or
// the daemon (vswitchd/). What they share with those (the flow syntax,
// say) belongs in the lower layer.
func TestLowerLayersDoNotImportUpper(t *testing.T) {
	for _, p := range deps(t, "./datapath/...", "./netdev/...", "./ofproto/...") {
		for _, upper := range []string{"ctl", "cmd", "vswitchd"} {
			if p == upper || strings.HasPrefix(p, upper+"/") {
				t.Errorf("datapath/, netdev/ or ofproto/ depends on %s (go list -deps ./datapath/... ./netdev/... ./ofproto/... | grep /%s)", p, upper)
			}
		}
	}
}

// TestOfptextIsALeaf: the text syntax (ofproto/ofptext) stands beside the
// wire format and the match, below the bridge, so that vsctl, the daemon
// and xlate's trace can all use it without taking in the switch.
func TestOfptextIsALeaf(t *testing.T) {
	allowed := []string{"ofproto/ofptext", "ofproto/ofpwire", "ofproto/ofmatch", "datapath/flow", "datapath/header"}
	for _, p := range deps(t, "./ofproto/ofptext") {
		if !slices.Contains(allowed, p) {
			t.Errorf("ofproto/ofptext depends on %s; it may use only %v", p, allowed[1:])
		}
	}
}

// TestVsctlDoesNotLinkTheDaemon: vsctl is a client; the few names it
// shares with the daemon live in vswitchd/mgmt. The flow syntax and the
// protocol numbers it is written in (datapath/header) are leaves it may use.
func TestVsctlDoesNotLinkTheDaemon(t *testing.T) {
	for _, p := range deps(t, "./cmd/vsctl") {
		if p == "vswitchd" || p == "ofproto" || strings.HasPrefix(p, "datapath/") && p != "datapath/flow" && p != "datapath/header" {
			t.Errorf("cmd/vsctl depends on %s", p)
		}
	}
}

// TestNetrackStaysInOfpwire: github.com/netrack/openflow is the codec's
// building material, not the switch's vocabulary. Every other package,
// tests included, names OpenFlow through ofproto/ofpwire, so that the
// dependency can be replaced or patched in one package.
func TestNetrackStaysInOfpwire(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v: %s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == module+"ofproto/ofpwire" {
			continue
		}
		checked++
		for _, imp := range f[1:] {
			if imp == "github.com/netrack/openflow" || strings.HasPrefix(imp, "github.com/netrack/openflow/") {
				t.Errorf("%s imports %s; use ofproto/ofpwire's names instead", f[0], imp)
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list named no packages")
	}
}

package vswitchd

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestDaemonAddPortBeforeInterface: as in Open vSwitch, add-port of a
// kernel interface that does not exist yet is accepted; the port shows
// ofport -1 and the error "could not open network device X (No such
// device)" until the interface appears, then runs under the number it
// asked for, and waits again when the interface goes. A bad type or
// option is still refused, interface or not.
func TestDaemonAddPortBeforeInterface(t *testing.T) {
	nstest.RequireRoot(t)
	veth, peer := nstest.Name("vsaw"), nstest.Name("vsax")
	t.Cleanup(func() { nstest.Output("ip", "link", "del", veth) })
	d, logs := startLogged(t)
	br := nstest.Name("vsbr") // its own interface is in the host's namespace
	mustCall(t, d, "add-br", br, "fail_mode=secure")

	r, err := call(t, d, "add-port", br, veth, "type=afpacket", "ofport_request=7")
	if err != nil {
		t.Fatalf("add-port of an interface that does not exist yet: %v", err)
	}
	var res struct{ OFPort int }
	if err := json.Unmarshal(r.Data, &res); err != nil || res.OFPort != -1 {
		t.Fatalf("add-port data %s (%v), want ofport -1", r.Data, err)
	}
	wantErr := "could not open network device " + veth + " (No such device)"
	waiting := func(what string) {
		t.Helper()
		nstest.WaitFor(t, 5*time.Second, "port "+veth+" to stop "+what, func() bool {
			return d.runningBridge(br).portByName(veth) == nil
		})
		// The database has it once the write-back has run.
		var got string
		nstest.WaitFor(t, 5*time.Second, "the database to report "+veth+" waiting "+what, func() bool {
			got = mustCall(t, d, "get", "Interface", veth, "ofport", "error", "ofport_request")
			return got == "-1\n\""+wantErr+"\"\n7\n"
		})
		if l := mustCall(t, d, "list", "Interface", veth); !strings.Contains(l, `error               : "`+wantErr+`"`) {
			t.Fatalf("%s: list Interface:\n%s", what, l)
		}
		if s := mustCall(t, d, "show"); !strings.Contains(s, "ofport: -1") || !strings.Contains(s, "error: not running: "+wantErr) {
			t.Fatalf("%s: show:\n%s", what, s)
		}
		if got := mustCall(t, d, "list-ports", br); got != veth+"\n" {
			t.Fatalf("%s: list-ports %q", what, got)
		}
	}
	waiting("before its interface exists")

	for _, args := range [][]string{
		{"add-port", br, nstest.Name("vsay"), "type=frob"},
		{"add-port", br, nstest.Name("vsay"), "type=afxdp", "options:xdp-mode=bogus"},
		{"add-port", br, nstest.Name("vsay"), "options:frob=1"},
	} {
		if _, err := call(t, d, args...); err == nil {
			t.Errorf("%v succeeded", args)
		}
	}

	// Other changes leave a waiting port waiting, without trying to open
	// it again and logging the failure each time.
	tries := func() int { return len(logs.linesWith(`msg="port waits for its interface"`, "port="+veth)) }
	n := tries()
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:tx-flush-interval=50")
	if tries() != n {
		t.Fatalf("an unrelated change retried the waiting port: %q", logs.linesWith("port="+veth))
	}
	waiting("after an unrelated change")

	running := func(what string) {
		t.Helper()
		nstest.WaitFor(t, 5*time.Second, "port "+veth+" to run "+what, func() bool {
			return d.runningBridge(br).portByName(veth) != nil
		})
		if no := d.runningBridge(br).portByName(veth).no; no != 7 {
			t.Fatalf("%s: the port runs as %d, want its ofport_request 7", what, no)
		}
		nstest.WaitFor(t, 5*time.Second, "the database to report "+veth+" running "+what, func() bool {
			return mustCall(t, d, "get", "Interface", veth, "ofport", "error") == "7\n[]\n"
		})
		if s := mustCall(t, d, "show"); !strings.Contains(s, "ofport: 7") || strings.Contains(s, "not running") {
			t.Fatalf("%s: show:\n%s", what, s)
		}
	}
	vethPair(t, veth, peer)
	running("once its interface was created")
	nstest.Run(t, "ip", "link", "del", veth)
	waiting("after its interface was deleted")
	vethPair(t, veth, peer)
	running("once its interface was created again")
}

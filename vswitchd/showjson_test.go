package vswitchd

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestShowJSONLists: show's data (what vsctl --format=json show prints)
// has "ports": [] for a bridge without ports and lists each bridge's
// controllers with target and connection state, "controllers": [] for
// none; with no bridge at all it is [] too.
func TestShowJSONLists(t *testing.T) {
	d, err := Start(Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	show := func() (string, []map[string]json.RawMessage) {
		t.Helper()
		r, err := call(t, d, "show")
		if err != nil {
			t.Fatal(err)
		}
		var v []map[string]json.RawMessage
		if err := json.Unmarshal(r.Data, &v); err != nil {
			t.Fatalf("show data %s: %v", r.Data, err)
		}
		return string(r.Data), v
	}
	if raw, _ := show(); strings.TrimSpace(raw) != "[]" {
		t.Fatalf("show without bridges: %s, want []", raw)
	}
	mustCall(t, d, "add-br", "brj0")
	mustCall(t, d, "add-br", "brj1")
	// Port 1 of TEST-NET-2 refuses or never answers: not connected.
	mustCall(t, d, "set-controller", "brj1", "tcp:198.51.100.1:6653")
	raw, views := show()
	if len(views) != 2 {
		t.Fatalf("show data %s: want two bridges", raw)
	}
	for _, v := range views {
		var name string
		json.Unmarshal(v["name"], &name)
		if got := string(v["ports"]); got != "[]" {
			t.Errorf("%s: \"ports\": %s, want []", name, got)
		}
		var cs []ControllerStatus
		if err := json.Unmarshal(v["controllers"], &cs); err != nil || v["controllers"] == nil {
			t.Fatalf("%s: \"controllers\": %s (%v)", name, v["controllers"], err)
		}
		switch name {
		case "brj0":
			if got := string(v["controllers"]); got != "[]" {
				t.Errorf("brj0: \"controllers\": %s, want []", got)
			}
		case "brj1":
			if len(cs) != 1 || cs[0].Target != "tcp:198.51.100.1:6653" || cs[0].Connected || cs[0].State == "" {
				t.Errorf("brj1: controllers %+v, want the target, not connected, with its state", cs)
			}
		}
	}
}

package config

import (
	"slices"
	"testing"
)

// TestReplace: c becomes want, keeping the order c gave the controllers
// and protocols while the set is the same (the database has no order),
// and want is not shared.
func TestReplace(t *testing.T) {
	c := &Config{
		OtherConfig: map[string]string{"n-pmd": "2"},
		Bridges: map[string]*Bridge{
			"br0": {Name: "br0", FailMode: "standalone", Controllers: []string{"tcp:b", "tcp:a"}, Protocols: []string{"OpenFlow15", "OpenFlow13"}},
			"br1": {Name: "br1", FailMode: "standalone"},
		}}
	want := &Config{Bridges: map[string]*Bridge{"br0": {Name: "br0", FailMode: "secure",
		Controllers: []string{"tcp:a", "tcp:b"}, Protocols: []string{"OpenFlow13"}}}}
	Replace(c, want)
	if c.OtherConfig != nil || len(c.Bridges) != 1 || c.Bridges["br0"].FailMode != "secure" {
		t.Fatalf("not replaced: %+v", c)
	}
	b := c.Bridges["br0"]
	if !slices.Equal(b.Controllers, []string{"tcp:b", "tcp:a"}) {
		t.Errorf("controllers %q, want the order kept", b.Controllers)
	}
	if !slices.Equal(b.Protocols, []string{"OpenFlow13"}) {
		t.Errorf("protocols %q, want the new set", b.Protocols)
	}
	if b.Ports == nil {
		t.Error("no port map")
	}
	b.Controllers[0] = "changed"
	if want.Bridges["br0"].Controllers[0] == "changed" {
		t.Error("want shares memory with c")
	}
}

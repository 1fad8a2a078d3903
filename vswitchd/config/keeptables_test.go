package config

import (
	"slices"
	"testing"
)

// TestSetKeepingTables: rolling a failed change back restores the
// configuration but not an older snapshot of the flow tables.
func TestSetKeepingTables(t *testing.T) {
	old := &Config{Bridges: map[string]*Bridge{"br0": {Name: "br0", FailMode: "secure", Flows: []string{"a"}}}}
	c := &Config{
		OtherConfig: map[string]string{"n-pmd": "2"},
		Bridges: map[string]*Bridge{
			"br0": {Name: "br0", FailMode: "standalone", Flows: []string{"a", "b"}, Groups: []string{"g"}},
			"br1": {Name: "br1", FailMode: "standalone"},
		}}
	SetKeepingTables(c, old)
	if c.OtherConfig != nil || len(c.Bridges) != 1 || c.Bridges["br0"].FailMode != "secure" {
		t.Fatalf("configuration not restored: %+v", c)
	}
	if b := c.Bridges["br0"]; !slices.Equal(b.Flows, []string{"a", "b"}) || !slices.Equal(b.Groups, []string{"g"}) {
		t.Fatalf("tables %q %q, want the newer snapshot", b.Flows, b.Groups)
	}
	if !slices.Equal(old.Bridges["br0"].Flows, []string{"a"}) {
		t.Fatal("old was modified")
	}
}

package mgmt

import (
	"slices"
	"testing"
)

func TestBridgeSocketPaths(t *testing.T) {
	t.Setenv("OVS_RUNDIR", "/r")
	if got := BridgeSocketPaths("/s", "br0"); !slices.Equal(got, []string{"/s/br0.mgmt", "/r/br0.mgmt"}) {
		t.Fatalf("with OVS_RUNDIR: %q", got)
	}
	t.Setenv("OVS_RUNDIR", "")
	if got := BridgeSocketPaths("/s", "br0"); got[1] != DefaultOVSRunDir+"/br0.mgmt" {
		t.Fatalf("without OVS_RUNDIR: %q", got)
	}
}

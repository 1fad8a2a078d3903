package vswitchd

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
)

func savedTablesBridge(t *testing.T) *ofproto.Bridge {
	t.Helper()
	up := &ofproto.UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	of, err := ofproto.NewBridge("br0", dp, ofproto.BridgeConfig{DatapathID: 1, FailMode: ofproto.FailSecure,
		ManagementTargets: []string{"punix:" + filepath.Join(t.TempDir(), "br0.mgmt")},
		Upcall:            up, Conn: ofconn.Config{ProbeInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(of.Close)
	return of
}

// TestSavedTablesRoundTrip: the tables saved as lines come back on another
// bridge as the same lines, and a restore that fails names the line at
// fault in the words the daemon has always logged.
func TestSavedTablesRoundTrip(t *testing.T) {
	src := savedTablesBridge(t)
	meters := []string{"meter=1,pktps,bands=type=drop,rate=100,burst_size=10"}
	groups := []string{"group_id=1,type=indirect,bucket=actions=group:2", "group_id=2,type=all,bucket=actions=drop"}
	flows := []string{"table=1,priority=5,tcp,tp_dst=80 actions=drop", "priority=10,in_port=1 actions=meter:1,group:1"}
	if err := restoreMeters(src, meters); err != nil {
		t.Fatal(err)
	}
	if err := restoreGroups(src, groups); err != nil {
		t.Fatal(err)
	}
	if err := restoreFlows(src, flows, nil); err != nil {
		t.Fatal(err)
	}
	fl, gl, ml := flowLines(src), groupLines(src), meterLines(src)
	if len(fl) != 2 || len(gl) != 2 || len(ml) != 1 || !strings.HasPrefix(fl[0], "priority=10,in_port=1 ") {
		t.Fatalf("saved flows %q groups %q meters %q", fl, gl, ml)
	}
	dst := savedTablesBridge(t)
	if err := restoreMeters(dst, ml); err != nil {
		t.Fatal(err)
	}
	if err := restoreGroups(dst, gl); err != nil {
		t.Fatal(err)
	}
	if err := restoreFlows(dst, fl, flowStates(src)); err != nil {
		t.Fatal(err)
	}
	if got := flowLines(dst); !slices.Equal(got, fl) {
		t.Fatalf("restored flows %q, want %q", got, fl)
	}
	if got := groupLines(dst); !slices.Equal(got, gl) {
		t.Fatalf("restored groups %q, want %q", got, gl)
	}

	for _, c := range []struct {
		err  error
		want string
	}{
		{restoreFlows(dst, []string{"actions=drop", "frob actions=drop"}, nil), `ofproto: restoring flow 2: bad flow "frob actions=drop": unknown keyword "frob"`},
		{restoreFlows(dst, []string{"actions=drop", "actions=group:9"}, nil), `ofproto: restoring flow 2 "actions=group:9": `},
		{restoreGroups(dst, []string{"group_id=5,type=all,bucket=actions=group:9"}), `ofproto: restoring "group_id=5,type=all,bucket=actions=group:9": `},
		{restoreMeters(dst, []string{"meter=3,frobnicate"}), "ofproto: restoring meter 1: "},
	} {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.want) {
			t.Errorf("error %v, want it to start %q", c.err, c.want)
		}
	}
	if got := flowLines(dst); !slices.Equal(got, fl) {
		t.Fatalf("failed restores changed the flows to %q", got)
	}
}

package dbctl

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbserver/dbtest"
)

// testDB serves an Open_vSwitch database holding c in this process (the
// daemon's embedded server, no daemon: commands run with NoWait) and
// returns a client of it.
func testDB(t *testing.T, c *config.Config) *Client {
	t.Helper()
	ops, err := dbconfig.InitOps(c)
	if err != nil {
		t.Fatal(err)
	}
	_, endpoint := dbtest.Serve(t, ops)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := Dial(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func run(t *testing.T, cl *Client, cmds ...[]string) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cl.Run(ctx, cmds, Options{NoWait: true})
}

func snapshot(t *testing.T, cl *Client) *config.Config {
	t.Helper()
	s, err := cl.read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.cfg
}

// TestRunWritesAndReads: the commands change the database as the daemon
// reads it (dbconfig.Wanted), and reads see the changes of the commands
// before them in a chain.
func TestRunWritesAndReads(t *testing.T) {
	cl := testDB(t, &config.Config{})
	if _, err := run(t, cl, []string{"add-br", "br0"}, []string{"add-port", "br0", "p1", "type=internal", "ofport_request=7"},
		[]string{"set", "Port", "p1", "tag=10"}, []string{"set", "Open_vSwitch", ".", "other_config:n-pmd=1"}); err != nil {
		t.Fatal(err)
	}
	c := snapshot(t, cl)
	p := c.Bridges["br0"].Ports["p1"]
	if p == nil || p.Type != config.PortTypeInternal || p.OFPortRequest != 7 || p.Tag != 10 || c.OtherConfig["n-pmd"] != "1" {
		t.Fatalf("after the chain: %+v, other_config %v", p, c.OtherConfig)
	}
	r, err := run(t, cl, []string{"list-ports", "br0"}, []string{"get", "Port", "p1", "tag"}, []string{"port-to-br", "p1"})
	if err != nil || r.Text != "p1\n10\nbr0\n" {
		t.Fatalf("reads: %q, %v", r.Text, err)
	}
	// ofport is the switch's to write: none yet without a daemon.
	if r, err := run(t, cl, []string{"get", "Interface", "p1", "ofport", "error"}); err != nil || r.Text != "[]\n[]\n" {
		t.Fatalf("get ofport, error before the daemon reported: %q, %v", r.Text, err)
	}
	if _, err := run(t, cl, []string{"del-br", "br0"}); err != nil {
		t.Fatal(err)
	}
	if c := snapshot(t, cl); len(c.Bridges) != 0 {
		t.Fatalf("del-br left %v", c.Bridges)
	}
}

// TestRunRefusesAndChangesNothing: a bad command, alone or in a chain
// after good ones, is refused with the reason and the database keeps
// what it held.
func TestRunRefusesAndChangesNothing(t *testing.T) {
	cl := testDB(t, &config.Config{Bridges: map[string]*config.Bridge{"br0": {Name: "br0", FailMode: config.FailModeStandalone}}})
	before := snapshot(t, cl)
	for _, tc := range []struct {
		cmds [][]string
		want string
	}{
		{[][]string{{"add-port", "nosuchbr", "x1"}}, "no such bridge"},
		{[][]string{{"add-port", "br0", "p9", "type=frob"}}, "unknown port type"},
		{[][]string{{"add-port", "br0", "p9", "type=afxdp", "options:xdp-mode=bogus"}}, "xdp-mode"},
		{[][]string{{"add-port", "br0", "p9", "type=vhostuserclient"}}, "vhost-server-path"},
		{[][]string{{"add-port", "br0", "v9", "type=vxlan", "options:remote_ip=nope"}}, "remote_ip"},
		{[][]string{{"add-br", "br0"}}, "already exists"},
		{[][]string{{"add-br", "a b"}}, "whitespace"},
		{[][]string{{"set", "Open_vSwitch", ".", "other_config:tx-flush-interval=abc"}}, "not an integer"},
		{[][]string{{"set", "Open_vSwitch", ".", "other_config:no-such-key=1"}}, "no key"},
		{[][]string{{"set", "Open_vSwitch", ".", "other_config:max-ports-per-request=1"}, {"add-port", "br0", "i1", "type=internal"}, {"add-port", "br0", "i2", "type=internal"}}, "max-ports-per-request"},
		{[][]string{{"set", "Bridge", "br0", "fail_mode=sometimes"}}, "standalone or secure"},
		{[][]string{{"set-controller", "br0", "bogus:1.2.3.4"}}, "unknown method"},
		// The good commands before the bad one are not written either.
		{[][]string{{"add-br", "br1"}, {"add-port", "br1", "p1", "type=internal"}, {"del-port", "br1", "nope"}}, "no such port"},
	} {
		_, err := run(t, cl, tc.cmds...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.cmds, err, tc.want)
		}
		if after := snapshot(t, cl); !reflect.DeepEqual(after, before) {
			t.Fatalf("%v changed the database: %+v", tc.cmds, after)
		}
	}
	if _, err := run(t, cl, []string{"br-exists", "nosuchbr"}); err == nil {
		t.Error("br-exists of a missing bridge succeeded")
	}
}

package dbconfig

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbserver/dbtest"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// TestChangeOpsRoundTrip: each change written by changeOps reads back,
// through wantedConfig, as the configuration it was written from, on the
// embedded server; rows and columns the change does not touch (another
// client's external_ids, a row the switch refuses) stay.
func TestChangeOpsRoundTrip(t *testing.T) {
	port := func(name, typ string) *config.Port { return &config.Port{Name: name, Type: typ} }
	cur := &config.Config{OtherConfig: map[string]string{"n-pmd": "1"}, Bridges: map[string]*config.Bridge{
		"br0": {Name: "br0", FailMode: config.FailModeStandalone, Ports: map[string]*config.Port{
			"p1": {Name: "p1", Type: config.PortTypeInternal, Tag: 5},
			"p2": port("p2", config.PortTypeAFPacket),
		}},
	}}
	ops, err := InitOps(cur)
	if err != nil {
		t.Fatal(err)
	}
	_, endpoint := dbtest.Serve(t, ops)

	dbModel, _ := vswitchdb.FullDatabaseModel()
	cli, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cli.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.MonitorAll(ctx); err != nil {
		t.Fatal(err)
	}
	read := func() *Rows {
		rs, err := Read(ctx, cli)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	// Another client's column, and a row the switch does not run.
	transact := func(ops []ovsdb.Operation) {
		t.Helper()
		res, err := cli.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	waitRows := func(what string, ok func(*Rows) bool) *Rows {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			rs := read()
			if ok(rs) {
				return rs
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	rs := waitRows("the initial rows", func(rs *Rows) bool { return len(rs.Ifaces) == 3 })
	var p1If string
	for u, i := range rs.Ifaces {
		if i.Name == "p1" {
			p1If = u
		}
	}
	var br0 string
	for u := range rs.Bridges {
		br0 = u
	}
	transact([]ovsdb.Operation{
		{Op: ovsdb.OperationUpdate, Table: "Interface", Where: ByUUIDWhere(p1If), Row: ovsdb.Row{"external_ids": strMap(map[string]string{"iface-id": "lsp1"})}},
		{Op: ovsdb.OperationInsert, Table: "Interface", UUIDName: "si", Row: ovsdb.Row{"name": "stt0", "type": "stt"}},
		{Op: ovsdb.OperationInsert, Table: "Port", UUIDName: "sp", Row: ovsdb.Row{"name": "stt0", "interfaces": ovsdb.UUID{GoUUID: "si"}}},
		{Op: ovsdb.OperationMutate, Table: "Bridge", Where: ByUUIDWhere(br0),
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("ports", ovsdb.MutateOperationInsert, uuidSet([]string{"sp"}))}},
	})

	steps := []struct {
		name string
		edit func(c *config.Config)
	}{
		{"tag and trunks", func(c *config.Config) {
			c.Bridges["br0"].Ports["p1"].Tag = 0
			c.Bridges["br0"].Ports["p1"].Trunks = []uint16{10, 20}
		}},
		{"options, other_config, ofport_request, mtu_request", func(c *config.Config) {
			p := c.Bridges["br0"].Ports["p2"]
			p.Options = map[string]string{"n_rxq": "2"}
			p.OtherConfig = map[string]string{"pmd-rxq-affinity": "0:0"}
			p.OFPortRequest, p.MTURequest = 7, 1400
		}},
		{"a second bridge with a patch port and controllers", func(c *config.Config) {
			c.Bridges["br1"] = &config.Bridge{Name: "br1", FailMode: config.FailModeSecure,
				Controllers:       []string{"ptcp:6653:127.0.0.1", "tcp:127.0.0.1:6633"},
				ControllerOptions: map[string]config.ControllerOptions{"tcp:127.0.0.1:6633": {InactivityProbe: -1, MaxBackoff: 2000}},
				Protocols:         []string{"OpenFlow13", "OpenFlow15"},
				OtherConfig:       map[string]string{"mac-aging-time": "60"},
				Ports:             map[string]*config.Port{"px": {Name: "px", Type: config.PortTypePatch, Options: map[string]string{"peer": "py"}}}}
		}},
		{"a controller goes, one's options change, settings change", func(c *config.Config) {
			b := c.Bridges["br1"]
			b.Controllers = []string{"tcp:127.0.0.1:6633"}
			b.ControllerOptions = map[string]config.ControllerOptions{"tcp:127.0.0.1:6633": {InactivityProbe: 5000}}
			b.Protocols = nil
			b.FailMode = config.FailModeStandalone
			delete(b.OtherConfig, "mac-aging-time")
			c.OtherConfig = map[string]string{"tx-flush-interval": "50"}
			c.SSL = &config.SSL{PrivateKey: "/k", Certificate: "/c", CACert: "/ca"}
		}},
		{"ports deleted, options emptied, SSL dropped", func(c *config.Config) {
			delete(c.Bridges["br0"].Ports, "p2")
			c.Bridges["br1"].Ports["px"].Options = map[string]string{"peer": "pz"}
			c.SSL = nil
		}},
		{"a bridge deleted", func(c *config.Config) { delete(c.Bridges, "br1") }},
	}
	for _, st := range steps {
		next := cur.Clone()
		st.edit(next)
		ops, err := ChangeOps(read(), cur, next)
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		transact(ops)
		want := normalized(next)
		rs = waitRows(st.name, func(rs *Rows) bool { return reflect.DeepEqual(normalized(Wanted(rs).Config), want) })
		cur = next
	}
	if rs.Ifaces[p1If] == nil || rs.Ifaces[p1If].ExternalIDs["iface-id"] != "lsp1" {
		t.Errorf("another client's external_ids were lost: %+v", rs.Ifaces[p1If])
	}
	found := false
	for _, p := range rs.Ports {
		found = found || p.Name == "stt0"
	}
	if !found {
		t.Error("a row the switch refuses was deleted by a change that did not touch it")
	}
}

// normalized is c as Wanted reads it back: empty maps and lists
// nil, the local port left out (wantedConfig does not list it).
func normalized(c *config.Config) *config.Config {
	out := c.Clone()
	if len(out.OtherConfig) == 0 {
		out.OtherConfig = nil
	}
	for _, b := range out.Bridges {
		if len(b.OtherConfig) == 0 {
			b.OtherConfig = nil
		}
		if len(b.ControllerOptions) == 0 {
			b.ControllerOptions = nil
		}
		if len(b.Controllers) == 0 {
			b.Controllers = nil
		}
		if len(b.Protocols) == 0 {
			b.Protocols = nil
		}
		if b.Ports == nil {
			b.Ports = map[string]*config.Port{}
		}
		for _, p := range b.Ports {
			p.OFPort = 0
			if len(p.Options) == 0 {
				p.Options = nil
			}
			if len(p.OtherConfig) == 0 {
				p.OtherConfig = nil
			}
			if len(p.Trunks) == 0 {
				p.Trunks = nil
			}
		}
	}
	return out
}

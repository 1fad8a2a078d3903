package dbctl

import (
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/vswitchd/config"
)

func TestParseCPUMask(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0x2": {1}, "6": {1, 2}, "0X1": {0}, "0x10": {4}, "0x100000001": {0, 32}} {
		got, err := config.ParseCPUMask(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("config.ParseCPUMask(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"0", "zz", "0x", "0x0"} {
		if _, err := config.ParseCPUMask(bad); err == nil {
			t.Errorf("config.ParseCPUMask(%q) accepted", bad)
		}
	}
}

func testConfig() *config.Config {
	return &config.Config{Bridges: map[string]*config.Bridge{
		"br0": {Name: "br0", FailMode: "standalone", Ports: map[string]*config.Port{
			"p1": {Name: "p1", OFPort: 1},
		}},
	}}
}

func TestSetGetColumns(t *testing.T) {
	c := testConfig()
	for _, tc := range []struct {
		table, rec, kv, get, want string
	}{
		{tableSwitch, ".", "other_config:tx-flush-interval=50", "other_config:tx-flush-interval", "50"},
		{tableBridge, "br0", "fail_mode=secure", "fail_mode", "secure"},
		{tableBridge, "br0", `other_config:datapath-id="0000000000000001"`, "datapath_id", "0000000000000001"},
		{tableBridge, "br0", "controller=[tcp:198.18.0.9:6653, ptcp:6654]", "controller", `["tcp:198.18.0.9:6653", "ptcp:6654"]`},
		{tableBridge, "br0", "protocols=OpenFlow13", "protocols", "[OpenFlow13]"},
		{tableBridge, "br0", "protocols=[OpenFlow15,OpenFlow10,OpenFlow15]", "protocols", "[OpenFlow10, OpenFlow15]"},
		{tableInterface, "p1", "options:n_rxq=2", "options", `{n_rxq="2"}`},
		{tableInterface, "p1", "type=afpacket", "type", "afpacket"},
		{tablePort, "p1", "ofport_request=7", "ofport_request", "7"},
		{tablePort, "p1", "other_config:tx-flush-interval=0", "other_config:tx-flush-interval", "0"},
		{tablePort, "p1", "tag=10", "tag", "10"},
		{tablePort, "p1", "trunks=[20, 30]", "trunks", "[20, 30]"},
		{tablePort, "p1", "tag=[]", "tag", "[]"},
		{tablePort, "p1", "trunks=[]", "trunks", "[]"},
	} {
		rec, err := record(c, tc.table, tc.rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := setColumn(c, tc.table, rec, tc.kv); err != nil {
			t.Fatalf("set %s %s: %v", tc.table, tc.kv, err)
		}
		got, err := getColumn(tc.table, rec, tc.get)
		if err != nil || got != tc.want {
			t.Errorf("get %s %s = %q, %v; want %q", tc.table, tc.get, got, err, tc.want)
		}
	}
}

func TestSetColumnErrors(t *testing.T) {
	for _, tc := range []struct{ table, rec, kv, want string }{
		{tableSwitch, ".", "other_config:frob=1", "no key"},
		{tableSwitch, ".", "fail_mode=secure", "no column"},
		{tableBridge, "br0", "fail_mode=maybe", "standalone or secure"},
		{tableBridge, "br0", "protocols=[OpenFlow13,OpenFlow12]", `"OpenFlow12" is not a version this switch speaks`},
		{tableBridge, "br0", "other_config=1", "KEY=VALUE"},
		{tableBridge, "br0", "name=x", "cannot be set"},
		{tablePort, "p1", "ofport_request=0", "1..65279"},
		{tablePort, "p1", "ofport_request=x", "1..65279"},
		{tablePort, "p1", "noequals", "COLUMN"},
		{tablePort, "p1", "options:=1", "empty key"},
		{tablePort, "p1", "tag=4095", "VLAN id"},
		{tablePort, "p1", "trunks=10,x", "VLAN id"},
	} {
		c := testConfig()
		rec, err := record(c, tc.table, tc.rec)
		if err != nil {
			t.Fatal(err)
		}
		err = setColumn(c, tc.table, rec, tc.kv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("set %s %s: %v, want error with %q", tc.table, tc.kv, err, tc.want)
		}
	}
	c := testConfig()
	for _, tc := range []struct{ table, rec, want string }{
		{tableSwitch, "x", "one record"},
		{tableBridge, "nope", "no such bridge"},
		{tablePort, "nope", "no such port"},
	} {
		if _, err := record(c, tc.table, tc.rec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("record %s %s: %v", tc.table, tc.rec, err)
		}
	}
	if _, err := normTable("flows"); err == nil {
		t.Error("unknown table accepted")
	}
}

func TestCheckPortOptions(t *testing.T) {
	ok := []*config.Port{
		{Name: "a", Type: "afxdp", Options: map[string]string{"n_rxq": "2", "xdp-mode": "generic"}},
		{Name: "b", Type: "vhostuserclient", Options: map[string]string{"vhost-server-path": "/x"}},
		{Name: "c"},
		{Name: "d", Type: "afpacket", Options: map[string]string{"n_rxq_desc": "16384"}},
		{Name: "e", Options: map[string]string{"n_rxq_desc": "65536"}},
	}
	for _, p := range ok {
		if err := config.CheckPortOptions(p); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	bad := []*config.Port{
		{Name: "a", Type: "afpacket", Options: map[string]string{"xdp-mode": "generic"}},
		{Name: "b", Type: "tap", Options: map[string]string{"n_rxq": "0"}},
		{Name: "c", Type: "frob"},
		{Name: "d", Type: "afxdp", Options: map[string]string{"n_rxq_desc": "0"}},
		{Name: "e", Type: "afpacket", Options: map[string]string{"n_rxq_desc": "65537"}},
		{Name: "f", Type: "tap", Options: map[string]string{"n_rxq_desc": "512"}},
	}
	for _, p := range bad {
		if err := config.CheckPortOptions(p); err == nil {
			t.Errorf("%s accepted", p.Name)
		}
	}
}

func TestSplitList(t *testing.T) {
	if got := splitList(`["tcp:1.2.3.4:6653", ptcp:6654]`); !slices.Equal(got, []string{"tcp:1.2.3.4:6653", "ptcp:6654"}) {
		t.Fatalf("%q", got)
	}
	if got := splitList("tcp:1.2.3.4"); !slices.Equal(got, []string{"tcp:1.2.3.4"}) {
		t.Fatalf("%q", got)
	}
}

// FuzzSetColumn: any COLUMN[:KEY]=VALUE on any table either applies or
// fails with an error, and the result always validates or is refused.
func FuzzSetColumn(f *testing.F) {
	for _, s := range []string{"other_config:tx-flush-interval=50", "fail_mode=secure",
		`controller=["tcp:1.2.3.4:6653", ptcp:6654]`, "options:n_rxq=2", "ofport_request=7",
		`type="afpacket"`, "options:=", "=", `other_config:k="\x00"`} {
		for tbl := range 4 {
			f.Add(tbl, s)
		}
	}
	tables := []string{tableSwitch, tableBridge, tablePort, tableInterface}
	names := map[string]string{tableSwitch: ".", tableBridge: "br0", tablePort: "p1", tableInterface: "p1"}
	f.Fuzz(func(t *testing.T, tbl int, kv string) {
		table := tables[(tbl%4+4)%4]
		c := testConfig()
		rec, err := record(c, table, names[table])
		if err != nil {
			t.Fatal(err)
		}
		if err := setColumn(c, table, rec, kv); err != nil {
			return
		}
		if p, ok := rec.(*config.Port); ok {
			config.CheckPortOptions(p)
		}
		config.Validate(c) // must not panic, whatever it says
	})
}

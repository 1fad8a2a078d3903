package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/ctl/dbctl"
	"github.com/vswitch-go/vswitch/ctl/ofctl"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// shape is what a command prints with --format json (docs/user-guide.md,
// "JSON output"): kind is object, array, string or bool; keys are the
// keys an object has, or the elements of an array have (an array's
// elements are objects when keys are given, else strings unless elem
// says otherwise).
type shape struct {
	kind string
	keys []string
	elem string
	// none allows an empty array (queue-stats: no port has queues).
	none bool
}

var (
	empty      = shape{kind: "object"} // a command that only changes things: {}
	names      = shape{kind: "array", elem: "string"}
	flowKeys   = []string{"table", "priority", "cookie", "duration", "n_packets", "n_bytes", "match", "actions"}
	jsonShapes = map[string]shape{
		// management commands
		"show":   {kind: "array", keys: []string{"name", "datapath_id", "fail_mode", "openflow", "ports", "running"}},
		"add-br": empty, "del-br": empty, "list-br": names, "br-exists": {kind: "bool"},
		"add-port": {kind: "object", keys: []string{"ofport"}}, "del-port": empty,
		"list-ports": names, "port-to-br": {kind: "string"},
		"set": empty, "get": {kind: "array", elem: "any"}, "remove": empty, "clear": empty,
		"list":           {kind: "array", keys: []string{"name", "ofport", "statistics", "link_state"}},
		"find":           {kind: "array", keys: []string{"name", "ofport"}},
		"set-controller": empty, "del-controller": empty,
		"get-controller": {kind: "array", keys: []string{"target", "state", "is_connected"}},
		"set-fail-mode":  empty, "get-fail-mode": {kind: "string"}, "del-fail-mode": empty,
		"set-ssl": empty, "get-ssl": {kind: "object", keys: []string{"private_key", "certificate", "ca_cert"}}, "del-ssl": empty,
		"pmd-stats-show":    {kind: "array", keys: []string{"bridge", "pmd", "packets_received", "emc_hits", "megaflow_hits", "output_batches"}},
		"pmd-stats-clear":   empty,
		"pmd-rxq-show":      {kind: "array", keys: []string{"bridge", "pmd", "port", "queue", "packets", "pmd_usage_percent"}},
		"pmd-rxq-rebalance": {kind: "object", keys: []string{"moved"}},
		"dpif-dump-flows":   {kind: "array", keys: []string{"bridge", "pmd", "match", "packets", "bytes", "actions"}},
		"fdb-show":          {kind: "array", keys: []string{"port", "ofport", "vlan", "mac", "age"}},
		"fdb-flush":         {kind: "object", keys: []string{"flushed"}},
		"drop-stats":        {kind: "array", keys: []string{"bridge", "where", "cause", "count"}},
		"coverage-show":     {kind: "array", keys: []string{"event", "total"}},
		"memory-show":       {kind: "object", keys: []string{"heap_bytes", "rules", "megaflows", "ports"}},
		"pmd-perf-show":     {kind: "array", keys: []string{"bridge", "pmd", "iterations", "packets", "ns_per_packet"}},
		"pmd-latency-show":  {kind: "object", keys: []string{"pmds", "xsks"}},
		"pmd-latency-clear": empty,
		"trace":             {kind: "object", keys: []string{"bridge", "flow", "steps", "final_flow", "megaflow", "datapath_actions"}},
		"log-level":         {kind: "string"},
		"version":           {kind: "string"},
		"db-endpoint":       {kind: "string"},
		// OpenFlow commands
		"add-flow": empty, "add-flows": empty, "mod-flows": empty, "del-flows": empty,
		"dump-flows":      {kind: "array", keys: flowKeys},
		"dump-ports":      {kind: "array", keys: []string{"port", "rx_packets", "tx_packets", "duration"}},
		"dump-ports-desc": {kind: "array", keys: []string{"port", "name", "hw_addr", "config", "state", "curr_speed_kbps"}},
		"add-group":       empty, "mod-group": empty, "del-groups": empty,
		"dump-groups": {kind: "array", keys: []string{"group_id", "type", "buckets"}},
		"add-meter":   empty, "mod-meter": empty, "del-meters": empty,
		"dump-meters":         {kind: "array", keys: []string{"meter_id", "flags", "bands"}},
		"packet-out":          empty,
		"dump-tables":         {kind: "array", keys: []string{"table", "active", "lookup", "matched"}},
		"dump-aggregate":      {kind: "object", keys: []string{"packet_count", "byte_count", "flow_count"}},
		"dump-table-features": {kind: "array", keys: []string{"table", "name", "max_entries"}},
		"dump-group-stats":    {kind: "array", keys: []string{"group_id", "ref_count", "packet_count", "byte_count", "buckets"}},
		"meter-stats":         {kind: "array", keys: []string{"meter_id", "flow_count", "packet_in_count", "bands"}},
		"meter-features":      {kind: "object", keys: []string{"max_meter", "max_bands", "band_types", "capabilities"}},
		"queue-stats":         {kind: "array", keys: []string{"port", "queue", "tx_packets"}, none: true},
		"mod-port":            empty, "replace-flows": empty,
		"diff-flows": names,
	}
)

// checkShape reports how v (decoded JSON) differs from s.
func checkShape(v any, s shape) error {
	switch s.kind {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %T", v)
		}
		if len(s.keys) == 0 && s.elem == "" && len(m) != 0 && s.keys == nil {
			return fmt.Errorf("want {}, got %v", m)
		}
		for _, k := range s.keys {
			if _, ok := m[k]; !ok {
				return fmt.Errorf("object lacks %q: %v", k, m)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want an array, got %T", v)
		}
		if len(a) == 0 && !s.none {
			return fmt.Errorf("want a non-empty array (the test sets up something to list)")
		}
		for _, e := range a {
			switch {
			case len(s.keys) > 0:
				if err := checkShape(e, shape{kind: "object", keys: s.keys}); err != nil {
					return err
				}
			case s.elem == "string":
				if _, ok := e.(string); !ok {
					return fmt.Errorf("want strings, got %T", e)
				}
			}
		}
	case "string":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("want a string, got %T", v)
		}
	case "bool":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("want a bool, got %T", v)
		}
	}
	return nil
}

// TestJSONShapes runs every vsctl command with --format json and checks
// that it prints one compact JSON document of its documented shape (the
// table above, which must name every command: a new command needs its
// shape here and in the user guide).
func TestJSONShapes(t *testing.T) {
	d := newDaemon(t)
	br := nstest.Name("jb")
	port, port2 := nstest.Name("jp"), nstest.Name("jq")
	d.start("--default-bridge", br)
	flows := filepath.Join(t.TempDir(), "flows.txt")
	os.WriteFile(flows, []byte("priority=7,ip,actions=drop\n"), 0o600)

	for _, c := range mgmt.Commands {
		if _, ok := jsonShapes[c.Name]; !ok {
			t.Errorf("management command %s has no JSON shape in this test", c.Name)
		}
	}
	for _, c := range dbctl.Commands {
		if _, ok := jsonShapes[c.Name]; !ok {
			t.Errorf("configuration command %s has no JSON shape in this test", c.Name)
		}
	}
	for _, c := range ofctl.Commands {
		if _, ok := jsonShapes[c.Name]; !ok {
			t.Errorf("OpenFlow command %s has no JSON shape in this test", c.Name)
		}
	}
	// Every command, in an order where each has something to show.
	runs := [][]string{
		{"add-br", "x" + br}, {"del-br", "x" + br}, {"list-br"}, {"br-exists", br},
		{"add-port", br, port, "type=internal"}, {"add-port", br, port2, "type=internal"},
		{"del-port", port2}, {"list-ports", br}, {"port-to-br", port},
		{"set", "Port", port, "tag=5"}, {"get", "Port", port, "tag", "statistics", "name"},
		{"remove", "Port", port, "tag", "5"}, {"clear", "Port", port, "other_config"},
		{"list", "Interface", port}, {"find", "Interface", "name=" + port},
		{"set-controller", br, "tcp:127.0.0.1:1"}, {"get-controller", br}, {"del-controller", br},
		{"set-fail-mode", br, "secure"}, {"get-fail-mode", br}, {"del-fail-mode", br},
		append([]string{"set-ssl"}, selfSignedFiles(t)...), {"get-ssl"}, {"del-ssl"},
		{"add-flow", br, "priority=5,ip,actions=drop"}, {"add-flows", br, flows}, {"mod-flows", br, "ip,actions=drop"},
		{"dump-flows", br}, {"del-flows", br, "priority=5,ip", "--strict"}, {"dump-ports", br}, {"dump-ports-desc", br},
		{"add-group", br, "group_id=1,type=all,bucket=output:1"}, {"mod-group", br, "group_id=1,type=all,bucket=output:LOCAL"},
		{"dump-groups", br}, {"dump-group-stats", br},
		{"add-meter", br, "meter=1,kbps,band=type=drop,rate=1000"}, {"mod-meter", br, "meter=1,kbps,band=type=drop,rate=2000"},
		{"dump-meters", br}, {"meter-stats", br}, {"meter-features", br},
		{"packet-out", br, "in_port=LOCAL packet=ffffffffffff020000000001" + strings.Repeat("00", 50) + " actions=TABLE"},
		{"queue-stats", br}, {"dump-tables", br}, {"dump-aggregate", br}, {"dump-table-features", br},
		{"mod-port", br, port, "no-flood"}, {"replace-flows", br, flows},
		{"add-flow", br, "priority=9,arp,actions=NORMAL"}, {"diff-flows", br, flows},
		{"del-groups", br}, {"del-meters", br},
		{"show"}, {"pmd-stats-show"}, {"pmd-stats-clear"}, {"pmd-rxq-show"}, {"pmd-rxq-rebalance"},
		{"dpif-dump-flows", br}, {"fdb-show", br}, {"fdb-flush", br}, {"drop-stats"},
		{"coverage-show"}, {"memory-show"}, {"pmd-perf-show"}, {"pmd-latency-show"}, {"pmd-latency-clear"}, {"trace", br, "in_port=LOCAL,ip"},
		{"log-level"}, {"version"}, {"db-endpoint"},
	}
	seen := map[string]bool{}
	for _, r := range runs {
		name := r[0]
		seen[name] = true
		if name == "dpif-dump-flows" {
			megaflowFrom(t, d, br, port)
		}
		out, errOut, code := d.vsctlRaw(append([]string{"--format", "json"}, r...)...)
		if name == "diff-flows" {
			if code != 1 {
				t.Errorf("diff-flows of different tables: exit %d, want 1 (%s)", code, errOut)
			}
		} else if code != 0 {
			t.Errorf("%v: exit %d: %s", r, code, errOut)
			continue
		}
		if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
			t.Errorf("%v: want one line of JSON, got %q", r, out)
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("%v: not JSON: %v: %q", r, err, out)
			continue
		}
		if err := checkShape(v, jsonShapes[name]); err != nil {
			t.Errorf("%v: %v\n%s", r, err, out)
		}
		if name == "show" {
			for _, b := range v.([]any) {
				for _, p := range b.(map[string]any)["ports"].([]any) {
					if typ := p.(map[string]any)["type"].(string); strings.Contains(typ, "(") {
						t.Errorf("show's JSON port type %q is text, not the configured type", typ)
					}
				}
			}
		}
	}
	for name := range jsonShapes {
		if !seen[name] {
			t.Errorf("command %s has a shape but the test never runs it", name)
		}
	}
	// A chain prints one array: each command's data in order.
	out := d.vsctl("--format", "json", "list-br", "--", "get", "Interface", port, "ofport")
	var chain []any
	if err := json.Unmarshal([]byte(out), &chain); err != nil || len(chain) != 2 {
		t.Errorf("chain JSON %q: %v", out, err)
	} else if got := chain[1].([]any); len(got) != 1 || got[0] != float64(1) {
		t.Errorf("chain's get data %v, want [1]", got)
	}

}

// selfSignedFiles writes a key and a self-signed certificate (which is
// also its own CA) and returns the paths set-ssl takes.
func selfSignedFiles(t *testing.T) []string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "json-test"},
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyFile, certFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "cert.pem")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	return []string{keyFile, certFile, certFile}
}

// megaflowFrom makes the datapath of bridge br hold a megaflow: one frame
// sent by the host out of internal port port, brought up first as a host
// brings one up (the switch creates it down, as Open vSwitch does).
func megaflowFrom(t *testing.T, d *daemon, br, port string) {
	t.Helper()
	nstest.Run(t, "ip", "link", "set", port, "up")
	ifi, err := net.InterfaceByName(port)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	frame := nstest.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, ifi.HardwareAddr,
		net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), 1000, 2000)
	if err := unix.Sendto(fd, frame, 0, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Halen: 6}); err != nil {
		t.Fatal(err)
	}
	nstest.WaitFor(t, 10*time.Second, "a megaflow in "+br, func() bool {
		out, _, code := d.vsctlRaw("--format", "json", "dpif-dump-flows", br)
		return code == 0 && strings.TrimSpace(out) != "[]"
	})
}

package vswitchd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

func startTestDaemon(t *testing.T) *Daemon {
	t.Helper()
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func chain(t *testing.T, d *Daemon, cmds ...[]string) (*mgmt.Response, error) {
	t.Helper()
	return callChain(t, d, cmds)
}

// Commands chained with "--" are one transaction: a failing command
// leaves the store as it was (nothing of the commands before it is
// written), and reads later in the chain see the changes before them.
func TestTransactionAllOrNothing(t *testing.T) {
	nstest.RequireRoot(t) // tap ports
	d := startTestDaemon(t)
	// config.json as the database's first pass leaves it, written now
	// rather than by the daemon's writer during the test.
	<-d.db.FirstPass()
	if err := d.store.Flush(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(d.opts.StateDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = chain(t, d,
		[]string{"add-br", "br1"},
		[]string{"add-port", "br1", "tx0", "type=internal"},
		[]string{"set", "Interface", "tx0", "ofport_request=0"})
	if err == nil || !strings.HasPrefix(err.Error(), "set: ") {
		t.Fatalf("chain with a bad set: err %v, want one naming set", err)
	}
	after, _ := os.ReadFile(filepath.Join(d.opts.StateDir, "config.json"))
	if string(before) != string(after) {
		t.Fatalf("a failed transaction changed the store:\n%s\n->\n%s", before, after)
	}
	if got := mustCall(t, d, "list-br"); got != "br0\n" {
		t.Fatalf("list-br after the failed chain: %q", got)
	}

	r, err := chain(t, d,
		[]string{"add-br", "br1"},
		[]string{"--may-exist", "add-br", "br1"},
		[]string{"add-port", "br1", "tx0", "type=internal"},
		[]string{"set", "Interface", "tx0", "ofport_request=7", "other_config:tx-flush-interval=20"},
		[]string{"get", "Interface", "tx0", "ofport_request"},
		[]string{"list-ports", "br1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Text != "7\ntx0\n" {
		t.Errorf("chain text %q, want the get's and list-ports' outputs in order", r.Text)
	}
	var data []json.RawMessage
	if err := json.Unmarshal(r.Data, &data); err != nil || len(data) != 6 {
		t.Fatalf("chain data %s: want one entry per command (%v)", r.Data, err)
	}
	if got := mustCall(t, d, "get", "Interface", "tx0", "ofport"); got != "7\n" {
		t.Errorf("ofport %q, want 7", got)
	}
	if _, err := chain(t, d, []string{"list-br"}, []string{"pmd-stats-show"}); err == nil {
		t.Error("a chain with a datapath command was accepted")
	}
}

// The ovs-vsctl commands and columns users reach for: remove of a set
// value, clear, list, find, run-time columns, get of empty values.
func TestOVSDatabaseCommands(t *testing.T) {
	nstest.RequireRoot(t) // tap ports
	d := startTestDaemon(t)
	mustCall(t, d, "add-port", "br0", "tx1", "type=internal", "tag=10", "trunks=[20,30]")
	mustCall(t, d, "remove", "Port", "tx1", "tag", "10")
	mustCall(t, d, "remove", "Port", "tx1", "trunks", "20")
	if got := mustCall(t, d, "get", "Port", "tx1", "tag", "trunks", "ofport_request", "options"); got != "[]\n[30]\n[]\n{}\n" {
		t.Errorf("get after remove: %q", got)
	}
	mustCall(t, d, "set", "Port", "tx1", "other_config:tx-flush-interval=5")
	mustCall(t, d, "clear", "Port", "tx1", "other_config", "trunks")
	if got := mustCall(t, d, "get", "Port", "tx1", "other_config", "trunks"); got != "{}\n[]\n" {
		t.Errorf("get after clear: %q", got)
	}
	list := mustCall(t, d, "list", "Interface", "tx1")
	for _, want := range []string{"name                : tx1\n", "ofport              : 1\n", "link_state          : ", "statistics          : {rx_bytes="} {
		if !strings.Contains(list, want) {
			t.Errorf("list Interface tx1 lacks %q:\n%s", want, list)
		}
	}
	if got := mustCall(t, d, "find", "Interface", "ofport=1"); !strings.Contains(got, "name                : tx1\n") {
		t.Errorf("find ofport=1: %q", got)
	}
	if got := mustCall(t, d, "find", "Interface", "ofport=99"); got != "" {
		t.Errorf("find ofport=99: %q", got)
	}
	if got := mustCall(t, d, "get", "Interface", "tx1", "mac_in_use"); !strings.HasPrefix(got, "\"") || len(got) != len("\"00:00:00:00:00:00\"\n") {
		t.Errorf("mac_in_use %q", got)
	}
	if got := mustCall(t, d, "get", "Interface", "tx1", "statistics:rx_packets"); strings.Trim(got, "0123456789") != "\n" {
		t.Errorf("statistics:rx_packets %q", got)
	}
	if _, err := call(t, d, "show", "--bogus"); err == nil {
		t.Error("show --bogus accepted")
	}
}

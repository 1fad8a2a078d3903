package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestDaemonEndToEnd is the README's tour: a bridge with two veth ports from
// two namespaces, flows added by name and by number, ping across, counters
// in dump-flows and /metrics, a kill -9, and everything back after the
// restart.
func TestDaemonEndToEnd(t *testing.T) {
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	d.start()

	d.vsctl("add-br", "br0")
	// One port with the automatic driver (AF_XDP on veth), one AF_PACKET.
	d.vsctl("add-port", "br0", a.Port)
	d.vsctl("add-port", "br0", b.Port, "--", "type=afpacket")
	if got := d.vsctl("get", "Interface", a.Port, "ofport"); strings.TrimSpace(got) != "1" {
		t.Fatalf("first port's ofport = %q, want 1", got)
	}
	if got := d.vsctl("get", "Interface", b.Port, "ofport"); strings.TrimSpace(got) != "2" {
		t.Fatalf("second port's ofport = %q, want 2", got)
	}
	d.vsctl("set-fail-mode", "br0", "secure") // no NORMAL behind our back
	d.vsctl("add-flow", "br0", "priority=100,in_port="+a.Port+",actions=output:"+b.Port)
	d.vsctl("add-flow", "br0", "priority=100,in_port=2,actions=output:1")

	nstest.Ping(t, a.NS, b.IP)

	dump := d.vsctl("dump-flows", "br0")
	for _, in := range []string{"in_port=1", "in_port=2"} {
		l := flowLine(t, dump, "priority=100", in)
		if n, ok := field(l, "n_packets"); !ok || n < 5 {
			t.Fatalf("flow %s: n_packets %d (want ≥ 5 after 5 pings):\n%s", in, n, dump)
		}
	}

	// /metrics reads the same counters as OpenFlow's port statistics: the
	// metric lies between dump-ports' figures read just before and just
	// after it. Host a's kernel may send (an ARP reachability probe, say)
	// at any time, so the counter need not stand still between the reads.
	rxPkts := func() uint64 {
		ports := d.vsctl("dump-ports", "br0", "1")
		rx, ok := field(flowLine(t, ports, "rx pkts"), "pkts")
		if !ok {
			t.Fatalf("no rx pkts in dump-ports:\n%s", ports)
		}
		return rx
	}
	rx0 := rxPkts()
	m := d.scrape()
	rx1 := rxPkts()
	if got := uint64(metricValue(t, m, "vswitch_port_rx_packets_total", a.Port)); got < rx0 || got > rx1 {
		t.Fatalf("metric rx packets of %s = %d, dump-ports says %d before and %d after", a.Port, got, rx0, rx1)
	}
	if got := metricValue(t, m, "vswitch_pmd_rx_packets_total", ""); got < 10 {
		t.Fatalf("PMD rx packets metric %v, want ≥ 10", got)
	}

	// Run-time settings.
	d.vsctl("set", "Open_vSwitch", ".", "other_config:tx-flush-interval=50")
	if got := strings.TrimSpace(d.vsctl("get", "Open_vSwitch", ".", "other_config:tx-flush-interval")); got != "50" {
		t.Fatalf("tx-flush-interval reads %q", got)
	}
	nstest.Ping(t, a.NS, b.IP)
	// A setting that shapes the PMDs rebuilds the datapath, keeping ports
	// and flows.
	d.vsctl("set", "Open_vSwitch", ".", "other_config:n-pmd=2")
	if out := d.vsctl("pmd-stats-show"); !strings.Contains(out, "pmd 1:") {
		t.Fatalf("n-pmd=2 but pmd-stats-show:\n%s", out)
	}
	flowLine(t, d.vsctl("dump-flows", "br0"), "priority=100", "in_port=2", "output:1")
	nstest.Ping(t, a.NS, b.IP)
	if out := d.vsctl("pmd-rxq-show"); !strings.Contains(out, a.Port) || !strings.Contains(out, b.Port) {
		t.Fatalf("pmd-rxq-show:\n%s", out)
	}
	d.vsctl("pmd-rxq-rebalance")
	// A change the running switch cannot follow (a tap device cannot take
	// a veth's name) is refused and rolled back: the port runs as before.
	if _, errOut, code := d.vsctlRaw("set", "Interface", b.Port, "type=tap"); code == 0 {
		t.Fatal("turning a veth port into a tap succeeded")
	} else if !strings.Contains(errOut, b.Port) {
		t.Fatalf("error does not name the port: %q", errOut)
	}
	if got := strings.TrimSpace(d.vsctl("get", "Interface", b.Port, "type")); got != "afpacket" {
		t.Fatalf("type after the refused change: %q", got)
	}
	nstest.Ping(t, a.NS, b.IP)

	// kill -9: nothing acknowledged may be lost, not even a flow added
	// the instant before (the barrier that acknowledges it saved it).
	d.vsctl("add-group", "br0", "group_id=1,type=all,bucket=actions=output:2")
	d.vsctl("add-flow", "br0", "priority=4,udp,tp_dst=10,actions=group:1")
	d.vsctl("add-meter", "br0", "meter=1,pktps,burst,band=type=drop,rate=1000,burst_size=100")
	d.vsctl("add-flow", "br0", "priority=5,udp,tp_dst=11,actions=meter:1,output:2")
	d.vsctl("add-flow", "br0", "priority=3,udp,tp_dst=9,actions=drop")
	d.kill9()
	d.start()
	if got := d.vsctl("list-br"); got != "br0\n" {
		t.Fatalf("after restart list-br = %q", got)
	}
	if got := d.vsctl("list-ports", "br0"); got != strings.Join(sortedStrings(a.Port, b.Port), "\n")+"\n" {
		t.Fatalf("after restart list-ports = %q", got)
	}
	// The killed daemon's AF_XDP socket may still hold the queue for a
	// moment: the automatic port waits for it rather than falling back.
	if got := portType(t, d.vsctl("show"), a.Port); got != "afxdp (automatic)" {
		t.Fatalf("after kill -9 and restart %s runs %q, want afxdp (automatic)", a.Port, got)
	}
	if got := strings.TrimSpace(d.vsctl("get-fail-mode", "br0")); got != "secure" {
		t.Fatalf("after restart fail mode %q", got)
	}
	dump = d.vsctl("dump-flows", "br0")
	flowLine(t, dump, "priority=100", "in_port=1", "output:2")
	flowLine(t, dump, "priority=100", "in_port=2", "output:1")
	flowLine(t, dump, "priority=3", "tp_dst=9", "drop")
	flowLine(t, dump, "priority=4", "tp_dst=10", "group:1")
	flowLine(t, d.vsctl("dump-groups", "br0"), "group_id=1", "type=all", "output:2")
	flowLine(t, dump, "priority=5", "tp_dst=11", "meter:1")
	flowLine(t, d.vsctl("dump-meters", "br0"), "meter=1", "pktps")
	nstest.Ping(t, a.NS, b.IP)

	// The datapath view agrees: megaflows for both directions.
	dp := d.vsctl("dpif-dump-flows", "br0")
	if !strings.Contains(dp, "in_port(1)") || !strings.Contains(dp, "in_port(2)") {
		t.Fatalf("dpif-dump-flows misses a direction:\n%s", dp)
	}
	if out := d.vsctl("pmd-stats-show"); !strings.Contains(out, "packets received") {
		t.Fatalf("pmd-stats-show:\n%s", out)
	}

	// SIGTERM: exit 0 and the XDP program is gone from the port.
	if err := d.stop(); err != nil {
		t.Fatalf("SIGTERM: %v\n%s", err, d.log.String())
	}
	if out := nstest.Run(t, "ip", "link", "show", a.Port); strings.Contains(out, "xdp") {
		t.Fatalf("XDP program left on %s after SIGTERM:\n%s", a.Port, out)
	}
}

// TestDefaultBridgeStandalone: with an empty state directory the daemon
// creates br0 in fail mode standalone, which switches by learning.
func TestDefaultBridgeStandalone(t *testing.T) {
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	d.start("--default-bridge", "br0")
	if got := d.vsctl("list-br"); got != "br0\n" {
		t.Fatalf("list-br = %q", got)
	}
	d.vsctl("add-port", "br0", a.Port)
	d.vsctl("add-port", "br0", b.Port)
	nstest.Ping(t, a.NS, b.IP)
	fdb := d.vsctl("fdb-show", "br0")
	if !strings.Contains(fdb, a.MAC) || !strings.Contains(fdb, b.MAC) {
		t.Fatalf("fdb-show lacks the hosts' MACs:\n%s", fdb)
	}
	tr := d.vsctl("trace", "br0", "in_port="+a.Port+",dl_src="+a.MAC+",dl_dst="+b.MAC+",ip,nw_src="+a.IP+",nw_dst="+b.IP)
	if !strings.Contains(tr, "NORMAL") || !strings.Contains(tr, "Datapath actions") {
		t.Fatalf("trace:\n%s", tr)
	}

	// VLANs as in Open vSwitch: access ports of different tags do not
	// talk; the same tag does, at run time.
	d.vsctl("set", "Port", a.Port, "tag=10")
	d.vsctl("set", "Port", b.Port, "tag=20")
	if out, err := a.NS.Output("ping", "-c", "2", "-i", "0.2", "-W", "1", b.IP); err == nil {
		t.Fatalf("ping crossed from VLAN 10 to VLAN 20:\n%s", out)
	}
	d.vsctl("set", "Port", b.Port, "tag=10")
	nstest.Ping(t, a.NS, b.IP)
	if got := strings.TrimSpace(d.vsctl("get", "Port", b.Port, "tag")); got != "10" {
		t.Fatalf("tag reads %q", got)
	}
}

// TestVsctlErrors: every bad command exits non-zero with a message saying
// what is wrong, and the configuration is byte-for-byte unchanged.
func TestVsctlErrors(t *testing.T) {
	d := newDaemon(t)
	a, _ := nstest.TwoHosts(t)
	d.start()
	d.vsctl("add-br", "br0")
	d.vsctl("add-port", "br0", a.Port)
	d.vsctl("add-flow", "br0", "priority=5,actions=drop")

	state := func() string {
		var out []byte
		for _, name := range []string{"config.json", "br0.tables"} {
			b, err := os.ReadFile(filepath.Join(d.stateDir, name))
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatal(err)
			}
			delete(v, "generation") // a refused change may still not bump it; compare content
			j, _ := json.Marshal(v)
			out = append(out, j...)
		}
		return string(out)
	}
	// The flow tables are saved once the switch has been quiet for a
	// second; wait for that so it does not land mid-test.
	nstest.WaitFor(t, 10*time.Second, "the flow snapshot", func() bool {
		b, _ := os.ReadFile(filepath.Join(d.stateDir, "br0.tables"))
		return strings.Contains(string(b), "priority=5 actions=drop")
	})
	before := state()
	flowsBefore := d.vsctl("--format", "json", "dump-flows", "br0")

	for _, tc := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"add-port", "nosuchbr", "x1"}, "no such bridge", 1},
		// A missing interface alone is accepted (the port waits for it), a
		// bad option with it is not.
		{[]string{"add-port", "br0", "nosuchif0", "type=afxdp", "options:xdp-mode=bogus"}, "xdp-mode", 1},
		{[]string{"add-port", "br0", a.Port}, "already has a port", 1},
		{[]string{"add-port", "br0", "p9", "type=frob"}, "unknown port type", 1},
		{[]string{"add-port", "br0", "p9", "type=vhostuserclient"}, "vhost-server-path", 1},
		{[]string{"del-port", "br0", "nosuchport"}, "no such port", 1},
		{[]string{"del-br", "nosuchbr"}, "no such bridge", 1},
		{[]string{"add-br", "br0"}, "already exists", 1},
		{[]string{"add-br", "this-name-is-far-too-long"}, "longer than", 1},
		{[]string{"add-br", "rl%d"}, "'%'", 1}, // the kernel would expand it to rl0
		{[]string{"add-br", "a b"}, "whitespace", 1},
		{[]string{"add-br", ".."}, "may not be", 1},
		{[]string{"set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x8000000000000000"}, "available CPUs", 1},
		{[]string{"set", "Open_vSwitch", ".", "other_config:mgmt-max-connections=0"}, "not an integer", 1},
		{[]string{"set", "Open_vSwitch", ".", "other_config:openflow-max-connections=x"}, "not an integer", 1},
		{[]string{"set", "Open_vSwitch", ".", "other_config:tx-flush-interval=abc"}, "not an integer", 1},
		{[]string{"set", "Open_vSwitch", ".", "other_config:no-such-key=1"}, "no key", 1},
		{[]string{"set", "Open_vSwitch", ".", "other_config:n-pmd=2", "other_config:pmd-sleep-max=x"}, "not an integer", 1},
		{[]string{"set", "Interface", a.Port, "options:n_rxq=0"}, "n_rxq", 1},
		{[]string{"set", "Interface", a.Port, "options:frob=1"}, "no option", 1},
		{[]string{"set", "Nope", "x", "a=b"}, "unknown table", 1},
		{[]string{"set", "Bridge", "br0", "fail_mode=sometimes"}, "standalone or secure", 1},
		{[]string{"set-fail-mode", "br0", "sometimes"}, "standalone or secure", 1},
		{[]string{"set-controller", "br0", "tcp:"}, "METHOD:ADDRESS", 1},
		{[]string{"set-controller", "br0", "bogus:1.2.3.4"}, "unknown method", 1},
		{[]string{"get", "Bridge", "nosuchbr", "fail_mode"}, "no such bridge", 1},
		{[]string{"add-flow", "br0", "in_port=1,actions=frobnicate"}, "frobnicate", 1},
		{[]string{"add-flow", "br0", "in_port=nosuchport,actions=drop"}, "nosuchport", 1},
		// A missing prerequisite is caught before sending, with the spec's
		// names; ovs-ofctl would drop the field, so del-flows would delete
		// every flow.
		{[]string{"add-flow", "br0", "nw_src=198.18.0.1,actions=drop"}, "nw_src requires ip or arp", 1},
		{[]string{"del-flows", "br0", "nw_dst=1.2.3.4"}, "nw_dst requires ip or arp (e.g. ip,nw_dst=...); a switch refuses it without: OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ", 1},
		{[]string{"del-flows", "br0", "tp_dst=80"}, "OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ", 1},
		// What the switch refuses prints with the spec's names too.
		{[]string{"add-flow", "br0", "actions=group:7"}, "switch refused it: OFPET_BAD_ACTION/OFPBAC_BAD_OUT_GROUP: the action names a group that does not exist", 1},
		{[]string{"add-flow", "br0", "table=3,actions=goto_table:2"}, "OFPET_BAD_INSTRUCTION/OFPBIC_BAD_TABLE_ID", 1},
		{[]string{"add-flow", "nosuchbr", "actions=drop"}, "no bridge", 1},
		{[]string{"del-flows", "br0", "in_port=1,frob=2"}, "frob", 1},
		{[]string{"trace", "br0", "in_port=nosuchport"}, "no port", 1},
		{[]string{"no-such-command"}, "unknown command", 2},
		{[]string{"add-br"}, "wrong number of arguments", 2},
		{[]string{"br-exists", "nosuchbr"}, "no such bridge", 2},
	} {
		out, errOut, code := d.vsctlRaw(tc.args...)
		if code != tc.code {
			t.Errorf("vsctl %v: exit %d, want %d (stdout %q stderr %q)", tc.args, code, tc.code, out, errOut)
			continue
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("vsctl %v: stderr %q does not say %q", tc.args, errOut, tc.want)
		}
		if !strings.HasPrefix(errOut, "vsctl: ") {
			t.Errorf("vsctl %v: stderr %q lacks the vsctl: prefix", tc.args, errOut)
		}
		if strings.Contains(errOut, "ErrType") || strings.Contains(errOut, "openflow error") || strings.Contains(errOut, tc.args[0]+": "+tc.args[0]+":") {
			t.Errorf("vsctl %v: stderr %q names an error by a library's identifier or repeats the command", tc.args, errOut)
		}
	}
	// A flow added after the failing commands and then deleted is a
	// barrier: once the snapshot has shown it come and go, the snapshot
	// was taken after every failing command, so it would hold anything
	// they had changed.
	barrier := "priority=6 actions=drop"
	d.vsctl("add-flow", "br0", "cookie=0x7e57,priority=6,actions=drop")
	nstest.WaitFor(t, 10*time.Second, "the barrier flow in the snapshot", func() bool {
		return strings.Contains(state(), barrier)
	})
	d.vsctl("del-flows", "br0", "cookie=0x7e57/-1")
	nstest.WaitFor(t, 10*time.Second, "the barrier flow gone from the snapshot", func() bool {
		return !strings.Contains(state(), barrier)
	})
	if after := state(); after != before {
		t.Fatalf("configuration changed by failing commands:\nbefore %s\nafter  %s", before, after)
	}
	if got := d.vsctl("--format", "json", "dump-flows", "br0"); !sameFlows(got, flowsBefore) {
		t.Fatalf("flows changed by failing commands:\nbefore %s\nafter  %s", flowsBefore, got)
	}
	if out := d.vsctl("show"); !strings.Contains(out, a.Port) {
		t.Fatalf("show:\n%s", out)
	}
}

func sortedStrings(s ...string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// sameFlows compares two dump-flows outputs ignoring durations and ages.
func sameFlows(a, b string) bool {
	strip := func(s string) string {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return s
		}
		var walk func(any) any
		walk = func(x any) any {
			switch t := x.(type) {
			case map[string]any:
				for k := range t {
					if strings.Contains(k, "duration") || strings.Contains(k, "age") {
						delete(t, k)
					} else {
						t[k] = walk(t[k])
					}
				}
			case []any:
				for i := range t {
					t[i] = walk(t[i])
				}
			}
			return x
		}
		out, _ := json.Marshal(walk(v))
		return string(out)
	}
	return strip(a) == strip(b)
}

// metricValue sums the samples of name whose labels include port="port"
// (any port when port is empty).
func metricValue(t *testing.T, m map[string]float64, name, port string) float64 {
	t.Helper()
	sum, found := 0.0, false
	for k, v := range m {
		if !strings.HasPrefix(k, name+"{") && k != name {
			continue
		}
		if port != "" && !strings.Contains(k, `port="`+port+`"`) {
			continue
		}
		sum += v
		found = true
	}
	if !found {
		t.Fatalf("no metric %s for port %q", name, port)
	}
	return sum
}

// TestOperations: help, log levels at run time, SIGHUP reopening a log
// file that logrotate moved away, and the pid file.
func TestOperations(t *testing.T) {
	d := newDaemon(t)
	logFile := filepath.Join(t.TempDir(), "vswitchd.log")
	d.start("--log-file", logFile, "--log-level", "info")

	out, _, code := d.vsctlRaw("add-port", "--help")
	if code != 0 || !strings.Contains(out, "usage: vsctl add-port BRIDGE PORT") {
		t.Fatalf("add-port --help: exit %d, %q", code, out)
	}
	out, _, code = d.vsctlRaw("dump-flows", "--help")
	if code != 0 || !strings.Contains(out, "dump-flows") {
		t.Fatalf("dump-flows --help: exit %d, %q", code, out)
	}
	if got := strings.TrimSpace(d.vsctl("log-level")); got != "info" {
		t.Fatalf("log level %q", got)
	}
	d.vsctl("log-level", "debug")
	if got := strings.TrimSpace(d.vsctl("log-level")); got != "debug" {
		t.Fatalf("log level after set %q", got)
	}
	if _, errOut, code := d.vsctlRaw("log-level", "loud"); code == 0 || !strings.Contains(errOut, "not debug") {
		t.Fatalf("bad level accepted: %d %q", code, errOut)
	}
	pid, err := os.ReadFile(filepath.Join(d.stateDir, "vswitchd.pid"))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(d.cmd.Process.Pid) {
		t.Fatalf("pid file %q, %v (pid %d)", pid, err, d.cmd.Process.Pid)
	}

	// logrotate: move the file away, SIGHUP, and the daemon writes a new one.
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	nstest.WaitFor(t, 5*time.Second, "a new log file after SIGHUP", func() bool {
		_, err := os.Stat(logFile)
		return err == nil
	})
	d.vsctl("add-br", "br7") // logged at info into the new file
	nstest.WaitFor(t, 5*time.Second, "the new log file to receive logs", func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "bridge added")
	})
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.stateDir, "vswitchd.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file left after stop: %v", err)
	}
}

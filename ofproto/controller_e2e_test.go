//go:build linux

package ofproto

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// freePort returns a TCP port on 127.0.0.1 that nothing listens on right
// now. The controller binds it a moment later; a collision in between is
// possible but rare, and would show as the controller failing to start.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startController runs a controller in its own process group, logging to a
// file whose content the test prints if it fails. The whole group is killed
// at cleanup, since osken-manager may fork helpers. It returns the log's
// path.
func startController(t *testing.T, name string, args ...string) string {
	t.Helper()
	nstest.RequireTool(t, name)
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Dir = t.TempDir()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, out)
		}
	})
	return logPath
}

// waitListening waits until something accepts connections on addr, so the
// bridge's first dial finds the controller instead of backing off.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	nstest.WaitFor(t, 20*time.Second, "controller listening on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// controllerBridge builds the end-to-end bridge (newE2EBridge) connected
// to the controller at ctlTarget and waits for the OpenFlow handshake with
// it. It returns the hosts, the bridge and its management target for
// ovs-ofctl.
func controllerBridge(t *testing.T, ctlTarget string) (a, b *nstest.Host, br *Bridge, mgmt string) {
	t.Helper()
	a, b, br, mgmt = newE2EBridge(t, ctlTarget)
	nstest.WaitFor(t, 20*time.Second, "handshake with "+ctlTarget, func() bool {
		for _, s := range br.Manager().Status() {
			if s.Target == ctlTarget && s.State == ofconn.StateActive {
				return true
			}
		}
		return false
	})
	return a, b, br, mgmt
}

// pingThrough pings b from a until a round of pings is fully answered: the
// first packets of a learning switch travel as packet-in/packet-out and the
// controller may still be installing its table-miss entry.
func pingThrough(t *testing.T, a, b *nstest.Host) {
	t.Helper()
	var out string
	for try := 0; try < 6; try++ {
		var err error
		out, err = a.NS.Output("ping", "-c", "3", "-i", "0.2", "-W", "2", b.IP)
		if err == nil && strings.Contains(out, " 0% packet loss") {
			// Now that the controller has learnt both hosts, every
			// ping must get through.
			nstest.Ping(t, a.NS, b.IP)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("ping %s through the controller's switch never fully succeeded:\n%s", b.IP, out)
}

// checkLearnedFlows asserts that the controller installed a table-miss entry
// to the controller and forwarding entries towards both hosts' ports, both
// in the bridge's pipeline and as ovs-ofctl sees them.
func checkLearnedFlows(t *testing.T, br *Bridge, mgmt string) {
	t.Helper()
	f := pipeline.AnyFilter()
	entries, err := br.Pipeline().Flows(&f)
	if err != nil {
		t.Fatal(err)
	}
	dump := ovsOfctl(t, "dump-flows", mgmt)
	t.Logf("dump-flows:\n%s", dump)
	if len(entries) < 3 {
		t.Fatalf("pipeline holds %d entries, want a table-miss entry and learnt flows:\n%s", len(entries), dump)
	}
	flows := flowLines(dump)
	if len(flows) != len(entries) {
		t.Fatalf("dump-flows lists %d flows, the pipeline holds %d", len(flows), len(entries))
	}
	var miss bool
	var toPort [3]bool
	for _, l := range flows {
		acts := l[strings.Index(l, "actions="):]
		if strings.Contains(l, "priority=0") && strings.Contains(acts, "CONTROLLER") {
			miss = true
		}
		for p := 1; p <= 2; p++ {
			if strings.Contains(acts, "output:"+strconv.Itoa(p)) {
				toPort[p] = true
			}
		}
	}
	if !miss {
		t.Fatalf("no table-miss entry to the controller:\n%s", dump)
	}
	if !toPort[1] || !toPort[2] {
		t.Fatalf("learnt flows do not output to both ports (1: %v, 2: %v):\n%s", toPort[1], toPort[2], dump)
	}
}

// TestEndToEndOvsTestcontroller connects the bridge to Open vSwitch's
// learning-switch test controller over OpenFlow 1.3 and pings between two
// namespaces through it.
func TestEndToEndOvsTestcontroller(t *testing.T) {
	nstest.RequireRoot(t)
	port := freePort(t)
	dir := t.TempDir()
	startController(t, "ovs-testcontroller", "-O", "OpenFlow13",
		"-vconsole:off", "-vfile:dbg", "--log-file="+filepath.Join(dir, "tc.log"),
		"--unixctl="+filepath.Join(dir, "tc.ctl"),
		"ptcp:"+strconv.Itoa(port)+":127.0.0.1")
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := os.ReadFile(filepath.Join(dir, "tc.log"))
			t.Logf("ovs-testcontroller log:\n%s", out)
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitListening(t, addr)
	a, b, br, mgmt := controllerBridge(t, "tcp:"+addr)
	pingThrough(t, a, b)
	checkLearnedFlows(t, br, mgmt)
	// The debug log records every message; the bridge must have refused
	// none of the controller's requests.
	log, err := os.ReadFile(filepath.Join(dir, "tc.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "received: OFPT_ERROR") {
		t.Fatal("the bridge answered a request of ovs-testcontroller with an error")
	}
}

// TestEndToEndOsKen runs a minimal os-ken learning-switch application
// (testdata/osken_l2.py) as the bridge's controller and pings between two
// namespaces through it.
func TestEndToEndOsKen(t *testing.T) {
	nstest.RequireRoot(t)
	app, err := filepath.Abs(filepath.Join("testdata", "osken_l2.py"))
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	logPath := startController(t, "osken-manager",
		"--ofp-tcp-listen-port", strconv.Itoa(port),
		"--ofp-listen-host", "127.0.0.1",
		app)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	waitListening(t, addr)
	a, b, br, mgmt := controllerBridge(t, "tcp:"+addr)
	pingThrough(t, a, b)
	checkLearnedFlows(t, br, mgmt)
	// The application logs every OFPT_ERROR the bridge sends it.
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(log), "switch error") {
		t.Fatalf("the bridge answered a request of the os-ken app with an error:\n%s", log)
	}
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// faucetPeerDir finds the vendored Faucet (../shared/peers/faucet from a
// checkout, see its README); FAUCET_PEER_DIR overrides it. Without it, or
// without Faucet's dependencies, the test is Unavailable: it skips on a
// laptop and fails in CI (VSWITCH_E2E=1), where a skip would hide lost
// coverage.
func faucetPeerDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FAUCET_PEER_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "peers", "faucet")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "run-faucet.sh")); err != nil {
		nstest.Unavailable(t, "Faucet peer not found (set FAUCET_PEER_DIR): %v", err)
	}
	mgr := nstest.RequireTool(t, "osken-manager") // dir/install-deps.sh, or .ci/run, installs it
	// Faucet's own imports, checked with the interpreter osken-manager
	// runs under (its #! line; a python3 earlier in PATH may be another).
	script, err := os.ReadFile(mgr)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(script), "\n")
	py := strings.Fields(strings.TrimPrefix(first, "#!"))
	if len(py) == 0 {
		t.Fatalf("%s has no #! line", mgr)
	}
	py = append(py, "-c", "import os_ken, networkx, ruamel.yaml, prometheus_client, yaml, pbr, eventlet, netaddr")
	if out, err := exec.Command(py[0], py[1:]...).CombinedOutput(); err != nil {
		nstest.Unavailable(t, "Faucet's Python packages missing: run %s/install-deps.sh (.ci/run installs them): %v\n%s", dir, err, out)
	}
	return dir
}

// faucetProc is a Faucet started by run-faucet.sh in a namespace.
type faucetProc struct {
	ns     *nstest.Netns
	logDir string
	cmd    *exec.Cmd
}

func (f *faucetProc) log() string {
	b, _ := os.ReadFile(filepath.Join(f.logDir, "faucet.log"))
	return string(b)
}

// metric sums the samples of a metric on Faucet's Prometheus endpoint
// (127.0.0.1 in its namespace, port from run-faucet.sh's faucet-peer.env).
func (f *faucetProc) metric(name string) (float64, error) {
	env, err := os.ReadFile(filepath.Join(f.logDir, "faucet-peer.env"))
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^FAUCET_PROMETHEUS_PORT=(\d+)$`).FindSubmatch(env)
	if m == nil {
		return 0, fmt.Errorf("no FAUCET_PROMETHEUS_PORT in faucet-peer.env")
	}
	out, err := f.ns.Output("curl", "-sS", "--max-time", "5", "http://127.0.0.1:"+string(m[1])+"/metrics")
	if err != nil {
		return 0, fmt.Errorf("curl: %v: %s", err, out)
	}
	var sum float64
	found := false
	for _, l := range strings.Split(out, "\n") {
		fs := strings.Fields(l)
		if len(fs) != 2 || strings.HasPrefix(l, "#") {
			continue
		}
		n, _, _ := strings.Cut(fs[0], "{")
		if n != name && n != name+"_total" {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(fs[1], &v); err != nil {
			return 0, fmt.Errorf("%s: %v", l, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("Faucet exports no %s", name)
	}
	return sum, nil
}

// startFaucet runs Faucet with config cfg in namespace ns, OpenFlow on all
// of the namespace's addresses at port. It is stopped (its process group,
// which holds nothing but what the test started) when the test ends.
func startFaucet(t *testing.T, peer string, ns *nstest.Netns, cfg string, port int) *faucetProc {
	t.Helper()
	f := &faucetProc{ns: ns, logDir: t.TempDir()}
	out, err := os.Create(filepath.Join(f.logDir, "osken.log"))
	if err != nil {
		t.Fatal(err)
	}
	f.cmd = exec.Command("ip", "netns", "exec", ns.Name, filepath.Join(peer, "run-faucet.sh"), cfg, fmt.Sprint(port))
	f.cmd.Env = append(os.Environ(), "FAUCET_LOG_DIR="+f.logDir)
	f.cmd.Stdout, f.cmd.Stderr = out, out
	f.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := f.cmd.Start(); err != nil {
		out.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { f.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-f.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		out.Close()
		if t.Failed() {
			for _, n := range []string{"osken.log", "faucet.log", "faucet_exception.log"} {
				b, _ := os.ReadFile(filepath.Join(f.logDir, n))
				t.Logf("faucet %s:\n%s", n, b)
			}
		}
	})
	nstest.WaitFor(t, 30*time.Second, fmt.Sprintf("Faucet listening on :%d", port), func() bool {
		select {
		case <-done:
			t.Fatalf("Faucet exited at start")
		default:
		}
		o, _ := ns.Output("ss", "-ltnH", fmt.Sprintf("sport = :%d", port))
		return strings.TrimSpace(o) != ""
	})
	return f
}

// faucetStackYAML is a stack ring of three dps (swA is the root) with the
// host on port 1 of each and stack ports 2 (to the next switch) and 3 (to
// the previous one), as in the peer's examples/faucet-stack.yaml.
const faucetStackYAML = `vlans:
    hosts:
        vid: 100
dps:
    swA:
        dp_id: 0x1
        hardware: "Open vSwitch"
        stack: {priority: 1}
        interfaces:
            1: {name: "host", native_vlan: hosts}
            2: {name: "vxB", stack: {dp: swB, port: 3}}
            3: {name: "vxC", stack: {dp: swC, port: 2}}
    swB:
        dp_id: 0x2
        hardware: "Open vSwitch"
        interfaces:
            1: {name: "host", native_vlan: hosts}
            2: {name: "vxC", stack: {dp: swC, port: 3}}
            3: {name: "vxA", stack: {dp: swA, port: 2}}
    swC:
        dp_id: 0x3
        hardware: "Open vSwitch"
        interfaces:
            1: {name: "host", native_vlan: hosts}
            2: {name: "vxA", stack: {dp: swA, port: 3}}
            3: {name: "vxB", stack: {dp: swB, port: 2}}
`

// pingsWithin reports whether from reaches ip within d (learning, and
// Faucet's stack convergence, take a while).
func pingsWithin(from *nstest.Netns, ip string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if _, err := from.Output("ping", "-n", "-q", "-c", "1", "-W", "1", ip); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestFaucetStackAcrossHosts: one Faucet controls three of our switches as
// a stack ring whose links are port-based VXLAN tunnels between three host
// namespaces. Each host pair has its own point-to-point underlay veth (a
// /30), so cutting one of them breaks exactly one stack link; the switches
// reach Faucet over a separate management veth each, so the cut never
// touches the control channel. LLDP and packet-outs cross the tunnels like
// any traffic. Hosts ping across switches, Faucet heals the ring around
// the cut underlay link (after three missed LLDP beacons), and it reports
// no OpenFlow error.
func TestFaucetStackAcrossHosts(t *testing.T) {
	nstest.RequireRoot(t)
	peer := faucetPeerDir(t)
	start := time.Now()

	names := []string{"A", "B", "C"}
	ctl := nstest.NewNetns(t, "fauctl")
	hosts := make([]*nstest.Netns, 3)
	for i := range hosts {
		hosts[i] = nstest.NewNetns(t, "fauh"+names[i])
	}
	// Management: host i reaches Faucet at 198.18.24.(4i+1) over its own /30.
	ctlIP := make([]string, 3)
	for i, h := range hosts {
		c, m := nstest.Name("fmc"), nstest.Name("fmh")
		nstest.Run(t, "ip", "link", "add", c, "netns", ctl.Name, "type", "veth", "peer", "name", m, "netns", h.Name)
		ctlIP[i] = fmt.Sprintf("198.18.24.%d", 4*i+1)
		ctl.Run(t, "ip", "addr", "add", ctlIP[i]+"/30", "dev", c)
		h.Run(t, "ip", "addr", "add", fmt.Sprintf("198.18.24.%d/30", 4*i+2), "dev", m)
		ctl.Run(t, "ip", "link", "set", c, "up")
		h.Run(t, "ip", "link", "set", m, "up")
	}
	// Underlay ring: link i joins host i (198.18.25.(4i+1)) and host i+1
	// (198.18.25.(4i+2)); ulDev[i] is host i's end of it.
	ulDev := make([]string, 3)
	remote := make([][2]string, 3) // remote[i] = {next host's address, previous host's address} as seen from host i
	for i := range hosts {
		n := (i + 1) % 3
		a, b := nstest.Name("ful"), nstest.Name("ful")
		nstest.Run(t, "ip", "link", "add", a, "netns", hosts[i].Name, "type", "veth", "peer", "name", b, "netns", hosts[n].Name)
		ai, bi := fmt.Sprintf("198.18.25.%d", 4*i+1), fmt.Sprintf("198.18.25.%d", 4*i+2)
		hosts[i].Run(t, "ip", "addr", "add", ai+"/30", "dev", a)
		hosts[n].Run(t, "ip", "addr", "add", bi+"/30", "dev", b)
		hosts[i].Run(t, "ip", "link", "set", a, "up")
		hosts[n].Run(t, "ip", "link", "set", b, "up")
		ulDev[i] = a
		remote[i][0] = bi
		remote[n][1] = ai
	}

	cfg := filepath.Join(t.TempDir(), "faucet.yaml")
	if err := os.WriteFile(cfg, []byte(faucetStackYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	const ofPort = 6653
	f := startFaucet(t, peer, ctl, cfg, ofPort)

	wls := make([]*workload, 3)
	for i, h := range hosts {
		th := &tunnelHost{ns: h}
		wls[i] = newWorkload(t, th, fmt.Sprintf("198.19.34.%d", i+1))
		d := newDaemon(t)
		d.netns = h.Name
		d.start()
		d.vsctl("set", "Open_vSwitch", ".", "other_config:n-pmd=1")
		d.vsctl("add-br", "br0", "fail_mode=secure")
		d.vsctl("set", "bridge", "br0", fmt.Sprintf("other_config:datapath-id=%016x", i+1))
		d.vsctl("add-port", "br0", wls[i].port, "--", "type=afpacket", "ofport_request=1")
		next, prev := names[(i+1)%3], names[(i+2)%3]
		// One VNI per ring link, the same at both ends.
		d.vsctl("add-port", "br0", "vx"+next, "--", "type=vxlan", "options:remote_ip="+remote[i][0],
			fmt.Sprintf("options:key=%d", 1001+i), "ofport_request=2")
		d.vsctl("add-port", "br0", "vx"+prev, "--", "type=vxlan", "options:remote_ip="+remote[i][1],
			fmt.Sprintf("options:key=%d", 1001+(i+2)%3), "ofport_request=3")
		d.vsctl("set-controller", "br0", fmt.Sprintf("tcp:%s:%d", ctlIP[i], ofPort))
	}

	nstest.WaitFor(t, 40*time.Second, "Faucet to configure the three dps", func() bool {
		return strings.Count(f.log(), "configuring DP") >= 3
	})
	// Faucet sends LLDP on stack ports every few seconds and brings a
	// port UP once both ends have heard each other.
	nstest.WaitFor(t, 60*time.Second, "all six stack ports UP", func() bool {
		l := f.log()
		for _, sw := range names {
			for _, p := range []int{2, 3} {
				if !strings.Contains(l, fmt.Sprintf("sw%s Stack Port %d state UP", sw, p)) {
					return false
				}
			}
		}
		return true
	})
	t.Logf("stack up %.1f s after start", time.Since(start).Seconds())

	allPairs := func(stage string, within time.Duration) {
		t.Helper()
		for i, w := range wls {
			for j, o := range wls {
				if i == j {
					continue
				}
				if !pingsWithin(w.ns, o.ip, within) {
					t.Fatalf("%s: host %s cannot reach host %s within %v", stage, names[i], names[j], within)
				}
				nstest.Ping(t, w.ns, o.ip)
			}
		}
	}
	allPairs("ring up", 30*time.Second)

	// Cut the A-B underlay link: only tunnel A:2-B:3 loses its path (the
	// /30's route goes with the carrier). B's way to the root A is now
	// round the ring through C, once Faucet notices the missed beacons.
	mark := len(f.log())
	hosts[0].Run(t, "ip", "link", "set", ulDev[0], "down")
	cut := time.Now()
	healed := true
	for i, w := range wls {
		for j, o := range wls {
			if i != j && !pingsWithin(w.ns, o.ip, 60*time.Second-time.Since(cut)) {
				healed = false
			}
		}
	}
	if !healed {
		t.Fatalf("no heal within 60 s of cutting the A-B underlay link")
	}
	t.Logf("healed %.1f s after cutting the A-B underlay link", time.Since(cut).Seconds())
	allPairs("A-B link down", 10*time.Second)
	// The heal is Faucet's doing, not a second path of ours: it took the
	// cut link's stack ports out of the tree.
	if after := f.log()[mark:]; !regexp.MustCompile(`sw(A Stack Port 2|B Stack Port 3) state (BAD|GONE|INITIALIZING)`).MatchString(after) {
		t.Errorf("Faucet's log after the cut does not take stack link swA:2-swB:3 down:\n%s", after)
	}

	// Restored, the link's stack ports come back (LLDP both ways through
	// the tunnel again) and every pair still reaches every other.
	mark = len(f.log())
	hosts[0].Run(t, "ip", "link", "set", ulDev[0], "up")
	nstest.WaitFor(t, 60*time.Second, "stack link swA:2-swB:3 UP again", func() bool {
		after := f.log()[mark:]
		return strings.Contains(after, "swA Stack Port 2 state UP") && strings.Contains(after, "swB Stack Port 3 state UP")
	})
	allPairs("A-B link restored", 10*time.Second)

	// Faucet saw no OpenFlow error from any switch.
	var logs string
	for _, n := range []string{"faucet.log", "osken.log"} {
		b, _ := os.ReadFile(filepath.Join(f.logDir, n))
		logs += string(b)
	}
	if m := regexp.MustCompile(`.*(OFError|OFPErrorMsg|EventOFPErrorMsg).*`).FindAllString(logs, 5); len(m) > 0 {
		t.Errorf("OpenFlow errors in Faucet's logs:\n%s", strings.Join(m, "\n"))
	}
	if v, err := f.metric("of_errors"); err != nil || v != 0 {
		t.Errorf("Faucet's of_errors metric: %v (%v)", v, err)
	}
	if b, _ := os.ReadFile(filepath.Join(f.logDir, "faucet_exception.log")); len(b) > 0 {
		t.Errorf("Faucet's exception log:\n%s", b)
	}
	t.Logf("total %.1f s", time.Since(start).Seconds())
}

package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// ovsdbServer is Debian's ovsdb-server serving an Open_vSwitch database
// in a private directory (no Open vSwitch daemon: ours is the switch).
type ovsdbServer struct {
	t    *testing.T
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *syncBuffer
}

func (s *ovsdbServer) sock() string { return filepath.Join(s.dir, "db.sock") }
func (s *ovsdbServer) db() string   { return "unix:" + s.sock() }

// newOVSDBServer creates the database (ovsdb-tool) and starts the server.
func newOVSDBServer(t *testing.T) *ovsdbServer {
	t.Helper()
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovsdb-server", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl")
	s := &ovsdbServer{t: t, dir: t.TempDir(), log: &syncBuffer{}}
	nstest.Run(t, "ovsdb-tool", "create", filepath.Join(s.dir, "conf.db"), "/usr/share/openvswitch/vswitch.ovsschema")
	s.start()
	t.Cleanup(func() {
		s.stop(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("ovsdb-server output:\n%s", s.log.String())
		}
	})
	return s
}

// start runs ovsdb-server on the database and waits until it answers.
func (s *ovsdbServer) start() {
	s.t.Helper()
	s.cmd = exec.Command("ovsdb-server", filepath.Join(s.dir, "conf.db"), "--remote=punix:"+s.sock(),
		"--unixctl="+filepath.Join(s.dir, "ovsdb-server.ctl"), "--pidfile="+filepath.Join(s.dir, "ovsdb-server.pid"),
		"--no-chdir", "-vconsole:off", "--log-file="+filepath.Join(s.dir, "ovsdb-server.log"))
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	s.done = done
	go func() { s.cmd.Wait(); close(done) }()
	nstest.WaitFor(s.t, 10*time.Second, "ovsdb-server to answer", func() bool {
		_, err := nstest.Output("ovs-vsctl", "--db="+s.db(), "--no-wait", "--timeout=2", "show")
		return err == nil
	})
}

// stop ends the server with sig and waits for it.
func (s *ovsdbServer) stop(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// vsctl runs the real ovs-vsctl against the server, without --no-wait:
// it returns once the switch reports the change applied (cur_cfg).
func (s *ovsdbServer) vsctl(args ...string) string {
	s.t.Helper()
	return nstest.Run(s.t, "ovs-vsctl", append([]string{"--db=" + s.db(), "--timeout=30"}, args...)...)
}

// TestOVSDBDrivesTheSwitch: the daemon started with --db follows Debian's
// ovsdb-server; the real ovs-vsctl, without --no-wait, builds a bridge
// whose veth ports forward, sees their ofport, gets an unsupported type
// reported in the Interface's error column while the rest keeps
// forwarding; ovs-ofctl reaches the bridge by name; a port added before
// its interface exists waits for it. With ovsdb-server killed, traffic
// keeps flowing; once it is back, changes apply again. The daemon killed
// comes back and follows the database again: deletions apply.
func TestOVSDBDrivesTheSwitch(t *testing.T) {
	srv := newOVSDBServer(t)
	nstest.Run(t, "ovs-vsctl", "--db="+srv.db(), "--no-wait", "init")
	// Given a database the daemon runs as ovs-vswitchd: the bridges'
	// OpenFlow sockets are in $OVS_RUNDIR, where ovs-ofctl looks.
	runDir := t.TempDir()
	t.Setenv("OVS_RUNDIR", runDir)
	d := newDaemon(t)
	d.start("--pidfile", "--db", srv.db())
	a, b := nstest.TwoHosts(t)
	br := nstest.Name("brdb")

	srv.vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev")
	srv.vsctl("add-port", br, a.Port)
	srv.vsctl("add-port", br, b.Port)
	nstest.Ping(t, a.NS, b.IP)
	for _, p := range []string{a.Port, b.Port} {
		out := strings.TrimSpace(srv.vsctl("get", "Interface", p, "ofport"))
		if n, err := strconv.Atoi(out); err != nil || n <= 0 {
			t.Errorf("Interface %s ofport = %q, want a positive number", p, out)
		}
	}
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", br, "ofport")); out != "65534" {
		t.Errorf("the bridge's own Interface ofport = %q, want 65534", out)
	}
	for _, v := range []string{"OpenFlow13", "OpenFlow14", "OpenFlow15"} {
		if out := nstest.Run(t, "ovs-ofctl", "-O", v, "dump-flows", br); !strings.Contains(out, "actions=") {
			t.Errorf("ovs-ofctl -O %s dump-flows:\n%s", v, out)
		}
	}
	// Bridge.protocols limits the versions the bridge negotiates, as
	// ovn-controller's bridge (OpenFlow15 only) or a Ryu tutorial's
	// (OpenFlow13) sets it.
	srv.vsctl("set", "bridge", br, "protocols=OpenFlow15")
	if out, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow13", "show", br); err == nil ||
		!strings.Contains(out, "version negotiation failed") {
		t.Errorf("ovs-ofctl -O OpenFlow13 with protocols=OpenFlow15: %v\n%s", err, out)
	}
	if out := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "show", br); !strings.Contains(out, "(OF1.5)") {
		t.Errorf("ovs-ofctl -O OpenFlow15 show:\n%s", out)
	}
	srv.vsctl("clear", "bridge", br, "protocols")
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "show", br)

	// Connection tracking settings through the database: the Datapath
	// row gets the capabilities ovn-controller reads, and a zone's
	// timeout policy (ovs-vsctl add-zone-tp) governs its connections.
	srv.vsctl("--", "--id=@dp", "create", "Datapath", "datapath_version=0", "--", "set", "Open_vSwitch", ".", "datapaths:netdev=@dp")
	srv.vsctl("add-zone-tp", "netdev", "zone=5", "icmp_first=3", "icmp_reply=4")
	caps := srv.vsctl("get", "Datapath", ".", "capabilities")
	for _, want := range []string{`ct_zero_snat="true"`, `ct_flush="true"`, `ct_timeout="true"`, `check_pkt_len="false"`} {
		if !strings.Contains(caps, want) {
			t.Errorf("Datapath capabilities lack %s: %s", want, caps)
		}
	}
	if got := srv.vsctl("list-zone-tp", "netdev"); !strings.Contains(got, "Zone:5, Timeout Policies: icmp_first=3 icmp_reply=4") {
		t.Errorf("list-zone-tp: %q", got)
	}
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", br, "priority=100,icmp,actions=ct(commit,zone=5),NORMAL")
	nstest.Ping(t, a.NS, b.IP)
	ct := nstest.Run(t, "ovs-appctl", "dpctl/dump-conntrack", "-s", "zone=5")
	if !strings.Contains(ct, "icmp,orig=(src="+a.IP) || !regexp.MustCompile(`,timeout=[1-4]\b`).MatchString(ct) {
		t.Errorf("zone 5 with icmp_reply=4, dump-conntrack -s:\n%s", ct)
	}
	srv.vsctl("del-zone-tp", "netdev", "zone=5")
	nstest.Run(t, "ovs-appctl", "dpctl/flush-conntrack")
	nstest.Ping(t, a.NS, b.IP)
	if ct := nstest.Run(t, "ovs-appctl", "dpctl/dump-conntrack", "-s", "zone=5"); !strings.Contains(ct, ",timeout=30") {
		t.Errorf("zone 5 without a policy, dump-conntrack -s:\n%s", ct)
	}
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "del-flows", br, "icmp")

	// A type this switch does not run: reported, the rest untouched.
	stt := nstest.Name("vsst")
	srv.vsctl("add-port", br, stt, "--", "set", "Interface", stt, "type=stt", "options:remote_ip=198.18.9.9")
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", stt, "error")); out != `"unsupported interface type: stt"` {
		t.Errorf("stt Interface error = %s", out)
	}
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", stt, "ofport")); out != "-1" {
		t.Errorf("stt Interface ofport = %s, want -1", out)
	}
	nstest.Ping(t, a.NS, b.IP)

	// A port whose interface does not exist yet waits for it, as in
	// Open vSwitch: ofport -1 and why, then a number once it appears.
	late := nstest.Name("vslt")
	srv.vsctl("add-port", br, late)
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", late, "ofport", "error")); !strings.HasPrefix(out, "-1\n") || !strings.Contains(out, "No such device") {
		t.Errorf("port without its interface: ofport and error %q", out)
	}
	nstest.Run(t, "ip", "link", "add", late, "type", "veth", "peer", "name", late+"p")
	t.Cleanup(func() { nstest.Output("ip", "link", "del", late) })
	nstest.Run(t, "ip", "link", "set", late, "up")
	nstest.WaitFor(t, 20*time.Second, "the late port's ofport", func() bool {
		out, err := nstest.Output("ovs-vsctl", "--db="+srv.db(), "--no-wait", "get", "Interface", late, "ofport")
		n, aerr := strconv.Atoi(strings.TrimSpace(out))
		return err == nil && aerr == nil && n > 0
	})
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", late, "error")); out != "[]" {
		t.Errorf("the late port running: error %s", out)
	}

	// The database is the one configuration: vsctl's changes are written
	// to it, where ovs-vsctl sees them.
	viaVsctl := nstest.Name("brvs")
	d.vsctl("add-br", viaVsctl)
	if out := srv.vsctl("list-br"); !strings.Contains(out, viaVsctl) {
		t.Errorf("vsctl add-br with a database: ovs-vsctl list-br:\n%s", out)
	}
	d.vsctl("del-br", viaVsctl)
	if out := srv.vsctl("list-br"); strings.Contains(out, viaVsctl) {
		t.Errorf("vsctl del-br with a database: ovs-vsctl list-br:\n%s", out)
	}

	// The database goes away: the switch keeps forwarding.
	srv.stop(syscall.SIGKILL)
	nstest.Ping(t, a.NS, b.IP)

	// It comes back: the client reconnects and a change applies
	// (ovs-vsctl without --no-wait returns only once cur_cfg says so).
	srv.start()
	c := nstest.Name("vsp3")
	nstest.Run(t, "ip", "link", "add", c, "type", "veth", "peer", "name", c+"p")
	t.Cleanup(func() { nstest.Output("ip", "link", "del", c) })
	nstest.Run(t, "ip", "link", "set", c, "up")
	srv.vsctl("add-port", br, c)
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", c, "ofport")); out == "-1" || out == "[]" {
		t.Errorf("port added after ovsdb-server restarted: ofport %s", out)
	}
	nstest.Ping(t, a.NS, b.IP)

	// The daemon killed: it comes back with its stored configuration,
	// reconnects and follows the database again.
	d.kill9()
	d.start("--pidfile", srv.db()) // ovs-vswitchd's form: the database as the argument
	nstest.Ping(t, a.NS, b.IP)
	srv.vsctl("del-port", br, c)
	if out := d.vsctl("list-ports", br); strings.Contains(out, c) || !strings.Contains(out, a.Port) {
		t.Errorf("after del-port %s, list-ports:\n%s", c, out)
	}
	srv.vsctl("del-br", br)
	if out := d.vsctl("list-br"); strings.TrimSpace(out) != "" {
		t.Errorf("after del-br, list-br: %q", out)
	}
	if _, err := os.Stat(filepath.Join(runDir, br+".mgmt")); !os.IsNotExist(err) {
		t.Errorf("bridge socket after del-br: %v", err)
	}
}

// ovsdbDaemon starts Debian's ovsdb-server on a fresh database and the
// daemon as its ovs-vswitchd, its bridge sockets in a private
// $OVS_RUNDIR.
func ovsdbDaemon(t *testing.T) (*ovsdbServer, *daemon) {
	t.Helper()
	srv := newOVSDBServer(t)
	nstest.Run(t, "ovs-vsctl", "--db="+srv.db(), "--no-wait", "init")
	t.Setenv("OVS_RUNDIR", t.TempDir())
	d := newDaemon(t)
	d.start("--pidfile", "--db", srv.db())
	return srv, d
}

// TestOVSDBPatchPorts: the real ovs-vsctl joins two bridges with patch
// ports named as OVN names them (longer than an interface name), each
// bridge with a veth port; traffic crosses, ofport and link_state are
// filled, ovs-ofctl and ovs-appctl dpif/show list them. A patch port
// whose peer goes away is down and carries nothing; the peer back, it
// carries again. mtu_request sets the veths' MTU and packets of it cross.
func TestOVSDBPatchPorts(t *testing.T) {
	srv, d := ovsdbDaemon(t)
	a, b := nstest.TwoHosts(t)
	br1, br2 := nstest.Name("brpa"), nstest.Name("brpb")
	p1 := "patch-" + br1 + "-to-" + br2
	p2 := "patch-" + br2 + "-to-" + br1

	srv.vsctl("add-br", br1, "--", "set", "bridge", br1, "datapath_type=netdev",
		"--", "add-br", br2, "--", "set", "bridge", br2, "datapath_type=netdev")
	srv.vsctl("add-port", br1, a.Port, "--", "add-port", br2, b.Port)
	srv.vsctl("add-port", br1, p1, "--", "set", "Interface", p1, "type=patch", "options:peer="+p2,
		"--", "add-port", br2, p2, "--", "set", "Interface", p2, "type=patch", "options:peer="+p1)
	nstest.Ping(t, a.NS, b.IP)
	// Big enough to be IP fragments: they cross as they are.
	a.NS.Run(t, "ping", "-c", "2", "-i", "0.2", "-W", "5", "-s", "3000", b.IP)
	for _, p := range []string{p1, p2} {
		out := strings.TrimSpace(srv.vsctl("get", "Interface", p, "ofport", "link_state", "error"))
		if f := strings.Fields(out); len(f) != 3 || f[0] == "-1" || f[1] != "up" || f[2] != "[]" {
			t.Errorf("Interface %s: ofport, link_state, error = %q", p, out)
		}
	}
	// OpenFlow names carry 15 bytes, as in Open vSwitch.
	if out := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "show", br1); !strings.Contains(out, "("+p1[:15]+")") {
		t.Errorf("ovs-ofctl show %s lacks the patch port:\n%s", br1, out)
	}
	if out := nstest.Run(t, "ovs-appctl", "dpif/show"); !regexp.MustCompile(regexp.QuoteMeta(p1) + ` \d+/none: \(patch: peer=` + regexp.QuoteMeta(p2) + `\)`).MatchString(out) {
		t.Errorf("dpif/show:\n%s", out)
	}

	// The peer deleted: the remaining end is down and nothing crosses.
	srv.vsctl("del-port", br2, p2)
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", p1, "link_state")); out != "down" {
		t.Errorf("patch port without its peer: link_state %s", out)
	}
	if out, err := a.NS.Output("ping", "-c", "1", "-W", "1", b.IP); err == nil {
		t.Errorf("ping crossed a patch port whose peer is gone:\n%s", out)
	}
	srv.vsctl("add-port", br2, p2, "--", "set", "Interface", p2, "type=patch", "options:peer="+p1)
	nstest.Ping(t, a.NS, b.IP)

	// A patch port without a peer is refused with a reason, the rest runs.
	bad := nstest.Name("vspp")
	srv.vsctl("add-port", br1, bad, "--", "set", "Interface", bad, "type=patch")
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", bad, "ofport", "error")); !strings.HasPrefix(out, "-1\n") || !strings.Contains(out, "options:peer") {
		t.Errorf("patch port without a peer: ofport and error %q", out)
	}
	nstest.Ping(t, a.NS, b.IP)

	// mtu_request sets the kernel interface's MTU: frames of it then
	// cross both bridges and the patch pair unfragmented (the ports
	// change to AF_PACKET, as AF_XDP frames cannot hold them).
	srv.vsctl("set", "Interface", a.Port, "mtu_request=1800", "--", "set", "Interface", b.Port, "mtu_request=1800")
	for _, h := range []*nstest.Host{a, b} {
		if out := strings.TrimSpace(srv.vsctl("get", "Interface", h.Port, "mtu", "mtu_request")); out != "1800\n1800" {
			t.Errorf("Interface %s mtu, mtu_request = %q", h.Port, out)
		}
		h.NS.Run(t, "ip", "link", "set", h.Dev, "mtu", "1800")
	}
	if out, err := a.NS.Output("ping", "-c", "3", "-i", "0.2", "-W", "5", "-M", "do", "-s", "1772", b.IP); err != nil {
		t.Errorf("1800-byte packets across the patch pair: %v\n%s", err, out)
	}
	// A jumbo MTU the switch's buffers cannot carry is not applied.
	srv.vsctl("set", "Interface", a.Port, "mtu_request=9000")
	if out := strings.TrimSpace(srv.vsctl("get", "Interface", a.Port, "mtu")); out != "1800" {
		t.Errorf("mtu_request=9000: Interface mtu %s, want it kept at 1800", out)
	}
	if out, _ := nstest.Output("ovs-vsctl", "--db="+srv.db(), "--timeout=30", "set", "Interface", a.Port, "mtu_request=20"); !strings.Contains(srv.vsctl("get", "Interface", a.Port, "error"), "mtu_request 20") {
		t.Errorf("mtu_request=20 not reported: %s", out)
	}
	srv.vsctl("set", "Interface", a.Port, "mtu_request=1500")
	nstest.Ping(t, a.NS, b.IP)

	// The daemon killed: both bridges and the pair come back.
	d.kill9()
	d.start("--pidfile", "--db", srv.db())
	nstest.Ping(t, a.NS, b.IP)
}

// TestOVSDBControllerColumns: the real ovs-vsctl sets a controller and
// its inactivity_probe and max_backoff; the switch applies them (a
// controller that never says HELLO is dropped after two probe intervals
// and redialled within max_backoff) and reports the connection in the
// Controller row: is_connected, status:state and status:last_error.
func TestOVSDBControllerColumns(t *testing.T) {
	srv, _ := ovsdbDaemon(t)
	br := nstest.Name("brct")
	srv.vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev")

	// A controller that accepts and says nothing.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			defer c.Close()
		}
	}()
	srv.vsctl("set-controller", br, "tcp:"+ln.Addr().String())
	srv.vsctl("set", "controller", br, "inactivity_probe=1000", "max_backoff=1000")
	// With 1 s probes each connection is dropped after 2 s and redialled
	// within 1 s: a third dial by 6 s. With the default 5 s probes the
	// third would come after 22 s.
	nstest.WaitFor(t, 15*time.Second, "the silent controller dropped and redialled", func() bool { return accepted.Load() >= 3 })
	nstest.WaitFor(t, 10*time.Second, "the controller's status", func() bool {
		out, err := nstest.Output("ovs-vsctl", "--db="+srv.db(), "--no-wait", "get", "controller", br, "status", "is_connected")
		return err == nil && strings.Contains(out, "last_error=") && strings.Contains(out, "no HELLO") && strings.HasSuffix(strings.TrimSpace(out), "false")
	})
}

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// ovsInstance is Open vSwitch (ovsdb-server and ovs-vswitchd, userspace
// datapath) running in a namespace of its own with private run, db, log
// and etc directories, as bench/ofbench starts it.
type ovsInstance struct {
	t   *testing.T
	ns  *nstest.Netns
	dir string
	env []string
}

func (o *ovsInstance) path(p string) string { return filepath.Join(o.dir, p) }

// startOVS starts OVS in ns; everything stops and is removed at cleanup.
func startOVS(t *testing.T, ns *nstest.Netns) *ovsInstance {
	t.Helper()
	nstest.RequireTool(t, "ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ovs-vsctl", "ovs-appctl")
	o := &ovsInstance{t: t, ns: ns, dir: t.TempDir()}
	for _, d := range []string{"run", "db", "log", "etc"} {
		if err := os.Mkdir(o.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o.env = append(os.Environ(), "OVS_RUNDIR="+o.path("run"), "OVS_DBDIR="+o.path("db"),
		"OVS_LOGDIR="+o.path("log"), "OVS_SYSCONFDIR="+o.path("etc"))
	nstest.Run(t, "ovsdb-tool", "create", o.path("db/conf.db"), "/usr/share/openvswitch/vswitch.ovsschema")
	o.background("ovsdb-server", o.path("db/conf.db"), "--remote=punix:"+o.path("run/db.sock"),
		"--pidfile="+o.path("run/ovsdb-server.pid"), "--unixctl="+o.path("run/ovsdb-server.ctl"),
		"--log-file="+o.path("log/ovsdb-server.log"), "--no-chdir")
	nstest.WaitFor(t, 10*time.Second, "ovsdb-server socket", func() bool { _, err := os.Stat(o.path("run/db.sock")); return err == nil })
	o.vsctl("--no-wait", "init")
	o.background("ovs-vswitchd", "unix:"+o.path("run/db.sock"), "--pidfile="+o.path("run/ovs-vswitchd.pid"),
		"--unixctl="+o.path("run/ovs-vswitchd.ctl"), "--log-file="+o.path("log/ovs-vswitchd.log"), "--no-chdir", "-vconsole:off")
	nstest.WaitFor(t, 10*time.Second, "ovs-vswitchd control socket", func() bool {
		_, err := os.Stat(o.path("run/ovs-vswitchd.ctl"))
		return err == nil
	})
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(o.path("log/ovs-vswitchd.log")); err == nil {
				t.Logf("ovs-vswitchd.log:\n%s", b)
			}
		}
		// exit --cleanup removes the datapath and its taps.
		o.output("ovs-appctl", "-t", o.path("run/ovs-vswitchd.ctl"), "--timeout=10", "exit", "--cleanup")
	})
	return o
}

// background runs a daemon in the namespace until the test ends.
func (o *ovsInstance) background(name string, args ...string) {
	o.t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", o.ns.Name, name}, args...)...)
	cmd.Env = o.env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		o.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	o.t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
}

func (o *ovsInstance) output(name string, args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", o.ns.Name, name}, args...)...)
	cmd.Env = o.env
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func (o *ovsInstance) run(name string, args ...string) string {
	o.t.Helper()
	out, err := o.output(name, args...)
	if err != nil {
		o.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func (o *ovsInstance) vsctl(args ...string) string {
	o.t.Helper()
	return o.run("ovs-vsctl", append([]string{"--db=unix:" + o.path("run/db.sock"), "--timeout=20"}, args...)...)
}

// ovsTunnelHost makes host h an Open vSwitch host with native tunnelling:
// the underlay interface becomes a port of bridge br-phy and the host's
// underlay address moves onto br-phy (OVS's userspace tunnels need it
// there); bridge br-int has the tunnel port vx0 (type typ, VNI 100, to
// remote) and an internal port with the tenant address ip.
func ovsTunnelHost(t *testing.T, h *tunnelHost, typ, remote, ip string) *ovsInstance {
	t.Helper()
	o := startOVS(t, h.ns)
	o.vsctl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev", "fail-mode=standalone")
	o.vsctl("add-port", "br-phy", h.dev)
	h.ns.Run(t, "ip", "addr", "flush", "dev", h.dev)
	h.ns.Run(t, "ip", "addr", "add", h.ip4+"/24", "dev", "br-phy")
	h.ns.Run(t, "ip", "addr", "add", h.ip6+"/64", "dev", "br-phy", "nodad")
	h.ns.Run(t, "ip", "link", "set", "br-phy", "up")
	o.vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev", "fail-mode=standalone")
	o.vsctl("add-port", "br-int", "vx0", "--", "set", "interface", "vx0", "type="+typ,
		"options:remote_ip="+remote, "options:key=100")
	o.vsctl("add-port", "br-int", "tnt0", "--", "set", "interface", "tnt0", "type=internal")
	h.ns.Run(t, "ip", "link", "set", "tnt0", "mtu", "1450")
	h.ns.Run(t, "ip", "addr", "add", ip+"/24", "dev", "tnt0")
	h.ns.Run(t, "ip", "link", "set", "tnt0", "up")
	return o
}

// TestTunnelOVSInterop: our VXLAN and Geneve ports with Open vSwitch 3.1's
// userspace tunnel ports (the kernel here has no geneve module, so OVS
// userspace is the Geneve peer), pings both ways, IPv4 and IPv6 underlay.
func TestTunnelOVSInterop(t *testing.T) {
	for _, c := range []struct {
		typ string
		v6  bool
	}{{"vxlan", false}, {"geneve", false}, {"vxlan", true}, {"geneve", true}} {
		name := c.typ + map[bool]string{false: "-ipv4", true: "-ipv6"}[c.v6]
		t.Run(name, func(t *testing.T) {
			a, b := twoUnderlayHosts(t)
			la, lb := a.ip4, b.ip4
			if c.v6 {
				la, lb = a.ip6, b.ip6
			}
			w := newWorkload(t, a, "198.19.32.1")
			// udp_offload=false: OVS reads the underlay veth with a
			// packet socket, and a segmented run (the pings queued behind
			// ARP leave as one) would reach it with its UDP checksums
			// left to an offload no veth performs; OVS drops those.
			d := hostSwitch(t, a, w, c.typ, lb, "key=100", "udp_offload=false")
			ovsTunnelHost(t, b, c.typ, la, "198.19.32.2")
			// Our IPv6 packets carry complete UDP checksums: OVS reads
			// the underlay veth with a packet socket, which would not
			// complete a checksum left to offload (the UDP socket send
			// path, df_default=false, does leave it; a real NIC completes
			// it in hardware).
			nstest.Ping(t, w.ns, "198.19.32.2")
			nstest.Ping(t, b.ns, "198.19.32.1")
			if s := d.vsctl("show"); !strings.Contains(s, "type: "+c.typ) {
				t.Errorf("vsctl show:\n%s", s)
			}
		})
	}
}

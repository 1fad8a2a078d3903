package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestOVNChassis runs Debian's OVN 23.03 against the daemon as its
// chassis: a northbound and a southbound ovsdb-server and ovn-northd, an
// Open_vSwitch ovsdb-server that the daemon and ovn-controller share, and
// ovn-controller itself, which creates br-int, connects to br-int.mgmt in
// OpenFlow 1.5 and installs its pipeline in one bundle per change. Two
// logical switches joined by a logical router, a port of each bound to a
// veth port: ovn-controller marks both ovn-installed, the hosts ping each
// other across the router and ping the router, a DHCP client gets its
// address from ovn-controller (a paused pipeline, resumed), a load
// balancer's flows and groups install (ct_state matches, selection_method,
// learn) and TCP reaches its backend, a kill -9 and restart of the daemon
// is followed by ovn-controller reinstalling and traffic flowing again,
// stateful ACLs allow ICMP with its replies, reject TCP (ovn-controller's
// reset) and drop the rest, the router made a gateway router translates a
// floating address both ways (dnat_and_snat), and ovn-controller's log
// holds no OpenFlow error (since 23.03.1 any error makes it reconnect and
// reinstall everything, forever).
func TestOVNChassis(t *testing.T) {
	nstest.RequireTool(t, "ovn-northd", "ovn-controller", "ovn-nbctl", "ovn-sbctl", "ovsdb-tool", "ovsdb-server")
	dir := t.TempDir()
	start := func(name string, env []string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), env...)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
			if t.Failed() && out.String() != "" {
				t.Logf("%s output:\n%s", name, out.String())
			}
		})
	}
	logOpts := func(name string) []string {
		return []string{"--no-chdir", "-vconsole:off", "--log-file=" + filepath.Join(dir, name+".log"),
			"--pidfile=" + filepath.Join(dir, name+".pid")}
	}
	db := func(name, schema string) string {
		file := filepath.Join(dir, name+".db")
		nstest.Run(t, "ovsdb-tool", "create", file, schema)
		sock := filepath.Join(dir, name+".sock")
		start("ovsdb-server", nil, append([]string{file, "--remote=punix:" + sock,
			"--unixctl=" + filepath.Join(dir, name+".ctl")}, logOpts(name)...)...)
		nstest.WaitFor(t, 10*time.Second, name+" ovsdb-server to listen", func() bool {
			_, err := os.Stat(sock)
			return err == nil
		})
		return "unix:" + sock
	}
	nb := db("nb", "/usr/share/ovn/ovn-nb.ovsschema")
	sb := db("sb", "/usr/share/ovn/ovn-sb.ovsschema")
	ovnEnv := []string{"OVN_RUNDIR=" + dir}
	start("ovn-northd", ovnEnv, append([]string{"--ovnnb-db=" + nb, "--ovnsb-db=" + sb}, logOpts("northd")...)...)

	srv := newOVSDBServer(t)
	nstest.Run(t, "ovs-vsctl", "--db="+srv.db(), "--no-wait", "init")
	runDir := t.TempDir()
	t.Setenv("OVS_RUNDIR", runDir)
	d := newDaemon(t)
	d.start("--pidfile", "--db", srv.db())
	a, b := nstest.TwoHosts(t)
	srv.vsctl("set", "Open_vSwitch", ".", "external_ids:system-id=chassis-e2e", "external_ids:ovn-remote="+sb,
		"external_ids:ovn-encap-type=vxlan", "external_ids:ovn-encap-ip=198.18.255.1")
	start("ovn-controller", append(ovnEnv, "OVS_RUNDIR="+runDir), append([]string{srv.db()}, logOpts("ovn-controller")...)...)

	// Host b moves to its own subnet, behind the logical router.
	b.IP = "198.18.1.2"
	b.NS.Run(t, "ip", "addr", "flush", "dev", b.Dev)
	b.NS.Run(t, "ip", "addr", "add", b.IP+"/24", "dev", b.Dev)
	a.NS.Run(t, "ip", "route", "add", "default", "via", "198.18.0.254")
	b.NS.Run(t, "ip", "route", "add", "default", "via", "198.18.1.254")
	nbctl := func(args ...string) { nstest.Run(t, "ovn-nbctl", append([]string{"--db=" + nb}, args...)...) }
	nbctl("lr-add", "lr0")
	for i, h := range []*nstest.Host{a, b} {
		ls, lsp, lrp := []string{"ls0", "ls1"}[i], []string{"lsp-a", "lsp-b"}[i], []string{"lrp0", "lrp1"}[i]
		nbctl("ls-add", ls)
		nbctl("lsp-add", ls, lsp, "--", "lsp-set-addresses", lsp, h.MAC+" "+h.IP)
		nbctl("lrp-add", "lr0", lrp, []string{"02:00:c6:12:ff:00", "02:00:c6:12:ff:01"}[i], []string{"198.18.0.254/24", "198.18.1.254/24"}[i])
		nbctl("lsp-add", ls, ls+"-lr0", "--", "lsp-set-type", ls+"-lr0", "router", "--",
			"lsp-set-addresses", ls+"-lr0", "router", "--", "lsp-set-options", ls+"-lr0", "router-port="+lrp)
	}
	nstest.WaitFor(t, 30*time.Second, "ovn-controller to create br-int", func() bool {
		_, err := nstest.Output("ovs-vsctl", "--db="+srv.db(), "--timeout=2", "br-exists", "br-int")
		return err == nil
	})
	srv.vsctl("add-port", "br-int", a.Port, "--", "set", "Interface", a.Port, "external_ids:iface-id=lsp-a")
	srv.vsctl("add-port", "br-int", b.Port, "--", "set", "Interface", b.Port, "external_ids:iface-id=lsp-b")
	for _, p := range []string{a.Port, b.Port} {
		nstest.WaitFor(t, 60*time.Second, "ovn-controller to install "+p, func() bool {
			out, err := nstest.Output("ovs-vsctl", "--db="+srv.db(), "--timeout=2", "get", "Interface", p, "external_ids:ovn-installed")
			return err == nil && strings.Contains(out, "true")
		})
	}
	nstest.Ping(t, a.NS, b.IP)
	nstest.Ping(t, b.NS, a.IP)
	nstest.Ping(t, a.NS, "198.18.0.254") // the router's own address: OVN's ARP and ICMP responders

	// DHCP answered by ovn-controller: put_dhcp_opts pauses the pipeline
	// (controller(pause) with userdata), pinctrl writes the offer into the
	// packet and the result bit into a register, and NXT_RESUME sends it
	// on through the rest of the pipeline to the client.
	opts := strings.TrimSpace(nstest.Run(t, "ovn-nbctl", "--db="+nb, "create", "DHCP_Options", "cidr=198.18.0.0/24",
		`options="lease_time"="3600" "router"="198.18.0.254" "server_id"="198.18.0.254" "server_mac"="02:00:c6:12:ff:00"`))
	nbctl("lsp-set-dhcpv4-options", "lsp-a", opts)
	nstest.Run(t, "ovn-nbctl", "--db="+nb, "--wait=hv", "--timeout=30", "sync")
	lease, err := a.NS.Output("busybox", "udhcpc", "-i", a.Dev, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", "/bin/true")
	if err != nil || !strings.Contains(lease, "lease of "+a.IP+" obtained") {
		t.Errorf("DHCP through ovn-controller: %v\n%s", err, lease)
	}

	// kill -9 and a restart: the daemon reads its database again,
	// ovn-controller reconnects and reinstalls, and traffic flows again.
	d.kill9()
	d.start("--pidfile", "--db", srv.db())
	// The ports come back and ovn-controller reinstalls its flows on its
	// own schedule: wait (bounded) until both directions answer.
	nstest.WaitFor(t, 30*time.Second, "ping both ways across the router after kill -9", func() bool {
		_, err1 := a.NS.Output("ping", "-c", "1", "-W", "1", b.IP)
		_, err2 := b.NS.Output("ping", "-c", "1", "-W", "1", a.IP)
		return err1 == nil && err2 == nil
	})

	// A load balancer with two backends (select group with
	// selection_method, learn for hairpin replies, ct with nat): every IP
	// packet of ls0 now goes through the connection tracker.
	nbctl("lb-add", "lb0", "198.18.5.100:80", "198.18.1.2:8080,198.18.1.3:8080", "tcp")
	nbctl("ls-lb-add", "ls0", "lb0")
	nstest.Run(t, "ovn-nbctl", "--db="+nb, "--wait=hv", "--timeout=30", "sync")
	groups := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "dump-groups", "br-int")
	if !strings.Contains(groups, "type=select") {
		t.Errorf("no select group for the load balancer:\n%s", groups)
	}

	flows := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "dump-flows", "br-int")
	if n := strings.Count(flows, "\n"); n < 100 {
		t.Errorf("br-int holds %d flows, want OVN's pipeline (100+):\n%s", n, flows)
	}
	for _, w := range []string{"resubmit(,", "ct(", "move:", "controller(userdata=", "learn(", "group:"} {
		if !strings.Contains(flows, w) {
			t.Errorf("OVN's flows lack %q as ovs-ofctl prints them:\n%s", w, flows)
		}
	}
	// Traffic through it: pings still cross the router (tracked now),
	// and a TCP connection to the virtual address reaches host b, the
	// backend that exists, through OVN's DNAT (the other backend is
	// taken out so that the choice is b).
	nstest.Ping(t, a.NS, b.IP)
	nstest.Ping(t, b.NS, a.IP)
	nbctl("lb-del", "lb0")
	nbctl("lb-add", "lb0", "198.18.5.100:80", "198.18.1.2:8080", "tcp")
	nbctl("ls-lb-add", "ls0", "lb0")
	nstest.Run(t, "ovn-nbctl", "--db="+nb, "--wait=hv", "--timeout=30", "sync")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	server := b.NS.Cmd(ctx, "busybox", "nc", "-l", "-p", "8080")
	var got strings.Builder
	server.Stdout = &got
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	// Until the backend has had a connection (it takes one and exits): a
	// client's nc also ends without error when nobody answered.
	served := make(chan struct{})
	go func() { server.Wait(); close(served) }()
	nstest.WaitFor(t, 10*time.Second, "a TCP connection to the load balancer's address", func() bool {
		a.NS.Output("sh", "-c", "echo through-the-lb | busybox nc -w 2 198.18.5.100 80")
		select {
		case <-served:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	if !strings.Contains(got.String(), "through-the-lb") {
		t.Errorf("the backend received %q", got.String())
	}

	// Stateful ACLs towards host b: ICMP allowed with its replies
	// (allow-related), TCP rejected (ovn-controller answers with a
	// reset: a packet-in and a packet-out), the rest of IP dropped.
	// UDP to a closed port on b is refused (b's port unreachable comes
	// back as related) until the drop ACL is there.
	udpRefused := func() error {
		var u net.Conn
		if err := a.NS.Do(func() (err error) { u, err = net.Dial("udp", net.JoinHostPort(b.IP, "9")); return }); err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		u.Write([]byte("probe"))
		u.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := u.Read(make([]byte, 16))
		return err
	}
	if err := udpRefused(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("UDP to a closed port before the ACLs: %v, want refused", err)
	}
	nbctl("acl-add", "ls1", "to-lport", "1002", `outport == "lsp-b" && icmp4`, "allow-related")
	nbctl("acl-add", "ls1", "to-lport", "1001", `outport == "lsp-b" && tcp`, "reject")
	nbctl("acl-add", "ls1", "to-lport", "1000", `outport == "lsp-b" && ip4`, "drop")
	nstest.Run(t, "ovn-nbctl", "--db="+nb, "--wait=hv", "--timeout=30", "sync")
	nstest.Ping(t, a.NS, b.IP)
	// b listens: the refusal can only come from the ACL.
	lctx, lcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer lcancel()
	listener := b.NS.Cmd(lctx, "busybox", "nc", "-l", "-p", "8081")
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := a.NS.Output("sh", "-c", "echo x | busybox nc -w 3 "+b.IP+" 8081"); err == nil || !strings.Contains(out, "refused") {
		t.Errorf("TCP to b under a reject ACL: %v %q, want the connection refused (a reset)", err, out)
	}
	if err := udpRefused(); err == nil || strings.Contains(err.Error(), "refused") {
		t.Errorf("UDP to b under a drop ACL: %v, want no answer", err)
	}
	nbctl("acl-del", "ls1")
	nstest.Run(t, "ovn-nbctl", "--db="+nb, "--wait=hv", "--timeout=30", "sync")
	if out, err := a.NS.Output("sh", "-c", "echo x | busybox nc -w 3 "+b.IP+" 8081"); err != nil {
		t.Errorf("TCP to b once the ACLs are gone: %v %q", err, out)
	}
	listener.Wait()

	// NAT on the router, made a gateway router on this chassis: host a
	// gets the floating address 198.18.1.100 (dnat_and_snat): b reaches
	// a there, and a's traffic leaves as it (the tracker shows the
	// translation).
	nbctl("set", "logical_router", "lr0", "options:chassis=chassis-e2e")
	nbctl("lr-nat-add", "lr0", "dnat_and_snat", "198.18.1.100", a.IP)
	nstest.Run(t, "ovn-nbctl", "--db="+nb, "--wait=hv", "--timeout=30", "sync")
	nstest.Ping(t, b.NS, "198.18.1.100")
	nstest.Ping(t, a.NS, b.IP)
	if ct := nstest.Run(t, "ovs-appctl", "dpctl/dump-conntrack"); !strings.Contains(ct, "icmp,orig=(src="+a.IP+",dst="+b.IP) ||
		!strings.Contains(ct, "reply=(src="+b.IP+",dst=198.18.1.100") {
		t.Errorf("no SNAT of a's ping to 198.18.1.100 in the tracker:\n%s", ct)
	}

	log, err := os.ReadFile(filepath.Join(dir, "ovn-controller.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(log), "\n") {
		if strings.Contains(l, "OpenFlow error") || strings.Contains(l, "OFPT_ERROR") || strings.Contains(l, "refused to allocate Geneve") {
			t.Errorf("ovn-controller saw an OpenFlow error: %s", l)
		}
	}
	t.Logf("OVN chassis: %d flows on br-int, both ports ovn-installed, ping both ways across a logical router, DHCP, kill -9 and back, TCP through a load balancer, stateful ACLs (allow-related, reject, drop), router NAT", strings.Count(flows, "\n"))
}

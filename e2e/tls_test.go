package e2e

import (
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

// ovsPKI is a PKI made by ovs-pki: a controller CA and a switch CA, and
// a certificate of each kind signed by them.
type ovsPKI struct {
	dir                     string
	ctlKey, ctlCert, ctlCA  string // the controller's pair; controllerca/cacert.pem
	swKey, swCert, switchCA string // the switch's pair; switchca/cacert.pem
}

// newOVSPKI runs ovs-pki init and req+sign for a controller and a switch.
func newOVSPKI(t *testing.T) *ovsPKI {
	t.Helper()
	nstest.RequireTool(t, "ovs-pki") // openvswitch-common
	work := t.TempDir()
	p := &ovsPKI{dir: filepath.Join(work, "pki")}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("ovs-pki", append([]string{"--dir=" + p.dir, "--log=" + filepath.Join(work, "pki.log")}, args...)...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ovs-pki %v: %v\n%s", args, err, out)
		}
	}
	run("init")
	run("req+sign", "ctl", "controller")
	run("req+sign", "sw", "switch")
	p.ctlKey, p.ctlCert = filepath.Join(work, "ctl-privkey.pem"), filepath.Join(work, "ctl-cert.pem")
	p.swKey, p.swCert = filepath.Join(work, "sw-privkey.pem"), filepath.Join(work, "sw-cert.pem")
	p.ctlCA, p.switchCA = filepath.Join(p.dir, "controllerca", "cacert.pem"), filepath.Join(p.dir, "switchca", "cacert.pem")
	return p
}

// startTestController runs ovs-testcontroller (a learning switch) over
// TLS on a free loopback port and returns its address.
func startTestController(t *testing.T, key, cert, peerCA string) string {
	t.Helper()
	nstest.RequireTool(t, "ovs-testcontroller") // openvswitch-testcontroller
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "tc.log")
	cmd := exec.Command("ovs-testcontroller", "-O", "OpenFlow13", "-vconsole:off", "-vfile:info", "--log-file="+logPath,
		"--unixctl="+filepath.Join(dir, "tc.ctl"), "-p", key, "-c", cert, "-C", peerCA, "pssl:"+port+":127.0.0.1")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("ovs-testcontroller log:\n%s", out)
		}
	})
	nstest.WaitFor(t, 20*time.Second, "ovs-testcontroller listening on "+addr, func() bool {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return addr
}

// controllerLine returns get-controller's line for target.
func controllerLine(d *daemon, target string) string {
	for _, l := range strings.Split(d.vsctl("get-controller", "br0"), "\n") {
		if strings.HasPrefix(l, target+" ") {
			return l
		}
	}
	return ""
}

// TestTLSController: with set-ssl's files (made by ovs-pki), the switch
// connects to ovs-testcontroller over TLS and is programmed by it (a
// learning switch: ping between two namespaces goes through its flows);
// bad files are refused without a change; a controller whose certificate
// another CA signed is refused, and the refusal shows in show,
// get-controller and a metric; a pssl: target serves ovs-ofctl over TLS.
func TestTLSController(t *testing.T) {
	nstest.RequireRoot(t) // before the slow key generation
	pki := newOVSPKI(t)
	other := newOVSPKI(t) // another CA altogether
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	d.start()
	d.vsctl("add-br", "br0")
	d.vsctl("add-port", "br0", a.Port)
	d.vsctl("add-port", "br0", b.Port)
	d.vsctl("set-fail-mode", "br0", "secure")

	good := "ssl:" + startTestController(t, pki.ctlKey, pki.ctlCert, pki.switchCA)
	d.vsctl("set-controller", "br0", good)
	// No files yet: the target says why it does not connect.
	nstest.WaitFor(t, 10*time.Second, "the missing-files error", func() bool {
		return strings.Contains(controllerLine(d, good), "need private key")
	})

	// Bad files are refused and change nothing.
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{pki.swKey, pki.swCert, "/nonexistent/cacert.pem"}, "/nonexistent/cacert.pem"},
		{[]string{garbage, pki.swCert, pki.ctlCA}, garbage},
		{[]string{pki.ctlKey, pki.swCert, pki.ctlCA}, "private key does not match public key"},
		{[]string{pki.swKey, pki.swCert, garbage}, "no certificate in " + garbage},
	} {
		_, errOut, code := d.vsctlRaw(append([]string{"set-ssl"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("set-ssl %v: exit %d, stderr %q; want exit 1 saying %q", tc.args, code, errOut, tc.want)
		}
	}
	if got := d.vsctl("get-ssl"); got != "" {
		t.Fatalf("get-ssl after refused set-ssl: %q", got)
	}

	// Relative paths are taken from vsctl's working directory.
	rel, err := filepath.Rel(mustGetwd(t), pki.swKey)
	if err != nil {
		t.Fatal(err)
	}
	d.vsctl("set-ssl", rel, pki.swCert, pki.ctlCA)
	if got := d.vsctl("get-ssl"); !strings.Contains(got, "Private key: "+pki.swKey+"\n") || !strings.Contains(got, "CA Certificate: "+pki.ctlCA) {
		t.Fatalf("get-ssl: %q", got)
	}
	nstest.WaitFor(t, 20*time.Second, "the TLS connection to ovs-testcontroller", func() bool {
		return strings.Contains(controllerLine(d, good), "(active")
	})
	// The controller programs the switch: learnt flows carry the pings.
	pingThrough(t, a, b)
	dump := d.vsctl("dump-flows", "br0")
	if !strings.Contains(dump, "actions=CONTROLLER") || !strings.Contains(dump, "output:") {
		t.Fatalf("ovs-testcontroller's flows are missing:\n%s", dump)
	}
	if n := tlsFailures(t, d, good); n != 0 {
		t.Fatalf("%v handshake failures with the good controller", n)
	}

	// A controller signed by another CA: the switch refuses it.
	evil := "ssl:" + startTestController(t, other.ctlKey, other.ctlCert, pki.switchCA)
	d.vsctl("set-controller", "br0", evil)
	nstest.WaitFor(t, 20*time.Second, "the refused handshake counted", func() bool {
		return tlsFailures(t, d, evil) >= 1
	})
	show := d.vsctl("show")
	if !strings.Contains(show, "Controller \""+evil+"\"\n            is_connected: false") ||
		!strings.Contains(show, "last_error: TLS handshake with") || !strings.Contains(show, "certificate") ||
		!strings.Contains(show, "tls_handshake_failures: ") {
		t.Fatalf("show does not report the refused certificate:\n%s", show)
	}
	if l := controllerLine(d, evil); strings.Contains(l, "(active") || !strings.Contains(l, "TLS handshake") {
		t.Fatalf("get-controller: %q", l)
	}

	// pssl: a real TLS client (ovs-ofctl) with a certificate of the
	// switch's controller CA is served; one from another CA is not.
	ps := freeAddr(t)
	_, port, _ := net.SplitHostPort(ps)
	pssl := "pssl:" + port + ":127.0.0.1"
	d.vsctl("set-controller", "br0", pssl)
	ofctl := func(key, cert string) (string, error) {
		out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "-p", key, "-c", cert, "-C", pki.switchCA,
			"--timeout=10", "dump-flows", "ssl:"+ps).CombinedOutput()
		return string(out), err
	}
	var out string
	nstest.WaitFor(t, 20*time.Second, "ovs-ofctl over pssl:", func() bool {
		out, err = ofctl(pki.ctlKey, pki.ctlCert)
		return err == nil
	})
	if !strings.Contains(out, "actions=CONTROLLER") {
		t.Fatalf("ovs-ofctl dump-flows over pssl: %s", out)
	}
	if out, err := ofctl(other.ctlKey, other.ctlCert); err == nil {
		t.Fatalf("ovs-ofctl with a certificate of another CA was served:\n%s", out)
	}
	nstest.WaitFor(t, 10*time.Second, "the refused pssl: peer counted", func() bool {
		return tlsFailures(t, d, pssl) >= 1
	})

	// The files are part of the configuration: after a crash and restart
	// the pssl: target serves TLS again.
	d.kill9()
	d.start()
	nstest.WaitFor(t, 20*time.Second, "ovs-ofctl over pssl: after a restart", func() bool {
		_, err = ofctl(pki.ctlKey, pki.ctlCert)
		return err == nil
	})

	// del-ssl: the files are forgotten and TLS targets stop working.
	d.vsctl("del-ssl")
	if got := d.vsctl("get-ssl"); got != "" {
		t.Fatalf("get-ssl after del-ssl: %q", got)
	}
	nstest.WaitFor(t, 10*time.Second, "the pssl: target without files", func() bool {
		return strings.Contains(controllerLine(d, pssl), "need private key")
	})
}

// tlsFailures reads vswitch_controller_tls_handshake_failures_total of
// br0's target.
func tlsFailures(t *testing.T, d *daemon, target string) float64 {
	t.Helper()
	v, ok := d.scrape()[`vswitch_controller_tls_handshake_failures_total{bridge="br0",target="`+target+`"}`]
	if !ok {
		t.Fatalf("no vswitch_controller_tls_handshake_failures_total series for %s", target)
	}
	return v
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// pingThrough pings b from a until a round is fully answered: a learning
// controller forwards the first packets as packet-ins while it installs
// its flows.
func pingThrough(t *testing.T, a, b *nstest.Host) {
	t.Helper()
	var out string
	nstest.WaitFor(t, 20*time.Second, "pings through the controller's flows", func() bool {
		var err error
		out, err = a.NS.Output("ping", "-c", "3", "-i", "0.2", "-W", "2", b.IP)
		return err == nil && strings.Contains(out, " 0% packet loss")
	})
	nstest.Ping(t, a.NS, b.IP)
}

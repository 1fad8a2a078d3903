package e2e

import (
	"bytes"
	"errors"
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
)

// TestAcceptSurvivesFDExhaustion reproduces descriptor exhaustion: the daemon's
// descriptors limited to 64, 100 OpenFlow connections held, vsctl tried
// meanwhile (its accept fails with EMFILE), then everything released:
// vsctl must work again within a bound, and the log must say what
// happened.
func TestAcceptSurvivesFDExhaustion(t *testing.T) {
	d := newDaemon(t)
	d.start()
	ofAddr := freeAddr(t)
	_, port, _ := net.SplitHostPort(ofAddr)
	d.vsctl("add-br", "br0")
	d.vsctl("set-controller", "br0", "ptcp:"+port+":127.0.0.1")
	nstest.WaitFor(t, 10*time.Second, "the OpenFlow listener", func() bool {
		c, err := net.Dial("tcp", ofAddr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	pid := strconv.Itoa(d.cmd.Process.Pid)
	if out, err := exec.Command("prlimit", "--pid", pid, "--nofile=64:64").CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v: %s", err, out)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			exec.Command("prlimit", "--pid", pid, "--nofile=65536:65536").Run()
		}
	}
	t.Cleanup(restore)

	var held []net.Conn
	release := func() {
		for _, c := range held {
			c.Close()
		}
		held = nil
	}
	t.Cleanup(release)
	for range 100 {
		c, err := net.Dial("tcp", ofAddr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(held), err)
		}
		held = append(held, c)
	}
	nstest.WaitFor(t, 20*time.Second, "the OpenFlow accept loop to report EMFILE", func() bool {
		return strings.Contains(d.log.String(), "too many open files")
	})
	// A vsctl now finds the management accept out of descriptors too.
	cmd := exec.Command(d.vsctlBin, "--state-dir", d.stateDir, "--timeout", "1s", "version")
	cmd.Run()
	nstest.WaitFor(t, 10*time.Second, "the management accept loop to report EMFILE", func() bool {
		return strings.Contains(d.log.String(), "mgmt ") && strings.Contains(d.log.String(), "accept:")
	})

	release()
	start := time.Now()
	nstest.WaitFor(t, 15*time.Second, "vsctl answering again", func() bool {
		cmd := exec.Command(d.vsctlBin, "--state-dir", d.stateDir, "--timeout", "2s", "version")
		return cmd.Run() == nil
	})
	t.Logf("vsctl answered %v after the connections were released", time.Since(start).Round(time.Millisecond))
	restore()
	d.vsctl("show")
	if !strings.Contains(d.log.String(), "accepting connections again") {
		t.Fatalf("no recovery line in the log")
	}
	// The OpenFlow listener serves again too.
	c, err := net.DialTimeout("tcp", ofAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 8)
	if _, err := c.Read(hdr); err != nil || hdr[1] != 0 { // OFPT_HELLO
		t.Fatalf("no HELLO from the listener after recovery: %v %x", err, hdr)
	}
	c.Close()
}

// startFails runs vswitchd on dir expecting it to refuse to start; it
// returns the output.
func startFails(t *testing.T, d *daemon, dir string) string {
	t.Helper()
	cmd := exec.Command(d.bin, "--state-dir", dir, "--metrics-addr", "", "--default-bridge", "")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("vswitchd on %s: %v, want a refusal\n%s", dir, err, out.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Signal(syscall.SIGTERM)
		<-done
		t.Fatalf("vswitchd started on %s, want a refusal\n%s", dir, out.String())
	}
	return out.String()
}

// TestStateFileSymlinksRefused: each state file planted as a symlink to a
// root-owned file makes the daemon refuse to start, and the target is
// untouched.
func TestStateFileSymlinksRefused(t *testing.T) {
	d := newDaemon(t)
	for _, name := range []string{"config.json", "config.lock", "vswitchd.pid"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "precious")
			if err := os.WriteFile(victim, []byte("do not truncate\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			out := startFails(t, d, dir)
			if !strings.Contains(out, "symlink") {
				t.Errorf("refusal does not mention the symlink:\n%s", out)
			}
			if b, _ := os.ReadFile(victim); string(b) != "do not truncate\n" {
				t.Errorf("symlink target changed: %q", b)
			}
		})
	}
}

// TestStateDirPermissionsRefused: a group- or world-writable state
// directory, or one owned by another user, is refused with the fix.
func TestStateDirPermissionsRefused(t *testing.T) {
	d := newDaemon(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	out := startFails(t, d, dir)
	if !strings.Contains(out, dir) || !strings.Contains(out, "0777") || !strings.Contains(out, "chmod 700") {
		t.Fatalf("refusal does not name the directory, its mode and the fix:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		t.Fatal("config.json written in a refused directory")
	}
	other := t.TempDir()
	os.Chown(other, 65534, 65534)
	out = startFails(t, d, other)
	if !strings.Contains(out, "owned by uid 65534") {
		t.Fatalf("refusal does not name the owner:\n%s", out)
	}
	// A missing directory is created 0700.
	fresh := filepath.Join(t.TempDir(), "new-state")
	d.stateDir = fresh
	d.start()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("new state directory: %v %v, want mode 0700", fi.Mode(), err)
	}
}

// TestModesUnderUmask000: with umask 000 the sockets and state files still
// get private modes (pid file 0644, as is conventional).
func TestModesUnderUmask000(t *testing.T) {
	d := newDaemon(t)
	old := syscall.Umask(0)
	d.start() // the child inherits the umask
	syscall.Umask(old)
	d.vsctl("add-br", "br0")
	modes := map[string]os.FileMode{
		"vswitchd.sock": 0o600, "br0.mgmt": 0o600, "config.json": 0o600, "config.lock": 0o600, "vswitchd.pid": 0o644,
	}
	// config.json is written in the background after the change applies
	// (the database holds the change), so it may follow br0.mgmt.
	nstest.WaitFor(t, 10*time.Second, "the management socket and the config snapshot", func() bool {
		for name := range modes {
			if _, err := os.Lstat(filepath.Join(d.stateDir, name)); err != nil {
				return false
			}
		}
		return true
	})
	for name, want := range modes {
		fi, err := os.Lstat(filepath.Join(d.stateDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v with umask 000, want %v", name, fi.Mode(), want)
		}
	}
	if fi, _ := os.Stat(d.stateDir); fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("state directory mode %v", fi.Mode())
	}
}

// TestMgmtRequestTooLong: one 100 MB request line costs the daemon at most
// the 1 MiB limit: it answers with an error, closes, counts it, and keeps
// serving.
func TestMgmtRequestTooLong(t *testing.T) {
	d := newDaemon(t)
	d.start()
	c, err := net.Dial("unix", filepath.Join(d.stateDir, "vswitchd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 100 << 20 / len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4096)
	n, _ := c.Read(buf)
	if !strings.Contains(string(buf[:n]), "longer than 1048576 bytes") {
		t.Fatalf("response %q", buf[:n])
	}
	d.vsctl("version")
	m := d.scrape()
	if m["vswitch_mgmt_requests_too_long_total"] != 1 {
		t.Fatalf("vswitch_mgmt_requests_too_long_total = %v", m["vswitch_mgmt_requests_too_long_total"])
	}
}

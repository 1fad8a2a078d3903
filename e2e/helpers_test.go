// Package e2e tests the built binaries together: vswitchd started as a
// process on a temporary state directory, vsctl as a user types it, veth
// pairs into network namespaces, ping, and the Prometheus endpoint.
package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds vswitchd and vsctl once per test binary, unless
// VSWITCH_E2E_BIN names a directory holding them already (make soak uses
// the ones make build made).
func binaries(t *testing.T) (vswitchd, vsctl string) {
	t.Helper()
	if dir := os.Getenv("VSWITCH_E2E_BIN"); dir != "" {
		return filepath.Join(dir, "vswitchd"), filepath.Join(dir, "vsctl")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "vswitch-e2e-bin-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "github.com/vswitch-go/vswitch/cmd/vswitchd", "github.com/vswitch-go/vswitch/cmd/vsctl")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "vswitchd"), filepath.Join(binDir, "vsctl")
}

// TestMain removes the built binaries.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// daemon is a vswitchd process under test.
type daemon struct {
	t        *testing.T
	bin      string
	vsctlBin string
	stateDir string
	metrics  string
	cmd      *exec.Cmd
	log      *syncBuffer
	done     chan error
	// netns, if set, is the network namespace the daemon runs in (a
	// "host" of a multi-host test); vsctl reaches it through the state
	// directory's socket, which namespaces do not separate.
	netns string
}

// syncBuffer collects the daemon's log for failure messages.
type syncBuffer = nstest.SyncBuffer

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newDaemon prepares (does not start) a daemon on a fresh state directory.
func newDaemon(t *testing.T) *daemon {
	nstest.RequireRoot(t)
	vd, vc := binaries(t)
	d := &daemon{t: t, bin: vd, vsctlBin: vc, stateDir: t.TempDir(), metrics: freeAddr(t)}
	t.Cleanup(func() {
		if d.cmd != nil && d.cmd.ProcessState == nil {
			// Gracefully, so that it removes what it created (the
			// bridges' own interfaces persist across a kill).
			d.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.done:
			case <-time.After(10 * time.Second):
				d.cmd.Process.Kill()
				<-d.done
			}
		}
		if t.Failed() && d.log != nil {
			t.Logf("vswitchd log:\n%s", d.log.String())
		}
	})
	return d
}

// start runs vswitchd and waits until its management socket answers.
func (d *daemon) start(extra ...string) {
	d.t.Helper()
	args := append([]string{"--state-dir", d.stateDir, "--metrics-addr", d.metrics, "--default-bridge", "", "--log-level", "debug"}, extra...)
	d.cmd = exec.Command(d.bin, args...)
	if d.netns != "" { // ip netns exec execs the daemon: same PID, signals reach it
		d.cmd = exec.Command("ip", append([]string{"netns", "exec", d.netns, d.bin}, args...)...)
	}
	if d.log == nil {
		d.log = &syncBuffer{}
	}
	fmt.Fprintf(d.log, "---- start %v\n", args)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, _, code := d.vsctlRaw("version"); code == 0 {
			return
		}
		select {
		case err := <-d.done:
			d.done <- err
			d.t.Fatalf("vswitchd exited at start: %v\n%s", err, d.log.String())
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("vswitchd not answering after 20 s\n%s", d.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill9 kills the daemon without warning.
func (d *daemon) kill9() {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// stop sends SIGTERM and returns the exit error (nil for status 0).
func (d *daemon) stop() error {
	d.t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.done:
		return err
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		return errors.New("vswitchd did not stop within 20 s of SIGTERM")
	}
}

// vsctlRaw runs vsctl against the daemon and returns its outputs and exit status.
func (d *daemon) vsctlRaw(args ...string) (stdout, stderr string, code int) {
	cmd := exec.Command(d.vsctlBin, append([]string{"--state-dir", d.stateDir, "--timeout", "20s"}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else {
			code = -1
			e.WriteString(err.Error())
		}
	}
	return o.String(), e.String(), code
}

// vsctl runs vsctl and fails the test unless it succeeds.
func (d *daemon) vsctl(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.vsctlRaw(args...)
	if code != 0 {
		d.t.Fatalf("vsctl %s: exit %d: %s%s", strings.Join(args, " "), code, errOut, out)
	}
	return out
}

// scrape fetches /metrics and returns sample name+labels → value. A
// daemon in a namespace of its own listens on that namespace's loopback:
// the connection is opened there (nstest.Netns.Do), the request sent on it.
func (d *daemon) scrape() map[string]float64 {
	d.t.Helper()
	var resp *http.Response
	var err error
	if d.netns == "" {
		resp, err = http.Get("http://" + d.metrics + "/metrics")
	} else {
		var c net.Conn
		if err = (&nstest.Netns{Name: d.netns}).Do(func() (err error) {
			c, err = net.DialTimeout("tcp", d.metrics, 10*time.Second)
			return err
		}); err == nil {
			defer c.Close()
			c.SetDeadline(time.Now().Add(30 * time.Second))
			fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", d.metrics)
			resp, err = http.ReadResponse(bufio.NewReader(c), nil)
		}
	}
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		d.t.Fatalf("/metrics: %s", resp.Status)
	}
	return parseExposition(d.t, resp.Body)
}

// parseExposition reads the Prometheus text format's samples.
func parseExposition(t *testing.T, r io.Reader) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad exposition line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad value in %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// field returns the value of "name=" in a dump line (n_packets=, ...).
func field(line, name string) (uint64, bool) {
	i := strings.Index(line, name+"=")
	if i < 0 {
		return 0, false
	}
	rest := line[i+len(name)+1:]
	end := strings.IndexAny(rest, ", ")
	if end >= 0 {
		rest = rest[:end]
	}
	v, err := strconv.ParseUint(rest, 10, 64)
	return v, err == nil
}

// flowLine returns the dump-flows line containing every one of subs.
func flowLine(t *testing.T, dump string, subs ...string) string {
	t.Helper()
next:
	for _, l := range strings.Split(dump, "\n") {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		return l
	}
	t.Fatalf("no flow with %q in:\n%s", subs, dump)
	return ""
}

package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// ovsTool runs one of Open vSwitch's programs (ovs-appctl, ovs-ofctl) with
// OVS_RUNDIR set to run, and returns its stdout, stderr and exit status.
func ovsTool(t *testing.T, run, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "OVS_RUNDIR="+run)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v", name, err)
		}
		code = ee.ExitCode()
	}
	return o.String(), e.String(), code
}

// mustOVSTool is ovsTool for a command that must succeed.
func mustOVSTool(t *testing.T, run, name string, args ...string) string {
	t.Helper()
	out, errOut, code := ovsTool(t, run, name, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d: %s%s", name, strings.Join(args, " "), code, errOut, out)
	}
	return out
}

// readPidfile waits (bounded) for the pid file and returns its pid.
func readPidfile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	nstest.WaitFor(t, 20*time.Second, "pid file "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && pid > 0
	})
	return pid
}

// alive says whether process pid runs (a zombie no parent reaped yet,
// as the detached daemon may be under a container's init, does not).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z")
}

// TestAppctl drives the daemon with the real ovs-appctl and ovs-ofctl, by
// the names Open vSwitch's tools use: the default target ovs-vswitchd
// (found through $OVS_RUNDIR/ovs-vswitchd.pid), the control socket's
// path, and a bridge's name for ovs-ofctl. exit stops the daemon cleanly.
func TestAppctl(t *testing.T) {
	nstest.RequireTool(t, "ovs-appctl", "ovs-ofctl")
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	run := filepath.Join(t.TempDir(), "run")
	t.Setenv("OVS_RUNDIR", run) // the daemon inherits it
	d.start("--pidfile")
	pid := readPidfile(t, filepath.Join(run, "ovs-vswitchd.pid"))
	if pid != d.cmd.Process.Pid {
		t.Fatalf("pid file holds %d, the daemon is %d", pid, d.cmd.Process.Pid)
	}
	ctl := filepath.Join(run, "ovs-vswitchd."+strconv.Itoa(pid)+".ctl")

	br := nstest.Name("brap")
	d.vsctl("add-br", br)
	d.vsctl("add-port", br, a.Port, "--", "type=afpacket")
	d.vsctl("add-port", br, b.Port, "--", "type=afpacket")
	nstest.Ping(t, a.NS, b.IP)

	if got := mustOVSTool(t, run, "ovs-appctl", "version"); !strings.HasPrefix(got, "ovs-vswitchd (vswitch-go) ") {
		t.Errorf("version: %q", got)
	}
	list := mustOVSTool(t, run, "ovs-appctl", "-t", ctl, "list-commands")
	for _, c := range []string{"exit", "dpif/show", "fdb/show", "vlog/set", "dpif-netdev/pmd-stats-show", "ofproto/trace"} {
		if !strings.Contains(list, "  "+c+" ") {
			t.Errorf("list-commands lacks %s:\n%s", c, list)
		}
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "dpif-netdev/pmd-stats-show"); !strings.Contains(got, "packets received: ") {
		t.Errorf("pmd-stats-show:\n%s", got)
	}
	// NORMAL learned both hosts' addresses from the ping.
	fdb := mustOVSTool(t, run, "ovs-appctl", "fdb/show", br)
	for _, mac := range []string{a.MAC, b.MAC} {
		if !strings.Contains(fdb, mac) {
			t.Errorf("fdb/show lacks %s:\n%s", mac, fdb)
		}
	}
	// The bridge's datapath flows by its name; revalidator/purge drops
	// them, so the flows one more ping makes start from zero.
	maxPackets := func() int {
		n := 0
		for _, m := range regexp.MustCompile(`packets:(\d+)`).FindAllStringSubmatch(mustOVSTool(t, run, "ovs-appctl", "dpif/dump-flows", br), -1) {
			v, _ := strconv.Atoi(m[1])
			n = max(n, v)
		}
		return n
	}
	nstest.Ping(t, a.NS, b.IP) // five more echoes through the same flows
	if n := maxPackets(); n < 5 {
		t.Errorf("dpif/dump-flows %s: the busiest flow matched %d packets after five pings", br, n)
	}
	mustOVSTool(t, run, "ovs-appctl", "revalidator/purge")
	if _, err := a.NS.Output("ping", "-c", "1", "-W", "2", b.IP); err != nil {
		t.Fatalf("ping after revalidator/purge: %v", err)
	}
	if n := maxPackets(); n > 2 {
		t.Errorf("dpif/dump-flows after revalidator/purge and one ping: a flow matched %d packets", n)
	}
	mustOVSTool(t, run, "ovs-appctl", "dpctl/del-flows")
	if got := mustOVSTool(t, run, "ovs-appctl", "ofproto/list"); got != br+"\n" {
		t.Errorf("ofproto/list: %q", got)
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "dpif/dump-dps"); got != "netdev@ovs-netdev\n" {
		t.Errorf("dpif/dump-dps: %q", got)
	}
	if _, errOut, code := ovsTool(t, run, "ovs-appctl", "dpif/dump-flows", "nosuchbr"); code == 0 || !strings.Contains(errOut, "no such bridge") {
		t.Errorf("dpif/dump-flows nosuchbr: exit %d, %q", code, errOut)
	}
	show := mustOVSTool(t, run, "ovs-appctl", "dpif/show")
	for _, want := range []string{"netdev@ovs-netdev: hit:", "\n  " + br + ":\n", "\n    " + a.Port + " 1/", "\n    " + b.Port + " 2/", ": (afpacket)\n"} {
		if !strings.Contains(show, want) {
			t.Errorf("dpif/show lacks %q:\n%s", want, show)
		}
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "dpif/show-dp-features", br); !strings.Contains(got, "Conntrack clear: Yes\n") ||
		!strings.Contains(got, "Check pkt length action: No\n") || !strings.Contains(got, "Max VLAN headers: 2\n") {
		t.Errorf("dpif/show-dp-features:\n%s", got)
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "ofproto/trace", br, "in_port=1,dl_dst="+b.MAC); !strings.Contains(got, "Datapath actions: ") {
		t.Errorf("ofproto/trace:\n%s", got)
	}
	// The daemon logs to stderr (console) at debug; vlog/set changes it.
	mustOVSTool(t, run, "ovs-appctl", "vlog/set", "console:warn")
	if got := mustOVSTool(t, run, "ovs-appctl", "vlog/list"); !strings.Contains(got, " WARN ") {
		t.Errorf("vlog/list after vlog/set console:warn:\n%s", got)
	}
	if got, errOut, code := ovsTool(t, run, "ovs-appctl", "no/such-command"); code != 2 || !strings.Contains(errOut, `"no/such-command" is not a valid command`) {
		t.Errorf("unknown command: exit %d, %q %q", code, got, errOut)
	}
	// ovs-ofctl finds the bridge's OpenFlow socket by the bridge's name.
	// The switch speaks OpenFlow 1.3, not ovs-ofctl's default 1.0.
	if got := mustOVSTool(t, run, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", br); !strings.Contains(got, "actions=NORMAL") {
		t.Errorf("ovs-ofctl dump-flows %s:\n%s", br, got)
	}

	// So does vsctl, whose flow commands look in the state directory first.
	if got := d.vsctl("dump-flows", br); !strings.Contains(got, "actions=NORMAL") {
		t.Errorf("vsctl dump-flows %s:\n%s", br, got)
	}

	// A stateful pipeline: the connection tracker through dpctl/.
	mustOVSTool(t, run, "ovs-ofctl", "-O", "OpenFlow13", "del-flows", br)
	for _, f := range []string{"priority=100,arp,actions=NORMAL", "priority=10,ip,ct_state=-trk,actions=ct(table=1,zone=3)",
		"table=1,ip,ct_state=+trk+new,actions=ct(commit,zone=3),NORMAL", "table=1,ip,ct_state=+trk+est,actions=NORMAL"} {
		mustOVSTool(t, run, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", br, f)
	}
	// ofproto/trace follows ct(table=1)'s tracked copy, as trk|new unless
	// --ct-next says otherwise (as Open vSwitch's does).
	flowArg := "in_port=1,icmp,nw_src=" + a.IP + ",nw_dst=" + b.IP + ",dl_src=" + a.MAC + ",dl_dst=" + b.MAC
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{flowArg}, "recirc(0x1) - resume conntrack with default ct_state=trk|new (use --ct-next to customize)\n"},
		{[]string{"--ct-next", "trk,est", flowArg}, "recirc(0x1) - resume conntrack with ct_state=est|trk\n"},
	} {
		got := mustOVSTool(t, run, "ovs-appctl", append([]string{"ofproto/trace", br}, c.args...)...)
		if i := strings.Index(got, c.want); i < 0 || !strings.Contains(got[i:], "Datapath actions: ") {
			t.Errorf("ofproto/trace %q lacks %q and the resumed walk:\n%s", c.args, c.want, got)
		}
	}
	if _, errOut, code := ovsTool(t, run, "ovs-appctl", "ofproto/trace", br, flowArg, "--ct-next", "trk,new,est"); code == 0 || !strings.Contains(errOut, "mutually exclusive") {
		t.Errorf("ofproto/trace --ct-next trk,new,est: exit %d, %q", code, errOut)
	}
	nstest.Ping(t, a.NS, b.IP)
	ct := mustOVSTool(t, run, "ovs-appctl", "dpctl/dump-conntrack", "zone=3")
	if want := "icmp,orig=(src=" + a.IP + ",dst=" + b.IP + ","; !strings.Contains(ct, want) || !strings.Contains(ct, ",type=0,code=0),zone=3\n") {
		t.Errorf("dpctl/dump-conntrack lacks %q in zone 3:\n%s", want, ct)
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-stats-show"); !strings.Contains(got, "Connections Stats:\n    Total: 1\n  ICMP: 1\n") {
		t.Errorf("dpctl/ct-stats-show:\n%s", got)
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-set-maxconns", "1000"); got != "setting maxconns successful" {
		t.Errorf("ct-set-maxconns: %q", got)
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-maxconns"); got != "1000\n" {
		t.Errorf("ct-get-maxconns: %q", got)
	}
	// other_config:ct-max-conns sets it too, from the configuration.
	d.vsctl("set", "Open_vSwitch", ".", "other_config:ct-max-conns=2000")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-maxconns"); got != "2000\n" {
		t.Errorf("ct-get-maxconns after other_config:ct-max-conns=2000: %q", got)
	}
	if _, errOut, code := d.vsctlRaw("set", "Open_vSwitch", ".", "other_config:ct-max-conns=-1"); code == 0 || !strings.Contains(errOut, "ct-max-conns") {
		t.Errorf("ct-max-conns=-1: exit %d, %s", code, errOut)
	}
	// Per-zone limits: zone 3 holds its one connection.
	mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-set-limits", "default=10", "zone=3,limit=5")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-limits"); got != "default limit=10\nzone=3,limit=5,count=1\n" {
		t.Errorf("ct-get-limits: %q", got)
	}
	mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-del-limits", "zone=3")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-limits", "zone=3,4"); got != "default limit=10\nzone=3,limit=10,count=1\nzone=4,limit=10,count=0\n" {
		t.Errorf("ct-get-limits zone=3,4 after deleting zone 3's: %q", got)
	}
	if _, errOut, code := ovsTool(t, run, "ovs-appctl", "dpctl/ct-set-limits", "zone=3,limit=x"); code == 0 || !strings.Contains(errOut, "invalid limit") {
		t.Errorf("ct-set-limits zone=3,limit=x: exit %d, %q", code, errOut)
	}
	// Flush by tuple: another source leaves it, its own removes it.
	mustOVSTool(t, run, "ovs-appctl", "dpctl/flush-conntrack", "zone=3", "ct_nw_src=198.18.255.1")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-nconns"); got != "1\n" {
		t.Errorf("ct-get-nconns after flushing another source: %q", got)
	}
	mustOVSTool(t, run, "ovs-appctl", "dpctl/flush-conntrack", "zone=3", "ct_nw_src="+a.IP)
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-nconns"); got != "0\n" {
		t.Errorf("ct-get-nconns after flushing by tuple: %q", got)
	}
	nstest.Ping(t, a.NS, b.IP)
	mustOVSTool(t, run, "ovs-appctl", "dpctl/flush-conntrack", "zone=3")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-nconns"); got != "0\n" {
		t.Errorf("ct-get-nconns after flushing zone 3: %q", got)
	}
	// Fragment reassembly in front of the tracker.
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ipf-set-min-frag", "v4", "1000"); got != "setting minimum fragment size successful" {
		t.Errorf("ipf-set-min-frag: %q", got)
	}
	if _, errOut, code := ovsTool(t, run, "ovs-appctl", "dpctl/ipf-set-min-frag", "v4", "100"); code == 0 || !strings.Contains(errOut, "too small") {
		t.Errorf("ipf-set-min-frag v4 100: exit %d, %q", code, errOut)
	}
	mustOVSTool(t, run, "ovs-appctl", "dpctl/ipf-set-disabled", "v6")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ipf-get-status"); !strings.Contains(got, "        v4 enabled: 1\n        v6 enabled: 0\n") ||
		!strings.Contains(got, "        min v4 frag size: 1000\n") || !strings.Contains(got, "        v6 frags purged: 0\n") {
		t.Errorf("ipf-get-status:\n%s", got)
	}
	if _, errOut, code := ovsTool(t, run, "ovs-appctl", "dpctl/dump-conntrack", "zone=x"); code == 0 || !strings.Contains(errOut, "invalid zone") {
		t.Errorf("dump-conntrack zone=x: exit %d, %q", code, errOut)
	}

	if out, errOut, code := ovsTool(t, run, "ovs-appctl", "exit"); code != 0 {
		t.Fatalf("exit: exit %d: %s%s", code, errOut, out)
	}
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("daemon after ovs-appctl exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("daemon still running 30 s after ovs-appctl exit")
	}
	for _, p := range []string{ctl, filepath.Join(run, "ovs-vswitchd.pid"), filepath.Join(run, br+".mgmt")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left behind after exit", p)
		}
	}
}

// TestDetach: --detach returns once the daemon serves, leaving it running
// in the background under the pid its pid file holds; a second one on
// the same pid file fails without starting; ovs-appctl exit stops it.
func TestDetach(t *testing.T) {
	nstest.RequireRoot(t)
	nstest.RequireTool(t, "ovs-appctl")
	vd, _ := binaries(t)
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	pidfile := filepath.Join(run, "ovs-vswitchd.pid")
	args := func(state string) []string {
		return []string{"--state-dir", filepath.Join(dir, state), "--metrics-addr", "", "--default-bridge", "",
			"--pidfile", "--detach", "-vconsole:emer", "-vfile:info", "--log-file=" + filepath.Join(dir, state+".log")}
	}
	start := func(state string) (string, error) {
		cmd := exec.Command(vd, args(state)...)
		cmd.Env = append(os.Environ(), "OVS_RUNDIR="+run)
		cmd.Dir = dir
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("vswitchd --detach did not return within 30 s")
		}
		return string(out), err
	}
	if out, err := start("state"); err != nil {
		t.Fatalf("vswitchd --detach: %v\n%s", err, out)
	}
	// Returned means ready: no waiting for the pid file.
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatalf("no pid file when --detach returned: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSuffix(string(data), "\n"))
	if err != nil {
		t.Fatalf("pid file %q", data)
	}
	t.Cleanup(func() {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGTERM)
			nstest.WaitFor(t, 20*time.Second, "the detached daemon to stop", func() bool { return !alive(pid) })
		}
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "state.log.1"))
			log2, _ := os.ReadFile(filepath.Join(dir, "state.log"))
			log = append(log, log2...)
			t.Logf("detached daemon's log:\n%s", log)
		}
	})
	if !alive(pid) {
		t.Fatalf("detached daemon %d not running", pid)
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "version"); !strings.HasPrefix(got, "ovs-vswitchd (vswitch-go) ") {
		t.Errorf("version: %q", got)
	}
	if _, err := os.Stat(filepath.Join(run, "ovs-vswitchd."+strconv.Itoa(pid)+".ctl")); err != nil {
		t.Errorf("control socket: %v", err)
	}

	// logrotate's way: move the file, then vlog/reopen.
	logPath := filepath.Join(dir, "state.log")
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	mustOVSTool(t, run, "ovs-appctl", "vlog/reopen")
	if data, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(data), "log file reopened") {
		t.Errorf("log file after vlog/reopen: %v %q", err, data)
	}

	out, err := start("state2")
	if err == nil || !strings.Contains(out, "already running") {
		t.Errorf("second daemon on the same pid file: %v\n%s", err, out)
	}
	if !alive(pid) {
		t.Fatal("the first daemon died when the second was refused")
	}

	mustOVSTool(t, run, "ovs-appctl", "exit")
	nstest.WaitFor(t, 20*time.Second, "the detached daemon to exit", func() bool { return !alive(pid) })
	if _, err := os.Stat(pidfile); err == nil {
		t.Error("pid file left behind after exit")
	}
}

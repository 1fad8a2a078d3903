package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func testFlagSet() (*flag.FlagSet, *ovsFlags, *string, *string) {
	fs := flag.NewFlagSet("vswitchd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	stateDir := fs.String("state-dir", "", "")
	logFile := fs.String("log-file", "", "")
	fs.Bool("version", false, "")
	return fs, addOVSFlags(fs), stateDir, logFile
}

// TestNormalizeArgs: ovs-ctl's command line parses, the database in any
// position; the daemon's own spellings keep working.
func TestNormalizeArgs(t *testing.T) {
	t.Setenv("OVS_LOGDIR", "/logs")
	for _, tc := range []struct {
		in, want []string
	}{
		{[]string{"unix:/run/db.sock", "-vconsole:emer", "-vsyslog:err", "-vfile:info", "--mlockall", "--no-chdir",
			"--log-file=/l/f.log", "--pidfile=/run/p.pid", "--detach", "--monitor"},
			[]string{"-verbose=console:emer", "-verbose=syslog:err", "-verbose=file:info", "--mlockall", "--no-chdir",
				"--log-file=/l/f.log", "--pidfile=/run/p.pid", "--detach", "--monitor", "unix:/run/db.sock"}},
		{[]string{"--log-file", "--pidfile"}, []string{"--log-file=/logs/ovs-vswitchd.log", "--pidfile"}},
		{[]string{"--log-file"}, []string{"--log-file=/logs/ovs-vswitchd.log"}},
		{[]string{"--log-file", "unix:/db"}, []string{"--log-file=/logs/ovs-vswitchd.log", "unix:/db"}},
		{[]string{"--log-file", "my.log", "--state-dir", "s", "-version"}, []string{"--log-file", "my.log", "--state-dir", "s", "-version"}},
		{[]string{"-v", "--verbose=dbg", "-vANY:dbg"}, []string{"-v", "--verbose=dbg", "-verbose=ANY:dbg"}},
		{[]string{"tcp:1.2.3.4:6640", "--", "--x"}, []string{"tcp:1.2.3.4:6640", "--x"}},
	} {
		fs, _, _, _ := testFlagSet()
		if got := normalizeArgs(fs, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("normalizeArgs(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

func TestOVSFlagsParse(t *testing.T) {
	fs, o, stateDir, logFile := testFlagSet()
	args := []string{"unix:/db", "--pidfile", "-vconsole:emer", "-vfile:info", "-v", "--state-dir", "/s", "--log-file", "--detach"}
	if err := fs.Parse(normalizeArgs(fs, args)); err != nil {
		t.Fatal(err)
	}
	if !o.pidfile.set || o.pidfile.value != "" || !o.detach || *stateDir != "/s" || !strings.HasSuffix(*logFile, "/ovs-vswitchd.log") {
		t.Fatalf("parsed %+v state %q log %q", o, *stateDir, *logFile)
	}
	if !slices.Equal(fs.Args(), []string{"unix:/db"}) {
		t.Fatalf("positional %q", fs.Args())
	}
	if !slices.Equal(o.verbose, specList{"console:emer", "file:info", ""}) {
		t.Fatalf("verbose %q", o.verbose)
	}
	fs, o, _, _ = testFlagSet()
	if err := fs.Parse([]string{"--pidfile=/p.pid"}); err != nil || o.pidfile.value != "/p.pid" {
		t.Fatalf("--pidfile=FILE: %v %q", err, o.pidfile.value)
	}
	fs, _, _, _ = testFlagSet()
	if err := fs.Parse(normalizeArgs(fs, []string{"-vconsole:file"})); err == nil {
		t.Fatal("a spec with two destinations was accepted")
	}
}

// TestLogLevelFromSpecs: the specs of the destination the daemon writes
// to set its level, in order; the others change nothing.
func TestLogLevelFromSpecs(t *testing.T) {
	specs := []string{"console:emer", "syslog:err", "file:info"}
	for dest, want := range map[string]slog.Level{"file": slog.LevelInfo, "console": slog.Level(10)} {
		var l slog.LevelVar
		l.Set(slog.LevelWarn)
		if err := logLevelFromSpecs(specs, dest, &l); err != nil || l.Level() != want {
			t.Errorf("%s: level %v, %v; want %v", dest, l.Level(), err, want)
		}
	}
	var l slog.LevelVar
	if err := logLevelFromSpecs([]string{"warn", ""}, "console", &l); err != nil || l.Level() != slog.LevelDebug {
		t.Errorf("bare -v after warn: %v %v", l.Level(), err)
	}
}

func TestResolvePaths(t *testing.T) {
	run := filepath.Join(t.TempDir(), "run")
	t.Setenv("OVS_RUNDIR", run)
	o := &ovsFlags{}
	o.pidfile.Set("true")
	p, err := o.resolvePaths(true)
	if err != nil {
		t.Fatal(err)
	}
	want := ovsPaths{runDir: run, pidfile: filepath.Join(run, "ovs-vswitchd.pid"),
		unixctl: filepath.Join(run, "ovs-vswitchd."+strconv.Itoa(os.Getpid())+".ctl")}
	if p != want {
		t.Fatalf("paths %+v, want %+v", p, want)
	}
	if fi, err := os.Stat(run); err != nil || !fi.IsDir() {
		t.Fatalf("run directory not created: %v", err)
	}
	p, err = (&ovsFlags{}).resolvePaths(false)
	if err != nil || p != (ovsPaths{}) {
		t.Fatalf("outside Open vSwitch mode: %+v %v", p, err)
	}
}

// TestPidfileLock: the pid file holds the pid and a lock another process
// sees (what ovs-appctl checks); a stale file (no lock) is no obstacle.
func TestPidfileLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pid")
	os.WriteFile(path, []byte("1\n"), 0o644)
	if err := checkPidfile(path); err != nil {
		t.Fatalf("stale pid file refused: %v", err)
	}
	if err := writePidfile(path); err != nil {
		t.Fatal(err)
	}
	defer func() { pidfileHeld.Close(); pidfileHeld = nil }()
	if fi, err := os.Stat(path); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o644 {
		t.Fatalf("pid file mode %v, want 0644", fi.Mode())
	}
	// Locks are per process, and closing any descriptor of the file in
	// this one would drop it: look from another process, as ovs-appctl
	// does.
	cmd := exec.Command(os.Args[0], "-test.run=^TestPidfileLockHelper$")
	cmd.Env = append(os.Environ(), "VSWITCHD_TEST_GETLK="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pid := strconv.Itoa(os.Getpid())
	_, got, _ := strings.Cut(string(out), "RESULT ")
	if got, _, _ = strings.Cut(got, "\n"); got != "true "+pid+" "+pid {
		t.Fatalf("lock and pid seen from another process: %q", got)
	}
}

// TestPidfileLockHelper is the other process of TestPidfileLock: it
// prints whether path is locked, by whom, and the pid the file holds.
func TestPidfileLockHelper(t *testing.T) {
	path := os.Getenv("VSWITCHD_TEST_GETLK")
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(f)
	fmt.Printf("RESULT %v %d %s\n", lk.Type != unix.F_UNLCK, lk.Pid, strings.TrimSpace(string(data)))
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/vswitchd"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
	"github.com/vswitch-go/vswitch/vswitchd/unixctl"
)

// ovs-vswitchd's command line and paths, so that the scripts and units
// that start Open vSwitch (ovs-ctl, systemd units, OVN's and Antrea's
// containers) start this daemon unchanged:
//
//	vswitchd unix:$OVS_RUNDIR/db.sock -vconsole:emer -vsyslog:err -vfile:info \
//	    --mlockall --no-chdir --log-file=F --pidfile=F --detach --monitor

// Open vSwitch's directories and their environment variables.
const (
	defaultLogDir = "/var/log/openvswitch"
	defaultDBDir  = "/etc/openvswitch"
	// programName is the name Open vSwitch's tools know the daemon by:
	// ovs-appctl -t ovs-vswitchd reads $OVS_RUNDIR/ovs-vswitchd.pid.
	programName = "ovs-vswitchd"
)

func envDir(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func ovsRunDir() string { return mgmt.OVSRunDir() }

// defaultLogFile is where a bare --log-file logs, as ovs-vswitchd's.
func defaultLogFile() string {
	return filepath.Join(envDir("OVS_LOGDIR", defaultLogDir), programName+".log")
}

// optionalValue is a flag that may be given bare (--pidfile) or with a
// value (--pidfile=FILE), as Open vSwitch's options with optional
// arguments. The flag package hands a bare boolean-style flag "true".
type optionalValue struct {
	set   bool
	value string
}

func (o *optionalValue) String() string   { return o.value }
func (o *optionalValue) IsBoolFlag() bool { return true }
func (o *optionalValue) Set(v string) error {
	o.set = true
	if v == "true" {
		v = ""
	}
	o.value = v
	return nil
}

// specList collects -v/--verbose specs; each may be bare (-v: every
// destination at dbg).
type specList []string

func (s *specList) String() string   { return strings.Join(*s, " ") }
func (s *specList) IsBoolFlag() bool { return true }
func (s *specList) Set(v string) error {
	if v == "true" {
		v = ""
	}
	if _, err := unixctl.ParseVlogSpec(v); err != nil {
		return err
	}
	*s = append(*s, v)
	return nil
}

// ovsFlags are the ovs-vswitchd options.
type ovsFlags struct {
	pidfile  optionalValue
	detach   bool
	noChdir  bool
	unixctl  string
	verbose  specList
	monitor  bool
	mlockall bool
}

func addOVSFlags(fs *flag.FlagSet) *ovsFlags {
	o := &ovsFlags{}
	fs.Var(&o.pidfile, "pidfile", "write the pid to this file (bare: $OVS_RUNDIR/ovs-vswitchd.pid), as ovs-vswitchd; refuse to start if it names a running process")
	fs.BoolVar(&o.detach, "detach", false, "run in the background; return once the daemon serves (as ovs-vswitchd --detach)")
	fs.BoolVar(&o.noChdir, "no-chdir", false, "with --detach, stay in the current directory instead of /")
	fs.StringVar(&o.unixctl, "unixctl", "", "control socket for ovs-appctl (default $OVS_RUNDIR/ovs-vswitchd.PID.ctl in Open vSwitch mode, else STATE/ovs-vswitchd.ctl)")
	fs.Var(&o.verbose, "verbose", "Open vSwitch log spec ([module:][console|syslog|file:]off|emer|err|warn|info|dbg; bare: dbg), also -vSPEC; the daemon has one log level, that of its destination")
	fs.Var(&o.verbose, "v", "same as --verbose")
	fs.BoolVar(&o.monitor, "monitor", false, "accepted for ovs-vswitchd's command line; there is no monitor process (let systemd restart the daemon)")
	fs.BoolVar(&o.mlockall, "mlockall", false, "accepted for ovs-vswitchd's command line; memory is not locked")
	return o
}

// ovsMode says whether the daemon runs as ovs-vswitchd: with Open
// vSwitch's run directory in the environment, a database, a pid file or
// detached. Its sockets then go where Open vSwitch's tools look.
func (o *ovsFlags) ovsMode(db string) bool {
	return os.Getenv("OVS_RUNDIR") != "" || db != "" || o.pidfile.set || o.detach
}

// normalizeArgs turns Open vSwitch's spellings the flag package does not
// parse into its own, and puts positional arguments (the database) after
// the flags, since ovs-vswitchd takes them anywhere and the flag package
// stops at the first:
//   - -vSPEC (attached, single dash) becomes -verbose=SPEC;
//   - a bare --log-file (followed by nothing, another flag or a database)
//     becomes --log-file=$OVS_LOGDIR/ovs-vswitchd.log, while
//     --log-file FILE keeps working.
func normalizeArgs(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") && strings.HasPrefix(name, "v") && name != "v" && fs.Lookup(name) == nil {
			flags = append(flags, "-verbose="+a[2:])
			continue
		}
		flags = append(flags, a)
		f := fs.Lookup(name)
		if f == nil || hasValue {
			continue
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			continue
		}
		// A flag that takes a value: the next argument is it.
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		if name == "log-file" && (next == "" || strings.HasPrefix(next, "-") || isDBTarget(next)) {
			flags[len(flags)-1] = "--log-file=" + defaultLogFile()
			continue
		}
		if i+1 < len(args) {
			flags = append(flags, next)
			i++
		}
	}
	return append(flags, pos...)
}

// logLevelFromSpecs applies -v specs, in order, to the level of the
// destination the daemon logs to (file with --log-file, else console).
func logLevelFromSpecs(specs []string, dest string, level *slog.LevelVar) error {
	for _, s := range specs {
		v, err := unixctl.ParseVlogSpec(s)
		if err != nil {
			return err
		}
		if v.AppliesTo(dest) {
			level.Set(v.Level)
		}
	}
	return nil
}

// absPath makes p absolute ("" stays ""), so that a detached daemon, which
// changes to /, still finds its files.
func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// ovsPaths are the paths the ovs-vswitchd command line and environment
// give the daemon.
type ovsPaths struct {
	runDir, unixctl, pidfile string
}

// resolvePaths chooses the run directory, control socket and pid file,
// creating the run directory (0755, as Open vSwitch's: its sockets are
// 0600 themselves) in Open vSwitch mode.
func (o *ovsFlags) resolvePaths(ovsMode bool) (ovsPaths, error) {
	var p ovsPaths
	p.unixctl = absPath(o.unixctl)
	if o.pidfile.set {
		p.pidfile = o.pidfile.value
		if p.pidfile == "" {
			p.pidfile = filepath.Join(ovsRunDir(), programName+".pid")
		}
		p.pidfile = absPath(p.pidfile)
	}
	if !ovsMode {
		return p, nil
	}
	p.runDir = absPath(ovsRunDir())
	if err := os.MkdirAll(p.runDir, 0o755); err != nil {
		return p, fmt.Errorf("run directory: %w", err)
	}
	if p.unixctl == "" {
		p.unixctl = filepath.Join(p.runDir, fmt.Sprintf("%s.%d.ctl", programName, os.Getpid()))
	}
	return p, nil
}

// defaultOVSStateDir is the state directory (configuration store, flow
// journals) in Open vSwitch mode when none is given: beside Open
// vSwitch's database, which is what survives a reboot there.
func defaultOVSStateDir() string {
	return filepath.Join(envDir("OVS_DBDIR", defaultDBDir), "vswitchd")
}

// checkPidfile refuses to start when another process holds the pid
// file's lock (a second ovs-vswitchd would fight the first over the
// sockets); a stale file is replaced by writePidfile.
func checkPidfile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		return fmt.Errorf("pid file %s: %w", path, err)
	}
	if lk.Type != unix.F_UNLCK && int(lk.Pid) != os.Getpid() {
		return fmt.Errorf("pid file %s is locked by process %d: already running?", path, lk.Pid)
	}
	return nil
}

// pidfileHeld keeps the pid file open for the life of the process: its
// lock is what tells Open vSwitch's tools the pid in it is alive
// (ovs-appctl refuses a pid file nobody locks as stale), and closing the
// descriptor would drop it.
var pidfileHeld *os.File

// writePidfile writes the pid as Open vSwitch does (decimal, newline) to
// a temporary file, locks it and renames it into place, so a reader never
// sees it half written or unlocked.
func writePidfile(path string) error {
	tmp := path + ".tmp"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	// 0644 whatever the umask, as pid files are: readers need not be root.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("pid file: %w", err)
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart}
	if err := unix.FcntlFlock(f.Fd(), unix.F_SETLK, &lk); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("pid file: lock: %w", err)
	}
	if _, err := fmt.Fprintf(f, "%d\n", os.Getpid()); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("pid file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("pid file: %w", err)
	}
	pidfileHeld = f
	return nil
}

// options are the daemon options the ovs-vswitchd command line sets.
func (p ovsPaths) options(o *vswitchd.Options, logDest string) {
	o.RunDir = p.runDir
	o.Unixctl = p.unixctl
	o.LogDest = logDest
}

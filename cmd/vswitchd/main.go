// Command vswitchd is the switch daemon. It keeps its configuration and the
// flows of bridges without a controller in a state directory and restores
// them at start; vsctl configures it through the management socket there.
// With an empty state directory it starts the embedded default: one bridge,
// br0, in fail mode standalone (a learning switch until flows or a
// controller say otherwise).
//
// It also takes ovs-vswitchd's command line and paths (ovsflags.go,
// detach.go) and serves ovs-appctl on its control socket, so it can be
// started and managed as ovs-vswitchd is.
//
// Signals: SIGTERM and SIGINT stop it cleanly (batches flushed, ports
// detached, exit 0); SIGHUP reopens the log file.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/vswitch-go/vswitch/internal/buildinfo"
	"github.com/vswitch-go/vswitch/vswitchd"
	"github.com/vswitch-go/vswitch/vswitchd/flowjournal"
	"github.com/vswitch-go/vswitch/vswitchd/unixctl"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// fileConfig is the optional --config file: the same settings as the flags,
// which override it.
type fileConfig struct {
	StateDir      string `json:"state_dir"`
	MetricsAddr   string `json:"metrics_addr"`
	LogLevel      string `json:"log_level"`
	LogFile       string `json:"log_file"`
	LogFormat     string `json:"log_format"`
	DefaultBridge string `json:"default_bridge"`
}

func main() {
	ensureProcs()
	def := fileConfig{StateDir: "state", MetricsAddr: vswitchd.DefaultMetricsAddr, LogLevel: "info",
		LogFormat: "text", DefaultBridge: "br0"}
	if v := os.Getenv("VSWITCHD_STATE_DIR"); v != "" {
		def.StateDir = v
	}
	configFile := flag.String("config", "", "JSON file with defaults for the flags below (keys: state_dir, metrics_addr, log_level, log_file, log_format, default_bridge)")
	stateDir := flag.String("state-dir", def.StateDir, "state directory: config store, management sockets (env VSWITCHD_STATE_DIR)")
	metricsAddr := flag.String("metrics-addr", def.MetricsAddr, "host:port of the Prometheus /metrics endpoint (empty: none)")
	logLevel := flag.String("log-level", def.LogLevel, "debug, info, warn or error (changeable at run time: vsctl log-level)")
	logFile := flag.String("log-file", def.LogFile, "log to this file instead of stderr (reopened on SIGHUP)")
	logFormat := flag.String("log-format", def.LogFormat, "text or json")
	defaultBridge := flag.String("default-bridge", def.DefaultBridge, "bridge created when the state holds none (empty: none)")
	recoverJournals := flag.Bool("recover", false, "start despite damaged flow journals: keep each one's records before the damage, move the file aside (BRIDGE.journal.corrupt-TIME) and log what was dropped")
	showVersion := flag.Bool("version", false, "print the version and exit")
	printJournal := flag.String("print-journal", "", "print the changes a flow journal file holds (BRIDGE.journal, or one moved aside by --recover) as text, a bundle commit's included, and exit: 1 if it is damaged")
	embeddedDB := flag.Bool("embedded-db", true, "without a database argument, serve the Open_vSwitch database from the state directory (conf.db, in Open vSwitch's file format, on db.sock) and follow it, so that ovs-vsctl --db=unix:STATE/db.sock and vsctl both configure it (always: false, which kept the configuration in config.json only, is no longer taken)")
	db := flag.String("db", "", "OVSDB database of the configuration, as ovs-vswitchd's DATABASE argument (unix:PATH or tcp:IP:PORT; may also be given as the one positional argument): the real ovs-vsctl then configures the switch")
	// ovs-vswitchd's command line (ovsflags.go).
	ovs := addOVSFlags(flag.CommandLine)
	flag.CommandLine.Parse(normalizeArgs(flag.CommandLine, os.Args[1:]))
	if *showVersion {
		fmt.Println("vswitchd", buildinfo.Version(version))
		return
	}
	if *printJournal != "" {
		data, err := os.ReadFile(*printJournal)
		if err != nil {
			fail(1, "%v", err)
		}
		if err := flowjournal.Print(os.Stdout, *printJournal, data); err != nil {
			fail(1, "%v", err)
		}
		return
	}
	switch {
	case flag.NArg() == 1 && *db == "" && isDBTarget(flag.Arg(0)):
		*db = flag.Arg(0)
	case flag.NArg() != 0:
		fail(2, "unexpected arguments %q (see -h)", flag.Args())
	}
	if *db != "" && !isDBTarget(*db) {
		fail(2, "--db %q is not unix:PATH or tcp:IP:PORT", *db)
	}
	if *configFile != "" {
		fc := def
		data, err := os.ReadFile(*configFile)
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			err = dec.Decode(&fc)
		}
		if err != nil {
			fail(2, "config file %s: %v", *configFile, err)
		}
		// Flags given on the command line win over the file.
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		pick := func(name string, p *string, v string) {
			if !set[name] {
				*p = v
			}
		}
		pick("state-dir", stateDir, fc.StateDir)
		pick("metrics-addr", metricsAddr, fc.MetricsAddr)
		pick("log-level", logLevel, fc.LogLevel)
		pick("log-file", logFile, fc.LogFile)
		pick("log-format", logFormat, fc.LogFormat)
		pick("default-bridge", defaultBridge, fc.DefaultBridge)
	}

	// ovs-vswitchd's paths and --detach (ovsflags.go, detach.go).
	ovsMode := ovs.ovsMode(*db)
	if ovsMode && !flagGiven("state-dir") && os.Getenv("VSWITCHD_STATE_DIR") == "" && *configFile == "" {
		*stateDir = defaultOVSStateDir()
	}
	var detachReady *os.File
	if ovs.detach {
		if detachReady = detachedChild(); detachReady == nil {
			os.Exit(runDetached())
		}
	}
	*logFile = absPath(*logFile)
	ovsPaths, err := ovs.resolvePaths(ovsMode)
	if err != nil {
		fail(1, "%v", err)
	}
	if ovsPaths.pidfile != "" {
		if err := checkPidfile(ovsPaths.pidfile); err != nil {
			fail(1, "%v", err)
		}
	}
	logDest := unixctl.DestConsole
	if *logFile != "" {
		logDest = unixctl.DestFile
	}

	level := new(slog.LevelVar)
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fail(2, "--log-level %q is not debug, info, warn or error", *logLevel)
	}
	if err := logLevelFromSpecs(ovs.verbose, logDest, level); err != nil {
		fail(2, "-v: %v", err)
	}
	out := &reopenableLog{path: *logFile}
	if err := out.reopen(); err != nil {
		fail(1, "%v", err)
	}
	var h slog.Handler
	switch *logFormat {
	case "text":
		h = slog.NewTextHandler(out, &slog.HandlerOptions{Level: level})
	case "json":
		h = slog.NewJSONHandler(out, &slog.HandlerOptions{Level: level})
	default:
		fail(2, "--log-format %q is not text or json", *logFormat)
	}
	log := slog.New(h)
	if ovs.monitor {
		log.Info("--monitor: ignored, there is no monitor process (let the service manager restart the daemon)")
	}
	if ovs.mlockall {
		log.Info("--mlockall: ignored, memory is not locked")
	}
	// Before any PMD starts: the runtime's monitor thread would otherwise
	// wake about 1000 times a second beside every busy PMD.
	if tid, err := vswitchd.SlowSysmon(); err != nil {
		log.Debug("runtime monitor thread keeps its timer slack", "err", err)
	} else {
		log.Debug("runtime monitor thread timer slack set", "tid", tid, "ns", vswitchd.SysmonSlackNs)
	}

	if *db != "" {
		// The database holds the bridges; the default is for a daemon
		// that keeps its own configuration.
		*defaultBridge = ""
	}
	opts := vswitchd.Options{StateDir: *stateDir, MetricsAddr: *metricsAddr,
		DefaultBridge: *defaultBridge, Logger: log, LogLevel: level, Version: buildinfo.Version(version),
		Recover: *recoverJournals, DB: *db}
	if !*embeddedDB {
		fail(2, "--embedded-db=false is no longer taken: the configuration is the Open_vSwitch database, the embedded one or --db's")
	}
	ovsPaths.options(&opts, logDest)
	opts.ReopenLog = out.reopen
	d, err := vswitchd.Start(opts)
	if err != nil {
		fail(1, "%v", err)
	}
	if ovsPaths.pidfile != "" {
		if err := writePidfile(ovsPaths.pidfile); err != nil {
			d.Close()
			fail(1, "%v", err)
		}
		defer os.Remove(ovsPaths.pidfile)
	}
	if detachReady != nil {
		if err := finishDetach(detachReady, ovs.noChdir); err != nil {
			log.Error("detach", "err", err)
		}
	}
	abs, _ := filepath.Abs(*stateDir)
	if *db == "" {
		log.Info("ready: configure with vsctl or ovs-vsctl", "VSWITCHD_STATE_DIR", abs,
			"ovs-vsctl", "--db=unix:"+filepath.Join(abs, vswitchd.EmbeddedDBSocket))
	} else {
		log.Info("ready: configure with vsctl or ovs-vsctl", "VSWITCHD_STATE_DIR", abs, "db", *db)
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
wait:
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				if err := out.reopen(); err != nil {
					log.Error("log file not reopened", "err", err)
				} else {
					log.Info("log file reopened")
				}
				continue
			}
			log.Info("stopping", "signal", sig.String())
			break wait
		case <-d.ExitRequested():
			log.Info("stopping", "requested", "exit")
			break wait
		}
	}
	if err := d.Close(); err != nil {
		log.Error("stop", "err", err)
		if ovsPaths.pidfile != "" {
			os.Remove(ovsPaths.pidfile)
		}
		os.Exit(1)
	}
	log.Info("stopped")
}

// isDBTarget accepts the OVSDB remotes the daemon can connect to, as
// ovs-vswitchd names its database.
func isDBTarget(s string) bool {
	method, rest, ok := strings.Cut(s, ":")
	return ok && rest != "" && (method == "unix" || method == "tcp")
}

// flagGiven says whether the command line set flag name.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vswitchd: "+format+"\n", args...)
	os.Exit(code)
}

// reopenableLog is the log destination: stderr, or a file that SIGHUP
// reopens (after logrotate moved it).
type reopenableLog struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func (l *reopenableLog) reopen() error {
	if l.path == "" {
		return nil
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	l.mu.Lock()
	old := l.f
	l.f = f
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (l *reopenableLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var w io.Writer = os.Stderr
	if l.f != nil {
		w = l.f
	}
	return w.Write(p)
}

package vswitchd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/netdev/patch"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
	"github.com/vswitch-go/vswitch/vswitchd/unixctl"
)

// The ovs-appctl side of the daemon: Open vSwitch's command names bound
// to the handlers vsctl already reaches through the management socket,
// so both print the same text. The unixctl server lives beside the
// management socket rather than replacing it: vsctl's JSON results and
// transactions have no place in Open vSwitch's protocol.

// UnixctlSocketName is the control socket's name in the state directory
// when Options.Unixctl names none (ovs-vswitchd's is
// ovs-vswitchd.PID.ctl in $OVS_RUNDIR, which the command line chooses).
const UnixctlSocketName = "ovs-vswitchd.ctl"

// ovsDatapathName is the one datapath ovs-vswitchd's userspace datapath
// shows (dpif/show, dpctl/*); this switch's per-bridge datapaths are
// presented as its parts.
const ovsDatapathName = "netdev@ovs-netdev"

// unixctlCommands is the command table of the control socket.
func (d *Daemon) unixctlCommands() []unixctl.Command {
	// from adapts a management handler: its text is the reply.
	from := func(fn mgmt.HandlerFunc) unixctl.Handler {
		return func(args []string) (string, error) {
			res, err := fn(context.Background(), args)
			return res.Text, err
		}
	}
	cmds := []unixctl.Command{
		{Name: "exit", Usage: "[--cleanup]", MaxArgs: 1, Run: d.ctlExit},
		{Name: "vlog/list", Run: d.ctlVlogList},
		{Name: "vlog/set", Usage: "[{spec | PATTERN:destination:pattern}]", MaxArgs: -1, Run: d.ctlVlogSet},
		{Name: "vlog/reopen", Run: d.ctlVlogReopen},
		{Name: "coverage/show", Run: from(d.cmdCoverageShow)},
		{Name: "memory/show", Run: from(d.cmdMemoryShow)},
		{Name: "fdb/show", Usage: "bridge", MinArgs: 1, MaxArgs: 1, Run: from(d.cmdFDBShow)},
		{Name: "fdb/flush", Usage: "[bridge]", MaxArgs: 1, Run: from(d.cmdFDBFlush)},
		{Name: "dpif/show", Run: d.ctlDpifShow},
		{Name: "dpif/show-dp-features", Usage: "bridge", MinArgs: 1, MaxArgs: 1, Run: d.ctlDpifShowDPFeatures},
		{Name: "dpif-netdev/pmd-stats-show", Usage: "[dp]", MaxArgs: 1, Run: onDatapath(from(d.cmdPMDStatsShow))},
		{Name: "dpif-netdev/pmd-stats-clear", Usage: "[dp]", MaxArgs: 1, Run: onDatapath(from(d.cmdPMDStatsClear))},
		{Name: "dpif-netdev/pmd-rxq-show", Usage: "[-s] [dp]", MaxArgs: 2, Run: onDatapath(from(d.cmdPMDRxqShow), "-s")},
		{Name: "dpif-netdev/pmd-rxq-rebalance", Usage: "[dp]", MaxArgs: 1, Run: onDatapath(from(d.cmdPMDRxqRebalance))},
		{Name: "dpif-netdev/pmd-perf-show", Usage: "[dp]", MaxArgs: 1, Run: onDatapath(from(d.cmdPMDPerfShow))},
		{Name: "dpctl/dump-flows", Usage: "[-m] [dp|bridge]", MaxArgs: 2, Run: d.ctlDumpFlows(from(d.cmdDpifDumpFlows))},
		{Name: "dpif/dump-flows", Usage: "[-m] bridge", MinArgs: 1, MaxArgs: 2, Run: d.ctlDpifDumpFlows(from(d.cmdDpifDumpFlows))},
		{Name: "dpctl/del-flows", Usage: "[dp]", MaxArgs: 1, Run: onDatapath(d.ctlPurgeFlows)},
		{Name: "revalidator/purge", Run: d.ctlPurgeFlows},
		{Name: "dpif/dump-dps", Run: func([]string) (string, error) { return ovsDatapathName + "\n", nil }},
		{Name: "ofproto/list", Run: d.ctlOfprotoList},
		// dpctl/*-conntrack and dpctl/ct-*: conntrackcmds.go.
		{Name: "ofproto/trace", Usage: "bridge flow [--ct-next flags]...", MinArgs: 2, MaxArgs: -1, Run: from(d.cmdTrace)},
		// The switch's own, under the names vsctl gives them.
		{Name: "pmd-latency-show", Run: from(d.cmdPMDLatencyShow)},
		{Name: "pmd-latency-clear", Run: from(d.cmdPMDLatencyClear)},
		{Name: "drop-stats", Run: from(d.cmdDropStats)},
	}
	return append(cmds, d.conntrackCommands()...)
}

// unixctlVersion is the version command's text: the program name
// ovs-appctl users look for, and what actually runs.
func (d *Daemon) unixctlVersion() string {
	v := d.opts.Version
	if v == "" {
		v = "dev"
	}
	return "ovs-vswitchd (vswitch-go) " + v
}

// ExitRequested is closed when a client asked the daemon to exit
// (ovs-appctl exit); the caller stops it as it would on SIGTERM.
func (d *Daemon) ExitRequested() <-chan struct{} { return d.exitReq }

func (d *Daemon) ctlExit(args []string) (string, error) {
	if len(args) == 1 && args[0] != "--cleanup" {
		return "", fmt.Errorf("exit: unknown option %q (it takes --cleanup)", args[0])
	}
	// --cleanup asks ovs-vswitchd to remove its datapath and ports; this
	// switch detaches its ports on every exit, so both are the same.
	d.exitOnce.Do(func() { close(d.exitReq) })
	d.log.Info("exit requested by a control client")
	return "", nil
}

// logDest is the vlog destination the daemon writes to.
func (d *Daemon) logDest() string {
	if d.opts.LogDest == "" {
		return unixctl.DestConsole
	}
	return d.opts.LogDest
}

func (d *Daemon) ctlVlogList([]string) (string, error) {
	lvl := func(dest string) string {
		if dest != d.logDest() {
			return "OFF"
		}
		if d.opts.LogLevel == nil {
			return unixctl.LevelName(slog.LevelInfo)
		}
		return unixctl.LevelName(d.opts.LogLevel.Level())
	}
	var sb strings.Builder
	sb.WriteString("                 console    syslog    file\n")
	sb.WriteString("                 -------    ------    ------\n")
	fmt.Fprintf(&sb, "%-16s %4s       %4s       %4s\n", "vswitchd", lvl(unixctl.DestConsole), lvl(unixctl.DestSyslog), lvl(unixctl.DestFile))
	return sb.String(), nil
}

func (d *Daemon) ctlVlogSet(args []string) (string, error) {
	if d.opts.LogLevel == nil {
		return "", errors.New("this daemon's log level is fixed")
	}
	// Parse every spec before applying any, so a bad one changes nothing.
	specs := make([]unixctl.VlogSpec, 0, len(args))
	for _, a := range args {
		s, err := unixctl.ParseVlogSpec(a)
		if err != nil {
			return "", err
		}
		specs = append(specs, s)
	}
	if len(specs) == 0 {
		specs = append(specs, unixctl.VlogSpec{Level: slog.LevelDebug})
	}
	for _, s := range specs {
		if s.AppliesTo(d.logDest()) {
			d.opts.LogLevel.Set(s.Level)
			d.log.Info("log level changed", "level", unixctl.LevelName(s.Level))
		}
	}
	return "", nil
}

func (d *Daemon) ctlVlogReopen([]string) (string, error) {
	if d.opts.ReopenLog == nil || d.logDest() != unixctl.DestFile {
		return "", errors.New("logging to file not configured")
	}
	if err := d.opts.ReopenLog(); err != nil {
		return "", err
	}
	d.log.Info("log file reopened")
	return "", nil
}

// onDatapath accepts the datapath argument of Open vSwitch's
// dpif-netdev/ commands, which can only name the one datapath, and the
// given options that change nothing here (pmd-rxq-show's -s: the queues
// are listed in one order). -pmd CORE is refused rather than ignored:
// the output would not be what was asked for.
func onDatapath(fn unixctl.Handler, accepted ...string) unixctl.Handler {
	return func(args []string) (string, error) {
		for _, a := range args {
			switch {
			case slices.Contains(accepted, a):
			case a == "-pmd":
				return "", errors.New("-pmd is not supported: PMDs belong to bridges here; the output lists every one")
			case strings.HasPrefix(a, "-"):
				return "", fmt.Errorf("unknown option %q", a)
			case a != ovsDatapathName && a != strings.TrimPrefix(ovsDatapathName, "netdev@"):
				return "", fmt.Errorf("no datapath named %q (there is one: %s)", a, ovsDatapathName)
			}
		}
		return fn(nil)
	}
}

// ctlDumpFlows accepts Open vSwitch's datapath name (or none) for every
// bridge's flows, or a bridge's name; -m is accepted, the flows are
// always printed in full.
func (d *Daemon) ctlDumpFlows(dump unixctl.Handler) unixctl.Handler {
	return func(args []string) (string, error) {
		var sel []string
		for _, a := range args {
			switch {
			case a == "-m" || a == "--more":
			case strings.HasPrefix(a, "-"):
				return "", fmt.Errorf("dpctl/dump-flows: unknown option %q", a)
			case a == ovsDatapathName || a == strings.TrimPrefix(ovsDatapathName, "netdev@"):
			default:
				if d.runningBridge(a) == nil {
					return "", fmt.Errorf("dpctl/dump-flows: no datapath or bridge named %q", a)
				}
				sel = append(sel, a)
			}
		}
		if len(sel) > 1 {
			return "", errors.New("dpctl/dump-flows: one datapath or bridge at most")
		}
		return dump(sel)
	}
}

// ctlDpifDumpFlows is dpif/dump-flows: dpctl/dump-flows of one bridge,
// which Open vSwitch requires.
func (d *Daemon) ctlDpifDumpFlows(dump unixctl.Handler) unixctl.Handler {
	inner := d.ctlDumpFlows(dump)
	return func(args []string) (string, error) {
		var br string
		for _, a := range args {
			if !strings.HasPrefix(a, "-") {
				br = a
			}
		}
		if br == "" || d.runningBridge(br) == nil {
			return "", fmt.Errorf("no such bridge %q", br)
		}
		return inner(args)
	}
}

// ctlPurgeFlows is revalidator/purge and dpctl/del-flows: every bridge's
// datapath drops its megaflows (each PMD at its next batch, after pushing
// their traffic to their rules), so the next packets are upcalls.
func (d *Daemon) ctlPurgeFlows([]string) (string, error) {
	for _, b := range d.bridgeList() {
		b.dp.InvalidateFlows()
	}
	return "", nil
}

// ctlOfprotoList names the bridges, one a line (ofproto/list).
func (d *Daemon) ctlOfprotoList([]string) (string, error) {
	var names []string
	for _, b := range d.bridgeList() {
		names = append(names, b.name+"\n")
	}
	slices.Sort(names)
	return strings.Join(names, ""), nil
}

// ctlDpifShow prints the datapath as ovs-vswitchd's userspace datapath
// does: one datapath holding every bridge, its ports numbered
// "ofport/dp-port" with their type. The datapath port numbers are the
// order of the ports over the bridges (sorted by name, then by ofport),
// as this switch has no datapath shared between bridges to number them.
// ctlDpifShowDPFeatures lists what the datapath supports, in Open
// vSwitch's words and order.
func (d *Daemon) ctlDpifShowDPFeatures(args []string) (string, error) {
	if d.runningBridge(args[0]) == nil {
		return "", errors.New("no such bridge")
	}
	var b strings.Builder
	for _, f := range datapath.Features {
		if f.Title != "" {
			fmt.Fprintf(&b, "%s: %s\n", f.Title, f.Show)
		}
	}
	return b.String(), nil
}

func (d *Daemon) ctlDpifShow([]string) (string, error) {
	bridges := d.bridgeList()
	slices.SortFunc(bridges, func(a, b *bridge) int { return strings.Compare(a.name, b.name) })
	var hit, missed uint64
	var body strings.Builder
	odp := 1
	for _, b := range bridges {
		for _, s := range b.dp.PMDStats() {
			hit += s.EMCHits + s.SimpleMatchHits + s.MegaflowHits
			missed += s.Misses
		}
		fmt.Fprintf(&body, "  %s:\n", b.name)
		if b.dp.Port(datapath.LocalPort) != nil {
			typ := "internal"
			if b.local {
				typ = "tap"
			}
			fmt.Fprintf(&body, "    %s 65534/%d: (%s)\n", b.name, odp, typ)
			odp++
		}
		b.portsMu.RLock()
		ports := slices.Collect(maps.Values(b.ports))
		b.portsMu.RUnlock()
		slices.SortFunc(ports, func(x, y *port) int { return int(x.no) - int(y.no) })
		for _, p := range ports {
			typ := p.driver
			if typ == "" {
				typ = p.cfg.Type
			}
			if pp, ok := p.dev.(*patch.Port); ok {
				// As ovs-vswitchd: a patch port has no datapath port.
				fmt.Fprintf(&body, "    %s %d/none: (patch: peer=%s)\n", p.cfg.Name, p.no, pp.Peer())
				continue
			}
			fmt.Fprintf(&body, "    %s %d/%d: (%s)\n", p.cfg.Name, p.no, odp, typ)
			odp++
		}
	}
	return fmt.Sprintf("%s: hit:%d missed:%d\n", ovsDatapathName, hit, missed) + body.String(), nil
}

// listenUnixctl starts the control socket.
func (d *Daemon) listenUnixctl() error {
	path := d.opts.Unixctl
	if path == "" {
		path = filepath.Join(d.opts.StateDir, UnixctlSocketName)
	}
	s, err := unixctl.NewServer(d.unixctlVersion(), d.unixctlCommands())
	if err != nil {
		return err
	}
	s.Logf = func(f string, a ...any) { d.log.Warn(fmt.Sprintf(f, a...)) }
	if err := s.Listen(path); err != nil {
		return err
	}
	d.ctl = s
	d.log.Info("control socket for ovs-appctl", "path", path)
	return nil
}

// runDir is the directory of the bridges' OpenFlow sockets.
func (d *Daemon) runDir() string {
	if d.opts.RunDir != "" {
		return d.opts.RunDir
	}
	return d.opts.StateDir
}

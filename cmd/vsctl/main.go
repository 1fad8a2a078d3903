// Command vsctl configures and inspects vswitchd: bridges, ports and
// settings through the daemon's management socket, flows through each
// bridge's OpenFlow management socket in ovs-ofctl's syntax (so those
// commands also work against any OpenFlow 1.3 switch, given a target such
// as tcp:HOST:PORT instead of a bridge name), and the datapath's state.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/vswitch-go/vswitch/internal/buildinfo"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/vswitch-go/vswitch/ctl/dbctl"
	"github.com/vswitch-go/vswitch/ctl/ofctl"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// Exit statuses: 0 success, 1 the command failed, 2 bad usage (and
// br-exists on a missing bridge, like ovs-vsctl).
const (
	exitFail  = 1
	exitUsage = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func run(argv []string, stdout, stderr io.Writer) int {
	g := globals{format: "text", timeout: 30 * time.Second, stateDir: os.Getenv("VSWITCHD_STATE_DIR")}
	if g.stateDir == "" {
		g.stateDir = "state"
	}
	segs, err := parseLine(argv, &g, isKnownCommand)
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %v\n", err)
		return exitUsage
	}
	if g.version {
		fmt.Fprintf(stdout, "vsctl (vswitch) %s\n", buildinfo.Version(version))
		return 0
	}
	if g.help || len(segs) == 1 && segs[0].name == "help" {
		usage(stdout)
		return 0
	}
	if len(segs) == 0 {
		usage(stderr)
		return exitUsage
	}
	for _, s := range segs {
		if slices.Contains(s.opts, "--help") || slices.Contains(s.args, "-h") {
			return commandHelp(s.name, stdout, stderr)
		}
		if !isKnownCommand(s.name) {
			fmt.Fprintf(stderr, "vsctl: unknown command %q (vsctl help lists them)\n", s.name)
			return exitUsage
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if len(segs) > 1 {
		return runChain(ctx, g, segs, stdout, stderr)
	}
	s := segs[0]
	if c, ok := dbctl.Lookup(s.name); ok {
		args := append(slices.Clone(s.opts), s.args...)
		if err := c.CheckArgs(args); err != nil {
			fmt.Fprintf(stderr, "vsctl: %v\n", err)
			return exitUsage
		}
		return runDB(ctx, g, [][]string{append([]string{c.Name}, args...)}, stdout, stderr)
	}
	if c, ok := mgmt.Lookup(s.name); ok {
		if err := mgmt.CheckOptions(c.Name, s.opts); err != nil {
			fmt.Fprintf(stderr, "vsctl: %v\n", err)
			return exitUsage
		}
		return runMgmt(ctx, g, c, append(slices.Clone(s.opts), s.args...), stdout, stderr)
	}
	c, _ := lookupOF(s.name)
	return runOF(ctx, g, c, s.opts, s.args, stdout, stderr)
}

// runChain runs commands chained with "--" as one transaction: every
// change is applied, or none.
func runChain(ctx context.Context, g globals, segs []segment, stdout, stderr io.Writer) int {
	var cmds [][]string
	for _, s := range segs {
		c, ok := dbctl.Lookup(s.name)
		if !ok {
			fmt.Fprintf(stderr, "vsctl: %s cannot be chained with \"--\": only configuration commands make one transaction (run it on its own)\n", s.name)
			return exitUsage
		}
		args := append(slices.Clone(s.opts), s.args...)
		if err := c.CheckArgs(args); err != nil {
			fmt.Fprintf(stderr, "vsctl: %v\n", err)
			return exitUsage
		}
		cmds = append(cmds, append([]string{c.Name}, args...))
	}
	return runDB(ctx, g, cmds, stdout, stderr)
}

// runDB runs configuration commands as one transaction on the database
// the daemon follows (or --db's).
func runDB(ctx context.Context, g globals, cmds [][]string, stdout, stderr io.Writer) int {
	endpoint := g.db
	if endpoint == "" {
		// The embedded database's socket, if the daemon serves one;
		// else the daemon says which database it follows.
		if sock := filepath.Join(g.stateDir, mgmt.DBSocketName); isSocket(sock) {
			if db, err := dbctl.Dial(ctx, "unix:"+sock); err == nil {
				defer db.Close()
				return runOn(ctx, g, db, cmds, stdout, stderr)
			}
		}
		cl, err := mgmt.Dial(ctx, filepath.Join(g.stateDir, mgmt.SocketName))
		if err != nil {
			fmt.Fprintf(stderr, "vsctl: %v\n", err)
			return exitFail
		}
		resp, err := cl.Call(ctx, "db-endpoint")
		cl.Close()
		if err != nil {
			fmt.Fprintf(stderr, "vsctl: asking vswitchd for its database: %v\n", err)
			return exitFail
		}
		endpoint = strings.TrimSpace(resp.Text)
	}
	db, err := dbctl.Dial(ctx, endpoint)
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %v\n", err)
		return exitFail
	}
	defer db.Close()
	return runOn(ctx, g, db, cmds, stdout, stderr)
}

// runOn runs cmds as one transaction on db and prints the outcome.
func runOn(ctx context.Context, g globals, db *dbctl.Client, cmds [][]string, stdout, stderr io.Writer) int {
	r, err := db.Run(ctx, cmds, dbctl.Options{NoWait: g.noWait})
	if err != nil {
		name := cmds[0][0]
		if len(cmds) > 1 {
			fmt.Fprintf(stderr, "vsctl: %v\n", err)
		} else {
			fmt.Fprintf(stderr, "vsctl: %s\n", prefixed(name, err))
		}
		if name == "br-exists" && len(cmds) == 1 {
			return exitUsage
		}
		return exitFail
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "vsctl: %s\n", w)
	}
	if g.format == "json" {
		data := r.Data
		if data == nil {
			data = struct{}{} // a command that only changes things
		}
		b, err := json.Marshal(data)
		if err != nil {
			fmt.Fprintf(stderr, "vsctl: %v\n", err)
			return exitFail
		}
		stdout.Write(append(b, '\n'))
		return 0
	}
	io.WriteString(stdout, r.Text)
	return 0
}

func printResponse(g globals, resp *mgmt.Response, stdout io.Writer) {
	if g.format == "json" {
		data := resp.Data
		if data == nil {
			data = []byte("{}") // a command that only changes things
		}
		stdout.Write(append(data, '\n'))
		return
	}
	io.WriteString(stdout, resp.Text)
}

// prefixed puts "name: " before msg unless it already starts so: errors
// carry one prefix each.
func prefixed(name string, err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, name+": ") {
		return msg
	}
	return name + ": " + msg
}

func lookupOF(name string) (ofctl.Command, bool) {
	for _, c := range ofctl.Commands {
		if c.Name == name {
			return c, true
		}
	}
	return ofctl.Command{}, false
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `usage: vsctl [OPTIONS] COMMAND [ARGS...] [-- [OPTIONS] COMMAND [ARGS...]]...
       vsctl COMMAND --help

Commands chained with "--" (configuration commands only) are one
transaction: all of them take effect, or none.

global options (anywhere on the line):
  --state-dir DIR        vswitchd's state directory (default $VSWITCHD_STATE_DIR, else ./state)
  --db unix:PATH         the Open_vSwitch database to configure (default: the one vswitchd follows)
  --no-wait              return once the database has a change, before vswitchd applies it
  --format text|json     output format (json: compact, one document)
  --timeout N            give up after N seconds (or a duration such as 500ms; default 30)
  -O OpenFlow13          accepted for ovs-ofctl habits (the only version spoken)
  --version              print vsctl's version
`)
	fmt.Fprintf(w, "\nconfiguration (transactions on the Open_vSwitch database vswitchd follows):\n")
	for _, c := range dbctl.Commands {
		fmt.Fprintf(w, "  %-18s %s\n", c.Name, c.Args)
	}
	fmt.Fprintf(w, "\nstate and datapath (through vswitchd's management socket):\n")
	for _, c := range mgmt.Commands {
		fmt.Fprintf(w, "  %-18s %s\n", c.Name, c.Args)
	}
	fmt.Fprintf(w, "\nflows (OpenFlow 1.3 to BRIDGE's management socket, or to a target such as tcp:HOST:PORT):\n")
	for _, c := range ofctl.Commands {
		fmt.Fprintf(w, "  %-18s BRIDGE %s\n", c.Name, c.Args)
	}
}

func commandHelp(name string, stdout, stderr io.Writer) int {
	if c, ok := dbctl.Lookup(name); ok {
		fmt.Fprintf(stdout, "usage: vsctl %s %s\n\n%s\n", c.Name, c.Args, c.Help)
		return 0
	}
	if c, ok := mgmt.Lookup(name); ok {
		fmt.Fprintf(stdout, "usage: vsctl %s %s\n\n%s\n", c.Name, c.Args, c.Help)
		return 0
	}
	if c, ok := lookupOF(name); ok {
		fmt.Fprintf(stdout, "usage: vsctl %s BRIDGE|TARGET %s\n\n%s\n", c.Name, c.Args, c.Help)
		return 0
	}
	fmt.Fprintf(stderr, "vsctl: unknown command %q (vsctl help lists them)\n", name)
	return exitUsage
}

func runMgmt(ctx context.Context, g globals, c mgmt.Command, args []string, stdout, stderr io.Writer) int {
	if err := c.CheckArgs(args); err != nil {
		fmt.Fprintf(stderr, "vsctl: %v\n", err)
		return exitUsage
	}
	cl, err := mgmt.Dial(ctx, filepath.Join(g.stateDir, mgmt.SocketName))
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %v\n", err)
		return exitFail
	}
	defer cl.Close()
	resp, err := cl.Call(ctx, c.Name, args...)
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %s\n", prefixed(c.Name, err))
		if c.Name == "br-exists" && resp != nil {
			return exitUsage
		}
		return exitFail
	}
	printResponse(g, resp, stdout)
	return 0
}

// ofTarget turns vsctl's BRIDGE argument into an OpenFlow target.
func ofTarget(g globals, bridgeOrTarget string) (string, error) {
	if strings.Contains(bridgeOrTarget, ":") {
		return bridgeOrTarget, nil
	}
	paths := mgmt.BridgeSocketPaths(g.stateDir, bridgeOrTarget)
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return "unix:" + p, nil
		}
	}
	return "", fmt.Errorf("no bridge %q: %s does not exist (is vswitchd running with --state-dir %s?)", bridgeOrTarget, paths[0], g.stateDir)
}

func runOF(ctx context.Context, g globals, c ofctl.Command, flags, pos []string, stdout, stderr io.Writer) int {
	opts := ofctl.Options{JSON: g.format == "json"}
	for _, a := range flags {
		name, val, _ := strings.Cut(a, "=")
		switch name {
		case "--strict":
			opts.Strict = true
		case "--no-stats":
			opts.NoStats = true
		case "--names":
			opts.Names = true
		case "--no-names":
			opts.Names = false
		case "--sort":
			opts.Sort = val
			if val == "" {
				opts.Sort = "priority"
			}
		case "--rsort":
			opts.RSort = val
			if val == "" {
				opts.RSort = "priority"
			}
		case "--readd":
			opts.Readd = true
		default:
			fmt.Fprintf(stderr, "vsctl: %s: unknown option %q (known: --strict, --no-stats, --names, --no-names, --sort[=FIELD], --rsort[=FIELD], --readd)\n", c.Name, a)
			return exitUsage
		}
	}
	if len(pos) == 0 {
		fmt.Fprintf(stderr, "vsctl: %s: missing BRIDGE\nusage: vsctl %s BRIDGE %s\n", c.Name, c.Name, c.Args)
		return exitUsage
	}
	if n := len(pos) - 1; n < c.MinArgs || (c.MaxArgs >= 0 && n > c.MaxArgs) {
		fmt.Fprintf(stderr, "vsctl: %s: wrong number of arguments\nusage: vsctl %s BRIDGE %s\n", c.Name, c.Name, c.Args)
		return exitUsage
	}
	target, err := ofTarget(g, pos[0])
	if c.Name == "diff-flows" {
		// Either source may be a file of flows, as with ovs-ofctl.
		if isRegularFile(pos[0]) {
			target, err = "file:"+pos[0], nil
		}
		if err == nil {
			if isRegularFile(pos[1]) {
				pos[1] = "file:" + pos[1]
			} else if pos[1], err = ofTarget(g, pos[1]); err != nil {
				fmt.Fprintf(stderr, "vsctl: %s: %v\n", c.Name, err)
				return exitFail
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %s: %v\n", c.Name, err)
		return exitFail
	}
	if err := ofctl.Run(ctx, target, c.Name, pos[1:], stdout, opts); err != nil {
		// ofctl's errors start with the command's name already.
		fmt.Fprintf(stderr, "vsctl: %s\n", prefixed(c.Name, err))
		return exitFail
	}
	return 0
}

func isRegularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func isSocket(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&os.ModeSocket != 0
}

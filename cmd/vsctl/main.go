// Command vsctl configures and inspects vswitchd: bridges, ports and
// settings through the daemon's management socket, flows through each
// bridge's OpenFlow management socket in ovs-ofctl's syntax (so those
// commands also work against any OpenFlow 1.3 switch, given a target such
// as tcp:HOST:PORT instead of a bridge name), and the datapath's state.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"vswitch/ctl/ofctl"
	"vswitch/vswitchd"
	"vswitch/vswitchd/mgmt"
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

// globals are the options before the command.
type globals struct {
	stateDir string
	format   string
	timeout  time.Duration
}

func run(argv []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vsctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	g := globals{}
	defDir := os.Getenv("VSWITCHD_STATE_DIR")
	if defDir == "" {
		defDir = "state"
	}
	fs.StringVar(&g.stateDir, "state-dir", defDir, "vswitchd's state directory (env VSWITCHD_STATE_DIR)")
	fs.StringVar(&g.format, "format", "text", "output format: text or json")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "give up after this long")
	fs.Usage = func() { usage(stderr, fs) }
	if err := fs.Parse(argv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if g.format != "text" && g.format != "json" {
		fmt.Fprintf(stderr, "vsctl: --format %q is not text or json\n", g.format)
		return exitUsage
	}
	args := fs.Args()
	if len(args) == 0 {
		usage(stderr, fs)
		return exitUsage
	}
	name, args := args[0], args[1:]
	if name == "help" {
		usage(stdout, fs)
		return 0
	}
	if wantsHelp(args) {
		return commandHelp(name, stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if c, ok := mgmt.Lookup(name); ok {
		return runMgmt(ctx, g, c, args, stdout, stderr)
	}
	if c, ok := lookupOF(name); ok {
		return runOF(ctx, g, c, args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "vsctl: unknown command %q (vsctl help lists them)\n", name)
	return exitUsage
}

func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--help" || a == "-h" {
			return true
		}
	}
	return false
}

func lookupOF(name string) (ofctl.Command, bool) {
	for _, c := range ofctl.Commands {
		if c.Name == name {
			return c, true
		}
	}
	return ofctl.Command{}, false
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: vsctl [--state-dir DIR] [--format text|json] COMMAND [ARGS...]\n       vsctl COMMAND --help\n\nglobal options:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nconfiguration and datapath (through vswitchd's management socket):\n")
	for _, c := range mgmt.Commands {
		fmt.Fprintf(w, "  %-18s %s\n", c.Name, c.Args)
	}
	fmt.Fprintf(w, "\nflows (OpenFlow 1.3 to BRIDGE's management socket, or to a target such as tcp:HOST:PORT):\n")
	for _, c := range ofctl.Commands {
		fmt.Fprintf(w, "  %-18s BRIDGE %s\n", c.Name, c.Args)
	}
}

func commandHelp(name string, stdout, stderr io.Writer) int {
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
	if c.Name == "set-ssl" {
		// Files are named as the user sees them; the daemon runs elsewhere.
		args = slices.Clone(args)
		for i, a := range args {
			if abs, err := filepath.Abs(a); err == nil {
				args[i] = abs
			}
		}
	}
	cl, err := mgmt.Dial(ctx, filepath.Join(g.stateDir, vswitchd.SocketName))
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %v\n", err)
		return exitFail
	}
	defer cl.Close()
	resp, err := cl.Call(ctx, c.Name, args...)
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %s: %v\n", c.Name, err)
		if c.Name == "br-exists" && resp != nil {
			return exitUsage
		}
		return exitFail
	}
	if g.format == "json" {
		data := resp.Data
		if data == nil {
			data = []byte("null")
		}
		stdout.Write(append(data, '\n'))
	} else {
		io.WriteString(stdout, resp.Text)
	}
	return 0
}

// ofTarget turns vsctl's BRIDGE argument into an OpenFlow target.
func ofTarget(g globals, bridgeOrTarget string) (string, error) {
	if strings.Contains(bridgeOrTarget, ":") {
		return bridgeOrTarget, nil
	}
	path := filepath.Join(g.stateDir, bridgeOrTarget+vswitchd.BridgeSocketSuffix)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("no bridge %q: %s does not exist (is vswitchd running with --state-dir %s?)", bridgeOrTarget, path, g.stateDir)
	}
	return "unix:" + path, nil
}

func runOF(ctx context.Context, g globals, c ofctl.Command, args []string, stdout, stderr io.Writer) int {
	opts := ofctl.Options{JSON: g.format == "json"}
	var pos []string
	for _, a := range args {
		switch a {
		case "--strict":
			opts.Strict = true
		default:
			if strings.HasPrefix(a, "--") {
				fmt.Fprintf(stderr, "vsctl: %s: unknown option %q\n", c.Name, a)
				return exitUsage
			}
			pos = append(pos, a)
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
	if err != nil {
		fmt.Fprintf(stderr, "vsctl: %s: %v\n", c.Name, err)
		return exitFail
	}
	if err := ofctl.Run(ctx, target, c.Name, pos[1:], stdout, opts); err != nil {
		fmt.Fprintf(stderr, "vsctl: %v\n", err) // Run's errors start with the command's name
		return exitFail
	}
	return 0
}

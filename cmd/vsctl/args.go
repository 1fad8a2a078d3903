package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vswitch-go/vswitch/ctl/dbctl"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// globals are the options that apply to the whole command line.
type globals struct {
	stateDir string
	format   string
	timeout  time.Duration
	help     bool
	version  bool
	// db is the Open_vSwitch database the configuration commands write
	// to; "" asks the daemon which one it follows.
	db string
	// noWait returns once the database has a change, without waiting
	// for the daemon to apply it (ovs-vsctl --no-wait).
	noWait bool
}

// segment is one command of a command line: its name, its own options
// (--may-exist, --strict, ...) and its arguments.
type segment struct {
	name string
	opts []string
	args []string
}

// globalValueOptions take a value; the bool ones are handled by name.
var globalValueOptions = map[string]bool{"--state-dir": true, "--format": true, "--timeout": true, "-t": true, "--db": true}

// parseLine reads a command line the way ovs-vsctl does: global options
// anywhere (--format=json or --format json), each command's own options
// before or after its name, and commands chained with "--" (ovs-vsctl's
// "add-port br0 p1 -- set Interface p1 type=afxdp"). A "--" not followed by
// an option or a command name only separates, as in vsctl's older
// "add-port br0 p1 -- type=afpacket".
func parseLine(argv []string, g *globals, isCommand func(string) bool) ([]segment, error) {
	var segs []segment
	cur := &segment{}
	flush := func() {
		if cur.name != "" || len(cur.opts) > 0 || len(cur.args) > 0 {
			segs = append(segs, *cur)
		}
		cur = &segment{}
	}
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			if i+1 < len(argv) && cur.name != "" {
				next := argv[i+1]
				if strings.HasPrefix(next, "-") && next != "-" || isCommand(next) {
					flush()
				}
			}
			continue
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name, val, hasVal := strings.Cut(a, "=")
			if globalValueOptions[name] {
				if !hasVal {
					if i+1 >= len(argv) {
						return nil, fmt.Errorf("option %s needs a value", name)
					}
					i++
					val = argv[i]
				}
				if err := g.set(name, val); err != nil {
					return nil, err
				}
				continue
			}
			switch name {
			case "--help", "-h":
				if cur.name == "" {
					g.help = true
				} else {
					cur.opts = append(cur.opts, "--help")
				}
				continue
			case "--version", "-V":
				g.version = true
				continue
			case "--no-wait":
				g.noWait = true
				continue
			case "-O", "--protocols":
				// ovs-ofctl's -O OpenFlow13: the only version spoken.
				if !hasVal {
					if i+1 >= len(argv) {
						return nil, fmt.Errorf("option %s needs a value", name)
					}
					i++
					val = argv[i]
				}
				if !strings.EqualFold(val, "OpenFlow13") {
					return nil, fmt.Errorf("%s %s: only OpenFlow13 is spoken", name, val)
				}
				continue
			}
			cur.opts = append(cur.opts, a)
			continue
		}
		if cur.name == "" {
			cur.name = a
			continue
		}
		cur.args = append(cur.args, a)
	}
	flush()
	for _, s := range segs {
		if s.name == "" {
			return nil, fmt.Errorf("options %s are not followed by a command", strings.Join(s.opts, " "))
		}
	}
	return segs, nil
}

func (g *globals) set(name, val string) error {
	switch name {
	case "--state-dir":
		g.stateDir = val
	case "--db":
		// As ovs-vsctl's: the database (unix:PATH, tcp:IP:PORT). The
		// daemon's own socket (STATE/vswitchd.sock) names its state
		// directory instead, as vsctl took it before.
		if dir, ok := strings.CutSuffix(strings.TrimPrefix(val, "unix:"), "/"+mgmt.SocketName); ok {
			g.stateDir = dir
			return nil
		}
		if !strings.Contains(val, ":") {
			val = "unix:" + val
		}
		g.db = val
	case "--format":
		if val != "text" && val != "json" {
			return fmt.Errorf("--format %q is not text or json", val)
		}
		g.format = val
	case "--timeout", "-t":
		// ovs-vsctl counts seconds; a Go duration ("30s") works too.
		if n, err := strconv.Atoi(val); err == nil && n >= 0 {
			if n == 0 {
				n = 1 << 20 // ovs-vsctl: 0 waits forever
			}
			g.timeout = time.Duration(n) * time.Second
			return nil
		}
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return fmt.Errorf("--timeout %q is not a number of seconds or a duration", val)
		}
		g.timeout = d
	}
	return nil
}

// isKnownCommand says whether name starts a command in a chain.
func isKnownCommand(name string) bool {
	if _, ok := mgmt.Lookup(name); ok {
		return true
	}
	if _, ok := dbctl.Lookup(name); ok {
		return true
	}
	_, ok := lookupOF(name)
	return ok
}

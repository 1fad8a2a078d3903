package mgmt

import (
	"fmt"
	"strings"
)

// Command describes one command the daemon serves, for vsctl's help and
// argument checks (the daemon checks again: other clients exist).
type Command struct {
	Name string
	// Args is the synopsis of the arguments, in ovs-vsctl's notation.
	Args string
	Help string
	// MinArgs and MaxArgs bound the argument count; MaxArgs < 0 is no bound.
	MinArgs, MaxArgs int
}

// Commands are the management commands, in the order vsctl lists them.
var Commands = []Command{
	{"show", "", "overview of bridges, ports and controllers", 0, 0},
	{"get-controller", "BRIDGE", "print the controllers and their connection state", 1, 1},
	{"pmd-stats-show", "", "per-PMD packets, cache hits, misses, batches and busy time since the last clear", 0, 0},
	{"pmd-stats-clear", "", "restart the pmd-stats-show counters from zero", 0, 0},
	{"pmd-rxq-show", "", "rx queues per PMD with each queue's share of the PMD's busy time", 0, 0},
	{"pmd-rxq-rebalance", "", "reassign rx queues to PMDs by measured load", 0, 0},
	{"dpif-dump-flows", "[BRIDGE]", "the datapath's installed megaflows with masks and counters", 0, 1},
	{"fdb-show", "BRIDGE", "the MAC addresses NORMAL learned", 1, 1},
	{"fdb-flush", "[BRIDGE]", "forget the MAC addresses NORMAL learned (every bridge's without BRIDGE)", 0, 1},
	{"drop-stats", "", "every packet the datapath dropped, by cause", 0, 0},
	{"coverage-show", "", "event counters since start: drops by cause, upcalls, cache hits, flow-table changes", 0, 0},
	{"memory-show", "", "the daemon's memory and the objects that hold it (rules, megaflows, ports)", 0, 0},
	{"pmd-perf-show", "", "per PMD: iterations, packets per iteration, cycles per packet", 0, 0},
	{"pmd-latency-show", "", "per PMD: p50/p99 of each stage a probed batch went through (other_config:latency-probe=N), the PMD thread's run-queue wait, the AF_XDP sockets' kernel drop counters", 0, 0},
	{"pmd-latency-clear", "", "empty the pmd-latency-show histograms", 0, 0},
	{"trace", "BRIDGE FLOW", "the tables, rules and actions a packet would meet, and the megaflow it would install", 2, 2},
	{"log-level", "[debug|info|warn|error]", "print or set the log level", 0, 1},
	{"version", "", "print the daemon's version", 0, 0},
	{"db-endpoint", "", "print the Open_vSwitch database the daemon follows (vsctl's configuration commands write there)", 0, 0},
}

// CheckOptions refuses options: no management command takes any.
func CheckOptions(name string, opts []string) error {
	for _, o := range opts {
		if o != "--" {
			return fmt.Errorf("%s: unknown option %q (it takes none)", name, o)
		}
	}
	return nil
}

// CheckArgs reports a wrong number of positional arguments (flags, which
// start with "--", do not count) with the command's synopsis.
func (c Command) CheckArgs(args []string) error {
	n := 0
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			n++
		}
	}
	if n < c.MinArgs || (c.MaxArgs >= 0 && n > c.MaxArgs) {
		return fmt.Errorf("%s: wrong number of arguments\nusage: vsctl %s %s", c.Name, c.Name, c.Args)
	}
	return nil
}

// Lookup returns the command named name.
func Lookup(name string) (Command, bool) {
	for _, c := range Commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

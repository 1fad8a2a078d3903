package mgmt

import (
	"encoding/json"
	"fmt"
	"slices"
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
	{"add-br", "BRIDGE [datapath_id=HEX16] [fail_mode=MODE]", "create a bridge", 1, -1},
	{"del-br", "BRIDGE", "delete a bridge and all its ports", 1, 1},
	{"list-br", "", "print the bridges' names", 0, 0},
	{"br-exists", "BRIDGE", "exit 0 if BRIDGE exists, 2 if not", 1, 1},
	{"add-port", "BRIDGE PORT [--] [type=TYPE] [options:KEY=VALUE]... [ofport_request=N] [other_config:KEY=VALUE]...",
		"attach a port; TYPE is afxdp, afpacket, tap, internal, vhostuser or vhostuserclient (none: afxdp if it works, else afpacket)", 2, -1},
	{"del-port", "[BRIDGE] PORT", "detach a port", 1, 2},
	{"list-ports", "BRIDGE", "print the ports of a bridge", 1, 1},
	{"port-to-br", "PORT", "print the bridge that holds PORT", 1, 1},
	{"set", "TABLE RECORD COLUMN[:KEY]=VALUE...", "set values (tables: Open_vSwitch, Bridge, Port, Interface)", 3, -1},
	{"get", "TABLE RECORD COLUMN[:KEY]...", "print values (Interface also: statistics, link_state, link_speed, mac_in_use, admin_state, ifindex, mtu)", 3, -1},
	{"remove", "TABLE RECORD COLUMN KEY|VALUE...", "remove keys from a map column, or values from a set column (tag, trunks, controller, ofport_request)", 4, -1},
	{"clear", "TABLE RECORD COLUMN...", "empty columns: maps to {}, sets to []", 3, -1},
	{"list", "TABLE [RECORD...]", "print every column of the records (all of the table without RECORD)", 1, -1},
	{"find", "TABLE [COLUMN[:KEY]=VALUE...]", "print the records whose columns have these values", 1, -1},
	{"set-controller", "BRIDGE TARGET...", "replace the bridge's controllers (tcp:IP:PORT, ssl:IP:PORT, unix:PATH, ptcp:PORT[:IP], pssl:PORT[:IP], punix:PATH)", 2, -1},
	{"del-controller", "BRIDGE", "remove the bridge's controllers", 1, 1},
	{"get-controller", "BRIDGE", "print the controllers and their connection state", 1, 1},
	{"set-ssl", "PRIVKEY CERT CACERT", "the switch's private key, its certificate and the CA that signs controllers, for ssl: and pssl: targets (PEM files, checked now)", 3, 3},
	{"get-ssl", "", "print the files set-ssl gave", 0, 0},
	{"del-ssl", "", "forget the set-ssl files (ssl: and pssl: targets stop working)", 0, 0},
	{"set-fail-mode", "BRIDGE standalone|secure", "what the bridge does while no controller is connected", 2, 2},
	{"get-fail-mode", "BRIDGE", "print the fail mode", 1, 1},
	{"del-fail-mode", "BRIDGE", "back to the default fail mode (standalone)", 1, 1},
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
}

// TransactionCommand is the request that carries commands chained with
// "--": its arguments are the commands, each a JSON array of strings
// (EncodeChain), applied in one configuration change.
const TransactionCommand = "transaction"

// options lists the options each command takes; others are refused.
var options = map[string][]string{
	"add-br":   {"--may-exist"},
	"del-br":   {"--if-exists"},
	"add-port": {"--may-exist"},
	"del-port": {"--if-exists", "--with-iface"},
	"get":      {"--if-exists"},
	"set":      {"--if-exists"},
	"remove":   {"--if-exists"},
	"clear":    {"--if-exists"},
	"list":     {"--if-exists"},
}

// chainable are the configuration commands, which may be chained.
var chainable = []string{"show", "add-br", "del-br", "list-br", "br-exists", "add-port", "del-port",
	"list-ports", "port-to-br", "set", "get", "remove", "clear", "list", "find",
	"set-controller", "del-controller", "get-controller", "set-fail-mode", "get-fail-mode", "del-fail-mode"}

// Chainable says whether name may be part of a transaction.
func Chainable(name string) bool { return slices.Contains(chainable, name) }

// CheckOptions refuses options command name does not take.
func CheckOptions(name string, opts []string) error {
	for _, o := range opts {
		if o == "--" {
			continue
		}
		if !slices.Contains(options[name], o) {
			if len(options[name]) == 0 {
				return fmt.Errorf("%s: unknown option %q (it takes none)", name, o)
			}
			return fmt.Errorf("%s: unknown option %q (it takes %s)", name, o, strings.Join(options[name], ", "))
		}
	}
	return nil
}

// EncodeChain turns commands (name and arguments each) into the
// arguments of a TransactionCommand request.
func EncodeChain(cmds [][]string) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		b, _ := json.Marshal(c)
		out[i] = string(b)
	}
	return out
}

// DecodeChain is EncodeChain's inverse.
func DecodeChain(args []string) ([][]string, error) {
	out := make([][]string, len(args))
	for i, a := range args {
		if err := json.Unmarshal([]byte(a), &out[i]); err != nil || len(out[i]) == 0 {
			return nil, fmt.Errorf("transaction: command %d is not a JSON array of strings", i+1)
		}
	}
	return out, nil
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

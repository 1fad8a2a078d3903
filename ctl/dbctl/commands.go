package dbctl

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// Command describes one configuration command, for vsctl's help and
// argument checks.
type Command struct {
	Name string
	// Args is the synopsis of the arguments, in ovs-vsctl's notation.
	Args string
	Help string
	// MinArgs and MaxArgs bound the argument count, options aside;
	// MaxArgs < 0 is no bound.
	MinArgs, MaxArgs int
	// Options are the options the command takes.
	Options  []string
	mutating bool
	op       op
}

// Commands are the configuration commands, in the order vsctl lists them.
var Commands = []Command{
	{"add-br", "BRIDGE [datapath_id=HEX16] [fail_mode=MODE]", "create a bridge", 1, -1, []string{"--may-exist"}, true, opAddBr},
	{"del-br", "BRIDGE", "delete a bridge and all its ports", 1, 1, []string{"--if-exists"}, true, opDelBr},
	{"list-br", "", "print the bridges' names", 0, 0, nil, false, opListBr},
	{"br-exists", "BRIDGE", "exit 0 if BRIDGE exists, 2 if not", 1, 1, nil, false, opBrExists},
	{"add-port", "BRIDGE PORT [--] [type=TYPE] [options:KEY=VALUE]... [ofport_request=N] [other_config:KEY=VALUE]...",
		"attach a port; TYPE is afxdp, afpacket, tap, internal, vhostuser, vhostuserclient, vxlan, geneve or patch (none: afxdp if it works, else afpacket)", 2, -1, []string{"--may-exist"}, true, opAddPort},
	{"del-port", "[BRIDGE] PORT", "detach a port", 1, 2, []string{"--if-exists", "--with-iface"}, true, opDelPort},
	{"list-ports", "BRIDGE", "print the ports of a bridge", 1, 1, nil, false, opListPorts},
	{"port-to-br", "PORT", "print the bridge that holds PORT", 1, 1, nil, false, opPortToBr},
	{"set", "TABLE RECORD COLUMN[:KEY]=VALUE...", "set values (tables: Open_vSwitch, Bridge, Port, Interface)", 3, -1, []string{"--if-exists"}, true, opSet},
	{"get", "TABLE RECORD COLUMN[:KEY]...", "print values (Interface also: ofport, error, statistics, link_state, link_speed, mac_in_use, admin_state, ifindex, mtu, status, as the switch last reported them)", 3, -1, []string{"--if-exists"}, false, opGet},
	{"remove", "TABLE RECORD COLUMN KEY|VALUE...", "remove keys from a map column, or values from a set column (tag, trunks, controller, ofport_request)", 4, -1, []string{"--if-exists"}, true, opRemove},
	{"clear", "TABLE RECORD COLUMN...", "empty columns: maps to {}, sets to []", 3, -1, []string{"--if-exists"}, true, opClear},
	{"list", "TABLE [RECORD...]", "print every column of the records (all of the table without RECORD)", 1, -1, []string{"--if-exists"}, false, opList},
	{"find", "TABLE [COLUMN[:KEY]=VALUE...]", "print the records whose columns have these values", 1, -1, nil, false, opFind},
	{"set-controller", "BRIDGE TARGET...", "replace the bridge's controllers (tcp:IP:PORT, ssl:IP:PORT, unix:PATH, ptcp:PORT[:IP], pssl:PORT[:IP], punix:PATH)", 2, -1, nil, true, opSetController},
	{"del-controller", "BRIDGE", "remove the bridge's controllers", 1, 1, nil, true, opDelController},
	{"set-fail-mode", "BRIDGE standalone|secure", "what the bridge does while no controller is connected", 2, 2, nil, true, opSetFailMode},
	{"get-fail-mode", "BRIDGE", "print the fail mode", 1, 1, nil, false, opGetFailMode},
	{"del-fail-mode", "BRIDGE", "back to the default fail mode (standalone)", 1, 1, nil, true, opDelFailMode},
	{"set-ssl", "PRIVKEY CERT CACERT", "the switch's private key, its certificate and the CA that signs controllers, for ssl: and pssl: targets (PEM files, checked now)", 3, 3, nil, true, opSetSSL},
	{"get-ssl", "", "print the files set-ssl gave", 0, 0, nil, false, opGetSSL},
	{"del-ssl", "", "forget the set-ssl files (ssl: and pssl: targets stop working)", 0, 0, nil, true, opDelSSL},
}

// Lookup returns the command named name.
func Lookup(name string) (Command, bool) { return lookup(name) }

func lookup(name string) (Command, bool) {
	for _, c := range Commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// CheckArgs refuses an argument count or an option the command does not
// take.
func (c Command) CheckArgs(args []string) error { return c.check(args) }

func (c Command) check(args []string) error {
	n := 0
	for _, a := range args {
		switch {
		case a == "--":
		case isFlag(a):
			if !slices.Contains(c.Options, a) {
				if len(c.Options) == 0 {
					return fmt.Errorf("%s: unknown option %q (it takes none)", c.Name, a)
				}
				return fmt.Errorf("%s: unknown option %q (it takes %s)", c.Name, a, strings.Join(c.Options, ", "))
			}
		default:
			n++
		}
	}
	if n < c.MinArgs || (c.MaxArgs >= 0 && n > c.MaxArgs) {
		return fmt.Errorf("%s: wrong number of arguments\nusage: vsctl %s %s", c.Name, c.Name, c.Args)
	}
	return nil
}

// noSuchBridge is the error of every command naming an unknown bridge.
func noSuchBridge(name string) error { return fmt.Errorf("no such bridge %q", name) }

// isFlag reports whether an argument is one of the flags commands accept
// (--may-exist, --if-exists); "--" alone separates like ovs-vsctl's.
func isFlag(a string) bool { return strings.HasPrefix(a, "--") }

// splitFlags separates the flags from the positional arguments and refuses
// flags the command does not take.
func splitFlags(args []string, allowed ...string) (map[string]bool, []string, error) {
	flags := map[string]bool{}
	var pos []string
	for _, a := range args {
		switch {
		case a == "--":
		case isFlag(a):
			if !slices.Contains(allowed, a) {
				return nil, nil, fmt.Errorf("unknown option %q", a)
			}
			flags[a] = true
		default:
			pos = append(pos, a)
		}
	}
	return flags, pos, nil
}

// bridgeOf returns bridge name of c or the error every command gives.
func bridgeOf(c *config.Config, name string) (*config.Bridge, error) {
	b := c.Bridges[name]
	if b == nil {
		return nil, noSuchBridge(name)
	}
	return b, nil
}

// lines returns a result listing names one per line.
func lines(names []string) Result {
	if names == nil {
		names = []string{}
	}
	var sb strings.Builder
	for _, n := range names {
		sb.WriteString(n)
		sb.WriteByte('\n')
	}
	return Result{Text: sb.String(), Data: names}
}

// parseUint32 parses a decimal port number.
func parseUint32(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	return uint32(n), err
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// opSetSSL checks the three files (they exist, parse, the key matches
// the certificate, the CA file holds a certificate) before anything is
// written: a bad file is refused with the reason and changes nothing.
// Relative paths are made absolute: the daemon does not share the
// caller's working directory.
func opSetSSL(_ *state, c *config.Config, args []string) (post, error) {
	abs := make([]string, len(args))
	for i, p := range args {
		a, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		abs[i] = a
	}
	ssl := config.SSL{PrivateKey: abs[0], Certificate: abs[1], CACert: abs[2]}
	f := ofconn.TLSFiles{PrivateKey: ssl.PrivateKey, Certificate: ssl.Certificate, CACert: ssl.CACert}
	if err := f.Check(); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "ofconn: "))
	}
	c.SSL = &ssl
	return noResult, nil
}

func opGetSSL(_ *state, c *config.Config, _ []string) (post, error) {
	if c.SSL == nil {
		return result(Result{Data: struct{}{}}), nil
	}
	ssl := *c.SSL
	text := fmt.Sprintf("Private key: %s\nCertificate: %s\nCA Certificate: %s\n", ssl.PrivateKey, ssl.Certificate, ssl.CACert)
	return result(Result{Text: text, Data: ssl}), nil
}

func opDelSSL(_ *state, c *config.Config, _ []string) (post, error) {
	c.SSL = nil
	return noResult, nil
}

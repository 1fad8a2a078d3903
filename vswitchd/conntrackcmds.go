package vswitchd

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/vswitchd/unixctl"
)

// The connection-tracking commands of ovs-appctl's dpctl/ family, on the
// tracker every bridge shares, with Open vSwitch's arguments and output.

func (d *Daemon) conntrackCommands() []unixctl.Command {
	return []unixctl.Command{
		{Name: "dpctl/dump-conntrack", Usage: "[-m] [-s] [dp] [zone=N]", MaxArgs: 4, Run: d.ctlDumpConntrack},
		{Name: "dpctl/flush-conntrack", Usage: "[dp] [zone=N]", MaxArgs: 3, Run: d.ctlFlushConntrack},
		{Name: "dpctl/ct-stats-show", Usage: "[dp] [zone=N] [verbose]", MaxArgs: 3, Run: d.ctlCTStatsShow},
		{Name: "dpctl/ct-set-maxconns", Usage: "[dp] maxconns", MinArgs: 1, MaxArgs: 2, Run: d.ctlCTSetMaxConns},
		{Name: "dpctl/ct-get-maxconns", Usage: "[dp]", MaxArgs: 1, Run: d.ctlCTGetMaxConns},
		{Name: "dpctl/ct-get-nconns", Usage: "[dp]", MaxArgs: 1, Run: d.ctlCTGetNConns},
	}
}

// ctArgs reads the arguments the conntrack commands share: the datapath's
// name (there is one), zone=N, and the options in flags; anything else is
// returned in rest.
func ctArgs(args []string, flags ...string) (zone *uint16, set map[string]bool, rest []string, err error) {
	set = map[string]bool{}
	for _, a := range args {
		switch {
		case a == ovsDatapathName || a == strings.TrimPrefix(ovsDatapathName, "netdev@"):
		case strings.HasPrefix(a, "zone="):
			z, perr := strconv.ParseUint(strings.TrimPrefix(a, "zone="), 0, 16)
			if perr != nil {
				return nil, nil, nil, fmt.Errorf("invalid zone %q", strings.TrimPrefix(a, "zone="))
			}
			zz := uint16(z)
			zone = &zz
		case slices.Contains(flags, a):
			set[a] = true
		case strings.HasPrefix(a, "-"):
			return nil, nil, nil, fmt.Errorf("unknown option %q", a)
		default:
			rest = append(rest, a)
		}
	}
	return zone, set, rest, nil
}

func (d *Daemon) ctlDumpConntrack(args []string) (string, error) {
	zone, set, rest, err := ctArgs(args, "-m", "--more", "-s", "--statistics")
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("no datapath named %q (there is one: %s)", rest[0], ovsDatapathName)
	}
	var b strings.Builder
	now := datapath.Now()
	for _, e := range d.ct.Dump(zone, now) {
		b.WriteString(e.String())
		if set["-s"] || set["--statistics"] {
			fmt.Fprintf(&b, ",timeout=%d", e.Timeout)
		}
		b.WriteByte('\n')
	}
	return b.String(), nil
}

func (d *Daemon) ctlFlushConntrack(args []string) (string, error) {
	zone, _, rest, err := ctArgs(args)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		// A tuple (ct_nw_src=...,...) selects one connection in Open
		// vSwitch; refused rather than flushing more than was asked.
		return "", fmt.Errorf("flushing one connection by its tuple (%q) is not supported; flush its zone", rest[0])
	}
	d.ct.Flush(zone)
	return "", nil
}

func (d *Daemon) ctlCTStatsShow(args []string) (string, error) {
	zone, set, rest, err := ctArgs(args, "verbose", "-m", "--more")
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("no datapath named %q (there is one: %s)", rest[0], ovsDatapathName)
	}
	verbose := set["verbose"] || set["-m"] || set["--more"]
	byProto := map[string]int{}
	tcpStates := map[string]int{}
	es := d.ct.Dump(zone, datapath.Now())
	for _, e := range es {
		byProto[strings.ToUpper(e.Proto())]++
		if e.TCPState != "" {
			tcpStates[e.TCPState]++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Connections Stats:\n    Total: %d\n", len(es))
	for _, p := range []string{"TCP", "UDP", "UDPLITE", "SCTP", "ICMP", "DCCP", "IGMP", "ICMPV6"} {
		if n := byProto[p]; n > 0 {
			label := p
			if p == "ICMPV6" {
				label = "ICMPv6"
			}
			fmt.Fprintf(&b, "  %s: %d\n", label, n)
			delete(byProto, p)
			if p == "TCP" && verbose {
				b.WriteString("    Conn per TCP states:\n")
				for _, s := range []string{"CLOSED", "SYN_SENT", "ESTABLISHED", "CLOSING", "FIN_WAIT_2", "TIME_WAIT"} {
					if n := tcpStates[s]; n > 0 {
						fmt.Fprintf(&b, "\t%s: %d\n", s, n)
					}
				}
			}
		}
	}
	other := 0
	for _, n := range byProto {
		other += n
	}
	if other > 0 {
		fmt.Fprintf(&b, "  Others: %d\n", other)
	}
	return b.String(), nil
}

func (d *Daemon) ctlCTSetMaxConns(args []string) (string, error) {
	_, _, rest, err := ctArgs(args)
	if err != nil {
		return "", err
	}
	if len(rest) != 1 {
		return "", errors.New("maxconns missing or malformed")
	}
	n, err := strconv.ParseUint(rest[0], 10, 32)
	if err != nil {
		return "", errors.New("maxconns missing or malformed")
	}
	d.ct.SetMaxConns(int64(n))
	return "setting maxconns successful", nil
}

func (d *Daemon) ctlCTGetMaxConns(args []string) (string, error) {
	if err := ctNoArgs(args); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d\n", d.ct.MaxConns()), nil
}

func (d *Daemon) ctlCTGetNConns(args []string) (string, error) {
	if err := ctNoArgs(args); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d\n", d.ct.Len()), nil
}

// ctNoArgs accepts the datapath's name and nothing else.
func ctNoArgs(args []string) error {
	_, _, rest, err := ctArgs(args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("no datapath named %q (there is one: %s)", rest[0], ovsDatapathName)
	}
	return err
}

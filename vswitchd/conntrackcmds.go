package vswitchd

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/datapath/ipf"
	"github.com/vswitch-go/vswitch/vswitchd/unixctl"
)

// The connection-tracking commands of ovs-appctl's dpctl/ family, on the
// tracker every bridge shares, with Open vSwitch's arguments and output.

func (d *Daemon) conntrackCommands() []unixctl.Command {
	return []unixctl.Command{
		{Name: "dpctl/dump-conntrack", Usage: "[-m] [-s] [dp] [zone=N]", MaxArgs: 4, Run: d.ctlDumpConntrack},
		{Name: "dpctl/flush-conntrack", Usage: "[dp] [zone=N] [ct-orig-tuple [ct-reply-tuple]]", MaxArgs: 4, Run: d.ctlFlushConntrack},
		{Name: "dpctl/ct-stats-show", Usage: "[dp] [zone=N] [verbose]", MaxArgs: 3, Run: d.ctlCTStatsShow},
		{Name: "dpctl/ct-set-maxconns", Usage: "[dp] maxconns", MinArgs: 1, MaxArgs: 2, Run: d.ctlCTSetMaxConns},
		{Name: "dpctl/ct-get-maxconns", Usage: "[dp]", MaxArgs: 1, Run: d.ctlCTGetMaxConns},
		{Name: "dpctl/ct-get-nconns", Usage: "[dp]", MaxArgs: 1, Run: d.ctlCTGetNConns},
		{Name: "dpctl/ct-set-limits", Usage: "[dp] [default=L] [zone=N,limit=L]...", MinArgs: 1, MaxArgs: 1 << 16, Run: d.ctlCTSetLimits},
		{Name: "dpctl/ct-del-limits", Usage: "[dp] zone=N1[,N2]...", MinArgs: 1, MaxArgs: 2, Run: d.ctlCTDelLimits},
		{Name: "dpctl/ct-get-limits", Usage: "[dp] [zone=N1[,N2]...]", MaxArgs: 2, Run: d.ctlCTGetLimits},
		{Name: "dpctl/ipf-set-enabled", Usage: "[dp] v4|v6", MinArgs: 1, MaxArgs: 2, Run: d.ctlIPFSetEnabled(true)},
		{Name: "dpctl/ipf-set-disabled", Usage: "[dp] v4|v6", MinArgs: 1, MaxArgs: 2, Run: d.ctlIPFSetEnabled(false)},
		{Name: "dpctl/ipf-set-min-frag", Usage: "[dp] v4|v6 minfragment", MinArgs: 2, MaxArgs: 3, Run: d.ctlIPFSetMinFrag},
		{Name: "dpctl/ipf-set-max-nfrags", Usage: "[dp] maxfrags", MinArgs: 1, MaxArgs: 2, Run: d.ctlIPFSetMaxNFrags},
		{Name: "dpctl/ipf-get-status", Usage: "[dp]", MaxArgs: 1, Run: d.ctlIPFGetStatus},
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
	if len(rest) > 2 {
		return "", errors.New("invalid arguments")
	}
	// The original tuple, then the reply tuple; either may be "".
	var m conntrack.Match
	for i, tu := range []*conntrack.MatchTuple{&m.Orig, &m.Reply}[:len(rest)] {
		if err := conntrack.ParseMatchTuple(rest[i], &m, tu); err != nil {
			return "", err
		}
	}
	d.ct.FlushMatch(zone, &m)
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

// ctLimitArgs drops the datapath's name from the front of a limits
// command's arguments.
func ctLimitArgs(args []string) []string {
	if len(args) > 0 && (args[0] == ovsDatapathName || args[0] == strings.TrimPrefix(ovsDatapathName, "netdev@")) {
		return args[1:]
	}
	return args
}

// ctZoneList reads "zone=N1[,N2]...".
func ctZoneList(arg string) ([]uint16, error) {
	list, ok := strings.CutPrefix(arg, "zone=")
	if !ok {
		return nil, fmt.Errorf("invalid argument %s", arg)
	}
	var zones []uint16
	for z := range strings.SplitSeq(list, ",") {
		n, err := strconv.ParseUint(z, 10, 16)
		if err != nil {
			return nil, errors.New("invalid zone")
		}
		zones = append(zones, uint16(n))
	}
	return zones, nil
}

// ctlCTSetLimits sets the default and per-zone connection limits, all
// arguments read before any is applied, so that a bad one changes
// nothing.
func (d *Daemon) ctlCTSetLimits(args []string) (string, error) {
	args = ctLimitArgs(args)
	var def *int64
	if len(args) > 0 && strings.HasPrefix(args[0], "default=") {
		n, err := strconv.ParseUint(strings.TrimPrefix(args[0], "default="), 10, 32)
		if err != nil {
			return "", errors.New("invalid default limit")
		}
		def = new(int64(n))
		args = args[1:]
	}
	type zoneLimit struct {
		zone  uint16
		limit int64
	}
	var zls []zoneLimit
	for _, a := range args {
		var zone, limit uint64
		var err error
		zs, ls, ok := strings.Cut(a, ",")
		z, zok := strings.CutPrefix(zs, "zone=")
		l, lok := strings.CutPrefix(ls, "limit=")
		if !ok || !zok || !lok {
			return "", fmt.Errorf("invalid zone limit %q, want zone=N,limit=L", a)
		}
		if zone, err = strconv.ParseUint(z, 10, 16); err != nil {
			return "", fmt.Errorf("invalid zone %q", z)
		}
		if limit, err = strconv.ParseUint(l, 10, 32); err != nil {
			return "", fmt.Errorf("invalid limit %q", l)
		}
		zls = append(zls, zoneLimit{uint16(zone), int64(limit)})
	}
	if def == nil && len(zls) == 0 {
		return "", errors.New("no limit given")
	}
	if def != nil {
		d.ct.SetDefaultZoneLimit(*def)
	}
	for _, zl := range zls {
		d.ct.SetZoneLimit(zl.zone, zl.limit)
	}
	return "", nil
}

func (d *Daemon) ctlCTDelLimits(args []string) (string, error) {
	args = ctLimitArgs(args)
	if len(args) != 1 {
		return "", errors.New("zone=N1[,N2]... missing")
	}
	zones, err := ctZoneList(args[0])
	if err != nil {
		return "", err
	}
	for _, z := range zones {
		d.ct.DeleteZoneLimit(z)
	}
	return "", nil
}

// ctlCTGetLimits prints the limits as Open vSwitch does: the default, then
// the zones asked for, or every zone with a limit of its own.
func (d *Daemon) ctlCTGetLimits(args []string) (string, error) {
	args = ctLimitArgs(args)
	var zones []uint16
	if len(args) > 0 {
		var err error
		if zones, err = ctZoneList(args[0]); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "default limit=%d", d.ct.DefaultZoneLimit())
	for _, zl := range d.ct.ZoneLimits(zones) {
		fmt.Fprintf(&b, "\nzone=%d,limit=%d,count=%d", zl.Zone, zl.Limit, zl.Count)
	}
	b.WriteByte('\n')
	return b.String(), nil
}

// The fragment reassembly commands (dpctl/ipf-*), with Open vSwitch's
// arguments, bounds and messages.

func (d *Daemon) ctlIPFSetEnabled(enabled bool) func([]string) (string, error) {
	verb := map[bool]string{true: "enabling", false: "disabling"}[enabled]
	return func(args []string) (string, error) {
		args = ctLimitArgs(args)
		if len(args) != 1 || args[0] != "v4" && args[0] != "v6" {
			return "", errors.New("parameter missing: 'v4' for IPv4 or 'v6' for IPv6")
		}
		flag := &d.ipf.V4Disabled
		if args[0] == "v6" {
			flag = &d.ipf.V6Disabled
		}
		flag.Store(!enabled)
		return verb + " fragmentation reassembly successful", nil
	}
}

// Bounds of Open vSwitch's ipf settings.
const (
	ipfMinFragLowest = 400
	ipfMaxFragsUpper = 5000
)

func (d *Daemon) ctlIPFSetMinFrag(args []string) (string, error) {
	args = ctLimitArgs(args)
	if len(args) != 2 || args[0] != "v4" && args[0] != "v6" {
		return "", errors.New("parameter missing: v4 for IPv4 or v6 for IPv6")
	}
	n, err := strconv.ParseUint(args[1], 10, 32)
	if err != nil {
		return "", errors.New("parameter missing for minimum fragment size")
	}
	if n < ipfMinFragLowest {
		return "", errors.New("requested minimum fragment size too small; see documentation")
	}
	if args[0] == "v6" {
		d.ipf.MinFragV6.Store(int64(n))
	} else {
		d.ipf.MinFragV4.Store(int64(n))
	}
	return "setting minimum fragment size successful", nil
}

func (d *Daemon) ctlIPFSetMaxNFrags(args []string) (string, error) {
	args = ctLimitArgs(args)
	if len(args) != 1 {
		return "", errors.New("parameter missing for maximum fragments")
	}
	n, err := strconv.ParseUint(args[0], 10, 32)
	if err != nil {
		return "", errors.New("parameter missing for maximum fragments")
	}
	if n > ipfMaxFragsUpper {
		return "", errors.New("setting maximum fragments failed")
	}
	d.ipf.MaxFrags.Store(int64(n))
	return "setting maximum fragments successful", nil
}

func (d *Daemon) ctlIPFGetStatus(args []string) (string, error) {
	if err := ctNoArgs(args); err != nil {
		return "", err
	}
	var v4, v6 ipf.Stats
	var held int64
	for _, b := range d.bridgeList() {
		s4, s6, h := b.dp.FragmentStats()
		s4.Add(&v4)
		s6.Add(&v6)
		held += h
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, "        "+format+"\n", a...) }
	b01 := func(disabled bool) int { return map[bool]int{true: 0, false: 1}[disabled] }
	p("Fragmentation Module Status")
	p("---------------------------")
	p("v4 enabled: %d", b01(d.ipf.V4Disabled.Load()))
	p("v6 enabled: %d", b01(d.ipf.V6Disabled.Load()))
	p("max num frags (v4/v6): %d", d.ipf.MaxFrags.Load())
	p("num frag: %d", held)
	for _, v := range []struct {
		name string
		min  int64
		st   ipf.Stats
	}{{"v4", d.ipf.MinFragV4.Load(), v4}, {"v6", d.ipf.MinFragV6.Load(), v6}} {
		p("min %s frag size: %d", v.name, v.min)
		p("%s frags accepted: %d", v.name, v.st.Accepted)
		p("%s frags completed: %d", v.name, v.st.Completed)
		p("%s frags expired: %d", v.name, v.st.Expired)
		p("%s frags too small: %d", v.name, v.st.TooSmall)
		p("%s frags overlapped: %d", v.name, v.st.Overlapped)
		p("%s frags purged: %d", v.name, v.st.Purged)
	}
	return b.String(), nil
}

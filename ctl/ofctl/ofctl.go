// Package ofctl implements the OpenFlow subcommands of vsctl, the
// equivalents of `ovs-ofctl -O OpenFlow13 add-flow`, dump-flows and the
// rest, in plain OpenFlow 1.3 so that they work against any OpenFlow 1.3
// switch. Texts use ovs-ofctl's syntax (ofproto/ofptext); outputs are
// ovs-ofctl's, or JSON with Options.JSON.
//
// Every command parses its arguments completely before it changes
// anything: a bad flow fails without a connection being made. Port names
// (in_port=veth1, output:veth2) are resolved through a PORT_DESC request,
// as ovs-ofctl does. Every change ends with a barrier, so an error the
// switch answers with is returned, not lost.
package ofctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vswitch-go/vswitch/ctl/ofclient"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Command describes one subcommand for help and argument checking. Args
// excludes the switch target; MaxArgs -1 means no limit.
type Command struct {
	Name, Args, Help string
	MinArgs, MaxArgs int
}

// Options are the flags that change what commands do or print.
type Options struct {
	// JSON prints the data of dump commands as JSON instead of
	// ovs-ofctl's text.
	JSON bool
	// Strict makes mod-flows and del-flows match priority and the whole
	// match exactly (MODIFY_STRICT, DELETE_STRICT).
	Strict bool
	// NoStats leaves the duration and counters out of dump-flows, like
	// ovs-ofctl --no-stats.
	NoStats bool
	// Sort and RSort order dump-flows by a field ("priority" or a match
	// field such as "in_port", "nw_src"), ascending or descending, like
	// ovs-ofctl --sort/--rsort; flows without the field come last.
	// Without either, flows are printed in the order the switch sent them.
	Sort, RSort string
	// Names prints port names instead of numbers in dump-flows, like
	// ovs-ofctl --names.
	Names bool
	// Readd makes replace-flows add every flow of the file again, even
	// those the switch already has unchanged (their counters restart).
	Readd bool
	// Stdin is what add-flows reads for "-"; nil means os.Stdin.
	Stdin io.Reader
}

// Commands lists the subcommands.
var Commands = []Command{
	{"add-flow", "FLOW", "add a flow", 1, 1},
	{"add-flows", "FILE", "add the flows in FILE (\"-\" for stdin), one a line; a line may start with add, modify, modify_strict, delete or delete_strict", 1, 1},
	{"mod-flows", "FLOW", "modify the actions of matching flows (--strict: the flow with exactly this match and priority)", 1, 1},
	{"del-flows", "[FLOW]", "delete matching flows, or all (--strict: exactly this match and priority)", 0, 1},
	{"dump-flows", "[FLOW]", "print matching flows, or all", 0, 1},
	{"dump-ports", "[PORT]", "print port statistics", 0, 1},
	{"dump-ports-desc", "[PORT]", "print port descriptions", 0, 1},
	{"add-group", "GROUP", "add a group", 1, 1},
	{"mod-group", "GROUP", "modify a group", 1, 1},
	{"del-groups", "[GROUP]", "delete a group (group_id=N), or all", 0, 1},
	{"dump-groups", "[GROUP]", "print group descriptions", 0, 1},
	{"add-meter", "METER", "add a meter", 1, 1},
	{"mod-meter", "METER", "modify a meter", 1, 1},
	{"del-meters", "[METER]", "delete a meter (meter=N), or all", 0, 1},
	{"dump-meters", "[METER]", "print meter configurations", 0, 1},
	{"packet-out", "in_port=N packet=HEX actions=ACTIONS", "send a packet through actions (actions=TABLE: through the flow tables)", 1, -1},
	{"dump-tables", "", "print each flow table's active flows, lookups and matches", 0, 0},
	{"dump-aggregate", "[FLOW]", "print the packets, bytes and number of the matching flows", 0, 1},
	{"dump-table-features", "", "print what each table can match and do", 0, 0},
	{"dump-group-stats", "[GROUP]", "print group counters (and each bucket's)", 0, 1},
	{"meter-stats", "[METER]", "print meter counters (and each band's)", 0, 1},
	{"meter-features", "", "print what meters the switch supports", 0, 0},
	{"queue-stats", "[PORT [QUEUE]]", "print queue counters (this switch has no queues: always none)", 0, 2},
	{"mod-port", "PORT up|down|receive|no-receive|forward|no-forward|flood|no-flood|packet-in|no-packet-in", "change a port's OpenFlow configuration", 2, 2},
	{"replace-flows", "FILE", "make the flows those of FILE, changing only the differences, in one transaction (--readd: re-add unchanged ones too)", 1, 1},
	{"diff-flows", "SOURCE2", "print the flows that differ between BRIDGE (or a file) and SOURCE2 (a bridge, target or file); exit 1 if they differ", 1, 1},
}

// runners are the implementations, by command name.
var runners = map[string]func(ctx context.Context, s *session, args []string) error{
	"add-flow":        addFlow,
	"add-flows":       addFlows,
	"mod-flows":       modFlows,
	"del-flows":       delFlows,
	"dump-flows":      dumpFlows,
	"dump-ports":      dumpPorts,
	"dump-ports-desc": dumpPortsDesc,
	"add-group":       groupCmd(ofpwire.GroupAdd),
	"mod-group":       groupCmd(ofpwire.GroupModify),
	"del-groups":      groupCmd(ofpwire.GroupDelete),
	"dump-groups":     dumpGroups,
	"add-meter":       meterCmd(ofpwire.MeterAdd),
	"mod-meter":       meterCmd(ofpwire.MeterModify),
	"del-meters":      meterCmd(ofpwire.MeterDelete),
	"dump-meters":     dumpMeters,
	"packet-out":      packetOut,

	"dump-tables":         dumpTables,
	"dump-aggregate":      dumpAggregate,
	"dump-table-features": dumpTableFeatures,
	"dump-group-stats":    dumpGroupStats,
	"meter-stats":         meterStats,
	"meter-features":      meterFeatures,
	"queue-stats":         queueStats,
	"mod-port":            modPort,
	"replace-flows":       replaceFlows,
	"diff-flows":          diffFlows,
}

// Lookup returns the command called name.
func Lookup(name string) (Command, bool) {
	for _, c := range Commands {
		if c.Name == name {
			return c, true
		}
	}
	return Command{}, false
}

// Run performs command name with args against the switch at target
// (unix:PATH, tcp:HOST:PORT or a socket path), writing its output to out.
func Run(ctx context.Context, target, name string, args []string, out io.Writer, opts Options) error {
	c, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("unknown command %q", name)
	}
	if len(args) < c.MinArgs || c.MaxArgs >= 0 && len(args) > c.MaxArgs {
		return fmt.Errorf("%s: usage: %s SWITCH %s", name, name, c.Args)
	}
	cw := &countingWriter{w: out}
	s := &session{target: target, out: cw, opts: opts}
	defer s.close()
	if err := runners[name](ctx, s, args); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if opts.JSON && cw.n == 0 {
		// Commands that print nothing print an empty object, so that
		// every command's JSON output is one document.
		_, err := io.WriteString(out, "{}\n")
		return err
	}
	return nil
}

// session is one command's connection, made when first needed.
type session struct {
	target string
	out    io.Writer
	opts   Options
	c      *ofclient.Client
	ports  []ofpwire.Port // PORT_DESC, fetched once
}

func (s *session) client(ctx context.Context) (*ofclient.Client, error) {
	if s.c == nil {
		c, err := ofclient.Dial(ctx, s.target)
		if err != nil {
			return nil, err
		}
		s.c = c
	}
	return s.c, nil
}

// multipart sends one multipart request and returns its reply's xid and
// body (all parts joined).
func (s *session) multipart(ctx context.Context, req ofpwire.MultipartRequestBody) (uint32, ofpwire.MultipartReplyBody, error) {
	c, err := s.client(ctx)
	if err != nil {
		return 0, nil, err
	}
	return c.MultipartXID(ctx, req)
}

// groupArg is the group a command's optional GROUP argument names, or
// every group.
func groupArg(args []string) (ofpwire.Group, error) {
	if len(args) == 0 {
		return ofpwire.GroupAll, nil
	}
	gm, err := ofptext.ParseGroup(args[0], ofpwire.GroupDelete, ofptext.ParseFlowOptions{})
	if err != nil {
		return 0, err
	}
	return gm.GroupID, nil
}

// meterArg is the meter a command's optional METER argument names, or
// every meter.
func meterArg(args []string) (ofpwire.Meter, error) {
	if len(args) == 0 {
		return ofpwire.MeterAll, nil
	}
	mm, err := ofptext.ParseMeter(args[0], ofpwire.MeterDelete)
	if err != nil {
		return 0, err
	}
	return mm.MeterID, nil
}

func (s *session) close() {
	if s.c != nil {
		s.c.Close()
	}
}

// portDesc fetches the switch's ports once.
func (s *session) portDesc(ctx context.Context) ([]ofpwire.Port, error) {
	if s.ports != nil {
		return s.ports, nil
	}
	c, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	body, err := c.Multipart(ctx, &ofpwire.PortDescRequest{})
	if err != nil {
		return nil, fmt.Errorf("reading port names: %w", err)
	}
	s.ports = body.(*ofpwire.PortDescReply).Ports
	if s.ports == nil {
		s.ports = []ofpwire.Port{}
	}
	return s.ports, nil
}

// parse runs parse twice if needed: first with a resolver that takes any
// port name, so that every other mistake is reported before a connection
// is made; then, if names were used, with the switch's real port names.
func (s *session) parse(ctx context.Context, parse func(ofptext.ParseFlowOptions) error) error {
	named := false
	probe := func(string) (uint32, bool) { named = true; return 1, true }
	if err := parse(ofptext.ParseFlowOptions{PortByName: probe}); err != nil {
		return err
	}
	if !named {
		return nil
	}
	ports, err := s.portDesc(ctx)
	if err != nil {
		return err
	}
	byName := make(map[string]uint32, len(ports))
	for _, p := range ports {
		byName[p.Name] = uint32(p.PortNo)
	}
	return parse(ofptext.ParseFlowOptions{PortByName: func(n string) (uint32, bool) {
		no, ok := byName[n]
		return no, ok
	}})
}

// transact sends msgs and a barrier; errors name what failed through
// describe(index).
func (s *session) transact(ctx context.Context, describe func(i int) string, msgs ...ofpwire.Message) error {
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	err = c.Transact(ctx, msgs...)
	if err == nil {
		return nil
	}
	var parts []error
	for _, e := range unjoin(err) {
		var oe *ofclient.Error
		if errors.As(e, &oe) && describe != nil {
			e = fmt.Errorf("%s: switch refused it: %w", describe(oe.Index), e)
		}
		parts = append(parts, e)
	}
	return errors.Join(parts...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func (s *session) flowCommand(ctx context.Context, text string, cmd ofptext.Command) error {
	var fm *ofpwire.FlowMod
	if err := s.parse(ctx, func(o ofptext.ParseFlowOptions) (err error) {
		fm, err = ofptext.ParseFlowWith(text, cmd, o)
		return err
	}); err != nil {
		return err
	}
	return s.transact(ctx, func(int) string { return fmt.Sprintf("flow %q", text) }, fm)
}

func addFlow(ctx context.Context, s *session, args []string) error {
	return s.flowCommand(ctx, args[0], ofptext.Add)
}

func modFlows(ctx context.Context, s *session, args []string) error {
	cmd := ofptext.Modify
	if s.opts.Strict {
		cmd = ofptext.ModifyStrict
	}
	return s.flowCommand(ctx, args[0], cmd)
}

func delFlows(ctx context.Context, s *session, args []string) error {
	cmd := ofptext.Delete
	if s.opts.Strict {
		cmd = ofptext.DeleteStrict
	}
	text := ""
	if len(args) > 0 {
		text = args[0]
	}
	return s.flowCommand(ctx, text, cmd)
}

// fileCommands are the words a line of add-flows may start with.
var fileCommands = map[string]ofptext.Command{
	"add": ofptext.Add, "modify": ofptext.Modify, "modify_strict": ofptext.ModifyStrict,
	"delete": ofptext.Delete, "delete_strict": ofptext.DeleteStrict,
}

type fileFlow struct {
	line int
	text string
	cmd  ofptext.Command
}

func readFlowFile(name string, stdin io.Reader) ([]fileFlow, error) {
	var r io.Reader
	if name == "-" {
		r = stdin
		if r == nil {
			r = os.Stdin
		}
	} else {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var out []fileFlow
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The header ovs-ofctl -O OpenFlow13 dump-flows prints, so that
		// its output reads back as it is.
		if n == 1 && strings.HasPrefix(line, "OFPST_FLOW reply") {
			continue
		}
		ff := fileFlow{line: n, text: line, cmd: ofptext.Add}
		if word, rest, ok := strings.Cut(line, " "); ok {
			if c, known := fileCommands[strings.ToLower(word)]; known {
				ff.cmd, ff.text = c, strings.TrimSpace(rest)
			}
		}
		out = append(out, ff)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func addFlows(ctx context.Context, s *session, args []string) error {
	flows, err := readFlowFile(args[0], s.opts.Stdin)
	if err != nil {
		return err
	}
	msgs := make([]ofpwire.Message, len(flows))
	if err := s.parse(ctx, func(o ofptext.ParseFlowOptions) error {
		for i, f := range flows {
			fm, err := ofptext.ParseFlowWith(f.text, f.cmd, o)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", args[0], f.line, err)
			}
			msgs[i] = fm
		}
		return nil
	}); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return nil
	}
	return s.transact(ctx, func(i int) string {
		return fmt.Sprintf("%s:%d: flow %q", args[0], flows[i].line, flows[i].text)
	}, msgs...)
}

func groupCmd(cmd ofpwire.GroupCommand) func(context.Context, *session, []string) error {
	return func(ctx context.Context, s *session, args []string) error {
		text := ""
		if len(args) > 0 {
			text = args[0]
		}
		var gm *ofpwire.GroupMod
		if err := s.parse(ctx, func(o ofptext.ParseFlowOptions) (err error) {
			gm, err = ofptext.ParseGroup(text, cmd, o)
			return err
		}); err != nil {
			return err
		}
		return s.transact(ctx, func(int) string { return fmt.Sprintf("group %q", text) }, gm)
	}
}

func meterCmd(cmd ofpwire.MeterCommand) func(context.Context, *session, []string) error {
	return func(ctx context.Context, s *session, args []string) error {
		text := ""
		if len(args) > 0 {
			text = args[0]
		}
		mm, err := ofptext.ParseMeter(text, cmd)
		if err != nil {
			return err
		}
		return s.transact(ctx, func(int) string { return fmt.Sprintf("meter %q", text) }, mm)
	}
}

func packetOut(ctx context.Context, s *session, args []string) error {
	text := strings.Join(args, " ")
	var po *ofpwire.PacketOut
	if err := s.parse(ctx, func(o ofptext.ParseFlowOptions) (err error) {
		po, err = ofptext.ParsePacketOut(text, o)
		return err
	}); err != nil {
		return err
	}
	return s.transact(ctx, func(int) string { return "packet-out" }, po)
}

// countingWriter counts what a command printed.
type countingWriter struct {
	w io.Writer
	n int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

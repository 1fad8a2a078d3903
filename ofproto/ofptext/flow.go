package ofptext

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Command is the flow-table operation a parsed flow is meant for; it decides
// which keywords are allowed and the defaults (deletes apply to all tables).
type Command uint8

// The commands, numbered as OFPFC_* so they convert directly.
const (
	Add          Command = Command(ofpwire.FlowAdd)
	Modify       Command = Command(ofpwire.FlowModify)
	ModifyStrict Command = Command(ofpwire.FlowModifyStrict)
	Delete       Command = Command(ofpwire.FlowDelete)
	DeleteStrict Command = Command(ofpwire.FlowDeleteStrict)
)

// DefaultPriority is OFP_DEFAULT_PRIORITY, what ovs-ofctl uses when a flow
// names no priority.
const DefaultPriority = 0x8000

// allTables is OFPTT_ALL, the default table of deletes.
const allTables = 0xff

// maxPort is OFPP_MAX: numbers above it are reserved ports, named by words.
const maxPort = 0xffffff00

func (c Command) isDelete() bool { return c == Delete || c == DeleteStrict }

// defaultTable is the table a flow without table= goes to.
func (c Command) defaultTable() uint8 {
	if c.isDelete() {
		return allTables
	}
	return 0
}

// flagNames are the flow-mod flags in ovs-ofctl's spelling, in bit order.
var flagNames = []struct {
	name string
	flag ofpwire.FlowModFlag
}{
	{"send_flow_rem", ofpwire.FlowFlagSendFlowRem},
	{"check_overlap", ofpwire.FlowFlagCheckOverlap},
	{"reset_counts", ofpwire.FlowFlagResetCounts},
	{"no_packet_counts", ofpwire.FlowFlagNoPktCounts},
	{"no_byte_counts", ofpwire.FlowFlagNoByteCounts},
}

// isSep reports the characters ovs-ofctl treats as separators between
// keywords of a flow.
func isSep(r byte) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' || r == '\n' }

// splitTop splits s at separators outside parentheses, dropping empty parts.
func splitTop(s string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '(':
				depth++
				continue
			case ')':
				depth--
				if depth < 0 {
					return nil, fmt.Errorf("unbalanced parentheses")
				}
				continue
			}
			if depth > 0 || !isSep(s[i]) {
				continue
			}
		}
		if i > start {
			out = append(out, s[start:i])
		}
		start = i + 1
	}
	if depth != 0 {
		return nil, fmt.Errorf("unbalanced parentheses")
	}
	return out, nil
}

// findActions returns the index of the "actions=" keyword that starts a
// token, or -1.
func findActions(s string) int {
	for i := 0; ; {
		j := strings.Index(s[i:], "actions=")
		if j < 0 {
			return -1
		}
		j += i
		if j == 0 || isSep(s[j-1]) {
			return j
		}
		i = j + 1
	}
}

// ParseFlow reads one flow in ovs-ofctl's syntax
// ("[table=N,][priority=N,][cookie=V[/M],]... MATCH, actions=ACTIONS") into
// the FLOW_MOD that performs cmd with it. Errors read
// `bad flow "TEXT": reason`.
func ParseFlow(s string, cmd Command) (*ofpwire.FlowMod, error) {
	return ParseFlowWith(s, cmd, ParseFlowOptions{})
}

// ParseFlowWith is ParseFlow with port names resolved through opts.
func ParseFlowWith(s string, cmd Command, opts ParseFlowOptions) (*ofpwire.FlowMod, error) {
	fm, err := parseFlow(s, cmd, false, opts.PortByName)
	if err != nil {
		return nil, fmt.Errorf("bad flow %q: %w", s, err)
	}
	return fm, nil
}

// ParseDumpedFlow reads a line printed by FormatFlow (or by ovs-ofctl
// dump-flows), ignoring the statistics, as the add-flow it describes.
func ParseDumpedFlow(s string) (*ofpwire.FlowMod, error) {
	fm, err := parseFlow(s, Add, true, nil)
	if err != nil {
		return nil, fmt.Errorf("bad flow %q: %w", s, err)
	}
	return fm, nil
}

// statsKeys are the fields of a dumped flow that describe counters, not the
// flow.
var statsKeys = map[string]bool{
	"duration": true, "n_packets": true, "n_bytes": true, "idle_age": true, "hard_age": true,
}

func parseFlow(s string, cmd Command, dumped bool, ports portResolver) (*ofpwire.FlowMod, error) {
	if cmd > DeleteStrict {
		return nil, fmt.Errorf("unknown command %d", cmd)
	}
	fm := &ofpwire.FlowMod{
		Command:  ofpwire.FlowModCommand(cmd),
		TableID:  cmd.defaultTable(),
		Priority: DefaultPriority,
		BufferID: ofpwire.NoBuffer,
		OutPort:  ofpwire.PortAny,
		OutGroup: ofpwire.GroupAny,
	}
	head, acts, hasActs := s, "", false
	if i := findActions(s); i >= 0 {
		head, acts, hasActs = s[:i], s[i+len("actions="):], true
	}
	if cmd.isDelete() && hasActs {
		return nil, fmt.Errorf("actions are not allowed when deleting flows")
	}
	if !cmd.isDelete() && !hasActs {
		return nil, fmt.Errorf("must specify actions (actions=drop for none)")
	}
	toks, err := splitTop(head)
	if err != nil {
		return nil, err
	}
	var matchToks []string
	seen := map[string]bool{}
	for _, tok := range toks {
		key, val, hasVal := strings.Cut(tok, "=")
		// As ovs-ofctl does, so that a dump-flows line can be fed back
		// to add-flow as it is.
		if statsKeys[key] {
			continue
		}
		handled := true
		switch key {
		case "table", "priority", "cookie", "idle_timeout", "hard_timeout", "out_port", "out_group":
			if !hasVal {
				return nil, fmt.Errorf("%s needs a value", key)
			}
			if seen[key] {
				return nil, fmt.Errorf("%s given twice", key)
			}
			seen[key] = true
			if err := setFlowField(fm, cmd, key, val, ports); err != nil {
				return nil, err
			}
		default:
			handled = false
			for _, f := range flagNames {
				if key == f.name && !hasVal {
					if cmd.isDelete() {
						return nil, fmt.Errorf("%s is not allowed when deleting flows", key)
					}
					fm.Flags |= f.flag
					handled = true
				}
			}
		}
		if !handled {
			if key == "in_port" && hasVal {
				p, err := parseInPort(val, ports)
				if err != nil {
					return nil, err
				}
				tok = "in_port=" + p
			}
			matchToks = append(matchToks, tok)
		}
	}
	m, err := ParseMatch(strings.Join(matchToks, ","))
	if err != nil {
		if me, ok := errors.AsType[*MatchError](err); ok {
			return nil, errors.New(me.Reason)
		}
		return nil, err
	}
	fm.Match = ofmatch.ToOXM(&m)
	if hasActs {
		if fm.Instructions, err = parseInstructions(acts, fm.Match, ports); err != nil {
			return nil, err
		}
	}
	return fm, nil
}

func setFlowField(fm *ofpwire.FlowMod, cmd Command, key, val string, ports portResolver) error {
	num := func(bits int) (uint64, error) {
		v, err := strconv.ParseUint(val, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: bad number %q", key, val)
		}
		if bits < 64 && v >= 1<<bits {
			return 0, fmt.Errorf("%s %s out of range", key, val)
		}
		return v, nil
	}
	switch key {
	case "table":
		v, err := num(8)
		if err != nil {
			return err
		}
		if v == allTables && !cmd.isDelete() {
			return fmt.Errorf("table 255 (all tables) is only for deleting flows")
		}
		fm.TableID = uint8(v)
	case "priority":
		if cmd == Delete {
			return fmt.Errorf("priority is only allowed with strict deletes")
		}
		v, err := num(16)
		if err != nil {
			return err
		}
		fm.Priority = uint16(v)
	case "cookie":
		vs, ms, masked := strings.Cut(val, "/")
		v, err := strconv.ParseUint(vs, 0, 64)
		if err != nil {
			return fmt.Errorf("cookie: bad number %q", vs)
		}
		fm.Cookie = v
		if masked {
			if cmd == Add {
				return fmt.Errorf("cookie mask is not allowed when adding flows")
			}
			if fm.CookieMask, err = parseMask64(ms); err != nil {
				return fmt.Errorf("cookie: bad mask %q", ms)
			}
		} else if cmd.isDelete() {
			fm.CookieMask = ^uint64(0) // a delete without a mask means this exact cookie
		}
	case "idle_timeout", "hard_timeout":
		if cmd.isDelete() {
			return fmt.Errorf("%s is not allowed when deleting flows", key)
		}
		v, err := num(16)
		if err != nil {
			return err
		}
		if key == "idle_timeout" {
			fm.IdleTimeout = uint16(v)
		} else {
			fm.HardTimeout = uint16(v)
		}
	case "out_port":
		if !cmd.isDelete() {
			return fmt.Errorf("out_port is only allowed when deleting flows")
		}
		p, err := parsePort(val, ports)
		if err != nil {
			return err
		}
		fm.OutPort = p
	case "out_group":
		if !cmd.isDelete() {
			return fmt.Errorf("out_group is only allowed when deleting flows")
		}
		v, err := num(32)
		if err != nil {
			return err
		}
		fm.OutGroup = ofpwire.Group(v)
	}
	return nil
}

// parseMask64 reads a 64-bit mask; a negative number is its two's
// complement, as ovs-ofctl's strtoull reads it ("cookie=0x42/-1" is the
// exact cookie).
func parseMask64(s string) (uint64, error) {
	if strings.HasPrefix(s, "-") {
		v, err := strconv.ParseInt(s, 0, 64)
		return uint64(v), err
	}
	return strconv.ParseUint(s, 0, 64)
}

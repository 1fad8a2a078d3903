// Package ofptext reads and prints OpenFlow 1.3 flows in the text syntax
// of Open vSwitch's ovs-ofctl, so operators can reuse what they know and what
// they have written for Open vSwitch. The match part is delegated to
// ofmatch; this package handles the flow-level keywords and the actions.
package ofptext

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// Command is the flow-table operation a parsed flow is meant for; it decides
// which keywords are allowed and the defaults (deletes apply to all tables).
type Command uint8

// The commands, numbered as OFPFC_* so they convert directly.
const (
	Add          Command = Command(ofp.FlowAdd)
	Modify       Command = Command(ofp.FlowModify)
	ModifyStrict Command = Command(ofp.FlowModifyStrict)
	Delete       Command = Command(ofp.FlowDelete)
	DeleteStrict Command = Command(ofp.FlowDeleteStrict)
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
	flag ofp.FlowModFlag
}{
	{"send_flow_rem", ofp.FlowFlagSendFlowRem},
	{"check_overlap", ofp.FlowFlagCheckOverlap},
	{"reset_counts", ofp.FlowFlagResetCounts},
	{"no_packet_counts", ofp.FlowFlagNoPktCounts},
	{"no_byte_counts", ofp.FlowFlagNoByteCounts},
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
		Command:  ofp.FlowModCommand(cmd),
		TableID:  cmd.defaultTable(),
		Priority: DefaultPriority,
		BufferID: ofpwire.NoBuffer,
		OutPort:  ofp.PortAny,
		OutGroup: ofp.GroupAny,
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
	m, err := ofmatch.Parse(strings.Join(matchToks, ","))
	if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "ofmatch: "))
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
		fm.OutGroup = ofp.Group(v)
	}
	return nil
}

// portNames are the reserved ports by their ovs-ofctl names.
var portNames = []struct {
	name string
	port ofp.PortNo
}{
	{"IN_PORT", ofp.PortIn}, {"NORMAL", ofp.PortNormal}, {"FLOOD", ofp.PortFlood},
	{"ALL", ofp.PortAll}, {"CONTROLLER", ofp.PortController}, {"LOCAL", ofp.PortLocal},
	{"ANY", ofp.PortAny}, {"TABLE", ofp.PortTable},
}

// parsePort reads a port number, a reserved port's name or, through
// ports, the name of one of the switch's ports.
func parsePort(s string, ports portResolver) (ofp.PortNo, error) {
	for _, p := range portNames {
		if strings.EqualFold(s, p.name) {
			return p.port, nil
		}
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err == nil {
		return ofp.PortNo(v), nil
	}
	if ports != nil {
		if no, ok := ports(s); ok {
			return ofp.PortNo(no), nil
		}
		return 0, fmt.Errorf("unknown port name %q", s)
	}
	return 0, fmt.Errorf("bad port %q", s)
}

// Instruction phases in the order OpenFlow 1.3 executes them and ovs-ofctl
// requires them to be written.
const (
	phaseMeter = iota
	phaseApply
	phaseClear
	phaseWrite
	phaseMetadata
	phaseGoto
)

var phaseNames = [...]string{"meter", "apply_actions", "clear_actions", "write_actions", "write_metadata", "goto_table"}

// parseInstructions reads the text after "actions=". m is the flow's match,
// which decides what mod_tp_src rewrites and whether mod_vlan_vid pushes a
// tag.
func parseInstructions(s string, m ofpwire.Match, ports portResolver) ([]ofpwire.Instruction, error) {
	toks, err := splitTop(s)
	if err != nil {
		return nil, err
	}
	var (
		ins    [phaseGoto + 1]ofpwire.Instruction
		apply  []ofpwire.Action
		last   = -1
		dropOK = len(toks) == 1
		ac     = newActionContext(m)
	)
	enter := func(p int, tok string) error {
		if p < last || p == last && p != phaseApply {
			return fmt.Errorf("invalid instruction ordering: %s cannot follow %s (OpenFlow 1.3 order: meter, actions, clear_actions, write_actions, write_metadata, goto_table)",
				tok, phaseNames[last])
		}
		last = p
		return nil
	}
	for _, tok := range toks {
		name, arg, hasArg := cutArg(tok)
		switch name {
		case "drop":
			if !dropOK || hasArg {
				return nil, fmt.Errorf("drop must be the only action")
			}
		case "meter":
			if err := enter(phaseMeter, tok); err != nil {
				return nil, err
			}
			v, err := parseNum(name, arg, 32)
			if err != nil {
				return nil, err
			}
			ins[phaseMeter] = &ofpwire.InstrMeter{MeterID: ofp.Meter(v)}
		case "clear_actions":
			if hasArg {
				return nil, fmt.Errorf("clear_actions takes no argument")
			}
			if err := enter(phaseClear, tok); err != nil {
				return nil, err
			}
			ins[phaseClear] = &ofpwire.InstrClearActions{}
		case "write_actions":
			if err := enter(phaseWrite, tok); err != nil {
				return nil, err
			}
			if !strings.HasPrefix(tok, "write_actions(") || !strings.HasSuffix(tok, ")") {
				return nil, fmt.Errorf("write_actions needs a parenthesised action list")
			}
			sub, err := splitTop(tok[len("write_actions(") : len(tok)-1])
			if err != nil {
				return nil, err
			}
			var acts []ofpwire.Action
			wac := *ac // the action set starts from what the apply actions leave
			for _, st := range sub {
				a, err := parseAction(st, &wac, ports)
				if err != nil {
					return nil, err
				}
				acts = append(acts, a...)
			}
			ins[phaseWrite] = &ofpwire.InstrWriteActions{Actions: acts}
		case "write_metadata":
			if err := enter(phaseMetadata, tok); err != nil {
				return nil, err
			}
			vs, ms, masked := strings.Cut(arg, "/")
			v, err := parseNum(name, vs, 64)
			if err != nil {
				return nil, err
			}
			mask := ^uint64(0)
			if masked {
				if mask, err = parseNum(name, ms, 64); err != nil {
					return nil, err
				}
			}
			ins[phaseMetadata] = &ofpwire.InstrWriteMetadata{Metadata: v, Mask: mask}
		case "goto_table":
			if err := enter(phaseGoto, tok); err != nil {
				return nil, err
			}
			v, err := parseNum(name, arg, 8)
			if err != nil {
				return nil, err
			}
			if v == allTables {
				return nil, fmt.Errorf("goto_table:255 is not a table")
			}
			ins[phaseGoto] = &ofpwire.InstrGotoTable{TableID: uint8(v)}
		default:
			a, err := parseAction(tok, ac, ports)
			if err != nil {
				return nil, err
			}
			if err := enter(phaseApply, tok); err != nil {
				return nil, err
			}
			apply = append(apply, a...)
		}
	}
	if len(apply) > 0 {
		ins[phaseApply] = &ofpwire.InstrApplyActions{Actions: apply}
	}
	var out []ofpwire.Instruction
	for _, in := range ins {
		if in != nil {
			out = append(out, in)
		}
	}
	return out, nil
}

// cutArg splits "name:arg" or "name(arg)" into its name and argument.
func cutArg(tok string) (name, arg string, hasArg bool) {
	i := strings.IndexAny(tok, ":(")
	if i < 0 {
		return strings.ToLower(tok), "", false
	}
	name = strings.ToLower(tok[:i])
	if tok[i] == '(' {
		if !strings.HasSuffix(tok, ")") {
			return name, tok[i+1:], true
		}
		return name, tok[i+1 : len(tok)-1], true
	}
	return name, tok[i+1:], true
}

func parseNum(name, s string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: bad number %q", name, s)
	}
	if bits < 64 && v >= 1<<bits {
		return 0, fmt.Errorf("%s: %s out of range", name, s)
	}
	return v, nil
}

func setField(f ofp.XMType, v uint64) ofpwire.Action {
	return &ofpwire.ActionSetField{Field: ofpwire.OXMUint(f, v)}
}

// actionContext is what an action list knows of the packets it will act on,
// at the point of the list being parsed: the flow's match, and whether the
// packet has a VLAN tag there. ovs-ofctl keeps the same state to decide
// whether mod_vlan_vid and mod_vlan_pcp need to push a tag before setting
// its field in OpenFlow 1.1 and later, where a set-field on a missing tag
// does nothing.
type actionContext struct {
	match ofpwire.Match
	// matchTagged: the match requires the outermost tag to be present
	// (a VLAN_VID value with OFPVID_PRESENT); cleared when a pop removes it.
	matchTagged bool
	// pushed counts the tags pushed so far and not popped again.
	pushed int
}

// newActionContext starts an action list for packets that match m. Group
// buckets and packet-outs have no match and start from an empty one, so
// their first mod_vlan_vid pushes a tag, as with ovs-ofctl. (ovs-ofctl
// does not track the tags there at all and pushes before every mod_vlan_*,
// even after a push_vlan or an earlier mod_vlan_*; stacking tags the text
// never asked for is not copied.)
func newActionContext(m ofpwire.Match) *actionContext {
	vid, ok := m.Field(ofp.XMTypeVlanID)
	return &actionContext{match: m, matchTagged: ok && vid.Uint()&uint64(ofpwire.VIDPresent) != 0}
}

func (ac *actionContext) tagged() bool { return ac.pushed > 0 || ac.matchTagged }

func (ac *actionContext) popTag() {
	if ac.pushed > 0 {
		ac.pushed--
	} else {
		ac.matchTagged = false // what lies below is not known: treat as untagged
	}
}

// modVLAN is the OpenFlow 1.3 form of mod_vlan_vid and mod_vlan_pcp: a
// set-field, preceded by a push of an 802.1Q tag when the packet may have
// none at this point (what ovs-ofctl sends; a bare set-field would leave
// untagged packets untagged).
func (ac *actionContext) modVLAN(set ofpwire.Action) []ofpwire.Action {
	if ac.tagged() {
		return []ofpwire.Action{set}
	}
	ac.pushed++
	return []ofpwire.Action{&ofpwire.ActionPushVLAN{EtherType: 0x8100}, set}
}

// parseAction reads one action of an action list; the old-style rewrites
// become the set-field actions OpenFlow 1.3 has in their place. ac is
// updated with the action's effect on the VLAN tags.
func parseAction(tok string, ac *actionContext, ports portResolver) ([]ofpwire.Action, error) {
	one := func(a ofpwire.Action) ([]ofpwire.Action, error) { return []ofpwire.Action{a}, nil }
	name, arg, hasArg := cutArg(tok)
	noArg := func() error {
		if hasArg {
			return fmt.Errorf("%s takes no argument", name)
		}
		return nil
	}
	if !hasArg {
		if _, err := strconv.ParseUint(tok, 0, 32); err == nil {
			name, arg = "output", tok
		}
	}
	switch name {
	case "output":
		if arg == "" {
			return nil, fmt.Errorf("output needs a port")
		}
		p, err := parsePort(arg, ports)
		if err != nil {
			return nil, err
		}
		if p >= maxPort && p < ofp.PortIn || p == ofp.PortAny {
			return nil, fmt.Errorf("output: port %s is not a port packets can be sent to", arg)
		}
		var ml uint16
		if p == ofp.PortController {
			ml = 0xffff
		}
		return one(&ofpwire.ActionOutput{Port: p, MaxLen: ml})
	case "in_port", "local", "normal", "flood", "all":
		if err := noArg(); err != nil {
			return nil, err
		}
		p, _ := parsePort(name, nil)
		return one(&ofpwire.ActionOutput{Port: p})
	case "controller":
		ml := uint64(0xffff)
		if hasArg && arg != "" {
			a := strings.TrimPrefix(arg, "max_len=")
			if strings.Contains(a, "=") || strings.Contains(a, ",") {
				return nil, fmt.Errorf("controller: only max_len is supported, got %q", arg)
			}
			var err error
			if ml, err = parseNum("controller max_len", a, 16); err != nil {
				return nil, err
			}
		}
		return one(&ofpwire.ActionOutput{Port: ofp.PortController, MaxLen: uint16(ml)})
	case "group":
		v, err := parseNum(name, arg, 32)
		if err != nil {
			return nil, err
		}
		return one(&ofpwire.ActionGroup{Group: ofp.Group(v)})
	case "resubmit":
		return nil, fmt.Errorf("resubmit is an Open vSwitch extension, not OpenFlow 1.3: use goto_table:N")
	case "push_vlan", "push_mpls", "pop_mpls":
		v, err := parseNum(name, arg, 16)
		if err != nil {
			return nil, err
		}
		switch name {
		case "push_vlan":
			if v != 0x8100 && v != 0x88a8 {
				return nil, fmt.Errorf("push_vlan: ethertype %#x is not 0x8100 or 0x88a8", v)
			}
			ac.pushed++
			return one(&ofpwire.ActionPushVLAN{EtherType: uint16(v)})
		case "push_mpls":
			if v != 0x8847 && v != 0x8848 {
				return nil, fmt.Errorf("push_mpls: ethertype %#x is not 0x8847 or 0x8848", v)
			}
			return one(&ofpwire.ActionPushMPLS{EtherType: uint16(v)})
		}
		return one(&ofpwire.ActionPopMPLS{EtherType: uint16(v)})
	case "pop_vlan", "strip_vlan":
		if err := noArg(); err != nil {
			return nil, err
		}
		ac.popTag()
		return one(&ofpwire.ActionPopVLAN{})
	case "dec_ttl", "dec_mpls_ttl", "copy_ttl_in", "copy_ttl_out":
		if err := noArg(); err != nil {
			return nil, err
		}
		switch name {
		case "dec_ttl":
			return one(&ofpwire.ActionDecNwTTL{})
		case "dec_mpls_ttl":
			return one(&ofpwire.ActionDecMPLSTTL{})
		case "copy_ttl_in":
			return one(&ofpwire.ActionCopyTTLIn{})
		}
		return one(&ofpwire.ActionCopyTTLOut{})
	case "mod_nw_ttl", "set_mpls_ttl":
		v, err := parseNum(name, arg, 8)
		if err != nil {
			return nil, err
		}
		if name == "mod_nw_ttl" {
			return one(&ofpwire.ActionSetNwTTL{TTL: uint8(v)})
		}
		return one(&ofpwire.ActionSetMPLSTTL{TTL: uint8(v)})
	case "set_queue":
		v, err := parseNum(name, arg, 32)
		if err != nil {
			return nil, err
		}
		return one(&ofpwire.ActionSetQueue{Queue: ofp.Queue(v)})
	case "mod_vlan_vid":
		v, err := parseNum(name, arg, 12)
		if err != nil {
			return nil, err
		}
		return ac.modVLAN(setField(ofp.XMTypeVlanID, v|uint64(ofpwire.VIDPresent))), nil
	case "mod_vlan_pcp":
		v, err := parseNum(name, arg, 3)
		if err != nil {
			return nil, err
		}
		return ac.modVLAN(setField(ofp.XMTypeVlanPCP, v)), nil
	case "mod_nw_tos":
		v, err := parseNum(name, arg, 8)
		if err != nil {
			return nil, err
		}
		if v&3 != 0 {
			return nil, fmt.Errorf("mod_nw_tos: %s has ECN bits set", arg)
		}
		return one(setField(ofp.XMTypeIPDSCP, v>>2))
	case "mod_dl_src", "mod_dl_dst", "mod_nw_src", "mod_nw_dst":
		f := map[string]ofp.XMType{"mod_dl_src": ofp.XMTypeEthSrc, "mod_dl_dst": ofp.XMTypeEthDst,
			"mod_nw_src": ofp.XMTypeIPv4Src, "mod_nw_dst": ofp.XMTypeIPv4Dst}[name]
		o, err := parseFieldValue(f, arg)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return one(&ofpwire.ActionSetField{Field: o})
	case "mod_tp_src", "mod_tp_dst":
		v, err := parseNum(name, arg, 16)
		if err != nil {
			return nil, err
		}
		proto, _ := ac.match.Field(ofp.XMTypeIPProto)
		var src, dst ofp.XMType
		switch {
		case proto.Value != nil && proto.Uint() == 6:
			src, dst = ofp.XMTypeTCPSrc, ofp.XMTypeTCPDst
		case proto.Value != nil && proto.Uint() == 17:
			src, dst = ofp.XMTypeUDPSrc, ofp.XMTypeUDPDst
		case proto.Value != nil && proto.Uint() == 132:
			src, dst = ofp.XMTypeSCTPSrc, ofp.XMTypeSCTPDst
		default:
			return nil, fmt.Errorf("%s needs a tcp, udp or sctp match", name)
		}
		if name == "mod_tp_src" {
			return one(setField(src, v))
		}
		return one(setField(dst, v))
	case "set_field":
		val, fname, ok := strings.Cut(arg, "->")
		if !ok || !hasArg {
			return nil, fmt.Errorf("set_field needs VALUE->FIELD")
		}
		f, ok := fieldByName(fname)
		if !ok {
			return nil, fmt.Errorf("set_field: unknown field %q", fname)
		}
		o, err := parseFieldValue(f, val)
		if err != nil {
			return nil, fmt.Errorf("set_field %s: %w", fname, err)
		}
		return one(&ofpwire.ActionSetField{Field: o})
	case "goto_table", "meter", "write_actions", "clear_actions", "write_metadata":
		return nil, fmt.Errorf("%s is an instruction and cannot appear inside write_actions", name)
	}
	if !hasArg && strings.EqualFold(tok, "TABLE") {
		// Output to TABLE: a packet-out's packet goes through the flow
		// tables (the switch refuses it in a flow).
		return one(&ofpwire.ActionOutput{Port: ofp.PortTable})
	}
	if ports != nil && !hasArg {
		// ovs-ofctl reads a bare port name as output to that port.
		if no, ok := ports(tok); ok {
			return one(&ofpwire.ActionOutput{Port: ofp.PortNo(no)})
		}
	}
	return nil, fmt.Errorf("unknown action %q", tok)
}

// setFields are the fields set_field accepts, by Open vSwitch's names; the
// first name of a field is the one printed, the one ovs-ofctl prints.
var setFields = []struct {
	name  string
	field ofp.XMType
}{
	{"eth_dst", ofp.XMTypeEthDst}, {"dl_dst", ofp.XMTypeEthDst},
	{"eth_src", ofp.XMTypeEthSrc}, {"dl_src", ofp.XMTypeEthSrc},
	{"eth_type", ofp.XMTypeEthType}, {"dl_type", ofp.XMTypeEthType},
	{"vlan_vid", ofp.XMTypeVlanID}, {"vlan_pcp", ofp.XMTypeVlanPCP},
	{"ip_dscp", ofp.XMTypeIPDSCP}, {"nw_ecn", ofp.XMTypeIPECN}, {"ip_ecn", ofp.XMTypeIPECN},
	{"ip_proto", ofp.XMTypeIPProto}, {"nw_proto", ofp.XMTypeIPProto},
	{"ip_src", ofp.XMTypeIPv4Src}, {"ipv4_src", ofp.XMTypeIPv4Src}, {"nw_src", ofp.XMTypeIPv4Src},
	{"ip_dst", ofp.XMTypeIPv4Dst}, {"ipv4_dst", ofp.XMTypeIPv4Dst}, {"nw_dst", ofp.XMTypeIPv4Dst},
	{"tcp_src", ofp.XMTypeTCPSrc}, {"tcp_dst", ofp.XMTypeTCPDst},
	{"udp_src", ofp.XMTypeUDPSrc}, {"udp_dst", ofp.XMTypeUDPDst},
	{"sctp_src", ofp.XMTypeSCTPSrc}, {"sctp_dst", ofp.XMTypeSCTPDst},
	{"icmp_type", ofp.XMTypeICMPv4Type}, {"icmpv4_type", ofp.XMTypeICMPv4Type},
	{"icmp_code", ofp.XMTypeICMPv4Code}, {"icmpv4_code", ofp.XMTypeICMPv4Code},
	{"arp_op", ofp.XMTypeARPOpcode}, {"arp_spa", ofp.XMTypeARPSPA}, {"arp_tpa", ofp.XMTypeARPTPA},
	{"arp_sha", ofp.XMTypeARPSHA}, {"arp_tha", ofp.XMTypeARPTHA},
	{"ipv6_src", ofp.XMTypeIPv6Src}, {"ipv6_dst", ofp.XMTypeIPv6Dst},
	{"ipv6_label", ofp.XMTypeIPv6FLabel},
	{"icmpv6_type", ofp.XMTypeICMPv6Type}, {"icmpv6_code", ofp.XMTypeICMPv6Code},
	{"nd_target", ofp.XMTypeIPv6NDTarget}, {"nd_sll", ofp.XMTypeIPv6NDSLL}, {"nd_tll", ofp.XMTypeIPv6NDTLL},
	{"mpls_label", ofp.XMTypeMPLSLabel}, {"mpls_tc", ofp.XMTypeMPLSTC}, {"mpls_bos", ofp.XMTypeMPLSBOS},
	{"pbb_isid", ofp.XMTypePBBISID},
	{"tun_id", ofp.XMTypeTunnelID}, {"tunnel_id", ofp.XMTypeTunnelID},
	{"tun_src", ofpwire.XMTypeTunIPv4Src}, {"tun_dst", ofpwire.XMTypeTunIPv4Dst},
	{"tun_ipv6_src", ofpwire.XMTypeTunIPv6Src}, {"tun_ipv6_dst", ofpwire.XMTypeTunIPv6Dst},
}

func fieldByName(n string) (ofp.XMType, bool) {
	for _, f := range setFields {
		if f.name == n {
			return f.field, true
		}
	}
	return 0, false
}

func fieldName(f ofp.XMType) string {
	for _, sf := range setFields {
		if sf.field == f {
			return sf.name
		}
	}
	return ""
}

// fieldBits is the width of fields narrower than their OXM payload.
var fieldBits = map[ofp.XMType]int{
	ofp.XMTypeVlanID: 13, ofp.XMTypeVlanPCP: 3, ofp.XMTypeIPDSCP: 6, ofp.XMTypeIPECN: 2,
	ofp.XMTypeIPv6FLabel: 20, ofp.XMTypeMPLSLabel: 20, ofp.XMTypeMPLSTC: 3, ofp.XMTypeMPLSBOS: 1,
}

// parseFieldValue reads the value of field f as a MAC, IPv4, IPv6 address or
// a number, whichever the field holds.
func parseFieldValue(f ofp.XMType, s string) (ofpwire.OXM, error) {
	size, _, ok := ofpwire.FieldSize(f)
	if !ok {
		return ofpwire.OXM{}, fmt.Errorf("unknown field")
	}
	switch kindOf(f) {
	case kindMAC:
		var b [6]byte
		parts := strings.Split(s, ":")
		if len(parts) != 6 {
			return ofpwire.OXM{}, fmt.Errorf("bad MAC address %q", s)
		}
		for i, p := range parts {
			v, err := strconv.ParseUint(p, 16, 8)
			if err != nil || len(p) == 0 || len(p) > 2 {
				return ofpwire.OXM{}, fmt.Errorf("bad MAC address %q", s)
			}
			b[i] = byte(v)
		}
		return ofpwire.NewOXM(f, b[:]), nil
	case kindIPv4:
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return ofpwire.OXM{}, fmt.Errorf("bad IPv4 address %q", s)
		}
		b := a.As4()
		return ofpwire.NewOXM(f, b[:]), nil
	case kindIPv6:
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is6() || a.Zone() != "" {
			return ofpwire.OXM{}, fmt.Errorf("bad IPv6 address %q", s)
		}
		b := a.As16()
		return ofpwire.NewOXM(f, b[:]), nil
	}
	bits := size * 8
	if fb, ok := fieldBits[f]; ok {
		bits = fb
	}
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return ofpwire.OXM{}, fmt.Errorf("bad number %q", s)
	}
	if bits < 64 && v >= 1<<bits {
		return ofpwire.OXM{}, fmt.Errorf("%s out of range", s)
	}
	return ofpwire.OXMUint(f, v), nil
}

type valueKind int

const (
	kindNum valueKind = iota
	kindMAC
	kindIPv4
	kindIPv6
)

func kindOf(f ofp.XMType) valueKind {
	switch f {
	case ofp.XMTypeEthDst, ofp.XMTypeEthSrc, ofp.XMTypeARPSHA, ofp.XMTypeARPTHA,
		ofp.XMTypeIPv6NDSLL, ofp.XMTypeIPv6NDTLL:
		return kindMAC
	case ofp.XMTypeIPv4Src, ofp.XMTypeIPv4Dst, ofp.XMTypeARPSPA, ofp.XMTypeARPTPA,
		ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv4Dst:
		return kindIPv4
	case ofp.XMTypeIPv6Src, ofp.XMTypeIPv6Dst, ofp.XMTypeIPv6NDTarget,
		ofpwire.XMTypeTunIPv6Src, ofpwire.XMTypeTunIPv6Dst:
		return kindIPv6
	}
	return kindNum
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

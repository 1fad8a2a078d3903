package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

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
			ins[phaseMeter] = &ofpwire.InstrMeter{MeterID: ofpwire.Meter(v)}
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

func setField(f ofpwire.XMType, v uint64) ofpwire.Action {
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
	vid, ok := m.Field(ofpwire.XMTypeVlanID)
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
	return []ofpwire.Action{&ofpwire.ActionPushVLAN{EtherType: header.EtherTypeVLAN}, set}
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
		if strings.Contains(arg, "[") {
			// output:FIELD[range]: the port a subfield holds.
			f, ofs, n, err := parseSubfield(arg)
			if err != nil {
				return nil, fmt.Errorf("output: %w", err)
			}
			if n > 64 {
				return nil, fmt.Errorf("output: %s is wider than 64 bits", arg)
			}
			return one(&ofpwire.ActionOutputReg{Field: f, Ofs: uint16(ofs), NBits: uint16(n)})
		}
		p, err := parsePort(arg, ports)
		if err != nil {
			return nil, err
		}
		if p >= maxPort && p < ofpwire.PortIn || p == ofpwire.PortAny {
			return nil, fmt.Errorf("output: port %s is not a port packets can be sent to", arg)
		}
		var ml uint16
		if p == ofpwire.PortController {
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
		a, err := parseController(arg)
		if err != nil {
			return nil, err
		}
		return one(a)
	case "group":
		v, err := parseNum(name, arg, 32)
		if err != nil {
			return nil, err
		}
		return one(&ofpwire.ActionGroup{Group: ofpwire.Group(v)})
	case "resubmit", "move", "load", "note", "exit", "push", "pop", "ct", "ct_clear", "clone", "check_pkt_larger", "conjunction", "learn", "fin_timeout",
		"multipath", "bundle", "bundle_load", "sample", "pop_queue":
		a, _, err := parseNXAction(name, arg, hasArg, ports)
		if err != nil {
			return nil, err
		}
		return one(a)
	case "push_vlan", "push_mpls", "pop_mpls":
		v, err := parseNum(name, arg, 16)
		if err != nil {
			return nil, err
		}
		switch name {
		case "push_vlan":
			if v != header.EtherTypeVLAN && v != header.EtherTypeQinQ {
				return nil, fmt.Errorf("push_vlan: ethertype %#x is not 0x8100 or 0x88a8", v)
			}
			ac.pushed++
			return one(&ofpwire.ActionPushVLAN{EtherType: uint16(v)})
		case "push_mpls":
			if v != header.EtherTypeMPLS && v != header.EtherTypeMPLSMcast {
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
		if name == "dec_ttl" && hasArg {
			a, err := parseDecTTLIDs(arg)
			if err != nil {
				return nil, err
			}
			return one(a)
		}
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
		return one(&ofpwire.ActionSetQueue{Queue: ofpwire.Queue(v)})
	case "mod_vlan_vid":
		v, err := parseNum(name, arg, 12)
		if err != nil {
			return nil, err
		}
		return ac.modVLAN(setField(ofpwire.XMTypeVlanID, v|uint64(ofpwire.VIDPresent))), nil
	case "mod_vlan_pcp":
		v, err := parseNum(name, arg, 3)
		if err != nil {
			return nil, err
		}
		return ac.modVLAN(setField(ofpwire.XMTypeVlanPCP, v)), nil
	case "mod_nw_tos":
		v, err := parseNum(name, arg, 8)
		if err != nil {
			return nil, err
		}
		if v&3 != 0 {
			return nil, fmt.Errorf("mod_nw_tos: %s has ECN bits set", arg)
		}
		return one(setField(ofpwire.XMTypeIPDSCP, v>>2))
	case "mod_dl_src", "mod_dl_dst", "mod_nw_src", "mod_nw_dst":
		f := map[string]ofpwire.XMType{"mod_dl_src": ofpwire.XMTypeEthSrc, "mod_dl_dst": ofpwire.XMTypeEthDst,
			"mod_nw_src": ofpwire.XMTypeIPv4Src, "mod_nw_dst": ofpwire.XMTypeIPv4Dst}[name]
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
		proto, _ := ac.match.Field(ofpwire.XMTypeIPProto)
		var src, dst ofpwire.XMType
		switch {
		case proto.Value != nil && proto.Uint() == header.IPProtoTCP:
			src, dst = ofpwire.XMTypeTCPSrc, ofpwire.XMTypeTCPDst
		case proto.Value != nil && proto.Uint() == header.IPProtoUDP:
			src, dst = ofpwire.XMTypeUDPSrc, ofpwire.XMTypeUDPDst
		case proto.Value != nil && proto.Uint() == header.IPProtoSCTP:
			src, dst = ofpwire.XMTypeSCTPSrc, ofpwire.XMTypeSCTPDst
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
			if f, ok = subfieldByName(fname); !ok {
				return nil, fmt.Errorf("set_field: unknown field %q", fname)
			}
		}
		o, err := parseMaskedFieldValue(f, val)
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
		return one(&ofpwire.ActionOutput{Port: ofpwire.PortTable})
	}
	if ports != nil && !hasArg {
		// ovs-ofctl reads a bare port name as output to that port.
		if no, ok := ports(tok); ok {
			return one(&ofpwire.ActionOutput{Port: ofpwire.PortNo(no)})
		}
	}
	return nil, fmt.Errorf("unknown action %q", tok)
}

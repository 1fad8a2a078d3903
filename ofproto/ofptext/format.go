package ofptext

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// FormatFlow prints a flow of a flow-stats reply the way
// `ovs-ofctl -O OpenFlow13 dump-flows` does, e.g.
// " cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, idle_timeout=10, priority=100,in_port=1 actions=output:2".
// ParseDumpedFlow reads it back.
func FormatFlow(fs *ofpwire.FlowStats) string {
	return FormatFlowWith(fs, FormatOptions{})
}

// FormatOptions chooses between the forms of a dumped flow.
type FormatOptions struct {
	// NoStats leaves out the duration and counters, and a zero cookie and
	// table, as `ovs-ofctl --no-stats dump-flows` does.
	NoStats bool
}

// FormatFlowWith is FormatFlow with options.
func FormatFlowWith(fs *ofpwire.FlowStats, opts FormatOptions) string {
	var b strings.Builder
	b.WriteString(" ")
	if !opts.NoStats || fs.Cookie != 0 {
		fmt.Fprintf(&b, "cookie=%#x, ", fs.Cookie)
	}
	if !opts.NoStats {
		fmt.Fprintf(&b, "duration=%s, ", duration(fs.DurationSec, fs.DurationNSec))
	}
	if !opts.NoStats || fs.TableID != 0 {
		fmt.Fprintf(&b, "table=%d, ", fs.TableID)
	}
	if !opts.NoStats {
		fmt.Fprintf(&b, "n_packets=%d, n_bytes=%d, ", fs.PacketCount, fs.ByteCount)
	}
	if fs.IdleTimeout != 0 {
		fmt.Fprintf(&b, "idle_timeout=%d, ", fs.IdleTimeout)
	}
	if fs.HardTimeout != 0 {
		fmt.Fprintf(&b, "hard_timeout=%d, ", fs.HardTimeout)
	}
	for _, f := range flagNames {
		if fs.Flags&f.flag != 0 {
			b.WriteString(f.name + " ")
		}
	}
	if mt := matchText(fs.Priority, fs.Match); mt != "" {
		b.WriteString(mt + " ")
	}
	b.WriteString("actions=")
	b.WriteString(FormatInstructions(fs.Instructions))
	return b.String()
}

// duration prints seconds with the nanoseconds' trailing zeros dropped
// ("1.234s", "7s"), as ovs-ofctl does.
func duration(sec, nsec uint32) string {
	s := strconv.FormatUint(uint64(sec), 10)
	if nsec != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%09d", nsec), "0")
	}
	return s + "s"
}

// matchText prints "priority=N,MATCH" with the priority left out when it is
// the default, as ovs-ofctl does.
func matchText(prio uint16, om ofpwire.Match) string {
	var parts []string
	if prio != DefaultPriority {
		parts = append(parts, "priority="+strconv.Itoa(int(prio)))
	}
	if m, err := ofmatch.FromOXM(om); err == nil {
		if s := FormatMatch(&m); s != "" {
			parts = append(parts, s)
		}
	} else {
		parts = append(parts, "<invalid match: "+err.Error()+">")
	}
	return strings.Join(parts, ",")
}

// FormatFlowMod prints fm in the syntax ParseFlow reads for the same
// command, leaving out what equals the command's defaults, so that
// ParseFlow(FormatFlowMod(fm), Command(fm.Command)) rebuilds fm.
func FormatFlowMod(fm *ofpwire.FlowMod) string {
	cmd := Command(fm.Command)
	var parts []string
	if fm.TableID != cmd.defaultTable() {
		parts = append(parts, "table="+strconv.Itoa(int(fm.TableID)))
	}
	switch {
	case cmd.isDelete() && fm.CookieMask == ^uint64(0):
		parts = append(parts, fmt.Sprintf("cookie=%#x", fm.Cookie)) // ParseFlow's default mask for deletes
	case fm.CookieMask != 0 || cmd.isDelete() && fm.Cookie != 0:
		parts = append(parts, fmt.Sprintf("cookie=%#x/%#x", fm.Cookie, fm.CookieMask))
	case fm.Cookie != 0:
		parts = append(parts, fmt.Sprintf("cookie=%#x", fm.Cookie))
	}
	if fm.IdleTimeout != 0 {
		parts = append(parts, "idle_timeout="+strconv.Itoa(int(fm.IdleTimeout)))
	}
	if fm.HardTimeout != 0 {
		parts = append(parts, "hard_timeout="+strconv.Itoa(int(fm.HardTimeout)))
	}
	for _, f := range flagNames {
		if fm.Flags&f.flag != 0 {
			parts = append(parts, f.name)
		}
	}
	if fm.OutPort != ofpwire.PortAny {
		parts = append(parts, "out_port="+portName(fm.OutPort))
	}
	if fm.OutGroup != ofpwire.GroupAny {
		parts = append(parts, "out_group="+strconv.FormatUint(uint64(fm.OutGroup), 10))
	}
	prio := fm.Priority
	if cmd == Delete {
		prio = DefaultPriority // non-strict deletes ignore it
	}
	if mt := matchText(prio, fm.Match); mt != "" {
		parts = append(parts, mt)
	}
	s := strings.Join(parts, ",")
	if !cmd.isDelete() {
		if s != "" {
			s += " "
		}
		s += "actions=" + FormatInstructions(fm.Instructions)
	}
	return s
}

func portName(p ofpwire.PortNo) string {
	for _, n := range portNames {
		if n.port == p {
			return n.name
		}
	}
	return strconv.FormatUint(uint64(p), 10)
}

// FormatInstructions prints an instruction list as the text after
// "actions=": the apply-actions list inline, the other instructions by name,
// "drop" when there is nothing.
func FormatInstructions(ins []ofpwire.Instruction) string {
	var parts []string
	for _, in := range ins {
		switch in := in.(type) {
		case *ofpwire.InstrMeter:
			parts = append(parts, "meter:"+strconv.FormatUint(uint64(in.MeterID), 10))
		case *ofpwire.InstrApplyActions:
			for _, a := range in.Actions {
				parts = append(parts, formatAction(a))
			}
		case *ofpwire.InstrClearActions:
			parts = append(parts, "clear_actions")
		case *ofpwire.InstrWriteActions:
			var sub []string
			for _, a := range in.Actions {
				sub = append(sub, formatAction(a))
			}
			parts = append(parts, "write_actions("+strings.Join(sub, ",")+")")
		case *ofpwire.InstrWriteMetadata:
			if in.Mask == ^uint64(0) {
				parts = append(parts, fmt.Sprintf("write_metadata:%#x", in.Metadata))
			} else {
				parts = append(parts, fmt.Sprintf("write_metadata:%#x/%#x", in.Metadata, in.Mask))
			}
		case *ofpwire.InstrGotoTable:
			parts = append(parts, "goto_table:"+strconv.Itoa(int(in.TableID)))
		case *ofpwire.InstrExperimenter:
			parts = append(parts, fmt.Sprintf("<experimenter instruction %#x>", in.Experimenter))
		}
	}
	if len(parts) == 0 {
		return "drop"
	}
	return strings.Join(parts, ",")
}

func formatAction(a ofpwire.Action) string {
	if s, ok := formatNXAction(a); ok {
		return s
	}
	switch a := a.(type) {
	case *ofpwire.ActionOutput:
		switch {
		case a.Port == ofpwire.PortController:
			return "CONTROLLER:" + strconv.Itoa(int(a.MaxLen))
		case a.Port > maxPort:
			return portName(a.Port)
		}
		return "output:" + strconv.FormatUint(uint64(a.Port), 10)
	case *ofpwire.ActionGroup:
		return "group:" + strconv.FormatUint(uint64(a.Group), 10)
	case *ofpwire.ActionPushVLAN:
		return fmt.Sprintf("push_vlan:%#x", a.EtherType)
	case *ofpwire.ActionPopVLAN:
		return "pop_vlan"
	case *ofpwire.ActionPushMPLS:
		return fmt.Sprintf("push_mpls:%#x", a.EtherType)
	case *ofpwire.ActionPopMPLS:
		return fmt.Sprintf("pop_mpls:0x%04x", a.EtherType)
	case *ofpwire.ActionDecMPLSTTL:
		return "dec_mpls_ttl"
	case *ofpwire.ActionSetMPLSTTL:
		return "set_mpls_ttl(" + strconv.Itoa(int(a.TTL)) + ")"
	case *ofpwire.ActionDecNwTTL:
		return "dec_ttl"
	case *ofpwire.ActionSetNwTTL:
		return "mod_nw_ttl:" + strconv.Itoa(int(a.TTL))
	case *ofpwire.ActionCopyTTLIn:
		return "copy_ttl_in"
	case *ofpwire.ActionCopyTTLOut:
		return "copy_ttl_out"
	case *ofpwire.ActionSetQueue:
		return "set_queue:" + strconv.FormatUint(uint64(a.Queue), 10)
	case *ofpwire.ActionSetField:
		if a.Field.HasMask && ofpwire.IsOneLoad(a.Field) {
			return formatLoad(a.Field)
		}
		if a.Field.HasMask {
			return "set_field:" + formatFieldValue(ofpwire.OXM{Field: a.Field.Field, Value: a.Field.Value}) + "/" +
				formatFieldValue(ofpwire.OXM{Field: a.Field.Field, Value: a.Field.Mask}) + "->" + shortFieldName(a.Field.Field)
		}
		return "set_field:" + formatFieldValue(a.Field) + "->" + shortFieldName(a.Field.Field)
	case *ofpwire.ActionPushPBB:
		return fmt.Sprintf("<push_pbb:%#x>", a.EtherType)
	case *ofpwire.ActionPopPBB:
		return "<pop_pbb>"
	case *ofpwire.ActionExperimenter:
		return fmt.Sprintf("<experimenter action %#x>", a.Experimenter)
	}
	return fmt.Sprintf("<unknown action %T>", a)
}

func formatFieldValue(o ofpwire.OXM) string {
	switch kindOf(o.Field) {
	case kindMAC:
		if len(o.Value) == 6 {
			v := o.Value
			return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", v[0], v[1], v[2], v[3], v[4], v[5])
		}
	case kindIPv4:
		if len(o.Value) == 4 {
			return netip.AddrFrom4([4]byte(o.Value)).String()
		}
	case kindIPv6:
		if len(o.Value) == 16 {
			return netip.AddrFrom16([16]byte(o.Value)).String()
		}
	}
	if o.Field == ofpwire.XMTypeTunnelID || o.Field == ofpwire.XMTypeMetadata || o.Field == ofpwire.XMTypePktMark ||
		o.Field == ofpwire.XMTypeDPHash || o.Field == ofpwire.XMTypeRecircID {
		return fmt.Sprintf("%#x", o.Uint())
	}
	if _, _, reg := ofpwire.IsReg(o.Field); reg {
		return formatWide(o.Value)
	}
	if _, tm := ofpwire.IsTunMetadata(o.Field); tm {
		return fmt.Sprintf("%#x", o.Uint())
	}
	return strconv.FormatUint(o.Uint(), 10)
}

// FlagNames lists the flow-mod flags set in f by their ovs-ofctl names
// ("send_flow_rem", "check_overlap", ...), in bit order.
func FlagNames(f ofpwire.FlowModFlag) []string {
	var out []string
	for _, n := range flagNames {
		if f&n.flag != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// MatchString prints a match in ovs-ofctl's syntax, without priority.
func MatchString(om ofpwire.Match) string {
	return matchText(DefaultPriority, om)
}

// PortName prints a port number as ovs-ofctl does: reserved ports by
// name (LOCAL, CONTROLLER, ...), others in decimal.
func PortName(p uint32) string { return portName(ofpwire.PortNo(p)) }

// MeterFlagNames lists the meter flags set in f by their ovs-ofctl names
// ("kbps", "pktps", "burst", "stats").
func MeterFlagNames(f ofpwire.MeterFlag) []string {
	var out []string
	for _, n := range meterFlagNames {
		if f&n.flag != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// GroupTypeName is ovs-ofctl's name of a group type ("all", "select",
// "indirect", "ff").
func GroupTypeName(t ofpwire.GroupType) string { return groupTypeName(t) }

// Duration prints seconds and nanoseconds as ovs-ofctl prints durations
// ("1.234s", "7s").
func Duration(sec, nsec uint32) string { return duration(sec, nsec) }

// FieldByName returns the OXM field of a field name as ovs-ofctl spells it
// in set_field ("nw_src", "tcp_dst", "eth_type", ...).
func FieldByName(name string) (ofpwire.XMType, bool) { return fieldByName(name) }

package ofptext

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// ct(...), nat(...), ct_clear and controller(...) in ovs-ofctl's syntax.

// formatCT prints ct as Open vSwitch does: commit, force, table, zone,
// nat (first of the nested actions), exec(...), alg.
func formatCT(a *ofpwire.ActionCT) string {
	var p []string
	if a.Flags&ofpwire.CTCommit != 0 {
		p = append(p, "commit")
	}
	if a.Flags&ofpwire.CTForce != 0 {
		p = append(p, "force")
	}
	if a.RecircTable != ofpwire.CTRecircNone {
		p = append(p, "table="+strconv.Itoa(int(a.RecircTable)))
	}
	if a.HasZoneField {
		p = append(p, "zone="+formatSubfield(a.ZoneField, int(a.ZoneOfs), int(a.ZoneNBits)))
	} else if a.ZoneImm != 0 {
		p = append(p, "zone="+strconv.Itoa(int(a.ZoneImm)))
	}
	acts := a.Actions
	if len(acts) > 0 {
		if n, ok := acts[0].(*ofpwire.ActionNAT); ok {
			p = append(p, formatNAT(n))
			acts = acts[1:]
		}
	}
	if len(acts) > 0 {
		var e []string
		for _, x := range acts {
			e = append(e, formatAction(x))
		}
		p = append(p, "exec("+strings.Join(e, ",")+")")
	}
	switch a.Alg {
	case 0:
	case 21:
		p = append(p, "alg=ftp")
	case 69:
		p = append(p, "alg=tftp")
	default:
		p = append(p, "alg="+strconv.Itoa(int(a.Alg)))
	}
	return "ct(" + strings.Join(p, ",") + ")"
}

// formatNAT prints nat, nat(src), nat(dst=IP[-IP][:PORT[-PORT]],flags...).
func formatNAT(a *ofpwire.ActionNAT) string {
	if a.Flags&(ofpwire.NATSrc|ofpwire.NATDst) == 0 {
		return "nat"
	}
	s := "dst"
	if a.Flags&ofpwire.NATSrc != 0 {
		s = "src"
	}
	r := a.RangePresent
	if r != 0 {
		s += "="
		switch {
		case r&ofpwire.NATRangeIPv4Min != 0:
			s += netip.AddrFrom4(a.IPv4Min).String()
			if r&ofpwire.NATRangeIPv4Max != 0 && a.IPv4Max != a.IPv4Min {
				s += "-" + netip.AddrFrom4(a.IPv4Max).String()
			}
		case r&ofpwire.NATRangeIPv6Min != 0:
			s += "[" + netip.AddrFrom16(a.IPv6Min).String() + "]"
			if r&ofpwire.NATRangeIPv6Max != 0 && a.IPv6Max != a.IPv6Min {
				s += "-[" + netip.AddrFrom16(a.IPv6Max).String() + "]"
			}
		}
		if r&ofpwire.NATRangeProtoMin != 0 {
			s += ":" + strconv.Itoa(int(a.ProtoMin))
			if r&ofpwire.NATRangeProtoMax != 0 && a.ProtoMax != a.ProtoMin {
				s += "-" + strconv.Itoa(int(a.ProtoMax))
			}
		}
	}
	for _, f := range []struct {
		bit  uint16
		name string
	}{{ofpwire.NATPersistent, "persistent"}, {ofpwire.NATProtoHash, "hash"}, {ofpwire.NATProtoRandom, "random"}} {
		if a.Flags&f.bit != 0 {
			s += "," + f.name
		}
	}
	return "nat(" + s + ")"
}

// parseCT reads ct's arguments.
func parseCT(arg string, ports portResolver) (ofpwire.Action, error) {
	ct := &ofpwire.ActionCT{RecircTable: ofpwire.CTRecircNone}
	toks, err := splitTop(arg)
	if err != nil {
		return nil, fmt.Errorf("ct: %w", err)
	}
	for _, tok := range toks {
		name, val, hasVal := strings.Cut(tok, "=")
		switch {
		case tok == "commit":
			ct.Flags |= ofpwire.CTCommit
		case tok == "force":
			ct.Flags |= ofpwire.CTForce
		case name == "table" && hasVal:
			v, err := parseNum("ct table", val, 8)
			if err != nil {
				return nil, err
			}
			ct.RecircTable = uint8(v)
		case name == "zone" && hasVal:
			if v, err := strconv.ParseUint(val, 0, 16); err == nil {
				ct.ZoneImm = uint16(v)
				continue
			}
			f, ofs, n, err := parseSubfield(val)
			if err != nil {
				return nil, fmt.Errorf("ct zone: %w", err)
			}
			ct.HasZoneField, ct.ZoneField, ct.ZoneOfs, ct.ZoneNBits = true, f, uint16(ofs), uint16(n)
		case name == "alg" && hasVal:
			switch val {
			case "ftp":
				ct.Alg = 21
			case "tftp":
				ct.Alg = 69
			default:
				v, err := parseNum("ct alg", val, 16)
				if err != nil {
					return nil, err
				}
				ct.Alg = uint16(v)
			}
		case tok == "nat" || strings.HasPrefix(tok, "nat("):
			n, err := parseNAT(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(tok, "nat"), "("), ")"))
			if err != nil {
				return nil, err
			}
			ct.Actions = append([]ofpwire.Action{n}, ct.Actions...)
		case strings.HasPrefix(tok, "exec(") && strings.HasSuffix(tok, ")"):
			etoks, err := splitTop(tok[5 : len(tok)-1])
			if err != nil {
				return nil, fmt.Errorf("ct exec: %w", err)
			}
			for _, et := range etoks {
				as, err := parseAction(et, newActionContext(ofpwire.Match{}), ports)
				if err != nil {
					return nil, fmt.Errorf("ct exec: %w", err)
				}
				ct.Actions = append(ct.Actions, as...)
			}
		default:
			return nil, fmt.Errorf("ct: unknown argument %q", tok)
		}
	}
	return ct, nil
}

// parseNAT reads what is inside nat(...) ("" for a bare nat).
func parseNAT(s string) (*ofpwire.ActionNAT, error) {
	n := &ofpwire.ActionNAT{}
	if s == "" {
		return n, nil
	}
	parts := strings.Split(s, ",")
	kind, rng, hasRng := strings.Cut(parts[0], "=")
	switch kind {
	case "src":
		n.Flags |= ofpwire.NATSrc
	case "dst":
		n.Flags |= ofpwire.NATDst
	default:
		return nil, fmt.Errorf("nat: %q is neither src nor dst", kind)
	}
	for _, f := range parts[1:] {
		switch f {
		case "persistent":
			n.Flags |= ofpwire.NATPersistent
		case "hash":
			n.Flags |= ofpwire.NATProtoHash
		case "random":
			n.Flags |= ofpwire.NATProtoRandom
		default:
			return nil, fmt.Errorf("nat: unknown flag %q", f)
		}
	}
	if n.Flags&ofpwire.NATProtoHash != 0 && n.Flags&ofpwire.NATProtoRandom != 0 {
		return nil, errors.New(`nat: both "hash" and "random" are not allowed`)
	}
	if !hasRng {
		return n, nil
	}
	// Addresses: a.b.c.d[-a.b.c.d] or [v6][-[v6]]; then :port[-port]. A
	// range whose ends are equal is one value, as it prints.
	addrs, portRange := rng, ""
	if strings.HasPrefix(rng, "[") {
		if i := strings.LastIndex(rng, "]"); i >= 0 {
			if j := strings.Index(rng[i:], ":"); j >= 0 {
				addrs, portRange = rng[:i+j], rng[i+j+1:]
			}
		}
	} else if i := strings.Index(rng, ":"); i >= 0 {
		addrs, portRange = rng[:i], rng[i+1:]
	}
	lo, hi, isRange := strings.Cut(addrs, "-")
	parse := func(a string) (netip.Addr, error) {
		return netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(a, "["), "]"))
	}
	min, err := parse(lo)
	if err != nil {
		return nil, fmt.Errorf("nat: bad address %q", lo)
	}
	max := min
	if isRange {
		if max, err = parse(hi); err != nil || max.Is4() != min.Is4() {
			return nil, fmt.Errorf("nat: bad address %q", hi)
		}
	}
	if min.Is4() {
		n.RangePresent |= ofpwire.NATRangeIPv4Min
		n.IPv4Min = min.As4()
		if isRange && max != min {
			n.RangePresent |= ofpwire.NATRangeIPv4Max
			n.IPv4Max = max.As4()
		}
	} else {
		n.RangePresent |= ofpwire.NATRangeIPv6Min
		n.IPv6Min = min.As16()
		if isRange && max != min {
			n.RangePresent |= ofpwire.NATRangeIPv6Max
			n.IPv6Max = max.As16()
		}
	}
	if portRange != "" {
		plo, phi, pRange := strings.Cut(portRange, "-")
		v, err := parseNum("nat port", plo, 16)
		if err != nil {
			return nil, err
		}
		n.RangePresent |= ofpwire.NATRangeProtoMin
		n.ProtoMin = uint16(v)
		if pRange {
			w, err := parseNum("nat port", phi, 16)
			if err != nil {
				return nil, err
			}
			if uint16(w) != n.ProtoMin {
				n.RangePresent |= ofpwire.NATRangeProtoMax
				n.ProtoMax = uint16(w)
			}
		}
	}
	return n, nil
}

// packetInReasons are ovs-ofctl's names of packet-in reasons.
var packetInReasons = []string{"no_match", "action", "invalid_ttl", "action_set", "group", "packet_out"}

// formatController prints controller(...) as Open vSwitch does, or
// CONTROLLER:N when it has nothing but a max_len.
func formatController(a *ofpwire.ActionController) string {
	if a.Reason == 1 && a.ControllerID == 0 && len(a.Userdata) == 0 && !a.Pause && a.MeterID == ofpwire.NoMeter {
		return "CONTROLLER:" + strconv.Itoa(int(a.MaxLen))
	}
	var p []string
	if a.Reason != 1 {
		r := strconv.Itoa(int(a.Reason))
		if int(a.Reason) < len(packetInReasons) {
			r = packetInReasons[a.Reason]
		}
		p = append(p, "reason="+r)
	}
	if a.MaxLen != 0xffff {
		p = append(p, "max_len="+strconv.Itoa(int(a.MaxLen)))
	}
	if a.ControllerID != 0 {
		p = append(p, "id="+strconv.Itoa(int(a.ControllerID)))
	}
	if len(a.Userdata) > 0 {
		h := make([]string, len(a.Userdata))
		for i, b := range a.Userdata {
			h[i] = fmt.Sprintf("%02x", b)
		}
		p = append(p, "userdata="+strings.Join(h, "."))
	}
	if a.Pause {
		p = append(p, "pause")
	}
	if a.MeterID != ofpwire.NoMeter {
		p = append(p, "meter_id="+strconv.FormatUint(uint64(a.MeterID), 10))
	}
	return "controller(" + strings.Join(p, ",") + ")"
}

// parseController reads controller(...): with only max_len it is the
// OpenFlow output to CONTROLLER; anything else makes Open vSwitch's
// controller action.
func parseController(arg string) (ofpwire.Action, error) {
	c := &ofpwire.ActionController{MaxLen: 0xffff, Reason: 1, MeterID: ofpwire.NoMeter}
	for _, tok := range strings.Split(arg, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(tok), "=")
		switch name {
		case "":
		case "max_len":
			v, err := parseNum("controller max_len", val, 16)
			if err != nil {
				return nil, err
			}
			c.MaxLen = uint16(v)
		case "reason":
			found := false
			for i, r := range packetInReasons {
				if r == val {
					c.Reason, found = uint8(i), true
				}
			}
			if !found {
				return nil, fmt.Errorf("controller: unknown reason %q", val)
			}
		case "id":
			v, err := parseNum("controller id", val, 16)
			if err != nil {
				return nil, err
			}
			c.ControllerID = uint16(v)
		case "userdata":
			b, err := parseHexBytes(val)
			if err != nil {
				return nil, fmt.Errorf("controller userdata: %w", err)
			}
			c.Userdata = b
		case "pause":
			c.Pause = true
		case "meter_id":
			v, err := parseNum("controller meter_id", val, 32)
			if err != nil {
				return nil, err
			}
			c.MeterID = uint32(v)
		default:
			// A bare number is max_len, as in controller:N.
			v, err := parseNum("controller max_len", name, 16)
			if err != nil {
				return nil, fmt.Errorf("controller: unknown argument %q", tok)
			}
			c.MaxLen = uint16(v)
		}
	}
	if c.Reason == 1 && c.ControllerID == 0 && len(c.Userdata) == 0 && !c.Pause && c.MeterID == ofpwire.NoMeter {
		return &ofpwire.ActionOutput{Port: ofpwire.PortController, MaxLen: c.MaxLen}, nil
	}
	return c, nil
}

package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// meterFlagNames are the meter flags in ovs-ofctl's spelling, in bit order.
var meterFlagNames = []struct {
	name string
	flag ofpwire.MeterFlag
}{
	{"kbps", ofpwire.MeterFlagKBitPerSec}, {"pktps", ofpwire.MeterFlagPacketPerSec},
	{"burst", ofpwire.MeterFlagBurst}, {"stats", ofpwire.MeterFlagStats},
}

// findBands returns the offset of the "band=" or "bands=" keyword that
// starts a token, and the offset of the text after it; -1 if none.
func findBands(s string) (at, rest int) {
	for i := 0; i < len(s); i++ {
		if i > 0 && !isSep(s[i-1]) {
			continue
		}
		for _, kw := range []string{"bands=", "band="} {
			if strings.HasPrefix(s[i:], kw) {
				return i, i + len(kw)
			}
		}
	}
	return -1, -1
}

// ParseMeter reads a meter in ovs-ofctl's syntax,
// "meter=1,kbps,burst,stats,band=type=drop,rate=1000,burst_size=100" (each
// "type=" starts another band; dscp_remark bands take prec_level), into the
// METER_MOD that performs cmd with it. Adds and modifies need meter= and
// at least one band; deletes take only meter=, which defaults to all.
// Errors read `bad meter "TEXT": reason`.
func ParseMeter(s string, cmd ofpwire.MeterCommand) (*ofpwire.MeterMod, error) {
	mm, err := parseMeter(s, cmd)
	if err != nil {
		return nil, fmt.Errorf("bad meter %q: %w", s, err)
	}
	return mm, nil
}

func parseMeter(s string, cmd ofpwire.MeterCommand) (*ofpwire.MeterMod, error) {
	if cmd > ofpwire.MeterDelete {
		return nil, fmt.Errorf("unknown meter command %d", cmd)
	}
	mm := &ofpwire.MeterMod{Command: cmd, MeterID: ofpwire.MeterAll}
	head, bands := s, ""
	at, rest := findBands(s)
	if at >= 0 {
		if cmd == ofpwire.MeterDelete {
			return nil, fmt.Errorf("bands are not allowed when deleting meters")
		}
		head, bands = s[:at], s[rest:]
	} else if cmd != ofpwire.MeterDelete {
		return nil, fmt.Errorf("must specify bands")
	}
	toks, err := splitTop(head)
	if err != nil {
		return nil, err
	}
	hadID := false
	for _, tok := range toks {
		key, val, hasVal := strings.Cut(tok, "=")
		if !hasVal {
			found := false
			for _, f := range meterFlagNames {
				if key == f.name {
					found = true
					mm.Flags |= f.flag
				}
			}
			if !found {
				return nil, fmt.Errorf("unknown keyword %q", tok)
			}
			if cmd == ofpwire.MeterDelete {
				return nil, fmt.Errorf("%s is not allowed when deleting meters", key)
			}
			continue
		}
		if key != "meter" {
			return nil, fmt.Errorf("unknown keyword %q", key)
		}
		if hadID {
			return nil, fmt.Errorf("meter given twice")
		}
		hadID = true
		switch val {
		case "all":
			mm.MeterID = ofpwire.MeterAll
		case "controller":
			mm.MeterID = ofpwire.MeterController
		case "slowpath":
			mm.MeterID = ofpwire.MeterSlowpath
		default:
			v, err := parseNum("meter", val, 32)
			if err != nil {
				return nil, err
			}
			if v == 0 || ofpwire.Meter(v) > ofpwire.MeterMax {
				return nil, fmt.Errorf("meter %s is not a meter id (1 to %d)", val, ofpwire.MeterMax)
			}
			mm.MeterID = ofpwire.Meter(v)
		}
		if cmd != ofpwire.MeterDelete && mm.MeterID == ofpwire.MeterAll {
			return nil, fmt.Errorf("meter=all is only for deleting meters")
		}
	}
	if cmd != ofpwire.MeterDelete && !hadID {
		return nil, fmt.Errorf("must specify meter")
	}
	if cmd != ofpwire.MeterDelete {
		if mm.Bands, err = parseBands(bands); err != nil {
			return nil, err
		}
	}
	return mm, nil
}

// parseBands reads "type=drop,rate=N,burst_size=N,type=dscp_remark,...".
func parseBands(s string) ([]ofpwire.MeterBand, error) {
	toks, err := splitTop(s)
	if err != nil {
		return nil, err
	}
	var out []ofpwire.MeterBand
	for _, tok := range toks {
		key, val, hasVal := strings.Cut(tok, "=")
		if !hasVal {
			return nil, fmt.Errorf("band: %q needs a value", tok)
		}
		if key == "type" {
			var t ofpwire.MeterBandType
			switch val {
			case "drop":
				t = ofpwire.MeterBandTypeDrop
			case "dscp_remark":
				t = ofpwire.MeterBandTypeDSCPRemark
			default:
				return nil, fmt.Errorf("band: unknown type %q (drop, dscp_remark)", val)
			}
			out = append(out, ofpwire.MeterBand{Type: t})
			continue
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("band must start with type=")
		}
		b := &out[len(out)-1]
		switch key {
		case "rate", "burst_size":
			v, err := parseNum(key, val, 32)
			if err != nil {
				return nil, err
			}
			if key == "rate" {
				b.Rate = uint32(v)
			} else {
				b.BurstSize = uint32(v)
			}
		case "prec_level":
			if b.Type != ofpwire.MeterBandTypeDSCPRemark {
				return nil, fmt.Errorf("prec_level is only for dscp_remark bands")
			}
			v, err := parseNum(key, val, 8)
			if err != nil {
				return nil, err
			}
			b.PrecLevel = uint8(v)
		default:
			return nil, fmt.Errorf("band: unknown keyword %q", key)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("must specify bands")
	}
	return out, nil
}

// meterIDText prints a meter id as ovs-ofctl does.
func meterIDText(m ofpwire.Meter) string {
	switch m {
	case ofpwire.MeterAll:
		return "all"
	case ofpwire.MeterController:
		return "controller"
	case ofpwire.MeterSlowpath:
		return "slowpath"
	}
	return strconv.FormatUint(uint64(m), 10)
}

// FormatMeter prints a meter configuration the way
// `ovs-ofctl -O OpenFlow13 dump-meters` does, a header line and one line
// per band: "meter=1 kbps burst bands=\ntype=drop rate=1000 burst_size=100".
// ParseMeter reads it back (spaces and newlines separate like commas).
func FormatMeter(mc *ofpwire.MeterConfig) string {
	var b strings.Builder
	b.WriteString("meter=" + meterIDText(mc.MeterID) + " ")
	for _, f := range meterFlagNames {
		if mc.Flags&f.flag != 0 {
			b.WriteString(f.name + " ")
		}
	}
	b.WriteString("bands=")
	for _, mb := range mc.Bands {
		b.WriteString("\ntype=")
		switch mb.Type {
		case ofpwire.MeterBandTypeDrop:
			b.WriteString("drop")
		case ofpwire.MeterBandTypeDSCPRemark:
			b.WriteString("dscp_remark")
		default:
			b.WriteString(strconv.Itoa(int(mb.Type)))
		}
		fmt.Fprintf(&b, " rate=%d", mb.Rate)
		if mc.Flags&ofpwire.MeterFlagBurst != 0 {
			fmt.Fprintf(&b, " burst_size=%d", mb.BurstSize)
		}
		if mb.Type == ofpwire.MeterBandTypeDSCPRemark {
			fmt.Fprintf(&b, " prec_level=%d", mb.PrecLevel)
		}
	}
	return b.String()
}

// FormatMeterMod prints mm on one line in the syntax ParseMeter reads for
// the same command, so that ParseMeter(FormatMeterMod(mm), mm.Command)
// rebuilds mm.
func FormatMeterMod(mm *ofpwire.MeterMod) string {
	if mm.Command == ofpwire.MeterDelete {
		return "meter=" + meterIDText(mm.MeterID)
	}
	parts := []string{"meter=" + meterIDText(mm.MeterID)}
	for _, f := range meterFlagNames {
		if mm.Flags&f.flag != 0 {
			parts = append(parts, f.name)
		}
	}
	for i, mb := range mm.Bands {
		t := "type=drop"
		if mb.Type == ofpwire.MeterBandTypeDSCPRemark {
			t = "type=dscp_remark"
		}
		if i == 0 {
			t = "band=" + t
		}
		parts = append(parts, t, fmt.Sprintf("rate=%d", mb.Rate))
		if mb.BurstSize != 0 {
			parts = append(parts, fmt.Sprintf("burst_size=%d", mb.BurstSize))
		}
		if mb.Type == ofpwire.MeterBandTypeDSCPRemark {
			parts = append(parts, fmt.Sprintf("prec_level=%d", mb.PrecLevel))
		}
	}
	return strings.Join(parts, ",")
}

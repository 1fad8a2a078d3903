package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// learn(...) and fin_timeout(...) in ovs-ofctl's syntax (ovs-actions(7)),
// read and printed as Open vSwitch 3.1 does.

// parseLearn reads learn's arguments: the learned flow's table, timeouts,
// priority, cookie and flags, then its specs: FIELD[range]=VALUE or
// =SRC[range] (or a bare FIELD[range]: match the packet's own value),
// load:VALUE->DST[range], load:SRC[range]->DST[range], output:SRC[range].
func parseLearn(arg string, ports portResolver) (*ofpwire.ActionLearn, error) {
	l := &ofpwire.ActionLearn{Priority: DefaultPriority, TableID: 1}
	toks, err := splitTop(arg)
	if err != nil {
		return nil, fmt.Errorf("learn: %w", err)
	}
	for _, tok := range toks {
		i := strings.IndexAny(tok, "=:")
		name, val := tok, ""
		if i >= 0 {
			name, val = tok[:i], tok[i+1:]
		}
		num := func(bits int) (uint64, error) { return parseNum("learn "+name, val, bits) }
		var v uint64
		switch name {
		case "table":
			if v, err = num(8); err == nil && v == 0xff {
				err = fmt.Errorf("learn: table id 255 not valid for `learn' action")
			}
			l.TableID = uint8(v)
		case "priority":
			v, err = num(16)
			l.Priority = uint16(v)
		case "idle_timeout":
			v, err = num(16)
			l.IdleTimeout = uint16(v)
		case "hard_timeout":
			v, err = num(16)
			l.HardTimeout = uint16(v)
		case "fin_idle_timeout":
			v, err = num(16)
			l.FinIdleTimeout = uint16(v)
		case "fin_hard_timeout":
			v, err = num(16)
			l.FinHardTimeout = uint16(v)
		case "cookie":
			l.Cookie, err = num(64)
		case "limit":
			v, err = num(32)
			l.Limit = uint32(v)
		case "send_flow_rem":
			l.Flags |= ofpwire.LearnSendFlowRem
		case "delete_learned":
			l.Flags |= ofpwire.LearnDeleteLearned
		case "result_dst":
			f, ofs, n, err1 := parseSubfield(val)
			switch {
			case err1 != nil:
				err = fmt.Errorf("learn: result_dst: %w", err1)
			case n != 1:
				err = fmt.Errorf("learn: result_dst in 'learn' action must be a single bit")
			}
			l.Flags |= ofpwire.LearnWriteResult
			l.ResultDst, l.ResultDstOfs = f, uint16(ofs)
		default:
			var s ofpwire.LearnSpec
			s, err = parseLearnSpec(name, val, i >= 0 && tok[i] == ':', ports)
			l.Specs = append(l.Specs, s)
		}
		if err != nil {
			return nil, err
		}
	}
	return l, nil
}

// parseLearnSpec reads one spec: name and val are what surrounds the
// first '=' or ':' (colon says which).
func parseLearnSpec(name, val string, colon bool, ports portResolver) (ofpwire.LearnSpec, error) {
	var s ofpwire.LearnSpec
	switch {
	case colon && name == "load":
		from, to, ok := strings.Cut(val, "->")
		if !ok || from == "" {
			return s, fmt.Errorf("learn: load needs VALUE->DST or SRC->DST, not %q", val)
		}
		df, dofs, dn, err := parseSubfield(to)
		if err != nil {
			return s, fmt.Errorf("learn: load: %w", err)
		}
		s = ofpwire.LearnSpec{NBits: uint16(dn), Dst: ofpwire.LearnDstLoad, DstField: df, DstOfs: uint16(dofs)}
		if imm, err := learnImmediate(from, df, dn, false, ports); err == nil {
			s.Imm = imm
			return s, nil
		}
		sf, sofs, sn, err := parseSubfield(from)
		if err != nil {
			return s, fmt.Errorf("learn: load: %q is neither a number nor a field", from)
		}
		if sn != dn {
			return s, fmt.Errorf("learn: load: %s has %d bits, %s %d", from, sn, to, dn)
		}
		s.SrcField, s.SrcOfs = sf, uint16(sofs)
		return s, nil
	case colon && name == "output":
		f, ofs, n, err := parseSubfield(val)
		if err != nil {
			return s, fmt.Errorf("learn: output: %w", err)
		}
		return ofpwire.LearnSpec{NBits: uint16(n), SrcField: f, SrcOfs: uint16(ofs), Dst: ofpwire.LearnDstOutput}, nil
	case colon:
		return s, fmt.Errorf("learn: unknown keyword %s", name)
	}
	df, dofs, dn, err := parseSubfield(name)
	if err != nil {
		return s, fmt.Errorf("learn: unknown keyword %s", name)
	}
	s = ofpwire.LearnSpec{NBits: uint16(dn), Dst: ofpwire.LearnDstMatch, DstField: df, DstOfs: uint16(dofs),
		SrcField: df, SrcOfs: uint16(dofs)}
	if val == "" {
		return s, nil
	}
	if sf, sofs, sn, err := parseSubfield(val); err == nil {
		if sn != dn {
			return s, fmt.Errorf("learn: bit widths of %s (%d) and %s (%d) differ", name, dn, val, sn)
		}
		s.SrcField, s.SrcOfs = sf, uint16(sofs)
		return s, nil
	}
	whole := dofs == 0 && dn == ofpwire.FieldBits(df)
	imm, err := learnImmediate(val, df, dn, whole, ports)
	if err != nil {
		return s, fmt.Errorf("learn: %s value %s cannot be parsed as a subfield or an immediate value: %w", name, val, err)
	}
	s.SrcField, s.SrcOfs, s.Imm = 0, 0, imm
	return s, nil
}

// learnImmediate reads an immediate of n bits for field f: in the field's
// own syntax (a MAC, an address, a port) when it fills the whole field,
// else a number. The result is big-endian in (n+7)/8 bytes.
func learnImmediate(s string, f ofpwire.XMType, n int, whole bool, ports portResolver) ([]byte, error) {
	size := ofpwire.FieldBits(f) / 8
	var v []byte
	switch {
	case whole && f == ofpwire.XMTypeInPort16:
		p, err := parsePort(s, ports)
		if err != nil {
			return nil, err
		}
		if p > 0xffff && p < ofpwire.PortMax {
			return nil, fmt.Errorf("port %d does not fit in 16 bits", p)
		}
		v = []byte{byte(p >> 8), byte(p)}
	case whole && kindOf(f) != kindNum:
		o, err := parseFieldValue(f, s)
		if err != nil {
			return nil, err
		}
		v = o.Value
	default:
		var err error
		if v, err = parseWide(s, size); err != nil {
			return nil, err
		}
	}
	for i := n; i < 8*len(v); i += 64 {
		if ofpwire.Bits(v, i, min(64, 8*len(v)-i)) != 0 {
			return nil, fmt.Errorf("value %s does not fit into %d bits", s, n)
		}
	}
	return v[len(v)-(n+7)/8:], nil
}

// learnFieldName is the name learn prints a whole-field immediate match
// by: Open vSwitch's field name, where it differs from set_field's.
func learnFieldName(f ofpwire.XMType) string {
	switch f {
	case ofpwire.XMTypeIPProto:
		return "nw_proto"
	case ofpwire.XMTypeIPFrag:
		return "ip_frag"
	}
	return shortFieldName(f)
}

// learnHexFields are the fields Open vSwitch prints in hex (the rest of
// the numeric ones in decimal).
func learnHexField(f ofpwire.XMType) bool {
	if _, _, reg := ofpwire.IsReg(f); reg {
		return true
	}
	switch f {
	case ofpwire.XMTypeEthType, ofpwire.XMTypeMetadata, ofpwire.XMTypeTunnelID, ofpwire.XMTypeCTMark,
		ofpwire.XMTypeCTLabel, ofpwire.XMTypeIPv6FLabel:
		return true
	}
	return false
}

// formatLearn prints learn as Open vSwitch's learn_format does.
func formatLearn(l *ofpwire.ActionLearn) string {
	var b strings.Builder
	fmt.Fprintf(&b, "learn(table=%d", l.TableID)
	if l.IdleTimeout != 0 {
		fmt.Fprintf(&b, ",idle_timeout=%d", l.IdleTimeout)
	}
	if l.HardTimeout != 0 {
		fmt.Fprintf(&b, ",hard_timeout=%d", l.HardTimeout)
	}
	if l.FinIdleTimeout != 0 {
		fmt.Fprintf(&b, ",fin_idle_timeout=%d", l.FinIdleTimeout)
	}
	if l.FinHardTimeout != 0 {
		fmt.Fprintf(&b, ",fin_hard_timeout=%d", l.FinHardTimeout)
	}
	if l.Priority != DefaultPriority {
		fmt.Fprintf(&b, ",priority=%d", l.Priority)
	}
	if l.Flags&ofpwire.LearnSendFlowRem != 0 {
		b.WriteString(",send_flow_rem")
	}
	if l.Flags&ofpwire.LearnDeleteLearned != 0 {
		b.WriteString(",delete_learned")
	}
	if l.Cookie != 0 {
		fmt.Fprintf(&b, ",cookie=%#x", l.Cookie)
	}
	if l.Limit != 0 {
		fmt.Fprintf(&b, ",limit=%d", l.Limit)
	}
	if l.Flags&ofpwire.LearnWriteResult != 0 {
		b.WriteString(",result_dst=" + formatSubfield(l.ResultDst, int(l.ResultDstOfs), 1))
	}
	for _, s := range l.Specs {
		b.WriteByte(',')
		dst := formatSubfield(s.DstField, int(s.DstOfs), int(s.NBits))
		switch s.Dst {
		case ofpwire.LearnDstMatch:
			switch {
			case s.Imm != nil && s.DstOfs == 0 && int(s.NBits) == ofpwire.FieldBits(s.DstField):
				b.WriteString(learnFieldName(s.DstField) + "=" + formatLearnValue(s.DstField, s.Imm))
			case s.Imm != nil:
				b.WriteString(dst + "=" + formatWide(s.Imm))
			default:
				b.WriteString(dst)
				if s.SrcField != s.DstField || s.SrcOfs != s.DstOfs {
					b.WriteString("=" + formatSubfield(s.SrcField, int(s.SrcOfs), int(s.NBits)))
				}
			}
		case ofpwire.LearnDstLoad:
			src := formatWide(s.Imm)
			if s.Imm == nil {
				src = formatSubfield(s.SrcField, int(s.SrcOfs), int(s.NBits))
			}
			b.WriteString("load:" + src + "->" + dst)
		default:
			b.WriteString("output:" + formatSubfield(s.SrcField, int(s.SrcOfs), int(s.NBits)))
		}
	}
	return b.String() + ")"
}

// formatLearnValue prints a whole-field immediate in the field's syntax.
func formatLearnValue(f ofpwire.XMType, imm []byte) string {
	size := ofpwire.FieldBits(f) / 8
	v := make([]byte, size)
	copy(v[size-min(size, len(imm)):], imm[max(0, len(imm)-size):])
	switch {
	case f == ofpwire.XMTypeInPort16:
		return portName(ofpwire.PortNo(ofmatch.InPort32(uint16(v[0])<<8 | uint16(v[1]))))
	case kindOf(f) != kindNum:
		return formatFieldValue(ofpwire.NewOXM(f, v))
	case learnHexField(f) || size > 8:
		return formatWide(v)
	}
	return strconv.FormatUint(ofpwire.Bits(v, 0, 8*size), 10)
}

// parseFinTimeout reads fin_timeout(idle_timeout=N,hard_timeout=N).
func parseFinTimeout(arg string) (*ofpwire.ActionFinTimeout, error) {
	a := &ofpwire.ActionFinTimeout{}
	toks, err := splitTop(arg)
	if err != nil {
		return nil, fmt.Errorf("fin_timeout: %w", err)
	}
	for _, tok := range toks {
		name, val, _ := strings.Cut(tok, "=")
		v, err := parseNum("fin_timeout "+name, val, 16)
		if err != nil {
			return nil, err
		}
		switch name {
		case "idle_timeout":
			a.IdleTimeout = uint16(v)
		case "hard_timeout":
			a.HardTimeout = uint16(v)
		default:
			return nil, fmt.Errorf("fin_timeout: unknown argument %q", name)
		}
	}
	return a, nil
}

// formatFinTimeout prints fin_timeout as Open vSwitch does.
func formatFinTimeout(a *ofpwire.ActionFinTimeout) string {
	var p []string
	if a.IdleTimeout != 0 {
		p = append(p, "idle_timeout="+strconv.Itoa(int(a.IdleTimeout)))
	}
	if a.HardTimeout != 0 {
		p = append(p, "hard_timeout="+strconv.Itoa(int(a.HardTimeout)))
	}
	return "fin_timeout(" + strings.Join(p, ",") + ")"
}

package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Open vSwitch's extension actions in ovs-ofctl's syntax: resubmit,
// move, load, set_field on registers and with a mask, note, exit (and
// multipath and bundle, multipath.go).

// subfieldNames are the names ovs-ofctl prints a field by in move and
// load (the NXM name where the field has one, else the OXM name), and
// the short names it also reads.
var subfieldNames = func() map[ofpwire.XMType][]string {
	m := map[ofpwire.XMType][]string{
		ofpwire.XMTypeEthDst: {"NXM_OF_ETH_DST", "eth_dst", "dl_dst"}, ofpwire.XMTypeEthSrc: {"NXM_OF_ETH_SRC", "eth_src", "dl_src"},
		ofpwire.XMTypeEthType: {"NXM_OF_ETH_TYPE", "eth_type", "dl_type"}, ofpwire.XMTypeIPProto: {"NXM_OF_IP_PROTO", "ip_proto", "nw_proto"},
		ofpwire.XMTypeIPv4Src: {"NXM_OF_IP_SRC", "ip_src", "nw_src"}, ofpwire.XMTypeIPv4Dst: {"NXM_OF_IP_DST", "ip_dst", "nw_dst"},
		ofpwire.XMTypeTCPSrc: {"NXM_OF_TCP_SRC", "tcp_src"}, ofpwire.XMTypeTCPDst: {"NXM_OF_TCP_DST", "tcp_dst"},
		ofpwire.XMTypeUDPSrc: {"NXM_OF_UDP_SRC", "udp_src"}, ofpwire.XMTypeUDPDst: {"NXM_OF_UDP_DST", "udp_dst"},
		ofpwire.XMTypeICMPv4Type: {"NXM_OF_ICMP_TYPE", "icmp_type"}, ofpwire.XMTypeICMPv4Code: {"NXM_OF_ICMP_CODE", "icmp_code"},
		ofpwire.XMTypeARPOpcode: {"NXM_OF_ARP_OP", "arp_op"}, ofpwire.XMTypeARPSPA: {"NXM_OF_ARP_SPA", "arp_spa"},
		ofpwire.XMTypeARPTPA: {"NXM_OF_ARP_TPA", "arp_tpa"}, ofpwire.XMTypeARPSHA: {"NXM_NX_ARP_SHA", "arp_sha"},
		ofpwire.XMTypeARPTHA: {"NXM_NX_ARP_THA", "arp_tha"}, ofpwire.XMTypeIPv6Src: {"NXM_NX_IPV6_SRC", "ipv6_src"},
		ofpwire.XMTypeIPv6Dst: {"NXM_NX_IPV6_DST", "ipv6_dst"}, ofpwire.XMTypeICMPv6Type: {"NXM_NX_ICMPV6_TYPE", "icmpv6_type"},
		ofpwire.XMTypeICMPv6Code: {"NXM_NX_ICMPV6_CODE", "icmpv6_code"}, ofpwire.XMTypeIPv6NDTarget: {"NXM_NX_ND_TARGET", "nd_target"},
		ofpwire.XMTypeIPv6NDSLL: {"NXM_NX_ND_SLL", "nd_sll"}, ofpwire.XMTypeIPv6NDTLL: {"NXM_NX_ND_TLL", "nd_tll"},
		ofpwire.XMTypeIPv6FLabel: {"NXM_NX_IPV6_LABEL", "ipv6_label"}, ofpwire.XMTypeIPECN: {"NXM_NX_IP_ECN", "nw_ecn", "ip_ecn"},
		ofpwire.XMTypeTunnelID: {"NXM_NX_TUN_ID", "tun_id", "tunnel_id"}, ofpwire.XMTypeMetadata: {"OXM_OF_METADATA", "metadata"},
		ofpwire.XMTypeVlanID: {"OXM_OF_VLAN_VID", "vlan_vid"}, ofpwire.XMTypeVlanPCP: {"OXM_OF_VLAN_PCP", "vlan_pcp"},
		ofpwire.XMTypeIPDSCP: {"OXM_OF_IP_DSCP", "ip_dscp"}, ofpwire.XMTypeSCTPSrc: {"OXM_OF_SCTP_SRC", "sctp_src"},
		ofpwire.XMTypeSCTPDst: {"OXM_OF_SCTP_DST", "sctp_dst"}, ofpwire.XMTypeMPLSLabel: {"OXM_OF_MPLS_LABEL", "mpls_label"},
		ofpwire.XMTypeMPLSTC: {"OXM_OF_MPLS_TC", "mpls_tc"}, ofpwire.XMTypeMPLSBOS: {"OXM_OF_MPLS_BOS", "mpls_bos"},
		ofpwire.XMTypePBBISID:    {"OXM_OF_PBB_ISID", "pbb_isid"},
		ofpwire.XMTypeTunIPv4Src: {"NXM_NX_TUN_IPV4_SRC", "tun_src"}, ofpwire.XMTypeTunIPv4Dst: {"NXM_NX_TUN_IPV4_DST", "tun_dst"},
		ofpwire.XMTypeTunIPv6Src: {"NXM_NX_TUN_IPV6_SRC", "tun_ipv6_src"}, ofpwire.XMTypeTunIPv6Dst: {"NXM_NX_TUN_IPV6_DST", "tun_ipv6_dst"},
		ofpwire.XMTypeInPort16: {"NXM_OF_IN_PORT", "in_port"}, ofpwire.XMTypeIPTTL: {"NXM_NX_IP_TTL", "nw_ttl"},
		ofpwire.XMTypeIPFrag: {"NXM_NX_IP_FRAG", "nw_frag"},
		ofpwire.XMTypeCTMark: {"NXM_NX_CT_MARK", "ct_mark"}, ofpwire.XMTypeCTLabel: {"NXM_NX_CT_LABEL", "ct_label"},
		ofpwire.XMTypePktMark: {"NXM_NX_PKT_MARK", "pkt_mark"},
		ofpwire.XMTypeDPHash:  {"NXM_NX_DP_HASH", "dp_hash"}, ofpwire.XMTypeRecircID: {"NXM_NX_RECIRC_ID", "recirc_id"},
		ofpwire.XMTypeNwTOS: {"NXM_OF_IP_TOS", "nw_tos"},
	}
	for i := range ofpwire.NumRegs {
		m[ofpwire.XMTypeReg0+ofpwire.XMType(i)] = []string{fmt.Sprintf("NXM_NX_REG%d", i), fmt.Sprintf("reg%d", i)}
	}
	for i := range ofpwire.NumXRegs {
		m[ofpwire.XMTypeXReg0+ofpwire.XMType(i)] = []string{fmt.Sprintf("OXM_OF_PKT_REG%d", i), fmt.Sprintf("xreg%d", i)}
	}
	for i := range ofpwire.NumXXRegs {
		m[ofpwire.XMTypeXXReg0+ofpwire.XMType(i)] = []string{fmt.Sprintf("NXM_NX_XXREG%d", i), fmt.Sprintf("xxreg%d", i)}
	}
	for i := range ofpwire.NumTunMetadata {
		m[ofpwire.XMTypeTunMetadata0+ofpwire.XMType(i)] = []string{fmt.Sprintf("NXM_NX_TUN_METADATA%d", i), fmt.Sprintf("tun_metadata%d", i)}
	}
	return m
}()

// tunMetadataByName reads tun_metadataN.
func tunMetadataByName(name string) (ofpwire.XMType, bool) {
	s, ok := strings.CutPrefix(name, "tun_metadata")
	n, err := strconv.Atoi(s)
	if !ok || err != nil || n < 0 || n >= ofpwire.NumTunMetadata || s != strconv.Itoa(n) {
		return 0, false
	}
	return ofpwire.XMTypeTunMetadata0 + ofpwire.XMType(n), true
}

// subfieldByName finds a field by any of its names (case matters for the
// short ones, as in ovs-ofctl; NXM/OXM names are upper case).
func subfieldByName(name string) (ofpwire.XMType, bool) {
	for f, ns := range subfieldNames {
		for _, n := range ns {
			if n == name {
				return f, true
			}
		}
	}
	return 0, false
}

// shortFieldName is the name set_field prints a field by.
func shortFieldName(f ofpwire.XMType) string {
	if n := fieldName(f); n != "" {
		return n
	}
	if ns := subfieldNames[f]; len(ns) > 1 {
		return ns[1]
	}
	return fmt.Sprintf("field%d", f)
}

// parseSubfield reads FIELD[], FIELD[bit], FIELD[start..end] or a bare
// FIELD (the whole field).
func parseSubfield(s string) (f ofpwire.XMType, ofs, n int, err error) {
	name, rng, hasRng := strings.Cut(s, "[")
	f, ok := subfieldByName(strings.TrimSpace(name))
	if !ok {
		return 0, 0, 0, fmt.Errorf("unknown field %q", name)
	}
	width := ofpwire.FieldBits(f)
	if !hasRng {
		return f, 0, width, nil
	}
	rng, closed := strings.CutSuffix(rng, "]")
	if !closed {
		return 0, 0, 0, fmt.Errorf("%s: missing ]", s)
	}
	if rng == "" {
		return f, 0, width, nil
	}
	lo, hi, isRange := strings.Cut(rng, "..")
	a, err1 := strconv.Atoi(lo)
	b := a
	var err2 error
	if isRange {
		b, err2 = strconv.Atoi(hi)
	}
	if err1 != nil || err2 != nil || a < 0 || b < a || b >= width {
		return 0, 0, 0, fmt.Errorf("%s: bad bit range for a %d-bit field", s, width)
	}
	return f, a, b - a + 1, nil
}

// formatSubfield prints a subfield as ovs-ofctl does.
func formatSubfield(f ofpwire.XMType, ofs, n int) string {
	name := fmt.Sprintf("field%d", f)
	if ns := subfieldNames[f]; len(ns) > 0 {
		name = ns[0]
	}
	switch {
	case ofs == 0 && n == ofpwire.FieldBits(f):
		return name + "[]"
	case n == 1:
		return fmt.Sprintf("%s[%d]", name, ofs)
	}
	return fmt.Sprintf("%s[%d..%d]", name, ofs, ofs+n-1)
}

// parseNXAction reads the extension actions; ok false for other names.
func parseNXAction(name, arg string, hasArg bool, ports portResolver) (a ofpwire.Action, ok bool, err error) {
	switch name {
	case "resubmit":
		a, err = parseResubmit(arg, hasArg, ports)
	case "move":
		src, dst, found := strings.Cut(arg, "->")
		if !found {
			return nil, true, fmt.Errorf("move needs SRC->DST")
		}
		sf, so, sn, err1 := parseSubfield(src)
		df, do, dn, err2 := parseSubfield(dst)
		switch {
		case err1 != nil:
			err = fmt.Errorf("move: %w", err1)
		case err2 != nil:
			err = fmt.Errorf("move: %w", err2)
		case sn != dn:
			err = fmt.Errorf("move: %s has %d bits, %s %d", src, sn, dst, dn)
		default:
			a = &ofpwire.ActionRegMove{Src: sf, Dst: df, SrcOfs: uint16(so), DstOfs: uint16(do), NBits: uint16(sn)}
		}
	case "load":
		a, err = parseLoad(arg)
	case "note":
		a, err = parseNote(arg)
	case "exit":
		if hasArg {
			err = fmt.Errorf("exit takes no argument")
		}
		a = &ofpwire.ActionExit{}
	case "ct":
		a, err = parseCT(arg, ports)
	case "clone":
		toks, err1 := splitTop(arg)
		if err1 != nil {
			return nil, true, fmt.Errorf("clone: %w", err1)
		}
		c := &ofpwire.ActionClone{}
		for _, tok := range toks {
			as, err1 := parseAction(tok, newActionContext(ofpwire.Match{}), ports)
			if err1 != nil {
				return nil, true, fmt.Errorf("clone: %w", err1)
			}
			c.Actions = append(c.Actions, as...)
		}
		a = c
	case "check_pkt_larger":
		n, dst, ok := strings.Cut(arg, ")->")
		if !ok {
			return nil, true, fmt.Errorf("check_pkt_larger needs (LEN)->DST[BIT]")
		}
		v, err1 := parseNum("check_pkt_larger", n, 16)
		if err1 != nil {
			return nil, true, err1
		}
		f, ofs, nb, err1 := parseSubfield(dst)
		if err1 != nil || nb != 1 {
			return nil, true, fmt.Errorf("check_pkt_larger: %s is not one bit", dst)
		}
		a = &ofpwire.ActionCheckPktLarger{PktLen: uint16(v), Dst: f, Ofs: uint16(ofs)}
	case "conjunction":
		var id uint64
		var k, n int
		if c, err1 := fmt.Sscanf(arg, "%d,%d/%d", &id, &k, &n); err1 != nil || c != 3 || id > 0xffffffff || n < 2 || n > 64 || k < 1 || k > n {
			return nil, true, fmt.Errorf("conjunction(%s): want conjunction(ID,K/N) with 1 <= K <= N, 2 <= N <= 64", arg)
		}
		a = &ofpwire.ActionConjunction{ID: uint32(id), Clause: uint8(k - 1), NClauses: uint8(n)}
	case "learn":
		a, err = parseLearn(arg, ports)
	case "fin_timeout":
		a, err = parseFinTimeout(arg)
	case "ct_clear":
		if hasArg {
			err = fmt.Errorf("ct_clear takes no argument")
		}
		a = &ofpwire.ActionCTClear{}
	case "multipath":
		a, err = parseMultipath(arg)
	case "sample":
		a, err = parseSample(arg, ports)
	case "pop_queue":
		if hasArg {
			err = fmt.Errorf("pop_queue takes no argument")
		}
		a = &ofpwire.ActionPopQueue{}
	case "bundle", "bundle_load":
		a, err = parseBundle(arg, name == "bundle_load", ports)
	case "push", "pop":
		f, ofs, n, err1 := parseSubfield(arg)
		if err1 != nil {
			return nil, true, fmt.Errorf("%s: %w", name, err1)
		}
		a = &ofpwire.ActionStack{Pop: name == "pop", Field: f, Ofs: uint16(ofs), NBits: uint16(n)}
	default:
		return nil, false, nil
	}
	return a, true, err
}

// parseResubmit reads resubmit:PORT and resubmit([PORT],[TABLE][,ct]).
func parseResubmit(arg string, hasArg bool, ports portResolver) (ofpwire.Action, error) {
	r := &ofpwire.ActionResubmit{InPort: ofpwire.PortIn, Table: ofpwire.TableCurrent}
	if !hasArg {
		return nil, fmt.Errorf("resubmit needs a port or a table")
	}
	parts := strings.Split(arg, ",")
	if len(parts) > 3 {
		return nil, fmt.Errorf("resubmit(%s): at most port, table and ct", arg)
	}
	if p := strings.TrimSpace(parts[0]); p != "" {
		no, err := parsePort(p, ports)
		if err != nil {
			return nil, fmt.Errorf("resubmit: %w", err)
		}
		r.InPort = no
	}
	if len(parts) > 1 {
		if t := strings.TrimSpace(parts[1]); t != "" {
			v, err := parseNum("resubmit table", t, 8)
			if err != nil {
				return nil, err
			}
			r.Table = uint8(v)
		}
	}
	if len(parts) > 2 {
		if strings.TrimSpace(parts[2]) != "ct" {
			return nil, fmt.Errorf("resubmit: the third argument can only be ct")
		}
		r.CT = true
	}
	if r.InPort == ofpwire.PortIn && r.Table == ofpwire.TableCurrent && len(parts) == 1 {
		return nil, fmt.Errorf("resubmit needs a port or a table")
	}
	return r, nil
}

// parseLoad reads load:VALUE->FIELD[range]: a masked set-field.
func parseLoad(arg string) (ofpwire.Action, error) {
	vs, dst, ok := strings.Cut(arg, "->")
	if !ok {
		return nil, fmt.Errorf("load needs VALUE->DST")
	}
	f, ofs, n, err := parseSubfield(dst)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	size := ofpwire.FieldBits(f) / 8
	v, err := parseWide(vs, size)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	val, mask := make([]byte, size), make([]byte, size)
	for done := 0; done < n; done += 64 {
		c := min(64, n-done)
		ofpwire.PutBits(val, ofs+done, c, ofpwire.Bits(v, done, c))
		ofpwire.PutBits(mask, ofs+done, c, ^uint64(0))
	}
	for i := n; i < 8*size; i += 64 {
		if ofpwire.Bits(v, i, min(64, 8*size-i)) != 0 {
			return nil, fmt.Errorf("load: %s does not fit in %d bits", vs, n)
		}
	}
	// Masked even when it covers the field: a load stays a load (reg_load
	// on the wire, load: in print), as in Open vSwitch.
	return &ofpwire.ActionSetField{Field: ofpwire.NewMaskedOXM(f, val, mask)}, nil
}

// parseWide reads a number of up to size bytes (decimal up to 64 bits, or
// hex), as a big-endian byte string of that size.
func parseWide(s string, size int) ([]byte, error) {
	w, err := parseWords(s, (size+3)/4)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 4*len(w))
	for i, x := range w {
		ofpwire.PutBits(b, 32*(len(w)-1-i), 32, uint64(x))
	}
	for _, x := range b[:len(b)-size] {
		if x != 0 {
			return nil, fmt.Errorf("%s does not fit in %d bytes", s, size)
		}
	}
	return b[len(b)-size:], nil
}

// parseNote reads note:HEX[.HEX]... (bytes, dots optional).
func parseNote(arg string) (ofpwire.Action, error) {
	b, err := parseHexBytes(arg)
	if err != nil {
		return nil, fmt.Errorf("note: %w", err)
	}
	// On the wire a note fills its action to 8 bytes (at least 6 bytes
	// of note): read it as it will come back.
	for len(b) < 6 || (10+len(b))%8 != 0 {
		b = append(b, 0)
	}
	return &ofpwire.ActionNote{Note: b}, nil
}

// formatNXAction prints the extension actions; ok false for others.
func formatNXAction(a ofpwire.Action) (string, bool) {
	switch a := a.(type) {
	case *ofpwire.ActionResubmit:
		if a.InPort != ofpwire.PortIn && a.Table == ofpwire.TableCurrent && !a.CT {
			return "resubmit:" + portName(a.InPort), true
		}
		s := "resubmit("
		if a.InPort != ofpwire.PortIn {
			s += portName(a.InPort)
		}
		s += ","
		if a.Table != ofpwire.TableCurrent {
			s += strconv.Itoa(int(a.Table))
		}
		if a.CT {
			s += ",ct"
		}
		return s + ")", true
	case *ofpwire.ActionRegMove:
		return "move:" + formatSubfield(a.Src, int(a.SrcOfs), int(a.NBits)) + "->" +
			formatSubfield(a.Dst, int(a.DstOfs), int(a.NBits)), true
	case *ofpwire.ActionNote:
		var parts []string
		for _, b := range a.Note {
			parts = append(parts, fmt.Sprintf("%02x", b))
		}
		return "note:" + strings.Join(parts, "."), true
	case *ofpwire.ActionExit:
		return "exit", true
	case *ofpwire.ActionSample:
		return formatSample(a), true
	case *ofpwire.ActionPopQueue:
		return "pop_queue", true
	case *ofpwire.ActionStack:
		op := "push:"
		if a.Pop {
			op = "pop:"
		}
		return op + formatSubfield(a.Field, int(a.Ofs), int(a.NBits)), true
	case *ofpwire.ActionCT:
		return formatCT(a), true
	case *ofpwire.ActionNAT:
		return formatNAT(a), true
	case *ofpwire.ActionCTClear:
		return "ct_clear", true
	case *ofpwire.ActionLearn:
		return formatLearn(a), true
	case *ofpwire.ActionFinTimeout:
		return formatFinTimeout(a), true
	case *ofpwire.ActionOutputReg:
		return "output:" + formatSubfield(a.Field, int(a.Ofs), int(a.NBits)), true
	case *ofpwire.ActionConjunction:
		return fmt.Sprintf("conjunction(%d,%d/%d)", a.ID, int(a.Clause)+1, a.NClauses), true
	case *ofpwire.ActionClone:
		var e []string
		for _, x := range a.Actions {
			e = append(e, formatAction(x))
		}
		return "clone(" + strings.Join(e, ",") + ")", true
	case *ofpwire.ActionCheckPktLarger:
		return fmt.Sprintf("check_pkt_larger(%d)->%s", a.PktLen, formatSubfield(a.Dst, int(a.Ofs), 1)), true
	case *ofpwire.ActionController:
		return formatController(a), true
	case *ofpwire.ActionMultipath:
		return formatMultipath(a), true
	case *ofpwire.ActionBundle:
		return formatBundle(a), true
	case *ofpwire.ActionDecTTLIDs:
		ids := make([]string, len(a.IDs))
		for i, id := range a.IDs {
			ids[i] = strconv.Itoa(int(id))
		}
		return "dec_ttl(" + strings.Join(ids, ",") + ")", true
	}
	return "", false
}

// formatWide prints a big-endian number in hex, as ovs-ofctl prints
// registers ("0x5"; 0 is "0").
func formatWide(b []byte) string {
	s := strings.TrimLeft(fmt.Sprintf("%x", b), "0")
	if s == "" {
		return "0"
	}
	return "0x" + s
}

// parseMaskedFieldValue reads a set_field value, VALUE or VALUE/MASK:
// registers and wide fields in hex or decimal, others as
// parseFieldValue reads them (a mask in the same form).
func parseMaskedFieldValue(f ofpwire.XMType, s string) (ofpwire.OXM, error) {
	vs, ms, masked := strings.Cut(s, "/")
	one := func(x string) ([]byte, error) {
		if _, _, reg := ofpwire.IsReg(f); reg || kindOf(f) == kindNum && ofpwire.FieldBits(f) > 64 {
			return parseWide(x, ofpwire.FieldBits(f)/8)
		}
		o, err := parseFieldValue(f, x)
		return o.Value, err
	}
	v, err := one(vs)
	if err != nil {
		return ofpwire.OXM{}, err
	}
	if !masked {
		return ofpwire.NewOXM(f, v), nil
	}
	m, err := one(ms)
	if err != nil {
		return ofpwire.OXM{}, err
	}
	for i := range v {
		v[i] &= m[i]
	}
	return ofpwire.NewMaskedOXM(f, v, m), nil
}

// formatLoad prints a masked set-field that one reg_load says as the load
// Open vSwitch sends and prints it as in OpenFlow 1.3.
func formatLoad(o ofpwire.OXM) string {
	var out string
	ofpwire.LoadSegments(o, func(ofs, n int, v uint64) {
		val := "0"
		if v != 0 {
			val = fmt.Sprintf("%#x", v)
		}
		out = "load:" + val + "->" + formatSubfield(o.Field, ofs, n)
	})
	return out
}

// parseDecTTLIDs reads dec_ttl(ID,...): the controller ids told of an
// expired TTL (none: nobody).
func parseDecTTLIDs(arg string) (ofpwire.Action, error) {
	d := &ofpwire.ActionDecTTLIDs{IDs: []uint16{}}
	for _, p := range strings.Split(arg, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		v, err := parseNum("dec_ttl controller id", p, 16)
		if err != nil {
			return nil, err
		}
		d.IDs = append(d.IDs, uint16(v))
	}
	return d, nil
}

// parseHexBytes reads HEX[.HEX]...: bytes in hex, dots between them
// optional.
func parseHexBytes(s string) ([]byte, error) {
	h := strings.ReplaceAll(s, ".", "")
	if len(h)%2 != 0 {
		return nil, fmt.Errorf("odd number of hex digits in %q", s)
	}
	b := make([]byte, len(h)/2)
	for i := range b {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return nil, fmt.Errorf("bad hex %q", h[2*i:2*i+2])
		}
		b[i] = byte(v)
	}
	return b, nil
}

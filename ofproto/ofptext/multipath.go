package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Open vSwitch's multipath, bundle and bundle_load in ovs-ofctl's syntax:
//
//	multipath(FIELDS,BASIS,ALGORITHM,N_LINKS,ARG,DST[range])
//	bundle(FIELDS,BASIS,ALGORITHM,ofport,members:PORT,...)
//	bundle_load(FIELDS,BASIS,ALGORITHM,ofport,DST[range],members:PORT,...)
//
// Arguments are separated by commas or spaces, as ovs-ofctl splits them;
// "slaves:" is read as "members:" (what Open vSwitch before 2.15 wrote),
// and printing says "members:", as Open vSwitch 3.1 does.

// splitArgs splits s at any run of the characters in seps, dropping
// empty pieces (C's strtok).
func splitArgs(s, seps string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) })
}

// parseHashArgs reads the FIELDS and BASIS arguments both actions share.
func parseHashArgs(what, fields, basis string) (ofpwire.HashFields, uint16, error) {
	f, ok := ofpwire.HashFieldsByName(fields)
	if !ok {
		return 0, 0, fmt.Errorf("%s: unknown fields `%s'", what, fields)
	}
	b, err := parseNum(what+" basis", basis, 16)
	if err != nil {
		return 0, 0, err
	}
	return f, uint16(b), nil
}

// parseDstSubfield reads the destination of multipath and bundle_load.
func parseDstSubfield(what, s string) (f ofpwire.XMType, ofs, n int, err error) {
	f, ofs, n, err = parseSubfield(s)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s: %w", what, err)
	}
	if n > 64 {
		return 0, 0, 0, fmt.Errorf("%s: %s is wider than 64 bits", what, s)
	}
	return f, ofs, n, nil
}

// parseMultipath reads multipath's arguments.
func parseMultipath(arg string) (ofpwire.Action, error) {
	args := splitArgs(arg, ", ")
	if len(args) < 6 {
		return nil, fmt.Errorf("%s: not enough arguments to multipath action", arg)
	}
	fields, basis, err := parseHashArgs("multipath", args[0], args[1])
	if err != nil {
		return nil, err
	}
	alg, ok := ofpwire.MultipathAlgorithmByName(args[2])
	if !ok {
		return nil, fmt.Errorf("%s: unknown algorithm `%s'", arg, args[2])
	}
	links, err := strconv.Atoi(args[3])
	if err != nil || links < 1 || links > 65536 {
		return nil, fmt.Errorf("%s: n_links %s is not in valid range 1 to 65536", arg, args[3])
	}
	a, err := parseNum("multipath arg", args[4], 32)
	if err != nil {
		return nil, err
	}
	f, ofs, n, err := parseDstSubfield("multipath", args[5])
	if err != nil {
		return nil, err
	}
	if n < 16 && links > 1<<n {
		return nil, fmt.Errorf("%s: %d-bit destination field has %d possible values, less than specified n_links %d",
			arg, n, 1<<n, links)
	}
	if len(args) > 6 {
		return nil, fmt.Errorf("%s: too many arguments to multipath action", arg)
	}
	return &ofpwire.ActionMultipath{Fields: fields, Basis: basis, Algorithm: alg, MaxLink: uint16(links - 1), Arg: uint32(a),
		Dst: f, DstOfs: uint16(ofs), DstNBits: uint16(n)}, nil
}

// parseBundle reads bundle's arguments, or (load) bundle_load's.
func parseBundle(arg string, load bool, ports portResolver) (ofpwire.Action, error) {
	what := "bundle"
	if load {
		what = "bundle_load"
	}
	head, list, found := strings.Cut(arg, ":")
	args := splitArgs(head, ", ")
	want := 5
	if load {
		want = 6
	}
	if !found || len(args) < want {
		return nil, fmt.Errorf("%s: not enough arguments to bundle action", arg)
	}
	if len(args) > want {
		return nil, fmt.Errorf("%s: too many arguments to %s action", arg, what)
	}
	if d := args[want-1]; !strings.EqualFold(d, "members") && !strings.EqualFold(d, "slaves") {
		return nil, fmt.Errorf("%s: missing member delimiter, expected `members', got `%s'", arg, d)
	}
	fields, basis, err := parseHashArgs(what, args[0], args[1])
	if err != nil {
		return nil, err
	}
	alg, ok := ofpwire.BundleAlgorithmByName(args[2])
	if !ok {
		return nil, fmt.Errorf("%s: unknown algorithm `%s'", arg, args[2])
	}
	if !strings.EqualFold(args[3], "ofport") {
		return nil, fmt.Errorf("%s: unknown member_type `%s'", arg, args[3])
	}
	b := &ofpwire.ActionBundle{Algorithm: alg, Fields: fields, Basis: basis, Load: load, Members: []ofpwire.PortNo{}}
	if load {
		f, ofs, n, err := parseDstSubfield(what, args[4])
		if err != nil {
			return nil, err
		}
		if n < 16 {
			return nil, fmt.Errorf("%s: %s has %d bits: a port number needs 16", what, args[4], n)
		}
		b.Dst, b.DstOfs, b.DstNBits = f, uint16(ofs), uint16(n)
	}
	for _, m := range splitArgs(list, ", []") {
		if len(b.Members) == ofpwire.MaxBundleMembers {
			return nil, fmt.Errorf("%s: more than %d members", what, ofpwire.MaxBundleMembers)
		}
		p, err := parseMemberPort(m, ports)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		b.Members = append(b.Members, p)
	}
	return b, nil
}

// parseMemberPort reads a bundle member: a port below 0xff00, a reserved
// port an output may name but CONTROLLER, or NONE (ANY).
func parseMemberPort(s string, ports portResolver) (ofpwire.PortNo, error) {
	if strings.EqualFold(s, "NONE") {
		return ofpwire.PortAny, nil
	}
	p, err := parsePort(s, ports)
	if err != nil {
		return 0, err
	}
	switch {
	case p == ofpwire.PortController:
		return 0, fmt.Errorf("%s: a bundle cannot output to the controller", s)
	case p >= 0xff00 && p < ofpwire.PortIn:
		return 0, fmt.Errorf("%s: bad port number", s)
	}
	return p, nil
}

// formatMultipath prints multipath as ovs-ofctl does.
func formatMultipath(a *ofpwire.ActionMultipath) string {
	return fmt.Sprintf("multipath(%s,%d,%s,%d,%d,%s)", a.Fields, a.Basis, a.Algorithm, a.Links(), a.Arg,
		formatSubfield(a.Dst, int(a.DstOfs), int(a.DstNBits)))
}

// formatBundle prints bundle or bundle_load as ovs-ofctl does.
func formatBundle(a *ofpwire.ActionBundle) string {
	var s strings.Builder
	name := "bundle"
	if a.Load {
		name = "bundle_load"
	}
	fmt.Fprintf(&s, "%s(%s,%d,%s,ofport,", name, a.Fields, a.Basis, a.Algorithm)
	if a.Load {
		s.WriteString(formatSubfield(a.Dst, int(a.DstOfs), int(a.DstNBits)) + ",")
	}
	s.WriteString("members:")
	for i, p := range a.Members {
		if i > 0 {
			s.WriteByte(',')
		}
		s.WriteString(portName(p))
	}
	s.WriteByte(')')
	return s.String()
}

package ofptext

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// groupTypeNames are the group types in ovs-ofctl's spelling; the first
// name of a type is the one printed.
var groupTypeNames = []struct {
	name string
	typ  ofpwire.GroupType
}{
	{"all", ofpwire.GroupTypeAll}, {"select", ofpwire.GroupTypeSelect}, {"indirect", ofpwire.GroupTypeIndirect},
	{"ff", ofpwire.GroupTypeFastFailover}, {"fast_failover", ofpwire.GroupTypeFastFailover},
}

// ParseGroup reads a group in ovs-ofctl's syntax,
// "group_id=1,type=select,bucket=weight:10,watch_port:1,actions=output:1,bucket=...",
// into the GROUP_MOD that performs cmd with it. Adds and modifies need
// group_id and type; deletes take only group_id, which defaults to all.
// Bucket weights default to 1 in select groups (0 elsewhere), watch_port
// and watch_group to ANY. Errors read `bad group "TEXT": reason`.
func ParseGroup(s string, cmd ofpwire.GroupCommand, opts ParseFlowOptions) (*ofpwire.GroupMod, error) {
	gm, err := parseGroup(s, cmd, opts.PortByName)
	if err != nil {
		return nil, fmt.Errorf("bad group %q: %w", s, err)
	}
	return gm, nil
}

// findBuckets returns the offsets of every "bucket=" keyword that starts a
// token outside parentheses.
func findBuckets(s string) []int {
	var out []int
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		}
		if depth == 0 && (i == 0 || isSep(s[i-1])) && strings.HasPrefix(s[i:], "bucket=") {
			out = append(out, i)
		}
	}
	return out
}

func parseGroup(s string, cmd ofpwire.GroupCommand, ports portResolver) (*ofpwire.GroupMod, error) {
	if cmd > ofpwire.GroupDelete {
		return nil, fmt.Errorf("unknown group command %d", cmd)
	}
	gm := &ofpwire.GroupMod{Command: cmd, GroupID: ofpwire.GroupAll}
	starts := findBuckets(s)
	head := s
	if len(starts) > 0 {
		head = s[:starts[0]]
		if cmd == ofpwire.GroupDelete {
			return nil, fmt.Errorf("buckets are not allowed when deleting groups")
		}
	}
	toks, err := splitTop(head)
	if err != nil {
		return nil, err
	}
	var hadID, hadType bool
	for _, tok := range toks {
		key, val, hasVal := strings.Cut(tok, "=")
		if rest, ok := strings.CutPrefix(tok, "fields("); ok && strings.HasSuffix(rest, ")") {
			key, val, hasVal = "fields", strings.TrimSuffix(rest, ")"), true
		}
		if !hasVal {
			return nil, fmt.Errorf("unknown keyword %q", tok)
		}
		switch key {
		case "group_id":
			if hadID {
				return nil, fmt.Errorf("group_id given twice")
			}
			hadID = true
			switch strings.ToLower(val) {
			case "all":
				gm.GroupID = ofpwire.GroupAll
			case "any":
				gm.GroupID = ofpwire.GroupAny
			default:
				v, err := parseNum("group_id", val, 32)
				if err != nil {
					return nil, err
				}
				gm.GroupID = ofpwire.Group(v)
			}
			if cmd != ofpwire.GroupDelete && gm.GroupID > ofpwire.GroupMax {
				return nil, fmt.Errorf("group_id %s is not a group that can be added or modified", val)
			}
		case "type":
			if cmd == ofpwire.GroupDelete {
				return nil, fmt.Errorf("type is not allowed when deleting groups")
			}
			if hadType {
				return nil, fmt.Errorf("type given twice")
			}
			hadType = true
			found := false
			for _, t := range groupTypeNames {
				if strings.EqualFold(val, t.name) {
					gm.Type, found = t.typ, true
				}
			}
			if !found {
				return nil, fmt.Errorf("unknown group type %q (all, select, indirect, ff)", val)
			}
		case "selection_method":
			if val != "hash" && val != "dp_hash" {
				return nil, fmt.Errorf("selection_method %q is neither hash nor dp_hash", val)
			}
			if gm.Selection == nil {
				gm.Selection = &ofpwire.GroupSelection{}
			}
			gm.Selection.Method = val
		case "selection_method_param":
			v, err := parseNum(key, val, 64)
			if err != nil {
				return nil, err
			}
			if gm.Selection == nil {
				gm.Selection = &ofpwire.GroupSelection{}
			}
			gm.Selection.Param = v
		case "fields":
			if err := parseSelectionFields(gm, val); err != nil {
				return nil, err
			}
		case "command_bucket_id", "bucket_id":
			return nil, fmt.Errorf("%s is not supported yet", key)
		default:
			return nil, fmt.Errorf("unknown keyword %q", key)
		}
	}
	switch {
	case gm.Selection != nil && gm.Selection.Method == "":
		return nil, fmt.Errorf("selection_method_param and fields need a selection_method")
	case gm.Selection != nil && gm.Type != ofpwire.GroupTypeSelect:
		return nil, fmt.Errorf("selection_method is only for select groups")
	}
	if cmd != ofpwire.GroupDelete {
		if !hadID {
			return nil, fmt.Errorf("must specify a group_id")
		}
		if !hadType {
			return nil, fmt.Errorf("must specify a type")
		}
	}
	for i, start := range starts {
		end := len(s)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		b, err := parseBucket(s[start+len("bucket="):end], gm.Type, ports)
		if err != nil {
			return nil, fmt.Errorf("bucket %d: %w", i+1, err)
		}
		gm.Buckets = append(gm.Buckets, b)
	}
	return gm, nil
}

// parseBucket reads the text after "bucket=": weight, watch_port and
// watch_group (written key:value or key=value) and actions, with or
// without a leading "actions=".
func parseBucket(s string, typ ofpwire.GroupType, ports portResolver) (ofpwire.Bucket, error) {
	b := ofpwire.Bucket{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny}
	if typ == ofpwire.GroupTypeSelect {
		b.Weight = 1
	}
	toks, err := splitTop(s)
	if err != nil {
		return b, err
	}
	var actToks []string
	for _, tok := range toks {
		i := strings.IndexAny(tok, ":=")
		key, val := tok, ""
		if i >= 0 {
			key, val = tok[:i], tok[i+1:]
		}
		switch strings.ToLower(key) {
		case "weight":
			v, err := parseNum("weight", val, 16)
			if err != nil {
				return b, err
			}
			if typ != ofpwire.GroupTypeSelect && v != 0 {
				return b, fmt.Errorf("only select groups can have bucket weights")
			}
			b.Weight = uint16(v)
		case "watch_port":
			p, err := parsePort(val, ports)
			if err != nil {
				return b, fmt.Errorf("watch_port: %w", err)
			}
			if p >= maxPort && p != ofpwire.PortAny {
				return b, fmt.Errorf("watch_port: %s cannot be watched", val)
			}
			b.WatchPort = p
		case "watch_group":
			if strings.EqualFold(val, "any") {
				b.WatchGroup = ofpwire.GroupAny
				continue
			}
			v, err := parseNum("watch_group", val, 32)
			if err != nil {
				return b, err
			}
			if ofpwire.Group(v) > ofpwire.GroupMax && ofpwire.Group(v) != ofpwire.GroupAny {
				return b, fmt.Errorf("watch_group: %s cannot be watched", val)
			}
			b.WatchGroup = ofpwire.Group(v)
		case "bucket_id":
			return b, fmt.Errorf("bucket_id is OpenFlow 1.5, not 1.3")
		case "actions", "action":
			if i < 0 || tok[i] != '=' {
				return b, fmt.Errorf("%s needs =", key)
			}
			if val != "" {
				actToks = append(actToks, val)
			}
		default:
			actToks = append(actToks, tok)
		}
	}
	if len(actToks) == 1 && strings.EqualFold(actToks[0], "drop") {
		return b, nil
	}
	ac := newActionContext(ofpwire.Match{})
	for _, tok := range actToks {
		if strings.EqualFold(tok, "drop") {
			return b, fmt.Errorf("drop must be the only action")
		}
		a, err := parseAction(tok, ac, ports)
		if err != nil {
			return b, err
		}
		b.Actions = append(b.Actions, a...)
	}
	return b, nil
}

func groupTypeName(t ofpwire.GroupType) string {
	for _, n := range groupTypeNames {
		if n.typ == t {
			return n.name
		}
	}
	return "unknown"
}

// groupIDText prints a group id as ovs-ofctl does.
func groupIDText(g ofpwire.Group) string {
	switch g {
	case ofpwire.GroupAll:
		return "all"
	case ofpwire.GroupAny:
		return "any"
	}
	return strconv.FormatUint(uint64(g), 10)
}

// FormatGroup prints a group description the way
// `ovs-ofctl -O OpenFlow13 dump-groups` prints one (without its leading
// space): "group_id=1,type=select,bucket=weight:10,actions=output:1,...".
// ParseGroup reads it back.
func FormatGroup(g *ofpwire.GroupDesc) string {
	var b strings.Builder
	b.WriteString("group_id=" + groupIDText(g.GroupID) + ",type=" + groupTypeName(g.Type))
	if sel := g.Selection; sel != nil {
		b.WriteString(",selection_method=" + sel.Method)
		if sel.Param != 0 {
			fmt.Fprintf(&b, ",selection_method_param=%d", sel.Param)
		}
		var fs []string
		for _, o := range sel.Fields {
			f := learnFieldName(o.Field)
			if !allOnes(o.Value) {
				f += "=" + formatFieldValue(o)
			}
			fs = append(fs, f)
		}
		switch len(fs) {
		case 0:
		case 1:
			b.WriteString(",fields=" + fs[0])
		default:
			b.WriteString(",fields(" + strings.Join(fs, ",") + ")")
		}
	}
	for i := range g.Buckets {
		b.WriteString(",")
		b.WriteString(formatBucket(&g.Buckets[i], g.Type))
	}
	return b.String()
}

func formatBucket(bk *ofpwire.Bucket, typ ofpwire.GroupType) string {
	var b strings.Builder
	b.WriteString("bucket=")
	def := uint16(0)
	if typ == ofpwire.GroupTypeSelect {
		def = 1
	}
	if bk.Weight != def {
		fmt.Fprintf(&b, "weight:%d,", bk.Weight)
	}
	if bk.WatchPort != ofpwire.PortAny {
		b.WriteString("watch_port:" + portName(bk.WatchPort) + ",")
	}
	if bk.WatchGroup != ofpwire.GroupAny {
		fmt.Fprintf(&b, "watch_group:%d,", bk.WatchGroup)
	}
	b.WriteString("actions=" + FormatActions(bk.Actions))
	return b.String()
}

// FormatGroupMod prints gm in the syntax ParseGroup reads for the same
// command, so that ParseGroup(FormatGroupMod(gm), gm.Command) rebuilds gm.
func FormatGroupMod(gm *ofpwire.GroupMod) string {
	if gm.Command == ofpwire.GroupDelete {
		return "group_id=" + groupIDText(gm.GroupID)
	}
	return FormatGroup(&ofpwire.GroupDesc{Type: gm.Type, GroupID: gm.GroupID, Buckets: gm.Buckets, Selection: gm.Selection})
}

// FormatActions prints an action list as ovs-ofctl does, "drop" when it is
// empty.
func FormatActions(acts []ofpwire.Action) string {
	if len(acts) == 0 {
		return "drop"
	}
	parts := make([]string, len(acts))
	for i, a := range acts {
		parts[i] = formatAction(a)
	}
	return strings.Join(parts, ",")
}

// parseSelectionFields reads the hashed fields of selection_method=hash:
// FIELD or FIELD=MASK, comma-separated (fields(...) or fields=FIELD).
func parseSelectionFields(gm *ofpwire.GroupMod, val string) error {
	if gm.Selection == nil {
		gm.Selection = &ofpwire.GroupSelection{}
	}
	for _, f := range strings.Split(val, ",") {
		name, mask, masked := strings.Cut(strings.TrimSpace(f), "=")
		fld, ok := fieldByName(name)
		if !ok {
			if fld, ok = subfieldByName(name); !ok {
				return fmt.Errorf("fields: unknown field %q", name)
			}
		}
		size, _, _ := ofpwire.FieldSize(fld)
		v := make([]byte, size)
		for i := range v {
			v[i] = 0xff
		}
		if masked {
			o, err := parseMaskedFieldValue(fld, mask)
			if err != nil {
				return fmt.Errorf("fields: %s: %w", name, err)
			}
			v = o.Value
		}
		gm.Selection.Fields = append(gm.Selection.Fields, ofpwire.NewOXM(fld, v))
	}
	return nil
}

func allOnes(b []byte) bool {
	for _, c := range b {
		if c != 0xff {
			return false
		}
	}
	return true
}

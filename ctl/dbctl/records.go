package dbctl

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// editRecord runs edit on the record TABLE RECORD (args[0], args[1]) of
// c, then checks a port's options again. With --if-exists a missing
// record is no error and edit is not run.
func editRecord(c *config.Config, args []string, ifExists bool, edit func(table string, rec any) error) error {
	table, err := normTable(args[0])
	if err != nil {
		return err
	}
	rec, err := record(c, table, args[1])
	if err != nil {
		if ifExists {
			return nil
		}
		return err
	}
	if err := edit(table, rec); err != nil {
		return err
	}
	if p, ok := rec.(*config.Port); ok {
		return config.CheckPortOptions(p)
	}
	return nil
}

func opSet(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--if-exists")
	if err != nil {
		return nil, err
	}
	return noResult, editRecord(c, pos, flags["--if-exists"], func(table string, rec any) error {
		for _, kv := range pos[2:] {
			if err := setColumn(c, table, rec, kv); err != nil {
				return err
			}
		}
		return nil
	})
}

func opGet(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--if-exists")
	if err != nil {
		return nil, err
	}
	table, err := normTable(pos[0])
	if err != nil {
		return nil, err
	}
	rec, err := record(c, table, pos[1])
	if err != nil {
		if flags["--if-exists"] {
			return result(lines(nil)), nil
		}
		return nil, err
	}
	var sb strings.Builder
	vals := []any{}
	for _, spec := range pos[2:] {
		v, err := getValue(cur, table, rec, spec)
		if err != nil {
			if flags["--if-exists"] && strings.HasPrefix(err.Error(), "no key") {
				continue
			}
			return nil, err
		}
		sb.WriteString(v + "\n")
		vals = append(vals, jsonValue(v))
	}
	return result(Result{Text: sb.String(), Data: vals}), nil
}

func opRemove(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--if-exists")
	if err != nil {
		return nil, err
	}
	return noResult, editRecord(c, pos, flags["--if-exists"], func(table string, rec any) error {
		col, _, err := splitColumn(table, pos[2])
		if err != nil {
			return err
		}
		for _, v := range pos[3:] {
			if err := removeValue(table, rec, col, unquote(v)); err != nil {
				return err
			}
		}
		return nil
	})
}

// removeValue takes one key (map columns; KEY=VALUE too, as ovs-vsctl
// accepts) or value (set columns) out of col. Like ovs-vsctl, removing
// what is not there is no error.
func removeValue(table string, rec any, col, v string) error {
	switch r := rec.(type) {
	case *config.Bridge:
		switch col {
		case "controller":
			r.Controllers = removeStrings(r.Controllers, splitList(v))
			return nil
		case "protocols":
			r.Protocols = removeStrings(r.Protocols, splitList(v))
			return nil
		}
	case *config.Port:
		switch col {
		case "tag":
			for _, x := range splitList(v) {
				n, err := parseVLAN(x)
				if err != nil {
					return fmt.Errorf("tag: %w", err)
				}
				if n == r.Tag {
					r.Tag = 0
				}
			}
			return nil
		case "trunks":
			for _, x := range splitList(v) {
				n, err := parseVLAN(x)
				if err != nil {
					return fmt.Errorf("trunks: %w", err)
				}
				r.Trunks = slices.DeleteFunc(r.Trunks, func(t uint16) bool { return t == n })
			}
			if len(r.Trunks) == 0 {
				r.Trunks = nil
			}
			return nil
		case "ofport_request":
			if n, err := parseUint32(v); err == nil && n == r.OFPortRequest {
				r.OFPortRequest = 0
			}
			return nil
		case "mtu_request":
			if n, err := strconv.Atoi(v); err == nil && n == r.MTURequest {
				r.MTURequest = 0
			}
			return nil
		}
	}
	m, err := mapColumn(table, rec, col, false)
	if err != nil {
		return fmt.Errorf("column %s of %s is neither a map nor a set remove can take values from", col, table)
	}
	k, val, hasVal := strings.Cut(v, "=")
	if cur, ok := (*m)[k]; ok && (!hasVal || unquote(val) == cur) {
		delete(*m, k)
	}
	if len(*m) == 0 {
		*m = nil
	}
	return nil
}

// removeStrings is set without the values gone (nil when empty).
func removeStrings(set, gone []string) []string {
	set = slices.DeleteFunc(set, func(x string) bool { return slices.Contains(gone, x) })
	if len(set) == 0 {
		return nil
	}
	return set
}

func opClear(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--if-exists")
	if err != nil {
		return nil, err
	}
	return noResult, editRecord(c, pos, flags["--if-exists"], func(table string, rec any) error {
		for _, spec := range pos[2:] {
			col, key, err := splitColumn(table, spec)
			if err != nil {
				return err
			}
			if key != "" {
				return fmt.Errorf("clear takes columns, not keys (%q): use remove", spec)
			}
			if err := clearColumn(table, rec, col); err != nil {
				return err
			}
		}
		return nil
	})
}

// clearColumn empties a map or set column, as ovs-vsctl clear does.
func clearColumn(table string, rec any, col string) error {
	switch r := rec.(type) {
	case *config.Bridge:
		switch col {
		case "controller":
			r.Controllers = nil
			return nil
		case "fail_mode":
			r.FailMode = config.FailModeStandalone
			return nil
		case "datapath_id":
			r.DatapathID = ""
			return nil
		case "protocols":
			r.Protocols = nil
			return nil
		}
	case *config.Port:
		switch col {
		case "tag":
			r.Tag = 0
			return nil
		case "trunks":
			r.Trunks = nil
			return nil
		case "ofport_request":
			r.OFPortRequest = 0
			return nil
		case "mtu_request":
			r.MTURequest = 0
			return nil
		}
	}
	m, err := mapColumn(table, rec, col, false)
	if err != nil {
		return fmt.Errorf("column %s of %s cannot be cleared", col, table)
	}
	*m = nil
	return nil
}

// tableRecords lists the names of the records of table in c.
func tableRecords(c *config.Config, table string) []string {
	switch table {
	case tableSwitch:
		return []string{"."}
	case tableBridge:
		return slices.Sorted(maps.Keys(c.Bridges))
	}
	var out []string
	for _, b := range c.Bridges {
		for n := range b.Ports {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// listColumns are the columns list and find print, in order.
func listColumns(table string) []string {
	cols := slices.Clone(columns[table])
	if table == tablePort || table == tableInterface {
		cols = append(cols, runtimeColumns...)
	}
	slices.Sort(cols)
	return cols
}

// recordView is one record as list and find print it: its columns and
// their values in ovs-vsctl's notation.
func recordView(cur *state, table string, rec any) (string, map[string]any) {
	var sb strings.Builder
	vals := map[string]any{}
	for _, col := range listColumns(table) {
		v, err := getValue(cur, table, rec, col)
		if err != nil {
			continue
		}
		vals[col] = jsonValue(v)
		fmt.Fprintf(&sb, "%-20s: %s\n", col, v)
	}
	return sb.String(), vals
}

func opList(cur *state, c *config.Config, args []string) (post, error) {
	flags, pos, err := splitFlags(args, "--if-exists")
	if err != nil {
		return nil, err
	}
	table, err := normTable(pos[0])
	if err != nil {
		return nil, err
	}
	names := pos[1:]
	if len(names) == 0 {
		names = tableRecords(c, table)
	}
	var texts []string
	data := []map[string]any{}
	for _, n := range names {
		rec, err := record(c, table, n)
		if err != nil {
			if flags["--if-exists"] {
				continue
			}
			return nil, err
		}
		t, v := recordView(cur, table, rec)
		texts = append(texts, t)
		data = append(data, v)
	}
	return result(Result{Text: strings.Join(texts, "\n"), Data: data}), nil
}

func opFind(cur *state, c *config.Config, args []string) (post, error) {
	table, err := normTable(args[0])
	if err != nil {
		return nil, err
	}
	type cond struct{ spec, want string }
	var conds []cond
	for _, a := range args[1:] {
		lhs, want, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not COLUMN[:KEY]=VALUE", a)
		}
		if _, _, err := splitColumn(table, lhs); err != nil && !isRuntimeColumn(table, lhs) {
			return nil, err
		}
		conds = append(conds, cond{lhs, want})
	}
	var texts []string
	data := []map[string]any{}
	for _, n := range tableRecords(c, table) {
		rec, _ := record(c, table, n)
		match := true
		for _, cd := range conds {
			v, err := getValue(cur, table, rec, cd.spec)
			if err != nil || !sameValue(v, cd.want) {
				match = false
				break
			}
		}
		if match {
			t, v := recordView(cur, table, rec)
			texts = append(texts, t)
			data = append(data, v)
		}
	}
	return result(Result{Text: strings.Join(texts, "\n"), Data: data}), nil
}

// sameValue compares a printed value with one typed on the command line,
// quotes and spacing aside.
func sameValue(have, want string) bool {
	norm := func(s string) string {
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, "[") || strings.HasPrefix(s, "{") {
			return strings.Join(splitList(strings.Trim(s, "{}")), ",")
		}
		return unquote(s)
	}
	return norm(have) == norm(want)
}

// jsonValue turns a value printed in ovs-vsctl's notation into JSON data:
// [] and [a, b] arrays, {k=v} objects, numbers, and strings unquoted.
func jsonValue(s string) any {
	switch {
	case strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]"):
		out := []any{}
		for _, e := range splitList(s) {
			out = append(out, jsonScalar(e))
		}
		return out
	case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
		out := map[string]any{}
		inner := strings.TrimSpace(s[1 : len(s)-1])
		for inner != "" {
			kv, rest := cutTopComma(inner)
			k, v, _ := strings.Cut(kv, "=")
			out[unquote(strings.TrimSpace(k))] = jsonScalar(strings.TrimSpace(v))
			inner = strings.TrimSpace(rest)
		}
		return out
	}
	return jsonScalar(s)
}

// cutTopComma splits at the first comma outside double quotes.
func cutTopComma(s string) (string, string) {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

func jsonScalar(s string) any {
	if strings.HasPrefix(s, "\"") {
		return unquote(s)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	return s
}

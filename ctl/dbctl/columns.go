package dbctl

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// The tables of ovs-vsctl's set/get/remove that vsctl models. Port and
// Interface are one record here (the switch runs one interface per port).
const (
	tableSwitch    = "open_vswitch"
	tableBridge    = "bridge"
	tablePort      = "port"
	tableInterface = "interface"
)

// mapKeys are the keys each map column accepts, so a typo is refused.
var mapKeys = map[string][]string{
	tableSwitch + ".other_config": {"n-pmd", "pmd-cpu-mask", "pmd-sleep-max", "latency-probe", "tx-flush-interval", "flow-limit", "emc-insert-inv-prob", "max-idle", "ct-max-conns",
		"openflow-max-connections", "mgmt-max-connections", "flow-sync", "flow-sync-interval", "max-ports", "max-ports-per-request"},
	tableBridge + ".other_config": {"datapath-id", "mac-aging-time", "mac-table-size"},
	tablePort + ".other_config":   {"tx-flush-interval", "pmd-rxq-affinity"},
}

// columns lists the columns of each table for error messages.
var columns = map[string][]string{
	tableSwitch:    {"other_config"},
	tableBridge:    {"name", "fail_mode", "controller", "datapath_id", "protocols", "other_config"},
	tablePort:      {"name", "type", "options", "ofport_request", "mtu_request", "other_config", "tag", "trunks"},
	tableInterface: {"name", "type", "options", "ofport_request", "mtu_request", "other_config", "tag", "trunks"},
}

// normTable maps ovs-vsctl's table names (any case) to ours.
func normTable(t string) (string, error) {
	switch strings.ToLower(t) {
	case "open_vswitch", "open-vswitch":
		return tableSwitch, nil
	case "bridge":
		return tableBridge, nil
	case "port":
		return tablePort, nil
	case "interface":
		return tableInterface, nil
	}
	return "", fmt.Errorf("unknown table %q (want Open_vSwitch, Bridge, Port or Interface)", t)
}

// record finds the record a set/get/remove names in c.
func record(c *config.Config, table, name string) (any, error) {
	switch table {
	case tableSwitch:
		if name != "." {
			return nil, fmt.Errorf("the Open_vSwitch table has one record, \".\", not %q", name)
		}
		return c, nil
	case tableBridge:
		return bridgeOf(c, name)
	default:
		if b := c.PortOwner(name); b != nil {
			return b.Ports[name], nil
		}
		return nil, fmt.Errorf("no such %s %q", table, name)
	}
}

// splitColumn parses COLUMN[:KEY].
func splitColumn(table, s string) (col, key string, err error) {
	col, key, hasKey := strings.Cut(s, ":")
	if !slices.Contains(columns[table], col) {
		return "", "", fmt.Errorf("table %s has no column %q (columns: %s)", table, col, strings.Join(columns[table], ", "))
	}
	if hasKey && key == "" {
		return "", "", fmt.Errorf("empty key in %q", s)
	}
	return col, key, nil
}

// setColumn applies one COLUMN[:KEY]=VALUE to rec (a record of table in c).
func setColumn(c *config.Config, table string, rec any, kv string) error {
	lhs, value, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("%q is not COLUMN[:KEY]=VALUE", kv)
	}
	col, key, err := splitColumn(table, lhs)
	if err != nil {
		return err
	}
	value = unquote(value)
	if key != "" {
		m, err := mapColumn(table, rec, col, true)
		if err != nil {
			return err
		}
		if known := mapKeys[keyTable(table)+"."+col]; known != nil && !slices.Contains(known, key) {
			return fmt.Errorf("%s has no key %q (known: %s)", col, key, strings.Join(known, ", "))
		}
		(*m)[key] = value
		return nil
	}
	switch r := rec.(type) {
	case *config.Bridge:
		switch col {
		case "fail_mode":
			if value != config.FailModeStandalone && value != config.FailModeSecure {
				return fmt.Errorf("fail_mode %q is not standalone or secure", value)
			}
			r.FailMode = value
			return nil
		case "controller":
			r.Controllers = splitList(value)
			return nil
		case "datapath_id":
			r.DatapathID = value
			return nil
		case "protocols":
			ps, err := parseProtocols(splitList(value))
			if err != nil {
				return err
			}
			r.Protocols = ps
			return nil
		}
	case *config.Port:
		switch col {
		case "type":
			r.Type = value
			return nil
		case "ofport_request":
			n, err := parseUint32(value)
			if err != nil || n == 0 || n > config.MaxOFPort {
				return fmt.Errorf("ofport_request %q is not a number in 1..%d", value, config.MaxOFPort)
			}
			r.OFPortRequest = n
			return nil
		case "mtu_request":
			if l := splitList(value); len(l) == 0 {
				r.MTURequest = 0 // mtu_request=[] clears it
				return nil
			}
			n, err := strconv.Atoi(value)
			if err != nil || n < config.MinMTU || n > config.MaxMTU {
				return fmt.Errorf("mtu_request %q is not a number in %d..%d", value, config.MinMTU, config.MaxMTU)
			}
			r.MTURequest = n
			return nil
		case "tag":
			if l := splitList(value); len(l) == 0 {
				r.Tag = 0 // tag=[] clears it
				return nil
			}
			v, err := parseVLAN(value)
			if err != nil {
				return fmt.Errorf("tag: %w", err)
			}
			r.Tag = v
			return nil
		case "trunks":
			var vs []uint16
			for _, f := range splitList(value) {
				v, err := parseVLAN(f)
				if err != nil {
					return fmt.Errorf("trunks: %w", err)
				}
				vs = append(vs, v)
			}
			r.Trunks = vs
			return nil
		}
	}
	if col == "other_config" || col == "options" {
		return fmt.Errorf("column %s takes KEY=VALUE pairs: %s:KEY=VALUE", col, col)
	}
	return fmt.Errorf("column %s of %s cannot be set", col, table)
}

// keyTable is the table whose key list applies (Port and Interface share).
func keyTable(table string) string {
	if table == tableInterface {
		return tablePort
	}
	return table
}

// mapColumn returns the map behind a map column, creating it if asked.
func mapColumn(table string, rec any, col string, create bool) (*map[string]string, error) {
	var m *map[string]string
	switch r := rec.(type) {
	case *config.Config:
		if col == "other_config" {
			m = &r.OtherConfig
		}
	case *config.Bridge:
		if col == "other_config" {
			m = &r.OtherConfig
		}
	case *config.Port:
		switch col {
		case "other_config":
			m = &r.OtherConfig
		case "options":
			m = &r.Options
		}
	}
	if m == nil {
		return nil, fmt.Errorf("column %s of %s is not a map", col, table)
	}
	if *m == nil && create {
		*m = map[string]string{}
	}
	return m, nil
}

// getColumn reads one COLUMN[:KEY] of rec.
func getColumn(table string, rec any, spec string) (string, error) {
	col, key, err := splitColumn(table, spec)
	if err != nil {
		return "", err
	}
	if col == "other_config" || col == "options" {
		m, err := mapColumn(table, rec, col, false)
		if err != nil {
			return "", err
		}
		if key == "" {
			return formatMap(*m), nil
		}
		v, ok := (*m)[key]
		if !ok {
			return "", fmt.Errorf("no key %q in %s", key, col)
		}
		return v, nil
	}
	if key != "" {
		return "", fmt.Errorf("column %s is not a map", col)
	}
	switch r := rec.(type) {
	case *config.Bridge:
		switch col {
		case "name":
			return r.Name, nil
		case "fail_mode":
			return r.FailMode, nil
		case "controller":
			return "[" + strings.Join(quoteAll(r.Controllers), ", ") + "]", nil
		case "datapath_id":
			id, _ := config.DatapathID(r)
			return fmt.Sprintf("%016x", id), nil
		case "protocols":
			return "[" + strings.Join(r.Protocols, ", ") + "]", nil
		}
	case *config.Port:
		switch col {
		case "name":
			return r.Name, nil
		case "type":
			return r.Type, nil
		case "ofport_request":
			if r.OFPortRequest == 0 {
				return "[]", nil
			}
			return strconv.FormatUint(uint64(r.OFPortRequest), 10), nil
		case "mtu_request":
			if r.MTURequest == 0 {
				return "[]", nil
			}
			return strconv.Itoa(r.MTURequest), nil
		case "tag":
			if r.Tag == 0 {
				return "[]", nil
			}
			return strconv.Itoa(int(r.Tag)), nil
		case "trunks":
			parts := make([]string, len(r.Trunks))
			for i, v := range r.Trunks {
				parts[i] = strconv.Itoa(int(v))
			}
			return "[" + strings.Join(parts, ", ") + "]", nil
		}
	}
	return "", fmt.Errorf("column %s of %s cannot be read", col, table)
}

func formatMap(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+strconv.Quote(m[k]))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = strconv.Quote(x)
	}
	return out
}

// unquote strips one level of double quotes, which ovs-vsctl users often
// type around values.
func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// splitList parses a set value: "a", "[a, b]" or "a b".
func splitList(s string) []string {
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		out = append(out, unquote(f))
	}
	return out
}

// parseVLAN reads a VLAN id, 1..4094.
func parseVLAN(s string) (uint16, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 16)
	if err != nil || v == 0 || v > config.MaxVLAN {
		return 0, fmt.Errorf("%q is not a VLAN id in 1..%d", s, config.MaxVLAN)
	}
	return uint16(v), nil
}

// parseProtocols checks Bridge.protocols values: OpenFlow versions this
// switch speaks, sorted and without repeats (a set, as in OVSDB). Unlike
// the daemon, which must take what the database holds (and logs what it
// ignores), vsctl refuses what the switch cannot honour.
func parseProtocols(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		if _, ok := ofpwire.VersionByName(n); !ok {
			return nil, fmt.Errorf("protocols: %q is not a version this switch speaks (OpenFlow10, OpenFlow13, OpenFlow14, OpenFlow15)", n)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

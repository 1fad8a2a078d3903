package dbctl

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// runtimeColumns are the Interface (and Port) columns the switch writes
// into the database (ofport and error when it applies a change, the
// rest every few seconds), read from there as ovs-vsctl reads them.
var runtimeColumns = []string{"admin_state", "duplex", "error", "ifindex", "link_speed", "link_state", "mac_in_use", "mtu", "ofport", "statistics", "status"}

func isRuntimeColumn(table, col string) bool {
	return (table == tablePort || table == tableInterface) && slices.Contains(runtimeColumns, col)
}

// iface is the Interface row named name, or nil.
func (s *state) iface(name string) *vswitchdb.Interface {
	for _, u := range sortedKeys(s.rows.Ifaces) {
		if i := s.rows.Ifaces[u]; i.Name == name {
			return i
		}
	}
	return nil
}

// getValue reads COLUMN[:KEY] of rec, run-time columns included.
func getValue(cur *state, table string, rec any, spec string) (string, error) {
	if p, isPort := rec.(*config.Port); isPort {
		if col, key, _ := cutKey(spec); isRuntimeColumn(table, col) {
			return runtimeValue(cur.iface(p.Name), col, key)
		}
	}
	if b, ok := rec.(*config.Bridge); ok && spec == "datapath_id" {
		// What the switch reports, else what it will use.
		for _, rb := range cur.rows.Bridges {
			if rb.Name == b.Name && rb.DatapathID != nil {
				return *rb.DatapathID, nil
			}
		}
		id, _ := config.DatapathID(b)
		return fmt.Sprintf("%016x", id), nil
	}
	v, err := getColumn(table, rec, spec)
	if err == nil && v == "" {
		v = `""` // an empty string, as ovs-vsctl prints it
	}
	return v, err
}

func cutKey(spec string) (col, key string, hasKey bool) {
	for i := 0; i < len(spec); i++ {
		if spec[i] == ':' {
			return spec[:i], spec[i+1:], true
		}
	}
	return spec, "", false
}

// runtimeValue prints a run-time column of Interface row i (nil: not
// in the database yet) in ovs-vsctl's notation.
func runtimeValue(i *vswitchdb.Interface, col, key string) (string, error) {
	if i == nil {
		i = &vswitchdb.Interface{}
	}
	switch col {
	case "statistics":
		if key != "" {
			v, ok := i.Statistics[key]
			if !ok {
				return "", fmt.Errorf("no key %q in statistics", key)
			}
			return strconv.Itoa(v), nil
		}
		s := "{"
		for n, k := range slices.Sorted(maps.Keys(i.Statistics)) {
			if n > 0 {
				s += ", "
			}
			s += k + "=" + strconv.Itoa(i.Statistics[k])
		}
		return s + "}", nil
	case "status":
		if key != "" {
			v, ok := i.Status[key]
			if !ok {
				return "", fmt.Errorf("no key %q in status", key)
			}
			return v, nil
		}
		return formatMap(i.Status), nil
	}
	if key != "" {
		return "", fmt.Errorf("column %s is not a map", col)
	}
	str := func(p *string, quote bool) string {
		switch {
		case p == nil:
			return "[]"
		case quote:
			return strconv.Quote(*p)
		}
		return *p
	}
	num := func(p *int) string {
		if p == nil {
			return "[]"
		}
		return strconv.Itoa(*p)
	}
	switch col {
	case "error":
		return str(i.Error, true), nil
	case "mac_in_use":
		return str(i.MACInUse, true), nil
	case "link_state":
		return str(i.LinkState, false), nil
	case "admin_state":
		return str(i.AdminState, false), nil
	case "duplex":
		return str(i.Duplex, false), nil
	case "ofport":
		return num(i.Ofport), nil
	case "ifindex":
		return num(i.Ifindex), nil
	case "mtu":
		return num(i.MTU), nil
	case "link_speed":
		return num(i.LinkSpeed), nil
	}
	return "", fmt.Errorf("column %s cannot be read", col)
}

package vswitchd

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/vswitch-go/vswitch/internal/ifinfo"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// runtimeColumns are the Interface (and Port) columns read from the
// running switch and the kernel rather than the store, as Open vSwitch's
// vswitchd fills them in: read-only, [] while the port is not running.
var runtimeColumns = []string{"admin_state", "duplex", "error", "ifindex", "link_speed", "link_state", "mac_in_use", "mtu", "statistics", "status"}

func isRuntimeColumn(table, col string) bool {
	return (table == tablePort || table == tableInterface) && slices.Contains(runtimeColumns, col)
}

// getValue reads COLUMN[:KEY] of rec, run-time columns included.
func (d *Daemon) getValue(table string, rec any, spec string) (string, error) {
	p, isPort := rec.(*config.Port)
	if col, key, _ := cutKey(spec); isPort && isRuntimeColumn(table, col) {
		return d.runtimeValue(p, col, key)
	}
	if isPort && spec == "ofport" {
		// As in Open vSwitch, -1 while the port does not run; the store
		// keeps the number it gets when it starts.
		if rp, _ := d.portState(p.Name); rp == nil {
			return "-1", nil
		}
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

// portState finds port name among the running bridges: the running port,
// or why it does not run.
func (d *Daemon) portState(name string) (rp *port, why string) {
	bs := d.bridgeList()
	for _, b := range bs {
		if p := b.portByName(name); p != nil {
			return p, ""
		}
	}
	for _, b := range bs {
		if e, ok := b.portError(name); ok {
			return nil, e
		}
	}
	return nil, "not running"
}

// runtimeValue reads a run-time column of port p.
func (d *Daemon) runtimeValue(p *config.Port, col, key string) (string, error) {
	rp, why := d.portState(p.Name)
	if col == "error" {
		if key != "" {
			return "", fmt.Errorf("column %s is not a map", col)
		}
		if rp != nil {
			return "[]", nil
		}
		return strconv.Quote(why), nil
	}
	if col == "statistics" {
		if rp == nil {
			if key != "" {
				return "", fmt.Errorf("no key %q in statistics (port %s is not running)", key, p.Name)
			}
			return "{}", nil
		}
		st := rp.dev.Stats()
		m := map[string]uint64{"collisions": 0, "rx_bytes": st.RxBytes, "rx_crc_err": 0, "rx_dropped": st.RxDrops,
			"rx_errors": st.RxErrors, "rx_frame_err": 0, "rx_over_err": 0, "rx_packets": st.RxPackets,
			"tx_bytes": st.TxBytes, "tx_dropped": st.TxDrops, "tx_errors": st.TxErrors, "tx_packets": st.TxPackets}
		if key != "" {
			v, ok := m[key]
			if !ok {
				return "", fmt.Errorf("no key %q in statistics", key)
			}
			return strconv.FormatUint(v, 10), nil
		}
		s := "{"
		for i, k := range slices.Sorted(maps.Keys(m)) {
			if i > 0 {
				s += ", "
			}
			s += k + "=" + strconv.FormatUint(m[k], 10)
		}
		return s + "}", nil
	}
	if col == "status" {
		// Only tunnel ports have a status of their own (tunnel.Port.Status).
		var m map[string]string
		if rp != nil {
			if tp, ok := rp.dev.(*tunnel.Port); ok {
				m = tp.Status()
			}
		}
		if key != "" {
			v, ok := m[key]
			if !ok {
				return "", fmt.Errorf("no key %q in status", key)
			}
			return v, nil
		}
		return formatMap(m), nil
	}
	if key != "" {
		return "", fmt.Errorf("column %s is not a map", col)
	}
	if rp == nil {
		return "[]", nil
	}
	info, kernel := ifinfo.Get(p.Name)
	kernel = kernel && p.Type != config.PortTypePatch // a namesake is not the port
	switch col {
	case "link_state":
		return upDown(rp.dev.LinkUp()), nil
	case "admin_state":
		if !kernel {
			return "up", nil
		}
		return upDown(info.AdminUp), nil
	}
	if !kernel {
		return "[]", nil // a vhost-user port has no kernel interface
	}
	switch col {
	case "mac_in_use":
		return strconv.Quote(info.MAC.String()), nil
	case "ifindex":
		return strconv.Itoa(info.Index), nil
	case "mtu":
		return strconv.Itoa(info.MTU), nil
	case "link_speed":
		if info.SpeedMbps == 0 {
			return "[]", nil
		}
		return strconv.FormatUint(uint64(info.SpeedMbps)*1000000, 10), nil
	case "duplex":
		if info.SpeedMbps == 0 {
			return "[]", nil
		}
		if info.FullDuplex {
			return "full", nil
		}
		return "half", nil
	}
	return "", fmt.Errorf("column %s cannot be read", col)
}

func upDown(up bool) string {
	if up {
		return "up"
	}
	return "down"
}

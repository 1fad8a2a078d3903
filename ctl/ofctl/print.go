package ofctl

import (
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// The printers below write what `ovs-ofctl -O OpenFlow13` prints for the
// same reply (checked against `ovs-ofctl ofp-print` in the tests), header
// line and transaction id included.

// FormatPortStats prints an OFPMP_PORT_STATS reply like dump-ports.
func FormatPortStats(xid uint32, ports []ofpwire.PortStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_PORT reply (OF1.3) (xid=%#x): %d ports\n", xid, len(ports))
	stat := func(name string, v uint64, last bool) {
		b.WriteString(name)
		if v == ^uint64(0) {
			b.WriteString("?")
		} else {
			fmt.Fprintf(&b, "%d", v)
		}
		if !last {
			b.WriteString(", ")
		}
	}
	for _, p := range ports {
		b.WriteString("  port ")
		if uint16(p.PortNo) < 10 {
			b.WriteString(" ")
		}
		b.WriteString(ofptext.PortName(uint32(p.PortNo)))
		b.WriteString(": rx ")
		stat("pkts=", p.RxPackets, false)
		stat("bytes=", p.RxBytes, false)
		stat("drop=", p.RxDropped, false)
		stat("errs=", p.RxErrors, false)
		stat("frame=", p.RxFrameErr, false)
		stat("over=", p.RxOverErr, false)
		stat("crc=", p.RxCrcErr, true)
		b.WriteString("\n           tx ")
		stat("pkts=", p.TxPackets, false)
		stat("bytes=", p.TxBytes, false)
		stat("drop=", p.TxDropped, false)
		stat("errs=", p.TxErrors, false)
		stat("coll=", p.Collisions, true)
		b.WriteString("\n")
		if p.DurationSec != ^uint32(0) {
			b.WriteString("           duration=" + ofptext.Duration(p.DurationSec, p.DurationNSec) + "\n")
		}
	}
	return b.String()
}

// bitNames prints the set bits of v by name, separated by spaces, "0" for
// none; bits without a name are left out, as ovs-ofctl does for bits the
// version does not define.
func bitNames(v uint32, names []string) string {
	var parts []string
	for i, n := range names {
		if v&(1<<i) != 0 && n != "" {
			parts = append(parts, n)
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " ")
}

var (
	portConfigNames  = []string{"PORT_DOWN", "", "NO_RECV", "", "", "NO_FWD", "NO_PACKET_IN"}
	portStateNames   = []string{"LINK_DOWN", "BLOCKED", "LIVE"}
	portFeatureNames = []string{"10MB-HD", "10MB-FD", "100MB-HD", "100MB-FD", "1GB-HD", "1GB-FD", "10GB-FD",
		"40GB-FD", "100GB-FD", "1TB-FD", "OTHER", "COPPER", "FIBER", "AUTO_NEG", "AUTO_PAUSE", "AUTO_PAUSE_ASYM"}
)

// sortedPorts orders port descriptions by number, as ovs-ofctl prints them.
func sortedPorts(ports []ofpwire.Port) []ofpwire.Port {
	out := append([]ofpwire.Port(nil), ports...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].PortNo < out[j].PortNo })
	return out
}

// FormatPortDesc prints an OFPMP_PORT_DESC reply like dump-ports-desc.
func FormatPortDesc(xid uint32, ports []ofpwire.Port) string {
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_PORT_DESC reply (OF1.3) (xid=%#x):\n", xid)
	for _, p := range sortedPorts(ports) {
		mac := make(net.HardwareAddr, 6)
		copy(mac, p.HWAddr)
		fmt.Fprintf(&b, " %s(%s): addr:%s\n", ofptext.PortName(uint32(p.PortNo)), p.Name, mac)
		b.WriteString("     config:     " + bitNames(uint32(p.Config), portConfigNames) + "\n")
		b.WriteString("     state:      " + bitNames(uint32(p.State), portStateNames) + "\n")
		for _, f := range []struct {
			label string
			v     ofpwire.PortFeature
		}{{"current:    ", p.Curr}, {"advertised: ", p.Advertised}, {"supported:  ", p.Supported}, {"peer:       ", p.Peer}} {
			if f.v != 0 {
				b.WriteString("     " + f.label + bitNames(uint32(f.v), portFeatureNames) + "\n")
			}
		}
		fmt.Fprintf(&b, "     speed: %d Mbps now, %d Mbps max\n", p.CurrSpeed/1000, p.MaxSpeed/1000)
	}
	return b.String()
}

// FormatGroupDesc prints an OFPMP_GROUP_DESC reply like dump-groups.
func FormatGroupDesc(xid uint32, groups []ofpwire.GroupDesc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_GROUP_DESC reply (OF1.3) (xid=%#x):", xid)
	for i := range groups {
		b.WriteString("\n " + ofptext.FormatGroup(&groups[i]))
	}
	b.WriteString("\n")
	return b.String()
}

// FormatMeterConfig prints an OFPMP_METER_CONFIG reply like dump-meters.
func FormatMeterConfig(xid uint32, meters []ofpwire.MeterConfig) string {
	var b strings.Builder
	fmt.Fprintf(&b, "OFPST_METER_CONFIG reply (OF1.3) (xid=%#x):", xid)
	for i := range meters {
		b.WriteString("\n" + ofptext.FormatMeter(&meters[i]) + "\n")
	}
	if len(meters) == 0 {
		b.WriteString("\n")
	}
	return b.String()
}

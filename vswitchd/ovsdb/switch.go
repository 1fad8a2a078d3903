package ovsdb

import (
	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// Switch is what the reconciler drives: the daemon. An interface, so that
// the reconciler is tested without root against a configuration in
// memory.
type Switch interface {
	// Reconcile makes the switch's configuration what fn leaves it,
	// validated, stored and applied, or changes nothing and says why.
	Reconcile(fn func(c *config.Config) error) error
	// Config is the configuration in force.
	Config() *config.Config
	// PortStatus is what the running switch knows of a port (a bridge's
	// own port has its bridge's name); its Stats only when stats is set
	// (a write-back that reports counters: every few seconds).
	PortStatus(bridge, port string, stats bool) PortStatus
	// DatapathID is a running bridge's datapath id, 16 hex digits, or "".
	DatapathID(bridge string) string
	// ControllerStatus is what the switch knows of a bridge's
	// connection to controller target.
	ControllerStatus(bridge, target string) ControllerStatus
	// Version is reported in Open_vSwitch.ovs_version.
	Version() string
	// SetZoneTimeouts makes the connection tracker's zones expire
	// connections by their timeout policies (CT_Timeout_Policy); a zone
	// not in m has the defaults.
	SetZoneTimeouts(m map[uint16]conntrack.Timeouts)
}

// ControllerStatus is a controller connection's state, for the
// Controller columns ovs-vswitchd fills in: is_connected, role and
// status (state, last_error).
type ControllerStatus struct {
	Connected bool
	// Role is "master", "slave" or "other" while connected, else "".
	Role   string
	Status map[string]string
}

// PortStatus is a port's run-time state, for the Interface columns
// ovs-vswitchd fills in. Zero values mean unknown, written as empty.
type PortStatus struct {
	// Running is false while the port does not run: Error says why.
	Running bool
	OFPort  uint32
	Error   string
	// AdminState and LinkState are "up", "down" or "".
	AdminState, LinkState string
	MAC                   string
	MTU, Ifindex          int
	// Stats are the Interface statistics column (rx_packets, tx_bytes,
	// ...): nil when unknown.
	Stats map[string]int
	// Status is the Interface status column (a tunnel port's egress
	// interface, its carrier, the outer source, its AF_XDP underlay's
	// counters), written at every pass.
	Status map[string]string
}

// Package config is the crash-safe configuration store of vswitchd: the
// bridges, ports, controllers, other_config and saved flows that a restart
// must bring back exactly as they were last acknowledged.
package config

import (
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
)

// Port types the daemon knows how to open. The empty type lets the daemon
// pick the best driver that works for the interface.
const (
	PortTypeAuto            = ""
	PortTypeAFXDP           = "afxdp"
	PortTypeAFPacket        = "afpacket"
	PortTypeTap             = "tap"
	PortTypeVhostUser       = "vhostuser"
	PortTypeVhostUserClient = "vhostuserclient"
	PortTypeInternal        = "internal"
	// Tunnel ports: no kernel interface, UDP sockets to remote hosts.
	PortTypeVXLAN  = "vxlan"
	PortTypeGeneve = "geneve"
	// PortTypePatch is joined to the patch port options:peer names, in
	// this bridge or another: no kernel interface either.
	PortTypePatch = "patch"
)

// Fail modes decide what a bridge does while no controller is connected.
const (
	// FailModeStandalone makes the bridge behave as a learning switch.
	FailModeStandalone = "standalone"
	// FailModeSecure keeps only the flows already installed.
	FailModeSecure = "secure"
)

// Config is the whole persistent state of one vswitchd instance.
type Config struct {
	// OtherConfig holds switch-wide tunables (n-pmd, pmd-cpu-mask,
	// tx-flush-interval, pmd-sleep-max, ...).
	OtherConfig map[string]string `json:"other_config,omitempty"`
	// Bridges is keyed by bridge name.
	Bridges map[string]*Bridge `json:"bridges,omitempty"`
	// SSL names the files that ssl: and pssl: controller targets use
	// (ovs-vsctl's SSL table); nil when not set.
	SSL *SSL `json:"ssl,omitempty"`
}

// SSL is the switch's TLS identity and the CA its controllers must be
// signed by: absolute paths of PEM files, read again at every connection
// attempt so that renewed certificates apply without reconfiguration.
type SSL struct {
	PrivateKey  string `json:"private_key"`
	Certificate string `json:"certificate"`
	CACert      string `json:"ca_cert"`
}

// Bridge is one OpenFlow switch instance with its ports.
type Bridge struct {
	Name string `json:"name"`
	// DatapathID is 16 hex digits; empty lets the daemon derive one.
	DatapathID  string   `json:"datapath_id,omitempty"`
	FailMode    string   `json:"fail_mode"`
	Controllers []string `json:"controllers,omitempty"`
	// ControllerOptions are settings of some of the Controllers, by
	// target (OVSDB Controller inactivity_probe and max_backoff).
	ControllerOptions map[string]ControllerOptions `json:"controller_options,omitempty"`
	// Protocols limits the OpenFlow versions the bridge's connections
	// negotiate (OVSDB Bridge.protocols: "OpenFlow13" ...); empty: all.
	Protocols   []string          `json:"protocols,omitempty"`
	OtherConfig map[string]string `json:"other_config,omitempty"`
	// Ports is keyed by port name.
	Ports map[string]*Port `json:"ports,omitempty"`
}

// Tables are a bridge's OpenFlow tables as ovs-ofctl lines, saved so that
// flows added with no controller attached survive a restart. The daemon
// keeps them in a file per bridge; config.json held them in the bridge's
// object until the daemon moved them out (LegacyTables).
type Tables struct {
	// Flows nil means never saved (the bridge starts with its fail
	// mode's default flows); empty means saved empty tables, which is
	// why the field is never omitted.
	Flows []string `json:"flows"`
	// Groups are the group table (ovs-ofctl add-group syntax), saved
	// with the flows because flows may forward to groups.
	Groups []string `json:"groups,omitempty"`
	// Meters are the meter table (ovs-ofctl add-meter syntax), saved for
	// the same reason.
	Meters []string `json:"meters,omitempty"`
}

// ControllerOptions are one controller's settings, in milliseconds as
// Open vSwitch's Controller columns: InactivityProbe 0 leaves the
// default, a negative one disables probing (the column's 0);
// MaxBackoff 0 leaves the default.
type ControllerOptions struct {
	InactivityProbe int `json:"inactivity_probe,omitempty"`
	MaxBackoff      int `json:"max_backoff,omitempty"`
}

// Port is one interface attached to a bridge.
type Port struct {
	Name string `json:"name"`
	Type string `json:"type,omitempty"`
	// OFPort is the OpenFlow port number; the store assigns it and keeps it
	// across restarts so that flows naming numbers stay valid.
	OFPort uint32 `json:"ofport"`
	// OFPortRequest, when non-zero, is the number the user asked for.
	OFPortRequest uint32            `json:"ofport_request,omitempty"`
	Options       map[string]string `json:"options,omitempty"`
	OtherConfig   map[string]string `json:"other_config,omitempty"`
	// Tag and Trunks are the port's VLANs for the NORMAL action, as in
	// Open vSwitch: Tag alone makes an access port of that VLAN, Trunks a
	// trunk carrying those VLANs tagged (with Tag, if set, as its native,
	// untagged VLAN); neither leaves the port in the untagged network.
	Tag    uint16   `json:"tag,omitempty"`
	Trunks []uint16 `json:"trunks,omitempty"`
	// MTURequest, when non-zero, is the MTU the port's kernel interface
	// is set to (Interface:mtu_request), before its driver opens.
	MTURequest int `json:"mtu_request,omitempty"`
}

// Clone returns a deep copy, so callers can never mutate the store's state.
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	out := &Config{OtherConfig: maps.Clone(c.OtherConfig)}
	if c.SSL != nil {
		ssl := *c.SSL
		out.SSL = &ssl
	}
	if c.Bridges != nil {
		out.Bridges = make(map[string]*Bridge, len(c.Bridges))
		for k, b := range c.Bridges {
			out.Bridges[k] = b.Clone()
		}
	}
	return out
}

// Clone returns a deep copy of the bridge and its ports.
func (b *Bridge) Clone() *Bridge {
	if b == nil {
		return nil
	}
	out := *b
	out.Controllers = slices.Clone(b.Controllers)
	out.ControllerOptions = maps.Clone(b.ControllerOptions)
	out.Protocols = slices.Clone(b.Protocols)
	out.OtherConfig = maps.Clone(b.OtherConfig)
	if b.Ports != nil {
		out.Ports = make(map[string]*Port, len(b.Ports))
		for k, p := range b.Ports {
			out.Ports[k] = p.Clone()
		}
	}
	return &out
}

// Clone returns a deep copy of the port.
func (p *Port) Clone() *Port {
	if p == nil {
		return nil
	}
	out := *p
	out.Options = maps.Clone(p.Options)
	out.OtherConfig = maps.Clone(p.OtherConfig)
	out.Trunks = slices.Clone(p.Trunks)
	return &out
}

// PortOwner returns the bridge that holds the named port, or nil.
func (c *Config) PortOwner(port string) *Bridge {
	for _, b := range c.Bridges {
		if _, ok := b.Ports[port]; ok {
			return b
		}
	}
	return nil
}

// DatapathID is the bridge's configured datapath id, or one derived from
// its name so that it stays the same across restarts.
func DatapathID(b *Bridge) (uint64, error) {
	s := b.DatapathID
	if v := b.OtherConfig["datapath-id"]; v != "" {
		s = v
	}
	if s != "" {
		return strconv.ParseUint(s, 16, 64)
	}
	h := fnv.New64a()
	h.Write([]byte(b.Name))
	return h.Sum64() & 0x0000ffffffffffff, nil
}

package dbconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// LocalOFPort is the OpenFlow number of a bridge's own port (OFPP_LOCAL),
// which ovs-vswitchd reports in Interface.ofport for it.
const LocalOFPort = 65534

// ifaceTypes maps Interface.type to the daemon's port types: the types
// this switch can run. The empty type is a system device, for which the
// daemon picks its best driver.
var ifaceTypes = map[string]string{
	"":                config.PortTypeAuto,
	"system":          config.PortTypeAuto,
	"internal":        config.PortTypeInternal,
	"tap":             config.PortTypeTap,
	"afxdp":           config.PortTypeAFXDP,
	"afpacket":        config.PortTypeAFPacket,
	"vhostuser":       config.PortTypeVhostUser,
	"vhostuserclient": config.PortTypeVhostUserClient,
	"vxlan":           config.PortTypeVXLAN,
	"geneve":          config.PortTypeGeneve,
	"patch":           config.PortTypePatch,
}

// IfaceTypes is what Open_vSwitch.iface_types reports: the types above,
// so that a client asks only for what runs.
func IfaceTypes() []string {
	var out []string
	for t := range ifaceTypes {
		if t != "" {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// DatapathTypes is what Open_vSwitch.datapath_types reports: both names
// mean this userspace datapath, so that configurations written for
// either kind of ovs-vswitchd apply.
var DatapathTypes = []string{"netdev", "system"}

// Rows is one read of the tables the switch's configuration comes from,
// keyed by UUID.
type Rows struct {
	OVS         *vswitchdb.OpenvSwitch
	Bridges     map[string]*vswitchdb.Bridge
	Ports       map[string]*vswitchdb.Port
	Ifaces      map[string]*vswitchdb.Interface
	Controllers map[string]*vswitchdb.Controller
	SSL         map[string]*vswitchdb.SSL
	// The tracker's settings: Open_vSwitch.datapaths -> Datapath.ct_zones
	// -> CT_Zone.timeout_policy -> CT_Timeout_Policy.
	Datapaths  map[string]*vswitchdb.Datapath
	CTZones    map[string]*vswitchdb.CTZone
	CTPolicies map[string]*vswitchdb.CTTimeoutPolicy
}

// IfaceRef says where an Interface row landed in the wanted configuration.
type IfaceRef struct {
	Bridge, Port string
	// Local marks the bridge's own port, which the daemon creates itself.
	Local bool
}

// Plan is the configuration the database asks for, with what the switch
// refuses of it: rows left out are reported in their Interface.error
// rather than failing the rest, as ovs-vswitchd does (the database has
// already committed them).
type Plan struct {
	Config *config.Config
	// NextCfg is the Open_vSwitch.next_cfg this plan was read at: the
	// cur_cfg to report once it is applied.
	NextCfg int
	// IfaceErr is, per Interface UUID, why it does not run.
	IfaceErr map[string]string
	// IfaceAt is, per Interface UUID of an applied port, where it is.
	IfaceAt map[string]IfaceRef
	// Problems are refusals that have no Interface to report them in
	// (a bridge, a controller, a setting), for the log.
	Problems []string
}

// Wanted computes the configuration rows ask for. Flows, groups and
// meters are not in the database: the caller keeps the daemon's.
func Wanted(r *Rows) *Plan {
	p := &Plan{Config: &config.Config{Bridges: map[string]*config.Bridge{}},
		IfaceErr: map[string]string{}, IfaceAt: map[string]IfaceRef{}}
	if r.OVS == nil {
		return p
	}
	p.NextCfg = r.OVS.NextCfg
	p.Config.OtherConfig = p.validKeys("Open_vSwitch", r.OVS.OtherConfig, func(kv map[string]string) *config.Config {
		return &config.Config{OtherConfig: kv}
	})
	if r.OVS.SSL != nil {
		if s := r.SSL[*r.OVS.SSL]; s != nil {
			ssl := &config.SSL{PrivateKey: s.PrivateKey, Certificate: s.Certificate, CACert: s.CaCert}
			if err := validateAlone(&config.Config{SSL: ssl}); err != nil {
				p.Problems = append(p.Problems, fmt.Sprintf("SSL not applied: %v", err))
			} else {
				p.Config.SSL = ssl
			}
		}
	}
	portOwner := map[string]string{}
	for _, bu := range sortedByName(r.OVS.Bridges, func(u string) string { return nameOf(r.Bridges[u]) }) {
		rb := r.Bridges[bu]
		if rb == nil {
			continue
		}
		if err := p.addBridge(r, rb, portOwner); err != "" {
			p.Problems = append(p.Problems, fmt.Sprintf("bridge %q not applied: %s", rb.Name, err))
			p.failBridge(r, rb, err)
		}
	}
	return p
}

func nameOf(b *vswitchdb.Bridge) string {
	if b == nil {
		return ""
	}
	return b.Name
}

// sortedByName orders UUIDs by their rows' names, so that conflicts
// (a name used twice) resolve the same way on every reconcile.
func sortedByName(uuids []string, name func(string) string) []string {
	out := slices.Clone(uuids)
	slices.SortFunc(out, func(a, b string) int {
		if na, nb := name(a), name(b); na != nb {
			if na < nb {
				return -1
			}
			return 1
		}
		if a < b {
			return -1
		} else if a > b {
			return 1
		}
		return 0
	})
	return out
}

// failBridge reports err on every interface of a bridge left out.
func (p *Plan) failBridge(r *Rows, rb *vswitchdb.Bridge, err string) {
	for _, pu := range rb.Ports {
		if rp := r.Ports[pu]; rp != nil {
			for _, iu := range rp.Interfaces {
				p.IfaceErr[iu] = err
			}
		}
	}
}

// addBridge adds bridge rb and the ports it can run; it returns why the
// whole bridge is left out, or "".
func (p *Plan) addBridge(r *Rows, rb *vswitchdb.Bridge, portOwner map[string]string) string {
	switch rb.DatapathType {
	case "", "netdev", "system":
	default:
		return fmt.Sprintf("unsupported datapath_type %q (this switch runs %q and %q, both userspace)", rb.DatapathType, "netdev", "system")
	}
	if _, dup := p.Config.Bridges[rb.Name]; dup {
		return "another bridge has the same name"
	}
	if owner, ok := portOwner[rb.Name]; ok {
		return fmt.Sprintf("name already used by a port of bridge %q", owner)
	}
	b := &config.Bridge{Name: rb.Name, FailMode: config.FailModeStandalone}
	b.OtherConfig = p.validKeys(fmt.Sprintf("bridge %q", rb.Name), rb.OtherConfig, func(kv map[string]string) *config.Config {
		return &config.Config{Bridges: map[string]*config.Bridge{b.Name: {Name: b.Name, FailMode: b.FailMode, OtherConfig: kv}}}
	})
	if rb.FailMode != nil && *rb.FailMode == vswitchdb.BridgeFailModeSecure {
		b.FailMode = config.FailModeSecure
	}
	if err := validateAlone(&config.Config{Bridges: map[string]*config.Bridge{b.Name: b}}); err != nil {
		return err.Error()
	}
	for _, cu := range rb.Controller {
		c := r.Controllers[cu]
		if c == nil || slices.Contains(b.Controllers, c.Target) {
			continue
		}
		nb := b.Clone()
		nb.Controllers = append(nb.Controllers, c.Target)
		if o, set := controllerOptions(c); set {
			if nb.ControllerOptions == nil {
				nb.ControllerOptions = map[string]config.ControllerOptions{}
			}
			nb.ControllerOptions[c.Target] = o
		}
		if err := validateAlone(&config.Config{Bridges: map[string]*config.Bridge{b.Name: nb}}); err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("bridge %q: controller %q not applied: %v", b.Name, c.Target, err))
			continue
		}
		b.Controllers, b.ControllerOptions = nb.Controllers, nb.ControllerOptions
		for _, col := range unhonouredControllerColumns(c) {
			p.Problems = append(p.Problems, fmt.Sprintf("bridge %q: controller %q: %s is not supported: the switch ignores it", b.Name, c.Target, col))
		}
	}
	slices.Sort(b.Controllers)
	for _, name := range slices.Sorted(slices.Values(rb.Protocols)) {
		if _, ok := ofpwire.VersionByName(name); ok {
			b.Protocols = append(b.Protocols, name)
		} else {
			p.Problems = append(p.Problems, fmt.Sprintf("bridge %q: protocols: %s is not supported (this switch speaks OpenFlow10, OpenFlow13, OpenFlow14 and OpenFlow15)", b.Name, name))
		}
	}
	if len(rb.Protocols) > 0 && len(b.Protocols) == 0 {
		p.Problems = append(p.Problems, fmt.Sprintf("bridge %q: protocols %v: none is supported, so connections offer every version this switch speaks", b.Name, rb.Protocols))
	}
	b.Ports = map[string]*config.Port{}
	for _, pu := range sortedByName(rb.Ports, func(u string) string {
		if rp := r.Ports[u]; rp != nil {
			return rp.Name
		}
		return ""
	}) {
		rp := r.Ports[pu]
		if rp == nil {
			continue
		}
		var ifs []*vswitchdb.Interface
		for _, iu := range rp.Interfaces {
			if ri := r.Ifaces[iu]; ri != nil {
				ifs = append(ifs, ri)
			}
		}
		fail := func(why string) {
			for _, ri := range ifs {
				p.IfaceErr[ri.UUID] = why
			}
		}
		if len(ifs) != 1 {
			fail("ports with more than one interface (bonds) are not supported yet")
			continue
		}
		ri := ifs[0]
		if rp.Name == rb.Name {
			if ri.Type != "internal" {
				fail(fmt.Sprintf("the port named like its bridge is the bridge's own and must be of type internal, not %q", ri.Type))
				continue
			}
			p.IfaceAt[ri.UUID] = IfaceRef{Bridge: b.Name, Port: rp.Name, Local: true}
			continue
		}
		if owner, ok := portOwner[rp.Name]; ok {
			fail(fmt.Sprintf("port name already used in bridge %q", owner))
			continue
		}
		if _, ok := p.Config.Bridges[rp.Name]; ok {
			fail("port name already used by a bridge")
			continue
		}
		typ, ok := ifaceTypes[ri.Type]
		if !ok {
			fail("unsupported interface type: " + ri.Type)
			continue
		}
		cp := &config.Port{Name: rp.Name, Type: typ, Options: maps.Clone(ri.Options)}
		if ri.Name != rp.Name {
			// The daemon names a port's device after the port.
			fail(fmt.Sprintf("interface name %q differs from its port's %q, which is not supported yet", ri.Name, rp.Name))
			continue
		}
		if ri.OfportRequest != nil {
			if *ri.OfportRequest < 1 || *ri.OfportRequest > config.MaxOFPort {
				fail(fmt.Sprintf("ofport_request %d outside 1..%d", *ri.OfportRequest, config.MaxOFPort))
				continue
			}
			cp.OFPortRequest = uint32(*ri.OfportRequest)
		}
		if len(rp.OtherConfig)+len(ri.OtherConfig) > 0 {
			// Open vSwitch keeps per-queue settings on the Interface and
			// a few on the Port; the daemon has one map per port.
			cp.OtherConfig = maps.Clone(rp.OtherConfig)
			if cp.OtherConfig == nil {
				cp.OtherConfig = map[string]string{}
			}
			maps.Copy(cp.OtherConfig, ri.OtherConfig)
		}
		if rp.Tag != nil {
			if *rp.Tag < 0 || *rp.Tag > config.MaxVLAN {
				fail(fmt.Sprintf("tag %d outside 0..%d", *rp.Tag, config.MaxVLAN))
				continue
			}
			cp.Tag = uint16(*rp.Tag)
		}
		badTrunk := ""
		for _, v := range rp.Trunks {
			if v < 1 || v > config.MaxVLAN {
				badTrunk = strconv.Itoa(v)
				break
			}
			cp.Trunks = append(cp.Trunks, uint16(v))
		}
		if badTrunk != "" {
			fail(fmt.Sprintf("trunk VLAN %s outside 1..%d", badTrunk, config.MaxVLAN))
			continue
		}
		slices.Sort(cp.Trunks)
		if rp.VLANMode != nil {
			// The daemon's VLAN model is Open vSwitch's default: a tag
			// alone is access, trunks with a tag make it their native
			// untagged VLAN. The explicit modes that mean the same are
			// taken, with what the mode ignores dropped as in OVS.
			switch *rp.VLANMode {
			case vswitchdb.PortVLANModeAccess:
				cp.Trunks = nil
			case vswitchdb.PortVLANModeTrunk:
				cp.Tag = 0
			case vswitchdb.PortVLANModeNativeUntagged:
			default:
				fail(fmt.Sprintf("vlan_mode %s is not supported yet", *rp.VLANMode))
				continue
			}
		}
		if ri.MTURequest != nil {
			cp.MTURequest = *ri.MTURequest
		}
		// Validate needs a number; the store assigns the real one.
		alone := cp.Clone()
		alone.OFPort = max(1, cp.OFPortRequest)
		nb := &config.Bridge{Name: b.Name, FailMode: b.FailMode, Ports: map[string]*config.Port{cp.Name: alone}}
		if err := validateAlone(&config.Config{Bridges: map[string]*config.Bridge{b.Name: nb}}); err != nil {
			fail(err.Error())
			continue
		}
		b.Ports[cp.Name] = cp
		portOwner[cp.Name] = b.Name
		p.IfaceAt[ri.UUID] = IfaceRef{Bridge: b.Name, Port: cp.Name}
	}
	p.Config.Bridges[b.Name] = b
	if _, ok := portOwner[b.Name]; !ok {
		portOwner[b.Name] = b.Name
	}
	return ""
}

// validKeys returns the keys of other_config m that the daemon's
// validation accepts, each checked alone in the configuration in builds;
// a refused key is said and left out, as ovs-vswitchd ignores a value it
// cannot parse, rather than refusing the whole row.
func (p *Plan) validKeys(where string, m map[string]string, in func(map[string]string) *config.Config) map[string]string {
	var out map[string]string
	for _, k := range sortedKeys(m) {
		if err := validateAlone(in(map[string]string{k: m[k]})); err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("%s other_config:%s not applied: %v", where, k, err))
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = m[k]
	}
	return out
}

// validateAlone runs the store's validation on a configuration holding
// one row, so that a refused value names that row only.
func validateAlone(c *config.Config) error {
	return config.Validate(c)
}

// controllerOptions are the Controller row's settings the switch applies:
// inactivity_probe (0 disables probing) and max_backoff, in ms.
func controllerOptions(c *vswitchdb.Controller) (o config.ControllerOptions, set bool) {
	if c.InactivityProbe != nil {
		o.InactivityProbe = *c.InactivityProbe
		if o.InactivityProbe == 0 {
			o.InactivityProbe = -1
		}
		set = true
	}
	if c.MaxBackoff != nil {
		o.MaxBackoff, set = *c.MaxBackoff, true
	}
	return o, set
}

// unhonouredControllerColumns names the columns a Controller row sets
// that the switch does not apply, so that they are said rather than
// silently ignored. connection_mode out-of-band is what the switch does
// anyway (it has no in-band control).
func unhonouredControllerColumns(c *vswitchdb.Controller) []string {
	var out []string
	if c.ConnectionMode != nil && *c.ConnectionMode == vswitchdb.ControllerConnectionModeInBand {
		out = append(out, "connection_mode=in-band (the switch connects out of band)")
	}
	for _, col := range []struct {
		name string
		set  bool
	}{
		{"controller_rate_limit", c.ControllerRateLimit != nil}, {"controller_burst_limit", c.ControllerBurstLimit != nil},
		{"controller_queue_size", c.ControllerQueueSize != nil}, {"enable_async_messages", c.EnableAsyncMessages != nil},
		{"local_ip", c.LocalIP != nil}, {"local_gateway", c.LocalGateway != nil}, {"local_netmask", c.LocalNetmask != nil},
	} {
		if col.set {
			out = append(out, col.name)
		}
	}
	return out
}

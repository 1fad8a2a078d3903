package vswitchd

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// tunnelOptionKeys are the options of vxlan and geneve ports, named as in
// Open vSwitch.
var tunnelOptionKeys = []string{"remote_ip", "key", "local_ip", "dst_port", "tos", "ttl", "df_default", "csum", "n_rxq", "udp_offload", "underlay"}

// tunnelOptions reads a tunnel port's options, refusing what the port
// could not honour, so that "vsctl add-port" fails at once instead of the
// port failing to open later.
func tunnelOptions(p *config.Port) (tunnel.Options, error) {
	o := tunnel.Options{Kind: tunnel.VXLAN, Queues: intOption(p.Options, "n_rxq", 1)}
	if p.Type == config.PortTypeGeneve {
		o.Kind = tunnel.Geneve
	}
	bad := func(k, want string) error {
		return fmt.Errorf("port %q: options:%s=%q is not %s", p.Name, k, p.Options[k], want)
	}
	addr := func(k string) (netip.Addr, error) {
		a, err := netip.ParseAddr(p.Options[k])
		if err != nil || a.Zone() != "" || a.IsUnspecified() || a.IsMulticast() {
			return netip.Addr{}, bad(k, "a unicast IPv4 or IPv6 address")
		}
		return a, nil
	}
	switch v, ok := p.Options["remote_ip"]; {
	case !ok:
		return o, fmt.Errorf("port %q: type %s needs options:remote_ip (an address, or flow)", p.Name, p.Type)
	case v != "flow":
		a, err := addr("remote_ip")
		if err != nil {
			return o, err
		}
		o.Remote = a
	}
	switch v, ok := p.Options["key"]; {
	case !ok:
	case v == "flow":
		o.KeyFlow = true
	default:
		n, err := strconv.ParseUint(v, 0, 32)
		if err != nil || n > 0xffffff {
			return o, bad("key", "flow or a VNI in 0..16777215")
		}
		o.Key = uint32(n)
	}
	if _, ok := p.Options["local_ip"]; ok {
		a, err := addr("local_ip")
		if err != nil {
			return o, err
		}
		if o.Remote.IsValid() && o.Remote.Is4() != a.Is4() {
			return o, fmt.Errorf("port %q: local_ip and remote_ip are of different families", p.Name)
		}
		o.Local = a
	}
	num := func(k string, min, max uint64) (uint64, error) {
		n, err := strconv.ParseUint(p.Options[k], 0, 16)
		if err != nil || n < min || n > max {
			return 0, bad(k, fmt.Sprintf("a number in %d..%d", min, max))
		}
		return n, nil
	}
	if _, ok := p.Options["dst_port"]; ok {
		n, err := num("dst_port", 1, 65535)
		if err != nil {
			return o, err
		}
		o.DstPort = uint16(n)
	}
	// tos and ttl take "inherit" (from the inner IP packet) as in OVS.
	if p.Options["tos"] == "inherit" {
		o.TOSInherit = true
	} else if _, ok := p.Options["tos"]; ok {
		n, err := num("tos", 0, 255)
		if err != nil {
			return o, err
		}
		o.TOS = uint8(n)
	}
	if p.Options["ttl"] == "inherit" {
		o.TTLInherit = true
	} else if _, ok := p.Options["ttl"]; ok {
		n, err := num("ttl", 1, 255)
		if err != nil {
			return o, err
		}
		o.TTL = uint8(n)
	}
	boolOpt := func(k string, def bool) (bool, error) {
		switch p.Options[k] {
		case "":
			return def, nil
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, bad(k, "true or false")
	}
	df, err := boolOpt("df_default", true)
	if err != nil {
		return o, err
	}
	o.NoDF = !df
	if o.Csum, err = boolOpt("csum", false); err != nil {
		return o, err
	}
	off, err := boolOpt("udp_offload", true)
	if err != nil {
		return o, err
	}
	o.NoOffload = !off
	if o.Underlay, err = tunnel.ParseUnderlay(p.Options["underlay"]); err != nil {
		return o, bad("underlay", "socket or afxdp")
	}
	if o.Underlay == tunnel.UnderlayAFXDP {
		// The AF_XDP sockets live on the interface that holds local_ip.
		if !o.Local.IsValid() {
			return o, fmt.Errorf("port %q: options:underlay=afxdp needs options:local_ip", p.Name)
		}
		if o.NoDF {
			return o, fmt.Errorf("port %q: options:underlay=afxdp needs df_default=true", p.Name)
		}
	}
	return o, nil
}

package vswitchd

import (
	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// tunnelOptions reads a tunnel port's options (config.ParseTunnelOptions)
// as the tunnel port takes them.
func tunnelOptions(p *config.Port) (tunnel.Options, error) {
	c, err := config.ParseTunnelOptions(p)
	if err != nil {
		return tunnel.Options{}, err
	}
	o := tunnel.Options{Kind: tunnel.VXLAN, Queues: intOption(p.Options, "n_rxq", 1), Remote: c.Remote, Local: c.Local,
		Key: c.Key, KeyFlow: c.KeyFlow, DstPort: c.DstPort, TOS: c.TOS, TTL: c.TTL, TOSInherit: c.TOSInherit,
		TTLInherit: c.TTLInherit, NoDF: c.NoDF, Csum: c.Csum, NoOffload: c.NoOffload}
	if p.Type == config.PortTypeGeneve {
		o.Kind = tunnel.Geneve
	}
	if o.Underlay, err = tunnel.ParseUnderlay(c.Underlay); err != nil {
		return tunnel.Options{}, err
	}
	return o, nil
}

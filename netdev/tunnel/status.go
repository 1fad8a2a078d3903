package tunnel

import (
	"strconv"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Status is the port's state as Open vSwitch reports a tunnel's in the
// Interface status column: for a fixed remote_ip, the interface the
// kernel routes the outer packets through (tunnel_egress_iface) and
// whether it has carrier (tunnel_egress_iface_carrier). The port itself
// never goes down (LinkUp), so this is where a missing route or a dead
// underlay link shows before packets are dropped as no_route. Beyond OVS:
// tunnel_egress_src is the outer source address the kernel picks (local_ip
// when set), and tunnel_egress_error why there is no route. A
// remote_ip=flow port has no single route, hence no status.
//
// It asks the kernel (netlink) in the calling thread's network namespace,
// which must be the port's; it is for introspection, not the data path.
func (p *Port) Status() map[string]string {
	var m map[string]string
	// The AF_XDP underlay shows itself (the socket underlay, the default,
	// adds nothing, as in Open vSwitch).
	// Its counters say whether the fast path is in use: frames through
	// the AF_XDP sockets, and packets sent on the raw path instead
	// (another interface's route, an unresolved neighbour, super-frames).
	if x := p.xdp; x != nil {
		us := p.UnderlayStats()
		m = map[string]string{"underlay": "afxdp", "underlay_iface": x.ifname,
			"underlay_xdp_mode":       x.dev.AttachMode().String(),
			"underlay_xsk_rx_packets": strconv.FormatUint(us.RxPackets, 10),
			"underlay_xsk_tx_packets": strconv.FormatUint(us.TxPackets, 10),
			"underlay_raw_tx_packets": strconv.FormatUint(us.FallbackTx, 10)}
	}
	if !p.opt.Remote.IsValid() {
		return m
	}
	if m == nil {
		m = map[string]string{}
	}
	routes, err := netlink.RouteGet(p.opt.Remote.Unmap().AsSlice())
	if err == nil && len(routes) == 0 {
		err = unix.ENETUNREACH
	}
	if err != nil {
		m["tunnel_egress_error"] = err.Error()
		return m
	}
	r := routes[0]
	if link, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
		a := link.Attrs()
		m["tunnel_egress_iface"] = a.Name
		carrier := "down"
		if a.RawFlags&unix.IFF_UP != 0 && a.RawFlags&unix.IFF_RUNNING != 0 {
			carrier = "up"
		}
		m["tunnel_egress_iface_carrier"] = carrier
	}
	switch {
	case p.opt.Local.IsValid():
		m["tunnel_egress_src"] = p.opt.Local.Unmap().String()
	case r.Src != nil:
		m["tunnel_egress_src"] = r.Src.String()
	}
	return m
}

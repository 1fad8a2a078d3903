package tunnel

import (
	"fmt"
	"net/netip"
	"strings"
)

// PushText describes the encapsulation an output to the port performs, in
// the spirit of Open vSwitch's tnl_push datapath action, for flow dumps and
// traces: the outer IP header's fields, the UDP ports and the tunnel
// header. OVS prints a complete header it has built, Ethernet included;
// here the kernel routes the outer packet and resolves its neighbour, so
// the text says where a field comes from instead of a value the port does
// not know: src=route (the kernel's source address for the destination,
// without local_ip), dst=tun_dst / vni=tun_id (from the packet's metadata,
// with remote_ip=flow / key=flow), tos/ttl=inherit (from the inner
// packet; ECN always follows it, outer.go), udp src=hash (from the inner flow's
// hash, or the offload socket's port for a segmented run).
func (p *Port) PushText(outPort uint32) string {
	o := &p.opt
	var b strings.Builder
	fmt.Fprintf(&b, "tnl_push(tnl_port(%s),header(", p.name)
	v6 := o.Remote.IsValid() && !o.Remote.Unmap().Is4() || o.Local.IsValid() && !o.Local.Unmap().Is4()
	if v6 {
		b.WriteString("ipv6(")
	} else {
		b.WriteString("ipv4(")
	}
	addr := func(a netip.Addr, unset string) string {
		if !a.IsValid() {
			return unset
		}
		return a.Unmap().String()
	}
	tos, ttl := fmt.Sprintf("%#x", o.TOS), fmt.Sprint(o.TTL)
	if o.TOSInherit {
		tos = "inherit"
	}
	if o.TTLInherit {
		ttl = "inherit"
	}
	fmt.Fprintf(&b, "src=%s,dst=%s,tos=%s,ttl=%s", addr(o.Local, "route"), addr(o.Remote, "tun_dst"), tos, ttl)
	if !o.NoDF && !v6 {
		b.WriteString(",df")
	}
	b.WriteString("),udp(src=hash,dst=")
	fmt.Fprintf(&b, "%d", o.DstPort)
	if v6 || o.Csum {
		b.WriteString(",csum")
	}
	fmt.Fprintf(&b, "),%s(vni=", o.Kind)
	if o.KeyFlow {
		b.WriteString("tun_id")
	} else {
		fmt.Fprintf(&b, "%#x", o.Key)
	}
	fmt.Fprintf(&b, ")),out_port(%d))", outPort)
	return b.String()
}

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// tunnelHost is one host of a multi-host test: a namespace with an
// underlay interface (IPv4 198.18.20.N/24, IPv6 2001:db8:20::N/64) on a
// veth pair to the other host.
type tunnelHost struct {
	ns       *nstest.Netns
	dev      string
	ip4, ip6 string
}

// twoUnderlayHosts joins two host namespaces with one veth pair.
func twoUnderlayHosts(t *testing.T) (a, b *tunnelHost) {
	t.Helper()
	nstest.RequireRoot(t)
	a = &tunnelHost{ns: nstest.NewNetns(t, "tunha"), dev: nstest.Name("ula"), ip4: "198.18.20.1", ip6: "2001:db8:20::1"}
	b = &tunnelHost{ns: nstest.NewNetns(t, "tunhb"), dev: nstest.Name("ulb"), ip4: "198.18.20.2", ip6: "2001:db8:20::2"}
	nstest.Run(t, "ip", "link", "add", a.dev, "netns", a.ns.Name, "type", "veth", "peer", "name", b.dev, "netns", b.ns.Name)
	for _, h := range []*tunnelHost{a, b} {
		h.ns.Run(t, "ip", "addr", "add", h.ip4+"/24", "dev", h.dev)
		h.ns.Run(t, "ip", "addr", "add", h.ip6+"/64", "dev", h.dev, "nodad")
		h.ns.Run(t, "ip", "link", "set", h.dev, "up")
	}
	return a, b
}

// workload is a namespace behind a switch port on a host: its interface
// (tenant address 198.19.N.x/24, MTU 1450 for the tunnel overhead) is a
// veth whose other end, port, lives in the host namespace.
type workload struct {
	ns   *nstest.Netns
	port string
	dev  string
	ip   string
}

func newWorkload(t *testing.T, host *tunnelHost, ip string) *workload {
	t.Helper()
	w := &workload{ns: nstest.NewNetns(t, "tunw"), port: nstest.Name("twp"), dev: nstest.Name("twd"), ip: ip}
	dev := w.dev
	nstest.Run(t, "ip", "link", "add", w.port, "netns", host.ns.Name, "type", "veth", "peer", "name", dev, "netns", w.ns.Name)
	host.ns.Run(t, "ip", "link", "set", w.port, "up")
	w.ns.Run(t, "ip", "link", "set", dev, "mtu", "1450")
	w.ns.Run(t, "ip", "addr", "add", ip+"/24", "dev", dev)
	w.ns.Run(t, "ip", "link", "set", dev, "up")
	w.ns.Run(t, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	return w
}

// hostSwitch starts our switch in host h with bridge br0 (standalone: a
// learning switch), workload w's port and a tunnel port vx0 to remote.
func hostSwitch(t *testing.T, h *tunnelHost, w *workload, typ, remote string, opts ...string) *daemon {
	t.Helper()
	d := newDaemon(t)
	d.netns = h.ns.Name
	d.start()
	d.vsctl("set", "Open_vSwitch", ".", "other_config:n-pmd=1")
	d.vsctl("add-br", "br0")
	d.vsctl("add-port", "br0", w.port, "--", "type=afpacket")
	args := []string{"add-port", "br0", "vx0", "--", "type=" + typ, "options:remote_ip=" + remote}
	for _, o := range opts {
		args = append(args, "options:"+o)
	}
	d.vsctl(args...)
	return d
}

// kernelVXLAN makes a Linux vxlan device in host h, VNI 100, towards
// remote, with the tenant address ip on it.
func kernelVXLAN(t *testing.T, h *tunnelHost, local, remote, ip string) string {
	t.Helper()
	dev := nstest.Name("kvx")
	h.ns.Run(t, "ip", "link", "add", dev, "type", "vxlan", "id", "100", "remote", remote, "local", local,
		"dstport", "4789", "dev", h.dev)
	if ip != "" {
		h.ns.Run(t, "ip", "addr", "add", ip+"/24", "dev", dev)
	}
	h.ns.Run(t, "ip", "link", "set", dev, "up")
	return dev
}

// showLine returns the first line of vsctl show output that contains
// key, without leading blanks ("" if none).
func showLine(show, key string) string {
	for _, l := range strings.Split(show, "\n") {
		if strings.Contains(l, key) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestVXLANKernelInterop: a workload behind our switch's VXLAN port pings a
// Linux kernel vxlan device on another host, and the kernel side pings back,
// over IPv4 and IPv6 underlays.
func TestVXLANKernelInterop(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			a, b := twoUnderlayHosts(t)
			la, lb := a.ip4, b.ip4
			if v6 {
				la, lb = a.ip6, b.ip6
			}
			w := newWorkload(t, a, "198.19.30.1")
			d := hostSwitch(t, a, w, "vxlan", lb, "key=100")
			kernelVXLAN(t, b, lb, la, "198.19.30.2")

			show := d.vsctl("show")
			// The tunnel's state, as OVS's Interface status column has it.
			for _, want := range []string{"type: vxlan", "options:remote_ip=" + lb, "options:key=100",
				"status:tunnel_egress_iface=" + a.dev, "status:tunnel_egress_iface_carrier=up", "status:tunnel_egress_src=" + la} {
				if !strings.Contains(show, want) {
					t.Errorf("vsctl show lacks %q:\n%s", want, show)
				}
			}
			// The database has the status within a write-back (a second).
			nstest.WaitFor(t, 5*time.Second, "status:tunnel_egress_iface="+a.dev+" in the database", func() bool {
				out, _, _ := d.vsctlRaw("get", "Interface", "vx0", "status:tunnel_egress_iface")
				return strings.TrimSpace(out) == a.dev
			})
			if l := d.vsctl("list", "Interface", "vx0"); !strings.Contains(l, `tunnel_egress_iface_carrier="up"`) {
				t.Errorf("list Interface vx0 lacks the status:\n%s", l)
			}
			nstest.Ping(t, w.ns, "198.19.30.2")
			nstest.Ping(t, b.ns, "198.19.30.1")
			// TCP both ways. Host B's kernel leaves the inner TCP
			// checksum of what its vxlan device sends to the underlay's
			// offload (a NIC would complete it before the wire), and a
			// veth never completes it: the port completes it on receive.
			bps := nstest.IperfTCP(t, w.ns, b.ns, "198.19.30.2", 2)
			back := nstest.IperfTCP(t, b.ns, w.ns, "198.19.30.1", 2)
			t.Logf("iperf3 TCP through the tunnel: %.2f Gbit/s to the kernel's vxlan, %.2f Gbit/s back", bps/1e9, back/1e9)
			if bps < 1e6 || back < 1e6 {
				t.Errorf("TCP through the tunnel stalled: %.0f bit/s to the kernel's vxlan, %.0f back", bps, back)
			}
			// The workload has TSO on: its super-frames crossed the
			// tunnel port whole, each cut into UDP_SEGMENT runs.
			var frames, sends, segs int
			if _, err := fmt.Sscanf(showLine(d.vsctl("show"), "tunnel_tx_super:"), "tunnel_tx_super: frames=%d sends=%d segments=%d",
				&frames, &sends, &segs); err != nil || frames < 10 || sends == 0 || segs < 4*sends {
				t.Errorf("tunnel_tx_super: %d frames, %d sends, %d segments (%v)", frames, sends, segs, err)
			} else {
				t.Logf("tunnel_tx_super: %d frames in %d segmented sends of %.1f segments", frames, sends, float64(segs)/float64(sends))
			}
			// The generic port metrics count the tunnel port's traffic
			// (inner frames): both streams crossed it both ways.
			m := d.scrape()
			for _, dir := range []string{"rx", "tx"} {
				pk := m[`vswitch_port_`+dir+`_packets_total{bridge="br0",port="vx0"}`]
				by := m[`vswitch_port_`+dir+`_bytes_total{bridge="br0",port="vx0"}`]
				if pk < 1000 || by < 1e6 {
					t.Errorf("vx0 %s: %.0f packets, %.0f bytes", dir, pk, by)
				}
			}

			// What came in over the tunnel carries its metadata into the
			// pipeline: a flow on tun_id and in_port sees the replies.
			srcField := "tun_src="
			if v6 {
				srcField = "tun_ipv6_src="
			}
			d.vsctl("add-flow", "br0", "priority=200,tun_id=100,"+srcField+lb+",in_port=vx0,actions=NORMAL")
			nstest.Ping(t, w.ns, "198.19.30.2")
			l := flowLine(t, d.vsctl("dump-flows", "br0"), "priority=200")
			if n, ok := field(l, "n_packets"); !ok || n < 5 {
				t.Errorf("tun_id=100,in_port=vx0 flow saw %d packets: %s", n, l)
			}
			dp := d.vsctl("dpif-dump-flows", "br0")
			tunSrc := "src=" + lb
			if v6 {
				tunSrc = "ipv6_src=" + lb
			}
			if !strings.Contains(dp, "tunnel(tun_id=0x64,"+tunSrc) {
				t.Errorf("datapath flows lack the tunnel metadata (%s):\n%s", tunSrc, dp)
			}
			if push := "dst=" + lb + ",tos=0x0,ttl=64"; !strings.Contains(dp, "tnl_push(tnl_port(vx0),header(") ||
				!strings.Contains(dp, push) || !strings.Contains(dp, "vxlan(vni=0x64)") {
				t.Errorf("datapath flows lack the tunnel output's header (%s, vxlan(vni=0x64)):\n%s", push, dp)
			}
		})
	}
}

// TestVXLANSwitchToSwitch: two hosts each running our switch, joined by a
// VXLAN port, with a flow-based tunnel on one side (remote_ip=flow,
// key=flow; the destination and VNI set by set_field) and a fixed one on
// the other.
func TestVXLANSwitchToSwitch(t *testing.T) {
	a, b := twoUnderlayHosts(t)
	wa := newWorkload(t, a, "198.19.31.1")
	wb := newWorkload(t, b, "198.19.31.2")
	da := hostSwitch(t, a, wa, "vxlan", "flow", "key=flow")
	db := hostSwitch(t, b, wb, "vxlan", a.ip4, "key=200")

	// Host A: secure fail mode and explicit flows; packets to the tunnel
	// get their destination and VNI from the flow.
	da.vsctl("set-fail-mode", "br0", "secure")
	// This one through ovs-ofctl, which encodes tun_dst as the
	// Nicira-class OXM it sends Open vSwitch.
	mgmt := "unix:" + filepath.Join(da.stateDir, "br0.mgmt")
	if nstest.HasTool(t, "ovs-ofctl") {
		nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", mgmt,
			fmt.Sprintf("priority=100,in_port=%s,actions=set_field:200->tun_id,set_field:%s->tun_dst,output:vx0", wa.port, b.ip4))
		if out := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", mgmt); !strings.Contains(out, "set_field:"+b.ip4+"->tun_dst") {
			t.Errorf("ovs-ofctl dump-flows:\n%s", out)
		}
	} else {
		da.vsctl("add-flow", "br0", fmt.Sprintf("priority=100,in_port=%s,actions=set_field:200->tun_id,set_field:%s->tun_dst,output:vx0", wa.port, b.ip4))
	}
	da.vsctl("add-flow", "br0", fmt.Sprintf("priority=100,tun_id=200,tun_src=%s,in_port=vx0,actions=output:%s", b.ip4, wa.port))

	nstest.Ping(t, wa.ns, wb.ip)
	nstest.Ping(t, wb.ns, wa.ip)

	dp := da.vsctl("dpif-dump-flows", "br0")
	if !strings.Contains(dp, "set(tunnel(dst="+b.ip4+"))") || !strings.Contains(dp, "set(tunnel(tun_id=0xc8))") {
		t.Errorf("datapath flows lack the set-tunnel actions:\n%s", dp)
	}
	// The output to the flow-based port shows its encapsulation, with the
	// fields the packet's metadata supplies named as such.
	push := "tnl_push(tnl_port(vx0),header(ipv4(src=route,dst=tun_dst,tos=0x0,ttl=64,df),udp(src=hash,dst=4789),vxlan(vni=tun_id))"
	if !strings.Contains(dp, push) {
		t.Errorf("datapath flows lack %s:\n%s", push, dp)
	}
	tr := da.vsctl("trace", "br0", "in_port="+wa.port+",dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,ip,nw_src="+wa.ip+",nw_dst="+wb.ip)
	if !strings.Contains(tr, "Datapath actions: ") || !strings.Contains(tr, push) {
		t.Errorf("trace lacks %s:\n%s", push, tr)
	}

	// Host B's port is a wire to host A with VNI 200: a packet with
	// another VNI from host A is dropped and counted, and vsctl show
	// says why.
	da.vsctl("add-flow", "br0", fmt.Sprintf("priority=200,in_port=%s,udp,actions=set_field:300->tun_id,set_field:%s->tun_dst,output:vx0", wa.port, b.ip4))
	wa.ns.Output("bash", "-c", "echo x > /dev/udp/"+wb.ip+"/9") // one datagram (an ARP is already known)
	nstest.WaitFor(t, 5*time.Second, "host B to count the wrong VNI", func() bool {
		return strings.Contains(db.vsctl("show"), "tunnel_drops: wrong_vni=")
	})
}

// TestVXLANThreeHosts: three hosts on one underlay LAN (a Linux bridge in
// a namespace of its own), each running our switch with one port-based
// VXLAN tunnel per peer, all on UDP port 4789. The kernel hands each
// tunnel port its own peer's packets; the flows never forward from a
// tunnel to a tunnel (split horizon), so the full mesh has no loop.
// Every workload pings every other.
func TestVXLANThreeHosts(t *testing.T) {
	nstest.RequireRoot(t)
	lan := nstest.NewNetns(t, "tunlan")
	br := nstest.Name("ulbr")
	lan.Run(t, "ip", "link", "add", br, "type", "bridge")
	lan.Run(t, "ip", "link", "set", br, "up")
	var hosts []*tunnelHost
	var wls []*workload
	for i := 1; i <= 3; i++ {
		h := &tunnelHost{ns: nstest.NewNetns(t, "tunh"), dev: nstest.Name("ul"),
			ip4: fmt.Sprintf("198.18.21.%d", i), ip6: fmt.Sprintf("2001:db8:21::%d", i)}
		peer := nstest.Name("ulp")
		nstest.Run(t, "ip", "link", "add", h.dev, "netns", h.ns.Name, "type", "veth", "peer", "name", peer, "netns", lan.Name)
		lan.Run(t, "ip", "link", "set", peer, "master", br)
		lan.Run(t, "ip", "link", "set", peer, "up")
		h.ns.Run(t, "ip", "addr", "add", h.ip4+"/24", "dev", h.dev)
		h.ns.Run(t, "ip", "link", "set", h.dev, "up")
		hosts = append(hosts, h)
		wls = append(wls, newWorkload(t, h, fmt.Sprintf("198.19.33.%d", i)))
	}
	for i, h := range hosts {
		d := newDaemon(t)
		d.netns = h.ns.Name
		d.start()
		d.vsctl("set", "Open_vSwitch", ".", "other_config:n-pmd=1")
		d.vsctl("add-br", "br0", "fail_mode=secure")
		d.vsctl("add-port", "br0", wls[i].port, "--", "type=afpacket")
		var tunnels []string
		for j, peer := range hosts {
			if j == i {
				continue
			}
			name := fmt.Sprintf("vx%d", j+1)
			d.vsctl("add-port", "br0", name, "--", "type=vxlan", "options:remote_ip="+peer.ip4, "options:key=100")
			d.vsctl("add-flow", "br0", "priority=100,in_port="+name+",actions=output:"+wls[i].port)
			tunnels = append(tunnels, "output:"+name)
		}
		d.vsctl("add-flow", "br0", "priority=100,in_port="+wls[i].port+",actions="+strings.Join(tunnels, ","))
	}
	for i, w := range wls {
		for j, other := range wls {
			if i != j {
				nstest.Ping(t, w.ns, other.ip)
			}
		}
	}
}

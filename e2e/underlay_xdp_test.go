package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// statusCount reads a numeric status key of Interface vx0.
func statusCount(t *testing.T, d *daemon, key string) uint64 {
	t.Helper()
	out, errOut, code := d.vsctlRaw("get", "Interface", "vx0", "status:"+key)
	if code != 0 && strings.Contains(errOut, "no key") {
		return 0 // not reported into the database yet
	}
	s := strings.Trim(strings.TrimSpace(out), `"`)
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("status:%s = %q", key, s)
	}
	return n
}

// xdpAttached reports whether an XDP program is attached to dev in ns.
func xdpAttached(t *testing.T, ns *nstest.Netns, dev string) bool {
	t.Helper()
	return strings.Contains(ns.Run(t, "ip", "link", "show", "dev", dev), "xdp")
}

// TestVXLANAFXDPUnderlayKernel: with options:underlay=afxdp our VXLAN port
// reaches a Linux kernel vxlan device through AF_XDP sockets on the
// underlay interface: pings cross both ways and the sockets' counters
// show the frames went that way, while the host's own traffic on the
// interface (ARP, ping to and from its address) still works; deleting the
// port detaches the program.
func TestVXLANAFXDPUnderlayKernel(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) { testAFXDPUnderlayKernel(t, v6) })
	}
}

func testAFXDPUnderlayKernel(t *testing.T, v6 bool) {
	a, b := twoUnderlayHosts(t)
	la, lb := a.ip4, b.ip4
	if v6 {
		la, lb = a.ip6, b.ip6
	}
	w := newWorkload(t, a, "198.19.32.1")
	d := hostSwitch(t, a, w, "vxlan", lb, "key=100", "local_ip="+la, "underlay=afxdp")
	kernelVXLAN(t, b, lb, la, "198.19.32.2")

	show := d.vsctl("show")
	for _, want := range []string{"options:underlay=afxdp", "status:underlay=afxdp", "status:underlay_iface=" + a.dev} {
		if !strings.Contains(show, want) {
			t.Errorf("vsctl show lacks %q:\n%s", want, show)
		}
	}
	if !xdpAttached(t, a.ns, a.dev) {
		t.Fatalf("no XDP program on %s", a.dev)
	}
	nstest.Ping(t, w.ns, "198.19.32.2")
	nstest.Ping(t, b.ns, "198.19.32.1")
	// The first packets to host B went the raw path while the kernel
	// resolved its address; the next ones leave through the socket.
	nstest.WaitFor(t, 10*time.Second, "tunnel frames through the AF_XDP sockets both ways", func() bool {
		w.ns.Output("ping", "-c", "1", "-W", "1", "198.19.32.2")
		return statusCount(t, d, "underlay_xsk_rx_packets") > 0 && statusCount(t, d, "underlay_xsk_tx_packets") > 0
	})
	// TCP both ways, nothing dropped as a bad header. Host B's vxlan
	// device leaves the inner checksums of small frames partial (the
	// veth's tx checksum offload) and sends segmented runs, which cross
	// the veth whole and pass the program (generic on a veth) to the
	// port's UDP socket.
	if nstest.HasTool(t, "iperf3") {
		if bps := nstest.IperfTCP(t, b.ns, w.ns, "198.19.32.1", 2); bps <= 0 {
			t.Errorf("TCP from the kernel's vxlan: %v bit/s", bps)
		}
		if bps := nstest.IperfTCP(t, w.ns, b.ns, "198.19.32.2", 2); bps <= 0 {
			t.Errorf("TCP to the kernel's vxlan: %v bit/s", bps)
		}
	}
	// The host's own traffic passes the program.
	nstest.Ping(t, b.ns, la)
	nstest.Ping(t, a.ns, lb)
	if show := d.vsctl("show"); strings.Contains(show, "tunnel_drops:") {
		t.Errorf("drops:\n%s", show)
	}

	d.vsctl("del-port", "br0", "vx0")
	nstest.WaitFor(t, 10*time.Second, "the XDP program to go with the port", func() bool {
		return !xdpAttached(t, a.ns, a.dev)
	})
	nstest.Ping(t, b.ns, la)
}

// TestVXLANAFXDPSwitchToSwitch: two of our switches, both with
// underlay=afxdp, ping and carry TCP across.
func TestVXLANAFXDPSwitchToSwitch(t *testing.T) {
	a, b := twoUnderlayHosts(t)
	wa := newWorkload(t, a, "198.19.33.1")
	wb := newWorkload(t, b, "198.19.33.2")
	da := hostSwitch(t, a, wa, "vxlan", b.ip4, "key=100", "local_ip="+a.ip4, "underlay=afxdp")
	db := hostSwitch(t, b, wb, "vxlan", a.ip4, "key=100", "local_ip="+b.ip4, "underlay=afxdp")
	nstest.Ping(t, wa.ns, wb.ip)
	nstest.Ping(t, wb.ns, wa.ip)
	nstest.WaitFor(t, 10*time.Second, "tunnel frames through the AF_XDP sockets both ways", func() bool {
		wa.ns.Output("ping", "-c", "1", "-W", "1", wb.ip)
		return statusCount(t, da, "underlay_xsk_tx_packets") > 0 && statusCount(t, db, "underlay_xsk_rx_packets") > 0 &&
			statusCount(t, db, "underlay_xsk_tx_packets") > 0 && statusCount(t, da, "underlay_xsk_rx_packets") > 0
	})
	if nstest.HasTool(t, "iperf3") {
		if bps := nstest.IperfTCP(t, wa.ns, wb.ns, wb.ip, 2); bps <= 0 {
			t.Errorf("TCP across the tunnel: %v bit/s", bps)
		}
	}
	// A port on an interface that already has one does not start: vsctl
	// says why, as ovs-vsctl does, and the Interface row has it.
	if _, stderr, code := da.vsctlRaw("add-port", "br0", "vx1", "--", "type=vxlan", "options:remote_ip="+b.ip4,
		"options:local_ip="+a.ip4, "options:dst_port=4790", "options:underlay=afxdp"); code != 0 ||
		!strings.Contains(stderr, "Error detected while setting up 'vx1'") || !strings.Contains(stderr, "already carries tunnel port vx0") {
		t.Errorf("second underlay=afxdp port on %s: exit %d, %s", a.dev, code, stderr)
	}
	if got := da.vsctl("get", "Interface", "vx1", "ofport", "error"); !strings.HasPrefix(got, "-1\n") || !strings.Contains(got, "already carries tunnel port vx0") {
		t.Errorf("second underlay=afxdp port: ofport, error = %q", got)
	}
}

// TestVXLANAFXDPUnderlayKill9: a daemon killed without warning leaves no
// XDP program on the host's interface (it is held by the process's BPF
// link, which the kernel drops with the process), so the host's traffic
// does not depend on a switch that is gone; the restarted daemon reads the
// port back from its state, attaches the program again and carries the
// tunnel's traffic through the AF_XDP sockets.
func TestVXLANAFXDPUnderlayKill9(t *testing.T) {
	a, b := twoUnderlayHosts(t)
	w := newWorkload(t, a, "198.19.33.1")
	d := hostSwitch(t, a, w, "vxlan", b.ip4, "key=100", "local_ip="+a.ip4, "underlay=afxdp")
	kernelVXLAN(t, b, b.ip4, a.ip4, "198.19.33.2")
	nstest.Ping(t, w.ns, "198.19.33.2")
	if !xdpAttached(t, a.ns, a.dev) {
		t.Fatalf("no XDP program on %s", a.dev)
	}

	d.kill9()
	nstest.WaitFor(t, 10*time.Second, "the XDP program to go with the killed daemon", func() bool {
		return !xdpAttached(t, a.ns, a.dev)
	})
	nstest.Ping(t, b.ns, a.ip4)

	d.start()
	nstest.WaitFor(t, 20*time.Second, "the restarted daemon's tunnel frames through the AF_XDP sockets both ways", func() bool {
		w.ns.Output("ping", "-c", "1", "-W", "1", "198.19.33.2")
		return xdpAttached(t, a.ns, a.dev) &&
			statusCount(t, d, "underlay_xsk_rx_packets") > 0 && statusCount(t, d, "underlay_xsk_tx_packets") > 0
	})
	nstest.Ping(t, w.ns, "198.19.33.2")
}

// TestVXLANAFXDPUnderlayStaleNeighbour: frames sent through the AF_XDP
// socket bypass the kernel's neighbour code, which would therefore never
// re-check an entry gone STALE (a peer whose MAC changed would be sent to
// at its old one for good). The port sends the packet that finds a STALE
// entry on the raw path, so the kernel sees traffic and moves the entry
// on (DELAY, PROBE, REACHABLE) while the tunnel keeps using the socket.
func TestVXLANAFXDPUnderlayStaleNeighbour(t *testing.T) {
	a, b := twoUnderlayHosts(t)
	w := newWorkload(t, a, "198.19.35.1")
	d := hostSwitch(t, a, w, "vxlan", b.ip4, "key=100", "local_ip="+a.ip4, "underlay=afxdp")
	kernelVXLAN(t, b, b.ip4, a.ip4, "198.19.35.2")
	nstest.WaitFor(t, 10*time.Second, "tunnel frames through the AF_XDP socket", func() bool {
		w.ns.Output("ping", "-c", "1", "-W", "1", "198.19.35.2")
		return statusCount(t, d, "underlay_xsk_tx_packets") > 0
	})

	mac := strings.TrimSpace(b.ns.Run(t, "cat", "/sys/class/net/"+b.dev+"/address"))
	a.ns.Run(t, "ip", "neigh", "replace", b.ip4, "dev", a.dev, "lladdr", mac, "nud", "stale")
	state := func() string { return a.ns.Run(t, "ip", "neigh", "show", b.ip4, "dev", a.dev) }
	if s := state(); !strings.Contains(s, "STALE") {
		t.Fatalf("neighbour entry not STALE after replace: %q", s)
	}
	raw0 := statusCount(t, d, "underlay_raw_tx_packets")
	nstest.WaitFor(t, 15*time.Second, "the kernel to re-check the STALE neighbour", func() bool {
		w.ns.Output("ping", "-c", "1", "-W", "1", "198.19.35.2")
		return !strings.Contains(state(), "STALE")
	})
	// The database has the counter within a write-back (a second).
	nstest.WaitFor(t, 5*time.Second, "a packet on the raw path while the neighbour was STALE", func() bool {
		return statusCount(t, d, "underlay_raw_tx_packets") > raw0
	})
	nstest.Ping(t, w.ns, "198.19.35.2")
}

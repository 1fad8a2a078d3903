package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestConntrackBench puts this switch and Open vSwitch's userspace
// datapath (Debian's ovs-vswitchd, datapath_type=netdev) side by side on
// the same veth topology, each alone in a namespace between hosts A and
// B, with the same OpenFlow pipelines installed by ovs-ofctl:
//
//   - plain: in_port=1 -> output:2, the reference without ct;
//   - ct: ct(table=1,zone=1), then +trk+new -> ct(commit,zone=1),output:2
//     and +trk+est -> output:2, a stateful firewall;
//   - snat: the same with ct(commit,zone=1,nat(src=RANGE)).
//
// It measures (a) established 64-byte UDP flows at 1, 1,000 and 100,000
// connections (every flow sent once first, to commit it), in Mpps received
// by host B, against plain with the same flows; (b) new connections per
// second (every frame a new tuple), and (c) the same with SNAT, both from
// the tracker's connection count. A packet socket on A floods (one CPU);
// the switches' PMDs are pinned to the other. It prints, never asserts,
// and runs only with VSWITCH_CT_BENCH=1:
//
//	VSWITCH_CT_BENCH=1 go test -count=1 -v -timeout 30m -run TestConntrackBench ./e2e/
//
// VSWITCH_CT_BENCH_VARIANTS picks variants (default all: ours-afxdp,
// ours-afpacket, ovs-afxdp, ovs); VSWITCH_CT_BENCH_SECS the window (3).
func TestConntrackBench(t *testing.T) {
	if os.Getenv("VSWITCH_CT_BENCH") == "" {
		t.Skip("set VSWITCH_CT_BENCH=1 to run")
	}
	secs := 3
	if s, err := strconv.Atoi(os.Getenv("VSWITCH_CT_BENCH_SECS")); err == nil && s > 0 {
		secs = s
	}
	variants := []string{"ours-afxdp", "ours-afpacket", "ovs-afxdp", "ovs"}
	if v := os.Getenv("VSWITCH_CT_BENCH_VARIANTS"); v != "" {
		variants = strings.Fields(v)
	}
	for _, variant := range variants {
		t.Run(variant, func(t *testing.T) { ctBenchVariant(t, variant, secs) })
	}
}

// ctSwitch is one switch under test: how to install flows and ask its
// tracker.
type ctSwitch struct {
	ofctl  func(args ...string) string // ovs-ofctl on the bridge's socket
	appctl func(args ...string) string
}

func ctBenchVariant(t *testing.T, variant string, secs int) {
	a, b := nstest.TwoHosts(t)
	sut := nstest.NewNetns(t, "ctb")
	for _, p := range []string{a.Port, b.Port} {
		nstest.Run(t, "ip", "link", "set", p, "netns", sut.Name)
		sut.Run(t, "ip", "link", "set", p, "up")
	}
	sw := startCTSwitch(t, variant, sut, a.Port, b.Port)

	sink := net.HardwareAddr{2, 0, 0xc6, 0x12, 0, 0xfe} // B counts, then drops, these
	src, _ := net.ParseMAC(a.MAC)
	// frames are n flows, repeated to at least a full sendmmsg burst.
	frames := func(n int) [][]byte {
		out := make([][]byte, max(n, 1024))
		for i := range out {
			j := i % n
			sip := net.IPv4(198, 18, byte(16+j/60000), byte(j/240%250+1)).To4()
			out[i] = nstest.UDPFrame(sink, src, sip, net.ParseIP(b.IP), uint16(1024+j%60000), 9)
		}
		return out
	}
	fd := nstest.PacketSocket(t, a.NS, a.Dev, nstest.SocketOptions{})
	rate := func(fs [][]byte) (offered, received float64) {
		nstest.Flood(fd, fs, time.Second, nil) // warm-up: commits, caches
		time.Sleep(200 * time.Millisecond)
		before := nstest.Counter(t, b.NS, b.Dev, "rx_packets")
		start := time.Now()
		sent := nstest.Flood(fd, fs, time.Duration(secs)*time.Second, nil)
		el := time.Since(start).Seconds()
		time.Sleep(200 * time.Millisecond)
		got := nstest.Counter(t, b.NS, b.Dev, "rx_packets") - before
		return float64(sent) / el / 1e6, float64(got) / el / 1e6
	}
	nconns := func() int {
		n, err := strconv.Atoi(strings.TrimSpace(sw.appctl("dpctl/ct-get-nconns")))
		if err != nil {
			t.Fatalf("ct-get-nconns: %v", err)
		}
		return n
	}
	install := func(flows ...string) {
		sw.ofctl("del-flows")
		for _, f := range flows {
			sw.ofctl("add-flow", f)
		}
		sw.appctl("dpctl/flush-conntrack")
	}
	plain := []string{"priority=10,in_port=1,actions=output:2", "priority=10,in_port=2,actions=output:1"}
	firewall := func(commit string) []string {
		return []string{
			"priority=10,ip,ct_state=-trk,actions=ct(table=1,zone=1)",
			"table=1,ip,in_port=1,ct_state=+trk+new,actions=" + commit + ",output:2",
			"table=1,ip,in_port=1,ct_state=+trk+est,actions=output:2",
			"table=1,ip,in_port=2,ct_state=+trk+est,actions=output:1",
			"table=1,priority=0,actions=drop",
		}
	}
	for _, n := range []int{1, 1000, 100000} {
		fs := frames(n)
		install(plain...)
		_, base := rate(fs)
		install(firewall("ct(commit,zone=1)")...)
		off, est := rate(fs)
		t.Logf("%-14s established, %6d connections: %.3f Mpps through ct (offered %.3f), %.3f Mpps plain: ct costs %.2fx; %d tracked",
			variant, n, est, off, base, base/max(est, 1e-9), nconns())
	}
	for _, c := range []struct{ name, commit string }{
		{"new connections", "ct(commit,zone=1)"},
		{"new SNAT connections", "ct(commit,zone=1,nat(src=198.19.0.1-198.19.0.16))"},
	} {
		install(firewall(c.commit)...)
		fs := frames(2_000_000)
		before := nconns()
		start := time.Now()
		sent := nstest.Flood(fd, fs, time.Duration(secs)*time.Second, nil)
		el := time.Since(start).Seconds()
		time.Sleep(500 * time.Millisecond)
		made := nconns() - before
		t.Logf("%-14s %s: %.0f k/s (offered %.0f k frames/s, each a new tuple)", variant, c.name,
			float64(made)/el/1e3, float64(sent)/el/1e3)
	}
}

// startCTSwitch runs the variant's switch in ns with ports p1 (OpenFlow
// 1) and p2 (2), its PMD on CPU 1.
func startCTSwitch(t *testing.T, variant string, ns *nstest.Netns, p1, p2 string) *ctSwitch {
	const br = "ctbr0"
	kind, typ, _ := strings.Cut(variant, "-")
	switch kind {
	case "ours":
		if typ == "" {
			typ = "afpacket"
		}
		run := filepath.Join(t.TempDir(), "run")
		t.Setenv("OVS_RUNDIR", run)
		d := newDaemon(t)
		d.netns = ns.Name
		d.start("--pidfile")
		d.vsctl("set", "Open_vSwitch", ".", "other_config:n-pmd=1", "other_config:pmd-cpu-mask=0x2")
		d.vsctl("add-br", br)
		d.vsctl("add-port", br, p1, "--", "type="+typ, "ofport_request=1")
		d.vsctl("add-port", br, p2, "--", "type="+typ, "ofport_request=2")
		return &ctSwitch{
			ofctl: func(args ...string) string {
				return mustOVSTool(t, run, "ovs-ofctl", append([]string{"-O", "OpenFlow13", args[0], br}, args[1:]...)...)
			},
			appctl: func(args ...string) string { return mustOVSTool(t, run, "ovs-appctl", args...) },
		}
	case "ovs":
		o := startOVS(t, ns)
		o.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x2")
		o.vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev", "fail-mode=secure")
		for i, p := range []string{p1, p2} {
			args := []string{"add-port", br, p, "--", "set", "interface", p, fmt.Sprintf("ofport_request=%d", i+1)}
			if typ != "" {
				args = append(args, "type="+typ)
			}
			o.vsctl(args...)
		}
		ctl := o.path("run/ovs-vswitchd.ctl")
		return &ctSwitch{
			ofctl: func(args ...string) string {
				return o.run("ovs-ofctl", append([]string{"-O", "OpenFlow13", args[0], br}, args[1:]...)...)
			},
			appctl: func(args ...string) string { return o.run("ovs-appctl", append([]string{"-t", ctl}, args...)...) },
		}
	}
	t.Fatalf("unknown variant %q", variant)
	return nil
}

package e2e

import (
	"net"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestTunnelBench compares our VXLAN port with the Linux kernel's (a
// vxlan device in a Linux bridge) on host A, towards the same receiver on
// host B (a kernel vxlan device): 64-byte UDP from a workload on A (a
// packet socket flood, 64 flows), the rate host B's vxlan device
// receives, iperf3 TCP from the workload to host B, and ping RTT
// percentiles. Only one switch runs at a time. It
// prints, never asserts, and runs only with VSWITCH_TUNNEL_BENCH=1:
//
//	VSWITCH_TUNNEL_BENCH=1 go test -count=1 -v -run TestTunnelBench ./e2e/
func TestTunnelBench(t *testing.T) {
	if os.Getenv("VSWITCH_TUNNEL_BENCH") == "" {
		t.Skip("set VSWITCH_TUNNEL_BENCH=1 to run")
	}
	secs := 5
	if s, err := strconv.Atoi(os.Getenv("VSWITCH_TUNNEL_BENCH_SECS")); err == nil && s > 0 {
		secs = s
	}
	for _, variant := range []string{"ours", "kernel", "ours-socket-send"} {
		t.Run(variant, func(t *testing.T) {
			a, b := twoUnderlayHosts(t)
			w := newWorkload(t, a, "198.19.40.1")
			vxb := kernelVXLAN(t, b, b.ip4, a.ip4, "198.19.40.2")
			var d *daemon
			switch variant {
			case "ours", "ours-socket-send":
				var opts []string
				if variant == "ours-socket-send" {
					// The UDP socket send path: df_default=false.
					opts = append(opts, "df_default=false")
				}
				d = hostSwitch(t, a, w, "vxlan", b.ip4, append(opts, "key=100")...)
				d.vsctl("set", "Open_vSwitch", ".", "other_config:pmd-sleep-max=0")
			case "kernel":
				br := nstest.Name("kbr")
				a.ns.Run(t, "ip", "link", "add", br, "type", "bridge")
				vxa := kernelVXLAN(t, a, a.ip4, b.ip4, "")
				for _, dev := range []string{vxa, w.port} {
					a.ns.Run(t, "ip", "link", "set", dev, "master", br)
				}
				a.ns.Run(t, "ip", "link", "set", br, "up")
			}
			// Host B computes its checksums (see TestVXLANKernelInterop).
			b.ns.Run(t, "ethtool", "-K", b.dev, "tx", "off")
			nstest.Ping(t, w.ns, "198.19.40.2")
			tcp := nstest.IperfTCP(t, w.ns, b.ns, "198.19.40.2", secs)

			rtts := pingRTTs(t, w.ns, "198.19.40.2", 200)
			mac := linkMAC(t, b.ns, vxb)
			src := linkMAC(t, w.ns, w.dev)
			var frames [][]byte
			for i := range 64 {
				frames = append(frames, nstest.UDPFrame(mac, src, net.ParseIP("198.19.40.1"), net.ParseIP("198.19.40.2"), uint16(10000+i), 9))
			}
			fd := nstest.PacketSocket(t, w.ns, w.dev, nstest.SocketOptions{})
			before := nstest.Counter(t, b.ns, vxb, "rx_packets")
			// VSWITCH_TUNNEL_BENCH_PERF=FILE profiles our switch during the
			// flood (perf record -e cpu-clock: no PMU needed).
			if out := os.Getenv("VSWITCH_TUNNEL_BENCH_PERF"); out != "" && d != nil {
				perf := exec.Command("perf", "record", "-e", "cpu-clock", "-g", "-o", out+"."+variant,
					"-p", strconv.Itoa(d.cmd.Process.Pid), "--", "sleep", strconv.Itoa(max(secs-1, 1)))
				if err := perf.Start(); err == nil {
					defer perf.Wait()
				}
			}
			start := time.Now()
			sent := nstest.Flood(fd, frames, time.Duration(secs)*time.Second, nil)
			el := time.Since(start).Seconds()
			time.Sleep(200 * time.Millisecond) // let queues drain
			got := nstest.Counter(t, b.ns, vxb, "rx_packets") - before
			load, _ := os.ReadFile("/proc/loadavg")
			if os.Getenv("VSWITCH_TUNNEL_BENCH_DEBUG") != "" {
				if d != nil {
					t.Logf("%s\n%s", d.vsctl("dump-ports", "br0"), d.vsctl("pmd-stats-show"))
				}
				for _, c := range []string{"rx_packets", "rx_dropped"} {
					t.Logf("B %s %s=%d, underlay %s=%d", vxb, c, nstest.Counter(t, b.ns, vxb, c), c, nstest.Counter(t, b.ns, b.dev, c))
				}
				sn, _ := b.ns.Output("cat", "/proc/net/softnet_stat")
				t.Logf("softnet_stat:\n%s", sn)
			}
			t.Logf("%-17s offered %.3f Mpps, received %.3f Mpps (%.1f%% loss); TCP %.2f Gbit/s; ping RTT p50 %.3f ms p99 %.3f ms; loadavg %s",
				variant, float64(sent)/el/1e6, float64(got)/el/1e6, 100*(1-float64(got)/float64(max(sent, 1))),
				tcp/1e9, pct(rtts, 50), pct(rtts, 99), strings.Fields(string(load))[0])
		})
	}
}

var rttRE = regexp.MustCompile(`time=([0-9.]+) ms`)

// pingRTTs pings n times, 5 ms apart, and returns the RTTs in ms.
func pingRTTs(t *testing.T, ns *nstest.Netns, ip string, n int) []float64 {
	out, _ := ns.Output("ping", "-c", strconv.Itoa(n), "-i", "0.005", "-W", "1", ip)
	var r []float64
	for _, m := range rttRE.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		r = append(r, v)
	}
	slices.Sort(r)
	return r
}

func pct(s []float64, p int) float64 {
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

func linkMAC(t *testing.T, ns *nstest.Netns, dev string) net.HardwareAddr {
	t.Helper()
	out := ns.Run(t, "cat", "/sys/class/net/"+dev+"/address")
	mac, err := net.ParseMAC(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	return mac
}

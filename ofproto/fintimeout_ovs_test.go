package ofproto

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// tcpFlagsFrame is checkLenFrame (100 bytes) made TCP with flags, to
// port dport.
func tcpFlagsFrame(flags byte, dport uint16, idx uint32) []byte {
	f := checkLenFrame(100, 0, dport, idx)
	f[23] = 6 // IPv4 protocol
	fixIPv4Checksum(f[14:34])
	tcp := f[34:]
	tcp[12] = 0x50 // data offset 5
	tcp[13] = flags
	tcp[14], tcp[15] = 0xff, 0xff // window; the checksum is not checked
	return f
}

// TestDifferentialFinTimeout: fin_timeout(idle_timeout=6) and
// fin_timeout(hard_timeout=8) in Open vSwitch and in this switch,
// installed with the real ovs-ofctl: an ACK leaves the flows' timeouts
// alone, a FIN (or an RST) reduces them, and dump-flows shows the same
// in both; then the flows expire, which is waited for (bounded).
func TestDifferentialFinTimeout(t *testing.T) {
	ovs := startOVSOracle(t)
	ours := newOurDiffBridge(t)
	flows := []string{
		"table=0,priority=10,idle_timeout=60,tcp,tp_dst=53,actions=fin_timeout(idle_timeout=6),output:2",
		"table=0,priority=10,hard_timeout=100,tcp,tp_dst=80,actions=fin_timeout(hard_timeout=8),output:3",
		"table=0,priority=10,idle_timeout=50,tcp,tp_dst=1000,actions=fin_timeout(idle_timeout=70,hard_timeout=80),output:3",
		fmt.Sprintf("table=0,priority=65535,dl_type=0x%04x,actions=output:%d", diffMarkerEth, diffSentinel),
	}
	file := filepath.Join(t.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	switches := []string{ovs.mgmt, "unix:" + ours.sock}
	for _, sw := range switches {
		nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-flows", sw, file)
	}
	dump := func(sw string) []string {
		out, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow13", "--no-stats", "dump-flows", sw, "tcp")
		if err != nil {
			t.Fatalf("dump-flows %s: %v\n%s", sw, err, out)
		}
		var l []string
		for _, s := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if s = strings.TrimSpace(s); s != "" {
				l = append(l, s)
			}
		}
		slices.Sort(l)
		return l
	}
	send := func(round int, pkts ...[]byte) {
		t.Helper()
		want, got := byIndex(ovs.run(pkts, round)), byIndex(ours.run(pkts))
		for i := range pkts {
			if len(want[uint32(i)]) == 0 || !slices.Equal(want[uint32(i)], got[uint32(i)]) {
				t.Errorf("round %d, packet %d:\n ovs  %v\n ours %v", round, i, want[uint32(i)], got[uint32(i)])
			}
		}
	}
	compare := func(when string, want ...string) {
		t.Helper()
		// Open vSwitch reduces the timeouts when its revalidator pushes
		// the megaflow's TCP flags (the FIN took the ACK's megaflow),
		// this switch at once.
		var o, g []string
		nstest.WaitFor(t, 10*time.Second, "Open vSwitch to show what this switch does "+when, func() bool {
			o, g = dump(ovs.mgmt), dump("unix:"+ours.sock)
			return slices.Equal(o, g)
		})
		if !slices.Equal(o, g) {
			t.Errorf("%s: dump-flows\n ovs  %q\n ours %q", when, o, g)
		}
		for _, w := range want {
			if !strings.Contains(strings.Join(g, "\n"), w) {
				t.Errorf("%s: dump-flows lacks %q: %q", when, w, g)
			}
		}
	}
	send(0, tcpFlagsFrame(0x10, 53, 0), tcpFlagsFrame(0x10, 80, 1), tcpFlagsFrame(0x10, 1000, 2)) // ACKs
	compare("after ACKs", "idle_timeout=60,", "hard_timeout=100,", "idle_timeout=50,")
	send(1, tcpFlagsFrame(0x11, 53, 0), tcpFlagsFrame(0x04, 80, 1), tcpFlagsFrame(0x11, 1000, 2)) // FIN+ACK, RST, FIN+ACK
	// The third flow's timeouts are shorter than the fin_timeout's idle
	// one: only its missing hard timeout is set.
	compare("after FIN and RST", "idle_timeout=6,", "hard_timeout=8,", "idle_timeout=50, hard_timeout=80,")
	for i, sw := range switches {
		nstest.WaitFor(t, 20*time.Second, []string{"Open vSwitch", "this switch"}[i]+" to expire the reduced flows", func() bool {
			return len(dump(sw)) == 1
		})
	}
}

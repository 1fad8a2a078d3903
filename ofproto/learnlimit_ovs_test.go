package ofproto

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestDifferentialLearnLimit: learn(limit=2,result_dst=reg0[0]) in Open
// vSwitch and in this switch, installed with the real ovs-ofctl, and the
// same UDP packets from several sources: the first two sources are
// learned (bit 1: port 2), the next are refused (bit 0: port 3), a source
// already learned still reads 1; a flow added by hand with the learned
// cookie counts against the limit of a second learn. Every packet leaves
// the same port with the same bytes, and table 1 dumps back the same.
func TestDifferentialLearnLimit(t *testing.T) {
	ovs := startOVSOracle(t)
	ours := newOurDiffBridge(t)
	flows := []string{
		"table=0,priority=10,udp,tp_dst=53,actions=learn(table=1,priority=5,cookie=0x77,limit=2,result_dst=NXM_NX_REG0[0],eth_type=0x800,NXM_OF_IP_SRC[]),resubmit(,2)",
		"table=0,priority=10,udp,tp_dst=80,actions=learn(table=1,priority=6,cookie=0x78,limit=2,result_dst=NXM_NX_REG0[1],eth_type=0x800,NXM_OF_IP_SRC[]),resubmit(,3)",
		"table=1,priority=1,cookie=0x78,ip,nw_dst=198.18.9.9,actions=drop",
		"table=2,priority=10,reg0=1,actions=output:2",
		"table=2,priority=5,actions=output:3",
		"table=3,priority=10,ip,reg0=2,actions=mod_nw_tos:4,output:2",
		"table=3,priority=5,actions=output:3",
		fmt.Sprintf("table=0,priority=65535,dl_type=0x%04x,actions=output:%d", diffMarkerEth, diffSentinel),
	}
	file := filepath.Join(t.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sw := range []string{ovs.mgmt, "unix:" + ours.sock} {
		nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "add-flows", sw, file)
	}
	srcs := []byte{1, 2, 3, 1, 4, 2, 3}
	var pkts [][]byte
	for _, s := range srcs {
		for _, dport := range []uint16{53, 80} {
			f := checkLenFrame(100, 0, dport, uint32(len(pkts)))
			f[29] = s // the last byte of the IPv4 source 198.18.0.s
			fixIPv4Checksum(f[14:34])
			pkts = append(pkts, f)
		}
	}
	want, got := byIndex(ovs.run(pkts, 0)), byIndex(ours.run(pkts))
	for i := range pkts {
		idx := uint32(i)
		if len(want[idx]) == 0 {
			t.Errorf("packet %d (source %d): Open vSwitch sent nothing", i, srcs[i/2])
		}
		if !slices.Equal(want[idx], got[idx]) {
			t.Errorf("packet %d (source %d, %x):\n ovs  %v\n ours %v", i, srcs[i/2], pkts[i], want[idx], got[idx])
		}
	}
	dump := func(sw string) []string {
		out, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", sw, "table=1")
		if err != nil {
			t.Fatalf("dump-flows %s: %v\n%s", sw, err, out)
		}
		l := strings.Split(strings.TrimSpace(string(out)), "\n")
		for i := range l {
			l[i] = strings.TrimSpace(l[i])
		}
		slices.Sort(l)
		return l
	}
	if w, g := dump(ovs.mgmt), dump("unix:"+ours.sock); !slices.Equal(w, g) || len(g) != 4 {
		t.Errorf("table 1:\n ovs  %q\n ours %q", w, g)
	}
}

// fixIPv4Checksum recomputes the checksum of the 20-byte IPv4 header h.
func fixIPv4Checksum(h []byte) {
	h[10], h[11] = 0, 0
	var sum uint32
	for j := 0; j < 20; j += 2 {
		sum += uint32(h[j])<<8 | uint32(h[j+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	h[10], h[11] = byte(^sum>>8), byte(^sum)
}

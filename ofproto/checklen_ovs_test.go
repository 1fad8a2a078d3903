package ofproto

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// checkLenFrame is an Ethernet/IPv4/UDP frame to UDP port dport of n
// bytes in all (with a VLAN tag of vid when not 0), or, when n is below
// 60, a datagram that ends at n padded to 60 bytes: what check_pkt_larger
// compares is the frame without that padding. It carries idx where
// frameIndex finds it.
func checkLenFrame(n int, vid uint16, dport uint16, idx uint32) []byte {
	f := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1}
	if vid != 0 {
		f = append(f, 0x81, 0x00, byte(vid>>8), byte(vid))
	}
	f = append(f, 0x08, 0x00)
	ipLen := n - len(f)
	iph := []byte{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2}
	binary.BigEndian.PutUint16(iph[2:], uint16(ipLen))
	var sum uint32
	for j := 0; j < 20; j += 2 {
		sum += uint32(binary.BigEndian.Uint16(iph[j:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(iph[10:], ^uint16(sum))
	f = append(f, iph...)
	udp := []byte{0x03, 0xe8, byte(dport >> 8), byte(dport), 0, 0, 0, 0}
	binary.BigEndian.PutUint16(udp[4:], uint16(ipLen-20))
	f = append(f, udp...)
	f = append(f, make([]byte, ipLen-20-8-4)...)
	f = binary.BigEndian.AppendUint32(f, idx)
	if len(f) < 60 {
		f = append(f, make([]byte, 60-len(f))...)
	}
	return f
}

// TestDifferentialCheckPktLarger runs hand-written check_pkt_larger
// pipelines through Open vSwitch and this switch with packets just under,
// at and just over each size: OVN's gateway MTU shape (the bit matched by
// a later table), the bit read back by a move, a check inside a resubmit
// whose caller goes on, one inside a clone (OVN's patch from a switch to
// a router), VLAN-tagged frames (the tag counts) and short datagrams in
// padded minimum-size frames (the padding does not).
func TestDifferentialCheckPktLarger(t *testing.T) {
	ovs := startOVSOracle(t)
	ours := newOurDiffBridge(t)
	flows := []string{
		// udp dst 53: OVN's shape, reg9[1] = check_pkt_larger(200); next.
		"table=0,priority=10,udp,tp_dst=53,actions=check_pkt_larger(200)->NXM_NX_REG9[1],resubmit(,1)",
		"table=1,priority=10,ip,reg9=0x2/0x2,actions=mod_nw_tos:8,output:2",
		"table=1,priority=5,actions=output:3",
		// udp dst 80: the bit moved into a packet field; the check is in
		// a resubmitted table whose caller then outputs to 3 itself.
		"table=0,priority=10,udp,tp_dst=80,actions=set_field:5->reg3,resubmit(,2),mod_dl_dst:02:00:00:00:00:03,output:3",
		"table=2,priority=10,actions=check_pkt_larger(100)->NXM_NX_REG3[4],resubmit(,3),output:2",
		"table=3,priority=10,ip,reg3=0x15,actions=move:NXM_NX_REG3[4]->NXM_OF_ETH_SRC[8]",
		"table=3,priority=5,ip,reg3=5,actions=mod_nw_tos:4",
		// udp dst 1000: a small threshold, for padded short frames.
		"table=0,priority=10,udp,tp_dst=1000,actions=check_pkt_larger(50)->NXM_NX_REG0[0],goto_table:4",
		"table=4,priority=10,reg0=1,actions=output:2",
		"table=4,priority=5,actions=output:3",
		// udp dst 2000: OVN's way into a router pipeline, a clone around
		// the resubmit (the packet goes on after it unchanged).
		"table=0,priority=10,udp,tp_dst=2000,actions=clone(mod_dl_src:02:00:00:00:00:07,resubmit(,5)),output:3",
		"table=5,priority=10,actions=check_pkt_larger(100)->NXM_NX_REG4[0],resubmit(,6)",
		"table=6,priority=10,ip,reg4=1,actions=mod_nw_tos:16,output:2",
		"table=6,priority=5,actions=output:2",
		fmt.Sprintf("table=0,priority=65535,dl_type=0x%04x,actions=output:%d", diffMarkerEth, diffSentinel),
	}
	file := filepath.Join(t.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "add-flows", ovs.mgmt, file)
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "add-flows", "unix:"+ours.sock, file)

	// The flows dump back from this switch as Open vSwitch prints them.
	dump := func(sw string) []string {
		out, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow15", "--no-stats", "dump-flows", sw)
		if err != nil {
			t.Fatalf("dump-flows %s: %v\n%s", sw, err, out)
		}
		var l []string
		for _, s := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.Contains(s, "check_pkt_larger") {
				l = append(l, strings.TrimSpace(s))
			}
		}
		slices.Sort(l)
		return l
	}
	if want, got := dump(ovs.mgmt), dump("unix:"+ours.sock); !slices.Equal(want, got) || len(got) != 4 {
		t.Errorf("dump-flows:\n ovs  %q\n ours %q", want, got)
	}

	type pk struct {
		n     int
		vid   uint16
		dport uint16
	}
	var cases []pk
	for _, n := range []int{199, 200, 201, 1514} {
		cases = append(cases, pk{n, 0, 53}, pk{n, 7, 53})
	}
	for _, n := range []int{99, 100, 101} {
		cases = append(cases, pk{n, 0, 80}, pk{n, 7, 80})
	}
	for _, n := range []int{99, 100, 101} {
		cases = append(cases, pk{n, 0, 2000}, pk{n, 7, 2000})
	}
	for _, n := range []int{46, 50, 51, 59, 60, 61} {
		cases = append(cases, pk{n, 0, 1000})
	}
	var pkts [][]byte
	for i, c := range cases {
		pkts = append(pkts, checkLenFrame(c.n, c.vid, c.dport, uint32(i)))
	}
	// Twice: the second round meets the megaflows the first installed.
	for round := range 2 {
		want, got := byIndex(ovs.run(pkts, round)), byIndex(ours.run(pkts))
		for i, c := range cases {
			idx := uint32(i)
			if len(want[idx]) == 0 {
				t.Errorf("round %d, %d bytes (vid %d) to port %d: Open vSwitch sent nothing", round, c.n, c.vid, c.dport)
			}
			if !slices.Equal(want[idx], got[idx]) {
				t.Errorf("round %d, %d bytes (vid %d) to port %d (%x):\n ovs  %v\n ours %v", round, c.n, c.vid, c.dport, pkts[i], want[idx], got[idx])
			}
		}
	}
}

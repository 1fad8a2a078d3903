package ofproto

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestOvsOfctlConjunction: a conjunctive match as OVN writes its ACLs
// (source address in a set, destination port in another, then conj_id),
// installed with the real ovs-ofctl: a packet matching one clause of each
// dimension takes the conj_id flow; one missing a dimension falls to the
// lower-priority flow; a better ordinary flow beats the conjunction. Each
// packet in turn, so the megaflows must keep them apart.
func TestOvsOfctlConjunction(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	for _, f := range []string{
		"priority=10,ip,nw_src=198.18.0.1,actions=conjunction(7,1/2)",
		"priority=10,ip,nw_src=198.18.0.9,actions=conjunction(7,1/2)",
		"priority=10,udp,tp_dst=2000,actions=conjunction(7,2/2)",
		"priority=10,udp,tp_dst=2001,actions=conjunction(7,2/2)",
		"priority=10,conj_id=7,ip,actions=output:2",
		"priority=20,ip,nw_src=198.18.0.9,nw_dst=198.18.0.99,actions=drop",
		"priority=1,actions=drop",
	} {
		ovsOfctlIn(t, "OpenFlow13", "add-flow", target, f)
	}
	udp := func(src, dst string, dport uint16) []byte {
		return nstest.UDPFrame(mac2, mac1, net.ParseIP(src), net.ParseIP(dst), 1000, dport)
	}
	for round := 0; round < 2; round++ { // the second round runs on installed megaflows
		for _, c := range []struct {
			name string
			f    []byte
			want int
		}{
			{"both dimensions", udp("198.18.0.1", "198.18.0.2", 2000), 1},
			{"the other members", udp("198.18.0.9", "198.18.0.2", 2001), 1},
			{"port in no clause", udp("198.18.0.1", "198.18.0.2", 2002), 0},
			{"source in no clause", udp("198.18.0.5", "198.18.0.2", 2000), 0},
			{"a better ordinary flow", udp("198.18.0.9", "198.18.0.99", 2000), 0},
		} {
			if got := len(mb.forward(mb.p1, mb.p2, c.f)); got != c.want {
				t.Errorf("round %d, %s: %d frames on port 2, want %d", round, c.name, got, c.want)
			}
		}
	}
}

// TestOvsOfctlSelectionMethod: the select groups OVN's load balancers
// install (OpenFlow 1.5, selection_method=dp_hash, or hash over fields)
// are accepted from the real ovs-ofctl, forward, and are kept.
func TestOvsOfctlSelectionMethod(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	ovsOfctlIn(t, "OpenFlow15", "add-group", target,
		"group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=output:2")
	ovsOfctlIn(t, "OpenFlow15", "add-group", target,
		"group_id=2,type=select,selection_method=hash,fields(ip_src,udp_dst),bucket=bucket_id:0,weight:100,actions=output:2")
	for g := 1; g <= 2; g++ {
		ovsOfctlIn(t, "OpenFlow15", "add-flow", target, "in_port=1,actions=group:"+strconv.Itoa(g))
		if n := mb.forward(mb.p1, mb.p2, frame()); len(n) != 1 {
			t.Fatalf("group %d: %d frames on port 2", g, len(n))
		}
	}
	var sels []string
	for _, d := range mb.br.Groups().Desc() {
		if d.Selection != nil {
			sels = append(sels, d.Selection.Method)
		}
	}
	if len(sels) != 2 || sels[0] != "dp_hash" || sels[1] != "hash" {
		t.Fatalf("groups keep selection methods %v", sels)
	}
	// The group description says them back in 1.5 (Open vSwitch's
	// selection_method property), as ovs-ofctl prints Open vSwitch's.
	dump := ovsOfctlIn(t, "OpenFlow15", "dump-groups", target)
	for _, w := range []string{
		"group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=output:2",
		"group_id=2,type=select,selection_method=hash,fields(ip_src,udp_dst),bucket=bucket_id:0,weight:100,actions=output:2",
	} {
		if !strings.Contains(dump, w) {
			t.Errorf("dump-groups lacks %q:\n%s", w, dump)
		}
	}
	// A 1.3 peer has no group properties: the same groups without.
	if dump := ovsOfctlIn(t, "OpenFlow13", "dump-groups", target); strings.Contains(dump, "selection_method") || !strings.Contains(dump, "group_id=2,type=select,bucket=weight:100,actions=output:2") {
		t.Errorf("1.3 dump-groups:\n%s", dump)
	}
}

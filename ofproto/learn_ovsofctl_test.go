package ofproto

import (
	"net"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestOvsOfctlLearn runs Open vSwitch's MAC-learning recipe, installed
// with the real ovs-ofctl: each packet teaches table 1 where its source
// lives, so the reply goes to one port, and the first direction, unknown
// at first, is known once the reply has been seen (the megaflow that
// dropped it is gone). dump-flows shows the learned flows as ovs-ofctl
// prints Open vSwitch's; deleting the learning flow deletes what it
// learned (delete_learned).
func TestOvsOfctlLearn(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	ovsOfctlIn(t, "OpenFlow13", "add-flow", target,
		"table=0,actions=learn(table=1,hard_timeout=60,delete_learned,cookie=0x77,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,1)")
	ovsOfctlIn(t, "OpenFlow13", "add-flow", target, "table=1,priority=0,actions=drop")
	to2 := frame() // mac1 -> mac2
	to1 := nstest.UDPFrame(mac1, mac2, net.IPv4(198, 18, 0, 2), net.IPv4(198, 18, 0, 1), 2000, 1000)
	if got := mb.forward(mb.p1, mb.p2, to2); len(got) != 0 {
		t.Fatalf("mac2 not learned yet, but %d frames reached port 2", len(got))
	}
	if got := mb.forward(mb.p2, mb.p1, to1); len(got) != 1 {
		t.Fatalf("mac1 learned on port 1, but %d frames reached it", len(got))
	}
	if got := mb.forward(mb.p1, mb.p2, to2); len(got) != 1 {
		t.Fatalf("mac2 learned on port 2, but %d frames reached it", len(got))
	}
	dump := ovsOfctlIn(t, "OpenFlow13", "dump-flows", target, "table=1")
	for _, w := range []string{
		"cookie=0x77, duration=", "table=1, n_packets=1, n_bytes=", "hard_timeout=60, dl_dst=02:00:00:00:00:01 actions=output:1",
		"hard_timeout=60, dl_dst=02:00:00:00:00:02 actions=output:2",
	} {
		if !strings.Contains(dump, w) {
			t.Errorf("dump-flows table=1 lacks %q:\n%s", w, dump)
		}
	}
	if n := mb.br.LearnFailures(); n != 0 {
		t.Errorf("%d learned flows refused", n)
	}
	ovsOfctlIn(t, "OpenFlow13", "del-flows", target, "table=0")
	dump = ovsOfctlIn(t, "OpenFlow13", "dump-flows", target)
	if strings.Contains(dump, "cookie=0x77") || !strings.Contains(dump, "priority=0 actions=drop") {
		t.Errorf("after deleting the learning flow, its learned flows remain (or the rest went):\n%s", dump)
	}
}

package ofproto

import (
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// unreachable is a controller target nothing listens on.
const unreachable = "tcp:127.0.0.1:1"

var normalLines = []string{"priority=0 actions=NORMAL"}

func TestStandaloneWithoutControllerLearns(t *testing.T) {
	tb := newTestBridgeWith(t, func(*BridgeConfig) {})
	if got := savedFlows(tb.br); !reflect.DeepEqual(got, normalLines) {
		t.Fatalf("standalone bridge flows %q, want %q", got, normalLines)
	}
	p3 := ring.New("r3", 1, 1, 64)
	if err := tb.br.AddPort(3, p3); err != nil {
		t.Fatal(err)
	}
	// Unknown destination: flooded to 2 and 3; the answer from 2 goes
	// to the learned port 1 only.
	tb.inject(tb.p1, frame())
	if n2, n3 := len(drain(tb.p2)), len(drain(p3)); n2 != 1 || n3 != 1 {
		t.Fatalf("flood: port 2 %d, port 3 %d", n2, n3)
	}
	reply := nstest.UDPFrame(mac1, mac2, net.IPv4(198, 18, 0, 2), net.IPv4(198, 18, 0, 1), 2000, 1000)
	tb.inject(tb.p2, reply)
	if n1, n3 := len(drain(tb.p1)), len(drain(p3)); n1 != 1 || n3 != 0 {
		t.Fatalf("learned unicast: port 1 %d, port 3 %d", n1, n3)
	}
	fdb := tb.br.FDB()
	if len(fdb) != 2 || fdb[0].Port != 1 || fdb[1].Port != 2 {
		t.Fatalf("FDB %+v", fdb)
	}
	// The flow is visible to OpenFlow and can be deleted like any other.
	fs := tb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}).(*ofpwire.FlowStatsReply)
	if len(fs.Flows) != 1 || fs.Flows[0].Priority != 0 || fs.Flows[0].PacketCount != 2 {
		t.Fatalf("flow stats %+v", fs.Flows)
	}
	tb.c.request(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll), BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatalf("forwarded %d frames after del-flows", len(got))
	}
	if tb.br.FailOpen() {
		t.Fatal("a bridge without controllers failed open")
	}
}

func TestFailOpenAfterDelayWithUnreachableController(t *testing.T) {
	const delay = time.Second
	start := time.Now()
	tb := newTestBridgeWith(t, func(c *BridgeConfig) {
		c.Targets = []string{unreachable}
		c.FailOpenDelay = delay
	})
	if got := savedFlows(tb.br); len(got) != 0 {
		t.Fatalf("bridge with a controller target has flows %q", got)
	}
	got := tb.forward(tb.p1, tb.p2, frame())
	if time.Since(start) < delay && (len(got) != 0 || tb.br.FailOpen()) {
		t.Fatalf("forwarded %d frames before the fail-open delay", len(got))
	}
	nstest.WaitFor(t, 10*time.Second, "fail-open", tb.br.FailOpen)
	if time.Since(start) < delay {
		t.Fatalf("failed open after %v, before the %v delay", time.Since(start), delay)
	}
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 1 {
		t.Fatalf("failed open, forwarded %d frames", len(got))
	}
	// Hidden: the tables stay empty.
	if got := savedFlows(tb.br); len(got) != 0 {
		t.Fatalf("fail-open shows flows %q", got)
	}
	cs := tb.br.Controllers()
	if len(cs) != 1 || cs[0].Target != unreachable || cs[0].State == ofconn.StateActive {
		t.Fatalf("controllers %+v", cs)
	}
}

func TestFailOpenEndsWhenControllerConnects(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	tb := newTestBridgeWith(t, func(c *BridgeConfig) {
		c.Targets = []string{"ptcp:0:127.0.0.1"}
		c.FailOpenDelay = 50 * time.Millisecond
		c.Conn.OnControllers = func(n int) { mu.Lock(); seen = append(seen, n); mu.Unlock() }
	})
	nstest.WaitFor(t, 10*time.Second, "fail-open", tb.br.FailOpen)
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 1 {
		t.Fatalf("failed open, forwarded %d frames", len(got))
	}
	var addr string
	for _, s := range tb.br.Controllers() {
		if s.State == ofconn.StateListening {
			addr = s.LocalAddr
		}
	}
	if addr == "" {
		t.Fatalf("no listening controller target in %+v", tb.br.Controllers())
	}
	ctl := dial(t, "tcp", addr)
	nstest.WaitFor(t, 10*time.Second, "fail-open to end", func() bool { return !tb.br.FailOpen() })
	// Back on the (empty) tables: the packet is dropped.
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatalf("controller connected, still forwarded %d frames", len(got))
	}
	// The caller's OnControllers is chained.
	nstest.WaitFor(t, 10*time.Second, "OnControllers(1)", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) > 0 && seen[len(seen)-1] == 1
	})
	// The controller leaves: fail-open again after the delay.
	ctl.nc.Close()
	nstest.WaitFor(t, 10*time.Second, "fail-open again", tb.br.FailOpen)
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 1 {
		t.Fatalf("failed open again, forwarded %d frames", len(got))
	}
}

func TestSecureNeverForwardsUnknownTraffic(t *testing.T) {
	tb := newTestBridgeWith(t, func(c *BridgeConfig) {
		c.FailMode = FailSecure
		c.Targets = []string{unreachable}
		c.FailOpenDelay = 20 * time.Millisecond
	})
	time.Sleep(200 * time.Millisecond) // ten fail-open delays
	if tb.br.FailOpen() {
		t.Fatal("secure bridge failed open")
	}
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatalf("secure bridge forwarded %d frames", len(got))
	}
	if got := savedFlows(tb.br); len(got) != 0 {
		t.Fatalf("secure bridge has flows %q", got)
	}
	// Its flows still work.
	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: 2}))
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 1 {
		t.Fatalf("flow forwarded %d frames", len(got))
	}
}

func TestSetFailModeAndControllersFlushLikeOVS(t *testing.T) {
	tb := newTestBridgeWith(t, func(*BridgeConfig) {})
	user := outputFlow(1, &ofpwire.ActionOutput{Port: 2})
	tb.c.request(user)
	if n := len(savedFlows(tb.br)); n != 2 {
		t.Fatalf("%d flows, want the NORMAL flow and the user's", n)
	}
	if err := tb.br.SetFailMode("bogus"); err == nil {
		t.Fatal("bogus fail mode accepted")
	}
	if err := tb.br.SetFailMode(FailSecure); err != nil {
		t.Fatal(err)
	}
	if got := savedFlows(tb.br); len(got) != 0 || tb.br.FailMode() != FailSecure {
		t.Fatalf("secure without controllers: flows %q, mode %s", got, tb.br.FailMode())
	}
	if err := tb.br.SetFailMode(""); err != nil {
		t.Fatal(err)
	}
	if got := savedFlows(tb.br); !reflect.DeepEqual(got, normalLines) {
		t.Fatalf("standalone again: flows %q", got)
	}
	// First controller: flushed, no NORMAL flow; the user's flows added
	// afterwards survive a change of controller.
	if err := tb.br.SetControllers([]string{unreachable}); err != nil {
		t.Fatal(err)
	}
	if got := savedFlows(tb.br); len(got) != 0 {
		t.Fatalf("with a controller: flows %q", got)
	}
	tb.c.request(user)
	if err := tb.br.SetControllers([]string{"tcp:127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	if n := len(savedFlows(tb.br)); n != 1 {
		t.Fatalf("changing controllers left %d flows, want 1", n)
	}
	// With controllers, a fail-mode change keeps the flows.
	if err := tb.br.SetFailMode(FailSecure); err != nil {
		t.Fatal(err)
	}
	if n := len(savedFlows(tb.br)); n != 1 {
		t.Fatalf("fail-mode change with controllers left %d flows", n)
	}
	if err := tb.br.SetFailMode(FailStandalone); err != nil {
		t.Fatal(err)
	}
	// Last controller gone: flushed, NORMAL flow back.
	if err := tb.br.SetControllers(nil); err != nil {
		t.Fatal(err)
	}
	if got := savedFlows(tb.br); !reflect.DeepEqual(got, normalLines) {
		t.Fatalf("no controller: flows %q", got)
	}
	if tb.br.FailOpen() {
		t.Fatal("failed open without controllers")
	}
}

func TestControllersChangedThroughManagerAreNoticed(t *testing.T) {
	tb := newTestBridgeWith(t, func(c *BridgeConfig) { c.FailOpenDelay = 50 * time.Millisecond })
	if err := tb.br.Manager().SetTargets([]string{unreachable}); err != nil {
		t.Fatal(err)
	}
	// Housekeeping sees the controller: the NORMAL flow goes, and the
	// bridge fails open once the delay has passed.
	nstest.WaitFor(t, 10*time.Second, "NORMAL flow flushed", func() bool { return len(savedFlows(tb.br)) == 0 })
	nstest.WaitFor(t, 10*time.Second, "fail-open", tb.br.FailOpen)
	if err := tb.br.Manager().SetTargets(nil); err != nil {
		t.Fatal(err)
	}
	// The flows and the fail-open state change under the bridge's lock,
	// one after the other: wait for both.
	nstest.WaitFor(t, 10*time.Second, "NORMAL flow back and fail-open left", func() bool {
		return reflect.DeepEqual(savedFlows(tb.br), normalLines) && !tb.br.FailOpen()
	})
}

package ofconn

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// emptyBridge answers the read requests of ovs-ofctl show and dump-flows
// as a switch without ports or flows would.
func emptyBridge() *recHandler {
	return &recHandler{
		features: ofpwire.FeaturesReply{DatapathID: 0xabcdef, NumBuffers: 0, NumTables: 254,
			Capabilities: ofpwire.CapabilityFlowStats | ofpwire.CapabilityTableStats | ofpwire.CapabilityPortStats},
		fn: func(c *Conn, xid uint32, msg ofpwire.Message) error {
			mp, ok := msg.(*ofpwire.MultipartRequest)
			if !ok {
				return &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadType}
			}
			switch mp.Body.(type) {
			case *ofpwire.PortDescRequest:
				return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.PortDescReply{}})
			case *ofpwire.FlowStatsRequest:
				return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.FlowStatsReply{}})
			}
			return &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadMultipart}
		},
	}
}

func runOvsOfctl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestOvsOfctl(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	path := sockPath(t, "br0.mgmt")
	var mu sync.Mutex
	seen := map[ofpwire.MsgType]int{}
	m := startManager(t, Config{Handler: emptyBridge(), Observe: func(c *Conn, h ofpwire.Header) {
		mu.Lock()
		seen[h.Type]++
		mu.Unlock()
	}})
	if err := m.SetManagementTargets([]string{"punix:" + path}); err != nil {
		t.Fatal(err)
	}
	listenAddr(t, m, "punix:"+path)

	out := runOvsOfctl(t, "-O", "OpenFlow13", "show", "unix:"+path)
	if !strings.Contains(out, "OFPT_FEATURES_REPLY (OF1.3)") || !strings.Contains(out, "dpid:0000000000abcdef") ||
		!strings.Contains(out, "n_tables:254") || !strings.Contains(out, "OFPT_GET_CONFIG_REPLY (OF1.3)") ||
		!strings.Contains(out, "miss_send_len=128") {
		t.Fatalf("show output:\n%s", out)
	}
	// A bare socket path is how ovs-ofctl is pointed at a bridge socket.
	out = runOvsOfctl(t, "-O", "OpenFlow13", "dump-flows", path)
	if !strings.Contains(out, "OFPST_FLOW reply (OF1.3)") {
		t.Fatalf("dump-flows output:\n%s", out)
	}
	// Plain ovs-ofctl speaks OpenFlow 1.0, which the switch speaks too.
	out = runOvsOfctl(t, "show", "unix:"+path)
	if !strings.Contains(out, "OFPT_FEATURES_REPLY (xid=") || !strings.Contains(out, "dpid:0000000000abcdef") {
		t.Fatalf("OpenFlow10 show output:\n%s", out)
	}
	// ovs-ofctl's hello offers only the -O version: 1.1 is refused with a
	// readable message.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bad, err := exec.CommandContext(ctx, "ovs-ofctl", "-O", "OpenFlow11", "show", "unix:"+path).CombinedOutput()
	if err == nil || !strings.Contains(string(bad), "version negotiation failed") {
		t.Fatalf("OpenFlow11 ovs-ofctl: %v\n%s", err, bad)
	}
	mu.Lock()
	ok := seen[ofpwire.TypeFeaturesRequest] >= 1 && seen[ofpwire.TypeMultipartRequest] >= 2 && seen[ofpwire.TypeGetConfigRequest] >= 1
	report := fmt.Sprint(seen)
	mu.Unlock()
	if !ok {
		t.Fatalf("requests seen: %s", report)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(m.Status()) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("ovs-ofctl connections still open: %+v", m.Status())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestOvsTestcontroller(t *testing.T) {
	nstest.RequireTool(t, "ovs-testcontroller")
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ovs-testcontroller", "-O", "OpenFlow13", "-vconsole:off",
		"--unixctl="+sockPath(t, "tc.ctl"), "ptcp:"+strconv.Itoa(port)+":127.0.0.1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })

	var mu sync.Mutex
	seen := map[ofpwire.MsgType]int{}
	h := emptyBridge()
	h.fn = func(*Conn, uint32, ofpwire.Message) error { return nil } // accept its flow mods
	m := startManager(t, Config{Handler: h, MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Observe: func(c *Conn, hd ofpwire.Header) {
			mu.Lock()
			seen[hd.Type]++
			mu.Unlock()
		}}, "tcp:127.0.0.1:"+strconv.Itoa(port))
	waitFor(t, "a connection to ovs-testcontroller", m.Connected)
	waitFor(t, "FEATURES_REQUEST", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen[ofpwire.TypeFeaturesRequest] > 0
	})
	waitFor(t, "the features reply to be written", func() bool { return m.Status()[0].MsgsOut >= 2 })
	// Whatever it sends next (ovs-testcontroller installs a table-miss
	// flow) must not break the connection.
	first := m.Status()[0]
	time.Sleep(300 * time.Millisecond)
	if s := m.Status(); len(s) != 1 || s[0].State != StateActive || s[0].ConnectedSince != first.ConnectedSince {
		t.Fatalf("status %+v", s)
	}
	mu.Lock()
	t.Logf("ovs-testcontroller sent %v", seen)
	mu.Unlock()
}

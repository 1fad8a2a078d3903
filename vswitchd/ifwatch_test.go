package vswitchd

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/linkwatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// logBuffer collects a daemon's text log.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// linesWith returns the log lines containing every one of subs.
func (l *logBuffer) linesWith(subs ...string) []string {
	var out []string
next:
	for _, line := range strings.Split(l.String(), "\n") {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		out = append(out, line)
	}
	return out
}

// startLogged starts a daemon whose log the test reads, closed at the end.
func startLogged(t *testing.T) (*Daemon, *logBuffer) {
	t.Helper()
	return startLoggedIn(t, t.TempDir())
}

// startLoggedIn is startLogged on state directory dir.
func startLoggedIn(t *testing.T, dir string) (*Daemon, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	d, err := Start(Options{StateDir: dir, Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	return d, logs
}

// vethPair creates an up veth pair; both ends are deleted when the test
// ends, whatever was done with them meanwhile.
func vethPair(t *testing.T, name, peer string) {
	t.Helper()
	nstest.Run(t, "ip", "link", "add", name, "type", "veth", "peer", "name", peer)
	t.Cleanup(func() { nstest.Output("ip", "link", "del", name) })
	nstest.Run(t, "ip", "link", "set", name, "up")
	nstest.Run(t, "ip", "link", "set", peer, "up")
}

// controller is a minimal OpenFlow controller that records the PORT_STATUS
// messages a bridge sends it.
type controller struct {
	ln     net.Listener
	status chan ofpwire.PortStatus
	done   chan struct{}

	mu     sync.Mutex
	conn   net.Conn
	closed bool
}

func newController(t *testing.T) *controller {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{ln: ln, status: make(chan ofpwire.PortStatus, 64), done: make(chan struct{})}
	go c.serve()
	t.Cleanup(func() {
		ln.Close()
		c.mu.Lock()
		c.closed = true
		if c.conn != nil {
			c.conn.Close()
		}
		c.mu.Unlock()
		<-c.done
	})
	return c
}

// serve takes the switch's connection and reads it until it is closed.
func (c *controller) serve() {
	defer close(c.done)
	conn, err := c.ln.Accept()
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		conn.Close()
		return
	}
	c.conn = conn
	c.mu.Unlock()
	hello, _ := ofpwire.Encode(1, ofpwire.NewHello(ofpwire.Version))
	if _, err := conn.Write(hello); err != nil {
		return
	}
	buf := make([]byte, 1<<16)
	for {
		h, raw, err := ofpwire.ReadMessage(conn, buf)
		if err != nil {
			return
		}
		msg, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		if err != nil {
			continue
		}
		switch m := msg.(type) {
		case *ofpwire.EchoRequest:
			b, _ := ofpwire.Encode(h.Transaction, &ofpwire.EchoReply{Data: m.Data})
			conn.Write(b)
		case *ofpwire.PortStatus:
			select {
			case c.status <- *m:
			default:
			}
		}
	}
}

func (c *controller) target() string { return "tcp:" + c.ln.Addr().String() }

// waitStatus waits for a PORT_STATUS of reason for port no, skipping others.
func (c *controller) waitStatus(t *testing.T, reason ofpwire.PortReason, no uint32) ofpwire.PortStatus {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ps := <-c.status:
			if ps.Reason == reason && uint32(ps.Port.PortNo) == no {
				return ps
			}
		case <-deadline:
			t.Fatalf("no PORT_STATUS reason %v for port %d within 10 s", reason, no)
		}
	}
}

// TestDaemonInterfaceReturns: a port whose veth is deleted stops; when an
// interface of its name appears again (created anew, then renamed to it)
// the port runs again under the same OpenFlow number, the controller hears
// PORT_STATUS ADD, the log says so, and the bridge's other port is left
// alone.
func TestDaemonInterfaceReturns(t *testing.T) {
	nstest.RequireRoot(t)
	port, peer := nstest.Name("vsif"), nstest.Name("vsip")
	other, otherPeer := nstest.Name("vsio"), nstest.Name("vsiq")
	vethPair(t, port, peer)
	vethPair(t, other, otherPeer)
	d, logs := startLogged(t)
	ctl := newController(t)

	mustCall(t, d, "add-br", "br0", "fail_mode=secure")
	mustCall(t, d, "add-port", "br0", other, "type=afpacket")
	mustCall(t, d, "add-port", "br0", port, "type=afpacket")
	mustCall(t, d, "set-controller", "br0", ctl.target())
	nstest.WaitFor(t, 10*time.Second, "the controller to connect", func() bool {
		st := d.controllerStatus(d.store.Get(), "br0")
		return len(st) == 1 && st[0].Connected
	})
	b := d.runningBridge("br0")
	p := b.portByName(port)
	if p == nil {
		t.Fatalf("port %s not running after add-port", port)
	}
	no := p.no
	if no != 2 {
		t.Fatalf("second port's ofport %d, want 2", no)
	}
	otherPort := b.portByName(other)

	gone := func(what string) {
		t.Helper()
		nstest.WaitFor(t, 5*time.Second, "port "+port+" to stop after "+what, func() bool { return b.portByName(port) == nil })
		ctl.waitStatus(t, ofpwire.PortReasonDelete, no)
		if out := mustCall(t, d, "show"); !strings.Contains(out, "error: not running") {
			t.Fatalf("show does not report the stopped port:\n%s", out)
		}
		// The removal itself asks for a check (the interface might be
		// back already); let it pass, so that only the link events of
		// what the test does next can bring the port back.
		nstest.WaitFor(t, 5*time.Second, "the reconciler to settle", d.ifw.idle)
	}
	back := func(what string, restarts int) {
		t.Helper()
		nstest.WaitFor(t, 5*time.Second, "port "+port+" to run again after "+what, func() bool { return b.portByName(port) != nil })
		if got := b.portByName(port).no; got != no {
			t.Fatalf("after %s the port runs as %d, want %d", what, got, no)
		}
		ps := ctl.waitStatus(t, ofpwire.PortReasonAdd, no)
		if ps.Port.Name != port {
			t.Fatalf("PORT_STATUS ADD names %q, want %q", ps.Port.Name, port)
		}
		if !slices.ContainsFunc(b.of.PortDesc(), func(p ofpwire.Port) bool { return uint32(p.PortNo) == no && p.Name == port }) {
			t.Fatalf("port %d not in the port descriptions after %s: %+v", no, what, b.of.PortDesc())
		}
		want := []string{`msg="interface reappeared; port restarted"`, "bridge=br0", "port=" + port, fmt.Sprintf("ofport=%d", no)}
		nstest.WaitFor(t, 5*time.Second, "the restart to be logged", func() bool { return len(logs.linesWith(want...)) == restarts })
		if b.portByName(other) != otherPort {
			t.Fatalf("port %s was reopened when %s came back", other, port)
		}
	}

	nstest.Run(t, "ip", "link", "del", port)
	gone("its veth was deleted")
	vethPair(t, port, peer)
	back("its veth was created again", 1)

	// An interface renamed to the port's name counts as coming back.
	nstest.Run(t, "ip", "link", "del", port)
	gone("its veth was deleted again")
	tmp := nstest.Name("vsit")
	vethPair(t, tmp, peer)
	nstest.Run(t, "ip", "link", "set", tmp, "down")
	nstest.Run(t, "ip", "link", "set", tmp, "name", port)
	nstest.Run(t, "ip", "link", "set", port, "up")
	back("an interface was renamed to its name", 2)

	nstest.WaitFor(t, 5*time.Second, "the database to report ofport "+fmt.Sprint(no), func() bool {
		return strings.TrimSpace(mustCall(t, d, "get", "Interface", port, "ofport")) == fmt.Sprint(no)
	})
}

// TestDaemonRevivalBackoff: a port whose interface is there but which
// cannot open (more AF_PACKET queues than the driver serves, which only a
// hand-edited store holds) is retried after link events, but with a
// growing pause, not at every burst of events.
func TestDaemonRevivalBackoff(t *testing.T) {
	nstest.RequireRoot(t)
	veth := nstest.Name("vsdm")
	vethPair(t, veth, nstest.Name("vsdp"))
	dir := t.TempDir()
	s, err := config.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(func(c *config.Config) error {
		c.Bridges = map[string]*config.Bridge{"br0": {Name: "br0", FailMode: config.FailModeSecure, Ports: map[string]*config.Port{
			veth: {Name: veth, Type: config.PortTypeAFPacket, OFPort: 1, Options: map[string]string{"n_rxq": "65"}},
		}}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	d, logs := startLoggedIn(t, dir)
	failures := func() int { return len(logs.linesWith(`msg="port not restored"`, "port="+veth)) }
	if n := failures(); n != 1 {
		t.Fatalf("%d failures logged at start, want 1", n)
	}
	// A burst of link events every 400 ms (longer than the quiet time)
	// for 3 s: each would be a retry without the pause.
	start := time.Now()
	for mtu := 1400; time.Since(start) < 3*time.Second; mtu++ {
		nstest.Run(t, "ip", "link", "set", veth, "mtu", fmt.Sprint(mtu))
		time.Sleep(400 * time.Millisecond)
	}
	// Start, the check once the watch is up, and a retry after the first
	// pause of 1 s; the second pause (2 s) ends after the events.
	if n := failures(); n < 3 || n > 4 {
		t.Fatalf("%d failures logged over 3 s of link events, want 3 or 4 (start, first check, retries after 1 s and maybe 2 s)", n)
	}
	if d.runningBridge("br0").portByName(veth) != nil {
		t.Fatal("a port of 65 AF_PACKET queues opened")
	}
}

// TestDaemonWithoutInterfaceEvents: when the netlink subscription is
// refused the daemon says so and works on; Close still ends cleanly.
func TestDaemonWithoutInterfaceEvents(t *testing.T) {
	saved := listenLinks
	listenLinks = func(func(linkwatch.Event)) (func(), error) {
		return nil, fmt.Errorf("linkwatch: subscribe: %w", unix.EPERM)
	}
	t.Cleanup(func() { listenLinks = saved })
	d, logs := startLogged(t)
	nstest.WaitFor(t, 5*time.Second, "the refused subscription to be logged", func() bool {
		return len(logs.linesWith("level=WARN", "interface events not followed", "operation not permitted")) == 1
	})
	mustCall(t, d, "add-br", "br0")
	if got := mustCall(t, d, "list-br"); got != "br0\n" {
		t.Fatalf("list-br = %q", got)
	}
	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs without the interface watch")
	}
}

// TestDaemonLinkEventFilter: only new or changed links that a configured
// kernel port names are noted; deletions and other names are not.
func TestDaemonLinkEventFilter(t *testing.T) {
	d := &Daemon{ifw: newIfWatch()}
	d.ifw.names.Store(&map[string][]string{"p1": {"br0"}})
	d.linkEvent(linkwatch.Event{Name: "p1", Removed: true})
	d.linkEvent(linkwatch.Event{Name: "p2"})
	if names, all, _ := d.ifw.take(); len(names) != 0 || all {
		t.Fatalf("noted %v (all %v) for a deletion and an unknown name", names, all)
	}
	select {
	case <-d.ifw.kick:
		t.Fatal("reconciler woken for nothing")
	default:
	}
	d.linkEvent(linkwatch.Event{Name: "p1"})
	d.linkEvent(linkwatch.Event{Name: "p1"})
	if names, _, _ := d.ifw.take(); len(names) != 1 {
		t.Fatalf("noted %v, want p1", names)
	} else if _, ok := names["p1"]; !ok {
		t.Fatalf("noted %v, want p1", names)
	}
	select {
	case <-d.ifw.kick:
	default:
		t.Fatal("reconciler not woken")
	}
}

// TestDaemonPublishesKernelPortNames: only ports whose interface someone
// else creates are watched; tap, internal and vhost-user ports are not.
func TestDaemonPublishesKernelPortNames(t *testing.T) {
	nstest.RequireRoot(t) // tap ports
	d, _ := startLogged(t)
	mustCall(t, d, "add-br", "br0")
	tap := nstest.Name("vstp")
	mustCall(t, d, "add-port", "br0", tap, "type=tap")
	mustCall(t, d, "add-port", "br0", "vhu0", "type=vhostuser")
	names := *d.ifw.names.Load()
	if _, ok := names[tap]; ok {
		t.Fatalf("tap port %s watched: %v", tap, names)
	}
	if _, ok := names["vhu0"]; ok {
		t.Fatalf("vhost-user port watched: %v", names)
	}
	veth, peer := nstest.Name("vsik"), nstest.Name("vsil")
	vethPair(t, veth, peer)
	mustCall(t, d, "add-port", "br0", veth)
	if got := (*d.ifw.names.Load())[veth]; !slices.Equal(got, []string{"br0"}) {
		t.Fatalf("automatic-type port %s watched for bridges %v, want [br0]", veth, got)
	}
	mustCall(t, d, "del-port", "br0", veth)
	if _, ok := (*d.ifw.names.Load())[veth]; ok {
		t.Fatalf("deleted port %s still watched", veth)
	}
}

// TestDaemonDebounce: the reconciler waits for a burst of events to
// pause, but not longer than its limit under events that never pause.
func TestDaemonDebounce(t *testing.T) {
	stop := make(chan struct{})
	kick := make(chan struct{}, 1)

	start := time.Now()
	if !debounce(stop, kick, 50*time.Millisecond, time.Minute) {
		t.Fatal("debounce reported a stop")
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("returned after %v, before the quiet time", el)
	}

	// A 300 ms burst of kicks 10 ms apart holds it: it returns only once quiet
	// has passed since the last kick it took, however the machine's load
	// stretched the gaps (a gap longer than quiet lets it return, as it
	// should). The last kick taken is the last one sent, unless that one
	// is still in the channel.
	var mu sync.Mutex
	var sent []time.Time
	quitBurst, burstDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(burstDone)
		for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
			at := time.Now()
			select {
			case <-quitBurst:
				return
			case kick <- struct{}{}:
				mu.Lock()
				sent = append(sent, at)
				mu.Unlock()
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	const quiet = 150 * time.Millisecond
	debounce(stop, kick, quiet, time.Minute)
	returned := time.Now()
	close(quitBurst)
	<-burstDone
	pending := len(kick)
	if len(sent)-pending < 1 {
		t.Fatal("debounce returned before taking a kick")
	}
	if last := sent[len(sent)-1-pending]; returned.Sub(last) < quiet {
		t.Fatalf("returned %v after the last kick it took, before the quiet time %v", returned.Sub(last), quiet)
	}
	select { // whatever the burst left
	case <-kick:
	default:
	}

	// Events that never pause: the limit ends the wait (a quiet time of a
	// minute leaves the limit as the only way out).
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-quit:
				return
			case kick <- struct{}{}:
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start = time.Now()
	debounce(stop, kick, time.Minute, 300*time.Millisecond)
	el := time.Since(start)
	close(quit)
	wg.Wait()
	if el < 300*time.Millisecond || el > 5*time.Second {
		t.Fatalf("under endless events returned after %v, want the 300 ms limit", el)
	}

	close(stop)
	if debounce(stop, kick, time.Minute, time.Minute) {
		t.Fatal("debounce did not report the stop")
	}
}

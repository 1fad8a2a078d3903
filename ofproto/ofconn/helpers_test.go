package ofconn

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// checkGoroutines fails the test if goroutines started during it are
// still running after every later cleanup (the Manager's Close included).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
		}
	})
}

// startManager creates a Manager that is closed (and checked for leaked
// goroutines) when the test ends.
func startManager(t *testing.T, cfg Config, targets ...string) *Manager {
	t.Helper()
	checkGoroutines(t)
	m := New(cfg)
	t.Cleanup(m.Close)
	if len(targets) > 0 {
		if err := m.SetTargets(targets); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// listenAddr returns the bound address of a passive target's listener.
func listenAddr(t *testing.T, m *Manager, target string) string {
	t.Helper()
	var addr string
	waitFor(t, "listener "+target, func() bool {
		for _, s := range m.Status() {
			if s.Target == target && s.State == StateListening {
				addr = s.LocalAddr
				return true
			}
		}
		return false
	})
	return addr
}

func sockPath(t *testing.T, name string) string {
	return filepath.Join(t.TempDir(), name)
}

// client is a test controller speaking the wire protocol with ofpwire.
type client struct {
	t   *testing.T
	nc  net.Conn
	buf []byte
}

func dialClient(t *testing.T, network, addr string) *client {
	t.Helper()
	nc, err := net.Dial(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	return newClient(t, nc)
}

func newClient(t *testing.T, nc net.Conn) *client {
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, buf: make([]byte, ofpwire.MaxMessageLen)}
}

// connect dials a passive target and completes the handshake.
func connect(t *testing.T, m *Manager, target string) *client {
	t.Helper()
	network := "tcp"
	if strings.HasPrefix(target, "punix:") {
		network = "unix"
	}
	c := dialClient(t, network, listenAddr(t, m, target))
	c.handshake()
	// The switch's HELLO may arrive before it has read ours; an echo
	// round trip makes sure the connection is active on its side too.
	c.echo(0xfffffff0)
	return c
}

func (c *client) send(xid uint32, msg ofpwire.Message) {
	c.t.Helper()
	b, err := ofpwire.Encode(xid, msg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(b)
}

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// recvRaw reads one message, failing the test after a timeout.
func (c *client) recvRaw() (ofpwire.Header, []byte) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, raw, err := ofpwire.ReadMessage(c.nc, c.buf)
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return h, raw
}

// recv reads and decodes one message, answering (and skipping) the
// switch's echo probes.
func (c *client) recv() (ofpwire.Header, ofpwire.Message) {
	c.t.Helper()
	for {
		h, raw := c.recvRaw()
		msg, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		if err != nil {
			c.t.Fatalf("decode %v: %v", h.Type, err)
		}
		if e, ok := msg.(*ofpwire.EchoRequest); ok {
			c.send(h.Transaction, &ofpwire.EchoReply{Data: e.Data})
			continue
		}
		return h, msg
	}
}

// recvType reads one message and checks its type and transaction id.
func recvType[T ofpwire.Message](c *client, xid uint32) T {
	c.t.Helper()
	h, msg := c.recv()
	m, ok := msg.(T)
	if !ok {
		c.t.Fatalf("got %T (xid %d), want %T", msg, h.Transaction, *new(T))
	}
	if h.Transaction != xid {
		c.t.Fatalf("%T: xid %d, want %d", msg, h.Transaction, xid)
	}
	return m
}

// expectError reads an ERROR reply and checks type, code and xid.
func (c *client) expectError(xid uint32, typ, code uint16) *ofpwire.ErrorMsg {
	c.t.Helper()
	e := recvType[*ofpwire.ErrorMsg](c, xid)
	if e.Type != typ || e.Code != code {
		c.t.Fatalf("error %d/%d, want %d/%d", e.Type, e.Code, typ, code)
	}
	return e
}

// handshake exchanges 1.3 HELLOs.
func (c *client) handshake() {
	c.t.Helper()
	c.send(1, ofpwire.NewHello(ofpwire.Version))
	h, msg := c.recv()
	hello, ok := msg.(*ofpwire.Hello)
	if !ok || h.Version != ofpwire.Version15 || !hello.Supports(ofpwire.Version) {
		c.t.Fatalf("bad hello %+v %#v", h, msg)
	}
}

// echo checks that the connection is alive and in sync.
func (c *client) echo(xid uint32) {
	c.t.Helper()
	c.send(xid, &ofpwire.EchoRequest{Data: []byte("ping")})
	r := recvType[*ofpwire.EchoReply](c, xid)
	if string(r.Data) != "ping" {
		c.t.Fatalf("echo data %q", r.Data)
	}
}

// echoIn is echo on a connection that negotiated version v.
func (c *client) echoIn(v uint8, xid uint32) {
	c.t.Helper()
	b, _ := ofpwire.EncodeIn(v, xid, &ofpwire.EchoRequest{Data: []byte("ping")})
	c.sendRaw(b)
	h, raw := c.recvRaw()
	if h.Type != ofpwire.TypeEchoReply || h.Version != v || h.Transaction != xid || string(raw[8:]) != "ping" {
		c.t.Fatalf("got %+v %q, want echo reply in version %d", h, raw, v)
	}
}

// expectClosed waits for the switch to close the connection, skipping
// whatever it sends before.
func (c *client) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := ofpwire.ReadMessage(c.nc, c.buf)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
			strings.Contains(err.Error(), "reset by peer") {
			return
		}
		c.t.Fatalf("expected close, got %v", err)
	}
}

// expectSilence checks that nothing but echo requests arrives for d.
func (c *client) expectSilence(d time.Duration) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(d))
	for {
		h, raw, err := ofpwire.ReadMessage(c.nc, c.buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return
			}
			c.t.Fatalf("read: %v", err)
		}
		if h.Type == ofpwire.TypeEchoRequest {
			c.sendRaw(echoReplyTo(raw))
			continue
		}
		c.t.Fatalf("unexpected %v (xid %d)", h.Type, h.Transaction)
	}
}

func echoReplyTo(raw []byte) []byte {
	b := append([]byte(nil), raw...)
	b[1] = byte(ofpwire.TypeEchoReply)
	return b
}

// recHandler records what reaches the Handler and answers it with fn.
type recHandler struct {
	mu       sync.Mutex
	got      []ofpwire.Message
	xids     []uint32
	features ofpwire.FeaturesReply
	fn       func(c *Conn, xid uint32, msg ofpwire.Message) error
}

func (h *recHandler) Handle(c *Conn, xid uint32, msg ofpwire.Message) error {
	h.mu.Lock()
	h.got = append(h.got, msg)
	h.xids = append(h.xids, xid)
	h.mu.Unlock()
	if h.fn != nil {
		return h.fn(c, xid, msg)
	}
	return nil
}

func (h *recHandler) Features() ofpwire.FeaturesReply { return h.features }

func (h *recHandler) handled() []uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]uint32(nil), h.xids...)
}

func statusOf(m *Manager, target string) []Status {
	var out []Status
	for _, s := range m.Status() {
		if s.Target == target {
			out = append(out, s)
		}
	}
	return out
}

// peerStatus returns the status of the one accepted connection of target.
func peerStatus(t *testing.T, m *Manager, target string) Status {
	t.Helper()
	for _, s := range statusOf(m, target) {
		if s.State != StateListening {
			return s
		}
	}
	t.Fatalf("no connection on %s", target)
	return Status{}
}

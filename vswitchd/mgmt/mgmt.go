// Package mgmt is vswitchd's management API: one JSON request per line on
// a unix socket, one JSON response per line back. vsctl is its client; the
// daemon registers a handler per command. The daemon formats the human
// output itself (like ovs-appctl), so every client prints the same text
// and the data behind it is available as JSON.
package mgmt

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/internal/acceptloop"
	"github.com/vswitch-go/vswitch/internal/statedir"
)

// MaxMessage bounds one response line (a dump of a large datapath can be
// several MiB).
const MaxMessage = 64 << 20

// Limits of the server side, which any local user able to connect could
// otherwise push until the daemon runs out of descriptors or memory.
const (
	// DefaultMaxRequest bounds one request line. Requests are commands
	// and their arguments (a few flows at most); a line that grows past
	// this is answered with an error and the connection closed, so a
	// client cannot make the daemon buffer an unbounded line.
	DefaultMaxRequest = 1 << 20
	// DefaultMaxConns bounds the connections served at once; one more is
	// answered with an error and closed.
	DefaultMaxConns = 256
	// DefaultIdleTimeout closes a connection that sends no request (or
	// does not read its response) for this long: a client that went away
	// without closing (half-open) must not hold a slot forever.
	DefaultIdleTimeout = 5 * time.Minute
)

// Request is one command.
type Request struct {
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
}

// Response is a command's outcome: Error is empty on success; Text is the
// human-readable output; Data, if any, the same as structured data.
type Response struct {
	Error string          `json:"error,omitempty"`
	Text  string          `json:"text,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Result is what a handler returns on success.
type Result struct {
	Text string
	Data any
}

// HandlerFunc runs one command. A returned error is sent to the client as
// the response's Error; the handler must then have changed nothing.
type HandlerFunc func(ctx context.Context, args []string) (Result, error)

// Server serves the management socket.
type Server struct {
	mu       sync.Mutex
	handlers map[string]HandlerFunc
	ln       net.Listener
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
	closed   bool
	maxConns int
	stop     chan struct{}
	// Logf, if set, receives per-connection errors.
	Logf func(format string, args ...any)
	// MaxRequest and IdleTimeout are the limits of the same names
	// (DefaultMaxRequest, DefaultIdleTimeout); set them before Listen.
	MaxRequest  int
	IdleTimeout time.Duration

	refused, idleClosed, tooLong atomic.Uint64
	refusedLog                   acceptloop.LogLimit
}

// Stats counts what the server refused or cut off, for metrics.
type Stats struct {
	// Connections is the number of connections being served.
	Connections int
	// Refused counts connections closed at once because MaxConns were open.
	Refused uint64
	// IdleClosed counts connections closed after IdleTimeout of silence.
	IdleClosed uint64
	// TooLong counts requests longer than MaxRequest (their connection
	// was closed).
	TooLong uint64
}

// NewServer returns a server with no handlers.
func NewServer() *Server {
	return &Server{handlers: map[string]HandlerFunc{}, conns: map[net.Conn]struct{}{},
		maxConns: DefaultMaxConns, MaxRequest: DefaultMaxRequest, IdleTimeout: DefaultIdleTimeout,
		stop: make(chan struct{})}
}

// SetMaxConns changes the connection limit (at run time too: connections
// over a lowered limit are left to finish); n ≤ 0 restores the default.
func (s *Server) SetMaxConns(n int) {
	if n <= 0 {
		n = DefaultMaxConns
	}
	s.mu.Lock()
	s.maxConns = n
	s.mu.Unlock()
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	n := len(s.conns)
	s.mu.Unlock()
	return Stats{Connections: n, Refused: s.refused.Load(), IdleClosed: s.idleClosed.Load(), TooLong: s.tooLong.Load()}
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// Handle registers fn for command name.
func (s *Server) Handle(name string, fn HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[name] = fn
}

// Listen starts serving on the unix socket path, replacing a stale socket
// left by a process that is gone (the caller holds the state directory's
// lock, so no live daemon owns it). The socket is created mode 0600
// whatever the umask: whoever can connect can change every flow.
func (s *Server) Listen(path string) error {
	ln, err := statedir.ListenUnix(path)
	if err != nil {
		return fmt.Errorf("mgmt: %w", err)
	}
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	s.wg.Add(1)
	go s.accept(ln)
	return nil
}

func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	b := acceptloop.Backoff{Name: "mgmt " + ln.Addr().String(), Logf: s.Logf}
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			if b.Wait(err, s.stop) {
				continue
			}
			s.logf("mgmt: accept on %s failed, no longer serving: %v", ln.Addr(), err)
			return
		}
		b.Success()
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.conns) >= s.maxConns {
			max := s.maxConns
			s.mu.Unlock()
			s.refuse(c, max)
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// refuse answers a connection over the limit with an error and closes
// it, without waiting for a client that does not read.
func (s *Server) refuse(c net.Conn, max int) {
	s.refused.Add(1)
	msg := fmt.Sprintf("too many management connections (limit %d, other_config:mgmt-max-connections); try again later", max)
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	json.NewEncoder(c).Encode(Response{Error: msg})
	c.Close()
	if n, ok := s.refusedLog.Allow(); ok {
		s.logf("mgmt: refused a connection: limit of %d connections reached (other_config:mgmt-max-connections); %d refused since the last report", max, n)
	}
}

// serve answers the requests of one connection in order.
func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	for {
		// Waiting for a request and writing a response both count as
		// idle: a client that does neither within the timeout is gone.
		c.SetDeadline(time.Now().Add(s.IdleTimeout))
		line, err := readLine(r, s.MaxRequest)
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, errTooLong):
				s.tooLong.Add(1)
				s.logf("mgmt: request longer than %d bytes, connection closed", s.MaxRequest)
				enc.Encode(&Response{Error: fmt.Sprintf("request longer than %d bytes; connection closed", s.MaxRequest)})
			case errors.As(err, &ne) && ne.Timeout():
				s.idleClosed.Add(1)
				s.logf("mgmt: connection idle for %v, closed", s.IdleTimeout)
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				s.logf("mgmt: %v", err)
			}
			return
		}
		// No deadline while the command runs: some wait for the switch.
		c.SetDeadline(time.Time{})
		var req Request
		var resp Response
		if err := json.Unmarshal(line, &req); err != nil {
			resp.Error = "malformed request: " + err.Error()
		} else {
			resp = s.dispatch(ctx, req)
		}
		c.SetWriteDeadline(time.Now().Add(s.IdleTimeout))
		if err := enc.Encode(&resp); err != nil {
			return
		}
	}
}

func (s *Server) dispatch(ctx context.Context, req Request) (resp Response) {
	s.mu.Lock()
	fn := s.handlers[req.Command]
	s.mu.Unlock()
	if fn == nil {
		return Response{Error: fmt.Sprintf("unknown command %q", req.Command)}
	}
	defer func() {
		// A handler bug must not take the daemon down with it.
		if p := recover(); p != nil {
			resp = Response{Error: fmt.Sprintf("internal error in %s: %v", req.Command, p)}
		}
	}()
	res, err := fn(ctx, req.Args)
	if err != nil {
		return Response{Error: err.Error()}
	}
	resp.Text = res.Text
	if res.Data != nil {
		b, err := json.Marshal(res.Data)
		if err != nil {
			return Response{Error: "encoding result: " + err.Error()}
		}
		if string(b) == "null" {
			// A list with nothing in it: an empty list, so clients
			// need not tell null from [].
			b = []byte("[]")
		}
		resp.Data = b
	}
	return resp
}

// errTooLong is readLine's error for a line over its limit.
var errTooLong = errors.New("message too long")

// readLine reads one newline-terminated message of at most max bytes; it
// never holds more than max plus the reader's buffer.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > max {
			return nil, fmt.Errorf("%w: longer than %d bytes", errTooLong, max)
		}
		buf = append(buf, chunk...)
		if err == nil {
			return buf, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// Close stops listening, closes every connection and waits for handlers.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.stop)
	}
	s.closed = true
	ln := s.ln
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	s.wg.Wait()
	return err
}

// Client is a connection to a daemon's management socket.
type Client struct {
	c   net.Conn
	r   *bufio.Reader
	enc *json.Encoder
}

// Dial connects to the management socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("cannot reach vswitchd at %s (is it running? see --state-dir): %w", path, err)
	}
	return &Client{c: c, r: bufio.NewReader(c), enc: json.NewEncoder(c)}, nil
}

// Call sends one command and waits for its response. A command the daemon
// refused returns the response and an error carrying its message.
func (cl *Client) Call(ctx context.Context, command string, args ...string) (*Response, error) {
	if dl, ok := ctx.Deadline(); ok {
		cl.c.SetDeadline(dl)
		defer cl.c.SetDeadline(time.Time{})
	}
	if err := cl.enc.Encode(Request{Command: command, Args: args}); err != nil {
		return nil, err
	}
	line, err := readLine(cl.r, MaxMessage)
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("malformed response: %w", err)
	}
	if resp.Error != "" {
		return &resp, errors.New(resp.Error)
	}
	return &resp, nil
}

// Close closes the connection.
func (cl *Client) Close() error { return cl.c.Close() }

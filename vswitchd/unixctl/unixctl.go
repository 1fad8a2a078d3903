// Package unixctl serves Open vSwitch's control protocol, so that the
// real ovs-appctl reaches this switch as it reaches ovs-vswitchd: JSON-RPC
// 1.0 over a unix stream socket, messages back to back with no framing
// beyond JSON itself. A request is {"method":M,"params":[strings],"id":N};
// the reply {"result":TEXT,"error":null,"id":N} or, on failure,
// {"result":null,"error":TEXT,"id":N} (ovs-appctl prints the error on
// stderr and exits 2).
//
// The package knows nothing of the daemon: it is given a command table.
// Besides it, every server answers list-commands and version, as every
// Open vSwitch daemon does.
package unixctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vswitch-go/vswitch/internal/acceptloop"
	"github.com/vswitch-go/vswitch/internal/statedir"
)

// Limits of the server side: any local user able to connect could
// otherwise make the daemon buffer without bound or run out of
// descriptors (the same reasoning and values as vswitchd/mgmt).
const (
	// DefaultMaxRequest bounds one request. Requests are a command and a
	// few arguments (a flow for ofproto/trace at most); a request past it
	// closes the connection, with nothing more buffered.
	DefaultMaxRequest = 1 << 20
	// DefaultMaxConns bounds the connections served at once; one more is
	// closed at once.
	DefaultMaxConns = 256
	// DefaultIdleTimeout closes a connection that sends no request (or
	// does not read its reply) for this long, so a client gone without
	// closing does not hold a slot forever.
	DefaultIdleTimeout = 5 * time.Minute
)

// Handler runs one command with its arguments. The text is the reply; an
// error's text is sent as the error reply, and the handler must then have
// changed nothing.
type Handler func(args []string) (string, error)

// Command is one entry of the command table.
type Command struct {
	Name string
	// Usage is the argument synopsis list-commands prints.
	Usage string
	// MinArgs and MaxArgs bound the argument count, checked before Run;
	// MaxArgs < 0 is no bound.
	MinArgs, MaxArgs int
	Run              Handler
}

// Server serves one control socket.
type Server struct {
	cmds map[string]Command
	// Logf, if set, receives per-connection errors.
	Logf func(format string, args ...any)
	// MaxRequest, MaxConns and IdleTimeout are the limits of the same
	// names (Default...); set them before Listen.
	MaxRequest  int
	MaxConns    int
	IdleTimeout time.Duration

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	closing bool
	stop    chan struct{}
	wg      sync.WaitGroup
	refused acceptloop.LogLimit
}

// NewServer returns a server for cmds plus list-commands and version
// (which prints version). Two commands of one name are a programming
// error, refused.
func NewServer(version string, cmds []Command) (*Server, error) {
	s := &Server{cmds: map[string]Command{}, conns: map[net.Conn]struct{}{}, stop: make(chan struct{}),
		MaxRequest: DefaultMaxRequest, MaxConns: DefaultMaxConns, IdleTimeout: DefaultIdleTimeout}
	builtin := []Command{
		{Name: "list-commands", Run: func([]string) (string, error) { return s.listCommands(), nil }},
		{Name: "version", Run: func([]string) (string, error) { return version + "\n", nil }},
	}
	for _, c := range append(builtin, cmds...) {
		if _, dup := s.cmds[c.Name]; dup {
			return nil, fmt.Errorf("unixctl: command %q registered twice", c.Name)
		}
		if c.Run == nil {
			return nil, fmt.Errorf("unixctl: command %q has no handler", c.Name)
		}
		s.cmds[c.Name] = c
	}
	return s, nil
}

// listCommands is ovs-appctl list-commands' text: one command a line,
// sorted, with its synopsis.
func (s *Server) listCommands() string {
	var sb strings.Builder
	sb.WriteString("The available commands are:\n")
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range s.cmds {
			if !yield(n) {
				return
			}
		}
	}) {
		fmt.Fprintf(&sb, "  %-23s %s\n", name, s.cmds[name].Usage)
	}
	return sb.String()
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// Listen starts serving on the unix socket path, replacing a stale socket
// (the caller made sure no live daemon owns it). The socket is mode 0600
// whatever the umask: whoever can connect can stop the switch.
func (s *Server) Listen(path string) error {
	ln, err := statedir.ListenUnix(path)
	if err != nil {
		return fmt.Errorf("unixctl: %w", err)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return errors.New("unixctl: server closed")
	}
	s.ln = ln
	s.wg.Add(1)
	s.mu.Unlock()
	go s.accept(ln)
	return nil
}

func (s *Server) accept(ln net.Listener) {
	defer s.wg.Done()
	b := acceptloop.Backoff{Name: "unixctl " + ln.Addr().String(), Logf: s.Logf}
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return
			}
			if b.Wait(err, s.stop) {
				continue
			}
			s.logf("unixctl: accept on %s failed, no longer serving: %v", ln.Addr(), err)
			return
		}
		b.Success()
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			return
		}
		if len(s.conns) >= s.MaxConns {
			s.mu.Unlock()
			// The protocol has no message for "busy" outside a reply.
			c.Close()
			if n, ok := s.refused.Allow(); ok {
				s.logf("unixctl: refused a connection: limit of %d connections reached; %d refused since the last report", s.MaxConns, n)
			}
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// message is any JSON-RPC 1.0 message; requests are what a server reads,
// the rest (replies, notifications) are ignored.
type message struct {
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	ID     json.RawMessage `json:"id"`
}

// reply is a JSON-RPC 1.0 response: exactly one of Result and Error is
// non-null.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result"`
	Error  any             `json:"error"`
}

// errTooLong is boundedReader's error for a request past the limit.
var errTooLong = errors.New("request too long")

// boundedReader lets the JSON decoder read at most limit bytes past the
// start of the message being decoded, so that one request never holds
// more than MaxRequest plus the decoder's read-ahead.
type boundedReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n >= b.limit {
		return 0, errTooLong
	}
	if room := b.limit - b.n; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
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
	br := &boundedReader{r: c}
	dec := json.NewDecoder(br)
	enc := json.NewEncoder(c)
	for {
		// Waiting for a request and writing its reply both count as idle.
		// A server closing stops reading new requests (Close set the
		// deadline in the past) but still writes the reply in progress,
		// such as exit's.
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			return
		}
		c.SetDeadline(time.Now().Add(s.IdleTimeout))
		s.mu.Unlock()
		br.limit = dec.InputOffset() + int64(s.MaxRequest)
		var m message
		if err := dec.Decode(&m); err != nil {
			var ne net.Error
			var se *json.SyntaxError
			var te *json.UnmarshalTypeError
			switch {
			case errors.Is(err, errTooLong):
				s.logf("unixctl: request longer than %d bytes, connection closed", s.MaxRequest)
			case errors.As(err, &se), errors.As(err, &te):
				// JSON-RPC has no reply without an id: like Open
				// vSwitch, drop a peer that does not speak it.
				s.logf("unixctl: malformed message, connection closed: %v", err)
			case errors.As(err, &ne) && ne.Timeout():
				s.mu.Lock()
				closing := s.closing
				s.mu.Unlock()
				if !closing {
					s.logf("unixctl: connection idle for %v, closed", s.IdleTimeout)
				}
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				s.logf("unixctl: %v", err)
			}
			return
		}
		if m.Method == nil || len(m.ID) == 0 || bytes.Equal(m.ID, []byte("null")) {
			// A reply or a notification: nothing to answer.
			continue
		}
		rep := s.dispatch(*m.Method, m.Params)
		rep.ID = m.ID
		c.SetWriteDeadline(time.Now().Add(s.IdleTimeout))
		if err := enc.Encode(&rep); err != nil {
			return
		}
	}
}

// dispatch runs one request and returns its reply (without the id).
func (s *Server) dispatch(method string, params json.RawMessage) (rep reply) {
	fail := func(format string, args ...any) reply {
		return reply{Error: fmt.Sprintf(format, args...)}
	}
	if method == "echo" {
		// The liveness probe of Open vSwitch's JSON-RPC sessions: the
		// reply's result is the request's params.
		var p any
		if json.Unmarshal(params, &p) != nil {
			p = []any{}
		}
		return reply{Result: p}
	}
	var args []string
	if len(params) > 0 && !bytes.Equal(params, []byte("null")) {
		if err := json.Unmarshal(params, &args); err != nil {
			return fail("\"%s\": params must be an array of strings", method)
		}
	}
	c, ok := s.cmds[method]
	if !ok {
		return fail("\"%s\" is not a valid command (use list-commands to see a list of valid commands)", method)
	}
	if len(args) < c.MinArgs {
		return fail("\"%s\" command requires at least %d arguments", method, c.MinArgs)
	}
	if c.MaxArgs >= 0 && len(args) > c.MaxArgs {
		return fail("\"%s\" command takes at most %d arguments", method, c.MaxArgs)
	}
	defer func() {
		// A handler bug must not take the daemon down with it.
		if p := recover(); p != nil {
			rep = fail("internal error in %s: %v", method, p)
		}
	}()
	text, err := c.Run(args)
	if err != nil {
		msg := err.Error()
		if !strings.HasSuffix(msg, "\n") {
			msg += "\n"
		}
		return reply{Error: msg}
	}
	return reply{Result: text}
}

// Connections is the number of connections being served.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops listening, lets each connection finish the request it is
// running (its reply is still written: ovs-appctl exit gets its answer)
// and waits for them.
func (s *Server) Close() error {
	s.mu.Lock()
	if !s.closing {
		close(s.stop)
	}
	s.closing = true
	ln := s.ln
	for c := range s.conns {
		// Unblocks a connection waiting for its next request; one running
		// a handler sees closing after writing its reply.
		c.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	var err error
	if ln != nil {
		err = ln.Close()
	}
	s.wg.Wait()
	return err
}

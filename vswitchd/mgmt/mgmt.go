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
	"os"
	"sync"
	"time"
)

// MaxMessage bounds one request or response line (a dump of a large
// datapath can be several MiB).
const MaxMessage = 64 << 20

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
	// Logf, if set, receives per-connection errors.
	Logf func(format string, args ...any)
}

// NewServer returns a server with no handlers.
func NewServer() *Server {
	return &Server{handlers: map[string]HandlerFunc{}, conns: map[net.Conn]struct{}{}}
}

// Handle registers fn for command name.
func (s *Server) Handle(name string, fn HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[name] = fn
}

// Listen starts serving on the unix socket path, replacing a stale socket
// left by a process that is gone (the caller holds the state directory's
// lock, so no live daemon owns it).
func (s *Server) Listen(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("mgmt: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
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
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
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
		line, err := readLine(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && s.Logf != nil {
				s.Logf("mgmt: %v", err)
			}
			return
		}
		var req Request
		var resp Response
		if err := json.Unmarshal(line, &req); err != nil {
			resp.Error = "malformed request: " + err.Error()
		} else {
			resp = s.dispatch(ctx, req)
		}
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
		resp.Data = b
	}
	return resp
}

// readLine reads one newline-terminated message of at most MaxMessage bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > MaxMessage {
			return nil, fmt.Errorf("message longer than %d bytes", MaxMessage)
		}
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
	line, err := readLine(cl.r)
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

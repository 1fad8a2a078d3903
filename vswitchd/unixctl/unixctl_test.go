package unixctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitUntil polls cond for at most 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testCommands() []Command {
	return []Command{
		{Name: "echo-args", Usage: "ARG...", MinArgs: 1, MaxArgs: 3, Run: func(args []string) (string, error) {
			return strings.Join(args, "|") + "\n", nil
		}},
		{Name: "fail", Run: func([]string) (string, error) { return "", errors.New("it failed") }},
		{Name: "boom", Run: func([]string) (string, error) { panic("kaboom") }},
	}
}

func startServer(t *testing.T, tune func(*Server)) (*Server, string) {
	t.Helper()
	s, err := NewServer("vswitchd 1.2.3", testCommands())
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(s)
	}
	path := filepath.Join(t.TempDir(), "test.ctl")
	if err := s.Listen(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func call(t *testing.T, path, method string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return Call(ctx, path, method, args...)
}

// rawReply is a reply as decoded from the wire, to check its exact shape.
type rawReply map[string]json.RawMessage

func readReply(t *testing.T, dec *json.Decoder) rawReply {
	t.Helper()
	var r rawReply
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("no reply: %v", err)
	}
	return r
}

func TestCommandsAndBuiltins(t *testing.T) {
	_, path := startServer(t, nil)
	if out, err := call(t, path, "echo-args", "a", "b"); err != nil || out != "a|b\n" {
		t.Fatalf("echo-args = %q, %v", out, err)
	}
	if out, err := call(t, path, "version"); err != nil || out != "vswitchd 1.2.3\n" {
		t.Fatalf("version = %q, %v", out, err)
	}
	out, err := call(t, path, "list-commands")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"The available commands are:\n", "  echo-args", "ARG...\n", "  list-commands", "  version", "  fail"} {
		if !strings.Contains(out, want) {
			t.Errorf("list-commands lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "echo-args") > strings.Index(out, "version") {
		t.Errorf("list-commands not sorted:\n%s", out)
	}
}

func TestErrorReplies(t *testing.T) {
	_, path := startServer(t, nil)
	for _, tc := range []struct {
		method string
		args   []string
		want   string
	}{
		{"no-such", nil, "\"no-such\" is not a valid command (use list-commands to see a list of valid commands)"},
		{"echo-args", nil, "\"echo-args\" command requires at least 1 arguments"},
		{"echo-args", []string{"1", "2", "3", "4"}, "\"echo-args\" command takes at most 3 arguments"},
		{"fail", nil, "it failed\n"},
		{"boom", nil, "internal error in boom: kaboom"},
	} {
		_, err := call(t, path, tc.method, tc.args...)
		var se *ServerError
		if !errors.As(err, &se) || se.Text != tc.want {
			t.Errorf("%s %q: error %v, want server error %q", tc.method, tc.args, err, tc.want)
		}
	}
	// The panic did not stop the server.
	if _, err := call(t, path, "version"); err != nil {
		t.Fatalf("after a handler panic: %v", err)
	}
}

// TestWireFormat: the exact JSON-RPC 1.0 shape ovs-appctl expects, back
// to back requests on one connection without separators, non-numeric ids
// echoed, params that are not strings refused with an error reply, and
// notifications and replies from the peer ignored.
func TestWireFormat(t *testing.T) {
	_, path := startServer(t, nil)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, `{"id":0,"method":"echo-args","params":["x"]}{"method":"fail","params":[],"id":"abc"}`+
		`{"method":"version","params":[],"id":null}{"result":"x","error":null,"id":5}`+
		`{"method":"echo-args","params":[1,2],"id":7}{"method":"echo","params":["hi"],"id":8}`)
	dec := json.NewDecoder(c)
	r := readReply(t, dec)
	if string(r["id"]) != "0" || string(r["result"]) != `"x\n"` || string(r["error"]) != "null" {
		t.Errorf("success reply %v", r)
	}
	r = readReply(t, dec)
	if string(r["id"]) != `"abc"` || string(r["result"]) != "null" || string(r["error"]) != `"it failed\n"` {
		t.Errorf("error reply %v", r)
	}
	r = readReply(t, dec)
	if string(r["id"]) != "7" || !bytes.Contains(r["error"], []byte("params must be an array of strings")) {
		t.Errorf("bad params reply %v", r)
	}
	r = readReply(t, dec)
	if string(r["id"]) != "8" || string(r["result"]) != `["hi"]` {
		t.Errorf("echo reply %v", r)
	}
}

// expectClosed reads until the server closes the connection, failing on
// any reply.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err == nil {
		t.Fatalf("got %q, want the connection closed", buf[:n])
	}
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("want the connection closed, got %v", err)
	}
}

func TestMalformedJSONClosesConnection(t *testing.T) {
	_, path := startServer(t, nil)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, `{"id":0,"method":}`)
	expectClosed(t, c)
	if _, err := call(t, path, "version"); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}

// TestRequestTooLong: a request past MaxRequest closes its connection
// while the server is still reading it, however much the client would
// send; a request just under the limit is served.
func TestRequestTooLong(t *testing.T) {
	_, path := startServer(t, func(s *Server) { s.MaxRequest = 4096 })
	arg := strings.Repeat("a", 3000)
	if out, err := call(t, path, "echo-args", arg); err != nil || out != arg+"\n" {
		t.Fatalf("request under the limit: %v", err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// An endless string: the server must give up before it ends.
	done := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c, `{"id":0,"method":"echo-args","params":["`)
		chunk := strings.Repeat("b", 1024)
		for err == nil {
			_, err = io.WriteString(c, chunk)
		}
		done <- err
	}()
	expectClosed(t, c)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("server kept reading an oversized request")
	}
	if _, err := call(t, path, "version"); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}

// TestManyConnections: connections up to MaxConns are served together;
// one more is closed at once; when one goes away another is accepted.
func TestManyConnections(t *testing.T) {
	const max = 8
	s, path := startServer(t, func(s *Server) { s.MaxConns = max })
	var conns []net.Conn
	for range max {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	waitUntil(t, "all connections accepted", func() bool { return s.Connections() == max })
	extra, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	expectClosed(t, extra)
	// Every held connection still answers.
	for i, c := range conns {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, `{"id":%d,"method":"echo-args","params":["c%d"]}`, i, i)
		r := readReply(t, json.NewDecoder(c))
		if string(r["result"]) != fmt.Sprintf(`"c%d\n"`, i) {
			t.Fatalf("connection %d: %v", i, r)
		}
	}
	conns[0].Close()
	waitUntil(t, "a slot freed", func() bool { return s.Connections() == max-1 })
	if _, err := call(t, path, "version"); err != nil {
		t.Fatalf("no connection after one closed: %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	_, path := startServer(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			want := fmt.Sprintf("n%d", i)
			out, err := call(t, path, "echo-args", want)
			if err != nil || out != want+"\n" {
				errs <- fmt.Errorf("call %d: %q, %v", i, out, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestCloseAnswersRunningRequest: Close lets a running handler's reply
// through (ovs-appctl exit must not see the connection drop) and closes
// idle connections.
func TestCloseAnswersRunningRequest(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	s, err := NewServer("v", []Command{{Name: "slow", Run: func([]string) (string, error) {
		close(started)
		<-release
		return "done\n", nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "c.ctl")
	if err := s.Listen(path); err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	res := make(chan error, 1)
	go func() {
		out, err := call(t, path, "slow")
		if err == nil && out != "done\n" {
			err = fmt.Errorf("reply %q", out)
		}
		res <- err
	}()
	<-started
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	waitUntil(t, "listener closed", func() bool {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	if err := <-res; err != nil {
		t.Fatalf("running request during Close: %v", err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	expectClosed(t, idle)
}

func TestDuplicateCommandRefused(t *testing.T) {
	if _, err := NewServer("v", []Command{{Name: "version", Run: func([]string) (string, error) { return "", nil }}}); err == nil {
		t.Fatal("a second version command was accepted")
	}
}

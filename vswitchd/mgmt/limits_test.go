package mgmt

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// readResponseThenEOF reads one response line and then expects the server to
// close the connection.
func readResponseThenEOF(t *testing.T, c net.Conn) Response {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		t.Fatalf("malformed response %q: %v", line, err)
	}
	// EOF, or a reset when the server closed with our data unread.
	if _, err := r.ReadByte(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection not closed after the response: %v", err)
	}
	return resp
}

// TestRequestTooLong: a line past MaxRequest is answered with an error
// and the connection closed, without the server buffering the rest; the
// server keeps serving others.
func TestRequestTooLong(t *testing.T) {
	s, path := startServer(t)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// 100 MB without a newline, written while the server reads: it must
	// stop after about MaxRequest and answer.
	go func() {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 100 << 20 / len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	resp := readResponseThenEOF(t, c)
	if !strings.Contains(resp.Error, "longer than 1048576 bytes") {
		t.Fatalf("response %+v, want the size error", resp)
	}
	if st := s.Stats(); st.TooLong != 1 {
		t.Fatalf("stats %+v, want TooLong 1", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Call(ctx, "echo", "still here"); err != nil {
		t.Fatal(err)
	}
}

// TestIdleConnectionClosed: a client that connects and says nothing is
// disconnected after IdleTimeout and counted.
func TestIdleConnectionClosed(t *testing.T) {
	s := NewServer()
	s.IdleTimeout = 100 * time.Millisecond
	path := filepath.Join(t.TempDir(), "m.sock")
	if err := s.Listen(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF", err)
	}
	waitUntil(t, "the idle close counted", func() bool { return s.Stats().IdleClosed == 1 && s.Stats().Connections == 0 })
}

// TestConnectionCap: past the limit a connection gets an error line and is
// closed; a slot freed is usable again.
func TestConnectionCap(t *testing.T) {
	s, path := startServer(t)
	s.SetMaxConns(2)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitUntil(t, "two connections served", func() bool { return s.Stats().Connections == 2 })
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp := readResponseThenEOF(t, c)
	if !strings.Contains(resp.Error, "too many management connections") {
		t.Fatalf("response %+v", resp)
	}
	if st := s.Stats(); st.Refused != 1 {
		t.Fatalf("stats %+v, want Refused 1", st)
	}
	held[0].Close()
	waitUntil(t, "a slot freed", func() bool { return s.Stats().Connections == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Call(ctx, "echo", "x"); err != nil {
		t.Fatal(err)
	}
}

// TestSocketModeUnderUmask000: the socket is 0600 even with umask 000.
func TestSocketModeUnderUmask000(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	_, path := startServer(t)
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want 0600", fi.Mode())
	}
}

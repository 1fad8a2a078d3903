package mgmt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func startServer(t testing.TB) (*Server, string) {
	t.Helper()
	s := NewServer()
	s.Handle("echo", func(_ context.Context, args []string) (Result, error) {
		return Result{Text: strings.Join(args, " ") + "\n", Data: args}, nil
	})
	s.Handle("fail", func(context.Context, []string) (Result, error) {
		return Result{}, errors.New("it failed")
	})
	s.Handle("panic", func(context.Context, []string) (Result, error) { panic("boom") })
	s.Handle("big", func(context.Context, []string) (Result, error) {
		return Result{Text: strings.Repeat("x", 1<<20)}, nil
	})
	path := filepath.Join(t.TempDir(), "m.sock")
	if err := s.Listen(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestCallAndErrors(t *testing.T) {
	_, path := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Call(ctx, "echo", "a", "b")
	if err != nil || resp.Text != "a b\n" || string(resp.Data) != `["a","b"]` {
		t.Fatalf("echo: %+v %v", resp, err)
	}
	if _, err := c.Call(ctx, "fail"); err == nil || err.Error() != "it failed" {
		t.Fatalf("fail: %v", err)
	}
	// A panicking handler answers with an error and the server survives.
	if _, err := c.Call(ctx, "panic"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("panic: %v", err)
	}
	if _, err := c.Call(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("unknown: %v", err)
	}
	resp, err = c.Call(ctx, "big")
	if err != nil || len(resp.Text) != 1<<20 {
		t.Fatalf("big: %v, %d bytes", err, len(resp.Text))
	}
	if _, err := c.Call(ctx, "echo", "still", "here"); err != nil {
		t.Fatal(err)
	}
}

func TestMalformedRequest(t *testing.T) {
	_, path := startServer(t)
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	nc.Write([]byte("{not json\n"))
	buf := make([]byte, 4096)
	n, err := nc.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "malformed request") {
		t.Fatalf("reply %q, %v", buf[:n], err)
	}
}

func TestDialNoDaemon(t *testing.T) {
	_, err := Dial(context.Background(), filepath.Join(t.TempDir(), "none.sock"))
	if err == nil || !strings.Contains(err.Error(), "is it running") {
		t.Fatalf("dial: %v", err)
	}
}

func TestCommandsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Commands {
		if seen[c.Name] {
			t.Errorf("%s listed twice", c.Name)
		}
		seen[c.Name] = true
		if c.Help == "" || (c.MaxArgs >= 0 && c.MaxArgs < c.MinArgs) {
			t.Errorf("%s: bad entry %+v", c.Name, c)
		}
	}
	if _, ok := Lookup("show"); !ok {
		t.Fatal("show missing")
	}
}

// FuzzServe: whatever bytes a client sends, the server answers each line
// with a well-formed response or closes the connection; it never crashes.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"command":"echo","args":["a"]}` + "\n"))
	f.Add([]byte(`{"command":"panic"}` + "\n" + `{"command":"fail"}` + "\n"))
	f.Add([]byte("{not json\n\n\x00\xff\n"))
	f.Add([]byte(`{"command":1}` + "\n"))
	s, path := startServer(f)
	_ = s
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := nc.Write(data); err != nil {
			return
		}
		nc.(*net.UnixConn).CloseWrite()
		lines := bytes.Count(data, []byte("\n"))
		dec := json.NewDecoder(nc)
		for i := 0; i < lines; i++ {
			var r Response
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("response %d of %d: %v", i+1, lines, err)
			}
		}
	})
}

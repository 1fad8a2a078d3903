package acceptloop

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestAcceptSurvivesEMFILE exhausts the process's descriptors for real
// (RLIMIT_NOFILE lowered, files opened until EMFILE), lets an accept loop
// hit the error, then frees them: the loop must have logged, kept going,
// and accept the connections that waited in the backlog.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const clients = 3
	for range clients {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = 256
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	var hold []*os.File
	release := func() {
		for _, f := range hold {
			f.Close()
		}
		hold = nil
	}
	defer release()
	for {
		f, err := os.Open("/dev/null")
		if err != nil {
			break
		}
		hold = append(hold, f)
		if len(hold) > 1000 {
			t.Fatal("RLIMIT_NOFILE not effective")
		}
	}

	var mu sync.Mutex
	var logs []string
	b := &Backoff{Name: "test", Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}}
	accepted := make(chan net.Conn, clients)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				if b.Wait(err, stop) {
					continue
				}
				return
			}
			b.Success()
			accepted <- c
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for b.Failures() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("accept loop never failed with descriptors exhausted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	for i := range clients {
		select {
		case c := <-accepted:
			c.Close()
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d connections accepted after the descriptors came back", i, clients)
		}
	}
	ln.Close()
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(logs) < 2 || !strings.Contains(logs[0], "too many open files") || !strings.Contains(logs[len(logs)-1], "accepting connections again") {
		t.Fatalf("logs %q: want the error, then the recovery", logs)
	}
	// Three or more failures in a few milliseconds make one line, not one each.
	if len(logs) > 2 {
		t.Fatalf("logs not rate limited: %q", logs)
	}
}

func TestTemporary(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, true},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, true},
		{&net.OpError{Op: "accept", Err: net.ErrClosed}, false},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EBADF)}, false},
		{nil, false},
	} {
		if got := Temporary(tc.err); got != tc.want {
			t.Errorf("Temporary(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestBackoffDoubles: 5 ms, doubling, capped at 1 s, reset by a success.
func TestBackoffDoubles(t *testing.T) {
	var b Backoff
	stop := make(chan struct{})
	close(stop) // do not actually wait
	emfile := os.NewSyscallError("accept4", syscall.EMFILE)
	want := MinDelay
	for range 12 {
		b.Wait(emfile, stop)
		if b.delay != want {
			t.Fatalf("delay %v, want %v", b.delay, want)
		}
		want = min(2*want, MaxDelay)
	}
	b.Success()
	b.Wait(emfile, stop)
	if b.delay != MinDelay {
		t.Fatalf("delay after success %v, want %v", b.delay, MinDelay)
	}
}

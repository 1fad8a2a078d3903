package afxdp

import (
	"testing"
	"time"
)

// spareState reads the spare under its lock.
func spareState() (size, ports int, pending bool) {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	return len(spare.buf), spare.ports, spare.pending
}

// TestUMEMSpare: once an AF_XDP port is open a faulted-in UMEM of its
// size waits for the next port, which takes it (and a new one is made);
// with the last port closed none is kept. Ports of another test may be
// open in the same process only if tests ran in parallel, which these do
// not.
func TestUMEMSpare(t *testing.T) {
	a, _ := vethPair(t)
	b, _ := vethPair(t)
	if _, ports, _ := spareState(); ports != 0 {
		t.Skipf("%d AF_XDP ports left open by earlier tests", ports)
	}
	pa, err := New(a, Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	want := int(pa.xsks[0].lay.total())
	waitSpare := func(what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, _, pending := spareState()
			if n == want && !pending {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: spare of %d bytes (want %d), pending %v", what, n, want, pending)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitSpare("after the first port")
	spare.mu.Lock()
	sp := &spare.buf[0]
	spare.mu.Unlock()
	pb, err := New(b, Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	if &pb.xsks[0].umem[0] != sp {
		t.Errorf("the second port's UMEM is not the spare")
	}
	waitSpare("after the second port took it")
	if err := pb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pa.Close(); err != nil {
		t.Fatal(err)
	}
	if n, ports, _ := spareState(); n != 0 || ports != 0 {
		t.Errorf("after the last port closed: spare of %d bytes, %d ports counted", n, ports)
	}
}

// TestUMEMSpareExpires: the spare goes spareKeep after the last open
// while the port stays open, and the next open makes one again.
func TestUMEMSpareExpires(t *testing.T) {
	a, _ := vethPair(t)
	b, _ := vethPair(t)
	if _, ports, _ := spareState(); ports != 0 {
		t.Skipf("%d AF_XDP ports left open by earlier tests", ports)
	}
	defer func(d time.Duration) { spareKeep = d }(spareKeep)
	spareKeep = 2 * time.Second
	pa, err := New(a, Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	want := int(pa.xsks[0].lay.total())
	wait := func(what string, size int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, _, pending := spareState()
			if n == size && !pending {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: spare of %d bytes (want %d), pending %v", what, n, size, pending)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait("after the first port", want)
	wait("a quiet spell later", 0)
	pb, err := New(b, Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	wait("after the next open", want)
	wait("a quiet spell after it", 0)
}

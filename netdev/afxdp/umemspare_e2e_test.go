package afxdp

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// spareState reads the spare under its lock.
func spareState() (size, ports int, pending bool) {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if spare.x != nil {
		size = len(spare.x.umem)
	}
	return size, spare.ports, spare.pending
}

// waitSpare waits (10 s at most) until the spare is size bytes and no
// replacement is pending.
func waitSpare(t *testing.T, what string, size int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n, _, pending := spareState(); n != size || pending; n, _, pending = spareState() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: spare of %d bytes (want %d), pending %v", what, n, size, pending)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// currentSpare is the prepared socket kept now, or nil.
func currentSpare() *xsk {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	return spare.x
}

// TestUMEMSpare: once an AF_XDP port is open a socket prepared for its
// layout (UMEM registered, rings mapped) waits for the next port, which
// takes it and only binds it (and a new one is made);
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
	waitSpare(t, "after the first port", want)
	sp := currentSpare()
	pb, err := New(b, Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	if pb.xsks[0] != sp {
		t.Errorf("the second port's socket is not the spare")
	}
	waitSpare(t, "after the second port took it", want)
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
	waitSpare(t, "after the first port", want)
	waitSpare(t, "a quiet spell later", 0)
	pb, err := New(b, Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	waitSpare(t, "after the next open", want)
	waitSpare(t, "a quiet spell after it", 0)
}

// TestUMEMSpareNamespace: a port opened from a thread in another network
// namespace gets a socket of that namespace, never the spare made in the
// process's (it would not bind there), which stays for the next port of
// the process's namespace.
func TestUMEMSpareNamespace(t *testing.T) {
	a, _ := vethPair(t)
	if _, ports, _ := spareState(); ports != 0 {
		t.Skipf("%d AF_XDP ports left open by earlier tests", ports)
	}
	pa, err := New(a, Options{Queues: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pa.Close()
	waitSpare(t, "after the first port", int(pa.xsks[0].lay.total()))
	sp := currentSpare()
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, in the
		// namespace it made, and no other goroutine runs on it.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "nsport0"}, PeerName: "nsport1"}
		if err := netlink.LinkAdd(v); err != nil {
			errc <- err
			return
		}
		for _, n := range []string{"nsport0", "nsport1"} {
			if l, err := netlink.LinkByName(n); err == nil {
				netlink.LinkSetUp(l)
			}
		}
		p, err := New("nsport0", Options{Queues: 1})
		if err != nil {
			errc <- err
			return
		}
		if p.xsks[0] == sp {
			err = errors.New("the port in another namespace took the spare")
		}
		p.Close()
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * spareDelay) // any replacement it scheduled has run
	if currentSpare() != sp {
		t.Errorf("the spare of the process's namespace did not stay")
	}
}

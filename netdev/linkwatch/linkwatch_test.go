package linkwatch

import (
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestResubscribeAfterLoss closes the watcher's real netlink socket, changes
// the link while no subscription exists, and checks that the watcher
// subscribes again, re-reads the link it missed the change of, tells the
// listener to resync, and follows later events in both views.
func TestResubscribeAfterLoss(t *testing.T) {
	nstest.RequireRoot(t) // a veth pair
	var mu sync.Mutex
	var closers []chan struct{}
	w := newWatcher(func(ch chan<- netlink.LinkUpdate, _ <-chan struct{}, o netlink.LinkSubscribeOptions) error {
		done := make(chan struct{}) // closing it closes the socket
		mu.Lock()
		closers = append(closers, done)
		mu.Unlock()
		return netlink.LinkSubscribeWithOptions(ch, done, o)
	})
	lost, proceed := make(chan struct{}), make(chan struct{})
	w.lost = func() {
		lost <- struct{}{}
		<-proceed
	}

	name := nstest.Name("lwt")
	nstest.Run(t, "ip", "link", "add", name, "mtu", "1500", "type", "veth", "peer", "name", nstest.Name("lwp"))
	t.Cleanup(func() { nstest.Output("ip", "link", "del", name) })

	events := make(chan Event, 1024)
	stop, err := w.listen(func(ev Event) {
		select {
		case events <- ev:
		default:
			t.Error("listener's buffer full")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	l, err := w.watch(name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	await := func(what string, match func(Event) bool) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case ev := <-events:
				if match(ev) {
					return
				}
			case <-timeout:
				t.Fatalf("no %s within 10 s", what)
			}
		}
	}
	await("first resync", func(ev Event) bool { return ev.Resync })
	if l.MTU() != 1500 {
		t.Fatalf("MTU %d, want 1500", l.MTU())
	}

	mu.Lock()
	close(closers[0])
	mu.Unlock()
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("closing the socket did not end the subscription")
	}
	// No subscription now: this change is not seen as an event.
	nstest.Run(t, "ip", "link", "set", name, "mtu", "1400")
	close(proceed)
	await("resync after the loss", func(ev Event) bool { return ev.Resync })
	if l.MTU() != 1400 {
		t.Fatalf("MTU %d after the resync, want 1400 (the missed change re-read)", l.MTU())
	}
	mu.Lock()
	if len(closers) != 2 {
		t.Fatalf("%d subscriptions, want 2", len(closers))
	}
	mu.Unlock()

	// The new subscription delivers events to both views.
	nstest.Run(t, "ip", "link", "set", name, "mtu", "1300")
	await("an event for "+name, func(ev Event) bool { return ev.Name == name && !ev.Removed })
	nstest.WaitFor(t, 10*time.Second, "MTU 1300", func() bool { return l.MTU() == 1300 })
	nstest.Run(t, "ip", "link", "del", name)
	await("the removal of "+name, func(ev Event) bool { return ev.Name == name && ev.Removed })
	select {
	case <-l.Removed():
	case <-time.After(10 * time.Second):
		t.Fatal("Removed not closed")
	}
}

// TestListenStop: once stop returns the listener is never called again.
func TestListenStop(t *testing.T) {
	w := newWatcher(netlink.LinkSubscribeWithOptions)
	var mu sync.Mutex
	calls := 0
	stop, err := w.listen(func(Event) {
		mu.Lock()
		calls++
		mu.Unlock()
	})
	if err != nil {
		nstest.Unavailable(t, "no rtnetlink subscription here: %v", err)
	}
	stop()
	mu.Lock()
	n := calls
	mu.Unlock()
	w.dispatch(netlink.LinkUpdate{Link: &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "x", Index: 1}}})
	w.resync()
	mu.Lock()
	defer mu.Unlock()
	if n != 1 || calls != 1 {
		t.Fatalf("%d calls by stop, %d after; want the first resync only", n, calls)
	}
}

// TestOnRemoved: the function is called once when the watched interface
// is deleted, and at once when it is registered after the deletion.
func TestOnRemoved(t *testing.T) {
	nstest.RequireRoot(t) // a veth pair
	name := nstest.Name("lwr")
	nstest.Run(t, "ip", "link", "add", name, "type", "veth", "peer", "name", nstest.Name("lwq"))
	t.Cleanup(func() { nstest.Output("ip", "link", "del", name) })
	l, err := Watch(name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	calls := make(chan struct{}, 4)
	l.OnRemoved(func() { calls <- struct{}{} })
	nstest.Run(t, "ip", "link", "del", name)
	select {
	case <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("OnRemoved's function not called 10 s after the deletion")
	}
	if !l.IsRemoved() {
		t.Error("called before Removed was closed")
	}
	l.OnRemoved(func() { calls <- struct{}{} })
	select {
	case <-calls:
	default:
		t.Error("a function registered after the deletion was not called at once")
	}
	l.markRemoved() // a resync that finds it gone again
	if len(calls) != 0 {
		t.Errorf("called %d more times", len(calls))
	}
}

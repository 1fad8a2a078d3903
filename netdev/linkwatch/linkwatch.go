// Package linkwatch follows kernel network interfaces through one rtnetlink
// subscription per process, with two views of it: by ifindex (Watch), the
// state of one interface a port driver has open (operational state, MTU,
// removal), read per packet with one atomic load instead of asking the
// kernel; and by name (Listen), every link event, for the daemon, which
// waits for interfaces that configured ports name to come back.
//
// A subscription is lost when the kernel drops messages it had no room for
// (the socket overran) or the socket fails; the watcher then subscribes
// again, re-reads every watched interface and tells listeners to check
// everything (Event.Resync), since events were missed.
package linkwatch

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// resubscribeDelay separates a lost subscription from the next try, so a
// socket that keeps failing does not spin.
const resubscribeDelay = time.Second

// Link is the watched state of one interface. Its methods are safe for
// concurrent use and cost one atomic load.
type Link struct {
	Name    string
	Index   int
	up      atomic.Bool
	mtu     atomic.Int32
	removed chan struct{}
	once    sync.Once
	w       *watcher
	// onRemoved is OnRemoved's function until it has run.
	onRemoved atomic.Pointer[func()]
}

// OnRemoved has fn called once when the interface is deleted (at once if
// it already was), on the watcher's goroutine: fn must not block. It is
// for a driver that only needs to take note, without a goroutine of its
// own waiting on Removed for each of a thousand ports.
func (l *Link) OnRemoved(fn func()) {
	l.onRemoved.Store(&fn)
	if l.IsRemoved() {
		l.fireRemoved()
	}
}

// fireRemoved runs the OnRemoved function, once.
func (l *Link) fireRemoved() {
	if fn := l.onRemoved.Swap(nil); fn != nil {
		(*fn)()
	}
}

// Up reports whether the interface is administratively and operationally up.
func (l *Link) Up() bool { return l.up.Load() }

// MTU returns the interface's MTU.
func (l *Link) MTU() int { return int(l.mtu.Load()) }

// Removed is closed when the interface is deleted.
func (l *Link) Removed() <-chan struct{} { return l.removed }

// IsRemoved reports whether the interface has been deleted.
func (l *Link) IsRemoved() bool {
	select {
	case <-l.removed:
		return true
	default:
		return false
	}
}

func (l *Link) update(attrs *netlink.LinkAttrs) {
	l.mtu.Store(int32(attrs.MTU))
	up := attrs.Flags&unix.IFF_UP != 0 && (attrs.OperState == netlink.OperUp || attrs.OperState == netlink.OperUnknown)
	l.up.Store(up)
}

func (l *Link) markRemoved() {
	l.up.Store(false)
	l.once.Do(func() { close(l.removed) })
	l.fireRemoved()
}

// Event is one link event as Listen delivers it.
type Event struct {
	// Name and Index identify the interface (empty and 0 with Resync).
	Name  string
	Index int
	// Removed: the interface was deleted (RTM_DELLINK); otherwise it
	// appeared or changed (RTM_NEWLINK).
	Removed bool
	// Resync: events may have been missed (the listener was just added,
	// or the subscription was lost and made again); whatever the listener
	// follows must be looked at afresh.
	Resync bool
}

// subscribeFunc is netlink.LinkSubscribeWithOptions' signature, so that a
// test can wrap the real subscription.
type subscribeFunc func(chan<- netlink.LinkUpdate, <-chan struct{}, netlink.LinkSubscribeOptions) error

type watcher struct {
	subscribe subscribeFunc

	mu        sync.Mutex
	links     map[int][]*Link // by ifindex
	listeners map[*listener]struct{}
	started   bool
	// lost, if set, runs when a subscription is lost, before the next is
	// made: a test holds the watcher there to change a link unseen.
	lost func()
}

type listener struct {
	mu      sync.Mutex // one call at a time; stop waits for a call under way
	fn      func(Event)
	stopped bool
}

func (ln *listener) call(ev Event) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if !ln.stopped {
		ln.fn(ev)
	}
}

func newWatcher(subscribe subscribeFunc) *watcher {
	return &watcher{subscribe: subscribe, links: map[int][]*Link{}, listeners: map[*listener]struct{}{}}
}

// w is the process's watcher: one subscription serves every port and the
// daemon.
var w = newWatcher(netlink.LinkSubscribeWithOptions)

// Watch starts following interface name. Call Stop on the result when the
// port goes away.
func Watch(name string) (*Link, error) { return w.watch(name) }

// Listen calls fn with every link event, starting with a Resync, until the
// returned stop is called; fn is never called again once stop returns, and
// must not call stop itself. Calls are one at a time, mostly on the
// watcher's goroutine, so fn must not block: it delays every other event.
// Listen fails if the first subscription cannot be made (a sandbox that
// refuses netlink sockets); later losses are repaired, and fn hears of them
// as a Resync.
func Listen(fn func(Event)) (stop func(), err error) { return w.listen(fn) }

func (w *watcher) watch(name string) (*Link, error) {
	if err := w.start(); err != nil {
		return nil, err
	}
	nl, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("linkwatch: %s: %w", name, err)
	}
	attrs := nl.Attrs()
	l := &Link{Name: name, Index: attrs.Index, removed: make(chan struct{}), w: w}
	l.update(attrs)
	w.mu.Lock()
	w.links[l.Index] = append(w.links[l.Index], l)
	w.mu.Unlock()
	// The link may have changed between the lookup and the registration.
	l.refresh()
	return l, nil
}

// refresh reads the interface's state from the kernel.
func (l *Link) refresh() {
	if nl, err := netlink.LinkByIndex(l.Index); err != nil {
		l.markRemoved()
	} else {
		l.update(nl.Attrs())
	}
}

// Stop stops following l.
func (l *Link) Stop() {
	w := l.w
	w.mu.Lock()
	defer w.mu.Unlock()
	ls := w.links[l.Index]
	for i, x := range ls {
		if x == l {
			w.links[l.Index] = append(ls[:i], ls[i+1:]...)
			break
		}
	}
	if len(w.links[l.Index]) == 0 {
		delete(w.links, l.Index)
	}
}

func (w *watcher) listen(fn func(Event)) (func(), error) {
	if err := w.start(); err != nil {
		return nil, err
	}
	ln := &listener{fn: fn}
	w.mu.Lock()
	w.listeners[ln] = struct{}{}
	w.mu.Unlock()
	ln.call(Event{Resync: true}) // whatever happened before the listener was added
	return func() {
		w.mu.Lock()
		delete(w.listeners, ln)
		w.mu.Unlock()
		ln.mu.Lock()
		ln.stopped = true
		ln.mu.Unlock()
	}, nil
}

// start makes the first subscription, or reports why it cannot; once made,
// the watcher's goroutine keeps one for the life of the process.
func (w *watcher) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	ch, err := w.subscribeLocked()
	if err != nil {
		return err
	}
	w.started = true
	go w.run(ch)
	return nil
}

func (w *watcher) subscribeLocked() (<-chan netlink.LinkUpdate, error) {
	ch := make(chan netlink.LinkUpdate, 256)
	// The subscription is never closed on purpose: done stays open, and
	// netlink closes ch when the socket fails.
	if err := w.subscribe(ch, make(chan struct{}), netlink.LinkSubscribeOptions{
		ErrorCallback: func(error) {}, // a failure closes ch; run resubscribes
	}); err != nil {
		return nil, fmt.Errorf("linkwatch: subscribe: %w", err)
	}
	return ch, nil
}

// run dispatches the subscription's events and, when it is lost, makes
// another and resynchronises.
func (w *watcher) run(ch <-chan netlink.LinkUpdate) {
	for {
		for u := range ch {
			w.dispatch(u)
		}
		if w.lost != nil {
			w.lost()
		}
		for {
			time.Sleep(resubscribeDelay)
			w.mu.Lock()
			next, err := w.subscribeLocked()
			w.mu.Unlock()
			if err == nil {
				ch = next
				break
			}
		}
		w.resync()
	}
}

func (w *watcher) dispatch(u netlink.LinkUpdate) {
	attrs := u.Attrs()
	if attrs == nil {
		return
	}
	removed := u.Header.Type == unix.RTM_DELLINK
	w.mu.Lock()
	ls := append([]*Link(nil), w.links[attrs.Index]...)
	lns := w.listenersLocked()
	w.mu.Unlock()
	for _, l := range ls {
		if removed {
			l.markRemoved()
		} else {
			l.update(attrs)
		}
	}
	ev := Event{Name: attrs.Name, Index: attrs.Index, Removed: removed}
	for _, ln := range lns {
		ln.call(ev)
	}
}

// resync re-reads every watched link and tells every listener that events
// were missed.
func (w *watcher) resync() {
	w.mu.Lock()
	var ls []*Link
	for _, byIndex := range w.links {
		ls = append(ls, byIndex...)
	}
	lns := w.listenersLocked()
	w.mu.Unlock()
	for _, l := range ls {
		l.refresh()
	}
	for _, ln := range lns {
		ln.call(Event{Resync: true})
	}
}

func (w *watcher) listenersLocked() []*listener {
	out := make([]*listener, 0, len(w.listeners))
	for ln := range w.listeners {
		out = append(out, ln)
	}
	return out
}

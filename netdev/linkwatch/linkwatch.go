// Package linkwatch follows the state of kernel network interfaces through
// one rtnetlink subscription per process: operational state, MTU and
// removal. Port drivers ask it instead of polling the kernel per packet.
package linkwatch

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Link is the watched state of one interface. Its methods are safe for
// concurrent use and cost one atomic load.
type Link struct {
	Name    string
	Index   int
	up      atomic.Bool
	mtu     atomic.Int32
	removed chan struct{}
	once    sync.Once
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
}

type watcher struct {
	mu      sync.Mutex
	links   map[int][]*Link // by ifindex
	started bool
	done    chan struct{}
}

var w = &watcher{links: map[int][]*Link{}}

// Watch starts following interface name. Call Stop on the result when the
// port goes away.
func Watch(name string) (*Link, error) {
	if err := w.start(); err != nil {
		return nil, err
	}
	nl, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("linkwatch: %s: %w", name, err)
	}
	attrs := nl.Attrs()
	l := &Link{Name: name, Index: attrs.Index, removed: make(chan struct{})}
	l.update(attrs)
	w.mu.Lock()
	w.links[l.Index] = append(w.links[l.Index], l)
	w.mu.Unlock()
	// The link may have changed between the lookup and the registration.
	if nl, err := netlink.LinkByIndex(l.Index); err != nil {
		l.markRemoved()
	} else {
		l.update(nl.Attrs())
	}
	return l, nil
}

// Stop stops following l.
func (l *Link) Stop() {
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

func (w *watcher) start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil
	}
	ch := make(chan netlink.LinkUpdate, 256)
	w.done = make(chan struct{})
	if err := netlink.LinkSubscribeWithOptions(ch, w.done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(error) {}, // a lost message is corrected by the next update
	}); err != nil {
		return fmt.Errorf("linkwatch: subscribe: %w", err)
	}
	w.started = true
	go w.loop(ch)
	return nil
}

func (w *watcher) loop(ch <-chan netlink.LinkUpdate) {
	for u := range ch {
		attrs := u.Attrs()
		if attrs == nil {
			continue
		}
		w.mu.Lock()
		ls := append([]*Link(nil), w.links[attrs.Index]...)
		w.mu.Unlock()
		for _, l := range ls {
			if u.Header.Type == unix.RTM_DELLINK {
				l.markRemoved()
			} else {
				l.update(attrs)
			}
		}
	}
	// The subscription ended (socket error): let the next Watch restart it.
	w.mu.Lock()
	w.started = false
	w.mu.Unlock()
}

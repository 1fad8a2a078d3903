package vswitchd

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/netdev/linkwatch"
	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// Interfaces that come back.
//
// When a port's kernel interface disappears the datapath stops the port
// (bridge.portRemoved) but it stays configured; a port added before its
// interface exists is configured and not running the same way
// (openPorts). Like Open vSwitch, the
// daemon then follows rtnetlink link events (linkwatch.Listen, the
// subscription the port drivers use too): when an interface that a
// configured kernel port names appears (created again, moved into our
// namespace or renamed to that name) and the port does not run, the
// daemon reconciles that bridge exactly as a configuration change does
// (bridge.update retries configured ports that do not run), so the port
// reopens under its configured OpenFlow number and ofproto announces it
// with PORT_STATUS ADD.
//
// The watcher's goroutine only filters events against a lock-free set of
// watched names and notes the name; a second goroutine waits for the burst
// to settle (creating a veth pair and configuring it emits several events)
// and takes d.mu once for the reconcile, for as long as a configuration
// change would hold it.

const (
	// ifQuiet is how long interface events must pause before the daemon
	// reconciles: a veth pair being created and set up emits a burst.
	ifQuiet = 200 * time.Millisecond
	// ifMaxDelay bounds the wait under a stream of events that never
	// pauses, so a port still comes back.
	ifMaxDelay = 2 * time.Second
	// ifRetryFirst and ifRetryMax bound the pause after a port whose
	// interface is there could not be reopened: it doubles with each
	// failure. Opening a port changes its link (an XDP program, promiscuous
	// mode), which is itself a link event, so without the pause a port
	// that cannot open would be retried, and logged, at every burst.
	ifRetryFirst = time.Second
	ifRetryMax   = 32 * time.Second
)

// listenLinks follows link events; a variable so that a test can make the
// subscription fail, as it does in sandboxes that refuse netlink sockets.
var listenLinks = linkwatch.Listen

// ifWatch is the daemon's state for interfaces that come back.
type ifWatch struct {
	// names maps the interface name of each configured kernel port to the
	// bridges that have it. It is rebuilt by publish (d.mu held) and read
	// without a lock by the watcher's goroutine.
	names atomic.Pointer[map[string][]string]
	// resyncs counts the Resync events: all but the first mean events
	// were lost.
	resyncs atomic.Uint64

	mu sync.Mutex
	// pending are the names seen since the last reconcile; all asks for
	// every watched name (after events may have been missed).
	pending map[string]struct{}
	all     bool
	// noted counts notes; handled is the count the last finished
	// reconcile took, so noted == handled means nothing is outstanding.
	noted, handled uint64
	// kick wakes the reconciler; one buffered token is enough since it
	// takes everything pending.
	kick chan struct{}
}

func newIfWatch() *ifWatch {
	w := &ifWatch{pending: map[string]struct{}{}, kick: make(chan struct{}, 1)}
	w.names.Store(&map[string][]string{})
	return w
}

// note records that interface name may have come back.
func (w *ifWatch) note(name string) {
	w.mu.Lock()
	w.pending[name] = struct{}{}
	w.noted++
	w.mu.Unlock()
	w.wake()
}

// noteAll asks for every watched name to be checked.
func (w *ifWatch) noteAll() {
	w.mu.Lock()
	w.all = true
	w.noted++
	w.mu.Unlock()
	w.wake()
}

func (w *ifWatch) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// take returns and clears what is pending, and the note count it covers.
func (w *ifWatch) take() (names map[string]struct{}, all bool, upTo uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	names, all = w.pending, w.all
	w.pending, w.all = map[string]struct{}{}, false
	return names, all, w.noted
}

// done records that the notes up to upTo have been handled.
func (w *ifWatch) done(upTo uint64) {
	w.mu.Lock()
	w.handled = upTo
	w.mu.Unlock()
}

// idle reports whether every note so far has been handled.
func (w *ifWatch) idle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.noted == w.handled
}

// kernelPortType reports whether ports of type t drive an interface that
// someone else creates. Tap and internal ports create their own device:
// one deleted from outside comes back at the next configuration change or
// restart, not when some other interface takes its name.
func kernelPortType(t string) bool {
	switch t {
	case config.PortTypeAuto, config.PortTypeAFXDP, config.PortTypeAFPacket:
		return true
	}
	return false
}

// publishWatchedNames rebuilds the set of watched interface names from the
// running bridges' configuration (d.mu held).
func (d *Daemon) publishWatchedNames() {
	m := map[string][]string{}
	for _, bname := range slices.Sorted(maps.Keys(d.bridges)) {
		for pname, pc := range d.bridges[bname].cfg.Ports {
			if kernelPortType(pc.Type) {
				m[pname] = append(m[pname], bname)
			}
		}
	}
	d.ifw.names.Store(&m)
}

// watchLinks follows link events until the daemon stops. A subscription
// that cannot be made is logged and the daemon runs on without it; one
// lost later (the socket overran) linkwatch makes again, and the Resync it
// sends then has every port checked, since events were missed.
func (d *Daemon) watchLinks() {
	defer d.wg.Done()
	stop, err := listenLinks(d.linkEvent)
	if err != nil {
		d.log.Warn("interface events not followed: a port whose interface comes back restarts only at the next configuration change", "err", err)
		return
	}
	<-d.stop
	stop()
}

// linkEvent notes a new or changed interface that a configured kernel
// port names, or every one after a Resync (the first comes as the daemon
// starts listening: whatever appeared before). It runs on the watcher's
// goroutine: no lock but the note's.
func (d *Daemon) linkEvent(ev linkwatch.Event) {
	switch {
	case ev.Resync:
		if d.ifw.resyncs.Add(1) > 1 && d.log != nil {
			d.log.Warn("interface events lost; the subscription was made again and every port is checked")
		}
		d.ifw.noteAll()
	case ev.Removed:
	default:
		if _, ok := (*d.ifw.names.Load())[ev.Name]; ok {
			d.ifw.note(ev.Name)
		}
	}
}

// reviveLoop reconciles the bridges whose ports' interfaces came back,
// once each burst of events has settled, and retries ports that failed to
// reopen once their pause is over.
func (d *Daemon) reviveLoop() {
	defer d.wg.Done()
	retries := map[string]*reviveRetry{}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-d.ifw.kick:
		case <-retry.C:
			now := time.Now()
			for name, r := range retries {
				if !now.Before(r.next) {
					d.ifw.note(name)
				}
			}
			continue // the note's kick starts the wait for quiet
		}
		if !debounce(d.stop, d.ifw.kick, ifQuiet, ifMaxDelay) {
			return
		}
		names, all, upTo := d.ifw.take()
		n := d.revivePorts(names, all, retries, time.Now())
		d.log.Debug("interfaces checked", "names", slices.Sorted(maps.Keys(names)), "all", all, "restarted", n)
		if n > 0 {
			d.refreshDB(slices.Collect(maps.Keys(names)))
		}
		d.ifw.done(upTo)
		retry.Stop()
		if len(retries) > 0 {
			next := time.Time{}
			for _, r := range retries {
				if next.IsZero() || r.next.Before(next) {
					next = r.next
				}
			}
			retry.Reset(time.Until(next))
		}
	}
}

// reviveRetry is the pause of a port that failed to reopen.
type reviveRetry struct {
	failures int
	next     time.Time
}

// debounce returns once no kick has come for quiet, or limit after it
// was called, whichever is first; false if stop closed first.
func debounce(stop <-chan struct{}, kick <-chan struct{}, quiet, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	t := time.NewTimer(min(quiet, limit))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-kick:
			t.Reset(min(quiet, time.Until(deadline)))
		case <-t.C:
			return true
		}
	}
}

// revivePorts reopens the configured kernel ports among names (every one
// with all) that do not run although their interface exists, through the
// configuration path: each affected bridge is updated to its stored
// configuration, which retries the ports that do not run. Which ports
// qualify is found without d.mu, so events about running ports or absent
// interfaces never take it. A port that failed to reopen waits out its
// pause in retries (owned by the caller) first. It returns how many ports
// it restarted.
func (d *Daemon) revivePorts(names map[string]struct{}, all bool, retries map[string]*reviveRetry, now time.Time) (restarted int) {
	watched := *d.ifw.names.Load()
	for name := range retries {
		if _, ok := watched[name]; !ok {
			delete(retries, name) // no longer configured
		}
	}
	want := map[string][]string{} // bridge → ports to revive
	for name, bridges := range watched {
		if _, ok := names[name]; !ok && !all {
			continue
		}
		for _, bname := range bridges {
			b := d.runningBridge(bname)
			if b == nil {
				continue
			}
			if b.portByName(name) != nil || interfaceExists(name) != nil {
				delete(retries, name) // a new interface starts afresh
				continue
			}
			if r := retries[name]; r != nil && now.Before(r.next) {
				continue
			}
			want[bname] = append(want[bname], name)
		}
	}
	if len(want) == 0 {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	defer d.publish()
	c := d.store.Get()
	for _, bname := range slices.Sorted(maps.Keys(want)) {
		b, nb := d.bridges[bname], c.Bridges[bname]
		if b == nil || nb == nil || b.needsRebuild(c, nb) {
			// Deleted or changed since the check: the change that did it
			// has reconciled the bridge already.
			continue
		}
		if err := b.update(c, nb); err != nil {
			d.log.Warn("ports not reconciled after an interface came back", "bridge", bname, "err", err)
		}
		for _, name := range want[bname] {
			p := b.portByName(name)
			if p == nil {
				r := retries[name]
				if r == nil {
					r = &reviveRetry{}
					retries[name] = r
				}
				r.failures++
				r.next = now.Add(min(ifRetryFirst<<min(r.failures-1, 6), ifRetryMax))
				continue
			}
			delete(retries, name)
			restarted++
			d.log.Info("interface reappeared; port restarted", "bridge", bname, "port", name, "ofport", p.no, "driver", p.driver)
		}
	}
	return restarted
}

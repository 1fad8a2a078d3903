// Package ovsdb makes the daemon an OVSDB client of the Open_vSwitch
// database, as ovs-vswitchd is: the real ovs-vsctl writes the database,
// the reconciler makes the switch follow it and writes back what runs.
//
// It is level-triggered: any change of the monitored rows (and a slow
// tick, for run-time state such as a port whose interface appeared) makes
// it read the whole cache, compute the wanted configuration and apply it
// if it differs from the last one applied; then it writes back, in one
// transaction and only where a value changed, cur_cfg (which ovs-vsctl
// waits for), the ports' ofport and errors, and the other run-time
// columns. Its own write comes back as a monitor update, finds nothing
// to apply nor to write, and so ends there.
//
// While the database is away the switch keeps running its last
// configuration; the client reconnects with backoff and reconciles again.
package ovsdb

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// Timing of the loop. resync catches run-time changes no row reports.
const (
	resync = time.Second
	// settleYields is how many times in a row the loop, woken by a
	// change, yields the processor without a further change arriving
	// before it reads the database, so that the events of one update
	// (one per row, delivered one after the other by libovsdb) start one
	// pass, not two. No timer: a server sends a transaction's changes as
	// one update, applied to the cache under its lock, which the pass's
	// read waits for, so the read has them all however early it starts;
	// the 2 ms debounce that waited for "the rest of a burst" was a
	// tenth of an add-port (a 2 ms timer sleeps 2-3, more when the
	// runtime's poller rounds it up).
	settleYields = 16
	// statsInterval is how often Interface statistics are written, as
	// ovs-vswitchd's default other_config:stats-update-interval: each
	// write is a transaction every client monitoring Interface receives.
	statsInterval = 5 * time.Second
	// fullResync is how often a pass reads and plans the whole database
	// although no update said it changed (a pass in between only writes
	// back what runs, against the rows as the last pass left them): a
	// read and plan of 1,000 ports every second was a third of an idle
	// switch's CPU.
	fullResync = 10 * time.Second
	// maxDangling is how long a reference to a row not in the cache
	// waits for it before the rest applies without it.
	maxDangling = 2 * time.Second
	// opTimeout bounds one read or transaction against the server.
	opTimeout = 10 * time.Second
)

// Reconciler keeps a Switch equal to an Open_vSwitch database.
type Reconciler struct {
	endpoint string
	sw       Switch
	log      *slog.Logger
	cli      client.Client

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	// first is closed once the first pass has run (FirstPass).
	first chan struct{}

	// applied is the last configuration applied (flows aside), so that
	// an update that changes nothing the switch runs applies nothing.
	applied *config.Config
	// appliedTimeouts are the zones' timeout policies last applied.
	appliedTimeouts map[uint16]conntrack.Timeouts
	// lastErr is, per Interface UUID, the refusal of the last apply.
	lastErr map[string]string
	// logged are the refusals last logged.
	logged []string
	// statsAt is when statistics were last written.
	statsAt time.Time
	// danglingSince is when reads started to find references to rows
	// not read (zero while they resolve).
	danglingSince time.Time
	// changed is set by every update of the monitored rows that is not
	// the write-back's own echo (and at connection): the next pass reads
	// and plans the database. rows and plan are the last pass's, which
	// a pass without a change writes back against (the write-back
	// keeps rows as it left them in the database); fullAt is when they
	// were read.
	changed atomic.Bool
	rows    *dbconfig.Rows
	plan    *dbconfig.Plan
	fullAt  time.Time
	// noCommitOp is set once the server refused the write-back's
	// commit operation (writeBack).
	noCommitOp bool

	mu sync.Mutex
	// reconciles counts passes that applied a configuration, writes the
	// write-back transactions, passes every pass, reads the passes that
	// read the database: for tests.
	reconciles, writes, passes, reads int
}

// Start connects to the database at endpoint ("unix:PATH", "tcp:IP:PORT")
// in the background and keeps sw following it until Close. A server that
// is not there yet is waited for: the switch runs its last configuration
// meanwhile.
func Start(endpoint string, sw Switch, log *slog.Logger) (*Reconciler, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dbModel, err := vswitchdb.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 100 * time.Millisecond
	bo.MaxInterval = 4 * time.Second
	bo.MaxElapsedTime = 0 // never give up: the switch outlives its database
	// libovsdb's own log is verbose at every level; warnings and errors
	// reach the daemon's log.
	lg := logr.FromSlogHandler(log.With("component", "ovsdb").Handler()).V(0)
	cli, err := client.NewOVSDBClient(dbModel, client.WithEndpoint(endpoint),
		client.WithReconnect(opTimeout, bo), client.WithLogger(&lg))
	if err != nil {
		return nil, fmt.Errorf("ovsdb: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reconciler{endpoint: endpoint, sw: sw, log: log, cli: cli, kick: make(chan struct{}, 1),
		cancel: cancel, done: make(chan struct{}), first: make(chan struct{}), lastErr: map[string]string{}}
	go r.run(ctx)
	return r, nil
}

// FirstPass is closed once the reconciler has made its first pass over the
// database (applied it, or found why not).
func (r *Reconciler) FirstPass() <-chan struct{} { return r.first }

// Endpoint is the database the reconciler follows.
func (r *Reconciler) Endpoint() string { return r.endpoint }

// Refresh asks for a pass soon: something the write-back reports changed
// without the database changing (a port's interface came or went), and
// ovs-vsctl readers should see it before the next periodic pass.
func (r *Reconciler) Refresh() { r.poke() }

// pokeChanged asks for a pass that reads the database again: rows
// changed. The flag is set before the kick, and the cache holds the
// change before its handlers run, so the pass the kick starts reads it.
func (r *Reconciler) pokeChanged() {
	r.changed.Store(true)
	r.poke()
}

func (r *Reconciler) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Close stops the loop, then disconnects; the switch keeps its
// configuration. A call in flight is let finish first (callCtx), and the
// client is closed only once the loop is out of it: libovsdb v0.8.1
// races with a connect or monitor being set up when its client is closed.
func (r *Reconciler) Close() {
	r.cancel()
	<-r.done
	r.cli.Close()
}

// callCtx bounds one call to the server. It is not derived from the
// loop's context: libovsdb v0.8.1 lets a call whose context is cancelled
// return while its reply is still being decoded into the caller's
// variables (a data race the race detector caught at Close), so a call
// ends with its answer or its timeout, never by cancellation; Close may
// wait for it that long when the server does not answer.
func callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// run connects (retrying until it succeeds), monitors the tables, then
// reconciles on every kick and tick.
func (r *Reconciler) run(ctx context.Context) {
	defer close(r.done)
	if !r.connect(ctx) {
		return
	}
	tick := time.NewTicker(resync)
	defer tick.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			r.settle()
		case <-tick.C:
		}
		if !r.cli.Connected() {
			continue // the client reconnects; its cache refill kicks us
		}
		// A lasting condition (no Open_vSwitch row before ovs-vsctl
		// init) is logged once, not at every tick.
		err := r.reconcile(ctx)
		r.mu.Lock()
		r.passes++
		if r.passes == 1 {
			close(r.first)
		}
		r.mu.Unlock()
		switch {
		case ctx.Err() != nil:
		case err != nil && err.Error() != lastErr:
			r.log.Warn("ovsdb reconcile", "err", err)
			lastErr = err.Error()
		case err == nil && lastErr != "":
			r.log.Info("ovsdb reconcile succeeds again")
			lastErr = ""
		}
	}
}

// settle lets the rest of the events of the update that kicked the loop
// arrive (settleYields), taking their kicks, for at most a millisecond.
func (r *Reconciler) settle() {
	deadline := time.Now().Add(time.Millisecond)
	for quiet := 0; quiet < settleYields && time.Now().Before(deadline); quiet++ {
		runtime.Gosched()
		select {
		case <-r.kick:
			quiet = -1
		default:
		}
	}
}

// connect makes the first connection, with backoff; later ones are the
// client's (WithReconnect), monitors included.
func (r *Reconciler) connect(ctx context.Context) bool {
	wait := 100 * time.Millisecond
	logged := false
	for {
		cctx, cancel := callCtx()
		err := r.cli.Connect(cctx)
		cancel()
		if err == nil {
			break
		}
		if !logged {
			r.log.Warn("ovsdb: cannot connect, retrying; the switch runs its last configuration", "db", r.endpoint, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
	// The cache exists once connected, and lives across reconnections.
	r.cli.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(string, model.Model) { r.pokeChanged() },
		UpdateFunc: func(_ string, old, new model.Model) {
			if !runtimeOnly(old, new) {
				r.pokeChanged()
			}
		},
		DeleteFunc: func(string, model.Model) { r.pokeChanged() },
	})
	for {
		mctx, cancel := callCtx()
		_, err := r.cli.Monitor(mctx, r.cli.NewMonitor(
			client.WithTable(&vswitchdb.OpenvSwitch{}),
			client.WithTable(&vswitchdb.Bridge{}),
			client.WithTable(&vswitchdb.Port{}),
			client.WithTable(&vswitchdb.Interface{}),
			client.WithTable(&vswitchdb.Controller{}),
			client.WithTable(&vswitchdb.SSL{}),
			client.WithTable(&vswitchdb.Datapath{}),
			client.WithTable(&vswitchdb.CTZone{}),
			client.WithTable(&vswitchdb.CTTimeoutPolicy{}),
		))
		cancel()
		if err == nil {
			break
		}
		r.log.Warn("ovsdb: monitor failed, retrying", "db", r.endpoint, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
	// libovsdb refused to connect had a column of the models been
	// missing from the server's schema; a newer schema only adds what
	// this switch does not know.
	r.log.Info("ovsdb: connected, following the database", "db", r.endpoint,
		"schema", r.cli.Schema().Version, "models-schema", modelsSchemaVersion())
	r.pokeChanged()
	return true
}

// logProblems logs what the database asks for that the switch refuses,
// each time that list changes: ovs-vsctl points its user to this log.
func (r *Reconciler) logProblems(rs *dbconfig.Rows, p *dbconfig.Plan) {
	msgs := slices.Clone(p.Problems)
	for u, why := range p.IfaceErr {
		if i := rs.Ifaces[u]; i != nil {
			msgs = append(msgs, fmt.Sprintf("interface %q not applied: %s", i.Name, why))
		}
	}
	slices.Sort(msgs)
	if slices.Equal(msgs, r.logged) {
		return
	}
	r.logged = msgs
	for _, m := range msgs {
		r.log.Warn("ovsdb: " + m)
	}
}

// reconcile is one pass: read, apply if the wanted configuration
// changed, write back.
func (r *Reconciler) reconcile(ctx context.Context) error {
	if !r.changed.Swap(false) && r.rows != nil && time.Since(r.fullAt) < fullResync {
		wctx, cancel := callCtx()
		defer cancel()
		return r.writeBack(wctx, r.rows, r.plan)
	}
	fullAt := time.Now()
	r.mu.Lock()
	r.reads++
	r.mu.Unlock()
	rs, err := dbconfig.ReadShared(ctx, r.cli)
	if err != nil {
		r.changed.Store(true) // read again at the next pass
		return err
	}
	if missing := rs.Dangling(); missing == "" {
		r.danglingSince = time.Time{}
	} else if r.danglingSince.IsZero() || time.Since(r.danglingSince) < maxDangling {
		// A read between two notifications of one change (rows
		// referenced before they arrived): read again shortly rather
		// than apply, and report as applied, half of it.
		if r.danglingSince.IsZero() {
			r.danglingSince = time.Now()
		}
		r.log.Debug("ovsdb: incomplete read, reading again", "missing", missing)
		r.pokeChanged()
		return nil
	} else {
		// Not a torn read but a reference that stays unresolved: apply
		// what resolves rather than stall every change behind it.
		r.log.Warn("ovsdb: a referenced row is missing; applying the rows that are there", "missing", missing)
	}
	p := dbconfig.Wanted(rs)
	ctTimeouts := zoneTimeouts(rs, p)
	r.logProblems(rs, p)
	if !reflect.DeepEqual(p.Config, r.applied) {
		r.lastErr = r.apply(p)
		r.applied = p.Config
		r.mu.Lock()
		r.reconciles++
		r.mu.Unlock()
	}
	if !maps.Equal(ctTimeouts, r.appliedTimeouts) || r.appliedTimeouts == nil {
		r.sw.SetZoneTimeouts(ctTimeouts)
		r.appliedTimeouts = ctTimeouts
	}
	for u, e := range r.lastErr {
		if _, ok := p.IfaceErr[u]; !ok {
			p.IfaceErr[u] = e
		}
	}
	r.rows, r.plan, r.fullAt = rs, p, fullAt
	wctx, cancel := callCtx()
	defer cancel()
	return r.writeBack(wctx, rs, p)
}

// apply makes the switch run p's configuration, keeping each bridge's
// flows, groups and meters (they are not in the database). When the
// switch refuses the whole (a port that cannot open, an ofport_request
// taken twice), it applies what it can: first the configuration with
// every new or changed port as it ran before (if that too is refused:
// the switch-wide settings, then each bridge, alone), then each of those
// ports alone, so that only the refused rows are left out. It returns,
// per Interface UUID, why its port was left out.
func (r *Reconciler) apply(p *dbconfig.Plan) map[string]string {
	errs := map[string]string{}
	err := r.sw.Reconcile(func(c *config.Config) error { config.Replace(c, p.Config); return nil })
	if err == nil {
		return errs
	}
	r.log.Warn("ovsdb: configuration refused as a whole, applying it row by row", "err", err)
	cur := r.sw.Config()
	base := p.Config.Clone()
	type pending struct {
		bridge string
		port   *config.Port
	}
	var todo []pending
	for _, bname := range sortedKeys(base.Bridges) {
		b := base.Bridges[bname]
		for _, pname := range sortedKeys(b.Ports) {
			port := b.Ports[pname]
			var was *config.Port
			if cb := cur.Bridges[bname]; cb != nil {
				was = cb.Ports[pname]
			}
			if was != nil && samePort(was, port) {
				continue
			}
			todo = append(todo, pending{bname, port})
			if was != nil {
				b.Ports[pname] = was
			} else {
				delete(b.Ports, pname)
			}
		}
	}
	failedBridge := map[string]string{}
	if err := r.sw.Reconcile(func(c *config.Config) error { config.Replace(c, base); return nil }); err != nil {
		failedBridge = r.applyBridges(base, cur)
	}
	failed := map[string]string{}
	for _, t := range todo {
		if e, ok := failedBridge[t.bridge]; ok {
			failed[t.bridge+"\x00"+t.port.Name] = e
			continue
		}
		err := r.sw.Reconcile(func(c *config.Config) error {
			if b := c.Bridges[t.bridge]; b != nil {
				if b.Ports == nil {
					b.Ports = map[string]*config.Port{}
				}
				b.Ports[t.port.Name] = t.port.Clone()
			}
			return nil
		})
		if err != nil {
			failed[t.bridge+"\x00"+t.port.Name] = err.Error()
			r.log.Warn("ovsdb: port not applied", "bridge", t.bridge, "port", t.port.Name, "err", err)
		}
	}
	for u, ref := range p.IfaceAt {
		if e, ok := failedBridge[ref.Bridge]; ok {
			errs[u] = e
		} else if e, ok := failed[ref.Bridge+"\x00"+ref.Port]; ok {
			errs[u] = e
		}
	}
	return errs
}

// applyBridges applies base in steps, when even its ports as they ran
// are refused together: the switch-wide settings (a pmd-cpu-mask this
// machine refuses keeps the running one), then each bridge alone, added,
// changed or deleted. It returns why each bridge refused was left out.
func (r *Reconciler) applyBridges(base, cur *config.Config) map[string]string {
	if err := r.sw.Reconcile(func(c *config.Config) error {
		c.OtherConfig, c.SSL = maps.Clone(base.OtherConfig), base.SSL
		return nil
	}); err != nil {
		r.log.Warn("ovsdb: switch settings refused; the running ones stay", "err", err)
	}
	failed := map[string]string{}
	names := sortedKeys(base.Bridges)
	for _, name := range sortedKeys(cur.Bridges) {
		if base.Bridges[name] == nil {
			names = append(names, name)
		}
	}
	for _, name := range names {
		want := base.Bridges[name]
		err := r.sw.Reconcile(func(c *config.Config) error {
			if want == nil {
				delete(c.Bridges, name)
				return nil
			}
			if c.Bridges == nil {
				c.Bridges = map[string]*config.Bridge{}
			}
			c.Bridges[name] = want.Clone()
			return nil
		})
		if err != nil {
			failed[name] = err.Error()
			r.log.Warn("ovsdb: bridge not applied", "bridge", name, "err", err)
		}
	}
	return failed
}

// samePort compares the settings the database gives (not the number the
// store assigns).
func samePort(a, b *config.Port) bool {
	a, b = a.Clone(), b.Clone()
	a.OFPort, b.OFPort = 0, 0
	return reflect.DeepEqual(a, b)
}

// passCount counts the passes made, whatever their outcome.
func (r *Reconciler) passCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.passes
}

// Stats counts the passes that applied a configuration and the
// write-back transactions.
func (r *Reconciler) Stats() (reconciles, writes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reconciles, r.writes
}

// Package datapath is the switch's fast path: poll-mode goroutines (PMDs)
// that receive batches from netdev ports, classify each packet through a
// per-PMD exact-match cache and megaflow classifier (asking the Upcaller on a
// miss), execute the megaflow's actions and queue the outputs in per-port
// batches that are sent by the tx-flush-interval rule (docs/architecture.md,
// "Output batching").
package datapath

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/datapath/ipf"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/classifier"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
)

// Limits and defaults.
const (
	// MaxPorts bounds datapath port numbers (1 .. MaxPorts-1, and
	// LocalPort); PMDs index their output batches by port number.
	MaxPorts = 1 << 16
	// LocalPort is the number of the bridge's own interface, OpenFlow's
	// OFPP_LOCAL, so that rules, megaflows and actions name it as
	// OpenFlow does. Port-indexed tables keep it at index 0, which no
	// other port has.
	LocalPort = 0xfffffffe
	// MaxTxFlushInterval is the largest tx-flush-interval, in microseconds.
	MaxTxFlushInterval = 1_000_000
	// TxFlushAuto, given as a tx-flush-interval, lets each PMD choose
	// every port's interval from its traffic (see autoInterval).
	TxFlushAuto = -2
	// DefaultPMDSleepMax is the default pmd-sleep-max, in microseconds.
	DefaultPMDSleepMax = 100
	// MaxPMDSleepMax is the largest pmd-sleep-max SetPMDSleepMax accepts,
	// in microseconds (OVS's bound too: a longer sleep is a latency bug,
	// not a power setting).
	MaxPMDSleepMax = 10_000
	// DefaultFlowLimit is the default number of megaflows per PMD.
	DefaultFlowLimit = 200_000
	// DefaultPoolSize is the default number of packet buffers per PMD.
	DefaultPoolSize = 4096
)

// Config is the datapath's configuration. Zero values select defaults.
type Config struct {
	// Conntrack is the connection tracker CT actions use: datapaths that
	// share one (the bridges of one switch, as Open vSwitch's userspace
	// datapath holds every bridge) see each other's connections. New
	// makes one of its own when nil.
	Conntrack *conntrack.Tracker
	// Fragments are the fragment reassembly settings, shared like
	// Conntrack; New makes its own when nil.
	Fragments *ipf.Settings

	// NumPMDs is the number of PMD goroutines (default 1).
	NumPMDs int
	// CPUs, if set, pins PMD i to CPUs[i % len(CPUs)] (pmd-cpu-mask).
	CPUs []int
	// PMDSleepMax is how long, in microseconds, an idle PMD may sleep at a
	// time; 0 means busy polling. Negative selects DefaultPMDSleepMax.
	PMDSleepMax int
	// TxFlushInterval is the switch-wide tx-flush-interval in microseconds
	// (0 .. MaxTxFlushInterval), or TxFlushAuto.
	TxFlushInterval int
	// EMCEntries is the EMC size per PMD (power of two; default
	// classifier.DefaultEMCEntries).
	EMCEntries int
	// EMCInsertInvProb is emc-insert-inv-prob: 1 inserts every miss into
	// the EMC, N one in N on average; 0 selects 100 (OVS's default).
	EMCInsertInvProb int
	// EMCOff disables the EMC (what emc-insert-inv-prob=0 means in OVS).
	EMCOff bool
	// NoCoalesce turns off the merging of consecutive TCP segments into
	// GSO frames for ports that take them (coalesce.go).
	NoCoalesce bool
	// FlowLimit bounds megaflows per PMD (default DefaultFlowLimit).
	FlowLimit int
	// PoolSize is the packet buffers per PMD (default DefaultPoolSize).
	PoolSize int
	// Upcall translates cache misses. Nil drops every miss.
	Upcall Upcaller
	// Clock returns monotonic nanoseconds; nil uses the runtime's clock.
	// Tests substitute a fake one.
	Clock func() int64
	// Manual creates the PMDs without goroutines: the caller drives them
	// with PMD.PollOnce (deterministic tests and benchmarks).
	Manual bool
	// AssignRxqs distributes receive queues over PMDs; nil is RoundRobin.
	AssignRxqs func(rxqs []RxqRef, npmd int) [][]RxqRef
	// PackedSharedState lays out per-PMD shared counters back to back
	// instead of one cache line apart. Only for the benchmark that shows
	// the cost of false sharing.
	PackedSharedState bool
	// ControllerQueueDepth is the depth of the to-controller queue (default 1024).
	ControllerQueueDepth int
	// OnPortRemoved, if set, is called (from its own goroutine) after a
	// port whose interface disappeared has been removed.
	OnPortRemoved func(no uint32, name string)
}

// Port is a port of the datapath.
type Port struct {
	No  uint32
	Dev netdev.Netdev

	txqLocks sharedSlab[TxqLock]
	tx       sharedSlab[txCounters] // one block per PMD
	txSizes  sharedSlab[txBatchSizes]
	// rxq holds one block per rx queue, written by whichever PMD polls the
	// queue, so a queue's history follows it when it moves to another PMD.
	rxq sharedSlab[rxqCounters]
	// rxqBase is each rx queue's busy time at the last rebalance; guarded
	// by Datapath.mu.
	rxqBase []uint64
	// flushInterval overrides the datapath's tx-flush-interval for this
	// port (microseconds, or TxFlushAuto); -1 means "use the datapath's".
	flushInterval int
	// gone is closed when the port leaves the datapath, which ends the
	// wait for its interface's removal (removeWhenGone).
	gone chan struct{}
}

// Datapath owns the ports and the PMDs.
type Datapath struct {
	cfg   Config
	clock func() int64

	mu sync.Mutex // serialises configuration changes
	// batching counts the Batch calls in progress; replanPending is set
	// when a change inside one deferred the PMDs' new plans to its end.
	batching      int
	replanPending bool
	ports         map[uint32]*Port
	portSnap      atomic.Pointer[[]*Port] // sorted copy of ports for lock-free readers
	flushUs       int
	sleepUs       int
	// flowLimit and emcInvProb are flow-limit and emc-insert-inv-prob
	// (0: the EMC off) as the PMDs' plans carry them.
	flowLimit  int
	emcInvProb int
	// probeEvery is latency-probe (0: off); probeOffset turns the
	// datapath's clock into CLOCK_MONOTONIC for marked probe packets.
	probeEvery  int
	probeOffset int64
	seq         uint64 // plan sequence number
	running     bool
	closed      bool
	wg          sync.WaitGroup
	// assign is the rx queue assignment the PMDs run; assignSnap is a
	// copy for lock-free readers.
	assign     [][]RxqRef
	assignSnap atomic.Pointer[[][]RxqRef]
	// pinned holds the PMD RebalanceRxqs chose for each rx queue; it
	// overrides AssignRxqs until the queue's port goes away.
	pinned map[RxqRef]int
	// affinity holds the PMD SetRxqAffinity put each rx queue on, for as
	// long as the port keeps it; a PMD with such a queue polls no other
	// (it is isolated), unless every PMD is.
	affinity map[RxqRef]int

	pmds   []*PMD
	pmdCnt sharedSlab[pmdCounters]
	ctrlq  *ControllerQueue
	meters meterTable // see meter.go
	ct     *conntrack.Tracker
	ipf    *ipf.Settings

	// generation is bumped when the rules behind the megaflows change; each
	// PMD compares it with the one its caches were built under.
	_          [CacheLine]byte
	generation atomic.Uint64
	_          [CacheLine - 8]byte
}

// New creates a datapath. Its PMDs start with Start (or are driven by
// PollOnce in Manual mode).
func New(cfg Config) (*Datapath, error) {
	if cfg.NumPMDs <= 0 {
		cfg.NumPMDs = 1
	}
	if cfg.PMDSleepMax < 0 {
		cfg.PMDSleepMax = DefaultPMDSleepMax
	}
	if err := checkFlushInterval(cfg.TxFlushInterval); err != nil {
		return nil, err
	}
	if cfg.EMCEntries <= 0 {
		cfg.EMCEntries = classifier.DefaultEMCEntries
	}
	if cfg.EMCEntries&(cfg.EMCEntries-1) != 0 {
		return nil, fmt.Errorf("datapath: EMC size %d is not a power of two", cfg.EMCEntries)
	}
	if cfg.EMCInsertInvProb < 0 {
		return nil, fmt.Errorf("datapath: emc-insert-inv-prob %d is negative", cfg.EMCInsertInvProb)
	}
	if cfg.EMCInsertInvProb == 0 {
		cfg.EMCInsertInvProb = classifier.DefaultEMCInsertInvProb
	}
	if cfg.EMCOff {
		cfg.EMCInsertInvProb = 0
	}
	if cfg.FlowLimit <= 0 {
		cfg.FlowLimit = DefaultFlowLimit
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = DefaultPoolSize
	}
	if cfg.AssignRxqs == nil {
		cfg.AssignRxqs = RoundRobin
	}
	if cfg.ControllerQueueDepth <= 0 {
		cfg.ControllerQueueDepth = 1024
	}
	dp := &Datapath{
		cfg:     cfg,
		clock:   cfg.Clock,
		ports:   make(map[uint32]*Port),
		flushUs: cfg.TxFlushInterval,
		sleepUs: cfg.PMDSleepMax,
		// The cfg fields stay what New was given; the Set methods change
		// these.
		flowLimit:  cfg.FlowLimit,
		emcInvProb: cfg.EMCInsertInvProb,
		pmdCnt:     newSharedSlab[pmdCounters](cfg.NumPMDs, cfg.PackedSharedState),
		ctrlq:      NewControllerQueue(cfg.ControllerQueueDepth, packet.DefaultBufSize),
		ct:         cfg.Conntrack,
		ipf:        cfg.Fragments,
	}
	if dp.ct == nil {
		dp.ct = conntrack.New()
	}
	if dp.ipf == nil {
		dp.ipf = ipf.NewSettings()
	}
	if dp.clock == nil {
		dp.clock = monotonicNow
	}
	for i := 0; i < cfg.NumPMDs; i++ {
		dp.pmds = append(dp.pmds, newPMD(dp, i))
	}
	dp.reconfigure()
	return dp, nil
}

var clockBase = time.Now()

// Now is the time on the default datapath clock (Config.Clock unset),
// in nanoseconds: the clock connection timeouts run on.
func Now() int64 { return monotonicNow() }

// monotonicNow is nanoseconds on the monotonic clock (one vDSO call).
func monotonicNow() int64 { return int64(time.Since(clockBase)) }

// PMDs returns the PMDs (for Manual mode and introspection).
func (dp *Datapath) PMDs() []*PMD { return dp.pmds }

// Conntrack returns the connection tracker CT actions use.
func (dp *Datapath) Conntrack() *conntrack.Tracker { return dp.ct }

// FragmentStats are the fragment reassembly counters of all PMDs, by IP
// version, and the fragments held now.
func (dp *Datapath) FragmentStats() (v4, v6 ipf.Stats, held int64) {
	for _, p := range dp.pmds {
		p.ipf.V4.Load().Add(&v4)
		p.ipf.V6.Load().Add(&v6)
		held += p.ipf.Held()
	}
	return v4, v6, held
}

// DumpConntrack lists the live connections (of zone, when non-nil).
func (dp *Datapath) DumpConntrack(zone *uint16) []conntrack.Entry {
	return dp.ct.Dump(zone, dp.clock())
}

// SweepConntrack removes the connections that timed out (on the
// datapath's clock). ofproto's housekeeping calls it every second.
func (dp *Datapath) SweepConntrack() int { return dp.ct.Sweep(dp.clock()) }

// ControllerQueue returns the queue Controller actions feed.
func (dp *Datapath) ControllerQueue() *ControllerQueue { return dp.ctrlq }

// InvalidateFlows makes every PMD drop its cached flows before it
// classifies its next batch. Upcallers call it when their rules change.
func (dp *Datapath) InvalidateFlows() { dp.generation.Add(1) }

// AddPort adds dev as port number no.
func (dp *Datapath) AddPort(no uint32, dev netdev.Netdev) (*Port, error) {
	if no == 0 || no >= MaxPorts && no != LocalPort {
		return nil, fmt.Errorf("datapath: port number %d out of range 1..%d (or LOCAL)", no, MaxPorts-1)
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if _, ok := dp.ports[no]; ok {
		return nil, fmt.Errorf("datapath: port %d already exists", no)
	}
	for _, p := range dp.ports {
		if p.Dev.Name() == dev.Name() {
			return nil, fmt.Errorf("datapath: %s is already port %d", dev.Name(), p.No)
		}
	}
	ntxq := dev.NumTxQueues()
	if ntxq < 1 {
		ntxq = 1
	}
	p := &Port{
		No:            no,
		Dev:           dev,
		txqLocks:      newSharedSlab[TxqLock](ntxq, false),
		tx:            newSharedSlab[txCounters](len(dp.pmds), dp.cfg.PackedSharedState),
		txSizes:       newSharedSlab[txBatchSizes](len(dp.pmds), dp.cfg.PackedSharedState),
		rxq:           newSharedSlab[rxqCounters](max(dev.NumRxQueues(), 0), false),
		rxqBase:       make([]uint64, max(dev.NumRxQueues(), 0)),
		flushInterval: -1,
		gone:          make(chan struct{}),
	}
	dp.ports[no] = p
	if dp.batching > 0 {
		// Visible to Port and Ports at once (see Batch), by inserting
		// into the snapshot: sorting all the ports again at every add
		// made a batch of a thousand quadratic (~70 ms of CPU).
		dp.insertPortSnap(p)
	}
	dp.replan()
	// Translations that flood depend on the set of ports.
	dp.InvalidateFlows()
	if r, ok := dev.(netdev.Remover); ok {
		go dp.removeWhenGone(p, r.Removed())
	}
	return p, nil
}

// removeWhenGone removes port p once its interface has disappeared (unless
// the port was removed or replaced first). A port removed first ends the
// wait: a driver's channel is not closed when the port is (the interface
// may live on), and each port deleted left this goroutine behind, holding
// the port and its driver.
func (dp *Datapath) removeWhenGone(p *Port, gone <-chan struct{}) {
	select {
	case <-gone:
	case <-p.gone:
		return
	}
	dp.mu.Lock()
	still := dp.ports[p.No] == p
	dp.mu.Unlock()
	if !still {
		return
	}
	if err := dp.RemovePort(p.No); err == nil && dp.cfg.OnPortRemoved != nil {
		dp.cfg.OnPortRemoved(p.No, p.Dev.Name())
	}
}

// RemovePort removes port no and closes its driver once no PMD uses it.
// Packets queued for it are sent first.
func (dp *Datapath) RemovePort(no uint32) error {
	dp.mu.Lock()
	p, ok := dp.ports[no]
	if !ok {
		dp.mu.Unlock()
		return fmt.Errorf("datapath: no port %d", no)
	}
	delete(dp.ports, no)
	close(p.gone)
	dp.unpin(no)
	dp.reconfigure()
	dp.mu.Unlock()
	dp.InvalidateFlows()
	return p.Dev.Close()
}

// Port returns port no, or nil.
// It reads a snapshot without taking the configuration lock, so it is safe
// from an upcall (a reconfiguration holds that lock while it waits for the
// PMDs).
func (dp *Datapath) Port(no uint32) *Port {
	for _, p := range *dp.portSnap.Load() {
		if p.No == no {
			return p
		}
	}
	return nil
}

// Ports returns the ports sorted by number, from the same lock-free
// snapshot as Port. The caller must not modify the slice.
func (dp *Datapath) Ports() []*Port { return *dp.portSnap.Load() }

// Batch runs f, in which ports added and their settings (AddPort,
// SetPortTxFlushInterval, SetRxqAffinity) reach the PMDs together at its
// end: each change otherwise rebuilds every PMD's plan, O(ports), and
// waits for every PMD to take it, which made adding a thousand ports in
// one transaction quadratic. Ports added inside are visible to Port and
// Ports at once, but no PMD polls or sends to them before Batch returns.
// RemovePort inside f still takes effect at once (its device is closed
// after the PMDs let go of it).
func (dp *Datapath) Batch(f func()) {
	dp.mu.Lock()
	dp.batching++
	dp.mu.Unlock()
	defer func() {
		dp.mu.Lock()
		defer dp.mu.Unlock()
		if dp.batching--; dp.batching == 0 && dp.replanPending {
			dp.reconfigure()
		}
	}()
	f()
}

// replan is reconfigure for changes Batch may defer: outside a batch it
// reconfigures; inside, it leaves the plans for the batch's end (AddPort
// has published the port snapshot).
func (dp *Datapath) replan() {
	if dp.batching == 0 {
		dp.reconfigure()
		return
	}
	dp.replanPending = true
}

// insertPortSnap publishes a port snapshot with p added in its place
// (dp.mu held). Readers keep the slice they loaded: a new one is made.
func (dp *Datapath) insertPortSnap(p *Port) {
	old := *dp.portSnap.Load()
	i, _ := slices.BinarySearchFunc(old, p.No, func(q *Port, no uint32) int { return cmp.Compare(q.No, no) })
	ports := make([]*Port, 0, len(old)+1)
	ports = append(append(append(ports, old[:i]...), p), old[i:]...)
	dp.portSnap.Store(&ports)
}

func (dp *Datapath) sortedPorts() []*Port {
	ps := make([]*Port, 0, len(dp.ports))
	for _, p := range dp.ports {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].No < ps[j].No })
	return ps
}

// checkFlushInterval reports a tx-flush-interval SetTxFlushInterval would
// refuse.
func checkFlushInterval(us int) error {
	if us != TxFlushAuto && (us < 0 || us > MaxTxFlushInterval) {
		return fmt.Errorf("datapath: tx-flush-interval %d out of range 0..%d", us, MaxTxFlushInterval)
	}
	return nil
}

// SetTxFlushInterval sets the switch-wide tx-flush-interval (µs, or
// TxFlushAuto). Ports without an override pick it up at their next send.
func (dp *Datapath) SetTxFlushInterval(us int) error {
	if err := checkFlushInterval(us); err != nil {
		return err
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if us == dp.flushUs {
		// Every configuration change sets it: a reconfigure waits for
		// each PMD to take a new plan (about a millisecond of an
		// add-port).
		return nil
	}
	dp.flushUs = us
	dp.reconfigure()
	return nil
}

// SetPortTxFlushInterval overrides the tx-flush-interval (µs, or
// TxFlushAuto) of one port; -1 removes the override.
func (dp *Datapath) SetPortTxFlushInterval(no uint32, us int) error {
	if us != -1 {
		if err := checkFlushInterval(us); err != nil {
			return err
		}
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	p, ok := dp.ports[no]
	if !ok {
		return fmt.Errorf("datapath: no port %d", no)
	}
	p.flushInterval = us
	dp.replan()
	return nil
}

// SetPMDSleepMax sets pmd-sleep-max (µs, 0 .. MaxPMDSleepMax; 0 is busy
// polling). A sleeping PMD picks it up when it next wakes, so lowering it
// takes effect within the old maximum.
func (dp *Datapath) SetPMDSleepMax(us int) error {
	if us < 0 || us > MaxPMDSleepMax {
		return fmt.Errorf("datapath: pmd-sleep-max %d out of range 0..%d", us, MaxPMDSleepMax)
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if us == dp.sleepUs {
		return nil // configuration reloads set it every time
	}
	dp.sleepUs = us
	dp.reconfigure()
	return nil
}

// SetFlowLimit sets flow-limit, the megaflows each PMD installs at most
// (0 or less: DefaultFlowLimit, as in New). Lowering it removes no flow:
// those above the limit age out, and no new one is installed until the
// PMD is below it (a packet that would have installed one is executed
// alone).
func (dp *Datapath) SetFlowLimit(n int) {
	if n <= 0 {
		n = DefaultFlowLimit
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if n == dp.flowLimit {
		return
	}
	dp.flowLimit = n
	dp.replan()
}

// FlowLimit returns the current flow-limit.
func (dp *Datapath) FlowLimit() int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return dp.flowLimit
}

// SetEMCInsertInvProb sets emc-insert-inv-prob: one miss in n is
// inserted into each PMD's exact-match cache; 0 turns the cache off and
// empties it, as in Open vSwitch.
func (dp *Datapath) SetEMCInsertInvProb(n int) error {
	if n < 0 {
		return fmt.Errorf("datapath: emc-insert-inv-prob %d is negative", n)
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if n == dp.emcInvProb {
		return nil
	}
	dp.emcInvProb = n
	dp.replan()
	return nil
}

// EMCInsertInvProb returns the current emc-insert-inv-prob (0: off).
func (dp *Datapath) EMCInsertInvProb() int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return dp.emcInvProb
}

// PMDSleepMax returns the current pmd-sleep-max in microseconds.
func (dp *Datapath) PMDSleepMax() int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	return dp.sleepUs
}

// Start launches the PMD goroutines (not in Manual mode).
func (dp *Datapath) Start() error {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.cfg.Manual {
		return errors.New("datapath: Start in manual mode")
	}
	if dp.running {
		return errors.New("datapath: already running")
	}
	for _, p := range dp.pmds {
		if p.wakeFD < 0 {
			fd, err := newWakeFD()
			if err != nil {
				return fmt.Errorf("datapath: PMD wake eventfd: %w", err)
			}
			p.wakeFD = fd
			p.wakeOnly[0] = pollFd{Fd: int32(fd), Events: pollIn}
		}
	}
	dp.running = true
	reserveProcs(len(dp.pmds))
	for _, p := range dp.pmds {
		p.stop.Store(false)
		dp.wg.Add(1)
		go p.run(&dp.wg)
	}
	return nil
}

var (
	procsMu sync.Mutex
	// procsBase is GOMAXPROCS as the program had it when the first PMDs
	// started (read then, not at package initialisation, so that a
	// setting main makes first counts).
	procsBase int
	procsPMDs int
)

// reserveProcs sets GOMAXPROCS so that every running PMD has a P of its
// own beside the ones the rest of the process had: a PMD that wakes from
// ppoll must get a P at once, and with PMDs holding them all it would
// wait for the scheduler's 10 ms preemption (a busy PMD never yields).
// Start reserves its PMDs' Ps and Stop gives them back (n negative).
func reserveProcs(n int) {
	procsMu.Lock()
	defer procsMu.Unlock()
	if procsBase == 0 {
		procsBase = runtime.GOMAXPROCS(0)
	}
	procsPMDs += n
	if want := procsBase + procsPMDs; runtime.GOMAXPROCS(0) != want {
		runtime.GOMAXPROCS(want)
	}
}

// Stop stops the PMDs after they flush every queued packet and return every
// buffer to their pools. The datapath can be started again.
func (dp *Datapath) Stop() {
	dp.mu.Lock()
	if !dp.running {
		dp.mu.Unlock()
		return
	}
	for _, p := range dp.pmds {
		p.stop.Store(true)
		p.wake()
	}
	dp.running = false
	dp.mu.Unlock()
	dp.wg.Wait()
	reserveProcs(-len(dp.pmds))
}

// Close stops the PMDs and closes every port.
func (dp *Datapath) Close() error {
	dp.Stop()
	dp.mu.Lock()
	defer dp.mu.Unlock()
	var errs []error
	for no, p := range dp.ports {
		errs = append(errs, p.Dev.Close())
		delete(dp.ports, no)
		close(p.gone)
	}
	dp.pinned = nil
	dp.closed = true
	dp.reconfigure()
	for _, p := range dp.pmds {
		if p.wakeFD >= 0 {
			errs = append(errs, closeWakeFD(p.wakeFD))
			p.wakeFD = -1
		}
	}
	return errors.Join(errs...)
}

// Execute runs actions on a packet that did not come from a port (OpenFlow
// packet-out). The packet is handed to PMD 0, which executes it at its next
// iteration and then flushes every batch it holds. It returns an error if
// that PMD's mailbox is full.
func (dp *Datapath) Execute(data []byte, inPort uint32, acts actions.List) error {
	if len(data) > packet.DefaultBufSize-packet.Headroom {
		return fmt.Errorf("datapath: packet of %d bytes is too large", len(data))
	}
	if err := dp.pmds[0].mailbox.post(data, inPort, acts); err != nil {
		return err
	}
	dp.pmds[0].wake()
	return nil
}

// publishPlans hands every PMD its plan for assign and the current port
// settings, and waits until running PMDs have switched to it.
func (dp *Datapath) publishPlans(ports []*Port, assign [][]RxqRef) {
	dp.seq++
	maxNo := uint32(0)
	for _, p := range ports {
		maxNo = max(maxNo, portIndex(p.No))
	}
	for i, pmd := range dp.pmds {
		plan := &pmdPlan{seq: dp.seq, tx: make([]txPlan, maxNo+1), sleepMaxNs: int64(dp.sleepUs) * 1000,
			probeEvery: dp.probeEvery, probeOffset: dp.probeOffset,
			flowLimit: dp.flowLimit, emcInvProb: uint32(dp.emcInvProb)}
		if i < len(assign) {
			for _, r := range assign[i] {
				p := dp.ports[r.Port]
				if p == nil || r.Queue < 0 || r.Queue >= p.rxq.len() {
					continue
				}
				plan.rxqs = append(plan.rxqs, rxqPlan{port: p, queue: r.Queue, counters: p.rxq.at(r.Queue)})
			}
		}
		plan.pollFDs = pollFDs(plan.rxqs)
		for _, p := range ports {
			txq, shared := txqMap(i, len(dp.pmds), p.txqLocks.len())
			us := p.flushInterval
			if us == -1 {
				us = dp.flushUs
			}
			tp := txPlan{port: p, txq: txq, shared: shared, intervalNs: int64(max(us, 0)) * 1000, autoFlush: us == TxFlushAuto}
			tp.kicker, _ = p.Dev.(netdev.TxKicker)
			tp.gso, _ = p.Dev.(netdev.GSOSender)
			_, runs := p.Dev.(netdev.RunSender)
			tp.coalesce = tp.gso != nil && !runs
			plan.tx[portIndex(p.No)] = tp
		}
		pmd.plan.Store(plan)
		pmd.wake()
	}
	if !dp.running {
		for _, pmd := range dp.pmds {
			pmd.applyPlan()
		}
		return
	}
	// Waited for on a channel the PMD signals: a 10 µs sleep in a loop
	// slept 1-2 ms here (the runtime's poller sleeps whole milliseconds),
	// more where the PMD shares the CPU, though the PMD took the plan
	// within 60 µs; every port added waited that long. A signal is never
	// lost (the PMD stores applied first, a full channel already wakes
	// the waiter); the timeout is a safety net.
	for _, pmd := range dp.pmds {
		for pmd.applied.Load() < dp.seq {
			t := time.NewTimer(time.Millisecond)
			select {
			case <-pmd.tookPlan:
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// portIndex is where port no sits in port-indexed tables; 0, never a
// port, maps past the end of any of them.
func portIndex(no uint32) uint32 {
	switch no {
	case LocalPort:
		return 0
	case 0:
		return MaxPorts
	}
	return no
}

// pollFDs returns the descriptors to wait on for rxqs after a first entry
// for the PMD's wake eventfd, or nil unless every queue has one: a queue
// without would not wake the PMD.
func pollFDs(rxqs []rxqPlan) []pollFd {
	fds := []pollFd{{Fd: -1, Events: pollIn}}
	for _, r := range rxqs {
		w, ok := r.port.Dev.(netdev.Waiter)
		if !ok {
			return nil
		}
		fd := w.RxFD(r.queue)
		if fd < 0 {
			return nil
		}
		fds = append(fds, pollFd{Fd: int32(fd), Events: pollIn})
	}
	return fds
}

// PMDStats returns a snapshot of every PMD's counters.
func (dp *Datapath) PMDStats() []PMDStats {
	out := make([]PMDStats, len(dp.pmds))
	for i := range dp.pmds {
		out[i] = dp.pmdCnt.at(i).snapshot(i)
	}
	return out
}

// TxStats returns, per PMD, what it sent to the port.
func (p *Port) TxStats() []PortPMDStats {
	out := make([]PortPMDStats, p.tx.len())
	for i := range out {
		c := p.tx.at(i)
		out[i] = PortPMDStats{PMD: i, Packets: c.packets.Load(), Batches: c.batches.Load(), Drops: c.drops.Load(), Kicks: c.kicks.Load()}
		h := p.txSizes.at(i)
		for j := range h.n {
			out[i].BatchSizes[j] = h.n[j].Load()
		}
	}
	return out
}

// PushStats hands the traffic each megaflow has carried since the last
// push to the rules it was translated from (UpcallResult.Refs). ofproto
// calls it periodically, before expiring idle rules and when it answers a
// flow-statistics request. Counts of megaflows cleared by a rule change are
// pushed by their PMD at the moment of clearing.
func (dp *Datapath) PushStats(now time.Time) {
	for _, p := range dp.pmds {
		p.pushStats(now)
	}
}

// ExpireIdleFlows asks every PMD to remove, at its next iteration, the
// megaflows no packet has matched for maxIdle (OVS's max-idle), after
// pushing their traffic to their rules; a later packet of such a flow is
// an upcall again. Removed flows are counted in ExpiredFlows. ofproto's
// housekeeping calls it every second.
func (dp *Datapath) ExpireIdleFlows(maxIdle time.Duration) {
	cutoff := dp.clock() - int64(maxIdle)
	if cutoff <= 0 {
		return
	}
	for _, p := range dp.pmds {
		p.expireBefore.Store(cutoff)
	}
}

// ExpiredFlows is the number of megaflows removed for being idle.
func (dp *Datapath) ExpiredFlows() uint64 {
	n := uint64(0)
	for _, p := range dp.pmds {
		n += p.expired.Load()
	}
	return n
}

// FlowCount returns the megaflows installed in each PMD's classifier. It is
// published by the PMDs, so it may lag by one iteration.
func (dp *Datapath) FlowCount() int {
	n := 0
	for _, p := range dp.pmds {
		n += int(p.nflows.Load())
	}
	return n
}

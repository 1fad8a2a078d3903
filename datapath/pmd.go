package datapath

import (
	"errors"
	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/datapath/ipf"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/classifier"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
)

const (
	// statsPublishInterval is how often a PMD copies its counters to the
	// shared block readers see (and at the first idle iteration after
	// traffic).
	statsPublishInterval = 100_000 // ns
	// rankInterval is how often a PMD re-sorts its megaflow subtables by hits.
	rankInterval = 1_000_000_000 // ns
	// idleSpinNs is how long a PMD keeps polling after its last packet
	// before it starts to sleep: a burst that pauses briefly meets a PMD
	// that is still awake.
	idleSpinNs = 20_000
	// spinMaxNs bounds the adaptive spin window (adaptSpin): a gap
	// between packets up to this long is worth polling through rather
	// than paying a wake-up, as KVM's halt polling bets its 200 µs. It is
	// not pmd-sleep-max: that bounds how long a sleep may delay a frame
	// nothing wakes the PMD for, which is another question (at the
	// default 100 µs, a request/response exchange every 200 µs always
	// found the PMD asleep: round trip 2.3× the Linux bridge's, 1.45×
	// with this bound, for 16 % more PMD CPU).
	spinMaxNs = 300_000
	// minSleepNs is the first sleep of an idle PMD in back-off; it
	// doubles up to pmd-sleep-max.
	minSleepNs = 1000
	// haltPollNs is how long after its last packet a PMD keeps backing
	// off (sleeps of 1 µs doubling to pmd-sleep-max) even when its
	// queues could wake it: a reply usually follows a request within
	// that time, and a PMD that went to sleep for good meanwhile pays for
	// being woken (a halted vCPU must be woken by an interrupt): the
	// sparse probe's round trip was about 20 % longer. KVM's halt polling
	// makes the same trade.
	haltPollNs = 1_000_000
	// expectMaxNs bounds the gap between packets a sleeping PMD learns
	// to expect (expectGap): a rhythm slower than this is not worth a
	// timed wake-up.
	expectMaxNs = haltPollNs
	// idleYieldNs is how often a polling PMD that finds nothing offers
	// its CPU to whatever else the kernel has ready to run there
	// (sched_yield): on a machine where workloads share the PMDs' CPUs,
	// a workload woken by the PMD's own delivery (the server of a
	// request, the client of a reply) otherwise waits for the scheduler
	// to preempt a thread that never blocks. Two switches joined by a
	// tunnel with a ping-pong across, on two CPUs: round-trip p99 140-230
	// µs instead of 540-1,760. A yield with nothing else runnable costs a
	// system call (under a µs), only while there is no packet; a loaded
	// PMD never yields.
	idleYieldNs = 20_000
)

// idleWakeNs bounds the sleep of an idle PMD whose every queue can wake it
// (netdev.Waiter) and that holds no packet: the coarse timer that publishes
// its idle time, expires idle megaflows and re-ranks its subtables. Once a
// second costs nothing measurable; anything urgent (a plan, a packet-out,
// Stop) wakes the PMD through its eventfd. A variable so that tests can
// make it long enough to prove the eventfd does the waking.
var idleWakeNs int64 = 1_000_000_000

// pmdPlan is what a PMD polls and where it may send: built by the datapath
// on every configuration change and swapped in by the PMD between
// iterations, so the PMD never takes a lock to read its configuration.
type pmdPlan struct {
	seq  uint64
	rxqs []rxqPlan
	tx   []txPlan // indexed by portIndex; port nil = no such port
	// pollFDs are the rx queues' descriptors when every queue has one
	// (netdev.Waiter); an idle PMD waits on them instead of sleeping.
	pollFDs []pollFd
	// sleepMaxNs is pmd-sleep-max; 0 is busy polling.
	sleepMaxNs int64
	// probeEvery is latency-probe (latency.go); 0 is off.
	probeEvery  int
	probeOffset int64
	// flowLimit bounds the megaflows the PMD installs; emcInvProb is its
	// EMC's insertion rate (0: off).
	flowLimit  int
	emcInvProb uint32
}

type rxqPlan struct {
	port     *Port
	queue    int
	counters *rxqCounters // the queue's shared block in its port
	// What the PMD counted for the queue since it last published; the
	// plan is the PMD's own once it has loaded it, so these are plain.
	packets, busyNs uint64
}

type txPlan struct {
	port   *Port
	txq    int
	shared bool
	// intervalNs is the port's tx-flush-interval; with autoFlush set
	// the OutputBatch chooses its own (see autoInterval).
	intervalNs int64
	autoFlush  bool
	// kicker is the driver's kick counter, nil if it has none.
	kicker netdev.TxKicker
	// gso is the driver as a GSOSender, nil if it can never take a
	// super-frame whole: resolved once per plan, so a port without it
	// costs output no type assertion and coalescing no parse.
	gso netdev.GSOSender
	// coalesce: output merges TCP segments for the port (coalesce.go),
	// a GSOSender that is no netdev.RunSender.
	coalesce bool
}

// sendsGSO reports whether the port takes super-frames whole now.
func (tp *txPlan) sendsGSO() bool { return tp.gso != nil && tp.gso.SendsGSO() }

// PMD is a poll-mode driver goroutine (or, in Manual mode, a unit the caller
// drives with PollOnce). Everything in it is owned by its goroutine except
// the fields marked otherwise.
type PMD struct {
	id    int
	dp    *Datapath
	clock func() int64
	pool  *packet.Pool
	emc   *classifier.EMC[Megaflow]
	flows *classifier.Megaflows[Megaflow]

	cur     *pmdPlan
	outs    []*OutputBatch // indexed by portIndex
	pending []*OutputBatch // outputs holding packets
	rx      packet.Batch
	mfs     [packet.BatchSize]*Megaflow // the flow of each packet of rx
	// portFlows[n], when set, is the installed megaflow that matches on
	// input port n alone and only outputs (OVS's "simple match"): it takes
	// every packet of the port, so a batch from n skips parsing, hashing
	// and both caches.
	portFlows []*Megaflow
	// lastFlows[n] is the megaflow the last batch from port n went to
	// (its last fast-path packet's, or the classifier's last answer for a
	// first pass), tried before the EMC by processBatch: a megaflow's
	// actions are right for every key it matches, and a port's
	// consecutive batches often hit one flow (a ct pipeline's first pass
	// is one flow for every connection; an IP pipeline with wide matches
	// is one flow for any number of connections, which the EMC cannot
	// hold). Per port, as a PMD polls its ports in turn: one slot for all
	// would hold the other port's flow at each batch.
	lastFlows []*Megaflow
	upcall    UpcallResult
	recirc    recircQueue
	// ctParams is the CT action being executed, assembled without
	// allocating (its label from the CTLabel actions before it).
	ctParams conntrack.Params
	// ctSink takes what Tracker.Prefetch returns (see there).
	ctSink  uint16
	natActs []actions.Action  // a NAT rewrite's set actions (reused)
	rw      conntrack.Rewrite // ct's translation of the packet at hand (Tracker.Track)
	// conns is the PMD's connection cache (connCache makes it at the
	// first ct: 128 KiB a PMD of a datapath that tracks).
	conns *conntrack.ConnCache
	// fused holds executeCTRecirc's runs of recirculated packets, one
	// array per nesting level (a second pass's flow may be ct-and-recirc
	// again); fuseDepth is the level in use.
	fused     [MaxRecirculations][packet.BatchSize]*packet.Packet
	fuseDepth int
	// ahead holds, per nesting level (aheadDepth in use), the tuples a
	// batch whose flow starts with ct was parsed and hashed into while
	// the tracker read ahead for it, so that its ct does not do it
	// again: executeCTRecirc's, or executeFlow's for its packets one by
	// one (ctAhead, for ctAheadPkt: the first ct that packet meets
	// takes it, execute's CT case). Levels run out only in nesting no
	// pipeline reaches; a batch then goes without.
	ahead      [2 * MaxRecirculations][packet.BatchSize]conntrack.Ahead
	aheadDepth int
	ctAhead    *conntrack.Ahead
	ctAheadPkt *packet.Packet
	// ipf holds fragments a ct action met until their datagram is whole.
	ipf     *ipf.Reassembler
	gen     uint64
	now     int64
	busy    bool // the last iteration received packets
	local   pmdLocal
	lastPub int64
	// unpublished is set when a busy iteration's counts wait for the
	// publish interval.
	unpublished bool
	lastRnk     int64
	lastRx      int64 // clock of the last iteration that received packets
	sleepNs     int64 // next sleep length
	spinNs      int64 // how long to poll after the last packet (adaptSpin)
	// lastRxq is the last queue of the previous iteration that received
	// packets, and rxqMark the clock reading its busy time runs from; the
	// next iteration's clock read closes that span.
	lastRxq *rxqPlan
	rxqMark int64

	counters *pmdCounters // published for readers

	// The latency probe's state (latency.go): batches since the last
	// sample, and the sampled batch's clock read after the receive.
	probeCount int
	probeT1    int64

	// wakeFD is an eventfd the PMD sleeps on beside its rx queues (made
	// by Start); wakeOnly is the poll set when the queues cannot wake it.
	wakeFD   int
	wakeOnly [1]pollFd

	// Written by other goroutines.
	sleeping atomic.Bool // the PMD is about to sleep or sleeping
	plan     atomic.Pointer[pmdPlan]
	applied  atomic.Uint64
	// tookPlan is signalled (without blocking) each time the PMD takes a
	// plan, for publishPlans to wait on rather than poll.
	tookPlan chan struct{}
	stop     atomic.Bool
	nflows   atomic.Int64
	mailbox  mailbox
	// installed lists the megaflows in flows, for PushStats from the
	// control side. The PMD takes the lock only on its slow paths
	// (installing after an upcall, clearing its caches).
	installedMu sync.Mutex
	installed   []*Megaflow
	// pushQ are the refLists a round of pushes added traffic to
	// (flushRefs); guarded by installedMu.
	pushQ []*refList
	// refLists are the PMD's shared refs, by the sinks' bits
	// (sharedRefs); the PMD's own.
	refLists map[string]*refList
	// expireBefore, when not zero, asks the PMD to remove the megaflows
	// not used since that datapath time (Datapath.ExpireIdleFlows); the
	// PMD does it at its next iteration and stores zero. expired counts
	// the flows removed so.
	expireBefore atomic.Int64
	expired      atomic.Uint64
	deadScratch  []*Megaflow
	// gsoSegmented counts GSO frames this PMD cut into segments (gso.go).
	gsoSegmented atomic.Uint64
	// probe holds the latency histograms once the probe was first on;
	// tid is the PMD's thread id once it runs.
	probe atomic.Pointer[latencyProbe]
	tid   atomic.Int32

	// expectNs is the gap after the last packet the PMD expects
	// (expectGap); 0: none. Last, so that it moves no other field.
	expectNs int64
	// yieldAt is when an idle polling PMD next offers its CPU (idleYieldNs).
	yieldAt int64
}

func newPMD(dp *Datapath, id int) *PMD {
	p := &PMD{
		id:       id,
		dp:       dp,
		clock:    dp.clock,
		pool:     packet.NewPool(dp.cfg.PoolSize, packet.DefaultBufSize),
		emc:      classifier.NewEMC[Megaflow](dp.cfg.EMCEntries),
		flows:    classifier.New[Megaflow](),
		counters: dp.pmdCnt.at(id),
		gen:      dp.generation.Load(),
		pending:  make([]*OutputBatch, 0, 64),
		wakeFD:   -1,
		tookPlan: make(chan struct{}, 1),
	}
	p.pool.AttachBig(packet.NewPool(packet.DefaultBigBuffers, packet.BigBufSize))
	// Held fragments are pool buffers: at most a quarter of the pool.
	p.ipf = ipf.New(dp.ipf, dp.cfg.PoolSize/4)
	p.recirc.spill = make([]*packet.Packet, 0, dp.cfg.PoolSize+packet.DefaultBigBuffers)
	p.emc.SetInsertInvProb(uint32(dp.cfg.EMCInsertInvProb))
	p.now = p.clock()
	p.lastPub, p.lastRnk = p.now, p.now
	return p
}

// ID returns the PMD's index.
func (p *PMD) ID() int { return p.id }

// Pool returns the PMD's packet pool (for leak checks in tests).
func (p *PMD) Pool() *packet.Pool { return p.pool }

func (p *PMD) run(wg *sync.WaitGroup) {
	defer wg.Done()
	// Locked for good: the thread gets the PMD's CPU affinity and timer
	// slack, so it must end with the PMD rather than go back to the
	// runtime's pool and carry them into other goroutines.
	runtime.LockOSThread()
	p.tid.Store(threadID())
	cpu := -1
	if cpus := p.dp.cfg.CPUs; len(cpus) > 0 {
		cpu = cpus[p.id%len(cpus)]
	}
	setupPMDThread(cpu)
	p.sleepNs, p.spinNs = minSleepNs, idleSpinNs
	for !p.stop.Load() {
		n := p.PollOnce()
		if n == 0 && p.now >= p.yieldAt {
			cpuYield()
			p.local.idleYields++
			p.yieldAt = p.now + idleYieldNs
		}
		if n > 0 {
			gap := p.now - p.lastRx
			p.expectNs = expectGap(p.expectNs, gap, p.spinNs)
			p.spinNs = adaptSpin(p.spinNs, gap, spinMaxNs)
			p.lastRx = p.now
			p.sleepNs = minSleepNs
			continue
		}
		if p.cur.sleepMaxNs == 0 || p.now-p.lastRx < p.spinNs || p.awaiting() {
			continue
		}
		p.sleep()
	}
	p.now = p.clock()
	p.flush(true)
	p.local.publish(p.counters)
	p.publishRxqs()
}

// adaptSpin returns the next spin window of a sleeping PMD (how long it
// keeps polling after its last packet) from the current one and the gap
// before the packet that just came. Waking a PMD costs far more than the
// spin it replaces: measured with bench/latency/breakdown.sh, the frame
// waits about 16 µs more for a woken PMD than for a polling one, and the
// woken vCPU runs the batch slower (cold caches), because the kernel must
// wake a halted vCPU by an interrupt. Traffic that comes back soon (a reply
// some tens of µs after the request, the next burst of a stream) should
// therefore find the PMD awake: a gap the PMD slept through but that was
// no longer than spinMax widens the window to cover it with half to
// spare; a longer gap (sparse traffic, nothing to catch) narrows it by a
// sixteenth, down to idleSpinNs, so that a request/response rhythm keeps
// its window across the long gaps between exchanges. Like KVM's halt
// polling, the CPU spent is bounded by spinMax per packet.
func adaptSpin(spin, gap, spinMax int64) int64 {
	switch {
	case gap <= spin:
		return spin // caught while polling
	case gap <= spinMax:
		return min(gap+gap/2, spinMax)
	default:
		return max(spin-spin/16, idleSpinNs)
	}
}

// expectGap returns the gap a sleeping PMD expects after its next packet,
// from the one it expected and the gap before the packet that just came:
// a gap it slept through (longer than its spin window) and no longer than
// expectMaxNs is the rhythm's long gap, expected again; a packet caught
// while polling says nothing about it; a longer gap ends the expectation.
// A request/response rhythm whose think time exceeds spinMaxNs (the server
// side's PMD of a ping-pong every 200 µs on a tunnel, about 350 µs between
// its reply and the next request) found the PMD asleep at every request,
// so each paid the wake-up of a halted CPU (see adaptSpin); with the
// expected gap the PMD sets a timer to wake shortly before the packet is
// due and polls through its arrival (expectWindow), paying the wake-up
// while nothing waits.
func expectGap(expect, gap, spin int64) int64 {
	switch {
	case gap <= spin:
		return expect
	case gap <= expectMaxNs:
		return gap
	default:
		return 0
	}
}

// expectWindow returns when, after its last packet, a PMD that expects a
// gap of e polls rather than sleeps: from a quarter of the gap early (20 to
// 100 µs: the timer that wakes a halted CPU fires late by tens of µs, and
// the gap jitters by the sender's timer slack) to an eighth late (10 to
// 50 µs). It bounds the CPU a mistaken expectation costs to 150 µs per
// packet. Zero e: an empty window.
func expectWindow(e int64) (from, to int64) {
	if e <= 0 {
		return 0, 0
	}
	return e - min(max(e/4, 20_000), 100_000), e + min(max(e/8, 10_000), 50_000)
}

// awaiting reports whether the PMD is in the window of its expected
// packet (expectWindow) and should poll.
func (p *PMD) awaiting() bool {
	from, to := expectWindow(p.expectNs)
	since := p.now - p.lastRx
	return since >= from && since < to
}

// sleepTimeout is how long an idle PMD may sleep: until its earliest output
// deadline, so that no held packet waits past it, and otherwise until the
// coarse idle timer if its queues can wake it and traffic stopped more
// than haltPollNs ago, or for its next back-off step (doubling up to
// pmd-sleep-max); and no later than the start of the window of its
// expected packet (expectWindow). The idle iteration before it sent every
// batch whose deadline had passed, so a pending deadline is in the future.
func (p *PMD) sleepTimeout() int64 {
	t := idleWakeNs
	if len(p.cur.pollFDs) == 0 || p.now-p.lastRx < haltPollNs {
		t = min(p.sleepNs, p.cur.sleepMaxNs)
	}
	if from, _ := expectWindow(p.expectNs); p.now-p.lastRx < from {
		t = min(t, p.lastRx+from-p.now)
	}
	for _, ob := range p.pending {
		t = min(t, max(ob.deadline-p.now, 0))
	}
	return t
}

// sleep waits in ppoll on the PMD's wake eventfd and, when every rx queue
// has one, the queues' descriptors, for sleepTimeout. The control side
// writes the eventfd only while the PMD says it sleeps (p.sleeping), and
// the PMD looks for work after saying so: one of the two always sees the
// other, so a plan, a packet-out or Stop is never left waiting for the
// timer.
func (p *PMD) sleep() {
	timeout := p.sleepTimeout()
	if timeout == 0 {
		return
	}
	fds := p.cur.pollFDs
	if len(fds) == 0 {
		fds = p.wakeOnly[:]
	}
	fds[0].Fd = int32(p.wakeFD)
	p.sleeping.Store(true)
	if p.stop.Load() || p.plan.Load() != p.cur || p.mailbox.waiting.Load() != 0 || p.armRxqs() {
		p.sleeping.Store(false)
		return
	}
	// Readers see what the PMD did up to its sleep, however long it is.
	p.local.publish(p.counters)
	p.publishRxqs()
	p.lastPub, p.unpublished = p.now, false
	ppoll(fds, timeout)
	p.sleeping.Store(false)
	if fds[0].Revents != 0 {
		drainWake(p.wakeFD)
	}
	p.sleepNs = min(p.sleepNs*2, p.cur.sleepMaxNs)
}

// wake interrupts the PMD's sleep, if it sleeps, so that it sees new work
// at once. Called by the control side after it posted the work.
func (p *PMD) wake() {
	if p.sleeping.Load() {
		signalWake(p.wakeFD)
	}
}

// armRxqs asks the rx queues that need it (netdev.RxArmer) to wake the PMD
// on their next frame, right before it sleeps: a busy-polling PMD never
// asks, so its guests never kick. It reports whether a queue already has
// frames waiting.
func (p *PMD) armRxqs() bool {
	for i := range p.cur.rxqs {
		rq := &p.cur.rxqs[i]
		if a, ok := rq.port.Dev.(netdev.RxArmer); ok && a.ArmRx(rq.queue) {
			return true
		}
	}
	return false
}

// PollOnce runs one PMD iteration: one clock read, a plan and mailbox check,
// one receive batch from each assigned rx queue (each classified, executed
// and followed by a send of the batches whose deadline has passed), and, if
// nothing arrived, a send of the batches whose deadline has passed. It
// returns the packets received.
// In Manual mode the caller drives the PMD with it; otherwise only the PMD's
// goroutine may call it.
//
// Busy time is split over the rx queues that received packets: each such
// queue is charged from the end of the previous one (or the start of the
// iteration) to the end of its own processing. Closing a span needs a clock
// read, so a queue that is not the PMD's last one costs one more read per
// iteration in which it received something; the last queue's span is closed
// by the next iteration's read. A PMD with one queue, or whose traffic comes
// in on its last queue, reads the clock once per iteration as before.
func (p *PMD) PollOnce() int {
	now := p.clock()
	prev := p.now
	if p.busy {
		p.local.busyNs += uint64(now - p.now)
		if p.lastRxq != nil {
			p.lastRxq.busyNs += uint64(now - p.rxqMark)
		}
	} else {
		p.local.idleNs += uint64(now - p.now)
	}
	p.now = now
	p.local.iterations++
	p.ipf.Expire(now)
	if pl := p.plan.Load(); pl != p.cur {
		p.applyPlan()
	}
	if p.mailbox.waiting.Load() != 0 {
		p.runMailbox()
	}
	if cutoff := p.expireBefore.Load(); cutoff != 0 {
		p.expireIdle(cutoff)
		p.expireBefore.Store(0)
	}
	received := 0
	rxqs := p.cur.rxqs
	mark := now
	var last *rxqPlan
	for i := range rxqs {
		rq := &rxqs[i]
		p.rx.N = 0
		n := rq.port.Dev.Recv(rq.queue, p.pool, &p.rx)
		if n == 0 {
			continue
		}
		received += n
		if g := p.dp.generation.Load(); g != p.gen {
			p.gen = g
			p.clearFlows()
		}
		sampled := p.cur.probeEvery != 0 && p.probeStart(&p.rx, prev, now)
		upcalled := p.processBatch(rq.port.No)
		var t2 int64
		if sampled {
			t2 = p.clock()
		}
		p.flush(upcalled) // after an upcall, do not add latency on top
		if sampled {
			p.probeEnd(now, t2)
		}
		rq.packets += uint64(n)
		last = rq
		if i < len(rxqs)-1 {
			t := p.clock()
			rq.busyNs += uint64(t - mark)
			mark = t
		}
	}
	p.lastRxq, p.rxqMark = last, mark
	p.busy = received > 0
	if !p.busy {
		// Only what is due: flushing everything here would send a
		// batch between every two packets at any rate below
		// saturation, and tx-flush-interval would never batch.
		p.flush(false)
	}
	// Publish every statsPublishInterval, and at the first idle iteration
	// after traffic that is not published yet, so readers see a burst's
	// counts as soon as it ends but an idle PMD does not spend its
	// iterations on atomic stores of unchanged counters.
	if now-p.lastPub >= statsPublishInterval || !p.busy && p.unpublished {
		p.local.publish(p.counters)
		p.publishRxqs()
		p.lastPub = now
		p.unpublished = false
	} else if p.busy {
		p.unpublished = true
	}
	if now-p.lastRnk >= rankInterval {
		p.flows.Rank()
		p.lastRnk = now
	}
	return received
}

// applyPlan switches to the latest plan. Output batches of ports that go
// away are sent first (the datapath closes a port only after every PMD has
// acknowledged the plan without it).
func (p *PMD) applyPlan() {
	pl := p.plan.Load()
	p.flush(true)
	if p.cur != nil {
		// The queues may go to another PMD: hand over what they carried.
		p.publishRxqs()
	}
	p.lastRxq = nil
	outs := make([]*OutputBatch, len(pl.tx))
	for no, tp := range pl.tx {
		if tp.port == nil {
			continue
		}
		var ob *OutputBatch
		if no < len(p.outs) && p.outs[no] != nil && p.outs[no].port == tp.port {
			ob = p.outs[no]
		} else {
			ob = &OutputBatch{counters: tp.port.tx.at(p.id), sizes: tp.port.txSizes.at(p.id), deadline: p.now,
				auto: autoInterval{winStart: p.now}}
		}
		ob.txPlan = tp
		outs[no] = ob
	}
	p.outs = outs
	if pl.emcInvProb != p.emc.InsertInvProb() {
		p.emc.SetInsertInvProb(pl.emcInvProb)
		if pl.emcInvProb == 0 {
			p.emc.Clear()
		}
	}
	p.cur = pl
	p.applied.Store(pl.seq)
	select {
	case p.tookPlan <- struct{}{}:
	default:
	}
}

// publishRxqs adds what the PMD counted for its rx queues to their shared
// blocks.
func (p *PMD) publishRxqs() {
	for i := range p.cur.rxqs {
		rq := &p.cur.rxqs[i]
		if rq.packets == 0 && rq.busyNs == 0 {
			continue
		}
		rq.counters.packets.Add(rq.packets)
		rq.counters.busyNs.Add(rq.busyNs)
		rq.packets, rq.busyNs = 0, 0
	}
}

// processBatch classifies and executes p.rx, received on port inPort. It
// reports whether any packet needed an upcall. For the frames
// flow.ExtractFast takes (untagged IPv4 TCP/UDP), extraction, hashing and
// the EMC lookup are one pass: the hash comes from the key words in
// registers, and the EMC compares a short key's six words only. Every other
// frame is extracted in that pass and hashed and looked up in a second one,
// as before: hashing a key the general extractor has just stored field by
// field waits for those stores (a third slower for IPv6 in a benchmark of
// batches). Megaflow lookups and execution are passes of their own, as in
// OVS.
func (p *PMD) processBatch(inPort uint32) (upcalled bool) {
	if i := int(portIndex(inPort)); i < len(p.portFlows) && p.portFlows[i] != nil {
		p.processPortFlow(inPort, p.portFlows[i])
		return false
	}
	pkts := p.rx.Packets()
	mfs := p.mfs[:len(pkts)] // one bounds check, not one per packet
	emcMisses := 0
	var deferred uint64 // packets to hash in the second pass, by index (batchFitsMask)
	// While every packet so far took the fast path to the same flow, run
	// is that flow and runBytes their bytes (runs counts changes of flow).
	var run *Megaflow
	var runs int
	var runBytes uint64
	// The last batch's flow is tried first while it matches; after its
	// first miss in the batch, the EMC (one wasted compare per batch of
	// mixed flows). It counts as the EMC, and is off with it.
	var last *Megaflow
	if i := int(portIndex(inPort)); i < len(p.lastFlows) {
		last = p.lastFlows[i]
	}
	tryLast := last != nil && !last.expired && p.emc.InsertInvProb() != 0
	for i, pkt := range pkts {
		pkt.InPort = inPort
		if !pkt.HasTunnel { // only tunnel ports set it: one predicted branch
			data := pkt.Data()
			if h, ok := flow.ExtractFast(data, inPort, &pkt.Key, &pkt.Offsets); ok {
				pkt.KeyValid = true
				pkt.Hash, pkt.HashValid = h, true
				var mf *Megaflow
				if tryLast && last.matches(&pkt.Key) {
					mf = last
				} else {
					tryLast = false
					mf = p.emc.LookupShort(&pkt.Key, h, true)
				}
				mfs[i] = mf
				if mf != run {
					run = mf
					runs++
				}
				runBytes += uint64(len(data))
				if mf == nil {
					emcMisses++
				}
				continue
			}
		}
		if flow.Extract(pkt.Data(), inPort, &pkt.Key, &pkt.Offsets) != 0 {
			p.local.malformed++
		}
		if pkt.HasTunnel {
			pkt.Key.TunnelID, pkt.Key.Tun = pkt.TunnelID, pkt.Tunnel
		}
		pkt.KeyValid = true
		deferred |= 1 << i
	}
	if run != nil {
		p.setLastFlow(inPort, run)
	}
	allFast := deferred == 0
	for deferred != 0 {
		i := bits.TrailingZeros64(deferred)
		deferred &= deferred - 1
		pkt := pkts[i]
		pkt.Hash, pkt.HashValid = pkt.Key.Hash(), true
		mf := p.emc.LookupShort(&pkt.Key, pkt.Hash, pkt.Key.IsShort())
		mfs[i] = mf
		if mf == nil {
			emcMisses++
		}
	}
	if allFast && emcMisses == 0 && runs == 1 {
		// The whole batch hit one flow in the EMC (a batch of one
		// connection, the common case at high rates): no pass over it
		// to find the flows' runs.
		p.local.emcHits += uint64(len(pkts))
		p.executeFlow(run, pkts, runBytes)
	} else {
		upcalled = p.classifyRest(pkts, emcMisses)
	}
	p.local.rxPackets += uint64(len(pkts))
	if p.recirc.pending() {
		if p.drainRecirc() {
			upcalled = true
		}
	}
	return upcalled
}

// batchFitsMask: processBatch keeps one bit per packet of a batch in a uint64.
var _ [64 - packet.BatchSize]struct{}

// classify looks the packets up (EMC, megaflows, upcall) by their keys,
// which must be valid, and executes their actions. It reports whether any
// packet needed an upcall.
func (p *PMD) classify(pkts []*packet.Packet) (upcalled bool) {
	emcMisses := 0
	for i, pkt := range pkts {
		pkt.Hash = pkt.Key.Hash()
		pkt.HashValid = true
		mf := p.emc.Lookup(&pkt.Key, pkt.Hash)
		p.mfs[i] = mf
		if mf == nil {
			emcMisses++
		}
	}
	return p.classifyRest(pkts, emcMisses)
}

// classifyRest finishes classify once p.mfs holds the EMC's answers (nil
// for the emcMisses misses): megaflow lookups and upcalls for the misses,
// then execution.
func (p *PMD) classifyRest(pkts []*packet.Packet, emcMisses int) (upcalled bool) {
	p.local.emcHits += uint64(len(pkts) - emcMisses)
	consumed := false // a miss's upcall took a packet (its mfs entry is nil)
	if emcMisses > 0 {
		for i, pkt := range pkts {
			if p.mfs[i] != nil {
				continue
			}
			mf := p.flows.Lookup(&pkt.Key)
			if mf != nil {
				p.local.megaflowHits++
				p.emc.MaybeInsert(&pkt.Key, pkt.Hash, mf)
				if pkt.Key.RecircID == 0 {
					p.setLastFlow(pkt.Key.InPort, mf)
				}
			} else {
				upcalled = true
				mf = p.handleMiss(pkt, pkt.Hash) // nil: it consumed the packet
				consumed = consumed || mf == nil
			}
			p.mfs[i] = mf
		}
	}
	// Run-length accumulation: a run is consecutive packets of one flow.
	// When every packet has its flow a run is a slice of pkts, which
	// executeFlow takes at once (a flow that only outputs goes to its
	// port's batch in one step); when an upcall took a packet out of the
	// middle, each packet is executed as it comes and runs are only
	// counted.
	bulk := !consumed
	mfs := p.mfs[:len(pkts)]
	var runFlow *Megaflow
	var runStart int
	var runPkts, runBytes uint64
	for i, pkt := range pkts {
		mf := mfs[i]
		if mf == nil {
			continue
		}
		if mf != runFlow {
			if runFlow != nil {
				p.endRun(runFlow, pkts[runStart:i], runPkts, runBytes, bulk)
			}
			runFlow, runStart, runPkts, runBytes = mf, i, 0, 0
		}
		runPkts++
		runBytes += uint64(pkt.Len())
		if !bulk {
			p.execute(pkt, mf.Actions)
		}
	}
	if runFlow != nil {
		p.endRun(runFlow, pkts[runStart:], runPkts, runBytes, bulk)
	}
	return upcalled
}

// endRun ends a run of packets of flow mf in classifyRest: with bulk set
// it executes the run (whose packets are all mf's) through executeFlow,
// else it only counts the packets, which were executed one by one.
func (p *PMD) endRun(mf *Megaflow, run []*packet.Packet, pkts, bytes uint64, bulk bool) {
	if bulk {
		p.executeFlow(mf, run, bytes)
		return
	}
	mf.packets.Add(pkts)
	mf.bytes.Add(bytes)
	mf.touch(p.now)
}

// processPortFlow runs p.rx, received on inPort, through mf, the port's
// simple-match flow. Nothing reads the headers, so nothing parses them: a
// malformed frame goes where the flow sends every frame of the port, and is
// not counted as malformed.
func (p *PMD) processPortFlow(inPort uint32, mf *Megaflow) {
	pkts := p.rx.Packets()
	var bytes uint64
	for _, pkt := range pkts {
		pkt.InPort = inPort
		bytes += uint64(pkt.Len())
	}
	p.executeFlow(mf, pkts, bytes)
	n := uint64(len(pkts))
	p.local.simpleMatchHits += n
	p.local.rxPackets += n
}

// executeFlow counts pkts, of bytes bytes, to their flow mf and executes
// mf's actions on them: a flow that only outputs to one port hands them to
// its output batch at once.
func (p *PMD) executeFlow(mf *Megaflow, pkts []*packet.Packet, bytes uint64) {
	mf.packets.Add(uint64(len(pkts)))
	mf.bytes.Add(bytes)
	mf.touch(p.now)
	var ob *OutputBatch
	if mf.out != 0 {
		ob = p.outputBatch(mf.out)
	}
	if ob != nil {
		p.outputAll(ob, pkts)
		return
	}
	if mf.ctRecirc && p.fuseDepth < len(p.fused) && len(pkts) <= packet.BatchSize && p.dp.ct != nil {
		p.executeCTRecirc(mf, pkts) // it reads ahead itself
		return
	}
	if len(pkts) > 1 && p.dp.ct != nil && len(pkts) <= packet.BatchSize && p.aheadDepth < len(p.ahead) {
		ahead := p.ahead[p.aheadDepth][:len(pkts)]
		if p.prefetchCT(mf.Actions, pkts, ahead) {
			p.aheadDepth++
			for i, pkt := range pkts {
				p.ctAhead, p.ctAheadPkt = &ahead[i], pkt
				p.execute(pkt, mf.Actions)
			}
			p.ctAhead, p.ctAheadPkt = nil, nil
			p.aheadDepth--
			return
		}
	} else if len(pkts) > 1 && p.dp.ct != nil {
		p.prefetchCT(mf.Actions, pkts, nil)
	}
	for _, pkt := range pkts {
		p.execute(pkt, mf.Actions)
	}
}

// executeCTRecirc executes a ct-and-recirc flow (Megaflow.ctRecirc) on
// pkts and classifies each packet's recirculated key straight away,
// instead of queueing it for drainRecirc: the megaflow its pass hits
// comes from mf's memo when one is there (no hash, no key compare), else
// from the EMC or the classifier (then memoised when memoCovers allows).
// Consecutive packets of one second-pass flow go to executeFlow together.
// A packet the ct cannot take here (a fragment, a GSO frame, an invalid
// key) runs the actions as usual, and one whose recirculated key has no
// megaflow yet is queued for its upcall, as recirculate does: either way
// the packet's recirculation is the same (recirc_id, MaxRecirculations,
// counters), only sooner than the queue's. While anything waits in the
// queue, packets go through it too, in order.
func (p *PMD) executeCTRecirc(mf *Megaflow, pkts []*packet.Packet) {
	ctA, id := &mf.Actions[0], mf.Actions[1].RecircID()
	ct, prm := p.dp.ct, p.trackParams(ctA) // the flow has no nat: none to reset
	cc := p.connCache()
	run := &p.fused[p.fuseDepth]
	p.fuseDepth++
	var ahead []conntrack.Ahead
	if p.aheadDepth < len(p.ahead) {
		ahead = p.ahead[p.aheadDepth][:len(pkts)]
		p.aheadDepth++
	}
	// The batch's tuples parsed and hashed once, for the read-ahead and
	// for ct (the flow's ct has no nat: no translation to read ahead for).
	sink, filled := ct.PrefetchAhead(pkts, prm.Zone, prm.Commit, nil, ahead)
	if !filled && cc != nil {
		sink += uint16(ct.Touch(cc, pkts))
	}
	p.ctSink += sink
	var runFlow *Megaflow
	n := 0
	var runBytes uint64
	var prevHash uint32
	if len(pkts) > 0 {
		prevHash = ^pkts[0].Hash // no packet's before the first
	}
	for i, pkt := range pkts {
		// Once a packet waits in the queue, the ones after it wait too:
		// none may overtake it (a connection's data after its FIN
		// would reach the next ct, or the wire, out of order).
		if p.recirc.pending() || !pkt.KeyValid || pkt.GSO() || pkt.Key.NwFrag&flow.FragAny != 0 || pkt.Recircs >= MaxRecirculations {
			p.execute(pkt, mf.Actions)
			continue
		}
		// A packet of the same connection as the last one (a burst:
		// its flow hash the one before's, a register compare for
		// traffic without bursts) takes its verdict without the call
		// into Track.
		burst := pkt.Hash == prevHash
		prevHash = pkt.Hash
		if filled {
			ct.Track(pkt, prm, p.now, &ahead[i], cc, &p.rw)
		} else if !burst || !cc.Again(pkt, prm, p.now) {
			ct.Track(pkt, prm, p.now, nil, cc, &p.rw)
		} else {
			p.rw.Valid = false
		}
		if rw := &p.rw; rw.Valid {
			// Only a ct with nat translates; as conntrack does.
			p.natActs = rw.Actions(&pkt.Key, p.natActs[:0])
			for i := range p.natActs {
				p.apply(&p.natActs[i], pkt)
			}
		}
		pkt.Key.RecircID = uint16(id)
		next := mf.memoLookup(pkt.Key.InPort, ctWord(&pkt.Key))
		if next != nil {
			p.local.emcHits++
		} else if next = p.recircLookup(mf, pkt); next == nil {
			p.recirculate(pkt, id)
			continue
		}
		pkt.Recircs++
		pkt.HashValid = false // the first pass's
		p.local.recirculations++
		if next != runFlow {
			if n > 0 {
				p.executeFlow(runFlow, run[:n], runBytes)
			}
			runFlow, n, runBytes = next, 0, 0
		}
		run[n] = pkt
		n++
		runBytes += uint64(pkt.Len())
	}
	if n > 0 {
		p.executeFlow(runFlow, run[:n], runBytes)
	}
	clear(run[:n])
	p.fuseDepth--
	if ahead != nil {
		p.aheadDepth--
	}
}

// recircLookup finds the megaflow of pkt's recirculated key (a packet of
// ct-and-recirc flow first) in the EMC or the classifier, as classify
// would, and memoises it in first when memoCovers allows. It returns nil
// when the key needs an upcall.
func (p *PMD) recircLookup(first *Megaflow, pkt *packet.Packet) *Megaflow {
	h := pkt.Key.Hash()
	pkt.Hash = h
	next := p.emc.Lookup(&pkt.Key, h)
	if next != nil {
		p.local.emcHits++
	} else {
		if next = p.flows.Lookup(&pkt.Key); next == nil {
			return nil
		}
		p.local.megaflowHits++
		p.emc.MaybeInsert(&pkt.Key, h, next)
	}
	if memoCovers(first.Mask, next.Mask) {
		first.memoAdd(pkt.Key.InPort, ctWord(&pkt.Key), next)
	}
	return next
}

// prefetchCT lets the tracker read ahead for a batch whose actions start
// with ct (after the ct's own parameters): the batch's lookups in a large
// table then wait for memory together rather than one by one.
func (p *PMD) prefetchCT(acts actions.List, pkts []*packet.Packet, ahead []conntrack.Ahead) (filled bool) {
	var nat conntrack.NAT
	for i := range acts {
		switch a := &acts[i]; a.Kind {
		case actions.CTLabel, actions.CTLabelMask:
			continue
		case actions.CTNAT:
			ctNAT(a, &nat)
			continue
		case actions.CTNATMax:
			nat.MaxAddr = a.Addr
			continue
		case actions.CT:
			var np *conntrack.NAT
			if a.Val8&actions.CTFlagNAT != 0 {
				np = &nat
			}
			var sink uint16
			sink, filled = p.dp.ct.PrefetchAhead(pkts, a.Val16, a.Val8&actions.CTFlagCommit != 0, np, ahead)
			p.ctSink += sink
		}
		return filled
	}
	return false
}

// ctNAT reads a CTNAT action (the nat(...) of the ct after it) into n.
func ctNAT(a *actions.Action, n *conntrack.NAT) {
	n.Src, n.Dst = a.Val8&actions.CTNATSrc != 0, a.Val8&actions.CTNATDst != 0
	n.MinAddr, n.MinPort, n.MaxPort = a.Addr, a.Val16, a.Val16b
	n.Persistent, n.Random = a.Val8&actions.CTNATPersistent != 0, a.Val8&actions.CTNATRandom != 0
}

// isPortFlow reports whether mf matches on the input port alone and its
// actions only output, so that it can serve as its port's simple-match flow.
func isPortFlow(mf *Megaflow) bool {
	if *mf.Mask != (flow.Mask{InPort: ^uint32(0), RecircID: 0xffff}) || mf.Key.RecircID != 0 {
		return false
	}
	for i := range mf.Actions {
		if mf.Actions[i].Kind != actions.Output {
			return false
		}
	}
	return true
}

// setPortFlow records mf as its port's simple-match flow if it is one.
func (p *PMD) setPortFlow(mf *Megaflow) {
	if isPortFlow(mf) {
		setByPort(&p.portFlows, mf.Key.InPort, mf)
	}
}

// setLastFlow makes mf the flow port in's next batch tries first
// (lastFlows).
func (p *PMD) setLastFlow(in uint32, mf *Megaflow) { setByPort(&p.lastFlows, in, mf) }

// setByPort sets port in's entry of the port-indexed table *t to mf,
// growing it to hold the port; in_port 0, never a port, is left out.
func setByPort(t *[]*Megaflow, in uint32, mf *Megaflow) {
	i := int(portIndex(in))
	if i >= MaxPorts {
		return
	}
	if i >= len(*t) {
		*t = append(*t, make([]*Megaflow, i+1-len(*t))...)
	}
	(*t)[i] = mf
}

// unsetPortFlow forgets mf if it is its port's simple-match flow.
func (p *PMD) unsetPortFlow(mf *Megaflow) {
	if in := int(portIndex(mf.Key.InPort)); in < len(p.portFlows) && p.portFlows[in] == mf {
		p.portFlows[in] = nil
	}
}

// clearFlows empties the PMD's caches after a rule change, first pushing
// the traffic of every megaflow to its rules so that no count is lost.
func (p *PMD) clearFlows() {
	p.emc.Clear()
	p.flows.Clear()
	clear(p.portFlows)
	clear(p.lastFlows)
	p.nflows.Store(0)
	p.installedMu.Lock()
	for _, f := range p.installed {
		f.push(&p.pushQ)
		f.expired = true // out of next memos too
	}
	p.flushRefs(time.Now())
	clear(p.installed)
	p.installed = p.installed[:0]
	p.installedMu.Unlock()
	clear(p.refLists)
}

// expireIdle removes the megaflows not used since cutoff (datapath clock),
// pushing their last traffic to their rules first, from the classifier and
// the EMC. The PMD owns both, so it does this itself, between batches.
func (p *PMD) expireIdle(cutoff int64) {
	now := time.Now()
	dead := p.deadScratch[:0]
	p.installedMu.Lock()
	keep := p.installed[:0]
	for _, f := range p.installed {
		if f.used.Load() < cutoff {
			f.push(&p.pushQ)
			f.expired = true
			dead = append(dead, f)
		} else {
			keep = append(keep, f)
		}
	}
	p.flushRefs(now)
	clear(p.installed[len(keep):])
	p.installed = keep
	p.installedMu.Unlock()
	if len(dead) == 0 {
		return
	}
	for _, f := range dead {
		p.flows.Remove(&flow.Match{Key: f.Key, Mask: *f.Mask})
		p.unsetPortFlow(f)
	}
	p.emc.RemoveIf(func(f *Megaflow) bool { return f.expired })
	p.nflows.Store(int64(p.flows.Len()))
	p.expired.Add(uint64(len(dead)))
	clear(dead)
	p.deadScratch = dead[:0]
}

// pushStats hands every installed megaflow's new traffic to its rules.
func (p *PMD) pushStats(now time.Time) {
	p.installedMu.Lock()
	for _, f := range p.installed {
		f.push(&p.pushQ)
	}
	p.flushRefs(now)
	p.installedMu.Unlock()
}

// handleMiss asks the Upcaller for the packet's actions and installs them as
// a megaflow. It returns the megaflow to execute, or nil if it already dealt
// with the packet (dropped it, or executed uninstallable actions).
func (p *PMD) handleMiss(pkt *packet.Packet, hash uint32) *Megaflow {
	p.local.misses++
	up := p.dp.cfg.Upcall
	if up == nil {
		p.local.lostUpcalls++
		p.drop(pkt, DropNoFlow)
		return nil
	}
	if err := up.Upcall(&pkt.Key, &p.upcall); err != nil {
		p.local.lostUpcalls++
		p.drop(pkt, DropNoFlow)
		return nil
	}
	if p.upcall.NoInstall || p.flows.Len() >= p.cur.flowLimit {
		if !p.upcall.NoInstall {
			p.local.flowsLimited++
		}
		now := time.Now()
		for _, r := range p.upcall.Refs {
			r.Touch(now, 1, uint64(pkt.Len()))
		}
		p.execute(pkt, p.upcall.Actions)
		return nil
	}
	mf := newMegaflow(p.upcall.Actions)
	mf.refs = p.sharedRefs(p.upcall.Refs)
	mf.out = soleOutput(mf.Actions)
	mf.ctRecirc = isCTRecirc(mf.Actions)
	// recirc_id is never wildcarded, whatever the Upcaller's mask says:
	// a first-pass megaflow must not catch a recirculated packet, nor one
	// pass's flow another's.
	p.upcall.Mask.RecircID = 0xffff
	pkt.Key.ApplyMask(&p.upcall.Mask, &mf.Key)
	mf.used.Store(p.now)
	p.installedMu.Lock()
	old, mask := p.flows.InsertMasked(&mf.Key, &p.upcall.Mask, mf)
	mf.Mask = mask
	mf.setMaskWords()
	if old != nil {
		old.expired = true // out of next memos too
		p.emc.RemoveValue(old)
		p.unsetPortFlow(old)
		old.push(&p.pushQ)
		p.flushRefs(time.Now())
		p.installed = slices.DeleteFunc(p.installed, func(f *Megaflow) bool { return f == old })
	}
	p.installed = append(p.installed, mf)
	p.installedMu.Unlock()
	p.nflows.Store(int64(p.flows.Len()))
	p.emc.MaybeInsert(&pkt.Key, hash, mf)
	p.setPortFlow(mf)
	return mf
}

// execute runs acts on pkt and consumes it: the packet ends in an output
// batch or back in the pool.
func (p *PMD) execute(pkt *packet.Packet, acts actions.List) {
	if pkt.GSO() && !gsoSafe(acts, pkt) {
		p.executeSegmented(pkt, acts)
		return
	}
	last := len(acts) - 1
	for i := range acts {
		a := &acts[i]
		switch a.Kind {
		case actions.Output:
			if i == last {
				p.output(pkt, a.Port)
				return
			}
			// Later actions may rewrite the packet: queue a copy.
			c := p.pool.GetFit(pkt)
			if c == nil {
				if pkt.GSO() { // no big buffer free: copy it as segments
					p.outputCopySegments(pkt, a.Port)
					continue
				}
				p.local.drops[DropNoBuffer]++
				continue
			}
			c.CopyFrom(pkt)
			p.output(c, a.Port)
		case actions.Controller:
			if !p.dp.ctrlq.push(pkt, a) {
				p.local.drops[DropController]++
			}
		case actions.Drop:
			pkt.Free()
			return
		case actions.Meter:
			if !p.meter(pkt, a.MeterID()) {
				p.drop(pkt, DropMeter)
				return
			}
		case actions.CTLabel:
			p.ctParams.Label = a.Addr
		case actions.CTLabelMask:
			p.ctParams.LabelMask = a.Addr
		case actions.CTNAT:
			ctNAT(a, &p.ctParams.NAT)
		case actions.CTNATMax:
			p.ctParams.NAT.MaxAddr = a.Addr
		case actions.CT:
			// The tuple parsed ahead for this packet, if any, is its
			// first ct's (prefetchCT's): no later one takes it.
			ah := p.ctAhead
			if p.ctAheadPkt != pkt {
				ah = nil
			}
			p.ctAhead, p.ctAheadPkt = nil, nil
			if !pkt.KeyValid {
				reextract(pkt)
			}
			if pkt.Key.NwFrag&flow.FragAny != 0 && p.ctFragment(pkt, a, acts[i+1:]) {
				return
			}
			p.conntrack(pkt, a, ah)
		case actions.Recirc:
			if i == last {
				p.recirculate(pkt, a.RecircID())
				return
			}
			// A group bucket's copy recirculates while the packet
			// goes on to the other buckets.
			c := p.pool.GetFit(pkt)
			if c == nil {
				p.local.drops[DropNoBuffer]++
				continue
			}
			c.CopyFrom(pkt)
			c.Recircs = pkt.Recircs
			p.recirculate(c, a.RecircID())
		case actions.CheckPktLen:
			if !pkt.KeyValid {
				reextract(pkt)
			}
			id := a.LessEqualID()
			if actions.CheckedLen(pkt) > int(a.Val16) {
				id = a.GreaterID()
			}
			if i == last {
				p.recirculate(pkt, id)
				return
			}
			// Actions after it (a resubmit's caller going on) run on
			// the packet as it is; the branch takes a copy.
			c := p.pool.GetFit(pkt)
			if c == nil {
				p.local.drops[DropNoBuffer]++
				continue
			}
			c.CopyFrom(pkt)
			c.Recircs = pkt.Recircs
			p.recirculate(c, id)
		default:
			if !p.apply(a, pkt) {
				p.drop(pkt, DropAction)
				return
			}
		}
	}
	pkt.Free()
}

// conntrack runs a CT action: the tracker writes its verdict into the
// packet's key and the packet is translated as its connection's NAT says.
func (p *PMD) conntrack(pkt *packet.Packet, a *actions.Action, ah *conntrack.Ahead) {
	p.natActs = p.track(pkt, a, ah)
	for i := range p.natActs {
		p.apply(&p.natActs[i], pkt)
	}
}

// ctFragment runs a CT action on a fragment, which the reassembler holds
// until its datagram is whole: then the tracker sees the datagram, and
// each fragment, with the datagram's verdict and translation, runs the
// actions after the ct (rest). It reports false when the fragment is not
// reassembled (too small, no room): ct then runs on it as it is.
func (p *PMD) ctFragment(pkt *packet.Packet, a *actions.Action, rest actions.List) bool {
	frags, res := p.ipf.Add(pkt, a.Val16, p.now)
	switch res {
	case ipf.Pass:
		return false
	case ipf.Held, ipf.Dropped:
		p.ctParams.NAT = conntrack.NAT{}
		return true
	}
	whole := p.pool.GetBig()
	if whole == nil || !ipf.Reassemble(frags, whole) {
		if whole != nil {
			whole.Free()
		}
		p.ctParams.NAT = conntrack.NAT{}
		for _, f := range frags {
			p.drop(f, DropNoBuffer)
		}
		return true
	}
	flow.Extract(whole.Data(), whole.InPort, &whole.Key, &whole.Offsets)
	whole.KeyValid = true
	whole.Key.RecircID = pkt.Key.RecircID
	natActs := p.track(whole, a, nil)
	for _, f := range frags {
		if !f.KeyValid {
			reextract(f)
		}
		f.Key.CT = whole.Key.CT
		for i := range natActs {
			p.apply(&natActs[i], f)
		}
	}
	whole.Free()
	for _, f := range frags {
		p.execute(f, rest)
	}
	return true
}

// track runs the tracker for a CT action on pkt, whose key is valid
// (execute saw to it), and returns the set actions that translate the
// packet, if its connection has NAT (in p.natActs, valid until the next
// track). The label, if the action sets one, came
// in the CTLabel actions before it.
//
// ah, when not nil, is pkt's tuple as PrefetchAhead parsed it, pkt
// unchanged since.
func (p *PMD) track(pkt *packet.Packet, a *actions.Action, ah *conntrack.Ahead) []actions.Action {
	prm := p.trackParams(a)
	rw := &p.rw
	if cc := p.connCache(); ah != nil || !cc.Again(pkt, prm, p.now) {
		p.dp.ct.Track(pkt, prm, p.now, ah, cc, rw)
	} else {
		rw.Valid = false
	}
	prm.NAT = conntrack.NAT{} // the next ct has its own (or none)
	return rw.Actions(&pkt.Key, p.natActs[:0])
}

// connCache is the PMD's connection cache for Tracker.Track.
func (p *PMD) connCache() *conntrack.ConnCache {
	if p.conns == nil {
		p.conns = new(conntrack.ConnCache)
	}
	return p.conns
}

// trackParams fills p.ctParams for CT action a (the label and nat came in
// the actions before it) and returns it.
func (p *PMD) trackParams(a *actions.Action) *conntrack.Params {
	prm := &p.ctParams
	prm.Zone = a.Val16
	prm.Commit = a.Val8&actions.CTFlagCommit != 0
	prm.Force = a.Val8&actions.CTFlagForce != 0
	prm.SetMark = a.Val8&actions.CTFlagMark != 0
	prm.Mark, prm.MarkMask = a.Val32, a.CTMarkMask()
	prm.SetLabel = a.Val8&actions.CTFlagLabel != 0
	prm.HasNAT = a.Val8&actions.CTFlagNAT != 0
	switch {
	case a.Val8&actions.CTFlagALGFTP != 0:
		prm.Helper = conntrack.HelperFTP
	case a.Val8&actions.CTFlagALGTFTP != 0:
		prm.Helper = conntrack.HelperTFTP
	default:
		prm.Helper = conntrack.HelperNone
	}
	return prm
}

func (p *PMD) drop(pkt *packet.Packet, why DropCause) {
	p.local.drops[why]++
	pkt.Free()
}

// mailbox carries packet-outs from the control plane to a PMD.
type mailbox struct {
	waiting atomic.Int32
	mu      sync.Mutex
	items   []mailItem
}

type mailItem struct {
	data   []byte
	inPort uint32
	acts   actions.List
}

const mailboxDepth = 256

var errMailboxFull = errors.New("datapath: packet-out mailbox full")

func (m *mailbox) post(data []byte, inPort uint32, acts actions.List) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.items) >= mailboxDepth {
		return errMailboxFull
	}
	m.items = append(m.items, mailItem{data: append([]byte(nil), data...), inPort: inPort, acts: acts})
	m.waiting.Store(int32(len(m.items)))
	return nil
}

// runMailbox executes every queued packet-out, then flushes everything.
func (p *PMD) runMailbox() {
	p.mailbox.mu.Lock()
	items := p.mailbox.items
	p.mailbox.items = nil
	p.mailbox.waiting.Store(0)
	p.mailbox.mu.Unlock()
	for _, it := range items {
		pkt := p.pool.Get()
		if pkt == nil {
			p.local.drops[DropNoBuffer]++
			continue
		}
		pkt.SetData(it.data)
		pkt.InPort = it.inPort
		flow.Extract(pkt.Data(), it.inPort, &pkt.Key, &pkt.Offsets)
		pkt.KeyValid = true
		p.execute(pkt, it.acts)
		p.drainRecirc()
	}
	p.flush(true)
}

package datapath

import (
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// pmdCounters are one PMD's statistics as published for readers. The PMD
// counts in plain local fields and stores them here at most every
// statsPublishInterval and whenever it goes idle, so readers never slow it
// down; each PMD's block sits on cache lines of its own (see sharedSlab).
type pmdCounters struct {
	iterations      atomic.Uint64
	busyNs          atomic.Uint64
	idleNs          atomic.Uint64
	rxPackets       atomic.Uint64
	emcHits         atomic.Uint64
	simpleMatchHits atomic.Uint64
	megaflowHits    atomic.Uint64
	misses          atomic.Uint64
	lostUpcalls     atomic.Uint64
	malformed       atomic.Uint64
	flowsLimited    atomic.Uint64
	recirculations  atomic.Uint64
	idleYields      atomic.Uint64
	drops           [numDropCauses]atomic.Uint64
}

// DropCause says why the datapath dropped a packet.
type DropCause int

// Drop causes, as counted per PMD.
const (
	DropNoFlow     DropCause = iota // the upcall failed or gave no actions
	DropNoPort                      // output to a port that does not exist
	DropTxFull                      // the port's tx queue refused it
	DropPortDown                    // output to a port whose link is down
	DropAction                      // an action dropped it (TTL expired, no headroom)
	DropNoBuffer                    // no pool buffer for a copy
	DropController                  // the controller queue was full
	DropMeter                       // a meter band dropped it, or its meter does not exist
	DropRecirc                      // a recirculation beyond MaxRecirculations
	numDropCauses
)

var dropCauseNames = [numDropCauses]string{
	"no_flow", "no_port", "tx_queue_full", "port_down", "action", "no_buffer", "controller_queue_full",
	"meter", "recirc_depth",
}

// String returns the cause's name as used in metrics and drop-stats.
func (c DropCause) String() string {
	if c < 0 || c >= numDropCauses {
		return "unknown"
	}
	return dropCauseNames[c]
}

// DropCauses lists every cause, in order.
func DropCauses() []DropCause {
	c := make([]DropCause, numDropCauses)
	for i := range c {
		c[i] = DropCause(i)
	}
	return c
}

// pmdLocal are the PMD's own running counts, published to pmdCounters.
type pmdLocal struct {
	iterations, busyNs, idleNs, rxPackets      uint64
	emcHits, megaflowHits, misses, lostUpcalls uint64
	simpleMatchHits, malformed, flowsLimited   uint64
	recirculations, idleYields                 uint64
	drops                                      [numDropCauses]uint64
}

func (l *pmdLocal) publish(c *pmdCounters) {
	c.iterations.Store(l.iterations)
	c.busyNs.Store(l.busyNs)
	c.idleNs.Store(l.idleNs)
	c.rxPackets.Store(l.rxPackets)
	c.emcHits.Store(l.emcHits)
	c.simpleMatchHits.Store(l.simpleMatchHits)
	c.megaflowHits.Store(l.megaflowHits)
	c.misses.Store(l.misses)
	c.lostUpcalls.Store(l.lostUpcalls)
	c.malformed.Store(l.malformed)
	c.flowsLimited.Store(l.flowsLimited)
	c.recirculations.Store(l.recirculations)
	c.idleYields.Store(l.idleYields)
	for i := range l.drops {
		c.drops[i].Store(l.drops[i])
	}
}

// PMDStats is a snapshot of one PMD's counters.
type PMDStats struct {
	PMD        int
	Iterations uint64
	BusyNs     uint64 // time in iterations that received packets
	IdleNs     uint64 // time in iterations that received nothing, sleep included
	RxPackets  uint64
	EMCHits    uint64
	// SimpleMatchHits are packets that took their input port's only
	// megaflow, one matching on the port alone, without being parsed
	// (OVS's "simple match hits").
	SimpleMatchHits uint64
	MegaflowHits    uint64
	Misses          uint64 // upcalls
	LostUpcalls     uint64 // upcalls that failed (packet dropped)
	Malformed       uint64 // packets whose headers were truncated or malformed (still classified)
	FlowsLimited    uint64 // upcalls not installed because the PMD was at its flow limit
	// Recirculations are the packets a recirc action sent through the
	// caches again (each pass after the first counts once); their
	// lookups count in EMCHits, MegaflowHits and Misses like a received
	// packet's.
	Recirculations uint64
	// IdleYields are the times a polling PMD that found nothing offered
	// its CPU to whatever else was ready to run there (idleYieldNs).
	IdleYields uint64
	Drops      [numDropCauses]uint64
}

func (c *pmdCounters) snapshot(pmd int) PMDStats {
	s := PMDStats{
		PMD:             pmd,
		Iterations:      c.iterations.Load(),
		BusyNs:          c.busyNs.Load(),
		IdleNs:          c.idleNs.Load(),
		RxPackets:       c.rxPackets.Load(),
		EMCHits:         c.emcHits.Load(),
		SimpleMatchHits: c.simpleMatchHits.Load(),
		MegaflowHits:    c.megaflowHits.Load(),
		Misses:          c.misses.Load(),
		LostUpcalls:     c.lostUpcalls.Load(),
		Malformed:       c.malformed.Load(),
		FlowsLimited:    c.flowsLimited.Load(),
		Recirculations:  c.recirculations.Load(),
		IdleYields:      c.idleYields.Load(),
	}
	for i := range s.Drops {
		s.Drops[i] = c.drops[i].Load()
	}
	return s
}

// txCounters are one PMD's transmit counters for one port, updated on every
// flush (one batch) by that PMD.
type txCounters struct {
	packets atomic.Uint64
	batches atomic.Uint64
	drops   atomic.Uint64
	kicks   atomic.Uint64
}

// txBatchSizes is one PMD's output-batch size histogram for one port,
// updated with txCounters. It lives in a slab of its own: inside txCounters
// it would make a block larger than a cache line, and the packed layout
// that BenchmarkSeparateTxqs uses to show false sharing would no longer put
// two PMDs' hot counters on one line.
type txBatchSizes struct {
	n [len(BatchSizeBounds)]atomic.Uint64
}

// rxqCounters are the cumulative statistics of one rx queue. The PMD that
// polls the queue adds to them when it publishes its own counters and when
// it lets go of the queue.
type rxqCounters struct {
	packets atomic.Uint64
	busyNs  atomic.Uint64
}

// RxqStats is a snapshot of one rx queue's counters and the PMD polling it.
type RxqStats struct {
	PMD     int
	Port    uint32
	Queue   int
	Packets uint64 // received since the port was added
	// BusyNs is the PMD time spent on the queue's packets since the port
	// was added: receiving, classifying, executing and the sends they
	// caused. The queues of a PMD add up to its PMDStats.BusyNs.
	BusyNs uint64
}

// BatchSizeBounds are the upper bounds of the output-batch size histogram:
// bucket i counts batches of more than BatchSizeBounds[i-1] and at most
// BatchSizeBounds[i] packets (powers of two up to packet.BatchSize).
var BatchSizeBounds = [...]int{1, 2, 4, 8, 16, 32}

// batchSizeBucket is the histogram bucket of a batch of n (1..32) packets.
func batchSizeBucket(n int) int { return bits.Len(uint(n - 1)) }

// PortPMDStats is a snapshot of what one PMD sent to one port.
type PortPMDStats struct {
	PMD     int
	Packets uint64 // packets the driver accepted
	Batches uint64 // calls to the driver's Send
	Drops   uint64 // packets the driver refused (tx queue full) or the port was down
	// Kicks are the driver's wake-ups of the queue's consumer during
	// those sends (send syscalls, eventfd writes): what batching saves.
	// Zero for drivers that do not count them (netdev.TxKicker).
	Kicks uint64
	// BatchSizes counts batches by size, bucket i per BatchSizeBounds[i]
	// (not cumulative).
	BatchSizes [len(BatchSizeBounds)]uint64
}

// AvgBatch is the average packets per output batch.
func (s PortPMDStats) AvgBatch() float64 {
	if s.Batches == 0 {
		return 0
	}
	return float64(s.Packets+s.Drops) / float64(s.Batches)
}

// sharedSlab lays out n blocks of type T that different PMDs write, each on
// cache lines of its own (stride rounded up to CacheLine) unless packed is
// set, which keeps them back to back: only benchmarks ask for that, to show
// what false sharing costs. T must hold no pointers.
type sharedSlab[T any] struct {
	mem    []uint64
	stride uintptr // in bytes
	n      int
}

func newSharedSlab[T any](n int, packed bool) sharedSlab[T] {
	var zero T
	size := unsafe.Sizeof(zero)
	stride := (size + CacheLine - 1) &^ (CacheLine - 1)
	if packed {
		stride = (size + 7) &^ 7
	}
	// One spare line so the first block can start on a line boundary.
	words := (uintptr(n)*stride + CacheLine) / 8
	return sharedSlab[T]{mem: make([]uint64, words), stride: stride, n: n}
}

func (s sharedSlab[T]) base() uintptr {
	p := uintptr(unsafe.Pointer(&s.mem[0]))
	return (p + CacheLine - 1) &^ (CacheLine - 1)
}

// len returns the number of blocks.
func (s sharedSlab[T]) len() int { return s.n }

// at returns block i.
func (s sharedSlab[T]) at(i int) *T {
	off := s.base() - uintptr(unsafe.Pointer(&s.mem[0])) + uintptr(i)*s.stride
	return (*T)(unsafe.Add(unsafe.Pointer(&s.mem[0]), off))
}

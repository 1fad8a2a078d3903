package datapath

// Rx-queue scheduling: which PMD polls which receive queue, and how that
// changes (the configured assignment function, rebalancing by measured busy
// time, pinning by CPU affinity) without a queue ever being polled by two
// PMDs at once.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// RxqRef names one receive queue of one port.
type RxqRef struct {
	Port  uint32
	Queue int
}

// RoundRobin assigns receive queues to PMDs in turn, in port then queue order.
func RoundRobin(rxqs []RxqRef, npmd int) [][]RxqRef {
	out := make([][]RxqRef, npmd)
	for i, r := range rxqs {
		out[i%npmd] = append(out[i%npmd], r)
	}
	return out
}

// reconfigure builds a new plan for every PMD and waits until running PMDs
// have switched to it; PMDs not running (Manual mode, stopped) switch now.
// Called with dp.mu held.
//
// An rx queue that moves from one running PMD to another must never be
// polled by both (drivers' rx rings have a single consumer), so a move takes
// two steps: first every PMD drops the queues it loses, and only once all
// have acknowledged do the queues appear on their new PMDs. In between the
// queue is polled by nobody and its packets wait in the driver's ring.
func (dp *Datapath) reconfigure() {
	dp.replanPending = false
	ports := dp.sortedPorts()
	dp.portSnap.Store(&ports)
	var rxqs []RxqRef
	for _, p := range ports {
		for q := 0; q < p.Dev.NumRxQueues(); q++ {
			if r := (RxqRef{Port: p.No, Queue: q}); !dp.hasAffinity(r) {
				rxqs = append(rxqs, r)
			}
		}
	}
	assign := dp.pinAffinity(dp.pin(dp.spread(rxqs)))
	if dp.running {
		if interim, moves := withoutMoves(dp.assign, assign); moves {
			dp.publishPlans(ports, interim)
		}
	}
	dp.publishPlans(ports, assign)
	dp.assign = assign
	snap := make([][]RxqRef, len(assign))
	for i := range assign {
		snap[i] = slices.Clone(assign[i])
	}
	dp.assignSnap.Store(&snap)
}

// RebalanceRxqs reassigns rx queues to PMDs by the busy time each queue
// took since the previous rebalance (or since its port was added): the
// busiest queue first, each onto the PMD with the least load so far,
// preferring the queue's own PMD among equally loaded ones. Queues that were
// idle stay where they are. The new assignment is applied only if it
// lowers the load of the busiest PMD; it is applied while the PMDs run, and
// a moved queue is never polled by two PMDs at once, so no packet is lost
// or duplicated. It lasts until the queue's port is removed (AssignRxqs
// only places queues not placed here). It returns how many queues moved.
func (dp *Datapath) RebalanceRxqs() (moved int, err error) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return 0, errors.New("datapath: closed")
	}
	type rxqLoad struct {
		ref      RxqRef
		load     uint64
		from, to int
	}
	var qs []rxqLoad
	cur := make([]uint64, len(dp.pmds))
	for pmd, rs := range dp.assign {
		for _, r := range rs {
			p := dp.ports[r.Port]
			if p == nil || r.Queue >= p.rxq.len() {
				continue
			}
			busy := p.rxq.at(r.Queue).busyNs.Load()
			load := busy - p.rxqBase[r.Queue]
			p.rxqBase[r.Queue] = busy
			qs = append(qs, rxqLoad{ref: r, load: load, from: pmd, to: pmd})
			cur[pmd] += load
		}
	}
	if len(dp.pmds) < 2 {
		return 0, nil
	}
	slices.SortStableFunc(qs, func(a, b rxqLoad) int {
		switch {
		case a.load > b.load:
			return -1
		case a.load < b.load:
			return 1
		}
		return 0
	})
	next := make([]uint64, len(dp.pmds))
	sh := dp.shared()
	for i := range qs {
		q := &qs[i]
		if dp.hasAffinity(q.ref) {
			next[q.from] += q.load // stays: its PMD is not a target
			continue
		}
		if q.load == 0 {
			continue // adds nothing anywhere: moving it would only disturb
		}
		best := q.from
		if !slices.Contains(sh, best) {
			best = sh[0]
		}
		for _, pmd := range sh {
			if next[pmd] < next[best] {
				best = pmd
			}
		}
		q.to = best
		next[best] += q.load
	}
	if slices.Max(next) >= slices.Max(cur) {
		return 0, nil
	}
	if dp.pinned == nil {
		dp.pinned = make(map[RxqRef]int)
	}
	for _, q := range qs {
		if dp.hasAffinity(q.ref) {
			continue
		}
		dp.pinned[q.ref] = q.to
		if q.to != q.from {
			moved++
		}
	}
	dp.reconfigure()
	return moved, nil
}

// hasAffinity reports whether SetRxqAffinity placed r. Its entries are
// checked when set and dropped with their port, so each names a queue and
// a PMD that exist.
func (dp *Datapath) hasAffinity(r RxqRef) bool {
	_, ok := dp.affinity[r]
	return ok
}

// shared lists the PMDs that poll queues without affinity: those with no
// affinity queue, or every PMD if all have one.
func (dp *Datapath) shared() []int {
	isolated := make([]bool, len(dp.pmds))
	for _, pmd := range dp.affinity {
		isolated[pmd] = true
	}
	var out []int
	for i, iso := range isolated {
		if !iso {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		for i := range isolated {
			out = append(out, i)
		}
	}
	return out
}

// spread distributes rxqs with AssignRxqs over the shared PMDs and returns
// one list per PMD.
func (dp *Datapath) spread(rxqs []RxqRef) [][]RxqRef {
	out := make([][]RxqRef, len(dp.pmds))
	sh := dp.shared()
	for i, rs := range dp.cfg.AssignRxqs(rxqs, len(sh)) {
		if i < len(sh) {
			out[sh[i]] = append(out[sh[i]], rs...)
		}
	}
	return out
}

// pin returns assign, one list per PMD, with every rx queue that
// RebalanceRxqs placed moved to the PMD it chose.
func (dp *Datapath) pin(assign [][]RxqRef) [][]RxqRef {
	out := make([][]RxqRef, len(dp.pmds))
	for i, rs := range assign {
		for _, r := range rs {
			to := i
			if pmd, ok := dp.pinned[r]; ok {
				to = pmd
			}
			if to < len(out) {
				out[to] = append(out[to], r)
			}
		}
	}
	return out
}

// pinAffinity adds the queues with affinity to their PMDs' lists, in port
// then queue order.
func (dp *Datapath) pinAffinity(assign [][]RxqRef) [][]RxqRef {
	refs := slices.SortedFunc(maps.Keys(dp.affinity), func(a, b RxqRef) int {
		if a.Port != b.Port {
			return cmp.Compare(a.Port, b.Port)
		}
		return cmp.Compare(a.Queue, b.Queue)
	})
	for _, r := range refs {
		pmd := dp.affinity[r]
		assign[pmd] = append(assign[pmd], r)
	}
	return assign
}

// SetRxqAffinity pins rx queues of port no to CPUs, as OVS's
// pmd-rxq-affinity does: each queue in cpus (queue → CPU) is polled by the
// PMD running on that CPU, which then polls no queue without affinity
// (unless every PMD has some), and rebalancing leaves both alone. Queues
// not in cpus are assigned as usual; an empty map clears the port's
// affinity. The CPUs must be ones PMDs run on (Config.CPUs); the setting
// lasts until the port is removed. It drops the placements of earlier
// rebalances, which were made for the old isolation.
func (dp *Datapath) SetRxqAffinity(no uint32, cpus map[int]int) error {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	p := dp.ports[no]
	if p == nil {
		return fmt.Errorf("datapath: no port %d", no)
	}
	if err := dp.CheckRxqAffinity(p.Dev.NumRxQueues(), cpus); err != nil {
		return err
	}
	// Rebalancing placed queues for the old isolation: start afresh.
	clear(dp.pinned)
	dp.unpin(no)
	if dp.affinity == nil {
		dp.affinity = make(map[RxqRef]int)
	}
	for q, cpu := range cpus {
		dp.affinity[RxqRef{Port: no, Queue: q}] = slices.Index(dp.cfg.CPUs, cpu)
	}
	dp.replan()
	return nil
}

// CheckRxqAffinity reports what SetRxqAffinity would refuse in cpus for
// a port with nrxq rx queues: a queue it does not have, or a CPU no PMD
// runs on.
func (dp *Datapath) CheckRxqAffinity(nrxq int, cpus map[int]int) error {
	for _, q := range slices.Sorted(maps.Keys(cpus)) {
		if q < 0 || q >= nrxq {
			return fmt.Errorf("no rx queue %d (the port has %d)", q, nrxq)
		}
		if pmd := slices.Index(dp.cfg.CPUs, cpus[q]); pmd < 0 || pmd >= len(dp.pmds) {
			if len(dp.cfg.CPUs) == 0 {
				return fmt.Errorf("queue %d: no PMD is pinned to a CPU", q)
			}
			return fmt.Errorf("queue %d: no PMD runs on CPU %d (PMD CPUs: %v)", q, cpus[q], dp.cfg.CPUs[:min(len(dp.cfg.CPUs), len(dp.pmds))])
		}
	}
	return nil
}

// RxqAffinity returns the CPUs port no's rx queues are pinned to (queue →
// CPU); empty without affinity.
func (dp *Datapath) RxqAffinity(no uint32) map[int]int {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	out := make(map[int]int)
	for r, pmd := range dp.affinity {
		if r.Port == no {
			out[r.Queue] = dp.cfg.CPUs[pmd]
		}
	}
	return out
}

// unpin forgets where RebalanceRxqs and SetRxqAffinity put the queues of
// port no.
func (dp *Datapath) unpin(no uint32) {
	for r := range dp.pinned {
		if r.Port == no {
			delete(dp.pinned, r)
		}
	}
	for r := range dp.affinity {
		if r.Port == no {
			delete(dp.affinity, r)
		}
	}
}

// withoutMoves returns next minus every queue that old has on another PMD,
// and whether there was any.
func withoutMoves(old, next [][]RxqRef) ([][]RxqRef, bool) {
	owner := make(map[RxqRef]int)
	for i, rs := range old {
		for _, r := range rs {
			owner[r] = i
		}
	}
	moves := false
	out := make([][]RxqRef, len(next))
	for i, rs := range next {
		for _, r := range rs {
			if o, ok := owner[r]; ok && o != i {
				moves = true
				continue
			}
			out[i] = append(out[i], r)
		}
	}
	return out, moves
}

package datapath

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
)

// FlowDump is a copy of one installed megaflow and its counters.
type FlowDump struct {
	PMD  int
	Key  flow.Key // masked by Mask
	Mask flow.Mask
	// Actions is a copy the caller may keep.
	Actions        actions.List
	Packets, Bytes uint64
	// LastUsed is how long ago a packet last matched the flow, to about a
	// millisecond; negative if none has.
	LastUsed time.Duration
}

// String prints the flow as OVS's dpctl/dump-flows does: the masked key,
// then packets, bytes, used and actions. The PMD is not printed (OVS puts it
// in a header above each PMD's flows).
func (f FlowDump) String() string {
	var b strings.Builder
	m := flow.FormatMatch(&f.Key, &f.Mask)
	if m == "" {
		m = "in_port(any)" // everything wildcarded
	}
	b.WriteString(m)
	fmt.Fprintf(&b, ", packets:%d, bytes:%d, used:", f.Packets, f.Bytes)
	if f.LastUsed < 0 {
		b.WriteString("never")
	} else {
		fmt.Fprintf(&b, "%.3fs", f.LastUsed.Seconds())
	}
	b.WriteString(", actions:")
	b.WriteString(f.Actions.String())
	return b.String()
}

// DumpFlows returns every megaflow installed in every PMD, PMD by PMD in
// installation order. A PMD is held up only while the list of its flows is
// copied, and only if it is installing a flow at that moment; the counters
// are read as the PMDs update them, so they may be one batch behind.
func (dp *Datapath) DumpFlows() []FlowDump {
	now := dp.clock()
	var out []FlowDump
	var mfs []*Megaflow
	for _, p := range dp.pmds {
		p.installedMu.Lock()
		mfs = append(mfs[:0], p.installed...)
		p.installedMu.Unlock()
		// Match and Actions do not change once a flow is installed, and
		// the lock above orders their writing before these reads.
		for _, mf := range mfs {
			d := FlowDump{
				PMD:     p.id,
				Key:     mf.Match.Key,
				Mask:    mf.Match.Mask,
				Actions: slices.Clone(mf.Actions),
				Packets: mf.packets.Load(),
				Bytes:   mf.bytes.Load(),
			}
			if d.Packets == 0 {
				d.LastUsed = -1
			} else {
				d.LastUsed = time.Duration(max(now-mf.used.Load(), 0))
			}
			out = append(out, d)
		}
	}
	return out
}

// RxqAssignment returns the rx queues each PMD polls (index = PMD).
func (dp *Datapath) RxqAssignment() [][]RxqRef {
	snap := *dp.assignSnap.Load()
	out := make([][]RxqRef, len(snap))
	for i := range snap {
		out[i] = slices.Clone(snap[i])
	}
	return out
}

// RxqStats returns the counters of every rx queue, PMD by PMD in the
// order each polls them. Like PMDStats they are published by the PMDs, so
// they may lag by statsPublishInterval.
func (dp *Datapath) RxqStats() []RxqStats {
	var out []RxqStats
	for pmd, rs := range *dp.assignSnap.Load() {
		for _, r := range rs {
			p := dp.Port(r.Port)
			if p == nil || r.Queue >= p.rxq.len() {
				continue // removed since the snapshot
			}
			c := p.rxq.at(r.Queue)
			out = append(out, RxqStats{PMD: pmd, Port: r.Port, Queue: r.Queue,
				Packets: c.packets.Load(), BusyNs: c.busyNs.Load()})
		}
	}
	return out
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

// RxqTotals returns the counters of the port's rx queues (PMD -1: this
// does not say who polls them). Unlike RxqStats it also reads a port that
// was removed, whose totals are final once RemovePort or Close returned,
// so that the daemon can carry them over to the port that replaces it.
func (p *Port) RxqTotals() []RxqStats {
	out := make([]RxqStats, p.rxq.len())
	for i := range out {
		c := p.rxq.at(i)
		out[i] = RxqStats{PMD: -1, Port: p.No, Queue: i, Packets: c.packets.Load(), BusyNs: c.busyNs.Load()}
	}
	return out
}

package datapath

import (
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
				Key:     mf.Key,
				Mask:    *mf.Mask,
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

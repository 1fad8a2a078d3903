package metrics

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vswitch-go/vswitch/datapath"
)

// The daemon replaces objects whose counters it exports: a datapath
// rebuild (a PMD setting changed) makes a new datapath, PMDs, ports and
// OpenFlow agent; a port reopened (its interface came back, its type or
// options changed) gets a new driver and datapath port. Their counters
// start at zero, yet Prometheus counters must not go down while the
// process lives. So the daemon captures the old objects' totals once they
// are final and hands them back as Bridge.Carry, which the collector adds
// to the new objects' counters at scrape time: nothing is added per
// packet.

// seriesKey names one series of a counter, or one part (count, sum, a
// bucket) of a histogram series. port is the value of its port label
// ("" without one), so that a deleted port's totals can be dropped.
type seriesKey struct {
	name, part, labels, port string
}

// seriesInfo is what a key needs to know of a Desc.
type seriesInfo struct {
	name string
	port int // index of the port label, -1 without one
}

// Totals are counter values by series. A Totals handed to a Bridge is
// read by concurrent scrapes and must not be modified: the methods below
// return new ones.
type Totals map[seriesKey]float64

func (c *Collector) key(d *prometheus.Desc, part string, labels []string) seriesKey {
	info := c.series[d]
	k := seriesKey{name: info.name, part: part, labels: strings.Join(labels, "\x00")}
	if info.port >= 0 && info.port < len(labels) {
		k.port = labels[info.port]
	}
	return k
}

// Merge returns t with u's series over it.
func (t Totals) Merge(u Totals) Totals {
	out := make(Totals, len(t)+len(u))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range u {
		out[k] = v
	}
	return out
}

// Keep returns the series of t that have no port label or whose port
// keep accepts.
func (t Totals) Keep(keep func(port string) bool) Totals {
	out := make(Totals, len(t))
	for k, v := range t {
		if k.port == "" || keep(k.port) {
			out[k] = v
		}
	}
	return out
}

// capturer reads counters for Capture*; its Descs are its own, but keys
// name series by metric name, so they match any Collector's.
var capturer = NewCollector(nil)

// CaptureBridge returns the totals of every counter of b, b.Carry
// included: what a rebuild must carry to the bridge's next datapath. ports
// are the datapath's ports as listed before it was closed (Close forgets
// them); call it once b's datapath and OpenFlow agent are closed, so the
// totals are final.
func CaptureBridge(b Bridge, ports []*datapath.Port) Totals {
	c := capturer
	e := emitter{c: c, carry: b.Carry, capture: Totals{}}
	for _, p := range ports {
		c.collectPort(&e, b.Name, portName(b, p.No, p.Dev), p)
		c.collectRxqTotals(&e, b.Name, portName(b, p.No, p.Dev), p)
	}
	if dp := b.Datapath; dp != nil {
		c.collectPMDs(&e, b.Name, dp)
	}
	if of := b.OpenFlow; of != nil {
		c.collectOpenFlow(&e, b.Name, of)
	}
	return b.Carry.Merge(e.capture)
}

// CapturePort returns the totals of the series of port p (named port),
// carry included: what its reopening must carry over. Call it once p was
// removed from its datapath, so the totals are final.
func CapturePort(bridge, port string, p *datapath.Port, carry Totals) Totals {
	c := capturer
	e := emitter{c: c, carry: carry, capture: Totals{}}
	c.collectPort(&e, bridge, port, p)
	c.collectRxqTotals(&e, bridge, port, p)
	return e.capture
}

func (c *Collector) collectRxqTotals(e *emitter, bridge, port string, p *datapath.Port) {
	for _, q := range p.RxqTotals() {
		queue := strconv.Itoa(q.Queue)
		e.counter(c.rxqPackets, q.Packets, bridge, port, queue)
		e.counterSeconds(c.rxqBusy, q.BusyNs, bridge, port, queue)
	}
}

// Package metrics exposes the switch's counters at /metrics in the
// Prometheus text format. Nothing here runs per packet: the Collector reads
// the counters the datapath, the port drivers and ofproto already keep, at
// scrape time, and turns them into const metrics. docs/metrics.md lists
// every metric and where it comes from.
package metrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/ipf"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/tunnel"
	"github.com/vswitch-go/vswitch/ofproto"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// Bridge is what the collector reads for one bridge. Either of Datapath and
// OpenFlow may be nil (a bridge being built or torn down): its metrics are
// then left out.
type Bridge struct {
	Name     string
	Datapath *datapath.Datapath // one datapath per bridge
	OpenFlow *ofproto.Bridge
	// PortName maps a datapath/OpenFlow port number to the port's name,
	// the value of the port label. Nil, or an empty answer, falls back to
	// the driver's interface name.
	PortName func(no uint32) string
	// Carry holds the totals of the bridge's counters whose objects were
	// replaced (a datapath rebuild, a port reopened): each is added to
	// the live counter of the same series, so series stay monotonic for
	// the life of the process. Nil when nothing was replaced.
	Carry Totals
}

// Mgmt is what the collector reads of the management socket's server.
type Mgmt struct {
	Connections                  int
	Refused, IdleClosed, TooLong uint64
}

// Collector is a prometheus.Collector over the daemon's bridges. It keeps no
// state between scrapes, so concurrent scrapes are safe.
type Collector struct {
	bridges func() []Bridge
	mgmt    func() Mgmt
	// series names each counter's Desc and where its port label is, for
	// the keys of Totals.
	series map[*prometheus.Desc]seriesInfo

	// buildInfo is the constant 1 labelled with what is running, so a
	// dashboard can show versions and join on them.
	buildInfo                       *prometheus.Desc
	version, goVersion, vcsRevision string

	mgmtConns, mgmtRefused, mgmtIdleClosed, mgmtTooLong *prometheus.Desc
	ofRefused, ofSlowReaders, ofQueued                  *prometheus.Desc

	portRxPackets, portRxBytes, portRxDrops, portRxErrors *prometheus.Desc
	portTxPackets, portTxBytes, portTxDrops, portTxErrors *prometheus.Desc
	portTxRefused, portLinkUp                             *prometheus.Desc
	tunnelDrops                                           *prometheus.Desc

	txPackets, txBatches, txKicks, txDrops, txBatchSize *prometheus.Desc

	rxqPackets, rxqBusy, rxqPMD *prometheus.Desc

	pmdBusy, pmdIdle, pmdIterations, pmdRxPackets                      *prometheus.Desc
	pmdEMCHits, pmdMegaflowHits, pmdMisses                             *prometheus.Desc
	pmdSimpleMatchHits                                                 *prometheus.Desc
	pmdLostUpcalls, pmdMalformed, pmdFlowsLimited                      *prometheus.Desc
	pmdRecirculations                                                  *prometheus.Desc
	drops, datapathFlows                                               *prometheus.Desc
	fragments, fragmentsHeld                                           *prometheus.Desc
	ofRules, ofLookups, ofMatches                                      *prometheus.Desc
	macEntries, macLearned, macMoved, macAged                          *prometheus.Desc
	macEvicted                                                         *prometheus.Desc
	ctlConnected, ctlReconnects, ctlMsgsIn, ctlMsgsOut, ctlTLSFailures *prometheus.Desc
	collectFailed                                                      *prometheus.Desc

	// The connection tracker every bridge shares (SetConntrack).
	ct                                                         func() *conntrack.Tracker
	ctConns, ctMax, ctCreated, ctDeleted, ctInvalid, ctRefused *prometheus.Desc
	ctEvicted, ctNATExhausted, ctZoneConns, ctZoneRefused      *prometheus.Desc
	ctByProto, ctTCPStates                                     *prometheus.Desc
}

// batchBounds are datapath.BatchSizeBounds as histogram upper bounds.
var batchBounds = func() []float64 {
	b := make([]float64, len(datapath.BatchSizeBounds))
	for i, v := range datapath.BatchSizeBounds {
		b[i] = float64(v)
	}
	return b
}()

// NewCollector returns a collector that calls bridges at every scrape, so
// bridges added or removed since the last scrape are seen without
// registering anything again.
func NewCollector(bridges func() []Bridge) *Collector {
	br := []string{"bridge"}
	port := []string{"bridge", "port"}
	pmd := []string{"bridge", "pmd"}
	pmdPort := []string{"bridge", "pmd", "port"}
	rxq := []string{"bridge", "port", "queue"}
	series := map[*prometheus.Desc]seriesInfo{}
	d := func(name, help string, labels []string) *prometheus.Desc {
		desc := prometheus.NewDesc("vswitch_"+name, help, labels, nil)
		series[desc] = seriesInfo{name: "vswitch_" + name, port: slices.Index(labels, "port")}
		return desc
	}
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" {
				rev = st.Value
			}
		}
	}
	return &Collector{
		bridges: bridges,
		series:  series,

		buildInfo: d("build_info", "Always 1; the labels say which vswitchd runs: its version, the Go version it was built with and the VCS revision.",
			[]string{"version", "goversion", "revision"}),
		version: "dev", goVersion: runtime.Version(), vcsRevision: rev,

		portRxPackets: d("port_rx_packets_total", "Packets received on the port, as counted by its driver.", port),
		portRxBytes:   d("port_rx_bytes_total", "Bytes received on the port, as counted by its driver.", port),
		portRxDrops:   d("port_rx_drops_total", "Packets the port's driver dropped on receive (no buffer, ring overrun).", port),
		portRxErrors:  d("port_rx_errors_total", "Receive errors counted by the port's driver.", port),
		portTxPackets: d("port_tx_packets_total", "Packets transmitted on the port, as counted by its driver.", port),
		portTxBytes:   d("port_tx_bytes_total", "Bytes transmitted on the port, as counted by its driver.", port),
		portTxDrops:   d("port_tx_drops_total", "Packets the port's driver dropped on transmit (tx queue full, refused by the far end).", port),
		portTxErrors:  d("port_tx_errors_total", "Transmit errors counted by the port's driver.", port),
		portTxRefused: d("port_tx_refused_total", "Packets of port_tx_drops_total that the link's far end refused (a veth peer with a smaller MTU, a carrier gone) or that the driver dropped knowing it would.", port),
		portLinkUp:    d("port_link_up", "1 if the port's link is up, 0 if it is down.", port),

		tunnelDrops: d("tunnel_drops_total", "Packets a VXLAN or Geneve port dropped, by cause: malformed or unwanted on receive, unsendable on transmit.",
			[]string{"bridge", "port", "cause"}),

		txPackets:   d("pmd_tx_packets_total", "Packets a PMD handed to the port's driver that the driver accepted.", pmdPort),
		txBatches:   d("pmd_tx_batches_total", "Output batches a PMD sent to the port (one driver Send each).", pmdPort),
		txKicks:     d("pmd_tx_kicks_total", "Wake-ups of the port's transmit consumer (send syscalls, eventfd writes) the driver made for a PMD's output batches: what batching saves. 0 for drivers that need none.", pmdPort),
		txDrops:     d("pmd_tx_drops_total", "Packets of a PMD's output batches that the port refused (tx queue full) or that met a link that was down.", pmdPort),
		txBatchSize: d("pmd_tx_batch_size_packets", "Packets per output batch a PMD sent to the port.", pmdPort),

		rxqPackets: d("rxq_packets_total", "Packets the datapath received from the rx queue.", rxq),
		rxqBusy:    d("rxq_busy_seconds_total", "PMD time spent on the rx queue's packets (receiving, classifying, executing, the sends they caused).", rxq),
		rxqPMD:     d("rxq_pmd", "Index of the PMD that polls the rx queue.", rxq),

		pmdBusy:            d("pmd_busy_seconds_total", "Time the PMD spent in iterations that received packets.", pmd),
		pmdIdle:            d("pmd_idle_seconds_total", "Time the PMD spent in iterations that received nothing, sleeping included.", pmd),
		pmdIterations:      d("pmd_iterations_total", "Poll iterations of the PMD.", pmd),
		pmdRxPackets:       d("pmd_rx_packets_total", "Packets the PMD received from its rx queues.", pmd),
		pmdEMCHits:         d("pmd_emc_hits_total", "Packets classified by the PMD's exact-match cache.", pmd),
		pmdMegaflowHits:    d("pmd_megaflow_hits_total", "Packets classified by the PMD's megaflow classifier after an EMC miss.", pmd),
		pmdSimpleMatchHits: d("pmd_simple_match_hits_total", "Packets that took their input port's only megaflow, one matching on the port alone, without being parsed.", pmd),
		pmdMisses:          d("pmd_misses_total", "Packets that missed both caches and were upcalled for translation.", pmd),
		pmdLostUpcalls:     d("pmd_lost_upcalls_total", "Upcalls that failed; their packets were dropped.", pmd),
		pmdMalformed:       d("pmd_malformed_packets_total", "Packets with truncated or malformed headers (classified as far as they parsed).", pmd),
		pmdFlowsLimited:    d("pmd_flows_limited_total", "Upcalls whose megaflow was not installed because the PMD was at its flow limit.", pmd),
		pmdRecirculations:  d("pmd_recirculations_total", "Extra passes of packets through the PMD's caches that recirc actions asked for (after a pop of MPLS or PBB).", pmd),

		drops:         d("datapath_drops_total", "Packets the datapath dropped, by PMD and cause.", []string{"bridge", "pmd", "cause"}),
		datapathFlows: d("datapath_flows", "Megaflows installed in the bridge's PMD classifiers (summed over PMDs).", br),
		fragments: d("fragments_total", "IP fragments a ct action met, by what became of them: accepted (held for reassembly), completed (passed on with their datagram's verdict), expired, too_small, overlapped, purged.",
			[]string{"bridge", "family", "result"}),
		fragmentsHeld: d("fragments_held", "IP fragments held for reassembly now.", br),

		ofRules:   d("openflow_rules", "OpenFlow rules installed in the table (tables without rules are left out, except table 0).", []string{"bridge", "table"}),
		ofLookups: d("openflow_table_lookups_total", "Translation lookups in the OpenFlow table (upcalls and packet-outs, not datapath hits).", []string{"bridge", "table"}),
		ofMatches: d("openflow_table_matches_total", "Translation lookups in the OpenFlow table that found a rule.", []string{"bridge", "table"}),

		macEntries: d("mac_table_entries", "Entries in the NORMAL action's MAC learning table.", br),
		macLearned: d("mac_table_learned_total", "MAC addresses learned by NORMAL.", br),
		macMoved:   d("mac_table_moved_total", "Learned MAC addresses that moved to another port.", br),
		macAged:    d("mac_table_aged_total", "MAC table entries removed for age.", br),
		macEvicted: d("mac_table_evicted_total", "MAC table entries evicted to make room.", br),

		ctlConnected:  d("controller_connected", "1 if the controller target has a connection past the OpenFlow handshake, else 0.", []string{"bridge", "target"}),
		ctlReconnects: d("controller_reconnects_total", "Connection attempts to an active controller target after the first.", []string{"bridge", "target"}),
		ctlMsgsIn:     d("controller_messages_received_total", "OpenFlow messages received from the target, over all its connections.", []string{"bridge", "target"}),
		ctlMsgsOut:    d("controller_messages_sent_total", "OpenFlow messages sent to the target, over all its connections.", []string{"bridge", "target"}),
		ctlTLSFailures: d("controller_tls_handshake_failures_total",
			"TLS handshakes of an ssl: or pssl: target that failed (certificate refused either way, or a peer not speaking TLS); 0 for other targets.", []string{"bridge", "target"}),

		ofRefused:     d("openflow_connections_refused_total", "OpenFlow connections closed as accepted because their listener had other_config:openflow-max-connections open (controller and management listeners).", br),
		ofSlowReaders: d("openflow_slow_reader_disconnects_total", "OpenFlow connections closed because a reply found their send queue over its byte limit: the peer was not reading.", br),
		ofQueued:      d("openflow_send_queue_bytes", "Bytes waiting in the send queues of the bridge's OpenFlow connections.", br),

		mgmtConns:      d("mgmt_connections", "Connections open on the management socket (vsctl).", nil),
		mgmtRefused:    d("mgmt_connections_refused_total", "Management connections refused because other_config:mgmt-max-connections were open.", nil),
		mgmtIdleClosed: d("mgmt_connections_idle_closed_total", "Management connections closed after sending no request (or reading no response) for the idle timeout.", nil),
		mgmtTooLong:    d("mgmt_requests_too_long_total", "Management requests over the request size limit (their connection was closed).", nil),

		ctConns:   d("conntrack_connections", "Connections in the connection tracker (every bridge shares one).", nil),
		ctMax:     d("conntrack_connections_max", "The connection limit (dpctl/ct-set-maxconns).", nil),
		ctCreated: d("conntrack_created_total", "Connections committed.", nil),
		ctDeleted: d("conntrack_deleted_total", "Connections removed: timed out, flushed, ended by a new one on their tuple, or evicted.", nil),
		ctInvalid: d("conntrack_invalid_total", "Packets ct marked invalid (+inv), by cause: untrackable (not IP, an unreassembled fragment, truncated), tcp (outside the windows, bad flags), not_new (cannot start a connection), no_connection (an ICMP error about none).",
			[]string{"cause"}),
		ctByProto:      d("conntrack_protocol_connections", "Connections by IP protocol.", []string{"protocol"}),
		ctTCPStates:    d("conntrack_tcp_connections", "TCP connections by state (as dpctl/dump-conntrack names them).", []string{"state"}),
		ctRefused:      d("conntrack_limit_refused_total", "Commits refused because the table was at its limit with no unanswered connection to evict.", nil),
		ctEvicted:      d("conntrack_evicted_total", "Unanswered connections evicted to make room under the limit.", nil),
		ctNATExhausted: d("conntrack_nat_exhausted_total", "Commits with nat(src|dst=...) refused because no address and port of the range was free.", nil),
		ctZoneConns:    d("conntrack_zone_connections", "Connections of each zone that has any.", []string{"zone"}),
		ctZoneRefused:  d("conntrack_zone_limit_refused_total", "Commits refused because their zone was at its limit (dpctl/ct-set-limits).", nil),

		collectFailed: prometheus.NewDesc("vswitch_collect_failed", "A bridge's metrics could not be read.", br, nil),
	}
}

func (c *Collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.buildInfo,
		c.portRxPackets, c.portRxBytes, c.portRxDrops, c.portRxErrors,
		c.portTxPackets, c.portTxBytes, c.portTxDrops, c.portTxErrors, c.portTxRefused, c.portLinkUp,
		c.tunnelDrops,
		c.txPackets, c.txBatches, c.txKicks, c.txDrops, c.txBatchSize,
		c.rxqPackets, c.rxqBusy, c.rxqPMD,
		c.pmdBusy, c.pmdIdle, c.pmdIterations, c.pmdRxPackets,
		c.pmdEMCHits, c.pmdMegaflowHits, c.pmdMisses, c.pmdSimpleMatchHits,
		c.pmdLostUpcalls, c.pmdMalformed, c.pmdFlowsLimited, c.pmdRecirculations,
		c.drops, c.datapathFlows, c.fragments, c.fragmentsHeld,
		c.ofRules, c.ofLookups, c.ofMatches,
		c.macEntries, c.macLearned, c.macMoved, c.macAged, c.macEvicted,
		c.ctlConnected, c.ctlReconnects, c.ctlMsgsIn, c.ctlMsgsOut, c.ctlTLSFailures,
		c.ofRefused, c.ofSlowReaders, c.ofQueued,
		c.mgmtConns, c.mgmtRefused, c.mgmtIdleClosed, c.mgmtTooLong,
		c.ctConns, c.ctMax, c.ctCreated, c.ctDeleted, c.ctInvalid, c.ctRefused, c.ctEvicted, c.ctNATExhausted, c.ctZoneConns, c.ctZoneRefused,
		c.ctByProto, c.ctTCPStates,
		c.collectFailed,
	}
}

// SetConntrack makes the collector export the connection tracker's
// counters, read from fn at every scrape. Call it before registering.
func (c *Collector) SetConntrack(fn func() *conntrack.Tracker) { c.ct = fn }

// SetMgmt makes the collector export the management socket's counters,
// read from fn at every scrape. Call it before registering.
func (c *Collector) SetMgmt(fn func() Mgmt) { c.mgmt = fn }

// SetVersion sets the version vswitch_build_info reports ("dev" unless
// set).
func (c *Collector) SetVersion(v string) {
	if v != "" {
		c.version = v
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.buildInfo, prometheus.GaugeValue, 1, c.version, c.goVersion, c.vcsRevision)
	for _, b := range c.bridges() {
		c.collectBridge(ch, b)
	}
	if c.mgmt != nil {
		m := c.mgmt()
		e := emitter{ch: ch, c: c}
		e.gauge(c.mgmtConns, float64(m.Connections))
		e.counter(c.mgmtRefused, m.Refused)
		e.counter(c.mgmtIdleClosed, m.IdleClosed)
		e.counter(c.mgmtTooLong, m.TooLong)
	}
	if c.ct != nil {
		tr := c.ct()
		st := tr.Stats()
		e := emitter{ch: ch, c: c}
		e.gauge(c.ctConns, float64(st.Conns))
		e.gauge(c.ctMax, float64(tr.MaxConns()))
		e.counter(c.ctCreated, st.Created)
		e.counter(c.ctDeleted, st.Deleted)
		for cause, n := range st.InvalidBy {
			e.counter(c.ctInvalid, n, conntrack.InvalidCause(cause).String())
		}
		// The common protocols always, so that their series do not
		// come and go with their connections.
		for _, p := range []uint8{header.IPProtoTCP, header.IPProtoUDP, header.IPProtoICMP, header.IPProtoICMPv6} {
			if _, ok := st.ByProto[p]; !ok {
				st.ByProto[p] = 0
			}
		}
		for proto, n := range st.ByProto {
			e.gauge(c.ctByProto, float64(n), conntrack.ProtoName(proto))
		}
		for state, n := range st.TCPStates {
			e.gauge(c.ctTCPStates, float64(n), conntrack.TCPStateNames[state])
		}
		e.counter(c.ctRefused, st.LimitRefused)
		e.counter(c.ctEvicted, st.Evicted)
		e.counter(c.ctNATExhausted, st.NATExhausted)
		e.counter(c.ctZoneRefused, st.ZoneLimitRefused)
		for zone, n := range tr.ZoneCounts() {
			e.gauge(c.ctZoneConns, float64(n), strconv.Itoa(int(zone)))
		}
	}
}

// collectBridge reads one bridge. A panic while reading (a half-built
// bridge, a driver bug) must not take the daemon down: the registry runs
// collectors on goroutines of its own, where an unrecovered panic is fatal.
// It becomes an invalid metric instead, which the handler reports and
// skips, serving everything else.
func (c *Collector) collectBridge(ch chan<- prometheus.Metric, b Bridge) {
	defer func() {
		if r := recover(); r != nil {
			ch <- prometheus.NewInvalidMetric(c.collectFailed, fmt.Errorf("bridge %q: %v", b.Name, r))
		}
	}()
	e := emitter{ch: ch, c: c, carry: b.Carry}
	if dp := b.Datapath; dp != nil {
		c.collectDatapath(&e, b, dp)
	}
	if of := b.OpenFlow; of != nil {
		c.collectOpenFlow(&e, b.Name, of)
	}
}

func (c *Collector) collectDatapath(e *emitter, b Bridge, dp *datapath.Datapath) {
	for _, p := range dp.Ports() {
		c.collectPort(e, b.Name, portName(b, p.No, p.Dev), p)
	}
	// A queue being moved between PMDs by a rebalance could be listed
	// twice; its counters belong to the queue, so the first listing is
	// as good as the second.
	seen := make(map[datapath.RxqRef]bool)
	for _, q := range dp.RxqStats() {
		ref := datapath.RxqRef{Port: q.Port, Queue: q.Queue}
		p := dp.Port(q.Port)
		if seen[ref] || p == nil {
			continue
		}
		seen[ref] = true
		port, queue := portName(b, q.Port, p.Dev), strconv.Itoa(q.Queue)
		e.counter(c.rxqPackets, q.Packets, b.Name, port, queue)
		e.counterSeconds(c.rxqBusy, q.BusyNs, b.Name, port, queue)
		e.gauge(c.rxqPMD, float64(q.PMD), b.Name, port, queue)
	}
	c.collectPMDs(e, b.Name, dp)
	e.gauge(c.datapathFlows, float64(dp.FlowCount()), b.Name)
	v4, v6, held := dp.FragmentStats()
	for fam, st := range map[string]ipf.Stats{"ipv4": v4, "ipv6": v6} {
		for _, r := range []struct {
			result string
			n      uint64
		}{{"accepted", st.Accepted}, {"completed", st.Completed}, {"expired", st.Expired},
			{"too_small", st.TooSmall}, {"overlapped", st.Overlapped}, {"purged", st.Purged}} {
			e.counter(c.fragments, r.n, b.Name, fam, r.result)
		}
	}
	e.gauge(c.fragmentsHeld, float64(held), b.Name)
}

func (c *Collector) collectPMDs(e *emitter, bridge string, dp *datapath.Datapath) {
	causes := datapath.DropCauses()
	for _, s := range dp.PMDStats() {
		pmd := strconv.Itoa(s.PMD)
		e.counterSeconds(c.pmdBusy, s.BusyNs, bridge, pmd)
		e.counterSeconds(c.pmdIdle, s.IdleNs, bridge, pmd)
		e.counter(c.pmdIterations, s.Iterations, bridge, pmd)
		e.counter(c.pmdRxPackets, s.RxPackets, bridge, pmd)
		e.counter(c.pmdEMCHits, s.EMCHits, bridge, pmd)
		e.counter(c.pmdMegaflowHits, s.MegaflowHits, bridge, pmd)
		e.counter(c.pmdSimpleMatchHits, s.SimpleMatchHits, bridge, pmd)
		e.counter(c.pmdMisses, s.Misses, bridge, pmd)
		e.counter(c.pmdLostUpcalls, s.LostUpcalls, bridge, pmd)
		e.counter(c.pmdMalformed, s.Malformed, bridge, pmd)
		e.counter(c.pmdFlowsLimited, s.FlowsLimited, bridge, pmd)
		e.counter(c.pmdRecirculations, s.Recirculations, bridge, pmd)
		for _, cause := range causes {
			e.counter(c.drops, s.Drops[cause], bridge, pmd, cause.String())
		}
	}
}

// collectPort reads the series of one datapath port: its driver's
// counters and what each PMD sent to it.
func (c *Collector) collectPort(e *emitter, bridge, port string, p *datapath.Port) {
	s := p.Dev.Stats()
	e.counter(c.portRxPackets, s.RxPackets, bridge, port)
	e.counter(c.portRxBytes, s.RxBytes, bridge, port)
	e.counter(c.portRxDrops, s.RxDrops, bridge, port)
	e.counter(c.portRxErrors, s.RxErrors, bridge, port)
	e.counter(c.portTxPackets, s.TxPackets, bridge, port)
	e.counter(c.portTxBytes, s.TxBytes, bridge, port)
	e.counter(c.portTxDrops, s.TxDrops, bridge, port)
	e.counter(c.portTxErrors, s.TxErrors, bridge, port)
	e.counter(c.portTxRefused, s.TxRefused, bridge, port)
	if e.capture == nil {
		e.gauge(c.portLinkUp, boolValue(p.Dev.LinkUp()), bridge, port)
	}
	// Every cause is exported, zeros included, so that an alert on
	// rate() sees a series from the port's creation instead of only
	// after its first drop of that kind.
	if tp, ok := p.Dev.(*tunnel.Port); ok {
		for cause, n := range tp.Drops() {
			e.counter(c.tunnelDrops, n, bridge, port, tunnel.Cause(cause).String())
		}
	}
	for _, t := range p.TxStats() {
		pmd := strconv.Itoa(t.PMD)
		e.counter(c.txPackets, t.Packets, bridge, pmd, port)
		e.counter(c.txBatches, t.Batches, bridge, pmd, port)
		e.counter(c.txKicks, t.Kicks, bridge, pmd, port)
		e.counter(c.txDrops, t.Drops, bridge, pmd, port)
		count, sum, buckets := batchHistogram(t)
		e.histogram(c.txBatchSize, count, sum, buckets, bridge, pmd, port)
	}
}

// batchHistogram turns a PortPMDStats' per-bucket batch counts into the
// cumulative form Prometheus wants. The count is the buckets' total rather
// than t.Batches, so the +Inf bucket always agrees with the others even if
// the PMD sent a batch between the loads of the two. The sum is exact: every
// batch's packets either were accepted (Packets) or were dropped at the port
// (Drops), so Packets+Drops is the sum of all batch sizes.
func batchHistogram(t datapath.PortPMDStats) (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(batchBounds))
	for i, n := range t.BatchSizes {
		count += n
		buckets[batchBounds[i]] = count
	}
	return count, float64(t.Packets + t.Drops), buckets
}

func (c *Collector) collectOpenFlow(e *emitter, bridge string, of *ofproto.Bridge) {
	pipe := of.Pipeline()
	for tid := 0; tid < pipeline.NumTables; tid++ {
		s := pipe.TableStats(uint8(tid))
		if tid != 0 && s.Active == 0 && s.Lookups == 0 {
			continue
		}
		table := strconv.Itoa(tid)
		if tid == 0 || s.Active > 0 {
			e.gauge(c.ofRules, float64(s.Active), bridge, table)
		}
		e.counter(c.ofLookups, s.Lookups, bridge, table)
		e.counter(c.ofMatches, s.Matched, bridge, table)
	}
	if sw := of.Normal(); sw != nil {
		s := sw.Stats()
		e.gauge(c.macEntries, float64(s.Entries), bridge)
		e.counter(c.macLearned, s.Learned, bridge)
		e.counter(c.macMoved, s.Moved, bridge)
		e.counter(c.macAged, s.Aged, bridge)
		e.counter(c.macEvicted, s.Evicted, bridge)
	}
	if m := of.Manager(); m != nil {
		st := m.Stats()
		e.counter(c.ofRefused, st.Refused, bridge)
		e.counter(c.ofSlowReaders, st.SlowReaderDisconnects, bridge)
		e.gauge(c.ofQueued, float64(st.QueuedBytes), bridge)
		for _, t := range controllerTargets(m.Status()) {
			e.gauge(c.ctlConnected, boolValue(t.connected), bridge, t.name)
			e.counter(c.ctlReconnects, t.reconnects, bridge, t.name)
			e.counter(c.ctlMsgsIn, t.msgsIn, bridge, t.name)
			e.counter(c.ctlMsgsOut, t.msgsOut, bridge, t.name)
			e.counter(c.ctlTLSFailures, t.tlsFailures, bridge, t.name)
		}
	}
}

// controllerTarget is one controller target's state folded over the
// entries Status gives for it (a passive target has one for its listener
// and one per accepted connection).
type controllerTarget struct {
	name                        string
	connected                   bool
	reconnects, msgsIn, msgsOut uint64
	tlsFailures                 uint64
}

// controllerTargets folds st by target, in Status order, leaving out the
// management targets (the local socket for vsctl and ovs-ofctl, whose
// short-lived connections say nothing about the controller).
func controllerTargets(st []ofconn.Status) []controllerTarget {
	var out []controllerTarget
	for _, s := range st {
		if s.Management {
			continue
		}
		if len(out) == 0 || out[len(out)-1].name != s.Target {
			out = append(out, controllerTarget{name: s.Target})
		}
		t := &out[len(out)-1]
		t.connected = t.connected || s.State == ofconn.StateActive
		t.reconnects = max(t.reconnects, s.Reconnects)
		t.msgsIn += s.MsgsIn
		t.msgsOut += s.MsgsOut
		t.tlsFailures += s.TLSHandshakeFailures
	}
	return out
}

func portName(b Bridge, no uint32, dev netdev.Netdev) string {
	if b.PortName != nil {
		if n := b.PortName(no); n != "" {
			return n
		}
	}
	return dev.Name()
}

func boolValue(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// emitter sends const metrics, turning a construction error (a label value
// that is not valid UTF-8, say) into an invalid metric that the handler
// reports instead of a panic. It adds carry to every counter it sends;
// with capture set it records the counters there instead of sending
// anything (gauges are dropped).
type emitter struct {
	ch      chan<- prometheus.Metric
	c       *Collector
	carry   Totals
	capture Totals
}

// adjust adds the carried total of the series to v, and records the sum
// when capturing (then ok is false: nothing is to be sent). Keys are only
// built when there is something to carry or capture, so a daemon that
// never rebuilt pays nothing per scrape.
func (e *emitter) adjust(d *prometheus.Desc, part string, v float64, labels []string) (float64, bool) {
	if len(e.carry) == 0 && e.capture == nil {
		return v, true
	}
	k := e.c.key(d, part, labels)
	v += e.carry[k]
	if e.capture != nil {
		e.capture[k] = v
		return v, false
	}
	return v, true
}

func (e *emitter) send(m prometheus.Metric, err error, d *prometheus.Desc) {
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.ch <- m
}

func (e *emitter) counter(d *prometheus.Desc, v uint64, labels ...string) {
	e.counterValue(d, float64(v), labels)
}

func (e *emitter) counterSeconds(d *prometheus.Desc, ns uint64, labels ...string) {
	e.counterValue(d, float64(ns)/1e9, labels)
}

func (e *emitter) counterValue(d *prometheus.Desc, v float64, labels []string) {
	v, ok := e.adjust(d, "", v, labels)
	if !ok {
		return
	}
	m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, v, labels...)
	e.send(m, err, d)
}

func (e *emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	if e.capture != nil {
		return
	}
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...)
	e.send(m, err, d)
}

// histogram sends a histogram whose count, sum and every bucket are
// carried like counters.
func (e *emitter) histogram(d *prometheus.Desc, count uint64, sum float64, buckets map[float64]uint64, labels ...string) {
	fc, ok := e.adjust(d, "count", float64(count), labels)
	sum, _ = e.adjust(d, "sum", sum, labels)
	for b, n := range buckets {
		f, _ := e.adjust(d, "le="+strconv.FormatFloat(b, 'g', -1, 64), float64(n), labels)
		buckets[b] = uint64(f)
	}
	if !ok {
		return
	}
	m, err := prometheus.NewConstHistogram(d, uint64(fc), sum, buckets, labels...)
	e.send(m, err, d)
}

// NewRegistry returns a registry holding c and the Go runtime and process
// collectors, and no global state (prometheus.DefaultRegisterer is left
// alone so tests and several daemons in one process do not collide).
func NewRegistry(c *Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler limits and timeouts: a scrape reads a few hundred counters and
// takes well under a millisecond, so anything slower is stuck, and more than
// a few scrapes at once is a misconfigured Prometheus, not a reason to
// spend the control plane's CPU.
const (
	maxScrapesInFlight = 4
	scrapeTimeout      = 10 * time.Second
)

// Handler serves reg's metrics. A metric that cannot be gathered (a failing
// bridge, a duplicate port name) is logged and left out while the rest is
// served, because a partial scrape is worth more to an operator than a 500;
// promhttp_metric_handler_errors_total counts such scrapes.
func Handler(reg *prometheus.Registry) http.Handler {
	return promhttp.InstrumentMetricHandler(reg, promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slogLogger{},
		ErrorHandling:       promhttp.ContinueOnError,
		Registry:            reg,
		MaxRequestsInFlight: maxScrapesInFlight,
		Timeout:             scrapeTimeout,
	}))
}

// slogLogger hands promhttp's errors to the daemon's default slog logger,
// looked up at each error so a logger installed after Handler is used.
type slogLogger struct{}

func (slogLogger) Println(v ...any) {
	slog.Default().Error("metrics: scrape", "error", fmt.Sprint(v...))
}

package vswitchd

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// pmd-latency-show: where a probed batch's microseconds go inside each PMD
// (datapath/latency.go), beside what the kernel knows of the PMD's side:
// how long the PMD thread waited on a run queue (schedstat), and what the
// AF_XDP sockets dropped and why (XDP_STATISTICS). Reading them costs the
// PMDs nothing.

// LatencyStageView is one stage's percentiles.
type LatencyStageView struct {
	Stage string `json:"stage"`
	Count uint64 `json:"count"`
	P50Ns int64  `json:"p50_ns"`
	P90Ns int64  `json:"p90_ns"`
	P99Ns int64  `json:"p99_ns"`
	MaxNs int64  `json:"max_ns"`
}

// LatencyView is one PMD of pmd-latency-show.
type LatencyView struct {
	Bridge        string             `json:"bridge"`
	PMD           int                `json:"pmd"`
	ProbeEvery    int                `json:"latency_probe"`
	Batches       uint64             `json:"sampled_batches"`
	MarkedPackets uint64             `json:"marked_packets"`
	Stages        []LatencyStageView `json:"stages"`
	// From /proc/self/task/TID/schedstat, since the thread started:
	// time on a CPU, time runnable but waiting for one, and how many
	// times it was scheduled in. Absent in manual mode.
	TID         int    `json:"tid,omitempty"`
	RunNs       uint64 `json:"run_ns,omitempty"`
	RunDelayNs  uint64 `json:"run_delay_ns,omitempty"`
	Timeslices  uint64 `json:"timeslices,omitempty"`
	VoluntaryCS uint64 `json:"voluntary_ctxt_switches,omitempty"`
}

// XSKStatsView is one AF_XDP port's kernel counters (summed over queues).
type XSKStatsView struct {
	Bridge           string `json:"bridge"`
	Port             string `json:"port"`
	RxDropped        uint64 `json:"rx_dropped"`
	RxInvalidDescs   uint64 `json:"rx_invalid_descs"`
	TxInvalidDescs   uint64 `json:"tx_invalid_descs"`
	RxRingFull       uint64 `json:"rx_ring_full"`
	RxFillRingEmpty  uint64 `json:"rx_fill_ring_empty_descs"`
	TxRingEmptyDescs uint64 `json:"tx_ring_empty_descs"`
}

// LatencyShow is pmd-latency-show's data.
type LatencyShow struct {
	PMDs []LatencyView  `json:"pmds"`
	XSKs []XSKStatsView `json:"xsks"`
}

// xskStatser is what AF_XDP ports offer (netdev/afxdp.Port.KernelStats).
type xskStatser interface {
	KernelStats() unix.XDPStatistics
}

// readSchedstat parses /proc/self/task/TID/schedstat: "run_ns wait_ns slices".
func readSchedstat(tid int) (run, wait, slices uint64, ok bool) {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
	if err != nil {
		return 0, 0, 0, false
	}
	return parseSchedstat(string(b))
}

func parseSchedstat(s string) (run, wait, slices uint64, ok bool) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return 0, 0, 0, false
	}
	var v [3]uint64
	for i := range f {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, 0, 0, false
		}
		v[i] = n
	}
	return v[0], v[1], v[2], true
}

// voluntarySwitches reads voluntary_ctxt_switches of a thread: how often
// the PMD went to sleep.
func voluntarySwitches(tid int) uint64 {
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func latencyViews(bridge string, ls []datapath.PMDLatency) []LatencyView {
	var out []LatencyView
	for _, l := range ls {
		v := LatencyView{Bridge: bridge, PMD: l.PMD, ProbeEvery: l.ProbeEvery, Batches: l.Batches,
			MarkedPackets: l.MarkedPackets, TID: l.TID}
		for _, s := range datapath.LatencyStages() {
			h := l.Stages[s]
			sv := LatencyStageView{Stage: s.String(), Count: h.Count}
			if h.Count > 0 {
				sv.P50Ns, sv.P90Ns, sv.P99Ns = h.Percentile(0.5), h.Percentile(0.9), h.Percentile(0.99)
				sv.MaxNs = h.Buckets[len(h.Buckets)-1].Ns
			}
			v.Stages = append(v.Stages, sv)
		}
		if l.TID > 0 {
			v.RunNs, v.RunDelayNs, v.Timeslices, _ = readSchedstat(l.TID)
			v.VoluntaryCS = voluntarySwitches(l.TID)
		}
		out = append(out, v)
	}
	return out
}

// formatLatency prints pmd-latency-show's text.
func formatLatency(show LatencyShow) string {
	var sb strings.Builder
	us := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1000, 'f', 1, 64) }
	for _, v := range show.PMDs {
		fmt.Fprintf(&sb, "pmd thread bridge %s pmd %d:\n", v.Bridge, v.PMD)
		if v.ProbeEvery == 0 && v.Batches == 0 {
			sb.WriteString("  latency probe off (set other_config:latency-probe=N)\n")
		} else {
			fmt.Fprintf(&sb, "  latency-probe: 1 in %d batches + marked packets; sampled batches: %d, marked packets: %d\n",
				v.ProbeEvery, v.Batches, v.MarkedPackets)
			fmt.Fprintf(&sb, "  %-12s %10s %9s %9s %9s %9s\n", "stage", "count", "p50 us", "p90 us", "p99 us", "max us")
			for _, s := range v.Stages {
				fmt.Fprintf(&sb, "  %-12s %10d %9s %9s %9s %9s\n", s.Stage, s.Count, us(s.P50Ns), us(s.P90Ns), us(s.P99Ns), us(s.MaxNs))
			}
		}
		if v.TID > 0 {
			fmt.Fprintf(&sb, "  thread %d: on cpu %.3f s, run-queue wait %.3f ms over %d timeslices, %d voluntary switches\n",
				v.TID, float64(v.RunNs)/1e9, float64(v.RunDelayNs)/1e6, v.Timeslices, v.VoluntaryCS)
		}
	}
	for _, x := range show.XSKs {
		fmt.Fprintf(&sb, "afxdp %s %s: rx_dropped %d rx_ring_full %d rx_fill_ring_empty_descs %d tx_ring_empty_descs %d rx_invalid_descs %d tx_invalid_descs %d\n",
			x.Bridge, x.Port, x.RxDropped, x.RxRingFull, x.RxFillRingEmpty, x.TxRingEmptyDescs, x.RxInvalidDescs, x.TxInvalidDescs)
	}
	if len(show.PMDs) == 0 {
		sb.WriteString("no bridges, so no PMDs\n")
	}
	return sb.String()
}

func (d *Daemon) cmdPMDLatencyShow(context.Context, []string) (mgmt.Result, error) {
	var show LatencyShow
	for _, b := range d.bridgeList() {
		show.PMDs = append(show.PMDs, latencyViews(b.name, b.dp.Latency())...)
		for _, p := range b.dp.Ports() {
			x, ok := p.Dev.(xskStatser)
			if !ok {
				continue
			}
			k := x.KernelStats()
			show.XSKs = append(show.XSKs, XSKStatsView{Bridge: b.name, Port: p.Dev.Name(),
				RxDropped: k.Rx_dropped, RxInvalidDescs: k.Rx_invalid_descs, TxInvalidDescs: k.Tx_invalid_descs,
				RxRingFull: k.Rx_ring_full, RxFillRingEmpty: k.Rx_fill_ring_empty_descs, TxRingEmptyDescs: k.Tx_ring_empty_descs})
		}
	}
	return mgmt.Result{Text: formatLatency(show), Data: show}, nil
}

func (d *Daemon) cmdPMDLatencyClear(context.Context, []string) (mgmt.Result, error) {
	for _, b := range d.bridgeList() {
		b.dp.ClearLatency()
	}
	return mgmt.Result{}, nil
}

package vswitchd

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// The ovs-appctl habits beyond pmd-stats-show: fdb/flush, coverage/show,
// memory/show and dpif-netdev/pmd-perf-show, from counters the switch
// already keeps (nothing here adds work to the datapath).

func (d *Daemon) cmdFDBFlush(_ context.Context, args []string) (mgmt.Result, error) {
	var bs []*bridge
	if len(args) == 1 {
		b, err := d.runningBridgeOrErr(args[0])
		if err != nil {
			return mgmt.Result{}, err
		}
		bs = []*bridge{b}
	} else {
		bs = d.bridgeList()
	}
	total := 0
	for _, b := range bs {
		total += b.of.Normal().Flush()
	}
	return mgmt.Result{Text: "table successfully flushed\n", Data: map[string]int{"flushed": total}}, nil
}

// CoverageView is one event counter of coverage-show.
type CoverageView struct {
	Event string `json:"event"`
	Total uint64 `json:"total"`
}

func (d *Daemon) cmdCoverageShow(context.Context, []string) (mgmt.Result, error) {
	var s datapath.PMDStats
	var lookups, matched, learnFailed, stalePins uint64
	for _, b := range d.bridgeList() {
		learnFailed += b.of.LearnFailures()
		stalePins += b.of.StalePacketIns()
		for _, p := range b.dp.PMDStats() {
			s.Iterations += p.Iterations
			s.RxPackets += p.RxPackets
			s.EMCHits += p.EMCHits
			s.SimpleMatchHits += p.SimpleMatchHits
			s.MegaflowHits += p.MegaflowHits
			s.Misses += p.Misses
			s.LostUpcalls += p.LostUpcalls
			s.Malformed += p.Malformed
			s.FlowsLimited += p.FlowsLimited
			s.IdleYields += p.IdleYields
			for i, n := range p.Drops {
				s.Drops[i] += n
			}
		}
		for t := range pipeline.NumTables {
			ts := b.of.Pipeline().TableStats(uint8(t))
			lookups += ts.Lookups
			matched += ts.Matched
		}
	}
	views := []CoverageView{
		{"pmd_iterations", s.Iterations},
		{"pmd_rx_packets", s.RxPackets},
		{"simple_match_hit", s.SimpleMatchHits},
		{"emc_hit", s.EMCHits},
		{"megaflow_hit", s.MegaflowHits},
		{"upcall", s.Misses},
		{"upcall_lost", s.LostUpcalls},
		{"upcall_flow_limit", s.FlowsLimited},
		{"malformed_packet", s.Malformed},
		{"pmd_idle_yield", s.IdleYields},
		{"openflow_table_lookup", lookups},
		{"openflow_table_matched", matched},
		{"learn_refused", learnFailed},
		{"packet_in_stale", stalePins},
	}
	for _, c := range datapath.DropCauses() {
		views = append(views, CoverageView{"drop_" + c.String(), s.Drops[c]})
	}
	var sb strings.Builder
	sb.WriteString("Event counters since start (totals over every bridge and PMD):\n")
	for _, v := range views {
		fmt.Fprintf(&sb, "%-28s total: %d\n", v.Event, v.Total)
	}
	return mgmt.Result{Text: sb.String(), Data: views}, nil
}

// MemoryView is memory-show's data.
type MemoryView struct {
	HeapBytes     uint64 `json:"heap_bytes"`
	SysBytes      uint64 `json:"sys_bytes"`
	Goroutines    int    `json:"goroutines"`
	Bridges       int    `json:"bridges"`
	Ports         int    `json:"ports"`
	Rules         uint64 `json:"rules"`
	Megaflows     int    `json:"megaflows"`
	MACs          int    `json:"macs"`
	PMDs          int    `json:"pmds"`
	Controllers   int    `json:"controllers"`
	OpenFlowConns int    `json:"openflow_connections"`
}

func (d *Daemon) cmdMemoryShow(context.Context, []string) (mgmt.Result, error) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	v := MemoryView{HeapBytes: ms.HeapAlloc, SysBytes: ms.Sys, Goroutines: runtime.NumGoroutine()}
	for _, b := range d.bridgeList() {
		v.Bridges++
		v.Ports += len(b.dp.Ports())
		for t := range pipeline.NumTables {
			v.Rules += uint64(b.of.Pipeline().TableStats(uint8(t)).Active)
		}
		v.Megaflows += len(b.dp.DumpFlows())
		v.MACs += len(b.of.FDB())
		v.PMDs += len(b.dp.PMDStats())
		for _, st := range b.of.Manager().Status() {
			if st.Management {
				v.OpenFlowConns++
			} else {
				v.Controllers++
			}
		}
	}
	text := fmt.Sprintf("heap:%d sys:%d goroutines:%d bridges:%d ports:%d rules:%d megaflows:%d macs:%d pmds:%d controllers:%d\n",
		v.HeapBytes, v.SysBytes, v.Goroutines, v.Bridges, v.Ports, v.Rules, v.Megaflows, v.MACs, v.PMDs, v.Controllers)
	return mgmt.Result{Text: text, Data: v}, nil
}

// PerfView is one PMD of pmd-perf-show.
type PerfView struct {
	Bridge             string  `json:"bridge"`
	PMD                int     `json:"pmd"`
	Iterations         uint64  `json:"iterations"`
	BusyPercent        float64 `json:"busy_percent"`
	Packets            uint64  `json:"packets"`
	PacketsPerIter     float64 `json:"packets_per_busy_iteration"`
	NsPerPacket        float64 `json:"ns_per_packet"`
	UpcallsPerKPackets float64 `json:"upcalls_per_1000_packets"`
}

func (d *Daemon) cmdPMDPerfShow(context.Context, []string) (mgmt.Result, error) {
	var views []PerfView
	var sb strings.Builder
	for _, s := range d.pmdStatsViews() {
		v := PerfView{Bridge: s.Bridge, PMD: s.PMD, Iterations: s.Iterations, BusyPercent: s.BusyPercent,
			Packets: s.Packets, NsPerPacket: s.NsPerPacket}
		if s.Iterations > 0 {
			v.PacketsPerIter = float64(s.Packets) / float64(s.Iterations)
		}
		if s.Packets > 0 {
			v.UpcallsPerKPackets = 1000 * float64(s.Misses) / float64(s.Packets)
		}
		views = append(views, v)
		fmt.Fprintf(&sb, "pmd thread bridge %s pmd %d:\n", v.Bridge, v.PMD)
		fmt.Fprintf(&sb, "  Iterations:        %12d  (%.1f %% busy)\n", v.Iterations, v.BusyPercent)
		fmt.Fprintf(&sb, "  Rx packets:        %12d  (%.2f per iteration)\n", v.Packets, v.PacketsPerIter)
		fmt.Fprintf(&sb, "  Time per packet:   %12.1f ns\n", v.NsPerPacket)
		fmt.Fprintf(&sb, "  Upcalls:           %12d  (%.2f per 1000 packets)\n", s.Misses, v.UpcallsPerKPackets)
	}
	if len(views) == 0 {
		sb.WriteString("no bridges, so no PMDs\n")
	}
	return mgmt.Result{Text: sb.String(), Data: views}, nil
}

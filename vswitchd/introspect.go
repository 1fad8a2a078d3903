package vswitchd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"

	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
	"github.com/vswitch-go/vswitch/vswitchd/mgmt"
)

// statsSnapshot is what pmd-stats-show counts from: the counters at the
// last pmd-stats-clear (the PMDs' own counters never go backwards, which
// Prometheus needs).
type statsSnapshot struct {
	pmd []datapath.PMDStats
	tx  []txTotals // per PMD, over every port
}

// txTotals sums what one PMD sent over every port of a bridge.
type txTotals struct{ packets, batches, kicks uint64 }

func (t *txTotals) add(u txTotals) {
	t.packets += u.packets
	t.batches += u.batches
	t.kicks += u.kicks
}

func txOf(t datapath.PortPMDStats) txTotals {
	return txTotals{packets: t.Packets + t.Drops, batches: t.Batches, kicks: t.Kicks}
}

// takeSnapshot reads the bridge's running PMDs, with what its replaced
// datapaths and ports had counted (pmdCarry) added, so that pmd-stats-show
// and its pmd-stats-clear baseline count on across a rebuild.
func takeSnapshot(b *bridge) *statsSnapshot {
	s := snapshotWithCarry(b, b.dp.Ports())
	n := len(b.dp.PMDStats())
	s.pmd, s.tx = s.pmd[:min(n, len(s.pmd))], s.tx[:min(n, len(s.tx))]
	return s
}

// snapshotWithCarry is takeSnapshot over the given datapath ports (those
// of a closed datapath, which no longer lists them) and keeping the
// carried PMDs beyond the running ones (n-pmd lowered, to be raised
// again), which is what a rebuild carries over.
func snapshotWithCarry(b *bridge, ports []*datapath.Port) *statsSnapshot {
	s := &statsSnapshot{pmd: b.dp.PMDStats()}
	s.tx = make([]txTotals, len(s.pmd))
	for _, p := range ports {
		for _, t := range p.TxStats() {
			if t.PMD < len(s.tx) {
				s.tx[t.PMD].add(txOf(t))
			}
		}
	}
	c := b.pmdCarry.Load()
	if c == nil {
		return s
	}
	for i := range c.pmd {
		if i >= len(s.pmd) {
			s.pmd = append(s.pmd, datapath.PMDStats{PMD: i})
			s.tx = append(s.tx, txTotals{})
		}
		s.pmd[i] = addPMDStats(s.pmd[i], c.pmd[i])
		s.tx[i].add(c.tx[i])
	}
	return s
}

func addPMDStats(a, b datapath.PMDStats) datapath.PMDStats {
	a.Iterations += b.Iterations
	a.BusyNs += b.BusyNs
	a.IdleNs += b.IdleNs
	a.RxPackets += b.RxPackets
	a.EMCHits += b.EMCHits
	a.SimpleMatchHits += b.SimpleMatchHits
	a.MegaflowHits += b.MegaflowHits
	a.Misses += b.Misses
	a.LostUpcalls += b.LostUpcalls
	a.Malformed += b.Malformed
	a.FlowsLimited += b.FlowsLimited
	a.Recirculations += b.Recirculations
	for i := range a.Drops {
		a.Drops[i] += b.Drops[i]
	}
	return a
}

// sub returns a-b, or 0 if a counter restarted below its base.
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// PMDStatsView is one PMD's line of pmd-stats-show.
type PMDStatsView struct {
	Bridge string `json:"bridge"`
	PMD    int    `json:"pmd"`
	// CoreID is the CPU the PMD is pinned to (pmd-cpu-mask); nil when
	// the PMDs are not pinned.
	CoreID  *int   `json:"core_id,omitempty"`
	Packets uint64 `json:"packets_received"`
	// Recirculations are the extra passes through the caches that recirc
	// actions asked for; the hit percentages are of all passes.
	Recirculations  uint64  `json:"packet_recirculations"`
	SimpleMatchHits uint64  `json:"simple_match_hits"`
	EMCHits         uint64  `json:"emc_hits"`
	MegaflowHits    uint64  `json:"megaflow_hits"`
	Misses          uint64  `json:"miss_with_upcall"`
	LostUpcalls     uint64  `json:"miss_lost"`
	Malformed       uint64  `json:"malformed"`
	OutputBatches   uint64  `json:"output_batches"`
	AvgBatch        float64 `json:"avg_packets_per_output_batch"`
	// OutputKicks are the drivers' send syscalls and eventfd writes for
	// those batches: what batching saves.
	OutputKicks    uint64  `json:"output_kicks"`
	KicksPerPacket float64 `json:"kicks_per_output_packet"`
	BusyNs         uint64  `json:"busy_ns"`
	IdleNs         uint64  `json:"idle_ns"`
	BusyPercent    float64 `json:"busy_percent"`
	NsPerPacket    float64 `json:"ns_per_packet"`
	Iterations     uint64  `json:"iterations"`
}

func (d *Daemon) pmdStatsViews() []PMDStatsView {
	var out []PMDStatsView
	for _, b := range d.bridgeList() {
		cur := takeSnapshot(b)
		d.baseMu.Lock()
		base := d.statsBase[b.name]
		d.baseMu.Unlock()
		for i, s := range cur.pmd {
			var bs datapath.PMDStats
			var bt txTotals
			if base != nil && i < len(base.pmd) {
				bs, bt = base.pmd[i], base.tx[i]
			}
			v := PMDStatsView{Bridge: b.name, PMD: s.PMD, CoreID: b.pmdCore(s.PMD),
				Packets:         sub(s.RxPackets, bs.RxPackets),
				Recirculations:  sub(s.Recirculations, bs.Recirculations),
				SimpleMatchHits: sub(s.SimpleMatchHits, bs.SimpleMatchHits),
				EMCHits:         sub(s.EMCHits, bs.EMCHits),
				MegaflowHits:    sub(s.MegaflowHits, bs.MegaflowHits),
				Misses:          sub(s.Misses, bs.Misses),
				LostUpcalls:     sub(s.LostUpcalls, bs.LostUpcalls),
				Malformed:       sub(s.Malformed, bs.Malformed),
				OutputBatches:   sub(cur.tx[i].batches, bt.batches),
				OutputKicks:     sub(cur.tx[i].kicks, bt.kicks),
				BusyNs:          sub(s.BusyNs, bs.BusyNs),
				IdleNs:          sub(s.IdleNs, bs.IdleNs),
				Iterations:      sub(s.Iterations, bs.Iterations),
			}
			if v.OutputBatches > 0 {
				out := sub(cur.tx[i].packets, bt.packets)
				v.AvgBatch = float64(out) / float64(v.OutputBatches)
				if out > 0 {
					v.KicksPerPacket = float64(v.OutputKicks) / float64(out)
				}
			}
			if total := v.BusyNs + v.IdleNs; total > 0 {
				v.BusyPercent = 100 * float64(v.BusyNs) / float64(total)
			}
			if v.Packets > 0 {
				v.NsPerPacket = float64(v.BusyNs) / float64(v.Packets)
			}
			out = append(out, v)
		}
	}
	return out
}

func pct(n, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}

func (d *Daemon) cmdPMDStatsShow(context.Context, []string) (mgmt.Result, error) {
	views := d.pmdStatsViews()
	var sb strings.Builder
	for _, v := range views {
		sb.WriteString(pmdHeader(v.Bridge, v.PMD, v.CoreID))
		passes := v.Packets + v.Recirculations
		fmt.Fprintf(&sb, "  packets received: %d\n", v.Packets)
		fmt.Fprintf(&sb, "  packet recirculations: %d\n", v.Recirculations)
		if v.Packets > 0 {
			fmt.Fprintf(&sb, "  avg. datapath passes per packet: %.2f\n", float64(passes)/float64(v.Packets))
		}
		fmt.Fprintf(&sb, "  simple match hits: %d (%.1f %%)\n", v.SimpleMatchHits, pct(v.SimpleMatchHits, passes))
		fmt.Fprintf(&sb, "  emc hits: %d (%.1f %%)\n", v.EMCHits, pct(v.EMCHits, passes))
		fmt.Fprintf(&sb, "  megaflow hits: %d (%.1f %%)\n", v.MegaflowHits, pct(v.MegaflowHits, passes))
		fmt.Fprintf(&sb, "  miss with success upcall: %d (%.1f %%)\n", sub(v.Misses, v.LostUpcalls), pct(sub(v.Misses, v.LostUpcalls), passes))
		fmt.Fprintf(&sb, "  miss with failed upcall: %d (%.1f %%)\n", v.LostUpcalls, pct(v.LostUpcalls, passes))
		fmt.Fprintf(&sb, "  malformed packets: %d\n", v.Malformed)
		fmt.Fprintf(&sb, "  output batches: %d\n", v.OutputBatches)
		fmt.Fprintf(&sb, "  avg. packets per output batch: %.2f\n", v.AvgBatch)
		fmt.Fprintf(&sb, "  output kicks: %d (%.3f per packet)\n", v.OutputKicks, v.KicksPerPacket)
		fmt.Fprintf(&sb, "  idle time: %.3f s (%.1f %%)\n", float64(v.IdleNs)/1e9, 100-v.BusyPercent)
		fmt.Fprintf(&sb, "  busy time: %.3f s (%.1f %%)\n", float64(v.BusyNs)/1e9, v.BusyPercent)
		fmt.Fprintf(&sb, "  avg. ns per packet: %.1f\n", v.NsPerPacket)
	}
	if len(views) == 0 {
		sb.WriteString("no bridges, so no PMDs\n")
	}
	return mgmt.Result{Text: sb.String(), Data: views}, nil
}

func (d *Daemon) cmdPMDStatsClear(context.Context, []string) (mgmt.Result, error) {
	d.baseMu.Lock()
	defer d.baseMu.Unlock()
	for _, b := range d.bridgeList() {
		d.statsBase[b.name] = takeSnapshot(b)
	}
	return mgmt.Result{}, nil
}

// RxqView is one receive queue as pmd-rxq-show reports it.
type RxqView struct {
	Bridge  string  `json:"bridge"`
	PMD     int     `json:"pmd"`
	CoreID  *int    `json:"core_id,omitempty"` // as in PMDStatsView
	Port    string  `json:"port"`
	Queue   int     `json:"queue"`
	Packets uint64  `json:"packets"`
	Usage   float64 `json:"pmd_usage_percent"`
	// Pinned is set for a queue placed by pmd-rxq-affinity.
	Pinned bool `json:"pinned,omitempty"`
}

func (d *Daemon) rxqViews() []RxqView {
	var out []RxqView
	for _, b := range d.bridgeList() {
		rs := b.dp.RxqStats()
		busy := map[int]uint64{}
		for _, r := range rs {
			busy[r.PMD] += r.BusyNs
		}
		affinity := map[uint32]map[int]int{}
		for _, r := range rs {
			if affinity[r.Port] == nil {
				affinity[r.Port] = b.dp.RxqAffinity(r.Port)
			}
			_, pinned := affinity[r.Port][r.Queue]
			out = append(out, RxqView{Bridge: b.name, PMD: r.PMD, CoreID: b.pmdCore(r.PMD), Port: b.portName(r.Port), Queue: r.Queue,
				Packets: r.Packets, Usage: pct(r.BusyNs, busy[r.PMD]), Pinned: pinned})
		}
	}
	return out
}

func (d *Daemon) cmdPMDRxqShow(context.Context, []string) (mgmt.Result, error) {
	views := d.rxqViews()
	var sb strings.Builder
	last := ""
	for _, v := range views {
		if hdr := fmt.Sprintf("%s/%d", v.Bridge, v.PMD); hdr != last {
			sb.WriteString(pmdHeader(v.Bridge, v.PMD, v.CoreID))
			last = hdr
		}
		pinned := ""
		if v.Pinned {
			pinned = "  (pinned)"
		}
		fmt.Fprintf(&sb, "  port: %-16s queue-id: %2d  pmd usage: %3.0f %%  packets: %d%s\n", v.Port, v.Queue, v.Usage, v.Packets, pinned)
	}
	return mgmt.Result{Text: sb.String(), Data: views}, nil
}

func (d *Daemon) cmdPMDRxqRebalance(context.Context, []string) (mgmt.Result, error) {
	total := 0
	for _, b := range d.bridgeList() {
		n, err := b.dp.RebalanceRxqs()
		if err != nil {
			return mgmt.Result{}, fmt.Errorf("bridge %s: %w", b.name, err)
		}
		total += n
	}
	return mgmt.Result{Text: fmt.Sprintf("%d rx queues moved\n", total), Data: map[string]int{"moved": total}}, nil
}

func (d *Daemon) cmdDpifDumpFlows(_ context.Context, args []string) (mgmt.Result, error) {
	var sb strings.Builder
	data := []DpifFlowView{}
	for _, b := range d.bridgeList() {
		if len(args) == 1 && b.name != args[0] {
			continue
		}
		for _, f := range b.dp.DumpFlows() {
			acts := b.actionsText(f.Actions)
			line := strings.TrimSuffix(f.String(), f.Actions.String()) + acts
			if len(args) == 0 {
				line = b.name + ": " + line
			}
			sb.WriteString(line)
			sb.WriteByte('\n')
			v := DpifFlowView{Bridge: b.name, PMD: f.PMD, Match: flow.FormatMatch(&f.Key, &f.Mask),
				Packets: f.Packets, Bytes: f.Bytes, Actions: acts}
			if f.LastUsed >= 0 {
				u := f.LastUsed.Seconds()
				v.UsedSeconds = &u
			}
			data = append(data, v)
		}
	}
	if len(args) == 1 {
		if _, err := d.runningBridgeOrErr(args[0]); err != nil {
			return mgmt.Result{}, err
		}
	}
	return mgmt.Result{Text: sb.String(), Data: data}, nil
}

func (d *Daemon) cmdFDBShow(_ context.Context, args []string) (mgmt.Result, error) {
	b, err := d.runningBridgeOrErr(args[0])
	if err != nil {
		return mgmt.Result{}, err
	}
	type fdbEntry struct {
		Port    string `json:"port"`
		OFPort  uint32 `json:"ofport"`
		VLAN    uint16 `json:"vlan"`
		MAC     string `json:"mac"`
		AgeSecs int    `json:"age"`
	}
	var sb strings.Builder
	sb.WriteString(" port  VLAN  MAC                Age\n")
	data := []fdbEntry{}
	for _, e := range b.of.FDB() {
		fe := fdbEntry{Port: b.portName(e.Port), OFPort: e.Port, VLAN: e.VLAN, MAC: net.HardwareAddr(e.MAC[:]).String(), AgeSecs: int(e.Age.Seconds())}
		fmt.Fprintf(&sb, "%5s  %4d  %s  %3d\n", ofptext.PortName(fe.OFPort), fe.VLAN, fe.MAC, fe.AgeSecs)
		data = append(data, fe)
	}
	return mgmt.Result{Text: sb.String(), Data: data}, nil
}

// DropView counts one drop cause.
type DropView struct {
	Bridge string `json:"bridge"`
	Where  string `json:"where"` // "datapath" or a port name
	Cause  string `json:"cause"`
	Count  uint64 `json:"count"`
}

func (d *Daemon) cmdDropStats(context.Context, []string) (mgmt.Result, error) {
	var views []DropView
	for _, b := range d.bridgeList() {
		var byCause [16]uint64
		var malformed uint64
		for _, s := range b.dp.PMDStats() {
			for i, n := range s.Drops {
				byCause[i] += n
			}
			malformed += s.Malformed
		}
		for _, c := range datapath.DropCauses() {
			views = append(views, DropView{Bridge: b.name, Where: "datapath", Cause: c.String(), Count: byCause[c]})
		}
		views = append(views, DropView{Bridge: b.name, Where: "datapath", Cause: "malformed_packet (classified, not dropped)", Count: malformed})
		for _, p := range b.sortedPorts() {
			st := p.dev.Stats()
			views = append(views,
				DropView{Bridge: b.name, Where: p.cfg.Name, Cause: "rx_dropped", Count: st.RxDrops},
				DropView{Bridge: b.name, Where: p.cfg.Name, Cause: "rx_errors", Count: st.RxErrors},
				DropView{Bridge: b.name, Where: p.cfg.Name, Cause: "tx_dropped", Count: st.TxDrops},
				DropView{Bridge: b.name, Where: p.cfg.Name, Cause: "tx_refused_by_peer (in tx_dropped)", Count: st.TxRefused},
				DropView{Bridge: b.name, Where: p.cfg.Name, Cause: "tx_errors", Count: st.TxErrors})
		}
	}
	var sb strings.Builder
	last := ""
	for _, v := range views {
		if hdr := v.Bridge + "/" + v.Where; hdr != last {
			fmt.Fprintf(&sb, "bridge %s, %s:\n", v.Bridge, v.Where)
			last = hdr
		}
		fmt.Fprintf(&sb, "  %-45s %d\n", v.Cause, v.Count)
	}
	return mgmt.Result{Text: sb.String(), Data: views}, nil
}

func (d *Daemon) cmdTrace(_ context.Context, args []string) (mgmt.Result, error) {
	// --ct-next FLAGS, anywhere and repeated, as Open vSwitch takes it:
	// the ct_state each ct(table=N)'s recirculated packet is traced with.
	var pos []string
	var ctNext []uint8
	for i := 0; i < len(args); i++ {
		if args[i] != "--ct-next" {
			pos = append(pos, args[i])
			continue
		}
		if i++; i == len(args) {
			return mgmt.Result{}, errors.New("--ct-next: missing ct_state flags (e.g. trk,est)")
		}
		st, err := ofptext.ParseCTStateFlags(args[i])
		if err != nil {
			return mgmt.Result{}, fmt.Errorf("--ct-next: %w", err)
		}
		ctNext = append(ctNext, st)
	}
	if len(pos) != 2 {
		return mgmt.Result{}, fmt.Errorf("ofproto/trace takes a bridge and a flow (and --ct-next flags), got %q", pos)
	}
	b, err := d.runningBridgeOrErr(pos[0])
	if err != nil {
		return mgmt.Result{}, err
	}
	key, err := ofptext.ParseTraceFlow(pos[1], ofptext.ParseFlowOptions{PortByName: b.portNumber})
	if upe, ok := errors.AsType[*ofptext.UnknownPortError](err); ok {
		return mgmt.Result{}, fmt.Errorf("bridge %s has no port %q", b.name, upe.Name)
	}
	if err != nil {
		return mgmt.Result{}, err
	}
	tr, err := b.of.Trace(key, ctNext...)
	if err != nil {
		return mgmt.Result{}, err
	}
	// Outputs to tunnel ports show their encapsulation.
	acts := b.actionsText(tr.Actions)
	text := strings.Replace(tr.String(), "Datapath actions: "+tr.Actions.String()+"\n", "Datapath actions: "+acts+"\n", 1)
	v := traceView(tr)
	v.DatapathActions = acts
	return mgmt.Result{Text: text, Data: v}, nil
}

// TraceView is trace's data: what the text shows, as fields.
type TraceView struct {
	Bridge          string          `json:"bridge"`
	Flow            string          `json:"flow"`
	Ingress         []string        `json:"ingress"`
	Steps           []TraceStepView `json:"steps"`
	FinalFlow       string          `json:"final_flow"`
	Megaflow        string          `json:"megaflow"`
	DatapathActions string          `json:"datapath_actions"`
	Error           string          `json:"error,omitempty"`
	// Recirculation is the walk resumed after the datapath actions'
	// recirc, on the recirculated packet.
	Recirculation *TraceView `json:"recirculation,omitempty"`
	// Conntrack are the walks resumed at the tables of the ct(table=N)
	// actions, on the tracked packets, in order.
	Conntrack []TraceCTView `json:"conntrack,omitempty"`
}

// TraceCTView is the tracked packet one ct(table=N) recirculates: the
// ct_state the trace assumed for it (--ct-next, or trk|new) and its walk.
type TraceCTView struct {
	RecircID uint32    `json:"recirc_id"`
	CTState  string    `json:"ct_state"`
	Trace    TraceView `json:"trace"`
}

// TraceStepView is one table of a trace.
type TraceStepView struct {
	Table    uint8    `json:"table"`
	Matched  bool     `json:"matched"`
	Priority uint16   `json:"priority"`
	Cookie   string   `json:"cookie"`
	Match    string   `json:"match"`
	Actions  string   `json:"actions"`
	Events   []string `json:"events"`
}

func traceView(tr *xlate.Trace) TraceView {
	v := TraceView{Bridge: tr.Bridge, Flow: tr.Flow.String(), Ingress: []string{}, Steps: []TraceStepView{},
		FinalFlow: tr.FinalFlow.String(), Megaflow: flow.FormatMatch(&tr.Flow, &tr.Mask),
		DatapathActions: tr.Actions.String()}
	if tr.Err != nil {
		v.Error = tr.Err.Error()
	}
	for _, e := range tr.Ingress {
		v.Ingress = append(v.Ingress, e.Text)
	}
	for _, st := range tr.Steps {
		sv := TraceStepView{Table: st.Table, Matched: st.Matched, Priority: st.Priority,
			Cookie: fmt.Sprintf("%#x", st.Cookie), Match: st.Match, Actions: st.Instructions, Events: []string{}}
		for _, e := range st.Events {
			sv.Events = append(sv.Events, e.Text)
		}
		v.Steps = append(v.Steps, sv)
	}
	if tr.Next != nil {
		n := traceView(tr.Next)
		v.Recirculation = &n
	}
	for _, r := range tr.CTResumes {
		if r.Trace != nil {
			v.Conntrack = append(v.Conntrack, TraceCTView{RecircID: r.ID, CTState: ofptext.FormatCTStateFlags(r.State), Trace: traceView(r.Trace)})
		}
	}
	return v
}

// DpifFlowView is one megaflow of dpif-dump-flows.
type DpifFlowView struct {
	Bridge  string `json:"bridge"`
	PMD     int    `json:"pmd"`
	Match   string `json:"match"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// UsedSeconds is how long ago a packet last matched; absent if none.
	UsedSeconds *float64 `json:"used_seconds,omitempty"`
	Actions     string   `json:"actions"`
}

// Command portfwd forwards between two kernel interfaces through the
// datapath (port 1 ↔ port 2) with a chosen driver. It is the switch under
// test of ../shared/bench/veth-bench.sh (`cmd:` SUTs) until the daemon takes
// its place, and it prints the PMD counters on exit (SIGTERM/SIGINT),
// including the PMD's busy time per packet.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/afpacket"
	"github.com/vswitch-go/vswitch/netdev/afxdp"
)

func main() {
	driver := flag.String("driver", "auto", "port driver: afxdp, afpacket or auto (afxdp, else afpacket)")
	nPMD := flag.Int("n-pmd", 1, "number of PMD goroutines")
	queues := flag.Int("queues", 1, "queues per port")
	flush := flag.Int("tx-flush-interval", 0, "tx-flush-interval in microseconds")
	sleepMax := flag.Int("pmd-sleep-max", datapath.DefaultPMDSleepMax, "longest idle sleep of a PMD in microseconds (0 = busy polling)")
	busyPoll := flag.Int("afxdp-busy-poll", 0, "AF_XDP SO_BUSY_POLL in microseconds: Recv runs the device's NAPI itself (for -pmd-sleep-max 0; 0 = off)")
	rxFrames := flag.Int("afpacket-rx-frames", 0, "AF_PACKET receive ring slots per queue (0 = the driver's default)")
	xdpRx := flag.Int("afxdp-rx-ring", 0, "AF_XDP fill and rx ring entries per queue, and as many receive UMEM frames, a power of two (0 = the driver's default)")
	probe := flag.Int("latency-probe", 0, "time 1 in N batches and every marked probe packet's batch per stage, printed on exit (0 = off)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: portfwd [flags] IFACE1 IFACE2\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	cfg := datapath.Config{NumPMDs: *nPMD, TxFlushInterval: *flush, PMDSleepMax: *sleepMax}
	po := portOpts{driver: *driver,
		xdp: afxdp.Options{Queues: *queues, BusyPoll: time.Duration(*busyPoll) * time.Microsecond,
			FillSize: *xdpRx, RxSize: *xdpRx, Frames: 2 * *xdpRx},
		pkt: afpacket.Options{Queues: *queues, RxFrames: *rxFrames}}
	if err := run(cfg, po, *probe, flag.Arg(0), flag.Arg(1), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "portfwd:", err)
		os.Exit(1)
	}
}

// portOpts say how to open the two ports: the driver and each driver's
// options from the flags.
type portOpts struct {
	driver string
	xdp    afxdp.Options
	pkt    afpacket.Options
}

// open opens ifname with the named driver.
func (o portOpts) open(ifname string) (netdev.Netdev, error) {
	switch o.driver {
	case "afxdp":
		return afxdp.New(ifname, o.xdp)
	case "afpacket":
		return afpacket.New(ifname, o.pkt)
	case "auto":
		if d, err := afxdp.New(ifname, o.xdp); err == nil {
			return d, nil
		}
		return afpacket.New(ifname, o.pkt)
	}
	return nil, fmt.Errorf("unknown driver %q (want afxdp, afpacket or auto)", o.driver)
}

func run(cfg datapath.Config, po portOpts, probe int, if1, if2 string, out io.Writer) error {
	rules := &datapath.RuleTable{}
	cfg.Upcall = rules
	dp, err := datapath.New(cfg)
	if err != nil {
		return err
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	for i, name := range []string{if1, if2} {
		dev, err := po.open(name)
		if err != nil {
			return err
		}
		if _, err := dp.AddPort(uint32(i+1), dev); err != nil {
			dev.Close()
			return err
		}
	}
	for in, outp := range map[uint32]uint32{1: 2, 2: 1} {
		var r datapath.Rule
		r.Match.Key.InPort, r.Match.Mask.InPort = in, ^uint32(0)
		r.Actions = actions.List{actions.OutputTo(outp)}
		rules.Add(r)
	}
	if err := dp.SetLatencyProbe(probe); err != nil {
		return err
	}
	if err := dp.Start(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if probe > 0 {
		reportLatency(out, dp) // while the PMD threads still exist
	}
	dp.Stop()
	report(out, dp)
	return nil
}

// report prints what the PMDs did, in the spirit of ovs-appctl
// dpif-netdev/pmd-stats-show.
func report(out io.Writer, dp *datapath.Datapath) {
	for _, s := range dp.PMDStats() {
		perPkt := 0.0
		if s.RxPackets > 0 {
			perPkt = float64(s.BusyNs) / float64(s.RxPackets)
		}
		busy := 0.0
		if t := s.BusyNs + s.IdleNs; t > 0 {
			busy = 100 * float64(s.BusyNs) / float64(t)
		}
		fmt.Fprintf(out, "pmd %d: packets %d emc_hits %d megaflow_hits %d upcalls %d busy %.1f%% busy_ns_per_packet %.1f\n",
			s.PMD, s.RxPackets, s.EMCHits, s.MegaflowHits, s.Misses, busy, perPkt)
		for _, c := range datapath.DropCauses() {
			if s.Drops[c] > 0 {
				fmt.Fprintf(out, "pmd %d: drops %s %d\n", s.PMD, c, s.Drops[c])
			}
		}
	}
	for _, p := range dp.Ports() {
		st := p.Dev.Stats()
		fmt.Fprintf(out, "port %d %s: rx %d drops %d errors %d, tx %d drops %d errors %d\n",
			p.No, p.Dev.Name(), st.RxPackets, st.RxDrops, st.RxErrors, st.TxPackets, st.TxDrops, st.TxErrors)
		if x, ok := p.Dev.(*afxdp.Port); ok {
			// Where receive drops happen: an empty fill ring (the PMD gave
			// frames back too slowly, or too few circulate) or a full rx ring.
			k := x.KernelStats()
			fmt.Fprintf(out, "xsk %s: rx_dropped %d rx_ring_full %d rx_fill_ring_empty_descs %d tx_ring_empty_descs %d\n",
				p.Dev.Name(), k.Rx_dropped, k.Rx_ring_full, k.Rx_fill_ring_empty_descs, k.Tx_ring_empty_descs)
		}
		for _, t := range p.TxStats() {
			fmt.Fprintf(out, "port %d pmd %d: batches %d avg_batch %.1f\n", p.No, t.PMD, t.Batches, t.AvgBatch())
		}
	}
}

// reportLatency prints the probe's percentiles per stage, the PMD threads'
// scheduler counters, one "key value" line each, for bench/latency/breakdown.sh.
func reportLatency(out io.Writer, dp *datapath.Datapath) {
	for _, l := range dp.Latency() {
		fmt.Fprintf(out, "latency pmd %d: sampled_batches %d marked_packets %d\n", l.PMD, l.Batches, l.MarkedPackets)
		for _, s := range datapath.LatencyStages() {
			h := l.Stages[s]
			fmt.Fprintf(out, "latency pmd %d %s: count %d p50_us %.1f p90_us %.1f p99_us %.1f\n", l.PMD, s, h.Count,
				float64(h.Percentile(0.5))/1e3, float64(h.Percentile(0.9))/1e3, float64(h.Percentile(0.99))/1e3)
		}
		if l.TID > 0 {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/schedstat", l.TID)); err == nil {
				fmt.Fprintf(out, "schedstat pmd %d: %s", l.PMD, b) // run_ns wait_ns timeslices
			}
		}
	}
}

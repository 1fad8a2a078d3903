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
	if err := run(cfg, *driver, *queues, flag.Arg(0), flag.Arg(1), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "portfwd:", err)
		os.Exit(1)
	}
}

// open opens ifname with the named driver.
func open(driver, ifname string, queues int) (netdev.Netdev, error) {
	switch driver {
	case "afxdp":
		return afxdp.New(ifname, afxdp.Options{Queues: queues})
	case "afpacket":
		return afpacket.New(ifname, afpacket.Options{Queues: queues})
	case "auto":
		if d, err := afxdp.New(ifname, afxdp.Options{Queues: queues}); err == nil {
			return d, nil
		}
		return afpacket.New(ifname, afpacket.Options{Queues: queues})
	}
	return nil, fmt.Errorf("unknown driver %q (want afxdp, afpacket or auto)", driver)
}

func run(cfg datapath.Config, driver string, queues int, if1, if2 string, out io.Writer) error {
	rules := &datapath.RuleTable{}
	cfg.Upcall = rules
	dp, err := datapath.New(cfg)
	if err != nil {
		return err
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	for i, name := range []string{if1, if2} {
		dev, err := open(driver, name, queues)
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
	if err := dp.Start(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
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
		for _, t := range p.TxStats() {
			fmt.Fprintf(out, "port %d pmd %d: batches %d avg_batch %.1f\n", p.No, t.PMD, t.Batches, t.AvgBatch())
		}
	}
}

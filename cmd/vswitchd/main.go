// Command vswitchd runs the switch. Until its configuration store and
// management API exist, it runs the embedded default topology: one
// datapath whose port 1 is an endless source of 64-byte UDP packets (the
// null driver) and whose port 2 is a sink, with the rule
// in_port=1,actions=output:2, and prints the PMD counters every interval.
// (cmd/portfwd forwards between two kernel interfaces meanwhile.)
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"vswitch/datapath"
	"vswitch/datapath/actions"
	"vswitch/datapath/flow"
	"vswitch/netdev/null"
)

func main() {
	nPMD := flag.Int("n-pmd", 1, "number of PMD goroutines")
	flush := flag.Int("tx-flush-interval", 0, "tx-flush-interval in microseconds (0..1000000)")
	sleepMax := flag.Int("pmd-sleep-max", datapath.DefaultPMDSleepMax, "longest idle sleep of a PMD in microseconds (0 = busy polling)")
	cpuMask := flag.String("pmd-cpu-mask", "", "hex mask of CPUs to pin PMDs to (empty = not pinned)")
	flows := flag.Int("demo-flows", 1, "distinct UDP flows the demo source sends")
	interval := flag.Duration("stats-interval", time.Second, "how often to print PMD counters")
	duration := flag.Duration("duration", 0, "stop after this long (0 = run until SIGINT/SIGTERM)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	cpus, err := parseCPUMask(*cpuMask)
	if err != nil {
		fmt.Fprintln(os.Stderr, "vswitchd:", err)
		os.Exit(2)
	}
	if *flows < 1 || *flows > 1_000_000 {
		fmt.Fprintln(os.Stderr, "vswitchd: --demo-flows must be 1..1000000")
		os.Exit(2)
	}
	if err := run(log, datapath.Config{
		NumPMDs: *nPMD, TxFlushInterval: *flush, PMDSleepMax: *sleepMax, CPUs: cpus,
	}, *flows, *interval, *duration, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vswitchd:", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, cfg datapath.Config, flows int, interval, duration time.Duration, out io.Writer) error {
	rules := &datapath.RuleTable{}
	cfg.Upcall = rules
	dp, err := datapath.New(cfg)
	if err != nil {
		return err
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	npmd := len(dp.PMDs())
	if _, err := dp.AddPort(1, null.New("demo-src", npmd, 1, demoFrames(flows))); err != nil {
		return err
	}
	if _, err := dp.AddPort(2, null.New("demo-sink", 0, npmd, nil)); err != nil {
		return err
	}
	var r datapath.Rule
	r.Match.Key.InPort, r.Match.Mask.InPort = 1, ^uint32(0)
	r.Actions = actions.List{{Kind: actions.Output, Port: 2}}
	rules.Add(r)

	log.Info("vswitchd: embedded demo topology (not yet configurable; cmd/portfwd forwards between kernel interfaces)",
		"ports", "1=demo-src(null) 2=demo-sink(null)", "rule", "in_port=1,actions=output:2",
		"pmds", npmd, "tx-flush-interval-us", cfg.TxFlushInterval, "flows", flows)
	if err := dp.Start(); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	var stop <-chan time.Time
	if duration > 0 {
		stop = time.After(duration)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	prev := dp.PMDStats()
	last := time.Now()
	for {
		select {
		case s := <-sig:
			log.Info("vswitchd: stopping", "signal", s.String())
			dp.Stop()
			return nil
		case <-stop:
			dp.Stop()
			printStats(out, dp, prev, time.Since(last))
			return nil
		case <-tick.C:
			printStats(out, dp, prev, time.Since(last))
			prev, last = dp.PMDStats(), time.Now()
		}
	}
}

func printStats(out io.Writer, dp *datapath.Datapath, prev []datapath.PMDStats, dt time.Duration) {
	tx := dp.Port(2).TxStats()
	for i, s := range dp.PMDStats() {
		p := prev[i]
		rx := s.RxPackets - p.RxPackets
		hits := s.EMCHits - p.EMCHits
		emc := 0.0
		if rx > 0 {
			emc = 100 * float64(hits) / float64(rx)
		}
		busy := s.BusyNs - p.BusyNs
		total := busy + s.IdleNs - p.IdleNs
		busyPct := 0.0
		if total > 0 {
			busyPct = 100 * float64(busy) / float64(total)
		}
		fmt.Fprintf(out, "pmd %d: %.2f Mpps  emc hits %.1f%%  megaflow hits %d  upcalls %d  busy %.0f%%  avg batch %.1f\n",
			s.PMD, float64(rx)/dt.Seconds()/1e6, emc, s.MegaflowHits-p.MegaflowHits, s.Misses-p.Misses, busyPct, tx[i].AvgBatch())
	}
}

// demoFrames builds n 60-byte Ethernet/IPv4/UDP frames of distinct flows
// (UDP source ports 1024..), from 198.18.0.1 to 198.18.0.2 port 9.
func demoFrames(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		f := make([]byte, 60)
		copy(f, []byte{0x02, 0, 0xc6, 0x12, 0, 2, 0x02, 0, 0xc6, 0x12, 0, 1, 0x08, 0x00})
		ip := f[14:]
		copy(ip, []byte{0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2})
		sum := uint32(0)
		for j := 0; j < 20; j += 2 {
			sum += uint32(ip[j])<<8 | uint32(ip[j+1])
		}
		sum = sum&0xffff + sum>>16
		sum = sum&0xffff + sum>>16
		ip[10], ip[11] = byte(^sum>>8), byte(^sum)
		sport := 1024 + i%64000
		udp := ip[20:]
		udp[0], udp[1], udp[2], udp[3] = byte(sport>>8), byte(sport), 0, 9
		udp[4], udp[5] = 0, 26
		out[i] = f
	}
	var k flow.Key
	var off flow.Offsets
	if flow.Extract(out[0], 1, &k, &off) != 0 {
		panic("demo frame does not parse") // a bug in this function, caught at start
	}
	return out
}

// parseCPUMask turns a pmd-cpu-mask ("0x6", "6") into CPU numbers.
func parseCPUMask(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 64)
	if err != nil || v == 0 {
		return nil, fmt.Errorf("bad pmd-cpu-mask %q: want a non-zero hex mask such as 0x2", s)
	}
	var cpus []int
	for i := 0; i < 64; i++ {
		if v&(1<<i) != 0 {
			cpus = append(cpus, i)
		}
	}
	return cpus, nil
}

// Command ovnpipe is issue 27's OVN-shaped pipeline benchmark, our side and
// the generator both switches are fed from.
//
//	ovnpipe gen -dir DIR [-seed N] [-filler N] [-dps N] [-packets N]
//	    writes DIR/flows.txt (ovs-ofctl add-flows syntax, ~10,000 flows),
//	    DIR/pkts.pcap (the test packets) and DIR/empty.pcap; deterministic
//	    for a seed.
//	ovnpipe run -flows FILE -pcap FILE [-dur D] [-rounds N] [-cpuprofile F] [-memprofile F]
//	    loads FILE's flows into a bridge over a manual-mode datapath with
//	    ring ports 1 and 2 (each line parsed by ofproto/ofptext and handed
//	    to the bridge as the FLOW_MOD ovs-ofctl would send) and replays the
//	    pcap into port 1 through one PMD on the calling goroutine.
//
// run prints, per round, three figures:
//
//   - upcall: every megaflow invalidated, then each distinct packet of the
//     pcap sent once: all of them miss, are translated through the whole
//     pipeline and installed. Rate = misses / wall time of the pass (the
//     receive copy and the output of those packets included, as in the
//     PMD's upcall path).
//   - xlate: the translation alone (Bridge.Upcall on each packet's key, no
//     megaflow install, no packet), the figure to compare with OVS's
//     per-upcall time.
//   - fwd: the pcap replayed over and over for -dur with every megaflow in
//     place: Mpps and ns/packet, the receive copy (ring injection, like
//     DPDK net_pcap's copy into a fresh mbuf) included, output discarded.
//
// Everything runs on the calling goroutine with GOMAXPROCS unchanged; the
// script pins the process (taskset) to the CPU the OVS PMD gets.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/vswitch-go/vswitch/bench/internal/benchio"
	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ovnpipe gen|run [flags] (see the package comment)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		fs := flag.NewFlagSet("gen", flag.ExitOnError)
		dir := fs.String("dir", ".", "output directory")
		seed := fs.Uint64("seed", 27, "generator seed")
		filler := fs.Int("filler", 1000, "filler logical ports per per-port stage")
		dps := fs.Int("dps", 30, "filler logical datapaths (a default flow in each of the 30 stages each)")
		pkts := fs.Int("packets", 8192, "test packets, each a distinct address pair (<= 18,000)")
		fs.Parse(os.Args[2:])
		err = generate(*dir, *seed, *filler, *dps, *pkts)
	case "run":
		fs := flag.NewFlagSet("run", flag.ExitOnError)
		flows := fs.String("flows", "", "flow file (ovs-ofctl syntax)")
		pcap := fs.String("pcap", "", "packets to replay into port 1")
		dur := fs.Duration("dur", 5*time.Second, "forwarding window per round")
		rounds := fs.Int("rounds", 3, "rounds (each: upcall pass, xlate pass, forwarding window)")
		prof := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
		memprof := fs.String("memprofile", "", "write an allocation profile of the whole run to this file")
		fs.Parse(os.Args[2:])
		if *prof != "" {
			f, perr := os.Create(*prof)
			if perr != nil {
				err = perr
				break
			}
			defer f.Close()
			if err = pprof.StartCPUProfile(f); err != nil {
				break
			}
			defer pprof.StopCPUProfile()
		}
		err = run(*flows, *pcap, *dur, *rounds)
		if *memprof != "" && err == nil {
			f, perr := os.Create(*memprof)
			if perr != nil {
				err = perr
				break
			}
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "ovnpipe:", err)
		os.Exit(1)
	}
}

func run(flowsPath, pcapPath string, dur time.Duration, rounds int) error {
	runtime.LockOSThread() // threadCPU reads this thread's time
	frames, err := benchio.ReadPcap(pcapPath)
	if err != nil {
		return err
	}
	if len(frames) == 0 {
		return fmt.Errorf("%s: no packets", pcapPath)
	}
	rig, err := benchio.NewRig(4*len(frames) + 1000)
	if err != nil {
		return err
	}
	defer rig.Close()
	dp, br, in, out := rig.DP, rig.Bridge, rig.P1, rig.P2
	t0 := time.Now()
	nflows, err := benchio.LoadFlows(br, flowsPath)
	if err != nil {
		return err
	}
	fmt.Printf("ours: %d flows loaded in %v; %d packets; GOMAXPROCS %d\n", nflows, time.Since(t0).Round(time.Millisecond), len(frames), runtime.GOMAXPROCS(0))

	const burst = 32
	batches := make([][][]byte, 0, (len(frames)+burst-1)/burst)
	for i := 0; i < len(frames); i += burst {
		batches = append(batches, frames[i:min(i+burst, len(frames))])
	}
	pmd := dp.PMDs()[0]
	// pass sends every packet once; it returns the packets the PMD took
	// and the packets that came out of port 2.
	pass := func() (rx, tx int) {
		for _, bt := range batches {
			in.Inject(0, bt...)
			for in.Pending(0) > 0 {
				rx += pmd.PollOnce()
			}
			tx += out.Discard(0)
		}
		pmd.PollOnce() // idle: flushes and publishes the counters
		tx += out.Discard(0)
		return rx, tx
	}
	stats := func() datapath.PMDStats { return dp.PMDStats()[0] }

	// The pipeline must forward every test packet (either ACL path).
	dp.InvalidateFlows()
	if rx, tx := pass(); tx != rx || rx != len(frames) {
		return fmt.Errorf("first pass: %d packets in, %d out of port 2 (want all %d)", rx, tx, len(frames))
	}
	if dp.FlowCount() != len(frames) {
		fmt.Printf("ours: note: %d megaflows for %d distinct packets\n", dp.FlowCount(), len(frames))
	}

	keys := make([]flow.Key, len(frames))
	var off flow.Offsets
	for i, f := range frames {
		flow.Extract(f, 1, &keys[i], &off)
	}
	var res datapath.UpcallResult
	var upRates, upCPU, xRates, xCPU, mpps, nsPkt, cpuPkt []float64
	for r := 1; r <= rounds; r++ {
		// upcall pass
		dp.InvalidateFlows()
		s0 := stats()
		t, c := time.Now(), benchio.ThreadCPU()
		rx, tx := pass()
		upEl, upC := time.Since(t), benchio.ThreadCPU()-c
		s1 := stats()
		miss := s1.Misses - s0.Misses
		upRate := float64(miss) / upEl.Seconds()
		upUs := upC.Seconds() * 1e6 / float64(max(miss, 1))
		// translation alone, ~1 s
		n := 0
		t, c = time.Now(), benchio.ThreadCPU()
		for time.Since(t) < time.Second {
			for i := range keys {
				if err := br.Upcall(&keys[i], &res); err != nil {
					return err
				}
			}
			n += len(keys)
		}
		xRate := float64(n) / time.Since(t).Seconds()
		xUs := (benchio.ThreadCPU() - c).Seconds() * 1e6 / float64(n)
		// forwarding with every megaflow in place
		pass()
		s0 = stats()
		pkts, i := 0, 0
		t, c = time.Now(), benchio.ThreadCPU()
		deadline := t.Add(dur)
		for {
			for k := 0; k < 64; k++ {
				in.Inject(0, batches[i%len(batches)]...)
				i++
				pkts += pmd.PollOnce()
				out.Discard(0)
			}
			if !time.Now().Before(deadline) {
				break
			}
		}
		el, cpu := time.Since(t), benchio.ThreadCPU()-c
		pmd.PollOnce()
		s1 = stats()
		m := float64(pkts) / el.Seconds() / 1e6
		cp := cpu.Seconds() * 1e9 / float64(pkts)
		fmt.Printf("ours round %d: upcall %.0f/s (%.1f cpu-us/upcall; %d misses, %d in, %d out, %v)  xlate %.0f/s (%.1f cpu-us)  fwd %.3f Mpps (%.1f ns/pkt, %.1f cpu-ns/pkt, %d upcalls, emc %.0f%%)\n",
			r, upRate, upUs, miss, rx, tx, upEl.Round(time.Millisecond), xRate, xUs, m, 1e3/m, cp,
			s1.Misses-s0.Misses, float64(s1.EMCHits-s0.EMCHits)/float64(max(1, s1.RxPackets-s0.RxPackets))*100)
		upRates, upCPU, xRates, xCPU = append(upRates, upRate), append(upCPU, upUs), append(xRates, xRate), append(xCPU, xUs)
		mpps, nsPkt, cpuPkt = append(mpps, m), append(nsPkt, 1e3/m), append(cpuPkt, cp)
	}
	fmt.Printf("ours median of %d: upcall %.0f/s (%.1f cpu-us/upcall)  xlate %.0f/s (%.1f cpu-us)  fwd %.3f Mpps  %.1f ns/pkt  %.1f cpu-ns/pkt\n",
		rounds, benchio.Median(upRates), benchio.Median(upCPU), benchio.Median(xRates), benchio.Median(xCPU), benchio.Median(mpps), benchio.Median(nsPkt), benchio.Median(cpuPkt))
	return nil
}

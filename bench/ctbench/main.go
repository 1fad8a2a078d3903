// Command ctbench is issue 28's connection-tracking benchmark, our side
// and the generator both switches are fed from (ctbench.sh runs OVS-DPDK
// beside it on the same files).
//
//	ctbench gen -dir DIR [-new N] [-clustered]
//	    writes the pipelines DIR/{plain,noct,ct,snat}.txt (ovs-ofctl syntax, as
//	    e2e/conntrack_bench_test.go's), for K = 1, 1000, 100000 established
//	    UDP flows DIR/est-K-orig.pcap (port 1 -> 2) and DIR/est-K-reply.pcap
//	    (the replies, port 2 -> 1), DIR/new.pcap (N distinct UDP tuples,
//	    each a new connection) and DIR/empty.pcap.
//	ctbench run -flows FILE -mode fwd|new -pcap1 FILE [-pcap2 FILE] [-dur D] [-rounds N]
//	    loads FILE's flows into a bridge over a manual-mode datapath with
//	    ring ports 1 and 2 and replays the pcaps (pcap1 into port 1,
//	    pcap2 into port 2, a burst of each in turn) through one PMD on the
//	    calling goroutine.
//
// fwd: the pcaps replayed for a warm-up (every connection committed and
// answered, every megaflow in place), then over and over for -dur:
// packets out of both ports per second (Mpps) and CPU per packet (the
// process's, the garbage collector included, and the PMD thread's).
// new: conntrack flushed, then pcap1 sent once; connections made per
// second from 5 to 30 % of the pass (the part OVS's sampling window
// sees of its pass) and over the whole pass (the last 1024 frames are
// sent first, and the tracker flushed after them, so the pass has no
// megaflow to install).
//
// Why replies: a UDP connection is +est only once its reply has been seen
// (Open vSwitch's userspace tracker, like Linux's, keeps a one-way flow
// +new; its packets would take the ct(commit) path). The established
// figures therefore replay both directions of each connection.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/vswitch-go/vswitch/bench/internal/benchio"
	"github.com/vswitch-go/vswitch/datapath"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: ctbench gen|run [flags] (see the package comment)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "gen":
		fs := flag.NewFlagSet("gen", flag.ExitOnError)
		dir := fs.String("dir", ".", "output directory")
		n := fs.Int("new", 1_000_000, "distinct tuples in new.pcap (<= 4,000,000)")
		clustered := fs.Bool("clustered", false, "new.pcap's tuples from the clustered walk (see newFrames)")
		fs.Parse(os.Args[2:])
		err = generate(*dir, *n, *clustered)
	case "run":
		fs := flag.NewFlagSet("run", flag.ExitOnError)
		var c runConfig
		fs.StringVar(&c.flows, "flows", "", "flow file (ovs-ofctl syntax)")
		fs.StringVar(&c.mode, "mode", "fwd", "fwd (established Mpps) or new (connections/s)")
		fs.StringVar(&c.pcap1, "pcap1", "", "packets into port 1")
		fs.StringVar(&c.pcap2, "pcap2", "", "packets into port 2 (fwd only)")
		fs.DurationVar(&c.dur, "dur", 3*time.Second, "fwd window per round")
		fs.IntVar(&c.rounds, "rounds", 2, "rounds")
		fs.StringVar(&c.label, "label", "", "label of the printed lines")
		prof := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
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
		err = run(&c)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "ctbench:", err)
		os.Exit(1)
	}
}

// The pipelines, e2e/conntrack_bench_test.go's: plain forwarding both
// ways, and the stateful firewall (ct into zone 1, commit the new
// connections from port 1, pass the established both ways), with or
// without source NAT on commit.
const plainFlows = `priority=10,in_port=1,actions=output:2
priority=10,in_port=2,actions=output:1
`

// noctFlows is the firewall's pipeline without its ct: the same tables and
// matches with ct(table=1) a goto_table and the ct_state matches gone, the
// reference issue 28's "within 1.5x of the same pipeline without ct" names
// (plain's single in_port match is cheaper than any IP pipeline).
const noctFlows = `priority=10,ip,actions=goto_table:1
table=1,ip,in_port=1,actions=output:2
table=1,ip,in_port=2,actions=output:1
table=1,priority=0,actions=drop
`

func firewall(commit string) string {
	return "priority=10,ip,ct_state=-trk,actions=ct(table=1,zone=1)\n" +
		"table=1,ip,in_port=1,ct_state=+trk+new,actions=" + commit + ",output:2\n" +
		"table=1,ip,in_port=1,ct_state=+trk+est,actions=output:2\n" +
		"table=1,ip,in_port=2,ct_state=+trk+est,actions=output:1\n" +
		"table=1,priority=0,actions=drop\n"
}

var (
	macA = [6]byte{0x02, 0x00, 0xc6, 0x12, 0x00, 0x0a} // behind port 1
	macB = [6]byte{0x02, 0x00, 0xc6, 0x12, 0x00, 0x0b} // behind port 2
)

// udpFrame is a 60-byte (64 on the wire) UDP/IPv4 frame, IP header
// checksum correct, UDP checksum 0 (none).
func udpFrame(dmac, smac [6]byte, src, dst uint32, sport, dport uint16) []byte {
	f := make([]byte, 60)
	copy(f[0:6], dmac[:])
	copy(f[6:12], smac[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], 28)
	ip[8], ip[9] = 64, 17
	binary.BigEndian.PutUint32(ip[12:], src)
	binary.BigEndian.PutUint32(ip[16:], dst)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(f[34:], sport)
	binary.BigEndian.PutUint16(f[36:], dport)
	binary.BigEndian.PutUint16(f[38:], 8)
	return f
}

const (
	serverIP = 0xc6120002 // 198.18.0.2, every established flow's server
	estBase  = 0xc6121000 // 198.18.16.0: established clients from here
	newBase  = 0xc6124000 // 198.18.64.0: the clustered walk's clients from here
	newDst   = 0xc612c800 // 198.18.200.0: new.pcap's servers from here
)

// estFrames are k established flows (client 198.18.16.0+j/64 port
// 1024+j%64 to 198.18.0.2:9), each direction, repeated to at least 1024
// frames: DPDK's infinite_rx hands out at most the pcap's frames per
// receive burst, so a 1-frame pcap would measure the burst, not the
// switch.
func estFrames(k int) (orig, reply [][]byte) {
	n := max(k, 1024)
	for i := range n {
		j := i % k
		cl, port := uint32(estBase+j/64), uint16(1024+j%64)
		orig = append(orig, udpFrame(macB, macA, cl, serverIP, port, 9))
		reply = append(reply, udpFrame(macA, macB, serverIP, cl, 9, port))
	}
	return orig, reply
}

// newFrames are n distinct tuples. The default walk is
// e2e/conntrack_bench_test.go's: client 198.18.(16+i/60000).(1+i/240%250)
// port 1024+i%60000, to 198.18.200.(1+i/60000):9 (one server per 60,000
// tuples, so SNAT to 16 addresses has ports to spare). The clustered walk
// (client 198.18.64.0+i/64 port 1024+i%64 to 198.18.200.(1+i%250):9) is as
// realistic but falls into few slots of our tracker's index (see
// docs/notes/benchmarks-journal.md, 2026-12-06).
func newFrames(n int, clustered bool) [][]byte {
	fs := make([][]byte, n)
	for i := range fs {
		if clustered {
			fs[i] = udpFrame(macB, macA, uint32(newBase+i/64), uint32(newDst+1+i%250), uint16(1024+i%64), 9)
			continue
		}
		cl := uint32(0xc6120000 | (16+i/60000)<<8 | (1 + i/240%250))
		fs[i] = udpFrame(macB, macA, cl, uint32(newDst+1+i/60000), uint16(1024+i%60000), 9)
	}
	return fs
}

func generate(dir string, nNew int, clustered bool) error {
	if nNew < 2048 || nNew > 4_000_000 {
		return fmt.Errorf("-new %d: want 2048..4,000,000", nNew)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, s := range map[string]string{
		"plain.txt": plainFlows,
		"noct.txt":  noctFlows,
		"ct.txt":    firewall("ct(commit,zone=1)"),
		"snat.txt":  firewall("ct(commit,zone=1,nat(src=198.19.0.1-198.19.0.16))"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			return err
		}
	}
	for _, k := range []int{1, 1000, 100000} {
		o, r := estFrames(k)
		if err := benchio.WritePcap(filepath.Join(dir, fmt.Sprintf("est-%d-orig.pcap", k)), o); err != nil {
			return err
		}
		if err := benchio.WritePcap(filepath.Join(dir, fmt.Sprintf("est-%d-reply.pcap", k)), r); err != nil {
			return err
		}
	}
	if err := benchio.WritePcap(filepath.Join(dir, "new.pcap"), newFrames(nNew, clustered)); err != nil {
		return err
	}
	if err := benchio.WritePcap(filepath.Join(dir, "empty.pcap"), nil); err != nil {
		return err
	}
	fmt.Printf("ctbench gen: {plain,noct,ct,snat}.txt, est-{1,1000,100000}-{orig,reply}.pcap, new.pcap (%d tuples)\n", nNew)
	return nil
}

type runConfig struct {
	flows, mode, pcap1, pcap2, label string
	dur                              time.Duration
	rounds                           int
}

const burst = 32

// processCPU is the CPU time of the whole process, the Go runtime's
// garbage collector included: a conntrack pass makes a million objects,
// and the collector's work on them is part of what a connection costs.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func batchesOf(frames [][]byte) [][][]byte {
	bs := make([][][]byte, 0, (len(frames)+burst-1)/burst)
	for i := 0; i < len(frames); i += burst {
		bs = append(bs, frames[i:min(i+burst, len(frames))])
	}
	return bs
}

func run(c *runConfig) error {
	runtime.LockOSThread() // ThreadCPU reads this thread's time
	if c.label == "" {
		c.label = "ours " + filepath.Base(c.flows)
	}
	f1, err := benchio.ReadPcap(c.pcap1)
	if err != nil {
		return err
	}
	var f2 [][]byte
	if c.pcap2 != "" {
		if f2, err = benchio.ReadPcap(c.pcap2); err != nil {
			return err
		}
	}
	if len(f1) == 0 {
		return fmt.Errorf("%s: no packets", c.pcap1)
	}
	rig, err := benchio.NewRig(10000)
	if err != nil {
		return err
	}
	defer rig.Close()
	dp, br, p1, p2 := rig.DP, rig.Bridge, rig.P1, rig.P2
	if _, err := benchio.LoadFlows(br, c.flows); err != nil {
		return err
	}
	ct := dp.Conntrack()
	pmd := dp.PMDs()[0]
	stats := func() datapath.PMDStats { pmd.PollOnce(); return dp.PMDStats()[0] }
	// send pushes one burst into port 1 and one (if any) into port 2 and
	// polls until both are taken; it returns the packets out of both.
	send := func(b1, b2 [][]byte) (tx int) {
		p1.Inject(0, b1...)
		if b2 != nil {
			p2.Inject(0, b2...)
		}
		for p1.Pending(0) > 0 || p2.Pending(0) > 0 {
			pmd.PollOnce()
		}
		return p1.Discard(0) + p2.Discard(0)
	}
	b1, b2 := batchesOf(f1), batchesOf(f2)
	at := func(bs [][][]byte, i int) [][]byte {
		if len(bs) == 0 {
			return nil
		}
		return bs[i%len(bs)]
	}
	var rates, cpus []float64
	switch c.mode {
	case "fwd":
		// Warm-up: three passes, the first commits, the replies of the
		// later ones establish.
		for i := 0; i < 3*max(len(b1), len(b2)); i++ {
			send(at(b1, i), at(b2, i))
		}
		for r := 1; r <= c.rounds; r++ {
			s0 := stats()
			tx, i := 0, 0
			t, cpu, pcpu := time.Now(), benchio.ThreadCPU(), processCPU()
			deadline := t.Add(c.dur)
			for time.Now().Before(deadline) {
				for k := 0; k < 64; k++ {
					tx += send(at(b1, i), at(b2, i))
					i++
				}
			}
			el, cc, pc := time.Since(t), benchio.ThreadCPU()-cpu, processCPU()-pcpu
			s1 := stats()
			rx := s1.RxPackets - s0.RxPackets
			m := float64(tx) / el.Seconds() / 1e6
			cp := pc.Seconds() * 1e9 / float64(max(rx, 1))
			fmt.Printf("%s round %d: fwd %.3f Mpps out (%d of %d received; %.1f cpu-ns/pkt, the PMD thread's %.1f), %d tracked, %d upcalls, %d megaflows\n",
				c.label, r, m, tx, rx, cp, cc.Seconds()*1e9/float64(max(rx, 1)), ct.Len(), s1.Misses-s0.Misses, dp.FlowCount())
			rates, cpus = append(rates, m), append(cpus, cp)
			if uint64(tx) != rx {
				return fmt.Errorf("%s: %d packets out of %d received: the pipeline drops some", c.label, tx, rx)
			}
		}
		fmt.Printf("%s median of %d: fwd %.3f Mpps %.1f cpu-ns/pkt\n", c.label, c.rounds, benchio.Median(rates), benchio.Median(cpus))
	case "new":
		if len(b1) < 64 {
			return fmt.Errorf("%s: %d frames, too few for the new mode", c.pcap1, len(f1))
		}
		warm, pass := b1[len(b1)-32:], b1[:len(b1)-32]
		npass := 0
		for _, b := range pass {
			npass += len(b)
		}
		for r := 1; r <= c.rounds; r++ {
			for _, b := range warm {
				send(b, nil)
			}
			ct.Flush(nil)
			runtime.GC() // not in the window: the last round's connections are garbage
			s0, n0 := stats(), ct.Len()
			tx := 0
			t, cpu, pcpu := time.Now(), benchio.ThreadCPU(), processCPU()
			// The window from the 5th to the 30th percent of the pass is
			// what OVS's sampling sees of its pass (0.3 s in, about 1 s).
			var wt0, wt1 time.Time
			var wc0, wc1 time.Duration
			var wn0, wn1 int64
			for k, b := range pass {
				switch k {
				case len(pass) / 20:
					wt0, wc0, wn0 = time.Now(), processCPU(), ct.Len()
				case len(pass) * 3 / 10:
					wt1, wc1, wn1 = time.Now(), processCPU(), ct.Len()
				}
				tx += send(b, nil)
			}
			el, cc, pc := time.Since(t), benchio.ThreadCPU()-cpu, processCPU()-pcpu
			s1, n1 := stats(), ct.Len()
			made := n1 - n0
			// with no ct in the pipeline, the rate is packets'
			cnt := made
			if cnt == 0 {
				cnt = int64(tx)
			}
			rate := float64(cnt) / el.Seconds()
			cp := pc.Seconds() * 1e9 / float64(max(npass, 1))
			wpk := (len(pass)*3/10 - len(pass)/20) * burst
			wcnt := wn1 - wn0
			if made == 0 {
				wcnt = int64(wpk)
			}
			wrate := float64(wcnt) / wt1.Sub(wt0).Seconds()
			wcp := (wc1 - wc0).Seconds() * 1e9 / float64(wpk)
			fmt.Printf("%s round %d: new %.0f k/s in 5-30%% of the pass (%.0f cpu-ns/pkt); whole pass %.0f k/s (%d connections made, %d packets in, %d out, %v; %.0f cpu-ns/pkt, the PMD thread's %.0f; %d upcalls)\n",
				c.label, r, wrate/1e3, wcp, rate/1e3, made, npass, tx, el.Round(time.Millisecond), cp, cc.Seconds()*1e9/float64(max(npass, 1)), s1.Misses-s0.Misses)
			rates, cpus = append(rates, wrate/1e3), append(cpus, wcp)
			if tx != npass || made != 0 && made != int64(npass) {
				return fmt.Errorf("%s: %d packets in, %d out, %d connections made", c.label, npass, tx, made)
			}
		}
		ct.Flush(nil)
		fmt.Printf("%s median of %d: new %.0f k/s %.0f cpu-ns/pkt (5-30%% of the pass)\n", c.label, c.rounds, benchio.Median(rates), benchio.Median(cpus))
	default:
		return fmt.Errorf("unknown -mode %q", c.mode)
	}
	return nil
}

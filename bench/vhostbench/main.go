// Command vhostbench measures vhost-user forwarding with DPDK's testpmd as
// the VMs, and prints one table row per run (reported, never asserted):
//
//   - switch: one testpmd process with two virtio-user ports in flowgen
//     mode (both directions at once) on one forwarding core, this switch's
//     datapath with one PMD on the other core forwarding port 1 ↔ port 2;
//     the figure is what testpmd receives, both ports together.
//   - limit: no switch; a testpmd with a virtio-user port in flowgen mode
//     connected straight to a second testpmd with DPDK's own vhost PMD in
//     rxonly mode, one forwarding core each (one direction).
//   - ovs: as switch, with Open vSwitch's userspace datapath (OVS-DPDK,
//     ports type=dpdkvhostuserclient) in its own network namespace and
//     run/database directories, its PMD on the switch's core.
//
// With -gen loop, testpmd forwards io between its two ports instead of
// generating (a fixed set of packets sent once with start tx_first goes
// round through the switch), so the switch rather than testpmd's one core
// sets the rate; limit then puts DPDK's vhost PMD, forwarding io between
// two ports, in the switch's place.
//
// Each run lasts -warmup plus -duration; the rate is testpmd's own Rx-pps
// over the -duration window. It needs root, dpdk-testpmd and, for ovs, the
// ovs-vswitchd-dpdk binary of Debian's openvswitch-switch-dpdk.
//
//	go run ./bench/vhostbench -sut switch,limit -flows 1,1000 -flush 0,50
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/netdev/vhostuser"
)

// hugeDir is a hugetlbfs mount for testpmd's and OVS's memory, or ""
// for 4 KiB pages (-huge-dir).
var hugeDir string

type config struct {
	gen              string // "flowgen" or "loop"
	loopBursts       int    // loop: bursts of 32 each port sends first (start tx_first N)
	duration, warmup time.Duration
	size             int
	queueSize        int
	fwdCPU, sutCPU   int
	keep             bool
}

func main() {
	suts := flag.String("sut", "switch,limit", "comma-separated: switch, limit, ovs")
	flows := flag.String("flows", "1,1000", "comma-separated flowgen flow counts")
	flush := flag.String("flush", "0,50", "comma-separated tx-flush-interval values (µs) for switch and ovs")
	var c config
	flag.StringVar(&c.gen, "gen", "flowgen", "traffic: flowgen (testpmd builds every packet: its core, not the switch, is the limit near 9.5 Mpps) or loop (testpmd io-forwards between its two ports and the switch forwards back, so a fixed set of packets circulates at the slower of the two)")
	flag.IntVar(&c.loopBursts, "loop-bursts", 16, "loop: 32-packet bursts each port sends at the start (start tx_first N); fewer than a ring holds, so nothing is dropped")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "measurement window per run")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "traffic before the window")
	flag.IntVar(&c.size, "size", 64, "frame size (testpmd --txpkts)")
	flag.IntVar(&c.queueSize, "queue-size", 1024, "virtio ring size")
	flag.IntVar(&c.fwdCPU, "fwd-cpu", 0, "CPU of the traffic generator's forwarding lcore")
	flag.IntVar(&c.sutCPU, "sut-cpu", 1, "CPU of the switch's PMD (and of the second testpmd for limit)")
	flag.BoolVar(&c.keep, "v", false, "print testpmd's output after each run")
	flag.StringVar(&hugeDir, "huge-dir", "", "hugetlbfs mount for the testpmds' and OVS's memory (1 GiB each); default 4 KiB pages (--no-huge), whose TLB misses both switches pay per packet")
	huge := flag.Bool("huge", false, "mount a private hugetlbfs for -huge-dir, raising vm.nr_hugepages to 1100 (2 MiB pages) for the runs; both are undone at exit")
	repeat := flag.Int("repeat", 1, "runs of each configuration; with more than one, a median row follows them (a run's rate can differ by 1.5x from the next one's)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of this process (the switch's PMD) to the file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "vhostbench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}

	flowList, flushList := ints(*flows), ints(*flush) // before anything needs undoing
	if c.gen != "flowgen" && c.gen != "loop" {
		fmt.Fprintf(os.Stderr, "vhostbench: -gen %q: want flowgen or loop\n", c.gen)
		os.Exit(2)
	}
	if c.gen == "loop" && (c.loopBursts < 1 || c.loopBursts*32 >= c.queueSize) {
		fmt.Fprintf(os.Stderr, "vhostbench: -loop-bursts %d: the %d packets each port sends first must be fewer than a ring (%d) holds, or the loop drops some\n",
			c.loopBursts, c.loopBursts*32, c.queueSize)
		os.Exit(2)
	}
	if *huge && hugeDir == "" {
		undo, err := mountHuge(1100)
		if err != nil {
			fmt.Fprintln(os.Stderr, "vhostbench:", err)
			os.Exit(1)
		}
		defer undo()
	}

	fmt.Printf("traffic: %s\n\n", c.gen)
	fmt.Printf("| SUT | flows | tx-flush-interval | Mpps received | per port | notes |\n| --- | --- | --- | --- | --- | --- |\n")
	// Rounds alternate the SUTs, so a minute of a noisy host does not
	// fall on one SUT's runs only.
	sutList := strings.Split(*suts, ",")
	for _, fl := range flowList {
		for fn, fi := range flushList {
			fs := strconv.Itoa(fi)
			totals := map[string][]float64{}
			busy := map[string][]float64{}
			for range *repeat {
				for _, sut := range sutList {
					fs := fs
					if sut == "limit" {
						if fn > 0 {
							continue // no tx-flush-interval to vary
						}
						fs = "-"
					}
					var r result
					var err error
					switch sut {
					case "switch":
						r, err = runSwitch(c, fl, fi)
					case "limit":
						if c.gen == "loop" {
							r, err = runLimitLoop(c, fl)
						} else {
							r, err = runLimit(c, fl)
						}
					case "ovs":
						r, err = runOVS(c, fl, fi)
					default:
						err = fmt.Errorf("unknown SUT %q", sut)
					}
					if err != nil {
						fmt.Printf("| %s | %d | %s | error | | %v |\n", sut, fl, fs, err)
						continue
					}
					var per []string
					for _, p := range r.rxpps {
						per = append(per, fmt.Sprintf("%.2f", float64(p)/1e6))
					}
					totals[sut] = append(totals[sut], float64(r.total())/1e6)
					if r.busyNs > 0 {
						busy[sut] = append(busy[sut], r.busyNs)
					}
					fmt.Printf("| %s | %d | %s | %.2f | %s | %s |\n", sut, fl, fs, float64(r.total())/1e6, strings.Join(per, " + "), r.notes)
				}
			}
			if *repeat < 2 {
				continue
			}
			for _, sut := range sutList {
				t := totals[sut]
				if len(t) == 0 {
					continue
				}
				slices.Sort(t)
				ns := ""
				if b := busy[sut]; len(b) > 0 {
					ns = fmt.Sprintf(", PMD busy median %.0f ns/pkt", median(b))
				}
				fmt.Printf("| %s | %d | %s | **%.2f** median | | %d runs, %.2f–%.2f%s |\n", sut, fl, fs,
					median(t), len(t), t[0], t[len(t)-1], ns)
			}
			if s, o := totals["switch"], totals["ovs"]; len(s) > 0 && len(o) > 0 {
				line := fmt.Sprintf("switch / ovs, flows %d, tx-flush-interval %s: %.2fx in Mpps (medians)", fl, fs, median(s)/median(o))
				if bs, bo := busy["switch"], busy["ovs"]; len(bs) > 0 && len(bo) > 0 {
					line += fmt.Sprintf(", %.2fx in PMD busy ns/pkt (ovs / switch)", median(bo)/median(bs))
				}
				fmt.Printf("\n%s\n\n", line)
			}
		}
	}
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 0 {
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return v[len(v)/2]
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintln(os.Stderr, "vhostbench: bad number", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

type result struct {
	rxpps  []uint64
	notes  string
	busyNs float64 // the switch's PMD busy ns per received packet over the window, 0 if unknown
}

func (r result) total() uint64 {
	var t uint64
	for _, p := range r.rxpps {
		t += p
	}
	return t
}

// testpmd is an interactive dpdk-testpmd driven through its stdin.
type testpmd struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	out    bytes.Buffer
	exited chan struct{}
	prefix string
}

func (tp *testpmd) Write(p []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.out.Write(p)
}

func (tp *testpmd) text() string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.out.String()
}

// startTestpmd runs testpmd on lcores fwd (forwarding) and main (the
// prompt, idle), line-buffered and with SIGPIPE ignored (DPDK 22.11's
// virtio-user writes to a vhost-user socket whose peer has gone).
func startTestpmd(fwd, main int, vdevs []string, args ...string) (*testpmd, error) {
	bin, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		return nil, err
	}
	tp := &testpmd{exited: make(chan struct{}), prefix: fmt.Sprintf("vhb%d", time.Now().UnixNano()%1e9)}
	argv := []string{"-c", `trap "" PIPE; exec "$@"`, "testpmd", "stdbuf", "-oL", bin,
		"-l", fmt.Sprintf("%d,%d", fwd, main), "--main-lcore", strconv.Itoa(main),
		"-m", "1024", "--no-pci", "--file-prefix", tp.prefix}
	if hugeDir != "" {
		// One file per segment list, so the backend maps few regions.
		argv = append(argv, "--huge-dir", hugeDir, "--single-file-segments")
	} else {
		argv = append(argv, "--no-huge")
	}
	for _, v := range vdevs {
		argv = append(argv, "--vdev", v)
	}
	argv = append(argv, "--", "-i", "--nb-cores=1")
	argv = append(argv, args...)
	tp.cmd = exec.Command("sh", argv...)
	// A session of its own, so a scheduling autogroup of its own
	// (kernel.sched_autogroup_enabled): OVS daemonizes into one, and our
	// switch runs in this process's. With testpmd in this session its
	// lcore would share one group's CPU weight with our PMD but not with
	// OVS's, and on a loaded machine our switch's runs would get half
	// the CPU OVS's get.
	tp.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if tp.stdin, err = tp.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	tp.cmd.Stdout, tp.cmd.Stderr = tp, tp
	if err := tp.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { tp.cmd.Wait(); close(tp.exited) }()
	if err := tp.waitFor(0, "testpmd> ", 60*time.Second); err != nil {
		tp.close()
		return nil, err
	}
	return tp, nil
}

func (tp *testpmd) waitFor(from int, marker string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !strings.Contains(tp.text()[from:], marker) {
		select {
		case <-tp.exited:
			return fmt.Errorf("testpmd exited:\n%s", tp.text())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testpmd: no %q:\n%s", marker, tp.text())
		}
	}
	return nil
}

func (tp *testpmd) do(command string) (string, error) {
	from := len(tp.text())
	if _, err := io.WriteString(tp.stdin, command+"\n"); err != nil {
		return "", err
	}
	marker := "testpmd> "
	if command == "stop" {
		marker = "\nDone."
	}
	if err := tp.waitFor(from, marker, 30*time.Second); err != nil {
		return "", err
	}
	return tp.text()[from:], nil
}

func (tp *testpmd) close() {
	io.WriteString(tp.stdin, "quit\n")
	tp.stdin.Close()
	select {
	case <-tp.exited:
	case <-time.After(5 * time.Second):
		tp.cmd.Process.Kill()
		<-tp.exited
	}
	os.RemoveAll("/run/dpdk/" + tp.prefix)
	removeHugeFiles(tp.prefix)
}

// mountHuge makes sure vm.nr_hugepages is at least pages and mounts a
// hugetlbfs of 2 MiB pages in a temporary directory as hugeDir; undo
// unmounts it and puts nr_hugepages back.
func mountHuge(pages int) (undo func(), err error) {
	const knob = "/proc/sys/vm/nr_hugepages"
	b, err := os.ReadFile(knob)
	if err != nil {
		return nil, err
	}
	old, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("%s: %q", knob, b)
	}
	restore := func() {}
	if old < pages {
		if err := os.WriteFile(knob, []byte(strconv.Itoa(pages)), 0); err != nil {
			return nil, err
		}
		restore = func() { os.WriteFile(knob, []byte(strconv.Itoa(old)), 0) }
		b, _ = os.ReadFile(knob)
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n < pages {
			restore()
			return nil, fmt.Errorf("only %d of %d hugepages could be reserved", n, pages)
		}
	}
	dir, err := os.MkdirTemp("", "vhostbench-huge")
	if err != nil {
		restore()
		return nil, err
	}
	if err := run("mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", dir); err != nil {
		os.Remove(dir)
		restore()
		return nil, err
	}
	hugeDir = dir
	return func() {
		run("umount", dir)
		os.Remove(dir)
		restore()
	}, nil
}

// removeHugeFiles deletes the hugepage files an EAL with file prefix
// prefix left in hugeDir: DPDK keeps them after exit, and each holds its
// pages until deleted.
func removeHugeFiles(prefix string) {
	if hugeDir == "" {
		return
	}
	files, _ := filepath.Glob(filepath.Join(hugeDir, prefix+"map_*"))
	for _, f := range files {
		os.Remove(f)
	}
}

var (
	nicBlock = regexp.MustCompile(`NIC statistics for port (\d+)[\s\S]*?Rx-pps:\s+(\d+)`)
	linkUp   = regexp.MustCompile(`(?m)^\d+\s+\S+\s+\S+\s+\S+\s+up\s`)
)

// thread is a busy-polling thread whose CPU time a run reports: on this
// shared two-core machine a figure means little without knowing whether
// the generator and the switch's PMD had their cores.
type thread struct {
	name     string
	pid, tid int
	run      uint64 // ns on the CPU at the window's start (schedstat)
	wait     uint64 // ns runnable but waiting for the CPU
}

// schedstat reads a thread's CPU and run-queue wait times (ns).
func schedstat(pid, tid int) (run, wait uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("schedstat %q", b)
	}
	run, _ = strconv.ParseUint(f[0], 10, 64)
	wait, _ = strconv.ParseUint(f[1], 10, 64)
	return run, wait, nil
}

// findThread returns the first thread of pid whose name starts with one
// of the prefixes, or 0.
func findThread(pid int, prefixes ...string) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, e := range ents {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/comm", pid, e.Name()))
		if err != nil {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(string(b), p) {
				tid, _ := strconv.Atoi(e.Name())
				return tid
			}
		}
	}
	return 0
}

// genThread is testpmd's forwarding lcore thread.
func genThread(name string, tp *testpmd) thread {
	pid := tp.cmd.Process.Pid // sh and stdbuf exec testpmd
	return thread{name: name, pid: pid, tid: findThread(pid, "rte-worker-", "lcore-worker-")}
}

// cpuNotes is each thread's share of the window on the CPU and waiting
// for it.
func cpuNotes(ths []thread, window time.Duration) string {
	var out []string
	for _, t := range ths {
		run, wait, err := schedstat(t.pid, t.tid)
		if t.tid == 0 || err != nil {
			out = append(out, t.name+" CPU unknown")
			continue
		}
		out = append(out, fmt.Sprintf("%s CPU %.0f %% (waited %.0f %%)", t.name,
			100*float64(run-t.run)/float64(window), 100*float64(wait-t.wait)/float64(window)))
	}
	return strings.Join(out, ", ")
}

// measure starts forwarding on gen, waits warmup, and returns the Rx-pps
// of rx (which may be gen itself) over the window, and the threads' CPU
// shares over it.
func measure(c config, gen, rx *testpmd, ths ...thread) ([]uint64, string, error) {
	return measureHook(c, gen, rx, nil, ths...)
}

// measureHook is measure calling hook (if not nil) at the window's start
// and end, for the SUT's own counters over the window.
func measureHook(c config, gen, rx *testpmd, hook func(end bool), ths ...thread) ([]uint64, string, error) {
	if rx != gen {
		if _, err := rx.do("start"); err != nil {
			return nil, "", err
		}
	}
	start := "start"
	if c.gen == "loop" {
		// testpmd counts its forwarding lcore's busy cycles, so a row
		// shows what the generator would sustain (1/busy), not only
		// what it reached.
		if _, err := gen.do("set record-core-cycles on"); err != nil {
			return nil, "", err
		}
		// Each port sends its bursts once, then io forwarding keeps
		// them going round.
		start = fmt.Sprintf("start tx_first %d", c.loopBursts)
	}
	if out, err := gen.do(start); err != nil {
		return nil, "", err
	} else if strings.Contains(out, "Fail") || strings.Contains(out, "Bad arguments") || strings.Contains(out, "rror") {
		return nil, "", fmt.Errorf("testpmd %q: %s", start, tail(out, 10))
	}
	time.Sleep(c.warmup)
	if _, err := rx.do("show port stats all"); err != nil {
		return nil, "", err
	}
	t0 := time.Now()
	for i := range ths {
		ths[i].run, ths[i].wait, _ = schedstat(ths[i].pid, ths[i].tid)
	}
	if hook != nil {
		hook(false)
	}
	fwd0, _ := gen.do("show fwd stats all")
	time.Sleep(c.duration)
	fwd1, _ := gen.do("show fwd stats all")
	text, err := rx.do("show port stats all")
	if hook != nil {
		hook(true)
	}
	if err != nil {
		return nil, "", err
	}
	cpu := cpuNotes(ths, time.Since(t0))
	if c.gen == "loop" {
		// io forwarding drops only what a full tx ring refuses; in the
		// loop every such packet is gone for good, and the rate would
		// fall with it.
		if _, dropped, ok := genDrops(fwd0, fwd1); ok {
			cpu = fmt.Sprintf("loop of %d packets per port, testpmd tx drops in window %d, %s", c.loopBursts*32, dropped, cpu)
		}
		if m := coreCycles.FindStringSubmatch(fwd1); m != nil {
			cyc, _ := strconv.ParseFloat(m[1], 64)
			mhz, _ := strconv.ParseFloat(m[2], 64)
			if mhz > 0 {
				cpu = fmt.Sprintf("testpmd io %.0f ns/pkt busy (ceiling %.1f Mpps), %s", cyc/mhz*1e3, mhz/cyc, cpu)
			}
		}
	} else if sent, dropped, ok := genDrops(fwd0, fwd1); ok && sent+dropped > 0 {
		// A generator whose ring is full still builds the burst it
		// cannot send: that CPU is lost to the packets it could send.
		cpu = fmt.Sprintf("generator sent %.2f Mpps, dropped %.0f %% of its bursts' packets (tx ring full), %s",
			float64(sent)/1e6/c.duration.Seconds(), 100*float64(dropped)/float64(sent+dropped), cpu)
	}
	gen.do("stop")
	if rx != gen {
		rx.do("stop")
	}
	var pps []uint64
	for _, m := range nicBlock.FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseUint(m[2], 10, 64)
		pps = append(pps, v)
	}
	if len(pps) == 0 {
		return nil, "", errors.New("no port statistics from testpmd")
	}
	return pps, cpu, nil
}

// coreCycles is testpmd's busy cycles per packet of its forwarding lcores
// (set record-core-cycles on), since forwarding started, and its TSC
// frequency.
var coreCycles = regexp.MustCompile(`CPU cycles/packet=([\d.]+)[^\n]*? at (\d+) MHz`)

var fwdTotals = regexp.MustCompile(`Accumulated forward statistics[\s\S]*?TX-packets:\s+(\d+)\s+TX-dropped:\s+(\d+)`)

// genDrops returns what the generator sent and dropped between two
// "show fwd stats all" outputs.
func genDrops(before, after string) (sent, dropped uint64, ok bool) {
	a, b := fwdTotals.FindStringSubmatch(before), fwdTotals.FindStringSubmatch(after)
	if a == nil || b == nil {
		return 0, 0, false
	}
	n := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
	if n(b[1]) < n(a[1]) || n(b[2]) < n(a[2]) {
		return 0, 0, false // counters reset between the two
	}
	return n(b[1]) - n(a[1]), n(b[2]) - n(a[2]), true
}

// tail returns the last n lines of s, for error messages.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitOVSLink polls OVS's database until the interface reports link up.
func waitOVSLink(dbsock, iface string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("ovs-vsctl", "--db="+dbsock, "get", "Interface", iface, "link_state").CombinedOutput()
		if err == nil && strings.TrimSpace(string(out)) == "up" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("OVS interface %s never came up (link_state %q, %v)", iface, strings.TrimSpace(string(out)), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitLinks polls testpmd until every port reports its link up.
func waitLinks(tp *testpmd, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := tp.do("show port summary all")
		if err != nil {
			return err
		}
		if len(linkUp.FindAllString(out, -1)) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("links not up:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func genArgs(c config, flows int) []string {
	ring := []string{fmt.Sprintf("--txpkts=%d", c.size), fmt.Sprintf("--txd=%d", c.queueSize), fmt.Sprintf("--rxd=%d", c.queueSize)}
	if c.gen == "loop" {
		// tx_first builds its bursts with txonly's code; with
		// multi-flow each packet gets its own source address (as many
		// flows as packets in the loop, up to txonly's limit).
		a := []string{"--forward-mode=io"}
		if flows > 1 {
			a = append(a, "--txonly-multi-flow")
		}
		return append(a, ring...)
	}
	return append([]string{"--forward-mode=flowgen", fmt.Sprintf("--flowgen-flows=%d", flows)}, ring...)
}

func runSwitch(c config, flows, flush int) (result, error) {
	dir, err := os.MkdirTemp("", "vhostbench")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	rules := &datapath.RuleTable{}
	dp, err := datapath.New(datapath.Config{NumPMDs: 1, CPUs: []int{c.sutCPU}, PMDSleepMax: 0,
		TxFlushInterval: flush, Upcall: rules})
	if err != nil {
		return result{}, err
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	var socks []string
	var ports []*vhostuser.Port
	for i := 1; i <= 2; i++ {
		sock := filepath.Join(dir, fmt.Sprintf("vhu%d.sock", i))
		p, err := vhostuser.New(fmt.Sprintf("vhu%d", i), vhostuser.Options{SocketPath: sock})
		if err != nil {
			return result{}, err
		}
		if _, err := dp.AddPort(uint32(i), p); err != nil {
			p.Close()
			return result{}, err
		}
		socks = append(socks, sock)
		ports = append(ports, p)
	}
	for in, out := range map[uint32]uint32{1: 2, 2: 1} {
		var r datapath.Rule
		r.Match.Key.InPort, r.Match.Mask.InPort = in, ^uint32(0)
		r.Actions = actions.List{actions.OutputTo(out)}
		rules.Add(r)
	}
	if err := dp.Start(); err != nil {
		return result{}, err
	}
	var vdevs []string
	for i, s := range socks {
		vdevs = append(vdevs, fmt.Sprintf("net_virtio_user%d,path=%s,queues=1,queue_size=%d", i, s, c.queueSize))
	}
	tp, err := startTestpmd(c.fwdCPU, c.sutCPU, vdevs, genArgs(c, flows)...)
	if err != nil {
		return result{}, err
	}
	defer tp.close()
	for deadline := time.Now().Add(30 * time.Second); !(ports[0].LinkUp() && ports[1].LinkUp()); {
		if time.Now().After(deadline) {
			return result{}, errors.New("switch ports never came up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	var ths []thread
	if l := dp.Latency(); len(l) > 0 {
		ths = append(ths, thread{name: "PMD", pid: os.Getpid(), tid: l[0].TID})
	}
	ths = append(ths, genThread("testpmd", tp))
	var before []datapath.PMDStats
	var window []string
	var busyNs float64
	hook := func(end bool) {
		st := dp.PMDStats()
		if !end {
			before = st
			return
		}
		for i, s := range st {
			if i >= len(before) {
				break
			}
			b := before[i]
			rx, busy, idle := s.RxPackets-b.RxPackets, s.BusyNs-b.BusyNs, s.IdleNs-b.IdleNs
			if rx == 0 || busy+idle == 0 {
				continue
			}
			// Where the PMD's time went and which cache took the
			// packets: a generator that varies headers could have
			// sent them down a slower path than the single flow.
			n := float64(rx) / 100
			busyNs = float64(busy) / float64(rx)
			window = append(window, fmt.Sprintf("window: PMD %.0f ns/pkt busy, busy %.0f %% of PMD time, %.0f ns/iteration, simple match %.0f %%, EMC %.0f %%, megaflow %.0f %%, upcalls %d, %d megaflows",
				float64(busy)/float64(rx), 100*float64(busy)/float64(busy+idle), float64(busy+idle)/float64(s.Iterations-b.Iterations),
				float64(s.SimpleMatchHits-b.SimpleMatchHits)/n, float64(s.EMCHits-b.EMCHits)/n, float64(s.MegaflowHits-b.MegaflowHits)/n,
				s.Misses-b.Misses, dp.FlowCount()))
		}
	}
	pps, cpu, err := measureHook(c, tp, tp, hook, ths...)
	if err != nil {
		return result{}, err
	}
	dp.Stop()
	if r := (result{rxpps: pps}); r.total() == 0 {
		return result{}, fmt.Errorf("testpmd received nothing through the switch (port stats %+v / %+v); testpmd:\n%s",
			ports[0].Stats(), ports[1].Stats(), tail(tp.text(), 40))
	}
	var notes []string
	for _, s := range dp.PMDStats() {
		if s.RxPackets > 0 {
			notes = append(notes, fmt.Sprintf("PMD %.0f ns/pkt busy", float64(s.BusyNs)/float64(s.RxPackets)))
		}
	}
	for _, p := range dp.Ports() {
		for _, t := range p.TxStats() {
			notes = append(notes, fmt.Sprintf("port %d avg batch %.1f", p.No, t.AvgBatch()))
			if c.keep {
				notes = append(notes, fmt.Sprintf("port %d kicks %d", p.No, t.Kicks))
			}
		}
		if v, ok := p.Dev.(*vhostuser.Port); ok && c.keep {
			notes = append(notes, fmt.Sprintf("port %d features %#x", p.No, v.Features()))
		}
		st := p.Dev.Stats()
		notes = append(notes, fmt.Sprintf("port %d tx drops %d", p.No, st.TxDrops))
	}
	notes = append(notes, window...)
	notes = append(notes, cpu)
	if c.keep {
		fmt.Fprintln(os.Stderr, tp.text())
	}
	return result{rxpps: pps, notes: strings.Join(notes, ", "), busyNs: busyNs}, nil
}

func runLimit(c config, flows int) (result, error) {
	dir, err := os.MkdirTemp("", "vhostbench")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "limit.sock")
	// DPDK's vhost PMD listens; its testpmd forwards on the SUT core.
	rx, err := startTestpmd(c.sutCPU, c.fwdCPU, []string{fmt.Sprintf("net_vhost0,iface=%s,queues=1", sock)},
		"--forward-mode=rxonly", fmt.Sprintf("--txd=%d", c.queueSize), fmt.Sprintf("--rxd=%d", c.queueSize))
	if err != nil {
		return result{}, err
	}
	defer rx.close()
	gen, err := startTestpmd(c.fwdCPU, c.sutCPU, []string{fmt.Sprintf("net_virtio_user0,path=%s,queues=1,queue_size=%d", sock, c.queueSize)},
		genArgs(c, flows)...)
	if err != nil {
		return result{}, err
	}
	defer gen.close()
	if err := waitLinks(rx, 1); err != nil {
		return result{}, err
	}
	pps, cpu, err := measure(c, gen, rx, genThread("generator", gen), genThread("receiver", rx))
	if err != nil {
		return result{}, err
	}
	if c.keep {
		fmt.Fprintln(os.Stderr, gen.text(), rx.text())
	}
	if r := (result{rxpps: pps}); r.total() == 0 {
		return result{}, fmt.Errorf("the receiving testpmd got nothing; generator:\n%s\nreceiver:\n%s", tail(gen.text(), 20), tail(rx.text(), 20))
	}
	return result{rxpps: pps, notes: "one direction, testpmd vhost PMD rxonly, " + cpu}, nil
}

// runLimitLoop is the loop without a switch: the generator's two
// virtio-user ports connect to a second testpmd's two vhost PMD ports
// forwarding io between them on the switch's core, the cheapest
// vhost-user backend there is. Its rate is the slower of the two
// testpmds; a switch's loop rate below it is the switch's own.
func runLimitLoop(c config, flows int) (result, error) {
	dir, err := os.MkdirTemp("", "vhostbench")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	socks := []string{filepath.Join(dir, "limit0.sock"), filepath.Join(dir, "limit1.sock")}
	var bvdevs, gvdevs []string
	for i, s := range socks {
		bvdevs = append(bvdevs, fmt.Sprintf("net_vhost%d,iface=%s,queues=1", i, s))
		gvdevs = append(gvdevs, fmt.Sprintf("net_virtio_user%d,path=%s,queues=1,queue_size=%d", i, s, c.queueSize))
	}
	back, err := startTestpmd(c.sutCPU, c.fwdCPU, bvdevs,
		"--forward-mode=io", fmt.Sprintf("--txd=%d", c.queueSize), fmt.Sprintf("--rxd=%d", c.queueSize))
	if err != nil {
		return result{}, fmt.Errorf("vhost PMD testpmd: %w", err)
	}
	defer back.close()
	gen, err := startTestpmd(c.fwdCPU, c.sutCPU, gvdevs, genArgs(c, flows)...)
	if err != nil {
		return result{}, fmt.Errorf("generator testpmd: %w", err)
	}
	defer gen.close()
	if err := waitLinks(back, 2); err != nil {
		return result{}, fmt.Errorf("vhost PMD testpmd: %w", err)
	}
	if err := waitLinks(gen, 2); err != nil {
		return result{}, fmt.Errorf("generator testpmd: %w", err)
	}
	if _, err := back.do("start"); err != nil {
		return result{}, fmt.Errorf("vhost PMD testpmd: %w", err)
	}
	pps, cpu, err := measure(c, gen, gen, genThread("generator", gen), genThread("vhost PMD io", back))
	back.do("stop")
	if err != nil {
		return result{}, err
	}
	if c.keep {
		fmt.Fprintln(os.Stderr, gen.text(), back.text())
	}
	if r := (result{rxpps: pps}); r.total() == 0 {
		return result{}, fmt.Errorf("nothing went round the loop; generator:\n%s\nvhost PMD testpmd:\n%s", tail(gen.text(), 20), tail(back.text(), 20))
	}
	return result{rxpps: pps, notes: "both directions, testpmd vhost PMD io on the switch's core, " + cpu}, nil
}

// ovsVswitchd is the DPDK build of ovs-vswitchd (Debian's
// openvswitch-switch-dpdk); called by path, so the system's
// ovs-vswitchd alternative is left alone.
const ovsVswitchd = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func killPidfile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
			for i := 0; i < 100 && p.Signal(syscall.Signal(0)) == nil; i++ {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

// runOVS builds a private OVS-DPDK (database, daemon, run directory and
// network namespace of its own) with two dpdkvhostuserclient ports joined
// by two OpenFlow rules, and a testpmd whose virtio-user ports listen
// (server=1) for it.
func runOVS(c config, flows, flush int) (res result, err error) {
	if _, err := os.Stat(ovsVswitchd); err != nil {
		return result{}, fmt.Errorf("%v (apt-get install openvswitch-switch-dpdk)", err)
	}
	dir, err := os.MkdirTemp("", "vhostbench-ovs")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	ns := fmt.Sprintf("vhbovs%d", os.Getpid())
	if err := run("ip", "netns", "add", ns); err != nil {
		return result{}, err
	}
	defer run("ip", "netns", "del", ns)
	os.Setenv("OVS_RUNDIR", dir)
	os.Setenv("OVS_DBDIR", dir)
	os.Setenv("OVS_LOGDIR", dir)
	db := filepath.Join(dir, "conf.db")
	dbsock := "unix:" + filepath.Join(dir, "db.sock")
	if err := run("ovsdb-tool", "create", db, "/usr/share/openvswitch/vswitch.ovsschema"); err != nil {
		return result{}, err
	}
	if err := run("ip", "netns", "exec", ns, "ovsdb-server", db, "--remote=p"+dbsock,
		"--pidfile="+filepath.Join(dir, "ovsdb.pid"), "--unixctl="+filepath.Join(dir, "ovsdb.ctl"),
		"--log-file="+filepath.Join(dir, "ovsdb.log"), "--detach", "--no-chdir"); err != nil {
		return result{}, err
	}
	defer killPidfile(filepath.Join(dir, "ovsdb.pid"))
	vsctl := func(wait bool, args ...string) error {
		a := []string{"--db=" + dbsock, "--timeout=60"}
		if !wait {
			a = append(a, "--no-wait")
		}
		return run("ovs-vsctl", append(a, args...)...)
	}
	mask := fmt.Sprintf("0x%x", 1<<c.sutCPU)
	prefix := fmt.Sprintf("vhbovs%d", os.Getpid())
	if err := vsctl(false, "init", "--", "set", "Open_vSwitch", ".",
		"other_config:dpdk-init=true",
		`other_config:dpdk-extra="`+ovsMem()+` --no-pci --file-prefix `+prefix+`"`,
		"other_config:dpdk-lcore-mask="+mask, "other_config:pmd-cpu-mask="+mask,
		fmt.Sprintf("other_config:tx-flush-interval=%d", flush)); err != nil {
		return result{}, err
	}
	defer os.RemoveAll("/run/dpdk/" + prefix)
	defer removeHugeFiles(prefix)
	if err := run("ip", "netns", "exec", ns, ovsVswitchd, dbsock,
		"--pidfile="+filepath.Join(dir, "vswitchd.pid"), "--unixctl="+filepath.Join(dir, "vswitchd.ctl"),
		"--log-file="+filepath.Join(dir, "vswitchd.log"), "--detach", "--no-chdir"); err != nil {
		return result{}, err
	}
	defer killPidfile(filepath.Join(dir, "vswitchd.pid"))
	defer func() {
		if err != nil || c.keep {
			if b, rerr := os.ReadFile(filepath.Join(dir, "vswitchd.log")); rerr == nil {
				fmt.Fprintf(os.Stderr, "ovs-vswitchd log:\n%s\n", b)
			}
		}
	}()
	socks := []string{filepath.Join(dir, "ovs1.sock"), filepath.Join(dir, "ovs2.sock")}
	args := []string{"add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev"}
	for i, s := range socks {
		args = append(args, "--", "add-port", "br0", fmt.Sprintf("vhu%d", i+1), "--", "set", "Interface", fmt.Sprintf("vhu%d", i+1),
			"type=dpdkvhostuserclient", "options:vhost-server-path="+s, fmt.Sprintf("ofport_request=%d", i+1))
	}
	if err := vsctl(true, args...); err != nil {
		return result{}, err
	}
	mgmt := "unix:" + filepath.Join(dir, "br0.mgmt")
	if err := run("ovs-ofctl", "del-flows", mgmt); err != nil {
		return result{}, err
	}
	for _, f := range []string{"in_port=1,actions=output:2", "in_port=2,actions=output:1"} {
		if err := run("ovs-ofctl", "add-flow", mgmt, f); err != nil {
			return result{}, err
		}
	}
	var vdevs []string
	for i, s := range socks {
		vdevs = append(vdevs, fmt.Sprintf("net_virtio_user%d,path=%s,server=1,queues=1,queue_size=%d", i, s, c.queueSize))
	}
	tp, err := startTestpmd(c.fwdCPU, c.sutCPU, vdevs, genArgs(c, flows)...)
	if err != nil {
		return result{}, err
	}
	defer tp.close()
	if err := waitLinks(tp, 2); err != nil {
		return result{}, err
	}
	// testpmd's side of a virtio-user port is up once the socket
	// connects; OVS's side only once the vhost device is ready, and a
	// window measured before that reads zero.
	for i := range socks {
		if err := waitOVSLink(dbsock, fmt.Sprintf("vhu%d", i+1)); err != nil {
			return result{}, err
		}
	}
	var ths []thread
	if b, err := os.ReadFile(filepath.Join(dir, "vswitchd.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			ths = append(ths, thread{name: "PMD", pid: pid, tid: findThread(pid, "pmd")})
		}
	}
	ths = append(ths, genThread("testpmd", tp))
	// pmd-perf-show over the window only, as our PMD's window note.
	clear := func(end bool) {
		if !end {
			exec.Command("ovs-appctl", "-t", filepath.Join(dir, "vswitchd.ctl"), "dpif-netdev/pmd-stats-clear").Run()
		}
	}
	pps, cpu, err := measureHook(c, tp, tp, clear, ths...)
	if err != nil {
		return result{}, err
	}
	if c.keep {
		fmt.Fprintln(os.Stderr, tp.text())
	}
	if r := (result{rxpps: pps}); r.total() == 0 {
		ports, _ := exec.Command("ovs-ofctl", "dump-ports", mgmt).CombinedOutput()
		return result{}, fmt.Errorf("testpmd received nothing through OVS; OVS ports:\n%s\ntestpmd:\n%s", ports, tail(tp.text(), 40))
	}
	out, _ := exec.Command("ovs-appctl", "-t", filepath.Join(dir, "vswitchd.ctl"), "dpif-netdev/pmd-perf-show").CombinedOutput()
	if c.keep {
		fmt.Fprintf(os.Stderr, "%s\n", out)
	}
	notes := ""
	var busyNs float64
	// Busy cycles per packet, as our PMD's busy ns per packet (TSC at
	// DPDK's reported frequency).
	if m := regexp.MustCompile(`Rx packets:\s+\d+\s+\(\d+ Kpps, (\d+) cycles/pkt\)`).FindSubmatch(out); m != nil {
		notes = "OVS PMD " + string(m[1]) + " cycles/pkt busy, "
		if f := regexp.MustCompile(`TSC frequency: (\d+) KHz`).FindSubmatch(logText(dir)); f != nil {
			cyc, _ := strconv.ParseFloat(string(m[1]), 64)
			khz, _ := strconv.ParseFloat(string(f[1]), 64)
			busyNs = cyc / khz * 1e6
			notes = fmt.Sprintf("OVS PMD %.0f ns/pkt busy (%s cycles), ", busyNs, m[1])
		}
		// As our PMD's "busy % of PMD time": below 100 % the PMD found
		// empty polls, and the generator, not OVS, set the rate.
		if b := regexp.MustCompile(`busy iterations:\s+\d+\s+\(\s*([\d.]+) % of used cycles\)`).FindSubmatch(out); b != nil {
			notes += "OVS PMD busy " + string(b[1]) + " % of cycles, "
		}
	}
	return result{rxpps: pps, notes: notes + cpu, busyNs: busyNs}, nil
}

// ovsMem is OVS's EAL memory options.
func ovsMem() string {
	if hugeDir != "" {
		return "-m 1024 --huge-dir " + hugeDir
	}
	return "--no-huge -m 2048 --legacy-mem"
}

func logText(dir string) []byte {
	b, _ := os.ReadFile(filepath.Join(dir, "vswitchd.log"))
	return b
}

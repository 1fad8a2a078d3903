package vhostuser

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/null"
)

// testpmd drives an interactive dpdk-testpmd process through its stdin, so
// a test decides when forwarding starts and stops and reads the forward
// statistics while the virtio-user rings are still up (the switch can
// drain them first, and the counts on both sides can be compared).
type testpmd struct {
	t      testing.TB
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *lockedBuffer
	exited chan struct{}
}

// pmdPortStats is one port's block of testpmd's forward statistics.
type pmdPortStats struct {
	RxPackets, RxDropped, TxPackets, TxDropped uint64
}

// startTestpmd runs dpdk-testpmd -i with the given virtio-user devices
// (each a --vdev argument) and extra application arguments. It uses two
// lcores (the main one, idle at the prompt, and one forwarding core) and
// is killed when the test ends.
func startTestpmd(t testing.TB, vdevs []string, args ...string) *testpmd {
	t.Helper()
	nstest.RequireRoot(t) // DPDK's run directory, /run/dpdk
	bin := nstest.RequireTool(t, "dpdk-testpmd")
	prefix := nstest.Name("vhu")
	t.Cleanup(func() { os.RemoveAll("/run/dpdk/" + prefix) })
	// testpmd prints with stdio, fully buffered on a pipe: stdbuf makes
	// it line-buffered so each command's output arrives before the prompt.
	// DPDK 22.11's virtio-user writes to the vhost-user socket after the
	// backend has gone (server mode, waiting to reconnect) without
	// MSG_NOSIGNAL, and testpmd does not ignore SIGPIPE: the shell sets it
	// ignored, which exec keeps.
	argv := []string{"-c", `trap "" PIPE; exec "$@"`, "testpmd", "stdbuf", "-oL", bin, "-l", "0,1", "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix}
	for _, v := range vdevs {
		argv = append(argv, "--vdev", v)
	}
	argv = append(argv, "--", "-i", "--nb-cores=1", "--txd=256", "--rxd=256")
	argv = append(argv, args...)
	tp := &testpmd{t: t, cmd: exec.Command("sh", argv...), out: &lockedBuffer{}, exited: make(chan struct{})}
	var err error
	if tp.stdin, err = tp.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	tp.cmd.Stdout, tp.cmd.Stderr = tp.out, tp.out
	if err := tp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { tp.cmd.Wait(); close(tp.exited) }()
	t.Cleanup(func() {
		io.WriteString(tp.stdin, "quit\n")
		tp.stdin.Close()
		select {
		case <-tp.exited:
		case <-time.After(3 * time.Second):
			tp.cmd.Process.Kill()
			<-tp.exited
		}
		if t.Failed() {
			os.WriteFile("/tmp/vhu-testpmd.out", []byte(tp.out.String()), 0o644)
			t.Logf("testpmd output:\n%s", tp.out.String())
		}
	})
	return tp
}

// do sends one command and waits (up to 20 s) for marker (by default the
// next prompt); it returns what testpmd printed in between.
func (tp *testpmd) do(command string, marker ...string) string {
	tp.t.Helper()
	start := len(tp.out.String())
	if _, err := io.WriteString(tp.stdin, command+"\n"); err != nil {
		tp.t.Fatalf("testpmd %q: %v", command, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := tp.out.String()[start:]
		m := "testpmd> "
		if len(marker) > 0 {
			m = marker[0]
		}
		if strings.Contains(s, m) {
			return s
		}
		select {
		case <-tp.exited:
			tp.t.Fatalf("testpmd exited during %q", command)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tp.t.Fatalf("testpmd: no prompt after %q", command)
		}
	}
}

// waitPrompt waits for the first prompt (testpmd has set up its ports).
func (tp *testpmd) waitPrompt() {
	tp.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(tp.out.String(), "testpmd> ") {
		select {
		case <-tp.exited:
			tp.t.Fatal("testpmd exited during start-up")
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tp.t.Fatal("testpmd did not start")
		}
	}
}

var (
	fwdBlock = regexp.MustCompile(`Forward statistics for port (\d+)\s+-+\s+RX-packets:\s+(\d+)\s+RX-dropped:\s+(\d+)\s+RX-total:\s+\d+\s+TX-packets:\s+(\d+)\s+TX-dropped:\s+(\d+)`)
)

// stop stops forwarding and returns the forward statistics by port.
func (tp *testpmd) stop() map[int]pmdPortStats {
	tp.t.Helper()
	text := tp.do("stop", "\nDone.")
	st := map[int]pmdPortStats{}
	for _, m := range fwdBlock.FindAllStringSubmatch(text, -1) {
		n := func(i int) uint64 { v, _ := strconv.ParseUint(m[i], 10, 64); return v }
		st[int(n(1))] = pmdPortStats{RxPackets: n(2), RxDropped: n(3), TxPackets: n(4), TxDropped: n(5)}
	}
	if len(st) == 0 {
		tp.t.Fatalf("no forward statistics in testpmd's output:\n%s", text)
	}
	return st
}

// newSwitch is a running datapath with one PMD and no ports.
func newSwitch(t testing.TB) (*datapath.Datapath, *datapath.RuleTable) {
	t.Helper()
	rules := &datapath.RuleTable{}
	dp, err := datapath.New(datapath.Config{NumPMDs: 1, PMDSleepMax: 50, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	rules.Invalidate = dp.InvalidateFlows
	t.Cleanup(func() { dp.Close() })
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	return dp, rules
}

// waitUp waits up to 20 s for a port's rings, showing testpmd's output on
// failure.
func waitUp(t testing.TB, p *Port, tp *testpmd) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !p.LinkUp() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: rings not up; last error %q; dials %d sessions %d connected %v", p.Name(), p.LastError(), p.dials.Load(), p.sessions.Load(), p.connected.Load())
		}
		select {
		case <-tp.exited:
			t.Fatalf("testpmd exited (%v) before %s came up", tp.cmd.ProcessState, p.Name())
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until the switch has drained what is still in flight: the
// value stops changing for 100 ms.
func settle(f func() uint64) uint64 {
	v := f()
	for i := 0; i < 100; i++ {
		time.Sleep(100 * time.Millisecond)
		w := f()
		if w == v {
			return v
		}
		v = w
	}
	return v
}

// TestE2ETestpmdTxonly: testpmd transmits (txonly, 64-byte UDP) on a
// virtio-user port; the switch forwards it to a counting sink. Every frame
// testpmd's driver put in the ring is counted by the switch, and every
// frame the switch received is either in the sink or in a PMD drop
// counter: exact accounting in one direction.
func TestE2ETestpmdTxonly(t *testing.T) {
	dp, rules := newSwitch(t)
	vp, path := newServerPort(t, 1)
	sink := null.New("sink", 1, 1, nil)
	dp.AddPort(1, vp)
	dp.AddPort(2, sink)
	rules.Add(nstest.InPortRule(1, 2))

	tp := startTestpmd(t, []string{"net_virtio_user0,path=" + path + ",queues=1"},
		"--forward-mode=txonly", "--port-topology=loop")
	tp.waitPrompt()
	waitUp(t, vp, tp)
	if want := uint64(1<<featVersion1 | 1<<featNetMrgRxbuf | 1<<featInOrder); vp.Features()&want != want {
		t.Errorf("negotiated features %#x, want at least %#x: testpmd offers them all", vp.Features(), want)
	}
	tp.do("start")
	time.Sleep(1500 * time.Millisecond)
	st := tp.stop()[0]
	rx := settle(func() uint64 { return vp.Stats().RxPackets })
	vs, ss := vp.Stats(), sink.Stats()
	drops := nstest.PMDDrops(dp)
	t.Logf("testpmd port 0 %+v; switch port %+v; sink tx %d; PMD drops %d", st, vs, ss.TxPackets, drops)
	if st.TxPackets < 10000 {
		t.Errorf("testpmd sent only %d frames", st.TxPackets)
	}
	if rx != st.TxPackets {
		t.Errorf("testpmd put %d frames in its transmit ring, the switch took %d", st.TxPackets, rx)
	}
	if vs.RxDrops+vs.RxErrors != 0 {
		t.Errorf("switch port rx drops %d errors %d", vs.RxDrops, vs.RxErrors)
	}
	if ss.TxPackets+drops != rx {
		t.Errorf("switch received %d, the sink got %d and the PMD dropped %d", rx, ss.TxPackets, drops)
	}
}

// TestE2ETestpmdRxonly: an endless source port floods the switch, which
// forwards to testpmd receiving (rxonly) on a virtio-user port. When the
// source is removed and the rings drained, testpmd has counted exactly
// what the switch sent, and the source's count is the switch's sent plus
// its drops (a full guest ring is a counted drop, never a stall).
func TestE2ETestpmdRxonly(t *testing.T) {
	dp, rules := newSwitch(t)
	vp, path := newServerPort(t, 1)
	dp.AddPort(1, vp)
	rules.Add(nstest.InPortRule(2, 1))

	tp := startTestpmd(t, []string{"net_virtio_user0,path=" + path + ",queues=1"},
		"--forward-mode=rxonly", "--port-topology=loop")
	tp.waitPrompt()
	waitUp(t, vp, tp)
	tp.do("start")
	frame := nstest.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0, 2}, net.HardwareAddr{2, 0, 0, 0, 0, 1},
		net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), 1000, 2000)
	src := null.New("source", 1, 1, [][]byte{frame})
	if _, err := dp.AddPort(2, src); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if err := dp.RemovePort(2); err != nil {
		t.Fatal(err)
	}
	settle(func() uint64 { return vp.Stats().TxPackets })
	st := tp.stop()[0]
	vs, ss := vp.Stats(), src.Stats()
	drops := nstest.PMDDrops(dp)
	t.Logf("source rx %d; switch port %+v; PMD drops %d; testpmd port 0 %+v", ss.RxPackets, vs, drops, st)
	if st.RxPackets < 10000 {
		t.Errorf("testpmd received only %d frames", st.RxPackets)
	}
	if st.RxPackets != vs.TxPackets {
		t.Errorf("the switch put %d frames in testpmd's receive ring, testpmd counted %d", vs.TxPackets, st.RxPackets)
	}
	if ss.RxPackets != vs.TxPackets+drops {
		t.Errorf("source sent %d; switch sent %d and dropped %d", ss.RxPackets, vs.TxPackets, drops)
	}
	if vs.TxErrors != 0 {
		t.Errorf("switch port tx errors %d", vs.TxErrors)
	}
}

// pvp is the PVP-style loop the macswap tests use: a Go frontend on port 2
// (the "physical" side: traffic generator and sink) and testpmd in macswap
// mode on port 1 (the "VM" answering every frame back to its sender).
type pvp struct {
	t  testing.TB
	fe *frontend
	// seq is the next sequence number to send.
	seq uint32
}

// roundTrip sends n frames, keeping at most window in flight so that no
// ring can overflow, and checks that each comes back once, in order, with
// its MAC addresses swapped. It returns each frame's round-trip time.
func (l *pvp) roundTrip(n, window int, timeout time.Duration) []time.Duration {
	l.t.Helper()
	tx, rx := l.fe.tx(0), l.fe.rx(0)
	first := l.seq
	sentAt := make([]time.Time, n)
	rtt := make([]time.Duration, 0, n)
	sent, got := 0, 0
	deadline := time.Now().Add(timeout)
	for got < n {
		if time.Now().After(deadline) {
			l.t.Fatalf("%d of %d frames came back (next expected seq %d)", got, n, first+uint32(got))
		}
		for sent < n && sent-got < window {
			if tx.transmit(testFrame(64, l.seq)) == 0 {
				break
			}
			sentAt[sent] = time.Now()
			sent++
			l.seq++
		}
		frames := rx.receive()
		now := time.Now()
		for _, fr := range frames {
			want := first + uint32(got)
			if s := seqOf(fr); s != want {
				l.t.Fatalf("frame %d back with seq %d, want %d", got, s, want)
			}
			if !bytes.Equal(fr[0:6], []byte{2, 0, 0, 0, 0, 1}) || !bytes.Equal(fr[6:12], []byte{2, 0, 0, 0, 0, 2}) {
				l.t.Fatalf("frame %d back with MACs %x %x: not swapped", got, fr[0:6], fr[6:12])
			}
			rtt = append(rtt, now.Sub(sentAt[got]))
			got++
		}
		if len(frames) == 0 {
			// Wait like an interrupt-driven guest: on the ring's call
			// eventfd (a Go sleep would round up to a millisecond).
			if readable(l.t, rx.call, 1) {
				rx.calls()
			}
		}
	}
	return rtt
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(p*float64(len(s)-1))]
}

// TestE2ETestpmdMacswap: PVP. A Go frontend sends sequenced frames into
// the switch, which hands them to testpmd (macswap) on a virtio-user port;
// testpmd answers each with its MACs swapped, and the switch brings it
// back: every frame returns once, in order, with no loss. It also reports
// the one-frame-in-flight round-trip time (the frame crosses the switch
// twice) at tx-flush-interval 0 and 50 µs.
func TestE2ETestpmdMacswap(t *testing.T) {
	dp, rules := newSwitch(t)
	vp, vmPath := newServerPort(t, 1)
	gp, genPath := newServerPort(t, 1)
	dp.AddPort(1, vp)
	dp.AddPort(2, gp)
	rules.Add(nstest.InPortRule(1, 2))
	rules.Add(nstest.InPortRule(2, 1))
	fe := dialFrontend(t, genPath, feCfg{})
	fe.setup()
	waitFor(t, "generator port up", gp.LinkUp)

	tp := startTestpmd(t, []string{"net_virtio_user0,path=" + vmPath + ",queues=1"},
		"--forward-mode=macswap", "--port-topology=loop")
	tp.waitPrompt()
	waitUp(t, vp, tp)
	tp.do("start")
	loop := &pvp{t: t, fe: fe}
	const n = 20000
	loop.roundTrip(n, 64, 20*time.Second)
	// Round-trip time with one frame in flight, at tx-flush-interval 0
	// and 50 µs: a port that has been quiet sends at once either way.
	for _, flush := range []int{0, 50} {
		if err := dp.SetTxFlushInterval(flush); err != nil {
			t.Fatal(err)
		}
		rtt := loop.roundTrip(2000, 1, 20*time.Second)
		t.Logf("PVP round trip, one frame in flight, tx-flush-interval %d µs: p50 %v p99 %v (2 cores shared by testpmd, the PMD and this generator)",
			flush, percentile(rtt, 0.5), percentile(rtt, 0.99))
	}
	st := tp.stop()[0]
	t.Logf("testpmd port 0 %+v; VM port %+v; generator port %+v", st, vp.Stats(), gp.Stats())
	if st.RxPackets != n+4000 || st.TxPackets != n+4000 {
		t.Errorf("testpmd received %d and sent %d, want %d", st.RxPackets, st.TxPackets, n+4000)
	}
	if d := nstest.PMDDrops(dp); d != 0 {
		t.Errorf("PMD dropped %d", d)
	}
}

// TestE2ETestpmdClientMode: testpmd's virtio-user listens (server=1) and
// the switch's port connects to it (client mode). Frames go round the PVP
// loop; then the switch's port is closed and a new client-mode port takes
// its place on the same socket (a switch restart) — twice — and each time
// testpmd, which kept running, accepts the new connection and the loop
// carries every frame again.
func TestE2ETestpmdClientMode(t *testing.T) {
	dp, rules := newSwitch(t)
	gp, genPath := newServerPort(t, 1)
	dp.AddPort(2, gp)
	rules.Add(nstest.InPortRule(1, 2))
	rules.Add(nstest.InPortRule(2, 1))
	fe := dialFrontend(t, genPath, feCfg{})
	fe.setup()
	waitFor(t, "generator port up", gp.LinkUp)

	vmPath := sockPath(t)
	newClient := func() *Port {
		p, err := New("vm", Options{SocketPath: vmPath, Client: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dp.AddPort(1, p); err != nil {
			p.Close()
			t.Fatal(err)
		}
		return p
	}
	// The port exists first and keeps dialling: testpmd's virtio-user in
	// server mode waits for its backend during start-up.
	vp := newClient()
	tp := startTestpmd(t, []string{"net_virtio_user0,path=" + vmPath + ",server=1,queues=1"},
		"--forward-mode=macswap", "--port-topology=loop")
	tp.waitPrompt()
	waitUp(t, vp, tp)
	tp.do("start")
	loop := &pvp{t: t, fe: fe}
	loop.roundTrip(2000, 64, 20*time.Second)
	for restart := 1; restart <= 2; restart++ {
		dials := vp.dials.Load()
		if err := dp.RemovePort(1); err != nil {
			t.Fatal(err)
		}
		vp = newClient()
		waitUp(t, vp, tp)
		loop.roundTrip(2000, 64, 20*time.Second)
		t.Logf("restart %d: traffic resumed (the old port dialled %d times, the new one %d)", restart, dials, vp.dials.Load())
	}
	st := tp.stop()[0]
	t.Logf("testpmd port 0 %+v", st)
	if want := uint64(3 * 2000); st.RxPackets != want || st.TxPackets != want {
		t.Errorf("testpmd received %d and sent %d, want %d", st.RxPackets, st.TxPackets, want)
	}
	if vp.sessions.Load() != 1 {
		t.Errorf("new port served %d sessions", vp.sessions.Load())
	}
}

package vhostuser

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
	"vswitch/internal/nstest"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestE2ETestpmd: one dpdk-testpmd process with two virtio-user ports, each
// connected to a vhost-user port of the switch (the switch listens). In
// flowgen mode testpmd sends generated UDP flows on both ports and counts
// (then discards) what it receives, so traffic in both directions through
// the switch shows in testpmd's port counters and in the switch's. Frames
// sent before the other port's rings are up are dropped and counted by the
// switch; the generator keeps going, so that startup race cannot stop the
// test's traffic. testpmd busy-polls a core: it runs for a few seconds only.
func TestE2ETestpmd(t *testing.T) {
	bin, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		t.Fatal("dpdk-testpmd not installed (apt-get install dpdk): ", err)
	}
	pa, pathA := newServerPort(t, 1)
	pb, pathB := newServerPort(t, 1)
	dp := nstest.CrossConnect(t, 1, pa, pb)

	prefix := fmt.Sprintf("vhu%d", time.Now().UnixNano()%1e9)
	t.Cleanup(func() { os.RemoveAll("/run/dpdk/" + prefix) })
	cmd := exec.Command(bin, "-l", "0,1", "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix,
		"--vdev", "net_virtio_user0,path="+pathA+",queues=1",
		"--vdev", "net_virtio_user1,path="+pathB+",queues=1",
		"--", "--forward-mode=flowgen", "--stats-period=1", "--nb-cores=1", "--txd=256", "--rxd=256")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(2 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})

	deadline := time.Now().Add(20 * time.Second)
	for !(pa.LinkUp() && pb.LinkUp()) {
		if time.Now().After(deadline) {
			t.Fatalf("testpmd did not bring the rings up; port errors %q %q; output:\n%s", pa.LastError(), pb.LastError(), out.String())
		}
		select {
		case <-exited:
			t.Fatalf("testpmd exited:\n%s", out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Non-interactive testpmd starts generating at once; let it run for
	// 2 s, then stop it: SIGINT prints the final forward statistics.
	time.Sleep(2 * time.Second)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("testpmd did not stop on SIGINT")
	}
	text := out.String()
	rx := regexp.MustCompile(`RX-packets:\s+(\d+)`).FindAllStringSubmatch(text, -1)
	if len(rx) < 3 {
		t.Fatalf("no port stats in testpmd's output:\n%s", text)
	}
	// The final block: port 0, port 1, then the accumulated total.
	rx = rx[len(rx)-3 : len(rx)-1]
	for i, m := range rx {
		n, _ := strconv.ParseUint(m[1], 10, 64)
		if n < 1000 {
			t.Errorf("testpmd port %d received %d packets across the switch", i, n)
		}
		t.Logf("testpmd port %d RX-packets %d", i, n)
	}
	sa, sb := pa.Stats(), pb.Stats()
	t.Logf("switch port A %+v", sa)
	t.Logf("switch port B %+v", sb)
	t.Logf("PMD %+v", dp.PMDStats())
	if sa.RxPackets < 1000 || sb.RxPackets < 1000 || sa.TxPackets < 1000 || sb.TxPackets < 1000 {
		t.Errorf("switch ports moved too little: A %+v B %+v", sa, sb)
	}
	if sa.RxErrors+sb.RxErrors+sa.TxErrors+sb.TxErrors != 0 {
		t.Errorf("errors: A %+v B %+v", sa, sb)
	}
	if t.Failed() {
		t.Logf("testpmd output:\n%s", text)
	}
}

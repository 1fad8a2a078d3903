package afxdp

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

func readSysfs(t *testing.T, ifname, file string) string {
	t.Helper()
	b, err := os.ReadFile(sysfsPath(ifname, file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestE2EBusyPollSettings: a busy-polling port sets the device's NAPI
// deferral while it is open and puts the old values back on Close.
func TestE2EBusyPollSettings(t *testing.T) {
	port, _ := vethPair(t)
	var before []string
	for _, s := range napiSysfs {
		before = append(before, readSysfs(t, port, s.file))
	}
	p, err := New(port, Options{BusyPoll: 50 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range napiSysfs {
		if got := readSysfs(t, port, s.file); got != s.value {
			p.Close()
			t.Fatalf("%s = %q while busy polling, want %q", s.file, got, s.value)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for i, s := range napiSysfs {
		if got := readSysfs(t, port, s.file); got != before[i] {
			t.Errorf("%s = %q after Close, want %q back", s.file, got, before[i])
		}
	}
}

// TestE2EBusyPollForwards: traffic crosses busy-polling ports (the
// datapath's PMD sleeps by default, so the NAPI watchdog runs what it
// leaves behind).
func TestE2EBusyPollForwards(t *testing.T) {
	s := newSwitch(t, Options{BusyPoll: 50 * time.Microsecond})
	nstest.Ping(t, s.A.NS, s.B.IP)
	nstest.Ping(t, s.B.NS, s.A.IP)
}

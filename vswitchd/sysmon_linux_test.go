package vswitchd

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

func TestSlowSysmonSetsTheMonitorThreadsSlack(t *testing.T) {
	nstest.RequireRoot(t)
	tid, err := SlowSysmon()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(SysmonSlackNs) {
		t.Fatalf("thread %d timer slack %s ns, want %d", tid, got, SysmonSlackNs)
	}
	// The thread is the runtime's monitor: it sleeps in nanosleep, which
	// no other thread of a Go program does for long.
	if tid == os.Getpid() {
		t.Fatalf("picked the main thread")
	}
}

package afxdp

import (
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Busy polling (Options.BusyPoll): the socket gets SO_PREFER_BUSY_POLL,
// SO_BUSY_POLL and SO_BUSY_POLL_BUDGET, and Recv, when its rx ring is empty,
// makes a non-blocking recvfrom, in which the kernel runs the device's NAPI
// poll (for a veth: the peer's transmit queue, the XDP program and the
// redirect to this socket) on the PMD's own CPU. The device's
// napi_defer_hard_irqs and gro_flush_timeout are set while the port is
// open, so that the kernel leaves the NAPI to the poller instead of running
// it in the sender's softirq (on veth: the transmitting CPU), with the
// timeout as the watchdog that runs it if the poller stops. The old values
// are put back on Close.
//
// That moves the receive work off the sender's CPU and spares the wake-up
// of the PMD, but only a PMD that polls benefits: a sleeping one leaves
// frames to the watchdog timeout. So it is an option for busy-polling PMDs
// (pmd-sleep-max 0), off by default.

// napiSysfs are the device settings busy polling needs, with the values
// set while the port is open.
var napiSysfs = []struct{ file, value string }{
	{"napi_defer_hard_irqs", "2"},
	{"gro_flush_timeout", "200000"}, // ns: the watchdog
}

func sysfsPath(ifname, file string) string { return "/sys/class/net/" + ifname + "/" + file }

// setNAPIDefer sets napiSysfs on ifname and returns the old values.
func setNAPIDefer(ifname string) (old []string, err error) {
	for _, s := range napiSysfs {
		b, err := os.ReadFile(sysfsPath(ifname, s.file))
		if err != nil {
			restoreNAPIDefer(ifname, old)
			return nil, fmt.Errorf("busy poll: %w", err)
		}
		if err := os.WriteFile(sysfsPath(ifname, s.file), []byte(s.value), 0); err != nil {
			restoreNAPIDefer(ifname, old)
			return nil, fmt.Errorf("busy poll: %w", err)
		}
		old = append(old, strings.TrimSpace(string(b)))
	}
	return old, nil
}

// restoreNAPIDefer puts back what setNAPIDefer found (best effort: the
// device may be gone).
func restoreNAPIDefer(ifname string, old []string) {
	for i, v := range old {
		_ = os.WriteFile(sysfsPath(ifname, napiSysfs[i].file), []byte(v), 0)
	}
}

// setBusyPoll sets the socket's busy-poll options.
func setBusyPoll(fd int, d time.Duration, budget int) error {
	us := max(int(d/time.Microsecond), 1)
	for _, o := range []struct {
		name  string
		opt   int
		value int
	}{{"SO_PREFER_BUSY_POLL", unix.SO_PREFER_BUSY_POLL, 1}, {"SO_BUSY_POLL", unix.SO_BUSY_POLL, us},
		{"SO_BUSY_POLL_BUDGET", unix.SO_BUSY_POLL_BUDGET, budget}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, o.opt, o.value); err != nil {
			return fmt.Errorf("%s: %w", o.name, err)
		}
	}
	return nil
}

// defaultBusyPollBudget is one PMD batch.
const defaultBusyPollBudget = packet.BatchSize

package e2e

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// addPortsArgs is one vsctl command line adding n internal ports named
// stem0..stem(n-1) to bridge br, chained as one transaction.
func addPortsArgs(br, stem string, n int) []string {
	var args []string
	for i := range n {
		if i > 0 {
			args = append(args, "--")
		}
		args = append(args, "add-port", br, fmt.Sprintf("%s%d", stem, i), "--", "set", "Interface", fmt.Sprintf("%s%d", stem, i), "type=internal")
	}
	return args
}

// TestE2EPortLimitRefusesRequest: one vsctl request adding more ports
// than the default per-request limit (1,024) is refused with an error
// naming other_config:max-ports-per-request, and creates nothing.
func TestE2EPortLimitRefusesRequest(t *testing.T) {
	d := newDaemon(t)
	d.start()
	br := nstest.Name("hlb")
	d.vsctl("add-br", br)
	stem := nstest.Name("h")
	_, errOut, code := d.vsctlRaw(addPortsArgs(br, stem, 1025)...)
	if code == 0 || !strings.Contains(errOut, "adds 1025 ports") || !strings.Contains(errOut, "max-ports-per-request=1024") {
		t.Fatalf("1,025 ports in one request: exit %d, %q", code, errOut)
	}
	if got := d.vsctl("list-ports", br); got != "" {
		t.Fatalf("list-ports after the refused request: %q", got)
	}
	for _, i := range []int{0, 1024} {
		if _, err := net.InterfaceByName(fmt.Sprintf("%s%d", stem, i)); err == nil {
			t.Fatalf("interface %s%d exists after the refused request", stem, i)
		}
	}
}

// TestE2EShowDuringBigTransaction: while one request adds 300 internal
// ports (about 4 s, 2 GB of kernel memory here), show and list-ports
// answer: the test waits for the request to be under way (its first
// interface exists), asks, and checks the answer came before the request
// finished (its last interface not yet there, its vsctl still running).
func TestE2EShowDuringBigTransaction(t *testing.T) {
	const n = 300
	d := newDaemon(t)
	d.start()
	br := nstest.Name("hlb")
	d.vsctl("add-br", br)
	stem := nstest.Name("h")
	type result struct {
		errOut string
		code   int
	}
	big := make(chan result, 1)
	go func() {
		_, errOut, code := d.vsctlRaw(addPortsArgs(br, stem, n)...)
		big <- result{errOut, code}
	}()
	first, last := stem+"0", fmt.Sprintf("%s%d", stem, n-1)
	nstest.WaitFor(t, 20*time.Second, "the big request's first interface", func() bool {
		_, err := net.InterfaceByName(first)
		return err == nil
	})
	show := d.vsctl("show")
	if !strings.Contains(show, "Bridge "+br) {
		t.Fatalf("show during the request:\n%s", show)
	}
	d.vsctl("list-ports", br)
	if _, err := net.InterfaceByName(last); err == nil {
		t.Fatalf("the request's last interface %s existed when show answered: the request was not running alongside", last)
	}
	select {
	case r := <-big:
		t.Fatalf("the request finished (exit %d, %s) before show answered", r.code, r.errOut)
	default:
	}
	r := <-big
	if r.code != 0 {
		t.Fatalf("adding %d ports: exit %d: %s", n, r.code, r.errOut)
	}
	if got := strings.Count(d.vsctl("list-ports", br), "\n"); got != n {
		t.Fatalf("list-ports after the request: %d ports, want %d", got, n)
	}
}

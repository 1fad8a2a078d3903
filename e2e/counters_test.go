package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// isCounterSample reports whether a sample of the exposition is part of a
// counter or histogram the switch exports (monotonic for the process).
func isCounterSample(key string) bool {
	name, _, _ := strings.Cut(key, "{")
	return strings.HasPrefix(name, "vswitch_") && (strings.HasSuffix(name, "_total") ||
		strings.HasSuffix(name, "_count") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_bucket"))
}

// checkMonotonic fails unless every counter sample of before is in after
// with a value at least as large, except those whose key holds one of
// mayGo (series of objects that may be absent at the second scrape).
func checkMonotonic(t *testing.T, what string, before, after map[string]float64, mayGo ...string) {
	t.Helper()
	var bad []string
	n := 0
outer:
	for k, v := range before {
		if !isCounterSample(k) {
			continue
		}
		for _, s := range mayGo {
			if strings.Contains(k, s) {
				continue outer
			}
		}
		n++
		w, ok := after[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: gone (was %v)", k, v))
		case w < v:
			bad = append(bad, fmt.Sprintf("%s: %v -> %v", k, v, w))
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("%s: %d of %d counter samples went down or away:\n%s", what, len(bad), n, strings.Join(bad, "\n"))
	}
	t.Logf("%s: %d counter samples, none went down", what, n)
}

// pingUntil waits (bounded) until a ping from a to b goes through, then
// sends the five of nstest.Ping.
func pingUntil(t *testing.T, d *daemon, a, b *nstest.Host) {
	t.Helper()
	nstest.WaitFor(t, 15*time.Second, "ping across the switch", func() bool {
		_, err := a.NS.Output("ping", "-c", "1", "-W", "1", b.IP)
		return err == nil
	})
	nstest.Ping(t, a.NS, b.IP)
}

// TestCountersMonotonic: the counters /metrics exports do not go down
// without a restart when the daemon replaces the objects they come from:
// a datapath rebuild (a Bridge's mac-aging-time, the switch's n-pmd) and a
// port reopened after its veth was deleted and created again. Traffic
// before and after each makes the counters non-zero on both sides.
func TestCountersMonotonic(t *testing.T) {
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	d.start()
	d.vsctl("add-br", "br0")
	d.vsctl("add-port", "br0", a.Port, "--", "type=afpacket")
	d.vsctl("add-port", "br0", b.Port, "--", "type=afpacket")
	pingUntil(t, d, a, b)
	rx := fmt.Sprintf(`vswitch_port_rx_packets_total{bridge="br0",port=%q}`, a.Port)
	before := d.scrape()
	if before[rx] == 0 {
		t.Fatalf("%s is 0 after pings", rx)
	}

	for _, step := range [][]string{
		{"set", "Bridge", "br0", "other_config:mac-aging-time=120"},
		{"set", "Open_vSwitch", ".", "other_config:n-pmd=2"},
		{"set", "Open_vSwitch", ".", "other_config:n-pmd=1"},
	} {
		d.vsctl(step...)
		pingUntil(t, d, a, b)
		after := d.scrape()
		// Lowering n-pmd takes PMD 1 away; its series come back, from
		// where they were, if it returns.
		checkMonotonic(t, strings.Join(step, " "), before, after, `pmd="1"`)
		if after[rx] <= before[rx] {
			t.Fatalf("%s: %s did not grow with the pings: %v -> %v", strings.Join(step, " "), rx, before[rx], after[rx])
		}
		before = after
	}

	// The veth under port a goes and comes back: the port reopens.
	nstest.Run(t, "ip", "link", "del", a.Port)
	nstest.WaitFor(t, 5*time.Second, "port "+a.Port+" to stop", func() bool {
		return strings.Contains(portBlock(d.vsctl("show"), a.Port), "not running")
	})
	mid := d.scrape()
	checkMonotonic(t, "port stopped", before, mid, a.Port)
	recreateHost(t, a)
	pingUntil(t, d, a, b)
	after := d.scrape()
	checkMonotonic(t, "veth recreated", before, after)
	checkMonotonic(t, "veth recreated (after the stop)", mid, after)
	if after[rx] <= before[rx] {
		t.Fatalf("%s did not grow with the pings after the port reopened: %v -> %v", rx, before[rx], after[rx])
	}

	// Deleting the port drops its series; added again it starts afresh.
	d.vsctl("del-port", "br0", a.Port)
	if got := d.scrape(); got[rx] != 0 {
		t.Fatalf("%s still exported after del-port: %v", rx, got[rx])
	}
}

package e2e

import (
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestOVSDBReaddPort: the real ovs-vsctl deletes a veth port and adds it
// back at once, three times for each driver: the old port's sockets are
// still closing in the background (and the kernel still holds its queue)
// when the new one opens on the same interface, which waits for the queue
// rather than fall back to another driver, and traffic passes each time.
func TestOVSDBReaddPort(t *testing.T) {
	srv, d := ovsdbDaemon(t)
	a, b := nstest.TwoHosts(t)
	br := nstest.Name("brra")
	srv.vsctl("add-br", br, "--", "set", "bridge", br, "datapath_type=netdev")
	srv.vsctl("add-port", br, a.Port, "--", "add-port", br, b.Port)
	nstest.Ping(t, a.NS, b.IP)
	for _, typ := range []string{"", "afpacket"} {
		for i := 0; i < 3; i++ {
			srv.vsctl("del-port", br, b.Port)
			args := []string{"add-port", br, b.Port}
			if typ != "" {
				args = append(args, "--", "set", "Interface", b.Port, "type="+typ)
			}
			srv.vsctl(args...)
			nstest.Ping(t, a.NS, b.IP)
			nstest.Ping(t, b.NS, a.IP)
		}
	}
	if log := d.log.String(); strings.Count(log, "driver=afpacket") != 3 {
		t.Errorf("%d ports opened on AF_PACKET, want the 3 of type afpacket (no automatic one):\n%s", strings.Count(log, "driver=afpacket"), log)
	}
}

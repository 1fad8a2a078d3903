package ofproto

import (
	"bufio"
	"compress/gzip"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
)

// TestOVNPipeUpcallAllocs: a whole upcall through issue 27's OVN-shaped
// pipeline on a PMD (miss, Bridge.Upcall's translation through 31
// tables, megaflow install, output) allocates once: the megaflow. Its
// ~30 refs are a list the PMD shares with the other megaflows of the
// same logical path, its table counters one lookup path, its mask the
// classifier's. Every packet must come out of port 2, as in
// bench/ovnpipe.
func TestOVNPipeUpcallAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 10,007 flows")
	}
	const n = 1024
	dp, br := benchBridge(t, 4*n)
	f, err := os.Open("xlate/testdata/ovnpipe-flows.txt.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for xid := uint32(1); sc.Scan(); xid++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		fm, err := ofptext.ParseFlow(line, ofptext.Add)
		if err != nil {
			t.Fatal(err)
		}
		if err := br.Handle(nil, xid, fm); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
	}
	// Port 1's MACs; every other packet inside the conjunction's address
	// sets (198.18.1.1-100 -> 198.18.2.1-100), the others outside.
	src, dst := net.HardwareAddr{2, 0, 0xc6, 0x12, 0, 1}, net.HardwareAddr{2, 0, 0xc6, 0x12, 0, 2}
	frames := make([][]byte, n)
	for i := range frames {
		j := i / 2
		sip, dip := net.IPv4(198, 18, 1, byte(1+j%100)), net.IPv4(198, 18, 2, byte(1+j/100%100))
		if i%2 == 1 {
			sip, dip = net.IPv4(198, 18, 4, byte(j)), net.IPv4(198, 18, 5, byte(j>>8))
		}
		frames[i] = nstest.UDPFrame(dst, src, sip, dip, uint16(1024+i), 53)
	}
	in, out := dp.Port(1).Dev.(*ring.Port), dp.Port(2).Dev.(*ring.Port)
	pmd := dp.PMDs()[0]
	sent, i := 0, 0
	send := func() {
		in.Inject(0, frames[i%n])
		i++
		pmd.PollOnce()
		sent += out.Discard(0)
	}
	for range n {
		send()
	}
	if sent != n || dp.FlowCount() != n {
		t.Fatalf("%d of %d packets out of port 2, %d megaflows", sent, n, dp.FlowCount())
	}
	dp.InvalidateFlows()
	allocs := testing.AllocsPerRun(n-1, send)
	if allocs != 1 {
		t.Errorf("%v allocations per upcall, want 1", allocs)
	}
	pmd.PollOnce() // idle: publishes the counters
	if st := dp.PMDStats()[0]; sent != 2*n || st.Misses != 2*n {
		t.Fatalf("%d packets out of port 2, %d upcalls, want %d of each", sent, st.Misses, 2*n)
	}
}

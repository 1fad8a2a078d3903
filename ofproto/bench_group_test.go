package ofproto

import (
	"net"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// BenchmarkForwardGroup: one manual-mode PMD forwarding 64-byte UDP from
// port 1 to port 2 through a plain output, a SELECT group (three weighted
// buckets, all to port 2) and an INDIRECT group, over 256 flows that differ
// only in their Ethernet source (the select hash spreads them over the
// buckets). Every megaflow is installed before the measurement, so the
// numbers compare the datapath's cost of a group output (which the
// translation has already resolved to the bucket's actions) with a plain
// one: they should be the same. One op is one packet.
func BenchmarkForwardGroup(b *testing.B) {
	for _, mode := range []string{"output", "select", "indirect"} {
		b.Run(mode, func(b *testing.B) { benchForwardGroup(b, mode) })
	}
}

func benchForwardGroup(b *testing.B, mode string) {
	const flows = 256
	dp, br := benchBridge(b, 4*flows)
	act := ofpwire.Action(&ofpwire.ActionOutput{Port: 2})
	switch mode {
	case "select":
		gm := &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeSelect, GroupID: 1}
		for w := uint16(1); w <= 3; w++ {
			gm.Buckets = append(gm.Buckets, ofpwire.Bucket{Weight: w, WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny,
				Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}})
		}
		if err := br.Apply(gm); err != nil {
			b.Fatal(err)
		}
		act = &ofpwire.ActionGroup{Group: 1}
	case "indirect":
		if err := br.Apply(&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeIndirect, GroupID: 1,
			Buckets: []ofpwire.Bucket{{WatchPort: ofpwire.PortAny, WatchGroup: ofpwire.GroupAny,
				Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}}}}); err != nil {
			b.Fatal(err)
		}
		act = &ofpwire.ActionGroup{Group: 1}
	}
	if err := br.Apply(outputFlow(1, act)); err != nil {
		b.Fatal(err)
	}
	in, out := dp.Port(1).Dev.(*ring.Port), dp.Port(2).Dev.(*ring.Port)
	batch := make([][]byte, 32)
	frames := make([][]byte, flows)
	for i := range frames {
		src := net.HardwareAddr{2, 0, 0, 0, byte(i >> 8), byte(i)}
		frames[i] = nstest.UDPFrame(net.HardwareAddr{2, 0, 0, 0, 0xff, 0xff}, src,
			net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), 1000, 2000)
	}
	pmd := dp.PMDs()[0]
	run := func(n int) {
		for done, i := 0, 0; done < n; i++ {
			for j := range batch {
				batch[j] = frames[(i*len(batch)+j)%flows]
			}
			in.Inject(0, batch...)
			done += pmd.PollOnce()
			out.Discard(0)
		}
	}
	run(20 * flows)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
}

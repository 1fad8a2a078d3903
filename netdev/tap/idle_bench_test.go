package tap

import (
	"fmt"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// BenchmarkForwardBesideIdleTap: one manual PMD forwards 64-byte frames
// between two ring ports while it also polls a real, idle tap device (as
// every bridge's own interface is polled). Each poll of the tap is a read
// syscall unless PollBackoff lets it skip; one op is one packet.
func BenchmarkForwardBesideIdleTap(b *testing.B) {
	nstest.RequireRoot(b)
	for _, backoff := range []int{-1, 0, 64} {
		name := fmt.Sprintf("backoff=%d", backoff)
		if backoff < 0 {
			name = "no-tap"
		}
		b.Run(name, func(b *testing.B) {
			rules := &datapath.RuleTable{}
			dp, err := datapath.New(datapath.Config{Manual: true, Upcall: rules})
			if err != nil {
				b.Fatal(err)
			}
			defer dp.Close()
			in, out := ring.New("in", 1, 1, 256), ring.New("out", 1, 1, 256)
			dp.AddPort(1, in)
			dp.AddPort(2, out)
			if backoff >= 0 {
				tp, err := New(nstest.Name("vstb"), Options{Down: true, PollBackoff: backoff})
				if err != nil {
					b.Fatal(err)
				}
				dp.AddPort(datapath.LocalPort, tp)
			}
			var r datapath.Rule
			r.Match.Key.InPort, r.Match.Mask.InPort = 1, ^uint32(0)
			r.Actions = actions.List{actions.OutputTo(2)}
			rules.Add(r)
			frames := make([][]byte, 32)
			for i := range frames {
				frames[i] = tcpFrame(b, 10, uint32(i))[:64]
			}
			pmd := dp.PMDs()[0]
			run := func(n int) {
				for done := 0; done < n; {
					in.Inject(0, frames...)
					done += pmd.PollOnce()
					out.Discard(0)
				}
			}
			run(10000)
			b.ReportAllocs()
			b.ResetTimer()
			run(b.N)
			b.StopTimer()
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N), "ns/pkt")
		})
	}
}

package datapath

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// ovnShapedUpcaller answers like an OVN pipeline's translation: output to
// port 2 under an exact address-pair mask, with 33 refs (issue 27's
// pipeline lists 32 entries and one lookup path) out of one of four
// logical paths, picked by the source address.
type ovnShapedUpcaller struct {
	paths [4][33]StatsSink
}

func newOVNShapedUpcaller() *ovnShapedUpcaller {
	u := &ovnShapedUpcaller{}
	shared := make([]countingSink, 30) // the stages every path goes through
	for i := range u.paths {
		for j := range u.paths[i] {
			if j < len(shared) {
				u.paths[i][j] = &shared[j]
			} else {
				u.paths[i][j] = &countingSink{}
			}
		}
	}
	return u
}

func (u *ovnShapedUpcaller) Upcall(k *flow.Key, res *UpcallResult) error {
	res.Actions = append(res.Actions[:0], actions.OutputTo(2))
	res.Mask = flow.Mask{InPort: ^uint32(0), EthType: 0xffff, NwProto: 0xff,
		IPv4Src: ^uint32(0), IPv4Dst: ^uint32(0)}
	res.NoInstall = false
	res.Refs = append(res.Refs[:0], u.paths[k.IPv4Src%4][:]...)
	return nil
}

// upcallRig is a manual-mode datapath with that upcaller between ring
// ports 1 and 2, and n frames of distinct address pairs: each one sent
// after an invalidation is one upcall and one megaflow install.
func upcallRig(tb testing.TB, n int) (dp *Datapath, send func(i int), u *ovnShapedUpcaller) {
	u = newOVNShapedUpcaller()
	dp, err := New(Config{Manual: true, Upcall: u})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dp.Close() })
	in, out := ring.New("in", 1, 1, 256), ring.New("out", 1, 1, 256)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	frames := make([][]byte, n)
	for i := range frames {
		frames[i] = udpFrame(0xc6120000+uint32(i), 0xc6130000+uint32(i/7), 1000, 2000, uint32(i))
	}
	pmd := dp.PMDs()[0]
	send = func(i int) {
		in.Inject(0, frames[i%n])
		pmd.PollOnce()
		out.Discard(0)
	}
	return dp, send, u
}

// BenchmarkUpcallInstall: one upcall through a PMD whose Upcaller costs
// next to nothing, so what is measured is the rest: the miss, the
// megaflow install (allocation, shared refs, classifier insert), the
// execution, and, amortized, the invalidation every 8192 flows that
// pushes their statistics and empties the caches, as bench/ovnpipe's
// upcall pass does. One op is one upcall; allocs/op and B/op are one
// install's.
func BenchmarkUpcallInstall(b *testing.B) {
	const n = 8192
	dp, send, _ := upcallRig(b, n)
	for i := range n {
		send(i)
	}
	dp.InvalidateFlows()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%n == 0 && i > 0 {
			dp.InvalidateFlows()
		}
		send(i)
	}
	b.StopTimer()
	if st := dp.PMDStats()[0]; st.Misses < uint64(b.N) {
		b.Fatalf("%d upcalls for %d packets", st.Misses, b.N)
	}
}

// TestUpcallInstallAllocs: past the first pass, installing a megaflow
// allocates once (the megaflow with its actions): its refs are a list the
// PMD shares between the megaflows whose upcalls listed the same sinks,
// and the classifier reuses the capacity an invalidation emptied. The
// traffic still reaches every sink exactly.
func TestUpcallInstallAllocs(t *testing.T) {
	const n = 2048
	dp, send, u := upcallRig(t, n)
	for i := range n {
		send(i)
	}
	dp.InvalidateFlows()
	i := 0
	allocs := testing.AllocsPerRun(n-1, func() { send(i); i++ })
	if allocs != 1 {
		t.Errorf("%v allocations per upcall, want 1", allocs)
	}
	if got := dp.FlowCount(); got != n {
		t.Fatalf("%d megaflows, want %d", got, n)
	}
	// Every packet so far went through one of the four paths: the shared
	// stages saw all 2n, each path's own sinks a quarter.
	dp.PushStats(time.Now())
	for j, s := range u.paths[0] {
		want := uint64(2 * n / 4)
		if j < 30 {
			want = 2 * n
		}
		if got := s.(*countingSink).packets.Load(); got != want {
			t.Fatalf("sink %d: %d packets, want %d", j, got, want)
		}
	}
}

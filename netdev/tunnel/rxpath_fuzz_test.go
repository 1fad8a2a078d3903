package tunnel

import (
	"encoding/binary"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/null"
)

// fedPort is a tunnel port whose socket is replaced by a queue of
// datagrams: its Recv hands each to handOn, the per-datagram step of the
// socket receive path (Recv, after recvmmsg and parseControl), so a
// datapath polls it like any port. It does not embed the Port, whose
// socket-facing methods (RxFD, ArmRx, TxKicks) the datapath would call.
type fedPort struct {
	p     *Port
	mu    sync.Mutex
	queue [][]byte
	fed   uint64
}

func (f *fedPort) Name() string        { return f.p.name }
func (f *fedPort) NumRxQueues() int    { return 1 }
func (f *fedPort) NumTxQueues() int    { return 1 }
func (f *fedPort) MTU() int            { return f.p.mtu }
func (f *fedPort) LinkUp() bool        { return true }
func (f *fedPort) Stats() netdev.Stats { return f.p.Stats() }
func (f *fedPort) Close() error        { return nil }
func (f *fedPort) Send(q int, b *packet.Batch) int {
	f.p.ctr[0].TxDrops.Add(uint64(b.N))
	return 0
}

func (f *fedPort) feed(ds [][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, ds...)
	f.fed += uint64(len(ds))
}

func (f *fedPort) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var t rxTally
	for len(f.queue) > 0 && !b.Full() {
		pkt := pool.Get()
		if pkt == nil {
			break
		}
		d := f.queue[0]
		f.queue = f.queue[1:]
		if pkt.SetData(d) != len(d) { // recvmmsg's MSG_TRUNC
			f.p.causes[q].n[CauseBadHeader].Add(1)
			t.drops++
			pkt.Free()
			continue
		}
		tmpl := flow.Tunnel{Src: fuzzRemote, Dst: f.p.local, TTL: 64}
		f.p.handOn(&f.p.causes[q], pkt, &tmpl, b, &t)
	}
	f.p.ctr[q].CountRx(t.added, t.bytes, t.drops)
	return t.added
}

var fuzzRemote = [16]byte{10: 0xff, 11: 0xff, 198, 18, 0, 2}

var _ netdev.Netdev = (*fedPort)(nil)

// splitDatagrams cuts fuzz input into datagrams, each a 2-byte length
// and its bytes (the last one takes what is left).
func splitDatagrams(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 2 && len(out) < 64 {
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		n = min(n, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// joinDatagrams is splitDatagrams' inverse, for the seed corpus.
func joinDatagrams(ds ...[]byte) []byte {
	var out []byte
	for _, d := range ds {
		out = binary.BigEndian.AppendUint16(out, uint16(len(d)))
		out = append(out, d...)
	}
	return out
}

// FuzzReceivePath feeds random datagrams to VXLAN and Geneve ports'
// receive processing (fixed key, key=flow, a fixed remote the sender is
// not) with a datapath behind each (every frame forwarded
// to a sink port): nothing panics, every datagram is either delivered
// (and then sent on or counted as a datapath drop) or counted by cause
// as a tunnel drop, and every packet buffer comes back to the pools.
func FuzzReceivePath(f *testing.F) {
	inner := nstest.UDPFrame([]byte{2, 0, 0, 0, 0, 2}, []byte{2, 0, 0, 0, 0, 1}, []byte{10, 0, 0, 1}, []byte{10, 0, 0, 2}, 1000, 2000)
	vx, gn := hdr(VXLAN, 100), hdr(Geneve, 100)
	f.Add(uint8(0), joinDatagrams(append(vx[:], inner...)))
	f.Add(uint8(1), joinDatagrams(append(gn[:], inner...)))
	vx = hdr(VXLAN, 101)
	f.Add(uint8(0), joinDatagrams(append(vx[:], inner...), vx[:4], nil, append(vx[:], inner[:20]...)))
	opt := append([]byte{1, 0, 0x65, 0x58, 0, 0, 100, 0}, 0x01, 0x02, 0x80, 0x01, 1, 2, 3, 4) // one 4-byte option
	f.Add(uint8(1), joinDatagrams(append(opt, inner...), append([]byte{0x3f, 0xc0, 0x65, 0x58, 0, 0, 100, 0}, inner...)))
	f.Add(uint8(2), joinDatagrams(append(gn[:], make([]byte, 9000)...)))
	f.Add(uint8(3), joinDatagrams(append(vx[:], inner...))) // from an unknown remote

	type rig struct {
		port  *fedPort
		sink  *null.Port
		drops func() uint64 // the datapath's
	}
	rigs := make([]rig, 4)
	for i, o := range []Options{
		{Kind: VXLAN, Key: 100},
		{Kind: Geneve, Key: 100},
		{Kind: Geneve, KeyFlow: true}, // any VNI
		{Kind: VXLAN, KeyFlow: true, Remote: netip.MustParseAddr("198.18.0.3")}, // not the sender
	} {
		fp := &fedPort{p: &Port{name: "fz", opt: o, mtu: 1500, ctr: make([]netdev.Counters, 1), causes: make([]causeCounters, 1)}}
		if o.Remote.IsValid() {
			fp.p.remote.Addr = o.Remote.As16()
		}
		sink := null.New("sink", 0, 1, nil)
		dp := nstest.CrossConnect(f, 1, fp, sink)
		f.Cleanup(func() {
			dp.Stop()
			nstest.CheckPools(f, dp)
		})
		rigs[i] = rig{port: fp, sink: sink, drops: func() uint64 { return nstest.PMDDrops(dp) }}
	}

	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		r := rigs[int(which)%len(rigs)]
		r.port.feed(splitDatagrams(data))
		// Polled every 20 µs, not nstest.WaitFor's 10 ms, which would
		// bound the fuzzer to 100 inputs a second.
		accounted := func() bool {
			r.port.mu.Lock()
			fed := r.port.fed
			r.port.mu.Unlock()
			st := r.port.Stats()
			var causes uint64
			for _, n := range r.port.p.Drops() {
				causes += n
			}
			out := r.sink.Stats().TxPackets + r.drops()
			return st.RxPackets+st.RxDrops == fed && st.RxDrops == causes && st.RxPackets == out
		}
		for deadline := time.Now().Add(10 * time.Second); !accounted(); time.Sleep(20 * time.Microsecond) {
			if time.Now().After(deadline) {
				st := r.port.Stats()
				t.Fatalf("after 10 s: %+v, drops by cause %v, sink %+v, datapath drops %d", st, r.port.p.DropsByCause(), r.sink.Stats(), r.drops())
			}
		}
	})
}

package afxdp

import (
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/netdev"
)

// fakeKernel plays the kernel's side of one socket's four rings in plain
// memory, so that Recv and Send can be tested without AF_XDP.
type fakeKernel struct {
	words [4][3]uint32 // fill, comp, rx, tx: producer, consumer, flags
	x     *xsk
}

// newFakePort returns a one-queue port over fake rings and a Go-allocated
// UMEM laid out as lay. Nothing in it has a file descriptor, and the
// need-wakeup flags are clear, so Recv and Send make no syscalls.
func newFakePort(lay layout, sz ringSizes, fix bool) (*Port, *fakeKernel) {
	k := &fakeKernel{}
	x := &xsk{fd: -1, lay: lay, umem: make([]byte, lay.total())}
	initAddr := func(r *addrRing, w *[3]uint32, size uint32) {
		r.init(&w[0], &w[1], &w[2], size)
		r.addrs = make([]uint64, size)
	}
	initDesc := func(r *descRing, w *[3]uint32, size uint32) {
		r.init(&w[0], &w[1], &w[2], size)
		r.descs = make([]unix.XDPDesc, size)
	}
	initAddr(&x.r.fill, &k.words[0], sz.fill)
	initAddr(&x.t.comp, &k.words[1], sz.comp)
	initDesc(&x.r.rx, &k.words[2], sz.rx)
	initDesc(&x.t.tx, &k.words[3], sz.tx)
	x.r.recycle = make([]uint64, 0, lay.rxFrames)
	x.t.free = make([]uint64, 0, lay.txFrames)
	for i := uint64(0); i < lay.txFrames; i++ {
		x.t.free = append(x.t.free, lay.rxBytes()+i*lay.frameSize)
	}
	p := &Port{
		name:     "fake",
		xsks:     []*xsk{x},
		counters: make([]netdev.Counters, 2),
		kstats:   make([]unix.XDPStatistics, 1),
		maxFrame: int(lay.frameSize) - unix.XDP_PACKET_HEADROOM,
		fixCsum:  fix,
	}
	x.r.c = &p.counters[0]
	x.t.c = &p.counters[1]
	k.x = x
	return p, k
}

func (k *fakeKernel) load(r, i int) uint32     { return atomic.LoadUint32(&k.words[r][i]) }
func (k *fakeKernel) store(r, i int, v uint32) { atomic.StoreUint32(&k.words[r][i], v) }

// deliver puts descriptors on the rx ring as the kernel would.
func (k *fakeKernel) deliver(ds ...unix.XDPDesc) {
	r := &k.x.r.rx
	prod := k.load(2, 0)
	for i, d := range ds {
		r.descs[(prod+uint32(i))&r.mask] = d
	}
	k.store(2, 0, prod+uint32(len(ds)))
}

// takeFill consumes every fill ring entry and returns them.
func (k *fakeKernel) takeFill() []uint64 {
	r := &k.x.r.fill
	cons, prod := k.load(0, 1), k.load(0, 0)
	var out []uint64
	for i := cons; i != prod; i++ {
		out = append(out, r.addrs[i&r.mask])
	}
	k.store(0, 1, prod)
	return out
}

// takeTx consumes every tx descriptor and returns them.
func (k *fakeKernel) takeTx() []unix.XDPDesc {
	r := &k.x.t.tx
	cons, prod := k.load(3, 1), k.load(3, 0)
	var out []unix.XDPDesc
	for i := cons; i != prod; i++ {
		out = append(out, r.descs[i&r.mask])
	}
	k.store(3, 1, prod)
	return out
}

// complete puts addresses on the completion ring.
func (k *fakeKernel) complete(addrs ...uint64) {
	r := &k.x.t.comp
	prod := k.load(1, 0)
	for i, a := range addrs {
		r.addrs[(prod+uint32(i))&r.mask] = a
	}
	k.store(1, 0, prod+uint32(len(addrs)))
}

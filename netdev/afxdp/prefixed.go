package afxdp

import (
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// SendPrefixed is Send for a user that builds the start of every frame
// itself (a tunnel port writing the outer Ethernet/IP/UDP headers): frame
// i is hdrs[i] followed by pkts[i]'s data, copied into one UMEM frame, so
// neither the packet nor its headroom is touched. GSO frames are not
// taken (the caller sends them another way). All of the batch goes with
// at most one kick. It returns how many were queued; the rest did not fit
// the ring or a frame (counted as TxDrops or TxErrors) and the caller may
// count them again by its own causes.
func (p *Port) SendPrefixed(q int, hdrs [][]byte, pkts []*packet.Packet) int {
	x := p.xsks[q]
	t := &x.t
	if p.gone.Load() {
		t.c.TxErrors.Add(uint64(len(pkts)))
		return 0
	}
	reclaim(t, &x.lay)
	slots := t.tx.free(uint32(len(pkts)))
	umem := x.umem
	fs := int(x.lay.frameSize)
	var sent uint32
	var bytes, tooBig uint64
	for i, pkt := range pkts {
		if sent == slots || len(t.free) == 0 {
			break
		}
		h, d := hdrs[i], pkt.Data()
		l := len(h) + len(d)
		if l > p.maxFrame {
			tooBig++
			continue
		}
		a := t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
		f := umem[a : int(a)+fs]
		copy(f, h)
		copy(f[len(h):], d)
		t.tx.descs[(t.tx.cachedProd+sent)&t.tx.mask] = unix.XDPDesc{Addr: a, Len: uint32(l)}
		sent++
		bytes += uint64(l)
	}
	if sent > 0 {
		t.tx.submit(sent)
	}
	if t.tx.needWakeup() && (sent > 0 || t.tx.pending() > 0) {
		t.c.TxKicks.Add(1)
		if e := kickTx(x.fd); !transient(e) {
			t.c.TxErrors.Add(1)
		}
	}
	if sent > 0 {
		t.c.TxPackets.Add(uint64(sent))
		t.c.TxBytes.Add(bytes)
	}
	if tooBig > 0 {
		t.c.TxErrors.Add(tooBig)
	}
	if d := uint64(len(pkts)) - uint64(sent) - tooBig; d > 0 {
		t.c.TxDrops.Add(d)
	}
	return int(sent)
}

// IfIndex is the interface's index.
func (p *Port) IfIndex() int { return p.ifindex }

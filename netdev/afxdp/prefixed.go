package afxdp

import "github.com/vswitch-go/vswitch/datapath/packet"

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
	sent, bytes, tooBig := p.sendRing(x, hdrs, pkts)
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

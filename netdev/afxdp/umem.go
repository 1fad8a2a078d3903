package afxdp

import "golang.org/x/sys/unix"

// layout is the partition of one queue's UMEM: frames of frameSize bytes
// (a power of two, the kernel's aligned chunk mode), the first rxFrames of
// them circulating between the fill and rx rings, the remaining txFrames
// between our free list, the tx ring and the completion ring. Keeping the
// two sets apart lets the rx and tx queue of one socket be driven by
// different goroutines without sharing any state.
type layout struct {
	frameSize uint64
	rxFrames  uint64
	txFrames  uint64
}

func (l *layout) rxBytes() uint64 { return l.rxFrames * l.frameSize }
func (l *layout) total() uint64   { return (l.rxFrames + l.txFrames) * l.frameSize }

// Results of checking a descriptor from the kernel.
const (
	descOK      = iota
	descBadLen  // the frame is ours but the length runs past its end
	descBadAddr // the address is not in the rx part of the UMEM
)

// rxDesc checks an rx descriptor before its data is touched: the data must
// lie within one rx frame. It returns the data's offset and length in the
// UMEM and the frame's base address (to give back to the fill ring, valid
// unless the result is descBadAddr). In aligned mode the kernel hands out
// base+headroom addresses, so the base is the address rounded down.
func (l *layout) rxDesc(d unix.XDPDesc) (off, n int, base uint64, res int) {
	base = d.Addr &^ (l.frameSize - 1)
	if base >= l.rxBytes() {
		return 0, 0, 0, descBadAddr
	}
	in := d.Addr - base
	if uint64(d.Len) > l.frameSize-in {
		return 0, 0, base, descBadLen
	}
	return int(d.Addr), int(d.Len), base, descOK
}

// txAddr checks an address from the completion ring: it must be the base
// of a tx frame (we only ever put frame bases on the tx ring).
func (l *layout) txAddr(a uint64) bool {
	return a&(l.frameSize-1) == 0 && a >= l.rxBytes() && a < l.total()
}

// Package packet holds the packet buffer, the batch of up to BatchSize packets
// that every stage of the datapath works on, and the preallocated buffer pool
// packets come from. Both the port drivers (netdev) and the datapath import
// it, so it depends on nothing but the flow key.
package packet

import (
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

const (
	// BatchSize is the most packets a batch holds: the unit of receive,
	// classification, action execution and transmission.
	BatchSize = 32
	// Headroom is the space kept in front of received data so that VLAN,
	// MPLS or tunnel headers can be pushed without moving the payload.
	Headroom = 128
	// DefaultBufSize is the size of one pool buffer, headroom included.
	DefaultBufSize = 2048
	// BigBufSize is the size of one big buffer (see Pool.AttachBig): a
	// GSO frame of up to 65,535 IP bytes behind an Ethernet header with
	// two tags, headroom in front, and room for pushes behind the
	// headroom's worth (a VLAN or MPLS push moves the front, not the end).
	BigBufSize = Headroom + 14 + 8 + 65535 + 1
	// DefaultBigBuffers is how many big buffers a PMD's pool gets: enough
	// for a full receive batch and the output batches holding the
	// previous ones, at 4.2 MiB per PMD.
	DefaultBigBuffers = 64
)

// Offload is the checksum and segmentation offload state of a frame, as
// the virtio_net_hdr that came with it described it (same fields, same
// meaning, convertible to vnethdr.Header; this package cannot import
// netdev). It travels with the frame so that a GSO super-frame can leave
// through a port that takes GSO as one frame, with its partial checksum,
// instead of being cut into MTU-sized packets on receive.
//
// CsumStart counts from the start of the frame, so Push and Pull keep it
// pointing at the same byte. The zero value means a complete frame.
type Offload struct {
	Flags, GSOType        uint8
	HdrLen, GSOSize       uint16
	CsumStart, CsumOffset uint16
}

// Offload flags and the GSO "none" type, as in linux/virtio_net.h.
const (
	OffloadNeedsCsum = 1
	OffloadDataValid = 2
)

// Packet is one frame in a pool buffer. The frame occupies
// buf[off : off+length]; the space before off is headroom.
//
// A Packet belongs to the Pool it was taken from and must be returned to it
// with Free by the goroutine that owns that pool (a PMD frees only packets
// from its own pool: drivers copy frames in and out of their rings).
//
// Layout: everything that receive, output and the pool touch for every
// packet (the frame's place, pool, InPort, Hash and State) fills the first
// 64 bytes, and the struct is a whole number of cache lines, so on a
// line-aligned pool that is one line per packet, not the three it was when
// the flags and the offload state sat behind the key. The key comes after,
// for the paths that parse.
type Packet struct {
	buf    []byte
	off    int32
	length int32
	pool   *Pool

	// InPort is the datapath port number the packet was received on.
	InPort uint32
	// Hash is a flow hash (RSS hash from the driver, or computed from the
	// key); valid when HashValid is set.
	Hash uint32

	// State is what Pool.Get clears, in 16 bytes cleared by one store.
	State

	Offsets flow.Offsets
	Key     flow.Key

	// TunnelID and Tunnel are the outer header a tunnel port decapsulated
	// the packet from, valid when HasTunnel is set.
	TunnelID uint64
	Tunnel   flow.Tunnel

	_ [packetPad]byte
}

// State is the per-packet metadata a reused buffer must not carry over:
// Pool.Get clears all of it at once, and SetData all of it but the pool's
// own flag.
type State struct {
	inPool bool // on the pool's free list (catches double frees)
	// KeyValid says Key and Offsets describe the current contents; actions
	// that change headers clear it or keep it in step.
	KeyValid bool
	// HashValid says Hash is valid.
	HashValid bool
	// HasTunnel says the packet arrived through a tunnel port, which put
	// the outer header it was decapsulated from in TunnelID and Tunnel.
	// Extraction clears the key; the PMD copies these into it afterwards,
	// so the pipeline matches on tun_id, tun_src, ...
	HasTunnel bool
	// Recircs counts the packet's recirculations (passes through the
	// PMD's caches after the first), so the PMD can bound them.
	Recircs uint8
	// Hops counts the patch ports the packet has crossed, so that patch
	// ports joined into a loop end it (netdev/patch).
	Hops uint8
	// Offload is the frame's GSO and partial-checksum state. Only drivers
	// that received the frame as one GSO super-frame set it.
	Offload Offload
}

// packetPad rounds Packet up to whole cache lines.
const packetPad = (64 - packetUnpadded%64) % 64

const packetUnpadded = unsafe.Sizeof(struct {
	a [64]byte
	o flow.Offsets
	k flow.Key
	t uint64
	u flow.Tunnel
}{})

// The hot fields must fit one line, and State one 16-byte store.
var (
	_ [64 - unsafe.Offsetof(Packet{}.State) - unsafe.Sizeof(State{})]struct{}
	_ [unsafe.Sizeof(State{}) - 16]struct{}
	_ [16 - unsafe.Sizeof(State{})]struct{}
	_ [0]struct{} = [unsafe.Sizeof(Packet{}) % 64]struct{}{}
)

// GSO reports whether the frame is a GSO super-frame: one frame that
// stands for several MTU-sized segments, which a port either takes whole
// (netdev.GSOSender) or gets cut into segments first.
func (p *Packet) GSO() bool { return p.Offload.GSOType != 0 }

// Data returns the frame.
func (p *Packet) Data() []byte { return p.buf[p.off : p.off+p.length] }

// Len returns the frame length in bytes.
func (p *Packet) Len() int { return int(p.length) }

// Cap returns the largest frame this buffer can hold with the current headroom.
func (p *Packet) Cap() int { return len(p.buf) - int(p.off) }

// Headroom returns the free bytes in front of the frame.
func (p *Packet) Headroom() int { return int(p.off) }

// SetData replaces the frame with a copy of data, keeping the default
// headroom, and forgets the old frame's key, hash, tunnel and offload state
// (not Recircs and Hops: they are the packet's, not the frame's). It truncates data
// that does not fit and returns the bytes copied.
func (p *Packet) SetData(data []byte) int {
	off := min(Headroom, len(p.buf))
	n := copy(p.buf[off:], data)
	p.off, p.length = int32(off), int32(n)
	p.State = State{inPool: p.inPool, Recircs: p.Recircs, Hops: p.Hops}
	return n
}

// SetLen sets the frame length (for drivers that receive straight into
// Buffer()). It returns false, changing nothing, if n does not fit.
func (p *Packet) SetLen(n int) bool {
	if n < 0 || int(p.off)+n > len(p.buf) {
		return false
	}
	p.length = int32(n)
	return true
}

// Buffer returns the whole space from the start of the frame to the end of
// the buffer, for a driver to receive into before calling SetLen.
func (p *Packet) Buffer() []byte { return p.buf[p.off:] }

// Push grows the frame by n bytes at the front, taking them from the
// headroom, and returns the new front bytes. It returns nil, changing
// nothing, if the headroom is too small.
func (p *Packet) Push(n int) []byte {
	if n < 0 || n > int(p.off) {
		return nil
	}
	p.off -= int32(n)
	p.length += int32(n)
	if p.Offload.Flags&OffloadNeedsCsum != 0 {
		p.Offload.CsumStart += uint16(n)
	}
	return p.buf[p.off : int(p.off)+n]
}

// Pull drops n bytes from the front of the frame. It returns false, changing
// nothing, if the frame is shorter than n.
func (p *Packet) Pull(n int) bool {
	if n < 0 || n > int(p.length) {
		return false
	}
	p.off += int32(n)
	p.length -= int32(n)
	if p.Offload.Flags&OffloadNeedsCsum != 0 {
		p.Offload.CsumStart -= uint16(n)
	}
	return true
}

// CopyFrom makes p a copy of src (frame and metadata), keeping p's headroom
// at least as large as src's. It returns false if the frame does not fit
// (a big frame needs a buffer from Pool.GetFit).
func (p *Packet) CopyFrom(src *Packet) bool {
	off := src.off
	if int(off)+int(src.length) > len(p.buf) {
		return false
	}
	p.off = off
	p.length = int32(copy(p.buf[off:], src.Data()))
	p.InPort = src.InPort
	p.Hash = src.Hash
	p.HashValid = src.HashValid
	p.KeyValid = src.KeyValid
	p.HasTunnel = src.HasTunnel
	p.Hops = src.Hops
	p.Offload = src.Offload
	if src.HasTunnel {
		p.TunnelID, p.Tunnel = src.TunnelID, src.Tunnel
	}
	if src.KeyValid {
		p.Key = src.Key
		p.Offsets = src.Offsets
	}
	return true
}

// Pool returns the pool the packet belongs to.
func (p *Packet) Pool() *Pool { return p.pool }

// Free returns the packet to its pool. It must be called by the pool's owner.
func (p *Packet) Free() { p.pool.Put(p) }

// Batch is up to BatchSize packets processed together.
type Batch struct {
	Pkts [BatchSize]*Packet
	N    int
}

// Packets returns the packets in the batch.
func (b *Batch) Packets() []*Packet { return b.Pkts[:b.N] }

// Full reports whether the batch holds BatchSize packets.
func (b *Batch) Full() bool { return b.N == BatchSize }

// Add appends p; it returns false if the batch is full.
func (b *Batch) Add(p *Packet) bool {
	if b.N == BatchSize {
		return false
	}
	b.Pkts[b.N] = p
	b.N++
	return true
}

// FreeAll returns every packet to its pool and empties the batch.
func (b *Batch) FreeAll() {
	for i := 0; i < b.N; i++ {
		b.Pkts[i].Free()
	}
	b.N = 0
}

// Reset empties the batch without freeing its packets. Stale pointers stay
// in Pkts: they point into pools that live as long as the packets anyway.
func (b *Batch) Reset() { b.N = 0 }

// Package netdev defines the port driver interface the datapath polls and
// sends through. Drivers live in subpackages: ring and null (in-memory, for
// tests and benchmarks), afxdp, afpacket, tap, vhostuser and tunnel (VXLAN
// and Geneve over UDP sockets).
package netdev

import (
	"sync/atomic"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Netdev is a port driver. The datapath calls Recv and Send from PMD
// goroutines, once per batch (never per packet), so the interface dispatch
// costs one indirect call per up to packet.BatchSize packets.
//
// Concurrency: one goroutine at a time uses a given rx queue, and one at a
// time a given tx queue (the datapath serialises shared tx queues with a
// lock). Different queues may be used concurrently. The other methods are
// safe to call from any goroutine.
type Netdev interface {
	// Name is the interface name the port was created for.
	Name() string
	// NumRxQueues and NumTxQueues are fixed for the life of the Netdev.
	NumRxQueues() int
	NumTxQueues() int
	// Recv receives up to packet.BatchSize frames from rx queue q into
	// buffers taken from pool, appending them to b (which the caller passes
	// empty), and returns how many it added. It stops early if the pool
	// runs dry (counted as an rx drop by the driver if frames were waiting).
	Recv(q int, pool *packet.Pool, b *packet.Batch) int
	// Send transmits the packets of b on tx queue q and returns how many the
	// driver accepted; the rest were dropped and counted by the driver. The
	// caller keeps ownership of every packet and frees them afterwards, so
	// drivers copy what they keep. Send ends with whatever wakes the
	// consumer of the queue: nothing is left waiting for a later packet.
	Send(q int, b *packet.Batch) int
	// MTU is the largest L3 payload the port carries.
	MTU() int
	// LinkUp reports the operational state.
	LinkUp() bool
	// Stats returns the driver's counters.
	Stats() Stats
	// Close releases the driver's resources. The datapath calls it only
	// after every PMD has stopped using the port.
	Close() error
}

// Stats are a port driver's cumulative counters.
type Stats struct {
	RxPackets, RxBytes, RxDrops, RxErrors uint64
	TxPackets, TxBytes, TxDrops, TxErrors uint64
	// TxKicks counts the wake-ups of the transmit side's consumer (send
	// syscalls, eventfd writes) by drivers that implement TxKicker.
	TxKicks uint64
	// TxRefused are the frames, counted in TxDrops too, that the driver
	// took but the far end refused (a veth whose peer has a smaller MTU, a
	// carrier gone), or that it dropped before sending because it knew
	// they would be refused. It is the cause of those drops, kept apart
	// because it points at a misconfigured or hostile peer rather than at
	// load.
	TxRefused uint64
}

// Counters is a set of Stats that drivers update once per batch from the
// goroutine using a queue and that Stats readers load concurrently. Each
// queue should own one Counters so that queues used by different PMDs do
// not share cache lines (the padding keeps neighbours in a slice apart).
type Counters struct {
	RxPackets, RxBytes, RxDrops, RxErrors atomic.Uint64
	TxPackets, TxBytes, TxDrops, TxErrors atomic.Uint64
	TxKicks, TxRefused                    atomic.Uint64
	_                                     [64]byte
}

// CountRx adds one receive batch: packets and bytes delivered, frames
// dropped. Zero counts store nothing, so a batch that changed nothing
// writes no shared cache line.
func (c *Counters) CountRx(packets int, bytes, drops uint64) {
	if packets > 0 {
		c.RxPackets.Add(uint64(packets))
		c.RxBytes.Add(bytes)
	}
	if drops > 0 {
		c.RxDrops.Add(drops)
	}
}

// CountTx is CountRx for one send batch.
func (c *Counters) CountTx(packets int, bytes, drops uint64) {
	if packets > 0 {
		c.TxPackets.Add(uint64(packets))
		c.TxBytes.Add(bytes)
	}
	if drops > 0 {
		c.TxDrops.Add(drops)
	}
}

// AddTo adds the counters to s.
func (c *Counters) AddTo(s *Stats) {
	s.RxPackets += c.RxPackets.Load()
	s.RxBytes += c.RxBytes.Load()
	s.RxDrops += c.RxDrops.Load()
	s.RxErrors += c.RxErrors.Load()
	s.TxPackets += c.TxPackets.Load()
	s.TxBytes += c.TxBytes.Load()
	s.TxDrops += c.TxDrops.Load()
	s.TxErrors += c.TxErrors.Load()
	s.TxKicks += c.TxKicks.Load()
	s.TxRefused += c.TxRefused.Load()
}

// TxKicker is implemented by drivers whose Send wakes the consumer of the
// queue with a syscall or a doorbell (a sendto, an eventfd write): the
// cost output batching exists to share among many packets. The datapath
// reads it around each Send to count each PMD's kicks per port.
type TxKicker interface {
	// TxKicks returns the kicks made on tx queue q so far.
	TxKicks(q int) uint64
}

// Waiter is implemented by drivers whose receive queues have a file
// descriptor that polls readable when frames arrive. An idle PMD whose
// every queue has one waits in ppoll on them instead of sleeping blindly,
// so a packet that arrives while it sleeps wakes it at once.
type Waiter interface {
	// RxFD returns the descriptor of rx queue q, or -1 if it has none.
	RxFD(q int) int
}

// RxArmer is implemented by Waiters whose descriptor only becomes readable
// once asked to: a vhost-user guest kicks (a syscall, or a VM exit) only
// while its ring asks for kicks, so the port asks only when the PMD is
// about to sleep, never while it polls.
type RxArmer interface {
	// ArmRx makes RxFD(q) readable on the next frame and reports whether
	// frames are already waiting (then the PMD polls instead of sleeping).
	// The next Recv that returns frames disarms the queue.
	ArmRx(q int) (pending bool)
}

// Remover is implemented by drivers of kernel interfaces: the channel is
// closed when the interface disappears, and the datapath then removes the
// port. Until then Recv and Send keep working (returning nothing, counting
// errors), so a vanished interface never stops a PMD.
type Remover interface {
	Removed() <-chan struct{}
}

// GSOSender is implemented by drivers whose Send can take a GSO
// super-frame (packet.Packet.GSO) whole, with its packet.Offload state,
// and have the kernel or the peer segment it: AF_PACKET and tap ports,
// whose virtio_net_hdr carries that state. The datapath cuts super-frames
// into MTU-sized segments (vnethdr.Segmenter) before handing them to any
// other driver, and to one whose SendsGSO reports false (a driver that
// takes GSO only with features a peer negotiated).
type GSOSender interface {
	// SendsGSO reports whether Send takes GSO frames now.
	SendsGSO() bool
}

// RunSender is implemented by GSOSenders that send consecutive segments
// of one flow with one system call as they are (the tunnel port: one
// UDP_SEGMENT sendmsg gathering the frames), so the datapath does not
// coalesce segments into super-frames for them: the merge would cost a
// copy into a big buffer and the port would cut the frame again,
// recomputing every segment's checksum.
type RunSender interface {
	SendsRuns()
}

// GSOStats count a port's GSO super-frames, for drivers that receive or
// send them whole (afpacket, tap).
type GSOStats struct {
	// RxWhole: received and handed to the switch as one packet.
	RxWhole uint64
	// RxSegmented: cut into segments on receive because the PMD's pool
	// had no big buffer free.
	RxSegmented uint64
	// TxWhole: sent as one frame for the kernel to segment (or not).
	TxWhole uint64
}

// GSOCounters are GSOStats that queues update concurrently. A port's
// queues may share one: a super-frame carries up to 64 KiB, so the
// counters change too rarely for the shared cache line to matter.
type GSOCounters struct {
	RxWhole, RxSegmented, TxWhole atomic.Uint64
}

// Load returns the counters' values.
func (c *GSOCounters) Load() GSOStats {
	return GSOStats{RxWhole: c.RxWhole.Load(), RxSegmented: c.RxSegmented.Load(), TxWhole: c.TxWhole.Load()}
}

// TunnelOption is a Geneve option the switch's TLV table maps to a
// tun_metadata field (OpenFlow's NXT_TLV_TABLE_MOD): a received option of
// this class, type and length fills the field, and a packet output with
// the field set carries the option.
type TunnelOption struct {
	Class uint16
	Type  uint8
	// Len is the option's data length in bytes, a multiple of 4.
	Len uint8
	// Index is N of tun_metadataN.
	Index int
}

// TunnelOptionMapper is implemented by ports that carry tunnel options
// (Geneve): the bridge tells them the mapping its TLV table holds, nil
// for none, whenever it changes and when the port joins.
type TunnelOptionMapper interface {
	MapTunnelOption(o *TunnelOption)
}

package virtq

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// Descriptor, ring flags and limits from the virtio specification.
const (
	DescFNext     = 1 // the chain continues at Next
	DescFWrite    = 2 // device-writable buffer
	DescFIndirect = 4 // the buffer is a table of descriptors

	AvailFNoInterrupt = 1 // the driver does not want used-buffer notifications
	UsedFNoNotify     = 1 // the device does not want available-buffer notifications

	// MaxSize is the largest split-ring size the specification allows.
	MaxSize = 32768
	// MaxIndirect bounds an indirect table (Linux vhost uses the same
	// limit); a larger one is treated as hostile.
	MaxIndirect = 1024
	// MaxBuffersPerPacket bounds the receive buffers one frame may span
	// with mergeable buffers; a frame needing more is dropped.
	MaxBuffersPerPacket = 64
)

var le = binary.LittleEndian

// Config describes a ring to start.
type Config struct {
	Mem *Memory
	// Size is the number of descriptors (a power of two up to MaxSize).
	Size int
	// DescAddr, AvailAddr and UsedAddr are frontend virtual addresses.
	DescAddr, AvailAddr, UsedAddr uint64
	// LastAvail is the next avail index to process (SET_VRING_BASE).
	LastAvail uint16
	// HdrLen is the virtio-net header length (12 with VERSION_1 or
	// mergeable buffers, else 10).
	HdrLen int
	// Mergeable, Indirect and EventIdx are the negotiated ring features.
	Mergeable, Indirect, EventIdx bool
	// TxOffload says the frontend negotiated VIRTIO_NET_F_CSUM (and
	// possibly HOST_TSO4/6): the headers of its transmit chains may ask
	// for a checksum or carry a GSO super-frame (see Dequeue).
	TxOffload bool
	// RxOffload says the frontend negotiated GUEST_CSUM, GUEST_TSO4 and
	// GUEST_TSO6 (and RxECN GUEST_ECN): TCP super-frames go to it whole
	// (see Enqueue).
	RxOffload, RxECN bool
	// CallFD is the eventfd that interrupts the frontend, or -1.
	CallFD int
	// KickFD is the eventfd the frontend kicks, or -1. It must be
	// non-blocking: DrainKick reads it.
	KickFD int
}

// usedElem is an entry for the used ring waiting to be written.
type usedElem struct {
	id, len uint32
}

// Queue is one started split virtqueue. Only one goroutine at a time may
// call its processing methods (the PMD that owns the queue); the control
// side hands it over with an acknowledgement (see the vhostuser package).
type Queue struct {
	mem   *Memory
	desc  []byte // Size × 16 bytes
	avail []byte // flags, idx, ring[Size], used_event (rounded up to 4 bytes)
	used  []byte // flags, idx, ring[Size], avail_event (rounded up to 4 bytes)

	availWord       *uint32 // avail flags (low half) and idx (high half)
	usedWord        *uint32 // used flags (low half) and idx (high half)
	usedEventWord   *uint32
	usedEventShift  uint
	availEventWord  *uint32
	availEventShift uint

	size      uint32
	mask      uint16
	lastAvail uint16 // next avail entry to consume
	usedIdx   uint16 // shadow of the published used idx
	touched   uint16 // avail entries before this one have had touchAhead's prefetch

	// Scratch for one batch's gather pass and prefetch lists, in the
	// queue rather than on the stack: Go zeroes a stack array on every
	// call (1.5 KiB per batch here), and a polling guest's bursts are
	// often a few packets, so the zeroing cost as much as their copies.
	// Only the one goroutine inside a batch on the queue uses them.
	ents      [batchMax]entry
	lines     [2 * batchMax]uintptr
	usedFlags uint16

	hdrLen    int
	region    int // the memory region the last buffer was in (see guest)
	mergeable bool
	indirect  bool
	eventIdx  bool
	notifyOn  bool // kicks enabled (see SetKickNotify)
	broken    bool // the avail idx ran more than Size ahead
	txOffload bool
	rxOffload bool
	rxECN     bool
	rxHdr     [12]byte // the header put writes: zero, or a super-frame's

	// A super-frame the frontend cannot take whole, cut on its way out.
	rxSeg     vnethdr.Segmenter
	rxScratch []byte // scratchSize bytes, allocated on first use

	// A guest super-frame being cut into segments on receive (no big
	// buffer was free): its bytes, copied out of guest memory.
	seg        vnethdr.Segmenter
	segmenting bool
	scratch    []byte // scratchSize bytes, allocated on first use

	callFD  int
	kickFD  int
	one     [8]byte // the eventfd increment, kept here so writes allocate nothing
	kickBuf [8]byte

	nbLo, nbHi *byte // where the current frame's num_buffers bytes went
	pend       [MaxBuffersPerPacket]usedElem
}

// ringWord returns the aligned 32-bit word of b holding the 16-bit field at
// off, and the field's shift within it. b must start 4-byte aligned.
func ringWord(b []byte, off int) (*uint32, uint, error) {
	w := off &^ 3
	if off < 0 || off&1 != 0 || w+4 > len(b) {
		return nil, 0, fmt.Errorf("virtq: field at %d outside its ring", off)
	}
	return (*uint32)(unsafe.Pointer(&b[w])), uint(off&3) * 8, nil
}

func round4(n int) int { return (n + 3) &^ 3 }

// guest translates a buffer address (Memory.Guest), trying the region of
// the last buffer first. A frontend's buffers sit in one region almost
// always (a VM's RAM below or above the PCI hole, a DPDK application's
// memory segment), so the scan (QEMU sends up to eight regions) becomes
// one check. The remembered index only orders the search: every
// candidate gets the same full bounds check, so a hostile address gets
// nil whatever was remembered, and the Memory (immutable, shared) is not
// written.
func (q *Queue) guest(addr, n uint64) []byte {
	if rs := q.mem.regions; uint(q.region) < uint(len(rs)) {
		if b := guestIn(&rs[q.region], addr, n); b != nil {
			return b
		}
	}
	i, b := q.mem.guestScan(addr, n)
	if b != nil {
		q.region = i
	}
	return b
}

// CheckRings reports whether the three rings of a queue of size entries
// at frontend addresses desc, avail and used lie inside mem, so that a
// frontend's SET_VRING_ADDR can be refused when it arrives instead of at
// the kick or enable that would start the queue.
func CheckRings(mem *Memory, size int, desc, avail, used uint64) error {
	_, _, _, err := rings(mem, size, desc, avail, used)
	return err
}

// rings translates a queue's ring addresses.
func rings(mem *Memory, n int, descAddr, availAddr, usedAddr uint64) (desc, avail, used []byte, err error) {
	desc = mem.User(descAddr, uint64(16*n))
	avail = mem.User(availAddr, uint64(round4(6+2*n)))
	used = mem.User(usedAddr, uint64(round4(6+8*n)))
	if desc == nil || avail == nil || used == nil {
		return nil, nil, nil, fmt.Errorf("virtq: ring addresses %#x/%#x/%#x outside the memory table", descAddr, availAddr, usedAddr)
	}
	return desc, avail, used, nil
}

// New starts a queue. It translates the ring addresses and checks that the
// rings lie inside the memory table and are aligned for atomic access. If
// the used idx in memory differs from LastAvail (a frontend that
// reconnected with rings in flight), processing resumes from the used idx.
func New(c Config) (*Queue, error) {
	if c.Mem == nil {
		return nil, errors.New("virtq: no memory table")
	}
	if c.Size <= 0 || c.Size > MaxSize || c.Size&(c.Size-1) != 0 {
		return nil, fmt.Errorf("virtq: bad ring size %d", c.Size)
	}
	if c.HdrLen != 10 && c.HdrLen != 12 {
		return nil, fmt.Errorf("virtq: bad header length %d", c.HdrLen)
	}
	n := c.Size
	q := &Queue{
		mem:       c.Mem,
		size:      uint32(n),
		mask:      uint16(n - 1),
		hdrLen:    c.HdrLen,
		mergeable: c.Mergeable,
		indirect:  c.Indirect,
		eventIdx:  c.EventIdx,
		txOffload: c.TxOffload,
		rxOffload: c.RxOffload,
		rxECN:     c.RxECN,
		callFD:    c.CallFD,
		kickFD:    c.KickFD,
	}
	le.PutUint64(q.one[:], 1)
	var err error
	if q.desc, q.avail, q.used, err = rings(c.Mem, n, c.DescAddr, c.AvailAddr, c.UsedAddr); err != nil {
		return nil, err
	}
	if uintptr(unsafe.Pointer(&q.avail[0]))%4 != 0 || uintptr(unsafe.Pointer(&q.used[0]))%4 != 0 {
		return nil, errors.New("virtq: avail or used ring not 4-byte aligned")
	}
	if q.availWord, _, err = ringWord(q.avail, 0); err != nil {
		return nil, err
	}
	if q.usedWord, _, err = ringWord(q.used, 0); err != nil {
		return nil, err
	}
	if q.usedEventWord, q.usedEventShift, err = ringWord(q.avail, 4+2*n); err != nil {
		return nil, err
	}
	if q.availEventWord, q.availEventShift, err = ringWord(q.used, 4+8*n); err != nil {
		return nil, err
	}
	w := atomic.LoadUint32(q.usedWord)
	q.usedFlags = uint16(w)
	q.usedIdx = uint16(w >> 16)
	q.lastAvail = c.LastAvail
	if q.usedIdx != c.LastAvail {
		q.lastAvail = q.usedIdx
	}
	return q, nil
}

// LastAvail returns the next avail index the queue will consume (what
// GET_VRING_BASE reports).
func (q *Queue) LastAvail() uint16 { return q.lastAvail }

// UsedIdx returns the used idx the queue has published.
func (q *Queue) UsedIdx() uint16 { return q.usedIdx }

// Broken reports whether the frontend moved its avail idx impossibly far;
// a broken queue processes nothing until it is restarted.
func (q *Queue) Broken() bool { return q.broken }

// loadAvailIdx reads the avail idx with acquire semantics: descriptor and
// ring entries read afterwards are at least as new.
func (q *Queue) loadAvailIdx() uint16 { return uint16(atomic.LoadUint32(q.availWord) >> 16) }

func (q *Queue) availEntry(i uint16) uint32 {
	return uint32(le.Uint16(q.avail[4+2*int(i&q.mask):]))
}

// usedElemAddr is the address of used ring entry i, for prefetching.
func (q *Queue) usedElemAddr(i uint16) uintptr {
	return uintptr(unsafe.Pointer(&q.used[4+8*int(i&q.mask)]))
}

func (q *Queue) putUsed(i uint16, id, n uint32) {
	off := 4 + 8*int(i&q.mask)
	le.PutUint32(q.used[off:], id)
	le.PutUint32(q.used[off+4:], n)
}

// publishUsed makes used entries up to idx visible. The atomic store orders
// the entries before the idx (release) and, being a full barrier, the idx
// before the notification check that follows.
func (q *Queue) publishUsed(idx uint16) {
	q.usedIdx = idx
	atomic.StoreUint32(q.usedWord, uint32(q.usedFlags)|uint32(idx)<<16)
}

func load16(w *uint32, shift uint) uint16 { return uint16(atomic.LoadUint32(w) >> shift) }

// store16 writes a 16-bit field without disturbing its word's other half,
// which the frontend may be writing at the same time.
func store16(w *uint32, shift uint, v uint16) {
	for {
		old := atomic.LoadUint32(w)
		nw := old&^(0xffff<<shift) | uint32(v)<<shift
		if atomic.CompareAndSwapUint32(w, old, nw) {
			return
		}
	}
}

// needSignal decides whether the frontend wants an interrupt for the used
// entries from old to new (virtio's vring_need_event with EVENT_IDX).
func (q *Queue) needSignal(old, new uint16) bool {
	if q.eventIdx {
		e := load16(q.usedEventWord, q.usedEventShift)
		return new-e-1 < new-old
	}
	return atomic.LoadUint32(q.availWord)&AvailFNoInterrupt == 0
}

// Signal interrupts the frontend through its call eventfd. It returns
// false if the write failed (the descriptor is non-blocking, so a
// frontend that does not read it cannot stall the caller).
func (q *Queue) Signal() bool {
	if q.callFD < 0 {
		return true
	}
	_, err := unix.Write(q.callFD, q.one[:])
	return err == nil
}

// KickNotify reports whether available-buffer notifications are enabled.
func (q *Queue) KickNotify() bool { return q.notifyOn }

// SetKickNotify enables or disables available-buffer notifications (kicks).
// A PMD disables them while it finds work and enables them before it goes
// idle; it must check for pending entries again after enabling, because
// the frontend may have added some without kicking just before.
func (q *Queue) SetKickNotify(on bool) {
	q.notifyOn = on
	if q.eventIdx {
		if on {
			// Kick when the entry at lastAvail is published; the CAS
			// is a full barrier before the caller's re-check.
			store16(q.availEventWord, q.availEventShift, q.lastAvail)
		}
		return
	}
	if on {
		q.usedFlags &^= UsedFNoNotify
	} else {
		q.usedFlags |= UsedFNoNotify
	}
	atomic.StoreUint32(q.usedWord, uint32(q.usedFlags)|uint32(q.usedIdx)<<16)
}

// Pending reports whether the frontend has published entries not yet
// consumed.
func (q *Queue) Pending() bool { return q.loadAvailIdx() != q.lastAvail }

// DrainKick consumes pending kicks from the kick eventfd (non-blocking), so
// that a PMD waiting on it sleeps until the next one. It returns false if
// the read failed for another reason than "nothing pending".
func (q *Queue) DrainKick() bool {
	if q.kickFD < 0 {
		return true
	}
	_, err := unix.Read(q.kickFD, q.kickBuf[:])
	return err == nil || err == unix.EAGAIN
}

// Indices reports the frontend's avail idx, the next entry the queue will
// consume, and the used idx in memory (for diagnostics).
func (q *Queue) Indices() (avail, lastAvail, used uint16) {
	return q.loadAvailIdx(), q.lastAvail, uint16(atomic.LoadUint32(q.usedWord) >> 16)
}

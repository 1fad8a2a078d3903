package datapath

import (
	"errors"
	"sync"
	"time"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Upcaller translates a flow key that missed the PMD's caches into datapath
// actions and the wildcard mask of every key field the translation looked
// at. ofproto implements it; RuleTable is a simple implementation for tests
// and benchmarks. It is called from PMD goroutines, concurrently.
type Upcaller interface {
	Upcall(key *flow.Key, res *UpcallResult) error
}

// UpcallResult is filled by an Upcaller. The PMD reuses one per call: the
// Upcaller sets every field.
type UpcallResult struct {
	// Actions for the packet and every packet the megaflow covers. The
	// datapath copies them when it installs the megaflow.
	Actions actions.List
	// Mask is the union of the fields the translation consulted; all-zero
	// bits are wildcarded in the installed megaflow.
	Mask flow.Mask
	// NoInstall executes the actions for this packet only and installs
	// nothing (for translations that must see every packet).
	NoInstall bool
	// Refs are the rules the translation went through (OpenFlow entries);
	// the datapath pushes the megaflow's packet and byte counts to them
	// (Datapath.PushStats), which is what makes OpenFlow flow statistics
	// and idle timeouts exact.
	Refs []StatsSink
	// Scratch is the upcaller's own: the datapath keeps one result per
	// PMD and never reads or resets this, so an upcaller can keep state
	// here that it reuses from one upcall to the next on that PMD
	// instead of allocating it per upcall.
	Scratch any
}

// StatsSink receives the traffic of the megaflows made from it.
// ofproto/pipeline's Entry implements it.
type StatsSink interface {
	Touch(now time.Time, packets, bytes uint64)
}

// ErrNoUpcaller is returned by an upcall when the datapath has none.
var ErrNoUpcaller = errors.New("datapath: no upcall handler")

// ControllerPacket is a copy of a packet handed to the upcall side by a
// Controller action.
type ControllerPacket struct {
	InPort uint32
	Arg    uint32 // the action's Port field (reason/table/max_len for ofproto)
	// Cookie and Metadata are the action's ControllerCookie and
	// ControllerMetadata (for ofproto: the flow entry's cookie and the
	// pipeline's metadata when the packet was sent).
	Cookie, Metadata uint64
	// Context is the action's ControllerContext: the upcall side's id
	// for the rest of what the packet-in carries (0: nothing more).
	Context uint32
	// TunnelID and Tunnel are the packet's tunnel metadata (zero when it
	// has none): controllers see a tunnelled packet's tun_id, tun_src and
	// tun_dst in the PACKET_IN's match, as from Open vSwitch.
	TunnelID uint64
	Tunnel   flow.Tunnel
	Data     []byte
}

// ControllerQueue is a bounded queue of packet copies from the PMDs to the
// OpenFlow side. Push never blocks: when the queue is full the packet is
// counted as an overflow and dropped.
//
// A slot's buffer is allocated the first time the slot is used and kept:
// the ring reuses its slots from the front, so a switch whose packet-ins
// come a few at a time holds a few buffers, not the 2 MiB of a full
// queue that most switches never fill.
type ControllerQueue struct {
	mu       sync.Mutex
	slots    []ControllerPacket
	bufs     [][]byte
	slotSize int
	head, n  int
	overflow uint64
	ready    chan struct{}
}

// NewControllerQueue makes a queue of depth packets of up to slotSize bytes.
func NewControllerQueue(depth, slotSize int) *ControllerQueue {
	return &ControllerQueue{
		slots:    make([]ControllerPacket, depth),
		bufs:     make([][]byte, depth),
		slotSize: slotSize,
		ready:    make(chan struct{}, 1),
	}
}

// push copies pkt into a free slot; false means the queue was full.
func (q *ControllerQueue) push(pkt *packet.Packet, a *actions.Action) bool {
	q.mu.Lock()
	if q.n == len(q.slots) {
		q.overflow++
		q.mu.Unlock()
		return false
	}
	i := (q.head + q.n) % len(q.slots)
	if q.bufs[i] == nil {
		q.bufs[i] = make([]byte, q.slotSize)
	}
	n := copy(q.bufs[i], pkt.Data())
	q.slots[i] = ControllerPacket{InPort: pkt.InPort, Arg: a.ControllerArg(), Cookie: a.ControllerCookie(),
		Metadata: a.ControllerMetadata(), Context: a.ControllerContext(), Data: q.bufs[i][:n]}
	if pkt.KeyValid {
		q.slots[i].TunnelID, q.slots[i].Tunnel = pkt.Key.TunnelID, pkt.Key.Tun
	}
	q.n++
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
	return true
}

// Pop removes the oldest packet, copying it into a new ControllerPacket; ok
// is false when the queue is empty.
func (q *ControllerQueue) Pop() (p ControllerPacket, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n == 0 {
		return p, false
	}
	p = q.slots[q.head]
	p.Data = append([]byte(nil), p.Data...)
	q.head = (q.head + 1) % len(q.slots)
	q.n--
	if q.n == 0 {
		q.head = 0 // the next packets reuse the buffers at the front
	}
	return p, true
}

// Ready is signalled (without blocking the PMD) after packets are queued.
func (q *ControllerQueue) Ready() <-chan struct{} { return q.ready }

// Overflows returns how many packets were dropped because the queue was full.
func (q *ControllerQueue) Overflows() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.overflow
}

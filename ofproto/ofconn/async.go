package ofconn

import (
	"sync"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// asyncKind selects the mask pair of an asynchronous message.
type asyncKind uint8

const (
	asyncPacketIn asyncKind = iota
	asyncPortStatus
	asyncFlowRemoved
)

// DefaultAsyncConfig is every connection's initial asynchronous
// configuration (OpenFlow 1.3 §6.1.1, as Open vSwitch applies it): index 0
// is used in master and equal role, index 1 in slave role. A master or
// equal controller gets table-miss and action packet-ins (not invalid-TTL
// ones), every port status and every flow removal; a slave gets port
// status only.
var DefaultAsyncConfig = ofpwire.AsyncConfig{
	PacketInMask: [2]uint32{1<<ofpwire.PacketInReasonNoMatch | 1<<ofpwire.PacketInReasonAction, 0},
	PortStatusMask: [2]uint32{
		1<<ofpwire.PortReasonAdd | 1<<ofpwire.PortReasonDelete | 1<<ofpwire.PortReasonModify,
		1<<ofpwire.PortReasonAdd | 1<<ofpwire.PortReasonDelete | 1<<ofpwire.PortReasonModify,
	},
	FlowRemovedMask: [2]uint32{
		1<<ofpwire.FlowReasonIdleTimeout | 1<<ofpwire.FlowReasonHardTimeout |
			1<<ofpwire.FlowReasonDelete | 1<<ofpwire.FlowReasonGroupDelete,
		0,
	},
}

// wants reports whether the connection's role and async configuration
// accept a message of kind with reason.
func (c *Conn) wants(kind asyncKind, reason uint32) bool {
	if reason >= 32 {
		return false
	}
	i := 0
	if c.Role() == ofpwire.ControllerRoleSlave {
		i = 1
	}
	a := c.async.Load()
	var mask uint32
	switch kind {
	case asyncPacketIn:
		mask = a.PacketInMask[i]
	case asyncPortStatus:
		mask = a.PortStatusMask[i]
	default:
		mask = a.FlowRemovedMask[i]
	}
	return mask&(1<<reason) != 0
}

// sendAsync queues an asynchronous message without waiting: packet-ins
// first pass the token bucket, and a full queue drops. Each drop is
// counted.
func (c *Conn) sendAsync(kind asyncKind, b []byte) bool {
	if kind == asyncPacketIn && !c.pin.take(time.Now()) {
		c.pinLimited.Add(1)
		return false
	}
	select {
	case <-c.done:
		return false
	default:
	}
	if c.charge(len(b)) {
		select {
		case c.out <- b:
			return true
		default:
			c.credit(len(b))
		}
	}
	if kind == asyncPacketIn {
		c.pinDropped.Add(1)
	} else {
		c.asyncDropped.Add(1)
	}
	return false
}

// tokenBucket limits packet-ins per connection: it holds at most burst
// tokens and gains rate tokens per second; each packet-in takes one.
type tokenBucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second; negative: unlimited
	burst  float64
	tokens float64
	last   time.Time
}

func (b *tokenBucket) init(rate float64, burst int, now time.Time) {
	b.rate, b.burst, b.tokens, b.last = rate, float64(burst), float64(burst), now
}

func (b *tokenBucket) take(now time.Time) bool {
	if b.rate < 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = min(b.burst, b.tokens+dt.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

package xlate

import (
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// PacketInContext is what a packet-in carries beyond the reason, table,
// max_len, cookie and metadata of the datapath's controller action: the
// registers as they were when the packet was sent (Open vSwitch puts
// them in the packet-in's match, and OVN's pinctrl reads its logical
// ports from them), and controller2's userdata and controller id.
type PacketInContext struct {
	Pipe         ofmatch.Pipe
	Userdata     string
	ControllerID uint16
}

// PacketInTable gives packet-in contexts the ids datapath controller
// actions carry; like RecircTable, call Retire whenever the tables'
// changes flush the megaflows.
type PacketInTable struct {
	t *idTable[PacketInContext, PacketInContext]
}

// maxPacketInContexts bounds the contexts alive at once; beyond it
// packet-ins go without registers and userdata.
const maxPacketInContexts = 1 << 20

// NewPacketInTable makes an empty table.
func NewPacketInTable() *PacketInTable {
	return &PacketInTable{newIDTable[PacketInContext, PacketInContext](maxPacketInContexts)}
}

// Context returns the context id stands for, or nil.
func (t *PacketInTable) Context(id uint32) *PacketInContext { return t.t.lookup(id) }

// Retire frees the ids no megaflow can use any more (see idTable).
func (t *PacketInTable) Retire() { t.t.retire() }

// Len is the number of contexts held.
func (t *PacketInTable) Len() int { return t.t.len() }

// controllerAction is the datapath action that sends the packet to the
// controllers with reason, the executing entry's table and cookie, and
// what userdata and id say; the registers and those go in a context when
// there is anything to say and Options.PacketIns holds one.
func (x *xlator) controllerAction(reason ofpwire.PacketInReason, table uint8, maxLen uint16, userdata []byte, id uint16) actions.Action {
	a := actions.ControllerAction(ControllerArg(reason, table, maxLen), x.cookie, x.pipe.Metadata)
	c := PacketInContext{Pipe: x.pipe, Userdata: string(userdata), ControllerID: id}
	c.Pipe.Metadata = 0 // carried by the action itself
	if x.opts.PacketIns == nil || c == (PacketInContext{}) {
		return a
	}
	if ctx, ok := x.opts.PacketIns.t.get(c, c); ok {
		a = a.WithControllerContext(ctx)
	}
	return a
}

package xlate

import (
	"fmt"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
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
	// cont is where the walk goes on after a pausing controller action,
	// for NXT_RESUME (TranslateResume); nil when it did not pause or
	// cannot be resumed.
	cont *Frozen
}

// Paused reports whether the packet-in comes from a pausing controller
// action whose walk TranslateResume can resume.
func (c *PacketInContext) Paused() bool { return c.cont != nil }

// pinKey identifies a context by content: equal keys share an id.
type pinKey struct {
	ctx  PacketInContext // cont nil
	cont frozenKey
}

// PacketInTable gives packet-in contexts the ids datapath controller
// actions carry; like RecircTable, call Retire whenever the tables'
// changes flush the megaflows.
type PacketInTable struct {
	t *idTable[pinKey, PacketInContext]
}

// maxPacketInContexts bounds the contexts alive at once; beyond it
// packet-ins go without registers and userdata.
const maxPacketInContexts = 1 << 20

// packetInGrace keeps a context at least this long after its last use,
// whatever the table changes: a packet-in waits in the controller queue,
// and a PMD may still run a megaflow of the generation before, after the
// change that retires it. Under OVN, which changes the tables many times
// a second, one generation of grace let packet-ins lose their userdata.
const packetInGrace = 2 * time.Second

// NewPacketInTable makes an empty table.
func NewPacketInTable() *PacketInTable {
	t := newIDTable[pinKey, PacketInContext](maxPacketInContexts)
	t.minAge, t.now = packetInGrace, time.Now
	return &PacketInTable{t}
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
func (x *xlator) controllerAction(reason ofpwire.PacketInReason, table uint8, maxLen uint16, userdata []byte, id uint16, cont *Frozen) actions.Action {
	a := actions.ControllerAction(ControllerArg(reason, table, maxLen), x.cookie, x.pipe.Metadata)
	k := pinKey{ctx: PacketInContext{Pipe: x.pipe, Userdata: string(userdata), ControllerID: id}}
	k.ctx.Pipe.Metadata = 0 // carried by the action itself
	if x.opts.PacketIns == nil || k == (pinKey{}) && cont == nil {
		return a
	}
	v := k.ctx
	if cont != nil {
		k.cont, v.cont = cont.key, cont
	}
	if ctx, ok := x.opts.PacketIns.t.get(k, v); ok {
		a = a.WithControllerContext(ctx)
	}
	return a
}

// pausePoint is where a pausing controller action at action j of
// apply-actions ins[i] of entry e lets the walk go on once resumed, or
// nil where a continuation cannot say all that is left: inside a group
// bucket, a clone or an output to TABLE, in a packet-out's own actions,
// or inside a resubmit after which its caller had more to do.
func (x *xlator) pausePoint(e *pipeline.Entry, ins []ofpwire.Instruction, i, j int) *Frozen {
	if x.nonTail > 0 || x.depth > 0 || x.nested > 0 || x.opts.Table != nil || x.opts.PacketIns == nil || x.tr != nil {
		return nil
	}
	return &Frozen{key: frozenKey{p: x.p, stage: stageEntry, table: x.table, miss: x.miss, cookie: x.cookie,
		entry: e, instr: uint16(i), act: uint16(j + 1), ins0: &ins[0], pipe: x.pipe, set: x.set}, ins: ins}
}

// TranslateResume translates the rest of the walk a pausing controller
// action stopped (ctx, from the paused packet-in) for the packet key, as
// the controller handed it back in NXT_RESUME: its metadata and
// registers are opts.Pipe. The result is executed on that packet.
func TranslateResume(p *pipeline.Pipeline, key *flow.Key, res *datapath.UpcallResult, opts Options, ctx *PacketInContext) error {
	if ctx == nil || ctx.cont == nil {
		return fmt.Errorf("%w: not a paused packet-in", ErrUnsupported)
	}
	opts.resume = ctx.cont
	return translate(p, key, res, opts, nil)
}

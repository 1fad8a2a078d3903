package ofproto

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// packetOut runs the message's actions on its packet with the translation's
// full semantics: the actions become the only entry of a scratch pipeline,
// the packet's key is translated through it, and the datapath executes the
// result. in_port OFPP_CONTROLLER (or any reserved port) stands for "no
// port" in the datapath.
func (b *Bridge) packetOut(po *ofpwire.PacketOut) error {
	if po.BufferID != ofpwire.NoBuffer {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
	}
	inPort := uint32(po.InPort)
	if inPort > uint32(ofpwire.PortMax) && inPort != datapath.LocalPort {
		// §7.3.7: in_port is a switch port, CONTROLLER or LOCAL; ANY
		// stands for none. Any other reserved port is BAD_PORT.
		if po.InPort != ofpwire.PortController && po.InPort != ofpwire.PortAny {
			return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPort)
		}
		inPort = 0
	}
	if len(po.Data) < 14 {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPacket)
	}
	if err := xlate.CheckActions(po.Actions, true); err != nil {
		return err
	}
	fm := &ofpwire.FlowMod{
		Command:      ofpwire.FlowAdd,
		BufferID:     ofpwire.NoBuffer,
		OutPort:      ofpwire.PortAny,
		OutGroup:     ofpwire.GroupAny,
		Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: po.Actions}},
	}
	if err := b.checkGroupRefs(fm); err != nil {
		return err
	}
	b.poMu.Lock()
	defer b.poMu.Unlock()
	scratch := pipeline.New(0)
	if _, err := scratch.Apply(fm, time.Now()); err != nil {
		return err
	}
	var key flow.Key
	var off flow.Offsets
	flow.Extract(po.Data, inPort, &key, &off)
	var res datapath.UpcallResult
	opts := b.xlateOptions(time.Now())
	opts.Pipe = packetOutPipe(po.Match, &key)
	opts.Table = b.activePipeline() // output to OFPP_TABLE runs the bridge's tables
	var learned []learnedFlow
	opts.Learn = func(fm *ofpwire.FlowMod, limit uint32) { learned = append(learned, learnedFlow{fm, limit}) }
	if err := xlate.Translate(scratch, &key, &res, opts); err != nil {
		if errors.Is(err, xlate.ErrUnsupported) {
			return ofpErr(ofpwire.ETBadAction, ofpwire.BACBadType)
		}
		if errors.Is(err, xlate.ErrTooManyActions) {
			return ofpErr(ofpwire.ETBadAction, ofpwire.BACTooMany)
		}
		return err
	}
	// The tables an output to OFPP_TABLE went through count the packet,
	// as the datapath's statistics push does for forwarded traffic.
	now := time.Now()
	b.applyLearned(learned, now, nil)
	for _, r := range res.Refs {
		r.Touch(now, 1, uint64(len(po.Data)))
	}
	if len(res.Actions) == 0 {
		return nil
	}
	if err := b.dp.Execute(po.Data, inPort, res.Actions); err != nil {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPacket)
	}
	return nil
}

// continuationID is what a paused packet-in2's continuation carries (as
// its bridge UUID, the one part Open vSwitch's clients hand back
// unchanged): "vsgo", the packet-in context's id and the bridge's nonce,
// so that a continuation from another bridge, or from before a restart,
// is not taken for one of this bridge's. The walk's state stays in the
// switch (xlate.PacketInTable): a continuation outlives no more than two
// changes of the tables, enough for a controller that answers at once,
// as OVN's pinctrl does.
func continuationID(nonce uint64, ctx uint32) [16]byte {
	var id [16]byte
	copy(id[:], "vsgo")
	binary.BigEndian.PutUint32(id[4:], ctx)
	binary.BigEndian.PutUint64(id[8:], nonce)
	return id
}

// resume goes on with a paused pipeline (NXT_RESUME): the packet and the
// registers and metadata as the controller handed them back, from where
// its controller action paused, executed like a packet-out.
func (b *Bridge) resume(r *ofpwire.Resume) error {
	b.poMu.Lock()
	defer b.poMu.Unlock()
	var ctx *xlate.PacketInContext
	if id, ok := ofpwire.ContinuationID(r.Continuation); ok && string(id[:4]) == "vsgo" &&
		binary.BigEndian.Uint64(id[8:]) == b.pinNonce {
		ctx = b.pins.Context(binary.BigEndian.Uint32(id[4:]))
	}
	if ctx == nil || !ctx.Paused() {
		// Unknown or too old: Open vSwitch's NXR_STALE has no 1.3
		// code; the packet is as lost as an unknown buffer's.
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
	}
	if len(r.Data) < 14 {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPacket)
	}
	var inPort uint32
	if o, ok := r.Match.Field(ofpwire.XMTypeInPort); ok && o.Uint() <= uint64(ofpwire.PortMax) {
		inPort = uint32(o.Uint())
	}
	var key flow.Key
	var off flow.Offsets
	flow.Extract(r.Data, inPort, &key, &off)
	now := time.Now()
	opts := b.xlateOptions(now)
	opts.Pipe = packetOutPipe(r.Match, &key)
	var learned []learnedFlow
	opts.Learn = func(fm *ofpwire.FlowMod, limit uint32) { learned = append(learned, learnedFlow{fm, limit}) }
	var res datapath.UpcallResult
	if err := xlate.TranslateResume(b.activePipeline(), &key, &res, opts, ctx); err != nil {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
	}
	b.applyLearned(learned, now, nil)
	for _, ref := range res.Refs {
		ref.Touch(now, 1, uint64(len(r.Data)))
	}
	if len(res.Actions) == 0 {
		return nil
	}
	if err := b.dp.Execute(r.Data, inPort, res.Actions); err != nil {
		return ofpErr(ofpwire.ETBadRequest, ofpwire.BRCBadPacket)
	}
	return nil
}

// packetOutPipe is the pipeline state an OpenFlow 1.5 packet-out's match
// gives its packet: metadata and registers for the walk, tunnel metadata
// into key (what output to a tunnel port uses).
func packetOutPipe(m ofpwire.Match, key *flow.Key) ofmatch.Pipe {
	var p ofmatch.Pipe
	for _, o := range m.Fields {
		if first, count, ok := ofpwire.IsReg(o.Field); ok {
			for i := range count {
				p.Regs[first+i] = uint32(ofpwire.Bits(o.Value, 32*(count-1-i), 32))
			}
			continue
		}
		switch o.Field {
		case ofpwire.XMTypeMetadata:
			p.Metadata = o.Uint()
		case ofpwire.XMTypePktMark:
			p.PktMark = uint32(o.Uint())
		case ofpwire.XMTypeTunnelID:
			key.TunnelID = o.Uint()
		case ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv4Dst, ofpwire.XMTypeTunIPv6Src, ofpwire.XMTypeTunIPv6Dst:
			a, _ := netip.AddrFromSlice(o.Value)
			dst := &key.Tun.Src
			if o.Field == ofpwire.XMTypeTunIPv4Dst || o.Field == ofpwire.XMTypeTunIPv6Dst {
				dst = &key.Tun.Dst
			}
			*dst = a.As16()
		}
	}
	return p
}

// packetIns relays the datapath's to-controller packets as PACKET_INs.
func (b *Bridge) packetIns() {
	defer b.wg.Done()
	q := b.dp.ControllerQueue()
	for {
		for {
			cp, ok := q.Pop()
			if !ok {
				break
			}
			pi, ok := b.packetIn(cp)
			if !ok {
				continue
			}
			if pi.Reason == ofpwire.PacketInReasonInvalidTTL {
				// §7.3.2: miss_send_len bounds what the pipeline
				// sends other than by an output action's max_len.
				if n := b.mgr.SwitchConfig().MissSendLen; n != ofpwire.ContentLenNoBuffer && int(n) < len(pi.Data) {
					pi.Data = pi.Data[:n]
				}
			}
			b.mgr.SendPacketIn(pi)
		}
		select {
		case <-b.stop:
			return
		case <-q.Ready():
		}
	}
}

// packetIn is the PACKET_IN for cp, or false when its context is gone:
// its registers and userdata were retired after table changes before it
// was relayed. Sent without them, the packet-in would not be the one the
// flow asked for, and a controller that reads its userdata
// (ovn-controller's pinctrl) could fail on it; it is dropped and
// counted (StalePacketIns).
func (b *Bridge) packetIn(cp datapath.ControllerPacket) (ofpwire.PacketIn, bool) {
	var ctx *xlate.PacketInContext
	if cp.Context != 0 {
		if ctx = b.pins.Context(cp.Context); ctx == nil {
			b.stalePacketIns.Add(1)
			return ofpwire.PacketIn{}, false
		}
	}
	return PacketIn(cp, ctx, b.pinNonce), true
}

// PacketIn builds the PACKET_IN for a packet a Controller action queued:
// reason, table and max_len come from the action's argument (see
// xlate.ControllerArg). No packet is buffered, so the data is the packet cut
// to max_len (OFPCML_NO_BUFFER: whole). The cookie is the sending entry's
// and the match holds in_port and, when not zero, the metadata, both
// carried through the datapath in the Controller action, the tunnel
// metadata (tun_id, tun_src/tun_dst or their IPv6 forms) and, from ctx
// (nil: none), the registers that were not zero, as Open vSwitch puts
// them there; ctx's userdata, and the continuation of a paused walk (for
// the bridge with nonce), go to NXT_PACKET_IN2 receivers.
func PacketIn(cp datapath.ControllerPacket, ctx *xlate.PacketInContext, nonce uint64) ofpwire.PacketIn {
	reason, table, maxLen := xlate.ParseControllerArg(cp.Arg)
	data := cp.Data
	if maxLen != ofpwire.ContentLenNoBuffer && int(maxLen) < len(data) {
		data = data[:maxLen]
	}
	pi := ofpwire.PacketIn{
		BufferID: ofpwire.NoBuffer,
		TotalLen: uint16(min(len(cp.Data), 0xffff)),
		Reason:   reason,
		TableID:  table,
		Cookie:   cp.Cookie,
		Data:     data,
	}
	pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(cp.InPort)))
	if cp.Metadata != 0 {
		pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeMetadata, cp.Metadata))
	}
	if ctx != nil {
		if ctx.Pipe.PktMark != 0 {
			pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypePktMark, uint64(ctx.Pipe.PktMark)))
		}
		for i, r := range ctx.Pipe.Regs {
			if r != 0 {
				pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeReg0+ofpwire.XMType(i), uint64(r)))
			}
		}
		if ctx.Userdata != "" {
			pi.Userdata = []byte(ctx.Userdata)
		}
		if ctx.Paused() {
			pi.Continuation = ofpwire.Continuation(continuationID(nonce, cp.Context))
		}
	}
	if cp.TunnelID != 0 {
		pi.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeTunnelID, cp.TunnelID))
	}
	for _, a := range []struct {
		addr   [16]byte
		f4, f6 ofpwire.XMType
	}{{cp.Tunnel.Src, ofpwire.XMTypeTunIPv4Src, ofpwire.XMTypeTunIPv6Src}, {cp.Tunnel.Dst, ofpwire.XMTypeTunIPv4Dst, ofpwire.XMTypeTunIPv6Dst}} {
		switch ip := netip.AddrFrom16(a.addr); {
		case a.addr == [16]byte{}:
		case ip.Is4In6():
			b := ip.Unmap().As4()
			pi.Match.Add(ofpwire.NewOXM(a.f4, b[:]))
		default:
			pi.Match.Add(ofpwire.NewOXM(a.f6, a.addr[:]))
		}
	}
	return pi
}

package xlate

import (
	"fmt"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// output translates an output action. Every kind of output depends on
// in_port (a plain port equal to in_port drops, ALL/FLOOD skip it), so
// in_port is always consulted.
func (x *xlator) output(a *ofpwire.ActionOutput, table uint8, miss bool) error {
	x.consult(&flow.Mask{InPort: ^uint32(0)})
	in := x.key.InPort
	switch a.Port {
	case ofpwire.PortIn:
		return x.outputPort(in)
	case ofpwire.PortController:
		if !x.packetInAllowed() {
			return nil
		}
		reason := ofpwire.PacketInReasonAction
		if miss {
			reason = ofpwire.PacketInReasonNoMatch
		}
		return x.emit(x.controllerAction(reason, table, a.MaxLen, nil, 0, nil))
	case ofpwire.PortAll, ofpwire.PortFlood:
		ports := x.opts.Ports
		if a.Port == ofpwire.PortFlood && x.opts.FloodPorts != nil {
			ports = x.opts.FloodPorts
		}
		for _, p := range ports {
			if p != in {
				if err := x.outputPort(p); err != nil {
					return err
				}
			}
		}
		return nil
	case ofpwire.PortLocal:
		if lp := x.opts.LocalPort; lp != 0 && lp != in {
			return x.outputPort(lp)
		}
		if x.tr != nil {
			x.traceNote(TraceDrop, "no LOCAL port, or it is the in_port: dropped")
		}
		return nil
	case ofpwire.PortNormal:
		if x.opts.Normal == nil {
			return fmt.Errorf("%w: output to NORMAL", ErrUnsupported)
		}
		return x.normal()
	case ofpwire.PortTable:
		return x.outputTable()
	case ofpwire.PortAny:
		return fmt.Errorf("%w: output to ANY, which names no port", ErrUnsupported)
	}
	if a.Port > ofpwire.PortMax {
		return fmt.Errorf("%w: output to reserved port %#x", ErrUnsupported, uint32(a.Port))
	}
	if uint32(a.Port) == in {
		// OpenFlow sends back to in_port only through OFPP_IN_PORT.
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("skipping output to input port %d", in))
		}
		return nil
	}
	return x.outputPort(uint32(a.Port))
}

// Port config bits that stop a port receiving or sending.
const (
	recvBlocked = ofpwire.PortConfigNoRcv | ofpwire.PortConfigDown
	fwdBlocked  = ofpwire.PortConfigNoFwd | ofpwire.PortConfigDown
)

// outputPort emits output to port unless its config forbids forwarding.
// The config is not a key field, so nothing joins the mask.
func (x *xlator) outputPort(port uint32) error {
	if x.opts.PortConfig != nil && !x.forwards(port) {
		return nil
	}
	return x.emit(actions.OutputTo(port))
}

// forwards reports whether port's config (PortConfig must be set) lets
// packets out of it.
func (x *xlator) forwards(port uint32) bool {
	cfg := x.opts.PortConfig(port)
	if cfg&fwdBlocked == 0 {
		return true
	}
	if x.tr != nil {
		x.traceNote(TraceDrop, fmt.Sprintf("output:%d skipped: port config %s", port, configText(cfg&fwdBlocked)))
	}
	return false
}

// received reports whether the in_port's config (PortConfig must be set)
// lets the packet in. The
// answer depends on in_port whenever some port refuses to receive, so
// in_port then joins the mask even when this packet's port accepts: a
// megaflow without it would also catch the refusing port's packets.
func (x *xlator) received() bool {
	pc := x.opts.PortConfig
	cfg := pc(x.key.InPort)
	anyBlocked := cfg&recvBlocked != 0
	for _, p := range x.opts.Ports {
		if anyBlocked {
			break
		}
		anyBlocked = pc(p)&recvBlocked != 0
	}
	if anyBlocked {
		x.consult(&flow.Mask{InPort: ^uint32(0)})
	}
	if cfg&recvBlocked != 0 {
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("in_port %d has port config %s: packet dropped on receive",
				x.key.InPort, configText(cfg&recvBlocked)))
		}
		return false
	}
	return true
}

// packetInAllowed reports whether the in_port's config allows sending the
// packet to the controller, consulting in_port when it has to ask.
func (x *xlator) packetInAllowed() bool {
	pc := x.opts.PortConfig
	if pc == nil {
		return true
	}
	x.consult(&flow.Mask{InPort: ^uint32(0)})
	if pc(x.key.InPort)&ofpwire.PortConfigNoPacketIn != 0 {
		if x.tr != nil {
			x.traceNote(TraceDrop, fmt.Sprintf("in_port %d is NO_PACKET_IN: no packet-in", x.key.InPort))
		}
		return false
	}
	return true
}

// floodable reports whether a NORMAL flood may include port: FloodPorts,
// when set, lists the ports without NO_FLOOD.
func (x *xlator) floodable(port uint32) bool {
	if x.opts.FloodPorts == nil || len(x.opts.FloodPorts) == len(x.opts.Ports) {
		return true // a subset of Ports as long as Ports leaves nothing out
	}
	for _, p := range x.opts.FloodPorts {
		if p == port {
			return true
		}
	}
	return false
}

// tagState is the outer 802.1Q tag of the packet as the datapath holds it
// while NORMAL's outputs are emitted.
type tagState struct {
	present bool
	tpid    uint16
	tci     uint16
}

// normal translates output to OFPP_NORMAL: the switch decides on the
// working key, each output gets the tag treatment it asks for, and the
// packet is put back in its pre-NORMAL tag state afterwards, because NORMAL
// does not rewrite the packet the rest of the pipeline sees. The fields the
// decision read are added to the mask (those still original).
func (x *xlator) normal() error {
	d := &x.dec
	if x.tr != nil {
		x.decideWithoutLearning(d)
	} else {
		x.opts.Normal.DecideInto(&x.key, x.opts.Now, d)
	}
	var m flow.Mask
	d.Deps.AddToMask(&m)
	x.consult(&m)
	x.filterNormal(d)
	if x.tr != nil {
		x.traceNormal(d)
	}
	orig := tagState{present: x.key.VLAN[0].TPID&flow.TPIDPresent != 0,
		tpid: x.key.VLAN[0].TPID, tci: x.key.VLAN[0].TCI}
	cur := orig
	for _, o := range d.Outputs {
		if o.VLAN == normal.VLANPop {
			// The popped tag is pushed back afterwards, rebuilt whole:
			// its TPID and PCP become part of the answer.
			x.consult(&flow.Mask{VLAN: [2]flow.VLANTag{{TPID: 0xffff, TCI: 0xffff}}})
			break
		}
	}
	for _, o := range d.Outputs {
		want := orig
		switch o.VLAN {
		case normal.VLANPush:
			want = tagState{present: true, tpid: header.EtherTypeVLAN, tci: o.VID & 0x0fff}
		case normal.VLANPop:
			want = tagState{}
		case normal.VLANRewrite:
			want.tci = orig.tci&^0x0fff | o.VID&0x0fff
		}
		if err := x.retag(&cur, want); err != nil {
			return err
		}
		if err := x.emit(actions.OutputTo(o.Port)); err != nil {
			return err
		}
	}
	return x.retag(&cur, orig)
}

// filterNormal drops, in place, the outputs of d that port config forbids:
// ports with NO_FWD or PORT_DOWN, and, in a flood, ports left out of
// FloodPorts (NO_FLOOD). A learned destination is reached even when it is
// NO_FLOOD, as NO_FLOOD only keeps a port out of floods.
func (x *xlator) filterNormal(d *normal.Decision) {
	pc := x.opts.PortConfig
	if pc == nil && x.opts.FloodPorts == nil {
		return
	}
	n := 0
	for _, o := range d.Outputs {
		if pc != nil && pc(o.Port)&fwdBlocked != 0 {
			if x.tr != nil {
				x.traceNote(TraceDrop, fmt.Sprintf("NORMAL: output:%d skipped: port config %s", o.Port, configText(pc(o.Port)&fwdBlocked)))
			}
			continue
		}
		if d.Flooded && !x.floodable(o.Port) {
			if x.tr != nil {
				x.traceNote(TraceDrop, fmt.Sprintf("NORMAL: flood skips port %d (NO_FLOOD)", o.Port))
			}
			continue
		}
		d.Outputs[n] = o
		n++
	}
	d.Outputs = d.Outputs[:n]
}

// retag emits the datapath actions that take the outer tag from *cur to
// want, and records want in *cur.
func (x *xlator) retag(cur *tagState, want tagState) error {
	var err error
	switch {
	case *cur == want:
		return nil
	case cur.present && !want.present:
		err = x.emit(actions.Action{Kind: actions.PopVLAN})
	case !cur.present && want.present:
		err = x.emit(actions.Action{Kind: actions.PushVLAN, Val16: want.tpid, Val16b: want.tci})
	default:
		msk := uint16(0x0fff)
		if (cur.tci^want.tci)&^0x0fff != 0 {
			msk = 0xffff
		}
		err = x.emit(actions.Action{Kind: actions.SetVLANTCI, Val16: msk, Val16b: want.tci & msk})
	}
	*cur = want
	return err
}

// outputReg outputs to the port a subfield holds (output:FIELD[range]):
// a 16-bit OpenFlow port number, reserved ports from 0xff00, as in Open
// vSwitch; a value past 16 bits outputs nothing. The bits read join the
// mask when they are the packet's.
func (x *xlator) outputReg(a *ofpwire.ActionOutputReg, table uint8, miss bool) error {
	v := ofpwire.Bits(x.subfield(a.Field, int(a.Ofs), int(a.NBits)), 0, int(a.NBits))
	if v > 0xffff {
		return nil
	}
	port := ofpwire.PortNo(ofmatch.InPort32(uint16(v)))
	if port == 0 || port == ofpwire.PortAny || port > ofpwire.PortMax && port < ofpwire.PortIn {
		return nil // no such port: nothing is sent
	}
	return x.output(&ofpwire.ActionOutput{Port: port, MaxLen: a.MaxLen}, table, miss)
}

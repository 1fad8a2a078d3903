package xlate

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// Trace is the record of one translation, step by step, for operators
// asking why a packet goes where it goes (Open vSwitch's ofproto/trace).
// Its Actions and Mask are what Translate returns for the same key and
// bridge state.
type Trace struct {
	// Bridge names the bridge in the rendering; the caller sets it.
	Bridge string
	// Flow is the packet traced.
	Flow flow.Key
	// Ingress holds what happened before the first table (a packet
	// refused by its in_port's config).
	Ingress []TraceEvent
	// Steps are the tables visited, in order.
	Steps []TraceStep
	// FinalFlow is the packet as the pipeline left it.
	FinalFlow flow.Key
	// Mask is the megaflow mask: Flow under Mask is the megaflow that
	// would be installed.
	Mask flow.Mask
	// Actions are the datapath actions.
	Actions actions.List
	// Err is the translation's error; the steps stop where it happened.
	Err error
	// RecircID is the recirc_id the translation froze under (its last
	// datapath action recirculates the packet), 0 if it did not.
	RecircID uint32
	// Next is the translation of the recirculated packet: FinalFlow with
	// RecircID (the fields behind a popped header are not in the traced
	// flow, so they are what the flow says: zero), resumed where this one
	// froze. Nil if it did not freeze, or past the datapath's bound.
	Next *Trace
	// Forks are the check_pkt_larger actions among Actions, in order,
	// with the translations of both continuations: a trace has no
	// packet length, so both are shown, as in Open vSwitch's.
	Forks []TraceFork
	// forkKeys are the packet as it was at each fork.
	forkKeys []flow.Key
	// CTResumes are the ct(table=N) actions among Actions, in order:
	// each recirculates a tracked copy of the packet, which the trace
	// follows with an assumed ct_state (Open vSwitch's --ct-next).
	CTResumes []CTResume
}

// CTResume is the tracked copy of the packet a ct(table=N) recirculates:
// the packet as it was at the ct, in the ct's zone with the mark and label
// its commit writes, under ID, assumed to come out of the tracker in State
// (a trace runs no tracker), and what the walk resumed at table N does with
// it.
type CTResume struct {
	ID    uint32
	State uint8
	// Default says State is trk|new because no --ct-next state was left.
	Default bool
	// NAT is the ct's nat(src|dst=...) with an address range: the trace
	// rewrites the packet to the range's first address and port, as if
	// the tracker had picked them (Initial and Modified show both), so
	// that later tables see a translated packet. Nil without one.
	NAT               *ofpwire.ActionNAT
	Initial, Modified string
	Trace             *Trace
	key               flow.Key
}

// TraceFork is one check_pkt_larger of a trace: the continuation of a
// packet longer than Size bytes, and of one that is not.
type TraceFork struct {
	Size              uint16
	Longer, NotLonger *Trace
}

// TraceStep is one table lookup and what the entry it found did.
type TraceStep struct {
	Table uint8
	// Matched is false for a table miss without a table-miss entry.
	Matched bool
	// Priority, Cookie, Match (ovs-ofctl syntax) and Instructions (the
	// text after "actions=") describe the entry matched.
	Priority     uint16
	Cookie       uint64
	Match        string
	Instructions string
	// Events are the instructions and actions executed, in order,
	// including those of the action set when this is the last step.
	Events []TraceEvent
}

// TraceEventKind says what a TraceEvent records.
type TraceEventKind uint8

// The things a trace records.
const (
	// TraceAction is an OpenFlow action executed (apply-actions, a group
	// bucket or the action set); Text is it in ovs-ofctl syntax.
	TraceAction TraceEventKind = iota
	// TraceWriteActions is a write-actions instruction.
	TraceWriteActions
	// TraceClearActions is a clear-actions instruction.
	TraceClearActions
	// TraceWriteMetadata is a write-metadata instruction; Metadata is the
	// register after it.
	TraceWriteMetadata
	// TraceGoto is a goto-table instruction to Table.
	TraceGoto
	// TraceActionSet marks the start of the action set's execution.
	TraceActionSet
	// TraceGroup is a group run: Group, GroupType and the Bucket index
	// run (-1: none, so the packet is dropped there).
	TraceGroup
	// TraceNormal is NORMAL's decision, in Normal.
	TraceNormal
	// TraceDrop is an output or the whole packet dropped; Text says why.
	TraceDrop
	// TraceRecirc is the walk freezing (recirculating the packet) or
	// thawing (going on where a frozen walk stopped).
	TraceRecirc
)

// TraceEvent is one thing the translation did.
type TraceEvent struct {
	Kind TraceEventKind
	// Depth is how deep in group buckets and the action set it happened.
	Depth int
	// Text is the event as the rendering prints it.
	Text      string
	Table     uint8
	Metadata  uint64
	Group     uint32
	GroupType ofpwire.GroupType
	Bucket    int
	Normal    *NormalTrace
}

// NormalTrace is what NORMAL decided in a trace.
type NormalTrace struct {
	// InPort and VLAN are where the frame came from and the VLAN it was
	// classified into.
	InPort uint32
	VLAN   uint16
	// Outputs are the ports sent to with their tag treatment, after the
	// port config filter.
	Outputs []normal.Output
	// Flooded says the destination was unknown or multicast.
	Flooded bool
	// Drop is why nothing was sent, when it was NORMAL's own choice.
	Drop normal.DropReason
	// WouldLearn says a real packet would have taught the switch its
	// source MAC on InPort; a trace never does.
	WouldLearn bool
}

// TranslateTrace is Translate recording every step into a Trace. It has no
// side effects on the bridge's state beyond Translate's own table lookup
// counters (pipeline has no uncounted lookup): NORMAL does not learn the
// packet's source MAC, and no entry, group or bucket counter moves. The
// trace is returned even on error, with Err set and the steps up to the
// failure.
//
// ctNext are the ct_state values the packets recirculated by ct(table=N)
// are assumed to come back from the tracker with, one per ct in the order
// the trace meets them; past them, trk|new (Open vSwitch's --ct-next).
func TranslateTrace(p *pipeline.Pipeline, key *flow.Key, opts Options, ctNext ...uint8) (*Trace, error) {
	tr := &Trace{Flow: *key}
	var res datapath.UpcallResult
	err := translate(p, key, &res, opts, tr)
	if err == nil {
		err = tr.follow(p, opts, 0, &ctNext)
	}
	return tr, err
}

// follow translates what the trace's packet goes on to in the caches: the
// walk it froze under RecircID, the tracked copies its ct(table=N)
// actions recirculate, and both continuations of each check_pkt_larger,
// as far as the datapath would recirculate. ctNext are the ct states not
// yet taken (see TranslateTrace).
func (t *Trace) follow(p *pipeline.Pipeline, opts Options, depth int, ctNext *[]uint8) error {
	if depth >= datapath.MaxRecirculations {
		return nil
	}
	next := func(k flow.Key, id uint32) (*Trace, error) {
		k.RecircID = uint16(id)
		n := &Trace{Bridge: t.Bridge, Flow: k}
		var res datapath.UpcallResult
		if err := translate(p, &k, &res, opts, n); err != nil {
			return n, err
		}
		return n, n.follow(p, opts, depth+1, ctNext)
	}
	var err error
	if t.RecircID != 0 {
		if t.Next, err = next(t.FinalFlow, t.RecircID); err != nil {
			return err
		}
	}
	for i := range t.CTResumes {
		r := &t.CTResumes[i]
		r.State, r.Default = flow.CTTracked|flow.CTNew, true
		if len(*ctNext) > 0 {
			r.State, r.Default = (*ctNext)[0], false
			*ctNext = (*ctNext)[1:]
		}
		k := r.key
		k.CT.State = r.State
		if r.NAT != nil {
			r.Initial = ipFlowText(&k)
			simulateNAT(&k, r.NAT)
			r.Modified = ipFlowText(&k)
		}
		if r.Trace, err = next(k, r.ID); err != nil {
			return err
		}
	}
	forks := 0
	for i := range t.Actions {
		a := &t.Actions[i]
		if a.Kind != actions.CheckPktLen {
			continue
		}
		k := t.FinalFlow
		if forks < len(t.forkKeys) {
			k = t.forkKeys[forks]
		}
		forks++
		f := TraceFork{Size: a.Val16}
		f.Longer, err = next(k, a.GreaterID())
		if err == nil {
			f.NotLonger, err = next(k, a.LessEqualID())
		}
		t.Forks = append(t.Forks, f)
		if err != nil {
			return err
		}
	}
	return nil
}

// finish copies the walk's results into the trace.
func (t *Trace) finish(x *xlator, err error) {
	t.FinalFlow = x.key
	t.Mask = *x.mask
	t.Actions = append(actions.List(nil), x.out...)
	t.Err = err
	t.RecircID = x.recircID
}

func (t *Trace) addStep(tid uint8, e *pipeline.Entry) {
	s := TraceStep{Table: tid}
	if e != nil {
		s.Matched = true
		s.Priority, s.Cookie = e.Priority, e.Cookie
		m := e.Match()
		s.Match = ofptext.FormatMatch(&m)
		s.Instructions = ofptext.FormatInstructions(e.Instructions())
	}
	t.Steps = append(t.Steps, s)
}

func (x *xlator) traceEvent(ev TraceEvent) {
	ev.Depth = x.tind
	t := x.tr
	if len(t.Steps) == 0 {
		t.Ingress = append(t.Ingress, ev)
		return
	}
	s := &t.Steps[len(t.Steps)-1]
	s.Events = append(s.Events, ev)
}

func (x *xlator) traceNote(kind TraceEventKind, text string) {
	x.traceEvent(TraceEvent{Kind: kind, Text: text})
}

// actionText prints one action in ovs-ofctl syntax.
func actionText(a ofpwire.Action) string {
	return ofptext.FormatInstructions([]ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{a}}})
}

func (x *xlator) traceAction(a ofpwire.Action) {
	x.traceNote(TraceAction, actionText(a))
}

func (x *xlator) traceWriteActions(acts []ofpwire.Action) {
	x.traceNote(TraceWriteActions, ofptext.FormatInstructions([]ofpwire.Instruction{&ofpwire.InstrWriteActions{Actions: acts}}))
}

func (x *xlator) traceMetadata(in *ofpwire.InstrWriteMetadata, md uint64) {
	text := ofptext.FormatInstructions([]ofpwire.Instruction{in})
	x.traceEvent(TraceEvent{Kind: TraceWriteMetadata, Metadata: md,
		Text: fmt.Sprintf("%s -> metadata=%#x", text, md)})
}

var groupTypeNames = [...]string{ofpwire.GroupTypeAll: "all", ofpwire.GroupTypeSelect: "select",
	ofpwire.GroupTypeIndirect: "indirect", ofpwire.GroupTypeFastFailover: "fast_failover"}

func groupTypeName(t ofpwire.GroupType) string {
	if int(t) < len(groupTypeNames) {
		return groupTypeNames[t]
	}
	return "type " + strconv.Itoa(int(t))
}

// traceGroup records that group g runs bucket b (nil: none).
func (x *xlator) traceGroup(g *pipeline.Group, b *pipeline.Bucket) {
	bs := g.Buckets()
	idx := -1
	for i := range bs {
		if &bs[i] == b {
			idx = i
		}
	}
	typ := g.Type()
	var text string
	switch {
	case idx >= 0:
		text = fmt.Sprintf("-> group %d (%s): bucket %d of %d", g.ID, groupTypeName(typ), idx, len(bs))
	case typ == ofpwire.GroupTypeAll || len(bs) == 0:
		text = fmt.Sprintf("-> group %d (%s): no buckets: dropped", g.ID, groupTypeName(typ))
	default:
		text = fmt.Sprintf("-> group %d (%s): no live bucket: dropped", g.ID, groupTypeName(typ))
	}
	x.traceEvent(TraceEvent{Kind: TraceGroup, Group: uint32(g.ID), GroupType: typ, Bucket: idx, Text: text})
}

// decideWithoutLearning is NORMAL's decision for a trace: the same as
// DecideInto's but without teaching the switch the source MAC. The switch
// learns only unicast sources, so deciding on a copy of the key whose
// source has the multicast bit set gives every other part of the decision
// unchanged: the source takes part in nothing but learning. The one case
// learning would change is a frame to its own source MAC, which a real
// packet would find learned on its in_port.
func (x *xlator) decideWithoutLearning(d *normal.Decision) {
	k := x.key
	unicastSrc := k.EthSrc[0]&1 == 0
	k.EthSrc[0] |= 1
	x.opts.Normal.DecideInto(&k, x.opts.Now, d)
	if unicastSrc && x.key.EthSrc == x.key.EthDst && len(d.Outputs) > 0 {
		d.Outputs = d.Outputs[:0]
		d.Flooded = false
		d.Drop = normal.DropDestIsInPort
	}
}

func (x *xlator) traceNormal(d *normal.Decision) {
	nt := &NormalTrace{InPort: x.key.InPort, VLAN: d.VLAN, Flooded: d.Flooded, Drop: d.Drop,
		Outputs: append([]normal.Output(nil), d.Outputs...),
		WouldLearn: x.key.EthSrc[0]&1 == 0 && d.Drop != normal.DropReservedMcast &&
			d.Drop != normal.DropUnknownInPort && d.Drop != normal.DropVLANNotAllowed &&
			d.Drop != normal.DropUntaggedNoNative}
	var b strings.Builder
	b.WriteString("NORMAL: ")
	switch d.Drop {
	case normal.DropReservedMcast, normal.DropUnknownInPort:
		fmt.Fprintf(&b, "dropped: %s", d.Drop)
	case normal.DropVLANNotAllowed, normal.DropUntaggedNoNative:
		fmt.Fprintf(&b, "in_port %d: dropped: %s", x.key.InPort, d.Drop)
	default:
		fmt.Fprintf(&b, "in_port %d, VLAN %d", x.key.InPort, d.VLAN)
		if nt.WouldLearn {
			fmt.Fprintf(&b, "; would learn %s on port %d (not in a trace)", macText(x.key.EthSrc), x.key.InPort)
		}
		switch {
		case d.Drop != normal.NotDropped:
			fmt.Fprintf(&b, "; dropped: %s", d.Drop)
		case d.Flooded:
			b.WriteString("; flooding to ")
			writeOutputs(&b, d.Outputs)
		default:
			fmt.Fprintf(&b, "; %s learned: output to ", macText(x.key.EthDst))
			writeOutputs(&b, d.Outputs)
		}
	}
	x.traceEvent(TraceEvent{Kind: TraceNormal, Normal: nt, Text: b.String()})
}

func writeOutputs(b *strings.Builder, outs []normal.Output) {
	if len(outs) == 0 {
		b.WriteString("no port")
		return
	}
	for i, o := range outs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatUint(uint64(o.Port), 10))
		switch o.VLAN {
		case normal.VLANPush:
			fmt.Fprintf(b, " (push VLAN %d)", o.VID)
		case normal.VLANPop:
			b.WriteString(" (pop VLAN)")
		case normal.VLANRewrite:
			fmt.Fprintf(b, " (rewrite VID to %d)", o.VID)
		}
	}
}

func macText(m [6]byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5])
}

var configNames = []struct {
	bit  ofpwire.PortConfig
	name string
}{{ofpwire.PortConfigDown, "PORT_DOWN"}, {ofpwire.PortConfigNoRcv, "NO_RECV"}, {ofpwire.PortConfigNoFlood, "NO_FLOOD"},
	{ofpwire.PortConfigNoFwd, "NO_FWD"}, {ofpwire.PortConfigNoPacketIn, "NO_PACKET_IN"}}

// configText names the OFPPC_* bits of c.
func configText(c ofpwire.PortConfig) string {
	var parts []string
	for _, n := range configNames {
		if c&n.bit != 0 {
			parts = append(parts, n.name)
		}
	}
	if rest := c &^ (ofpwire.PortConfigDown | ofpwire.PortConfigNoRcv | ofpwire.PortConfigNoFlood | ofpwire.PortConfigNoFwd | ofpwire.PortConfigNoPacketIn); rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	return strings.Join(parts, "|")
}

// Megaflow is the key of the megaflow the translation would install:
// Flow with every bit outside Mask cleared.
func (t *Trace) Megaflow() flow.Key {
	var k flow.Key
	t.Flow.ApplyMask(&t.Mask, &k)
	return k
}

// String renders the trace the way ovs-appctl ofproto/trace does: the
// flow, the bridge, each table with the entry matched and what it did
// (indented deeper inside group buckets and the action set), then the
// final flow, the megaflow and the datapath actions.
func (t *Trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Flow: %s\n\n", t.Flow.String())
	header := fmt.Sprintf("bridge(%q)", t.Bridge)
	fmt.Fprintf(&b, "%s\n%s\n", header, strings.Repeat("-", len(header)))
	writeEvents(&b, t.Ingress)
	for i := range t.Steps {
		s := &t.Steps[i]
		fmt.Fprintf(&b, "%2d. ", s.Table)
		if !s.Matched {
			b.WriteString("No match (table miss): drop.\n")
		} else {
			if s.Match != "" {
				b.WriteString(s.Match + ", ")
			}
			fmt.Fprintf(&b, "priority %d", s.Priority)
			if s.Cookie != 0 {
				fmt.Fprintf(&b, ", cookie %#x", s.Cookie)
			}
			b.WriteString("\n")
			if len(s.Events) == 0 {
				b.WriteString("    drop\n")
			}
		}
		writeEvents(&b, s.Events)
	}
	if len(t.Steps) == 0 && len(t.Ingress) == 0 {
		b.WriteString("    (no table visited)\n")
	}
	fmt.Fprintf(&b, "\nFinal flow: ")
	if t.FinalFlow == t.Flow {
		b.WriteString("unchanged\n")
	} else {
		b.WriteString(t.FinalFlow.String() + "\n")
	}
	mk := t.Megaflow()
	fmt.Fprintf(&b, "Megaflow: %s\n", flow.FormatMatch(&mk, &t.Mask))
	if t.Err != nil {
		fmt.Fprintf(&b, "Translation failed: %v\n", t.Err)
		return b.String()
	}
	fmt.Fprintf(&b, "Datapath actions: %s\n", t.Actions.String())
	if t.Next != nil {
		rule := strings.Repeat("=", 79)
		fmt.Fprintf(&b, "\n%s\nrecirc(%#x) - resume the walk where it froze\n%s\n\n", rule, t.RecircID, rule)
		t.Next.Bridge = t.Bridge
		b.WriteString(t.Next.String())
	}
	for i := range t.CTResumes {
		r := &t.CTResumes[i]
		if r.Trace == nil {
			continue
		}
		// Open vSwitch's header for a conntrack recirculation, word for word.
		fmt.Fprintf(&b, "\n\n%s\nrecirc(%#x)", strings.Repeat("=", 79), r.ID)
		if r.Default {
			b.WriteString(" - resume conntrack with default ct_state=trk|new (use --ct-next to customize)\n")
		} else {
			fmt.Fprintf(&b, " - resume conntrack with ct_state=%s\n", ofptext.FormatCTStateFlags(r.State))
		}
		if r.NAT != nil {
			fmt.Fprintf(&b, "Replacing src/dst IP/ports to simulate NAT:\n Initial flow: %s\n Modified flow: %s\n", r.Initial, r.Modified)
		}
		fmt.Fprintf(&b, "%s\n\n", strings.Repeat("=", 79))
		r.Trace.Bridge = t.Bridge
		b.WriteString(r.Trace.String())
	}
	for _, f := range t.Forks {
		rule := strings.Repeat("=", 79)
		for _, br := range []struct {
			what string
			t    *Trace
		}{{fmt.Sprintf("longer than %d bytes", f.Size), f.Longer}, {fmt.Sprintf("%d bytes or shorter", f.Size), f.NotLonger}} {
			if br.t == nil {
				continue
			}
			fmt.Fprintf(&b, "\n%s\ncheck_pkt_len(size=%d) - a packet %s: recirc(%#x)\n%s\n\n", rule, f.Size, br.what, br.t.Flow.RecircID, rule)
			br.t.Bridge = t.Bridge
			b.WriteString(br.t.String())
		}
	}
	return b.String()
}

func writeEvents(b *strings.Builder, evs []TraceEvent) {
	for _, ev := range evs {
		b.WriteString(strings.Repeat("    ", ev.Depth+1))
		if ev.Kind == TraceDrop {
			b.WriteString(">> ")
		}
		b.WriteString(ev.Text)
		b.WriteByte('\n')
	}
}

// ipFlowText is the addresses and ports of k as Open vSwitch's trace
// shows them around a simulated NAT.
func ipFlowText(k *flow.Key) string {
	if k.EthType == header.EtherTypeIPv6 {
		return fmt.Sprintf("ipv6_src=%s,tp_src=%d,ipv6_dst=%s,tp_dst=%d",
			netip.AddrFrom16(k.IPv6Src), k.TpSrc, netip.AddrFrom16(k.IPv6Dst), k.TpDst)
	}
	v4 := func(a uint32) netip.Addr {
		return netip.AddrFrom4([4]byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)})
	}
	return fmt.Sprintf("nw_src=%s,tp_src=%d,nw_dst=%s,tp_dst=%d", v4(k.IPv4Src), k.TpSrc, v4(k.IPv4Dst), k.TpDst)
}

// simulateNAT rewrites k as the tracker would translate it to the first
// address and port of n's range (a trace picks no free one).
func simulateNAT(k *flow.Key, n *ofpwire.ActionNAT) {
	src := n.Flags&ofpwire.NATSrc != 0
	if !src && n.Flags&ofpwire.NATDst == 0 {
		return
	}
	ip4, ip6, tp := &k.IPv4Dst, &k.IPv6Dst, &k.TpDst
	if src {
		ip4, ip6, tp = &k.IPv4Src, &k.IPv6Src, &k.TpSrc
	}
	switch {
	case k.EthType == header.EtherTypeIPv4 && n.RangePresent&ofpwire.NATRangeIPv4Min != 0:
		*ip4 = binary.BigEndian.Uint32(n.IPv4Min[:])
	case k.EthType == header.EtherTypeIPv6 && n.RangePresent&ofpwire.NATRangeIPv6Min != 0:
		*ip6 = n.IPv6Min
	}
	if n.RangePresent&ofpwire.NATRangeProtoMin != 0 && n.ProtoMin != 0 {
		*tp = n.ProtoMin
	}
}

package xlate

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

var t0 = time.Unix(1700000000, 0)

func oxm(f ofpwire.XMType, v uint64) ofpwire.OXM { return ofpwire.OXMUint(f, v) }

func oxmM(f ofpwire.XMType, v, m uint64) ofpwire.OXM { return ofpwire.OXMUintMasked(f, v, m) }

// flowSpec is one entry to add.
type flowSpec struct {
	table uint8
	prio  uint16
	match []ofpwire.OXM
	ins   []ofpwire.Instruction
}

func build(t testing.TB, fs []flowSpec) *pipeline.Pipeline {
	t.Helper()
	p := pipeline.New(0)
	for _, f := range fs {
		fm := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: f.table, Priority: f.prio,
			Match: ofpwire.Match{Fields: f.match}, Instructions: f.ins,
			OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
		if _, err := p.Apply(fm, t0); err != nil {
			t.Fatalf("add %+v: %v", f, err)
		}
	}
	return p
}

func apply(acts ...ofpwire.Action) *ofpwire.InstrApplyActions {
	return &ofpwire.InstrApplyActions{Actions: acts}
}
func write(acts ...ofpwire.Action) *ofpwire.InstrWriteActions {
	return &ofpwire.InstrWriteActions{Actions: acts}
}
func gotoT(t uint8) *ofpwire.InstrGotoTable { return &ofpwire.InstrGotoTable{TableID: t} }
func out(p uint32) *ofpwire.ActionOutput    { return &ofpwire.ActionOutput{Port: ofpwire.PortNo(p)} }
func setF(f ofpwire.XMType, v uint64) *ofpwire.ActionSetField {
	return &ofpwire.ActionSetField{Field: oxm(f, v)}
}
func ins(is ...ofpwire.Instruction) []ofpwire.Instruction { return is }

func dpOut(p uint32) actions.Action { return actions.OutputTo(p) }

func ipv4Key() flow.Key {
	return flow.Key{InPort: 1, EthType: 0x0800, NwProto: 6, NwTTL: 64,
		IPv4Src: 0x0a000001, IPv4Dst: 0x0a000002, TpSrc: 1234, TpDst: 80}
}

func TestTranslateCases(t *testing.T) {
	ipv4 := oxm(ofpwire.XMTypeEthType, 0x0800)
	tagged := ipv4Key()
	tagged.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: 0x2005}
	ttl1 := ipv4Key()
	ttl1.NwTTL = 1
	v6 := ipv4Key()
	v6.EthType = 0x86dd
	later := ipv4Key()
	later.NwFrag = flow.FragAny | flow.FragLater
	addr := func(kind actions.Kind, b ...byte) actions.Action {
		a := actions.Action{Kind: kind}
		copy(a.Addr[:], b)
		return a
	}
	many := make([]uint32, MaxActions+1)
	for i := range many {
		many[i] = uint32(i + 10)
	}
	cases := []translateCase{
		{name: "empty pipeline drops", key: ipv4Key(), want: nil,
			mask: func(m *flow.Mask) bool { return m.IsZero() }},
		{name: "output", flows: []flowSpec{{0, 1, nil, ins(apply(out(2)))}}, key: ipv4Key(),
			want: actions.List{dpOut(2)}, mask: func(m *flow.Mask) bool { return m.InPort == ^uint32(0) }},
		{name: "output to in_port by number drops", flows: []flowSpec{{0, 1, nil, ins(apply(out(1), out(3)))}},
			key: ipv4Key(), want: actions.List{dpOut(3)}},
		{name: "IN_PORT", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortIn))))}},
			key: ipv4Key(), want: actions.List{dpOut(1)}},
		{name: "ALL", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortAll))))}},
			key: ipv4Key(), opts: Options{Ports: []uint32{1, 2, 3}}, want: actions.List{dpOut(2), dpOut(3)}},
		{name: "FLOOD", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortFlood))))}},
			key: ipv4Key(), opts: Options{Ports: []uint32{3, 1}}, want: actions.List{dpOut(3)}},
		{name: "LOCAL", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortLocal))))}},
			key: ipv4Key(), opts: Options{LocalPort: 9}, want: actions.List{dpOut(9)}},
		{name: "LOCAL without local port", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortLocal))))}},
			key: ipv4Key(), want: nil},
		{name: "CONTROLLER", flows: []flowSpec{{0, 5, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)},
			ins(apply(&ofpwire.ActionOutput{Port: ofpwire.PortController, MaxLen: 128}))}}, key: ipv4Key(),
			want: actions.List{{Kind: actions.Controller, Val32: ControllerArg(ofpwire.PacketInReasonAction, 0, 128)}}},
		{name: "table-miss entry to CONTROLLER is NO_MATCH", flows: []flowSpec{
			{0, 1, nil, ins(gotoT(3))},
			{3, 0, nil, ins(apply(&ofpwire.ActionOutput{Port: ofpwire.PortController, MaxLen: 0xffff}))}},
			key:  ipv4Key(),
			want: actions.List{{Kind: actions.Controller, Val32: ControllerArg(ofpwire.PacketInReasonNoMatch, 3, 0xffff)}}},
		{name: "NORMAL unsupported", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortNormal))))}},
			key: ipv4Key(), err: ErrUnsupported},
		{name: "TABLE unsupported", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortTable))))}},
			key: ipv4Key(), err: ErrUnsupported},
		{name: "group unsupported", flows: []flowSpec{{0, 1, nil, ins(write(&ofpwire.ActionGroup{Group: 1}))}},
			key: ipv4Key(), err: ErrUnsupported},
		{name: "experimenter unsupported", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionExperimenter{Experimenter: 0x2320}))}},
			key: ipv4Key(), err: ErrUnsupported},
		{name: "meter instruction becomes a meter action", flows: []flowSpec{{0, 1, nil, ins(&ofpwire.InstrMeter{MeterID: 1}, apply(out(2)))}},
			key: ipv4Key(), want: actions.List{actions.MeterAction(1), dpOut(2)}},
		{name: "set-field IP_PROTO keeps the ports (TCP to UDP)", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeIPProto, 17),
			setF(ofpwire.XMTypeUDPDst, 53), out(2)))}},
			key: ipv4Key(), want: actions.List{{Kind: actions.SetIPProto, Val8: 17}, {Kind: actions.SetL4Dst, Val16: 53}, dpOut(2)}},
		{name: "too many actions", flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortAll))))}},
			key: ipv4Key(), opts: Options{Ports: many}, err: ErrTooManyActions},
		{name: "set eth and ipv4", flows: []flowSpec{{0, 1, nil, ins(apply(
			&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeEthDst, []byte{2, 0, 0, 0, 0, 7})},
			setF(ofpwire.XMTypeIPv4Src, 0x0b000001), out(2)))}}, key: ipv4Key(),
			want: actions.List{addr(actions.SetEthDst, 2, 0, 0, 0, 0, 7), addr(actions.SetIPv4Src, 11, 0, 0, 1), dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.EthType == 0xffff && m.IPv4Src == 0 && m.EthDst == [6]byte{} }},
		{name: "set ipv4 on ipv6 packet does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(
			setF(ofpwire.XMTypeIPv4Src, 0x0b000001), out(2)))}}, key: v6, want: actions.List{dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.EthType == 0xffff }},
		{name: "set ipv6 dst", flows: []flowSpec{{0, 1, nil, ins(apply(
			&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeIPv6Dst, []byte{0x20, 1, 15: 9})}))}},
			key: v6, want: actions.List{addr(actions.SetIPv6Dst, 0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9)}},
		{name: "set tcp dst", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeTCPDst, 8080)))}},
			key: ipv4Key(), want: actions.List{{Kind: actions.SetL4Dst, Val16: 8080}},
			mask: func(m *flow.Mask) bool {
				return m.EthType == 0xffff && m.NwProto == 0xff && m.NwFrag&flow.FragLater != 0 && m.TpDst == 0
			}},
		{name: "set udp src on tcp packet does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeUDPSrc, 53)))}},
			key: ipv4Key(), want: nil, mask: func(m *flow.Mask) bool { return m.NwProto == 0xff }},
		{name: "set tcp on later fragment does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeTCPSrc, 1)))}},
			key: later, want: nil},
		{name: "set dscp and ecn", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeIPDSCP, 46), setF(ofpwire.XMTypeIPECN, 1)))}},
			key: ipv4Key(), want: actions.List{{Kind: actions.SetIPTOS, Val8: 46 << 2, Mask8: 0xfc}, {Kind: actions.SetIPTOS, Val8: 1, Mask8: 3}}},
		{name: "set vlan vid and pcp", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeVlanID, 0x1000|7), setF(ofpwire.XMTypeVlanPCP, 3)))}},
			key: tagged, want: actions.List{{Kind: actions.SetVLANTCI, Val16: 0x0fff, Val16b: 7}, {Kind: actions.SetVLANTCI, Val16: 0xe000, Val16b: 3 << 13}}},
		{name: "set vlan vid untagged does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(setF(ofpwire.XMTypeVlanID, 0x1000|7)))}},
			key: ipv4Key(), want: nil, mask: func(m *flow.Mask) bool { return m.VLAN[0].TPID&flow.TPIDPresent != 0 }},
		{name: "push vlan copies outer tag", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPushVLAN{EtherType: 0x88a8}))}},
			key: tagged, want: actions.List{{Kind: actions.PushVLAN, Val16: 0x88a8, Val16b: 0x2005}}},
		{name: "push vlan untagged then match pushed tag", flows: []flowSpec{
			{0, 1, nil, ins(apply(&ofpwire.ActionPushVLAN{EtherType: 0x8100}, setF(ofpwire.XMTypeVlanID, 0x1000|5)), gotoT(1))},
			{1, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeVlanID, 0x1000|5)}, ins(apply(out(4)))}},
			key:  ipv4Key(),
			want: actions.List{{Kind: actions.PushVLAN, Val16: 0x8100}, {Kind: actions.SetVLANTCI, Val16: 0x0fff, Val16b: 5}, dpOut(4)}},
		{name: "pop vlan untagged does nothing", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionPopVLAN{}))}},
			key: ipv4Key(), want: nil},
		{name: "set nw ttl", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionSetNwTTL{TTL: 9}))}},
			key: ipv4Key(), want: actions.List{{Kind: actions.SetIPTTL, Val8: 9}}},
		{name: "dec ttl", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionDecNwTTL{}, out(2)))}},
			key: ipv4Key(), want: actions.List{{Kind: actions.DecIPTTL}, dpOut(2)},
			mask: func(m *flow.Mask) bool { return m.NwTTL == 0xff }},
		{name: "dec ttl invalid goes to controller and stops", flows: []flowSpec{
			{0, 1, nil, ins(apply(out(3), &ofpwire.ActionDecNwTTL{}, out(2)), write(out(5)))}},
			key: ttl1, want: actions.List{dpOut(3), {Kind: actions.Controller, Val32: ControllerArg(ofpwire.PacketInReasonInvalidTTL, 0, 0xffff)}}},
		{name: "dec ttl invalid dropped by option", flows: []flowSpec{{0, 1, nil, ins(apply(&ofpwire.ActionDecNwTTL{}, out(2)))}},
			key: ttl1, opts: Options{NoInvalidTTLToController: true}, want: nil},
		{name: "write-actions output runs at the end", flows: []flowSpec{
			{0, 1, nil, ins(write(out(5)), apply(out(2)), gotoT(1))},
			{1, 1, nil, ins(apply(out(3)))}},
			key: ipv4Key(), want: actions.List{dpOut(2), dpOut(3), dpOut(5)}},
		{name: "later write-actions overwrite per type and field", flows: []flowSpec{
			{0, 1, nil, ins(write(out(5), setF(ofpwire.XMTypeIPv4Dst, 1), setF(ofpwire.XMTypeIPv4Src, 2)), gotoT(1))},
			{1, 1, nil, ins(write(out(6), setF(ofpwire.XMTypeIPv4Dst, 3)))}},
			key: ipv4Key(), want: actions.List{addr(actions.SetIPv4Src, 0, 0, 0, 2), addr(actions.SetIPv4Dst, 0, 0, 0, 3), dpOut(6)}},
		{name: "clear-actions empties the set", flows: []flowSpec{
			{0, 1, nil, ins(write(out(5)), gotoT(2))},
			{2, 1, nil, ins(&ofpwire.InstrClearActions{}, write(setF(ofpwire.XMTypeIPv4Dst, 3)))}},
			key: ipv4Key(), want: actions.List{addr(actions.SetIPv4Dst, 0, 0, 0, 3)}},
		{name: "action set order", flows: []flowSpec{
			{0, 1, nil, ins(write(out(3), setF(ofpwire.XMTypeIPv4Dst, 7), &ofpwire.ActionPushVLAN{EtherType: 0x8100},
				&ofpwire.ActionDecNwTTL{}, &ofpwire.ActionPopVLAN{}, &ofpwire.ActionSetNwTTL{TTL: 5}))}},
			key: tagged, want: actions.List{{Kind: actions.PopVLAN}, {Kind: actions.PushVLAN, Val16: 0x8100},
				{Kind: actions.DecIPTTL}, {Kind: actions.SetIPTTL, Val8: 5}, addr(actions.SetIPv4Dst, 0, 0, 0, 7), dpOut(3)}},
		{name: "write-metadata steers a later table", flows: []flowSpec{
			{0, 2, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)}, ins(&ofpwire.InstrWriteMetadata{Metadata: 0xab00, Mask: 0xff00}, gotoT(1))},
			{0, 1, nil, ins(&ofpwire.InstrWriteMetadata{Metadata: 0xcd00, Mask: 0xff00}, gotoT(1))},
			{1, 2, []ofpwire.OXM{oxmM(ofpwire.XMTypeMetadata, 0xab00, 0xff00)}, ins(apply(out(7)))},
			{1, 1, nil, ins(apply(out(8)))}},
			key: ipv4Key(), want: actions.List{dpOut(7)}},
		{name: "table miss mid-pipeline drops the action set", flows: []flowSpec{
			{0, 1, nil, ins(apply(out(4)), write(out(5)), gotoT(1))},
			{1, 1, []ofpwire.OXM{ipv4, oxm(ofpwire.XMTypeIPv4Src, 99)}, ins(apply(out(6)))}},
			key: ipv4Key(), want: actions.List{dpOut(4)}},
	}
	runTranslateCases(t, cases)
}

func TestControllerArgRoundTrip(t *testing.T) {
	r, tb, ml := ParseControllerArg(ControllerArg(ofpwire.PacketInReasonInvalidTTL, 200, 0x1234))
	if r != ofpwire.PacketInReasonInvalidTTL || tb != 200 || ml != 0x1234 {
		t.Fatalf("got %d %d %#x", r, tb, ml)
	}
}

// TestOverwrittenFieldNotInMask: a field rewritten before any lookup looked
// at it is a constant of the translation, so the megaflow wildcards it.
func TestOverwrittenFieldNotInMask(t *testing.T) {
	ipv4 := oxm(ofpwire.XMTypeEthType, 0x0800)
	rewrite := []flowSpec{
		{0, 1, []ofpwire.OXM{ipv4}, ins(apply(setF(ofpwire.XMTypeIPv4Dst, 0x0a000009)), gotoT(1))},
		{1, 5, []ofpwire.OXM{ipv4, oxm(ofpwire.XMTypeIPv4Dst, 0x0a000009)}, ins(apply(out(2)))},
		{1, 1, nil, ins(apply(out(3)))},
	}
	k := ipv4Key()
	var res datapath.UpcallResult
	if err := Translate(build(t, rewrite), &k, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	if res.Mask.IPv4Dst != 0 {
		t.Fatalf("ipv4_dst in mask (%#x) though it was overwritten before table 1 consulted it", res.Mask.IPv4Dst)
	}
	if res.Mask.EthType != 0xffff {
		t.Fatalf("eth_type missing from mask: %#x", res.Mask.EthType)
	}
	if want := (actions.List{{Kind: actions.SetIPv4Dst, Addr: [16]byte{10, 0, 0, 9}}, dpOut(2)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("actions %+v, want %+v", res.Actions, want)
	}
	// Without the rewrite, the same lookup does consult ipv4_dst.
	plain := []flowSpec{{0, 1, []ofpwire.OXM{ipv4}, ins(gotoT(1))}, rewrite[1], rewrite[2]}
	if err := Translate(build(t, plain), &k, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	if res.Mask.IPv4Dst != ^uint32(0) {
		t.Fatalf("ipv4_dst mask %#x, want all ones", res.Mask.IPv4Dst)
	}
	// Consulted first, then overwritten: it stays in the mask.
	after := []flowSpec{
		{0, 1, []ofpwire.OXM{ipv4, oxm(ofpwire.XMTypeIPv4Dst, 0x0a000002)}, ins(apply(setF(ofpwire.XMTypeIPv4Dst, 0x0a000009)), gotoT(1))},
		rewrite[1], rewrite[2],
	}
	if err := Translate(build(t, after), &k, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	if res.Mask.IPv4Dst != ^uint32(0) {
		t.Fatalf("ipv4_dst mask %#x after consult-then-write, want all ones", res.Mask.IPv4Dst)
	}
}

// translateCase is one table-driven translation: the flows, the packet's
// key and options, and the datapath actions expected (with an optional
// extra check of the megaflow mask) or the error.
type translateCase struct {
	name  string
	flows []flowSpec
	key   flow.Key
	opts  Options
	want  actions.List
	err   error
	mask  func(m *flow.Mask) bool // extra mask assertion
}

// runTranslateCases translates each case through its own pipeline.
func runTranslateCases(t *testing.T, cases []translateCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, c.flows)
			var res datapath.UpcallResult
			err := Translate(p, &c.key, &res, c.opts)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v (actions %+v)", err, c.err, res.Actions)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Actions, c.want) {
				t.Fatalf("actions\n got %+v\nwant %+v", res.Actions, c.want)
			}
			if c.mask != nil && !c.mask(&res.Mask) {
				t.Fatalf("mask %+v fails the case's check", res.Mask)
			}
		})
	}
}

// TestFoldVLANPairs: a tag pushed and popped again with only its own
// rewrites in between leaves no trace in the datapath actions; a tag that
// anything else saw stays, and so does a pop of the packet's own tag.
func TestFoldVLANPairs(t *testing.T) {
	push := actions.Action{Kind: actions.PushVLAN, Val16: 0x8100}
	set := actions.Action{Kind: actions.SetVLANTCI, Val16: 0x0fff, Val16b: 100}
	pop := actions.Action{Kind: actions.PopVLAN}
	for _, c := range []struct {
		name     string
		in, want actions.List
	}{
		{"faucet", actions.List{push, set, pop, dpOut(2)}, actions.List{dpOut(2)}},
		{"push pop", actions.List{push, pop, dpOut(2)}, actions.List{dpOut(2)}},
		{"two pairs", actions.List{push, pop, dpOut(2), push, set, set, pop, dpOut(3)}, actions.List{dpOut(2), dpOut(3)}},
		{"output sees the tag", actions.List{push, set, dpOut(2), pop, dpOut(3)}, actions.List{push, set, dpOut(2), pop, dpOut(3)}},
		{"pop then push", actions.List{pop, push, set, dpOut(2)}, actions.List{pop, push, set, dpOut(2)}},
		{"push left", actions.List{push, set, dpOut(2)}, actions.List{push, set, dpOut(2)}},
		{"other rewrite between", actions.List{push, {Kind: actions.DecIPTTL}, pop}, actions.List{push, {Kind: actions.DecIPTTL}, pop}},
	} {
		if got := foldVLANPairs(slices.Clone(c.in)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Through translation, as Faucet's tables produce it.
	p := build(t, []flowSpec{
		{0, 1, nil, ins(apply(&ofpwire.ActionPushVLAN{EtherType: 0x8100}, setF(ofpwire.XMTypeVlanID, 0x1000|100)), gotoT(1))},
		{1, 1, nil, ins(apply(&ofpwire.ActionPopVLAN{}, out(2)))}})
	var res datapath.UpcallResult
	key := ipv4Key()
	if err := Translate(p, &key, &res, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := (actions.List{dpOut(2)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("datapath actions %v, want %v", res.Actions, want)
	}
}

// TestFloodToAThousandPorts: output to ALL on a bridge of 1,000 ports
// translates to an output on each but the input port (it failed with
// ErrTooManyActions beyond 64, dropping every broadcast on such a bridge).
func TestFloodToAThousandPorts(t *testing.T) {
	p := build(t, []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortAll))))}})
	ports := make([]uint32, 1000)
	for i := range ports {
		ports[i] = uint32(i + 1)
	}
	key := ipv4Key() // in_port 1
	var res datapath.UpcallResult
	if err := Translate(p, &key, &res, Options{Ports: ports}); err != nil {
		t.Fatal(err)
	}
	if len(res.Actions) != len(ports)-1 {
		t.Fatalf("%d actions, want %d outputs", len(res.Actions), len(ports)-1)
	}
	for i, a := range res.Actions {
		if a != dpOut(uint32(i+2)) {
			t.Fatalf("action %d: %+v, want output:%d", i, a, i+2)
		}
	}
}

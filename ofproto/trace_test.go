package ofproto

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

func traceFlowMod(table uint8, prio uint16, cookie uint64, match []ofpwire.OXM, is ...ofpwire.Instruction) *ofpwire.FlowMod {
	return &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: table, Priority: prio, Cookie: cookie,
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny,
		Match: ofpwire.Match{Fields: match}, Instructions: is}
}

// traceBridge programs a three-table pipeline with a group and NORMAL:
//
//	table 0: in_port=1 -> metadata 1, goto 1; else goto 2
//	table 1: udp,tp_dst=2000 -> group 1 (ALL: port 2 as is, port 2 with udp_dst 9999)
//	         ip -> goto 2; anything else misses
//	table 2: NORMAL
func traceBridge(t *testing.T) *testBridge {
	t.Helper()
	tb := newTestBridge(t)
	u := func(f ofpwire.XMType, v uint64) ofpwire.OXM { return ofpwire.OXMUint(f, v) }
	apply := func(a ...ofpwire.Action) ofpwire.Instruction { return &ofpwire.InstrApplyActions{Actions: a} }
	gotoT := func(id uint8) ofpwire.Instruction { return &ofpwire.InstrGotoTable{TableID: id} }
	msgs := []ofpwire.Message{
		&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1, Buckets: []ofpwire.Bucket{
			bucketOut(2), bucketOut(2, &ofpwire.ActionSetField{Field: u(ofpwire.XMTypeUDPDst, 9999)})}},
		traceFlowMod(0, 100, 0x10, []ofpwire.OXM{u(ofpwire.XMTypeInPort, 1)},
			&ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 0xff}, gotoT(1)),
		traceFlowMod(0, 0, 0, nil, gotoT(2)),
		traceFlowMod(1, 200, 0x20, []ofpwire.OXM{u(ofpwire.XMTypeEthType, 0x0800), u(ofpwire.XMTypeIPProto, 17),
			u(ofpwire.XMTypeUDPDst, 2000)}, apply(&ofpwire.ActionGroup{Group: 1})),
		traceFlowMod(1, 10, 0, []ofpwire.OXM{u(ofpwire.XMTypeEthType, 0x0800)}, gotoT(2)),
		traceFlowMod(2, 0, 0, nil, apply(&ofpwire.ActionOutput{Port: ofpwire.PortNormal})),
	}
	for _, m := range msgs {
		if r := tb.c.request(m); len(r) != 0 {
			t.Fatalf("%T replies %#v", m, r)
		}
	}
	return tb
}

// traceAndUpcall traces key, then translates it as an upcall, and checks
// the two agree on the datapath actions and the megaflow.
func traceAndUpcall(t *testing.T, tb *testBridge, key flow.Key) *xlate.Trace {
	t.Helper()
	tr, err := tb.br.Trace(key)
	if err != nil {
		t.Fatal(err)
	}
	var res datapath.UpcallResult
	if err := tb.br.Upcall(&key, &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Actions, res.Actions) || tr.Mask != res.Mask {
		t.Fatalf("trace %v mask %+v\nupcall %v mask %+v", tr.Actions, tr.Mask, res.Actions, res.Mask)
	}
	return tr
}

func stepTables(tr *xlate.Trace) []uint8 {
	var ts []uint8
	for _, s := range tr.Steps {
		ts = append(ts, s.Table)
	}
	return ts
}

func TestBridgeTraceGroup(t *testing.T) {
	tb := traceBridge(t)
	var key flow.Key
	var off flow.Offsets
	flow.Extract(frame(), 1, &key, &off)
	tr := traceAndUpcall(t, tb, key)
	if got := stepTables(tr); !slices.Equal(got, []uint8{0, 1}) {
		t.Fatalf("tables %v", got)
	}
	s0, s1 := tr.Steps[0], tr.Steps[1]
	if s0.Cookie != 0x10 || s0.Priority != 100 || s0.Match != "in_port=1" ||
		s1.Cookie != 0x20 || s1.Match != "udp,tp_dst=2000" || s1.Instructions != "group:1" {
		t.Fatalf("rules %+v / %+v", s0, s1)
	}
	var buckets []int
	for _, e := range s1.Events {
		if e.Kind == xlate.TraceGroup && e.Group == 1 {
			buckets = append(buckets, e.Bucket)
		}
	}
	if !slices.Equal(buckets, []int{0, 1}) {
		t.Fatalf("group buckets run %v", buckets)
	}
	tr.Bridge = tb.br.Name()
	text := tr.String()
	for _, want := range []string{
		"bridge(\"br0\")",
		" 0. in_port=1, priority 100, cookie 0x10\n",
		" 1. udp,tp_dst=2000, priority 200, cookie 0x20\n    group:1\n    -> group 1 (all): bucket 0 of 2\n        output:2\n",
		"Datapath actions: output:2,set(l4(dst=9999)),output:2,set(l4(dst=2000))\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("trace lacks %q:\n%s", want, text)
		}
	}
	// What the trace says is what the datapath does with the packet.
	outputs := 0
	for _, a := range tr.Actions {
		if a.Kind == actions.Output {
			outputs++
		}
	}
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != outputs {
		t.Fatalf("datapath sent %d frames, trace says %d", len(got), outputs)
	}
}

func TestBridgeTraceNormalAndMiss(t *testing.T) {
	tb := traceBridge(t)
	key, err := ofptext.ParseTraceFlow("in_port=1,dl_src=02:00:00:00:00:0a,dl_dst=02:00:00:00:00:0b,tcp,nw_dst=198.18.0.2,tp_dst=80", ofptext.ParseFlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tb.br.Trace(key)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tb.br.Normal().Entries(time.Now())); n != 0 {
		t.Fatalf("a trace taught NORMAL %d MACs", n)
	}
	if got := stepTables(tr); !slices.Equal(got, []uint8{0, 1, 2}) {
		t.Fatalf("tables %v", got)
	}
	var nt *xlate.NormalTrace
	for _, e := range tr.Steps[2].Events {
		if e.Kind == xlate.TraceNormal {
			nt = e.Normal
		}
	}
	if nt == nil || !nt.Flooded || !nt.WouldLearn || len(nt.Outputs) != 1 || nt.Outputs[0].Port != 2 {
		t.Fatalf("NORMAL decision %+v", nt)
	}
	if want := (actions.List{actions.OutputTo(2)}); !slices.Equal(tr.Actions, want) {
		t.Fatalf("actions %v", tr.Actions)
	}
	traceAndUpcall(t, tb, key) // the upcall learns 02:..:0a on port 1
	if n := len(tb.br.Normal().Entries(time.Now())); n != 1 {
		t.Fatalf("upcall learned %d MACs, want 1", n)
	}
	// The answer from port 2 is now a learned unicast, traced as such.
	back, err := ofptext.ParseTraceFlow("in_port=2,dl_src=02:00:00:00:00:0b,dl_dst=02:00:00:00:00:0a,ip", ofptext.ParseFlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr = traceAndUpcall(t, tb, back)
	if got := stepTables(tr); !slices.Equal(got, []uint8{0, 2}) || !strings.Contains(tr.String(), "learned: output to 1") {
		t.Fatalf("tables %v:\n%s", got, tr.String())
	}

	// Non-IP from port 1 misses in table 1.
	arp, err := ofptext.ParseTraceFlow("in_port=1,arp", ofptext.ParseFlowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr = traceAndUpcall(t, tb, arp)
	if len(tr.Steps) != 2 || tr.Steps[1].Matched || len(tr.Actions) != 0 {
		t.Fatalf("steps %+v actions %v", tr.Steps, tr.Actions)
	}
	if s := tr.String(); !strings.Contains(s, " 1. No match (table miss): drop.\n") ||
		!strings.Contains(s, "Datapath actions: drop\n") || !strings.Contains(s, "Megaflow: in_port(1)") {
		t.Fatalf("rendering:\n%s", s)
	}
}

// TestBridgeTracePortConfig: the trace sees the bridge's port config and
// says which output it cost.
func TestBridgeTracePortConfig(t *testing.T) {
	tb := traceBridge(t)
	tb.br.SetPortConfig(2, ofpwire.PortConfigNoFwd)
	var key flow.Key
	var off flow.Offsets
	flow.Extract(frame(), 1, &key, &off)
	tr := traceAndUpcall(t, tb, key)
	var drops int
	for _, e := range tr.Steps[1].Events {
		if e.Kind == xlate.TraceDrop && strings.Contains(e.Text, "output:2 skipped: port config NO_FWD") {
			drops++
		}
	}
	if drops != 2 || slices.ContainsFunc(tr.Actions, func(a actions.Action) bool { return a.Kind == actions.Output }) {
		t.Fatalf("NO_FWD port 2: %d drops traced, actions %v", drops, tr.Actions)
	}

	tb.br.SetPortConfig(2, 0)
	tb.br.SetPortConfig(1, ofpwire.PortConfigNoRcv)
	tr = traceAndUpcall(t, tb, key)
	if len(tr.Steps) != 0 || len(tr.Ingress) != 1 || len(tr.Actions) != 0 || tr.Mask.InPort != ^uint32(0) {
		t.Fatalf("NO_RECV in_port: %+v", tr)
	}
}

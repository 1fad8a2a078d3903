package xlate

import (
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// TestTraceAgreesWithTranslate: on the property test's random pipelines and
// port configs, a trace ends with exactly Translate's actions and mask, and
// visits tables in increasing order, one step per lookup.
func TestTraceAgreesWithTranslate(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for i := 0; i < 60; i++ {
		p := randPipeline(t, r)
		var env *portEnv
		if i%2 == 1 {
			env = randPortEnv(r)
		}
		opts := env.options()
		for j := 0; j < 10; j++ {
			key := randPacket(r)
			tr, err := TranslateTrace(p, &key, opts)
			if err != nil {
				t.Fatal(err)
			}
			var res datapath.UpcallResult
			if err := Translate(p, &key, &res, opts); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(tr.Actions, res.Actions) || tr.Mask != res.Mask || tr.Flow != key {
				t.Fatalf("pipeline %d key %+v: trace %v mask %+v, translate %v mask %+v",
					i, key, tr.Actions, tr.Mask, res.Actions, res.Mask)
			}
			if !env.receives(key.InPort) {
				if len(tr.Steps) != 0 || len(tr.Ingress) != 1 || tr.Ingress[0].Kind != TraceDrop {
					t.Fatalf("refused packet traced as %+v / %+v", tr.Ingress, tr.Steps)
				}
				continue
			}
			if len(tr.Steps) == 0 || tr.Steps[0].Table != 0 {
				t.Fatalf("trace does not start at table 0: %+v", tr.Steps)
			}
			for s := 1; s < len(tr.Steps); s++ {
				prev := &tr.Steps[s-1]
				if tr.Steps[s].Table <= prev.Table || !prev.Matched {
					t.Fatalf("steps out of order or past a miss: %+v", tr.Steps)
				}
				gotoSeen := false
				for _, ev := range prev.Events {
					gotoSeen = gotoSeen || ev.Kind == TraceGoto && ev.Table == tr.Steps[s].Table
				}
				if !gotoSeen {
					t.Fatalf("step %d reached without its goto: %+v", s, tr.Steps)
				}
			}
		}
	}
}

func addFlow(t *testing.T, p *pipeline.Pipeline, table uint8, prio uint16, cookie uint64, match []ofpwire.OXM, is ...ofpwire.Instruction) {
	t.Helper()
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: table, Priority: prio, Cookie: cookie,
		Match: ofpwire.Match{Fields: match}, Instructions: is, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
	if _, err := p.Apply(fm, t0); err != nil {
		t.Fatal(err)
	}
}

func TestTraceSteps(t *testing.T) {
	p := pipeline.New(0)
	addFlow(t, p, 0, 100, 0x5, []ofpwire.OXM{oxm(ofpwire.XMTypeInPort, 1)},
		&ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 0xff}, gotoT(1))
	addFlow(t, p, 1, 200, 0, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800), oxmM(ofpwire.XMTypeMetadata, 1, 0xff)},
		apply(setF(ofpwire.XMTypeIPv4Dst, 0x0b000001), grp(7)), write(out(3)), gotoT(2))
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 7, ofpwire.GroupTypeAll, bkt(out(2)), bkt(setF(ofpwire.XMTypeTCPDst, 8080), out(4)))
	opts := Options{Groups: gt, Ports: []uint32{1, 2, 3, 4}}
	key := ipv4Key()
	tr, err := TranslateTrace(p, &key, opts)
	if err != nil {
		t.Fatal(err)
	}
	tr.Bridge = "br0"

	if len(tr.Steps) != 3 {
		t.Fatalf("steps %+v", tr.Steps)
	}
	s0, s1, s2 := tr.Steps[0], tr.Steps[1], tr.Steps[2]
	if !s0.Matched || s0.Priority != 100 || s0.Cookie != 5 || s0.Match != "in_port=1" ||
		s0.Instructions != "write_metadata:0x1/0xff,goto_table:1" {
		t.Fatalf("step 0 %+v", s0)
	}
	if len(s0.Events) != 2 || s0.Events[0].Kind != TraceWriteMetadata || s0.Events[0].Metadata != 1 ||
		s0.Events[1].Kind != TraceGoto || s0.Events[1].Table != 1 {
		t.Fatalf("step 0 events %+v", s0.Events)
	}
	type ev struct {
		kind   TraceEventKind
		depth  int
		text   string
		bucket int
	}
	var got []ev
	for _, e := range s1.Events {
		got = append(got, ev{e.Kind, e.Depth, e.Text, e.Bucket})
	}
	want := []ev{
		{TraceAction, 0, "set_field:11.0.0.1->ip_dst", 0},
		{TraceAction, 0, "group:7", 0},
		{TraceGroup, 0, "-> group 7 (all): bucket 0 of 2", 0},
		{TraceAction, 1, "output:2", 0},
		{TraceGroup, 0, "-> group 7 (all): bucket 1 of 2", 1},
		{TraceAction, 1, "set_field:8080->tcp_dst", 0},
		{TraceAction, 1, "output:4", 0},
		{TraceWriteActions, 0, "write_actions(output:3)", 0},
		{TraceGoto, 0, "goto_table:2", 0},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("step 1 events\n got %+v\nwant %+v", got, want)
	}
	// A miss without a table-miss entry drops the packet and its action
	// set (OpenFlow 1.3 §5.4): no action-set events.
	if s2.Matched || s2.Table != 2 || len(s2.Events) != 0 {
		t.Fatalf("step 2 %+v", s2)
	}

	var res datapath.UpcallResult
	if err := Translate(p, &key, &res, opts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Actions, res.Actions) || tr.Mask != res.Mask {
		t.Fatalf("trace %v / translate %v", tr.Actions, res.Actions)
	}
	final := key
	final.IPv4Dst = 0x0b000001
	if tr.FinalFlow != final {
		t.Fatalf("final flow %+v", tr.FinalFlow)
	}

	text := tr.String()
	mk := tr.Megaflow()
	for _, line := range []string{
		"Flow: " + key.String() + "\n",
		"bridge(\"br0\")\n-------------\n",
		" 0. in_port=1, priority 100, cookie 0x5\n    write_metadata:0x1/0xff -> metadata=0x1\n    goto_table:1\n",
		" 1. ip,metadata=0x1/0xff, priority 200\n    set_field:11.0.0.1->ip_dst\n    group:7\n    -> group 7 (all): bucket 0 of 2\n        output:2\n",
		" 2. No match (table miss): drop.\n",
		"Final flow: " + final.String() + "\n",
		"Megaflow: " + flow.FormatMatch(&mk, &res.Mask) + "\n",
		"Datapath actions: " + res.Actions.String() + "\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("rendering lacks %q:\n%s", line, text)
		}
	}
	if strings.Contains(text, "executing the action set") {
		t.Errorf("the action set of a dropped packet was executed:\n%s", text)
	}
	if !strings.Contains(text, "in_port(1)") || !strings.Contains(text, "Datapath actions: set(ipv4(dst=11.0.0.1)),output:2") {
		t.Errorf("rendering:\n%s", text)
	}
}

func TestTraceSelectAndDrops(t *testing.T) {
	p := pipeline.New(0)
	addFlow(t, p, 0, 1, 0, nil, apply(grp(1), grp(2), out(1), out(2)))
	gt := pipeline.NewGroupTable()
	addGroup(t, gt, 1, ofpwire.GroupTypeSelect, bkt(out(3)), bkt(out(4)))
	addGroup(t, gt, 2, ofpwire.GroupTypeFastFailover,
		ofpwire.Bucket{WatchPort: 5, WatchGroup: ofpwire.GroupAny, Actions: []ofpwire.Action{out(5)}})
	cfg := map[uint32]ofpwire.PortConfig{2: ofpwire.PortConfigNoFwd}
	opts := Options{Groups: gt, PortLive: func(p uint32) bool { return p != 5 }, PortConfig: configs(cfg),
		Ports: []uint32{1, 2, 3, 4, 5}}
	key := ipv4Key()
	tr, err := TranslateTrace(p, &key, opts)
	if err != nil {
		t.Fatal(err)
	}
	var sel, ff *TraceEvent
	var drops []string
	for i, e := range tr.Steps[0].Events {
		switch {
		case e.Kind == TraceGroup && e.Group == 1:
			sel = &tr.Steps[0].Events[i]
		case e.Kind == TraceGroup && e.Group == 2:
			ff = &tr.Steps[0].Events[i]
		case e.Kind == TraceDrop:
			drops = append(drops, e.Text)
		}
	}
	if sel == nil || sel.GroupType != ofpwire.GroupTypeSelect || sel.Bucket < 0 {
		t.Fatalf("select group event %+v", sel)
	}
	// The bucket the trace names is the one whose port Translate outputs to.
	if want := (actions.List{dpOut(uint32(3 + sel.Bucket))}); !slices.Equal(tr.Actions, want) {
		t.Fatalf("actions %v, select bucket %d", tr.Actions, sel.Bucket)
	}
	if ff == nil || ff.Bucket != -1 || !strings.Contains(ff.Text, "no live bucket") {
		t.Fatalf("fast-failover event %+v", ff)
	}
	if len(drops) != 2 || !strings.Contains(drops[0], "input port 1") || !strings.Contains(drops[1], "output:2 skipped: port config NO_FWD") {
		t.Fatalf("drops %q", drops)
	}

	// A refused packet: the trace says why, before any table.
	cfg[1] = ofpwire.PortConfigNoRcv
	tr, err = TranslateTrace(p, &key, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Steps) != 0 || len(tr.Ingress) != 1 || !strings.Contains(tr.Ingress[0].Text, "NO_RECV") ||
		len(tr.Actions) != 0 || tr.Mask.InPort != ^uint32(0) {
		t.Fatalf("refused packet: %+v", tr)
	}
	if s := tr.String(); !strings.Contains(s, "NO_RECV") || !strings.Contains(s, "Datapath actions: drop") {
		t.Fatalf("rendering:\n%s", s)
	}
}

func TestTraceError(t *testing.T) {
	p := pipeline.New(0)
	addFlow(t, p, 0, 1, 0, nil, apply(out(2)), gotoT(1))
	addFlow(t, p, 1, 1, 0, nil, apply(out(uint32(ofpwire.PortTable))))
	key := ipv4Key()
	tr, err := TranslateTrace(p, &key, Options{})
	if err == nil || tr == nil || tr.Err != err || len(tr.Steps) != 2 {
		t.Fatalf("trace %+v err %v", tr, err)
	}
	if s := tr.String(); !strings.Contains(s, "Translation failed: ") || strings.Contains(s, "Datapath actions") {
		t.Fatalf("rendering:\n%s", s)
	}
}

// TestTraceNormalDoesNotLearn: tracing NORMAL leaves the MAC table alone,
// says what it would learn, and otherwise decides as Translate does.
func TestTraceNormalDoesNotLearn(t *testing.T) {
	sw := normal.New(normal.Options{})
	sw.SetPorts([]normal.PortConfig{{No: 1, Tag: 10}, {No: 2, Mode: normal.Trunk}, {No: 3, Tag: 10}})
	p := build(t, []flowSpec{{prio: 0, ins: ins(apply(out(uint32(ofpwire.PortNormal))))}})
	opts := Options{Normal: sw, Now: t0}
	trace := func(k flow.Key) *Trace {
		t.Helper()
		gen := sw.Generation()
		tr, err := TranslateTrace(p, &k, opts)
		if err != nil {
			t.Fatal(err)
		}
		if sw.Generation() != gen {
			t.Fatal("a trace changed the MAC table")
		}
		var res datapath.UpcallResult
		if err := Translate(p, &k, &res, opts); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tr.Actions, res.Actions) || tr.Mask != res.Mask {
			t.Fatalf("key %+v: trace %v, translate %v", k, tr.Actions, res.Actions)
		}
		return tr
	}
	normalOf := func(tr *Trace) *NormalTrace {
		t.Helper()
		for _, e := range tr.Steps[0].Events {
			if e.Kind == TraceNormal {
				return e.Normal
			}
		}
		t.Fatalf("no NORMAL event in %+v", tr.Steps)
		return nil
	}

	k := l2Key(1, 0xa, 0xb)
	tr, err := TranslateTrace(p, &k, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(sw.Entries(t0)); n != 0 {
		t.Fatalf("trace learned %d MACs", n)
	}
	nt := normalOf(tr)
	if !nt.Flooded || !nt.WouldLearn || nt.InPort != 1 || len(nt.Outputs) != 2 ||
		nt.VLAN != 10 ||
		nt.Outputs[0] != (normal.Output{Port: 2, VLAN: normal.VLANPush, VID: 10}) {
		t.Fatalf("flood decision %+v", nt)
	}
	if s := tr.String(); !strings.Contains(s, "would learn 00:00:00:00:00:0a on port 1 (not in a trace)") ||
		!strings.Contains(s, "flooding to 2 (push VLAN 10), 3") {
		t.Fatalf("rendering:\n%s", s)
	}

	trace(k)                       // Translate learns 0xa on port 1
	tr = trace(l2Key(3, 0xc, 0xa)) // so this is unicast
	if nt := normalOf(tr); nt.Flooded || len(nt.Outputs) != 1 || nt.Outputs[0].Port != 1 {
		t.Fatalf("unicast decision %+v", nt)
	}
	if !strings.Contains(tr.String(), "00:00:00:00:00:0a learned: output to 1") {
		t.Fatalf("rendering:\n%s", tr.String())
	}
	// A frame to its own (not yet known) source: a real packet learns it
	// first and then finds the destination on its in_port.
	tr = trace(l2Key(3, 0xd, 0xd))
	if nt := normalOf(tr); nt.Drop != normal.DropDestIsInPort || len(tr.Actions) != 0 {
		t.Fatalf("self-addressed decision %+v actions %v", nt, tr.Actions)
	}
}

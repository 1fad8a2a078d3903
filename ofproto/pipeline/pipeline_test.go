package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func oxm(f ofpwire.XMType, v uint64) ofpwire.OXM { return ofpwire.OXMUint(f, v) }

func oxmM(f ofpwire.XMType, v, m uint64) ofpwire.OXM { return ofpwire.OXMUintMasked(f, v, m) }

func match(fs ...ofpwire.OXM) ofpwire.Match { return ofpwire.Match{Fields: fs} }

func inPort(p uint64) ofpwire.OXM { return oxm(ofpwire.XMTypeInPort, p) }

var ipv4 = oxm(ofpwire.XMTypeEthType, 0x0800)

func output(port ofpwire.PortNo) []ofpwire.Instruction {
	return []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: port}}}}
}

func add(m ofpwire.Match, prio uint16, ins []ofpwire.Instruction) *ofpwire.FlowMod {
	return &ofpwire.FlowMod{Command: ofpwire.FlowAdd, Priority: prio, Match: m, Instructions: ins,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
}

func mustApply(t *testing.T, p *Pipeline, fm *ofpwire.FlowMod) []*Entry {
	t.Helper()
	r, err := p.Apply(fm, t0)
	if err != nil {
		t.Fatalf("Apply(%+v): %v", fm, err)
	}
	return r
}

func wantErr(t *testing.T, err error, typ, code uint16) {
	t.Helper()
	var oe *ofpwire.OFPError
	if !errors.As(err, &oe) || oe.Type != typ || oe.Code != code {
		t.Fatalf("error %v, want type %d code %d", err, typ, code)
	}
}

func all(t *testing.T, p *Pipeline) []*Entry {
	t.Helper()
	f := AnyFilter()
	es, err := p.Flows(&f)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func keyInPort(port uint32) *flow.Key { return &flow.Key{InPort: port} }

func TestApplyErrors(t *testing.T) {
	goto_ := func(tid uint8) []ofpwire.Instruction {
		return []ofpwire.Instruction{&ofpwire.InstrGotoTable{TableID: tid}}
	}
	cases := []struct {
		name      string
		fm        ofpwire.FlowMod
		typ, code uint16
	}{
		{"bad command", ofpwire.FlowMod{Command: 5}, ofpwire.ETFlowModFailed, ofpwire.FMFCBadCommand},
		{"add table 254", ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 254}, ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
		{"add table all", ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 255}, ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
		{"modify table all", ofpwire.FlowMod{Command: ofpwire.FlowModify, TableID: 255}, ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
		{"modify strict table all", ofpwire.FlowMod{Command: ofpwire.FlowModifyStrict, TableID: 255}, ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
		{"delete table 254", ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: 254}, ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
		{"unknown flag", ofpwire.FlowMod{Command: ofpwire.FlowAdd, Flags: 1 << 5}, ofpwire.ETFlowModFailed, ofpwire.FMFCBadFlags},
		{"goto same table", ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 3, Instructions: goto_(3)}, ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"goto earlier table", ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 3, Instructions: goto_(1)}, ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"goto table 254", ofpwire.FlowMod{Command: ofpwire.FlowAdd, Instructions: goto_(254)}, ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"goto from last table", ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 253, Instructions: goto_(254)}, ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"modify goto backwards", ofpwire.FlowMod{Command: ofpwire.FlowModify, TableID: 2, Instructions: goto_(0)}, ofpwire.ETBadInstruction, ofpwire.BICBadTableID},
		{"experimenter inst", ofpwire.FlowMod{Command: ofpwire.FlowAdd, Instructions: []ofpwire.Instruction{&ofpwire.InstrExperimenter{Experimenter: 1}}}, ofpwire.ETBadInstruction, ofpwire.BICBadExperimenter},
		{"duplicate inst", ofpwire.FlowMod{Command: ofpwire.FlowAdd, Instructions: []ofpwire.Instruction{&ofpwire.InstrClearActions{}, &ofpwire.InstrClearActions{}}}, ofpwire.ETBadInstruction, ofpwire.BICUnsupInst},
		{"nil inst", ofpwire.FlowMod{Command: ofpwire.FlowAdd, Instructions: []ofpwire.Instruction{nil}}, ofpwire.ETBadInstruction, ofpwire.BICUnknownInst},
		{"bad prereq", ofpwire.FlowMod{Command: ofpwire.FlowAdd, Match: match(oxm(ofpwire.XMTypeIPv4Src, 1))}, ofpwire.ETBadMatch, ofpwire.BMCBadPrereq},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(0)
			changes := 0
			p.OnChange = func() { changes++ }
			_, err := p.Apply(&c.fm, t0)
			wantErr(t, err, c.typ, c.code)
			if changes != 0 || p.Generation() != 0 || len(all(t, p)) != 0 {
				t.Fatalf("failed flow-mod changed the pipeline")
			}
		})
	}
	// Instructions are not checked for deletes; goto forward is fine.
	p := New(0)
	if _, err := p.Apply(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: 255, Instructions: goto_(0), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}, t0); err != nil {
		t.Fatal(err)
	}
	mustApply(t, p, &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: 252, Instructions: goto_(253)})
	ins := []ofpwire.Instruction{&ofpwire.InstrMeter{MeterID: 1}, &ofpwire.InstrApplyActions{}, &ofpwire.InstrClearActions{},
		&ofpwire.InstrWriteActions{}, &ofpwire.InstrWriteMetadata{Metadata: 1, Mask: 1}, &ofpwire.InstrGotoTable{TableID: 1}}
	mustApply(t, p, &ofpwire.FlowMod{Command: ofpwire.FlowAdd, Instructions: ins})
	if n := len(all(t, p)); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

func TestTableFull(t *testing.T) {
	p := New(2)
	mustApply(t, p, add(match(inPort(1)), 1, nil))
	mustApply(t, p, add(match(inPort(2)), 1, nil))
	_, err := p.Apply(add(match(inPort(3)), 1, nil), t0)
	wantErr(t, err, ofpwire.ETFlowModFailed, ofpwire.FMFCTableFull)
	// Replacing an existing entry needs no room; another table has its own.
	mustApply(t, p, add(match(inPort(2)), 1, output(7)))
	fm := add(match(inPort(3)), 1, nil)
	fm.TableID = 1
	mustApply(t, p, fm)
	if st := p.TableStats(0); st.Active != 2 {
		t.Fatalf("active %d", st.Active)
	}
}

func TestAddReplace(t *testing.T) {
	for _, reset := range []bool{false, true} {
		p := New(0)
		fm := add(match(inPort(1)), 10, output(1))
		fm.Cookie, fm.IdleTimeout = 0xaa, 5
		mustApply(t, p, fm)
		e := p.Lookup(0, keyInPort(1), &ofmatch.Pipe{}, nil, nil)
		e.Touch(t0.Add(time.Second), 3, 300)
		fm2 := add(match(inPort(1)), 10, output(2))
		fm2.Cookie = 0xbb
		if reset {
			fm2.Flags = ofpwire.FlowFlagResetCounts
		}
		later := t0.Add(10 * time.Second)
		if r, err := p.Apply(fm2, later); err != nil || len(r) != 0 {
			t.Fatalf("replace: removed %v err %v", r, err)
		}
		es := all(t, p)
		if len(es) != 1 {
			t.Fatalf("%d entries after replace", len(es))
		}
		n := es[0]
		if n.Cookie != 0xbb || n.IdleTimeout != 0 || !n.Created.Equal(later) || !n.LastUsed().Equal(later) {
			t.Fatalf("replacement kept old fields: %+v", n)
		}
		if o := n.Instructions()[0].(*ofpwire.InstrApplyActions).Actions[0].(*ofpwire.ActionOutput); o.Port != 2 {
			t.Fatalf("instructions not replaced")
		}
		wantP, wantB := uint64(3), uint64(300)
		if reset {
			wantP, wantB = 0, 0
		}
		if n.Packets.Load() != wantP || n.Bytes.Load() != wantB {
			t.Fatalf("reset=%v counters %d/%d", reset, n.Packets.Load(), n.Bytes.Load())
		}
	}
}

func TestCheckOverlap(t *testing.T) {
	ipSrc := func(v, m uint64) ofpwire.OXM { return oxmM(ofpwire.XMTypeIPv4Src, v, m) }
	md := func(v, m uint64) ofpwire.OXM { return oxmM(ofpwire.XMTypeMetadata, v, m) }
	cases := []struct {
		name     string
		existing ofpwire.Match
		prio     uint16
		added    ofpwire.Match
		overlap  bool
	}{
		{"different fields", match(inPort(1)), 5, match(ipv4), true},
		{"identical", match(inPort(1)), 5, match(inPort(1)), true},
		{"catch-all", match(), 5, match(inPort(9)), true},
		{"disjoint in_port", match(inPort(1)), 5, match(inPort(2)), false},
		{"other priority", match(inPort(1)), 6, match(inPort(1)), false},
		{"nested prefixes", match(ipv4, ipSrc(0x0a000000, 0xff000000)), 5, match(ipv4, ipSrc(0x0a010000, 0xffff0000)), true},
		{"disjoint prefixes", match(ipv4, ipSrc(0x0a000000, 0xff000000)), 5, match(ipv4, ipSrc(0x0b010000, 0xffff0000)), false},
		{"different masks agreeing", match(ipv4, ipSrc(0x0a000000, 0xff00ff00)), 5, match(ipv4, ipSrc(0x0a010000, 0xffff0000)), true},
		{"metadata disjoint", match(md(1, 0xf)), 5, match(md(2, 0xff)), false},
		{"metadata agreeing", match(md(1, 0xf)), 5, match(md(0x11, 0xff)), true},
		{"eth type disjoint", match(ipv4), 5, match(oxm(ofpwire.XMTypeEthType, 0x86dd)), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(0)
			mustApply(t, p, add(c.existing, c.prio, nil))
			fm := add(c.added, 5, nil)
			fm.Flags = ofpwire.FlowFlagCheckOverlap
			_, err := p.Apply(fm, t0)
			if c.overlap {
				wantErr(t, err, ofpwire.ETFlowModFailed, ofpwire.FMFCOverlap)
				if len(all(t, p)) != 1 {
					t.Fatal("overlapping add changed the table")
				}
			} else if err != nil {
				t.Fatalf("unexpected %v", err)
			}
			// Without the flag the same add always succeeds.
			p2 := New(0)
			mustApply(t, p2, add(c.existing, c.prio, nil))
			mustApply(t, p2, add(c.added, 5, nil))
		})
	}
}

// modSetup installs, in table 1: A in_port=1 prio 10 cookie 0x11 → out 1;
// B in_port=1,eth_type=ipv4 prio 20 cookie 0x12 → out 2; C in_port=2 prio 10
// cookie 0x21 → group 7; D catch-all prio 0 cookie 0x00 → out 1.
func modSetup(t *testing.T) *Pipeline {
	p := New(0)
	put := func(m ofpwire.Match, prio uint16, cookie uint64, ins []ofpwire.Instruction) {
		fm := add(m, prio, ins)
		fm.TableID, fm.Cookie = 1, cookie
		fm.Flags = ofpwire.FlowFlagSendFlowRem
		mustApply(t, p, fm)
	}
	put(match(inPort(1)), 10, 0x11, output(1))
	put(match(inPort(1), ipv4), 20, 0x12, output(2))
	put(match(inPort(2)), 10, 0x21, []ofpwire.Instruction{&ofpwire.InstrWriteActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 7}}}})
	put(match(), 0, 0x00, output(1))
	return p
}

// names identifies modSetup's entries by cookie.
var names = map[uint64]string{0x11: "A", 0x12: "B", 0x21: "C", 0x00: "D"}

func set(es []*Entry) map[string]bool {
	s := map[string]bool{}
	for _, e := range es {
		s[names[e.Cookie]] = true
	}
	return s
}

func sameSet(a map[string]bool, b ...string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range b {
		if !a[x] {
			return false
		}
	}
	return true
}

func TestModifyAndDelete(t *testing.T) {
	type fmod = ofpwire.FlowMod
	mk := func(cmd ofpwire.FlowModCommand, m ofpwire.Match, prio uint16) fmod {
		return fmod{Command: cmd, TableID: 1, Match: m, Priority: prio, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
	}
	with := func(f fmod, mod func(*fmod)) fmod { mod(&f); return f }
	cases := []struct {
		name string
		fm   fmod
		hit  []string // entries modified or deleted
	}{
		{"modify all", mk(ofpwire.FlowModify, match(), 0), []string{"A", "B", "C", "D"}},
		{"modify in_port=1", mk(ofpwire.FlowModify, match(inPort(1)), 0), []string{"A", "B"}},
		{"modify more specific only", mk(ofpwire.FlowModify, match(inPort(1), ipv4), 0), []string{"B"}},
		{"modify no match", mk(ofpwire.FlowModify, match(inPort(3)), 0), nil},
		{"modify cookie mask", with(mk(ofpwire.FlowModify, match(), 0), func(f *fmod) { f.Cookie, f.CookieMask = 0x10, 0xf0 }), []string{"A", "B"}},
		{"modify exact cookie", with(mk(ofpwire.FlowModify, match(), 0), func(f *fmod) { f.Cookie, f.CookieMask = 0x12, ^uint64(0) }), []string{"B"}},
		{"modify ignores out_port", with(mk(ofpwire.FlowModify, match(inPort(1)), 0), func(f *fmod) { f.OutPort = 99 }), []string{"A", "B"}},
		{"modify strict", mk(ofpwire.FlowModifyStrict, match(inPort(1)), 10), []string{"A"}},
		{"modify strict wrong prio", mk(ofpwire.FlowModifyStrict, match(inPort(1)), 20), nil},
		{"modify strict catch-all", mk(ofpwire.FlowModifyStrict, match(), 0), []string{"D"}},
		{"modify strict cookie miss", with(mk(ofpwire.FlowModifyStrict, match(inPort(1)), 10), func(f *fmod) { f.Cookie, f.CookieMask = 0x12, 0xff }), nil},
		{"delete all", mk(ofpwire.FlowDelete, match(), 0), []string{"A", "B", "C", "D"}},
		{"delete in_port=1", mk(ofpwire.FlowDelete, match(inPort(1)), 0), []string{"A", "B"}},
		{"delete ipv4", mk(ofpwire.FlowDelete, match(ipv4), 0), []string{"B"}},
		{"delete out_port 1", with(mk(ofpwire.FlowDelete, match(), 0), func(f *fmod) { f.OutPort = 1 }), []string{"A", "D"}},
		{"delete out_port 2 in_port 1", with(mk(ofpwire.FlowDelete, match(inPort(1)), 0), func(f *fmod) { f.OutPort = 2 }), []string{"B"}},
		{"delete out_group 7", with(mk(ofpwire.FlowDelete, match(), 0), func(f *fmod) { f.OutGroup = 7 }), []string{"C"}},
		{"delete out_group 8", with(mk(ofpwire.FlowDelete, match(), 0), func(f *fmod) { f.OutGroup = 8 }), nil},
		{"delete port and group", with(mk(ofpwire.FlowDelete, match(), 0), func(f *fmod) { f.OutPort, f.OutGroup = 1, 7 }), nil},
		{"delete cookie mask", with(mk(ofpwire.FlowDelete, match(), 0), func(f *fmod) { f.Cookie, f.CookieMask = 0x01, 0x0f }), []string{"A", "C"}},
		{"delete table all", with(mk(ofpwire.FlowDelete, match(inPort(2)), 0), func(f *fmod) { f.TableID = TableAll }), []string{"C"}},
		{"delete other table", with(mk(ofpwire.FlowDelete, match(), 0), func(f *fmod) { f.TableID = 2 }), nil},
		{"delete strict", mk(ofpwire.FlowDeleteStrict, match(inPort(1), ipv4), 20), []string{"B"}},
		{"delete strict wrong prio", mk(ofpwire.FlowDeleteStrict, match(inPort(1), ipv4), 10), nil},
		{"delete strict not more specific", mk(ofpwire.FlowDeleteStrict, match(inPort(1)), 20), nil},
		{"delete strict out_port miss", with(mk(ofpwire.FlowDeleteStrict, match(inPort(1)), 10), func(f *fmod) { f.OutPort = 2 }), nil},
		{"delete strict table all", with(mk(ofpwire.FlowDeleteStrict, match(), 0), func(f *fmod) { f.TableID = TableAll }), []string{"D"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := modSetup(t)
			for _, e := range all(t, p) {
				e.Touch(t0, 5, 500)
			}
			gen := p.Generation()
			changes := 0
			p.OnChange = func() { changes++ }
			isDel := c.fm.Command == ofpwire.FlowDelete || c.fm.Command == ofpwire.FlowDeleteStrict
			fm := c.fm
			if !isDel {
				fm.Instructions = output(42)
				fm.Flags = ofpwire.FlowFlagResetCounts
				// Fields MODIFY must not touch.
				fm.IdleTimeout, fm.HardTimeout = 77, 88
				if fm.CookieMask == 0 {
					fm.Cookie = 0x99
				}
			}
			removed, err := p.Apply(&fm, t0.Add(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			wantChange := 0
			if len(c.hit) > 0 {
				wantChange = 1
			}
			if changes != wantChange || p.Generation() != gen+uint64(wantChange) {
				t.Fatalf("OnChange called %d times, generation %d→%d", changes, gen, p.Generation())
			}
			left := all(t, p)
			if isDel {
				if !sameSet(set(removed), c.hit...) {
					t.Fatalf("removed %v, want %v", set(removed), c.hit)
				}
				for _, e := range removed {
					if e.RemovedReason != ofpwire.FlowReasonDelete || !e.SendFlowRemoved() {
						t.Fatalf("removed entry reason %v", e.RemovedReason)
					}
				}
				if len(left)+len(removed) != 4 {
					t.Fatalf("%d left, %d removed", len(left), len(removed))
				}
				for _, e := range left {
					if set(removed)[names[e.Cookie]] {
						t.Fatalf("%s both removed and left", names[e.Cookie])
					}
				}
				return
			}
			if len(removed) != 0 || len(left) != 4 {
				t.Fatalf("modify removed %d, left %d", len(removed), len(left))
			}
			var modified []*Entry
			for _, e := range left {
				if names[e.Cookie] == "" || e.IdleTimeout != 0 || e.HardTimeout != 0 || !e.Created.Equal(t0) {
					t.Fatalf("modify changed cookie/timeouts/duration: %+v", e)
				}
				o := e.Instructions()[0]
				if a, ok := o.(*ofpwire.InstrApplyActions); ok && a.Actions[0].(*ofpwire.ActionOutput).Port == 42 {
					modified = append(modified, e)
					if e.Packets.Load() != 0 || e.Bytes.Load() != 0 {
						t.Fatal("RESET_COUNTS not applied")
					}
				} else if e.Packets.Load() != 5 {
					t.Fatal("unmodified entry lost its counters")
				}
			}
			if !sameSet(set(modified), c.hit...) {
				t.Fatalf("modified %v, want %v", set(modified), c.hit)
			}
		})
	}
}

func TestModifyKeepsCountersWithoutReset(t *testing.T) {
	p := modSetup(t)
	e := p.Lookup(1, keyInPort(2), &ofmatch.Pipe{}, nil, nil)
	e.Touch(t0, 4, 40)
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowModifyStrict, TableID: 1, Priority: 10, Match: match(inPort(2)), Instructions: output(3)}
	mustApply(t, p, fm)
	if e.Packets.Load() != 4 || e.Bytes.Load() != 40 {
		t.Fatal("modify without RESET_COUNTS cleared the counters")
	}
	if got := p.Lookup(1, keyInPort(2), &ofmatch.Pipe{}, nil, nil); got != e {
		t.Fatal("modify replaced the entry")
	}
}

func TestExpire(t *testing.T) {
	p := New(0)
	changes := 0
	p.OnChange = func() { changes++ }
	mk := func(port uint64, idle, hard uint16) {
		fm := add(match(inPort(port)), 1, nil)
		fm.IdleTimeout, fm.HardTimeout = idle, hard
		fm.TableID = uint8(port) // spread over tables
		mustApply(t, p, fm)
	}
	mk(1, 0, 10) // hard at 10s
	mk(2, 5, 0)  // idle at 5s unless used
	mk(3, 5, 0)  // used at 4s → idle at 9s
	mk(4, 5, 7)  // used at 4s: idle 9s, hard 7s → hard
	mk(5, 0, 0)  // permanent
	mk(6, 3, 20) // idle at 3s before hard
	get := func(port uint32) *Entry { return p.Lookup(uint8(port), keyInPort(port), &ofmatch.Pipe{}, nil, nil) }
	get(3).Touch(t0.Add(4*time.Second), 1, 64)
	get(4).Touch(t0.Add(4*time.Second), 1, 64)
	get(4).Touch(t0.Add(2*time.Second), 1, 64) // older use does not move LastUsed back
	if !get(4).LastUsed().Equal(t0.Add(4 * time.Second)) {
		t.Fatalf("LastUsed %v", get(4).LastUsed())
	}
	step := func(sec int, want map[uint32]ofpwire.FlowRemovedReason) {
		t.Helper()
		before := changes
		out := p.Expire(t0.Add(time.Duration(sec) * time.Second))
		got := map[uint32]ofpwire.FlowRemovedReason{}
		for _, e := range out {
			got[e.Match().Key.InPort] = e.RemovedReason
		}
		if len(got) != len(want) {
			t.Fatalf("at %ds expired %v, want %v", sec, got, want)
		}
		for k, v := range want {
			if r, ok := got[k]; !ok || r != v {
				t.Fatalf("at %ds expired %v, want %v", sec, got, want)
			}
			if get(k) != nil {
				t.Fatalf("expired entry %d still found", k)
			}
		}
		if (len(want) > 0) != (changes > before) {
			t.Fatalf("OnChange calls %d→%d", before, changes)
		}
	}
	step(2, nil)
	step(3, map[uint32]ofpwire.FlowRemovedReason{6: ofpwire.FlowReasonIdleTimeout})
	step(5, map[uint32]ofpwire.FlowRemovedReason{2: ofpwire.FlowReasonIdleTimeout})
	step(7, map[uint32]ofpwire.FlowRemovedReason{4: ofpwire.FlowReasonHardTimeout})
	step(9, map[uint32]ofpwire.FlowRemovedReason{3: ofpwire.FlowReasonIdleTimeout})
	step(10, map[uint32]ofpwire.FlowRemovedReason{1: ofpwire.FlowReasonHardTimeout})
	step(100000, nil)
	if get(5) == nil {
		t.Fatal("permanent entry expired")
	}
}

func TestFlowsAndStats(t *testing.T) {
	p := modSetup(t)
	fm := add(match(inPort(1)), 3, output(1))
	fm.TableID = 5
	mustApply(t, p, fm)
	f := AnyFilter()
	es, err := p.Flows(&f)
	if err != nil || len(es) != 5 {
		t.Fatalf("%d flows, %v", len(es), err)
	}
	for i := 1; i < len(es); i++ {
		a, b := es[i-1], es[i]
		if a.TableID > b.TableID || a.TableID == b.TableID && a.Priority < b.Priority {
			t.Fatal("flows not ordered by table, priority")
		}
	}
	m, _ := ofmatch.FromOXM(match(inPort(1)))
	f.Match = m
	es, _ = p.Flows(&f)
	if len(es) != 3 {
		t.Fatalf("in_port=1 selects %d", len(es))
	}
	f.Strict, f.Priority = true, 10
	es, _ = p.Flows(&f)
	if !sameSet(set(es), "A") {
		t.Fatalf("strict selects %v", set(es))
	}
	f = AnyFilter()
	f.TableID, f.OutPort = 1, 1
	es, _ = p.Flows(&f)
	if !sameSet(set(es), "A", "D") {
		t.Fatalf("out_port=1 selects %v", set(es))
	}
	f.TableID = 254
	if _, err := p.Flows(&f); err == nil {
		t.Fatal("table 254 accepted")
	} else {
		wantErr(t, err, ofpwire.ETBadRequest, ofpwire.BRCBadTableID)
	}

	p.Lookup(1, keyInPort(1), &ofmatch.Pipe{}, nil, nil)
	p.Lookup(1, keyInPort(9), &ofmatch.Pipe{}, nil, nil) // the table-miss entry: looked up, not matched (§7.3.5.4)
	p.Lookup(5, keyInPort(9), &ofmatch.Pipe{}, nil, nil) // miss
	if s := p.TableStats(1); s != (TableStats{Active: 4, Lookups: 2, Matched: 1}) {
		t.Fatalf("table 1 stats %+v", s)
	}
	if s := p.TableStats(5); s != (TableStats{Active: 1, Lookups: 1, Matched: 0}) {
		t.Fatalf("table 5 stats %+v", s)
	}
}

func TestLookupPriorityAndMetadata(t *testing.T) {
	p := New(0)
	mustApply(t, p, add(match(), 0, nil))
	mustApply(t, p, add(match(inPort(1)), 5, output(1)))
	mustApply(t, p, add(match(inPort(1), oxmM(ofpwire.XMTypeMetadata, 0x10, 0xf0)), 9, output(2)))
	var wc flow.Mask
	var wcm ofmatch.Pipe
	e := p.Lookup(0, keyInPort(1), &ofmatch.Pipe{Metadata: 0x1f}, &wc, &wcm)
	if e == nil || e.Priority != 9 {
		t.Fatalf("got %+v", e)
	}
	if wcm.Metadata != 0xf0 || wc.InPort != ^uint32(0) {
		t.Fatalf("wildcards in_port %x metadata %x", wc.InPort, wcm.Metadata)
	}
	if e := p.Lookup(0, keyInPort(1), &ofmatch.Pipe{Metadata: 0x20}, nil, nil); e == nil || e.Priority != 5 {
		t.Fatalf("metadata 0x20 got %+v", e)
	}
	if e := p.Lookup(0, keyInPort(2), &ofmatch.Pipe{Metadata: 0x10}, nil, nil); e == nil || e.Priority != 0 {
		t.Fatalf("in_port 2 got %+v", e)
	}
	if e := p.Lookup(3, keyInPort(1), &ofmatch.Pipe{}, nil, nil); e != nil {
		t.Fatal("empty table matched")
	}
}

func TestNonStrictMetadataAndMasks(t *testing.T) {
	md := func(v, m uint64) ofpwire.OXM { return oxmM(ofpwire.XMTypeMetadata, v, m) }
	ip := func(v, m uint64) ofpwire.OXM { return oxmM(ofpwire.XMTypeIPv4Src, v, m) }
	cases := []struct {
		name    string
		entry   ofpwire.Match
		del     ofpwire.Match
		deleted bool
	}{
		{"metadata wider than delete", match(md(1, 0x0f)), match(md(1, 0xff)), false},
		{"metadata narrower than delete", match(md(0x21, 0xff)), match(md(1, 0x0f)), true},
		{"metadata disagreeing", match(md(0x22, 0xff)), match(md(1, 0x0f)), false},
		{"prefix inside", match(ipv4, ip(0x0a010000, 0xffff0000)), match(ipv4, ip(0x0a000000, 0xff000000)), true},
		{"prefix outside", match(ipv4, ip(0x0a000000, 0xff000000)), match(ipv4, ip(0x0a010000, 0xffff0000)), false},
		{"unmatched field", match(inPort(1)), match(ipv4), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := New(0)
			mustApply(t, p, add(c.entry, 1, nil))
			r := mustApply(t, p, &ofpwire.FlowMod{Command: ofpwire.FlowDelete, Match: c.del, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
			if (len(r) == 1) != c.deleted || len(all(t, p))+len(r) != 1 {
				t.Fatalf("deleted %d", len(r))
			}
		})
	}
}

package pipeline

import (
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func clause(id uint32, k, n uint8) []ofpwire.Instruction {
	return []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{
		&ofpwire.ActionConjunction{ID: id, Clause: k, NClauses: n}}}}
}

// TestConjunctiveLookup: the classifier answers with the conj_id entry
// only when every clause of the conjunction matched at one priority above
// the best ordinary entry, and never with a clause.
func TestConjunctiveLookup(t *testing.T) {
	src := func(v uint64) ofpwire.OXM { return oxm(ofpwire.XMTypeIPv4Src, v) }
	dst := func(v uint64) ofpwire.OXM { return oxm(ofpwire.XMTypeIPv4Dst, v) }
	proto := oxm(ofpwire.XMTypeIPProto, 17)
	p := New(0)
	mustApply(t, p, add(match(ipv4, src(1)), 50, clause(3, 0, 3)))
	mustApply(t, p, add(match(ipv4, dst(2)), 50, clause(3, 1, 3)))
	mustApply(t, p, add(match(ipv4, proto), 50, clause(3, 2, 3)))
	mustApply(t, p, add(match(oxm(ofpwire.XMTypeConjID, 3)), 50, output(5)))
	mustApply(t, p, add(match(ipv4, dst(2)), 40, clause(4, 0, 2)))
	mustApply(t, p, add(match(ipv4, src(1)), 40, clause(4, 1, 2)))
	mustApply(t, p, add(match(oxm(ofpwire.XMTypeConjID, 4)), 40, output(6)))
	mustApply(t, p, add(match(ipv4), 45, output(7)))
	mustApply(t, p, add(match(), 1, output(9)))
	lookup := func(s, d uint32, pr uint8) uint32 {
		k := flow.Key{EthType: 0x0800, IPv4Src: s, IPv4Dst: d, NwProto: pr}
		e := p.Lookup(0, &k, &ofmatch.Pipe{}, nil, nil)
		if e == nil || e.conjunctive {
			t.Fatalf("lookup %d->%d/%d found %+v", s, d, pr, e)
		}
		return uint32(e.Instructions()[0].(*ofpwire.InstrApplyActions).Actions[0].(*ofpwire.ActionOutput).Port)
	}
	for _, c := range []struct {
		s, d uint32
		pr   uint8
		want uint32
	}{
		{1, 2, 17, 5}, // all three clauses of 3
		{1, 2, 6, 7},  // two of three: the ordinary ip flow (45) beats conjunction 4 (40)
		{1, 3, 17, 7}, // one of three
		{9, 9, 6, 7},
	} {
		if got := lookup(c.s, c.d, c.pr); got != c.want {
			t.Errorf("%d->%d proto %d: output %d, want %d", c.s, c.d, c.pr, got, c.want)
		}
	}
	// Without the better ordinary flow, conjunction 4 (two of two) answers.
	mustApply(t, p, &ofpwire.FlowMod{Command: ofpwire.FlowDeleteStrict, Priority: 45, Match: match(ipv4),
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	if got := lookup(1, 2, 6); got != 6 {
		t.Errorf("two of two at 40: output %d, want 6", got)
	}
	if got := lookup(9, 9, 6); got != 9 {
		t.Errorf("no clause: output %d, want 9", got)
	}
}

// TestConntrackMatches: flows that differ only in their conntrack fields
// are distinct entries; a packet (untracked until there is a connection
// tracker: every ct field 0) takes the one whose constraint that meets,
// and strict and non-strict deletes tell them apart.
func TestConntrackMatches(t *testing.T) {
	trk := func(v uint64) ofpwire.OXM { return oxmM(ofpwire.XMTypeCTState, v, 0x20) }
	p := New(0)
	mustApply(t, p, add(match(ipv4, trk(0x20)), 10, output(1))) // +trk
	mustApply(t, p, add(match(ipv4, trk(0)), 10, output(2)))    // -trk
	mustApply(t, p, add(match(ipv4, oxm(ofpwire.XMTypeCTMark, 7)), 20, output(3)))
	if n := p.TableStats(0).Active; n != 3 {
		t.Fatalf("%d entries, want 3 (ct constraints keep them apart)", n)
	}
	k := flow.Key{EthType: 0x0800}
	e := p.Lookup(0, &k, &ofmatch.Pipe{}, nil, nil)
	if e == nil || e.Instructions()[0].(*ofpwire.InstrApplyActions).Actions[0].(*ofpwire.ActionOutput).Port != 2 {
		t.Fatalf("an untracked packet took %+v, want the -trk flow", e)
	}
	del := func(strict bool, m ofpwire.Match, prio uint16) int {
		cmd := ofpwire.FlowDelete
		if strict {
			cmd = ofpwire.FlowDeleteStrict
		}
		return len(mustApply(t, p, &ofpwire.FlowMod{Command: cmd, Match: m, Priority: prio, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}))
	}
	if n := del(true, match(ipv4, trk(0x20)), 10); n != 1 {
		t.Fatalf("strict delete of +trk removed %d", n)
	}
	if n := del(false, match(oxm(ofpwire.XMTypeCTMark, 7)), 0); n != 1 {
		t.Fatalf("delete ct_mark=7 removed %d, want the one flow with it", n)
	}
	if e := p.Lookup(0, &k, &ofmatch.Pipe{}, nil, nil); e == nil || e.Priority != 10 {
		t.Fatalf("the -trk flow is gone: %+v", e)
	}
}

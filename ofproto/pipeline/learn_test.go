package pipeline

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// TestLearnRefresh: a learned flow's idle and hard timeouts restart when
// it is learned again or when a megaflow that learned it carries traffic,
// and its counters are left alone by the latter.
func TestLearnRefresh(t *testing.T) {
	p := New(0)
	fm := add(match(inPort(3)), 5, output(1))
	fm.TableID, fm.IdleTimeout, fm.HardTimeout = 2, 10, 30
	e, changed, err := p.Learn(fm, t0)
	if err != nil || !changed {
		t.Fatalf("first learn: %v changed=%v", err, changed)
	}
	if _, changed, _ := p.Learn(fm, t0.Add(25*time.Second)); changed {
		t.Fatal("the same flow learned again changed the tables")
	}
	e.LearnRefresher().Touch(t0.Add(34*time.Second), 5, 500)
	if e.Packets.Load() != 0 {
		t.Fatal("the learning megaflow's packets were counted on the learned flow")
	}
	if gone := p.Expire(t0.Add(43 * time.Second)); len(gone) != 0 {
		t.Fatalf("expired %v though refreshed at 34 s (idle 10, hard 30)", gone[0].RemovedReason)
	}
	if gone := p.Expire(t0.Add(45 * time.Second)); len(gone) != 1 || gone[0].RemovedReason != ofpwire.FlowReasonIdleTimeout {
		t.Fatalf("not idle-expired 11 s after the refresh: %d gone", len(gone))
	}
	// Learned with other actions: the flow is replaced, the tables change.
	p.Learn(fm, t0)
	other := *fm
	other.Instructions = output(2)
	if _, changed, _ := p.Learn(&other, t0); !changed {
		t.Fatal("a learn with other actions did not change the tables")
	}
}

// TestDeleteLearned: the flows a delete_learned learn action learned (its
// table and cookie) go when the last flow holding that action goes,
// whether deleted or timed out, and not before.
func TestDeleteLearned(t *testing.T) {
	p := New(0)
	learn := func(prio uint16) *ofpwire.FlowMod {
		fm := add(match(inPort(uint64(prio))), prio, []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{
			&ofpwire.ActionLearn{TableID: 4, Cookie: 0x9, Flags: ofpwire.LearnDeleteLearned}}}})
		fm.HardTimeout = prio
		return fm
	}
	mustApply(t, p, learn(10))
	mustApply(t, p, learn(20))
	for i := range 3 {
		l := add(match(inPort(uint64(100+i))), 1, output(1))
		l.TableID, l.Cookie = 4, 0x9
		if _, _, err := p.Learn(l, t0); err != nil {
			t.Fatal(err)
		}
	}
	keep := add(match(inPort(7)), 1, output(1))
	keep.TableID, keep.Cookie = 4, 0x8
	mustApply(t, p, keep)
	if gone := p.Expire(t0.Add(15 * time.Second)); len(gone) != 1 {
		t.Fatalf("%d gone when one of two learning flows timed out, want only it", len(gone))
	}
	gone := p.Expire(t0.Add(25 * time.Second))
	if len(gone) != 4 {
		t.Fatalf("%d gone when the last learning flow timed out, want it and its 3 learned flows", len(gone))
	}
	for _, e := range gone[1:] {
		if e.TableID != 4 || e.Cookie != 0x9 || e.RemovedReason != ofpwire.FlowReasonDelete {
			t.Fatalf("removed %+v", e)
		}
	}
	if n := p.TableStats(4).Active; n != 1 {
		t.Fatalf("table 4 holds %d flows, want the one with another cookie", n)
	}
}

// TestLearnLimitCounts: the limit counts the table's flows with the
// learned cookie as they come and go (expiry frees room), a flow already
// there is kept at the limit, and a replacement of one of them (same
// match and priority, other actions) is refused at the limit, as in Open
// vSwitch, which counts the flow it would replace.
func TestLearnLimitCounts(t *testing.T) {
	p := New(0)
	flowFor := func(port uint64, hard uint16) *ofpwire.FlowMod {
		fm := add(match(inPort(port)), 5, output(1))
		fm.TableID, fm.Cookie, fm.HardTimeout = 1, 0x77, hard
		return fm
	}
	if _, _, err := p.LearnLimit(flowFor(1, 10), 2, t0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.LearnLimit(flowFor(2, 0), 2, t0); err != nil {
		t.Fatal(err)
	}
	p.RLock()
	full, again := p.LearnAllowedLocked(flowFor(3, 0), 2), p.LearnAllowedLocked(flowFor(2, 0), 2)
	p.RUnlock()
	if full || !again {
		t.Fatalf("at the limit: a new flow allowed %v (want false), one already there %v (want true)", full, again)
	}
	if _, _, err := p.LearnLimit(flowFor(3, 0), 2, t0); err != ErrLearnLimit {
		t.Fatalf("third flow: %v, want ErrLearnLimit", err)
	}
	changed := flowFor(2, 0)
	changed.Instructions = output(2)
	if _, _, err := p.LearnLimit(changed, 2, t0); err != ErrLearnLimit {
		t.Fatalf("replacing a flow at the limit: %v, want ErrLearnLimit", err)
	}
	if gone := p.Expire(t0.Add(11 * time.Second)); len(gone) != 1 {
		t.Fatalf("%d flows expired, want 1", len(gone))
	}
	if _, _, err := p.LearnLimit(flowFor(3, 0), 2, t0); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
}

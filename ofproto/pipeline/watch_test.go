package pipeline

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

type recWatcher struct {
	on  bool
	got []Change
}

func (w *recWatcher) Watching() bool     { return w.on }
func (w *recWatcher) Changed(c []Change) { w.got = append(w.got, c...) }

// take returns the kinds recorded since the last take.
func (w *recWatcher) take() []ChangeKind {
	var ks []ChangeKind
	for _, c := range w.got {
		ks = append(ks, c.Kind)
	}
	w.got = nil
	return ks
}

func wantKinds(t *testing.T, what string, got []ChangeKind, want ...ChangeKind) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: changes %v, want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: changes %v, want %v", what, got, want)
		}
	}
}

// TestWatcherSeesEveryChange: adds, replacements, modifies, deletes,
// expiry and learned flows reach the watcher; a reinstall (a datapath
// rebuild) and anything while it is not watching do not; held changes
// are dropped or delivered on release.
func TestWatcherSeesEveryChange(t *testing.T) {
	p := New(0)
	w := &recWatcher{}
	p.SetWatcher(w)
	mustApply(t, p, add(match(inPort(9)), 1, output(1)))
	wantKinds(t, "not watching", w.take())
	w.on = true

	fm := add(match(inPort(1)), 10, output(2))
	mustApply(t, p, fm)
	if w.got[0].Mod != fm || w.got[0].Entry.Priority != 10 {
		t.Fatalf("added: %+v", w.got[0])
	}
	wantKinds(t, "add", w.take(), EntryAdded)
	mustApply(t, p, add(match(inPort(1)), 10, output(3)))
	wantKinds(t, "replace", w.take(), EntryModified)

	mod := add(match(inPort(1)), 0, output(4))
	mod.Command = ofpwire.FlowModify
	mustApply(t, p, mod)
	old := w.got[0].OldInstructions
	if len(old) != 1 || old[0].(*ofpwire.InstrApplyActions).Actions[0].(*ofpwire.ActionOutput).Port != 3 {
		t.Fatalf("old instructions %v", old)
	}
	wantKinds(t, "modify", w.take(), EntryModified)

	var m ofmatch.Match
	if m2, err := ofmatch.FromOXM(match(inPort(1))); err != nil {
		t.Fatal(err)
	} else {
		m = m2
	}
	if e := p.tables[0].findStrict(&m, 10); e == nil || !e.CoveredBy(&m) || !e.OutputsTo(4) || e.OutputsTo(3) {
		t.Fatalf("entry %v: CoveredBy/OutputsTo", e)
	}

	del := &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: TableAll, Match: match(inPort(1)),
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
	mustApply(t, p, del)
	wantKinds(t, "delete", w.take(), EntryRemoved)

	to := add(match(inPort(2)), 5, output(1))
	to.HardTimeout = 1
	mustApply(t, p, to)
	w.take()
	p.Expire(t0.Add(2 * time.Second))
	if len(w.got) != 1 || w.got[0].Entry.RemovedReason != ofpwire.FlowReasonHardTimeout || w.got[0].Mod != nil {
		t.Fatalf("expiry: %+v", w.got)
	}
	wantKinds(t, "expiry", w.take(), EntryRemoved)

	if _, _, err := p.Learn(add(match(inPort(3)), 5, output(1)), t0); err != nil {
		t.Fatal(err)
	}
	wantKinds(t, "learn", w.take(), EntryAdded)

	if err := p.Reinstall(add(match(inPort(4)), 5, output(1)), EntryState{Created: t0, LastUsed: t0}); err != nil {
		t.Fatal(err)
	}
	wantKinds(t, "reinstall", w.take())

	p.HoldChanges()
	mustApply(t, p, add(match(inPort(5)), 5, output(1)))
	wantKinds(t, "held", w.take())
	p.ReleaseChanges(false)
	wantKinds(t, "dropped", w.take())
	p.HoldChanges()
	mustApply(t, p, add(match(inPort(6)), 5, output(1)))
	p.ReleaseChanges(true)
	wantKinds(t, "released", w.take(), EntryAdded)
}

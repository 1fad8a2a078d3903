package pipeline

import (
	"errors"
	"reflect"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// What Open vSwitch's learn action does to the tables: add the flow it
// built, or find it there already and restart its timeouts; and, for
// learn actions with delete_learned, remove what they learned once the
// last flow holding them is gone.

// Learn applies fm, the ADD a learn action built from a packet. When
// table fm.TableID has an entry with the same match and priority and the
// same instructions, cookie, timeouts and flags, that entry's idle and
// hard timeouts restart and nothing else changes (changed is false: no
// translation depends on a timer). Otherwise fm is added like any ADD
// (replacing an entry with the same match and priority, whose counters
// it keeps). It returns the entry the table holds for fm.
func (p *Pipeline) Learn(fm *ofpwire.FlowMod, now time.Time) (e *Entry, changed bool, err error) {
	return p.LearnLimit(fm, 0, now)
}

// ErrLearnLimit is LearnLimit's refusal: the table already holds as many
// flows with the learned flow's cookie as the learn action's limit.
var ErrLearnLimit = errors.New("pipeline: learn limit reached")

// LearnLimit is Learn for a learn action with limit=N (N > 0): a flow not
// in the table yet is added only while table fm.TableID holds fewer than
// limit entries with fm.Cookie (every such entry counts, learned or not,
// as in Open vSwitch); otherwise it fails with ErrLearnLimit. A flow
// already there unchanged is always kept (its timeouts restart).
func (p *Pipeline) LearnLimit(fm *ofpwire.FlowMod, limit uint32, now time.Time) (e *Entry, changed bool, err error) {
	p.mu.Lock()
	e, changed, err = p.learnLocked(fm, limit, now)
	p.unlockChanged(changed)
	return e, changed, err
}

// LearnAllowedLocked reports whether LearnLimit(fm, limit) would keep or
// add fm rather than refuse it, for a translation (which holds the read
// lock) whose learn action writes that outcome into a field. A flow the
// tables would refuse for another reason counts as allowed: Open
// vSwitch's result bit says only whether the limit let it through.
func (p *Pipeline) LearnAllowedLocked(fm *ofpwire.FlowMod, limit uint32) bool {
	if limit == 0 || int(fm.TableID) >= NumTables {
		return true
	}
	m, err := ofmatch.FromOXM(fm.Match)
	if err != nil {
		return true
	}
	t := &p.tables[fm.TableID]
	return t.unchanged(&m, fm) != nil || t.cookies[fm.Cookie] < int(limit)
}

// unchanged returns the entry that already is fm's flow (same match,
// priority, cookie, timeouts, flags and instructions), or nil.
func (t *table) unchanged(m *ofmatch.Match, fm *ofpwire.FlowMod) *Entry {
	if old := t.findStrict(m, fm.Priority); old != nil && old.Cookie == fm.Cookie &&
		old.IdleTimeout == fm.IdleTimeout && old.HardTimeout == fm.HardTimeout && old.Flags == fm.Flags &&
		reflect.DeepEqual(old.Instructions(), fm.Instructions) {
		return old
	}
	return nil
}

func (p *Pipeline) learnLocked(fm *ofpwire.FlowMod, limit uint32, now time.Time) (*Entry, bool, error) {
	if fm.Command != ofpwire.FlowAdd {
		return nil, false, fmErr(ofpwire.FMFCBadCommand)
	}
	if err := p.checkMod(fm); err != nil {
		return nil, false, err
	}
	m, err := ofmatch.FromOXM(fm.Match)
	if err != nil {
		return nil, false, err
	}
	if err := checkInstructions(fm.TableID, fm.Instructions); err != nil {
		return nil, false, err
	}
	t := &p.tables[fm.TableID]
	if old := t.unchanged(&m, fm); old != nil {
		old.refresh(now)
		return old, false, nil
	}
	if limit != 0 && t.cookies[fm.Cookie] >= int(limit) {
		return nil, false, ErrLearnLimit
	}
	if err := p.add(fm, &m, now, nil); err != nil {
		return nil, false, err
	}
	return t.findStrict(&m, fm.Priority), true, nil
}

// refresh restarts e's idle and hard timeouts at now (never backwards).
func (e *Entry) refresh(now time.Time) {
	e.Touch(now, 0, 0)
	t := now.UnixNano()
	for {
		old := e.hardFrom.Load()
		if t <= old || e.hardFrom.CompareAndSwap(old, t) {
			return
		}
	}
}

// LearnRefresher returns the sink for a megaflow whose translation
// learned e: traffic pushed to it restarts e's timeouts, as the learn
// action would have done had each packet been translated, and leaves e's
// counters alone (those packets matched the learning flow, not e).
func (e *Entry) LearnRefresher() StatsSink { return (*learnRefresher)(e) }

type learnRefresher Entry

func (r *learnRefresher) Touch(now time.Time, packets, _ uint64) {
	if packets != 0 {
		(*Entry)(r).refresh(now)
	}
}

// learnedCookie names the flows a delete_learned learn action learned:
// its table and cookie.
type learnedCookie struct {
	table  uint8
	cookie uint64
}

// deleteLearned returns the (table, cookie) of every learn action with
// delete_learned in e.
func (e *Entry) deleteLearned(out []learnedCookie) []learnedCookie {
	e.hasAction(func(a ofpwire.Action) bool {
		if l, ok := a.(*ofpwire.ActionLearn); ok && l.Flags&ofpwire.LearnDeleteLearned != 0 {
			out = append(out, learnedCookie{l.TableID, l.Cookie})
		}
		return false
	})
	return out
}

// deleteLearnedLocked follows the removal of gone: for each learn action
// with delete_learned that no remaining entry holds any more, the entries
// of its table with its cookie are removed too (reason DELETE), as Open
// vSwitch does. It returns gone with them appended.
func (p *Pipeline) deleteLearnedLocked(gone []*Entry) []*Entry {
	for start := 0; start < len(gone); {
		var lost []learnedCookie
		for _, e := range gone[start:] {
			lost = e.deleteLearned(lost)
		}
		start = len(gone)
		if len(lost) == 0 {
			break
		}
		held := make(map[learnedCookie]bool)
		for tid := range p.tables {
			p.tables[tid].each(func(e *Entry) {
				for _, c := range e.deleteLearned(nil) {
					held[c] = true
				}
			})
		}
		for _, c := range lost {
			if held[c] {
				continue
			}
			held[c] = true // once
			t := &p.tables[c.table]
			first := len(gone)
			t.each(func(e *Entry) {
				if e.Cookie == c.cookie {
					gone = append(gone, e)
				}
			})
			for _, e := range gone[first:] {
				t.remove(e)
				e.RemovedReason = ofpwire.FlowReasonDelete
			}
		}
	}
	return gone
}

package datapath

import (
	"slices"
	"sync"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
)

// Rule is one entry of a RuleTable.
type Rule struct {
	Priority int
	Match    flow.Match // Key is masked by Add
	Actions  actions.List
}

// RuleTable is a single prioritised table of rules: the simplest Upcaller,
// for tests and benchmarks until ofproto's pipeline takes its place. The
// mask it returns is the union of the masks of every rule it examined, so a
// megaflow never covers a packet that a higher-priority rule would take.
type RuleTable struct {
	mu    sync.RWMutex
	rules []*Rule // highest priority first; equal priorities in insertion order
	// Invalidate is called, with the table locked, after every change; the
	// datapath's InvalidateFlows goes here so that no PMD keeps forwarding
	// by a megaflow made from the old rules.
	Invalidate func()
}

// Add inserts a rule.
func (t *RuleTable) Add(r Rule) {
	r.Match.Key.ApplyMask(&r.Match.Mask, &r.Match.Key)
	t.mu.Lock()
	i, _ := slices.BinarySearchFunc(t.rules, r.Priority, func(e *Rule, p int) int {
		if e.Priority >= p {
			return -1
		}
		return 1
	})
	t.rules = slices.Insert(t.rules, i, &r)
	t.changed()
	t.mu.Unlock()
}

// Clear removes every rule.
func (t *RuleTable) Clear() {
	t.mu.Lock()
	t.rules = nil
	t.changed()
	t.mu.Unlock()
}

// Len returns the number of rules.
func (t *RuleTable) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.rules)
}

func (t *RuleTable) changed() {
	if t.Invalidate != nil {
		t.Invalidate()
	}
}

// Lookup returns the highest-priority rule matching k, or nil.
func (t *RuleTable) Lookup(k *flow.Key) *Rule {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, r := range t.rules {
		if k.MatchesMasked(&r.Match.Mask, &r.Match.Key) {
			return r
		}
	}
	return nil
}

// Upcall implements Upcaller. A key that matches no rule gets an empty
// action list (drop).
func (t *RuleTable) Upcall(k *flow.Key, res *UpcallResult) error {
	res.Mask = flow.Mask{}
	res.Actions = nil
	res.NoInstall = false
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, r := range t.rules {
		res.Mask.Or(&r.Match.Mask)
		if k.MatchesMasked(&r.Match.Mask, &r.Match.Key) {
			res.Actions = r.Actions
			return nil
		}
	}
	return nil
}

package ofproto

import (
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"
)

// groupRefCounts counts, for every group, the flow entries and groups
// that forward to it directly (OpenFlow 1.3's ref_count): each referrer
// once, however many of its actions name the group.
func (b *Bridge) groupRefCounts() map[ofpwire.Group]uint32 {
	counts := make(map[ofpwire.Group]uint32)
	seen := make(map[ofpwire.Group]bool)
	count := func(acts []ofpwire.Action) {
		for _, a := range acts {
			if ga, ok := a.(*ofpwire.ActionGroup); ok && !seen[ga.Group] {
				seen[ga.Group] = true
				counts[ga.Group]++
			}
		}
	}
	f := pipeline.AnyFilter()
	entries, _ := b.pipe.Flows(&f)
	for _, e := range entries {
		clear(seen)
		for _, in := range e.Instructions() {
			count(ofpwire.InstructionActions(in))
		}
	}
	for _, g := range b.groups.Desc() {
		clear(seen)
		for _, bk := range g.Buckets {
			count(bk.Actions)
		}
	}
	return counts
}

// groupStats answers OFPMP_GROUP with reference counts computed from the
// tables (the group table's own count is not maintained).
func (b *Bridge) groupStats(id ofpwire.Group) []ofpwire.GroupStats {
	b.dp.PushStats(time.Now())
	st := b.groups.Stats(id, time.Now())
	if len(st) == 0 {
		return st
	}
	refs := b.groupRefCounts()
	for i := range st {
		st[i].RefCount = refs[st[i].GroupID]
	}
	return st
}

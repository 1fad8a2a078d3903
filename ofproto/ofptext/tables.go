package ofptext

import (
	"cmp"
	"iter"
	"slices"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Whole tables as lines, the form the daemon saves them in: one
// ovs-ofctl add-flow, add-group or add-meter line per entry, with no
// counters, in an order that depends only on the tables, so that equal
// tables give equal lists. ParseFlow, ParseGroup and ParseMeter read the
// lines back.

// FlowLines prints flow-mods (the ADDs that recreate a table's entries)
// ordered by table, descending priority, then text.
func FlowLines(fms []*ofpwire.FlowMod) []string {
	sorted := slices.Clone(fms)
	slices.SortStableFunc(sorted, func(x, y *ofpwire.FlowMod) int {
		return cmp.Or(cmp.Compare(x.TableID, y.TableID), cmp.Compare(y.Priority, x.Priority))
	})
	return slices.Collect(FlowLineSeq(slices.Values(sorted)))
}

// FlowLineSeq is FlowLines over flow-mods that come already ordered by
// table and descending priority, one at a time: it holds the text of one
// (table, priority) run only, so that a saver can write a large table
// without all of it as text in memory.
func FlowLineSeq(fms iter.Seq[*ofpwire.FlowMod]) iter.Seq[string] {
	return func(yield func(string) bool) {
		var run []string
		var table uint8
		var prio uint16
		flush := func() bool {
			slices.Sort(run)
			for _, l := range run {
				if !yield(l) {
					return false
				}
			}
			run = run[:0]
			return true
		}
		for fm := range fms {
			if len(run) > 0 && (fm.TableID != table || fm.Priority != prio) && !flush() {
				return
			}
			table, prio = fm.TableID, fm.Priority
			run = append(run, FormatFlowMod(fm))
		}
		flush()
	}
}

// GroupLines prints groups as add-group lines
// ("group_id=1,type=all,bucket=actions=output:2,..."), in the order given.
func GroupLines(ds []ofpwire.GroupDesc) []string {
	out := make([]string, len(ds))
	for i := range ds {
		out[i] = FormatGroup(&ds[i])
	}
	return out
}

// MeterLines prints meter-mods as one-line add-meter specifications, in
// the order given.
func MeterLines(mms []*ofpwire.MeterMod) []string {
	out := make([]string, len(mms))
	for i, mm := range mms {
		out[i] = FormatMeterMod(mm)
	}
	return out
}

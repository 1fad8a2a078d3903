package ofptext

import (
	"cmp"
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
	type line struct {
		table uint8
		prio  uint16
		text  string
	}
	ls := make([]line, len(fms))
	for i, fm := range fms {
		ls[i] = line{fm.TableID, fm.Priority, FormatFlowMod(fm)}
	}
	slices.SortFunc(ls, func(x, y line) int {
		return cmp.Or(cmp.Compare(x.table, y.table), cmp.Compare(y.prio, x.prio), cmp.Compare(x.text, y.text))
	})
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.text
	}
	return out
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

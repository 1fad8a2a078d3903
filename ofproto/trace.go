package ofproto

import (
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// Trace runs key through the bridge's tables as an upcall for it would
// (the hidden NORMAL table while failed open), with the bridge's current
// ports, port config, groups and NORMAL switch, and records every step
// (ovs-appctl ofproto/trace). It changes nothing: NORMAL learns no MAC, no
// megaflow is installed or invalidated, no entry or group counter moves
// (the tables' lookup counters do, see xlate.TranslateTrace). On a
// translation error the trace so far is returned with the error. ctNext
// are the ct states assumed for packets ct(table=N) recirculates (see
// xlate.TranslateTrace).
func (b *Bridge) Trace(key flow.Key, ctNext ...uint8) (*xlate.Trace, error) {
	opts := b.xlateOptions(time.Now())
	opts.DropFragments = b.dropFragments() // as an upcall sees it
	tr, err := xlate.TranslateTrace(b.activePipeline(), &key, opts, ctNext...)
	tr.Bridge = b.name
	return tr, err
}

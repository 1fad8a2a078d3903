package ovsdb

import (
	"fmt"
	"maps"
	"slices"

	"github.com/vswitch-go/vswitch/datapath/conntrack"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
)

// zoneTimeouts are the timeout policies of the Datapath rows of the
// datapath types this switch runs as ("ovs-vsctl add-zone-tp netdev
// zone=5 udp_first=10"). Both types share one tracker: a zone given
// different policies in the two takes netdev's, and that is reported.
func zoneTimeouts(r *dbconfig.Rows, p *dbconfig.Plan) map[uint16]conntrack.Timeouts {
	out := map[uint16]conntrack.Timeouts{}
	from := map[uint16]string{}
	for _, typ := range dbconfig.DatapathTypes { // netdev first
		dp := r.Datapaths[r.OVS.Datapaths[typ]]
		if dp == nil {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(dp.CTZones)) {
			z := r.CTZones[dp.CTZones[id]]
			if z == nil || z.TimeoutPolicy == nil || r.CTPolicies[*z.TimeoutPolicy] == nil {
				continue
			}
			to, unknown := conntrack.PolicyTimeouts(conntrack.DefaultTimeouts(), r.CTPolicies[*z.TimeoutPolicy].Timeouts)
			for _, k := range unknown {
				p.Problems = append(p.Problems, fmt.Sprintf("datapath %s zone %d timeout policy: %s not applied: not a state this tracker keeps apart", typ, id, k))
			}
			zone := uint16(id)
			if prev, ok := from[zone]; ok {
				if out[zone] != to {
					p.Problems = append(p.Problems, fmt.Sprintf("zone %d has timeout policies in datapaths %s and %s; %s's applies", id, prev, typ, prev))
				}
				continue
			}
			out[zone], from[zone] = to, typ
		}
	}
	return out
}

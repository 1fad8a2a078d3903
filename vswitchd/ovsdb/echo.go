package ovsdb

import (
	"github.com/ovn-kubernetes/libovsdb/model"

	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// runtimeOnly reports whether an update of a row changed only columns
// the switch writes back itself (cur_cfg, ofport, statistics, the
// controllers' state...): the echo of its own write-back, or of another
// writer of those columns. Such a change cannot change the configuration,
// so it starts no pass: every write-back otherwise cost a second pass
// over every row (read, plan, compare, write-back) for nothing, half the
// daemon's work per port added to a large bridge. What a write-back
// column should say is still checked by the periodic pass.
func runtimeOnly(old, new model.Model) bool {
	switch o := old.(type) {
	case *vswitchdb.Interface:
		n, ok := new.(*vswitchdb.Interface)
		if !ok {
			return false
		}
		a, b := *o, *n
		for _, r := range []*vswitchdb.Interface{&a, &b} {
			r.Ofport, r.Error, r.AdminState, r.LinkState = nil, nil, nil, nil
			r.MACInUse, r.MTU, r.Ifindex, r.Statistics, r.Status = nil, nil, nil, nil, nil
		}
		return a.Equals(&b)
	case *vswitchdb.OpenvSwitch:
		n, ok := new.(*vswitchdb.OpenvSwitch)
		if !ok {
			return false
		}
		a, b := *o, *n
		for _, r := range []*vswitchdb.OpenvSwitch{&a, &b} {
			r.CurCfg, r.OVSVersion, r.DbVersion, r.DatapathTypes, r.IfaceTypes = 0, nil, nil, nil, nil
		}
		return a.Equals(&b)
	case *vswitchdb.Bridge:
		n, ok := new.(*vswitchdb.Bridge)
		if !ok {
			return false
		}
		a, b := *o, *n
		a.DatapathID, b.DatapathID = nil, nil
		return a.Equals(&b)
	case *vswitchdb.Controller:
		n, ok := new.(*vswitchdb.Controller)
		if !ok {
			return false
		}
		a, b := *o, *n
		for _, r := range []*vswitchdb.Controller{&a, &b} {
			r.IsConnected, r.Role, r.Status = false, nil, nil
		}
		return a.Equals(&b)
	case *vswitchdb.Datapath:
		n, ok := new.(*vswitchdb.Datapath)
		if !ok {
			return false
		}
		a, b := *o, *n
		for _, r := range []*vswitchdb.Datapath{&a, &b} {
			r.Capabilities, r.DatapathVersion = nil, ""
		}
		return a.Equals(&b)
	}
	return false
}

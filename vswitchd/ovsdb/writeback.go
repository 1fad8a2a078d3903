package ovsdb

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/ovn-kubernetes/libovsdb/model"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbconfig"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// writeBack reports what runs, in one transaction: cur_cfg (last, in
// the same transaction, so that a client that sees it sees the rest),
// the switch's capabilities, the bridges' datapath ids, the interfaces'
// run-time columns and the controllers' connection state. Only changed
// columns are written, so that the update this write causes comes back
// with nothing left to write.
func (r *Reconciler) writeBack(ctx context.Context, rs *dbconfig.Rows, p *dbconfig.Plan) error {
	var ops []ovsdb.Operation
	// keep puts the rows as written into rs once the transaction
	// commits, so that a pass which reuses rs (no update since) compares
	// against what the database holds, not what it held at the read.
	var keep []func()
	stats := time.Since(r.statsAt) >= statsInterval
	if stats {
		r.statsAt = time.Now()
	}
	schema := r.cli.Schema()
	update := func(m model.Model, fields ...any) error {
		if len(fields) == 0 {
			return nil
		}
		o, err := updateOp(&schema, m, fields...)
		if err != nil {
			return err
		}
		ops = append(ops, o)
		return nil
	}
	// Each interface is compared in one scratch copy, a new one only
	// after a copy was kept: a copy per interface per pass was most of
	// the garbage of an idle switch with 1,000 ports (the passes that
	// write nothing for it are nearly all of them).
	var ri *vswitchdb.Interface
	for _, u := range sortedKeys(rs.Ifaces) {
		if ri == nil {
			ri = new(vswitchdb.Interface)
		}
		*ri = *rs.Ifaces[u]
		fields := r.interfaceFields(ri, p, stats)
		if len(fields) == 0 {
			continue
		}
		if err := update(ri, fields...); err != nil {
			return err
		}
		kept := ri
		keep = append(keep, func() { rs.Ifaces[u] = kept })
		ri = nil
	}
	for _, u := range sortedKeys(rs.Bridges) {
		rb := *rs.Bridges[u]
		var fields []any
		want := optString(r.sw.DatapathID(rb.Name))
		if _, ok := p.Config.Bridges[rb.Name]; !ok {
			want = nil
		}
		if !reflect.DeepEqual(rb.DatapathID, want) {
			rb.DatapathID = want
			fields = append(fields, &rb.DatapathID)
		}
		if err := update(&rb, fields...); err != nil {
			return err
		}
		if len(fields) > 0 {
			keep = append(keep, func() { rs.Bridges[u] = &rb })
		}
		if _, ok := p.Config.Bridges[rb.Name]; !ok {
			continue
		}
		for _, cu := range rb.Controller {
			rc := rs.Controllers[cu]
			if rc == nil {
				continue
			}
			c := *rc
			st := r.sw.ControllerStatus(rb.Name, c.Target)
			var fields []any
			if st.Connected != c.IsConnected {
				c.IsConnected = st.Connected
				fields = append(fields, &c.IsConnected)
			}
			var role *vswitchdb.ControllerRole
			if st.Role != "" {
				role = new(vswitchdb.ControllerRole(st.Role))
			}
			if !reflect.DeepEqual(c.Role, role) {
				c.Role = role
				fields = append(fields, &c.Role)
			}
			if !maps.Equal(c.Status, st.Status) {
				c.Status = st.Status
				fields = append(fields, &c.Status)
			}
			if err := update(&c, fields...); err != nil {
				return err
			}
			if len(fields) > 0 {
				keep = append(keep, func() { rs.Controllers[cu] = &c })
			}
		}
	}
	// The Datapath rows of the types this switch runs as (ovs-vsctl
	// add-zone-tp creates them; so does ovn-controller, to read
	// capabilities such as ct_zero_snat).
	caps := datapath.Capabilities()
	for _, typ := range dbconfig.DatapathTypes {
		du := rs.OVS.Datapaths[typ]
		dp := rs.Datapaths[du]
		if dp == nil {
			continue
		}
		row := *dp
		var fields []any
		if !maps.Equal(row.Capabilities, caps) {
			row.Capabilities = caps
			fields = append(fields, &row.Capabilities)
		}
		if row.DatapathVersion != datapathVersion {
			row.DatapathVersion = datapathVersion
			fields = append(fields, &row.DatapathVersion)
		}
		if err := update(&row, fields...); err != nil {
			return err
		}
		if len(fields) > 0 {
			keep = append(keep, func() { rs.Datapaths[du] = &row })
		}
	}
	ovs := *rs.OVS
	var fields []any
	if v := optString(r.sw.Version()); !reflect.DeepEqual(ovs.OVSVersion, v) {
		ovs.OVSVersion = v
		fields = append(fields, &ovs.OVSVersion)
	}
	// db_version is the schema the switch was built for, as
	// ovs-vswitchd reports it.
	if v := optString(modelsSchemaVersion()); !reflect.DeepEqual(ovs.DbVersion, v) {
		ovs.DbVersion = v
		fields = append(fields, &ovs.DbVersion)
	}
	if !slices.Equal(ovs.DatapathTypes, dbconfig.DatapathTypes) {
		ovs.DatapathTypes = slices.Clone(dbconfig.DatapathTypes)
		fields = append(fields, &ovs.DatapathTypes)
	}
	if t := dbconfig.IfaceTypes(); !sameSet(ovs.IfaceTypes, t) {
		ovs.IfaceTypes = t
		fields = append(fields, &ovs.IfaceTypes)
	}
	if ovs.CurCfg != p.NextCfg {
		ovs.CurCfg = p.NextCfg
		fields = append(fields, &ovs.CurCfg)
	}
	if err := update(&ovs, fields...); err != nil {
		return err
	}
	if len(fields) > 0 {
		keep = append(keep, func() { rs.OVS = &ovs })
	}
	if len(ops) == 0 {
		return nil
	}
	r.mu.Lock()
	r.writes++
	r.mu.Unlock()
	// What this writes is derived from the rest of the database and the
	// running switch, and written again after a restart: the embedded
	// server replies without waiting for its fsync (ovs-vsctl, which
	// sees cur_cfg through its monitor, does not wait for it either), so
	// the loop is free for the next change sooner. Debian's ovsdb-server
	// syncs nothing not marked durable anyway.
	commit := !r.noCommitOp
	if commit {
		ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationCommit, Durable: new(false)})
	}
	res, err := r.cli.Transact(ctx, ops...)
	if _, cerr := ovsdb.CheckOperationResults(res, ops); err == nil && cerr != nil && commit {
		// A server without the commit operation (libovsdb's own
		// refuses the whole transaction for it) takes the rest without:
		// so from now on.
		ops = ops[:len(ops)-1]
		res, err = r.cli.Transact(ctx, ops...)
		if _, cerr := ovsdb.CheckOperationResults(res, ops); err == nil && cerr == nil {
			r.noCommitOp = true
		}
	}
	if err != nil {
		return fmt.Errorf("write-back: %w", err)
	}
	if _, err := ovsdb.CheckOperationResults(res, ops); err != nil {
		return fmt.Errorf("write-back: %w", err)
	}
	for _, k := range keep {
		k()
	}
	return nil
}

// datapathVersion is what ovs-vswitchd's userspace datapath reports in
// Datapath.datapath_version.
const datapathVersion = "<built-in>"

// modelsSchemaVersion is the version of the schema the models were
// generated from, parsed once: vswitchdb.Schema parses the whole schema's
// JSON, a fifth of a write-back's time when every pass asked.
var modelsSchemaVersion = sync.OnceValue(func() string { return vswitchdb.Schema().Version })

// interfaceFields sets in ri the run-time columns that differ from what
// runs and returns pointers to them, as libovsdb's Update takes them.
// Statistics are compared and written only when stats is set.
func (r *Reconciler) interfaceFields(ri *vswitchdb.Interface, p *dbconfig.Plan, stats bool) []any {
	var fields []any
	ref, applied := p.IfaceAt[ri.UUID]
	why, refused := p.IfaceErr[ri.UUID]
	var st PortStatus
	switch {
	case refused:
	case !applied:
		why = "not in any bridge"
	default:
		// A port that has just started gets its counters at once
		// rather than at the next interval.
		stats = stats || len(ri.Statistics) == 0
		st = r.sw.PortStatus(ref.Bridge, ref.Port, stats)
		if ref.Local {
			st.OFPort = dbconfig.LocalOFPort
		}
		if !st.Running {
			why = st.Error
			if why == "" {
				why = "not running"
			}
		}
	}
	if why != "" {
		setOpt(&fields, &ri.Ofport, -1, true)
		setOpt(&fields, &ri.Error, why, true)
		setOpt(&fields, &ri.AdminState, "", false)
		setOpt(&fields, &ri.LinkState, "", false)
		setOpt(&fields, &ri.MACInUse, "", false)
		setOpt(&fields, &ri.MTU, 0, false)
		setOpt(&fields, &ri.Ifindex, 0, false)
		setMap(&fields, &ri.Status, nil)
		if stats {
			setMap(&fields, &ri.Statistics, nil)
		}
		return fields
	}
	setOpt(&fields, &ri.Ofport, int(st.OFPort), true)
	setOpt(&fields, &ri.Error, "", false)
	setOpt(&fields, &ri.AdminState, st.AdminState, st.AdminState != "")
	setOpt(&fields, &ri.LinkState, st.LinkState, st.LinkState != "")
	setOpt(&fields, &ri.MACInUse, st.MAC, st.MAC != "")
	setOpt(&fields, &ri.MTU, st.MTU, st.MTU != 0)
	setOpt(&fields, &ri.Ifindex, st.Ifindex, st.Ifindex != 0)
	setMap(&fields, &ri.Status, st.Status)
	if stats {
		setMap(&fields, &ri.Statistics, st.Stats)
	}
	return fields
}

// setOpt sets the optional column *dst to v (present) or to empty, and
// adds dst to fields when that changes it. Typed, not reflected: the
// write-back compares every column of every interface each second.
func setOpt[T comparable](fields *[]any, dst **T, v T, present bool) {
	switch {
	case !present && *dst == nil, present && *dst != nil && **dst == v:
		return
	case present:
		*dst = &v
	default:
		*dst = nil
	}
	*fields = append(*fields, dst)
}

// setMap sets the map column *dst to v (an empty column reads as an empty
// map, never nil), adding dst to fields when that changes it.
func setMap[V comparable](fields *[]any, dst *map[string]V, v map[string]V) {
	if len(*dst) == 0 && len(v) == 0 || maps.Equal(*dst, v) {
		return
	}
	*dst = v
	*fields = append(*fields, dst)
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

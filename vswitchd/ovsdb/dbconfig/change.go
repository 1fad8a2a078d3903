package dbconfig

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"

	"github.com/google/uuid"
	"github.com/ovn-kubernetes/libovsdb/ovsdb"

	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// A change of configuration (vsctl's add-br, add-port, set...) is written
// to the database as the difference between the configuration the rows
// asked for and the one the change leaves: only the rows and columns the
// change touches are written, so that rows the switch refused and
// columns it does not model (external_ids, other tools' rows) stay as
// they are. The reconciler then applies the database as it applies any
// client's change: the database is the one configuration.

// changeWriter builds the operations of one change.
type changeWriter struct {
	rs    *Rows
	ops   []ovsdb.Operation
	named int
}

func (w *changeWriter) name() string {
	w.named++
	return "row" + strconv.Itoa(w.named)
}

func (w *changeWriter) add(op ovsdb.Operation) { w.ops = append(w.ops, op) }

// ByUUIDWhere selects the row with UUID u.
func ByUUIDWhere(u string) []ovsdb.Condition {
	return []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: u})}
}

func strMap(m map[string]string) ovsdb.OvsMap {
	out := ovsdb.OvsMap{GoMap: make(map[any]any, len(m))}
	for k, v := range m {
		out.GoMap[k] = v
	}
	return out
}

func uuidSet(us []string) ovsdb.OvsSet {
	s := ovsdb.OvsSet{GoSet: make([]any, 0, len(us))}
	for _, u := range us {
		s.GoSet = append(s.GoSet, ovsdb.UUID{GoUUID: u})
	}
	return s
}

func optIntSet(v int, set bool) ovsdb.OvsSet {
	if !set {
		return ovsdb.OvsSet{GoSet: []any{}}
	}
	return ovsdb.OvsSet{GoSet: []any{v}}
}

func strSet(ss []string) ovsdb.OvsSet {
	s := ovsdb.OvsSet{GoSet: make([]any, 0, len(ss))}
	for _, v := range ss {
		s.GoSet = append(s.GoSet, v)
	}
	return s
}

// delta applies to have what changed from old to next: keys old had and
// next has not are removed, next's keys set; other keys of have (set by
// another client) stay.
func delta(have, old, next map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	for k := range old {
		if _, ok := next[k]; !ok {
			delete(out, k)
		}
	}
	maps.Copy(out, next)
	return out
}

// ChangeOps are the operations that make the database, read as rs, hold
// next where it holds old.
func ChangeOps(rs *Rows, old, next *config.Config) ([]ovsdb.Operation, error) {
	if rs.OVS == nil {
		return nil, errors.New("the database has no Open_vSwitch row (ovs-vsctl init creates it)")
	}
	w := &changeWriter{rs: rs}
	root := rs.OVS.UUID
	if !maps.Equal(old.OtherConfig, next.OtherConfig) {
		w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Open_vSwitch", Where: ByUUIDWhere(root),
			Row: ovsdb.Row{"other_config": strMap(delta(rs.OVS.OtherConfig, old.OtherConfig, next.OtherConfig))}})
	}
	if !sameSSL(old.SSL, next.SSL) {
		switch {
		case next.SSL == nil:
			w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Open_vSwitch", Where: ByUUIDWhere(root),
				Row: ovsdb.Row{"ssl": ovsdb.OvsSet{GoSet: []any{}}}})
		case rs.OVS.SSL != nil && rs.SSL[*rs.OVS.SSL] != nil:
			w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "SSL", Where: ByUUIDWhere(*rs.OVS.SSL), Row: sslRow(next.SSL)})
		default:
			n := w.name()
			w.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: "SSL", UUIDName: n, Row: sslRow(next.SSL)})
			w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Open_vSwitch", Where: ByUUIDWhere(root),
				Row: ovsdb.Row{"ssl": ovsdb.UUID{GoUUID: n}}})
		}
	}
	bridgeRow := map[string]*vswitchdb.Bridge{}
	for _, b := range rs.Bridges {
		bridgeRow[b.Name] = b
	}
	var added, removed []string
	for _, name := range sortedKeys(old.Bridges) {
		if _, ok := next.Bridges[name]; !ok {
			if rb := bridgeRow[name]; rb != nil {
				removed = append(removed, rb.UUID)
			}
		}
	}
	for _, name := range sortedKeys(next.Bridges) {
		nb := next.Bridges[name]
		ob := old.Bridges[name]
		rb := bridgeRow[name]
		if ob == nil || rb == nil {
			if rb != nil {
				// In the database but not applied (refused): rewritten.
				removed = append(removed, rb.UUID)
			}
			added = append(added, w.insertBridge(nb))
			continue
		}
		if err := w.updateBridge(rb, ob, nb); err != nil {
			return nil, err
		}
	}
	if len(removed) > 0 {
		w.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: ByUUIDWhere(root),
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("bridges", ovsdb.MutateOperationDelete, uuidSet(removed))}})
	}
	if len(added) > 0 {
		w.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: "Open_vSwitch", Where: ByUUIDWhere(root),
			Mutations: []ovsdb.Mutation{*ovsdb.NewMutation("bridges", ovsdb.MutateOperationInsert, uuidSet(added))}})
	}
	return w.ops, nil
}

func sameSSL(a, b *config.SSL) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sslRow(s *config.SSL) ovsdb.Row {
	return ovsdb.Row{"private_key": s.PrivateKey, "certificate": s.Certificate, "ca_cert": s.CACert}
}

// bridgeOtherConfig is the bridge's other_config in the database: the
// daemon's datapath id is other_config:datapath-id there.
func bridgeOtherConfig(b *config.Bridge) map[string]string {
	oc := maps.Clone(b.OtherConfig)
	if b.DatapathID != "" {
		if oc == nil {
			oc = map[string]string{}
		}
		oc["datapath-id"] = b.DatapathID
	}
	return oc
}

func failModeValue(m string) any {
	if m == config.FailModeSecure {
		return vswitchdb.BridgeFailModeSecure
	}
	return vswitchdb.BridgeFailModeStandalone
}

// insertBridge inserts bridge b with its own port and its other ports and
// controllers, and returns its named UUID.
func (w *changeWriter) insertBridge(b *config.Bridge) string {
	var ports []string
	ports = append(ports, w.insertPort(&config.Port{Name: b.Name, Type: config.PortTypeInternal}))
	for _, pname := range sortedKeys(b.Ports) {
		ports = append(ports, w.insertPort(b.Ports[pname]))
	}
	var ctls []string
	for _, t := range b.Controllers {
		ctls = append(ctls, w.insertController(t, b.ControllerOptions[t]))
	}
	n := w.name()
	w.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: "Bridge", UUIDName: n, Row: ovsdb.Row{
		"name": b.Name, "fail_mode": failModeValue(b.FailMode), "ports": uuidSet(ports), "controller": uuidSet(ctls),
		"protocols": strSet(b.Protocols), "other_config": strMap(bridgeOtherConfig(b))}})
	return n
}

func controllerRow(target string, o config.ControllerOptions) ovsdb.Row {
	row := ovsdb.Row{"target": target}
	probe := o.InactivityProbe
	if probe < 0 {
		probe = 0
	}
	row["inactivity_probe"] = optIntSet(probe, o.InactivityProbe != 0)
	row["max_backoff"] = optIntSet(o.MaxBackoff, o.MaxBackoff != 0)
	return row
}

func (w *changeWriter) insertController(target string, o config.ControllerOptions) string {
	n := w.name()
	w.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: "Controller", UUIDName: n, Row: controllerRow(target, o)})
	return n
}

func interfaceRow(p *config.Port) ovsdb.Row {
	return ovsdb.Row{"type": p.Type, "options": strMap(p.Options), "other_config": strMap(p.OtherConfig),
		"ofport_request": optIntSet(int(p.OFPortRequest), p.OFPortRequest != 0),
		"mtu_request":    optIntSet(p.MTURequest, p.MTURequest != 0)}
}

func portRow(p *config.Port) ovsdb.Row {
	trunks := ovsdb.OvsSet{GoSet: []any{}}
	for _, v := range p.Trunks {
		trunks.GoSet = append(trunks.GoSet, int(v))
	}
	return ovsdb.Row{"tag": optIntSet(int(p.Tag), p.Tag != 0), "trunks": trunks}
}

// insertPort inserts port p with its interface and returns the port's
// named UUID.
func (w *changeWriter) insertPort(p *config.Port) string {
	in := w.name()
	irow := interfaceRow(p)
	irow["name"] = p.Name
	w.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: "Interface", UUIDName: in, Row: irow})
	pn := w.name()
	prow := portRow(p)
	prow["name"] = p.Name
	prow["interfaces"] = ovsdb.UUID{GoUUID: in}
	w.add(ovsdb.Operation{Op: ovsdb.OperationInsert, Table: "Port", UUIDName: pn, Row: prow})
	return pn
}

// updateBridge writes what changed from ob to nb in bridge row rb.
func (w *changeWriter) updateBridge(rb *vswitchdb.Bridge, ob, nb *config.Bridge) error {
	row := ovsdb.Row{}
	if ob.FailMode != nb.FailMode {
		row["fail_mode"] = failModeValue(nb.FailMode)
	}
	if !slices.Equal(ob.Protocols, nb.Protocols) {
		row["protocols"] = strSet(nb.Protocols)
	}
	if oo, no := bridgeOtherConfig(ob), bridgeOtherConfig(nb); !maps.Equal(oo, no) {
		row["other_config"] = strMap(delta(rb.OtherConfig, oo, no))
	}
	if !slices.Equal(ob.Controllers, nb.Controllers) || !maps.Equal(ob.ControllerOptions, nb.ControllerOptions) {
		byTarget := map[string]string{}
		for _, cu := range rb.Controller {
			if c := w.rs.Controllers[cu]; c != nil {
				byTarget[c.Target] = cu
			}
		}
		var ctls []string
		for _, t := range nb.Controllers {
			if cu, ok := byTarget[t]; ok {
				if ob.ControllerOptions[t] != nb.ControllerOptions[t] {
					w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Controller", Where: ByUUIDWhere(cu),
						Row: controllerRow(t, nb.ControllerOptions[t])})
				}
				ctls = append(ctls, cu)
				continue
			}
			ctls = append(ctls, w.insertController(t, nb.ControllerOptions[t]))
		}
		row["controller"] = uuidSet(ctls)
	}
	portRows := map[string]*vswitchdb.Port{}
	for _, pu := range rb.Ports {
		if p := w.rs.Ports[pu]; p != nil {
			portRows[p.Name] = p
		}
	}
	var addPorts, delPorts []string
	for _, pname := range sortedKeys(ob.Ports) {
		if _, ok := nb.Ports[pname]; !ok {
			if rp := portRows[pname]; rp != nil {
				delPorts = append(delPorts, rp.UUID)
			}
		}
	}
	for _, pname := range sortedKeys(nb.Ports) {
		np, op := nb.Ports[pname], ob.Ports[pname]
		rp := portRows[pname]
		if op == nil || rp == nil || len(rp.Interfaces) != 1 {
			if rp != nil {
				delPorts = append(delPorts, rp.UUID)
			}
			addPorts = append(addPorts, w.insertPort(np))
			continue
		}
		w.updatePort(rp, op, np)
	}
	if len(row) > 0 {
		w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Bridge", Where: ByUUIDWhere(rb.UUID), Row: row})
	}
	var muts []ovsdb.Mutation
	if len(delPorts) > 0 {
		muts = append(muts, *ovsdb.NewMutation("ports", ovsdb.MutateOperationDelete, uuidSet(delPorts)))
	}
	if len(addPorts) > 0 {
		muts = append(muts, *ovsdb.NewMutation("ports", ovsdb.MutateOperationInsert, uuidSet(addPorts)))
	}
	if len(muts) > 0 {
		// Deletions first: a port replaced under the same name leaves
		// before its successor comes (the name index).
		for _, m := range muts {
			w.add(ovsdb.Operation{Op: ovsdb.OperationMutate, Table: "Bridge", Where: ByUUIDWhere(rb.UUID), Mutations: []ovsdb.Mutation{m}})
		}
	}
	return nil
}

// updatePort writes what changed from op to np in port row rp and its
// interface.
func (w *changeWriter) updatePort(rp *vswitchdb.Port, op, np *config.Port) {
	prow := ovsdb.Row{}
	if op.Tag != np.Tag {
		prow["tag"] = optIntSet(int(np.Tag), np.Tag != 0)
	}
	if !slices.Equal(op.Trunks, np.Trunks) {
		prow["trunks"] = portRow(np)["trunks"]
	}
	if !maps.Equal(op.OtherConfig, np.OtherConfig) && len(rp.OtherConfig) > 0 {
		// Keys are written to the Interface; a key the port row holds
		// goes when the configuration drops or changes it.
		pc := maps.Clone(rp.OtherConfig)
		for k, v := range pc {
			if nv, ok := np.OtherConfig[k]; !ok || nv != v {
				delete(pc, k)
			}
		}
		prow["other_config"] = strMap(pc)
	}
	if len(prow) > 0 {
		w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Port", Where: ByUUIDWhere(rp.UUID), Row: prow})
	}
	ri := w.rs.Ifaces[rp.Interfaces[0]]
	if ri == nil {
		return
	}
	irow := ovsdb.Row{}
	full := interfaceRow(np)
	if op.Type != np.Type {
		irow["type"] = full["type"]
	}
	if !maps.Equal(op.Options, np.Options) {
		irow["options"] = strMap(delta(ri.Options, op.Options, np.Options))
	}
	if !maps.Equal(op.OtherConfig, np.OtherConfig) {
		irow["other_config"] = strMap(delta(ri.OtherConfig, op.OtherConfig, np.OtherConfig))
	}
	if op.OFPortRequest != np.OFPortRequest {
		irow["ofport_request"] = full["ofport_request"]
	}
	if op.MTURequest != np.MTURequest {
		irow["mtu_request"] = full["mtu_request"]
	}
	if len(irow) > 0 {
		w.add(ovsdb.Operation{Op: ovsdb.OperationUpdate, Table: "Interface", Where: ByUUIDWhere(ri.UUID), Row: irow})
	}
}

// InitOps are the operations that make a new, empty database hold c:
// the Open_vSwitch row (what ovs-vsctl init writes) and c's bridges. They
// have been through JSON, as a client's would be, so that a server in
// the same process takes them as it takes a client's.
func InitOps(c *config.Config) ([]ovsdb.Operation, error) {
	root := uuid.NewString()
	ops := []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: "Open_vSwitch", UUID: root, Row: ovsdb.Row{}}}
	rs := &Rows{OVS: &vswitchdb.OpenvSwitch{UUID: root}}
	more, err := ChangeOps(rs, &config.Config{}, c)
	if err != nil {
		return nil, err
	}
	ops = append(ops, more...)
	b, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	var out []ovsdb.Operation
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

package dbconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ovn-kubernetes/libovsdb/cache"
	"github.com/ovn-kubernetes/libovsdb/client"

	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/vswitchdb"
)

// Lister reads one table's rows into a slice of its models: a libovsdb
// client's cache, or the embedded server's database itself.
type Lister interface {
	List(ctx context.Context, result any) error
}

var _ Lister = client.Client(nil)

// Read takes the rows from cli, Open_vSwitch first: the other tables are
// then at least as new as its next_cfg, so that reporting it as cur_cfg
// never claims a change not yet seen.
func Read(ctx context.Context, cli Lister) (*Rows, error) { return read(ctx, cli, false) }

// ReadShared is Read, but from a libovsdb client the rows other than
// Open_vSwitch's are its cache's own, not copies (shallowRows): the
// caller changes none of them (the reconciler changes copies).
func ReadShared(ctx context.Context, cli Lister) (*Rows, error) { return read(ctx, cli, true) }

func read(ctx context.Context, cli Lister, shared bool) (*Rows, error) {
	var ovs []vswitchdb.OpenvSwitch
	if err := cli.List(ctx, &ovs); err != nil {
		return nil, err
	}
	out := &Rows{}
	var err error
	if c, ok := cli.(cacheHolder); shared && ok && c.Cache() != nil {
		tc := c.Cache()
		if out.Bridges, err = shallowRows[vswitchdb.Bridge](tc, vswitchdb.BridgeTable); err != nil {
			return nil, err
		}
		if out.Ports, err = shallowRows[vswitchdb.Port](tc, vswitchdb.PortTable); err != nil {
			return nil, err
		}
		if out.Ifaces, err = shallowRows[vswitchdb.Interface](tc, vswitchdb.InterfaceTable); err != nil {
			return nil, err
		}
		if out.Controllers, err = shallowRows[vswitchdb.Controller](tc, vswitchdb.ControllerTable); err != nil {
			return nil, err
		}
		if out.SSL, err = shallowRows[vswitchdb.SSL](tc, vswitchdb.SSLTable); err != nil {
			return nil, err
		}
		if out.Datapaths, err = shallowRows[vswitchdb.Datapath](tc, vswitchdb.DatapathTable); err != nil {
			return nil, err
		}
		if out.CTZones, err = shallowRows[vswitchdb.CTZone](tc, vswitchdb.CTZoneTable); err != nil {
			return nil, err
		}
		if out.CTPolicies, err = shallowRows[vswitchdb.CTTimeoutPolicy](tc, vswitchdb.CTTimeoutPolicyTable); err != nil {
			return nil, err
		}
	} else {
		var brs []vswitchdb.Bridge
		var ports []vswitchdb.Port
		var ifs []vswitchdb.Interface
		var ctls []vswitchdb.Controller
		var ssl []vswitchdb.SSL
		var dps []vswitchdb.Datapath
		var zones []vswitchdb.CTZone
		var tps []vswitchdb.CTTimeoutPolicy
		for _, l := range []any{&brs, &ports, &ifs, &ctls, &ssl, &dps, &zones, &tps} {
			if err := cli.List(ctx, l); err != nil {
				return nil, err
			}
		}
		out = &Rows{Bridges: byUUID(brs, func(b *vswitchdb.Bridge) string { return b.UUID }),
			Ports:       byUUID(ports, func(p *vswitchdb.Port) string { return p.UUID }),
			Ifaces:      byUUID(ifs, func(i *vswitchdb.Interface) string { return i.UUID }),
			Controllers: byUUID(ctls, func(c *vswitchdb.Controller) string { return c.UUID }),
			SSL:         byUUID(ssl, func(s *vswitchdb.SSL) string { return s.UUID }),
			Datapaths:   byUUID(dps, func(d *vswitchdb.Datapath) string { return d.UUID }),
			CTZones:     byUUID(zones, func(z *vswitchdb.CTZone) string { return z.UUID }),
			CTPolicies:  byUUID(tps, func(p *vswitchdb.CTTimeoutPolicy) string { return p.UUID })}
	}
	switch len(ovs) {
	case 0:
		return nil, errors.New("the database has no Open_vSwitch row yet (ovs-vsctl init creates it)")
	case 1:
		out.OVS = &ovs[0]
	default:
		return nil, fmt.Errorf("the database has %d Open_vSwitch rows, want one", len(ovs))
	}
	return out, nil
}

// cacheHolder is a libovsdb client, whose cache Read takes rows from.
type cacheHolder interface {
	Cache() *cache.TableCache
}

// shallowRows are table's rows in the cache, by UUID, shared with it
// rather than copied (RowsShallow): libovsdb replaces a row's model on
// each update and never changes one it stored, so they stay as read.
// Copying every row of every table (twice: the cache's Rows, then
// List's slice) was a fifth of a reconcile pass at 900 ports. Reading
// table waits, as List does, for an update being applied to the cache
// to finish.
func shallowRows[T any](tc *cache.TableCache, table string) (map[string]*T, error) {
	rc := tc.Table(table)
	if rc == nil {
		return nil, fmt.Errorf("table %s is not in the client's cache", table)
	}
	rows := rc.RowsShallow()
	out := make(map[string]*T, len(rows))
	for u, m := range rows {
		row, ok := m.(*T)
		if !ok {
			return nil, fmt.Errorf("table %s: a row of type %T in the client's cache", table, m)
		}
		out[u] = row
	}
	return out, nil
}

// Dangling names a row referenced but not read, or "".
func (rs *Rows) Dangling() string {
	if rs.OVS.SSL != nil && rs.SSL[*rs.OVS.SSL] == nil {
		return "SSL " + *rs.OVS.SSL
	}
	for _, bu := range rs.OVS.Bridges {
		b := rs.Bridges[bu]
		if b == nil {
			return "Bridge " + bu
		}
		for _, cu := range b.Controller {
			if rs.Controllers[cu] == nil {
				return "Controller " + cu
			}
		}
		for _, pu := range b.Ports {
			p := rs.Ports[pu]
			if p == nil {
				return "Port " + pu
			}
			for _, iu := range p.Interfaces {
				if rs.Ifaces[iu] == nil {
					return "Interface " + iu
				}
			}
		}
	}
	return ""
}

func byUUID[T any](l []T, key func(*T) string) map[string]*T {
	m := make(map[string]*T, len(l))
	for i := range l {
		m[key(&l[i])] = &l[i]
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

package dbconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

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
func Read(ctx context.Context, cli Lister) (*Rows, error) {
	var ovs []vswitchdb.OpenvSwitch
	var brs []vswitchdb.Bridge
	var ports []vswitchdb.Port
	var ifs []vswitchdb.Interface
	var ctls []vswitchdb.Controller
	var ssl []vswitchdb.SSL
	var dps []vswitchdb.Datapath
	var zones []vswitchdb.CTZone
	var tps []vswitchdb.CTTimeoutPolicy
	for _, l := range []any{&ovs, &brs, &ports, &ifs, &ctls, &ssl, &dps, &zones, &tps} {
		if err := cli.List(ctx, l); err != nil {
			return nil, err
		}
	}
	out := &Rows{Bridges: byUUID(brs, func(b *vswitchdb.Bridge) string { return b.UUID }),
		Ports:       byUUID(ports, func(p *vswitchdb.Port) string { return p.UUID }),
		Ifaces:      byUUID(ifs, func(i *vswitchdb.Interface) string { return i.UUID }),
		Controllers: byUUID(ctls, func(c *vswitchdb.Controller) string { return c.UUID }),
		SSL:         byUUID(ssl, func(s *vswitchdb.SSL) string { return s.UUID }),
		Datapaths:   byUUID(dps, func(d *vswitchdb.Datapath) string { return d.UUID }),
		CTZones:     byUUID(zones, func(z *vswitchdb.CTZone) string { return z.UUID }),
		CTPolicies:  byUUID(tps, func(p *vswitchdb.CTTimeoutPolicy) string { return p.UUID })}
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

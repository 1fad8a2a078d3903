package config

import "slices"

// SetKeepingTables makes c the configuration want, each bridge keeping
// the flows, groups and meters c has for it: OpenFlow tables come from
// controllers and ovs-ofctl, not from the database, and a snapshot of
// them taken since want was read (the flow journal emptied with it) must
// not be replaced by an older one.
func SetKeepingTables(c, want *Config) {
	old := c.Bridges
	*c = *want.Clone()
	for name, b := range c.Bridges {
		if ob := old[name]; ob != nil {
			b.Flows, b.Groups, b.Meters = ob.Flows, ob.Groups, ob.Meters
			// The database's sets have no order: the order the daemon
			// was given (vsctl set-controller A B) stays while the set
			// does.
			if sameSet(ob.Controllers, b.Controllers) {
				b.Controllers = slices.Clone(ob.Controllers)
			}
			if sameSet(ob.Protocols, b.Protocols) {
				b.Protocols = slices.Clone(ob.Protocols)
			}
		}
		if b.Ports == nil {
			b.Ports = map[string]*Port{}
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

package config

import "slices"

// Replace makes c the configuration want. The database's sets have no
// order: the order c has (vsctl set-controller A B) stays while the set
// does.
func Replace(c, want *Config) {
	old := c.Bridges
	*c = *want.Clone()
	for name, b := range c.Bridges {
		if ob := old[name]; ob != nil {
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

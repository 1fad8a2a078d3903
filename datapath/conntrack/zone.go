package conntrack

import (
	"slices"
	"sync"
	"sync/atomic"
)

// zone is one conntrack zone's count and settings. A connection points to
// its zone from its commit on, so the established path reads the zone's
// timeouts without a lookup, and a policy set later applies to the
// connections already there at their next packet.
type zone struct {
	n atomic.Int64
	// limit is the zone's connection limit: 0 none, noLimit the
	// tracker's default.
	limit    atomic.Int64
	timeouts atomic.Pointer[Timeouts] // nil: the tracker's
}

const noLimit = -1

// zones is the tracker's table of zones that have had a connection or a
// setting. It only grows (65,536 entries at most), so a connection's
// pointer stays valid.
type zones struct {
	mu           sync.RWMutex
	m            map[uint16]*zone
	defaultLimit atomic.Int64
}

// get returns zone id's entry, making it on first use.
func (zs *zones) get(id uint16) *zone {
	zs.mu.RLock()
	z := zs.m[id]
	zs.mu.RUnlock()
	if z != nil {
		return z
	}
	zs.mu.Lock()
	defer zs.mu.Unlock()
	if z = zs.m[id]; z == nil {
		if zs.m == nil {
			zs.m = map[uint16]*zone{}
		}
		z = &zone{}
		z.limit.Store(noLimit)
		zs.m[id] = z
	}
	return z
}

// full reports whether zone z is at its connection limit.
func (zs *zones) full(z *zone) bool {
	l := z.limit.Load()
	if l == noLimit {
		l = zs.defaultLimit.Load()
	}
	return l > 0 && z.n.Load() >= l
}

// timeouts is what connections of c's zone expire by. c.mu is held.
func (t *Tracker) timeoutsOf(c *Conn) *Timeouts {
	if to := c.zone.timeouts.Load(); to != nil {
		return to
	}
	return t.timeouts.Load()
}

// ZoneLimit is one zone's connection limit and count, as
// dpctl/ct-get-limits reports them.
type ZoneLimit struct {
	Zone         uint16
	Limit, Count int64
}

// SetDefaultZoneLimit sets the connection limit of the zones without one
// of their own (0: none).
func (t *Tracker) SetDefaultZoneLimit(l int64) { t.zones.defaultLimit.Store(max(l, 0)) }

// DefaultZoneLimit is the limit of the zones without one of their own.
func (t *Tracker) DefaultZoneLimit() int64 { return t.zones.defaultLimit.Load() }

// SetZoneLimit limits zone id to l connections (0: unlimited, whatever the
// default). Connections over a lowered limit stay until they end; new
// ones are refused until the zone is under it again.
func (t *Tracker) SetZoneLimit(id uint16, l int64) { t.zones.get(id).limit.Store(max(l, 0)) }

// DeleteZoneLimit puts zone id back under the default limit.
func (t *Tracker) DeleteZoneLimit(id uint16) { t.zones.get(id).limit.Store(noLimit) }

// ZoneLimits returns the zones with a limit of their own, by zone, or,
// when ids is non-empty, those zones with their limit (the default when
// they have none).
func (t *Tracker) ZoneLimits(ids []uint16) []ZoneLimit {
	zs := &t.zones
	var out []ZoneLimit
	if len(ids) > 0 {
		for _, id := range ids {
			z := zs.get(id)
			l := z.limit.Load()
			if l == noLimit {
				l = zs.defaultLimit.Load()
			}
			out = append(out, ZoneLimit{Zone: id, Limit: l, Count: z.n.Load()})
		}
		return out
	}
	zs.mu.RLock()
	for id, z := range zs.m {
		if l := z.limit.Load(); l != noLimit {
			out = append(out, ZoneLimit{Zone: id, Limit: l, Count: z.n.Load()})
		}
	}
	zs.mu.RUnlock()
	slices.SortFunc(out, func(a, b ZoneLimit) int { return int(a.Zone) - int(b.Zone) })
	return out
}

// SetZoneTimeouts gives zone id its own timeouts (a timeout policy); nil
// puts it back on the tracker's.
func (t *Tracker) SetZoneTimeouts(id uint16, to *Timeouts) {
	if to != nil {
		c := *to
		to = &c
	}
	t.zones.get(id).timeouts.Store(to)
}

// ZoneTimeouts are the zones with timeouts of their own.
func (t *Tracker) ZoneTimeouts() map[uint16]Timeouts {
	out := map[uint16]Timeouts{}
	t.zones.mu.RLock()
	defer t.zones.mu.RUnlock()
	for id, z := range t.zones.m {
		if to := z.timeouts.Load(); to != nil {
			out[id] = *to
		}
	}
	return out
}

// ZoneCounts are the connections of each zone that has any.
func (t *Tracker) ZoneCounts() map[uint16]int64 {
	out := map[uint16]int64{}
	t.zones.mu.RLock()
	defer t.zones.mu.RUnlock()
	for id, z := range t.zones.m {
		if n := z.n.Load(); n > 0 {
			out[id] = n
		}
	}
	return out
}

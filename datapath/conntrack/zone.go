package conntrack

import (
	"sync"
	"sync/atomic"
)

// zone is one conntrack zone's count and settings. The established path
// reads a connection's zone's timeouts at each packet, so a policy set
// later applies to the connections already there at their next packet.
type zone struct {
	n atomic.Int64
	// limit is the zone's connection limit: 0 none, noLimit the
	// tracker's default.
	limit    atomic.Int64
	timeouts atomic.Pointer[Timeouts] // nil: the tracker's
}

const noLimit = -1

// zones is the tracker's table of zones, by id in pages of 256 made on
// first use (a zone that has had a connection or a setting, and its
// page's others). Pages are never freed, so a zone's pointer stays
// valid, and a connection finds its zone from its tuple's zone without a
// lock (a Conn holds no pointer, which keeps the garbage collector off the
// millions of them).
type zones struct {
	mu           sync.Mutex // making a page
	pages        [256]atomic.Pointer[zonePage]
	defaultLimit atomic.Int64
}

type zonePage [256]zone

// get returns zone id's entry, making its page on first use.
func (zs *zones) get(id uint16) *zone {
	if p := zs.pages[id>>8].Load(); p != nil {
		return &p[id&0xff]
	}
	zs.mu.Lock()
	defer zs.mu.Unlock()
	p := zs.pages[id>>8].Load()
	if p == nil {
		p = new(zonePage)
		for i := range p {
			p[i].limit.Store(noLimit)
		}
		zs.pages[id>>8].Store(p)
	}
	return &p[id&0xff]
}

// each calls f with every zone of the pages made so far, by id.
func (zs *zones) each(f func(id uint16, z *zone)) {
	for hi := range zs.pages {
		if p := zs.pages[hi].Load(); p != nil {
			for lo := range p {
				f(uint16(hi<<8|lo), &p[lo])
			}
		}
	}
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
	if to := t.zones.get(c.orig.Zone).timeouts.Load(); to != nil {
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
	zs.each(func(id uint16, z *zone) {
		if l := z.limit.Load(); l != noLimit {
			out = append(out, ZoneLimit{Zone: id, Limit: l, Count: z.n.Load()})
		}
	})
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
	t.zones.each(func(id uint16, z *zone) {
		if to := z.timeouts.Load(); to != nil {
			out[id] = *to
		}
	})
	return out
}

// ZoneCounts are the connections of each zone that has any.
func (t *Tracker) ZoneCounts() map[uint16]int64 {
	out := map[uint16]int64{}
	t.zones.each(func(id uint16, z *zone) {
		if n := z.n.Load(); n > 0 {
			out[id] = n
		}
	})
	return out
}

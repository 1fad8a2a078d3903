package normal

import (
	"sort"
	"time"
)

// Defaults follow Open vSwitch's mac-table defaults.
const (
	DefaultMaxAge     = 300 * time.Second
	DefaultMaxEntries = 8192
	DefaultLockTime   = 5 * time.Second
)

// Options tune a MACTable. Zero values select the defaults.
type Options struct {
	MaxAge     time.Duration // an entry not refreshed for this long is forgotten
	MaxEntries int           // beyond this the least recently learned entry is evicted
	// MoveLimit enables the flap guard: a MAC that moves between ports more
	// than MoveLimit times within one second is pinned to its current port
	// for LockTime, so a loop or a spoofer cannot make the table (and every
	// megaflow depending on it) churn. 0 disables the guard.
	MoveLimit int
	LockTime  time.Duration // default DefaultLockTime
}

func (o Options) withDefaults() Options {
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultMaxAge
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.LockTime <= 0 {
		o.LockTime = DefaultLockTime
	}
	return o
}

// Stats are the MAC table's cumulative counters.
type Stats struct {
	Learned     uint64 // new entries
	Moved       uint64 // entries whose port changed
	Aged        uint64 // entries dropped for age
	Evicted     uint64 // entries dropped for room
	MoveBlocked uint64 // moves ignored while a MAC was locked by the flap guard
	Entries     int    // entries now
}

// Entry is one MAC table row as fdb-show prints it.
type Entry struct {
	Port uint32
	VLAN uint16
	MAC  [6]byte
	Age  time.Duration
}

// macEntry is a table row, linked into the LRU list (most recently learned
// at head.next).
type macEntry struct {
	key        uint64
	port       uint32
	seen       time.Time
	moveStart  time.Time // start of the current one-second move window
	moves      int       // moves within that window
	lockedTill time.Time
	prev, next *macEntry
}

// MACTable maps (VLAN, MAC) to the port the MAC was last seen on. It is not
// safe for concurrent use by itself; Switch serialises access.
type MACTable struct {
	opts  Options
	byKey map[uint64]*macEntry
	head  macEntry // LRU sentinel
	gen   uint64
	stats Stats
	spare *macEntry // one recycled node, so eviction at the limit does not allocate
}

// NewMACTable returns an empty table.
func NewMACTable(o Options) *MACTable {
	t := &MACTable{opts: o.withDefaults(), byKey: make(map[uint64]*macEntry)}
	t.head.prev, t.head.next = &t.head, &t.head
	return t
}

func macKey(vlan uint16, mac [6]byte) uint64 {
	return uint64(vlan)<<48 | uint64(mac[0])<<40 | uint64(mac[1])<<32 |
		uint64(mac[2])<<24 | uint64(mac[3])<<16 | uint64(mac[4])<<8 | uint64(mac[5])
}

func keyVLAN(k uint64) uint16 { return uint16(k >> 48) }

func keyMAC(k uint64) (m [6]byte) {
	for i := 0; i < 6; i++ {
		m[i] = byte(k >> (40 - 8*i))
	}
	return m
}

func (t *MACTable) unlink(e *macEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (t *MACTable) pushFront(e *macEntry) {
	e.prev, e.next = &t.head, t.head.next
	t.head.next.prev = e
	t.head.next = e
}

func (t *MACTable) remove(e *macEntry) {
	t.unlink(e)
	delete(t.byKey, e.key)
	t.gen++
	*e = macEntry{}
	t.spare = e
}

// Generation changes whenever an entry is added, moved or removed: any
// forwarding decision taken under an older generation may be stale.
func (t *MACTable) Generation() uint64 { return t.gen }

// Learn records that mac on vlan was seen on port at now. It reports whether
// the table changed in a way that alters forwarding (new entry or move).
func (t *MACTable) Learn(vlan uint16, mac [6]byte, port uint32, now time.Time) bool {
	k := macKey(vlan, mac)
	if e, ok := t.byKey[k]; ok {
		if now.Sub(e.seen) <= t.opts.MaxAge {
			if e.port == port {
				e.seen = now
				t.unlink(e)
				t.pushFront(e)
				return false
			}
			if t.opts.MoveLimit > 0 {
				if now.Before(e.lockedTill) {
					t.stats.MoveBlocked++
					return false
				}
				if now.Sub(e.moveStart) >= time.Second {
					e.moveStart, e.moves = now, 0
				}
				e.moves++
				if e.moves > t.opts.MoveLimit {
					e.lockedTill = now.Add(t.opts.LockTime)
					t.stats.MoveBlocked++
					return false
				}
			}
			e.port, e.seen = port, now
			t.unlink(e)
			t.pushFront(e)
			t.stats.Moved++
			t.gen++
			return true
		}
		t.stats.Aged++
		t.remove(e)
	}
	for len(t.byKey) >= t.opts.MaxEntries {
		t.stats.Evicted++
		t.remove(t.head.prev)
	}
	e := t.spare
	if e != nil {
		t.spare = nil
	} else {
		e = new(macEntry)
	}
	e.key, e.port, e.seen, e.moveStart = k, port, now, now
	t.byKey[k] = e
	t.pushFront(e)
	t.stats.Learned++
	t.gen++
	return true
}

// Lookup returns the port mac on vlan was last seen on, forgetting the
// entry if it has aged out.
func (t *MACTable) Lookup(vlan uint16, mac [6]byte, now time.Time) (uint32, bool) {
	e, ok := t.byKey[macKey(vlan, mac)]
	if !ok {
		return 0, false
	}
	if now.Sub(e.seen) > t.opts.MaxAge {
		t.stats.Aged++
		t.remove(e)
		return 0, false
	}
	return e.port, true
}

// Expire forgets every entry older than MaxAge and returns how many.
func (t *MACTable) Expire(now time.Time) int {
	n := 0
	for e := t.head.next; e != &t.head; {
		next := e.next
		if now.Sub(e.seen) > t.opts.MaxAge {
			t.stats.Aged++
			t.remove(e)
			n++
		}
		e = next
	}
	return n
}

// removeIf drops every entry for which drop is true and returns how many.
func (t *MACTable) removeIf(drop func(*macEntry) bool) int {
	n := 0
	for e := t.head.next; e != &t.head; {
		next := e.next
		if drop(e) {
			t.remove(e)
			n++
		}
		e = next
	}
	return n
}

// Flush forgets everything.
func (t *MACTable) Flush() int {
	return t.removeIf(func(*macEntry) bool { return true })
}

// FlushPort forgets the MACs learned on port (e.g. link down or removal).
func (t *MACTable) FlushPort(port uint32) int {
	return t.removeIf(func(e *macEntry) bool { return e.port == port })
}

// FlushVLAN forgets the MACs learned on vlan.
func (t *MACTable) FlushVLAN(vlan uint16) int {
	return t.removeIf(func(e *macEntry) bool { return keyVLAN(e.key) == vlan })
}

// Entries lists the live entries sorted by VLAN then MAC, with their ages.
func (t *MACTable) Entries(now time.Time) []Entry {
	out := make([]Entry, 0, len(t.byKey))
	for e := t.head.next; e != &t.head; e = e.next {
		age := now.Sub(e.seen)
		if age > t.opts.MaxAge {
			continue
		}
		out = append(out, Entry{Port: e.port, VLAN: keyVLAN(e.key), MAC: keyMAC(e.key), Age: age})
	}
	sort.Slice(out, func(i, j int) bool {
		return macKey(out[i].VLAN, out[i].MAC) < macKey(out[j].VLAN, out[j].MAC)
	})
	return out
}

// Stats returns the counters.
func (t *MACTable) Stats() Stats {
	s := t.stats
	s.Entries = len(t.byKey)
	return s
}

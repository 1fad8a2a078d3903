package conntrack

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// ConnCache is one PMD's memory of the connections its packets went to
// lately, by the packet's flow hash (the one the EMC took, computed with
// the key: nothing to hash again): a packet of an established connection
// that hits it skips parsing its tuple, the tracker's keyed hash and the
// shared index's probe, which were most of ct's cost at a few
// connections.
//
// An entry is only a guess, checked at each use against what the index
// would answer: the packet's key must give the tuple of the connection's
// direction the entry names (compared field by field with the key, as
// parse would build it), and the connection must be on the lock-free
// path (Conn.fast's fastOK). A connection with fastOK set is not dead,
// and a connection that is not dead is what the index maps its tuples
// to: removing it (another PMD's commit over an expired one, a flush, a
// sweep, force) ends it under its lock (killLocked clears fastOK), and
// so does a change of its mark or label for the time it takes (stopFast;
// the next packet reads the new ones). fastPath then reads everything
// else (state, mark, label, expiry, the timeouts) from the connection
// as for a packet the index found it for. A check that fails falls back
// to the index, which refills the entry.
//
// Only packets whose tuple the key holds whole are cached: UDP, UDP-Lite
// and SCTP (TCP moves sequence windows under the connection's lock; an
// ICMP query's identifier is in the frame). A ConnCache is used by one
// goroutine at a time; the zero value is empty.
type ConnCache struct {
	// s first: a ConnCache is allocated alone (new), in pages of its
	// own, so each set is one aligned cache line.
	s [connCacheSets]cacheSet
	// last is the verdict of the last packet the lock-free path took,
	// for the packets after it of the same connection (a burst: every
	// packet of a batch at a single connection).
	last lastVerdict
	// prev is the flow hash of the last packet that took the lock-free
	// path: remember keeps a verdict only for a packet with the same
	// (a burst), not at every packet of many connections.
	prev uint32
}

// lastVerdict is a packet's connection (c, with fast word f, the
// packet's direction reply, its flow hash hash) and the ct fields it got
// at now. A packet of the same tuple and zone in the same refresh epoch
// gets the same fields while c's fast word is still f (no mark or label
// changed, not ended) and c has not expired: fastPath would write them
// again, and leave the expiry alone within the epoch. (This relies on a
// Conn's fast version never repeating for the memory c points to: were
// Conns ever reused, as from a slab, the version must go on counting
// across reuse, or a new connection of the same tuple could pass for
// the old one and get its mark and label.)
type lastVerdict struct {
	c     *Conn
	f     uint64
	hash  uint32
	reply bool
	epoch int64
	ct    flow.Conntrack
}

// remember makes the packet just tracked on the lock-free path (its ct
// fields ct) the last verdict when the packet before it had the same
// flow hash: copying the verdict at every packet of traffic without
// bursts cost 3 ns a packet at 1,000 connections.
func (cc *ConnCache) remember(c *Conn, f uint64, hash uint32, reply bool, now int64, ct *flow.Conntrack) {
	if hash != cc.prev {
		cc.prev = hash
		return
	}
	cc.last = lastVerdict{c: c, f: f, hash: hash, reply: reply, epoch: now >> refreshEpoch, ct: *ct}
}

// Again is the first step of ct with the cache for a packet without a
// tuple parsed ahead, before Track: it reports true when pkt repeats the
// last verdict (see lastVerdict), then tracked (its ct fields set; no
// translation), and false, having changed nothing, otherwise (Track
// then).
func (cc *ConnCache) Again(pkt *packet.Packet, p *Params, now int64) bool {
	return pkt.HashValid && cc.again(pkt, p, now)
}

// again tracks pkt (its flow hash valid) by the last verdict when it is of the same
// connection (see lastVerdict), and reports whether it did. p is the
// ct's: with nat, a translated connection's packets take the path that
// rewrites them; a commit that fastPath would not take is refused too.
func (cc *ConnCache) again(pkt *packet.Packet, p *Params, now int64) bool {
	l := &cc.last
	c := l.c
	if c == nil || l.hash != pkt.Hash || l.epoch != now>>refreshEpoch || l.ct.Zone != p.Zone ||
		p.HasNAT && c.nat != 0 || p.Commit && (p.Force && l.reply || p.SetMark || p.SetLabel) {
		return false
	}
	if c.fast.Load() != l.f || c.expires.Load() <= now || !keyIs(pkt, tupleOf(c, l.reply)) {
		return false
	}
	pkt.Key.CT = l.ct
	return true
}

// touchMin is the table size from which Touch reads a batch's entries
// ahead: below it the sets and connections a PMD uses stay in its L1
// cache, and the pass would only add its own cost.
const touchMin = 256

// Touch loads, for the packets of pkts with a valid flow hash, the cache
// set each maps to, then the two lines fastPath reads of the connection
// the entry with its hash holds, each pass in a tight loop so that a
// batch's loads are in flight together rather than one packet's at a
// time (Go has no prefetch instruction: the loads' sum is returned for
// the caller to keep). Between touchMin and prefetchMin connections the
// cache's 128 KiB and the connections fall out of the L1 cache, and the
// dependent loads of each packet (set, connection) were a third of ct's
// cost at 1,000 connections. It changes nothing.
func (t *Tracker) Touch(cc *ConnCache, pkts []*packet.Packet) (sink uint32) {
	if n := t.n.Load(); n < touchMin || n >= prefetchMin || len(pkts) < 2 {
		return 0
	}
	for _, pkt := range pkts {
		sink += cc.s[pkt.Hash&(connCacheSets-1)][0].hash
	}
	for _, pkt := range pkts {
		if !pkt.HashValid {
			continue
		}
		if e := cc.s[pkt.Hash&(connCacheSets-1)].find(pkt.Hash); e != nil {
			sink += uint32(e.c.fast.Load()) + e.c.mark.Load()
		}
	}
	return sink
}

// connCacheSets: sets of connCacheWays 16-byte entries, one 64-byte
// cache line a set (128 KiB), so that the active connections of a PMD up
// to a few thousand per direction mostly each keep an entry. With 1,000
// connections (2,000 flow hashes): a fifth of the packets missed when
// direct-mapped, 9 % with 4,096 two-way sets, 2 % with these (a set
// holding more hashes than ways misses all of them when they come round
// in turn).
const (
	connCacheSets = 2048
	connCacheWays = 4 // find is written for four
)

// cacheSet is one set: a packet's flow hash picks it, and the entry with
// that hash is the one to check. A new entry goes first, the others move
// down one (the last, the oldest, is dropped).
type cacheSet [connCacheWays]cacheEntry

type cacheEntry struct {
	c *Conn
	// hash is the flow hash of the packet that filled the entry: a
	// packet with another one (of a connection that shares the set)
	// misses without reading c, which would be a cache miss of its own
	// in a large table.
	hash uint32
	// meta is 1 when the packet's tuple is c's reply tuple, plus twice
	// the refresh epoch (refreshEpoch) in which this PMD last refreshed
	// c's expiry.
	meta uint32
}

// refreshEpoch: a packet that hits the cache in the epoch (now >>
// refreshEpoch, about half a millisecond) its entry last refreshed its
// connection's expiry in leaves it alone, without reading the timeouts
// (two dependent loads through the zone): an expiry lags a busy
// connection's packets by at most refreshSlack and an epoch, against
// timeouts of seconds.
const refreshEpoch = 19

// entryMeta is cacheEntry.meta for direction reply at now.
func entryMeta(reply bool, now int64) uint32 {
	m := uint32(now>>refreshEpoch) << 1
	if reply {
		m |= 1
	}
	return m
}

// add makes c (the packet's direction reply, its flow hash hash) the
// set's first entry, just refreshed at now, in place of the entry with
// the same hash, or else an empty one, or else the last: a hash has at
// most one entry.
func (s *cacheSet) add(c *Conn, hash uint32, reply bool, now int64) {
	j := slices.IndexFunc(s[:], func(e cacheEntry) bool { return e.hash == hash })
	if j < 0 {
		j = slices.IndexFunc(s[:], func(e cacheEntry) bool { return e.c == nil })
	}
	if j < 0 {
		j = len(s) - 1
	}
	copy(s[1:j+1], s[:j])
	s[0] = cacheEntry{c: c, hash: hash, meta: entryMeta(reply, now)}
}

// find returns the entry of s for flow hash h, or nil. The way is
// computed without a branch: which way holds a packet's hash is random,
// and a loop's branch on it was mispredicted often enough to cost ~4 ns
// a packet at 1,000 connections.
func (s *cacheSet) find(h uint32) *cacheEntry {
	m := same(s[0].hash, h) | same(s[1].hash, h)<<1 | same(s[2].hash, h)<<2 | same(s[3].hash, h)<<3
	if e := &s[bits.TrailingZeros32(m|1<<(connCacheWays-1))]; e.hash == h && e.c != nil {
		return e
	}
	return nil
}

// same is 1 when a == b, else 0 (no branch).
func same(a, b uint32) uint32 {
	return uint32((uint64(a^b) - 1) >> 63)
}

// Reset empties the cache (dropping its references to connections).
func (cc *ConnCache) Reset() {
	cc.last, cc.prev = lastVerdict{}, 0
	clear(cc.s[:])
}

// cachedProto reports whether a connection of IP protocol proto may be
// cached: its tuple is all in the flow key.
func cachedProto(proto uint8) bool {
	return proto == header.IPProtoUDP || proto == header.IPProtoSCTP || proto == 136 // UDP-Lite
}

// keyIs reports whether parse would read tuple tu from pkt (tu is a
// cached connection's: cachedProto): the same test as parse's followed
// by a comparison, on the key's fields without building the tuple, with
// few branches. (Extract sets L4 only when the transport header is whole
// in the frame, which covers parse's length check.)
func keyIs(pkt *packet.Packet, tu *Tuple) bool {
	k := &pkt.Key
	le := binary.LittleEndian
	x := uint64(k.NwProto^tu.Proto) | uint64(k.TpSrc^tu.SrcPort) | uint64(k.TpDst^tu.DstPort) |
		uint64(tu.ICMPType) | uint64(k.NwFrag&flow.FragAny)
	switch k.EthType {
	case header.EtherTypeIPv4:
		// (| and ^ bind alike: each difference in parentheses.)
		x |= le.Uint64(tu.Src[:8]) | le.Uint64(tu.Dst[:8]) |
			(le.Uint64(tu.Src[8:]) ^ mapped4(k.IPv4Src)) | (le.Uint64(tu.Dst[8:]) ^ mapped4(k.IPv4Dst))
		if tu.IPv6 {
			return false
		}
	case header.EtherTypeIPv6:
		x |= (le.Uint64(tu.Src[:8]) ^ le.Uint64(k.IPv6Src[:8])) | (le.Uint64(tu.Src[8:]) ^ le.Uint64(k.IPv6Src[8:])) |
			(le.Uint64(tu.Dst[:8]) ^ le.Uint64(k.IPv6Dst[:8])) | (le.Uint64(tu.Dst[8:]) ^ le.Uint64(k.IPv6Dst[8:]))
		if !tu.IPv6 {
			return false
		}
	default:
		return false
	}
	return x == 0 && cachedProto(tu.Proto) && pkt.Offsets.L3 != flow.NoOffset && pkt.Offsets.L4 != flow.NoOffset
}

// cached runs ct on pkt (its flow hash valid) by the connection cc
// remembers for its flow hash, when that is pkt's connection and it
// takes the lock-free path, and reports whether it did; otherwise it has
// changed nothing the caller keeps, and returns the set to add the
// connection to after a lookup. pkt.Key.CT is reset (its zone p.Zone).
// (The last verdict, Again, is the caller's to try before.)
func (t *Tracker) cached(cc *ConnCache, pkt *packet.Packet, p *Params, now int64, rw *Rewrite) (done bool, set *cacheSet) {
	h := pkt.Hash
	set = &cc.s[h&(connCacheSets-1)]
	e := set.find(h)
	if e == nil {
		return false, set
	}
	c := e.c
	f := c.fast.Load()
	if f&fastOK == 0 {
		// Ended, or changing: no longer kept alive by the cache.
		e.c = nil
		return false, set
	}
	reply := e.meta&1 != 0
	if !keyIs(pkt, tupleOf(c, reply)) || c.orig.Zone != p.Zone {
		return false, set
	}
	ct := &pkt.Key.CT
	m := entryMeta(reply, now)
	if t.fastPath(c, f, ct, p, reply, now, rw, m != e.meta) {
		e.meta = m
		cc.remember(c, f, h, reply, now, ct)
		return true, set
	}
	*ct = flow.Conntrack{Zone: p.Zone}
	return false, set
}

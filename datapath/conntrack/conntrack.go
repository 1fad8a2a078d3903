// Package conntrack is the datapath's connection tracker: the ct action
// looks a packet's connection up by its tuple and zone, follows the
// protocol's state (TCP sequence windows, UDP and ICMP exchanges), marks
// the packet (ct_state and the connection's zone, mark, label and original
// tuple in its flow key) and, on commit, remembers the connection.
//
// Every PMD tracks into the one Tracker of its datapath, so a connection
// one PMD created is found by another. The table is split into shards,
// each a map from tuple to connection changed under its own lock, with
// both directions' tuples indexed: a packet of an established connection
// reads its shard's index without a lock (a sequence lock: see index) and
// takes its connection's mutex, never a lock shared by all. Memory is bounded by MaxConns; when it is reached the
// oldest connections never answered are evicted first.
//
// Connections live in memory only: a restart of the switch forgets them
// (as Open vSwitch's userspace datapath does); established flows are then
// picked up again mid-stream by their next packets where TCP allows it.
package conntrack

import (
	"encoding/binary"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// DefaultMaxConns is the default connection limit, Open vSwitch's.
const DefaultMaxConns = 3_000_000

// The table's shards: a tuple's shard is the top bits of its hash (the
// low bits place it in the shard's index).
const (
	shardBits  = 6
	numShards  = 1 << shardBits
	shardShift = 32 - shardBits
)

// Timeouts are how long a connection lives without traffic, by protocol
// and state, in nanoseconds: the states Open vSwitch's timeout policies
// name (CT_Timeout_Policy, "ovs-vsctl add-zone-tp"). DefaultTimeouts are
// Linux nf_conntrack's.
type Timeouts struct {
	TCPSynSent, TCPSynRecv, TCPEstablished, TCPFinWait, TCPLastAck, TCPTimeWait, TCPClose int64
	// UDP: the first packet, more from the same side, and once answered.
	UDPFirst, UDPSingle, UDPMultiple int64
	// ICMP queries: the request, and once answered.
	ICMPFirst, ICMPReply int64
	Other                int64
}

const sec = int64(1_000_000_000)

// DefaultTimeouts returns Linux's defaults (nf_conntrack_*_timeout*).
func DefaultTimeouts() Timeouts {
	return Timeouts{
		TCPSynSent: 120 * sec, TCPSynRecv: 60 * sec, TCPEstablished: 432000 * sec, TCPFinWait: 120 * sec,
		TCPLastAck: 30 * sec, TCPTimeWait: 120 * sec, TCPClose: 10 * sec,
		UDPFirst: 30 * sec, UDPSingle: 30 * sec, UDPMultiple: 120 * sec,
		ICMPFirst: 30 * sec, ICMPReply: 30 * sec,
		Other: 600 * sec,
	}
}

// policyKeys are the CT_Timeout_Policy timeouts keys this tracker honours
// and the field each sets. The kernel's tcp_close_wait, tcp_syn_sent2,
// tcp_retransmit and tcp_unack name states it does not keep apart, as
// Open vSwitch's userspace tracker does not either.
var policyKeys = map[string]func(*Timeouts) *int64{
	"tcp_syn_sent":    func(t *Timeouts) *int64 { return &t.TCPSynSent },
	"tcp_syn_recv":    func(t *Timeouts) *int64 { return &t.TCPSynRecv },
	"tcp_established": func(t *Timeouts) *int64 { return &t.TCPEstablished },
	"tcp_fin_wait":    func(t *Timeouts) *int64 { return &t.TCPFinWait },
	"tcp_last_ack":    func(t *Timeouts) *int64 { return &t.TCPLastAck },
	"tcp_time_wait":   func(t *Timeouts) *int64 { return &t.TCPTimeWait },
	"tcp_close":       func(t *Timeouts) *int64 { return &t.TCPClose },
	"udp_first":       func(t *Timeouts) *int64 { return &t.UDPFirst },
	"udp_single":      func(t *Timeouts) *int64 { return &t.UDPSingle },
	"udp_multiple":    func(t *Timeouts) *int64 { return &t.UDPMultiple },
	"icmp_first":      func(t *Timeouts) *int64 { return &t.ICMPFirst },
	"icmp_reply":      func(t *Timeouts) *int64 { return &t.ICMPReply },
}

// PolicyTimeouts is base with the timeouts of a timeout policy (keys as
// CT_Timeout_Policy's, values in seconds) applied. It returns the keys it
// cannot honour, sorted, so that the caller reports them.
func PolicyTimeouts(base Timeouts, policy map[string]int) (Timeouts, []string) {
	var unknown []string
	for k, v := range policy {
		f := policyKeys[k]
		if f == nil || v < 0 {
			unknown = append(unknown, k)
			continue
		}
		*f(&base) = int64(v) * sec
	}
	slices.Sort(unknown)
	return base, unknown
}

// Params are one ct action's arguments.
type Params struct {
	Zone   uint16
	Commit bool
	// Force: a committed connection found in the reply direction is
	// ended and the packet starts a new one in its own direction.
	Force bool
	// SetMark/SetLabel (commit only): the connection's mark and label
	// become (old &^ mask) | value.
	SetMark          bool
	Mark, MarkMask   uint32
	SetLabel         bool
	Label, LabelMask [16]byte
	// HasNAT: the ct has nat(...): a connection committed with a
	// translation is translated; with NAT.Src or NAT.Dst a new one
	// gets one.
	HasNAT bool
	NAT    NAT
	// Helper (commit only): the ALG the new connection gets
	// (HelperFTP, HelperTFTP).
	Helper uint8
}

// Conn is one tracked connection. Its fields after orig/reply change
// under mu. It holds no pointer (its zone is its tuples'), so the garbage
// collector never scans the chunks of them (slab).
//
// Its 192 bytes are three cache lines in a chunk (whose connections start
// on a line: TestConnLayout): the first two hold everything a packet on
// the lock-free path reads (fastPath: fast, expires, proto, nat, mark,
// label, orig), each with one of the tuples, which the read-ahead
// (PrefetchAhead) touches; the third what changes with state.
type Conn struct {
	// line 0
	orig    Tuple
	proto   uint8
	nat     uint8 // natSrc, natDst
	helper  uint8 // its ALG
	related bool  // a data connection an ALG expected: +rel
	// fast says whether packets may take fastPath (fastOK) and whether
	// c is +rel (fastRelated), with a version above fastVersion: a
	// sequence lock over mark and label, which a change under mu clears
	// fastOK for, and publishFast sets again with the next version.
	fast atomic.Uint64
	// mark, label (little-endian words) and expires are atomic, as
	// the lock-free path (fastPath) reads them, and refreshes expires;
	// they change under mu.
	expires atomic.Int64 // datapath clock, ns

	// line 1
	reply Tuple
	mark  atomic.Uint32
	label [2]atomic.Uint64

	// line 2
	oh, rh uint32 // the tuples' hashes
	// id is its number in the tracker's slab (what index slots hold).
	id uint32
	// refs counts the index slots that hold it (set before it is
	// indexed, dropped as slots let it go): at 0 its place in the slab
	// is released.
	refs       atomic.Int32
	mu         sync.Mutex
	assured    bool // seen in both directions
	dead       bool // removed from the table
	udpReplied bool
	skewed     bool // the FTP helper shifted its sequence numbers (Tracker.skews)
	tcp        tcpConn
}

type shard struct {
	mu sync.Mutex
	x  index
	// cursor is where the next Sweep starts (under the tracker's
	// sweepMu).
	cursor int
	// unassured holds the shard's connections in creation order until
	// they are answered: eviction under the limit takes the oldest.
	unassured []*Conn
	// cur is the slab chunk connections committed into the shard (by
	// their original tuple) are allocated from.
	cur atomic.Pointer[connChunk]
	// created counts the connections committed into the shard (by
	// their original tuple), by IP protocol: plain adds under mu, where
	// a tracker-wide atomic counter would cost every commit a locked
	// instruction (Stats sums the shards). Apart from the shard (2 KiB:
	// beside mu and x it would spread the headers every lookup reads
	// over more pages), allocated at its first commit (a tracker that is
	// made and dropped, as a test's, costs none).
	created *[256]uint64
	_       [64]byte
}

// InvalidCause says why ct marked a packet +inv.
type InvalidCause int

const (
	// InvalidUntrackable: not IP, a fragment not reassembled, a
	// truncated header, an ICMP message neither query nor error.
	InvalidUntrackable InvalidCause = iota
	// InvalidTCP: outside the sequence windows, a bad reset, an
	// impossible flag mix.
	InvalidTCP
	// InvalidNotNew: no connection, and the packet cannot start one
	// (a SYN-ACK, an ICMP reply).
	InvalidNotNew
	// InvalidNoConn: an ICMP error about no tracked connection.
	InvalidNoConn
	NumInvalidCauses
)

var invalidCauseNames = [NumInvalidCauses]string{"untrackable", "tcp", "not_new", "no_connection"}

func (c InvalidCause) String() string { return invalidCauseNames[c] }

// Stats are the tracker's counters.
type Stats struct {
	Conns            int64
	Created, Deleted uint64
	Invalid          uint64 // packets marked inv
	// InvalidBy splits Invalid by cause.
	InvalidBy [NumInvalidCauses]uint64
	// ByProto are the connections of each IP protocol; TCPStates
	// the TCP ones by state (TCPStateNames).
	ByProto               map[uint8]int64
	TCPStates             [numTCPStates]int64
	LimitRefused, Evicted uint64
	ZoneLimitRefused      uint64 // commits refused by a zone's limit
	NATExhausted          uint64 // commits with no free translation
}

// Tracker is the connection table of one datapath.
type Tracker struct {
	// key keys the tuple hash (read by every lookup, written only by
	// New: on a line of its own, away from the shards' locks).
	key      hashKey
	_        [64 - 32]byte
	shards   [numShards]shard
	n        atomic.Int64
	maxConns atomic.Int64
	timeouts atomic.Pointer[Timeouts]
	zones    zones
	slab     slab
	expect   expectations
	skews    skews

	sweepMu   sync.Mutex
	lastSweep int64
	// maxLocked is the longest a Sweep held a shard's lock for its
	// cleanup, ns.
	maxLocked int64

	deleted, refused, evicted, zoneRefused, natExhausted atomic.Uint64
	invalid                                              [NumInvalidCauses]atomic.Uint64
	// deletedBy counts the connections ended by IP protocol: with the
	// shards' created, the connections of each protocol.
	deletedBy [256]atomic.Int64
	tcpStates [numTCPStates]atomic.Int64
}

// New makes an empty tracker with the default limit and timeouts.
func New() *Tracker {
	t := &Tracker{key: newHashKey()}
	for i := range t.shards {
		t.slab.attach(&t.shards[i].x)
	}
	t.maxConns.Store(DefaultMaxConns)
	to := DefaultTimeouts()
	t.timeouts.Store(&to)
	return t
}

// SetMaxConns sets the connection limit (ct-max-conns); connections over a
// lowered limit stay until they end.
func (t *Tracker) SetMaxConns(n int64) { t.maxConns.Store(max(n, 0)) }

// MaxConns is the connection limit.
func (t *Tracker) MaxConns() int64 { return t.maxConns.Load() }

// SetTimeouts replaces the timeouts; connections pick them up at their
// next packet.
func (t *Tracker) SetTimeouts(to Timeouts) { t.timeouts.Store(&to) }

// Len is the number of connections.
func (t *Tracker) Len() int64 { return t.n.Load() }

// Stats returns the counters.
func (t *Tracker) Stats() Stats {
	// The deletions first: counts only grow, so each protocol's
	// created (read after) covers its deleted, and no count shows
	// below zero.
	var deleted [256]int64
	for p := range deleted {
		deleted[p] = t.deletedBy[p].Load()
	}
	var created [256]uint64
	for i := range t.shards {
		sh := &t.shards[i]
		sh.mu.Lock()
		if sh.created != nil {
			for p, n := range sh.created {
				created[p] += n
			}
		}
		sh.mu.Unlock()
	}
	s := Stats{Conns: t.n.Load(), Deleted: t.deleted.Load(),
		LimitRefused: t.refused.Load(), Evicted: t.evicted.Load(),
		ZoneLimitRefused: t.zoneRefused.Load(), NATExhausted: t.natExhausted.Load(), ByProto: map[uint8]int64{}}
	for i := range t.invalid {
		s.InvalidBy[i] = t.invalid[i].Load()
		s.Invalid += s.InvalidBy[i]
	}
	for p, n := range created {
		s.Created += n
		if live := int64(n) - deleted[p]; live != 0 {
			s.ByProto[uint8(p)] = live
		}
	}
	for i := range t.tcpStates {
		s.TCPStates[i] = t.tcpStates[i].Load()
	}
	return s
}

// hash is tu's hash under the tracker's key.
func (t *Tracker) hash(tu *Tuple) uint32 { return tu.hash(&t.key) }

func (t *Tracker) shardOf(h uint32) *shard { return &t.shards[h>>shardShift] }

// lockPair locks the shards of a connection's two tuples, in shard
// order so that two PMDs never wait on each other.
func (t *Tracker) lockPair(c *Conn) (a, b *shard) {
	i, j := c.oh>>shardShift, c.rh>>shardShift
	a, b = &t.shards[i], &t.shards[j]
	switch {
	case i == j:
		a.mu.Lock()
	case i < j:
		a.mu.Lock()
		b.mu.Lock()
	default:
		b.mu.Lock()
		a.mu.Lock()
	}
	return a, b
}

func unlockPair(a, b *shard) {
	a.mu.Unlock()
	if a != b {
		b.mu.Unlock()
	}
}

// lookup finds the connection indexed under tuple tu; reply says tu is
// its reply tuple. The caller checks under c.mu that it is still live
// (alive reports it).
func (t *Tracker) lookup(tu *Tuple) (c *Conn, reply bool) {
	return t.lookupHash(tu, t.hash(tu))
}

// lookupHash is lookup of tu with hash h (t.hash(tu)).
func (t *Tracker) lookupHash(tu *Tuple, h uint32) (c *Conn, reply bool) {
	s := t.shardOf(h)
	return s.x.lookup(tu, h, &s.mu)
}

// alive reports whether c is in the table and not expired at now. c.mu is
// held.
func (c *Conn) alive(now int64) bool { return !c.dead && c.expires.Load() > now }

// The bits of Conn.fast.
const (
	fastOK      = 1 << 0
	fastRelated = 1 << 1
	fastVersion = 1 << 8
)

// refreshSlack: the lock-free path leaves a connection's expiry alone
// when refreshing it would move it by less (a store per packet of a busy
// connection would be a locked instruction, and a cache line that PMDs
// handling its two directions pass back and forth).
const refreshSlack = 1_000_000 // 1 ms

// publishFast sets c.fast from c's state (c.mu held): packets of an
// answered UDP, ICMP or other connection without a helper, not ended,
// need no lock (TCP packets move the sequence windows). It stores only
// when that changed.
func (c *Conn) publishFast() {
	var want uint64
	if !c.dead && c.proto != header.IPProtoTCP && c.assured && (c.proto != header.IPProtoUDP || c.udpReplied) && c.helper == HelperNone {
		want = fastOK
		if c.related {
			want |= fastRelated
		}
	}
	cur := c.fast.Load()
	if cur&(fastVersion-1) != want {
		c.fast.Store(cur&^(fastVersion-1) + fastVersion | want)
	}
}

// stopFast keeps packets off the lock-free path while c's mark or label
// change, or once c is ended (c.mu held).
func (c *Conn) stopFast() {
	if cur := c.fast.Load(); cur&fastOK != 0 {
		c.fast.Store(cur &^ (fastVersion - 1))
	}
}

// fastPath handles a packet of an established connection without its
// lock when c.fast (f, fastOK set) allows: no state to move, the expiry
// refreshed atomically (unless refresh is false: the caller refreshed it
// lately), mark and label read under the sequence lock. It reports
// false, having changed nothing the caller keeps, when the packet needs
// the locked path.
func (t *Tracker) fastPath(c *Conn, f uint64, ct *flow.Conntrack, p *Params, reply bool, now int64, rw *Rewrite, refresh bool) bool {
	if p.Commit && (p.Force && reply || p.SetMark || p.SetLabel) {
		return false
	}
	e := c.expires.Load()
	if e <= now {
		return false
	}
	state := uint8(flow.CTTracked | flow.CTEstablished)
	if reply {
		state |= flow.CTReply
	}
	if f&fastRelated != 0 {
		state |= flow.CTRelated
	}
	if p.HasNAT && c.nat != 0 { // nat and the tuples never change once c is indexed
		c.natRewrite(reply, rw)
		state |= c.natState()
	}
	ct.State = state
	c.describe(ct)
	if c.fast.Load() != f {
		rw.Valid = false
		return false
	}
	if !refresh {
		return true
	}
	to := t.timeoutsOf(c)
	next := now + to.Other
	switch c.proto {
	case header.IPProtoUDP:
		next = now + to.UDPMultiple
	case header.IPProtoICMP, header.IPProtoICMPv6:
		next = now + to.ICMPReply
	}
	if d := next - e; d > refreshSlack || d < 0 {
		c.expires.Store(next)
	}
	return true
}

// Process runs ct on pkt with parameters p at time now (the datapath
// clock, ns) and writes the result into pkt.Key.CT. With nat, rw is the
// translation the caller must apply to the packet (rw.Actions).
func (t *Tracker) Process(pkt *packet.Packet, p *Params, now int64) (rw Rewrite) {
	t.process(pkt, p, now, nil, nil, &rw)
	return rw
}

// Ahead is a packet's tuple parsed and hashed ahead of ct (by
// PrefetchAhead, for a batch), which ProcessAhead then need not do again.
// A PMD keeps an array of them for its batches: no allocation.
type Ahead struct {
	pp parsed
	h  uint32
	// ok: pp and h are the packet's, in zone.
	ok   bool
	zone uint16
}

// ProcessAhead is Process of pkt, whose tuple a (PrefetchAhead's for it,
// the packet and its key unchanged since) holds already parsed and
// hashed. An a for another zone, or that PrefetchAhead could not fill
// (a packet ct marks invalid, an ICMP error), is ignored: the packet is
// parsed here, as by Process. The verdict is Process's either way.
func (t *Tracker) ProcessAhead(pkt *packet.Packet, p *Params, now int64, a *Ahead) (rw Rewrite) {
	t.Track(pkt, p, now, a, nil, &rw)
	return rw
}

// Track is ProcessAhead (a may be nil: Process) writing the translation
// into *rw, of which only Valid is set when there is none (a PMD keeps
// one Rewrite for its packets rather than copying one out per packet).
//
// cc, when not nil, is the caller's connection cache (one PMD's, see
// ConnCache): a packet of a connection it holds is tracked without a
// lookup in the table, and one found in the table is remembered in it.
// A packet with a tuple parsed ahead (a large table) skips the cache.
// The cache's last verdict is not tried here: the caller tries
// cc.Again first (then Track only when it fails, without trying it twice).
func (t *Tracker) Track(pkt *packet.Packet, p *Params, now int64, a *Ahead, cc *ConnCache, rw *Rewrite) {
	if a != nil && (!a.ok || a.zone != p.Zone) {
		a = nil
	}
	t.process(pkt, p, now, a, cc, rw)
}

// process is Track; a, when not nil, is valid for pkt in p.Zone.
func (t *Tracker) process(pkt *packet.Packet, p *Params, now int64, a *Ahead, cc *ConnCache, rw *Rewrite) {
	rw.Valid = false
	ct := &pkt.Key.CT
	// (A tuple parsed ahead: the table is large, its packets mostly of
	// connections too many for the cache, which would only add its
	// misses; the read-ahead hides the index's.)
	cache := cc != nil && a == nil && pkt.HashValid
	*ct = flow.Conntrack{Zone: p.Zone}
	var set *cacheSet
	if cache {
		var done bool
		if done, set = t.cached(cc, pkt, p, now, rw); done {
			return
		}
	}
	var pp *parsed
	var h uint32
	if a != nil {
		pp, h = &a.pp, a.h
	} else {
		pp = new(parsed) // on the stack: it does not escape
		if !parse(pkt, p.Zone, pp) {
			t.markInvalid(ct, InvalidUntrackable)
			return
		}
		if pp.related {
			t.related(pkt, ct, pp, p, now)
			return
		}
		h = t.hash(&pp.t)
	}
	c, reply := t.lookupHash(&pp.t, h)
	if c != nil {
		if f := c.fast.Load(); f&fastOK != 0 {
			if t.fastPath(c, f, ct, p, reply, now, rw, true) {
				if set != nil && cachedProto(c.proto) {
					set.add(c, pkt.Hash, reply, now)
					cc.remember(c, f, pkt.Hash, reply, now, ct)
				}
				return
			}
			// What fastPath wrote is not this packet's verdict
			// if c turns out to be gone below.
			*ct = flow.Conntrack{Zone: p.Zone}
		}
		// Otherwise one lock per packet: liveness and the state
		// update under it.
		c.mu.Lock()
		res := tcpReopen // not alive, or to be replaced: a new one
		if c.alive(now) && !(p.Force && p.Commit && reply) {
			if c.skewed {
				t.unskewAck(c, pp, reply)
			}
			res = t.update(c, pp, reply, now)
		}
		if res == tcpReopen {
			dead := !c.alive(now)
			c.mu.Unlock()
			if !dead {
				t.remove(c)
			}
			c = nil
		} else {
			switch res {
			case tcpInvalid:
				c.mu.Unlock()
				t.markInvalid(ct, InvalidTCP)
				return
			case tcpRepeatedSYN, stillNew:
				ct.State = flow.CTTracked | flow.CTNew
			default:
				ct.State = flow.CTTracked | flow.CTEstablished
				if reply {
					ct.State |= flow.CTReply
				}
				if c.helper == HelperFTP {
					t.ftpPacket(c, pkt, pp, reply, p.HasNAT && c.nat != 0, now)
				}
			}
			if c.related {
				ct.State |= flow.CTRelated
			}
			if p.Commit {
				c.apply(p)
			}
			c.finish(ct, p, reply, rw)
			c.publishFast()
			c.mu.Unlock()
			return
		}
	}
	if !validNew(pp) {
		t.markInvalid(ct, InvalidNotNew)
		return
	}
	ct.State = flow.CTTracked | flow.CTNew
	x, expected := t.expect.match(&pp.t, now, p.Commit)
	if expected {
		ct.State |= flow.CTRelated
	}
	if !p.Commit {
		return
	}
	np := p
	if expected && x.nat != 0 && p.HasNAT {
		// The data connection of a translated control connection
		// is translated to line up with it, whatever range this
		// ct's nat names (as in Open vSwitch).
		xp := *p
		xp.NAT = NAT{Src: x.nat == natSrc, Dst: x.nat == natDst, MinAddr: x.to}
		np = &xp
	}
	c, fresh := t.create(pp, h, np, now, expected)
	if c == nil {
		return
	}
	if fresh && p.Helper == HelperNone {
		// This packet's own connection, set up whole before it was
		// indexed: what finish reads of it never changes or is atomic,
		// and it is not on the lock-free path yet (nothing to publish),
		// so no lock.
		c.finish(ct, p, false, rw)
		return
	}
	c.mu.Lock()
	c.related = c.related || expected
	// A data connection is never a control connection: its payload is
	// the users' data, never to be parsed or rewritten.
	if c.helper == HelperNone && p.Helper != HelperNone && !c.related {
		c.helper = p.Helper
		t.helperCommit(c, now)
	}
	c.finish(ct, p, false, rw)
	c.publishFast()
	c.mu.Unlock()
}

// fillAhead parses and hashes each packet's tuple into ahead (as long
// as pkts) for ct in zone.
func (t *Tracker) fillAhead(pkts []*packet.Packet, zone uint16, ahead []Ahead) {
	for i, pkt := range pkts {
		a := &ahead[i]
		a.ok = pkt.KeyValid && parse(pkt, zone, &a.pp) && !a.pp.related
		if a.ok {
			a.h, a.zone = t.hash(&a.pp.t), zone
		}
	}
}

// finish translates a packet of c in direction reply when the ct has nat
// and describes c in its key. c.mu is held.
func (c *Conn) finish(ct *flow.Conntrack, p *Params, reply bool, rw *Rewrite) {
	if p.HasNAT && c.nat != 0 {
		c.natRewrite(reply, rw)
		ct.State |= c.natState()
	}
	c.describe(ct)
}

func (t *Tracker) markInvalid(ct *flow.Conntrack, why InvalidCause) {
	ct.State = flow.CTTracked | flow.CTInvalid
	t.invalid[why].Add(1)
}

// related marks an ICMP error about a tracked connection: +rel, and +rpl
// when the error travels the connection's reply direction (it answers a
// packet of the original one). The error answers the packet it quotes, so
// the connection is found by that packet's reverse, as a packet going the
// error's way would be; for a translated connection that is the only way,
// since the quoted packet was seen translated. With nat, the error is
// translated back as its quoted packet was (pkt's bytes and key).
func (t *Tracker) related(pkt *packet.Packet, ct *flow.Conntrack, pp *parsed, p *Params, now int64) {
	rq := pp.t.reverse()
	c, reply := t.lookup(&rq)
	if c != nil {
		c.mu.Lock()
		if !c.alive(now) {
			c.mu.Unlock()
			c = nil
		}
	}
	if c == nil {
		t.markInvalid(ct, InvalidNoConn)
		return
	}
	ct.State = flow.CTTracked | flow.CTRelated
	if reply {
		ct.State |= flow.CTReply
	}
	if p.HasNAT && c.nat != 0 {
		c.natRelated(pkt, reply)
		ct.State |= c.natState()
	}
	c.describe(ct)
	c.mu.Unlock()
}

// validNew reports whether a packet may start a connection.
func validNew(pp *parsed) bool {
	switch pp.t.Proto {
	case header.IPProtoTCP:
		return tcpValidNew(pp)
	case header.IPProtoICMP, header.IPProtoICMPv6:
		return isICMPQuery(pp.t.IPv6, pp.t.ICMPType)
	}
	return true
}

// update moves c's state for a packet of direction reply and refreshes
// its timeout. c.mu is held.
func (t *Tracker) update(c *Conn, pp *parsed, reply bool, now int64) tcpResult {
	to := t.timeoutsOf(c)
	res := tcpValid
	var timeout int64
	switch c.proto {
	case header.IPProtoTCP:
		before := c.tcp.state()
		res = c.tcp.update(pp, reply)
		if after := c.tcp.state(); after != before && !c.dead {
			t.tcpStates[before].Add(-1)
			t.tcpStates[after].Add(1)
		}
		if res == tcpInvalid || res == tcpReopen {
			return res
		}
		timeout = c.tcp.timeout(to)
		if c.tcp.established() {
			c.assured = true
		}
	case header.IPProtoUDP:
		if reply {
			c.udpReplied = true
			c.assured = true
		}
		timeout = to.UDPSingle
		if c.udpReplied {
			timeout = to.UDPMultiple
		}
	case header.IPProtoICMP, header.IPProtoICMPv6:
		if reply {
			c.assured = true
		}
		timeout = to.ICMPFirst
		if c.assured {
			timeout = to.ICMPReply
		}
	default:
		if reply {
			c.assured = true
		}
		timeout = to.Other
	}
	c.expires.Store(now + timeout)
	if c.proto != header.IPProtoTCP && !c.assured {
		res = stillNew
	}
	return res
}

// apply sets the mark and label a committing ct asks for. c.mu is held;
// the caller publishes (publishFast) afterwards.
func (c *Conn) apply(p *Params) {
	if !p.SetMark && !p.SetLabel {
		return
	}
	c.stopFast()
	if p.SetMark {
		c.mark.Store(c.mark.Load()&^p.MarkMask | p.Mark&p.MarkMask)
	}
	if p.SetLabel {
		l := c.labelBytes()
		for i := range l {
			l[i] = l[i]&^p.LabelMask[i] | p.Label[i]&p.LabelMask[i]
		}
		c.label[0].Store(binary.LittleEndian.Uint64(l[:8]))
		c.label[1].Store(binary.LittleEndian.Uint64(l[8:]))
	}
}

// labelBytes is c's label.
func (c *Conn) labelBytes() (l [16]byte) {
	binary.LittleEndian.PutUint64(l[:8], c.label[0].Load())
	binary.LittleEndian.PutUint64(l[8:], c.label[1].Load())
	return l
}

// describe writes the connection's mark, label and original tuple into
// the key, whose State and Zone are set (c.mu held, or in fastPath's read
// section).
func (c *Conn) describe(ct *flow.Conntrack) {
	// The state, protocol, zone and mark in one store: a recirculated
	// pass reads them as one word (flow.Conntrack.Head).
	ct.SetHead(ct.State, c.orig.Proto, ct.Zone, c.mark.Load())
	// Straight into the key, a word per store: copying a [16]byte
	// assembled from two word stores would load it as one 16-byte word
	// before those stores retire (no store-to-load forwarding).
	binary.LittleEndian.PutUint64(ct.Label[:8], c.label[0].Load())
	binary.LittleEndian.PutUint64(ct.Label[8:], c.label[1].Load())
	o := &c.orig
	ct.Src, ct.Dst = o.Src, o.Dst
	if o.Proto == header.IPProtoICMP || o.Proto == header.IPProtoICMPv6 {
		ct.TpSrc, ct.TpDst = uint16(o.ICMPType), 0
	} else {
		ct.TpSrc, ct.TpDst = o.SrcPort, o.DstPort
	}
}

// create commits a new connection for the packet pp, translated as p's
// nat(src|dst=...) says. It returns nil when the limit holds and nothing
// could be evicted, its zone is at its limit, or no translation is free;
// when another PMD committed the same connection first, that one.
//
// h is t.hash(&pp.t); related: an ALG expected the connection. fresh says
// the connection returned is the one this call made.
func (t *Tracker) create(pp *parsed, h uint32, p *Params, now int64, related bool) (winner *Conn, fresh bool) {
	z := t.zones.get(pp.t.Zone)
	if t.zones.full(z) {
		t.zoneRefused.Add(1)
		return nil, false
	}
	if t.n.Load() >= t.maxConns.Load() && !t.evictFor(&pp.t) {
		t.refused.Add(1)
		return nil, false
	}
	c := t.slab.alloc(&t.shardOf(h).cur)
	if c == nil {
		t.refused.Add(1)
		return nil, false
	}
	c.orig, c.oh, c.proto, c.related = pp.t, h, pp.t.Proto, related
	to := t.timeoutsOf(c)
	timeout := to.Other
	switch c.proto {
	case header.IPProtoTCP:
		c.tcp.init(pp)
		timeout = to.TCPSynSent
	case header.IPProtoUDP:
		timeout = to.UDPFirst
	case header.IPProtoICMP, header.IPProtoICMPv6:
		timeout = to.ICMPFirst
	}
	// c is not indexed yet, so no other goroutine reads it: a plain
	// store (the atomic one is a locked instruction on amd64). Indexing
	// it (an atomic store) publishes it.
	*(*int64)(unsafe.Pointer(&c.expires)) = now + timeout
	c.apply(p)
	if !p.HasNAT || !p.NAT.Src && !p.NAT.Dst {
		setReverse(&c.reply, &c.orig)
		c.rh = c.oh // the hash is the reverse's too
		winner, _ = t.insert(c, now)
		if winner != c {
			t.unplaced(c)
		}
		return winner, winner == c
	}
	if p.NAT.Src {
		c.nat = natSrc
	} else {
		c.nat = natDst
	}
	ok := natCandidates(&c.orig, h, &p.NAT, &c.reply, func() bool {
		c.rh = t.hash(&c.reply)
		w, placed := t.insert(c, now)
		winner = w
		return placed || w != nil
	})
	if winner != c {
		t.unplaced(c)
	}
	if !ok {
		t.natExhausted.Add(1)
		return nil, false
	}
	return winner, winner == c
}

// unplaced gives back the place of c, made by create but not indexed.
func (t *Tracker) unplaced(c *Conn) {
	c.dead = true
	t.slab.release(c)
}

// insert indexes c under its two tuples, atomically with checking that
// neither is taken: every PMD allocating a translation goes through here,
// so no two connections ever share a reply tuple. It returns c (placed),
// the live connection another PMD committed on c's original tuple first,
// or nil when c's reply tuple belongs to another live connection.
// c.oh and c.rh are set.
func (t *Tracker) insert(c *Conn, now int64) (winner *Conn, placed bool) {
	a, b := t.lockPair(c)
	defer unlockPair(a, b)
	self := c.reply == c.orig // a packet from a host to itself is its own reply
	switch {
	case self:
		a.x.reserve(1)
	case a == b:
		a.x.reserve(2)
	default:
		a.x.reserve(1)
		b.x.reserve(1)
	}
	// One probe per tuple finds what is in the way or where the entry
	// goes. An expired connection in the way is ended and its entry
	// taken over; its other entry (perhaps in a shard not locked here)
	// stays until the next Sweep drops entries of dead connections.
	po, old, _, _ := probe(a.x.slots(), &a.x, &c.orig, c.oh)
	if old != nil && !t.killIfExpired(old, now) {
		return old, false
	}
	pr, rfound := -1, false
	if !self {
		pr, old, _, _ = probe(b.x.slots(), &b.x, &c.reply, c.rh)
		if old != nil && !t.killIfExpired(old, now) {
			return nil, false
		}
		rfound = old != nil
	}
	// c is not indexed yet: a plain store of its references (one slot
	// or two).
	refs := (*int32)(unsafe.Pointer(&c.refs))
	*refs = 2
	if self || c.rh == c.oh && !rfound {
		*refs = 1
	}
	switch {
	case self:
		a.x.put(po, c, slotMeta(c.oh, false))
	case c.rh == c.oh && !rfound:
		// The tuples hash alike (no NAT) and nothing holds the reply
		// tuple: one entry for both. Its slot comes before the empty
		// one the reply's probe ended at, in the probe sequence they
		// share, so a lookup of the reply tuple reaches it.
		a.x.put(po, c, slotMeta(c.oh, false)|slotBoth)
	default:
		a.x.put(po, c, slotMeta(c.oh, false))
		if a == b && pr == po {
			// Both probes ended at the same empty slot: the reply
			// entry takes the next empty one, as a probe for it from
			// its home would find.
			sl := b.x.slots()
			mask := len(sl) - 1
			pr = (po + 1) & mask
			for sl[pr].m.Load() != 0 {
				pr = (pr + 1) & mask
			}
		}
		b.x.put(pr, c, slotMeta(c.rh, true))
	}
	a.unassured = append(a.unassured, c)
	if a.created == nil { // allocated at the shard's first commit
		a.created = new([256]uint64)
	}
	a.created[c.proto]++ // a is c.orig's shard
	t.n.Add(1)
	t.zones.get(c.orig.Zone).n.Add(1)
	if c.proto == header.IPProtoTCP {
		t.tcpStates[c.tcp.state()].Add(1)
	}
	return c, true
}

// evictFor makes room for a connection with tuple tu by removing the
// oldest unanswered connection of its shard (then of the others). It
// reports whether it removed one.
func (t *Tracker) evictFor(tu *Tuple) bool {
	start := t.hash(tu) >> shardShift
	for i := range uint32(numShards) {
		s := &t.shards[(start+i)%numShards]
		if c := s.popUnassured(); c != nil {
			if t.remove(c) {
				t.evicted.Add(1)
				return true
			}
		}
	}
	return false
}

// popUnassured takes the oldest connection of the shard that is still
// unanswered and alive, dropping answered and dead ones on the way.
func (s *shard) popUnassured() *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.unassured) > 0 {
		c := s.unassured[0]
		s.unassured[0] = nil
		s.unassured = s.unassured[1:]
		c.mu.Lock()
		ok := !c.assured && !c.dead
		c.mu.Unlock()
		if ok {
			return c
		}
	}
	s.unassured = nil // let the backing array go
	return nil
}

// remove takes c out of the table; false if it was already gone.
func (t *Tracker) remove(c *Conn) bool {
	a, b := t.lockPair(c)
	defer unlockPair(a, b)
	return t.removeLocked(c)
}

// removeLocked is remove with both of c's shards locked.
func (t *Tracker) removeLocked(c *Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t.shardOf(c.oh).x.delete(&c.orig, c.oh, c)
	t.shardOf(c.rh).x.delete(&c.reply, c.rh, c)
	return t.killLocked(c)
}

// killLocked ends c (c.mu held): it is no longer counted or found live.
func (t *Tracker) killLocked(c *Conn) bool {
	if c.dead {
		return false
	}
	c.dead = true
	c.stopFast()
	if c.skewed {
		t.skews.drop(c)
	}
	t.n.Add(-1)
	t.zones.get(c.orig.Zone).n.Add(-1)
	t.deletedBy[c.proto].Add(1)
	if c.proto == header.IPProtoTCP {
		t.tcpStates[c.tcp.state()].Add(-1)
	}
	t.deleted.Add(1)
	return true
}

// killIfExpired ends c if it is dead or expired at now and reports
// whether it is gone.
func (t *Tracker) killIfExpired(c *Conn, now int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.alive(now) {
		return false
	}
	t.killLocked(c)
	return true
}

// Sweep removes connections expired at now, a part of each shard per
// call, so that no call holds a shard's lock long: every slot is looked
// at within sweepRounds calls (lookups ignore expired connections
// meanwhile; only the count and the memory wait). The datapath calls it
// about once a second; calls closer than half a second to the last one
// (every bridge's housekeeping sweeps the one shared tracker) do nothing.
// It returns the connections removed.
func (t *Tracker) Sweep(now int64) int {
	t.sweepMu.Lock()
	defer t.sweepMu.Unlock()
	if d := now - t.lastSweep; t.lastSweep != 0 && d >= 0 && d < sec/2 {
		return 0
	}
	t.lastSweep = now
	n := 0
	for i := range t.shards {
		n += t.sweepShard(&t.shards[i], now)
	}
	return n
}

// Sweeping: every slot of a shard within sweepRounds calls, at least
// minSweep slots a call (a small shard is swept whole each time).
const (
	sweepRounds = 8
	minSweep    = 4096
)

// sweepShard sweeps the next part of s (t.sweepMu held).
func (t *Tracker) sweepShard(s *shard, now int64) int {
	var victims []*Conn
	stale, wrapped := false, false
	s.mu.Lock()
	slots := s.x.slots()
	size := len(slots)
	chunk := min(size, max(minSweep, size/sweepRounds))
	start := s.cursor % max(size, 1)
	for i := range chunk {
		c, _, reply := s.x.entry(&slots[(start+i)%size])
		if c == nil {
			continue
		}
		c.mu.Lock()
		switch {
		case c.dead:
			stale = true // an entry a newer connection did not take over
		case !reply && c.expires.Load() <= now:
			victims = append(victims, c)
		}
		c.mu.Unlock()
	}
	s.cursor = start + chunk
	wrapped = s.cursor >= size
	s.mu.Unlock()
	n := 0
	for _, c := range victims {
		if t.remove(c) {
			n++
		}
	}
	if !stale && !wrapped {
		return n
	}
	began := time.Now()
	s.mu.Lock()
	if stale {
		s.x.removeIf(func(c *Conn) bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.dead
		})
	}
	var list []*Conn
	if wrapped {
		// Once a round: give memory back (an index an eighth full
		// halves, down to its first size), and take the eviction list
		// to forget its answered and dead connections outside the lock
		// (meanwhile eviction sees only the newer ones).
		s.cursor = 0
		s.x.shrink()
		list, s.unassured = s.unassured, nil
	}
	s.mu.Unlock()
	t.maxLocked = max(t.maxLocked, time.Since(began).Nanoseconds())
	if list == nil {
		return n
	}
	keep := list[:0]
	for _, c := range list {
		c.mu.Lock()
		if !c.assured && !c.dead {
			keep = append(keep, c)
		}
		c.mu.Unlock()
	}
	clear(list[len(keep):])
	began = time.Now()
	s.mu.Lock()
	s.unassured = append(keep, s.unassured...) // older first
	s.mu.Unlock()
	t.maxLocked = max(t.maxLocked, time.Since(began).Nanoseconds())
	return n
}

// Flush removes every connection, or those of zone when zone is non-nil
// (dpctl/flush-conntrack, NXT_CT_FLUSH_ZONE).
func (t *Tracker) Flush(zone *uint16) int {
	return t.removeIf(func(c *Conn) bool { return zone == nil || c.orig.Zone == *zone })
}

// removeIf removes the connections for which f (called with c.mu held)
// is true.
func (t *Tracker) removeIf(f func(c *Conn) bool) int {
	var victims []*Conn
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		slots := s.x.slots()
		for i := range slots {
			c, _, reply := s.x.entry(&slots[i])
			if c == nil || reply {
				continue // each connection once, by its original tuple
			}
			c.mu.Lock()
			if !c.dead && f(c) {
				victims = append(victims, c)
			}
			c.mu.Unlock()
		}
		s.mu.Unlock()
	}
	n := 0
	for _, c := range victims {
		if t.remove(c) {
			n++
		}
	}
	return n
}

// prefetchMin is the table size from which Prefetch reads ahead: a
// smaller table's slots stay in the caches, and reading ahead would only
// add the tuples' parsing twice.
const prefetchMin = 16384

// Prefetch is a hint before ct runs in zone on a batch of packets (keys
// valid): it reads the index slot each packet's tuple hashes to, then the
// connection found there, so that the batch's cache misses overlap instead
// of coming one after another inside Process. For a ct that commits
// (commit) with nat (the ct's nat(...), nil without), also the slot where
// a new connection's reply tuple would go: the reverse of the first
// translation the commit tries (without one, the reverse's slot is the
// tuple's own). It changes nothing;
// what it returns is meaningless (returned so that the reads are not
// optimised away).
func (t *Tracker) Prefetch(pkts []*packet.Packet, zone uint16, commit bool, nat *NAT) uint16 {
	sink, _ := t.PrefetchAhead(pkts, zone, commit, nat, nil)
	return sink
}

// PrefetchAhead is Prefetch that also leaves each packet's parsed and
// hashed tuple in ahead (ahead[i] pkts[i]'s; ahead nil or at least as
// long as pkts) for ProcessAhead when it reads ahead (filled): the tuples
// are then parsed and hashed once per packet, not in both places. When
// the table is too small to read ahead for, it leaves ahead alone
// (filled false): Process parsing the tuple where it looks it up costs
// less than a pass over the batch to keep them (measured: 4 ns a packet
// at one connection).
func (t *Tracker) PrefetchAhead(pkts []*packet.Packet, zone uint16, commit bool, nat *NAT, ahead []Ahead) (sink uint16, filled bool) {
	if len(pkts) < 2 || t.n.Load() < prefetchMin {
		return 0, false
	}
	if ahead != nil {
		ahead = ahead[:len(pkts)]
		t.fillAhead(pkts, zone, ahead)
	}
	// Without a translation the reply tuple's slot is the original's
	// (the hash is symmetric).
	reply := commit && nat != nil && (nat.Src || nat.Dst) && !nat.Random
	var hs, rhs [32]uint32
	var pp parsed
	n := 0
	for i, pkt := range pkts {
		if n == len(hs) {
			break
		}
		tu := &pp.t
		if ahead != nil {
			if !ahead[i].ok {
				continue
			}
			tu, hs[n] = &ahead[i].pp.t, ahead[i].h
		} else {
			if !pkt.KeyValid || !parse(pkt, zone, &pp) || pp.related {
				continue
			}
			hs[n] = t.hash(&pp.t)
		}
		if reply {
			// The reply tuple is the translation's reverse, whose
			// hash is the translation's.
			r := natFirst(tu, hs[n], nat)
			rhs[n] = t.hash(&r)
		}
		n++
	}
	// The slots, in a tight loop so that many loads are in flight at
	// once, then the connections they hold.
	for i, h := range hs[:n] {
		if sl := t.shardOf(h).x.slots(); len(sl) > 0 {
			sl[h&uint32(len(sl)-1)].m.Load()
		}
		if reply {
			h = rhs[i]
			if sl := t.shardOf(h).x.slots(); len(sl) > 0 {
				sl[h&uint32(len(sl)-1)].m.Load()
			}
		}
	}
	// The connections' addresses first, then their lines in a loop of a
	// few instructions a packet, so that all of a batch's misses are in
	// flight together (resolving an address in the same loop held the
	// processor's window to a dozen packets' worth).
	var cs [len(hs)]*Conn
	m := 0
	for _, h := range hs[:n] {
		if sl := t.shardOf(h).x.slots(); len(sl) > 0 {
			s := &sl[h&uint32(len(sl)-1)]
			if c := t.shardOf(h).x.conn(s.id()); c != nil && uint32(s.m.Load()) == h {
				cs[m] = c
				m++
			}
		}
	}
	for _, c := range cs[:m] {
		sink += c.orig.SrcPort + c.reply.SrcPort // immutable once indexed
	}
	return sink, ahead != nil
}

// Package ipf reassembles IP fragments for the connection tracker, as
// Open vSwitch's userspace ipf module does: a ct action on a fragment
// holds it until its datagram is whole; the tracker then sees the
// reassembled datagram (ports and all), and the original fragments go on
// through the rest of the pipeline carrying its verdict, unchanged in
// size, so that nothing is re-fragmented and the path MTU stays the
// sender's business.
//
// A Reassembler belongs to one PMD: the fragments it holds are that PMD's
// pool buffers, and nothing is locked. Fragments of one datagram reach the
// same PMD when they arrive on one receive queue (a single-queue port, or
// RSS, which hashes fragments on their addresses only).
//
// Hostile input is bounded: fragments overlapping others (the classic
// teardrop and overwrite tricks) fail their whole datagram; a datagram
// with too many fragments or beyond 65,535 bytes fails; non-final
// fragments smaller than a minimum are not held (they go on to ct, which
// marks them invalid); the fragments held at once are bounded; a datagram
// not completed within ExpiryTimeout is dropped. Every case is counted.
package ipf

import (
	"encoding/binary"
	"slices"
	"sync/atomic"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Defaults as Open vSwitch's (lib/ipf.c).
const (
	DefaultMaxFrags   = 1000
	DefaultMinFragV4  = 1200 // bytes of IP packet, header included
	DefaultMinFragV6  = 1280
	ExpiryTimeout     = 15_000_000_000 // ns
	MaxFragsPerPacket = 64
	maxDatagram       = 65535
)

// Result says what Add did with a fragment.
type Result uint8

const (
	// Held: the fragment waits for the rest of its datagram.
	Held Result = iota
	// Complete: the datagram is whole; Add returned its fragments.
	Complete
	// Pass: the fragment is not reassembled (too small, malformed,
	// or no room): the caller runs ct on it as it is.
	Pass
	// Dropped: the fragment (and, for an overlap, its datagram's
	// others) was freed.
	Dropped
)

// Stats count fragments by what became of them, per IP version.
type Stats struct {
	Accepted, Completed, Expired, TooSmall, Overlapped, Purged uint64
}

// Counters are Stats as the PMD counts them and others read them.
type Counters struct {
	accepted, completed, expired, tooSmall, overlapped, purged atomic.Uint64
}

// Load reads the counters.
func (c *Counters) Load() Stats {
	return Stats{Accepted: c.accepted.Load(), Completed: c.completed.Load(), Expired: c.expired.Load(),
		TooSmall: c.tooSmall.Load(), Overlapped: c.overlapped.Load(), Purged: c.purged.Load()}
}

// Add sums s into into.
func (s Stats) Add(into *Stats) {
	into.Accepted += s.Accepted
	into.Completed += s.Completed
	into.Expired += s.Expired
	into.TooSmall += s.TooSmall
	into.Overlapped += s.Overlapped
	into.Purged += s.Purged
}

// Settings are what an operator tunes (ovs-appctl dpctl/ipf-set-*),
// shared by the Reassemblers of a switch and read at each fragment.
type Settings struct {
	// MaxFrags bounds the fragments held at once, by all PMDs together
	// (each holds at most its share).
	MaxFrags atomic.Int64
	// MinFragV4/V6 are the smallest IP packet, header included, a
	// fragment other than the last may be.
	MinFragV4, MinFragV6 atomic.Int64
	// Disabled per version: fragments go to ct as they are (+inv).
	V4Disabled, V6Disabled atomic.Bool
}

// NewSettings returns Open vSwitch's defaults.
func NewSettings() *Settings {
	s := &Settings{}
	s.MaxFrags.Store(DefaultMaxFrags)
	s.MinFragV4.Store(DefaultMinFragV4)
	s.MinFragV6.Store(DefaultMinFragV6)
	return s
}

// key identifies a datagram: RFC 791's (src, dst, protocol, id), in the ct
// zone and recirculation pass the fragment met ct in.
type key struct {
	src, dst [16]byte
	id       uint32
	zone     uint16
	recircID uint16
	proto    uint8
	v6       bool
}

type frag struct {
	pkt        *packet.Packet
	start, end int // payload bytes of the datagram this fragment holds
}

type list struct {
	frags   []frag
	total   int // payload length, known once the last fragment came; -1 before
	expires int64
}

// Reassembler holds one PMD's incomplete datagrams.
type Reassembler struct {
	lists map[key]*list
	held  int
	// limit is the most fragments this PMD holds whatever the
	// settings: a share of its pool.
	limit      int
	set        *Settings
	nextExpiry int64
	nHeld      atomic.Int64 // held, for readers
	V4, V6     Counters
}

// New makes a Reassembler following set, holding at most limit fragments.
func New(set *Settings, limit int) *Reassembler {
	return &Reassembler{lists: map[key]*list{}, set: set, limit: limit}
}

// Held is the number of fragments held.
func (r *Reassembler) Held() int64 { return r.nHeld.Load() }

func (r *Reassembler) maxHeld() int { return min(r.limit, int(r.set.MaxFrags.Load())) }

func (r *Reassembler) addHeld(n int) {
	r.held += n
	r.nHeld.Store(int64(r.held))
}

// fragInfo reads a fragment's place in its datagram: the payload's offset
// in the frame, its range in the datagram, whether more follow, and the
// datagram's key (zone and recirc left to the caller).
type fragInfo struct {
	payload    int // offset of the fragment's payload in the frame
	start, end int
	more       bool
	k          key
	size       int // the IP packet's length, header included
}

func parse(pkt *packet.Packet) (fi fragInfo, ok bool) {
	d := pkt.Data()
	l3 := int(pkt.Offsets.L3)
	if l3 == flow.NoOffset || l3 >= len(d) {
		return fi, false
	}
	switch pkt.Key.EthType {
	case header.EtherTypeIPv4:
		h := d[l3:]
		if len(h) < 20 {
			return fi, false
		}
		ihl := int(h[0]&0xf) * 4
		tot := int(binary.BigEndian.Uint16(h[2:]))
		if ihl < 20 || tot < ihl || tot > len(h) {
			return fi, false
		}
		fo := binary.BigEndian.Uint16(h[6:])
		fi.start = int(fo&0x1fff) * 8
		fi.end = fi.start + tot - ihl
		fi.more = fo&0x2000 != 0
		fi.payload = l3 + ihl
		fi.size = tot
		fi.k = key{id: uint32(binary.BigEndian.Uint16(h[4:])), proto: h[9]}
		fi.k.src = [16]byte{10: 0xff, 11: 0xff}
		fi.k.dst = fi.k.src
		copy(fi.k.src[12:], h[12:16])
		copy(fi.k.dst[12:], h[16:20])
	case header.EtherTypeIPv6:
		fh, _, ok := v6FragHeader(d, l3)
		if !ok {
			return fi, false
		}
		plen := int(binary.BigEndian.Uint16(d[l3+4:]))
		end := l3 + 40 + plen
		if end > len(d) || fh+8 > end {
			return fi, false
		}
		fo := binary.BigEndian.Uint16(d[fh+2:])
		fi.start = int(fo &^ 7)
		fi.payload = fh + 8
		fi.end = fi.start + end - fi.payload
		fi.more = fo&1 != 0
		fi.size = end - l3
		fi.k = key{id: binary.BigEndian.Uint32(d[fh+4:]), proto: d[fh], v6: true}
		copy(fi.k.src[:], d[l3+8:l3+24])
		copy(fi.k.dst[:], d[l3+24:l3+40])
	default:
		return fi, false
	}
	// Every fragment but the last carries a multiple of 8 bytes.
	if fi.more && (fi.end-fi.start)%8 != 0 || fi.end > maxDatagram || fi.end <= fi.start && fi.more {
		return fi, false
	}
	return fi, true
}

// v6FragHeader finds the fragment header of the IPv6 packet at l3: its
// offset, and the offset of the next-header byte that names it.
func v6FragHeader(d []byte, l3 int) (fh, nextOff int, ok bool) {
	if l3+40 > len(d) {
		return 0, 0, false
	}
	nextOff, p := l3+6, l3+40
	for range 8 {
		switch d[nextOff] {
		case header.IPProtoFragment:
			return p, nextOff, p+8 <= len(d)
		case header.IPProtoHopByHop, header.IPProtoRouting, header.IPProtoDstOpts:
			if p+2 > len(d) {
				return 0, 0, false
			}
			nextOff, p = p, p+(int(d[p+1])+1)*8
		default:
			return 0, 0, false
		}
	}
	return 0, 0, false
}

func (r *Reassembler) stats(v6 bool) *Counters {
	if v6 {
		return &r.V6
	}
	return &r.V4
}

// Add takes a fragment that met ct in zone at time now. When it completes
// its datagram, Add returns Complete and the datagram's fragments in
// order (pkt among them), now the caller's again; Held and Dropped leave
// nothing to the caller, Pass leaves pkt.
func (r *Reassembler) Add(pkt *packet.Packet, zone uint16, now int64) ([]*packet.Packet, Result) {
	fi, ok := parse(pkt)
	if !ok {
		return nil, Pass
	}
	if fi.k.v6 && r.set.V6Disabled.Load() || !fi.k.v6 && r.set.V4Disabled.Load() {
		return nil, Pass
	}
	st := r.stats(fi.k.v6)
	minSize := r.set.MinFragV4.Load()
	if fi.k.v6 {
		minSize = r.set.MinFragV6.Load()
	}
	if fi.more && int64(fi.size) < minSize {
		st.tooSmall.Add(1)
		return nil, Pass
	}
	if r.held >= r.maxHeld() {
		return nil, Pass // no room: ct sees the fragment as it is
	}
	fi.k.zone, fi.k.recircID = zone, pkt.Key.RecircID
	l := r.lists[fi.k]
	if l == nil {
		l = &list{total: -1, expires: now + ExpiryTimeout}
		r.lists[fi.k] = l
		if len(r.lists) == 1 || l.expires < r.nextExpiry {
			r.nextExpiry = l.expires
		}
	}
	for _, f := range l.frags {
		if f.start == fi.start && f.end == fi.end {
			st.overlapped.Add(1) // a duplicate: dropped, the datagram kept
			pkt.Free()
			return nil, Dropped
		}
		if fi.start < f.end && f.start < fi.end {
			st.overlapped.Add(1)
			r.purge(fi.k, l, st)
			pkt.Free()
			return nil, Dropped
		}
	}
	if !fi.more {
		if l.total >= 0 && l.total != fi.end {
			st.overlapped.Add(1) // two different ends
			r.purge(fi.k, l, st)
			pkt.Free()
			return nil, Dropped
		}
		l.total = fi.end
	}
	if len(l.frags) == MaxFragsPerPacket || l.total >= 0 && maxEnd(l.frags, fi.end) > l.total {
		r.purge(fi.k, l, st)
		st.purged.Add(1)
		pkt.Free()
		return nil, Dropped
	}
	l.frags = append(l.frags, frag{pkt: pkt, start: fi.start, end: fi.end})
	r.addHeld(1)
	st.accepted.Add(1)
	if l.total < 0 || covered(l.frags) != l.total {
		return nil, Held
	}
	slices.SortFunc(l.frags, func(a, b frag) int { return a.start - b.start })
	out := make([]*packet.Packet, len(l.frags))
	for i, f := range l.frags {
		out[i] = f.pkt
	}
	st.completed.Add(uint64(len(out)))
	r.addHeld(-len(out))
	delete(r.lists, fi.k)
	return out, Complete
}

func maxEnd(fs []frag, end int) int {
	for _, f := range fs {
		end = max(end, f.end)
	}
	return end
}

// covered is the payload bytes the fragments hold (they never overlap).
func covered(fs []frag) int {
	n := 0
	for _, f := range fs {
		n += f.end - f.start
	}
	return n
}

// purge drops a datagram's held fragments.
func (r *Reassembler) purge(k key, l *list, st *Counters) {
	for _, f := range l.frags {
		f.pkt.Free()
	}
	st.purged.Add(uint64(len(l.frags)))
	r.addHeld(-len(l.frags))
	delete(r.lists, k)
}

// Expire drops the datagrams not completed by now. It is cheap when
// nothing is due.
func (r *Reassembler) Expire(now int64) {
	if len(r.lists) == 0 || now < r.nextExpiry {
		return
	}
	r.nextExpiry = now + ExpiryTimeout
	for k, l := range r.lists {
		if l.expires > now {
			r.nextExpiry = min(r.nextExpiry, l.expires)
			continue
		}
		st := r.stats(k.v6)
		for _, f := range l.frags {
			f.pkt.Free()
		}
		st.expired.Add(uint64(len(l.frags)))
		r.addHeld(-len(l.frags))
		delete(r.lists, k)
	}
}

// Reassemble writes into dst the datagram of frags (Add's Complete
// result, in order): the first fragment's frame up to its IP payload,
// without the fragment fields (IPv4) or header (IPv6), then every
// fragment's payload. It reports false when dst cannot hold it.
func Reassemble(frags []*packet.Packet, dst *packet.Packet) bool {
	first := frags[0]
	fi, ok := parse(first)
	if !ok {
		return false
	}
	d := first.Data()
	l3 := int(first.Offsets.L3)
	hdr := d[:fi.payload]
	fh := 0
	if fi.k.v6 {
		fh = fi.payload - 8
		hdr = d[:fh] // the fragment header goes
	}
	n := len(hdr)
	for _, f := range frags {
		pi, _ := parse(f)
		n += pi.end - pi.start
	}
	if n > dst.Cap() {
		return false
	}
	dst.SetLen(n)
	out := dst.Data()
	copy(out, hdr)
	at := len(hdr)
	for _, f := range frags {
		pi, _ := parse(f)
		at += copy(out[at:], f.Data()[pi.payload:pi.payload+pi.end-pi.start])
	}
	if fi.k.v6 {
		_, nextOff, _ := v6FragHeader(d, l3)
		out[nextOff] = d[fh] // the header before it names what the fragment header did
		binary.BigEndian.PutUint16(out[l3+4:], uint16(n-l3-40))
	} else {
		ip := out[l3:]
		binary.BigEndian.PutUint16(ip[2:], uint16(n-l3))
		binary.BigEndian.PutUint16(ip[6:], binary.BigEndian.Uint16(ip[6:])&0x4000) // DF kept
		header.SetIPv4Checksum(ip)
	}
	dst.InPort = first.InPort
	return true
}

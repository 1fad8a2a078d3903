package datapath

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Meters (OpenFlow 1.3 §5.7). A meter is a set of bands, each a token
// bucket with a rate; a packet that a band's bucket cannot pay for exceeds
// that band, and of the bands it exceeds the one with the highest rate
// applies: a drop band drops the packet, a DSCP-remark band raises its DSCP
// drop precedence. The actions.Meter action names a meter by id, and the
// table of meters is shared by every PMD of the datapath: a meter's rate is
// a property of the switch, not of one PMD.
//
// The buckets are kept in the form of the generic cell rate algorithm: one
// int64 per band, the time at which the bucket would be empty, measured in
// ticks of 1/32 ns. The bucket holds (now − empty) × rate tokens, at most
// the burst, so a band's whole state is one word that PMDs update with a
// compare-and-swap — no lock, no allocation, no clock read (the PMD's
// iteration time is used). Each meter's words sit on cache lines of their
// own; its packet and byte counters are kept per PMD, each PMD's block on
// lines of its own, so counting never contends.
//
// Ticks are the datapath clock (nanoseconds, non-negative) times 32, so a
// datapath clock must stay below 2^58 ns (about nine years); monotonicNow
// counts from the start of the process.

// Meter limits.
const (
	// MaxMeters bounds the meters of a datapath. Ids below it are looked
	// up directly; larger ids (OpenFlow allows up to 0xffff0000) in a
	// sorted list.
	MaxMeters = 1 << 16
	// MaxMeterBands bounds the bands of one meter.
	MaxMeterBands = 8
	// DefaultMeterBurstNs is the bucket depth of a band when the meter
	// has no burst flag: one second at the band's rate, i.e. a burst size
	// equal to the rate, as in Open vSwitch and as pipeline.MeterTable
	// documents it.
	DefaultMeterBurstNs = 1_000_000_000
)

// meterJitterNs is how late a PMD may meter a packet after its arrival
// without the meter losing the packet's tokens. A PMD reads the clock once
// per iteration, so the packets of a steady stream reach the meter in
// clumps, each stamped with the time of its iteration, up to a sleep or a
// descheduling after they arrived, and PMDs meter their clumps
// concurrently. A token bucket shallower than such a gap fills to its cap
// between two clumps and throws away the tokens the stream earned in
// between: twice 10,000 pkt/s into a 20-packet bucket passed 96% of the
// rate, into a 5-packet bucket 51%, into a 1-packet bucket 14%
// (TestMeterRealClock). So while packets keep coming (the meter metered
// one at most meterJitterNs before), the cap applies as of meterJitterNs
// ago and the tokens earned since then are kept: a steady stream gets the
// band's rate whatever the bucket, unless the gaps exceed meterJitterNs (20
// ms is longer than a scheduler time slice; at 50 ms a loaded -race run
// passed 2% more than the band allows over 1.2 s through its default
// bucket, which is the price below, and 90-95% through a 1 ms bucket, at
// 10 ms 60-85%). A burst after a pause still gets
// exactly the bucket. The price: a burst right behind a stream slower
// than the rate may pass up to meterJitterNs worth of the rate beyond the
// bucket; over any interval a band passes at most its rate × the
// interval, plus the bucket, plus meterJitterNs of the rate.
const meterJitterNs = 20_000_000

// tickShift converts nanoseconds into bucket ticks (1/32 ns), fine enough
// that the per-packet rounding of a band's cost stays below 0.1% even at
// 10 Gbit/s with 64-byte frames.
const tickShift = 5

// costFracBits are the fractional bits of a band's per-unit cost.
const costFracBits = 16

// maxTau bounds a bucket's depth in ticks (about 26 days at any rate), so
// that bucket arithmetic cannot overflow.
const maxTau = int64(1) << 56

// MeterBandType says what a band does to the packets that exceed it.
type MeterBandType uint8

// Band types (the values of OpenFlow's OFPMBT_*).
const (
	// MeterBandDrop drops the packet.
	MeterBandDrop MeterBandType = 1
	// MeterBandDSCPRemark raises the drop precedence of the packet's DSCP
	// by the band's PrecLevel: an Assured Forwarding code point AFxy
	// becomes AFx(y+PrecLevel), at most AFx3 (RFC 2597). Other code
	// points (default, class selectors, EF, unassigned) have no drop
	// precedence and are left alone, as are non-IP packets. IPv4's header
	// checksum is updated.
	MeterBandDSCPRemark MeterBandType = 2
)

// MeterBand is one band of a meter.
type MeterBand struct {
	Type MeterBandType
	// Rate is kbit/s or packets/s, as the meter says; not 0.
	Rate uint32
	// BurstSize is the bucket depth in kbit or packets, used only when the
	// meter has Burst set (then it must not be 0).
	BurstSize uint32
	// PrecLevel is the drop-precedence increase of a DSCP-remark band.
	PrecLevel uint8
}

// MeterConfig is a meter's configuration.
type MeterConfig struct {
	// KBPS measures rates in kbit/s (frame bytes × 8 / 1000); otherwise
	// in packets per second.
	KBPS bool
	// Burst uses the bands' BurstSize as their bucket depth; otherwise a
	// band's bucket holds DefaultMeterBurstNs worth of its rate.
	Burst bool
	// Bands are the meter's bands, at most MaxMeterBands. A meter without
	// bands passes everything and only counts.
	Bands []MeterBand
}

// MeterBandStats counts the packets a band applied to.
type MeterBandStats struct {
	Packets, Bytes uint64
}

// MeterStats are a meter's counters: every packet that went through it,
// and per band (in MeterConfig.Bands order) the packets the band applied to.
type MeterStats struct {
	Packets, Bytes uint64
	Bands          []MeterBandStats
}

// meterBand is a band as the PMDs use it.
type meterBand struct {
	typ  MeterBandType
	prec uint8
	rate uint32
	// cost is the ticks one unit (a packet, or a byte for kbit/s) takes
	// from the bucket, with costFracBits fractional bits.
	cost uint64
	// tau is the bucket depth in ticks.
	tau int64
}

// meterState is one configuration of a meter: read-only bands, then the
// bucket words the PMDs write, on cache lines of their own. A modify
// installs a new one (with full buckets).
type meterState struct {
	bands  [MaxMeterBands]meterBand
	nbands int
	kbps   bool
	cfg    MeterConfig // as given, for Meter
	_      [CacheLine]byte
	// empty is, per band, the tick at which its bucket is (or was) empty.
	empty [MaxMeterBands]atomic.Int64
	// clock is the latest tick any PMD metered a packet at. A PMD reads
	// the clock once per iteration, so one that was descheduled, or is
	// later in its iteration than another, meters at a time behind the
	// other's: the empty times the PMD ahead moved on then lie in its
	// future and it finds no tokens that in fact exist; with a bucket of a
	// few packets those tokens are lost at the cap. Metering at the latest
	// time seen keeps every PMD on the bucket's time.
	clock atomic.Int64
	_     [CacheLine]byte
}

// meterCounters are one PMD's counts for one meter, written only by that PMD.
type meterCounters struct {
	packets, bytes atomic.Uint64
	bands          [MaxMeterBands]struct{ packets, bytes atomic.Uint64 }
}

// meterEntry is one meter id. Its counters live as long as the id;
// SetMeter on an existing id replaces only the state.
type meterEntry struct {
	id    uint32
	state atomic.Pointer[meterState]
	// counters holds one block per PMD (on lines of its own in slab),
	// indexed by PMD id.
	counters []*meterCounters
	slab     sharedSlab[meterCounters]
}

// meterTable maps meter ids to meters for lock-free readers.
type meterTable struct {
	mu sync.Mutex // serialises writers
	n  int
	// direct holds ids below MaxMeters, allocated at the first such meter.
	direct atomic.Pointer[[MaxMeters]atomic.Pointer[meterEntry]]
	// sparse holds the larger ids sorted by id; writers replace it whole.
	sparse atomic.Pointer[[]*meterEntry]
}

// lookup returns meter id, or nil.
func (t *meterTable) lookup(id uint32) *meterEntry {
	if id < MaxMeters {
		d := t.direct.Load()
		if d == nil {
			return nil
		}
		return d[id].Load()
	}
	sp := t.sparse.Load()
	if sp == nil {
		return nil
	}
	s := *sp
	lo, hi := 0, len(s)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s[mid].id < id {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < len(s) && s[lo].id == id {
		return s[lo]
	}
	return nil
}

// insert publishes e under its id. Called with t.mu held; the id is new.
func (t *meterTable) insert(e *meterEntry) {
	t.n++
	if e.id < MaxMeters {
		d := t.direct.Load()
		if d == nil {
			d = new([MaxMeters]atomic.Pointer[meterEntry])
			t.direct.Store(d)
		}
		d[e.id].Store(e)
		return
	}
	var s []*meterEntry
	if sp := t.sparse.Load(); sp != nil {
		s = *sp
	}
	i, _ := slices.BinarySearchFunc(s, e.id, func(m *meterEntry, id uint32) int { return cmpU32(m.id, id) })
	ns := slices.Insert(slices.Clone(s), i, e)
	t.sparse.Store(&ns)
}

// remove unpublishes id. Called with t.mu held.
func (t *meterTable) remove(id uint32) bool {
	if id < MaxMeters {
		d := t.direct.Load()
		if d == nil || d[id].Load() == nil {
			return false
		}
		d[id].Store(nil)
		t.n--
		return true
	}
	sp := t.sparse.Load()
	if sp == nil {
		return false
	}
	i, ok := slices.BinarySearchFunc(*sp, id, func(m *meterEntry, id uint32) int { return cmpU32(m.id, id) })
	if !ok {
		return false
	}
	ns := slices.Delete(slices.Clone(*sp), i, i+1)
	t.sparse.Store(&ns)
	t.n--
	return true
}

func cmpU32(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ErrTooManyMeters is returned by SetMeter when the datapath already holds
// MaxMeters meters.
var ErrTooManyMeters = errors.New("datapath: too many meters")

// newMeterState validates cfg and builds its bands with full buckets.
func newMeterState(cfg MeterConfig) (*meterState, error) {
	if len(cfg.Bands) > MaxMeterBands {
		return nil, fmt.Errorf("datapath: %d meter bands, at most %d", len(cfg.Bands), MaxMeterBands)
	}
	s := &meterState{nbands: len(cfg.Bands), kbps: cfg.KBPS}
	s.cfg = MeterConfig{KBPS: cfg.KBPS, Burst: cfg.Burst, Bands: slices.Clone(cfg.Bands)}
	// Ticks per unit at 1 unit/s: a packet, or a byte of a kbit/s rate
	// (8 bits at 1000 bit/s).
	perUnit := uint64(1_000_000_000) << tickShift
	if cfg.KBPS {
		perUnit = uint64(8_000_000) << tickShift
	}
	for i, b := range cfg.Bands {
		switch b.Type {
		case MeterBandDrop, MeterBandDSCPRemark:
		default:
			return nil, fmt.Errorf("datapath: meter band type %d", b.Type)
		}
		if b.Rate == 0 {
			return nil, errors.New("datapath: meter band rate 0")
		}
		tau := int64(DefaultMeterBurstNs) << tickShift
		if cfg.Burst {
			if b.BurstSize == 0 {
				return nil, errors.New("datapath: meter band burst size 0")
			}
			// BurstSize units (packets, or kbit = 125 bytes) at Rate
			// units/s take BurstSize/Rate seconds.
			hi, lo := bits.Mul64(uint64(b.BurstSize), uint64(1_000_000_000)<<tickShift)
			q, _ := bits.Div64(hi, lo, uint64(b.Rate))
			tau = int64(min(q, uint64(maxTau)))
		}
		s.bands[i] = meterBand{typ: b.Type, prec: b.PrecLevel, rate: b.Rate,
			cost: (perUnit << costFracBits) / uint64(b.Rate), tau: tau}
		s.empty[i].Store(math.MinInt64 / 2) // long empty: the bucket starts full
	}
	return s, nil
}

// SetMeter installs meter id, or replaces its configuration: PMDs pick the
// new one up with their next packet, its buckets start full, and the
// meter's counters carry on (band counters by position; those of positions
// the new configuration lacks are cleared).
func (dp *Datapath) SetMeter(id uint32, cfg MeterConfig) error {
	st, err := newMeterState(cfg)
	if err != nil {
		return err
	}
	t := &dp.meters
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.lookup(id); e != nil {
		e.state.Store(st)
		for _, c := range e.counters {
			for b := st.nbands; b < MaxMeterBands; b++ {
				c.bands[b].packets.Store(0)
				c.bands[b].bytes.Store(0)
			}
		}
		return nil
	}
	if t.n >= MaxMeters {
		return ErrTooManyMeters
	}
	e := &meterEntry{id: id, slab: newSharedSlab[meterCounters](len(dp.pmds), false)}
	e.counters = make([]*meterCounters, e.slab.len())
	for i := range e.counters {
		e.counters[i] = e.slab.at(i)
	}
	e.state.Store(st)
	t.insert(e)
	return nil
}

// DeleteMeter removes meter id (if it exists). Packets that reach a meter
// action naming it are dropped from then on.
func (dp *Datapath) DeleteMeter(id uint32) {
	t := &dp.meters
	t.mu.Lock()
	t.remove(id)
	t.mu.Unlock()
}

// Meter returns meter id's configuration.
func (dp *Datapath) Meter(id uint32) (MeterConfig, bool) {
	e := dp.meters.lookup(id)
	if e == nil {
		return MeterConfig{}, false
	}
	c := e.state.Load().cfg
	c.Bands = slices.Clone(c.Bands)
	return c, true
}

// MeterStats returns meter id's counters, summed over the PMDs.
func (dp *Datapath) MeterStats(id uint32) (MeterStats, bool) {
	e := dp.meters.lookup(id)
	if e == nil {
		return MeterStats{}, false
	}
	st := e.state.Load()
	s := MeterStats{Bands: make([]MeterBandStats, st.nbands)}
	for _, c := range e.counters {
		s.Packets += c.packets.Load()
		s.Bytes += c.bytes.Load()
		for b := range s.Bands {
			s.Bands[b].Packets += c.bands[b].packets.Load()
			s.Bands[b].Bytes += c.bands[b].bytes.Load()
		}
	}
	return s, true
}

// take takes cost ticks' worth of tokens from the bucket whose empty time
// is the word at e, holding at most tau ticks' worth at capT (≤ nowT) plus
// what it earned from then to nowT, and reports whether it held enough.
func take(e *atomic.Int64, nowT, capT, tau, cost int64) bool {
	for {
		old := e.Load()
		start := max(old, capT-tau) // a bucket holds at most tau at capT
		end := start + cost
		if end > nowT {
			return false
		}
		if e.CompareAndSwap(old, end) {
			return true
		}
	}
}

// meter runs pkt through meter id at the PMD's iteration time and reports
// whether the packet goes on (false: the caller drops it as DropMeter).
func (p *PMD) meter(pkt *packet.Packet, id uint32) bool {
	e := p.dp.meters.lookup(id)
	if e == nil {
		return false
	}
	st := e.state.Load()
	size := uint64(pkt.Len())
	c := e.counters[p.id]
	// Only this PMD writes its block: no read-modify-write needed.
	c.packets.Store(c.packets.Load() + 1)
	c.bytes.Store(c.bytes.Load() + size)
	best := st.exceeded(p.now<<tickShift, size)
	if best < 0 {
		return true
	}
	bc := &c.bands[best]
	bc.packets.Store(bc.packets.Load() + 1)
	bc.bytes.Store(bc.bytes.Load() + size)
	b := &st.bands[best]
	if b.typ == MeterBandDrop {
		return false
	}
	remarkDSCP(pkt, b.prec)
	return true
}

// exceeded takes a packet of size bytes from every band's bucket at tick
// nowT (or the latest tick another PMD metered at, if later) and returns
// the band that applies: of those the packet exceeded, the one with the
// highest rate; -1 when it exceeded none.
func (st *meterState) exceeded(nowT int64, size uint64) int {
	seen := st.clock.Load()
	if seen > nowT {
		nowT = seen
	} else if seen < nowT {
		st.clock.CompareAndSwap(seen, nowT) // lost to a later tick: fine
	}
	capT := nowT
	if nowT-seen <= meterJitterNs<<tickShift {
		capT = nowT - meterJitterNs<<tickShift // a stream: keep what it earned lately
	}
	units := uint64(1)
	if st.kbps {
		units = size
	}
	best := -1
	for i := 0; i < st.nbands; i++ {
		b := &st.bands[i]
		// units × cost can pass 64 bits (a jumbo frame at a few kbit/s).
		hi, lo := bits.Mul64(units, b.cost)
		cost := hi<<(64-costFracBits) | lo>>costFracBits
		if hi>>costFracBits != 0 || cost > uint64(maxTau) {
			cost = uint64(maxTau) // more than any bucket holds
		}
		if take(&st.empty[i], nowT, capT, b.tau, int64(cost)) {
			continue
		}
		if best < 0 || b.rate > st.bands[best].rate {
			best = i
		}
	}
	return best
}

// remarkDSCP raises the drop precedence of an IP packet's DSCP by levels
// (see MeterBandDSCPRemark), through the SetIPTOS rewrite so that the
// IPv4 checksum and the key follow.
func remarkDSCP(pkt *packet.Packet, levels uint8) {
	// Only IP packets carry a DSCP.
	if !pkt.KeyValid || (pkt.Key.EthType != header.EtherTypeIPv4 && pkt.Key.EthType != header.EtherTypeIPv6) {
		return
	}
	dscp := pkt.Key.NwTOS >> 2
	nd := raiseDropPrecedence(dscp, levels)
	if nd == dscp {
		return
	}
	a := actions.Action{Kind: actions.SetIPTOS, Val8: nd << 2, Mask8: 0xfc}
	actions.Apply(&a, pkt)
}

// raiseDropPrecedence returns dscp with its Assured Forwarding drop
// precedence raised by levels, at most to 3; a DSCP that is no AF code
// point (class 1–4, precedence 1–3, binary cccpp0) is returned as it is.
func raiseDropPrecedence(dscp, levels uint8) uint8 {
	class, prec := dscp>>3, dscp>>1&3
	if class < 1 || class > 4 || prec == 0 || dscp&1 != 0 {
		return dscp
	}
	np := min(uint16(prec)+uint16(levels), 3)
	return class<<3 | uint8(np)<<1
}

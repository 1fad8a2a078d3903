package pipeline

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

// Meter concurrency: Apply runs per packet (or per batch) in the datapath,
// so it takes no lock and allocates nothing; its token buckets are plain
// fields, and callers must not run Apply on the same meter concurrently.
// A meter's rate is a property of the whole switch, so its buckets cannot
// be split between PMDs: a PMD calls Apply between Acquire and Release,
// the meter's own spinlock (padded onto its own cache line), held only for
// the few arithmetic operations Apply does. Counters are atomics so that
// statistics can be read from the OpenFlow side at any time, and MODIFY
// swaps the whole configuration (bands and their buckets) atomically.

// MeterBand is one band of an installed meter: its OpenFlow description,
// its token bucket and its counters.
type MeterBand struct {
	ofpwire.MeterBand

	// Packets and Bytes count what the band applied to.
	Packets, Bytes atomic.Uint64

	capacity uint64 // bucket size in nano-units (see tokenCost)
	rate     uint64 // units per second = nano-units per nanosecond
	tokens   uint64
}

// meterConfig is what MODIFY replaces as a whole.
type meterConfig struct {
	flags ofp.MeterFlag
	bands []MeterBand // sorted by rate, ascending
	last  int64       // time of the latest Apply
	begun bool        // Apply has run: last is meaningful
}

// Meter is one installed meter. The pointer lives as long as the meter;
// MODIFY swaps its configuration.
type Meter struct {
	spin atomic.Uint32
	_    [60]byte // keep the spinlock on its own cache line

	ID      ofp.Meter
	Created time.Time

	// PacketsIn and BytesIn count everything Apply saw.
	PacketsIn, BytesIn atomic.Uint64

	refs atomic.Int64
	cfg  atomic.Pointer[meterConfig]
}

// Acquire takes the meter's spinlock, for a caller about to Apply it.
func (m *Meter) Acquire() {
	for !m.spin.CompareAndSwap(0, 1) {
		runtime.Gosched()
	}
}

// Release releases Acquire.
func (m *Meter) Release() { m.spin.Store(0) }

// Flags is the meter's current OFPMF_* flags.
func (m *Meter) Flags() ofp.MeterFlag { return m.cfg.Load().flags }

// Bands returns the meter's current bands, ordered by rate (lowest first);
// the value Apply returns indexes this slice. Never changed in place.
func (m *Meter) Bands() []MeterBand { return m.cfg.Load().bands }

// FlowCount is the number of flow entries using the meter.
func (m *Meter) FlowCount() int64 { return m.refs.Load() }

// nanoPerSecond converts unit rates into nano-units per nanosecond.
const nanoPerSecond = uint64(time.Second)

// Apply meters pkts packets of bytes bytes in total arriving at now (ns,
// from any monotonic clock, as long as the same one is used for the
// meter) and returns the index in Bands of the band that applies to them
// — the highest-rate band whose rate they exceed — or -1 when none does.
//
// Each band is a token bucket filling at its rate up to its burst size
// (OFPMF_BURST) or one second's worth of its rate otherwise; tokens are
// kept in nano-units (nano-packets, or nano-kilobits: 1 byte = 8e6) so the
// arithmetic is integral. Packets are taken from every band bucket that
// holds enough tokens; a band without enough is exceeded.
//
// No lock, no allocation: see the package's note on meter concurrency.
func (m *Meter) Apply(now int64, pkts int, bytes int) int {
	c := m.cfg.Load()
	m.PacketsIn.Add(uint64(pkts))
	m.BytesIn.Add(uint64(bytes))
	var elapsed uint64
	if !c.begun {
		c.begun, c.last = true, now // buckets start full
	} else if now > c.last {
		elapsed = uint64(now - c.last)
		c.last = now
	}
	cost := uint64(pkts) * nanoPerSecond
	if c.flags&ofp.MeterFlagKBitPerSec != 0 {
		cost = uint64(bytes) * 8 * (nanoPerSecond / 1000)
	}
	band := -1
	for i := range c.bands {
		b := &c.bands[i]
		room := b.capacity - b.tokens
		if elapsed >= room/b.rate+1 {
			b.tokens = b.capacity
		} else {
			b.tokens += elapsed * b.rate
			if b.tokens > b.capacity {
				b.tokens = b.capacity
			}
		}
		if b.tokens >= cost {
			b.tokens -= cost
		} else {
			band = i // bands are sorted by rate, so the last one wins
		}
	}
	if band >= 0 {
		b := &c.bands[band]
		b.Packets.Add(uint64(pkts))
		b.Bytes.Add(uint64(bytes))
	}
	return band
}

// MeterTable holds the meters of one bridge.
type MeterTable struct {
	// MaxMeters bounds the number of meters (0: DefaultMaxMeters),
	// OFPMMFC_OUT_OF_METERS beyond. Set it before use.
	MaxMeters int
	// MaxBands bounds the bands of one meter (0: DefaultMaxBands),
	// OFPMMFC_OUT_OF_BANDS beyond. Set it before use.
	MaxBands int

	mu     sync.RWMutex
	meters map[ofp.Meter]*Meter
	gen    atomic.Uint64
}

// DefaultMaxMeters and DefaultMaxBands are the limits a zero MeterTable
// field stands for.
const (
	DefaultMaxMeters = 65536
	DefaultMaxBands  = 8
)

// knownMeterFlags are the OFPMF_* bits OpenFlow 1.3 defines.
const knownMeterFlags = ofp.MeterFlagKBitPerSec | ofp.MeterFlagPacketPerSec |
	ofp.MeterFlagBurst | ofp.MeterFlagStats

// NewMeterTable returns an empty meter table with the default limits.
func NewMeterTable() *MeterTable { return &MeterTable{meters: make(map[ofp.Meter]*Meter)} }

func (t *MeterTable) maxMeters() int {
	if t.MaxMeters > 0 {
		return t.MaxMeters
	}
	return DefaultMaxMeters
}

func (t *MeterTable) maxBands() int {
	if t.MaxBands > 0 {
		return t.MaxBands
	}
	return DefaultMaxBands
}

// Generation moves on every change to the table, for cache invalidation.
func (t *MeterTable) Generation() uint64 { return t.gen.Load() }

// Get returns meter id, or nil.
func (t *MeterTable) Get(id ofp.Meter) *Meter {
	t.mu.RLock()
	m := t.meters[id]
	t.mu.RUnlock()
	return m
}

// Ref records one more flow entry using meter id; false when there is no
// such meter (the flow table answers OFPMMFC_UNKNOWN_METER).
func (t *MeterTable) Ref(id ofp.Meter) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m := t.meters[id]
	if m == nil {
		return false
	}
	m.refs.Add(1)
	return true
}

// Unref undoes one Ref; unknown meters are ignored.
func (t *MeterTable) Unref(id ofp.Meter) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if m := t.meters[id]; m != nil && m.refs.Load() > 0 {
		m.refs.Add(-1)
	}
}

func mmErr(code uint16) error {
	return &ofpwire.OFPError{Type: ofpwire.ETMeterModFailed, Code: code}
}

// ApplyMeterMod carries out one METER_MOD at time now. For DELETE it
// returns the ids of the meters removed, whose flow entries the caller
// must remove (the spec removes flows using a deleted meter). Errors are
// *ofpwire.OFPError of type METER_MOD_FAILED:
//
//	ADD of an existing id                      METER_EXISTS
//	MODIFY of an unknown id                    UNKNOWN_METER
//	id 0, above OFPM_MAX (DELETE: but ALL)     INVALID_METER
//	unknown command                            BAD_COMMAND
//	unknown flag, not exactly one of KBPS/PKTPS BAD_FLAGS
//	band rate 0                                BAD_RATE
//	BURST flag with a band's burst size 0      BAD_BURST
//	band type other than DROP, DSCP_REMARK     BAD_BAND
//	two bands with the same rate               BAD_BAND_VALUE
//	too many meters / bands                    OUT_OF_METERS, OUT_OF_BANDS
//
// Deleting a meter that does not exist is not an error.
func (t *MeterTable) ApplyMeterMod(mm *ofpwire.MeterMod, now time.Time) (deleted []ofp.Meter, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.meters == nil {
		t.meters = make(map[ofp.Meter]*Meter)
	}
	switch mm.Command {
	case ofp.MeterAdd, ofp.MeterModify:
	case ofp.MeterDelete:
		return t.deleteLocked(mm.MeterID)
	default:
		return nil, mmErr(ofpwire.MMFCBadCommand)
	}
	if mm.MeterID == 0 || mm.MeterID > ofp.MeterMax {
		return nil, mmErr(ofpwire.MMFCInvalidMeter)
	}
	old := t.meters[mm.MeterID]
	if mm.Command == ofp.MeterAdd && old != nil {
		return nil, mmErr(ofpwire.MMFCMeterExists)
	}
	if mm.Command == ofp.MeterModify && old == nil {
		return nil, mmErr(ofpwire.MMFCUnknownMeter)
	}
	if mm.Command == ofp.MeterAdd && len(t.meters) >= t.maxMeters() {
		return nil, mmErr(ofpwire.MMFCOutOfMeters)
	}
	cfg, err := t.newConfig(mm)
	if err != nil {
		return nil, err
	}
	if old != nil {
		old.cfg.Store(cfg)
	} else {
		m := &Meter{ID: mm.MeterID, Created: now}
		m.cfg.Store(cfg)
		t.meters[mm.MeterID] = m
	}
	t.gen.Add(1)
	return nil, nil
}

// newConfig validates mm's flags and bands and builds their buckets.
func (t *MeterTable) newConfig(mm *ofpwire.MeterMod) (*meterConfig, error) {
	f := mm.Flags
	if f&^knownMeterFlags != 0 {
		return nil, mmErr(ofpwire.MMFCBadFlags)
	}
	if (f&ofp.MeterFlagKBitPerSec != 0) == (f&ofp.MeterFlagPacketPerSec != 0) {
		return nil, mmErr(ofpwire.MMFCBadFlags)
	}
	if len(mm.Bands) > t.maxBands() {
		return nil, mmErr(ofpwire.MMFCOutOfBands)
	}
	c := &meterConfig{flags: f, bands: make([]MeterBand, len(mm.Bands))}
	for i, mb := range mm.Bands {
		switch mb.Type {
		case ofp.MeterBandTypeDrop, ofp.MeterBandTypeDSCPRemark:
		default:
			return nil, mmErr(ofpwire.MMFCBadBand)
		}
		if mb.Rate == 0 {
			return nil, mmErr(ofpwire.MMFCBadRate)
		}
		burst := uint64(mb.Rate)
		if f&ofp.MeterFlagBurst != 0 {
			if mb.BurstSize == 0 {
				return nil, mmErr(ofpwire.MMFCBadBurst)
			}
			burst = uint64(mb.BurstSize)
		}
		b := &c.bands[i]
		b.MeterBand = mb
		b.rate = uint64(mb.Rate)
		b.capacity = burst * nanoPerSecond
		b.tokens = b.capacity
	}
	sort.SliceStable(c.bands, func(i, j int) bool { return c.bands[i].Rate < c.bands[j].Rate })
	for i := 1; i < len(c.bands); i++ {
		if c.bands[i].Rate == c.bands[i-1].Rate {
			return nil, mmErr(ofpwire.MMFCBadBandValue)
		}
	}
	return c, nil
}

func (t *MeterTable) deleteLocked(id ofp.Meter) ([]ofp.Meter, error) {
	if id == ofp.MeterAll {
		out := make([]ofp.Meter, 0, len(t.meters))
		for mid := range t.meters {
			out = append(out, mid)
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		clear(t.meters)
		if len(out) > 0 {
			t.gen.Add(1)
		}
		return out, nil
	}
	if id == 0 || id > ofp.MeterMax {
		return nil, mmErr(ofpwire.MMFCInvalidMeter)
	}
	if t.meters[id] == nil {
		return nil, nil
	}
	delete(t.meters, id)
	t.gen.Add(1)
	return []ofp.Meter{id}, nil
}

// sorted returns the meters id selects (OFPM_ALL: every one) in id order.
func (t *MeterTable) sorted(id ofp.Meter) []*Meter {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if id != ofp.MeterAll {
		if m := t.meters[id]; m != nil {
			return []*Meter{m}
		}
		return nil
	}
	out := make([]*Meter, 0, len(t.meters))
	for _, m := range t.meters {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Stats answers OFPMP_METER for id (OFPM_ALL: every meter) at time now;
// band statistics follow Bands' order. Counters are kept whether or not
// the meter has OFPMF_STATS, which only asks for them.
func (t *MeterTable) Stats(id ofp.Meter, now time.Time) []ofpwire.MeterStats {
	ms := t.sorted(id)
	out := make([]ofpwire.MeterStats, 0, len(ms))
	for _, m := range ms {
		d := now.Sub(m.Created)
		if d < 0 {
			d = 0
		}
		bands := m.Bands()
		s := ofpwire.MeterStats{
			MeterID: m.ID, FlowCount: uint32(m.refs.Load()),
			PacketInCount: m.PacketsIn.Load(), ByteInCount: m.BytesIn.Load(),
			DurationSec: uint32(d / time.Second), DurationNSec: uint32(d % time.Second),
			BandStats: make([]ofp.MeterBandStats, len(bands)),
		}
		for i := range bands {
			s.BandStats[i] = ofp.MeterBandStats{PacketBandCount: bands[i].Packets.Load(), ByteBandCount: bands[i].Bytes.Load()}
		}
		out = append(out, s)
	}
	return out
}

// Config answers OFPMP_METER_CONFIG for id (OFPM_ALL: every meter).
func (t *MeterTable) Config(id ofp.Meter) []ofpwire.MeterConfig {
	ms := t.sorted(id)
	out := make([]ofpwire.MeterConfig, 0, len(ms))
	for _, m := range ms {
		c := m.cfg.Load()
		mc := ofpwire.MeterConfig{Flags: c.flags, MeterID: m.ID, Bands: make([]ofpwire.MeterBand, len(c.bands))}
		for i := range c.bands {
			mc.Bands[i] = c.bands[i].MeterBand
		}
		out = append(out, mc)
	}
	return out
}

// Features answers OFPMP_METER_FEATURES.
func (t *MeterTable) Features() ofpwire.MeterFeaturesReply {
	return ofpwire.MeterFeaturesReply{
		MaxMeter:     uint32(t.maxMeters()),
		BandTypes:    1<<uint(ofp.MeterBandTypeDrop) | 1<<uint(ofp.MeterBandTypeDSCPRemark),
		Capabilities: uint32(knownMeterFlags),
		MaxBands:     uint8(t.maxBands()),
	}
}

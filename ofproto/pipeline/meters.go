package pipeline

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Meters: the table here validates and stores METER_MODs and answers the
// meter multiparts; the datapath enforces the meters (datapath.SetMeter,
// programmed by ofproto) and keeps their traffic counters, which Stats
// takes from its caller. Flow entries name meters by their meter
// instruction; MeterFlowCounts and DeleteMeterFlows find them in the
// tables.

// MeterBand is one band of an installed meter, as its METER_MOD gave it.
type MeterBand struct {
	ofpwire.MeterBand
}

// meterConfig is what MODIFY replaces as a whole.
type meterConfig struct {
	flags ofpwire.MeterFlag
	bands []MeterBand // in the METER_MOD's order
}

// Meter is one installed meter. The pointer lives as long as the meter;
// MODIFY swaps its configuration.
type Meter struct {
	ID      ofpwire.Meter
	Created time.Time

	cfg atomic.Pointer[meterConfig]
}

// Flags is the meter's current OFPMF_* flags.
func (m *Meter) Flags() ofpwire.MeterFlag { return m.cfg.Load().flags }

// Bands returns the meter's current bands in the order the METER_MOD gave
// them: the order of OFPMP_METER_CONFIG's bands and of OFPMP_METER's band
// statistics, so that a controller finds each band's counters where it put
// the band, and of the bands ofproto gives the datapath. Never changed in
// place.
func (m *Meter) Bands() []MeterBand { return m.cfg.Load().bands }

// MeterCounts are a meter's traffic counters as its enforcer keeps them:
// every packet that went through the meter, and per band (in Bands order)
// the packets the band applied to.
type MeterCounts struct {
	Packets, Bytes uint64
	Bands          []ofpwire.MeterBandStats
}

// MeterTable holds the meters of one bridge.
type MeterTable struct {
	// MaxMeters bounds the number of meters (0: DefaultMaxMeters),
	// OFPMMFC_OUT_OF_METERS beyond. Set it before use.
	MaxMeters int
	// MaxBands bounds the bands of one meter (0: DefaultMaxBands),
	// OFPMMFC_OUT_OF_BANDS beyond. Set it before use.
	MaxBands int

	idTable[ofpwire.Meter, Meter]
}

// DefaultMaxMeters and DefaultMaxBands are the limits a zero MeterTable
// field stands for.
const (
	DefaultMaxMeters = 65536
	DefaultMaxBands  = 8
)

// knownMeterFlags are the OFPMF_* bits OpenFlow 1.3 defines.
const knownMeterFlags = ofpwire.MeterFlagKBitPerSec | ofpwire.MeterFlagPacketPerSec |
	ofpwire.MeterFlagBurst | ofpwire.MeterFlagStats

// NewMeterTable returns an empty meter table with the default limits.
func NewMeterTable() *MeterTable {
	t := &MeterTable{}
	t.byID = make(map[ofpwire.Meter]*Meter)
	return t
}

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

// Get returns meter id, or nil.
func (t *MeterTable) Get(id ofpwire.Meter) *Meter { return t.get(id) }

var meterModErrs = modErrs{typ: ofpwire.ETMeterModFailed, exists: ofpwire.MMFCMeterExists,
	unknown: ofpwire.MMFCUnknownMeter, outOf: ofpwire.MMFCOutOfMeters}

func mmErr(code uint16) error {
	return &ofpwire.OFPError{Type: ofpwire.ETMeterModFailed, Code: code}
}

// ApplyMeterMod carries out one METER_MOD at time now. For DELETE it
// returns the ids of the meters removed, whose flow entries the caller
// must remove (DeleteMeterFlows: OpenFlow 1.3 §6.6 removes the flow
// entries that use a deleted meter). Errors are
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
func (t *MeterTable) ApplyMeterMod(mm *ofpwire.MeterMod, now time.Time) (deleted []ofpwire.Meter, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch mm.Command {
	case ofpwire.MeterAdd, ofpwire.MeterModify:
	case ofpwire.MeterDelete:
		return t.deleteLocked(mm.MeterID)
	default:
		return nil, mmErr(ofpwire.MMFCBadCommand)
	}
	if mm.MeterID == 0 || mm.MeterID > ofpwire.MeterMax {
		return nil, mmErr(ofpwire.MMFCInvalidMeter)
	}
	old, err := t.admit(mm.Command == ofpwire.MeterAdd, mm.MeterID, t.maxMeters(), meterModErrs)
	if err != nil {
		return nil, err
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
		t.byID[mm.MeterID] = m
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
	if (f&ofpwire.MeterFlagKBitPerSec != 0) == (f&ofpwire.MeterFlagPacketPerSec != 0) {
		return nil, mmErr(ofpwire.MMFCBadFlags)
	}
	if len(mm.Bands) > t.maxBands() {
		return nil, mmErr(ofpwire.MMFCOutOfBands)
	}
	c := &meterConfig{flags: f, bands: make([]MeterBand, len(mm.Bands))}
	for i, mb := range mm.Bands {
		switch mb.Type {
		case ofpwire.MeterBandTypeDrop, ofpwire.MeterBandTypeDSCPRemark:
		default:
			return nil, mmErr(ofpwire.MMFCBadBand)
		}
		if mb.Rate == 0 {
			return nil, mmErr(ofpwire.MMFCBadRate)
		}
		if f&ofpwire.MeterFlagBurst != 0 && mb.BurstSize == 0 {
			return nil, mmErr(ofpwire.MMFCBadBurst)
		}
		c.bands[i].MeterBand = mb
	}
	rates := make([]uint32, len(c.bands))
	for i := range c.bands {
		rates[i] = c.bands[i].Rate
	}
	slices.Sort(rates)
	for i := 1; i < len(rates); i++ {
		if rates[i] == rates[i-1] {
			return nil, mmErr(ofpwire.MMFCBadBandValue)
		}
	}
	return c, nil
}

func (t *MeterTable) deleteLocked(id ofpwire.Meter) ([]ofpwire.Meter, error) {
	if id == ofpwire.MeterAll {
		return t.removeAllLocked(), nil
	}
	if id == 0 || id > ofpwire.MeterMax {
		return nil, mmErr(ofpwire.MMFCInvalidMeter)
	}
	if t.byID[id] == nil {
		return nil, nil
	}
	delete(t.byID, id)
	t.gen.Add(1)
	return []ofpwire.Meter{id}, nil
}

// Stats answers OFPMP_METER for id (OFPM_ALL: every meter) at time now.
// flows holds each meter's flow entry count (MeterFlowCounts) and counts
// returns its traffic counters (the datapath's); band statistics follow
// Bands' order. Counters are reported whether or not the meter has
// OFPMF_STATS, which only asks for them.
func (t *MeterTable) Stats(id ofpwire.Meter, now time.Time, flows map[ofpwire.Meter]uint32, counts func(ofpwire.Meter) MeterCounts) []ofpwire.MeterStats {
	ms := t.sorted(id, ofpwire.MeterAll)
	out := make([]ofpwire.MeterStats, 0, len(ms))
	for _, m := range ms {
		d := now.Sub(m.Created)
		if d < 0 {
			d = 0
		}
		c := counts(m.ID)
		s := ofpwire.MeterStats{
			MeterID: m.ID, FlowCount: flows[m.ID],
			PacketInCount: c.Packets, ByteInCount: c.Bytes,
			DurationSec: uint32(d / time.Second), DurationNSec: uint32(d % time.Second),
			BandStats: make([]ofpwire.MeterBandStats, len(m.Bands())),
		}
		copy(s.BandStats, c.Bands)
		out = append(out, s)
	}
	return out
}

// Config answers OFPMP_METER_CONFIG for id (OFPM_ALL: every meter).
func (t *MeterTable) Config(id ofpwire.Meter) []ofpwire.MeterConfig {
	ms := t.sorted(id, ofpwire.MeterAll)
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
		BandTypes:    1<<uint(ofpwire.MeterBandTypeDrop) | 1<<uint(ofpwire.MeterBandTypeDSCPRemark),
		Capabilities: uint32(knownMeterFlags),
		MaxBands:     uint8(t.maxBands()),
	}
}

// MeterID returns the meter the entry's meter instruction names, if it
// has one.
func (e *Entry) MeterID() (ofpwire.Meter, bool) {
	for _, in := range e.Instructions() {
		if m, ok := in.(*ofpwire.InstrMeter); ok {
			return m.MeterID, true
		}
	}
	return 0, false
}

// MeterFlowCounts counts, per meter, the flow entries whose meter
// instruction names it (OFPMP_METER's flow_count).
func (p *Pipeline) MeterFlowCounts() map[ofpwire.Meter]uint32 {
	out := make(map[ofpwire.Meter]uint32)
	p.mu.RLock()
	for tid := range p.tables {
		t := &p.tables[tid]
		if t.count == 0 {
			continue
		}
		t.each(func(e *Entry) {
			if id, ok := e.MeterID(); ok {
				out[id]++
			}
		})
	}
	p.mu.RUnlock()
	return out
}

// DeleteMeterFlows removes every flow entry whose meter instruction names
// one of ids and returns them, RemovedReason OFPRR_DELETE (OpenFlow 1.3
// has no reason of its own for a meter deletion; 1.4's METER_DELETE
// does not exist on the 1.3 wire). Like a flow-mod that removed
// something, it moves the generation and calls OnChange.
func (p *Pipeline) DeleteMeterFlows(ids []ofpwire.Meter) []*Entry {
	if len(ids) == 0 {
		return nil
	}
	del := make(map[ofpwire.Meter]bool, len(ids))
	for _, id := range ids {
		del[id] = true
	}
	return p.removeIf(func(e *Entry) (ofpwire.FlowRemovedReason, bool) {
		id, ok := e.MeterID()
		return ofpwire.FlowReasonDelete, ok && del[id]
	})
}

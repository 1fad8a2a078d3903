package ofproto

import (
	"slices"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/pipeline"

	"github.com/netrack/openflow/ofp"
)

// Meters: the bridge's pipeline.MeterTable validates METER_MODs and holds
// the meters' configuration; every change is programmed into the datapath,
// which enforces the meters (translation turns a flow's meter instruction
// into a datapath meter action naming the OpenFlow meter id) and counts
// their traffic for OFPMP_METER.

// newMeterTable returns a meter table whose limits are the datapath's, so
// that a meter the table accepts always fits the datapath.
func newMeterTable() *pipeline.MeterTable {
	mt := pipeline.NewMeterTable()
	mt.MaxMeters = datapath.MaxMeters
	mt.MaxBands = datapath.MaxMeterBands
	return mt
}

// datapathMeterConfig is m's configuration as the datapath takes it, bands
// in m.Bands' order so that the datapath's band counters line up with the
// table's bands.
func datapathMeterConfig(m *pipeline.Meter) datapath.MeterConfig {
	f := m.Flags()
	c := datapath.MeterConfig{KBPS: f&ofp.MeterFlagKBitPerSec != 0, Burst: f&ofp.MeterFlagBurst != 0}
	for _, b := range m.Bands() {
		db := datapath.MeterBand{Type: datapath.MeterBandDrop, Rate: b.Rate, BurstSize: b.BurstSize}
		if b.Type == ofp.MeterBandTypeDSCPRemark {
			db.Type, db.PrecLevel = datapath.MeterBandDSCPRemark, b.PrecLevel
		}
		c.Bands = append(c.Bands, db)
	}
	return c
}

// meterMod applies a METER_MOD to the meter table and the datapath. ADD and
// MODIFY program the datapath's meter (a MODIFY takes effect with the next
// packet, with full buckets). DELETE removes the flow entries that use the
// deleted meters first (OpenFlow 1.3 §6.6; FLOW_REMOVED with reason DELETE
// for those that asked), which invalidates the megaflows, then the
// datapath's meters.
func (b *Bridge) meterMod(mm *ofpwire.MeterMod) error {
	// The table and the datapath must see changes in the same order.
	b.meterMu.Lock()
	defer b.meterMu.Unlock()
	now := time.Now()
	if mm.Command == ofp.MeterDelete {
		b.dp.PushStats(now) // the FLOW_REMOVED of its flows carry their last packets
	}
	deleted, err := b.meters.ApplyMeterMod(mm, now)
	if err != nil {
		return err
	}
	if mm.Command != ofp.MeterDelete {
		m := b.meters.Get(mm.MeterID)
		if err := b.dp.SetMeter(uint32(mm.MeterID), datapathMeterConfig(m)); err != nil {
			// The table's limits are the datapath's, so this is not
			// expected; keep the two in step anyway.
			if mm.Command == ofp.MeterAdd {
				_, _ = b.meters.ApplyMeterMod(&ofpwire.MeterMod{Command: ofp.MeterDelete, MeterID: mm.MeterID}, now)
			}
			return ofpErr(ofpwire.ETMeterModFailed, ofpwire.MMFCOutOfMeters)
		}
		return nil
	}
	if len(deleted) == 0 {
		return nil
	}
	b.sendRemoved(b.pipe.DeleteMeterFlows(deleted))
	b.invalidate()
	for _, id := range deleted {
		b.dp.DeleteMeter(uint32(id))
	}
	return nil
}

// checkMeter refuses an ADD or MODIFY whose meter instruction names a meter
// that does not exist (METER_MOD_FAILED/UNKNOWN_METER, as OpenFlow 1.3
// asks of a flow-mod referencing an unknown meter) and moves the meter
// instruction to the front of the list: OpenFlow runs the meter before
// every other instruction whatever their order in the message, and
// translation follows the list.
func (b *Bridge) checkMeter(fm *ofpwire.FlowMod) error {
	if fm.Command != ofp.FlowAdd && fm.Command != ofp.FlowModify && fm.Command != ofp.FlowModifyStrict {
		return nil
	}
	for i, in := range fm.Instructions {
		m, ok := in.(*ofpwire.InstrMeter)
		if !ok {
			continue
		}
		if b.meters.Get(m.MeterID) == nil {
			return ofpErr(ofpwire.ETMeterModFailed, ofpwire.MMFCUnknownMeter)
		}
		if i > 0 {
			ins := slices.Clone(fm.Instructions)
			copy(ins[1:i+1], fm.Instructions[:i])
			ins[0] = in
			fm.Instructions = ins
		}
		return nil
	}
	return nil
}

// meterCounts reads meter id's counters from the datapath.
func (b *Bridge) meterCounts(id ofp.Meter) pipeline.MeterCounts {
	s, ok := b.dp.MeterStats(uint32(id))
	if !ok {
		return pipeline.MeterCounts{}
	}
	c := pipeline.MeterCounts{Packets: s.Packets, Bytes: s.Bytes, Bands: make([]ofp.MeterBandStats, len(s.Bands))}
	for i, bs := range s.Bands {
		c.Bands[i] = ofp.MeterBandStats{PacketBandCount: bs.Packets, ByteBandCount: bs.Bytes}
	}
	return c
}

// meterStats answers OFPMP_METER for id (OFPM_ALL: every meter): the
// datapath's counters, and the flow entries using each meter counted in
// the tables.
func (b *Bridge) meterStats(id ofp.Meter) []ofpwire.MeterStats {
	return b.meters.Stats(id, time.Now(), b.pipe.MeterFlowCounts(), b.meterCounts)
}

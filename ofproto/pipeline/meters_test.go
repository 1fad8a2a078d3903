package pipeline

import (
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func drop(rate, burst uint32) ofpwire.MeterBand {
	return ofpwire.MeterBand{Type: ofpwire.MeterBandTypeDrop, Rate: rate, BurstSize: burst}
}

func remark(rate, burst uint32, prec uint8) ofpwire.MeterBand {
	return ofpwire.MeterBand{Type: ofpwire.MeterBandTypeDSCPRemark, Rate: rate, BurstSize: burst, PrecLevel: prec}
}

func madd(id ofpwire.Meter, flags ofpwire.MeterFlag, bands ...ofpwire.MeterBand) *ofpwire.MeterMod {
	return &ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: flags, MeterID: id, Bands: bands}
}

func mustMeter(t testing.TB, mt *MeterTable, mm *ofpwire.MeterMod) *Meter {
	t.Helper()
	if _, err := mt.ApplyMeterMod(mm, t0); err != nil {
		t.Fatalf("meter mod %+v: %v", mm, err)
	}
	return mt.Get(mm.MeterID)
}

const (
	pktps = ofpwire.MeterFlagPacketPerSec
	kbps  = ofpwire.MeterFlagKBitPerSec
	burst = ofpwire.MeterFlagBurst
)

func TestMeterModErrors(t *testing.T) {
	tests := []struct {
		name string
		mm   *ofpwire.MeterMod
		code uint16
	}{
		{"add existing", madd(1, pktps, drop(10, 0)), ofpwire.MMFCMeterExists},
		{"modify unknown", &ofpwire.MeterMod{Command: ofpwire.MeterModify, Flags: pktps, MeterID: 9, Bands: []ofpwire.MeterBand{drop(1, 0)}}, ofpwire.MMFCUnknownMeter},
		{"bad command", &ofpwire.MeterMod{Command: 5, Flags: pktps, MeterID: 9}, ofpwire.MMFCBadCommand},
		{"id zero", madd(0, pktps, drop(10, 0)), ofpwire.MMFCInvalidMeter},
		{"id controller", madd(ofpwire.MeterController, pktps, drop(10, 0)), ofpwire.MMFCInvalidMeter},
		{"id above max", madd(ofpwire.MeterMax+1, pktps, drop(10, 0)), ofpwire.MMFCInvalidMeter},
		{"delete reserved", &ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: ofpwire.MeterSlowpath}, ofpwire.MMFCInvalidMeter},
		{"rate zero", madd(9, pktps, drop(0, 0)), ofpwire.MMFCBadRate},
		{"experimenter band", madd(9, pktps, ofpwire.MeterBand{Type: ofpwire.MeterBandTypeExperimenter, Rate: 5}), ofpwire.MMFCBadBand},
		{"unknown band", madd(9, pktps, ofpwire.MeterBand{Type: 7, Rate: 5}), ofpwire.MMFCBadBand},
		{"kbps and pktps", madd(9, pktps|kbps, drop(10, 0)), ofpwire.MMFCBadFlags},
		{"neither kbps nor pktps", madd(9, burst, drop(10, 5)), ofpwire.MMFCBadFlags},
		{"unknown flag", madd(9, pktps|0x100, drop(10, 0)), ofpwire.MMFCBadFlags},
		{"burst flag without burst", madd(9, pktps|burst, drop(10, 5), drop(20, 0)), ofpwire.MMFCBadBurst},
		{"same rate twice", madd(9, pktps, drop(10, 0), remark(10, 0, 1)), ofpwire.MMFCBadBandValue},
		{"out of bands", madd(9, pktps, drop(1, 0), drop(2, 0), drop(3, 0)), ofpwire.MMFCOutOfBands},
		{"out of meters", madd(9, pktps, drop(1, 0)), ofpwire.MMFCOutOfMeters},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mt := NewMeterTable()
			mt.MaxBands = 2
			mt.MaxMeters = 3
			mustMeter(t, mt, madd(1, pktps, drop(10, 0)))
			if tc.name == "out of meters" {
				mustMeter(t, mt, madd(2, pktps, drop(10, 0)))
				mustMeter(t, mt, madd(3, pktps, drop(10, 0)))
			}
			gen := mt.Generation()
			_, err := mt.ApplyMeterMod(tc.mm, t0)
			wantErr(t, err, ofpwire.ETMeterModFailed, tc.code)
			if mt.Generation() != gen || mt.Get(9) != nil {
				t.Fatal("a refused meter mod changed the table")
			}
		})
	}
}

func TestMeterAddModifyDelete(t *testing.T) {
	mt := NewMeterTable()
	m := mustMeter(t, mt, madd(1, kbps, drop(100, 0)))
	mustMeter(t, mt, madd(2, pktps, drop(100, 0)))
	if _, err := mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofpwire.MeterModify, Flags: pktps | burst, MeterID: 1,
		Bands: []ofpwire.MeterBand{remark(50, 10, 2), drop(20, 5)}}, t0); err != nil {
		t.Fatal(err)
	}
	if mt.Get(1) != m || m.Flags() != pktps|burst || len(m.Bands()) != 2 || m.Bands()[0].Rate != 50 || m.Bands()[1].Rate != 20 {
		t.Fatalf("after MODIFY: flags %v bands %+v", m.Flags(), bandsOf(m))
	}
	cfg := mt.Config(ofpwire.MeterAll)
	if len(cfg) != 2 || cfg[0].MeterID != 1 || cfg[0].Bands[0].Type != ofpwire.MeterBandTypeDSCPRemark || cfg[0].Bands[0].PrecLevel != 2 {
		t.Fatalf("config %+v", cfg)
	}
	del, err := mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: 77}, t0)
	if err != nil || len(del) != 0 {
		t.Fatalf("delete unknown: %v %v", del, err)
	}
	if del, err = mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: 1}, t0); err != nil || len(del) != 1 || del[0] != 1 || mt.Get(1) != nil {
		t.Fatalf("delete 1: %v %v", del, err)
	}
	mustMeter(t, mt, madd(5, pktps, drop(1, 0)))
	if del, err = mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: ofpwire.MeterAll}, t0); err != nil || len(del) != 2 || del[0] != 2 || del[1] != 5 {
		t.Fatalf("delete all: %v %v", del, err)
	}
	f := mt.Features()
	if f.MaxMeter != DefaultMaxMeters || f.BandTypes != 1<<1|1<<2 || f.Capabilities != 0xf || f.MaxBands != DefaultMaxBands {
		t.Fatalf("features %+v", f)
	}
}

// bandsOf shows a meter's bands in failure messages.
func bandsOf(m *Meter) []ofpwire.MeterBand {
	var out []ofpwire.MeterBand
	bs := m.Bands()
	for i := range bs {
		out = append(out, bs[i].MeterBand)
	}
	return out
}

// meterFlow is a flow-mod ADD into table tid at priority prio, with a
// meter instruction when meter is not 0.
func meterFlow(tid uint8, prio uint16, meter ofpwire.Meter) *ofpwire.FlowMod {
	fm := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, TableID: tid, Priority: prio, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
	fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(prio)))
	if meter != 0 {
		fm.Instructions = append(fm.Instructions, &ofpwire.InstrMeter{MeterID: meter})
	}
	fm.Instructions = append(fm.Instructions, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}})
	return fm
}

// TestMeterFlows: flow counts per meter come from the tables, and
// DeleteMeterFlows removes exactly the entries naming the deleted meters.
func TestMeterFlows(t *testing.T) {
	p := New(0)
	changes := 0
	p.OnChange = func() { changes++ }
	for _, fm := range []*ofpwire.FlowMod{
		meterFlow(0, 1, 1), meterFlow(0, 2, 1), meterFlow(3, 1, 1),
		meterFlow(0, 3, 2), meterFlow(5, 4, 7), meterFlow(0, 5, 0),
	} {
		if _, err := p.Apply(fm, t0); err != nil {
			t.Fatal(err)
		}
	}
	counts := p.MeterFlowCounts()
	if len(counts) != 3 || counts[1] != 3 || counts[2] != 1 || counts[7] != 1 {
		t.Fatalf("flow counts %v", counts)
	}
	gen, ch := p.Generation(), changes
	if got := p.DeleteMeterFlows([]ofpwire.Meter{9}); len(got) != 0 || p.Generation() != gen || changes != ch {
		t.Fatalf("deleting an unused meter removed %d entries or signalled a change", len(got))
	}
	removed := p.DeleteMeterFlows([]ofpwire.Meter{1, 7})
	if len(removed) != 4 || p.Generation() == gen || changes != ch+1 {
		t.Fatalf("removed %d entries, want 4 (and one change)", len(removed))
	}
	for _, e := range removed {
		if id, _ := e.MeterID(); (id != 1 && id != 7) || e.RemovedReason != ofpwire.FlowReasonDelete {
			t.Fatalf("removed entry with meter %d reason %v", id, e.RemovedReason)
		}
	}
	left, _ := p.Flows(&Filter{TableID: TableAll, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	if len(left) != 2 {
		t.Fatalf("%d entries left, want 2", len(left))
	}
	if c := p.MeterFlowCounts(); len(c) != 1 || c[2] != 1 {
		t.Fatalf("flow counts after delete %v", c)
	}
}

// TestMeterStats: the counters come from the enforcer, bands in rate
// order, the flow count from the caller, the duration from creation.
func TestMeterStats(t *testing.T) {
	mt := NewMeterTable()
	mustMeter(t, mt, madd(1, pktps|burst, drop(200, 10), remark(100, 5, 1)))
	mustMeter(t, mt, madd(4, kbps, drop(1000, 0)))
	counts := func(id ofpwire.Meter) MeterCounts {
		if id != 1 {
			return MeterCounts{} // a meter the enforcer has not seen
		}
		return MeterCounts{Packets: 30, Bytes: 3000, Bands: []ofpwire.MeterBandStats{{PacketBandCount: 7, ByteBandCount: 700}, {PacketBandCount: 2, ByteBandCount: 200}}}
	}
	st := mt.Stats(ofpwire.MeterAll, t0.Add(3*time.Second+7), map[ofpwire.Meter]uint32{1: 5}, counts)
	if len(st) != 2 || st[0].MeterID != 1 || st[1].MeterID != 4 {
		t.Fatalf("stats %+v", st)
	}
	s := st[0]
	if s.FlowCount != 5 || s.PacketInCount != 30 || s.ByteInCount != 3000 || s.DurationSec != 3 || s.DurationNSec != 7 ||
		len(s.BandStats) != 2 || s.BandStats[0].PacketBandCount != 7 || s.BandStats[1].ByteBandCount != 200 {
		t.Fatalf("meter 1 stats %+v", s)
	}
	if s := st[1]; s.FlowCount != 0 || s.PacketInCount != 0 || len(s.BandStats) != 1 || s.BandStats[0].PacketBandCount != 0 {
		t.Fatalf("meter 4 stats %+v", s)
	}
	if st := mt.Stats(9, t0, nil, counts); len(st) != 0 {
		t.Fatalf("stats of a missing meter %+v", st)
	}
}

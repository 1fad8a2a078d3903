package pipeline

import (
	"sync"
	"testing"
	"time"

	"vswitch/ofproto/ofpwire"

	"github.com/netrack/openflow/ofp"
)

func drop(rate, burst uint32) ofpwire.MeterBand {
	return ofpwire.MeterBand{Type: ofp.MeterBandTypeDrop, Rate: rate, BurstSize: burst}
}

func remark(rate, burst uint32, prec uint8) ofpwire.MeterBand {
	return ofpwire.MeterBand{Type: ofp.MeterBandTypeDSCPRemark, Rate: rate, BurstSize: burst, PrecLevel: prec}
}

func madd(id ofp.Meter, flags ofp.MeterFlag, bands ...ofpwire.MeterBand) *ofpwire.MeterMod {
	return &ofpwire.MeterMod{Command: ofp.MeterAdd, Flags: flags, MeterID: id, Bands: bands}
}

func mustMeter(t testing.TB, mt *MeterTable, mm *ofpwire.MeterMod) *Meter {
	t.Helper()
	if _, err := mt.ApplyMeterMod(mm, t0); err != nil {
		t.Fatalf("meter mod %+v: %v", mm, err)
	}
	return mt.Get(mm.MeterID)
}

const (
	pktps = ofp.MeterFlagPacketPerSec
	kbps  = ofp.MeterFlagKBitPerSec
	burst = ofp.MeterFlagBurst
)

func TestMeterModErrors(t *testing.T) {
	tests := []struct {
		name string
		mm   *ofpwire.MeterMod
		code uint16
	}{
		{"add existing", madd(1, pktps, drop(10, 0)), ofpwire.MMFCMeterExists},
		{"modify unknown", &ofpwire.MeterMod{Command: ofp.MeterModify, Flags: pktps, MeterID: 9, Bands: []ofpwire.MeterBand{drop(1, 0)}}, ofpwire.MMFCUnknownMeter},
		{"bad command", &ofpwire.MeterMod{Command: 5, Flags: pktps, MeterID: 9}, ofpwire.MMFCBadCommand},
		{"id zero", madd(0, pktps, drop(10, 0)), ofpwire.MMFCInvalidMeter},
		{"id controller", madd(ofp.MeterController, pktps, drop(10, 0)), ofpwire.MMFCInvalidMeter},
		{"id above max", madd(ofp.MeterMax+1, pktps, drop(10, 0)), ofpwire.MMFCInvalidMeter},
		{"delete reserved", &ofpwire.MeterMod{Command: ofp.MeterDelete, MeterID: ofp.MeterSlowpath}, ofpwire.MMFCInvalidMeter},
		{"rate zero", madd(9, pktps, drop(0, 0)), ofpwire.MMFCBadRate},
		{"experimenter band", madd(9, pktps, ofpwire.MeterBand{Type: ofp.MeterBandTypeExperimenter, Rate: 5}), ofpwire.MMFCBadBand},
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
	if !mt.Ref(1) || mt.Ref(3) {
		t.Fatal("Ref: want true for installed meters, false for unknown")
	}
	m.Apply(1, 1, 100)
	if _, err := mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofp.MeterModify, Flags: pktps | burst, MeterID: 1,
		Bands: []ofpwire.MeterBand{remark(50, 10, 2), drop(20, 5)}}, t0); err != nil {
		t.Fatal(err)
	}
	if mt.Get(1) != m || m.Flags() != pktps|burst || len(m.Bands()) != 2 || m.Bands()[0].Rate != 20 || m.FlowCount() != 1 || m.PacketsIn.Load() != 1 {
		t.Fatalf("after MODIFY: flags %v bands %+v flows %d", m.Flags(), bandsOf(m), m.FlowCount())
	}
	cfg := mt.Config(ofp.MeterAll)
	if len(cfg) != 2 || cfg[0].MeterID != 1 || cfg[0].Bands[1].Type != ofp.MeterBandTypeDSCPRemark || cfg[0].Bands[1].PrecLevel != 2 {
		t.Fatalf("config %+v", cfg)
	}
	del, err := mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofp.MeterDelete, MeterID: 77}, t0)
	if err != nil || len(del) != 0 {
		t.Fatalf("delete unknown: %v %v", del, err)
	}
	if del, err = mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofp.MeterDelete, MeterID: 1}, t0); err != nil || len(del) != 1 || del[0] != 1 || mt.Get(1) != nil {
		t.Fatalf("delete 1: %v %v", del, err)
	}
	mustMeter(t, mt, madd(5, pktps, drop(1, 0)))
	if del, err = mt.ApplyMeterMod(&ofpwire.MeterMod{Command: ofp.MeterDelete, MeterID: ofp.MeterAll}, t0); err != nil || len(del) != 2 || del[0] != 2 || del[1] != 5 {
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

const ms = int64(time.Millisecond)

func TestMeterPktps(t *testing.T) {
	mt := NewMeterTable()
	// 1000 packets/s, burst 10 packets.
	m := mustMeter(t, mt, madd(1, pktps|burst, drop(1000, 10)))
	now := int64(5 * time.Second)
	for i := 0; i < 10; i++ {
		if b := m.Apply(now, 1, 60); b != -1 {
			t.Fatalf("packet %d of the burst dropped", i)
		}
	}
	if m.Apply(now, 1, 60) != 0 {
		t.Fatal("packet beyond the burst passed")
	}
	// 1 ms later one packet's worth has come back, not two.
	now += ms
	if m.Apply(now, 1, 60) != -1 || m.Apply(now, 1, 60) != 0 {
		t.Fatal("refill after 1ms should admit exactly one packet")
	}
	// A long pause refills to the burst, not beyond.
	now += int64(time.Hour)
	passed := 0
	for i := 0; i < 50; i++ {
		if m.Apply(now, 1, 60) == -1 {
			passed++
		}
	}
	if passed != 10 {
		t.Fatalf("after a pause %d packets passed, want the burst of 10", passed)
	}
	// A steady 2000 pkt/s stream: about half is dropped.
	passed = 0
	for i := 0; i < 2000; i++ {
		now += int64(time.Second) / 2000
		if m.Apply(now, 1, 60) == -1 {
			passed++
		}
	}
	if passed < 990 || passed > 1020 {
		t.Fatalf("at twice the rate %d of 2000 passed, want about 1000", passed)
	}
	// Time going backwards adds nothing.
	if m.Apply(now-int64(time.Second), 1, 60) != 0 {
		t.Fatal("earlier timestamp refilled the bucket")
	}
}

func TestMeterKbps(t *testing.T) {
	mt := NewMeterTable()
	// 80 kbit/s = 10,000 bytes/s; without BURST the burst is one second's worth.
	m := mustMeter(t, mt, madd(1, kbps, drop(80, 0)))
	now := int64(time.Second)
	if m.Apply(now, 10, 10000) != -1 {
		t.Fatal("one second's worth of bytes should pass on a full bucket")
	}
	if m.Apply(now, 1, 1) != 0 {
		t.Fatal("bucket should be empty")
	}
	now += 100 * ms // 1000 bytes come back
	if m.Apply(now, 1, 1001) != 0 {
		t.Fatal("1001 bytes passed with 1000 bytes of tokens")
	}
	if m.Apply(now, 1, 1000) != -1 {
		t.Fatal("1000 bytes refused with 1000 bytes of tokens")
	}
}

func TestMeterTwoBands(t *testing.T) {
	mt := NewMeterTable()
	// Remark above 100 pkt/s, drop above 200 pkt/s; bursts of 5 and 10.
	m := mustMeter(t, mt, madd(1, pktps|burst, drop(200, 10), remark(100, 5, 1)))
	bands := m.Bands()
	if bands[0].Type != ofp.MeterBandTypeDSCPRemark || bands[1].Type != ofp.MeterBandTypeDrop {
		t.Fatalf("bands not ordered by rate: %+v", bandsOf(m))
	}
	now := int64(time.Second)
	var got []int
	for i := 0; i < 12; i++ {
		got = append(got, m.Apply(now, 1, 100))
	}
	// 5 pass both, next 5 exceed the 100 band only (remark), the rest both (drop).
	want := []int{-1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 1, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("bands chosen %v, want %v", got, want)
		}
	}
	if bands[0].MeterBand.PrecLevel != 1 {
		t.Fatal("remark band lost its prec level")
	}
	// Steady 150 pkt/s: between the two rates, so remarked but never dropped
	// once the initial bursts are spent.
	counts := map[int]int{}
	for i := 0; i < 1500; i++ {
		now += int64(time.Second) / 150
		counts[m.Apply(now, 1, 100)]++
	}
	if counts[1] != 0 || counts[0] < 450 || counts[0] > 550 {
		t.Fatalf("at 150 pkt/s: %v, want about 500 remarked and none dropped", counts)
	}

	st := mt.Stats(1, t0.Add(3*time.Second+7))
	if len(st) != 1 {
		t.Fatalf("stats %+v", st)
	}
	s := st[0]
	if s.PacketInCount != 1512 || s.ByteInCount != 151200 || s.DurationSec != 3 || s.DurationNSec != 7 {
		t.Fatalf("meter stats %+v", s)
	}
	if s.BandStats[0].PacketBandCount != uint64(5+counts[0]) || s.BandStats[1].PacketBandCount != 2 ||
		s.BandStats[1].ByteBandCount != 200 {
		t.Fatalf("band stats %+v", s.BandStats)
	}
}

func TestMeterConcurrentStats(t *testing.T) {
	mt := NewMeterTable()
	m := mustMeter(t, mt, madd(1, pktps, drop(1000, 0)))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				m.Acquire()
				m.Apply(int64(1+i), 1, 64)
				m.Release()
			}
		}(w)
	}
	for i := 0; i < 20; i++ {
		mt.Stats(ofp.MeterAll, t0)
		mt.Config(1)
	}
	wg.Wait()
	s := mt.Stats(1, t0)[0]
	// 1000 tokens to start with, and 2000 packets within 500 ns.
	if s.PacketInCount != 2000 || s.BandStats[0].PacketBandCount != 1000 {
		t.Fatalf("stats %+v", s)
	}
}

func BenchmarkMeterApply(b *testing.B) {
	mt := NewMeterTable()
	m := mustMeter(b, mt, madd(1, kbps|burst, drop(1000000, 1000), remark(500000, 500, 1)))
	now := int64(time.Second)
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		m.Apply(now, 1, 1500)
	}
}

func BenchmarkMeterApplyLocked(b *testing.B) {
	mt := NewMeterTable()
	m := mustMeter(b, mt, madd(1, pktps, drop(1000000, 0)))
	now := int64(time.Second)
	b.ReportAllocs()
	for b.Loop() {
		now += 1000
		m.Acquire()
		m.Apply(now, 1, 64)
		m.Release()
	}
}

package ofproto

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Meters from OpenFlow 1.3.5 §5.7 and §7.3.4.4: a band applies to the
// packets beyond its rate (kbps: kilobits of frame per second; pktps:
// packets per second); a drop band drops them, a DSCP-remark band raises
// their drop precedence by prec_level; of the bands a packet exceeds, the
// one with the highest rate applies. Meters are installed and read back
// through the OpenFlow channel; packets go through the datapath on a fake
// clock, so the counts are exact.

// cfSizedFrame is an IPv4 UDP frame of size bytes with DSCP dscp.
func cfSizedFrame(t *testing.T, size int, dscp uint8) []byte {
	ip := cfIPv4(layers.IPProtocolUDP)
	ip.TOS = dscp << 2
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	udp.SetNetworkLayerForChecksum(ip)
	return serialize(t, cfEth(layers.EthernetTypeIPv4), ip, udp, gopacket.Payload(make([]byte, size-14-20-8)))
}

// offerClumps offers f at pps packets per second for d of fake time in
// clumps every gap (a PMD meters what arrived since its last iteration at
// once), and returns the DSCPs of the frames that came out of port 2 from
// time from on, and how many were offered in all.
func (mb *meterBridge) offerClumps(t *testing.T, f []byte, pps float64, d, gap, from time.Duration) (out map[uint8]int, offered int) {
	t.Helper()
	out = map[uint8]int{}
	start := mb.clock.Load()
	for el := gap; el <= d; el += gap {
		n := int(pps*el.Seconds()) - offered
		offered += n
		mb.clock.Store(start + int64(el))
		for left := n; left > 0; {
			k := min(left, 32)
			for range k {
				if mb.p1.Inject(0, f) != 1 {
					t.Fatal("rx ring full")
				}
			}
			mb.dp.PMDs()[0].PollOnce()
			left -= k
		}
		mb.dp.PMDs()[0].PollOnce()
		mb.p2.Drain(0, func(fr []byte) {
			if el > from {
				out[fr[15]>>2]++
			}
		})
	}
	return out, offered
}

func TestConformanceMeterRates(t *testing.T) {
	type tc struct {
		kbps  bool
		rate  uint32
		burst uint32 // 0: no OFPMF_BURST
		size  int
		typ   uint16
	}
	var cases []tc
	for _, typ := range []uint16{uint16(ofpwire.MeterBandTypeDrop), uint16(ofpwire.MeterBandTypeDSCPRemark)} {
		cases = append(cases,
			tc{false, 100, 0, 64, typ}, tc{false, 10_000, 0, 64, typ}, tc{false, 10_000, 10, 64, typ},
			tc{true, 1000, 0, 1500, typ}, tc{true, 100_000, 0, 1500, typ}, tc{true, 100_000, 24, 1500, typ},
		)
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			mb := newMeterBridge(t)
			flags := ofpwire.MeterFlagPacketPerSec | ofpwire.MeterFlagStats
			pps := float64(c.rate)
			if c.kbps {
				flags = ofpwire.MeterFlagKBitPerSec | ofpwire.MeterFlagStats
				pps = float64(c.rate) * 1000 / 8 / float64(c.size)
			}
			if c.burst != 0 {
				flags |= ofpwire.MeterFlagBurst
			}
			mb.mustRequest(t, &ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: flags, MeterID: 7,
				Bands: []ofpwire.MeterBand{{Type: ofpwire.MeterBandType(c.typ), Rate: c.rate, BurstSize: c.burst, PrecLevel: 1}}})
			mb.mustRequest(t, meteredFlow(7))
			f := cfSizedFrame(t, c.size, 10) // AF11
			// Twice the rate for 4 s; the default bucket (1 s of the rate)
			// is empty after 2 s at the latest.
			out, offered := mb.offerClumps(t, f, 2*pps, 4*time.Second, time.Millisecond, 2*time.Second)
			inRate := out[10] // not remarked
			if math.Abs(float64(inRate)-2*pps) > 2*pps*0.02+1 {
				t.Errorf("%d packets within the rate in the last 2 s, want %.0f (the band's rate) ±2%%", inRate, 2*pps)
			}
			if c.typ == uint16(ofpwire.MeterBandTypeDrop) && len(out) != 1 {
				t.Errorf("DSCPs out %v: a drop band changed a packet", out)
			}
			if c.typ == uint16(ofpwire.MeterBandTypeDSCPRemark) && math.Abs(float64(out[12])-2*pps) > 2*pps*0.02+1 {
				t.Errorf("%d remarked AF11→AF12 in the last 2 s, want %.0f (offered − rate) ±2%%", out[12], 2*pps)
			}
			st := mb.meterStats(t, 7)
			if len(st) != 1 || st[0].PacketInCount != uint64(offered) || st[0].ByteInCount != uint64(offered*len(f)) ||
				st[0].FlowCount != 1 || len(st[0].BandStats) != 1 {
				t.Fatalf("meter stats %+v, want %d packets in", st, offered)
			}
			bs := st[0].BandStats[0]
			passedAll := offered - int(bs.PacketBandCount)
			if bs.ByteBandCount != bs.PacketBandCount*uint64(len(f)) ||
				math.Abs(float64(passedAll)-(4*pps+bucketOf(c.burst, c.kbps, c.rate, c.size))) > 4*pps*0.02+2 {
				t.Errorf("band applied to %d of %d packets: %d within the rate, want 4 s of the rate + the bucket", bs.PacketBandCount, offered, passedAll)
			}
		})
	}
}

// bucketOf is a band's bucket in packets of size bytes.
func bucketOf(burst uint32, kbps bool, rate uint32, size int) float64 {
	b := float64(rate) // no OFPMF_BURST: one second of the rate
	if burst != 0 {
		b = float64(burst)
	}
	if kbps {
		return b * 1000 / 8 / float64(size)
	}
	return b
}

// §5.7: "the meter band with the highest configured rate that is lower
// than the current measured rate applies". A remark band at 1000 pktps and
// a drop band at 2000: offered 4000 pktps, 1000 pass unchanged, 1000 are
// remarked, 2000 dropped. Band statistics come in the order the bands were
// given, and METER_CONFIG returns the bands as given.
func TestConformanceMeterTwoBands(t *testing.T) {
	mb := newMeterBridge(t)
	bands := []ofpwire.MeterBand{
		{Type: ofpwire.MeterBandTypeDrop, Rate: 2000, BurstSize: 20},
		{Type: ofpwire.MeterBandTypeDSCPRemark, Rate: 1000, BurstSize: 10, PrecLevel: 2},
	}
	mb.mustRequest(t, &ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: ofpwire.MeterFlagPacketPerSec | ofpwire.MeterFlagBurst | ofpwire.MeterFlagStats,
		MeterID: 3, Bands: bands})
	mb.mustRequest(t, meteredFlow(3))
	cfg := mb.c.multipart(&ofpwire.MeterConfigRequest{Meter: 3}).(*ofpwire.MeterConfigReply)
	if len(cfg.Meters) != 1 || len(cfg.Meters[0].Bands) != 2 || cfg.Meters[0].Bands[0].Rate != 2000 || cfg.Meters[0].Bands[1].PrecLevel != 2 {
		t.Fatalf("meter config %+v, want the bands as given", cfg.Meters)
	}
	f := cfSizedFrame(t, 100, 10) // AF11 → AF13
	out, offered := mb.offerClumps(t, f, 4000, 2*time.Second, time.Millisecond, time.Second)
	if math.Abs(float64(out[10])-1000) > 20 || math.Abs(float64(out[14])-1000) > 20 || len(out) != 2 {
		t.Fatalf("last second: DSCPs out %v, want ~1000 AF11 and ~1000 AF13", out)
	}
	st := mb.meterStats(t, 3)[0]
	drop, remark := st.BandStats[0].PacketBandCount, st.BandStats[1].PacketBandCount
	if st.PacketInCount != uint64(offered) || math.Abs(float64(drop)-4000) > 60 || math.Abs(float64(remark)-2000) > 60 {
		t.Fatalf("band counts drop %d remark %d of %d, want ~4000 and ~2000 (in the given order)", drop, remark, offered)
	}
}

// §7.3.4.4 METER_MOD errors, through the channel; a refused mod changes
// nothing.
func TestConformanceMeterModErrors(t *testing.T) {
	mb := newMeterBridge(t)
	pk := ofpwire.MeterFlagPacketPerSec
	drop := func(rate, burst uint32) []ofpwire.MeterBand {
		return []ofpwire.MeterBand{{Type: ofpwire.MeterBandTypeDrop, Rate: rate, BurstSize: burst}}
	}
	mb.mustRequest(t, &ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk, MeterID: 1, Bands: drop(10, 0)})
	for _, c := range []struct {
		name string
		mm   ofpwire.MeterMod
		code uint16
	}{
		{"exists", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk, MeterID: 1, Bands: drop(10, 0)}, ofpwire.MMFCMeterExists},
		{"modify unknown", ofpwire.MeterMod{Command: ofpwire.MeterModify, Flags: pk, MeterID: 2, Bands: drop(10, 0)}, ofpwire.MMFCUnknownMeter},
		{"id 0", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk, MeterID: 0, Bands: drop(10, 0)}, ofpwire.MMFCInvalidMeter},
		{"id controller", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk, MeterID: ofpwire.MeterController, Bands: drop(10, 0)}, ofpwire.MMFCInvalidMeter},
		{"kbps and pktps", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk | ofpwire.MeterFlagKBitPerSec, MeterID: 2, Bands: drop(10, 0)}, ofpwire.MMFCBadFlags},
		{"unknown flag", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk | 0x100, MeterID: 2, Bands: drop(10, 0)}, ofpwire.MMFCBadFlags},
		{"rate 0", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk, MeterID: 2, Bands: drop(0, 0)}, ofpwire.MMFCBadRate},
		{"burst 0", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk | ofpwire.MeterFlagBurst, MeterID: 2, Bands: drop(10, 0)}, ofpwire.MMFCBadBurst},
		{"same rate twice", ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: pk, MeterID: 2, Bands: append(drop(10, 0), drop(10, 0)...)}, ofpwire.MMFCBadBandValue},
		{"bad command", ofpwire.MeterMod{Command: 9, Flags: pk, MeterID: 2, Bands: drop(10, 0)}, ofpwire.MMFCBadCommand},
	} {
		mm := c.mm
		mb.c.wantError(&mm, ofpwire.ETMeterModFailed, c.code)
	}
	if cfg := mb.c.multipart(&ofpwire.MeterConfigRequest{Meter: ofpwire.MeterAll}).(*ofpwire.MeterConfigReply); len(cfg.Meters) != 1 {
		t.Fatalf("meters after refused mods %+v, want only meter 1", cfg.Meters)
	}
	// A flow naming a meter that does not exist (§6.6).
	mb.c.wantError(meteredFlow(5), ofpwire.ETMeterModFailed, ofpwire.MMFCUnknownMeter)
	// Deleting a meter that does not exist is no error.
	mb.mustRequest(t, &ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: 5})
}

// §7.3.5.12: flow_count follows the flows bound to the meter; duration
// grows; the counters stay across a MODIFY.
func TestConformanceMeterStatsLifecycle(t *testing.T) {
	mb := newMeterBridge(t)
	mb.mustRequest(t, pktpsMeter(ofpwire.MeterAdd, 1, 100, 10))
	if st := mb.meterStats(t, 1); len(st) != 1 || st[0].FlowCount != 0 || st[0].PacketInCount != 0 {
		t.Fatalf("new meter stats %+v", st)
	}
	mb.mustRequest(t, meteredFlow(1))
	fm := flowIn(1, 5, 2, &ofpwire.InstrMeter{MeterID: 1}, applyOut(1))
	mb.mustRequest(t, fm)
	if st := mb.meterStats(t, 1); st[0].FlowCount != 2 {
		t.Fatalf("flow_count %d, want 2", st[0].FlowCount)
	}
	mb.burst(t, frame(), 4)
	d1 := mb.meterStats(t, 1)[0]
	mb.mustRequest(t, pktpsMeter(ofpwire.MeterModify, 1, 200, 10))
	mb.mustRequest(t, &ofpwire.FlowMod{Command: ofpwire.FlowDeleteStrict, TableID: 1, Priority: 5, Match: fm.Match,
		BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	d2 := mb.meterStats(t, 1)[0]
	if d2.FlowCount != 1 || d2.PacketInCount != 4 {
		t.Fatalf("after MODIFY and a flow delete: %+v, want 1 flow, 4 packets in", d2)
	}
	if d1.DurationNSec >= 1e9 || time.Duration(d2.DurationSec)*time.Second+time.Duration(d2.DurationNSec) <
		time.Duration(d1.DurationSec)*time.Second+time.Duration(d1.DurationNSec) {
		t.Fatalf("durations %d.%09d then %d.%09d", d1.DurationSec, d1.DurationNSec, d2.DurationSec, d2.DurationNSec)
	}
}

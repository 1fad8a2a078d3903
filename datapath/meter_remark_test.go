package datapath

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"
)

// Band arithmetic through a PMD on a fake clock: twice a band's rate is
// offered for two seconds, in the clumps a PMD iteration receives (one
// clump per 0.5 ms, all metered at the iteration's time), and the second
// second, when the default one-second bucket has been spent, is counted
// frame by frame as it leaves the switch. With a fake clock this is
// arithmetic, not timing: what a real-clock run measures on top of it is
// the sender's shortfall and the first second's bucket.

const (
	af21, af22 = 18, 20 // the conformance tool's code points: AF21 → AF22
	stepNs     = 500_000
)

// arpFrame is an ARP reply of 60 bytes.
func arpFrame() []byte {
	f := make([]byte, 60)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2})
	copy(f[22:], []byte{0x02, 0, 0, 0, 0, 1, 198, 18, 0, 1, 0x02, 0, 0, 0, 0, 2, 198, 18, 0, 2})
	return f
}

// udp6Frame is an IPv6/UDP frame of size bytes with traffic class tc.
func udp6Frame(size int, tc uint8) []byte {
	f := make([]byte, size)
	copy(f, []byte{0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd})
	ip := f[14:]
	ip[0], ip[1] = 0x60|tc>>4, tc<<4
	binary.BigEndian.PutUint16(ip[4:], uint16(size-54))
	ip[6], ip[7] = 17, 64
	ip[8], ip[9], ip[23] = 0x20, 0x01, 1
	ip[24], ip[25], ip[39] = 0x20, 0x01, 2
	binary.BigEndian.PutUint16(ip[40:], 5000)
	binary.BigEndian.PutUint16(ip[42:], 6000)
	binary.BigEndian.PutUint16(ip[44:], uint16(size-54))
	return f
}

// dscpOf returns an output frame's DSCP, or -1 for a non-IP frame.
func dscpOf(f []byte) int {
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		return int(f[15] >> 2)
	case 0x86dd:
		return int(binary.BigEndian.Uint16(f[14:])>>6) & 0x3f
	}
	return -1
}

// tally counts the frames that left the switch by DSCP (-1: non-IP).
type tally map[int]int

// offerAt offers frame at pps for durNs of fake time from the rig's
// clock, one clump per stepNs, and tallies the frames that leave the
// switch for clumps metered at or after fromNs (relative).
func (r *meterRig) offerAt(t *testing.T, frame []byte, pps float64, durNs, fromNs int64) (sent int, out tally) {
	t.Helper()
	out = tally{}
	start := r.clock.now()
	for el := int64(0); el < durNs; el += stepNs {
		want := int(math.Floor(pps * float64(el+stepNs) / 1e9))
		k := want - sent
		if k > 32 {
			t.Fatalf("%d packets in one clump: the PMD batch holds 32", k)
		}
		for range k {
			if r.in.Inject(0, frame) != 1 {
				t.Fatal("rx ring full")
			}
		}
		if k > 0 {
			if got := r.dp.PMDs()[0].PollOnce(); got != k {
				t.Fatalf("PMD received %d of %d", got, k)
			}
		}
		sent = want
		in := el >= fromNs
		r.out.Drain(0, func(f []byte) {
			if in {
				out[dscpOf(f)]++
			}
		})
		r.clock.set(start + el + stepNs)
	}
	return sent, out
}

// near reports whether got is want within ±5 % (and one packet, for the
// rounding of a whole number of packets).
func near(got, want float64) bool { return math.Abs(got-want) <= 0.05*want+1 }

// TestMeterRemarkBandRates: a DSCP-remark band offered twice its rate
// passes every packet; in the steady second the band's rate leaves as it
// came (AF21) and the rest, the band's rate again, leaves remarked (AF22),
// for 100 to 20,000 pktps and 1 to 200 Mbit/s, IPv4 and IPv6, default
// bucket and an explicit burst size; a drop band in the same place passes
// the band's rate and drops the rest. The meter counts every packet and
// the band exactly those it remarked or dropped; no remark band ever
// counts a meter drop.
func TestMeterRemarkBandRates(t *testing.T) {
	type tc struct {
		kbps  bool
		rate  uint32
		size  int
		burst uint32 // 0: the default, one second of the rate
	}
	var cases []tc
	for _, r := range []uint32{100, 1000, 10_000, 20_000} {
		cases = append(cases, tc{false, r, 64, 0}, tc{false, r, 1000, r / 10})
	}
	for _, r := range []uint32{1000, 10_000, 100_000, 200_000} { // 1 to 200 Mbit/s
		cases = append(cases, tc{true, r, 1000, 0}, tc{true, r, 1500, r / 10})
	}
	for _, c := range cases {
		for _, typ := range []MeterBandType{MeterBandDSCPRemark, MeterBandDrop} {
			for _, v6 := range []bool{false, true} {
				if v6 && typ == MeterBandDrop {
					continue // the IPv6 path differs only in the remark
				}
				unit := "pktps"
				pps := float64(c.rate)
				if c.kbps {
					unit = "kbps"
					pps = float64(c.rate) * 1000 / 8 / float64(c.size)
				}
				name := fmt.Sprintf("%d%s/%dB/burst%d/type%d/v6=%v", c.rate, unit, c.size, c.burst, typ, v6)
				t.Run(name, func(t *testing.T) {
					r := newMeterRig(t, 1)
					cfg := MeterConfig{KBPS: c.kbps, Burst: c.burst != 0,
						Bands: []MeterBand{{Type: typ, Rate: c.rate, BurstSize: c.burst, PrecLevel: 1}}}
					if err := r.dp.SetMeter(1, cfg); err != nil {
						t.Fatal(err)
					}
					frame := sizedUDPFrame(c.size, af21<<2)
					if v6 {
						frame = udp6Frame(c.size, af21<<2)
					}
					sent, out := r.offerAt(t, frame, 2*pps, 2e9, 1e9)
					if typ == MeterBandDSCPRemark {
						if !near(float64(out[af22]), pps) || !near(float64(out[af21]), pps) {
							t.Errorf("steady second: %d remarked, %d as they came, want %.0f each ±5%%", out[af22], out[af21], pps)
						}
					} else if out[af22] != 0 || !near(float64(out[af21]), pps) {
						t.Errorf("steady second: %d passed (%d remarked), want %.0f ±5%%", out[af21], out[af22], pps)
					}
					st, _ := r.dp.MeterStats(1)
					drops := r.meterDrops()
					if st.Packets != uint64(sent) {
						t.Errorf("meter counted %d packets, %d offered", st.Packets, sent)
					}
					if typ == MeterBandDSCPRemark && drops != 0 {
						t.Errorf("a remark band dropped %d packets", drops)
					}
					if typ == MeterBandDrop && st.Bands[0].Packets != drops {
						t.Errorf("drop band counted %d, %d dropped", st.Bands[0].Packets, drops)
					}
					t.Logf("offered %d in 2 s; steady second: %d unchanged, %d remarked; band count %d, drops %d",
						sent, out[af21], out[af22], st.Bands[0].Packets, drops)
				})
			}
		}
	}
}

// TestMeterRemarkBandRemarkedCount: the remark band's counter is the
// number of packets that left remarked, over the whole run including the
// first second's bucket (sent − rate × 2 s − bucket).
func TestMeterRemarkBandRemarkedCount(t *testing.T) {
	r := newMeterRig(t, 1)
	const rate = 10_000
	if err := r.dp.SetMeter(1, MeterConfig{Bands: []MeterBand{{Type: MeterBandDSCPRemark, Rate: rate, PrecLevel: 1}}}); err != nil {
		t.Fatal(err)
	}
	sent, out := r.offerAt(t, sizedUDPFrame(100, af21<<2), 2*rate, 2e9, 0)
	st, _ := r.dp.MeterStats(1)
	if out[af21]+out[af22] != sent || uint64(out[af22]) != st.Bands[0].Packets {
		t.Fatalf("%d sent, %d left unchanged, %d remarked; band counted %d", sent, out[af21], out[af22], st.Bands[0].Packets)
	}
	if want := float64(sent - 2*rate - rate); !near(float64(out[af22]), want) {
		t.Fatalf("%d remarked over the run, want %.0f (sent − 2 s of rate − the 1 s bucket)", out[af22], want)
	}
}

// TestMeterRemarkBandMixed: a remark band at R and a drop band at 1.5 R,
// offered 2 R: in the steady second R leaves unchanged, 0.5 R remarked
// (over the remark band, under the drop band) and 0.5 R is dropped, in
// pktps and kbps.
func TestMeterRemarkBandMixed(t *testing.T) {
	for _, kbps := range []bool{false, true} {
		t.Run(fmt.Sprintf("kbps=%v", kbps), func(t *testing.T) {
			r := newMeterRig(t, 1)
			rate, pps := uint32(2000), 2000.0
			if kbps {
				rate, pps = 8000, 1000 // 8 Mbit/s of 1000-byte frames
			}
			// Buckets of 100 ms: the default (one second) of a band
			// at 1.5 R would last the whole first two seconds of 2 R.
			cfg := MeterConfig{KBPS: kbps, Burst: true, Bands: []MeterBand{
				{Type: MeterBandDrop, Rate: rate * 3 / 2, BurstSize: rate * 3 / 20},
				{Type: MeterBandDSCPRemark, Rate: rate, BurstSize: rate / 10, PrecLevel: 1},
			}}
			if err := r.dp.SetMeter(1, cfg); err != nil {
				t.Fatal(err)
			}
			_, out := r.offerAt(t, sizedUDPFrame(1000, af21<<2), 2*pps, 2e9, 1e9)
			if !near(float64(out[af21]), pps) || !near(float64(out[af22]), pps/2) {
				t.Fatalf("steady second: %d unchanged, %d remarked, want %.0f and %.0f ±5%%", out[af21], out[af22], pps, pps/2)
			}
		})
	}
}

// TestMeterRemarkBandNonIP: ARP through a remark band at twice its rate
// (and at its rate) all leaves the switch, unchanged, and no packet is
// counted as a meter drop; the band counts the packets over its rate,
// which it let through untouched.
func TestMeterRemarkBandNonIP(t *testing.T) {
	for _, factor := range []float64{1, 2} {
		t.Run(fmt.Sprintf("x%v", factor), func(t *testing.T) {
			r := newMeterRig(t, 1)
			const rate = 20_000
			if err := r.dp.SetMeter(1, MeterConfig{Bands: []MeterBand{{Type: MeterBandDSCPRemark, Rate: rate, PrecLevel: 1}}}); err != nil {
				t.Fatal(err)
			}
			sent, out := r.offerAt(t, arpFrame(), factor*rate, 2e9, 0)
			if out[-1] != sent || len(out) != 1 {
				t.Fatalf("%d ARP sent, out %v", sent, out)
			}
			if d := r.meterDrops(); d != 0 {
				t.Fatalf("%d ARP packets counted as meter drops", d)
			}
		})
	}
}

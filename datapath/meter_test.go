package datapath

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/netdev/ring"
)

// atomicClock is a fake clock several goroutines may read and advance.
type atomicClock struct{ ns atomic.Int64 }

func (c *atomicClock) now() int64      { return c.ns.Load() }
func (c *atomicClock) advance(d int64) { c.ns.Add(d) }
func (c *atomicClock) set(ns int64)    { c.ns.Store(ns) }
func ms(n int64) int64                 { return n * int64(time.Millisecond) }

// meterRule is "in_port=1, actions=meter(id),output:out".
func meterRule(id, out uint32) Rule {
	r := inPortRule(10, 1, out)
	r.Actions = append(actions.List{actions.MeterAction(id)}, r.Actions...)
	return r
}

// meterRig is a manual-mode datapath with port 1 (in, nrxq queues) and
// port 2 (out, one tx queue per PMD) and the rule in_port=1 →
// meter(1),output:2.
type meterRig struct {
	dp      *Datapath
	in, out *ring.Port
	clock   *atomicClock
	rules   *RuleTable
}

func newMeterRig(t *testing.T, npmd int) *meterRig {
	t.Helper()
	r := &meterRig{clock: &atomicClock{}, rules: &RuleTable{}}
	r.clock.set(ms(1000))
	dp, err := New(Config{Manual: true, NumPMDs: npmd, Clock: r.clock.now, Upcall: r.rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	r.dp = dp
	r.rules.Invalidate = dp.InvalidateFlows
	r.in, r.out = ring.New("in", npmd, 1, 4096), ring.New("out", 1, npmd, 1<<15)
	if _, err := dp.AddPort(1, r.in); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(2, r.out); err != nil {
		t.Fatal(err)
	}
	r.rules.Add(meterRule(1, 2))
	return r
}

// offer injects n copies of f on rx queue 0, runs PMD 0 until it has
// received them all and returns the frames that came out.
func (r *meterRig) offer(t *testing.T, f []byte, n int) [][]byte {
	t.Helper()
	for left := n; left > 0; {
		k := min(left, 32)
		for i := 0; i < k; i++ {
			if r.in.Inject(0, f) != 1 {
				t.Fatal("rx ring full")
			}
		}
		if got := r.dp.PMDs()[0].PollOnce(); got != k {
			t.Fatalf("PMD received %d of %d", got, k)
		}
		left -= k
	}
	var out [][]byte
	r.out.Drain(0, func(f []byte) { out = append(out, append([]byte(nil), f...)) })
	return out
}

func (r *meterRig) meterDrops() uint64 {
	var n uint64
	for _, s := range r.dp.PMDStats() {
		n += s.Drops[DropMeter]
	}
	return n
}

// sizedUDPFrame is udpFrame grown to size bytes, lengths and IPv4 checksum
// fixed.
func sizedUDPFrame(size int, tos uint8) []byte {
	f := make([]byte, size)
	copy(f, udpFrame(1, 2, 5, 9, 0))
	ip := f[14:]
	ip[1] = tos
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	binary.BigEndian.PutUint16(ip[24:], uint16(size-34)) // UDP length
	binary.BigEndian.PutUint16(ip[26:], 0)               // no UDP checksum
	binary.BigEndian.PutUint16(ip[10:], 0)
	binary.BigEndian.PutUint16(ip[10:], ^onesSum(ip[:20]))
	return f
}

func onesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func dropBand(rate, burst uint32) MeterBand {
	return MeterBand{Type: MeterBandDrop, Rate: rate, BurstSize: burst}
}

// TestMeterPktps: a 100 pkt/s meter with burst 10 passes exactly 10 + 100
// per second of (fake) time, however much is offered.
func TestMeterPktps(t *testing.T) {
	r := newMeterRig(t, 1)
	if err := r.dp.SetMeter(1, MeterConfig{Burst: true, Bands: []MeterBand{dropBand(100, 10)}}); err != nil {
		t.Fatal(err)
	}
	f := udpFrame(1, 2, 5, 9, 0)
	offered, passed := 0, 0
	step := func(advance int64, n, want int) {
		t.Helper()
		r.clock.advance(advance)
		got := len(r.offer(t, f, n))
		offered += n
		passed += got
		if got != want {
			t.Fatalf("after +%v: %d of %d passed, want %d", time.Duration(advance), got, n, want)
		}
	}
	step(0, 50, 10)       // the full bucket
	step(0, 5, 0)         // nothing left
	step(ms(100), 50, 10) // 100 ms at 100 pkt/s
	step(ms(25), 3, 2)    // 2.5 packets' worth: 2, half a token left
	step(ms(5), 1, 1)     // and the other half
	step(ms(9), 1, 0)     // 0.9 of a token
	step(ms(1), 1, 1)
	step(ms(10_000), 100, 10) // a long pause refills only the burst
	// 1000 steps of 1 ms offering one packet each: one in ten passes.
	for i := 0; i < 1000; i++ {
		want := 0
		if i%10 == 9 {
			want = 1
		}
		step(ms(1), 1, want)
	}
	if d := r.meterDrops(); d != uint64(offered-passed) {
		t.Fatalf("%d meter drops, want %d", d, offered-passed)
	}
	st, ok := r.dp.MeterStats(1)
	if !ok || st.Packets != uint64(offered) || st.Bytes != uint64(offered*len(f)) || len(st.Bands) != 1 ||
		st.Bands[0].Packets != uint64(offered-passed) || st.Bands[0].Bytes != uint64((offered-passed)*len(f)) {
		t.Fatalf("meter stats %+v, want %d in, %d over the band", st, offered, offered-passed)
	}
	checkNoLeaks(t, r.dp)
}

// TestMeterKbps: with 125-byte frames (1000 bits) a 1000 kbit/s meter with
// a 10 kbit burst passes 10 frames, then one per millisecond; with
// 250-byte frames half as many.
func TestMeterKbps(t *testing.T) {
	r := newMeterRig(t, 1)
	if err := r.dp.SetMeter(1, MeterConfig{KBPS: true, Burst: true, Bands: []MeterBand{dropBand(1000, 10)}}); err != nil {
		t.Fatal(err)
	}
	small, large := sizedUDPFrame(125, 0), sizedUDPFrame(250, 0)
	if n := len(r.offer(t, small, 40)); n != 10 {
		t.Fatalf("%d of the burst passed, want 10", n)
	}
	r.clock.advance(ms(7))
	if n := len(r.offer(t, small, 40)); n != 7 {
		t.Fatalf("%d passed after 7 ms, want 7", n)
	}
	r.clock.advance(ms(8))
	if n := len(r.offer(t, large, 40)); n != 4 {
		t.Fatalf("%d large frames passed after 8 ms, want 4", n)
	}
	r.clock.advance(ms(1)) // 1000 bits: not enough for a 2000-bit frame
	if n := len(r.offer(t, large, 1)); n != 0 {
		t.Fatalf("a 2000-bit frame passed on 1000 bits of tokens")
	}
	if n := len(r.offer(t, small, 1)); n != 1 {
		t.Fatalf("a 1000-bit frame did not pass on 1000 bits of tokens")
	}
}

// TestMeterDefaultBurst: without the burst flag a band's bucket holds one
// second at its rate.
func TestMeterDefaultBurst(t *testing.T) {
	r := newMeterRig(t, 1)
	if err := r.dp.SetMeter(1, MeterConfig{Bands: []MeterBand{dropBand(100, 3)}}); err != nil {
		t.Fatal(err)
	}
	f := udpFrame(1, 2, 5, 9, 0)
	if n := len(r.offer(t, f, 300)); n != 100 {
		t.Fatalf("%d passed from a full default bucket, want 100", n)
	}
}

// ipv4Of decodes the IPv4 header of an output frame and checks its
// checksum.
func ipv4Of(t *testing.T, f []byte) *layers.IPv4 {
	t.Helper()
	pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	ip, ok := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if !ok {
		t.Fatalf("no IPv4 in % x", f)
	}
	// Recompute the checksum with gopacket and compare.
	want := *ip
	buf := gopacket.NewSerializeBuffer()
	if err := want.SerializeTo(buf, gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
		t.Fatal(err)
	}
	if got := binary.BigEndian.Uint16(buf.Bytes()[10:]); got != ip.Checksum {
		t.Fatalf("IPv4 checksum %#04x, want %#04x", ip.Checksum, got)
	}
	return ip
}

// TestMeterDSCPRemark: below the remark band's rate packets pass as they
// are; beyond it AF11 becomes AF12 with a valid checksum; beyond the drop
// band's (higher) rate packets are dropped; a non-AF DSCP passes unchanged.
func TestMeterDSCPRemark(t *testing.T) {
	r := newMeterRig(t, 1)
	cfg := MeterConfig{Burst: true, Bands: []MeterBand{
		dropBand(20, 10),
		{Type: MeterBandDSCPRemark, Rate: 10, BurstSize: 5, PrecLevel: 1},
	}}
	if err := r.dp.SetMeter(1, cfg); err != nil {
		t.Fatal(err)
	}
	const af11, af12, ef = 10, 12, 46
	out := r.offer(t, sizedUDPFrame(100, af11<<2|1), 20) // ECN bits must survive
	if len(out) != 10 {
		t.Fatalf("%d passed, want 10 (5 as they are, 5 remarked)", len(out))
	}
	for i, f := range out {
		ip := ipv4Of(t, f)
		want := uint8(af11)
		if i >= 5 {
			want = af12
		}
		if ip.TOS>>2 != want || ip.TOS&3 != 1 {
			t.Fatalf("packet %d: TOS %#x, want DSCP %d ECN 1", i, ip.TOS, want)
		}
	}
	st, _ := r.dp.MeterStats(1)
	if st.Bands[0].Packets != 10 || st.Bands[1].Packets != 5 {
		t.Fatalf("band stats %+v, want 10 dropped and 5 remarked", st.Bands)
	}
	// Refill and send EF: the remark band applies but leaves it alone.
	r.clock.advance(ms(10_000))
	out = r.offer(t, sizedUDPFrame(100, ef<<2), 10)
	if len(out) != 10 {
		t.Fatalf("%d EF packets passed, want 10", len(out))
	}
	for _, f := range out {
		if ip := ipv4Of(t, f); ip.TOS>>2 != ef {
			t.Fatalf("EF remarked to %d", ip.TOS>>2)
		}
	}
}

func TestRaiseDropPrecedence(t *testing.T) {
	cases := []struct{ dscp, levels, want uint8 }{
		{10, 1, 12}, {10, 2, 14}, {10, 9, 14}, {12, 1, 14}, {14, 1, 14}, // AF1x
		{18, 1, 20}, {26, 2, 30}, {34, 1, 36}, {38, 1, 38}, // AF2x..AF4x
		{10, 0, 10},
		{0, 1, 0}, {8, 1, 8}, {46, 1, 46}, {48, 1, 48}, {44, 1, 44}, // DF, CS1, EF, CS6, VA
		{11, 1, 11}, {42, 1, 42}, // not AF: odd, class 5
	}
	for _, c := range cases {
		if got := raiseDropPrecedence(c.dscp, c.levels); got != c.want {
			t.Errorf("raiseDropPrecedence(%d, %d) = %d, want %d", c.dscp, c.levels, got, c.want)
		}
	}
}

// TestMeterMissingDrops: a meter action naming no meter drops, counted as
// a meter drop.
func TestMeterMissingDrops(t *testing.T) {
	r := newMeterRig(t, 1)
	if n := len(r.offer(t, udpFrame(1, 2, 5, 9, 0), 7)); n != 0 {
		t.Fatalf("%d packets passed a missing meter", n)
	}
	r.dp.PMDs()[0].PollOnce() // publish
	if d := r.meterDrops(); d != 7 {
		t.Fatalf("%d meter drops, want 7", d)
	}
	if _, ok := r.dp.MeterStats(1); ok {
		t.Fatal("stats of a missing meter")
	}
}

func TestMeterConfigErrors(t *testing.T) {
	dp, _ := New(Config{Manual: true})
	defer dp.Close()
	bad := []MeterConfig{
		{Bands: []MeterBand{dropBand(0, 0)}},
		{Burst: true, Bands: []MeterBand{dropBand(10, 0)}},
		{Bands: []MeterBand{{Type: 3, Rate: 10}}},
		{Bands: make([]MeterBand, MaxMeterBands+1)},
	}
	for i, c := range bad {
		if err := dp.SetMeter(1, c); err == nil {
			t.Errorf("config %d accepted", i)
		}
	}
	if _, ok := dp.Meter(1); ok {
		t.Fatal("a refused config installed a meter")
	}
	if err := dp.SetMeter(1, MeterConfig{}); err != nil {
		t.Fatalf("meter without bands: %v", err)
	}
}

// TestMeterIDs: ids below and above MaxMeters, added, replaced and
// deleted, are found exactly while they exist; the table is bounded.
func TestMeterIDs(t *testing.T) {
	dp, _ := New(Config{Manual: true})
	defer dp.Close()
	ids := []uint32{0, 1, 5, MaxMeters - 1, MaxMeters, 70000, 0xffff0000, 0x80000000}
	for i, id := range ids {
		if err := dp.SetMeter(id, MeterConfig{Bands: []MeterBand{dropBand(uint32(i+1), 0)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range ids {
		c, ok := dp.Meter(id)
		if !ok || c.Bands[0].Rate != uint32(i+1) {
			t.Fatalf("meter %d: %+v %v", id, c, ok)
		}
	}
	for _, id := range []uint32{2, MaxMeters + 1, 69999, 0xffffffff} {
		if _, ok := dp.Meter(id); ok {
			t.Fatalf("meter %d found", id)
		}
	}
	dp.DeleteMeter(70000)
	dp.DeleteMeter(5)
	dp.DeleteMeter(12345) // absent: no-op
	for _, id := range ids {
		_, ok := dp.Meter(id)
		if want := id != 70000 && id != 5; ok != want {
			t.Fatalf("meter %d present %v after deletes", id, ok)
		}
	}
	if dp.meters.n != len(ids)-2 {
		t.Fatalf("table counts %d meters, want %d", dp.meters.n, len(ids)-2)
	}
	dp.meters.n = MaxMeters // pretend full
	if err := dp.SetMeter(9, MeterConfig{}); err != ErrTooManyMeters {
		t.Fatalf("adding to a full table: %v", err)
	}
	if err := dp.SetMeter(1, MeterConfig{}); err != nil {
		t.Fatalf("replacing in a full table: %v", err)
	}
}

// TestMeterStatePadding: the bucket words PMDs write sit on cache lines of
// their own, and each PMD's counters too.
func TestMeterStatePadding(t *testing.T) {
	var s meterState
	start := unsafe.Offsetof(s.empty)
	end := start + unsafe.Sizeof(s.empty)
	if start < unsafe.Offsetof(s.cfg)+unsafe.Sizeof(s.cfg)+CacheLine {
		t.Errorf("bucket words share a line with the configuration")
	}
	if unsafe.Sizeof(s)-end < CacheLine {
		t.Errorf("bucket words may share a line with the next object")
	}
	sl := newSharedSlab[meterCounters](3, false)
	for i := 0; i < 3; i++ {
		if a := uintptr(unsafe.Pointer(sl.at(i))); a%CacheLine != 0 {
			t.Errorf("counter block %d is %d bytes off a line", i, a%CacheLine)
		}
	}
}

// TestMeterSharedByPMDs: two PMDs, each driven by its own goroutine, send
// through one meter while the first goroutine advances the clock; together
// they never pass more than burst + rate × elapsed. Run under -race.
func TestMeterSharedByPMDs(t *testing.T) {
	r := newMeterRig(t, 2)
	const rate, burst = 1000, 20
	const iterations, stepNs = 1000, 200_000 // 200 ms in all
	if err := r.dp.SetMeter(1, MeterConfig{Burst: true, Bands: []MeterBand{dropBand(rate, burst)}}); err != nil {
		t.Fatal(err)
	}
	start := r.clock.now()
	var wg sync.WaitGroup
	f := udpFrame(1, 2, 5, 9, 0)
	var received [2]int
	for i, pmd := range r.dp.PMDs() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([][]byte, 32)
			for j := range batch {
				batch[j] = f
			}
			for it := 0; it < iterations; it++ {
				r.in.Inject(i, batch...)
				received[i] += pmd.PollOnce()
				r.out.Discard(i) // keep the tx ring from filling; tx stats count
				if i == 0 {
					r.clock.advance(stepNs)
				}
			}
		}()
	}
	wg.Wait()
	for _, pmd := range r.dp.PMDs() {
		pmd.PollOnce() // publish
	}
	elapsed := r.clock.now() - start
	allowed := uint64(burst + rate*elapsed/int64(time.Second))
	var passed uint64
	for _, s := range r.dp.Port(2).TxStats() {
		passed += s.Packets + s.Drops
	}
	st, _ := r.dp.MeterStats(1)
	if st.Packets != uint64(received[0]+received[1]) || st.Packets != 2*iterations*32 {
		t.Fatalf("meter saw %d packets, PMDs received %d", st.Packets, received[0]+received[1])
	}
	if passed > allowed {
		t.Fatalf("%d packets passed, the meter allows %d", passed, allowed)
	}
	if passed < burst || passed+st.Bands[0].Packets != st.Packets {
		t.Fatalf("%d passed and %d dropped of %d", passed, st.Bands[0].Packets, st.Packets)
	}
	t.Logf("%d of %d offered passed, %d allowed", passed, st.Packets, allowed)
}

// TestMeterChangesWhileRunning: with PMD goroutines polling, modifying a
// meter takes effect (fresh buckets, counters kept) and deleting it makes
// its packets drop, without restarting anything.
func TestMeterChangesWhileRunning(t *testing.T) {
	clock := &atomicClock{}
	clock.set(ms(1000))
	rules := &RuleTable{}
	dp, err := New(Config{NumPMDs: 2, PMDSleepMax: 0, Clock: clock.now, Upcall: rules})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 1024), ring.New("out", 1, 2, 1024)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	rules.Add(meterRule(1, 2))
	if err := dp.SetMeter(1, MeterConfig{Burst: true, Bands: []MeterBand{dropBand(1, 3)}}); err != nil {
		t.Fatal(err)
	}
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	f := udpFrame(1, 2, 5, 9, 0)
	var sent, dropped uint64
	// round offers n packets and waits until each is either out or
	// counted as a meter drop.
	round := func(n int, wantOut uint64) {
		t.Helper()
		for i := 0; i < n; i++ {
			for in.Inject(0, f) == 0 {
				time.Sleep(10 * time.Microsecond)
			}
		}
		deadline := time.Now().Add(5 * time.Second)
		var got uint64
		for {
			for q := 0; q < 2; q++ {
				got += uint64(out.Discard(q))
			}
			var d uint64
			for _, s := range dp.PMDStats() {
				d += s.Drops[DropMeter]
			}
			if got+d-dropped == uint64(n) {
				dropped = d
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d out and %d dropped of %d", got, d-dropped, n)
			}
			time.Sleep(100 * time.Microsecond)
		}
		sent += got
		if got != wantOut {
			t.Fatalf("%d of %d passed, want %d", got, n, wantOut)
		}
	}
	round(10, 3)
	// A modify brings full buckets of the new size.
	if err := dp.SetMeter(1, MeterConfig{Burst: true, Bands: []MeterBand{dropBand(1, 8)}}); err != nil {
		t.Fatal(err)
	}
	round(10, 8)
	st, ok := dp.MeterStats(1)
	if !ok || st.Packets != 20 || st.Bands[0].Packets != 9 {
		t.Fatalf("stats after modify %+v, want 20 in, 9 dropped", st)
	}
	dp.DeleteMeter(1)
	round(10, 0)
	if _, ok := dp.MeterStats(1); ok {
		t.Fatal("stats of a deleted meter")
	}
	// Added again: a new meter with new counters.
	if err := dp.SetMeter(1, MeterConfig{Bands: []MeterBand{dropBand(100, 0)}}); err != nil {
		t.Fatal(err)
	}
	round(10, 10)
	if st, _ := dp.MeterStats(1); st.Packets != 10 {
		t.Fatalf("re-added meter counts %d packets, want 10", st.Packets)
	}
	dp.Stop()
	checkNoLeaks(t, dp)
}

// benchMeter forwards one flow of 64-byte frames in batches of 32 through
// a manual PMD, with or without a meter action whose rate is never
// reached. One op is one packet.
func benchMeter(b *testing.B, metered bool) {
	rules := &RuleTable{}
	dp, err := New(Config{Manual: true, Upcall: rules})
	if err != nil {
		b.Fatal(err)
	}
	defer dp.Close()
	rules.Invalidate = dp.InvalidateFlows
	in, out := ring.New("in", 1, 1, 256), ring.New("out", 1, 1, 256)
	dp.AddPort(1, in)
	dp.AddPort(2, out)
	if metered {
		rules.Add(meterRule(1, 2))
		// Far more than any PMD forwards, with a full second of burst.
		if err := dp.SetMeter(1, MeterConfig{Bands: []MeterBand{dropBand(1<<31, 0)}}); err != nil {
			b.Fatal(err)
		}
	} else {
		rules.Add(inPortRule(10, 1, 2))
	}
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = udpFrame(1, 2, 5, 9, uint32(i))
	}
	pmd := dp.PMDs()[0]
	run := func(n int) {
		for done := 0; done < n; {
			in.Inject(0, batch...)
			done += pmd.PollOnce()
			out.Discard(0)
		}
	}
	run(10_000)
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
	b.StopTimer()
	pmd.PollOnce()
	var drops uint64
	for _, d := range dp.PMDStats()[0].Drops {
		drops += d
	}
	if drops != 0 {
		b.Fatalf("%d drops", drops)
	}
	reportRate(b)
}

// BenchmarkMeter: forwarding cost with a meter action that never triggers
// next to the same forwarding without it.
func BenchmarkMeter(b *testing.B) {
	b.Run("meter=off", func(b *testing.B) { benchMeter(b, false) })
	b.Run("meter=on", func(b *testing.B) { benchMeter(b, true) })
}

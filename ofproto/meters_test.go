package ofproto

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// meterBridge is a secure test bridge over a manual datapath whose clock
// the test sets, with ring ports 1 and 2.
type meterBridge struct {
	*testBridge
	clock *atomic.Int64
}

func newMeterBridge(t *testing.T) *meterBridge {
	t.Helper()
	clock := &atomic.Int64{}
	clock.Store(int64(time.Hour))
	up := &UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up, EMCInsertInvProb: 1, Clock: clock.Load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	tb := &testBridge{dp: dp, p1: ring.New("r1", 1, 1, 256), p2: ring.New("r2", 1, 1, 256)}
	if _, err := dp.AddPort(1, tb.p1); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(2, tb.p2); err != nil {
		t.Fatal(err)
	}
	tb.sock = filepath.Join(t.TempDir(), "br.mgmt")
	tb.br, err = NewBridge("br0", dp, BridgeConfig{DatapathID: 0x1234, ManagementTargets: []string{"punix:" + tb.sock},
		Upcall: up, Conn: ofconn.Config{ProbeInterval: -1}, FailMode: FailSecure})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.br.Close)
	tb.c = dial(t, "unix", tb.sock)
	return &meterBridge{testBridge: tb, clock: clock}
}

// burst injects n copies of f on port 1 at the current (fake) time and
// returns how many left on port 2.
func (mb *meterBridge) burst(t *testing.T, f []byte, n int) int {
	t.Helper()
	for left := n; left > 0; {
		k := min(left, 32)
		for i := 0; i < k; i++ {
			if mb.p1.Inject(0, f) != 1 {
				t.Fatal("rx ring full")
			}
		}
		if got := mb.dp.PMDs()[0].PollOnce(); got != k {
			t.Fatalf("PMD received %d of %d", got, k)
		}
		left -= k
	}
	mb.dp.PMDs()[0].PollOnce() // idle: flush and publish
	return mb.p2.Drain(0, func([]byte) {})
}

func (mb *meterBridge) meterDrops() uint64 {
	var n uint64
	for _, s := range mb.dp.PMDStats() {
		n += s.Drops[datapath.DropMeter]
	}
	return n
}

func pktpsMeter(cmd ofpwire.MeterCommand, id ofpwire.Meter, rate, burst uint32) *ofpwire.MeterMod {
	return &ofpwire.MeterMod{Command: cmd, Flags: ofpwire.MeterFlagPacketPerSec | ofpwire.MeterFlagBurst | ofpwire.MeterFlagStats,
		MeterID: id, Bands: []ofpwire.MeterBand{{Type: ofpwire.MeterBandTypeDrop, Rate: rate, BurstSize: burst}}}
}

// meteredFlow is outputFlow(1, output:2) with a meter instruction placed
// after the apply-actions, as a controller may send it.
func meteredFlow(id ofpwire.Meter) *ofpwire.FlowMod {
	fm := outputFlow(1, &ofpwire.ActionOutput{Port: 2})
	fm.Instructions = append(fm.Instructions, &ofpwire.InstrMeter{MeterID: id})
	return fm
}

func (mb *meterBridge) meterStats(t *testing.T, id ofpwire.Meter) []ofpwire.MeterStats {
	t.Helper()
	return mb.c.multipart(&ofpwire.MeterStatsRequest{Meter: id}).(*ofpwire.MeterStatsReply).Meters
}

// TestMeterThroughOpenFlow: a meter added by METER_MOD and named by a flow
// limits the flow's traffic in the datapath; its statistics report the
// datapath's counts and the flow; MODIFY takes effect at once; DELETE
// removes the flow.
func TestMeterThroughOpenFlow(t *testing.T) {
	mb := newMeterBridge(t)
	mb.c.wantError(meteredFlow(1), ofpwire.ETMeterModFailed, ofpwire.MMFCUnknownMeter)
	if r := mb.c.request(pktpsMeter(ofpwire.MeterAdd, 1, 10, 5)); len(r) != 0 {
		t.Fatalf("meter-mod replies %#v", r)
	}
	if r := mb.c.request(meteredFlow(1)); len(r) != 0 {
		t.Fatalf("flow-mod replies %#v", r)
	}
	f := frame()
	if n := mb.burst(t, f, 20); n != 5 {
		t.Fatalf("%d of 20 passed a 10 pkt/s meter with burst 5, want 5", n)
	}
	mb.clock.Add(int64(300 * time.Millisecond))
	if n := mb.burst(t, f, 20); n != 3 {
		t.Fatalf("%d passed 300 ms later, want 3", n)
	}
	if d := mb.meterDrops(); d != 32 {
		t.Fatalf("%d meter drops, want 32", d)
	}
	st := mb.meterStats(t, ofpwire.MeterAll)
	if len(st) != 1 || st[0].MeterID != 1 || st[0].FlowCount != 1 || st[0].PacketInCount != 40 ||
		st[0].ByteInCount != 40*uint64(len(f)) || len(st[0].BandStats) != 1 || st[0].BandStats[0].PacketBandCount != 32 ||
		st[0].BandStats[0].ByteBandCount != 32*uint64(len(f)) {
		t.Fatalf("meter stats %+v", st)
	}
	// The flow was stored with its meter first.
	flows := mb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny,
		OutGroup: ofpwire.GroupAny}).(*ofpwire.FlowStatsReply).Flows
	if len(flows) != 1 || len(flows[0].Instructions) != 2 {
		t.Fatalf("flows %+v", flows)
	}
	if _, ok := flows[0].Instructions[0].(*ofpwire.InstrMeter); !ok {
		t.Fatalf("first instruction %T, want the meter", flows[0].Instructions[0])
	}

	// MODIFY: a larger burst, fresh buckets, counters kept.
	if r := mb.c.request(pktpsMeter(ofpwire.MeterModify, 1, 10, 12)); len(r) != 0 {
		t.Fatalf("meter modify replies %#v", r)
	}
	if n := mb.burst(t, f, 20); n != 12 {
		t.Fatalf("%d passed after MODIFY to burst 12, want 12", n)
	}
	if st := mb.meterStats(t, 1); len(st) != 1 || st[0].PacketInCount != 60 {
		t.Fatalf("stats after modify %+v", st)
	}

	// DELETE takes the flow with it; packets then miss the table.
	if r := mb.c.request(&ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: 1}); len(r) != 0 {
		t.Fatalf("meter delete replies %#v", r)
	}
	flows = mb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny,
		OutGroup: ofpwire.GroupAny}).(*ofpwire.FlowStatsReply).Flows
	if len(flows) != 0 {
		t.Fatalf("%d flows left after deleting their meter", len(flows))
	}
	if st := mb.meterStats(t, ofpwire.MeterAll); len(st) != 0 {
		t.Fatalf("stats after delete %+v", st)
	}
	if _, ok := mb.dp.MeterStats(1); ok {
		t.Fatal("the datapath still has the meter")
	}
	drops := mb.meterDrops()
	if n := mb.burst(t, f, 5); n != 0 {
		t.Fatalf("%d passed after the meter and its flow went", n)
	}
	if mb.meterDrops() != drops {
		t.Fatal("packets after the delete were still metered: the megaflow was not invalidated")
	}
}

// TestMeterDeleteAllAndOtherFlows: OFPM_ALL deletes every meter and only
// the flows that use one.
func TestMeterDeleteAllAndOtherFlows(t *testing.T) {
	mb := newMeterBridge(t)
	for _, id := range []ofpwire.Meter{1, 70000} {
		if r := mb.c.request(pktpsMeter(ofpwire.MeterAdd, id, 100, 10)); len(r) != 0 {
			t.Fatalf("meter-mod replies %#v", r)
		}
	}
	plain := outputFlow(2, &ofpwire.ActionOutput{Port: 1})
	m1, m2 := meteredFlow(1), meteredFlow(70000)
	m2.Priority = 50
	for _, fm := range []*ofpwire.FlowMod{plain, m1, m2} {
		if r := mb.c.request(fm); len(r) != 0 {
			t.Fatalf("flow-mod replies %#v", r)
		}
	}
	if st := mb.meterStats(t, ofpwire.MeterAll); len(st) != 2 || st[0].FlowCount != 1 || st[1].MeterID != 70000 || st[1].FlowCount != 1 {
		t.Fatalf("meter stats %+v", st)
	}
	if r := mb.c.request(&ofpwire.MeterMod{Command: ofpwire.MeterDelete, MeterID: ofpwire.MeterAll}); len(r) != 0 {
		t.Fatalf("meter delete replies %#v", r)
	}
	flows := mb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny,
		OutGroup: ofpwire.GroupAny}).(*ofpwire.FlowStatsReply).Flows
	if len(flows) != 1 || flows[0].Priority != plain.Priority || len(flows[0].Instructions) != 1 {
		t.Fatalf("flows left %+v, want the unmetered one", flows)
	}
	for _, id := range []uint32{1, 70000} {
		if _, ok := mb.dp.MeterStats(id); ok {
			t.Fatalf("datapath meter %d survived", id)
		}
	}
}

func TestMeterFeaturesSayWhatIsEnforced(t *testing.T) {
	mb := newMeterBridge(t)
	f := mb.c.multipart(&ofpwire.MeterFeaturesRequest{}).(*ofpwire.MeterFeaturesReply)
	wantCaps := uint32(ofpwire.MeterFlagKBitPerSec | ofpwire.MeterFlagPacketPerSec | ofpwire.MeterFlagBurst | ofpwire.MeterFlagStats)
	if f.MaxMeter != datapath.MaxMeters || f.MaxBands != datapath.MaxMeterBands || f.Capabilities != wantCaps ||
		f.BandTypes != 1<<uint(ofpwire.MeterBandTypeDrop)|1<<uint(ofpwire.MeterBandTypeDSCPRemark) {
		t.Fatalf("meter features %+v", f)
	}
	// One band more than the datapath takes is refused by the table.
	mm := pktpsMeter(ofpwire.MeterAdd, 1, 1, 1)
	for i := 2; i <= datapath.MaxMeterBands+1; i++ {
		mm.Bands = append(mm.Bands, ofpwire.MeterBand{Type: ofpwire.MeterBandTypeDrop, Rate: uint32(i), BurstSize: 1})
	}
	mb.c.wantError(mm, ofpwire.ETMeterModFailed, ofpwire.MMFCOutOfBands)
}

// TestMeterOvsOfctl: ovs-ofctl's add-meter, add-flow with meter:,
// dump-meters and meter-stats against the bridge's management socket.
func TestMeterOvsOfctl(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	ovsOfctl(t, "add-meter", target, "meter=1,pktps,burst,stats,band=type=drop,rate=10,burst_size=5")
	ovsOfctl(t, "add-flow", target, "in_port=1,actions=meter:1,output:2")
	dump := ovsOfctl(t, "dump-meters", target)
	if !strings.Contains(dump, "meter=1") || !strings.Contains(dump, "type=drop rate=10 burst_size=5") {
		t.Fatalf("dump-meters:\n%s", dump)
	}
	flows := ovsOfctl(t, "dump-flows", target)
	if !strings.Contains(flows, "meter:1") {
		t.Fatalf("dump-flows:\n%s", flows)
	}
	if n := mb.burst(t, frame(), 12); n != 5 {
		t.Fatalf("%d of 12 passed, want 5", n)
	}
	stats := ovsOfctl(t, "meter-stats", target)
	for _, want := range []string{"meter:1", "flow_count:1", "packet_in_count:12", "0: packet_count:7"} {
		if !strings.Contains(stats, want) {
			t.Fatalf("meter-stats lacks %q:\n%s", want, stats)
		}
	}
	ovsOfctl(t, "del-meter", target, "meter=1")
	if flows := ovsOfctl(t, "dump-flows", target); strings.Contains(flows, "actions=") {
		t.Fatalf("flows after del-meter:\n%s", flows)
	}
}

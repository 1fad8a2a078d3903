package normal

import (
	"reflect"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath/flow"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mac(last byte) [6]byte { return [6]byte{0x02, 0, 0, 0, 0, last} }

var bcast = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// key builds a flow key; vid < 0 means untagged.
func key(in uint32, src, dst [6]byte, vid int) *flow.Key {
	k := &flow.Key{InPort: in, EthSrc: src, EthDst: dst, EthType: 0x0800}
	if vid >= 0 {
		k.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: 0x2000 | uint16(vid)}
	}
	return k
}

func accessPorts(n int) []PortConfig {
	var c []PortConfig
	for i := 1; i <= n; i++ {
		c = append(c, PortConfig{No: uint32(i), Mode: Access})
	}
	return c
}

func ports(d Decision) []uint32 {
	var p []uint32
	for _, o := range d.Outputs {
		p = append(p, o.Port)
	}
	return p
}

func TestLearnAndForward(t *testing.T) {
	s := New(Options{})
	s.SetPorts(accessPorts(3))
	a, b := mac(1), mac(2)

	d := s.Decide(key(1, a, b, -1), t0)
	if !d.Flooded || !reflect.DeepEqual(ports(d), []uint32{2, 3}) || !d.LearningChanged {
		t.Fatalf("unknown dst: %+v", d)
	}
	if d.Deps != DepInPort|DepEthSrc|DepEthDst|DepVLAN {
		t.Fatalf("deps %b", d.Deps)
	}
	d = s.Decide(key(2, b, a, -1), t0)
	if d.Flooded || !reflect.DeepEqual(ports(d), []uint32{1}) || d.Outputs[0].VLAN != VLANNone {
		t.Fatalf("known dst: %+v", d)
	}
	d = s.Decide(key(1, a, b, -1), t0)
	if !reflect.DeepEqual(ports(d), []uint32{2}) || d.LearningChanged {
		t.Fatalf("known dst back: %+v", d)
	}
	// Destination on the in-port itself: drop, not hairpin.
	d = s.Decide(key(1, mac(9), a, -1), t0)
	if len(d.Outputs) != 0 || d.Drop != DropDestIsInPort {
		t.Fatalf("hairpin: %+v", d)
	}
	// Broadcast floods even with everything learned.
	d = s.Decide(key(2, b, bcast, -1), t0)
	if !d.Flooded || !reflect.DeepEqual(ports(d), []uint32{1, 3}) {
		t.Fatalf("broadcast: %+v", d)
	}
	// A multicast source is not learned.
	before := s.Stats().Learned
	s.Decide(key(3, [6]byte{0x01, 0, 0x5e, 0, 0, 1}, bcast, -1), t0)
	if s.Stats().Learned != before {
		t.Fatal("multicast source learned")
	}
	if st := s.Stats(); st.Learned != 3 || st.Entries != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestAgeing(t *testing.T) {
	s := New(Options{MaxAge: 10 * time.Second})
	s.SetPorts(accessPorts(3))
	a, b := mac(1), mac(2)
	s.Decide(key(1, a, b, -1), t0)
	if d := s.Decide(key(2, b, a, -1), t0.Add(10*time.Second)); d.Flooded {
		t.Fatal("entry aged too early")
	}
	// a refreshed at t0+0 only; b learned at t0+10.
	g := s.Generation()
	d := s.Decide(key(3, mac(3), a, -1), t0.Add(11*time.Second))
	if !d.Flooded {
		t.Fatalf("aged entry still used: %+v", d)
	}
	if s.Stats().Aged != 1 || s.Generation() == g {
		t.Fatalf("ageing not counted: %+v gen %d->%d", s.Stats(), g, s.Generation())
	}
	// Refreshing keeps an entry alive.
	s.Decide(key(2, b, bcast, -1), t0.Add(19*time.Second))
	if n := s.Expire(t0.Add(25 * time.Second)); n != 1 { // mac(3) from t0+11
		t.Fatalf("expired %d", n)
	}
	ents := s.Entries(t0.Add(25 * time.Second))
	if len(ents) != 1 || ents[0].MAC != b || ents[0].Age != 6*time.Second || ents[0].Port != 2 {
		t.Fatalf("entries %+v", ents)
	}
}

func TestLRUEviction(t *testing.T) {
	s := New(Options{MaxEntries: 3})
	s.SetPorts(accessPorts(2))
	for i := byte(1); i <= 3; i++ {
		s.Decide(key(1, mac(i), bcast, -1), t0.Add(time.Duration(i)*time.Second))
	}
	// Refresh mac(1): mac(2) becomes the least recently learned.
	s.Decide(key(1, mac(1), bcast, -1), t0.Add(4*time.Second))
	s.Decide(key(1, mac(4), bcast, -1), t0.Add(5*time.Second))
	st := s.Stats()
	if st.Evicted != 1 || st.Entries != 3 {
		t.Fatalf("stats %+v", st)
	}
	got := map[[6]byte]bool{}
	for _, e := range s.Entries(t0.Add(5 * time.Second)) {
		got[e.MAC] = true
	}
	if got[mac(2)] || !got[mac(1)] || !got[mac(3)] || !got[mac(4)] {
		t.Fatalf("wrong victim: %v", got)
	}
}

func TestMoveBumpsGeneration(t *testing.T) {
	s := New(Options{})
	s.SetPorts(accessPorts(3))
	a := mac(1)
	s.Decide(key(1, a, bcast, -1), t0)
	g := s.Generation()
	d := s.Decide(key(1, a, bcast, -1), t0.Add(time.Second))
	if d.LearningChanged || s.Generation() != g || d.Generation != g {
		t.Fatal("refresh changed generation")
	}
	d = s.Decide(key(2, a, bcast, -1), t0.Add(2*time.Second))
	if !d.LearningChanged || s.Generation() == g || d.Generation != s.Generation() {
		t.Fatalf("move: %+v gen %d", d, s.Generation())
	}
	if s.Stats().Moved != 1 {
		t.Fatalf("stats %+v", s.Stats())
	}
	if d := s.Decide(key(3, mac(2), a, -1), t0.Add(2*time.Second)); !reflect.DeepEqual(ports(d), []uint32{2}) {
		t.Fatalf("not following move: %+v", d)
	}
}

func TestFlapGuard(t *testing.T) {
	s := New(Options{MoveLimit: 2, LockTime: 10 * time.Second})
	s.SetPorts(accessPorts(3))
	a := mac(1)
	now := t0
	s.Decide(key(1, a, bcast, -1), now)
	for i, in := range []uint32{2, 1} { // two moves: allowed
		now = now.Add(100 * time.Millisecond)
		if d := s.Decide(key(in, a, bcast, -1), now); !d.LearningChanged {
			t.Fatalf("move %d refused", i)
		}
	}
	now = now.Add(100 * time.Millisecond)
	if d := s.Decide(key(2, a, bcast, -1), now); d.LearningChanged {
		t.Fatal("third move within a second accepted")
	}
	// Locked: still at port 1 for LockTime.
	now = now.Add(5 * time.Second)
	s.Decide(key(2, a, bcast, -1), now)
	if d := s.Decide(key(3, mac(2), a, -1), now); !reflect.DeepEqual(ports(d), []uint32{1}) {
		t.Fatalf("locked MAC moved: %+v", d)
	}
	now = now.Add(6 * time.Second)
	if d := s.Decide(key(2, a, bcast, -1), now); !d.LearningChanged {
		t.Fatal("move refused after lock expired")
	}
	if s.Stats().MoveBlocked != 2 {
		t.Fatalf("stats %+v", s.Stats())
	}
}

func TestNoFlood(t *testing.T) {
	s := New(Options{})
	c := accessPorts(3)
	c[2].NoFlood = true
	s.SetPorts(c)
	d := s.Decide(key(1, mac(1), bcast, -1), t0)
	if !reflect.DeepEqual(ports(d), []uint32{2}) {
		t.Fatalf("flood reached NoFlood port: %+v", d)
	}
	// Known unicast still reaches a NoFlood port.
	s.Decide(key(3, mac(3), bcast, -1), t0)
	if d := s.Decide(key(1, mac(1), mac(3), -1), t0); !reflect.DeepEqual(ports(d), []uint32{3}) {
		t.Fatalf("unicast to NoFlood port: %+v", d)
	}
	// Nothing else to flood to.
	s.SetPorts([]PortConfig{{No: 1}, {No: 2, NoFlood: true}})
	if d := s.Decide(key(1, mac(1), bcast, -1), t0); d.Drop != DropNoFloodPorts || len(d.Outputs) != 0 {
		t.Fatalf("%+v", d)
	}
}

func TestFlush(t *testing.T) {
	s := New(Options{})
	s.SetPorts([]PortConfig{{No: 1, Mode: Trunk}, {No: 2, Mode: Trunk}})
	s.Decide(key(1, mac(1), bcast, 10), t0)
	s.Decide(key(1, mac(2), bcast, 20), t0)
	s.Decide(key(2, mac(3), bcast, 10), t0)
	s.Decide(key(2, mac(4), bcast, 20), t0)
	g := s.Generation()
	if n := s.FlushVLAN(10); n != 2 || s.Generation() == g {
		t.Fatalf("FlushVLAN %d", n)
	}
	for _, e := range s.Entries(t0) {
		if e.VLAN == 10 {
			t.Fatalf("left %+v", e)
		}
	}
	if n := s.FlushPort(2); n != 1 {
		t.Fatalf("FlushPort %d", n)
	}
	if e := s.Entries(t0); len(e) != 1 || e[0].MAC != mac(2) || e[0].VLAN != 20 || e[0].Port != 1 {
		t.Fatalf("entries %+v", e)
	}
	g = s.Generation()
	if n := s.FlushPort(7); n != 0 || s.Generation() != g {
		t.Fatal("empty flush bumped generation")
	}
	s.Decide(key(2, mac(4), bcast, 20), t0)
	if n := s.Flush(); n != 2 || len(s.Entries(t0)) != 0 || s.Stats().Entries != 0 {
		t.Fatalf("Flush %d", n)
	}
}

func TestSetPortsForgetsStaleEntries(t *testing.T) {
	s := New(Options{})
	s.SetPorts([]PortConfig{{No: 1, Mode: Trunk}, {No: 2, Mode: Trunk}, {No: 3, Mode: Access, Tag: 10}})
	s.Decide(key(1, mac(1), bcast, 10), t0)
	s.Decide(key(1, mac(2), bcast, 20), t0)
	s.Decide(key(3, mac(3), bcast, -1), t0)
	// Port 1 no longer carries VLAN 20, port 3 is gone.
	s.SetPorts([]PortConfig{{No: 1, Mode: Trunk, Trunks: []uint16{10}}, {No: 2, Mode: Trunk}})
	e := s.Entries(t0)
	if len(e) != 1 || e[0].MAC != mac(1) {
		t.Fatalf("entries %+v", e)
	}
}

func TestReservedMulticast(t *testing.T) {
	s := New(Options{})
	s.SetPorts(accessPorts(3))
	for _, last := range []byte{0x00, 0x02, 0x0e, 0x0f} {
		d := s.Decide(key(1, mac(1), [6]byte{0x01, 0x80, 0xc2, 0, 0, last}, -1), t0)
		if d.Drop != DropReservedMcast || len(d.Outputs) != 0 || d.Deps != DepEthDst {
			t.Fatalf("%x: %+v", last, d)
		}
	}
	if s.Stats().Learned != 0 {
		t.Fatal("learned from a link-local frame")
	}
	// 01:80:c2:00:00:10 is outside the reserved block: flooded.
	if d := s.Decide(key(1, mac(1), [6]byte{0x01, 0x80, 0xc2, 0, 0, 0x10}, -1), t0); !d.Flooded || len(d.Outputs) != 2 {
		t.Fatalf("%+v", d)
	}
}

func TestVLANs(t *testing.T) {
	cfg := []PortConfig{
		{No: 1, Mode: Access, Tag: 10},
		{No: 2, Mode: Access, Tag: 20},
		{No: 3, Mode: Trunk},                                           // all VLANs, no native
		{No: 4, Mode: Trunk, Trunks: []uint16{10, 30}, NativeVLAN: 20}, // 10,30 tagged; 20 untagged
		{No: 5, Mode: Trunk, Trunks: []uint16{20}, NativeVLAN: 10},     // 20 tagged; 10 untagged
		{No: 6, Mode: Access},                                          // untagged network
		{No: 7, Mode: Access},                                          // untagged network
		{No: 8, Mode: Trunk, Trunks: []uint16{30}, NativeVLAN: 0},      // 30 only
		{No: 9, Mode: Access, Tag: 10, NoFlood: true},                  // VLAN 10 but not flooded
	}
	none := func(p uint32) Output { return Output{Port: p} }
	push := func(p uint32, v uint16) Output { return Output{Port: p, VLAN: VLANPush, VID: v} }
	pop := func(p uint32) Output { return Output{Port: p, VLAN: VLANPop} }
	rw := func(p uint32, v uint16) Output { return Output{Port: p, VLAN: VLANRewrite, VID: v} }
	tests := []struct {
		name string
		in   uint32
		vid  int // -1 untagged
		vlan uint16
		want []Output
		drop DropReason
	}{
		{"access untagged", 1, -1, 10, []Output{push(3, 10), push(4, 10), none(5)}, 0},
		{"access same tag", 1, 10, 10, []Output{none(3), none(4), pop(5)}, 0},
		{"access priority tag", 1, 0, 10, []Output{rw(3, 10), rw(4, 10), pop(5)}, 0},
		{"access other tag", 1, 20, 0, nil, DropVLANNotAllowed},
		{"access vlan 20", 2, -1, 20, []Output{push(3, 20), none(4), push(5, 20)}, 0},
		{"trunk all, tagged 10", 3, 10, 10, []Output{pop(1), none(4), pop(5)}, 0},
		{"trunk all, tagged 30", 3, 30, 30, []Output{none(4), none(8)}, 0},
		{"trunk all, tagged 99 nowhere else", 3, 99, 99, nil, DropNoFloodPorts},
		{"trunk no native, untagged", 3, -1, 0, nil, DropUntaggedNoNative},
		{"trunk no native, priority tag", 3, 0, 0, nil, DropUntaggedNoNative},
		{"trunk native untagged", 4, -1, 20, []Output{none(2), push(3, 20), push(5, 20)}, 0},
		{"trunk native tagged", 4, 20, 20, []Output{pop(2), none(3), none(5)}, 0},
		{"trunk native priority", 4, 0, 20, []Output{pop(2), rw(3, 20), rw(5, 20)}, 0},
		{"trunk allowed 10", 4, 10, 10, []Output{pop(1), none(3), pop(5)}, 0},
		{"trunk disallowed 40", 4, 40, 0, nil, DropVLANNotAllowed},
		{"trunk 4095 invalid", 3, 4095, 0, nil, DropVLANNotAllowed},
		{"trunk native 10 untagged", 5, -1, 10, []Output{none(1), push(3, 10), push(4, 10)}, 0},
		{"untagged network", 6, -1, 0, []Output{none(7)}, 0},
		{"untagged network priority tag", 6, 0, 0, []Output{pop(7)}, 0},
		{"untagged network tagged", 6, 10, 0, nil, DropVLANNotAllowed},
	}
	for _, tc := range tests {
		s := New(Options{})
		s.SetPorts(cfg)
		d := s.Decide(key(tc.in, mac(1), bcast, tc.vid), t0)
		if d.Drop != tc.drop || (tc.drop == 0 || tc.drop == DropNoFloodPorts) && d.VLAN != tc.vlan ||
			!reflect.DeepEqual(d.Outputs, append([]Output(nil), tc.want...)) && !(len(d.Outputs) == 0 && len(tc.want) == 0) {
			t.Errorf("%s: got vlan %d %+v drop %q, want vlan %d %+v drop %q", tc.name, d.VLAN, d.Outputs, d.Drop, tc.vlan, tc.want, tc.drop)
		}
	}
}

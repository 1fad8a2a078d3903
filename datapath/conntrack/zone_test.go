package conntrack

import (
	"reflect"
	"testing"
)

// TestZoneLimits: a zone at its limit refuses new connections (they stay
// +new, uncommitted) while other zones and the zone's own established
// connections go on; the default limit covers zones without their own.
func TestZoneLimits(t *testing.T) {
	tr := New()
	tr.SetZoneLimit(1, 2)
	z1 := Params{Zone: 1, Commit: true}
	for i := range 3 {
		track(t, tr, udpFrame(t, ipA, ipB, uint16(10+i), 53), z1, 0)
	}
	if got := tr.ZoneLimits(nil); !reflect.DeepEqual(got, []ZoneLimit{{Zone: 1, Limit: 2, Count: 2}}) {
		t.Errorf("limits %+v", got)
	}
	if s := tr.Stats(); s.ZoneLimitRefused != 1 || s.Conns != 2 {
		t.Errorf("stats %+v, want 1 refused and 2 connections", s)
	}
	runSteps(t, tr, []step{
		{"third connection, refused", udpFrame(t, ipB, ipA, 53, 12), Params{Zone: 1}, 0, trk | nw},
		{"first one's reply", udpFrame(t, ipB, ipA, 53, 10), Params{Zone: 1}, 0, trk | est | rpl},
		{"zone 2 unlimited", udpFrame(t, ipA, ipB, 12, 53), Params{Zone: 2, Commit: true}, 0, trk | nw},
	})
	// The default applies to zones without a limit of their own: zone
	// 2 has one connection already.
	tr.SetDefaultZoneLimit(1)
	track(t, tr, udpFrame(t, ipA, ipB, 13, 53), Params{Zone: 2, Commit: true}, 0)
	if got := tr.ZoneLimits([]uint16{2, 3}); !reflect.DeepEqual(got, []ZoneLimit{{2, 1, 1}, {3, 1, 0}}) {
		t.Errorf("limits of zones 2 and 3 %+v", got)
	}
	// Deleting zone 1's limit puts it under the default (1, and it has 2).
	tr.DeleteZoneLimit(1)
	if got := tr.ZoneLimits(nil); len(got) != 0 {
		t.Errorf("limits after deleting %+v", got)
	}
	tr.SetZoneLimit(1, 0) // explicitly unlimited, whatever the default
	track(t, tr, udpFrame(t, ipA, ipB, 14, 53), z1, 0)
	if got := tr.ZoneCounts(); !reflect.DeepEqual(got, map[uint16]int64{1: 3, 2: 1}) {
		t.Errorf("counts %v", got)
	}
	// Flushing gives the room back.
	zone := uint16(1)
	tr.Flush(&zone)
	if got := tr.ZoneCounts(); !reflect.DeepEqual(got, map[uint16]int64{2: 1}) {
		t.Errorf("counts after flushing zone 1: %v", got)
	}
}

// TestZoneTimeouts: a zone's timeout policy replaces the defaults it
// names, for connections made before the policy too.
func TestZoneTimeouts(t *testing.T) {
	to, unknown := PolicyTimeouts(DefaultTimeouts(), map[string]int{"udp_first": 5, "udp_single": 7, "udp_multiple": 9, "tcp_unack": 3})
	if !reflect.DeepEqual(unknown, []string{"tcp_unack"}) {
		t.Errorf("unhonoured keys %v", unknown)
	}
	if to.UDPFirst != 5*sec || to.TCPEstablished != DefaultTimeouts().TCPEstablished {
		t.Errorf("policy timeouts %+v", to)
	}
	tr := New()
	old := Params{Zone: 7, Commit: true}
	track(t, tr, udpFrame(t, ipA, ipB, 1, 2), old, 0)
	tr.SetZoneTimeouts(7, &to)
	runSteps(t, tr, []step{
		// Made under the default (30 s); its next packet takes the
		// policy's udp_single (7 s). Unanswered, its packets are new;
		// the reply shows it alive.
		{"second packet", udpFrame(t, ipA, ipB, 1, 2), Params{Zone: 7}, 20, trk | nw},
		{"6 s later", udpFrame(t, ipA, ipB, 1, 2), Params{Zone: 7}, 26, trk | nw},
		{"reply", udpFrame(t, ipB, ipA, 2, 1), Params{Zone: 7}, 30, trk | est | rpl},
		{"8 s after the reply", udpFrame(t, ipA, ipB, 1, 2), Params{Zone: 7}, 38, trk | est},
		{"9 s after the last", udpFrame(t, ipA, ipB, 1, 2), Params{Zone: 7}, 47, trk | nw},
		// A new connection lives udp_first (5 s) until its next packet.
		{"new", udpFrame(t, ipA, ipB, 3, 4), Params{Zone: 7, Commit: true}, 100, trk | nw},
		{"a reply 6 s later finds none", udpFrame(t, ipB, ipA, 4, 3), Params{Zone: 7}, 106, trk | nw},
		// An unanswered one's next packet gives it udp_single (7 s).
		{"another", udpFrame(t, ipA, ipB, 5, 6), Params{Zone: 7, Commit: true}, 200, trk | nw},
		{"its second packet", udpFrame(t, ipA, ipB, 5, 6), Params{Zone: 7}, 204, trk | nw},
		{"a reply 8 s later finds none", udpFrame(t, ipB, ipA, 6, 5), Params{Zone: 7}, 212, trk | nw},
		// Zone 0 keeps Linux's 30 s.
		{"zone 0", udpFrame(t, ipA, ipB, 3, 4), commit, 100, trk | nw},
		{"zone 0, a reply 29 s later", udpFrame(t, ipB, ipA, 4, 3), Params{}, 129, trk | est | rpl},
	})
	if got := tr.ZoneTimeouts(); len(got) != 1 || got[7] != to {
		t.Errorf("zone timeouts %v", got)
	}
	tr.SetZoneTimeouts(7, nil)
	if got := tr.ZoneTimeouts(); len(got) != 0 {
		t.Errorf("zone timeouts after removing the policy: %v", got)
	}
}

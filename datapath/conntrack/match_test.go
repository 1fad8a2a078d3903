package conntrack

import (
	"strings"
	"testing"
)

func parseMatch(t *testing.T, orig, reply string) *Match {
	t.Helper()
	m := &Match{}
	if err := ParseMatchTuple(orig, m, &m.Orig); err != nil {
		t.Fatalf("%q: %v", orig, err)
	}
	if err := ParseMatchTuple(reply, m, &m.Reply); err != nil {
		t.Fatalf("%q: %v", reply, err)
	}
	return m
}

// TestFlushMatch flushes by tuples as dpctl/flush-conntrack and
// NXT_CT_FLUSH select them, and only those connections.
func TestFlushMatch(t *testing.T) {
	load := func() *Tracker {
		tr := New()
		track(t, tr, udpFrame(t, ipA, ipB, 1000, 53), commit, 0)
		track(t, tr, udpFrame(t, ipA, ipB, 1001, 53), commit, 0)
		track(t, tr, udpFrame(t, ipA, ipB, 1000, 53), Params{Zone: 5, Commit: true}, 0)
		track(t, tr, tcpFrame(t, seg{src: ipA, dst: ipB, sport: 1000, dport: 80, seq: 1, syn: true, wscale: -1}), commit, 0)
		track(t, tr, echoFrame(t, ipA, ipB, 8, 77), commit, 0)
		track(t, tr, udpFrame(t, ip6A, ip6B, 1000, 53), commit, 0)
		return tr
	}
	zone5 := uint16(5)
	for _, c := range []struct {
		name        string
		zone        *uint16
		orig, reply string
		want        int
	}{
		{"everything", nil, "", "", 6},
		{"five-tuple means zone 0", nil, "ct_nw_src=198.18.0.1,ct_nw_dst=198.18.0.2,ct_nw_proto=17,ct_tp_src=1000,ct_tp_dst=53", "", 1},
		{"five-tuple in zone 5", &zone5, "ct_nw_src=198.18.0.1,ct_nw_dst=198.18.0.2,ct_nw_proto=17,ct_tp_src=1000,ct_tp_dst=53", "", 1},
		{"by destination port, any zone", nil, "ct_nw_proto=17,ct_tp_dst=53", "", 4},
		{"IPv4 by source address", nil, "ct_nw_src=198.18.0.1", "", 5},
		{"IPv6", nil, "ct_ipv6_dst=2001:db8::2", "", 1},
		{"by reply tuple", nil, "", "ct_nw_src=198.18.0.2,ct_nw_proto=6,ct_tp_src=80", 1},
		{"ICMP by id", nil, "ct_nw_src=198.18.0.1,ct_nw_dst=198.18.0.2,ct_nw_proto=1,icmp_id=77,icmp_type=8,icmp_code=0", "", 1},
		{"ICMP, another id", nil, "ct_nw_src=198.18.0.1,ct_nw_dst=198.18.0.2,ct_nw_proto=1,icmp_id=78,icmp_type=8", "", 0},
		{"nothing there", nil, "ct_nw_src=198.18.9.9", "", 0},
	} {
		tr := load()
		if n := tr.FlushMatch(c.zone, parseMatch(t, c.orig, c.reply)); n != c.want {
			t.Errorf("%s: flushed %d, want %d", c.name, n, c.want)
		}
		if l := tr.Len(); l != int64(6-c.want) {
			t.Errorf("%s: %d left", c.name, l)
		}
	}
}

func TestParseMatchTupleErrors(t *testing.T) {
	for s, want := range map[string]string{
		"ct_nw_src=1.2.3":                     "failed to parse field ct_nw_src",
		"ct_nw_src=1.1.1.1,ct_ipv6_dst=::1":   "the L3 protocol does not match",
		"ct_nw_src=1.1.1.1,ct_nw_src=2.2.2.2": "set multiple times",
		"ct_tp_src=80":                        "port is set without protocol",
		"ct_nw_proto=6,icmp_id=1":             "invalid L4 fields",
		"ct_nw_proto=300":                     "failed to parse field ct_nw_proto",
		"ct_mark=1":                           "invalid conntrack tuple field: ct_mark",
		"ct_nw_dst=":                          "missing value",
		"ct_ipv6_src=198.18.0.1":              "failed to parse field ct_ipv6_src",
	} {
		m := &Match{}
		err := ParseMatchTuple(s, m, &m.Orig)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", s, err, want)
		}
	}
}

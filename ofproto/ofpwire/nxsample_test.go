package ofpwire

import (
	"reflect"
	"testing"
)

// TestNXSampleAndQueueActions: the three sample subtypes and pop_queue
// decode to their typed forms and encode back in the subtype they came
// in; OVS's refusals (probability 0, an unknown direction, non-zero
// padding) are kept; OpenFlow 1.0's NXAST_DEC_TTL and NXAST_SET_QUEUE
// read as dec_nw_ttl and set_queue.
func TestNXSampleAndQueueActions(t *testing.T) {
	acts := []Action{
		&ActionSample{Subtype: nxastSample, Probability: 100, CollectorSetID: 1, ObsDomainID: 2, ObsPoint: 3, SamplingPort: SamplePortNone},
		&ActionSample{Subtype: nxastSample2, Probability: 7, CollectorSetID: 9, SamplingPort: 4},
		&ActionSample{Subtype: nxastSample3, Probability: 65535, SamplingPort: SamplePortNone, Direction: SampleEgress},
		&ActionPopQueue{},
	}
	b, err := appendActions(nil, acts)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 24+32+32+16 {
		t.Fatalf("encoded %d bytes, want %d", len(b), 24+32+32+16)
	}
	got, err := parseActions(b)
	if err != nil || !reflect.DeepEqual(got, acts) {
		t.Fatalf("round trip: %v\n got %#v\nwant %#v", err, got, acts)
	}
	for _, c := range []struct{ name, hex string }{
		{"probability 0", "ffff 0018 00002320 001d 0000 00000001 00000002 00000003"},
		{"sample3 direction 3", "ffff 0020 00002320 0029 0001 00000001 00000002 00000003 ffff 03 0000000000"},
		{"sample3 padding", "ffff 0020 00002320 0029 0001 00000001 00000002 00000003 ffff 00 0000000001"},
		{"sample short", "ffff 0010 00002320 001d 0001 00000001"},
		{"pop_queue padding", "ffff 0010 00002320 0005 000000000001"},
	} {
		if _, err := decodeActionsErr(c.hex); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	a := decodeActions(t, "ffff 0010 00002320 0012 000000000000 ffff 0010 00002320 0004 0000 00000007")
	if len(a) != 2 || !reflect.DeepEqual(a[0], &ActionDecNwTTL{}) || !reflect.DeepEqual(a[1], &ActionSetQueue{Queue: 7}) {
		t.Errorf("1.0 dec_ttl, set_queue: %#v", a)
	}
}

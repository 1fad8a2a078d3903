package ofptext

import (
	"strings"
	"testing"
)

// A long packet is shortened in the error message, but the in_port and
// the actions, where the mistake usually is, are kept whole.
func TestPacketOutErrorKeepsActions(t *testing.T) {
	text := "in_port=LOCAL packet=" + strings.Repeat("ab", 200) + " actions=output:1,bogus_action"
	_, err := ParsePacketOut(text, ParseFlowOptions{})
	if err == nil {
		t.Fatal("bad action accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, "actions=output:1,bogus_action") || !strings.Contains(msg, "(200 bytes)") || strings.Count(msg, "ab") > 20 {
		t.Errorf("message %q: want the actions whole and the packet shortened", msg)
	}
	if _, err := ParsePacketOut("in_port=LOCAL packet="+strings.Repeat("00", 60)+" actions=TABLE", ParseFlowOptions{}); err != nil {
		t.Errorf("actions=TABLE: %v", err)
	}
}

// A dump-flows line is an add-flow as it is (the statistics are ignored,
// as ovs-ofctl ignores them), and a cookie mask of -1 is all ones.
func TestDumpedLineIsAFlow(t *testing.T) {
	fm, err := ParseFlow(" cookie=0x7, duration=1.5s, table=0, n_packets=3, n_bytes=4, idle_age=3, hard_age=2, priority=100,in_port=1 actions=drop", Add)
	if err != nil || fm.Priority != 100 || fm.Cookie != 7 {
		t.Fatalf("dumped line: %+v, %v", fm, err)
	}
	fm, err = ParseFlow("cookie=0x42/-1", Delete)
	if err != nil || fm.Cookie != 0x42 || fm.CookieMask != ^uint64(0) {
		t.Fatalf("cookie=0x42/-1: %+v, %v", fm, err)
	}
}

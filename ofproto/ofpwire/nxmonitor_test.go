package ofpwire

import (
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// Flow monitor requests as ovs-ofctl monitor br watch: sends them (the
// default flags: initial, add, delete, modify, actions, own), here on
// in_port=1, in each encoding.
var monitorRequests = map[uint8]string{
	Version10: "01 10 0030 00000009 ffff 0000 00002320 00000002 00000000" +
		"00000001 003f ffff 0006 ff 0000000000  00000002 0001 0000",
	Version13: "04 12 0038 00000009 ffff 0000 00000000 4f4e4600 0000074e" +
		"00000001 003f 000c ffffffff ff 000000  0001 000c 80000004 00000001 00000000",
	Version14: "05 12 0030 00000009 0010 0000 00000000" +
		"00000001 ffffffff ffffffff 005f ff 00  0001 000c 80000004 00000001 00000000",
	Version15: "06 12 0030 00000009 0010 0000 00000000" +
		"00000001 ffffffff ffffffff 005f ff 00  0001 000c 80000004 00000001 00000000",
}

func TestDecodeFlowMonitorRequest(t *testing.T) {
	for v, s := range monitorRequests {
		m, ok, err := DecodeFlowMonitor(mustHex(s))
		if !ok || err != nil {
			t.Fatalf("%s: ok %v err %v", VersionName(v), ok, err)
		}
		r := m.(*FlowMonitorRequest)
		if len(r.Monitors) != 1 {
			t.Fatalf("%s: %d monitors", VersionName(v), len(r.Monitors))
		}
		fm := r.Monitors[0]
		const want = FlowMonitorInitial | FlowMonitorAdd | FlowMonitorRemoved | FlowMonitorModify | FlowMonitorInstructions | FlowMonitorOwn
		if fm.ID != 1 || fm.Flags != want || fm.TableID != 0xff || fm.OutPort != PortAny || fm.OutGroup != GroupAny ||
			fm.Command != FlowMonitorCmdAdd || len(fm.Match.Fields) != 1 || fm.Match.Fields[0].Field != ofp.XMTypeInPort {
			t.Errorf("%s: %+v", VersionName(v), fm)
		}
	}
	for _, s := range []string{
		"01 04 0014 00000009 00002320 00000015 00000007",
		"04 04 0014 00000009 4f4e4600 0000074e 00000007",
	} {
		m, ok, err := DecodeFlowMonitor(mustHex(s))
		if !ok || err != nil || m.(*FlowMonitorCancel).ID != 7 {
			t.Errorf("%s: %v %v %v", s, m, ok, err)
		}
	}
	// Not monitor messages: left to the generic decoder.
	for _, s := range []string{
		"04 12 0010 00000009 0001 0000 00000000",
		"01 10 001c 00000009 ffff 0000 00002320 00000000 00000000",
	} {
		if _, ok, _ := DecodeFlowMonitor(mustHex(s)); ok {
			t.Errorf("%s: taken as a monitor message", s)
		}
	}
	// Bad flags (no event), a truncated match.
	for _, s := range []string{
		"01 10 0028 00000009 ffff 0000 00002320 00000002 00000000 00000001 0001 ffff 0000 ff 0000000000",
		"05 12 0020 00000009 0010 0000 00000000 00000001 ffffffff ffffffff 005f ff 00",
	} {
		if _, ok, err := DecodeFlowMonitor(mustHex(s)); !ok || err == nil {
			t.Errorf("%s: ok %v err %v", s, ok, err)
		}
	}
}

// TestFlowMonitorRequestsAreOVS checks that the requests above are what
// Open vSwitch reads as the monitor they stand for.
func TestFlowMonitorRequestsAreOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	for v, s := range monitorRequests {
		out := ofpPrint(t, mustHex(s))
		if strings.Contains(out, "error") || strings.Contains(out, "***") ||
			!strings.Contains(out, "id=1") || !strings.Contains(out, "in_port=1") || !strings.Contains(out, "initial") {
			t.Errorf("%s: ovs-ofctl ofp-print:\n%s", VersionName(v), out)
		}
	}
}

func sampleFlowUpdates() []FlowUpdate {
	m := Match{Fields: []OXM{OXMUint(ofp.XMTypeInPort, 1)}}
	ins := []Instruction{&InstrApplyActions{Actions: []Action{&ActionOutput{Port: 2}}}}
	return []FlowUpdate{
		{Event: FlowUpdateInitial, TableID: 0, Priority: 100, Cookie: 0x11, Match: m, Instructions: ins},
		{Event: FlowUpdateAdded, TableID: 1, Priority: 200, IdleTimeout: 5, HardTimeout: 9, Match: m, Instructions: ins},
		{Event: FlowUpdateModified, TableID: 1, Priority: 200, Match: m, Instructions: ins},
		{Event: FlowUpdateRemoved, Reason: FlowReasonDelete, TableID: 1, Priority: 200, Match: m},
		{Event: FlowUpdateRemoved, Reason: FlowReasonIdleTimeout, TableID: 1, Priority: 200, Match: m},
		{Event: FlowUpdateAbbrev, XID: 0x2a},
	}
}

// TestFlowUpdatesParseInOVS: Open vSwitch's ovs-ofctl reads the updates
// we encode, in every version, as the events they are.
func TestFlowUpdatesParseInOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	for _, v := range []uint8{Version10, Version13, Version14, Version15} {
		bs, err := EncodeFlowUpdates(v, 0, sampleFlowUpdates())
		if err != nil || len(bs) != 1 {
			t.Fatalf("%s: %d messages, %v", VersionName(v), len(bs), err)
		}
		out := ofpPrint(t, bs[0])
		added := "event=ADDED table=1 idle_timeout=5 hard_timeout=9 cookie=0 in_port=1 actions=output:2"
		initial := "event=ADDED table=0 cookie=0x11 in_port=1 actions=output:2"
		if v >= Version14 {
			initial = "event=INITIAL table=0 cookie=0x11 in_port=1 actions=output:2"
		}
		for _, w := range []string{initial, added, "event=MODIFIED table=1 cookie=0 in_port=1 actions=output:2",
			"event=DELETED reason=delete table=1 cookie=0 in_port=1",
			"event=DELETED reason=idle table=1", "event=ABBREV xid=0x2a"} {
			if !strings.Contains(out, w) {
				t.Errorf("%s: ofp-print lacks %q:\n%s", VersionName(v), w, out)
			}
		}
		if strings.Contains(out, "error") || strings.Contains(out, "***") {
			t.Errorf("%s: ofp-print:\n%s", VersionName(v), out)
		}
	}
}

// TestFlowUpdatesSplit: updates beyond one message go on in another, the
// first flagged MORE.
func TestFlowUpdatesSplit(t *testing.T) {
	u := sampleFlowUpdates()[1]
	ups := make([]FlowUpdate, 2000)
	for i := range ups {
		ups[i] = u
	}
	for _, v := range []uint8{Version10, Version13, Version14} {
		bs, err := EncodeFlowUpdates(v, 3, ups)
		if err != nil || len(bs) < 2 {
			t.Fatalf("%s: %d messages, %v", VersionName(v), len(bs), err)
		}
		for i, b := range bs {
			if len(b) > MaxMessageLen || int(be.Uint16(b[2:])) != len(b) {
				t.Fatalf("%s: message %d length %d", VersionName(v), i, len(b))
			}
			if more := b[HeaderLen+3] == 1; more != (i < len(bs)-1) {
				t.Errorf("%s: message %d more=%v", VersionName(v), i, more)
			}
		}
	}
}

func FuzzDecodeFlowMonitor(f *testing.F) {
	for _, s := range monitorRequests {
		f.Add(mustHex(s))
	}
	f.Add(mustHex("01 04 0014 00000009 00002320 00000015 00000007"))
	f.Add(mustHex("04 04 0014 00000009 4f4e4600 0000074e 00000007"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok, err := DecodeFlowMonitor(b)
		if !ok || err != nil {
			return
		}
		r, isReq := m.(*FlowMonitorRequest)
		if !isReq {
			return
		}
		// What decodes must encode back as a flow's match does.
		for _, fm := range r.Monitors {
			if _, err := appendMatch(nil, fm.Match); err != nil {
				t.Fatalf("decoded match does not encode: %v", err)
			}
		}
	})
}

// TestMonitorErrorsParseInOVS: the monitor errors read as Open vSwitch's
// OFPMOFC_* in every version (1.0 and 1.3 have them as Nicira codes).
func TestMonitorErrorsParseInOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	for _, v := range []uint8{Version10, Version13, Version14, Version15} {
		for err, name := range map[*OFPError]string{ErrMonitorExists: "OFPMOFC_MONITOR_EXISTS", ErrUnknownMonitor: "OFPMOFC_UNKNOWN_MONITOR",
			errMonitorFlags: "OFPMOFC_BAD_FLAGS"} {
			out := ofpPrint(t, ErrorMessageIn(v, 3, err, mustHex(monitorRequests[v])))
			if !strings.Contains(out, name) {
				t.Errorf("%s: %s: ofp-print:\n%s", VersionName(v), name, out)
			}
		}
	}
}

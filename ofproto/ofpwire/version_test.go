package ofpwire

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

func TestNegotiate(t *testing.T) {
	all := Versions
	cases := []struct {
		name    string
		allowed []uint8
		hdr     uint8
		hello   *Hello
		want    uint8
		ok      bool
	}{
		{"bitmap 1.0-1.5", all, 6, NewHello(1, 4, 5, 6), 6, true},
		{"bitmap only 1.5 (ovn-controller)", all, 6, NewHello(6), 6, true},
		{"bitmap 1.3 and 1.4", all, 5, NewHello(4, 5), 5, true},
		{"bitmap without a common version", all, 4, NewHello(2, 3, 7), 0, false},
		{"bitmap 1.0 and 1.2", all, 3, NewHello(1, 3), 1, true},
		{"no bitmap, header 1.4", all, 5, &Hello{}, 5, true},
		{"no bitmap, header above ours", all, 9, &Hello{}, 6, true},
		{"no bitmap, header 1.0", all, 1, &Hello{}, 1, true},
		{"no bitmap, header 1.2: 1.2 is not ours", all, 3, &Hello{}, 0, false},
		{"no bitmap, header 1.4, protocols 1.3 and 1.5", []uint8{4, 6}, 5, &Hello{}, 0, false},
		{"undecodable hello, header 1.3", all, 4, nil, 4, true},
		{"protocols=OpenFlow13 only, peer 1.5 only", []uint8{4}, 6, NewHello(6), 0, false},
		{"protocols=OpenFlow13,OpenFlow14, peer 1.0-1.5", []uint8{5, 4}, 6, NewHello(1, 4, 5, 6), 5, true},
	}
	for _, c := range cases {
		v, ok := Negotiate(c.allowed, c.hdr, c.hello)
		if v != c.want || ok != c.ok {
			t.Errorf("%s: got %d %v, want %d %v", c.name, v, ok, c.want, c.ok)
		}
	}
}

// versionSeeds are messages as a controller sends them in 1.0, 1.4 and 1.5 (from
// the specifications' layouts); the fuzz target starts from them too.
var versionSeeds = map[string]string{
	// 1.5 select group, two buckets with weight properties, bucket ids 0, 1.
	"group-mod-15": "06 0f 0058 00000007 0000 01 00 00000001 0040 0000 ffffffff" +
		"0020 0010 00000000 0000 0010 00000001 ffff 000000000000 0000 0008 0002 0000" +
		"0020 0010 00000001 0000 0010 00000002 ffff 000000000000 0000 0008 0003 0000",
	// 1.5 fast-failover group, one bucket watching port 1.
	"group-mod-15-ff": "06 0f 0038 00000007 0000 03 00 00000002 0020 0000 ffffffff" +
		"0020 0010 00000000 0000 0010 00000001 ffff 000000000000 0001 0008 00000001",
	// 1.5 packet-out from port 1 to the pipeline, 14 bytes of frame.
	"packet-out-15": "06 0d 003e 00000007 ffffffff 0010 0000 0001 000c 80000004 00000001 00000000" +
		"0000 0010 fffffff9 ffff 000000000000 ffffffffffff 020000000001 0806",
	// 1.5 flow-mod: importance 7, empty match, apply-actions(meter:5, output:2).
	"flow-mod-15-meter": "06 0e 0058 00000007 0000000000000000 0000000000000000 00 00 0000 0000 0064" +
		"ffffffff ffffffff ffffffff 0000 0007 0001 0004 00000000" +
		"0004 0020 00000000 001d 0008 00000005 0000 0010 00000002 ffff 000000000000",
	// 1.4 port-mod: port 1 down, Ethernet property advertising 10GB-FD.
	"port-mod-14": "05 10 0028 00000007 00000001 00000000 020000000001 0000 00000001 00000001 0000 0008 00000040",
	// 1.4 set-async: packet-in master mask 7, flow-removed slave mask 1.
	"set-async-14": "05 1c 0018 00000007 0001 0008 00000007 0004 0008 00000001",
	// 1.0 flow-mod: in_port=1, priority 0x8000, actions=output:2.
	"flow-mod-10": "01 0e 0050 00000007 003ffffe 0001" + strings.Repeat("00", 34) +
		"0000000000000000 0000 0000 0000 8000 ffffffff ffff 0000 0000 0008 0002 ffff",
	// 1.5 bundle add carrying flow-mod-15-meter, and a 1.3 (EXT-230)
	// bundle open.
	"bundle-add-15": "06 22 0068 00000007 00000001 0000 0003" +
		"06 0e 0058 00000007 0000000000000000 0000000000000000 00 00 0000 0000 0064" +
		"ffffffff ffffffff ffffffff 0000 0007 0001 0004 00000000" +
		"0004 0020 00000000 001d 0008 00000005 0000 0010 00000002 ffff 000000000000",
	"bundle-open-13": "04 04 0018 00000007 4f4e4600 000008fc 00000001 0000 0003",
	// 1.0 flow stats request for every flow.
	"flow-stats-10": "01 10 0038 00000007 0001 0000 003fffff" + strings.Repeat("00", 36) + "ff 00 ffff",
}

func decodeSeed(t *testing.T, s string) (Message, error) {
	t.Helper()
	b := mustHex(s)
	h, msg, err := ReadMessage(strings.NewReader(string(b)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return Decode(h, msg[HeaderLen:])
}

// normalise is what m becomes through the 1.3 encoding, so that nil and
// empty slices compare equal.
func normalise(t *testing.T, m Message) Message {
	t.Helper()
	b, err := Encode(7, m)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, b)[0]
}

func TestOtherVersionsDecodeToTheInternalForm(t *testing.T) {
	out := func(p ofp.PortNo) Action { return &ActionOutput{Port: p, MaxLen: 0xffff} }
	cases := []struct {
		seed string
		want Message
	}{
		{"group-mod-15", &GroupMod{Command: ofp.GroupAdd, Type: ofp.GroupTypeSelect, GroupID: 1, Buckets: []Bucket{
			{Weight: 2, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: []Action{out(1)}},
			{Weight: 3, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: []Action{out(2)}, ID: 1}}}},
		{"group-mod-15-ff", &GroupMod{Command: ofp.GroupAdd, Type: ofp.GroupTypeFastFailover, GroupID: 2, Buckets: []Bucket{
			{WatchPort: 1, WatchGroup: ofp.GroupAny, Actions: []Action{out(1)}}}}},
		{"packet-out-15", &PacketOut{BufferID: NoBuffer, InPort: 1, Actions: []Action{out(ofp.PortTable)},
			Data: mustHex("ffffffffffff 020000000001 0806")}},
		{"flow-mod-15-meter", &FlowMod{Command: ofp.FlowAdd, Priority: 100, BufferID: NoBuffer, OutPort: ofp.PortAny,
			OutGroup: ofp.GroupAny, Instructions: []Instruction{&InstrMeter{MeterID: 5},
				&InstrApplyActions{Actions: []Action{out(2)}}}}},
		{"flow-mod-10", &FlowMod{Command: ofp.FlowAdd, Priority: 0x8000, BufferID: NoBuffer, OutPort: ofp.PortAny,
			OutGroup: ofp.GroupAny, Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeInPort, 1)}},
			Instructions: []Instruction{&InstrApplyActions{Actions: []Action{out(2)}}}}},
		{"flow-stats-10", &MultipartRequest{Body: &FlowStatsRequest{TableID: 0xff, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny}}},
		{"port-mod-14", &PortMod{PortNo: 1, HWAddr: []byte{2, 0, 0, 0, 0, 1}, Config: ofp.PortConfigDown,
			Mask: ofp.PortConfigDown, Advertise: ofp.PortFeature10GbitFullDuplex}},
	}
	for _, c := range cases {
		got, err := decodeSeed(t, versionSeeds[c.seed])
		if err != nil {
			t.Errorf("%s: %v", c.seed, err)
			continue
		}
		want := normalise(t, c.want)
		if gm, ok := want.(*GroupMod); ok { // the 1.3 layout has no bucket ids
			for i := range gm.Buckets {
				gm.Buckets[i].ID = c.want.(*GroupMod).Buckets[i].ID
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.seed, got, want)
		}
	}
}

func TestSetAsyncProperties(t *testing.T) {
	m, err := decodeSeed(t, versionSeeds["set-async-14"])
	if err != nil {
		t.Fatal(err)
	}
	p, ok := m.(*AsyncProps)
	if !ok {
		t.Fatalf("got %T", m)
	}
	cur := AsyncConfig{PacketInMask: [2]uint32{1, 2}, PortStatusMask: [2]uint32{3, 4}, FlowRemovedMask: [2]uint32{5, 6}}
	want := AsyncConfig{PacketInMask: [2]uint32{7, 2}, PortStatusMask: [2]uint32{3, 4}, FlowRemovedMask: [2]uint32{5, 1}}
	if got := p.Apply(cur); got != want {
		t.Fatalf("Apply: got %+v, want %+v", got, want)
	}
}

func TestOtherVersionsRefuseWhatTheyCannotCarry(t *testing.T) {
	cases := []struct {
		name string
		hex  string
		want *OFPError
	}{
		{"meter action after another action",
			"06 0e 0058 00000007 0000000000000000 0000000000000000 00 00 0000 0000 0064" +
				"ffffffff ffffffff ffffffff 0000 0000 0001 0004 00000000" +
				"0004 0020 00000000 0000 0010 00000002 ffff 000000000000 001d 0008 00000005",
			newErr(ETBadAction, BACUnsupportedOrder)},
		{"packet-out with a packet field in its match",
			"06 0d 0038 00000007 ffffffff 0010 0000 0001 0012 80000004 00000001 80000a02 0800 000000000000" +
				"0000 0010 fffffff9 ffff 000000000000",
			newErr(ETBadMatch, BMCBadField)},
		{"insert_bucket with command_bucket_id all", "06 0f 0018 00000007 0003 01 00 00000001 0000 0000 ffffffff",
			newErr(ETGroupModFailed, GMFCBadBucket)},
		{"remove_bucket carrying a bucket", "06 0f 0020 00000007 0005 00 00 00000001 0008 0000 fffffffd 0008 0000 00000003",
			newErr(ETGroupModFailed, GMFCBadBucket)},
		{"bucket id used twice", "06 0f 0028 00000007 0000 00 00 00000001 0010 0000 ffffffff 0008 0000 00000003 0008 0000 00000003",
			newErr(ETGroupModFailed, GMFCBadBucket)},
		{"bucket id above the largest", "06 0f 0020 00000007 0000 00 00 00000001 0008 0000 ffffffff 0008 0000 ffffff01",
			newErr(ETGroupModFailed, GMFCBadBucket)},
		{"unknown group command", "06 0f 0018 00000007 0004 01 00 00000001 0000 0000 ffffffff",
			newErr(ETGroupModFailed, GMFCBadCommand)},
		{"group property", "06 0f 0020 00000007 0000 01 00 00000001 0000 0000 ffffffff ffff 0008 00000000",
			newErr(ETBadProperty, BPCBadType)},
		{"bucket longer than the array", "06 0f 0020 00000007 0000 01 00 00000001 0010 0000 ffffffff 0020 0000 00000000",
			newErr(ETGroupModFailed, GMFCBadBucket)},
		{"unknown async property", "05 1c 0010 00000007 0020 0008 00000007", newErr(ETBadProperty, BPCBadType)},
		{"port description of one port (1.5)", "06 12 0018 00000007 000d 0000 00000000 00000001 00000000",
			newErr(ETBadRequest, BRCBadPort)},
		{"OpenFlow 1.1 message", "02 02 0008 00000007", newErr(ETBadRequest, BRCBadVersion)},
		{"OpenFlow 1.0 type 1.0 has not", "01 16 0008 00000007", newErr(ETBadRequest, BRCBadType)},
		{"OpenFlow 1.0 flow-mod with an emergency flag", "01 0e 0048 00000007" + strings.Repeat("00", 40) +
			"0000000000000000 0000 0000 0000 8000 ffffffff ffff 0004", newErr(ETFlowModFailed, FMFCBadFlags)},
		{"OpenFlow 1.0 stats type 1.0 has not (group)", "01 10 0010 00000007 0006 0000 00000000",
			newErr(ETBadRequest, BRCBadMultipart)},
	}
	for _, c := range cases {
		_, err := decodeSeed(t, c.hex)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
}

// TestSwitchMessagesParseInOVS encodes every message a switch sends in 1.3,
// 1.4 and 1.5 and has Open vSwitch's own decoder (ovs-ofctl ofp-print) read
// it back: it must decode all of it, in the right version.
func TestSwitchMessagesParseInOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	var msgs []Message
	for _, m := range sampleMessages() {
		switch m := m.(type) {
		case *MultipartReply:
			if _, exp := m.Body.(*ExperimenterMultipart); !exp {
				msgs = append(msgs, m)
			}
		case *FeaturesReply, *GetConfigReply, *PacketIn, *FlowRemoved, *PortStatus, *BarrierReply,
			*RoleReply, *GetAsyncReply, *ErrorMsg, *EchoReply:
			msgs = append(msgs, m)
		}
	}
	// A flow with a meter (1.5 reports it as an action) and groups whose
	// buckets carry weights and watch ports.
	msgs = append(msgs,
		&MultipartReply{Body: &FlowStatsReply{Flows: []FlowStats{{TableID: 3, DurationSec: 5, Priority: 9, Cookie: 0xab,
			PacketCount: 7, ByteCount: 700, Match: Match{Fields: []OXM{OXMUint(ofp.XMTypeInPort, 1)}},
			Instructions: []Instruction{&InstrMeter{MeterID: 5}, &InstrApplyActions{Actions: []Action{&ActionOutput{Port: 2}}}}}}}},
		&MultipartReply{Body: &GroupDescReply{Groups: []GroupDesc{
			{Type: ofp.GroupTypeSelect, GroupID: 1, Buckets: []Bucket{
				{Weight: 2, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: []Action{&ActionOutput{Port: 1}}},
				{Weight: 3, WatchPort: ofp.PortAny, WatchGroup: ofp.GroupAny, Actions: []Action{&ActionOutput{Port: 2}}}}},
			{Type: ofp.GroupTypeFastFailover, GroupID: 2, Buckets: []Bucket{
				{WatchPort: 1, WatchGroup: ofp.GroupAny, Actions: []Action{&ActionOutput{Port: 1}}}}}}}})
	want := map[uint8][]string{
		Version10: {"n_packets=7", "in_port=1 actions=output:2", "OFPT_PORT_STATUS", "OFPST_PORT_DESC reply", "rx pkts=2"},
		Version15: {"n_packets=7", "meter:5,output:2", "bucket=bucket_id:1,weight:3,actions=output:2",
			"bucket=bucket_id:0,watch_port:1,actions=output:1", "duration=5"},
		Version14: {"n_packets=7", "meter:5,output:2", "bucket=weight:3,actions=output:2", "bucket=watch_port:1,actions=output:1"},
	}
	// Some samples are artificial (instructions or table features Open
	// vSwitch rejects in any version): what ovs-ofctl decodes in 1.3 it
	// must decode in 1.4 and 1.5 too.
	clean13 := make([]bool, len(msgs))
	for _, v := range []uint8{Version13, Version14, Version15, Version10} {
		var all strings.Builder
		for i, m := range msgs {
			if v == Version10 && !in10(m) {
				continue
			}
			b, err := EncodeIn(v, 7, m)
			if err != nil {
				t.Fatalf("%s %T: %v", VersionName(v), m, err)
			}
			if b[0] != v {
				t.Fatalf("%s %T: header version %d", VersionName(v), m, b[0])
			}
			out := ofpPrint(t, b)
			tag := "(OF1." + string(rune('0'+v-1)) + ")"
			if v == Version10 {
				tag = " (xid=0x7)" // ovs-ofctl names no version for 1.0
			}
			clean := !strings.Contains(out, "decode error") && !strings.Contains(out, "***") && strings.Contains(out, tag)
			if v == Version13 {
				clean13[i] = clean
			} else if clean13[i] && !clean {
				t.Errorf("%s %T: ovs-ofctl ofp-print:\n%s", VersionName(v), m, out)
			}
			all.WriteString(out)
		}
		if n := len(slices.DeleteFunc(slices.Clone(clean13), func(c bool) bool { return !c })); n < len(msgs)-4 {
			t.Fatalf("only %d of %d messages decode in 1.3", n, len(msgs))
		}
		for _, w := range want[v] {
			if !strings.Contains(all.String(), w) {
				t.Errorf("%s: ofp-print output lacks %q:\n%s", VersionName(v), w, all.String())
			}
		}
	}
}

func ofpPrint(t *testing.T, b []byte) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", "ofp-print", hex.EncodeToString(b)).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl ofp-print: %v\n%s", err, out)
	}
	return string(out)
}

// A multipart reply that fits one 1.3 message may not fit one 1.5
// message (1.5 flow entries are larger): the cut is made after rewriting.
func TestSplitAfterRewriting(t *testing.T) {
	flows := make([]FlowStats, 1200)
	for i := range flows {
		flows[i] = FlowStats{Priority: uint16(i), Instructions: []Instruction{}}
	}
	m := &MultipartReply{Body: &FlowStatsReply{Flows: flows}}
	for _, v := range []uint8{Version13, Version15} {
		b, err := EncodeIn(v, 9, m)
		if err != nil {
			t.Fatal(err)
		}
		n, items := 0, 0
		for len(b) > 0 {
			l := int(be.Uint16(b[2:]))
			if b[0] != v || openflow.Type(b[1]) != openflow.TypeMultipartReply || l > MaxMessageLen {
				t.Fatalf("%s: message %d: % x", VersionName(v), n, b[:8])
			}
			more := be.Uint16(b[10:])&MultipartReplyMore != 0
			for body := b[16:l]; len(body) > 0; body = body[be.Uint16(body):] {
				items++
			}
			b = b[l:]
			n++
			if (len(b) > 0) != more {
				t.Fatalf("%s: message %d: more flag %v with %d bytes left", VersionName(v), n, more, len(b))
			}
		}
		if items != len(flows) || n < 2 {
			t.Fatalf("%s: %d items in %d messages, want %d in several", VersionName(v), items, n, len(flows))
		}
	}
}

// in10 reports whether OpenFlow 1.0 has the message (1.0 has no groups,
// meters, table features, roles or async configuration).
func in10(m Message) bool {
	switch m := m.(type) {
	case *RoleReply, *GetAsyncReply:
		return false
	case *MultipartReply:
		switch m.Body.(type) {
		case *DescReply, *FlowStatsReply, *AggregateStatsReply, *TableStatsReply, *PortStatsReply,
			*QueueStatsReply, *PortDescReply:
			return true
		}
		return false
	}
	return true
}

// TestPacketOut15PipelineMatch: a 1.5 packet-out's match sets the
// pipeline state its packet starts with (metadata, registers), as
// ovn-controller's pinctrl sends them.
func TestPacketOut15PipelineMatch(t *testing.T) {
	b := mustHex("06 0d 0040 00000007 ffffffff 0010 0000 0001 0020 80000004 00000001 80000408 0000000000000005 00010204 0000002a" +
		"0000 0010 fffffff9 ffff 000000000000")
	h, body, err := ReadMessage(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(h, body[HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	po := m.(*PacketOut)
	md, ok1 := po.Match.Field(ofp.XMTypeMetadata)
	r1, ok2 := po.Match.Field(XMTypeReg0 + 1)
	if po.InPort != 1 || !ok1 || md.Uint() != 5 || !ok2 || r1.Uint() != 0x2a || len(po.Actions) != 1 {
		t.Fatalf("decoded %+v", po)
	}
}

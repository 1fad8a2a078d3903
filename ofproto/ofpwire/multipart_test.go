package ofpwire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

func TestMultipartReplySplit(t *testing.T) {
	// 2000 port stats of 112 bytes: 224000 bytes of body, more than three
	// messages' worth.
	stats := make([]ofp.PortStats, 2000)
	for i := range stats {
		stats[i] = ofp.PortStats{PortNo: ofp.PortNo(i + 1), RxPackets: uint64(i)}
	}
	rep := &MultipartReply{Body: &PortStatsReply{Ports: stats}}
	b := mustEncode(t, rep)
	r := bytes.NewReader(b)
	var parts []*MultipartReply
	for r.Len() > 0 {
		h, msg, err := ReadMessage(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		if h.Type != openflow.TypeMultipartReply || h.Transaction != 1 || len(msg) > MaxMessageLen {
			t.Fatalf("bad part header %+v", h)
		}
		if (len(msg)-multipartHeaderLen)%112 != 0 {
			t.Fatalf("part cuts an entry: %d", len(msg))
		}
		m, err := Decode(h, msg[HeaderLen:])
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, m.(*MultipartReply))
	}
	if len(parts) != 4 {
		t.Fatalf("%d parts", len(parts))
	}
	for i, p := range parts {
		if p.More() != (i < len(parts)-1) {
			t.Errorf("part %d: more=%v", i, p.More())
		}
	}
	// Parts are as full as possible: all but the last carry floor(room/112) entries.
	if n := len(parts[0].Body.(*PortStatsReply).Ports); n != (MaxMessageLen-multipartHeaderLen)/112 {
		t.Errorf("first part holds %d entries", n)
	}
	merged := parts[0]
	for _, p := range parts[1:] {
		if err := merged.Merge(p); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(merged, rep) {
		t.Error("merged reply differs from the original")
	}
}

func TestMultipartReplySplitVariable(t *testing.T) {
	// Flow stats entries of varying size; a split must never cut one.
	var flows []FlowStats
	for i := 0; i < 600; i++ {
		flows = append(flows, FlowStats{TableID: uint8(i), Cookie: uint64(i), Match: richMatch(),
			Instructions: allInstructions()[:1+i%6]})
	}
	rep := &MultipartReply{Body: &FlowStatsReply{Flows: flows}}
	got := decodeAll(t, mustEncode(t, rep))
	if len(got) != 1 || !reflect.DeepEqual(got[0], rep) {
		t.Fatal("flow stats did not survive splitting")
	}
	// A small reply is one message without the MORE flag.
	b := mustEncode(t, &MultipartReply{Body: &FlowStatsReply{Flows: flows[:1]}})
	if int(be.Uint16(b[2:])) != len(b) || be.Uint16(b[10:])&MultipartReplyMore != 0 {
		t.Error("small reply split or flagged")
	}
	// Single-structure replies cannot be merged.
	d := &MultipartReply{Body: &DescReply{}}
	if d.Merge(&MultipartReply{Body: &DescReply{}}) == nil {
		t.Error("desc merged")
	}
	if (&MultipartReply{Body: &FlowStatsReply{}}).Merge(&MultipartReply{Body: &PortStatsReply{}}) == nil {
		t.Error("different types merged")
	}
}

func TestMultipartBodyErrors(t *testing.T) {
	cases := []struct {
		name, hex string
		ty, code  uint16
	}{
		{"port stats reply ragged", "04 13 0018 00000001 0004 0000 00000000 0000000100000000", ETBadRequest, BRCBadLen},
		{"flow stats entry short", "04 13 0018 00000001 0001 0000 00000000 0008000000000000", ETBadRequest, BRCBadLen},
		{"group stats bucket ragged", "04 13 0038 00000001 0006 0000 00000000 0030 0000" + "00000001 00000000" + "0000000000000000 0000000000000000 00000000 00000000 0000000000000000", ETBadRequest, BRCBadLen},
		{"table features short", "04 12 0018 00000001 000c 0000 00000000 0010000000000000", ETTableFeaturesFailed, TFFCBadLen},
		{"flow stats request trailing", "04 12 0040 00000001 0001 0000 00000000 ff000000 ffffffff ffffffff 00000000 0000000000000000 0000000000000000 0001 0004 00000000 00000000 00000000", ETBadRequest, BRCBadLen},
		{"flow stats request bad match", "04 12 0030 00000001 0001 0000 00000000 ff000000 ffffffff ffffffff 00000000 0000000000000000 0000000000000000 0001 0008 80000103", ETBadMatch, BMCBadLen},
		{"desc reply short", "04 13 0018 00000001 0000 0000 00000000 0000000000000000", ETBadRequest, BRCBadLen},
	}
	for _, c := range cases {
		wantErr(t, c.name, decodeHex(t, c.hex), c.ty, c.code)
	}
}

func TestTableFeaturesErrors(t *testing.T) {
	base := func(props []byte) []byte {
		tf := make([]byte, 64)
		tf = append(tf, props...)
		be.PutUint16(tf, uint16(len(tf)))
		msg := append(mustHex("04 12 0000 00000001 000c 0000 00000000"), tf...)
		be.PutUint16(msg[2:], uint16(len(msg)))
		return msg
	}
	if _, err := decodeBytes(base(nil)); err != nil {
		t.Fatalf("empty table features: %v", err)
	}
	cases := []struct {
		name  string
		props string
		code  uint16
	}{
		{"unknown prop", "0009 0004 00000000", TFFCBadType},
		{"prop len 2", "0000 0002 00000000", TFFCBadLen},
		{"prop overrun", "0000 0010 00000000", TFFCBadLen},
		{"instruction id overrun", "0000 0008 0001 0008", TFFCBadLen},
		{"experimenter instruction id short", "0000 0008 ffff 0004", TFFCBadLen},
		{"oxm ids ragged", "0008 0006 8000 0000", TFFCBadLen},
		{"experimenter prop short", "fffe 0008 00000001", TFFCBadLen},
	}
	for _, c := range cases {
		wantErr(t, c.name, errOf(decodeBytes(base(mustHex(c.props)))), ETTableFeaturesFailed, c.code)
	}
	// Table features length not a multiple of 8.
	msg := base(nil)
	be.PutUint16(msg[16:], 60)
	wantErr(t, "features len", errOf(decodeBytes(msg)), ETTableFeaturesFailed, TFFCBadLen)
}

func TestDescStrings(t *testing.T) {
	long := string(bytes.Repeat([]byte("x"), 300))
	rep := &MultipartReply{Body: &DescReply{Manufacturer: long, SerialNum: long}}
	got := decodeAll(t, mustEncode(t, rep))[0].(*MultipartReply).Body.(*DescReply)
	if len(got.Manufacturer) != descStrLen-1 || len(got.SerialNum) != serialNumLen-1 {
		t.Errorf("truncation: %d %d", len(got.Manufacturer), len(got.SerialNum))
	}
	p := samplePort(1)
	p.Name = "a-very-long-interface-name"
	b := mustEncode(t, &PortStatus{Port: p})
	if got := decodeAll(t, b)[0].(*PortStatus).Port.Name; got != p.Name[:15] {
		t.Errorf("port name %q", got)
	}
}

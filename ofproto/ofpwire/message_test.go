package ofpwire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// decodeAll reads every message in b and merges multipart reply parts.
func decodeAll(t testing.TB, b []byte) []Message {
	t.Helper()
	var out []Message
	r := bytes.NewReader(b)
	buf := make([]byte, MaxMessageLen)
	for r.Len() > 0 {
		h, msg, err := ReadMessage(r, buf)
		if err != nil {
			t.Fatalf("ReadMessage: %v", err)
		}
		m, err := Decode(h, msg[HeaderLen:])
		if err != nil {
			t.Fatalf("Decode %v: %v (% x)", h.Type, err, msg)
		}
		if prev, ok := lastReply(out); ok && prev.More() {
			if err := prev.Merge(m.(*MultipartReply)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		out = append(out, m)
	}
	return out
}

func lastReply(ms []Message) (*MultipartReply, bool) {
	if len(ms) == 0 {
		return nil, false
	}
	r, ok := ms[len(ms)-1].(*MultipartReply)
	return r, ok
}

func TestRoundTripEveryMessage(t *testing.T) {
	seen := map[openflow.Type]bool{}
	for _, m := range sampleMessages() {
		b, err := Encode(0x01020304, m)
		if err != nil {
			t.Fatalf("Encode %T: %v", m, err)
		}
		if int(be.Uint16(b[2:])) != len(b) || b[0] != Version || b[1] != byte(m.MsgType()) ||
			be.Uint32(b[4:]) != 0x01020304 {
			t.Fatalf("%T: bad header % x", m, b[:8])
		}
		got := decodeAll(t, b)
		if len(got) != 1 || !reflect.DeepEqual(got[0], m) {
			t.Errorf("%T round trip:\n got %#v\nwant %#v", m, got[0], m)
		}
		seen[m.MsgType()] = true
	}
	for ty := openflow.TypeHello; ty <= openflow.TypeMeterMod; ty++ {
		if !seen[ty] {
			t.Errorf("no sample for %v", ty)
		}
	}
}

func TestEncodedLengthsAreAligned(t *testing.T) {
	// Every message that carries a match, actions or instructions must keep
	// them 8-byte aligned relative to the message start.
	for _, m := range sampleMessages() {
		switch m.(type) {
		case *FlowMod, *GroupMod, *MeterMod, *FlowRemoved:
			b, _ := Encode(1, m)
			if len(b)%8 != 0 {
				t.Errorf("%T: length %d not a multiple of 8", m, len(b))
			}
		}
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err)
	}
	return b
}

func TestGoldenBytes(t *testing.T) {
	cases := []struct {
		name string
		m    Message
		hex  string
	}{
		// OpenFlow 1.3 hello with a version bitmap for 1.0 and 1.3 (bits 1
		// and 4), as sent by Open vSwitch.
		{"hello", NewHello(1, 4), "04 00 0010 00000001  0001 0008 00000012"},
		{"echo", &EchoReply{Data: []byte{0xab}}, "04 03 0009 00000001 ab"},
		{"barrier", &BarrierReply{}, "04 15 0008 00000001"},
		{"features_reply", &FeaturesReply{DatapathID: 1, NumBuffers: 0, NumTables: 254,
			Capabilities: ofp.CapabilityFlowStats | ofp.CapabilityTableStats | ofp.CapabilityPortStats},
			"04 06 0020 00000001 0000000000000001 00000000 fe 00 0000 00000007 00000000"},
		{"set_config", &SetConfig{MissSendLength: 128}, "04 09 000c 00000001 0000 0080"},
		{"role_request", &RoleRequest{Role: ofp.ControllerRoleMaster, GenerationID: 5},
			"04 18 0018 00000001 00000002 00000000 0000000000000005"},
		// Flow mod: in_port=1, actions=output:2 (checked with ovs-ofctl
		// ofp-print: "OFPT_FLOW_MOD (OF1.3): ADD priority=100,in_port=1
		// actions=output:2").
		{"flow_mod", &FlowMod{Command: ofp.FlowAdd, Priority: 100, BufferID: NoBuffer,
			OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
			Match:        Match{Fields: []OXM{OXMUint(ofp.XMTypeInPort, 1)}},
			Instructions: []Instruction{&InstrApplyActions{Actions: []Action{&ActionOutput{Port: 2}}}}},
			"04 0e 0058 00000001 0000000000000000 0000000000000000 00 00 0000 0000 0064 ffffffff" +
				"ffffffff ffffffff 0000 0000  0001 000c 80000004 00000001 00000000" +
				"0004 0018 00000000 0000 0010 00000002 0000 000000000000"},
		{"error", &ErrorMsg{Type: ETBadRequest, Code: BRCBadType, Data: []byte{4, 0xff, 0, 8, 0, 0, 0, 9}},
			"04 01 0014 00000001 0001 0001 04ff000800000009"},
	}
	for _, c := range cases {
		b, err := Encode(1, c.m)
		if err != nil {
			t.Fatal(err)
		}
		if want := mustHex(c.hex); !bytes.Equal(b, want) {
			t.Errorf("%s:\n got % x\nwant % x", c.name, b, want)
		}
	}
}

func TestReadMessageFraming(t *testing.T) {
	// Length below the header: fatal, distinct from an OFP error.
	_, _, err := ReadMessage(bytes.NewReader(mustHex("04 02 0007 00000001")), nil)
	if !errors.Is(err, ErrFraming) {
		t.Fatalf("short length: got %v", err)
	}
	// Truncated body.
	_, _, err = ReadMessage(bytes.NewReader(mustHex("04 02 0010 00000001 0102")), nil)
	if err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated: got %v", err)
	}
	// Clean EOF between messages.
	if _, _, err = ReadMessage(bytes.NewReader(nil), nil); err != io.EOF {
		t.Fatalf("eof: got %v", err)
	}
	// Two messages back to back, buffer reused without allocation.
	stream := mustHex("04 02 000a 00000001 aabb 04 14 0008 00000002")
	r := bytes.NewReader(stream)
	buf := make([]byte, 0, MaxMessageLen)
	h, msg, err := ReadMessage(r, buf)
	if err != nil || h.Type != openflow.TypeEchoRequest || h.Transaction != 1 || !bytes.Equal(msg, stream[:10]) {
		t.Fatalf("first: %v %+v % x", err, h, msg)
	}
	if &msg[0] != &buf[:1][0] {
		t.Error("message not read into the caller's buffer")
	}
	h, msg, err = ReadMessage(r, buf)
	if err != nil || h.Type != openflow.TypeBarrierRequest || len(msg) != 8 {
		t.Fatalf("second: %v %+v", err, h)
	}
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(stream)
		ReadMessage(r, buf)
	})
	if allocs != 0 {
		t.Errorf("ReadMessage with a large buffer allocates %v times", allocs)
	}
}

// decodeHex decodes one message given as hex and returns Decode's error.
func decodeHex(t *testing.T, s string) error {
	t.Helper()
	h, msg, err := ReadMessage(bytes.NewReader(mustHex(s)), nil)
	if err != nil {
		t.Fatalf("ReadMessage(%s): %v", s, err)
	}
	_, err = Decode(h, msg[HeaderLen:])
	return err
}

func wantErr(t *testing.T, name string, err error, ty, code uint16) {
	t.Helper()
	var oe *OFPError
	if !errors.As(err, &oe) || oe.Type != ty || oe.Code != code {
		t.Errorf("%s: got %v, want %v/%d", name, err, ofp.ErrType(ty), code)
	}
}

func TestDecodeHeaderErrors(t *testing.T) {
	wantErr(t, "version", decodeHex(t, "03 02 0008 00000001"), ETBadRequest, BRCBadVersion)
	wantErr(t, "type", decodeHex(t, "04 1e 0008 00000001"), ETBadRequest, BRCBadType)
	wantErr(t, "type ff", decodeHex(t, "04 ff 0008 00000001"), ETBadRequest, BRCBadType)
	// Hello of another version is accepted: negotiation needs to see it.
	if err := decodeHex(t, "01 00 0008 00000001"); err != nil {
		t.Errorf("hello v1: %v", err)
	}
	// Header length disagreeing with the body handed to Decode.
	_, err := Decode(Header{Version: 4, Type: openflow.TypeEchoRequest, Length: 12}, []byte{1})
	wantErr(t, "length", err, ETBadRequest, BRCBadLen)
}

func TestDecodeBadLengths(t *testing.T) {
	cases := map[string]string{
		"features_request with body": "04 05 0009 00000001 00",
		"barrier with body":          "04 14 000c 00000001 00000000",
		"set_config short":           "04 09 000a 00000001 0000",
		"role_request short":         "04 18 0010 00000001 00000002 00000000",
		"set_async long":             "04 1c 0028 00000001" + strings.Repeat("00", 32),
		"error short":                "04 01 000a 00000001 0001",
		"experimenter short":         "04 04 000c 00000001 00002320",
		"port_mod short":             "04 10 0010 00000001 0000000100000000",
		"table_mod short":            "04 11 000c 00000001 01000000",
		"multipart short":            "04 12 000c 00000001 00000000",
		"packet_out actions_len":     "04 0d 0018 00000001 ffffffff fffffffd 0010 000000000000",
		"packet_out short":           "04 0d 0010 00000001 ffffffff fffffffd",
		"flow_mod short":             "04 0e 0020 00000001" + strings.Repeat("00", 24),
		"desc request with body":     "04 12 0014 00000001 0000 0000 00000000 00000000",
		"port stats request short":   "04 12 0014 00000001 0004 0000 00000000 00000001",
		"hello element overrun":      "04 00 0010 00000001 0001 0010 00000010",
		"hello bitmap odd":           "04 00 0010 00000001 0001 0006 00000000",
		"queue config request short": "04 16 000c 00000001 00000001",
		"meter_mod short":            "04 1d 000c 00000001 00000000",
		"group_mod short":            "04 0f 000c 00000001 00000000",
		"packet_in no pad":           "04 0a 0020 00000001 ffffffff 0000 00 00 0000000000000000 0001 0004 00000000",
	}
	for name, s := range cases {
		wantErr(t, name, decodeHex(t, s), ETBadRequest, BRCBadLen)
	}
}

func TestDecodeBadMultipart(t *testing.T) {
	wantErr(t, "request", decodeHex(t, "04 12 0010 00000001 000e 0000 00000000"), ETBadRequest, BRCBadMultipart)
	wantErr(t, "reply", decodeHex(t, "04 13 0010 00000001 fffe 0000 00000000"), ETBadRequest, BRCBadMultipart)
}

func TestDecodeModCommands(t *testing.T) {
	fm := "04 0e 0038 00000001 0000000000000000 0000000000000000 00 05 0000 0000 0000 ffffffff" +
		"ffffffff ffffffff 0000 0000 0001 0004 00000000"
	wantErr(t, "flow_mod command", decodeHex(t, fm), ETFlowModFailed, FMFCBadCommand)
	wantErr(t, "group_mod command", decodeHex(t, "04 0f 0010 00000001 0003 00 00 00000001"), ETGroupModFailed, GMFCBadCommand)
	wantErr(t, "group_mod type", decodeHex(t, "04 0f 0010 00000001 0000 04 00 00000001"), ETGroupModFailed, GMFCBadType)
	wantErr(t, "meter_mod command", decodeHex(t, "04 1d 0010 00000001 0003 0001 00000001"), ETMeterModFailed, MMFCBadCommand)
}

func TestDecodeBucketsAndBands(t *testing.T) {
	// Bucket length below its header.
	wantErr(t, "bucket len", decodeHex(t, "04 0f 0018 00000001 0000 00 00 00000001 0008 0000 00000000 00000000"),
		ETGroupModFailed, GMFCBadBucket)
	// Bucket with an action of unknown type.
	wantErr(t, "bucket action", decodeHex(t, "04 0f 0028 00000001 0000 00 00 00000001 0018 0000 ffffffff ffffffff 00000000 0063 0008 00000000"),
		ETBadAction, BACBadType)
	// Meter band of unknown type, and drop band with the wrong length.
	wantErr(t, "band type", decodeHex(t, "04 1d 0020 00000001 0000 0001 00000001 0003 0010 00000001 00000001 00000000"),
		ETMeterModFailed, MMFCBadBand)
	wantErr(t, "band len", decodeHex(t, "04 1d 0028 00000001 0000 0001 00000001 0001 0018 00000001 00000001 00000000 0000000000000000"),
		ETMeterModFailed, MMFCBadBand)
}

func TestErrorMessage(t *testing.T) {
	offending := append(mustHex("04 0e 0050 00000007"), make([]byte, 72)...)
	b := ErrorMessage(7, newErr(ETBadMatch, BMCDupField), offending)
	h, msg, err := ReadMessage(bytes.NewReader(b), nil)
	if err != nil || h.Type != openflow.TypeError || h.Transaction != 7 {
		t.Fatalf("%v %+v", err, h)
	}
	m, err := Decode(h, msg[HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	e := m.(*ErrorMsg)
	if e.Type != ETBadMatch || e.Code != BMCDupField || !bytes.Equal(e.Data, offending[:64]) {
		t.Errorf("got %+v", e)
	}
	if !errors.Is(e.Err(), &OFPError{Type: ETBadMatch, Code: BMCDupField}) {
		t.Error("Err() does not compare equal")
	}
	// Non-OpenFlow errors become BAD_REQUEST/EPERM; short messages are kept whole.
	b = ErrorMessage(8, io.ErrUnexpectedEOF, offending[:8])
	m = decodeAll(t, b)[0]
	if e := m.(*ErrorMsg); e.Type != ETBadRequest || e.Code != BRCEperm || len(e.Data) != 8 {
		t.Errorf("got %+v", e)
	}
}

func TestErrorConstantsMatchSpec(t *testing.T) {
	// Values from the OpenFlow 1.3.5 specification, section 7.4.4.
	checks := []struct{ got, want uint16 }{
		{ETHelloFailed, 0}, {ETBadRequest, 1}, {ETBadAction, 2}, {ETBadInstruction, 3},
		{ETBadMatch, 4}, {ETFlowModFailed, 5}, {ETGroupModFailed, 6}, {ETPortModFailed, 7},
		{ETTableModFailed, 8}, {ETQueueOpFailed, 9}, {ETSwitchConfigFailed, 10},
		{ETRoleRequestFailed, 11}, {ETMeterModFailed, 12}, {ETTableFeaturesFailed, 13},
		{ETExperimenter, 0xffff},
		{HFCEperm, 1}, {BRCBadVersion, 0}, {BRCBadType, 1}, {BRCBadMultipart, 2}, {BRCBadLen, 6},
		{BRCMultipartBufferOverflow, 13}, {BACBadType, 0}, {BACBadLen, 1}, {BACBadSetType, 13},
		{BACBadSetLen, 14}, {BACBadSetArgument, 15}, {BICUnknownInst, 0}, {BICBadLen, 7}, {BICEperm, 8},
		{BMCBadType, 0}, {BMCBadLen, 1}, {BMCBadWildcards, 5}, {BMCBadField, 6}, {BMCBadValue, 7},
		{BMCBadMask, 8}, {BMCBadPrereq, 9}, {BMCDupField, 10}, {BMCEperm, 11},
		{FMFCBadCommand, 6}, {FMFCBadFlags, 7}, {GMFCBadBucket, 12}, {GMFCEperm, 14},
		{PMFCEperm, 4}, {TMFCEperm, 2}, {QOFCEperm, 2}, {SCFCEperm, 2}, {RRFCBadRole, 2},
		{MMFCBadBand, 8}, {MMFCOutOfBands, 11}, {TFFCBadLen, 3}, {TFFCEperm, 5},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("check %d: got %d want %d", i, c.got, c.want)
		}
	}
}

func TestHelloVersions(t *testing.T) {
	h := NewHello(1, 4, 33)
	if !h.Supports(4) || !h.Supports(1) || !h.Supports(33) || h.Supports(5) || h.Supports(200) {
		t.Errorf("Supports wrong for %v", h.VersionBitmap)
	}
	// Unknown elements are skipped; a missing final padding is tolerated.
	m := decodeAll(t, mustHex("04 00 0018 00000001 0063 0008 00000000 0001 0008 00000010"))[0].(*Hello)
	if !m.Supports(4) {
		t.Errorf("bitmap after unknown element lost: %v", m.VersionBitmap)
	}
	m = decodeAll(t, mustHex("04 00 0014 00000001 0001 000c 00000010 00000001"))[0].(*Hello)
	if !reflect.DeepEqual(m.VersionBitmap, []uint32{0x10, 1}) {
		t.Errorf("two-word bitmap: %v", m.VersionBitmap)
	}
}

func TestEncodeRejectsOversize(t *testing.T) {
	if _, err := Encode(1, &EchoRequest{Data: make([]byte, MaxMessageLen)}); err == nil {
		t.Error("oversized echo encoded")
	}
	if _, err := Encode(1, &MultipartRequest{}); err == nil {
		t.Error("multipart request without body encoded")
	}
}

// TestConcurrentFixedDecode: netrack's decoders write padding into shared
// variables; decoding on several connections at once must not race.
func TestConcurrentFixedDecode(t *testing.T) {
	raw, err := Encode(7, &MultipartRequest{Body: &PortStatsRequest{PortNo: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				h, body, err := ReadMessage(bytes.NewReader(raw), nil)
				if err == nil {
					_, err = Decode(h, body[HeaderLen:])
				}
				if err != nil {
					t.Error(err)
					return
				}
				Encode(1, &MultipartRequest{Body: &PortStatsRequest{PortNo: 2}})
			}
		}()
	}
	wg.Wait()
}

// TestErrorMessageReason: an error with a reason carries the whole request
// (its header's length marks the end) and then the reason; ErrorReason
// finds it, and finds nothing in a plain error's data.
func TestErrorMessageReason(t *testing.T) {
	offending := append(mustHex("04 0e 0050 00000007"), make([]byte, 72)...)
	b := ErrorMessage(7, &OFPError{Type: ETFlowModFailed, Code: FMFCUnknown, Reason: "no space left on device"}, offending)
	h, msg, err := ReadMessage(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(h, msg[HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	e := m.(*ErrorMsg)
	if !bytes.Equal(e.Data[:len(offending)], offending) || ErrorReason(e.Data) != "no space left on device" {
		t.Fatalf("data %q", e.Data)
	}
	plain := ErrorMessage(8, newErr(ETBadMatch, BMCDupField), offending)
	h, msg, _ = ReadMessage(bytes.NewReader(plain), nil)
	m, _ = Decode(h, msg[HeaderLen:])
	if r := ErrorReason(m.(*ErrorMsg).Data); r != "" {
		t.Fatalf("reason %q in a plain error", r)
	}
	if r := ErrorReason(append(mustHex("04 0e 0008 00000007"), 0xff, 0x00)); r != "" {
		t.Fatalf("binary bytes taken for a reason: %q", r)
	}
}

func FuzzErrorReason(f *testing.F) {
	f.Add(append(mustHex("04 0e 0008 00000007"), "disk full"...))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := ErrorReason(data)
		if r != "" && !bytes.HasSuffix(data, []byte(r)) {
			t.Fatalf("reason %q not the data's tail", r)
		}
	})
}

// TestOFPErrorText: errors print the spec's names (type/code) and, for
// the common codes, what is wrong; never the Go identifiers of a library.
func TestOFPErrorText(t *testing.T) {
	for _, c := range []struct {
		typ, code uint16
		want      string
	}{
		{ETBadMatch, BMCBadPrereq, "OFPET_BAD_MATCH/OFPBMC_BAD_PREREQ: a match field lacks its prerequisite"},
		{ETBadAction, BACBadOutPort, "OFPET_BAD_ACTION/OFPBAC_BAD_OUT_PORT: output to a port that does not exist"},
		{ETFlowModFailed, FMFCTableFull, "OFPET_FLOW_MOD_FAILED/OFPFMFC_TABLE_FULL: the flow table is full"},
		{ETBadRequest, BRCMultipartBufferOverflow, "OFPET_BAD_REQUEST/OFPBRC_MULTIPART_BUFFER_OVERFLOW"},
		{ETBadAction, 99, "OFPET_BAD_ACTION/OFPBAC_99"},
		{77, 3, "OFPET_77/3"},
	} {
		if got := (&OFPError{Type: c.typ, Code: c.code}).Error(); !strings.HasPrefix(got, c.want) {
			t.Errorf("OFPError{%d, %d} = %q, want %q...", c.typ, c.code, got, c.want)
		}
	}
	for typ := range errorTypes {
		for code := range errorTypes[typ].codes {
			got := (&OFPError{Type: uint16(typ), Code: uint16(code)}).Error()
			if !strings.HasPrefix(got, "OFPET_"+errorTypes[typ].name+"/"+errorTypes[typ].prefix+errorTypes[typ].codes[code]) {
				t.Errorf("type %d code %d prints %q", typ, code, got)
			}
		}
	}
	for name := range errorMeanings {
		found := false
		for _, et := range errorTypes {
			for _, c := range et.codes {
				found = found || et.prefix+c == name
			}
		}
		if !found {
			t.Errorf("errorMeanings describes %s, which is no error code", name)
		}
	}
}

// TestAppendEncode: messages appended to one buffer are the bytes Encode
// gives each, back to back.
func TestAppendEncode(t *testing.T) {
	var want, got []byte
	for i, m := range sampleMessages() {
		if _, ok := m.(*MultipartReply); ok {
			if _, err := AppendEncode(nil, 1, m); err == nil {
				t.Error("a multipart reply was appended")
			}
			continue
		}
		b, err := Encode(uint32(i), m)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, b...)
		if got, err = AppendEncode(got, uint32(i), m); err != nil {
			t.Fatalf("%T: %v", m, err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appended %d bytes differ from the %d Encode gives", len(got), len(want))
	}
}

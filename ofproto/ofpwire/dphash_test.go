package ofpwire

import (
	"encoding/hex"
	"testing"
)

// TestDPHashRecircIDWire: dp_hash and recirc_id travel as Open vSwitch
// sends them in every version, NXM_NX_DP_HASH (0x0001, 35, maskable) and
// NXM_NX_RECIRC_ID (0x0001, 36); dp_hash also reads as the Nicira
// experimenter OXM NXOXM_ET_DP_HASH (ovs-ofctl's ofp-print test bytes), and
// recirc_id refuses a mask and values the datapath never allocates.
func TestDPHashRecircIDWire(t *testing.T) {
	m := Match{Fields: []OXM{
		OXMUint(XMTypeRecircID, 5),
		OXMUintMasked(XMTypeDPHash, 1, 0xf),
	}}
	b, err := appendMatch(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	want := "0001" + "0018" + "00014804" + "00000005" + "00014708" + "00000001" + "0000000f"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encoding\n got %s\nwant %s", got, want)
	}
	back, _, err := parseMatch(b)
	if err != nil || len(back.Fields) != 2 || back.Fields[0].Field != XMTypeRecircID || back.Fields[1].Field != XMTypeDPHash ||
		back.Fields[1].Uint() != 1 || back.Fields[1].MaskUint() != 0xf {
		t.Fatalf("round trip: %+v, %v", back, err)
	}

	exp, _ := hex.DecodeString("00010014" + "ffff010c" + "00002320" + "01234567" + "0fffffff" + "00000000")
	got, n, err := parseMatch(exp)
	if err != nil || n != len(exp) || len(got.Fields) != 1 {
		t.Fatalf("NXOXM_ET_DP_HASH_W: %+v (%d bytes), %v", got, n, err)
	}
	if o := got.Fields[0]; o.Field != XMTypeDPHash || o.Class != ClassNXM1 || o.Uint() != 0x01234567 || o.MaskUint() != 0x0fffffff {
		t.Fatalf("NXOXM_ET_DP_HASH_W decoded as %+v", o)
	}

	for name, h := range map[string]string{
		"recirc_id masked":   "00014908" + "00000005" + "ffffffff",
		"recirc_id 0x10000":  "00014804" + "00010000",
		"dp_hash bad length": "00014602" + "0001",
	} {
		body, _ := hex.DecodeString(h)
		if _, _, err := parseOXM(body); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestNwTOSField: NXM_OF_IP_TOS (0x0000, 5) names a field in move and
// load (it was refused as an unknown field): one byte, the ECN bits not
// the field's value.
func TestNwTOSField(t *testing.T) {
	f, err := fieldByHeader(0x00000a01)
	if err != nil || f != XMTypeNwTOS || FieldBits(f) != 8 {
		t.Fatalf("NXM_OF_IP_TOS: field %v, %v", f, err)
	}
	if h := OXMHeader(ClassNXM0, XMTypeNwTOS, false, 1); h != 0x00000a01 {
		t.Fatalf("header %#x, want 0x00000a01", h)
	}
	if _, _, err := parseOXM([]byte{0, 0, 0x0a, 1, 0x01}); err == nil {
		t.Error("nw_tos with ECN bits accepted")
	}
	if o, _, err := parseOXM([]byte{0, 0, 0x0a, 1, 0xb8}); err != nil || o.Field != XMTypeNwTOS || o.Uint() != 0xb8 {
		t.Errorf("nw_tos=184: %+v, %v", o, err)
	}
}

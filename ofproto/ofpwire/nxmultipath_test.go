package ofpwire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/netrack/openflow/ofp"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// Wire forms used below (hex, spaces ignored).
const (
	// multipath(symmetric_l4,1024,hrw,2,0,NXM_NX_REG0[0..1])
	hexMultipath = "ffff 0020 00002320 000a 0001 0400 0000 0002 0001 00000000 0000 0001 00010004"
	// bundle(eth_src,0,active_backup,ofport,members:1,2)
	hexBundle = "ffff 0028 00002320 000c 0000 0000 0000 00000002 0002 0000 00000000 00000000 0001 0002 00000000"
	// bundle_load(nw_src,7,hrw,ofport,NXM_NX_REG1[0..15],members:5,LOCAL,NONE)
	hexBundleLoad = "ffff 0028 00002320 000d 0001 0004 0007 00000002 0003 000f 00010204 00000000 0005 fffe ffff 0000"
)

func TestMultipathBundleDecode(t *testing.T) {
	cases := []struct {
		hex  string
		want Action
	}{
		{hexMultipath, &ActionMultipath{Fields: HashSymmetricL4, Basis: 1024, Algorithm: MultipathHRW, MaxLink: 1,
			Dst: XMTypeReg0, DstNBits: 2}},
		{hexBundle, &ActionBundle{Algorithm: BundleActiveBackup, Fields: HashEthSrc, Members: []ofp.PortNo{1, 2}}},
		{hexBundleLoad, &ActionBundle{Algorithm: BundleHRW, Fields: HashNwSrc, Basis: 7, Load: true,
			Dst: XMTypeReg0 + 1, DstNBits: 16, Members: []ofp.PortNo{5, PortLocal, PortAny}}},
	}
	for _, c := range cases {
		got := decodeActions(t, c.hex)
		if len(got) != 1 || !reflect.DeepEqual(got[0], c.want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.hex, got, c.want)
			continue
		}
		b, err := appendActions(nil, got)
		if err != nil || !bytes.Equal(b, mustHex(c.hex)) {
			t.Errorf("%T re-encodes as % x (%v), want %s", c.want, b, err, c.hex)
		}
	}
}

// TestMultipathBundleRoundTrip: every algorithm, field set and member
// count encodes and decodes back to itself, in OpenFlow 1.3 and 1.5.
func TestMultipathBundleRoundTrip(t *testing.T) {
	var acts []Action
	for f := HashEthSrc; f < numHashFields; f++ {
		for alg := MultipathModuloN; alg < numMultipathAlgs; alg++ {
			acts = append(acts, &ActionMultipath{Fields: f, Basis: uint16(f) * 77, Algorithm: alg, MaxLink: uint16(alg) * 5,
				Arg: uint32(alg) * 16, Dst: XMTypeReg0 + ofp.XMType(f), DstOfs: 3, DstNBits: 8})
		}
		for n := range 6 {
			m := make([]ofp.PortNo, n)
			for i := range m {
				m[i] = ofp.PortNo(i*3 + 1)
			}
			acts = append(acts, &ActionBundle{Algorithm: BundleAlgorithm(n % 2), Fields: f, Basis: uint16(n), Members: m})
			acts = append(acts, &ActionBundle{Algorithm: BundleAlgorithm(n % 2), Fields: f, Members: m, Load: true,
				Dst: XMTypeXXReg0 + 1, DstOfs: 100, DstNBits: 16})
		}
	}
	acts = append(acts, &ActionMultipath{Fields: HashSymmetricL3, Algorithm: MultipathIterHash, MaxLink: 0xffff,
		Dst: XMTypeReg0 + 3, DstNBits: 16})
	acts = append(acts, &ActionBundle{Algorithm: BundleHRW, Members: []ofp.PortNo{PortIn, PortNormal, PortFlood, PortAll,
		PortLocal, PortAny, 0xfeff}, Load: true, Dst: XMTypeInPort16, DstNBits: 16})
	for _, v := range []uint8{Version, Version15} {
		fm := &FlowMod{Command: ofp.FlowAdd, BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
			Instructions: []Instruction{&InstrApplyActions{Actions: acts}}}
		b, err := EncodeIn(v, 3, fm)
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		h, body, err := ReadMessage(bytes.NewReader(b), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Decode(h, body[HeaderLen:])
		if err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
		got := m.(*FlowMod).Instructions[0].(*InstrApplyActions).Actions
		if !reflect.DeepEqual(got, acts) {
			for i := range acts {
				if i >= len(got) || !reflect.DeepEqual(got[i], acts[i]) {
					t.Fatalf("version %d: action %d:\n got %#v\nwant %#v", v, i, got[i], acts[i])
				}
			}
			t.Fatalf("version %d: %d actions back, want %d", v, len(got), len(acts))
		}
	}
}

// TestMultipathBundleErrors: what Open vSwitch refuses, with its codes.
func TestMultipathBundleErrors(t *testing.T) {
	cases := []struct {
		name, hex string
		code      uint16
	}{
		{"multipath short", "ffff 0018 00002320 000a 0001 0400 0000 0002 0001 00000000", BACBadLen},
		{"multipath long", hexMultipath + "0000000000000000", BACBadLen},
		{"multipath unknown fields", "ffff 0020 00002320 000a 0007 0400 0000 0002 0001 00000000 0000 0001 00010004", BACBadArgument},
		{"multipath unknown algorithm", "ffff 0020 00002320 000a 0001 0400 0000 0004 0001 00000000 0000 0001 00010004", BACBadArgument},
		{"multipath 3 links in 1 bit", "ffff 0020 00002320 000a 0001 0400 0000 0002 0002 00000000 0000 0000 00010004", BACBadArgument},
		{"multipath 65536 links in 15 bits", "ffff 0020 00002320 000a 0001 0400 0000 0002 ffff 00000000 0000 000e 00010004", BACBadArgument},
		{"multipath unknown field", "ffff 0020 00002320 000a 0001 0400 0000 0002 0001 00000000 0000 0001 0001fe04", BACBadSetType},
		{"multipath beyond the field", "ffff 0020 00002320 000a 0001 0400 0000 0002 0001 00000000 0000 07c3 00010004", BACBadSetLen},
		{"multipath offset beyond the field", "ffff 0020 00002320 000a 0001 0400 0000 0002 0001 00000000 0000 0801 00010004", BACBadSetLen},
		{"bundle short", "ffff 0018 00002320 000c 0000 0000 0000 00000002 0000 0000 0000", BACBadLen},
		{"bundle members beyond the action", "ffff 0020 00002320 000c 0000 0000 0000 00000002 0001 0000 00000000 00000000", BACBadLen},
		{"bundle unknown fields", "ffff 0028 00002320 000c 0000 0009 0000 00000002 0002 0000 00000000 00000000 0001 0002 00000000", BACBadArgument},
		{"bundle unknown algorithm", "ffff 0028 00002320 000c 0002 0000 0000 00000002 0002 0000 00000000 00000000 0001 0002 00000000", BACBadArgument},
		{"bundle member type", "ffff 0028 00002320 000c 0000 0000 0000 00000004 0002 0000 00000000 00000000 0001 0002 00000000", BACBadArgument},
		{"bundle reserved bytes", "ffff 0028 00002320 000c 0000 0000 0000 00000002 0002 0000 00000000 00000001 0001 0002 00000000", BACBadArgument},
		{"bundle with a destination", "ffff 0028 00002320 000c 0000 0000 0000 00000002 0002 000f 00010004 00000000 0001 0002 00000000", BACBadArgument},
		{"bundle too many members", "ffff 0020 00002320 000c 0000 0000 0000 00000002 0801 0000 00000000 00000000", BACBadLen},
		{"bundle to CONTROLLER", "ffff 0028 00002320 000c 0000 0000 0000 00000002 0002 0000 00000000 00000000 0001 fffd 00000000", BACBadOutPort},
		{"bundle to a reserved number", "ffff 0028 00002320 000c 0000 0000 0000 00000002 0002 0000 00000000 00000000 0001 ff00 00000000", BACBadOutPort},
		{"bundle_load 8 bits", "ffff 0028 00002320 000d 0000 0000 0000 00000002 0002 0007 00010004 00000000 0001 0002 00000000", BACBadArgument},
		{"bundle_load unknown field", "ffff 0028 00002320 000d 0000 0000 0000 00000002 0002 000f 0001fe04 00000000 0001 0002 00000000", BACBadSetType},
		{"bundle_load beyond the field", "ffff 0028 00002320 000d 0000 0000 0000 00000002 0002 044f 00010004 00000000 0001 0002 00000000", BACBadSetLen},
	}
	for _, c := range cases {
		wantErr(t, c.name, errOf(decodeBytes(packetOutWithActions(c.hex))), ETBadAction, c.code)
	}
	for _, a := range []Action{
		&ActionMultipath{Dst: XMTypeReg0, DstOfs: 31, DstNBits: 2},
		&ActionMultipath{Dst: XMTypeReg0, DstNBits: 0},
		&ActionBundle{Load: true, Dst: XMTypeReg0, DstOfs: 20, DstNBits: 16},
		&ActionBundle{Members: []ofp.PortNo{0xff00}},
		&ActionBundle{Members: make([]ofp.PortNo, MaxBundleMembers+1)},
	} {
		if _, err := appendActions(nil, []Action{a}); err == nil {
			t.Errorf("%+v encoded", a)
		}
	}
}

// TestMultipathBundleFromOVS: the bytes ovs-ofctl 3.1 sends for these
// actions decode to what they say and encode back to the same bytes.
func TestMultipathBundleFromOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	for _, c := range []struct {
		text string
		want Action
	}{
		{"multipath(symmetric_l4,1024,hrw,2,0,NXM_NX_REG0[0..1])", decodeActions(t, hexMultipath)[0]},
		{"bundle(eth_src,0,active_backup,ofport,members:1,2)", decodeActions(t, hexBundle)[0]},
		{"bundle_load(nw_src,7,hrw,ofport,NXM_NX_REG1[0..15],slaves:5,LOCAL,NONE)", decodeActions(t, hexBundleLoad)[0]},
		{"multipath(symmetric_l3l4+udp,65535,iter_hash,1000,4096,NXM_NX_XXREG1[64..79])",
			&ActionMultipath{Fields: HashSymmetricL3L4UDP, Basis: 65535, Algorithm: MultipathIterHash, MaxLink: 999, Arg: 4096,
				Dst: XMTypeXXReg0 + 1, DstOfs: 64, DstNBits: 16}},
	} {
		for _, v := range []string{"OpenFlow13", "OpenFlow15"} {
			b := ovsSends(t, v, 14, "add-flow", "ip,actions="+c.text)
			h, body, err := ReadMessage(bytes.NewReader(b), nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := Decode(h, body[HeaderLen:])
			if err != nil {
				t.Fatalf("%s %s: %v", v, c.text, err)
			}
			acts := m.(*FlowMod).Instructions[0].(*InstrApplyActions).Actions
			if len(acts) != 1 || !reflect.DeepEqual(acts[0], c.want) {
				t.Fatalf("%s %s decodes as %#v, want %#v", v, c.text, acts, c.want)
			}
			again, err := appendActions(nil, acts)
			if err != nil || !bytes.Contains(b, again) {
				t.Errorf("%s %s: we encode % x (%v), ovs-ofctl sent\n% x", v, c.text, again, err, b)
			}
		}
	}
}

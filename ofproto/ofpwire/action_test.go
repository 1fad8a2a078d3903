package ofpwire

import (
	"bytes"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"
	"github.com/vswitch-go/vswitch/internal/nstest"
)

// packetOutWithActions wraps raw action bytes in a PACKET_OUT.
func packetOutWithActions(hexActs string) []byte {
	acts := mustHex(hexActs)
	msg := mustHex("04 0d 0000 00000001 ffffffff fffffffd 0000 000000000000")
	be.PutUint16(msg[16:], uint16(len(acts)))
	msg = append(msg, acts...)
	be.PutUint16(msg[2:], uint16(len(msg)))
	return msg
}

// flowModWithInstructions wraps raw instruction bytes in a FLOW_MOD.
func flowModWithInstructions(hexIns string) []byte {
	msg := append(flowModWithMatch(nil), mustHex(hexIns)...)
	be.PutUint16(msg[2:], uint16(len(msg)))
	return msg
}

func TestActionErrors(t *testing.T) {
	cases := []struct {
		name, hex string
		code      uint16
	}{
		{"unknown type", "0063 0008 00000000", BACBadType},
		{"type 1 (OF1.0 set_vlan)", "0001 0008 00000000", BACBadType},
		{"len 0", "0000 0000 00000000", BACBadLen},
		{"len 4", "0011 0004 00000000", BACBadLen},
		{"len not multiple of 8", "0000 000c 00000001 0000 0000", BACBadLen},
		{"len overruns", "0000 0018 00000001 0000 000000000000", BACBadLen},
		{"output len 8", "0000 0008 00000001", BACBadLen},
		{"pop_vlan len 16", "0012 0010 00000000 00000000 00000000", BACBadLen},
		{"trailing bytes", "0012 0008 00000000 0012", BACBadLen},
		{"experimenter short", "ffff 0004 00000000", BACBadLen},
		{"set_field masked", "0019 0010 80000d04 00010fff 00000000", BACBadSetArgument},
		{"set_field unknown field", "0019 0010 80005004 00000001 00000000", BACBadSetType},
		{"set_field unknown nicira field", "0019 0010 0001fe04 00000001 00000000", BACBadSetType},
		{"set_field action too long", "0019 0018 80000004 00000001 00000000 00000000 00000000", BACBadSetLen},
		{"set_field oxm len wrong", "0019 0010 80000003 00000100 00000000", BACBadSetLen},
		{"set_field oxm overruns", "0019 0008 80000004", BACBadSetLen},
		{"set_field value out of range", "0019 0010 80000e01 08000000 00000000", BACBadSetArgument},
		{"nat with both hash and random", "ffff 0010 00002320 0024 0000 0019 0000", BACBadArgument},
	}
	for _, c := range cases {
		wantErr(t, c.name, errOf(decodeBytes(packetOutWithActions(c.hex))), ETBadAction, c.code)
	}
}

func TestInstructionErrors(t *testing.T) {
	cases := []struct {
		name, hex string
		ty, code  uint16
	}{
		{"unknown", "0007 0008 00000000", ETBadInstruction, BICUnknownInst},
		{"type 0", "0000 0008 00000000", ETBadInstruction, BICUnknownInst},
		{"len 4", "0001 0004 00000000", ETBadInstruction, BICBadLen},
		{"len odd", "0004 000c 00000000 00000000", ETBadInstruction, BICBadLen},
		{"len overruns", "0004 0010 00000000", ETBadInstruction, BICBadLen},
		{"goto len 16", "0001 0010 01000000 00000000 00000000", ETBadInstruction, BICBadLen},
		{"write_metadata len 16", "0002 0010 00000000 00000000 00000001", ETBadInstruction, BICBadLen},
		{"clear len 16", "0005 0010 00000000 00000000 00000000", ETBadInstruction, BICBadLen},
		{"meter len 16", "0006 0010 00000001 00000000 00000000", ETBadInstruction, BICBadLen},
		{"partial header", "0001", ETBadInstruction, BICBadLen},
		{"apply with bad action", "0004 0010 00000000 0063 0008 00000000", ETBadAction, BACBadType},
		{"write with bad action len", "0003 0010 00000000 0000 0008 00000000", ETBadAction, BACBadLen},
	}
	for _, c := range cases {
		wantErr(t, c.name, errOf(decodeBytes(flowModWithInstructions(c.hex))), c.ty, c.code)
	}
}

func TestActionsRoundTripInPacketOut(t *testing.T) {
	for _, a := range allActions() {
		b := mustEncode(t, &PacketOut{BufferID: NoBuffer, Actions: []Action{a}})
		acts := decodeAll(t, b)[0].(*PacketOut).Actions
		if len(acts) != 1 || acts[0].ActionType() != a.ActionType() {
			t.Errorf("%T: got %v", a, acts)
		}
		if n := int(be.Uint16(b[16:])); n%8 != 0 {
			t.Errorf("%T: actions_len %d", a, n)
		}
	}
	if _, err := Encode(1, &PacketOut{Actions: []Action{nil}}); err == nil {
		t.Error("nil action encoded")
	}
	// Experimenter payload is padded to 8 bytes.
	b := mustEncode(t, &PacketOut{Actions: []Action{&ActionExperimenter{Experimenter: 1, Data: []byte{1, 2, 3}}}})
	if !strings.HasSuffix(string(b), "\x00\x00\x00\x01\x01\x02\x03\x00\x00\x00\x00\x00") || be.Uint16(b[26:]) != 16 {
		t.Errorf("experimenter encoding % x", b)
	}
}

// TestNXActionsRoundTrip: the Nicira actions decode to their typed forms
// and encode back to the same bytes; a masked set-field goes out as
// reg_load2, and reg_load reads as the masked set-field it is.
func TestNXActionsRoundTrip(t *testing.T) {
	acts := []Action{
		&ActionResubmit{InPort: PortIn, Table: 3},
		&ActionResubmit{InPort: 5, Table: TableCurrent, CT: true},
		&ActionRegMove{Src: ofp.XMTypeEthSrc, Dst: XMTypeReg0 + 2, SrcOfs: 16, DstOfs: 0, NBits: 32},
		&ActionSetField{Field: OXMUintMasked(XMTypeXReg0+1, 0x500, 0xff00)},
		&ActionSetField{Field: OXMUint(XMTypeReg0+15, 7)},
		&ActionNote{Note: []byte("ovn:1234")},
		&ActionExit{},
	}
	b := mustEncode(t, &PacketOut{BufferID: NoBuffer, Actions: acts})
	got := decodeAll(t, b)[0].(*PacketOut).Actions
	if len(got) != len(acts) || !reflect.DeepEqual(got[:5], acts[:5]) || !reflect.DeepEqual(got[6], acts[6]) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, acts)
	}
	// A note is padded; its bytes come back with the padding.
	if n := got[5].(*ActionNote).Note; string(n[:8]) != "ovn:1234" || len(n)%8 != 6 {
		t.Errorf("note %q", n)
	}
	// reg_load:0x5->NXM_NX_REG3[8..15] (ofs 8, 8 bits).
	load := "ffff 0018 00002320 0007 0207 00010604 0000000000000005"
	a := decodeActions(t, load)
	want := &ActionSetField{Field: OXMUintMasked(XMTypeReg0+3, 0x500, 0xff00)}
	if len(a) != 1 || !reflect.DeepEqual(a[0], want) {
		t.Errorf("reg_load: %#v", a)
	}
	for _, c := range []struct{ name, hex string }{
		{"reg_load value beyond its bits", "ffff 0018 00002320 0007 0207 00010604 0000000000000105"},
		{"reg_load beyond the field", "ffff 0018 00002320 0007 0f07 00010604 0000000000000005"},
		{"move from an unknown field", "ffff 0018 00002320 0006 0020 0000 0000 0001fe04 00010004"},
		{"move beyond the field", "ffff 0018 00002320 0006 0020 0008 0000 00010004 00010204"},
		{"resubmit padding", "ffff 0010 00002320 000e fff8 01 010000"},
	} {
		if _, err := decodeActionsErr(c.hex); err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// decodeActionsErr decodes an action list given in hex.
func decodeActionsErr(hexActs string) ([]Action, error) {
	return parseActions(mustHex(hexActs))
}

func decodeActions(t *testing.T, hexActs string) []Action {
	t.Helper()
	a, err := decodeActionsErr(hexActs)
	if err != nil {
		t.Fatalf("%s: %v", hexActs, err)
	}
	return a
}

// TestNXActionsIn15: in OpenFlow 1.5 move is copy_field and a masked write
// a masked set-field, at the top of an action list and inside ct's exec;
// they decode back to the same actions.
func TestNXActionsIn15(t *testing.T) {
	fm := &FlowMod{Command: ofp.FlowAdd, BufferID: NoBuffer, OutPort: ofp.PortAny, OutGroup: ofp.GroupAny,
		Instructions: []Instruction{&InstrApplyActions{Actions: []Action{
			&ActionRegMove{Src: XMTypeReg0, Dst: XMTypeReg0 + 1, NBits: 16},
			&ActionSetField{Field: OXMUintMasked(XMTypeReg0+2, 0x10, 0xf0)},
			&ActionCT{Flags: CTCommit, ZoneImm: 3, RecircTable: CTRecircNone, Actions: []Action{
				&ActionSetField{Field: OXMUintMasked(XMTypeCTMark, 0, 1)},
				&ActionRegMove{Src: XMTypeXXReg0, Dst: XMTypeCTLabel, DstOfs: 96, NBits: 32}}}}}}}
	// A 1.5 flow-mod is the 1.3 layout (importance in the padding) with
	// 1.5's actions: what a 1.5 controller sends.
	b13, err := Encode(9, fm)
	if err != nil {
		t.Fatal(err)
	}
	at := HeaderLen + 40 + roundUp8(int(be.Uint16(b13[HeaderLen+42:])))
	b := append(append([]byte(nil), b13[:at]...), instructionActions(b13[at:], actions13To15)...)
	b[0] = Version15
	putLen16(b, 2, len(b))
	for _, w := range [][]byte{
		{0, 28, 0, 24, 0, 16},               // copy_field of 16 bits
		{0, 25, 0, 16, 0, 1, 5, 8, 0, 0, 0}, // set_field NXM_NX_REG2, masked (value, mask 4+4)
		{0, 25, 0, 16, 0, 1, 0xd7, 8},       // set_field NXM_NX_CT_MARK, masked, inside ct
	} {
		if !bytes.Contains(b, w) {
			t.Errorf("1.5 encoding lacks % x:\n% x", w, b)
		}
	}
	if bytes.Contains(b, []byte{0, 0, 0x23, 0x20, 0, 6}) || bytes.Contains(b, []byte{0, 0, 0x23, 0x20, 0, 7}) {
		t.Errorf("1.5 encoding has reg_move or reg_load:\n% x", b)
	}
	h, body, err := ReadMessage(bytes.NewReader(b), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(h, body[HeaderLen:])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, fm) {
		t.Errorf("1.5 round trip:\n got %#v\nwant %#v", got, fm)
	}
}

// TestNXActionsFromOVS decodes learn and controller2 actions as
// ovs-ofctl 3.1 encodes them (NXM headers, NXAST_LEARN and NXAST_LEARN2,
// 16-bit properties padded inside their length) and encodes them back to
// actions that decode the same.
func TestNXActionsFromOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	for _, acts := range []string{
		"learn(table=1,hard_timeout=60,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[])",
		"learn(table=69,delete_learned,cookie=0x1234,OXM_OF_METADATA[],eth_type=0x800,NXM_OF_IP_SRC[],ip_dst=10.0.0.10,nw_proto=6,NXM_OF_TCP_SRC[]=NXM_OF_TCP_DST[],load:0x1->NXM_NX_REG10[7])",
		"learn(table=3,limit=10,result_dst=reg0[1],eth_dst=00:11:22:33:44:55,load:0xabcdef->NXM_NX_XXREG0[0..63])",
		"controller(userdata=01.02.03.04.05,max_len=128,id=7)",
	} {
		b := ovsFlowModBytes(t, "tcp,actions="+acts)
		h, body, err := ReadMessage(bytes.NewReader(b), nil)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := Decode(h, body[HeaderLen:])
		if err != nil {
			t.Fatalf("%s: %v", acts, err)
		}
		fm := msg.(*FlowMod)
		l, ok := fm.Instructions[0].(*InstrApplyActions).Actions[0].(*ActionLearn)
		c, isCtl := fm.Instructions[0].(*InstrApplyActions).Actions[0].(*ActionController)
		switch {
		case isCtl:
			if c.MaxLen != 128 || c.ControllerID != 7 || !bytes.Equal(c.Userdata, []byte{1, 2, 3, 4, 5}) {
				t.Fatalf("%s decoded as %+v", acts, c)
			}
		case !ok || len(l.Specs) == 0:
			t.Fatalf("%s decoded as %#v", acts, fm.Instructions[0])
		}
		if strings.HasPrefix(acts, "learn(table=1,") {
			want := []LearnSpec{{NBits: 48, SrcField: ofp.XMTypeEthSrc, Dst: LearnDstMatch, DstField: ofp.XMTypeEthDst},
				{NBits: 16, SrcField: XMTypeInPort16, Dst: LearnDstOutput}}
			if l.TableID != 1 || l.HardTimeout != 60 || l.Priority != 0x8000 || !reflect.DeepEqual(l.Specs, want) {
				t.Fatalf("%s decoded as %+v", acts, l)
			}
		}
		again, err := Encode(1, fm)
		if err != nil {
			t.Fatal(err)
		}
		h, body, _ = ReadMessage(bytes.NewReader(again), nil)
		back, err := Decode(h, body[HeaderLen:])
		if err != nil || !reflect.DeepEqual(back, msg) {
			t.Fatalf("%s: re-encoded learn decodes as %#v (%v), want %#v", acts, back, err, msg)
		}
	}
}

// ovsFlowModBytes is the OpenFlow 1.3 FLOW_MOD the real "ovs-ofctl
// add-flow" sends for flow.
func ovsFlowModBytes(t *testing.T, flow string) []byte {
	return ovsSends(t, "OpenFlow13", 14, "add-flow", flow)
}

// ovsSends is the message of type msgType the real "ovs-ofctl -O version
// cmd SWITCH arg" sends: a listener on a unix socket plays a switch with
// one table and no ports, and keeps that message.
func ovsSends(t *testing.T, version string, msgType uint8, cmd, arg string) []byte {
	t.Helper()
	v := map[string]uint8{"OpenFlow13": Version, "OpenFlow15": Version15}[version]
	sock := filepath.Join(t.TempDir(), "sw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	serve := func(c net.Conn) {
		defer c.Close()
		c.Write([]byte{v, 0, 0, 8, 0, 0, 0, 1}) // HELLO
		for {
			h, b, err := ReadMessage(c, nil)
			if err != nil {
				return
			}
			switch uint8(h.Type) {
			case msgType:
				got <- append([]byte(nil), b...)
			case 18: // MULTIPART_REQUEST: no ports; for table features, table 0 with its required properties empty
				if b[9] != 12 {
					c.Write([]byte{v, 19, 0, 16, b[4], b[5], b[6], b[7], b[8], b[9], 0, 0, 0, 0, 0, 0})
					continue
				}
				r := make([]byte, 16+64+8*8)
				copy(r, []byte{v, 19, 0, byte(len(r)), b[4], b[5], b[6], b[7], b[8], b[9]})
				r[17] = byte(len(r) - 16)
				for i := range 8 {
					r[80+8*i+1], r[80+8*i+3] = byte(2*i), 4
				}
				c.Write(r)
			case 20: // BARRIER_REQUEST
				c.Write([]byte{v, 21, 0, 8, b[4], b[5], b[6], b[7]})
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	out, err := exec.Command("timeout", "20", "ovs-ofctl", "-O", version, cmd, "unix:"+sock, arg).CombinedOutput()
	if err != nil {
		t.Fatalf("ovs-ofctl %s %s: %v\n%s", cmd, arg, err, out)
	}
	select {
	case b := <-got:
		return b
	default:
		t.Fatalf("ovs-ofctl %s %s sent no message of type %d", cmd, arg, msgType)
	}
	return nil
}

// TestGroupSelectionFromOVS decodes the selection_method property of the
// 1.5 group-mods ovs-ofctl (like OVN's load balancers) sends.
func TestGroupSelectionFromOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	for _, c := range []struct {
		group  string
		method string
		fields []ofp.XMType
	}{
		{"group_id=1,type=select,selection_method=dp_hash,bucket=bucket_id:0,weight:100,actions=output:1,bucket=bucket_id:1,weight:100,actions=output:2", "dp_hash", nil},
		{"group_id=2,type=select,selection_method=hash,fields(ip_src,tcp_dst),bucket=actions=output:1", "hash", []ofp.XMType{ofp.XMTypeIPv4Src, ofp.XMTypeTCPDst}},
	} {
		b := ovsSends(t, "OpenFlow15", 15, "add-group", c.group)
		h, body, err := ReadMessage(bytes.NewReader(b), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Decode(h, body[HeaderLen:])
		if err != nil {
			t.Fatalf("%s: %v", c.group, err)
		}
		gm := m.(*GroupMod)
		if gm.Selection == nil || gm.Selection.Method != c.method || len(gm.Selection.Fields) != len(c.fields) {
			t.Fatalf("%s: selection %+v", c.group, gm.Selection)
		}
		for i, f := range c.fields {
			if o := gm.Selection.Fields[i]; o.Field != f {
				t.Errorf("%s: field %d is %v, want %v", c.group, i, o.Field, f)
			}
		}
	}
}

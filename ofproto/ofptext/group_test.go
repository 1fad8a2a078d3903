package ofptext

import (
	"bytes"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

var groupCorpus = []string{
	"group_id=1,type=select,bucket=weight:10,actions=output:1,bucket=weight:20,watch_port:3,actions=output:2",
	"group_id=2,type=ff,bucket=watch_port:1,watch_group:5,actions=output:1,bucket=watch_port:2,actions=output:2",
	"group_id=3,type=all",
	"group_id=4,type=indirect,bucket=actions=push_vlan:0x8100,set_field:4099->vlan_vid,output:3",
	"group_id=5,type=all,bucket=output:1,bucket=output:2,bucket=actions=drop",
	"group_id=6,type=select,bucket=weight=3,output:LOCAL,bucket=mod_dl_dst:00:00:00:00:00:07,output:4",
	"group_id=7 type=all bucket=actions=group:1",
	"group_id=8,type=all,bucket=mod_vlan_vid:5,output:2,bucket=mod_vlan_pcp:3,output:3",
}

func encodeMsg(t testing.TB, m ofpwire.Message) []byte {
	t.Helper()
	b, err := ofpwire.Encode(1, m)
	if err != nil {
		t.Fatalf("encode %+v: %v", m, err)
	}
	return b
}

// TestGroupAgainstOVS has ovs-ofctl print our GROUP_MOD of each corpus
// group and checks it equals ovs-ofctl's own parse of the text, and that
// FormatGroupMod prints what ovs-ofctl prints.
func TestGroupAgainstOVS(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	line := func(out []byte) string {
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, " ADD ") {
				return strings.TrimPrefix(l, " ADD ")
			}
		}
		t.Fatalf("no group mod in:\n%s", out)
		return ""
	}
	for _, s := range groupCorpus {
		gm, err := ParseGroup(s, ofpwire.GroupAdd, ParseFlowOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ours, err := exec.Command("ovs-ofctl", "ofp-print", hex.EncodeToString(encodeMsg(t, gm))).CombinedOutput()
		if err != nil {
			t.Fatalf("ofp-print: %v\n%s", err, ours)
		}
		theirs, err := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "parse-group", s).CombinedOutput()
		if err != nil {
			t.Fatalf("parse-group %q: %v\n%s", s, err, theirs)
		}
		if line(ours) != line(theirs) {
			t.Errorf("%q:\n ours %s\n ovs  %s", s, line(ours), line(theirs))
		}
		if got := FormatGroupMod(gm); got != line(ours) {
			t.Errorf("%q: FormatGroupMod %q, ovs-ofctl prints %q", s, got, line(ours))
		}
	}
}

func TestGroupRoundTripAndErrors(t *testing.T) {
	for _, s := range groupCorpus {
		for _, cmd := range []ofpwire.GroupCommand{ofpwire.GroupAdd, ofpwire.GroupModify} {
			gm, err := ParseGroup(s, cmd, ParseFlowOptions{})
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseGroup(FormatGroupMod(gm), cmd, ParseFlowOptions{})
			if err != nil || !bytes.Equal(encodeMsg(t, gm), encodeMsg(t, back)) {
				t.Fatalf("%q printed as %q: %v", s, FormatGroupMod(gm), err)
			}
		}
	}
	gm, err := ParseGroup("", ofpwire.GroupDelete, ParseFlowOptions{})
	if err != nil || gm.GroupID != ofpwire.GroupAll {
		t.Fatalf("delete all: %+v %v", gm, err)
	}
	gm, err = ParseGroup("group_id=9", ofpwire.GroupDelete, ParseFlowOptions{})
	if err != nil || gm.GroupID != 9 || FormatGroupMod(gm) != "group_id=9" {
		t.Fatalf("delete 9: %+v %v", gm, err)
	}
	ports := ParseFlowOptions{PortByName: func(n string) (uint32, bool) { return 7, n == "veth1" }}
	gm, err = ParseGroup("group_id=1,type=ff,bucket=watch_port:veth1,actions=veth1", ofpwire.GroupAdd, ports)
	if err != nil || gm.Buckets[0].WatchPort != 7 || gm.Buckets[0].Actions[0].(*ofpwire.ActionOutput).Port != 7 {
		t.Fatalf("port names: %+v %v", gm, err)
	}
	for _, c := range []struct {
		s   string
		cmd ofpwire.GroupCommand
		msg string
	}{
		{"type=all", ofpwire.GroupAdd, "group_id"},
		{"group_id=1", ofpwire.GroupAdd, "type"},
		{"group_id=1,type=weird", ofpwire.GroupAdd, "weird"},
		{"group_id=1,type=all,bucket=weight:3,actions=output:1", ofpwire.GroupAdd, "weights"},
		{"group_id=1,type=all,bucket=output:1,frob", ofpwire.GroupAdd, "frob"},
		{"group_id=1,bucket=output:1", ofpwire.GroupDelete, "not allowed"},
		{"group_id=all,type=all", ofpwire.GroupAdd, "all"},
		{"group_id=1,type=ff,bucket=watch_port:veth2,actions=output:1", ofpwire.GroupAdd, "veth2"},
		{"group_id=1,type=all,selection_method=hash", ofpwire.GroupAdd, "only for select groups"},
		{"group_id=1,type=select,selection_method=random", ofpwire.GroupAdd, "neither hash nor dp_hash"},
		{"group_id=1,type=select,fields=ip_src", ofpwire.GroupAdd, "need a selection_method"},
		{"group_id=1,type=select,selection_method=hash,fields(ip_src,bogus)", ofpwire.GroupAdd, "bogus"},
	} {
		_, err := ParseGroup(c.s, c.cmd, ports)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseGroup(%q): %v, want an error about %q", c.s, err, c.msg)
		}
	}
}

var meterCorpus = []string{
	"meter=1,kbps,burst,band=type=drop,rate=1000,burst_size=100",
	"meter=2,pktps,stats,bands=type=dscp_remark,rate=10,prec_level=2,type=drop,rate=20",
	"meter=3 kbps burst stats bands=type=drop rate=5 burst_size=1",
	"meter=controller,pktps,band=type=drop,rate=100",
}

func TestMeterRoundTripAndErrors(t *testing.T) {
	for _, s := range meterCorpus {
		mm, err := ParseMeter(s, ofpwire.MeterAdd)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseMeter(FormatMeterMod(mm), ofpwire.MeterAdd)
		if err != nil || !bytes.Equal(encodeMsg(t, mm), encodeMsg(t, back)) {
			t.Fatalf("%q printed as %q: %v", s, FormatMeterMod(mm), err)
		}
		// dump-meters' multi-line text reads back too (burst sizes are
		// printed only with the burst flag, as ovs-ofctl does).
		mc := &ofpwire.MeterConfig{Flags: mm.Flags, MeterID: mm.MeterID, Bands: mm.Bands}
		back, err = ParseMeter(FormatMeter(mc), ofpwire.MeterAdd)
		if err != nil || (mm.Flags&ofpwire.MeterFlagBurst != 0 && !bytes.Equal(encodeMsg(t, mm), encodeMsg(t, back))) {
			t.Fatalf("%q dumped as %q: %v", s, FormatMeter(mc), err)
		}
	}
	mm, err := ParseMeter("meter=1,kbps,band=type=drop,rate=7", ofpwire.MeterAdd)
	if err != nil || mm.MeterID != 1 || mm.Flags != ofpwire.MeterFlagKBitPerSec || len(mm.Bands) != 1 ||
		mm.Bands[0].Type != ofpwire.MeterBandTypeDrop || mm.Bands[0].Rate != 7 {
		t.Fatalf("%+v %v", mm, err)
	}
	if mm, err := ParseMeter("", ofpwire.MeterDelete); err != nil || mm.MeterID != ofpwire.MeterAll {
		t.Fatalf("delete all: %+v %v", mm, err)
	}
	for _, c := range []struct {
		s   string
		cmd ofpwire.MeterCommand
		msg string
	}{
		{"kbps,band=type=drop,rate=1", ofpwire.MeterAdd, "meter"},
		{"meter=1,kbps", ofpwire.MeterAdd, "bands"},
		{"meter=0,kbps,band=type=drop,rate=1", ofpwire.MeterAdd, "meter id"},
		{"meter=1,kbps,band=rate=1", ofpwire.MeterAdd, "type"},
		{"meter=1,kbps,band=type=mark,rate=1", ofpwire.MeterAdd, "mark"},
		{"meter=1,kbps,band=type=drop,rate=1,prec_level=1", ofpwire.MeterAdd, "prec_level"},
		{"meter=1,fast,band=type=drop,rate=1", ofpwire.MeterAdd, "fast"},
		{"meter=1,band=type=drop,rate=1", ofpwire.MeterDelete, "not allowed"},
		{"meter=all,kbps,band=type=drop,rate=1", ofpwire.MeterAdd, "all"},
	} {
		_, err := ParseMeter(c.s, c.cmd)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseMeter(%q): %v, want an error about %q", c.s, err, c.msg)
		}
	}
}

func TestPacketOutAndPortNames(t *testing.T) {
	ports := ParseFlowOptions{PortByName: func(n string) (uint32, bool) {
		no, ok := map[string]uint32{"veth1": 1, "veth2": 2}[n]
		return no, ok
	}}
	po, err := ParsePacketOut("in_port=veth1 packet=ffffffffffff0000000000010800 actions=output:veth2,veth1", ports)
	if err != nil || po.InPort != 1 || len(po.Data) != 14 || len(po.Actions) != 2 ||
		po.Actions[1].(*ofpwire.ActionOutput).Port != 1 || po.BufferID != ofpwire.NoBuffer {
		t.Fatalf("%+v %v", po, err)
	}
	po, err = ParsePacketOut("packet=ffffffffffff0000000000010800,actions=drop", ParseFlowOptions{})
	if err != nil || po.InPort != ofpwire.PortController || len(po.Actions) != 0 {
		t.Fatalf("%+v %v", po, err)
	}
	for _, s := range []string{"in_port=1 actions=output:2", "in_port=1 packet=abc actions=output:2",
		"in_port=1 packet=00 actions=output:2", "in_port=veth9 packet=ffffffffffff0000000000010800 actions=drop",
		"packet=ffffffffffff0000000000010800"} {
		if _, err := ParsePacketOut(s, ports); err == nil {
			t.Errorf("ParsePacketOut(%q) accepted", s)
		}
	}

	fm, err := ParseFlowWith("in_port=veth1,actions=output:veth2,veth1,LOCAL", Add, ports)
	if err != nil {
		t.Fatal(err)
	}
	if got := FormatFlowMod(fm); got != "in_port=1 actions=output:2,output:1,LOCAL" {
		t.Fatalf("named flow prints %q", got)
	}
	if fm, err := ParseFlowWith("out_port=veth2", Delete, ports); err != nil || fm.OutPort != 2 {
		t.Fatalf("out_port=veth2: %+v %v", fm, err)
	}
	for _, s := range []string{"in_port=veth3,actions=drop", "actions=output:veth3", "actions=veth3"} {
		if _, err := ParseFlowWith(s, Add, ports); err == nil || !strings.Contains(err.Error(), `"veth3"`) {
			t.Errorf("%q: %v, want an error naming veth3", s, err)
		}
	}
	// Without a resolver names stay errors, as before.
	if _, err := ParseFlow("in_port=veth1,actions=drop", Add); err == nil {
		t.Fatal("name accepted without a resolver")
	}
}

func FuzzParseGroup(f *testing.F) {
	for _, s := range groupCorpus {
		f.Add(s, uint8(0))
	}
	f.Add("group_id=all", uint8(2))
	f.Fuzz(func(t *testing.T, s string, c uint8) {
		cmd := ofpwire.GroupCommand(c % 4)
		gm, err := ParseGroup(s, cmd, ParseFlowOptions{})
		if err != nil {
			return
		}
		b, err := ofpwire.Encode(1, gm)
		if err != nil {
			return // too many buckets for one message
		}
		back, err := ParseGroup(FormatGroupMod(gm), cmd, ParseFlowOptions{})
		if err != nil {
			t.Fatalf("%q printed as %q does not parse: %v", s, FormatGroupMod(gm), err)
		}
		if !bytes.Equal(b, encodeMsg(t, back)) {
			t.Fatalf("%q printed as %q parses differently", s, FormatGroupMod(gm))
		}
	})
}

func FuzzParseMeter(f *testing.F) {
	for _, s := range meterCorpus {
		f.Add(s, uint8(0))
	}
	f.Add("meter=5", uint8(2))
	f.Fuzz(func(t *testing.T, s string, c uint8) {
		cmd := ofpwire.MeterCommand(c % 4)
		mm, err := ParseMeter(s, cmd)
		if err != nil {
			return
		}
		b, err := ofpwire.Encode(1, mm)
		if err != nil {
			return
		}
		back, err := ParseMeter(FormatMeterMod(mm), cmd)
		if err != nil {
			t.Fatalf("%q printed as %q does not parse: %v", s, FormatMeterMod(mm), err)
		}
		if !bytes.Equal(b, encodeMsg(t, back)) {
			t.Fatalf("%q printed as %q parses differently", s, FormatMeterMod(mm))
		}
	})
}

func FuzzParsePacketOut(f *testing.F) {
	f.Add("in_port=1 packet=ffffffffffff0000000000010800 actions=output:2")
	f.Add("packet=ffffffffffff00000000000108000102 actions=drop")
	f.Fuzz(func(t *testing.T, s string) {
		po, err := ParsePacketOut(s, ParseFlowOptions{})
		if err != nil {
			return
		}
		if len(po.Data) < 14 {
			t.Fatalf("%q accepted with %d bytes of packet", s, len(po.Data))
		}
		if _, err := ofpwire.Encode(1, po); err != nil && len(po.Data) < 60000 {
			t.Fatalf("%q parsed but does not encode: %v", s, err)
		}
	})
}

// TestGroupSelectionText: selection_method, its parameter and fields read
// and print back as Open vSwitch writes them (1.5 syntax).
func TestGroupSelectionText(t *testing.T) {
	for _, s := range []string{
		"group_id=1,type=select,selection_method=dp_hash,bucket=actions=output:1",
		"group_id=2,type=select,selection_method=hash,selection_method_param=7,fields(ip_src,tcp_dst),bucket=actions=output:1",
		"group_id=3,type=select,selection_method=hash,fields=ip_dst=255.255.0.0,bucket=actions=output:1",
	} {
		gm, err := ParseGroup(s, ofpwire.GroupAdd, ParseFlowOptions{})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := FormatGroupMod(gm); got != s {
			t.Errorf("%s printed as %s", s, got)
		}
	}
}

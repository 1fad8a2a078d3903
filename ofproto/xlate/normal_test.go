package xlate

import (
	"slices"
	"testing"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func l2Key(in uint32, src, dst byte) flow.Key {
	return flow.Key{InPort: in, EthType: 0x0800,
		EthSrc: [6]byte{0, 0, 0, 0, 0, src}, EthDst: [6]byte{0, 0, 0, 0, 0, dst}}
}

func runNormal(t *testing.T, sw *normal.Switch, k flow.Key) datapath.UpcallResult {
	t.Helper()
	p := build(t, []flowSpec{{prio: 0, ins: ins(apply(out(uint32(ofpwire.PortNormal))))}})
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, Options{Normal: sw, Now: t0}); err != nil {
		t.Fatal(err)
	}
	return res
}

func TestNormalUnsupportedWithoutSwitch(t *testing.T) {
	p := build(t, []flowSpec{{prio: 0, ins: ins(apply(out(uint32(ofpwire.PortNormal))))}})
	k := l2Key(1, 1, 2)
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, Options{}); err == nil {
		t.Fatal("NORMAL without a switch translated")
	}
}

func TestNormalFloodThenLearnedUnicast(t *testing.T) {
	sw := normal.New(normal.Options{})
	sw.SetPorts([]normal.PortConfig{{No: 1}, {No: 2}, {No: 3}})
	// 1 -> unknown 2: flood to 2 and 3.
	res := runNormal(t, sw, l2Key(1, 0xa, 0xb))
	if want := (actions.List{dpOut(2), dpOut(3)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("flood: got %v want %v", res.Actions, want)
	}
	m := res.Mask
	if m.InPort != ^uint32(0) || m.EthSrc != [6]byte{255, 255, 255, 255, 255, 255} ||
		m.EthDst != [6]byte{255, 255, 255, 255, 255, 255} ||
		m.VLAN[0].TPID&flow.TPIDPresent == 0 || m.VLAN[0].TCI&0x0fff != 0x0fff {
		t.Fatalf("mask misses NORMAL's fields: %+v", m)
	}
	// 0xb answers from port 2; then 0xa is known on port 1.
	runNormal(t, sw, l2Key(2, 0xb, 0xa))
	res = runNormal(t, sw, l2Key(3, 0xc, 0xa))
	if want := (actions.List{dpOut(1)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("unicast: got %v want %v", res.Actions, want)
	}
}

func TestNormalAccessTrunkTagging(t *testing.T) {
	sw := normal.New(normal.Options{})
	sw.SetPorts([]normal.PortConfig{
		{No: 1, Mode: normal.Access, Tag: 10},
		{No: 2, Mode: normal.Trunk},
		{No: 3, Mode: normal.Access, Tag: 10},
		{No: 4, Mode: normal.Trunk, Trunks: []uint16{20}},
	})
	// Untagged from access 1: trunk 2 gets a pushed tag, access 3 the
	// frame as it is, trunk 4 (not carrying 10) nothing; tag state is
	// restored before the untagged output and at the end.
	res := runNormal(t, sw, l2Key(1, 0xa, 0xff))
	push := actions.Action{Kind: actions.PushVLAN, Val16: 0x8100, Val16b: 10}
	pop := actions.Action{Kind: actions.PopVLAN}
	if want := (actions.List{push, dpOut(2), pop, dpOut(3)}); !slices.Equal(res.Actions, want) {
		t.Fatalf("from access: got %v want %v", res.Actions, want)
	}
	// Tagged VLAN 10 (PCP 5) from trunk 2: access ports get it popped and
	// the tag is pushed back whole afterwards, so TPID and PCP are masked.
	k := l2Key(2, 0xb, 0xff)
	k.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: 0xa00a}
	res = runNormal(t, sw, k)
	back := actions.Action{Kind: actions.PushVLAN, Val16: 0x8100, Val16b: 0xa00a}
	if want := (actions.List{pop, dpOut(1), dpOut(3), back}); !slices.Equal(res.Actions, want) {
		t.Fatalf("from trunk: got %v want %v", res.Actions, want)
	}
	if res.Mask.VLAN[0] != (flow.VLANTag{TPID: 0xffff, TCI: 0xffff}) {
		t.Fatalf("outer tag not fully masked: %+v", res.Mask.VLAN[0])
	}
	// Priority-tagged (VID 0) from access 1 to trunk 2: VID rewritten,
	// then restored.
	k = l2Key(1, 0xa, 0xb)
	k.VLAN[0] = flow.VLANTag{TPID: 0x8100, TCI: 0x6000}
	res = runNormal(t, sw, k)
	rw := actions.Action{Kind: actions.SetVLANTCI, Val16: 0x0fff, Val16b: 10}
	unrw := actions.Action{Kind: actions.SetVLANTCI, Val16: 0x0fff, Val16b: 0}
	if want := (actions.List{rw, dpOut(2), unrw}); !slices.Equal(res.Actions, want) {
		t.Fatalf("priority tagged: got %v want %v", res.Actions, want)
	}
	if res.Mask.VLAN[0].TCI&0xf000 != 0 {
		t.Fatalf("rewrite should not depend on PCP: %+v", res.Mask.VLAN[0])
	}
}

func TestNormalAfterSetFieldMasksOnlyOriginalBits(t *testing.T) {
	sw := normal.New(normal.Options{})
	sw.SetPorts([]normal.PortConfig{{No: 1}, {No: 2}})
	p := build(t, []flowSpec{{prio: 0, ins: ins(apply(
		setF(ofpwire.XMTypeEthDst, 0x0000000000bb), out(uint32(ofpwire.PortNormal))))}})
	k := l2Key(1, 0xa, 0xb)
	var res datapath.UpcallResult
	if err := Translate(p, &k, &res, Options{Normal: sw, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if res.Mask.EthDst != ([6]byte{}) {
		t.Fatalf("eth_dst was written before NORMAL read it, yet masked: %v", res.Mask.EthDst)
	}
	if res.Mask.EthSrc == ([6]byte{}) {
		t.Fatal("eth_src not masked")
	}
}

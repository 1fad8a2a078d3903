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

func configs(m map[uint32]ofpwire.PortConfig) func(uint32) ofpwire.PortConfig {
	return func(p uint32) ofpwire.PortConfig { return m[p] }
}

func TestPortConfigOutputs(t *testing.T) {
	ipv4 := oxm(ofpwire.XMTypeEthType, 0x0800)
	ctrl := &ofpwire.ActionOutput{Port: ofpwire.PortController, MaxLen: 0xffff}
	ttl1 := ipv4Key()
	ttl1.NwTTL = 1
	ports := []uint32{1, 2, 3, 4}
	cases := []struct {
		name  string
		flows []flowSpec
		key   flow.Key
		cfg   map[uint32]ofpwire.PortConfig
		flood []uint32
		want  actions.List
	}{
		{name: "FLOOD uses FloodPorts, not the in_port",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortFlood))))}},
			key:   ipv4Key(), flood: []uint32{1, 3}, want: actions.List{dpOut(3)}},
		{name: "ALL ignores FloodPorts",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortAll))))}},
			key:   ipv4Key(), flood: []uint32{3}, want: actions.List{dpOut(2), dpOut(3), dpOut(4)}},
		{name: "ALL and FLOOD skip NO_FWD and PORT_DOWN ports",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortAll)), out(uint32(ofpwire.PortFlood))))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{2: ofpwire.PortConfigNoFwd, 4: ofpwire.PortConfigDown},
			want: actions.List{dpOut(3), dpOut(3)}},
		{name: "output to a NO_FWD port is dropped",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(2), out(3)))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{2: ofpwire.PortConfigNoFwd}, want: actions.List{dpOut(3)}},
		{name: "output via the action set to a PORT_DOWN port is dropped",
			flows: []flowSpec{{0, 1, nil, ins(write(out(2)))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{2: ofpwire.PortConfigDown}, want: nil},
		{name: "IN_PORT to a NO_FWD in_port is dropped",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortIn)), out(2)))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{1: ofpwire.PortConfigNoFwd}, want: actions.List{dpOut(2)}},
		{name: "NO_RECV in_port drops everything",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(2), ctrl))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{1: ofpwire.PortConfigNoRcv}, want: nil},
		{name: "PORT_DOWN in_port drops everything",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(2)))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{1: ofpwire.PortConfigDown}, want: nil},
		{name: "NO_FWD in_port still receives",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(2)))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{1: ofpwire.PortConfigNoFwd}, want: actions.List{dpOut(2)}},
		{name: "NO_PACKET_IN in_port: controller output dropped",
			flows: []flowSpec{{0, 1, nil, ins(apply(ctrl, out(2)))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{1: ofpwire.PortConfigNoPacketIn}, want: actions.List{dpOut(2)}},
		{name: "NO_PACKET_IN on another port does not matter",
			flows: []flowSpec{{0, 1, nil, ins(apply(ctrl))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{2: ofpwire.PortConfigNoPacketIn},
			want: actions.List{{Kind: actions.Controller, Val32: ControllerArg(ofpwire.PacketInReasonAction, 0, 0xffff)}}},
		{name: "NO_PACKET_IN in_port: invalid TTL packet-in dropped",
			flows: []flowSpec{{0, 1, []ofpwire.OXM{ipv4}, ins(apply(&ofpwire.ActionDecNwTTL{}, out(2)))}},
			key:   ttl1, cfg: map[uint32]ofpwire.PortConfig{1: ofpwire.PortConfigNoPacketIn}, want: nil},
		{name: "LOCAL with NO_FWD is dropped",
			flows: []flowSpec{{0, 1, nil, ins(apply(out(uint32(ofpwire.PortLocal))))}},
			key:   ipv4Key(), cfg: map[uint32]ofpwire.PortConfig{4: ofpwire.PortConfigNoFwd}, want: nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := build(t, c.flows)
			opts := Options{Ports: ports, FloodPorts: c.flood, PortConfig: configs(c.cfg), LocalPort: 4}
			var res datapath.UpcallResult
			key := c.key
			if err := Translate(p, &key, &res, opts); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Actions, c.want) {
				t.Fatalf("got %v want %v", res.Actions, c.want)
			}
		})
	}
}

// A refused packet's megaflow must carry in_port, and so must every other
// port's while some port refuses: otherwise one port's megaflow would
// catch the other's packets. With no refusing port, in_port stays out of
// a mask that did not need it.
func TestPortConfigRecvMask(t *testing.T) {
	p := build(t, []flowSpec{{0, 1, []ofpwire.OXM{oxm(ofpwire.XMTypeEthType, 0x0800)}, nil}}) // matches, drops
	k := ipv4Key()
	for _, c := range []struct {
		name string
		cfg  map[uint32]ofpwire.PortConfig
		want uint32
	}{
		{"refusing in_port", map[uint32]ofpwire.PortConfig{1: ofpwire.PortConfigNoRcv}, ^uint32(0)},
		{"another port refuses", map[uint32]ofpwire.PortConfig{3: ofpwire.PortConfigDown}, ^uint32(0)},
		{"nobody refuses", map[uint32]ofpwire.PortConfig{2: ofpwire.PortConfigNoFwd | ofpwire.PortConfigNoPacketIn}, 0},
	} {
		var res datapath.UpcallResult
		if err := Translate(p, &k, &res, Options{Ports: []uint32{1, 2, 3}, PortConfig: configs(c.cfg)}); err != nil {
			t.Fatal(err)
		}
		if res.Mask.InPort != c.want {
			t.Errorf("%s: mask in_port %#x, want %#x", c.name, res.Mask.InPort, c.want)
		}
	}
}

func TestPortConfigNormal(t *testing.T) {
	sw := normal.New(normal.Options{})
	sw.SetPorts([]normal.PortConfig{{No: 1}, {No: 2}, {No: 3}, {No: 4}})
	p := build(t, []flowSpec{{prio: 0, ins: ins(apply(out(uint32(ofpwire.PortNormal))))}})
	cfg := map[uint32]ofpwire.PortConfig{3: ofpwire.PortConfigNoFwd}
	opts := Options{Normal: sw, Now: t0, Ports: []uint32{1, 2, 3, 4}, FloodPorts: []uint32{1, 2, 3},
		PortConfig: configs(cfg)}
	run := func(k flow.Key) actions.List {
		t.Helper()
		var res datapath.UpcallResult
		if err := Translate(p, &k, &res, opts); err != nil {
			t.Fatal(err)
		}
		return res.Actions
	}
	// Flood from 1: 3 is NO_FWD, 4 is NO_FLOOD.
	if got, want := run(l2Key(1, 0xa, 0xb)), (actions.List{dpOut(2)}); !slices.Equal(got, want) {
		t.Fatalf("flood: got %v want %v", got, want)
	}
	// A MAC learned on the NO_FLOOD port 4 is still reached by unicast.
	run(l2Key(4, 0xd, 0xa))
	if got, want := run(l2Key(1, 0xa, 0xd)), (actions.List{dpOut(4)}); !slices.Equal(got, want) {
		t.Fatalf("unicast to NO_FLOOD port: got %v want %v", got, want)
	}
	// A MAC learned on the NO_FWD port 3 is not.
	run(l2Key(3, 0xc, 0xa))
	if got := run(l2Key(1, 0xa, 0xc)); len(got) != 0 {
		t.Fatalf("unicast to NO_FWD port: got %v, want drop", got)
	}
	// NO_RECV on 2: NORMAL never runs, so 2's source is not learned.
	cfg[2] = ofpwire.PortConfigNoRcv
	if got := run(l2Key(2, 0xe, 0xa)); len(got) != 0 {
		t.Fatalf("from NO_RECV port: got %v, want drop", got)
	}
	for _, e := range sw.Entries(t0) {
		if e.MAC[5] == 0xe {
			t.Fatalf("a packet refused on receive was learned: %+v", e)
		}
	}
}

package ofproto

import (
	"bytes"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/normal"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// sync makes sure every message the bridge sent before now has been read
// by the client (a barrier round trip), returning what came in meanwhile.
func (c *client) sync() []ofpwire.Message {
	c.t.Helper()
	bx := c.send(&ofpwire.BarrierRequest{})
	var out []ofpwire.Message
	for {
		h, m := c.recv()
		if h.Transaction == bx {
			return out
		}
		out = append(out, m)
	}
}

// portStatus reads the next message, which must be a PORT_STATUS.
func (c *client) portStatus() *ofpwire.PortStatus {
	c.t.Helper()
	_, m := c.recv()
	ps, ok := m.(*ofpwire.PortStatus)
	if !ok {
		c.t.Fatalf("got %#v, want PORT_STATUS", m)
	}
	return ps
}

// drain returns what port p transmitted.
func drain(p *ring.Port) [][]byte {
	var got [][]byte
	p.Drain(0, func(fr []byte) { got = append(got, bytes.Clone(fr)) })
	return got
}

// inject sends f into port in and runs the PMD.
func (tb *testBridge) inject(in *ring.Port, f []byte) {
	in.Inject(0, f)
	for i := 0; i < 3; i++ {
		tb.dp.PMDs()[0].PollOnce()
	}
}

func portMod(no uint32, config, mask ofpwire.PortConfig) *ofpwire.PortMod {
	return &ofpwire.PortMod{PortNo: ofpwire.PortNo(no), HWAddr: make(net.HardwareAddr, 6), Config: config, Mask: mask}
}

func (tb *testBridge) portDesc(no uint32) ofpwire.Port {
	tb.c.t.Helper()
	pd := tb.c.multipart(&ofpwire.PortDescRequest{}).(*ofpwire.PortDescReply)
	for _, p := range pd.Ports {
		if uint32(p.PortNo) == no {
			return p
		}
	}
	tb.c.t.Fatalf("port %d not in PORT_DESC %+v", no, pd.Ports)
	return ofpwire.Port{}
}

func TestAddRemovePortSendsPortStatus(t *testing.T) {
	tb := newTestBridge(t)
	tb.c.sync()
	p3 := ring.New("r3", 1, 1, 64)
	hw := net.HardwareAddr{2, 0, 0, 0, 0, 0x33}
	if err := tb.br.AddPortWith(3, p3, PortOptions{Name: "uplink", HWAddr: hw}); err != nil {
		t.Fatal(err)
	}
	ps := tb.c.portStatus()
	if ps.Reason != ofpwire.PortReasonAdd || ps.Port.PortNo != 3 || ps.Port.Name != "uplink" ||
		!bytes.Equal(ps.Port.HWAddr, hw) || ps.Port.State != ofpwire.PortStateLive {
		t.Fatalf("port add: %+v", ps)
	}
	if d := tb.portDesc(3); d.Name != "uplink" || !bytes.Equal(d.HWAddr, hw) {
		t.Fatalf("PORT_DESC of port 3: %+v", d)
	}
	if err := tb.br.AddPort(3, ring.New("r3b", 1, 1, 64)); err == nil {
		t.Fatal("port 3 added twice")
	}

	// The new port takes part in forwarding at once: FLOOD reaches it.
	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortFlood}))
	tb.inject(tb.p1, frame())
	if n2, n3 := len(drain(tb.p2)), len(drain(p3)); n2 != 1 || n3 != 1 {
		t.Fatalf("flood reached port 2 %d and port 3 %d times", n2, n3)
	}

	if err := tb.br.RemovePort(3); err != nil {
		t.Fatal(err)
	}
	ps = tb.c.portStatus()
	if ps.Reason != ofpwire.PortReasonDelete || ps.Port.PortNo != 3 || ps.Port.Name != "uplink" {
		t.Fatalf("port delete: %+v", ps)
	}
	if tb.dp.Port(3) != nil {
		t.Fatal("port 3 still in the datapath")
	}
	if err := tb.br.RemovePort(3); err == nil {
		t.Fatal("removing a missing port succeeded")
	}
	tb.inject(tb.p1, frame())
	if n2 := len(drain(tb.p2)); n2 != 1 {
		t.Fatalf("flood after removal reached port 2 %d times", n2)
	}
}

func TestLinkChangeAndVanishedPortSendPortStatus(t *testing.T) {
	tb := newTestBridge(t)
	tb.c.sync()
	tb.p2.SetLinkUp(false)
	if !tb.br.checkPorts() {
		t.Fatal("link down not seen as a change")
	}
	ps := tb.c.portStatus()
	if ps.Reason != ofpwire.PortReasonModify || ps.Port.PortNo != 2 || ps.Port.State != ofpwire.PortStateLinkDown {
		t.Fatalf("link down: %+v", ps)
	}
	if tb.br.checkPorts() {
		t.Fatal("a tick without change reported one")
	}
	tb.p2.SetLinkUp(true)
	tb.br.checkPorts()
	if ps := tb.c.portStatus(); ps.Reason != ofpwire.PortReasonModify || ps.Port.State != ofpwire.PortStateLive {
		t.Fatalf("link up: %+v", ps)
	}

	// The datapath drops a port whose interface vanished; the daemon
	// relays that with PortGone.
	if err := tb.dp.RemovePort(2); err != nil {
		t.Fatal(err)
	}
	tb.br.PortGone(2)
	if ps := tb.c.portStatus(); ps.Reason != ofpwire.PortReasonDelete || ps.Port.PortNo != 2 {
		t.Fatalf("vanished port: %+v", ps)
	}
	tb.br.PortGone(2) // twice is harmless
	tb.br.PortGone(1) // still present: nothing
	if msgs := tb.c.sync(); len(msgs) != 0 {
		t.Fatalf("extra messages %#v", msgs)
	}
	// A port added to the datapath directly is noticed by housekeeping.
	if _, err := tb.dp.AddPort(4, ring.New("r4", 1, 1, 64)); err != nil {
		t.Fatal(err)
	}
	tb.br.checkPorts()
	if ps := tb.c.portStatus(); ps.Reason != ofpwire.PortReasonAdd || ps.Port.PortNo != 4 || ps.Port.Name != "r4" {
		t.Fatalf("adopted port: %+v", ps)
	}
}

func TestPortModErrors(t *testing.T) {
	tb := newTestBridge(t)
	tb.c.wantError(portMod(9, 0, ofpwire.PortConfigNoFwd), ofpwire.ETPortModFailed, ofpwire.PMFCBadPort)
	tb.c.wantError(portMod(uint32(ofpwire.PortLocal), 0, ofpwire.PortConfigNoFwd), ofpwire.ETPortModFailed, ofpwire.PMFCBadPort)
	bad := portMod(1, 0, ofpwire.PortConfigNoFwd)
	bad.HWAddr = net.HardwareAddr{2, 0, 0, 0, 0, 9}
	tb.c.wantError(bad, ofpwire.ETPortModFailed, ofpwire.PMFCBadHWAddr)
	tb.c.wantError(portMod(1, ofpwire.PortConfigNoSTP, ofpwire.PortConfigNoSTP), ofpwire.ETPortModFailed, ofpwire.PMFCBadConfig)
	tb.c.wantError(portMod(1, 0, 1<<12), ofpwire.ETPortModFailed, ofpwire.PMFCBadConfig)
	if c := tb.br.PortConfig(1); c != 0 {
		t.Fatalf("refused PORT_MODs left config %v", c)
	}

	// A port given an address must be addressed by it.
	hw := net.HardwareAddr{2, 0, 0, 0, 0, 0x33}
	if err := tb.br.AddPortWith(3, ring.New("r3", 1, 1, 64), PortOptions{HWAddr: hw}); err != nil {
		t.Fatal(err)
	}
	tb.c.wantError(portMod(3, 0, ofpwire.PortConfigNoFwd), ofpwire.ETPortModFailed, ofpwire.PMFCBadHWAddr)
	good := portMod(3, ofpwire.PortConfigNoFwd, ofpwire.PortConfigNoFwd)
	good.HWAddr = hw
	if r := tb.c.request(good); len(r) != 0 {
		t.Fatalf("PORT_MOD replies %#v", r)
	}
	if c := tb.br.PortConfig(3); c != ofpwire.PortConfigNoFwd {
		t.Fatalf("port 3 config %v", c)
	}
}

func TestPortModReportsConfig(t *testing.T) {
	tb := newTestBridge(t)
	tb.c.sync()
	// Bits outside the mask are ignored.
	tb.c.send(portMod(2, ofpwire.PortConfigNoFwd|ofpwire.PortConfigNoFlood, ofpwire.PortConfigNoFwd))
	ps := tb.c.portStatus()
	if ps.Reason != ofpwire.PortReasonModify || ps.Port.PortNo != 2 || ps.Port.Config != ofpwire.PortConfigNoFwd {
		t.Fatalf("PORT_STATUS after PORT_MOD: %+v", ps)
	}
	if d := tb.portDesc(2); d.Config != ofpwire.PortConfigNoFwd || d.State != ofpwire.PortStateLive {
		t.Fatalf("PORT_DESC %+v", d)
	}
	// PORT_DOWN: no longer live (also for fast-failover).
	tb.c.send(portMod(2, ofpwire.PortConfigDown, ofpwire.PortConfigDown))
	ps = tb.c.portStatus()
	if ps.Port.Config != ofpwire.PortConfigNoFwd|ofpwire.PortConfigDown || ps.Port.State != 0 {
		t.Fatalf("PORT_STATUS after PORT_DOWN: %+v", ps)
	}
	if tb.br.portLive(2) {
		t.Fatal("an administratively down port is live")
	}
	// A PORT_MOD that changes nothing announces nothing.
	tb.c.request(portMod(2, ofpwire.PortConfigDown, ofpwire.PortConfigDown))
	// The daemon's SetPortConfig replaces all bits.
	tb.br.SetPortConfig(2, ofpwire.PortConfigNoPacketIn|ofpwire.PortConfigNoSTP)
	if ps := tb.c.portStatus(); ps.Port.Config != ofpwire.PortConfigNoPacketIn {
		t.Fatalf("after SetPortConfig: %+v", ps)
	}
	if msgs := tb.c.sync(); len(msgs) != 0 {
		t.Fatalf("extra messages %#v", msgs)
	}
}

// TestPortModFlagsForwarding checks each flag's effect on packets through
// the datapath (translation implements them, the bridge feeds it).
func TestPortModFlagsForwarding(t *testing.T) {
	tb := newTestBridge(t)
	p3 := ring.New("r3", 1, 1, 64)
	if err := tb.br.AddPort(3, p3); err != nil {
		t.Fatal(err)
	}
	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: 2}))
	set := func(no uint32, bit ofpwire.PortConfig, on bool) {
		t.Helper()
		var c ofpwire.PortConfig
		if on {
			c = bit
		}
		if r := tb.c.request(portMod(no, c, bit)); len(r) != 0 {
			t.Fatalf("PORT_MOD replies %#v", r)
		}
	}
	through := func() int { tb.inject(tb.p1, frame()); return len(drain(tb.p2)) }
	if n := through(); n != 1 {
		t.Fatalf("baseline: %d frames", n)
	}
	for _, c := range []struct {
		name string
		port uint32
		bit  ofpwire.PortConfig
	}{
		{"no_fwd on the output", 2, ofpwire.PortConfigNoFwd},
		{"no_recv on the input", 1, ofpwire.PortConfigNoRcv},
		{"port_down on the output", 2, ofpwire.PortConfigDown},
		{"port_down on the input", 1, ofpwire.PortConfigDown},
	} {
		set(c.port, c.bit, true)
		if n := through(); n != 0 {
			t.Errorf("%s: %d frames forwarded", c.name, n)
		}
		set(c.port, c.bit, false)
		if n := through(); n != 1 {
			t.Errorf("%s cleared: %d frames", c.name, n)
		}
	}

	// no_flood: FLOOD and NORMAL's flood skip the port, ALL does not.
	set(2, ofpwire.PortConfigNoFlood, true)
	for _, c := range []struct {
		port         ofpwire.PortNo
		want2, want3 int
	}{{ofpwire.PortFlood, 0, 1}, {ofpwire.PortAll, 1, 1}, {ofpwire.PortNormal, 0, 1}} {
		tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: c.port}))
		tb.inject(tb.p1, frame())
		if n2, n3 := len(drain(tb.p2)), len(drain(p3)); n2 != c.want2 || n3 != c.want3 {
			t.Errorf("output %v with no_flood on port 2: port 2 got %d (want %d), port 3 %d (want %d)",
				c.port, n2, c.want2, n3, c.want3)
		}
	}
	set(2, ofpwire.PortConfigNoFlood, false)
	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortFlood}))
	tb.inject(tb.p1, frame())
	if n2 := len(drain(tb.p2)); n2 != 1 {
		t.Errorf("flood after no_flood cleared: port 2 got %d", n2)
	}
	drain(p3)

	// no_packet_in: a table miss from the port does not reach the
	// controller; one from another port does, and comes first.
	miss := &ofpwire.FlowMod{Command: ofpwire.FlowAdd, BufferID: ofpwire.NoBuffer, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny,
		Instructions: []ofpwire.Instruction{&ofpwire.InstrApplyActions{Actions: []ofpwire.Action{
			&ofpwire.ActionOutput{Port: ofpwire.PortController, MaxLen: ofpwire.ContentLenNoBuffer}}}}}
	tb.c.request(&ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll), BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny})
	tb.c.request(miss)
	set(1, ofpwire.PortConfigNoPacketIn, true)
	tb.inject(tb.p1, frame())
	tb.inject(tb.p2, frame())
	_, m := tb.c.recv()
	pi, ok := m.(*ofpwire.PacketIn)
	if !ok {
		t.Fatalf("got %#v, want PACKET_IN", m)
	}
	if o, _ := pi.Match.Field(ofpwire.XMTypeInPort); o.Uint() != 2 {
		t.Errorf("packet-in from port %d despite no_packet_in on port 1", o.Uint())
	}
}

func TestSetNormalPortVLANs(t *testing.T) {
	tb := newTestBridge(t)
	p3 := ring.New("r3", 1, 1, 64)
	// Configured before the port exists: applies when it is added.
	tb.br.SetNormalPort(normal.PortConfig{No: 3, Mode: normal.Access, Tag: 10})
	if err := tb.br.AddPort(3, p3); err != nil {
		t.Fatal(err)
	}
	fm := outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortNormal})
	fm.Match = ofpwire.Match{}
	tb.c.request(fm)
	// Ports 1 and 2 share VLAN 0; port 3 is alone on VLAN 10.
	tb.inject(tb.p1, frame())
	if n2, n3 := len(drain(tb.p2)), len(drain(p3)); n2 != 1 || n3 != 0 {
		t.Fatalf("VLAN 0 flood: port 2 %d, port 3 %d", n2, n3)
	}
	tb.br.SetNormalPort(normal.PortConfig{No: 3, Mode: normal.Access, Tag: 0})
	tb.inject(tb.p1, frame())
	if n2, n3 := len(drain(tb.p2)), len(drain(p3)); n2 != 1 || n3 != 1 {
		t.Fatalf("after moving port 3 to VLAN 0: port 2 %d, port 3 %d", n2, n3)
	}
	fdb := tb.br.FDB()
	if len(fdb) != 1 || fdb[0].Port != 1 || net.HardwareAddr(fdb[0].MAC[:]).String() != mac1.String() {
		t.Fatalf("FDB %+v", fdb)
	}
}

// TestOvsOfctlModPort drives PORT_MOD with the real ovs-ofctl, which looks
// the port up by name in PORT_DESC and quotes its hardware address.
func TestOvsOfctlModPort(t *testing.T) {
	tb := newTestBridge(t)
	target := "unix:" + tb.sock
	ovsOfctl(t, "mod-port", target, "r2", "no-forward")
	ovsOfctl(t, "mod-port", target, "1", "no-packet-in")
	if c1, c2 := tb.br.PortConfig(1), tb.br.PortConfig(2); c1 != ofpwire.PortConfigNoPacketIn || c2 != ofpwire.PortConfigNoFwd {
		t.Fatalf("configs after mod-port: port 1 %v, port 2 %v", c1, c2)
	}
	out := ovsOfctl(t, "dump-ports-desc", target)
	if !strings.Contains(out, "NO_FWD") || !strings.Contains(out, "NO_PACKET_IN") {
		t.Fatalf("dump-ports-desc:\n%s", out)
	}
	ovsOfctl(t, "mod-port", target, "r2", "forward")
	ovsOfctl(t, "mod-port", target, "r2", "down")
	if c := tb.br.PortConfig(2); c != ofpwire.PortConfigDown {
		t.Fatalf("port 2 config %v, want PORT_DOWN only", c)
	}
}

// TestBatchDefersNormal: ports added inside Batch reach NORMAL and the
// ports' view once, when it ends, not one by one; after it a broadcast
// floods to every port added.
func TestBatchDefersNormal(t *testing.T) {
	tb := newTestBridgeWith(t, func(*BridgeConfig) {}) // standalone: NORMAL
	var added []*ring.Port
	tb.br.Batch(func() {
		for no := uint32(3); no <= 5; no++ {
			p := ring.New(fmt.Sprintf("r%d", no), 1, 1, 64)
			added = append(added, p)
			if err := tb.br.AddPort(no, p); err != nil {
				t.Fatal(err)
			}
			tb.br.portMu.Lock()
			dirty := tb.br.portsDirty
			tb.br.portMu.Unlock()
			if !dirty {
				t.Fatal("inside Batch, a port add rebuilt NORMAL at once")
			}
		}
	})
	if got := len(tb.br.view.Load().all); got != 5 {
		t.Fatalf("the view has %d ports after Batch, want 5", got)
	}
	bcast := nstest.UDPFrame(net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, mac1,
		net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 255), 1000, 2000)
	tb.inject(tb.p1, bcast)
	for i, p := range append([]*ring.Port{tb.p2}, added...) {
		if got := drain(p); len(got) != 1 {
			t.Errorf("port %d got %d copies of the broadcast, want 1", i+2, len(got))
		}
	}
}

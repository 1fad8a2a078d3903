package ofproto

import (
	"bytes"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/datapath"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/ofproto/ofconn"
	"github.com/vswitch-go/vswitch/ofproto/ofmatch"
	"github.com/vswitch-go/vswitch/ofproto/ofptext"
	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
	"github.com/vswitch-go/vswitch/ofproto/xlate"
)

// client is a minimal OpenFlow 1.3 controller for the tests.
type client struct {
	t   *testing.T
	nc  net.Conn
	buf []byte
	xid uint32
}

func dial(t *testing.T, network, addr string) *client {
	t.Helper()
	var nc net.Conn
	var err error
	for i := 0; i < 100; i++ {
		if nc, err = net.Dial(network, addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &client{t: t, nc: nc, buf: make([]byte, 1<<16), xid: 100}
	c.send(ofpwire.NewHello(ofpwire.Version))
	if _, msg := c.recv(); msg == nil {
		t.Fatal("no hello")
	} else if _, ok := msg.(*ofpwire.Hello); !ok {
		t.Fatalf("first message %#v, want HELLO", msg)
	}
	return c
}

func (c *client) send(msg ofpwire.Message) uint32 {
	c.t.Helper()
	c.xid++
	raw, err := ofpwire.Encode(c.xid, msg)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(raw); err != nil {
		c.t.Fatal(err)
	}
	return c.xid
}

// recv returns the next message that is not an echo request.
func (c *client) recv() (ofpwire.Header, ofpwire.Message) {
	c.t.Helper()
	for {
		c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		h, raw, err := ofpwire.ReadMessage(c.nc, c.buf)
		if err != nil {
			c.t.Fatal(err)
		}
		msg, err := ofpwire.Decode(h, raw[ofpwire.HeaderLen:])
		if err != nil {
			c.t.Fatal(err)
		}
		if _, ok := msg.(*ofpwire.EchoRequest); ok {
			continue
		}
		return h, msg
	}
}

// request sends msg followed by a barrier and returns every message received
// for msg's xid before the barrier reply.
func (c *client) request(msg ofpwire.Message) []ofpwire.Message {
	c.t.Helper()
	xid := c.send(msg)
	bx := c.send(&ofpwire.BarrierRequest{})
	var out []ofpwire.Message
	for {
		h, m := c.recv()
		if h.Transaction == bx {
			return out
		}
		if h.Transaction == xid {
			out = append(out, m)
		}
	}
}

func (c *client) wantError(msg ofpwire.Message, typ, code uint16) {
	c.t.Helper()
	replies := c.request(msg)
	if len(replies) != 1 {
		c.t.Fatalf("%T: %d replies, want one ERROR", msg, len(replies))
	}
	e, ok := replies[0].(*ofpwire.ErrorMsg)
	if !ok || e.Type != typ || e.Code != code {
		c.t.Fatalf("%T: reply %#v, want error %d/%d", msg, replies[0], typ, code)
	}
}

func (c *client) multipart(body ofpwire.MultipartRequestBody) ofpwire.MultipartReplyBody {
	c.t.Helper()
	replies := c.request(&ofpwire.MultipartRequest{Body: body})
	if len(replies) == 0 {
		c.t.Fatalf("%T: no reply", body)
	}
	first, ok := replies[0].(*ofpwire.MultipartReply)
	if !ok {
		c.t.Fatalf("%T: reply %#v", body, replies[0])
	}
	for _, r := range replies[1:] {
		if err := first.Merge(r.(*ofpwire.MultipartReply)); err != nil {
			c.t.Fatal(err)
		}
	}
	return first.Body
}

type testBridge struct {
	br     *Bridge
	dp     *datapath.Datapath
	p1, p2 *ring.Port
	c      *client
	sock   string // the management socket's path
}

// newTestBridge builds a Manual datapath with ring ports 1 and 2, a secure
// bridge over it (the tests start from empty tables; standalone would add
// the NORMAL flow) and a client on its management socket.
func newTestBridge(t *testing.T) *testBridge {
	t.Helper()
	return newTestBridgeWith(t, func(c *BridgeConfig) { c.FailMode = FailSecure })
}

// newTestBridgeWith is newTestBridge with the bridge's configuration
// (standalone by default) edited by mod before NewBridge.
func newTestBridgeWith(t *testing.T, mod func(*BridgeConfig)) *testBridge {
	t.Helper()
	up := &UpcallAdapter{}
	dp, err := datapath.New(datapath.Config{Manual: true, Upcall: up, EMCInsertInvProb: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	tb := &testBridge{dp: dp, p1: ring.New("r1", 1, 1, 64), p2: ring.New("r2", 1, 1, 64)}
	if _, err := dp.AddPort(1, tb.p1); err != nil {
		t.Fatal(err)
	}
	if _, err := dp.AddPort(2, tb.p2); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "br.mgmt")
	tb.sock = sock
	cfg := BridgeConfig{DatapathID: 0x1234, ManagementTargets: []string{"punix:" + sock},
		Upcall: up, Conn: ofconn.Config{ProbeInterval: -1}}
	mod(&cfg)
	tb.br, err = NewBridge("br0", dp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.br.Close)
	tb.c = dial(t, "unix", sock)
	return tb
}

var (
	mac1 = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	mac2 = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

func frame() []byte {
	return nstest.UDPFrame(mac2, mac1, net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), 1000, 2000)
}

// forward injects f into port in, polls the datapath and returns what port
// out transmitted.
func (tb *testBridge) forward(in *ring.Port, out *ring.Port, f []byte) [][]byte {
	in.Inject(0, f)
	for i := 0; i < 3; i++ {
		tb.dp.PMDs()[0].PollOnce()
	}
	var got [][]byte
	out.Drain(0, func(fr []byte) { got = append(got, bytes.Clone(fr)) })
	return got
}

func outputFlow(inPort uint32, actions ...ofpwire.Action) *ofpwire.FlowMod {
	fm := &ofpwire.FlowMod{
		Command:  ofpwire.FlowAdd,
		Priority: 100,
		BufferID: ofpwire.NoBuffer,
		OutPort:  ofpwire.PortAny,
		OutGroup: ofpwire.GroupAny,
		Flags:    ofpwire.FlowFlagSendFlowRem,
		Instructions: []ofpwire.Instruction{
			&ofpwire.InstrApplyActions{Actions: actions},
		},
	}
	fm.Match.Add(ofpwire.OXMUint(ofpwire.XMTypeInPort, uint64(inPort)))
	return fm
}

func TestFlowModForwardsAndDeleteStops(t *testing.T) {
	tb := newTestBridge(t)
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatalf("empty table forwarded %d frames", len(got))
	}
	if r := tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: 2})); len(r) != 0 {
		t.Fatalf("flow-mod replies %#v", r)
	}
	got := tb.forward(tb.p1, tb.p2, frame())
	if len(got) != 1 || !bytes.Equal(got[0], frame()) {
		t.Fatalf("port 2 sent %d frames after in_port=1,output:2", len(got))
	}
	if got := tb.forward(tb.p2, tb.p1, frame()); len(got) != 0 {
		t.Fatal("in_port=2 forwarded without a flow")
	}

	fs := tb.c.multipart(&ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}).(*ofpwire.FlowStatsReply)
	if len(fs.Flows) != 1 || fs.Flows[0].Priority != 100 || fs.Flows[0].Flags != ofpwire.FlowFlagSendFlowRem {
		t.Fatalf("flow stats %+v", fs.Flows)
	}
	if o, ok := fs.Flows[0].Match.Field(ofpwire.XMTypeInPort); !ok || o.Uint() != 1 {
		t.Fatalf("flow stats match %+v", fs.Flows[0].Match)
	}
	agg := tb.c.multipart(&ofpwire.AggregateStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}).(*ofpwire.AggregateStatsReply)
	if agg.FlowCount != 1 {
		t.Fatalf("aggregate %+v", agg)
	}
	ts := tb.c.multipart(&ofpwire.TableStatsRequest{}).(*ofpwire.TableStatsReply)
	if len(ts.Tables) != NumTables || ts.Tables[0].ActiveCount != 1 || ts.Tables[0].LookupCount == 0 {
		t.Fatalf("table stats: %d tables, table 0 %+v", len(ts.Tables), ts.Tables[0])
	}

	del := &ofpwire.FlowMod{Command: ofpwire.FlowDelete, TableID: uint8(ofpwire.TableAll), BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
	tb.c.send(del)
	_, m := tb.c.recv()
	fr, ok := m.(*ofpwire.FlowRemoved)
	if !ok || fr.Reason != ofpwire.FlowReasonDelete || fr.Priority != 100 {
		t.Fatalf("after delete got %#v, want FLOW_REMOVED (delete)", m)
	}
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatalf("deleted flow still forwards (%d frames): megaflows not invalidated", len(got))
	}
}

func TestFlowModErrors(t *testing.T) {
	tb := newTestBridge(t)
	bad := outputFlow(1, &ofpwire.ActionOutput{Port: 2})
	bad.TableID = 5
	bad.Instructions = append(bad.Instructions, &ofpwire.InstrGotoTable{TableID: 3})
	tb.c.wantError(bad, ofpwire.ETBadInstruction, ofpwire.BICBadTableID)
	buffered := outputFlow(1, &ofpwire.ActionOutput{Port: 2})
	buffered.BufferID = 7
	tb.c.wantError(buffered, ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
	// The flow-mod still applied.
	if n := tb.br.Pipeline().TableStats(0).Active; n != 1 {
		t.Fatalf("table 0 holds %d entries after a buffered ADD, want 1", n)
	}
}

func TestReadRequests(t *testing.T) {
	tb := newTestBridge(t)
	tb.c.send(&ofpwire.FeaturesRequest{})
	_, m := tb.c.recv()
	f, ok := m.(*ofpwire.FeaturesReply)
	if !ok || f.DatapathID != 0x1234 || f.NumTables != 254 ||
		f.Capabilities != ofpwire.CapabilityFlowStats|ofpwire.CapabilityTableStats|ofpwire.CapabilityPortStats|ofpwire.CapabilityGroupStats|ofpwire.CapabilityQueueStats {
		t.Fatalf("features %#v", m)
	}
	desc := tb.c.multipart(&ofpwire.DescRequest{}).(*ofpwire.DescReply)
	if desc.Datapath != "br0" {
		t.Fatalf("desc %+v", desc)
	}
	pd := tb.c.multipart(&ofpwire.PortDescRequest{}).(*ofpwire.PortDescReply)
	if len(pd.Ports) != 2 || pd.Ports[0].PortNo != 1 || pd.Ports[0].Name != "r1" || pd.Ports[1].Name != "r2" ||
		pd.Ports[0].State != ofpwire.PortStateLive {
		t.Fatalf("port desc %+v", pd.Ports)
	}
	tb.p2.SetLinkUp(false)
	pd = tb.c.multipart(&ofpwire.PortDescRequest{}).(*ofpwire.PortDescReply)
	if pd.Ports[1].State != ofpwire.PortStateLinkDown {
		t.Fatalf("port 2 down: state %v", pd.Ports[1].State)
	}
	tb.p2.SetLinkUp(true)

	tb.c.request(outputFlow(1, &ofpwire.ActionOutput{Port: 2}))
	tb.forward(tb.p1, tb.p2, frame())
	tb.forward(tb.p1, tb.p2, frame())
	ps := tb.c.multipart(&ofpwire.PortStatsRequest{PortNo: ofpwire.PortAny}).(*ofpwire.PortStatsReply)
	if len(ps.Ports) != 2 || ps.Ports[0].RxPackets != 2 || ps.Ports[1].TxPackets != 2 {
		t.Fatalf("port stats %+v", ps.Ports)
	}
	ps = tb.c.multipart(&ofpwire.PortStatsRequest{PortNo: 2}).(*ofpwire.PortStatsReply)
	if len(ps.Ports) != 1 || ps.Ports[0].PortNo != 2 {
		t.Fatalf("port 2 stats %+v", ps.Ports)
	}
	tb.c.wantError(&ofpwire.MultipartRequest{Body: &ofpwire.PortStatsRequest{PortNo: 9}}, ofpwire.ETBadRequest, ofpwire.BRCBadPort)
}

func TestFlowStatsSplitsLargeReplies(t *testing.T) {
	tb := newTestBridge(t)
	const n = 3*flowStatsPerReply + 5
	for i := 0; i < n; i++ {
		fm := outputFlow(1, &ofpwire.ActionOutput{Port: 2})
		fm.Priority = uint16(i + 1)
		tb.br.Pipeline().Apply(fm, time.Now())
	}
	xid := tb.c.send(&ofpwire.MultipartRequest{Body: &ofpwire.FlowStatsRequest{TableID: uint8(ofpwire.TableAll), OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}})
	parts, total := 0, 0
	for {
		h, m := tb.c.recv()
		r, ok := m.(*ofpwire.MultipartReply)
		if !ok || h.Transaction != xid {
			t.Fatalf("got %#v", m)
		}
		parts++
		total += len(r.Body.(*ofpwire.FlowStatsReply).Flows)
		if !r.More() {
			break
		}
	}
	if parts != 4 || total != n {
		t.Fatalf("%d flows in %d replies, want %d in 4", total, parts, n)
	}
}

func TestPacketOut(t *testing.T) {
	tb := newTestBridge(t)
	po := &ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController,
		Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}, Data: frame()}
	if r := tb.c.request(po); len(r) != 0 {
		t.Fatalf("packet-out replies %#v", r)
	}
	tb.dp.PMDs()[0].PollOnce()
	var got [][]byte
	tb.p2.Drain(0, func(f []byte) { got = append(got, bytes.Clone(f)) })
	if len(got) != 1 || !bytes.Equal(got[0], frame()) {
		t.Fatalf("port 2 sent %d frames after packet-out", len(got))
	}

	// Actions are translated, not just outputs: set-field rewrites.
	po.Actions = []ofpwire.Action{
		&ofpwire.ActionSetField{Field: ofpwire.NewOXM(ofpwire.XMTypeEthDst, []byte{2, 0, 0, 0, 0, 9})},
		&ofpwire.ActionOutput{Port: 1},
	}
	tb.c.request(po)
	tb.dp.PMDs()[0].PollOnce()
	got = nil
	tb.p1.Drain(0, func(f []byte) { got = append(got, bytes.Clone(f)) })
	if len(got) != 1 || !bytes.Equal(got[0][:6], []byte{2, 0, 0, 0, 0, 9}) {
		t.Fatalf("set-field packet-out: %x", got)
	}

	tb.c.wantError(&ofpwire.PacketOut{BufferID: 3, InPort: ofpwire.PortController, Data: frame()},
		ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)
	tb.c.wantError(&ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController,
		Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: ofpwire.PortAny}}, Data: frame()},
		ofpwire.ETBadAction, ofpwire.BACBadOutPort)
	// OFPP_TABLE belongs to packet-outs only.
	tb.c.wantError(outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortTable}),
		ofpwire.ETBadAction, ofpwire.BACBadOutPort)
	tb.c.wantError(&ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController,
		Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 1}}, Data: frame()},
		ofpwire.ETBadAction, ofpwire.BACBadOutGroup)
}

func TestPacketInFromControllerAction(t *testing.T) {
	tb := newTestBridge(t)
	// Table 0 writes metadata and goes to table 1, whose entry (cookie
	// 0xc0ffee) sends to the controller: the packet-in carries that
	// cookie, the table id and the metadata in its match.
	fm := outputFlow(1)
	fm.Instructions = []ofpwire.Instruction{&ofpwire.InstrWriteMetadata{Metadata: 0x42, Mask: 0xff},
		&ofpwire.InstrGotoTable{TableID: 1}}
	tb.c.request(fm)
	fm = outputFlow(1, &ofpwire.ActionOutput{Port: ofpwire.PortController, MaxLen: 20})
	fm.TableID, fm.Cookie = 1, 0xc0ffee
	tb.c.request(fm)
	f := frame()
	tb.forward(tb.p1, tb.p2, f)
	_, m := tb.c.recv()
	pi, ok := m.(*ofpwire.PacketIn)
	if !ok {
		t.Fatalf("got %#v, want PACKET_IN", m)
	}
	if pi.Reason != ofpwire.PacketInReasonAction || pi.TableID != 1 || pi.BufferID != ofpwire.NoBuffer ||
		pi.TotalLen != uint16(len(f)) || !bytes.Equal(pi.Data, f[:20]) || pi.Cookie != 0xc0ffee {
		t.Fatalf("packet-in %+v", pi)
	}
	if o, ok := pi.Match.Field(ofpwire.XMTypeInPort); !ok || o.Uint() != 1 {
		t.Fatalf("packet-in match %+v", pi.Match)
	}
	if o, ok := pi.Match.Field(ofpwire.XMTypeMetadata); !ok || o.Uint() != 0x42 {
		t.Fatalf("packet-in match lacks metadata 0x42: %+v", pi.Match)
	}
}

func TestPacketInConversion(t *testing.T) {
	data := frame()
	pi := PacketIn(datapath.ControllerPacket{InPort: 7, Arg: xlate.ControllerArg(ofpwire.PacketInReasonNoMatch, 3, ofpwire.ContentLenNoBuffer), Data: data}, nil, 0)
	if pi.Reason != ofpwire.PacketInReasonNoMatch || pi.TableID != 3 || !bytes.Equal(pi.Data, data) {
		t.Fatalf("NO_BUFFER packet-in %+v", pi)
	}
	pi = PacketIn(datapath.ControllerPacket{InPort: 7, Arg: xlate.ControllerArg(ofpwire.PacketInReasonAction, 0, 1000), Data: data}, nil, 0)
	if len(pi.Data) != len(data) {
		t.Fatalf("max_len above the packet cut it to %d", len(pi.Data))
	}
	// A tunnelled packet's metadata is in the match, as OVS sends it.
	cp := datapath.ControllerPacket{InPort: 7, Arg: xlate.ControllerArg(ofpwire.PacketInReasonAction, 0, 1000), Data: data, TunnelID: 100}
	cp.Tunnel.Src = [16]byte{10: 0xff, 11: 0xff, 198, 18, 20, 2}
	cp.Tunnel.Dst = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
	pi = PacketIn(cp, nil, 0)
	m, err := ofmatch.FromOXM(pi.Match)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ofptext.FormatMatch(&m), "in_port=7,tun_id=0x64,tun_src=198.18.20.2,tun_ipv6_dst=2001:db8::1"; got != want {
		t.Errorf("tunnelled packet-in match %q, want %q", got, want)
	}
}

func TestUpcallAdapterUnbound(t *testing.T) {
	var up UpcallAdapter
	var res datapath.UpcallResult
	if err := up.Upcall(nil, &res); !errors.Is(err, datapath.ErrNoUpcaller) {
		t.Fatalf("unbound adapter: %v", err)
	}
}

func TestNonIdentityPortMapRejected(t *testing.T) {
	dp, err := datapath.New(datapath.Config{Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	defer dp.Close()
	if _, err := NewBridge("br", dp, BridgeConfig{Ports: map[uint32]uint32{1: 2}}); err == nil {
		t.Fatal("port map 1→2 accepted")
	}
}

func TestTableFeatures(t *testing.T) {
	tb := newTestBridge(t)
	tf := tb.c.multipart(&ofpwire.TableFeaturesRequest{}).(*ofpwire.TableFeaturesReply)
	if len(tf.Tables) != NumTables {
		t.Fatalf("%d tables described, want %d", len(tf.Tables), NumTables)
	}
	last := tf.Tables[NumTables-1]
	if last.TableID != NumTables-1 || len(last.Properties) != 8 {
		t.Fatalf("last table %+v", last)
	}
	for _, p := range tf.Tables[10].Properties {
		if p.Type == ofpwire.TablePropTypeNextTables && (len(p.NextTables) != NumTables-11 || p.NextTables[0] != 11) {
			t.Fatalf("table 10 next tables %v", p.NextTables)
		}
	}
	tb.c.wantError(&ofpwire.MultipartRequest{Body: &ofpwire.TableFeaturesRequest{Tables: []ofpwire.TableFeatures{{TableID: 0}}}},
		ofpwire.ETTableFeaturesFailed, ofpwire.TFFCEperm)
}

// TestPacketOutToTable: output to OFPP_TABLE runs the packet through the
// bridge's flow tables.
func TestPacketOutToTable(t *testing.T) {
	tb := newTestBridge(t)
	fm := outputFlow(1, &ofpwire.ActionOutput{Port: 2})
	fm.Match = ofpwire.Match{} // any in_port, including the packet-out's
	if r := tb.c.request(fm); len(r) != 0 {
		t.Fatalf("flow-mod replies %#v", r)
	}
	if r := tb.c.request(&ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController,
		Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: ofpwire.PortTable}}, Data: frame()}); len(r) != 0 {
		t.Fatalf("packet-out replies %#v", r)
	}
	tb.dp.PMDs()[0].PollOnce()
	var got [][]byte
	tb.p2.Drain(0, func(f []byte) { got = append(got, bytes.Clone(f)) })
	if len(got) != 1 || !bytes.Equal(got[0], frame()) {
		t.Fatalf("port 2 sent %d frames after packet-out to TABLE", len(got))
	}
}

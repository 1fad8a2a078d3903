package ofconn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

func flowMod() *ofpwire.FlowMod {
	return &ofpwire.FlowMod{Command: ofpwire.FlowAdd, Priority: 1, BufferID: ofpwire.NoBuffer,
		OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}
}

func TestHandshakeAndEcho(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{}, target)
	c := connect(t, m, target)
	c.echo(7)
	c.send(8, &ofpwire.EchoRequest{Data: bytes.Repeat([]byte{0xab}, 1000)})
	if r := recvType[*ofpwire.EchoReply](c, 8); len(r.Data) != 1000 || r.Data[999] != 0xab {
		t.Fatalf("echo reply data %d bytes", len(r.Data))
	}
	s := peerStatus(t, m, target)
	if s.State != StateActive || s.Role != ofpwire.ControllerRoleEqual || s.ConnectedSince.IsZero() {
		t.Fatalf("status %+v", s)
	}
	if s.MsgsIn != 4 || s.MsgsOut != 4 { // hello and three echoes each way
		t.Fatalf("msgs in/out %d/%d, want 4/4", s.MsgsIn, s.MsgsOut)
	}
}

// readHelloFailed reads the HELLO then the HELLO_FAILED error, which is
// sent in the peer's version, so it is parsed by hand.
func (c *client) readHelloFailed(wantVersion uint8) {
	c.t.Helper()
	if h, _ := c.recvRaw(); h.Type != ofpwire.TypeHello {
		c.t.Fatalf("first message %v, want HELLO", h.Type)
	}
	h, raw := c.recvRaw()
	if h.Type != ofpwire.TypeError || h.Version != wantVersion {
		c.t.Fatalf("got %v version %d, want ERROR version %d", h.Type, h.Version, wantVersion)
	}
	typ, code := binary.BigEndian.Uint16(raw[8:]), binary.BigEndian.Uint16(raw[10:])
	if typ != ofpwire.ETHelloFailed || code != ofpwire.HFCIncompatible {
		c.t.Fatalf("error %d/%d, want HELLO_FAILED/INCOMPATIBLE", typ, code)
	}
	if !bytes.Contains(raw[12:], []byte("OpenFlow10, OpenFlow13, OpenFlow14, OpenFlow15")) {
		c.t.Fatalf("error text %q", raw[12:])
	}
	c.expectClosed()
}

func TestVersionNegotiation(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{}, target)
	addr := listenAddr(t, m, target)

	t.Run("openflow12 only", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		c.sendRaw([]byte{0x03, 0, 0, 8, 0, 0, 0, 9}) // 1.2 HELLO, no elements
		c.readHelloFailed(0x03)
	})
	t.Run("openflow10 only speaks 1.0", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		c.sendRaw([]byte{0x01, 0, 0, 8, 0, 0, 0, 9})
		c.recvRaw() // HELLO
		c.echoIn(ofpwire.Version10, 4)
	})
	t.Run("bitmap without a common version", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		b, _ := ofpwire.Encode(3, ofpwire.NewHello(2, 3, 7))
		c.sendRaw(b)
		c.readHelloFailed(ofpwire.Version)
	})
	t.Run("not a hello first", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		c.send(3, &ofpwire.EchoRequest{})
		c.readHelloFailed(ofpwire.Version)
	})
	t.Run("bitmap with 1.0 and 1.3 in an old header", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		b, _ := ofpwire.Encode(3, ofpwire.NewHello(1, 4))
		b[0] = 1
		c.sendRaw(b)
		c.recv() // HELLO
		c.echo(4)
	})
	t.Run("1.4 header without bitmap speaks 1.4", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		c.sendRaw([]byte{0x05, 0, 0, 8, 0, 0, 0, 9})
		c.recv()
		c.echoIn(ofpwire.Version14, 4)
		// A message in another version than the negotiated one is
		// BAD_VERSION, answered in the connection's version.
		c.sendRaw([]byte{0x04, byte(ofpwire.TypeEchoRequest), 0, 8, 0, 0, 0, 5})
		h, raw := c.recvRaw()
		if h.Type != ofpwire.TypeError || h.Version != ofpwire.Version14 ||
			binary.BigEndian.Uint16(raw[10:]) != ofpwire.BRCBadVersion {
			t.Fatalf("got %v version %d %x, want BAD_VERSION in 1.4", h.Type, h.Version, raw)
		}
	})
	t.Run("1.7 header without bitmap negotiates down to 1.5", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		c.sendRaw([]byte{0x08, 0, 0, 8, 0, 0, 0, 9})
		c.recv()
		c.echoIn(ofpwire.Version15, 4)
	})
	t.Run("bitmap with only 1.5, as ovn-controller", func(t *testing.T) {
		c := dialClient(t, "unix", addr)
		b, _ := ofpwire.EncodeIn(ofpwire.Version15, 3, ofpwire.NewHello(ofpwire.Version15))
		c.sendRaw(b)
		c.recv()
		c.echoIn(ofpwire.Version15, 4)
	})
	// Rejected peers are closed by the switch, accepted ones by the subtests.
	waitFor(t, "closed peers to go", func() bool { return len(statusOf(m, target)) == 1 })
}

func TestInactivityProbe(t *testing.T) {
	const probe = 80 * time.Millisecond
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{ProbeInterval: probe}, target)

	// A silent peer gets an echo request after one interval and is
	// dropped after a second one.
	c := connect(t, m, target)
	start := time.Now()
	h, _ := c.recvRaw()
	if h.Type != ofpwire.TypeEchoRequest {
		t.Fatalf("got %v, want ECHO_REQUEST", h.Type)
	}
	if d := time.Since(start); d < probe*3/4 {
		t.Fatalf("probe after %v, want about %v", d, probe)
	}
	c.expectClosed()
	if d := time.Since(start); d < 3*probe/2 {
		t.Fatalf("closed after %v, want about %v", d, 2*probe)
	}

	// A peer that answers stays connected well beyond two intervals (a
	// longer interval here, so that a busy test machine does not make the
	// test peer itself miss a probe).
	const probe2 = 250 * time.Millisecond
	target2 := "punix:" + sockPath(t, "br2.sock")
	m2 := startManager(t, Config{ProbeInterval: probe2}, target2)
	c2 := connect(t, m2, target2)
	c2.expectSilence(4 * probe2) // answers echo requests as they come
	c2.echo(5)
	s := peerStatus(t, m2, target2)
	if s.State != StateActive || s.MsgsOut < 5 { // hello, 2 echo replies, >= 2 probes
		t.Fatalf("answering peer: %+v", s)
	}

	// A peer that never says HELLO is dropped too.
	c3 := dialClient(t, "unix", listenAddr(t, m, target))
	c3.expectClosed()
}

func TestFeatures(t *testing.T) {
	h := &recHandler{features: ofpwire.FeaturesReply{DatapathID: 0x0000_0a0b_0c0d_0e0f, NumBuffers: 256,
		NumTables: 254, AuxiliaryID: 9, Capabilities: ofpwire.CapabilityFlowStats | ofpwire.CapabilityPortStats}}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	c := connect(t, m, target)
	c.send(42, &ofpwire.FeaturesRequest{})
	f := recvType[*ofpwire.FeaturesReply](c, 42)
	want := h.features
	want.AuxiliaryID = 0
	if *f != want {
		t.Fatalf("features %+v, want %+v", *f, want)
	}
	if len(h.handled()) != 0 {
		t.Fatal("features request reached the handler")
	}
}

func TestSwitchConfig(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{}, target)
	c := connect(t, m, target)
	c.send(1, &ofpwire.GetConfigRequest{})
	if r := recvType[*ofpwire.GetConfigReply](c, 1); r.Flags != 0 || r.MissSendLength != 128 {
		t.Fatalf("default config %+v", *r)
	}
	c.send(2, &ofpwire.SetConfig{Flags: ofpwire.ConfigFlagFragDrop, MissSendLength: 200})
	c.send(3, &ofpwire.GetConfigRequest{})
	if r := recvType[*ofpwire.GetConfigReply](c, 3); r.Flags != ofpwire.ConfigFlagFragDrop || r.MissSendLength != 200 {
		t.Fatalf("config after set %+v", *r)
	}
	if got := m.SwitchConfig(); got != (SwitchConfig{Flags: 1, MissSendLen: 200}) {
		t.Fatalf("Manager.SwitchConfig %+v", got)
	}
	// Reassembly is not supported.
	c.send(4, &ofpwire.SetConfig{Flags: ofpwire.ConfigFlagFragReasm, MissSendLength: 10})
	c.expectError(4, ofpwire.ETSwitchConfigFailed, ofpwire.SCFCBadFlags)
	// The config is switch-wide: a second connection sees it.
	c2 := connect(t, m, target)
	c2.send(5, &ofpwire.GetConfigRequest{})
	if r := recvType[*ofpwire.GetConfigReply](c2, 5); r.MissSendLength != 200 {
		t.Fatalf("second connection sees %+v", *r)
	}
	// A slave cannot change it.
	c2.send(6, &ofpwire.RoleRequest{Role: ofpwire.ControllerRoleSlave, GenerationID: 1})
	recvType[*ofpwire.RoleReply](c2, 6)
	c2.send(7, &ofpwire.SetConfig{MissSendLength: 1})
	c2.echo(8)
	if got := m.SwitchConfig(); got.MissSendLen != 200 {
		t.Fatalf("slave changed the config: %+v", got)
	}
}

func TestBarrierOrdering(t *testing.T) {
	delays := map[uint32]time.Duration{1: 40 * time.Millisecond, 2: 0, 4: 10 * time.Millisecond, 5: 0}
	h := &recHandler{}
	h.fn = func(c *Conn, xid uint32, msg ofpwire.Message) error {
		time.Sleep(delays[xid])
		if xid == 2 {
			// A handler reply, not an error, goes through Send.
			return c.Send(xid, &ofpwire.MultipartReply{Body: &ofpwire.FlowStatsReply{}})
		}
		return &ofpwire.OFPError{Type: ofpwire.ETFlowModFailed, Code: ofpwire.FMFCUnknown}
	}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	c := connect(t, m, target)

	// Everything is written before anything is read.
	c.send(1, flowMod())
	c.send(2, &ofpwire.MultipartRequest{Body: &ofpwire.FlowStatsRequest{TableID: 0xff, OutPort: ofpwire.PortAny, OutGroup: ofpwire.GroupAny}})
	c.send(3, &ofpwire.BarrierRequest{})
	c.send(4, flowMod())
	c.send(5, flowMod())
	c.send(6, &ofpwire.BarrierRequest{})

	c.expectError(1, ofpwire.ETFlowModFailed, ofpwire.FMFCUnknown)
	recvType[*ofpwire.MultipartReply](c, 2)
	recvType[*ofpwire.BarrierReply](c, 3)
	if got := h.handled(); len(got) < 2 || !slices.Equal(got[:2], []uint32{1, 2}) {
		t.Fatalf("handled %v at first barrier", got)
	}
	c.expectError(4, ofpwire.ETFlowModFailed, ofpwire.FMFCUnknown)
	c.expectError(5, ofpwire.ETFlowModFailed, ofpwire.FMFCUnknown)
	recvType[*ofpwire.BarrierReply](c, 6)
	if got := h.handled(); !slices.Equal(got, []uint32{1, 2, 4, 5}) {
		t.Fatalf("handled %v", got)
	}
}

func TestRoles(t *testing.T) {
	h := &recHandler{}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	a, b := connect(t, m, target), connect(t, m, target)
	role := func(c *client, xid uint32, r ofpwire.ControllerRole, gen uint64) *ofpwire.RoleReply {
		t.Helper()
		c.send(xid, &ofpwire.RoleRequest{Role: r, GenerationID: gen})
		return recvType[*ofpwire.RoleReply](c, xid)
	}

	if r := role(a, 1, ofpwire.ControllerRoleNoChange, 0); r.Role != ofpwire.ControllerRoleEqual {
		t.Fatalf("initial role %v", r.Role)
	}
	if r := role(a, 2, ofpwire.ControllerRoleMaster, 10); r.Role != ofpwire.ControllerRoleMaster || r.GenerationID != 10 {
		t.Fatalf("master reply %+v", *r)
	}
	// b becomes master: a is demoted to slave without being told.
	if r := role(b, 3, ofpwire.ControllerRoleMaster, 11); r.Role != ofpwire.ControllerRoleMaster || r.GenerationID != 11 {
		t.Fatalf("master reply %+v", *r)
	}
	a.expectSilence(20 * time.Millisecond)
	if r := role(a, 4, ofpwire.ControllerRoleNoChange, 0); r.Role != ofpwire.ControllerRoleSlave || r.GenerationID != 11 {
		t.Fatalf("demoted role %+v", *r)
	}
	var demoted Status
	for _, s := range statusOf(m, target) {
		if s.Role == ofpwire.ControllerRoleSlave {
			demoted = s
		}
	}
	if demoted.Demotions != 1 {
		t.Fatalf("demotion not recorded: %+v", m.Status())
	}

	// Stale generation ids are refused, including on slave requests.
	a.send(5, &ofpwire.RoleRequest{Role: ofpwire.ControllerRoleMaster, GenerationID: 10})
	a.expectError(5, ofpwire.ETRoleRequestFailed, ofpwire.RRFCStale)
	a.send(6, &ofpwire.RoleRequest{Role: ofpwire.ControllerRoleSlave, GenerationID: 9})
	a.expectError(6, ofpwire.ETRoleRequestFailed, ofpwire.RRFCStale)
	// The comparison wraps: 2^64-1 is just before 0, so older than 11.
	a.send(7, &ofpwire.RoleRequest{Role: ofpwire.ControllerRoleSlave, GenerationID: ^uint64(0)})
	a.expectError(7, ofpwire.ETRoleRequestFailed, ofpwire.RRFCStale)
	if r := role(a, 8, ofpwire.ControllerRoleSlave, 11); r.Role != ofpwire.ControllerRoleSlave {
		t.Fatalf("same generation refused: %+v", *r)
	}
	a.send(9, &ofpwire.RoleRequest{Role: 7})
	a.expectError(9, ofpwire.ETRoleRequestFailed, ofpwire.RRFCBadRole)

	// A slave may read but not write.
	denied := []ofpwire.Message{
		flowMod(),
		&ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 1},
		&ofpwire.PortMod{PortNo: 1, HWAddr: make([]byte, 6)},
		&ofpwire.TableMod{Table: 0},
		&ofpwire.MeterMod{Command: ofpwire.MeterAdd, Flags: ofpwire.MeterFlagKBitPerSec, MeterID: 1},
		&ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController, Data: make([]byte, 60)},
		&ofpwire.MultipartRequest{Body: &ofpwire.TableFeaturesRequest{Tables: []ofpwire.TableFeatures{{TableID: 0, Name: "t0"}}}},
	}
	for i, msg := range denied {
		xid := uint32(100 + i)
		a.send(xid, msg)
		a.expectError(xid, ofpwire.ETBadRequest, ofpwire.BRCIsSlave)
	}
	a.send(200, &ofpwire.MultipartRequest{Body: &ofpwire.PortDescRequest{}})
	a.send(201, &ofpwire.BarrierRequest{})
	recvType[*ofpwire.BarrierReply](a, 201)
	if got := h.handled(); !slices.Equal(got, []uint32{200}) {
		t.Fatalf("handler saw %v, want only the read request", got)
	}
	// The master may write.
	b.send(300, flowMod())
	b.send(301, &ofpwire.BarrierRequest{})
	recvType[*ofpwire.BarrierReply](b, 301)
	if got := h.handled(); !slices.Equal(got, []uint32{200, 300}) {
		t.Fatalf("handler saw %v", got)
	}
	// Equal role does not touch the generation and is writable again.
	if r := role(a, 10, ofpwire.ControllerRoleEqual, 0); r.Role != ofpwire.ControllerRoleEqual || r.GenerationID != 11 {
		t.Fatalf("equal reply %+v", *r)
	}
	if r := role(b, 11, ofpwire.ControllerRoleNoChange, 0); r.Role != ofpwire.ControllerRoleMaster {
		t.Fatalf("equal request changed the master: %+v", *r)
	}
}

func packetIn(reason ofpwire.PacketInReason, n int) ofpwire.PacketIn {
	return ofpwire.PacketIn{BufferID: ofpwire.NoBuffer, TotalLen: uint16(n), Reason: reason, TableID: 1,
		Cookie: 0x99, Data: make([]byte, n)}
}

func TestAsyncFiltering(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{}, target)
	master, slave := connect(t, m, target), connect(t, m, target)
	slave.send(1, &ofpwire.RoleRequest{Role: ofpwire.ControllerRoleSlave, GenerationID: 1})
	recvType[*ofpwire.RoleReply](slave, 1)
	master.send(2, &ofpwire.RoleRequest{Role: ofpwire.ControllerRoleMaster, GenerationID: 1})
	recvType[*ofpwire.RoleReply](master, 2)

	// Defaults.
	master.send(3, &ofpwire.GetAsyncRequest{})
	if r := recvType[*ofpwire.GetAsyncReply](master, 3); ofpwire.AsyncConfig(*r) != DefaultAsyncConfig {
		t.Fatalf("default async %+v", *r)
	}
	if n := m.SendPacketIn(packetIn(ofpwire.PacketInReasonNoMatch, 60)); n != 1 {
		t.Fatalf("no-match packet-in went to %d connections, want 1", n)
	}
	pi := recvType[*ofpwire.PacketIn](master, 0)
	if pi.Cookie != 0x99 || len(pi.Data) != 60 || pi.TableID != 1 {
		t.Fatalf("packet-in %+v", pi)
	}
	if n := m.SendPacketIn(packetIn(ofpwire.PacketInReasonInvalidTTL, 60)); n != 0 {
		t.Fatalf("invalid-TTL packet-in delivered by default to %d", n)
	}
	if n := m.SendPortStatus(ofpwire.PortStatus{Reason: ofpwire.PortReasonAdd, Port: ofpwire.Port{PortNo: 3, HWAddr: make([]byte, 6), Name: "p3"}}); n != 2 {
		t.Fatalf("port status to %d, want 2", n)
	}
	if ps := recvType[*ofpwire.PortStatus](master, 0); ps.Port.PortNo != 3 {
		t.Fatalf("port status %+v", ps)
	}
	recvType[*ofpwire.PortStatus](slave, 0)
	fr := ofpwire.FlowRemoved{Reason: ofpwire.FlowReasonIdleTimeout, Cookie: 5}
	if n := m.SendFlowRemoved(fr); n != 1 {
		t.Fatalf("flow removed to %d, want 1", n)
	}
	if got := recvType[*ofpwire.FlowRemoved](master, 0); got.Cookie != 5 {
		t.Fatalf("flow removed %+v", got)
	}
	slave.expectSilence(20 * time.Millisecond)

	// The slave asks for action packet-ins and hard-timeout removals; the
	// master drops port status.
	cfg := DefaultAsyncConfig
	cfg.PacketInMask[1] = 1 << ofpwire.PacketInReasonAction
	cfg.FlowRemovedMask[1] = 1 << ofpwire.FlowReasonHardTimeout
	sa := ofpwire.SetAsync(cfg)
	slave.send(4, &sa)
	slave.send(5, &ofpwire.GetAsyncRequest{})
	if r := recvType[*ofpwire.GetAsyncReply](slave, 5); ofpwire.AsyncConfig(*r) != cfg {
		t.Fatalf("async after set %+v", *r)
	}
	mcfg := DefaultAsyncConfig
	mcfg.PortStatusMask[0] = 0
	ma := ofpwire.SetAsync(mcfg)
	master.send(6, &ma)
	master.echo(7)

	if n := m.SendPacketIn(packetIn(ofpwire.PacketInReasonNoMatch, 60)); n != 1 {
		t.Fatalf("no-match to %d", n)
	}
	recvType[*ofpwire.PacketIn](master, 0)
	if n := m.SendPacketIn(packetIn(ofpwire.PacketInReasonAction, 60)); n != 2 {
		t.Fatalf("action packet-in to %d, want 2", n)
	}
	if pi := recvType[*ofpwire.PacketIn](slave, 0); pi.Reason != ofpwire.PacketInReasonAction {
		t.Fatalf("slave got %+v", pi)
	}
	recvType[*ofpwire.PacketIn](master, 0)
	if n := m.SendFlowRemoved(ofpwire.FlowRemoved{Reason: ofpwire.FlowReasonHardTimeout}); n != 2 {
		t.Fatalf("hard-timeout removal to %d, want 2", n)
	}
	recvType[*ofpwire.FlowRemoved](slave, 0)
	recvType[*ofpwire.FlowRemoved](master, 0)
	if n := m.SendPortStatus(ofpwire.PortStatus{Reason: ofpwire.PortReasonDelete, Port: ofpwire.Port{HWAddr: make([]byte, 6)}}); n != 1 {
		t.Fatalf("port status to %d, want 1 (slave only)", n)
	}
	recvType[*ofpwire.PortStatus](slave, 0)
	master.expectSilence(20 * time.Millisecond)
}

func TestPacketInRateLimit(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{PacketInRate: 20, PacketInBurst: 5}, target)
	c := connect(t, m, target)
	start := time.Now()
	sent := 0
	for i := 0; i < 50; i++ {
		sent += m.SendPacketIn(packetIn(ofpwire.PacketInReasonNoMatch, 64))
	}
	elapsed := time.Since(start)
	// At 20/s, the time spent sending can add at most a token or two.
	if maxOK := 5 + 1 + int(elapsed.Seconds()*20); sent < 5 || sent > maxOK {
		t.Fatalf("%d packet-ins passed in %v, want 5..%d", sent, elapsed, maxOK)
	}
	for i := 0; i < sent; i++ {
		recvType[*ofpwire.PacketIn](c, 0)
	}
	c.expectSilence(20 * time.Millisecond)
	if s := peerStatus(t, m, target); s.PacketInsRateLimited != uint64(50-sent) || s.PacketInsDropped != 0 {
		t.Fatalf("status %+v, want %d rate-limited", s, 50-sent)
	}
	// The bucket refills at the configured rate.
	time.Sleep(200 * time.Millisecond)
	if n := m.SendPacketIn(packetIn(ofpwire.PacketInReasonNoMatch, 64)); n != 1 {
		t.Fatal("bucket did not refill")
	}
	recvType[*ofpwire.PacketIn](c, 0)
}

func TestSlowConsumer(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	// A long probe interval gives the stuck peer a long write deadline, so
	// a caller blocked behind it would return only after the peer is cut
	// off.
	m := startManager(t, Config{PacketInRate: -1, QueueLen: 32, ProbeInterval: time.Minute}, target)
	connect(t, m, target) // the slow peer: never reads again
	fast := connect(t, m, target)
	var fastGot atomic.Int64
	go func() {
		buf := make([]byte, ofpwire.MaxMessageLen)
		for {
			h, _, err := ofpwire.ReadMessage(fast.nc, buf)
			if err != nil {
				return // the switch closed at the end of the test
			}
			if h.Type == ofpwire.TypePacketIn {
				fastGot.Add(1)
			}
		}
	}()
	peers := func() (slow, fast Status) {
		all := statusOf(m, target)[1:] // in connection order
		return all[0], all[1]
	}

	// A burst: the slow peer's queue and socket fill up and it drops;
	// the caller is never blocked.
	const total = 3000
	start := time.Now()
	delivered := 0
	for i := 0; i < total; i++ {
		delivered += m.SendPacketIn(packetIn(ofpwire.PacketInReasonNoMatch, 1000))
	}
	t.Logf("sending %d packet-ins took %v", total, time.Since(start))
	// A caller blocked behind the stuck peer could only have finished once
	// its write deadline (a probe interval, a minute) closed it: the stuck
	// peer is still connected, so the caller never waited for it.
	if all := statusOf(m, target); len(all) != 3 || all[1].State != StateActive {
		t.Fatalf("after the burst the stuck peer is not connected any more: %+v", all)
	}
	waitFor(t, "the fast peer to read the burst", func() bool {
		_, f := peers()
		return fastGot.Load()+int64(f.PacketInsDropped) == total
	})
	slowS, fastS := peers()
	if slowS.PacketInsDropped == 0 || slowS.PacketInsDropped > total-32 {
		t.Fatalf("slow consumer dropped %d of %d", slowS.PacketInsDropped, total)
	}
	if uint64(delivered) != 2*total-slowS.PacketInsDropped-fastS.PacketInsDropped {
		t.Fatalf("SendPacketIn reported %d deliveries", delivered)
	}
	t.Logf("burst: slow dropped %d, fast got %d dropped %d", slowS.PacketInsDropped, fastGot.Load(), fastS.PacketInsDropped)

	// At a pace the fast peer can follow, it gets everything while the
	// stuck peer keeps dropping.
	got0 := fastGot.Load()
	for i := 0; i < 50; i++ {
		m.SendPacketIn(packetIn(ofpwire.PacketInReasonNoMatch, 1000))
		time.Sleep(2 * time.Millisecond)
	}
	waitFor(t, "the paced packet-ins", func() bool { return fastGot.Load() == got0+50 })
	slow2, fast2 := peers()
	// The stuck peer's writer may still move queued messages into socket
	// buffer space after the burst (how much is the kernel's business),
	// so its queue can take some or all of the paced ones; it never
	// drops more than 50, and the fast peer none.
	if fast2.PacketInsDropped != fastS.PacketInsDropped ||
		slow2.PacketInsDropped > slowS.PacketInsDropped+50 {
		t.Fatalf("paced phase: fast dropped %d->%d, slow %d->%d", fastS.PacketInsDropped, fast2.PacketInsDropped,
			slowS.PacketInsDropped, slow2.PacketInsDropped)
	}
}

func TestMalformedMessages(t *testing.T) {
	h := &recHandler{}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	c := connect(t, m, target)

	good, _ := ofpwire.Encode(10, flowMod())
	truncated := append([]byte(nil), good[:len(good)-4]...)
	binary.BigEndian.PutUint16(truncated[2:], uint16(len(truncated)))
	badMatch := append([]byte(nil), good...)
	badMatch[48+1] = 0 // match type 0: the 1.0-style standard match
	oldEcho := []byte{0x01, 2, 0, 8, 0, 0, 0, 11}
	unknownType := []byte{0x04, 99, 0, 8, 0, 0, 0, 12}
	fromSwitch, _ := ofpwire.Encode(13, &ofpwire.PacketIn{BufferID: ofpwire.NoBuffer})
	longNoise := make([]byte, 200)
	copy(longNoise, []byte{0x04, 200, 0, 200, 0, 0, 0, 14})

	for _, raw := range [][]byte{truncated, badMatch, oldEcho, unknownType, fromSwitch, longNoise} {
		xid := binary.BigEndian.Uint32(raw[4:])
		var hdr ofpwire.Header
		hdr.Version, hdr.Type, hdr.Length, hdr.Transaction = raw[0], ofpwire.MsgType(raw[1]), uint16(len(raw)), xid
		want := &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadType}
		if raw[0] != ofpwire.Version {
			// Not the connection's version, even one the switch speaks.
			want = &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCBadVersion}
		} else if _, err := ofpwire.Decode(hdr, raw[8:]); err != nil {
			if !errors.As(err, &want) {
				t.Fatalf("decode error %v is not an OFPError", err)
			}
		}
		c.sendRaw(raw)
		e := c.expectError(xid, want.Type, want.Code)
		if n := min(len(raw), ofpwire.ErrorDataLen); !bytes.Equal(e.Data, raw[:n]) {
			t.Fatalf("xid %d: error data %x, want %x", xid, e.Data, raw[:n])
		}
	}
	// Specific codes, so that the loop above is known to exercise them.
	c.sendRaw(oldEcho)
	c.expectError(11, ofpwire.ETBadRequest, ofpwire.BRCBadVersion)
	c.sendRaw(truncated)
	e := recvType[*ofpwire.ErrorMsg](c, 10)
	if e.Type == ofpwire.ETBadRequest && e.Code == ofpwire.BRCBadType {
		t.Fatalf("truncated flow mod answered with BAD_TYPE")
	}
	// An error from the peer is never answered.
	c.send(15, &ofpwire.ErrorMsg{Type: ofpwire.ETBadRequest, Code: 0})
	c.sendRaw([]byte{0x04, 1, 0, 9, 0, 0, 0, 16, 0}) // malformed ERROR
	c.echo(17)
	if len(h.handled()) != 0 {
		t.Fatalf("handler saw %v", h.handled())
	}
	// Broken framing closes the connection.
	c.sendRaw([]byte{0x04, 2, 0, 4, 0, 0, 0, 18})
	c.expectClosed()
	waitFor(t, "close reason", func() bool { return len(statusOf(m, target)) == 1 })
}

func TestHandlerErrors(t *testing.T) {
	h := &recHandler{fn: func(c *Conn, xid uint32, msg ofpwire.Message) error {
		if xid == 1 {
			return fmt.Errorf("wrapped: %w", &ofpwire.OFPError{Type: ofpwire.ETBadMatch, Code: ofpwire.BMCBadPrereq})
		}
		return errors.New("plain failure")
	}}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h}, target)
	c := connect(t, m, target)
	c.send(1, flowMod())
	c.expectError(1, ofpwire.ETBadMatch, ofpwire.BMCBadPrereq)
	c.send(2, flowMod())
	c.expectError(2, ofpwire.ETBadRequest, ofpwire.BRCEperm)
	// Without a Handler everything unhandled is BAD_TYPE.
	target2 := "punix:" + sockPath(t, "b2.sock")
	m2 := startManager(t, Config{}, target2)
	c2 := connect(t, m2, target2)
	c2.send(3, flowMod())
	c2.expectError(3, ofpwire.ETBadRequest, ofpwire.BRCBadType)
}

// TestOnBarrierRunsBeforeReply: what the hook makes durable must be done
// before the peer sees the barrier reply.
func TestOnBarrierRunsBeforeReply(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	h := &recHandler{}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h, OnBarrier: func() error {
		calls.Add(1)
		<-release
		return nil
	}}, target)
	c := connect(t, m, target)
	c.send(7, &ofpwire.BarrierRequest{})
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if calls.Load() != 1 {
		t.Fatalf("OnBarrier called %d times", calls.Load())
	}
	close(release)
	recvType[*ofpwire.BarrierReply](c, 7)
}

// TestOnBarrierError: a barrier whose hook fails (the earlier requests
// are not durable) is answered with the error, its reason after the
// request, never with a BARRIER_REPLY.
func TestOnBarrierError(t *testing.T) {
	h := &recHandler{}
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{Handler: h, OnBarrier: func() error {
		return &ofpwire.OFPError{Type: ofpwire.ETBadRequest, Code: ofpwire.BRCEperm, Reason: "no space left on device"}
	}}, target)
	c := connect(t, m, target)
	c.send(9, &ofpwire.BarrierRequest{})
	e := recvType[*ofpwire.ErrorMsg](c, 9)
	if e.Type != ofpwire.ETBadRequest || e.Code != ofpwire.BRCEperm || ofpwire.ErrorReason(e.Data) != "no space left on device" {
		t.Fatalf("error %d/%d data %q", e.Type, e.Code, e.Data)
	}
}

// TestTargetOptionsProbe: a target's own inactivity probe (Open vSwitch's
// Controller inactivity_probe) replaces the manager's: with the manager
// probing hourly, a silent peer of a target set to 80 ms is probed and
// dropped; setting the target's probe off keeps the next one.
func TestTargetOptionsProbe(t *testing.T) {
	target := "punix:" + sockPath(t, "br.sock")
	m := startManager(t, Config{ProbeInterval: time.Hour}, target)
	m.SetTargetOptions(map[string]TargetOptions{target: {Probe: 80 * time.Millisecond}})
	c := connect(t, m, target)
	if h, _ := c.recvRaw(); h.Type != ofpwire.TypeEchoRequest {
		t.Fatalf("got %v, want ECHO_REQUEST", h.Type)
	}
	c.expectClosed()

	m.SetTargetOptions(map[string]TargetOptions{target: {Probe: -1}})
	c2 := connect(t, m, target)
	c2.expectSilence(300 * time.Millisecond)
	c2.echo(5)
}

package ofproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/ofproto/ofpwire"
)

// Protocol-level conformance: OpenFlow 1.3.5 §6 (the OpenFlow channel)
// and §7 (message layout and error codes), through the bridge's real
// channel. Each case cites the section whose requirement it checks.

// rawPeer is a peer that writes raw bytes, so that it can send what the
// encoder never produces (other versions, bad lengths, unknown types).
type rawPeer struct {
	t   *testing.T
	nc  net.Conn
	buf []byte
}

// dialRaw connects to the management socket without sending HELLO.
func dialRaw(t *testing.T, sock string) *rawPeer {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawPeer{t: t, nc: nc, buf: make([]byte, 1<<16)}
}

func (p *rawPeer) write(b []byte) {
	p.t.Helper()
	if _, err := p.nc.Write(b); err != nil {
		p.t.Fatal(err)
	}
}

// read returns the next message that is not an echo request; err is set
// when the switch closed the connection.
func (p *rawPeer) read() (ofpwire.Header, []byte, error) {
	p.t.Helper()
	for {
		p.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		h, raw, err := ofpwire.ReadMessage(p.nc, p.buf)
		if err != nil {
			return h, nil, err
		}
		if h.Type == 2 { // ECHO_REQUEST
			continue
		}
		return h, append([]byte(nil), raw...), nil
	}
}

func (p *rawPeer) mustRead() (ofpwire.Header, []byte) {
	p.t.Helper()
	h, raw, err := p.read()
	if err != nil {
		p.t.Fatal(err)
	}
	return h, raw
}

// handshake exchanges 1.3 HELLOs.
func (p *rawPeer) handshake() {
	p.t.Helper()
	p.write(rawMsg(4, 0, 1, nil))
	if h, _ := p.mustRead(); h.Type != 0 {
		p.t.Fatalf("first message type %d, want HELLO", h.Type)
	}
}

// wantError reads the reply to the request req (sent with xid) and checks
// it is an ERROR of type/code whose data is the start of req: §7.4.4 asks
// for at least 64 bytes of the failed request (all of a shorter one).
func (p *rawPeer) wantError(req []byte, typ, code uint16) {
	p.t.Helper()
	h, raw := p.mustRead()
	xid := binary.BigEndian.Uint32(req[4:])
	if h.Type != 1 || h.Transaction != xid {
		p.t.Fatalf("reply type %d xid %d, want ERROR for xid %d", h.Type, h.Transaction, xid)
	}
	gt, gc := binary.BigEndian.Uint16(raw[8:]), binary.BigEndian.Uint16(raw[10:])
	if gt != typ || gc != code {
		p.t.Fatalf("error %d/%d (%v), want %d/%d", gt, gc, &ofpwire.OFPError{Type: gt, Code: gc}, typ, code)
	}
	data := raw[12:]
	if n := min(len(req), ofpwire.ErrorDataLen); len(data) < n || !bytes.Equal(data[:n], req[:n]) {
		p.t.Fatalf("error data %x, want the first %d bytes of %x", data, n, req)
	}
}

// rawMsg is an OpenFlow message with the given header fields and body.
func rawMsg(version, typ uint8, xid uint32, body []byte) []byte {
	b := []byte{version, typ, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], uint16(8+len(body)))
	binary.BigEndian.PutUint32(b[4:], xid)
	return append(b, body...)
}

// helloBitmap is a HELLO of header version v with one version-bitmap
// element listing versions.
func helloBitmap(v uint8, versions ...uint8) []byte {
	var bm uint32
	for _, x := range versions {
		bm |= 1 << x
	}
	el := []byte{0, 1, 0, 8, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(el[4:], bm)
	return rawMsg(v, 0, 1, el)
}

// §6.3.1: the negotiated version is the highest both version bitmaps
// hold or, without a bitmap, the smaller of the two header versions; with
// none in common the switch sends HELLO_FAILED/INCOMPATIBLE, whose data is
// an ASCII string (§7.4.4), and ends the connection. The switch speaks
// 1.0, 1.3, 1.4 and 1.5 and says so in its own HELLO's bitmap.
func TestProtoHelloNegotiation(t *testing.T) {
	tb := newTestBridge(t)
	for _, c := range []struct {
		name  string
		hello []byte
		want  uint8 // negotiated version, 0: none
	}{
		{"1.3 without bitmap", rawMsg(4, 0, 1, nil), 4},
		{"1.4 without bitmap", rawMsg(5, 0, 1, nil), 5},
		{"1.6 without bitmap: 1.5", rawMsg(7, 0, 1, nil), 6},
		{"1.5 with bitmap 1.0, 1.3, 1.5", helloBitmap(6, 1, 4, 6), 6},
		{"1.5 with bitmap 1.0, 1.3", helloBitmap(6, 1, 4), 4},
		{"1.3 with bitmap 1.3", helloBitmap(4, 4), 4},
		{"1.5 with bitmap 1.5 only", helloBitmap(6, 6), 6},
		{"1.0 without bitmap", rawMsg(1, 0, 1, nil), 1},
		{"1.2 without bitmap", rawMsg(3, 0, 1, nil), 0},
		{"1.2 with bitmap 1.0, 1.2", helloBitmap(3, 1, 3), 1},
		{"1.2 with bitmap 1.1, 1.2", helloBitmap(3, 2, 3), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := dialRaw(t, tb.sock)
			p.write(c.hello)
			h, raw := p.mustRead()
			if h.Type != 0 || h.Version != 6 {
				t.Fatalf("switch's first message type %d version %d, want a 1.5 HELLO", h.Type, h.Version)
			}
			if m, err := ofpwire.Decode(h, raw[8:]); err != nil || !m.(*ofpwire.Hello).Supports(4) ||
				!m.(*ofpwire.Hello).Supports(5) || !m.(*ofpwire.Hello).Supports(6) || !m.(*ofpwire.Hello).Supports(1) ||
				m.(*ofpwire.Hello).Supports(2) || m.(*ofpwire.Hello).Supports(3) {
				t.Fatalf("switch's HELLO %x does not list exactly 1.0 and 1.3-1.5 in a version bitmap (%v)", raw, err)
			}
			if c.want == 0 {
				h, raw := p.mustRead()
				if h.Type != 1 || binary.BigEndian.Uint16(raw[8:]) != ofpwire.ETHelloFailed ||
					binary.BigEndian.Uint16(raw[10:]) != ofpwire.HFCIncompatible {
					t.Fatalf("reply %x, want HELLO_FAILED/INCOMPATIBLE", raw)
				}
				for _, ch := range raw[12:] {
					if ch < 0x20 || ch > 0x7e {
						t.Fatalf("HELLO_FAILED data %q is not ASCII text", raw[12:])
					}
				}
				if _, _, err := p.read(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
					if ne, ok := err.(net.Error); !ok || ne.Timeout() {
						t.Fatalf("connection not closed after HELLO_FAILED: %v", err)
					}
				}
				return
			}
			// §7.5.1: ECHO_REPLY carries the request's xid and data,
			// at the negotiated version.
			p.write(rawMsg(c.want, 2, 77, []byte("ping data")))
			h, raw = p.mustRead()
			if h.Type != 3 || h.Version != c.want || h.Transaction != 77 || string(raw[8:]) != "ping data" {
				t.Fatalf("echo reply %x", raw)
			}
		})
	}
}

// Malformed or unsupported messages after the handshake, §7.4.4's
// OFPET_BAD_REQUEST codes; every error carries at least the first 64
// bytes of the offending message, and the connection stays usable.
func TestProtoBadRequests(t *testing.T) {
	tb := newTestBridge(t)
	p := dialRaw(t, tb.sock)
	p.handshake()
	// A FLOW_MOD longer than 64 bytes, refused: the data is cut at 64.
	fm := flowIn(0xff, 10, 1, applyOut(2))
	long, err := ofpwire.Encode(500, fm)
	if err != nil {
		t.Fatal(err)
	}
	if len(long) <= ofpwire.ErrorDataLen {
		t.Fatalf("flow-mod of %d bytes is not long enough for the test", len(long))
	}
	mpBody := func(typ uint16, rest ...byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, typ)
		return append(append(b, 0, 0, 0, 0, 0, 0), rest...)
	}
	for _, c := range []struct {
		name      string
		msg       []byte
		typ, code uint16
	}{
		// §7.1: a message of a version other than the negotiated one.
		{"version 1.2 echo", rawMsg(3, 2, 501, nil), ofpwire.ETBadRequest, ofpwire.BRCBadVersion},
		{"version 1.4 barrier", rawMsg(5, 20, 502, nil), ofpwire.ETBadRequest, ofpwire.BRCBadVersion},
		// §7.4.4 OFPBRC_BAD_TYPE: a type the switch does not know, or
		// one only a switch sends.
		{"unknown type", rawMsg(4, 99, 503, nil), ofpwire.ETBadRequest, ofpwire.BRCBadType},
		{"PACKET_IN from the controller", rawMsg(4, 10, 504, make([]byte, 24)), ofpwire.ETBadRequest, ofpwire.BRCBadType},
		// §7.5.4: an experimenter message of an experimenter the switch
		// does not support.
		{"experimenter message", rawMsg(4, 4, 505, []byte{0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1}), ofpwire.ETBadRequest, ofpwire.BRCBadExperimenter},
		// Open vSwitch's (Nicira's) messages the switch does not have.
		{"unknown Nicira message", rawMsg(4, 4, 512, []byte{0, 0, 0x23, 0x20, 0, 0, 0, 99}), ofpwire.ETBadRequest, ofpwire.BRCBadExpType},
		{"NXT_PACKET_IN format", rawMsg(4, 4, 513, []byte{0, 0, 0x23, 0x20, 0, 0, 0, 16, 0, 0, 0, 1}), ofpwire.ETBadRequest, ofpwire.BRCEperm},
		// §7.3.5: a multipart type the switch does not know, and an
		// experimenter multipart of an unknown experimenter.
		{"unknown multipart type", rawMsg(4, 18, 506, mpBody(0x00f0)), ofpwire.ETBadRequest, ofpwire.BRCBadMultipart},
		{"experimenter multipart", rawMsg(4, 18, 507, mpBody(0xffff, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1)), ofpwire.ETBadRequest, ofpwire.BRCBadExperimenter},
		// §7.4.4 OFPBRC_BAD_LEN: a length wrong for the type.
		{"barrier with a body", rawMsg(4, 20, 508, []byte{0, 0, 0, 0}), ofpwire.ETBadRequest, ofpwire.BRCBadLen},
		{"features request with a body", rawMsg(4, 5, 509, []byte{1, 2, 3, 4, 5, 6, 7, 8}), ofpwire.ETBadRequest, ofpwire.BRCBadLen},
		{"short set_config", rawMsg(4, 9, 510, []byte{0, 0}), ofpwire.ETBadRequest, ofpwire.BRCBadLen},
		{"short flow-mod", rawMsg(4, 14, 511, make([]byte, 20)), ofpwire.ETBadRequest, ofpwire.BRCBadLen},
		// §6.4: a FLOW_MOD adding to table OFPTT_ALL; data cut at 64.
		{"long refused flow-mod", long, ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID},
	} {
		t.Run(c.name, func(t *testing.T) {
			p.t = t
			p.write(c.msg)
			p.wantError(c.msg, c.typ, c.code)
		})
	}
	p.t = t
	p.write(rawMsg(4, 2, 600, []byte("still there")))
	if h, raw := p.mustRead(); h.Type != 3 || h.Transaction != 600 || string(raw[8:]) != "still there" {
		t.Fatalf("echo after the errors: %x", raw)
	}
}

// §6.2 / §7.3.8: a BARRIER_REPLY comes only after every message before
// the barrier was processed and answered: the error of a refused
// FLOW_MOD arrives before it, and a FLOW_MOD before it is in effect for
// any request after it.
func TestProtoBarrierOrdering(t *testing.T) {
	tb := newTestBridge(t)
	c := tb.c
	bad := c.send(flowIn(0xff, 10, 1, applyOut(2)))
	c.send(flowIn(0, 10, 1, applyOut(2)))
	echo := c.send(&ofpwire.EchoRequest{Data: []byte("x")})
	bx := c.send(&ofpwire.BarrierRequest{})
	var seen []uint32
	for {
		h, m := c.recv()
		if h.Transaction == bx {
			if _, ok := m.(*ofpwire.BarrierReply); !ok {
				t.Fatalf("barrier xid answered with %T", m)
			}
			break
		}
		seen = append(seen, h.Transaction)
	}
	if len(seen) != 2 || seen[0] != bad || seen[1] != echo {
		t.Fatalf("before the barrier reply came xids %v, want the error (%d) then the echo reply (%d)", seen, bad, echo)
	}
	if fs := c.multipart(allFlows()).(*ofpwire.FlowStatsReply); len(fs.Flows) != 1 {
		t.Fatalf("%d flows after the barrier, want 1", len(fs.Flows))
	}
}

// §7.3.2: GET_CONFIG returns what SET_CONFIG set, starting from flags 0
// (OFPC_FRAG_NORMAL) and miss_send_len 128 (OFPCML default); a flag the
// switch does not support (OFPC_FRAG_REASM) is SWITCH_CONFIG_FAILED /
// BAD_FLAGS and changes nothing.
func TestProtoSwitchConfig(t *testing.T) {
	tb := newTestBridge(t)
	get := func() *ofpwire.GetConfigReply {
		r := tb.c.request(&ofpwire.GetConfigRequest{})
		if len(r) != 1 {
			t.Fatalf("%d replies to GET_CONFIG", len(r))
		}
		return r[0].(*ofpwire.GetConfigReply)
	}
	if g := get(); g.Flags != 0 || g.MissSendLength != 128 {
		t.Fatalf("initial config %+v, want flags 0 miss_send_len 128", g)
	}
	tb.mustRequest(t, &ofpwire.SetConfig{Flags: ofpwire.ConfigFlagFragDrop, MissSendLength: 200})
	if g := get(); g.Flags != ofpwire.ConfigFlagFragDrop || g.MissSendLength != 200 {
		t.Fatalf("config %+v after SET_CONFIG drop/200", g)
	}
	tb.c.wantError(&ofpwire.SetConfig{Flags: ofpwire.ConfigFlagFragReasm, MissSendLength: 300},
		ofpwire.ETSwitchConfigFailed, ofpwire.SCFCBadFlags)
	if g := get(); g.Flags != ofpwire.ConfigFlagFragDrop || g.MissSendLength != 200 {
		t.Fatalf("config %+v after a refused SET_CONFIG", g)
	}
}

// fragFrame is an IPv4 UDP frame that is the first fragment of a datagram
// (more-fragments set) when first, a later fragment otherwise.
func fragFrame(t *testing.T, first bool) []byte {
	eth := &layers.Ethernet{SrcMAC: mac2, DstMAC: mac1, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, Id: 7,
		SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2)}
	var pl []byte
	if first {
		ip.Flags = layers.IPv4MoreFragments
		pl = append([]byte{0x03, 0xe8, 0x07, 0xd0, 0, 16, 0, 0}, make([]byte, 8)...)
	} else {
		ip.FragOffset = 2
		pl = make([]byte, 16)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, gopacket.Payload(pl)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// §7.3.2: with OFPC_FRAG_DROP the switch drops IP fragments (first and
// later ones) before the pipeline; OFPC_FRAG_NORMAL forwards them like
// any packet. Unfragmented packets pass either way.
func TestProtoFragDrop(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, flowIn(0, 10, 1, applyOut(2)))
	send := func(f []byte) int { return len(tb.forward(tb.p1, tb.p2, f)) }
	if send(fragFrame(t, true)) != 1 || send(fragFrame(t, false)) != 1 {
		t.Fatal("FRAG_NORMAL: fragments not forwarded")
	}
	tb.mustRequest(t, &ofpwire.SetConfig{Flags: ofpwire.ConfigFlagFragDrop, MissSendLength: 128})
	if n := send(fragFrame(t, true)) + send(fragFrame(t, false)); n != 0 {
		t.Fatalf("FRAG_DROP: %d fragments forwarded", n)
	}
	if send(frame()) != 1 {
		t.Fatal("FRAG_DROP: an unfragmented packet was dropped")
	}
	tb.mustRequest(t, &ofpwire.SetConfig{Flags: ofpwire.ConfigFlagFragNormal, MissSendLength: 128})
	if send(fragFrame(t, false)) != 1 {
		t.Fatal("back to FRAG_NORMAL: fragment not forwarded")
	}
}

// nextPacketIn returns the next PACKET_IN the client receives.
func (c *client) nextPacketIn() *ofpwire.PacketIn {
	c.t.Helper()
	for {
		_, m := c.recv()
		if pi, ok := m.(*ofpwire.PacketIn); ok {
			return pi
		}
	}
}

// §7.3.2: miss_send_len is the number of bytes of a packet the pipeline
// sends to the controller other than by an output action, such as a
// packet with an invalid TTL (§5.12, reason OFPR_INVALID_TTL); the
// packet-in's total_len is still the whole packet's.
func TestProtoMissSendLenInvalidTTL(t *testing.T) {
	tb := newTestBridge(t)
	all := ofpwire.AsyncConfig{PacketInMask: [2]uint32{0x7, 0x7}, PortStatusMask: [2]uint32{0x7, 0x7}, FlowRemovedMask: [2]uint32{0xf, 0xf}}
	tb.mustRequest(t, (*ofpwire.SetAsync)(&all))
	tb.mustRequest(t, &ofpwire.SetConfig{MissSendLength: 30})
	fm := flowIn(0, 10, 1, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionDecNwTTL{}, &ofpwire.ActionOutput{Port: 2}}})
	fm.Cookie = 0xabc
	tb.mustRequest(t, fm)
	eth := &layers.Ethernet{SrcMAC: mac2, DstMAC: mac1, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 1, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(198, 18, 0, 1), DstIP: net.IPv4(198, 18, 0, 2)}
	udp := &layers.UDP{SrcPort: 1, DstPort: 2}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, gopacket.Payload(make([]byte, 64))); err != nil {
		t.Fatal(err)
	}
	f := buf.Bytes()
	if got := tb.forward(tb.p1, tb.p2, f); len(got) != 0 {
		t.Fatalf("a TTL 1 packet was forwarded by dec_ttl")
	}
	pi := tb.c.nextPacketIn()
	if pi.Reason != ofpwire.PacketInReasonInvalidTTL || len(pi.Data) != 30 || int(pi.TotalLen) != len(f) ||
		pi.BufferID != ofpwire.NoBuffer || pi.Cookie != 0xabc || !bytes.Equal(pi.Data, f[:30]) {
		t.Fatalf("packet-in reason %d, %d of %d bytes, buffer %#x, cookie %#x; want INVALID_TTL, 30 of %d (miss_send_len), NO_BUFFER, 0xabc",
			pi.Reason, len(pi.Data), pi.TotalLen, pi.BufferID, pi.Cookie, len(f))
	}
}

// §7.3.3: TABLE_MOD applies to an existing table or OFPTT_ALL; in 1.3
// the config bits are deprecated (OFPTC_DEPRECATED_MASK) and any other
// is invalid. A table the switch does not have is TABLE_MOD_FAILED /
// BAD_TABLE, a bad config TABLE_MOD_FAILED / BAD_CONFIG.
func TestProtoTableMod(t *testing.T) {
	tb := newTestBridge(t)
	tb.mustRequest(t, &ofpwire.TableMod{Table: 0})
	tb.mustRequest(t, &ofpwire.TableMod{Table: ofpwire.TableAll, Config: 3})
	tb.mustRequest(t, &ofpwire.TableMod{Table: 253})
	tb.c.wantError(&ofpwire.TableMod{Table: 254}, ofpwire.ETTableModFailed, ofpwire.TMFCBadTable)
	tb.c.wantError(&ofpwire.TableMod{Table: 0, Config: 1 << 3}, ofpwire.ETTableModFailed, ofpwire.TMFCBadConfig)
}

// §7.3.4.3 and §7.4.4: PORT_MOD of a port the switch does not have is
// PORT_MOD_FAILED / BAD_PORT, one whose hw_addr is not the port's is
// BAD_HW_ADDR, a config bit outside what the switch supports is
// BAD_CONFIG. An accepted PORT_MOD changes the port's config (port
// description) and, as a change of port attributes, sends PORT_STATUS
// with reason OFPPR_MODIFY (§7.4.3); NO_FWD then drops output to it.
func TestProtoPortMod(t *testing.T) {
	tb := newTestBridge(t)
	hw := tb.portDesc(2).HWAddr
	pm := func(no ofpwire.PortNo, hw net.HardwareAddr, cfg, mask ofpwire.PortConfig) *ofpwire.PortMod {
		return &ofpwire.PortMod{PortNo: no, HWAddr: hw, Config: cfg, Mask: mask}
	}
	tb.c.wantError(pm(77, hw, 0, 0), ofpwire.ETPortModFailed, ofpwire.PMFCBadPort)
	tb.c.wantError(pm(ofpwire.PortAny, hw, 0, 0), ofpwire.ETPortModFailed, ofpwire.PMFCBadPort)
	tb.c.wantError(pm(2, net.HardwareAddr{2, 9, 9, 9, 9, 9}, 0, 0), ofpwire.ETPortModFailed, ofpwire.PMFCBadHWAddr)
	tb.c.wantError(pm(2, hw, 1<<3, 1<<3), ofpwire.ETPortModFailed, ofpwire.PMFCBadConfig)

	tb.mustRequest(t, flowIn(0, 10, 1, applyOut(2)))
	tb.c.send(pm(2, hw, ofpwire.PortConfigNoFwd, ofpwire.PortConfigNoFwd))
	ps := tb.c.portStatus()
	if ps.Reason != ofpwire.PortReasonModify || ps.Port.PortNo != 2 || ps.Port.Config&ofpwire.PortConfigNoFwd == 0 {
		t.Fatalf("port status %+v, want MODIFY of port 2 with NO_FWD", ps)
	}
	if d := tb.portDesc(2); d.Config&ofpwire.PortConfigNoFwd == 0 {
		t.Fatalf("port 2 config %#x, want NO_FWD", d.Config)
	}
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 0 {
		t.Fatal("output to a NO_FWD port was sent")
	}
	// A mask of 0 changes nothing, whatever config says.
	tb.mustRequest(t, pm(2, hw, 0, 0))
	if d := tb.portDesc(2); d.Config&ofpwire.PortConfigNoFwd == 0 {
		t.Fatalf("port 2 config %#x after a mask-0 PORT_MOD, want NO_FWD kept", d.Config)
	}
	tb.mustRequest(t, pm(2, hw, 0, ofpwire.PortConfigNoFwd))
	if got := tb.forward(tb.p1, tb.p2, frame()); len(got) != 1 {
		t.Fatal("output not sent after NO_FWD was cleared")
	}
}

// §6.3.5 and §7.3.9: ROLE_REQUEST to master or slave carries a
// generation_id; one older than the greatest seen (by the 64-bit
// wrap-around distance) is ROLE_REQUEST_FAILED / STALE. A role value
// outside the four is BAD_ROLE. NOCHANGE returns the current role. A
// slave's state-changing requests (FLOW_MOD, PACKET_OUT, GROUP_MOD,
// PORT_MOD, TABLE_MOD, METER_MOD) are BAD_REQUEST / IS_SLAVE; its reads
// are answered.
func TestProtoRoles(t *testing.T) {
	tb := newTestBridge(t)
	role := func(r ofpwire.ControllerRole, gen uint64) *ofpwire.RoleReply {
		t.Helper()
		rs := tb.c.request(&ofpwire.RoleRequest{Role: r, GenerationID: gen})
		if len(rs) != 1 {
			t.Fatalf("%d replies to ROLE_REQUEST", len(rs))
		}
		rr, ok := rs[0].(*ofpwire.RoleReply)
		if !ok {
			t.Fatalf("ROLE_REQUEST %d/%d: reply %#v", r, gen, rs[0])
		}
		return rr
	}
	if rr := role(ofpwire.ControllerRoleMaster, 5); rr.Role != ofpwire.ControllerRoleMaster || rr.GenerationID != 5 {
		t.Fatalf("role reply %+v, want master gen 5", rr)
	}
	tb.c.wantError(&ofpwire.RoleRequest{Role: ofpwire.ControllerRoleMaster, GenerationID: 3},
		ofpwire.ETRoleRequestFailed, ofpwire.RRFCStale)
	tb.c.wantError(&ofpwire.RoleRequest{Role: 7, GenerationID: 6}, ofpwire.ETRoleRequestFailed, ofpwire.RRFCBadRole)
	if rr := role(ofpwire.ControllerRoleSlave, 6); rr.Role != ofpwire.ControllerRoleSlave {
		t.Fatalf("role reply %+v, want slave", rr)
	}
	if rr := role(ofpwire.ControllerRoleNoChange, 0); rr.Role != ofpwire.ControllerRoleSlave || rr.GenerationID != 6 {
		t.Fatalf("NOCHANGE reply %+v, want slave gen 6", rr)
	}
	for _, m := range []ofpwire.Message{
		flowIn(0, 10, 1, applyOut(2)),
		&ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: ofpwire.PortController, Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}, Data: frame()},
		&ofpwire.PortMod{PortNo: 2, HWAddr: tb.portDesc(2).HWAddr},
		&ofpwire.TableMod{Table: 0},
	} {
		tb.c.wantError(m, ofpwire.ETBadRequest, ofpwire.BRCIsSlave)
	}
	if fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply); len(fs.Flows) != 0 {
		t.Fatalf("a slave's FLOW_MOD installed %+v", fs.Flows)
	}
	// Back to master with a newer generation: writes work again.
	role(ofpwire.ControllerRoleMaster, 7)
	tb.mustRequest(t, flowIn(0, 10, 1, applyOut(2)))
}

// §7.3.10: SET_ASYNC filters the asynchronous messages a connection
// receives by reason; GET_ASYNC returns the filter. With ACTION masked
// out, a packet sent by an output:CONTROLLER action is not sent, while a
// table-miss packet-in (NO_MATCH) still is: the packet-ins come through
// one queue in order, so the first one received must be the table-miss.
func TestProtoAsyncFilter(t *testing.T) {
	tb := newTestBridge(t)
	cfg := ofpwire.AsyncConfig{PacketInMask: [2]uint32{1 << ofpwire.PacketInReasonNoMatch, 1 << ofpwire.PacketInReasonNoMatch},
		PortStatusMask: [2]uint32{0, 0}, FlowRemovedMask: [2]uint32{1, 1}}
	tb.mustRequest(t, (*ofpwire.SetAsync)(&cfg))
	rs := tb.c.request(&ofpwire.GetAsyncRequest{})
	if len(rs) != 1 {
		t.Fatalf("%d replies to GET_ASYNC", len(rs))
	}
	if g, ok := rs[0].(*ofpwire.GetAsyncReply); !ok || ofpwire.AsyncConfig(*g) != cfg {
		t.Fatalf("GET_ASYNC %+v, want %+v", rs[0], cfg)
	}
	tb.mustRequest(t, flowIn(0, 10, 1, applyOut(ofpwire.PortController)))
	miss := flowIn(0, 0, 0, applyOut(ofpwire.PortController))
	tb.mustRequest(t, miss)
	tb.forward(tb.p1, tb.p2, frame())
	tb.forward(tb.p2, tb.p1, frame())
	pi := tb.c.nextPacketIn()
	if pi.Reason != ofpwire.PacketInReasonNoMatch {
		t.Fatalf("first packet-in has reason %d: the ACTION one was not filtered", pi.Reason)
	}
	if in, ok := pi.Match.Field(ofpwire.XMTypeInPort); !ok || in.Uint() != 2 {
		t.Fatalf("packet-in match %+v, want in_port 2", pi.Match)
	}
}

// Table-miss (§5.4): without a table-miss entry a packet that matches
// nothing is dropped, no packet-in; a table-miss entry (priority 0, all
// wildcards) whose action outputs to CONTROLLER sends it with reason
// OFPR_NO_MATCH (§7.4.1), in any table a goto_table reaches; the
// packet-in carries the table id, the entry's cookie, buffer_id
// NO_BUFFER, total_len and a match with in_port and metadata.
func TestProtoTableMissPacketIn(t *testing.T) {
	tb := newTestBridge(t)
	// Table 0 sends port-1 traffic to table 3, writing metadata; no
	// table-miss anywhere yet.
	fm := flowIn(0, 10, 1, &ofpwire.InstrWriteMetadata{Metadata: 0x55, Mask: 0xff}, &ofpwire.InstrGotoTable{TableID: 3})
	tb.mustRequest(t, fm)
	first := frame()
	tb.forward(tb.p1, tb.p2, first)
	miss := flowIn(3, 0, 0, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{
		&ofpwire.ActionOutput{Port: ofpwire.PortController, MaxLen: ofpwire.ContentLenNoBuffer}}})
	miss.Cookie = 0x77
	tb.mustRequest(t, miss)
	second := append(frame(), 0xee) // one byte longer: tells them apart
	tb.forward(tb.p1, tb.p2, second)
	pi := tb.c.nextPacketIn()
	if !bytes.Equal(pi.Data, second) {
		t.Fatalf("first packet-in carries %d bytes: the packet without a table-miss entry was not dropped", len(pi.Data))
	}
	if pi.Reason != ofpwire.PacketInReasonNoMatch || pi.TableID != 3 || pi.Cookie != 0x77 ||
		pi.BufferID != ofpwire.NoBuffer || int(pi.TotalLen) != len(second) {
		t.Fatalf("packet-in %+v, want NO_MATCH from table 3, cookie 0x77, NO_BUFFER, total_len %d", pi, len(second))
	}
	if in, ok := pi.Match.Field(ofpwire.XMTypeInPort); !ok || in.Uint() != 1 {
		t.Fatalf("packet-in match %+v lacks in_port 1", pi.Match)
	}
	if md, ok := pi.Match.Field(ofpwire.XMTypeMetadata); !ok || md.Uint() != 0x55 {
		t.Fatalf("packet-in match %+v lacks metadata 0x55", pi.Match)
	}
}

// §6.4 FLOW_MOD details: a buffer_id that names no buffered packet is
// BAD_REQUEST / BUFFER_UNKNOWN; DELETE selects by cookie under
// cookie_mask, by out_port and out_group; DELETE_STRICT by exact match and
// priority; an entry with OFPFF_SEND_FLOW_REM sends FLOW_REMOVED with
// reason DELETE when deleted (§7.4.2), one without does not.
func TestProtoFlowModEdges(t *testing.T) {
	tb := newTestBridge(t)
	buf := flowIn(0, 10, 1, applyOut(2))
	buf.BufferID = 9
	tb.c.wantError(buf, ofpwire.ETBadRequest, ofpwire.BRCBufferUnknown)

	count := func() int { return len(tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply).Flows) }
	reset := func() {
		del := flowIn(0xff, 0, 0)
		del.Command = ofpwire.FlowDelete
		tb.mustRequest(t, del)
	}
	reset()
	for i, ck := range []uint64{0x10, 0x11, 0x20} {
		fm := flowIn(0, 10, uint32(i+1), applyOut(2))
		fm.Cookie = ck
		tb.mustRequest(t, fm)
	}
	del := flowIn(0xff, 0, 0)
	del.Command, del.Cookie, del.CookieMask = ofpwire.FlowDelete, 0x10, 0xf0
	tb.mustRequest(t, del)
	if fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply); len(fs.Flows) != 1 || fs.Flows[0].Cookie != 0x20 {
		t.Fatalf("after delete cookie 0x10/0xf0: %+v, want only cookie 0x20", fs.Flows)
	}

	reset()
	tb.mustRequest(t, flowIn(0, 10, 1, applyOut(2)))
	tb.mustRequest(t, flowIn(0, 20, 1, applyOut(2)))
	strict := flowIn(0, 10, 1)
	strict.Command = ofpwire.FlowDeleteStrict
	tb.mustRequest(t, strict)
	if fs := tb.c.multipart(allFlows()).(*ofpwire.FlowStatsReply); len(fs.Flows) != 1 || fs.Flows[0].Priority != 20 {
		t.Fatalf("after DELETE_STRICT priority 10: %+v, want only priority 20", fs.Flows)
	}

	reset()
	tb.mustRequest(t, flowIn(0, 10, 1, applyOut(2)))
	tb.mustRequest(t, flowIn(0, 10, 2, applyOut(1)))
	byPort := flowIn(0xff, 0, 0)
	byPort.Command, byPort.OutPort = ofpwire.FlowDelete, 2
	tb.mustRequest(t, byPort)
	if n := count(); n != 1 {
		t.Fatalf("after delete out_port 2: %d flows, want 1", n)
	}
	tb.mustRequest(t, &ofpwire.GroupMod{Command: ofpwire.GroupAdd, Type: ofpwire.GroupTypeAll, GroupID: 4,
		Buckets: []ofpwire.Bucket{{Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}}}})
	tb.mustRequest(t, flowIn(0, 10, 3, &ofpwire.InstrApplyActions{Actions: []ofpwire.Action{&ofpwire.ActionGroup{Group: 4}}}))
	byGroup := flowIn(0xff, 0, 0)
	byGroup.Command, byGroup.OutGroup = ofpwire.FlowDelete, 4
	tb.mustRequest(t, byGroup)
	if n := count(); n != 1 {
		t.Fatalf("after delete out_group 4: %d flows, want 1", n)
	}

	reset()
	quiet := flowIn(0, 10, 1, applyOut(2))
	loud := flowIn(0, 10, 2, applyOut(1))
	loud.Flags, loud.Cookie = ofpwire.FlowFlagSendFlowRem, 0xbeef
	tb.mustRequest(t, quiet)
	tb.mustRequest(t, loud)
	del = flowIn(0xff, 0, 0)
	del.Command = ofpwire.FlowDelete
	var removed []*ofpwire.FlowRemoved
	xid := tb.c.send(del)
	bx := tb.c.send(&ofpwire.BarrierRequest{})
	for {
		h, m := tb.c.recv()
		if h.Transaction == bx {
			break
		}
		if fr, ok := m.(*ofpwire.FlowRemoved); ok {
			removed = append(removed, fr)
		} else if h.Transaction == xid {
			t.Fatalf("DELETE answered with %#v", m)
		}
	}
	if len(removed) != 1 || removed[0].Cookie != 0xbeef || removed[0].Reason != ofpwire.FlowReasonDelete || removed[0].Priority != 10 {
		t.Fatalf("FLOW_REMOVED messages %+v, want one for cookie 0xbeef with reason DELETE", removed)
	}
}

// §7.2.4 / §6.4: instruction errors. An instruction type the switch does
// not know is BAD_INSTRUCTION / UNKNOWN_INST; an experimenter instruction
// of an unknown experimenter BAD_EXPERIMENTER.
func TestProtoInstructionErrors(t *testing.T) {
	tb := newTestBridge(t)
	p := dialRaw(t, tb.sock)
	p.handshake()
	base := func(ins []byte) []byte {
		fm, err := ofpwire.Encode(0, flowIn(0, 10, 1))
		if err != nil {
			t.Fatal(err)
		}
		b := append(fm[8:], ins...)
		return b
	}
	for i, c := range []struct {
		name      string
		ins       []byte
		typ, code uint16
	}{
		{"unknown instruction type", []byte{0, 9, 0, 8, 0, 0, 0, 0}, ofpwire.ETBadInstruction, ofpwire.BICUnknownInst},
		{"experimenter instruction", []byte{0xff, 0xff, 0, 8, 0xde, 0xad, 0xbe, 0xef}, ofpwire.ETBadInstruction, ofpwire.BICBadExperimenter},
	} {
		t.Run(c.name, func(t *testing.T) {
			p.t = t
			msg := rawMsg(4, 14, uint32(700+i), base(c.ins))
			p.write(msg)
			p.wantError(msg, c.typ, c.code)
		})
	}
}

// §7.5.1: HELLO elements of a type the switch does not know are ignored
// (the version bitmap still decides).
func TestProtoHelloUnknownElement(t *testing.T) {
	tb := newTestBridge(t)
	p := dialRaw(t, tb.sock)
	hello := helloBitmap(4, 4)
	hello = append(hello, 0, 0x63, 0, 8, 1, 2, 3, 4) // element type 99
	binary.BigEndian.PutUint16(hello[2:], uint16(len(hello)))
	p.write(hello)
	if h, _ := p.mustRead(); h.Type != 0 {
		t.Fatalf("first message type %d", h.Type)
	}
	p.write(rawMsg(4, 2, 9, nil))
	if h, _ := p.mustRead(); h.Type != 3 || h.Transaction != 9 {
		t.Fatalf("after a HELLO with an unknown element: reply type %d xid %d, want ECHO_REPLY", h.Type, h.Transaction)
	}
}

// §7.3.1: FEATURES_REPLY carries the datapath id, the number of tables
// and no buffers (the switch buffers no packet), on the main connection
// (auxiliary_id 0).
func TestProtoFeatures(t *testing.T) {
	tb := newTestBridge(t)
	rs := tb.c.request(&ofpwire.FeaturesRequest{})
	if len(rs) != 1 {
		t.Fatalf("%d replies to FEATURES_REQUEST", len(rs))
	}
	f, ok := rs[0].(*ofpwire.FeaturesReply)
	if !ok || f.DatapathID != 0x1234 || f.NumTables != 254 || f.NumBuffers != 0 || f.AuxiliaryID != 0 {
		t.Fatalf("features %+v, want dpid 0x1234, 254 tables, no buffers, auxiliary 0", rs[0])
	}
}

// §6.3.5: a controller that becomes master makes the former master a
// slave, which is then refused writes (IS_SLAVE); EQUAL has full access.
// §7.3.10's default asynchronous configuration sends a slave port-status
// but no packet-in.
func TestProtoMasterTakeover(t *testing.T) {
	tb := newTestBridge(t)
	a, b := tb.c, dial(t, "unix", tb.sock)
	for _, c := range []*client{a, b} {
		rs := c.request(&ofpwire.RoleRequest{Role: ofpwire.ControllerRoleMaster, GenerationID: 1})
		if rr, ok := rs[0].(*ofpwire.RoleReply); !ok || rr.Role != ofpwire.ControllerRoleMaster {
			t.Fatalf("role reply %#v", rs[0])
		}
	}
	a.wantError(flowIn(0, 10, 1, applyOut(2)), ofpwire.ETBadRequest, ofpwire.BRCIsSlave)
	if r := b.request(flowIn(0, 10, 1, applyOut(ofpwire.PortController))); len(r) != 0 {
		t.Fatalf("the new master's FLOW_MOD: %#v", r)
	}
	// The slave gets no packet-in: b's arrives, and the port status
	// after it reaches a first (so a saw no packet-in before it).
	tb.forward(tb.p1, tb.p2, frame())
	if pi := b.nextPacketIn(); pi.Reason != ofpwire.PacketInReasonAction {
		t.Fatalf("master's packet-in reason %d", pi.Reason)
	}
	b.send(&ofpwire.PortMod{PortNo: 2, HWAddr: tb.portDesc(2).HWAddr, Config: ofpwire.PortConfigNoFwd, Mask: ofpwire.PortConfigNoFwd})
	for {
		_, m := a.recv()
		if _, ok := m.(*ofpwire.PacketIn); ok {
			t.Fatal("a slave received a packet-in")
		}
		if ps, ok := m.(*ofpwire.PortStatus); ok && ps.Reason == ofpwire.PortReasonModify {
			break
		}
	}
	// EQUAL writes like a master.
	a.request(&ofpwire.RoleRequest{Role: ofpwire.ControllerRoleEqual})
	if r := a.request(flowIn(0, 11, 1, applyOut(2))); len(r) != 0 {
		t.Fatalf("EQUAL's FLOW_MOD: %#v", r)
	}
}

// §7.3.5 and §7.4.4: a multipart request naming a table the switch does
// not have is BAD_REQUEST / BAD_TABLE_ID; one naming a port it does not
// have BAD_REQUEST / BAD_PORT; a body of the wrong length BAD_LEN.
func TestProtoMultipartErrors(t *testing.T) {
	tb := newTestBridge(t)
	fs := allFlows()
	fs.TableID = 254
	tb.c.wantError(&ofpwire.MultipartRequest{Body: fs}, ofpwire.ETBadRequest, ofpwire.BRCBadTableID)
	tb.c.wantError(&ofpwire.MultipartRequest{Body: &ofpwire.PortStatsRequest{PortNo: 77}}, ofpwire.ETBadRequest, ofpwire.BRCBadPort)
	p := dialRaw(t, tb.sock)
	p.handshake()
	desc := rawMsg(4, 18, 800, []byte{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}) // OFPMP_DESC has no body
	p.write(desc)
	p.wantError(desc, ofpwire.ETBadRequest, ofpwire.BRCBadLen)
}

// §7.3.7: a PACKET_OUT's in_port must be a port of the switch,
// OFPP_CONTROLLER, OFPP_LOCAL or (no port) OFPP_ANY; another reserved
// port is BAD_REQUEST / BAD_PORT (§7.4.4: "in_port in packet-out").
func TestProtoPacketOutInPort(t *testing.T) {
	tb := newTestBridge(t)
	po := func(in ofpwire.PortNo) *ofpwire.PacketOut {
		return &ofpwire.PacketOut{BufferID: ofpwire.NoBuffer, InPort: in,
			Actions: []ofpwire.Action{&ofpwire.ActionOutput{Port: 2}}, Data: frame()}
	}
	for _, in := range []ofpwire.PortNo{1, ofpwire.PortController, ofpwire.PortLocal, ofpwire.PortAny} {
		if r := tb.c.request(po(in)); len(r) != 0 {
			t.Fatalf("in_port %#x: %#v", in, r)
		}
	}
	for _, in := range []ofpwire.PortNo{ofpwire.PortIn, ofpwire.PortTable, ofpwire.PortFlood, ofpwire.PortAll, ofpwire.PortNormal} {
		tb.c.wantError(po(in), ofpwire.ETBadRequest, ofpwire.BRCBadPort)
	}
}

// §7.2.5 / §7.4.4 OFPET_BAD_ACTION: an action type the switch does not
// know is BAD_TYPE, an experimenter action BAD_EXPERIMENTER, an action
// whose length is not a multiple of 8 or overruns the list BAD_LEN, a
// set-field whose OXM length is wrong for the field BAD_SET_LEN (1.3.5),
// output to a reserved port a flow entry may not use BAD_OUT_PORT.
func TestProtoActionErrors(t *testing.T) {
	tb := newTestBridge(t)
	p := dialRaw(t, tb.sock)
	p.handshake()
	withApply := func(acts []byte) []byte {
		fm, err := ofpwire.Encode(0, flowIn(0, 10, 1))
		if err != nil {
			t.Fatal(err)
		}
		ins := []byte{0, 4, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint16(ins[2:], uint16(8+len(acts)))
		return append(append(fm[8:], ins...), acts...)
	}
	for i, c := range []struct {
		name      string
		acts      []byte
		typ, code uint16
	}{
		{"unknown action type", []byte{0, 99, 0, 8, 0, 0, 0, 0}, ofpwire.ETBadAction, ofpwire.BACBadType},
		{"experimenter action", []byte{0xff, 0xff, 0, 8, 0xde, 0xad, 0xbe, 0xef}, ofpwire.ETBadAction, ofpwire.BACBadExperimenter},
		{"action length 12", []byte{0, 18, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ofpwire.ETBadAction, ofpwire.BACBadLen},
		{"action overruns the list", []byte{0, 18, 0, 16, 0, 0, 0, 0}, ofpwire.ETBadAction, ofpwire.BACBadLen},
		// set_field eth_type (class 0x8000 field 5) with a 4-byte value
		{"set_field with a wrong value length", []byte{0, 25, 0, 16, 0x80, 0, 5 << 1, 4, 0, 0, 8, 0, 0, 0, 0, 0}, ofpwire.ETBadAction, ofpwire.BACBadSetLen},
		{"output to IN_PORT is fine, to TABLE is not", []byte{0, 0, 0, 16, 0xff, 0xff, 0xff, 0xf9, 0xff, 0xff, 0, 0, 0, 0, 0, 0}, ofpwire.ETBadAction, ofpwire.BACBadOutPort},
	} {
		t.Run(c.name, func(t *testing.T) {
			p.t = t
			msg := rawMsg(4, 14, uint32(900+i), withApply(c.acts))
			p.write(msg)
			p.wantError(msg, c.typ, c.code)
		})
	}
}

// §6.4: OFPTT_ALL is valid only in a DELETE; a MODIFY to it, or any
// FLOW_MOD to a table the switch does not have, is FLOW_MOD_FAILED /
// BAD_TABLE_ID.
func TestProtoFlowModTableIDs(t *testing.T) {
	tb := newTestBridge(t)
	for _, c := range []struct {
		cmd   ofpwire.FlowModCommand
		table uint8
	}{{ofpwire.FlowModify, 0xff}, {ofpwire.FlowModifyStrict, 0xff}, {ofpwire.FlowDelete, 254}, {ofpwire.FlowDeleteStrict, 254}, {ofpwire.FlowModify, 254}} {
		fm := flowIn(c.table, 10, 1, applyOut(2))
		fm.Command = c.cmd
		tb.c.wantError(fm, ofpwire.ETFlowModFailed, ofpwire.FMFCBadTableID)
	}
}

// §6.3.5: generation ids compare by the signed 64-bit distance, so a
// generation "behind" by wrap-around is stale too.
func TestProtoRoleGenerationWrap(t *testing.T) {
	tb := newTestBridge(t)
	tb.c.request(&ofpwire.RoleRequest{Role: ofpwire.ControllerRoleMaster, GenerationID: 7})
	tb.c.wantError(&ofpwire.RoleRequest{Role: ofpwire.ControllerRoleSlave, GenerationID: ^uint64(0)},
		ofpwire.ETRoleRequestFailed, ofpwire.RRFCStale)
	rs := tb.c.request(&ofpwire.RoleRequest{Role: ofpwire.ControllerRoleMaster, GenerationID: 1 << 63})
	if rr, ok := rs[0].(*ofpwire.RoleReply); !ok || rr.GenerationID != 1<<63 {
		t.Fatalf("a generation ahead by 2^63-7: %#v", rs[0])
	}
}

// §7.3.6: QUEUE_GET_CONFIG for OFPP_ANY lists every configured queue (the
// switch has none); for a port the switch does not have it is
// QUEUE_OP_FAILED / BAD_PORT.
func TestProtoQueueGetConfig(t *testing.T) {
	tb := newTestBridge(t)
	rs := tb.c.request(&ofpwire.QueueGetConfigRequest{Port: ofpwire.PortAny})
	if len(rs) != 1 {
		t.Fatalf("%d replies", len(rs))
	}
	if r, ok := rs[0].(*ofpwire.QueueGetConfigReply); !ok || r.Port != ofpwire.PortAny {
		t.Fatalf("reply %#v", rs[0])
	}
	tb.c.wantError(&ofpwire.QueueGetConfigRequest{Port: 77}, ofpwire.ETQueueOpFailed, ofpwire.QOFCBadPort)
}

// What ovn-controller sends on connect beside OpenFlow: packet-in2 as the
// packet-in format and a connection-tracking zone flush. Both are
// accepted (no error: OVN 23.03.1 reconnects on any), before the echo
// that follows them is answered.
func TestProtoNiciraSetupMessages(t *testing.T) {
	tb := newTestBridge(t)
	p := dialRaw(t, tb.sock)
	p.handshake()
	p.write(rawMsg(4, 4, 700, []byte{0, 0, 0x23, 0x20, 0, 0, 0, 16, 0, 0, 0, 2}))             // NXT_SET_PACKET_IN_FORMAT packet-in2
	p.write(rawMsg(4, 4, 701, []byte{0, 0, 0x23, 0x20, 0, 0, 0, 29, 0, 7, 0, 0, 0, 0, 0, 0})) // NXT_CT_FLUSH_ZONE zone 7
	p.write(rawMsg(4, 2, 702, []byte("after")))
	if h, raw := p.mustRead(); h.Type != 3 || h.Transaction != 702 {
		t.Fatalf("first message after the Nicira ones: type %d xid %d %x", h.Type, h.Transaction, raw)
	}
}

package conntrack

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// wire is a TCP segment as it leaves the switch.
type wire struct {
	src, dst net.IP
	tcp      *layers.TCP
}

// decodeTCP reads a frame leaving the switch, and checks that its IP
// length is the frame's (but for Ethernet's padding) and that its checksums (IPv4 header, TCP) verify.
func decodeTCP(tb testing.TB, b []byte) wire {
	tb.Helper()
	pkt := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.Default)
	var w wire
	var ipEnd int
	switch l3 := pkt.NetworkLayer().(type) {
	case *layers.IPv4:
		w.src, w.dst = l3.SrcIP, l3.DstIP
		ipEnd = 14 + int(l3.Length)
		if s := header.CsumFold(header.CsumSum(0, b[14:14+20])); s != 0xffff {
			tb.Fatalf("IPv4 header checksum does not verify (sum %#x)", s)
		}
	case *layers.IPv6:
		w.src, w.dst = l3.SrcIP, l3.DstIP
		ipEnd = 14 + 40 + int(l3.Length)
	default:
		tb.Fatalf("not IP: %v", pkt)
	}
	if ipEnd != len(b) && (ipEnd > len(b) || len(b) > 60) { // short frames are padded to 60 bytes
		tb.Fatalf("IP length says the packet ends at %d, the frame at %d", ipEnd, len(b))
	}
	tcp, _ := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP)
	if tcp == nil {
		tb.Fatalf("not TCP: %v", pkt)
	}
	w.tcp = tcp
	l4 := ipEnd - len(tcp.Contents) - len(tcp.Payload)
	var acc uint32
	if w.src.To4() != nil {
		acc = header.CsumSum(acc, w.src.To4())
		acc = header.CsumSum(acc, w.dst.To4())
	} else {
		acc = header.CsumSum(acc, w.src.To16())
		acc = header.CsumSum(acc, w.dst.To16())
	}
	n := uint32(ipEnd - l4)
	acc += uint32(header.IPProtoTCP) + n>>16 + n&0xffff
	if s := header.CsumFold(header.CsumSum(acc, b[l4:ipEnd])); s != 0xffff {
		tb.Fatalf("TCP checksum does not verify (sum %#x)", s)
	}
	return w
}

// ftpEnds are the addresses of an FTP exchange through NAT: the client
// (C) and the server as the client sees it (Sc), the client as the server
// sees it (Cs) and the server (S).
type ftpEnds struct {
	c, sc, cs, s net.IP
	ctl          Params // the ct of the client's control packets
}

// ftpRig runs a control connection from C:40000 to Sc:21 through ct,
// checking every packet as it leaves.
type ftpRig struct {
	t    *testing.T
	tr   *Tracker
	pool *packet.Pool
	e    ftpEnds
	natS uint8 // the ct_state NAT bit of the control connection
}

var back = Params{HasNAT: true} // ct(nat): the translation, no commit

// client sends a control segment from the client; it returns it as it
// leaves, checking its state and addresses.
func (r *ftpRig) client(name string, s seg) wire {
	r.t.Helper()
	s.src, s.dst, s.sport, s.dport, s.wscale = r.e.c, r.e.sc, 40000, 21, -1
	return r.run(name, s, r.e.ctl, r.e.cs, r.e.s, false)
}

func (r *ftpRig) server(name string, s seg) wire {
	r.t.Helper()
	s.src, s.dst, s.sport, s.dport, s.wscale = r.e.s, r.e.cs, 21, 40000, -1
	return r.run(name, s, back, r.e.sc, r.e.c, true)
}

func (r *ftpRig) run(name string, s seg, p Params, src, dst net.IP, reply bool) wire {
	r.t.Helper()
	k, out := runNAT(r.t, r.tr, tcpFrame(r.t, s), p, r.pool)
	want := trk | est | r.natS
	if reply {
		want |= rpl
	}
	if s.syn && !s.ackf {
		want = trk | nw | r.natS
	}
	if k.CT.State != want {
		r.t.Fatalf("%s: %s, want %s", name, stateString(k.CT.State), stateString(want))
	}
	w := decodeTCP(r.t, out)
	if !w.src.Equal(src) || !w.dst.Equal(dst) {
		r.t.Fatalf("%s: leaves %v -> %v, want %v -> %v", name, w.src, w.dst, src, dst)
	}
	return w
}

// data opens a data connection from (src, sport) to (dst, dport), its
// first packet through ct p; it must be +new+rel with NAT state natS,
// leave as osrc -> odst, and the answer come back translated, +est+rel.
func (r *ftpRig) data(name string, src, dst net.IP, sport, dport uint16, p Params, natS uint8, osrc, odst net.IP) {
	r.t.Helper()
	k, out := runNAT(r.t, r.tr, tcpFrame(r.t, seg{src: src, dst: dst, sport: sport, dport: dport, seq: 70, syn: true, wscale: -1}), p, r.pool)
	if want := trk | nw | rel | natS; k.CT.State != want {
		r.t.Fatalf("%s SYN: %s, want %s", name, stateString(k.CT.State), stateString(want))
	}
	w := decodeTCP(r.t, out)
	if !w.src.Equal(osrc) || !w.dst.Equal(odst) || uint16(w.tcp.DstPort) != dport {
		r.t.Fatalf("%s SYN leaves %v -> %v:%d, want %v -> %v:%d", name, w.src, w.dst, w.tcp.DstPort, osrc, odst, dport)
	}
	osport := uint16(w.tcp.SrcPort)
	// The answer, from where the SYN arrived, to where it came from.
	k, out = runNAT(r.t, r.tr, tcpFrame(r.t, seg{src: odst, dst: osrc, sport: dport, dport: osport, seq: 900, ack: 71,
		syn: true, ackf: true, wscale: -1}), back, r.pool)
	if want := trk | est | rel | rpl | natS; k.CT.State != want {
		r.t.Fatalf("%s SYN-ACK: %s, want %s", name, stateString(k.CT.State), stateString(want))
	}
	w = decodeTCP(r.t, out)
	if !w.src.Equal(dst) || !w.dst.Equal(src) || uint16(w.tcp.DstPort) != sport {
		r.t.Fatalf("%s SYN-ACK leaves %v -> %v:%d, want %v -> %v:%d", name, w.src, w.dst, w.tcp.DstPort, dst, src, sport)
	}
	k, _ = runNAT(r.t, r.tr, tcpFrame(r.t, seg{src: src, dst: dst, sport: sport, dport: dport, seq: 71, ack: 901, ackf: true,
		data: []byte("file contents PORT 198,18,0,1,1,1\r\n"), wscale: -1}), back, r.pool)
	if want := trk | est | rel | natS; k.CT.State != want {
		r.t.Fatalf("%s data: %s, want %s", name, stateString(k.CT.State), stateString(want))
	}
}

// TestFTPNAT: an FTP control connection through SNAT (a client behind a
// public address) and DNAT (a server behind a public one), active and
// passive, IPv4 and IPv6: the announced address is rewritten to the one
// the peer knows (or left when the peer knows it already), the sender's
// later sequence numbers and the peer's acknowledgements are shifted by
// the change of length, checksums and IP lengths are right, and the
// announced data connection is +new+rel, then +est+rel, translated both
// ways to line up with the control connection.
func TestFTPNAT(t *testing.T) {
	c4, s4 := ipA, ipB                                            // 198.18.0.1, 198.18.0.2
	pub4, vip4 := net.IP{198, 19, 1, 200}, net.IP{198, 19, 0, 21} // SNAT address, DNAT address
	c6, s6 := ip6A, ip6B
	pub6, vip6 := net.ParseIP("2001:db8:ffff::abcd"), net.ParseIP("2001:db8:ffff::21")
	snat := func(pub net.IP) Params {
		return Params{Commit: true, Helper: HelperFTP, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(pub)}}
	}
	dnat := func(srv net.IP) Params {
		return Params{Commit: true, Helper: HelperFTP, HasNAT: true, NAT: NAT{Dst: true, MinAddr: mapped(srv)}}
	}
	for _, tc := range []struct {
		name      string
		e         ftpEnds
		active    bool // the client announces (PORT/EPRT), else the server (227/229)
		line, out string
		port      uint16
	}{
		{"SNAT active PORT", ftpEnds{c4, s4, pub4, s4, snat(pub4)}, true,
			"PORT 198,18,0,1,19,138\r\n", "PORT 198,19,1,200,19,138\r\n", 5002},
		{"SNAT active EPRT", ftpEnds{c4, s4, pub4, s4, snat(pub4)}, true,
			"EPRT |1|198.18.0.1|5004|\r\n", "EPRT |1|198.19.1.200|5004|\r\n", 5004},
		{"SNAT active, the public address announced", ftpEnds{c4, s4, pub4, s4, snat(pub4)}, true,
			"PORT 198,19,1,200,19,138\r\n", "PORT 198,19,1,200,19,138\r\n", 5002},
		{"SNAT passive 227", ftpEnds{c4, s4, pub4, s4, snat(pub4)}, false,
			"227 Entering Passive Mode (198,18,0,2,19,137).\r\n", "227 Entering Passive Mode (198,18,0,2,19,137).\r\n", 5001},
		{"DNAT passive 227", ftpEnds{c4, vip4, c4, s4, dnat(s4)}, false,
			"227 Entering Passive Mode (198,18,0,2,19,137).\r\n", "227 Entering Passive Mode (198,19,0,21,19,137).\r\n", 5001},
		{"DNAT passive 227, shorter", ftpEnds{c4, net.IP{9, 9, 9, 9}, c4, s4, dnat(s4)}, false,
			"227 Entering Passive Mode (198,18,0,2,19,137).\r\n", "227 Entering Passive Mode (9,9,9,9,19,137).\r\n", 5001},
		{"DNAT active PORT", ftpEnds{c4, vip4, c4, s4, dnat(s4)}, true,
			"PORT 198,18,0,1,19,138\r\n", "PORT 198,18,0,1,19,138\r\n", 5002},
		{"IPv6 SNAT active EPRT", ftpEnds{c6, s6, pub6, s6, snat(pub6)}, true,
			"EPRT |2|2001:db8::1|5004|\r\n", "EPRT |2|2001:db8:ffff::abcd|5004|\r\n", 5004},
		{"IPv6 SNAT passive 229", ftpEnds{c6, s6, pub6, s6, snat(pub6)}, false,
			"229 Entering Extended Passive Mode (|||5003|)\r\n", "229 Entering Extended Passive Mode (|||5003|)\r\n", 5003},
		{"IPv6 DNAT passive 229", ftpEnds{c6, vip6, c6, s6, dnat(s6)}, false,
			"229 Entering Extended Passive Mode (|||5003|)\r\n", "229 Entering Extended Passive Mode (|||5003|)\r\n", 5003},
		{"IPv6 DNAT active EPRT", ftpEnds{c6, vip6, c6, s6, dnat(s6)}, true,
			"EPRT |2|2001:db8::1|5004|\r\n", "EPRT |2|2001:db8::1|5004|\r\n", 5004},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &ftpRig{t: t, tr: New(), pool: packet.NewPool(4, 2048), e: tc.e, natS: flow.CTSrcNAT}
			if tc.e.ctl.NAT.Dst {
				r.natS = flow.CTDstNAT
			}
			c, s := uint32(1000), uint32(5000)
			r.client("SYN", seg{seq: c, syn: true})
			r.server("SYN-ACK", seg{seq: s, ack: c + 1, syn: true, ackf: true})
			r.client("ACK", seg{seq: c + 1, ack: s + 1, ackf: true})
			greet := "220 hello\r\n"
			r.server("220", seg{seq: s + 1, ack: c + 1, ackf: true, data: []byte(greet)})
			s += uint32(len(greet))
			delta := uint32(len(tc.out) - len(tc.line))
			next := []byte("LIST\r\n")
			if tc.active {
				w := r.client("announce", seg{seq: c + 1, ack: s + 1, ackf: true, data: []byte(tc.line)})
				if string(w.tcp.Payload) != tc.out || w.tcp.Seq != c+1 {
					t.Fatalf("announcement leaves as %q seq %d, want %q seq %d", w.tcp.Payload, w.tcp.Seq, tc.out, c+1)
				}
				// The server acknowledges what it got; the client
				// sees its own count.
				w = r.server("ack", seg{seq: s + 1, ack: c + 1 + uint32(len(tc.out)), ackf: true, data: []byte("200 ok\r\n")})
				if w.tcp.Ack != c+1+uint32(len(tc.line)) {
					t.Fatalf("the ack leaves as %d, want %d", w.tcp.Ack, c+1+uint32(len(tc.line)))
				}
				c += uint32(len(tc.line))
				w = r.client("next", seg{seq: c + 1, ack: s + 1 + 8, ackf: true, data: next})
				if w.tcp.Seq != c+1+delta || string(w.tcp.Payload) != string(next) {
					t.Fatalf("the next command leaves with seq %d, want %d", w.tcp.Seq, c+1+delta)
				}
				w = r.server("ack of next", seg{seq: s + 1 + 8, ack: c + 1 + delta + uint32(len(next)), ackf: true})
				if w.tcp.Ack != c+1+uint32(len(next)) {
					t.Fatalf("the ack of the next leaves as %d, want %d", w.tcp.Ack, c+1+uint32(len(next)))
				}
				// The server connects from its data port to
				// the client as it knows it.
				nat := uint8(flow.CTDstNAT)
				if tc.e.ctl.NAT.Dst {
					nat = flow.CTSrcNAT
				}
				if tc.e.cs.Equal(tc.e.c) && tc.e.sc.Equal(tc.e.s) {
					nat = 0
				}
				r.data("active data", tc.e.s, tc.e.cs, 20, tc.port, Params{Commit: true, HasNAT: true}, nat, tc.e.sc, tc.e.c)
			} else {
				r.client("PASV", seg{seq: c + 1, ack: s + 1, ackf: true, data: []byte("PASV\r\n")})
				c += 6
				w := r.server("announce", seg{seq: s + 1, ack: c + 1, ackf: true, data: []byte(tc.line)})
				if string(w.tcp.Payload) != tc.out || w.tcp.Seq != s+1 {
					t.Fatalf("announcement leaves as %q seq %d, want %q seq %d", w.tcp.Payload, w.tcp.Seq, tc.out, s+1)
				}
				w = r.client("ack", seg{seq: c + 1, ack: s + 1 + uint32(len(tc.out)), ackf: true, data: next})
				if w.tcp.Ack != s+1+uint32(len(tc.line)) {
					t.Fatalf("the ack leaves as %d, want %d", w.tcp.Ack, s+1+uint32(len(tc.line)))
				}
				s += uint32(len(tc.line))
				w = r.server("next", seg{seq: s + 1, ack: c + 1 + uint32(len(next)), ackf: true, data: []byte("150 here\r\n")})
				if w.tcp.Seq != s+1+delta {
					t.Fatalf("the next reply leaves with seq %d, want %d", w.tcp.Seq, s+1+delta)
				}
				// The client connects to the server as it
				// knows it, through the ct its control
				// connection took (alg=ftp, nat(...)).
				nat := r.natS
				r.data("passive data", tc.e.c, tc.e.sc, 40001, tc.port, tc.e.ctl, nat, tc.e.cs, tc.e.s)
			}
			if n := r.tr.skews.len(); (n != 0) != (delta != 0) {
				t.Errorf("%d connections with a sequence shift, the rewrite moved %d bytes", n, int32(delta))
			}
			r.tr.Flush(nil)
			if n := r.tr.skews.len(); n != 0 {
				t.Errorf("%d sequence shifts left after a flush", n)
			}
		})
	}
}

// TestFTPNATSequence: the sequence shift over a connection's life
// through SNAT: a retransmitted PORT is rewritten again without
// shifting twice, a second PORT adds its change, SACK blocks are shifted
// back, a command split across two segments is left alone (and expects
// nothing), and a ct without nat neither rewrites nor shifts.
func TestFTPNATSequence(t *testing.T) {
	pub := net.IP{198, 19, 1, 200}
	r := &ftpRig{t: t, tr: New(), pool: packet.NewPool(4, 2048), natS: flow.CTSrcNAT,
		e: ftpEnds{ipA, ipB, pub, ipB, Params{Commit: true, Helper: HelperFTP, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(pub)}}}}
	c, s := uint32(0xfffffff0), uint32(7) // the client's numbers wrap
	r.client("SYN", seg{seq: c, syn: true})
	r.server("SYN-ACK", seg{seq: s, ack: c + 1, syn: true, ackf: true})
	r.client("ACK", seg{seq: c + 1, ack: s + 1, ackf: true})
	port1 := "PORT 198,18,0,1,19,138\r\n" // +2
	out1 := "PORT 198,19,1,200,19,138\r\n"
	for _, name := range []string{"PORT", "PORT again"} {
		w := r.client(name, seg{seq: c + 1, ack: s + 1, ackf: true, data: []byte(port1)})
		if string(w.tcp.Payload) != out1 || w.tcp.Seq != c+1 {
			t.Fatalf("%s leaves as %q seq %d", name, w.tcp.Payload, w.tcp.Seq)
		}
	}
	c += uint32(len(port1))
	port2 := "PORT 198,18,0,1,19,139\r\n" // +2 more
	w := r.client("second PORT", seg{seq: c + 1, ack: s + 1, ackf: true, data: []byte(port2)})
	if w.tcp.Seq != c+1+2 || string(w.tcp.Payload) != "PORT 198,19,1,200,19,139\r\n" {
		t.Fatalf("second PORT leaves as %q seq %d, want seq %d", w.tcp.Payload, w.tcp.Seq, c+1+2)
	}
	c += uint32(len(port2))
	// The server acknowledges the first PORT and SACKs the second.
	sf := tcpFrame(t, seg{src: ipB, dst: pub, sport: 21, dport: 40000, seq: s + 1, ack: c + 1 - uint32(len(port2)) + 2,
		ackf: true, wscale: -1})
	sf = withSACK(t, sf, c+1-uint32(len(port2))+2, c+1+4)
	k, out := runNAT(t, r.tr, sf, back, r.pool)
	if k.CT.State != trk|est|rpl|flow.CTSrcNAT {
		t.Fatalf("SACK: %s", stateString(k.CT.State))
	}
	w = decodeTCP(t, out)
	wantL, wantR := c+1-uint32(len(port2)), c+1
	if w.tcp.Ack != wantL || len(w.tcp.Options) == 0 {
		t.Fatalf("ack %d, want %d; options %v", w.tcp.Ack, wantL, w.tcp.Options)
	}
	for _, o := range w.tcp.Options {
		if o.OptionType == layers.TCPOptionKindSACK {
			if l, r := binary.BigEndian.Uint32(o.OptionData), binary.BigEndian.Uint32(o.OptionData[4:]); l != wantL || r != wantR {
				t.Fatalf("SACK block %d-%d, want %d-%d", l, r, wantL, wantR)
			}
		}
	}
	// A PORT split over two segments: left alone, nothing expected.
	a, b := "PORT 198,18,0,1,", "19,140\r\n"
	w = r.client("split 1", seg{seq: c + 1, ack: s + 1, ackf: true, data: []byte(a)})
	w2 := r.client("split 2", seg{seq: c + 1 + uint32(len(a)), ack: s + 1, ackf: true, data: []byte(b)})
	if string(w.tcp.Payload)+string(w2.tcp.Payload) != a+b || w.tcp.Seq != c+1+4 || w2.tcp.Seq != c+1+4+uint32(len(a)) {
		t.Fatalf("split PORT leaves as %q %q, seq %d %d", w.tcp.Payload, w2.tcp.Payload, w.tcp.Seq, w2.tcp.Seq)
	}
	if ct := track(t, r.tr, tcpFrame(t, seg{src: ipB, dst: pub, sport: 20, dport: 5004, seq: 9, syn: true, wscale: -1}), Params{}, 0); ct.State != trk|nw {
		t.Fatalf("a split PORT's port: %s", stateString(ct.State))
	}
	c += uint32(len(a) + len(b))
	// A ct without nat tracks with the shift but changes nothing.
	plain := tcpFrame(t, seg{src: ipA, dst: ipB, sport: 40000, dport: 21, seq: c + 1, ack: s + 1, ackf: true, data: []byte(port1), wscale: -1})
	pkt := r.pool.Get()
	pkt.SetData(plain)
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	r.tr.Process(pkt, &Params{}, 0)
	if pkt.Key.CT.State != trk|est || string(pkt.Data()) != string(plain) {
		t.Fatalf("ct without nat: %s, frame changed: %v", stateString(pkt.Key.CT.State), string(pkt.Data()) != string(plain))
	}
	pkt.Free()
}

// withSACK returns TCP frame b (IPv4, no options) with a SACK option
// for [l, r), lengths and checksums fixed.
func withSACK(tb testing.TB, b []byte, l, r uint32) []byte {
	tb.Helper()
	opt := []byte{1, 1, 5, 10, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(opt[4:], l)
	binary.BigEndian.PutUint32(opt[8:], r)
	out := append(append(append([]byte(nil), b[:14+20+20]...), opt...), b[14+20+20:]...)
	out[14+20+12] = (20 + 12) / 4 << 4
	binary.BigEndian.PutUint16(out[14+2:], uint16(len(out)-14))
	header.SetIPv4Checksum(out[14:])
	setTCPChecksum(out, 14, 34, len(out), false)
	return out
}

// FuzzFTPNAT plays an FTP control connection through SNAT or DNAT
// (IPv4 or IPv6) between two well-behaved ends: each sends in turn
// segments of fuzzed bytes, some behind an announcement of its own
// address, some retransmitted, and acknowledges all it received. Every
// segment must stay +est, leave with checksums and lengths right, and
// reach the peer contiguous with what it had (no gap, no overlap: the
// shifts add up), with its acknowledgement in the peer's own numbers;
// the data connection an announcement names opens +new+rel, translated.
func FuzzFTPNAT(f *testing.F) {
	f.Add([]byte{0, 4, 3, 'a', 'b', 'c', 5, 0, 0, 4, 0, 2, 3, 'x', 'y', 'z'})
	f.Add([]byte{1, 5, 0, 4, 0, 0, 2, 1, 5, 1, '\n'})
	f.Add([]byte{2, 4, 2, '\r', '\n', 2, 0, 4, 0, 5, 0})
	f.Add([]byte{3, 4, 0, 5, 0, 4, 0, 6, 0, 5, 0})
	f.Add([]byte{0, 12, 0, 13, 0, 12, 1, 'x', 13, 0})
	f.Add([]byte{3, 12, 0, 13, 0, 12, 0, 13, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		v6, dst := data[0]&1 != 0, data[0]&2 != 0
		e := ftpEnds{c: ipA, sc: ipB, cs: net.IP{198, 19, 1, 200}, s: ipB}
		if v6 {
			e = ftpEnds{c: ip6A, sc: ip6B, cs: net.ParseIP("2001:db8:ffff::abcd"), s: ip6B}
		}
		e.ctl = Params{Commit: true, Helper: HelperFTP, HasNAT: true, NAT: NAT{Src: true, MinAddr: mapped(e.cs)}}
		natS := uint8(flow.CTSrcNAT)
		if dst {
			e.sc, e.cs = e.cs, e.c
			e.ctl.NAT = NAT{Dst: true, MinAddr: mapped(e.s)}
			natS = flow.CTDstNAT
		}
		r := &ftpRig{t: t, tr: New(), pool: packet.NewPool(4, 2048), e: e, natS: natS}
		// Each end's next sequence number to send (its own space), the
		// next it expects (as it sees the peer's), and its last segment.
		type end struct {
			snd, rcv uint32
			last     []byte
			lastSeq  uint32
			lastOut  wire
		}
		ends := [2]*end{{snd: 100}, {snd: 9000}}
		r.client("SYN", seg{seq: 100, syn: true})
		w := r.server("SYN-ACK", seg{seq: 9000, ack: 101, syn: true, ackf: true})
		ends[0].rcv, ends[1].rcv = w.tcp.Seq+1, 101
		ends[0].snd, ends[1].snd = 101, 9001
		r.client("ACK", seg{seq: 101, ack: ends[0].rcv, ackf: true})
		own := [2]string{} // each end's announcement of itself
		if v6 {
			own[0] = "EPRT |2|" + e.c.String() + "|5004|\r\n"
			own[1] = "229 Extended Passive Mode (|||5003|)\r\n"
		} else {
			own[0] = "PORT 198,18,0,1,19,138\r\n"
			own[1] = "227 Entering Passive Mode (198,18,0,2,19,137).\r\n"
		}
		dataConns := uint16(0)
		for ops := data[1:]; len(ops) >= 2; {
			ctl, n := ops[0], int(ops[1])
			ops = ops[2:]
			n = min(n, len(ops), 400)
			body := ops[:n]
			ops = ops[n:]
			from := int(ctl & 1)
			me, peer := ends[from], ends[1-from]
			var s seg
			payload := body
			retransmit := ctl&2 != 0 && me.last != nil
			if retransmit {
				payload = me.last
				s.seq = me.lastSeq
			} else {
				if ctl&4 != 0 {
					payload = append([]byte(own[from]), body...)
				}
				if len(payload) == 0 {
					payload = []byte("NOOP\r\n")
				}
				s.seq = me.snd
			}
			s.ack, s.ackf, s.data = me.rcv, true, payload
			if from == 0 {
				w = r.client("segment", s)
			} else {
				w = r.server("segment", s)
			}
			switch {
			case s.seq != me.snd: // the retransmission
				if w.tcp.Seq != me.lastOut.tcp.Seq || string(w.tcp.Payload) != string(me.lastOut.tcp.Payload) {
					t.Fatalf("a retransmission leaves as seq %d %q, first as %d %q", w.tcp.Seq, w.tcp.Payload,
						me.lastOut.tcp.Seq, me.lastOut.tcp.Payload)
				}
			case w.tcp.Seq != peer.rcv:
				t.Fatalf("a segment reaches the peer at %d, it expects %d", w.tcp.Seq, peer.rcv)
			default:
				peer.rcv += uint32(len(w.tcp.Payload))
				me.last, me.lastSeq, me.lastOut = payload, me.snd, w
				me.snd += uint32(len(payload))
			}
			if w.tcp.Ack != peer.snd {
				t.Fatalf("an ack reaches the peer as %d, it sent up to %d", w.tcp.Ack, peer.snd)
			}
			if ctl&12 == 12 && !retransmit && !bytes.Contains(body, []byte("\n")) {
				// The data connection just announced.
				dataConns++
				if from == 0 {
					port := map[bool]uint16{false: 5002, true: 5004}[v6]
					r.data("active data", e.s, e.cs, 20000+dataConns, port, Params{Commit: true, HasNAT: true},
						flow.CTSrcNAT|flow.CTDstNAT^natS, e.sc, e.c)
				} else {
					port := map[bool]uint16{false: 5001, true: 5003}[v6]
					r.data("passive data", e.c, e.sc, 40000+dataConns, port, e.ctl, natS, e.cs, e.s)
				}
			}
			checkInvariants(t, r.tr)
		}
	})
}

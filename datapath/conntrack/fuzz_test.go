package conntrack

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// rawFrame builds an Ethernet/IPv4 frame from a few fuzzed bytes: hosts
// and ports from a small set (so that packets meet each other's
// connections), any protocol, TCP flags, sequence numbers and ICMP types,
// an ICMP error quoting another such packet, and FTP commands.
func rawFrame(op []byte) []byte {
	src, dst := op[0]&3, op[0]>>2&3
	proto := [...]uint8{6, 17, 1, 6, 132, 47, 6, 17}[op[1]&7]
	b := make([]byte, 14+20, 14+20+60)
	binary.BigEndian.PutUint16(b[12:], 0x0800)
	ip := b[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, proto
	copy(ip[12:], []byte{198, 18, 0, 1 + src})
	copy(ip[16:], []byte{198, 18, 0, 1 + dst})
	if op[1]&0x80 != 0 {
		binary.BigEndian.PutUint16(ip[6:], 0x2000|uint16(op[2])) // a fragment
	}
	switch proto {
	case 6:
		tcp := make([]byte, 20+int(op[7]&3)*4)
		binary.BigEndian.PutUint16(tcp[0:], 1000+uint16(op[2]&3))
		binary.BigEndian.PutUint16(tcp[2:], 80+uint16(op[3]&1))
		if op[1]&0x08 != 0 { // from the server's port: a reply can match a connection
			binary.BigEndian.PutUint32(tcp[0:], binary.BigEndian.Uint32(tcp[0:])<<16|binary.BigEndian.Uint32(tcp[0:])>>16)
		}
		binary.BigEndian.PutUint32(tcp[4:], uint32(op[4])<<24|uint32(op[5])<<8)
		binary.BigEndian.PutUint32(tcp[8:], uint32(op[6])<<24)
		tcp[12] = byte(len(tcp)/4) << 4
		tcp[13] = op[3] >> 1 // SYN, FIN, RST, ACK... in any mix
		binary.BigEndian.PutUint16(tcp[14:], uint16(op[7])<<8)
		if len(tcp) > 20 {
			copy(tcp[20:], []byte{3, 3, op[4] & 15})
		}
		b = append(b, tcp...)
		if op[5]&0x20 != 0 {
			// An FTP announcement of the sender's own address and a
			// port the fuzzed packets use, so that a translated
			// control connection's rewrite and its expected data
			// connection happen.
			h := strconv.Itoa(int(1 + src))
			line := [...]string{"PORT 198,18,0," + h + ",0,80\r\n", "227 Passive (198,18,0," + h + ",0,81)\r\n",
				"EPRT |1|198.18.0." + h + "|80|\r\n", "PORT 198,18,0," + h + ",0,"}[op[4]&3]
			b = append(b, line...)
		} else {
			b = append(b, make([]byte, int(op[5]&63))...)
		}
	case 1:
		icmp := []byte{op[2] % 20, 0, 0, 0, 0, op[3] & 1, 0, 1}
		b = append(b, icmp...)
		if icmp[0] == 3 || icmp[0] == 11 { // an error quoting a packet
			inner := make([]byte, 8)
			copy(inner, op[3:])
			inner[1] &^= 0x80 // the quoted packet is a first fragment at most
			b = append(b, rawFrame(inner)[14:][:28]...)
		}
	default:
		l4 := []byte{0, op[2] & 3, 0, 53 + op[3]&1, 0, 8, 0, 0}
		if op[1]&0x08 != 0 { // from the server's port, as a reply
			l4[1], l4[3] = l4[3], l4[1]
		}
		b = append(b, l4...)
	}
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)-14))
	return b
}

// FuzzTracker runs random packet sequences through a small tracker and
// checks its invariants after each: no panic, never more connections than
// the limit (nor than its zone's), every connection indexed under both
// its tuples, and the zones' counts adding up. Some packets go through
// ProcessAhead.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{0x04, 0, 0, 0x04, 1, 0, 0, 0x10, 0x01, 0, 0, 0x13, 9, 0, 1, 0x10})
	f.Add([]byte{0x04, 0x01, 0, 0, 0, 0, 0, 0, 0x01, 0x01, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 3, 1, 0, 0, 0, 0})
	f.Add([]byte{0x04, 0x02, 8, 1, 0, 0, 0, 0, 0x01, 0x02, 0, 1, 0, 0, 0, 0})
	f.Add([]byte("0%0000B0")) // a committed packet from a host to itself: its own reply
	// A committed SYN from host 1 to host 2, and host 2's SYN-ACK back from
	// the server's port (op[1] 0x08): a connection answered.
	f.Add([]byte{0x04, 0x00, 0, 0x04, 1, 0, 0x02, 0x10, 0x01, 0x08, 0, 0x24, 2, 0, 0x02, 0x10})
	// An FTP control connection committed with alg=ftp and SNAT: its
	// PORT rewritten, again (a retransmission), then an EPRT.
	f.Add([]byte{0x04, 0, 1, 0x04, 0, 0, 0x12, 0x40, 0x04, 0, 1, 0x20, 0, 0x20, 0x10, 0x40,
		0x04, 0, 1, 0x20, 0, 0x20, 0x10, 0x40, 0x04, 0, 1, 0x20, 2, 0x21, 0x10, 0x40})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := New()
		tr.SetMaxConns(8)
		tr.SetZoneLimit(1, 3)
		pool := packet.NewPool(1, 2048)
		now := int64(0)
		for len(data) >= 8 {
			op := data[:8]
			data = data[8:]
			now += int64(op[7]&15) * sec * int64(op[6]&1) * 10
			pkt := pool.Get()
			pkt.SetData(rawFrame(op))
			flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
			pkt.KeyValid = true
			p := Params{Zone: uint16(op[6] >> 7), Commit: op[6]&2 != 0, Force: op[6]&4 != 0,
				SetMark: op[6]&8 != 0, Mark: uint32(op[4]), MarkMask: 0xff, HasNAT: op[6]&0x30 != 0,
				Helper: op[2] % 3}
			// nat(src=198.18.0.99:1000-1001) or nat(dst=198.18.0.1): few
			// ports, so translations run out and collide.
			p.NAT = NAT{Src: op[6]&0x10 != 0, Dst: op[6]&0x30 == 0x20, MinPort: 1000, MaxPort: 1001}
			p.NAT.MinAddr = [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 99} // longer than a host's: FTP rewrites shift
			if p.NAT.Dst {
				p.NAT.MinAddr[15], p.NAT.MinPort, p.NAT.MaxPort = 1, 0, 0
			}
			var rw Rewrite
			if op[5]&0x20 != 0 {
				// Through the tuple parsed ahead, as a PMD's
				// batch (in zone 0: ignored for a ct in zone 1).
				var a [1]Ahead
				tr.fillAhead([]*packet.Packet{pkt}, 0, a[:])
				rw = tr.ProcessAhead(pkt, &p, now, &a[0])
			} else {
				rw = tr.Process(pkt, &p, now)
			}
			actions.ApplyList(rw.Actions(&pkt.Key, nil), pkt)
			if s := pkt.Key.CT.State; s&flow.CTTracked == 0 {
				t.Fatalf("ct_state %#x without +trk", s)
			}
			pkt.Free()
			if op[5]&0x40 != 0 {
				tr.Sweep(now)
			}
			if op[5]&0x80 != 0 { // flush what one host started
				m := &Match{Orig: MatchTuple{Src: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 1 + op[0]&3}}}
				tr.FlushMatch(nil, m)
			}
			checkInvariants(t, tr)
		}
	})
}

func checkInvariants(t *testing.T, tr *Tracker) {
	t.Helper()
	if n := tr.Len(); n > tr.MaxConns() || n < 0 {
		t.Fatalf("%d connections, limit %d", n, tr.MaxConns())
	}
	conns := 0
	held := map[*Conn]int32{} // the slots that hold each connection
	for i := range tr.shards {
		x := &tr.shards[i].x
		n := 0
		slots := x.slots()
		for k := range slots {
			if slots[k].m.Load() == 0 {
				continue
			}
			c, h, reply := x.entry(&slots[k])
			if c == nil {
				t.Fatalf("shard %d slot %d: a number that names no connection", i, k)
			}
			held[c]++
			n++
			if tu := tupleOf(c, reply); h != tr.hash(tu) || tr.shardOf(h) != &tr.shards[i] {
				t.Fatalf("an entry in shard %d with hash %#x, its tuple's is %#x", i, h, tr.hash(tu))
			}
			if got, _ := x.get(tupleOf(c, reply), h); got != c {
				t.Fatalf("an entry its own index does not find")
			}
			if got, _ := x.lookup(tupleOf(c, reply), h, &tr.shards[i].mu); got != c {
				t.Fatalf("an entry the lock-free lookup does not find")
			}
			if c.dead {
				continue // a stale entry, dropped at the next Sweep
			}
			if !reply {
				conns++
				if got, _ := tr.shardOf(c.rh).x.get(&c.reply, c.rh); got != c {
					t.Fatalf("connection %+v not found from its reply tuple", c.orig)
				}
			} else if got, _ := tr.shardOf(c.oh).x.get(&c.orig, c.oh); got != c {
				t.Fatalf("connection %+v not found from its original tuple", c.orig)
			}
		}
		if n != x.n {
			t.Fatalf("shard %d holds %d entries, counts %d", i, n, x.n)
		}
	}
	if int64(conns) != tr.Len() {
		t.Fatalf("%d connections indexed, count says %d", conns, tr.Len())
	}
	for c, n := range held {
		if r := c.refs.Load(); r != n {
			t.Fatalf("connection %v: %d references counted, %d slots hold it", c.orig, r, n)
		}
	}
	var inZones int64
	for z, n := range tr.ZoneCounts() {
		inZones += n
		if z == 1 && n > 3 {
			t.Fatalf("zone 1 has %d connections, limit 3", n)
		}
	}
	if inZones != tr.Len() {
		t.Fatalf("zones count %d connections, the tracker %d", inZones, tr.Len())
	}
	st := tr.Stats()
	var byProto, tcp int64
	for _, n := range st.ByProto {
		byProto += n
	}
	for _, n := range st.TCPStates {
		tcp += n
	}
	if byProto != tr.Len() || tcp != st.ByProto[6] {
		t.Fatalf("by protocol %v (sum %d), TCP by state %v, for %d connections", st.ByProto, byProto, st.TCPStates, tr.Len())
	}
}

// FuzzFTPCommands: the FTP helper's parsers take any line from the wire:
// no panic, an address they return is IPv4-mapped for an IPv4 control
// connection, and the span they say it is written at reads back as that
// address (the NAT rewrite replaces exactly those bytes).
func FuzzFTPCommands(f *testing.F) {
	for _, s := range []string{"PORT 198,18,0,1,19,138", "EPRT |1|198.18.0.1|5004|", "EPRT |2|2001:db8::1|5004|",
		"227 Entering Passive Mode (198,18,0,2,19,137).", "229 Entering Extended Passive Mode (|||5003|)", "EPRT ||||", "229 ()",
		"PORT  198, 18,0 ,1,19,138\r", "227 ( 198,18,0,2,19,137 )"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		server := [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 18, 15: 2}
		for _, v6 := range []bool{false, true} {
			a, _, sp, ok := ftpPort(line, v6)
			if ok && !v6 && (a[10] != 0xff || a[11] != 0xff) {
				t.Fatalf("%q: an IPv4 PORT gave %x", line, a)
			}
			if ok {
				checkSpan(t, line, a, sp)
			}
			if a, _, sp, ok := ftpPassive(line, server, v6); ok && sp.to > sp.from {
				checkSpan(t, line, a, sp)
			}
		}
	})
}

// checkSpan: line[sp.from:sp.to] is address a as the line writes it, and
// writing a there (what the NAT rewrite does) leaves a line that reads
// the same.
func checkSpan(t *testing.T, line []byte, a [16]byte, sp span) {
	t.Helper()
	if sp.from < 0 || sp.to > len(line) || sp.from > sp.to {
		t.Fatalf("%q: span %+v", line, sp)
	}
	e := ftpEdit{addr: a, commas: sp.commas}
	got := string(line[sp.from:sp.to])
	if sp.commas {
		f := strings.Split(got, ",")
		if len(f) != 4 {
			t.Fatalf("%q: span %q is not four numbers", line, got)
		}
		for i, v := range f {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 8)
			if err != nil || byte(n) != a[12+i] {
				t.Fatalf("%q: span %q is not the address %s", line, got, e.text(nil))
			}
		}
		return
	}
	if p, err := netip.ParseAddr(got); err != nil || p.As16() != a {
		t.Fatalf("%q: span %q is not the address %s", line, got, e.text(nil))
	}
}

package conntrack

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

const (
	trk = flow.CTTracked
	nw  = flow.CTNew
	est = flow.CTEstablished
	rel = flow.CTRelated
	rpl = flow.CTReply
	inv = flow.CTInvalid
)

// step is one packet of a scenario and the ct_state it must get.
type step struct {
	name  string
	frame []byte
	p     Params
	at    int64 // seconds
	want  uint8
}

func runSteps(t *testing.T, tr *Tracker, steps []step) {
	t.Helper()
	for _, s := range steps {
		got := track(t, tr, s.frame, s.p, s.at*sec)
		if got.State != s.want {
			t.Errorf("%s: ct_state %s, want %s", s.name, stateString(got.State), stateString(s.want))
		}
	}
}

var commit = Params{Commit: true}

// handshake is a TCP connection A:1000 -> B:80 with data both ways and a
// close, for either family.
func handshake(t *testing.T, a, b net.IP) []step {
	const isn, rsn = 1000, 50000
	f := func(s seg) []byte { s.wscale = 7; return tcpFrame(t, s) }
	ab := func(s seg) seg { s.src, s.dst, s.sport, s.dport = a, b, 1000, 80; return s }
	ba := func(s seg) seg { s.src, s.dst, s.sport, s.dport = b, a, 80, 1000; return s }
	return []step{
		{"SYN", f(ab(seg{seq: isn, syn: true})), commit, 0, trk | nw},
		{"retransmitted SYN", f(ab(seg{seq: isn, syn: true})), commit, 1, trk | nw},
		{"SYN-ACK", f(ba(seg{seq: rsn, ack: isn + 1, syn: true, ackf: true})), Params{}, 1, trk | est | rpl},
		{"ACK", f(ab(seg{seq: isn + 1, ack: rsn + 1, ackf: true})), Params{}, 1, trk | est},
		{"data", f(ab(seg{seq: isn + 1, ack: rsn + 1, ackf: true, payload: 100})), Params{}, 2, trk | est},
		{"reply data", f(ba(seg{seq: rsn + 1, ack: isn + 101, ackf: true, payload: 200})), Params{}, 2, trk | est | rpl},
		{"data far outside the window", f(ab(seg{seq: isn + 100_000_000, ack: rsn + 201, ackf: true, payload: 100})), Params{}, 2, trk | inv},
		{"reset with a wrong sequence number", f(ba(seg{seq: rsn + 5_000_000, ack: isn + 101, ackf: true, rst: true})), Params{}, 2, trk | inv},
		{"ack far ahead of what was sent", f(ba(seg{seq: rsn + 201, ack: isn + 10_000_000, ackf: true})), Params{}, 2, trk | inv},
		{"FIN", f(ab(seg{seq: isn + 101, ack: rsn + 201, ackf: true, fin: true})), Params{}, 3, trk | est},
		{"FIN-ACK", f(ba(seg{seq: rsn + 201, ack: isn + 102, ackf: true, fin: true})), Params{}, 3, trk | est | rpl},
		{"last ACK", f(ab(seg{seq: isn + 102, ack: rsn + 202, ackf: true})), Params{}, 3, trk | est},
		{"a new SYN after the close reopens", f(ab(seg{seq: 900_000, syn: true})), commit, 4, trk | nw},
		{"its SYN-ACK", f(ba(seg{seq: 7000, ack: 900_001, syn: true, ackf: true})), Params{}, 4, trk | est | rpl},
	}
}

func TestTCPStateful(t *testing.T) {
	for _, fam := range []struct {
		name string
		a, b net.IP
	}{{"IPv4", ipA, ipB}, {"IPv6", ip6A, ip6B}} {
		t.Run(fam.name, func(t *testing.T) {
			tr := New()
			runSteps(t, tr, handshake(t, fam.a, fam.b))
			if tr.Len() != 1 {
				t.Errorf("%d connections, want 1 (the reopened one)", tr.Len())
			}
			es := tr.Dump(nil, 4*sec)
			if len(es) != 1 || es[0].TCPState != "ESTABLISHED" {
				t.Errorf("dump: %v", es)
			}
		})
	}
}

func TestTCPNotCommitted(t *testing.T) {
	tr := New()
	runSteps(t, tr, []step{
		{"SYN, not committed", tcpFrame(t, seg{src: ipA, dst: ipB, sport: 1, dport: 2, seq: 1, syn: true, wscale: -1}), Params{}, 0, trk | nw},
		{"its SYN-ACK cannot start a connection", tcpFrame(t, seg{src: ipB, dst: ipA, sport: 2, dport: 1, seq: 9, ack: 2, syn: true, ackf: true, wscale: -1}), Params{}, 0, trk | inv},
		{"SYN with FIN", tcpFrame(t, seg{src: ipA, dst: ipB, sport: 1, dport: 2, seq: 1, syn: true, fin: true, wscale: -1}), commit, 0, trk | inv},
		{"no flags at all", tcpFrame(t, seg{src: ipA, dst: ipB, sport: 1, dport: 2, seq: 1, wscale: -1}), commit, 0, trk | inv},
		{"mid-stream ACK is picked up", tcpFrame(t, seg{src: ipA, dst: ipB, sport: 3, dport: 4, seq: 1, ack: 5, ackf: true, wscale: -1}), commit, 0, trk | nw},
		{"and its reply passes", tcpFrame(t, seg{src: ipB, dst: ipA, sport: 4, dport: 3, seq: 5, ack: 1, ackf: true, wscale: -1}), Params{}, 0, trk | est | rpl},
	})
	if tr.Len() != 1 {
		t.Errorf("%d connections, want 1", tr.Len())
	}
}

func TestUDPAndICMP(t *testing.T) {
	tr := New()
	mark := Params{Commit: true, SetMark: true, Mark: 0x12, MarkMask: 0xff}
	runSteps(t, tr, []step{
		{"UDP out", udpFrame(t, ipA, ipB, 5000, 53), mark, 0, trk | nw},
		// New until the other side answers, as in Open vSwitch and Linux.
		{"UDP again before a reply", udpFrame(t, ipA, ipB, 5000, 53), Params{}, 1, trk | nw},
		{"UDP reply", udpFrame(t, ipB, ipA, 53, 5000), Params{}, 1, trk | est | rpl},
		{"UDP other port", udpFrame(t, ipB, ipA, 53, 5001), Params{}, 1, trk | nw},
		{"port unreachable about the UDP flow", icmpErrorFrame(t, ipB, ipA, 3, 3, udpFrame(t, ipA, ipB, 5000, 53)), Params{}, 1, trk | rel | rpl},
		{"error about an unknown flow", icmpErrorFrame(t, ipB, ipA, 3, 3, udpFrame(t, ipA, ipB, 5000, 54)), Params{}, 1, trk | inv},
		{"echo request", echoFrame(t, ipA, ipB, 8, 77), commit, 1, trk | nw},
		{"echo reply", echoFrame(t, ipB, ipA, 0, 77), Params{}, 1, trk | est | rpl},
		{"echo reply nobody asked for", echoFrame(t, ipB, ipA, 0, 78), commit, 1, trk | inv},
		{"ICMPv6 echo request", echoFrame(t, ip6A, ip6B, 128, 9), commit, 1, trk | nw},
		{"ICMPv6 echo reply", echoFrame(t, ip6B, ip6A, 129, 9), Params{}, 1, trk | est | rpl},
	})
	// The reply carries the connection's mark and original tuple.
	ct := track(t, tr, udpFrame(t, ipB, ipA, 53, 5000), Params{}, 2*sec)
	if ct.Mark != 0x12 || ct.NwProto != 17 || ct.TpSrc != 5000 || ct.TpDst != 53 ||
		net.IP(ct.Src[12:]).String() != "198.18.0.1" || net.IP(ct.Dst[12:]).String() != "198.18.0.2" {
		t.Errorf("reply's conntrack fields: %+v", ct)
	}
	// A masked update keeps the other bits; a label goes with it.
	var lab, lmask [16]byte
	lab[15], lmask[15] = 0x80, 0xf0
	track(t, tr, udpFrame(t, ipA, ipB, 5000, 53), Params{Commit: true, SetMark: true, Mark: 0x300, MarkMask: 0xf00,
		SetLabel: true, Label: lab, LabelMask: lmask}, 3*sec)
	ct = track(t, tr, udpFrame(t, ipB, ipA, 53, 5000), Params{}, 3*sec)
	if ct.Mark != 0x312 || ct.Label != lab {
		t.Errorf("after masked updates: mark %#x label %x", ct.Mark, ct.Label)
	}
	dump := tr.Dump(nil, 3*sec)
	var lines []string
	for _, e := range dump {
		lines = append(lines, e.String())
	}
	want := "udp,orig=(src=198.18.0.1,dst=198.18.0.2,sport=5000,dport=53),reply=(src=198.18.0.2,dst=198.18.0.1,sport=53,dport=5000),mark=786,labels=0x80"
	if !strings.Contains(strings.Join(lines, "\n"), want) {
		t.Errorf("dump lacks %q:\n%s", want, strings.Join(lines, "\n"))
	}
}

func TestZonesApart(t *testing.T) {
	tr := New()
	z1, z2 := Params{Zone: 1, Commit: true}, Params{Zone: 2}
	runSteps(t, tr, []step{
		{"commit in zone 1", udpFrame(t, ipA, ipB, 1, 2), z1, 0, trk | nw},
		{"reply in zone 2 is new there", udpFrame(t, ipB, ipA, 2, 1), z2, 0, trk | nw},
		{"reply in zone 1", udpFrame(t, ipB, ipA, 2, 1), Params{Zone: 1}, 0, trk | est | rpl},
	})
	if ct := track(t, tr, udpFrame(t, ipA, ipB, 1, 2), Params{Zone: 1}, 0); ct.Zone != 1 {
		t.Errorf("ct_zone %d, want 1", ct.Zone)
	}
	zone := uint16(2)
	if n := tr.Flush(&zone); n != 0 {
		t.Errorf("flushing zone 2 removed %d", n)
	}
	zone = 1
	if n := tr.Flush(&zone); n != 1 {
		t.Errorf("flushing zone 1 removed %d, want 1", n)
	}
	runSteps(t, tr, []step{{"after the flush", udpFrame(t, ipB, ipA, 2, 1), Params{Zone: 1}, 0, trk | nw}})
}

func TestTimeouts(t *testing.T) {
	tr := New()
	runSteps(t, tr, []step{
		{"UDP", udpFrame(t, ipA, ipB, 1, 2), commit, 0, trk | nw},
		// Still unanswered: new, but alive (the reply finds it).
		{"29 s later", udpFrame(t, ipA, ipB, 1, 2), Params{}, 29, trk | nw},
		{"reply", udpFrame(t, ipB, ipA, 2, 1), Params{}, 30, trk | est | rpl},
		// Replied: the stream timeout (120 s) from the last packet.
		{"119 s after the reply", udpFrame(t, ipA, ipB, 1, 2), Params{}, 149, trk | est},
		{"121 s after the last", udpFrame(t, ipA, ipB, 1, 2), Params{}, 271, trk | nw},
	})
	swept := 0
	for r := range sweepRounds {
		swept += tr.Sweep(int64(271+r) * sec)
	}
	if swept != 1 || tr.Len() != 0 {
		t.Errorf("sweep removed %d, %d left", swept, tr.Len())
	}
	// An unanswered UDP flow lasts 30 s.
	track(t, tr, udpFrame(t, ipA, ipB, 7, 8), commit, 250*sec)
	if n := tr.Sweep(279 * sec); n != 0 { // 29 s after its packet
		t.Errorf("swept %d at 29 s", n)
	}
	// Every slot within sweepRounds calls (an index at its first size
	// takes more than one).
	n := 0
	for r := range sweepRounds {
		n += tr.Sweep(int64(281+r) * sec)
	}
	if n != 1 {
		t.Errorf("swept %d from 31 s after, want 1", n)
	}
}

// TestLimit: a flood of SYNs from spoofed sources fills the table only to
// its limit, evicting the unanswered ones, and an established connection
// keeps flowing.
func TestLimit(t *testing.T) {
	tr := New()
	tr.SetMaxConns(50)
	runSteps(t, tr, []step{
		{"UDP out", udpFrame(t, ipA, ipB, 1, 2), commit, 0, trk | nw},
		{"UDP back", udpFrame(t, ipB, ipA, 2, 1), Params{}, 0, trk | est | rpl},
	})
	for i := range 10_000 {
		src := net.IP{198, 19, byte(i >> 8), byte(i)}
		ct := track(t, tr, tcpFrame(t, seg{src: src, dst: ipB, sport: uint16(i), dport: 80, seq: 1, syn: true, wscale: -1}), commit, 0)
		if ct.State != trk|nw {
			t.Fatalf("SYN %d: %s", i, stateString(ct.State))
		}
		if tr.Len() > 50 {
			t.Fatalf("%d connections after SYN %d, limit 50", tr.Len(), i)
		}
	}
	runSteps(t, tr, []step{{"the answered flow survives", udpFrame(t, ipB, ipA, 2, 1), Params{}, 1, trk | est | rpl}})
	if st := tr.Stats(); st.Evicted < 9_000 {
		t.Errorf("evicted %d, want most of the flood", st.Evicted)
	}
}

// TestConcurrent: PMDs create and find each other's connections at once
// (run with -race).
func TestConcurrent(t *testing.T) {
	tr := New()
	const workers, per = 4, 300
	frames := make([][2][]byte, workers*per)
	for i := range frames {
		src := net.IP{198, 18, byte(1 + i>>8), byte(i)}
		frames[i] = [2][]byte{udpFrame(t, src, ipB, uint16(i), 9), udpFrame(t, ipB, src, 9, uint16(i))}
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each commits its share, then answers the next worker's.
			for i := w * per; i < (w+1)*per; i++ {
				track(t, tr, frames[i][0], commit, 0)
			}
		}()
	}
	wg.Wait()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := (w + 1) % workers
			for i := o * per; i < (o+1)*per; i++ {
				if ct := track(t, tr, frames[i][1], Params{}, 1); ct.State != trk|est|rpl {
					errs <- fmt.Errorf("reply %d: %s", i, stateString(ct.State))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if tr.Len() != workers*per {
		t.Errorf("%d connections, want %d", tr.Len(), workers*per)
	}
}

func TestForceCommit(t *testing.T) {
	tr := New()
	force := Params{Commit: true, Force: true}
	runSteps(t, tr, []step{
		{"A to B", udpFrame(t, ipA, ipB, 1, 2), commit, 0, trk | nw},
		{"B to A with force: the old one ends, a new one starts", udpFrame(t, ipB, ipA, 2, 1), force, 0, trk | nw},
		{"B to A again: original direction now, unanswered", udpFrame(t, ipB, ipA, 2, 1), Params{}, 0, trk | nw},
		{"A to B: its reply", udpFrame(t, ipA, ipB, 1, 2), Params{}, 0, trk | est | rpl},
	})
}

func TestNotTrackable(t *testing.T) {
	tr := New()
	arp := frame(t, eth(false)) // IPv4 type, no header: truncated
	if ct := track(t, tr, arp, commit, 0); ct.State != trk|inv {
		t.Errorf("truncated IPv4: %s", stateString(ct.State))
	}
	if tr.Len() != 0 || tr.Stats().Invalid != 1 {
		t.Errorf("len %d, invalid %d", tr.Len(), tr.Stats().Invalid)
	}
}

// TestPrefetch: reading ahead for a batch (a table large enough that it
// does) changes nothing, whatever the batch holds, also while another
// PMD commits (run with -race).
func TestPrefetch(t *testing.T) {
	tr := New()
	pool := packet.NewPool(64, 4096)
	mk := func(b []byte) *packet.Packet {
		pkt := pool.Get()
		pkt.SetData(b)
		flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
		pkt.KeyValid = true
		return pkt
	}
	src := func(i int) net.IP { return net.IP{198, 18, byte(i >> 8), byte(i)} }
	const conns = prefetchMin + 100
	pkt := mk(udpFrame(t, src(0), ipB, 1, 9))
	for i := range conns {
		pkt.Key.IPv4Src = 0xc6120000 | uint32(i)
		tr.Process(pkt, &commit, 0)
	}
	pkt.Free()
	if tr.Len() != conns {
		t.Fatalf("%d connections", tr.Len())
	}
	var batch []*packet.Packet
	for i := range 40 { // more than Prefetch looks at
		batch = append(batch, mk(udpFrame(t, ipB, src(i), 9, 1))) // replies of committed ones
	}
	batch = append(batch, mk(udpFrame(t, src(70000), ipB, 1, 9)), mk([]byte{1, 2, 3}))
	batch[len(batch)-1].KeyValid = false
	done := make(chan struct{})
	go func() {
		defer close(done)
		track(t, tr, udpFrame(t, net.IP{198, 19, 0, 1}, ipB, 2, 9), commit, 0)
	}()
	tr.Prefetch(batch, 0, false, nil)
	tr.Prefetch(batch, 0, true, nil)
	tr.Prefetch(batch, 0, true, &NAT{Src: true, MinAddr: [16]byte{10: 0xff, 11: 0xff, 12: 198, 13: 19, 15: 1}, MinPort: 1000, MaxPort: 2000})
	<-done
	if tr.Len() != conns+1 {
		t.Errorf("%d connections after Prefetch, want %d", tr.Len(), conns+1)
	}
	for i, pkt := range batch[:40] {
		tr.Process(pkt, &Params{}, 1)
		if pkt.Key.CT.State != trk|est|rpl {
			t.Errorf("reply %d: %s", i, stateString(pkt.Key.CT.State))
		}
	}
}

// TestLockFreePath: packets of an answered UDP connection take fastPath,
// with the locked path's verdicts: the mark and label a later commit
// sets, the expiry refreshed by the zone's timeouts, and ended or
// expired connections not found.
func TestLockFreePath(t *testing.T) {
	tr := New()
	out, back := udpFrame(t, ipA, ipB, 1, 2), udpFrame(t, ipB, ipA, 2, 1)
	var label [16]byte
	label[0], label[15] = 0xaa, 0x55
	markIt := Params{Commit: true, SetMark: true, Mark: 7, MarkMask: ^uint32(0), SetLabel: true, Label: label, LabelMask: label}
	track(t, tr, out, markIt, 0)
	track(t, tr, back, Params{}, 0)
	for _, f := range [][]byte{out, back} {
		ct := track(t, tr, f, Params{}, sec)
		if ct.State&est == 0 || ct.Mark != 7 || ct.Label != label {
			t.Fatalf("established: %s mark %d label %x", stateString(ct.State), ct.Mark, ct.Label)
		}
	}
	var pp parsed
	pkt := packet.NewPool(1, 4096).Get()
	pkt.SetData(out)
	flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
	parse(pkt, 0, &pp)
	conn, _ := tr.lookup(&pp.t)
	pkt.Free()
	if conn == nil || conn.fast.Load()&fastOK == 0 {
		t.Fatalf("the answered connection is not on the lock-free path")
	}
	// A commit that changes the mark takes the lock; later packets see it.
	track(t, tr, out, Params{Commit: true, SetMark: true, Mark: 9, MarkMask: 0xff}, 2*sec)
	if ct := track(t, tr, back, Params{}, 2*sec); ct.Mark != 9 || ct.State != trk|est|rpl {
		t.Errorf("after the new mark: %s mark %d", stateString(ct.State), ct.Mark)
	}
	// The zone's timeouts apply: 10 s from the last packet.
	to := DefaultTimeouts()
	to.UDPMultiple = 10 * sec
	tr.SetZoneTimeouts(0, &to)
	track(t, tr, out, Params{}, 3*sec)
	if got := conn.expires.Load(); got != 13*sec {
		t.Errorf("expiry %d s, want 13", got/sec)
	}
	if ct := track(t, tr, out, Params{}, 14*sec); ct.State != trk|nw {
		t.Errorf("after the expiry: %s", stateString(ct.State))
	}
	// Ended: the next packet starts a new connection.
	track(t, tr, back, Params{}, 14*sec) // the reply: +est of the new one
	tr.Flush(nil)
	if conn.fast.Load()&fastOK != 0 {
		t.Errorf("a flushed connection stays on the lock-free path")
	}
	if ct := track(t, tr, back, Params{}, 15*sec); ct.State != trk|nw {
		t.Errorf("after the flush: %s", stateString(ct.State))
	}
}

// TestLockFreeMarkConsistent: a PMD on the lock-free path never sees a
// mark and a label from different commits while another commits new
// ones (run with -race).
func TestLockFreeMarkConsistent(t *testing.T) {
	tr := New()
	out, back := udpFrame(t, ipA, ipB, 1, 2), udpFrame(t, ipB, ipA, 2, 1)
	track(t, tr, out, commit, 0)
	track(t, tr, back, Params{}, 0)
	all := [16]byte{}
	for i := range all {
		all[i] = 0xff
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pkt := packet.NewPool(1, 4096).Get()
		defer pkt.Free()
		for k := range 2000 {
			var l [16]byte
			for i := range l {
				l[i] = byte(k)
			}
			pkt.SetData(out)
			flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
			pkt.KeyValid = true
			tr.Process(pkt, &Params{Commit: true, SetMark: true, Mark: uint32(byte(k)), MarkMask: ^uint32(0), SetLabel: true, Label: l, LabelMask: all}, sec)
		}
	}()
	pkt := packet.NewPool(1, 4096).Get()
	defer pkt.Free()
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		default:
		}
		pkt.SetData(back)
		flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
		pkt.KeyValid = true
		tr.Process(pkt, &Params{}, sec)
		ct := &pkt.Key.CT
		for i := range ct.Label {
			if uint32(ct.Label[i]) != ct.Mark {
				t.Fatalf("packet %d: mark %d with label %x", n, ct.Mark, ct.Label)
			}
		}
	}
}

// TestConcurrentSameTuples: PMDs committing the same new connections at
// once (with a mark): one connection each, every packet +new with the
// mark, and the counters (the shards' created, summed by Stats) agree.
func TestConcurrentSameTuples(t *testing.T) {
	tr := New()
	const workers, conns = 4, 400
	frames := make([][]byte, conns)
	for i := range frames {
		frames[i] = udpFrame(t, net.IP{198, 18, 2, byte(i)}, ipB, uint16(1000+i), 53)
	}
	p := Params{Commit: true, SetMark: true, Mark: 7, MarkMask: 0xff}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range frames {
				if ct := track(t, tr, frames[i], p, 0); ct.State&(trk|flow.CTNew) != trk|flow.CTNew || ct.Mark != 7 {
					errs <- fmt.Errorf("packet %d: %s, mark %d", i, stateString(ct.State), ct.Mark)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := tr.Stats()
	if tr.Len() != conns || st.Created != conns || st.ByProto[17] != conns {
		t.Fatalf("%d connections, %d created, %v by protocol; want %d", tr.Len(), st.Created, st.ByProto, conns)
	}
	if n := tr.Flush(nil); n != conns {
		t.Fatalf("flushed %d", n)
	}
	if st = tr.Stats(); st.Created != conns || st.Deleted != conns || len(st.ByProto) != 0 {
		t.Fatalf("after the flush: %d created, %d deleted, %v by protocol", st.Created, st.Deleted, st.ByProto)
	}
}

// TestProcessAhead: ct given the tuples PrefetchAhead parsed and hashed
// for a batch gives every packet the verdict, key and translation
// Process gives it without them: two trackers holding the same
// connections (a table large enough that PrefetchAhead fills the
// tuples), one batch each of the same frames, a mix of replies, new
// connections, TCP (a SYN, an out-of-window segment), ICMP (an echo, an
// error, which PrefetchAhead leaves to Process), an untrackable frame, a
// key not valid, and ct in another zone than the one read ahead for.
func TestProcessAhead(t *testing.T) {
	src := func(i int) net.IP { return net.IP{198, 18, byte(i >> 8), byte(i)} }
	const conns = prefetchMin + 100
	fill := func() *Tracker {
		tr := New()
		for i := range conns {
			track(t, tr, udpFrame(t, src(i), ipB, 1, 9), commit, 0)
		}
		track(t, tr, tcpFrame(t, seg{src: ipA, dst: ipB, sport: 5, dport: 80, seq: 100, syn: true, wscale: -1}), commit, 0)
		track(t, tr, tcpFrame(t, seg{src: ipB, dst: ipA, sport: 80, dport: 5, seq: 500, ack: 101, syn: true, ackf: true, wscale: -1}), Params{}, 0)
		return tr
	}
	frames := [][]byte{
		udpFrame(t, ipB, src(3), 9, 1), // replies
		udpFrame(t, ipB, src(4), 9, 1),
		udpFrame(t, src(5), ipB, 1, 9),     // the original direction
		udpFrame(t, src(70000), ipB, 1, 9), // new
		udpFrame(t, src(70000), ipB, 1, 9), // again, committed by then
		tcpFrame(t, seg{src: ipA, dst: ipB, sport: 5, dport: 80, seq: 101, ack: 501, ackf: true, wscale: -1}),       // established
		tcpFrame(t, seg{src: ipA, dst: ipB, sport: 5, dport: 80, seq: 9_000_000, ack: 501, ackf: true, wscale: -1}), // out of window
		tcpFrame(t, seg{src: ipA, dst: ipB, sport: 6, dport: 80, seq: 1, syn: true, wscale: -1}),                    // a new SYN
		tcpFrame(t, seg{src: ipA, dst: ipB, sport: 7, dport: 80, seq: 1, ackf: true, wscale: -1}),                   // not new
		echoFrame(t, ipA, ipB, 8, 77),
		icmpErrorFrame(t, ipB, src(6), 3, 3, udpFrame(t, src(6), ipB, 1, 9)), // about a committed connection
		{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14},                      // untrackable
		udpFrame(t, ipB, src(7), 9, 1),                                       // its key marked not valid below
	}
	pool := packet.NewPool(2*len(frames), 4096)
	batch := func() []*packet.Packet {
		var b []*packet.Packet
		for _, f := range frames {
			pkt := pool.Get()
			pkt.SetData(f)
			flow.Extract(pkt.Data(), 1, &pkt.Key, &pkt.Offsets)
			pkt.KeyValid = true
			b = append(b, pkt)
		}
		b[len(b)-1].KeyValid = false
		return b
	}
	for _, zone := range []uint16{0, 1} { // 1: not the zone read ahead for
		trA, trP := fill(), fill()
		bA, bP := batch(), batch()
		ahead := make([]Ahead, len(bA))
		if _, filled := trA.PrefetchAhead(bA, 0, true, nil, ahead); !filled {
			t.Fatalf("PrefetchAhead did not fill the tuples at %d connections", trA.Len())
		}
		p := Params{Zone: zone, Commit: true}
		for i := range bA {
			if !bA[i].KeyValid {
				continue // the PMD runs ct on such a packet after re-extracting it
			}
			pa, pp := p, p
			rwA := trA.ProcessAhead(bA[i], &pa, 1, &ahead[i])
			rwP := trP.Process(bP[i], &pp, 1)
			if bA[i].Key.CT != bP[i].Key.CT || rwA != rwP {
				t.Errorf("zone %d, packet %d: ahead %s %+v, %+v; without %s %+v, %+v", zone, i,
					stateString(bA[i].Key.CT.State), bA[i].Key.CT, rwA, stateString(bP[i].Key.CT.State), bP[i].Key.CT, rwP)
			}
		}
		if sA, sP := trA.Stats(), trP.Stats(); sA.Conns != sP.Conns || sA.Invalid != sP.Invalid {
			t.Errorf("zone %d: %d connections, %d invalid; without: %d, %d", zone, sA.Conns, sA.Invalid, sP.Conns, sP.Invalid)
		}
		for _, pkt := range append(bA, bP...) {
			pkt.Free()
		}
	}
}

package datapath

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"

	"github.com/vswitch-go/vswitch/datapath/actions"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/ring"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// gsoPort receives frames as GSO super-frames in big buffers, as afpacket
// does with a virtio_net_hdr, and records what is sent to it with its
// offload state. With gso set it takes GSO frames whole (netdev.GSOSender).
type gsoPort struct {
	*ring.Port
	gso bool
	// hoard makes Recv keep every other big buffer, to exhaust the pool.
	hoard  bool
	hoards []*packet.Packet
	mu     sync.Mutex
	in     []gsoFrame
	sent   []gsoFrame
}

type gsoFrame struct {
	data []byte
	off  packet.Offload
}

func (g *gsoPort) SendsGSO() bool { return g.gso }

func (g *gsoPort) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for len(g.in) > 0 && b.N < packet.BatchSize {
		p := pool.GetBig()
		if p == nil {
			break
		}
		p.SetLen(len(g.in[0].data))
		copy(p.Data(), g.in[0].data)
		p.Offload = g.in[0].off
		b.Add(p)
		g.in = g.in[1:]
		n++
	}
	for g.hoard && n > 0 {
		p := pool.GetBig()
		if p == nil {
			break
		}
		g.hoards = append(g.hoards, p)
	}
	return n
}

func (g *gsoPort) Send(q int, b *packet.Batch) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range b.Packets() {
		g.sent = append(g.sent, gsoFrame{append([]byte(nil), p.Data()...), p.Offload})
	}
	return b.N
}

func (g *gsoPort) inject(f gsoFrame) {
	g.mu.Lock()
	g.in = append(g.in, f)
	g.mu.Unlock()
}

func (g *gsoPort) taken() []gsoFrame {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sent
	g.sent = nil
	return s
}

var _ netdev.GSOSender = (*gsoPort)(nil)

const (
	gsoPayload = 20000
	gsoMSS     = 1448
	gsoSeq     = 0x10000000
	gsoL4      = 14 + 20
)

// tcpSuperFrame is what Linux hands a packet socket for a TCP/IPv4 GSO
// send: one frame with the whole payload, the IP total length of all of
// it, and the pseudo-header sum (uncomplemented) in the TCP checksum.
func tcpSuperFrame() gsoFrame {
	f := make([]byte, gsoL4+20+gsoPayload)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	binary.BigEndian.PutUint16(ip[4:], 100) // IP ID
	ip[8], ip[9] = 64, 6
	copy(ip[12:16], []byte{198, 18, 0, 1})
	copy(ip[16:20], []byte{198, 18, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ^fold16(sum16(ip[:20])))
	tcp := f[gsoL4:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	binary.BigEndian.PutUint32(tcp[4:], gsoSeq)
	tcp[12] = 5 << 4
	tcp[13] = 0x18 // PSH ACK
	for i := range tcp[20:] {
		tcp[20+i] = byte(i*7 + i>>8)
	}
	binary.BigEndian.PutUint16(tcp[16:], fold16(pseudo4(ip, len(tcp))))
	return gsoFrame{f, packet.Offload{Flags: packet.OffloadNeedsCsum, GSOType: vnethdr.GSOTCPv4,
		GSOSize: gsoMSS, CsumStart: gsoL4, CsumOffset: 16, HdrLen: gsoL4 + 20}}
}

func sum16(b []byte) uint32 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	return s
}

func fold16(s uint32) uint16 {
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

func pseudo4(ip []byte, l4len int) uint32 {
	return sum16(ip[12:20]) + 6 + uint32(l4len)
}

// checkSegments checks that segs are the super-frame's payload cut at the
// MSS with consecutive sequence numbers and valid IPv4 and TCP checksums,
// and that each has the addresses and ports given.
func checkSegments(t *testing.T, segs [][]byte, src, dst [4]byte, sport, dport uint16) {
	t.Helper()
	want := tcpSuperFrame().data[gsoL4+20:]
	var payload []byte
	for i, s := range segs {
		const l4off = gsoL4 // no tags in these frames
		ip, tcp := s[14:l4off], s[l4off:]
		if binary.BigEndian.Uint16(ip[2:]) != uint16(len(s)-14) {
			t.Fatalf("segment %d: IP length %d for a %d-byte frame", i, binary.BigEndian.Uint16(ip[2:]), len(s))
		}
		if fold16(sum16(ip[:20])) != 0xffff {
			t.Errorf("segment %d: bad IPv4 header checksum", i)
		}
		if fold16(pseudo4(ip, len(tcp))+sum16(tcp)) != 0xffff {
			t.Errorf("segment %d: bad TCP checksum", i)
		}
		if [4]byte(ip[12:16]) != src || [4]byte(ip[16:20]) != dst {
			t.Errorf("segment %d: addresses %v → %v", i, ip[12:16], ip[16:20])
		}
		if sp, dp := binary.BigEndian.Uint16(tcp[0:]), binary.BigEndian.Uint16(tcp[2:]); sp != sport || dp != dport {
			t.Errorf("segment %d: ports %d → %d", i, sp, dp)
		}
		if seq := binary.BigEndian.Uint32(tcp[4:]); seq != gsoSeq+uint32(len(payload)) {
			t.Errorf("segment %d: seq %#x, want %#x", i, seq, gsoSeq+uint32(len(payload)))
		}
		if n := len(tcp) - 20; n != gsoMSS && i != len(segs)-1 {
			t.Errorf("segment %d: %d payload bytes, want %d", i, n, gsoMSS)
		}
		payload = append(payload, tcp[20:]...)
	}
	if !bytes.Equal(payload, want) {
		t.Errorf("segments carry %d payload bytes, not the super-frame's %d", len(payload), len(want))
	}
}

// checkPartial checks the partial checksum of a TCP/IPv4 super-frame
// whose IP header is at l3: the field must hold the pseudo-header sum of
// its current addresses and whole L4 length, which is what the kernel
// builds every segment's checksum from (and all a local receiver ever
// sees: it trusts CHECKSUM_PARTIAL). The Segmenter computes segment
// checksums afresh, so it cannot tell a wrong partial sum.
func checkPartial(t *testing.T, f gsoFrame, l3 int) {
	t.Helper()
	d := f.data
	start := int(f.off.CsumStart)
	field := binary.BigEndian.Uint16(d[start+int(f.off.CsumOffset):])
	want := fold16(pseudo4(d[l3:], len(d)-start))
	if field != want && !(field == 0 && want == 0xffff) && !(field == 0xffff && want == 0) {
		t.Errorf("partial checksum %#04x, want the pseudo-header sum %#04x", field, want)
	}
}

// segmentOracle cuts a frame a GSOSender was handed the way the kernel
// would, with the Segmenter drivers use on receive.
func segmentOracle(t *testing.T, f gsoFrame) [][]byte {
	t.Helper()
	var s vnethdr.Segmenter
	h := vnethdr.Header(f.off)
	if err := s.Reset(&h, f.data); err != nil {
		t.Fatalf("sent GSO frame does not segment: %v", err)
	}
	var out [][]byte
	buf := make([]byte, 2048)
	for {
		n, ok, err := s.Next(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, append([]byte(nil), buf[:n]...))
	}
}

// gsoSwitch is a datapath with a GSO-receiving port 1, a ring port 2 and
// a GSO-sending port 3, running rule in_port=1 → acts.
func gsoSwitch(t *testing.T, acts ...actions.Action) (dp *Datapath, in *gsoPort, ringOut *ring.Port, gsoOut *gsoPort) {
	return gsoSwitchCfg(t, Config{}, acts...)
}

// gsoSwitchCfg is gsoSwitch with cfg's NoCoalesce.
func gsoSwitchCfg(t *testing.T, cfg Config, acts ...actions.Action) (dp *Datapath, in *gsoPort, ringOut *ring.Port, gsoOut *gsoPort) {
	rules := &RuleTable{}
	dp, err := New(Config{NumPMDs: 1, PMDSleepMax: 0, Upcall: rules, NoCoalesce: cfg.NoCoalesce})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dp.Close() })
	in = &gsoPort{Port: ring.New("in", 1, 1, 64)}
	ringOut = ring.New("ring", 1, 1, 1024)
	gsoOut = &gsoPort{Port: ring.New("gso", 1, 1, 64), gso: true}
	for no, d := range map[uint32]netdev.Netdev{1: in, 2: ringOut, 3: gsoOut} {
		if _, err := dp.AddPort(no, d); err != nil {
			t.Fatal(err)
		}
	}
	r := Rule{Priority: 10, Actions: acts}
	r.Match.Key.InPort, r.Match.Mask.InPort = 1, ^uint32(0)
	rules.Add(r)
	if err := dp.Start(); err != nil {
		t.Fatal(err)
	}
	return dp, in, ringOut, gsoOut
}

var (
	gsoSrc = [4]byte{198, 18, 0, 1}
	gsoDst = [4]byte{198, 18, 0, 2}
)

// TestGSOOutputSegmentsForPortsWithoutGSO: a super-frame output to a
// port that does not take GSO (a ring, as AF_XDP) leaves as MTU-sized
// segments with valid checksums and consecutive sequence numbers, and to
// a port that does as the one frame, its offload state intact.
func TestGSOOutputSegmentsForPortsWithoutGSO(t *testing.T) {
	dp, in, ringOut, gsoOut := gsoSwitch(t, actions.OutputTo(2), actions.OutputTo(3))
	in.inject(tcpSuperFrame())
	want := (gsoPayload + gsoMSS - 1) / gsoMSS
	var segs [][]byte
	var whole []gsoFrame
	waitFor(t, "segments and the whole frame", func() bool {
		ringOut.Drain(0, func(f []byte) { segs = append(segs, append([]byte(nil), f...)) })
		whole = append(whole, gsoOut.taken()...)
		return len(segs) >= want && len(whole) >= 1
	})
	if len(segs) != want || len(whole) != 1 {
		t.Fatalf("%d segments and %d whole frames, want %d and 1", len(segs), len(whole), want)
	}
	checkSegments(t, segs, gsoSrc, gsoDst, 40000, 5201)
	if !bytes.Equal(whole[0].data, tcpSuperFrame().data) || whole[0].off != tcpSuperFrame().off {
		t.Errorf("the GSO port got %d bytes with %+v, not the super-frame unchanged", len(whole[0].data), whole[0].off)
	}
	checkSegments(t, segmentOracle(t, whole[0]), gsoSrc, gsoDst, 40000, 5201)
	checkPartial(t, whole[0], 14)
	if n := dp.PMDs()[0].GSOSegmented(); n != 1 {
		t.Errorf("PMD segmented %d frames, want 1 (for the ring)", n)
	}
	dp.Stop()
	checkNoLeaks(t, dp)
	if b := dp.PMDs()[0].Pool().Big(); b.Available() != b.Size() {
		t.Errorf("%d big buffers not returned", b.Size()-b.Available())
	}
}

// TestGSOSetFieldKeepsWhole: address and port rewrites on a TCP
// super-frame keep it whole, with the partial checksum updated the
// pseudo-header way: the receiver's segmentation (the Segmenter as
// oracle) gives segments whose checksums are right for the new headers.
func TestGSOSetFieldKeepsWhole(t *testing.T) {
	newSrc, newDst := [4]byte{198, 19, 200, 1}, [4]byte{198, 19, 7, 9}
	src := actions.Action{Kind: actions.SetIPv4Src}
	copy(src.Addr[:], newSrc[:])
	dst := actions.Action{Kind: actions.SetIPv4Dst}
	copy(dst.Addr[:], newDst[:])
	dp, in, _, gsoOut := gsoSwitch(t, src, dst, actions.Action{Kind: actions.SetL4Src, Val16: 33333},
		actions.Action{Kind: actions.SetL4Dst, Val16: 8080}, actions.Action{Kind: actions.PushVLAN, Val16: 0x8100, Val16b: 7},
		actions.OutputTo(3))
	in.inject(tcpSuperFrame())
	var got []gsoFrame
	waitFor(t, "the frame", func() bool {
		got = append(got, gsoOut.taken()...)
		return len(got) >= 1
	})
	if len(got) != 1 || got[0].off.GSOType == 0 {
		t.Fatalf("%d frames (first with %+v), want the super-frame whole", len(got), got[0].off)
	}
	checkPartial(t, got[0], 18)
	var untagged [][]byte
	for _, s := range segmentOracle(t, got[0]) {
		untagged = append(untagged, append(append([]byte(nil), s[:12]...), s[16:]...))
	}
	checkSegments(t, untagged, newSrc, newDst, 33333, 8080)
	if n := dp.PMDs()[0].GSOSegmented(); n != 0 {
		t.Errorf("PMD segmented %d frames, want 0", n)
	}
	dp.Stop()
	checkNoLeaks(t, dp)
}

// TestGSOOtherActionsSegmentFirst: an action the datapath does not know
// to keep right on a super-frame (here an ICMP type rewrite, which has
// nothing to change on TCP) makes the PMD cut the frame before the
// actions, and the address rewrite then works on complete checksums.
func TestGSOOtherActionsSegmentFirst(t *testing.T) {
	newDst := [4]byte{198, 19, 7, 9}
	a := actions.Action{Kind: actions.SetIPv4Dst}
	copy(a.Addr[:], newDst[:])
	// Without coalescing: it would merge the segments again, and the
	// checksums to check are the segments' own.
	dp, in, _, gsoOut := gsoSwitchCfg(t, Config{NoCoalesce: true}, a, actions.Action{Kind: actions.SetICMPType, Val8: 3},
		actions.Action{Kind: actions.SetL4Dst, Val16: 8080}, actions.OutputTo(3))
	in.inject(tcpSuperFrame())
	want := (gsoPayload + gsoMSS - 1) / gsoMSS
	var got []gsoFrame
	waitFor(t, "segments", func() bool {
		got = append(got, gsoOut.taken()...)
		return len(got) >= want
	})
	var segs [][]byte
	for _, f := range got {
		if f.off != (packet.Offload{}) {
			t.Fatalf("a segment carries offload state %+v", f.off)
		}
		segs = append(segs, f.data)
	}
	checkSegments(t, segs, gsoSrc, newDst, 40000, 8080)
	dp.Stop()
	checkNoLeaks(t, dp)
}

// TestGSOPushVLANKeepsWhole: a VLAN push is kept right on the whole
// frame: csum_start moves with the headers, and the receiver's
// segmentation yields valid tagged segments.
func TestGSOPushVLANKeepsWhole(t *testing.T) {
	dp, in, _, gsoOut := gsoSwitch(t, actions.Action{Kind: actions.PushVLAN, Val16: 0x8100, Val16b: 42},
		actions.OutputTo(3))
	in.inject(tcpSuperFrame())
	var got []gsoFrame
	waitFor(t, "the frame", func() bool {
		got = append(got, gsoOut.taken()...)
		return len(got) >= 1
	})
	f := got[0]
	if len(got) != 1 {
		t.Fatalf("%d frames, want 1", len(got))
	}
	if binary.BigEndian.Uint16(f.data[12:]) != 0x8100 || binary.BigEndian.Uint16(f.data[14:]) != 42 {
		t.Fatalf("no tag in front: % x", f.data[:18])
	}
	if f.off.CsumStart != gsoL4+4 {
		t.Errorf("csum_start %d, want %d", f.off.CsumStart, gsoL4+4)
	}
	checkPartial(t, f, 18)
	var untagged [][]byte
	for _, s := range segmentOracle(t, f) {
		if binary.BigEndian.Uint16(s[12:]) != 0x8100 {
			t.Fatalf("segment lost its tag")
		}
		untagged = append(untagged, append(append([]byte(nil), s[:12]...), s[16:]...))
	}
	checkSegments(t, untagged, gsoSrc, gsoDst, 40000, 5201)
	dp.Stop()
	checkNoLeaks(t, dp)
}

// TestGSOCopyWithoutBigBuffer: when the copy for an output that is not
// the last action finds no big buffer free, that output gets the frame as
// segments instead of losing it, and the last output still gets it whole.
func TestGSOCopyWithoutBigBuffer(t *testing.T) {
	dp, in, ringOut, gsoOut := gsoSwitch(t, actions.OutputTo(2), actions.OutputTo(3))
	in.mu.Lock()
	in.hoard = true
	in.mu.Unlock()
	in.inject(tcpSuperFrame())
	want := (gsoPayload + gsoMSS - 1) / gsoMSS
	var segs [][]byte
	var whole []gsoFrame
	waitFor(t, "segments and the whole frame", func() bool {
		ringOut.Drain(0, func(f []byte) { segs = append(segs, append([]byte(nil), f...)) })
		whole = append(whole, gsoOut.taken()...)
		return len(segs) >= want && len(whole) >= 1
	})
	checkSegments(t, segs, gsoSrc, gsoDst, 40000, 5201)
	if len(whole) != 1 || !bytes.Equal(whole[0].data, tcpSuperFrame().data) {
		t.Errorf("the GSO port got %d frames, want the super-frame once", len(whole))
	}
	dp.Stop()
	for _, p := range in.hoards {
		p.Free()
	}
	checkNoLeaks(t, dp)
	if b := dp.PMDs()[0].Pool().Big(); b.Available() != b.Size() {
		t.Errorf("%d big buffers not returned", b.Size()-b.Available())
	}
}

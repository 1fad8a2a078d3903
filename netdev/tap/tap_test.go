package tap

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// socketPort is a Port whose queue descriptors are one end of SOCK_SEQPACKET
// socket pairs: a seqpacket read returns one message like a tun read
// returns one frame, so Recv and Send run unchanged without a kernel tap.
// peer[i] is the test's end of queue i.
func socketPort(t testing.TB, queues int) (*Port, []int) {
	t.Helper()
	p := &Port{
		name:     "sock",
		rx:       make([]rxQueue, queues),
		tx:       make([]txQueue, queues),
		counters: make([]netdev.Counters, 2*queues),
		removed:  make(chan struct{}),
		mtu:      1500,
	}
	var peers []int
	for i := 0; i < queues; i++ {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		p.fds = append(p.fds, fds[0])
		peers = append(peers, fds[1])
		t.Cleanup(func() { unix.Close(fds[1]) })
	}
	p.initQueues()
	t.Cleanup(func() { p.Close() })
	return p, peers
}

// tcpFrame builds an Ethernet/IPv4/TCP frame with n payload bytes (byte i
// is i mod 251) and correct checksums.
func tcpFrame(t testing.TB, n int, seq uint32) []byte {
	t.Helper()
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i % 251)
	}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}, Id: 7}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 5201, Seq: seq, ACK: true, PSH: true, Window: 500}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(payload)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// udpPartial builds an Ethernet/IPv4/UDP frame whose UDP checksum field
// holds only the pseudo-header sum, as Linux leaves a CHECKSUM_PARTIAL
// frame, and the vnet header that says so.
func udpPartial(t testing.TB, n int) ([]byte, vnethdr.Header) {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{198, 18, 0, 1}, DstIP: net.IP{198, 18, 0, 2}}
	udp := &layers.UDP{SrcPort: 1234, DstPort: 5678}
	udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(bytes.Repeat([]byte{0xa5}, n))); err != nil {
		t.Fatal(err)
	}
	f := buf.Bytes()
	l4len := len(f) - 34
	var ph []byte
	ph = append(ph, f[26:34]...)
	ph = append(ph, 0, 17, byte(l4len>>8), byte(l4len))
	binary.BigEndian.PutUint16(f[40:], nstest.Checksum(ph, 0))
	return f, vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, CsumStart: 34, CsumOffset: 6}
}

// l4Valid verifies the TCP or UDP checksum of an untagged IPv4 frame.
func l4Valid(f []byte) bool {
	ihl := int(f[14]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(f[16:]))
	l4 := f[14+ihl : 14+total]
	var ph []byte
	ph = append(ph, f[26:34]...)
	ph = append(ph, 0, f[23], byte(len(l4)>>8), byte(len(l4)))
	return nstest.Checksum(append(ph, l4...), 0) == 0xffff
}

func writeMsg(t testing.TB, fd int, h vnethdr.Header, frame []byte) {
	t.Helper()
	msg := make([]byte, vnethdr.Len+len(frame))
	h.Encode(msg)
	copy(msg[vnethdr.Len:], frame)
	if _, err := unix.Write(fd, msg); err != nil {
		t.Fatal(err)
	}
}

// TestRecvSegmentsAcrossBatches feeds a 40-segment TCP GSO frame and then
// small frames: the segments fill one batch and continue in the next, in
// order, with valid checksums and consecutive sequence numbers.
func TestRecvSegmentsAcrossBatches(t *testing.T) {
	p, peer := socketPort(t, 1)
	const mss, nseg = 1000, 40
	big := tcpFrame(t, mss*nseg, 1_000_000)
	writeMsg(t, peer[0], vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, GSOType: vnethdr.GSOTCPv4, HdrLen: 54, GSOSize: mss, CsumStart: 34, CsumOffset: 16}, big)
	small := tcpFrame(t, 10, 5)
	for i := 0; i < 5; i++ {
		writeMsg(t, peer[0], vnethdr.Header{}, small)
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var b packet.Batch
	var got [][]byte
	for i := 0; i < 4; i++ {
		b.Reset()
		n := p.Recv(0, pool, &b)
		if i == 0 && n != packet.BatchSize {
			t.Fatalf("first Recv returned %d, want a full batch", n)
		}
		for _, pkt := range b.Packets() {
			got = append(got, append([]byte(nil), pkt.Data()...))
		}
		b.FreeAll()
	}
	if len(got) != nseg+5 {
		t.Fatalf("received %d frames, want %d", len(got), nseg+5)
	}
	for i := 0; i < nseg; i++ {
		f := got[i]
		if len(f) != 54+mss {
			t.Fatalf("segment %d: %d bytes, want %d", i, len(f), 54+mss)
		}
		if !l4Valid(f) {
			t.Fatalf("segment %d: bad TCP checksum", i)
		}
		if seq := binary.BigEndian.Uint32(f[38:]); seq != 1_000_000+uint32(i*mss) {
			t.Fatalf("segment %d: seq %d", i, seq)
		}
		if !bytes.Equal(f[54:], big[54+i*mss:54+(i+1)*mss]) {
			t.Fatalf("segment %d: payload differs", i)
		}
	}
	for i := nseg; i < len(got); i++ {
		if !bytes.Equal(got[i], small) {
			t.Fatalf("frame %d is not the small frame", i)
		}
	}
	s := p.Stats()
	if s.RxPackets != nseg+5 || s.RxErrors != 0 || s.RxBytes != uint64(nseg*(54+mss)+5*len(small)) {
		t.Errorf("stats %+v", s)
	}
	if pool.Available() != pool.Size() {
		t.Errorf("pool leaked %d buffers", pool.Size()-pool.Available())
	}
}

// TestRecvCompletesChecksum: a CHECKSUM_PARTIAL frame leaves Recv with a
// complete checksum.
func TestRecvCompletesChecksum(t *testing.T) {
	p, peer := socketPort(t, 1)
	f, h := udpPartial(t, 101)
	if l4Valid(f) {
		t.Fatal("test frame already has a complete checksum")
	}
	writeMsg(t, peer[0], h, f)
	pool := packet.NewPool(8, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 1 {
		t.Fatalf("Recv = %d", n)
	}
	if !l4Valid(b.Pkts[0].Data()) {
		t.Error("UDP checksum not completed")
	}
	b.FreeAll()
}

// TestRecvCountsBadFrames: malformed headers are counted as errors and
// dropped; the frames behind them still arrive.
func TestRecvCountsBadFrames(t *testing.T) {
	p, peer := socketPort(t, 1)
	good := tcpFrame(t, 20, 1)
	if _, err := unix.Write(peer[0], []byte{1, 2, 3}); err != nil { // shorter than a vnet header
		t.Fatal(err)
	}
	writeMsg(t, peer[0], vnethdr.Header{GSOType: vnethdr.GSOUDPL4, GSOSize: 100}, good)                     // UDP GSO on TCP
	writeMsg(t, peer[0], vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, CsumStart: 60, CsumOffset: 16}, good) // offsets outside
	writeMsg(t, peer[0], vnethdr.Header{GSOType: vnethdr.GSOTCPv4, GSOSize: 0}, tcpFrame(t, 3000, 1))       // gso_size 0
	writeMsg(t, peer[0], vnethdr.Header{}, make([]byte, packet.DefaultBufSize+100))                         // too big for a buffer, no GSO
	writeMsg(t, peer[0], vnethdr.Header{}, good)
	pool := packet.NewPool(8, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 1 || !bytes.Equal(b.Pkts[0].Data(), good) {
		t.Fatalf("Recv = %d, want the one good frame", n)
	}
	b.FreeAll()
	if s := p.Stats(); s.RxErrors != 5 || s.RxPackets != 1 {
		t.Errorf("stats %+v, want 5 errors and 1 packet", s)
	}
	if pool.Available() != pool.Size() {
		t.Error("pool leaked")
	}
}

// TestRecvPoolDry: with fewer buffers than frames, Recv takes what fits and
// leaves the rest queued for later.
func TestRecvPoolDry(t *testing.T) {
	p, peer := socketPort(t, 1)
	f := tcpFrame(t, 10, 1)
	for i := 0; i < 10; i++ {
		writeMsg(t, peer[0], vnethdr.Header{}, f)
	}
	pool := packet.NewPool(4, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 4 {
		t.Fatalf("Recv = %d, want 4", n)
	}
	b.FreeAll()
	if n := p.Recv(0, pool, &b); n != 4 {
		t.Fatalf("second Recv = %d, want 4", n)
	}
	b.FreeAll()
	if n := p.Recv(0, pool, &b); n != 2 {
		t.Fatalf("third Recv = %d, want 2", n)
	}
	b.FreeAll()
	if s := p.Stats(); s.RxPackets != 10 || s.RxDrops != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestSendZeroHeaderAndDrops: every frame leaves with a zero vnet header;
// when the descriptor refuses more (EAGAIN) the rest count as TxDrops.
func TestSendZeroHeaderAndDrops(t *testing.T) {
	p, peer := socketPort(t, 1)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var b packet.Batch
	for i := 0; i < 3; i++ {
		pkt := pool.Get()
		pkt.SetData(tcpFrame(t, 10*i+1, uint32(i)))
		b.Add(pkt)
	}
	if n := p.Send(0, &b); n != 3 {
		t.Fatalf("Send = %d", n)
	}
	buf := make([]byte, 4096)
	for i := 0; i < 3; i++ {
		n, err := unix.Read(peer[0], buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:vnethdr.Len], make([]byte, vnethdr.Len)) {
			t.Errorf("frame %d: vnet header % x, want zeros", i, buf[:vnethdr.Len])
		}
		if !bytes.Equal(buf[vnethdr.Len:n], b.Pkts[i].Data()) {
			t.Errorf("frame %d differs", i)
		}
	}
	b.FreeAll()
	// Fill the socket: with nobody reading, sends eventually hit EAGAIN.
	for i := 0; i < packet.BatchSize; i++ {
		pkt := pool.Get()
		pkt.SetData(make([]byte, 1500))
		b.Add(pkt)
	}
	var sent, tries int
	for tries = 0; tries < 10000; tries++ {
		n := p.Send(0, &b)
		sent += n
		if n < b.N {
			break
		}
	}
	b.FreeAll()
	s := p.Stats()
	if s.TxDrops == 0 {
		t.Fatal("no TxDrops after filling the queue")
	}
	if s.TxPackets != uint64(3+sent) || s.TxPackets+s.TxDrops != uint64(3+(tries+1)*packet.BatchSize) {
		t.Errorf("stats %+v: sent %d in %d tries", s, sent, tries+1)
	}
}

// TestGoneOnBadDescriptor: EBADF/EBADFD from the descriptor marks the port
// removed without stopping Recv/Send from returning normally.
func TestGoneOnBadDescriptor(t *testing.T) {
	p, _ := socketPort(t, 1)
	fd := p.fds[0]
	p.rx[0].fd, p.tx[0].fd = -1, -1
	pool := packet.NewPool(8, packet.DefaultBufSize)
	var b packet.Batch
	if n := p.Recv(0, pool, &b); n != 0 {
		t.Fatalf("Recv = %d", n)
	}
	select {
	case <-p.Removed():
	default:
		t.Fatal("Removed not closed after EBADF")
	}
	if p.LinkUp() {
		t.Error("LinkUp after removal")
	}
	pkt := pool.Get()
	pkt.SetData(make([]byte, 60))
	b.Add(pkt)
	b.Add(pool.Get())
	b.Pkts[1].SetData(make([]byte, 60))
	if n := p.Send(0, &b); n != 0 {
		t.Fatalf("Send = %d", n)
	}
	b.FreeAll()
	if s := p.Stats(); s.RxErrors != 1 || s.TxErrors != 2 {
		t.Errorf("stats %+v", s)
	}
	p.rx[0].fd, p.tx[0].fd = fd, fd
}

// TestTapInRootNamespace creates real taps in the test's namespace, where
// the link watcher follows them: multi-queue, MTU and MAC options,
// persistence and re-attachment, and removal through `ip link del`.
func TestTapInRootNamespace(t *testing.T) {
	nstest.RequireRoot(t)
	name := nstest.Name("vstap")
	t.Cleanup(func() { nstest.Output("ip", "link", "del", name) })
	mac := net.HardwareAddr{0x02, 0, 0xc6, 0x13, 0, 1}
	p, err := New(name, Options{Queues: 2, MTU: 1400, MAC: mac, Persist: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.NumRxQueues() != 2 || p.NumTxQueues() != 2 || p.RxFD(0) == p.RxFD(1) {
		t.Errorf("queues %d/%d fds %d %d", p.NumRxQueues(), p.NumTxQueues(), p.RxFD(0), p.RxFD(1))
	}
	out := nstest.Run(t, "ip", "-d", "link", "show", name)
	for _, want := range []string{"multi_queue", "vnet_hdr", "mtu 1400", mac.String(), "persist"} {
		if !strings.Contains(out, want) {
			t.Errorf("ip -d link show lacks %q:\n%s", want, out)
		}
	}
	if p.MTU() != 1400 {
		t.Errorf("MTU() = %d", p.MTU())
	}
	nstest.WaitFor(t, 2*time.Second, "link up", p.LinkUp)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if p.Close() == nil {
		t.Error("second Close succeeded")
	}
	if _, err := nstest.Output("ip", "link", "show", name); err != nil {
		t.Fatal("persistent tap disappeared on Close")
	}
	// Attach again, this time not persistent: the device goes with Close.
	p, err = New(name, Options{Queues: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := nstest.Output("ip", "link", "show", name); err == nil {
		t.Error("non-persistent tap still exists after Close")
	}
	// Removal noticed through the link watcher.
	p, err = New(name, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	nstest.Run(t, "ip", "link", "del", name)
	select {
	case <-p.Removed():
	case <-time.After(5 * time.Second):
		t.Fatal("Removed not closed after ip link del")
	}
	if p.LinkUp() {
		t.Error("LinkUp after removal")
	}
}

// FuzzDeliver feeds arbitrary vnet headers and frames, placed as readv
// places them, through the receive path and the segmenter: nothing may
// panic, every segment must fit its buffer, and every buffer must return.
func FuzzDeliver(f *testing.F) {
	tcp := tcpFrame(f, 3000, 1)
	h := make([]byte, vnethdr.Len)
	(&vnethdr.Header{Flags: 1, GSOType: vnethdr.GSOTCPv4, HdrLen: 54, GSOSize: 1000, CsumStart: 34, CsumOffset: 16}).Encode(h)
	f.Add(append(h, tcp...))
	u, uh := udpPartial(f, 50)
	h2 := make([]byte, vnethdr.Len)
	uh.Encode(h2)
	f.Add(append(h2, u...))
	f.Add([]byte{1, 2, 3})
	pool := packet.NewPool(64, 512)
	rq := &rxQueue{big: make([]byte, maxDirect+maxFrame)}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > maxFrame {
			return
		}
		pkt := pool.Get()
		buf := pkt.Buffer()
		direct := len(buf)
		n := copy(rq.hdr[:], data)
		if n == vnethdr.Len {
			m := copy(buf[:direct], data[n:])
			copy(rq.big[direct:], data[n+m:])
		}
		rq.segPending = false
		l, ok := rq.deliver(pkt, buf, direct, len(data))
		if ok && l > 0 && l != len(data)-vnethdr.Len {
			t.Fatalf("delivered %d of %d bytes", l, len(data)-vnethdr.Len)
		}
		pkt.Free()
		for i := 0; rq.segPending; i++ {
			pkt := pool.Get()
			sl, more, err := rq.seg.Next(pkt.Buffer())
			if err != nil || !more {
				rq.segPending = false
			} else if sl > len(pkt.Buffer()) || !pkt.SetLen(sl) {
				t.Fatalf("segment of %d bytes in a %d-byte buffer", sl, len(pkt.Buffer()))
			}
			pkt.Free()
			if i > 1<<16 {
				t.Fatal("segmenter does not finish")
			}
		}
		if pool.Available() != pool.Size() {
			t.Fatal("pool leaked")
		}
	})
}

// BenchmarkRecvSend moves batches of 32 frames through Recv and Send over
// socket pairs (the descriptor cost is a socket's, not a tun's): it shows
// the driver adds no allocation per packet.
func BenchmarkRecvSend(b *testing.B) {
	p, peer := socketPort(b, 1)
	unix.SetsockoptInt(peer[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	unix.SetsockoptInt(p.fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	frame := tcpFrame(b, 10, 1)
	msg := make([]byte, vnethdr.Len+len(frame))
	copy(msg[vnethdr.Len:], frame)
	pool := packet.NewPool(256, packet.DefaultBufSize)
	var batch packet.Batch
	drain := make([]byte, 2048)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < packet.BatchSize; j++ {
			unix.Write(peer[0], msg)
		}
		batch.Reset()
		if n := p.Recv(0, pool, &batch); n != packet.BatchSize {
			b.Fatalf("Recv = %d", n)
		}
		p.Send(0, &batch)
		batch.FreeAll()
		for j := 0; j < packet.BatchSize; j++ {
			unix.Read(peer[0], drain)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.BatchSize), "ns/frame")
}

// BenchmarkTapSend writes batches of 60-byte frames into a real tap (the
// host stack drops them: the destination MAC is nobody's), which is the
// per-frame cost of injecting into the host stack.
func BenchmarkTapSend(b *testing.B) {
	nstest.RequireRoot(b)
	name := nstest.Name("vstap")
	b.Cleanup(func() { nstest.Output("ip", "link", "del", name) })
	p, err := New(name, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	frame := testFrame(net.HardwareAddr{2, 0, 0xc6, 0x13, 0, 1}, 0)
	for j := 0; j < packet.BatchSize; j++ {
		pkt := pool.Get()
		pkt.SetData(frame)
		batch.Add(pkt)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n := p.Send(0, &batch); n != packet.BatchSize {
			b.Fatalf("Send = %d", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*packet.BatchSize), "ns/frame")
	batch.FreeAll()
}

// BenchmarkTapRecv reads frames that a packet socket sent out of a real
// tap; the producer's sendto per frame is included in the time.
func BenchmarkTapRecv(b *testing.B) {
	nstest.RequireRoot(b)
	name := nstest.Name("vstap")
	b.Cleanup(func() { nstest.Output("ip", "link", "del", name) })
	p, err := New(name, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0x0300, Ifindex: ifi.Index}); err != nil {
		b.Fatal(err)
	}
	frame := testFrame(net.HardwareAddr{2, 0, 0xc6, 0x13, 0, 1}, 0)
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	b.ReportAllocs()
	b.ResetTimer()
	var sendNs time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		for j := 0; j < packet.BatchSize; j++ {
			unix.Write(fd, frame)
		}
		sendNs += time.Since(t0)
		batch.Reset()
		if n := p.Recv(0, pool, &batch); n != packet.BatchSize {
			b.Fatalf("Recv = %d", n)
		}
		batch.FreeAll()
	}
	b.ReportMetric(float64((b.Elapsed()-sendNs).Nanoseconds())/float64(b.N*packet.BatchSize), "recv-ns/frame")
}

// TestPollBackoff: with PollBackoff a queue that keeps finding nothing
// skips reads, doubling the pause up to the bound; a frame then waits at
// most that many polls, and receiving one ends the pause.
func TestPollBackoff(t *testing.T) {
	p, peer := socketPort(t, 1)
	p.pollBackoff = 4
	pool := packet.NewPool(8, packet.DefaultBufSize)
	recv := func() int {
		var b packet.Batch
		n := p.Recv(0, pool, &b)
		b.FreeAll()
		return n
	}
	pollsUntilFrame := func() int {
		t.Helper()
		writeMsg(t, peer[0], vnethdr.Header{}, tcpFrame(t, 10, 1))
		for polls := 1; polls <= 100; polls++ {
			if recv() == 1 {
				return polls
			}
		}
		t.Fatal("frame never received")
		return 0
	}
	// Reads at polls 1, 3, 6, 11 find nothing (pauses 1, 2, 4, 4): the
	// frame written now is read at the fifth poll.
	for i := 0; i < 11; i++ {
		if recv() != 0 {
			t.Fatal("frame from nowhere")
		}
	}
	if n := pollsUntilFrame(); n != 5 {
		t.Fatalf("frame read at poll %d of the pause, want 5 (4 skipped)", n)
	}
	// Receiving ended the pause: one empty read, one skip, then a read.
	if n := pollsUntilFrame(); n != 1 {
		t.Fatalf("right after a frame: read at poll %d, want 1", n)
	}
	recv()
	if n := pollsUntilFrame(); n != 2 {
		t.Fatalf("after one empty read: read at poll %d, want 2", n)
	}
	p.pollBackoff = 0
	for i := 0; i < 20; i++ {
		recv()
	}
	if n := pollsUntilFrame(); n != 1 {
		t.Fatalf("without PollBackoff: read at poll %d, want 1", n)
	}
}

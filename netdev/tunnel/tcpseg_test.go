package tunnel

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// refSum is a 16-bit-at-a-time one's-complement sum, the oracle for the
// segmenter's 64-bit sums.
func refSum(parts ...[]byte) uint16 {
	var s uint32
	var all []byte
	for _, p := range parts {
		all = append(all, p...)
	}
	for i := 0; i+1 < len(all); i += 2 {
		s += uint32(all[i])<<8 | uint32(all[i+1])
	}
	if len(all)%2 == 1 {
		s += uint32(all[len(all)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

type superSpec struct {
	v6, vlan, ipOpts bool
	payload          int
	mss              int
	flags            string // F P C E
}

// superFrame builds a TCP super-frame with gopacket (complete checksum
// over the whole frame, as a sender's would be after the switch) and
// its offload state.
func superFrame(t testing.TB, s superSpec) ([]byte, packet.Offload, []byte) {
	t.Helper()
	pay := make([]byte, s.payload)
	for i := range pay {
		pay[i] = byte(i*7 + i>>8)
	}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}}
	ls := []gopacket.SerializableLayer{eth}
	ipType := layers.EthernetTypeIPv4
	if s.v6 {
		ipType = layers.EthernetTypeIPv6
	}
	eth.EthernetType = ipType
	if s.vlan {
		eth.EthernetType = layers.EthernetTypeDot1Q
		ls = append(ls, &layers.Dot1Q{VLANIdentifier: 7, Type: ipType})
	}
	var nl gopacket.NetworkLayer
	g := uint8(vnethdr.GSOTCPv4)
	if s.v6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolTCP,
			SrcIP: net.ParseIP("2001:db8::1"), DstIP: net.ParseIP("2001:db8::2")}
		nl, g = ip, vnethdr.GSOTCPv6
		ls = append(ls, ip)
	} else {
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, Id: 0xfffe,
			Flags: layers.IPv4DontFragment, SrcIP: net.IPv4(198, 19, 0, 1), DstIP: net.IPv4(198, 19, 0, 2)}
		if s.ipOpts {
			ip.Options = []layers.IPv4Option{{OptionType: 7, OptionLength: 7, OptionData: []byte{4, 0, 0, 0, 0}}, {OptionType: 0}}
		}
		nl = ip
		ls = append(ls, ip)
	}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 5201, Seq: 0xfffff000, Ack: 99, Window: 512, ACK: true,
		Options: []layers.TCPOption{{OptionType: layers.TCPOptionKindNop}, {OptionType: layers.TCPOptionKindNop},
			{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: []byte{1, 2, 3, 4, 5, 6, 7, 8}}}}
	for _, c := range s.flags {
		switch c {
		case 'F':
			tcp.FIN = true
		case 'P':
			tcp.PSH = true
		case 'C':
			tcp.CWR = true
		case 'E':
			tcp.ECE = true
		}
	}
	_ = tcp.SetNetworkLayerForChecksum(nl)
	ls = append(ls, tcp, gopacket.Payload(pay))
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), packet.Offload{GSOType: g, GSOSize: uint16(s.mss)}, pay
}

// TestTCPSegmenter cuts super-frames and checks every segment as gopacket
// decodes it: lengths, IPv4 IDs and header checksums, sequence numbers,
// flags (FIN and PSH on the last segment only, CWR on the first only),
// TCP checksums against an independent sum, equal sizes but the last,
// inner IP packets within the MTU, and the payload intact.
func TestTCPSegmenter(t *testing.T) {
	for _, c := range []struct {
		name  string
		s     superSpec
		maxL3 int
	}{
		{"v4", superSpec{payload: 64000, mss: 1398, flags: "FPC"}, 1450},
		{"v4-odd-tail", superSpec{payload: 10001, mss: 1398, flags: "P"}, 1450},
		{"v4-vlan-ipopts", superSpec{vlan: true, ipOpts: true, payload: 30000, mss: 1390, flags: "FPCE"}, 1450},
		{"v6", superSpec{v6: true, payload: 60000, mss: 1378, flags: "FPC"}, 1430},
		{"v6-vlan-clamped", superSpec{v6: true, vlan: true, payload: 20000, mss: 8948, flags: "P"}, 1430},
		{"v4-clamped", superSpec{payload: 9000, mss: 8948}, 1450},
		{"one-segment", superSpec{payload: 500, mss: 1398, flags: "FPC"}, 1450},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, o, pay := superFrame(t, c.s)
			var s tcpSegmenter
			if !s.reset(f, &o, c.maxL3, hdrLen) {
				t.Fatal("reset refused the frame")
			}
			var got []byte
			var hdr [segHdrMax]byte
			var sizes []int
			nextSeq := uint32(0xfffff000)
			var id uint16 = 0xfffe
			for i := 0; !s.done(); i++ {
				l := s.segLen()
				p := s.next(hdr[:])
				seg := append(append([]byte(nil), hdr[:s.hl]...), p...)
				if hdrLen+len(seg) != l {
					t.Fatalf("segment %d: segLen %d, built %d", i, l, hdrLen+len(seg))
				}
				sizes = append(sizes, len(seg))
				if len(seg) > 14+c.maxL3 {
					t.Errorf("segment %d: %d-byte frame for an MTU of %d", i, len(seg), c.maxL3)
				}
				last := s.done()
				pk := gopacket.NewPacket(seg, layers.LayerTypeEthernet, gopacket.Default)
				if e := pk.ErrorLayer(); e != nil {
					t.Fatalf("segment %d: %v", i, e.Error())
				}
				tl, _ := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
				if tl == nil {
					t.Fatalf("segment %d: no TCP layer", i)
				}
				var l3 []byte
				var pseudo []byte
				if c.s.v6 {
					ip := pk.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
					if int(ip.Length) != len(ip.Payload) || len(ip.Contents)+len(ip.Payload) > c.maxL3 {
						t.Errorf("segment %d: IPv6 payload length %d for %d bytes (max L3 %d)", i, ip.Length, len(ip.Payload), c.maxL3)
					}
					pseudo = make([]byte, 40)
					copy(pseudo, ip.Contents[8:40])
					binary.BigEndian.PutUint32(pseudo[32:], uint32(len(ip.Payload)))
					pseudo[39] = 6
				} else {
					ip := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
					l3 = ip.Contents
					if int(ip.Length) != len(ip.Contents)+len(ip.Payload) || int(ip.Length) > c.maxL3 {
						t.Errorf("segment %d: IPv4 length %d for %d bytes (max %d)", i, ip.Length, len(ip.Contents)+len(ip.Payload), c.maxL3)
					}
					if ip.Id != id+uint16(i) {
						t.Errorf("segment %d: IP ID %#x, want %#x", i, ip.Id, id+uint16(i))
					}
					if refSum(l3) != 0xffff {
						t.Errorf("segment %d: bad IPv4 header checksum", i)
					}
					pseudo = make([]byte, 12)
					copy(pseudo, l3[12:20])
					pseudo[9] = 6
					binary.BigEndian.PutUint16(pseudo[10:], uint16(len(ip.Payload)))
				}
				if refSum(pseudo, tl.Contents, tl.Payload) != 0xffff {
					t.Errorf("segment %d: bad TCP checksum %#x", i, tl.Checksum)
				}
				if tl.Seq != nextSeq {
					t.Errorf("segment %d: seq %#x, want %#x", i, tl.Seq, nextSeq)
				}
				nextSeq += uint32(len(tl.Payload))
				want := func(name string, has, in bool) {
					if has != in {
						t.Errorf("segment %d (last %v): %s %v", i, last, name, has)
					}
				}
				hasF, hasP, hasC := bytes.ContainsRune([]byte(c.s.flags), 'F'), bytes.ContainsRune([]byte(c.s.flags), 'P'), bytes.ContainsRune([]byte(c.s.flags), 'C')
				want("FIN", tl.FIN, hasF && last)
				want("PSH", tl.PSH, hasP && last)
				want("CWR", tl.CWR, hasC && i == 0)
				want("ECE", tl.ECE, bytes.ContainsRune([]byte(c.s.flags), 'E'))
				if !tl.ACK || tl.Ack != 99 || len(tl.Options) != 3 {
					t.Errorf("segment %d: ack %v %d, %d options", i, tl.ACK, tl.Ack, len(tl.Options))
				}
				got = append(got, tl.Payload...)
			}
			for i, n := range sizes[:len(sizes)-1] {
				if n != sizes[0] {
					t.Fatalf("segment %d is %d bytes, the first %d", i, n, sizes[0])
				}
			}
			if sizes[len(sizes)-1] > sizes[0] {
				t.Errorf("last segment longer than the first")
			}
			if !bytes.Equal(got, pay) {
				t.Errorf("payload differs after %d segments", len(sizes))
			}
		})
	}
}

// TestTCPSegmenterRefuses: what the fast segmenter leaves to the copying
// fallback.
func TestTCPSegmenterRefuses(t *testing.T) {
	f, o, _ := superFrame(t, superSpec{payload: 3000, mss: 1398})
	var s tcpSegmenter
	for _, c := range []struct {
		name  string
		f     []byte
		o     packet.Offload
		maxL3 int
	}{
		{"udp-gso", f, packet.Offload{GSOType: vnethdr.GSOUDPL4, GSOSize: 1000}, 1450},
		{"v6-type-on-v4", f, packet.Offload{GSOType: vnethdr.GSOTCPv6, GSOSize: 1000}, 1450},
		{"no-size", f, packet.Offload{GSOType: vnethdr.GSOTCPv4}, 1450},
		{"mtu-below-headers", f, o, 40},
		{"headers-only", f[:14+20+32], o, 1450},
		{"truncated", f[:30], o, 1450},
	} {
		if s.reset(c.f, &c.o, c.maxL3, hdrLen) {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// FuzzTCPSegmenter feeds hostile frames and offload states: the segmenter
// must not panic, must produce segments that cover the payload exactly,
// and never a segment whose IP packet exceeds the MTU.
func FuzzTCPSegmenter(f *testing.F) {
	for _, s := range []superSpec{{payload: 3000, mss: 1398, flags: "FPC"}, {v6: true, vlan: true, payload: 2000, mss: 700}} {
		fr, o, _ := superFrame(f, s)
		f.Add(fr, o.GSOType, o.GSOSize, uint16(1450))
	}
	f.Fuzz(func(t *testing.T, fr []byte, gso uint8, size uint16, maxL3 uint16) {
		o := packet.Offload{GSOType: gso, GSOSize: size}
		var s tcpSegmenter
		if !s.reset(fr, &o, int(maxL3), hdrLen) {
			return
		}
		var hdr [segHdrMax]byte
		total := 0
		for n := 0; !s.done(); n++ {
			if n > 1<<16 {
				t.Fatal("no end")
			}
			l := s.segLen()
			p := s.next(hdr[:])
			if len(p) == 0 || hdrLen+s.hl+len(p) != l || s.hl+len(p) > 14+int(maxL3) {
				t.Fatalf("segment %d: %d payload bytes, segLen %d", n, len(p), l)
			}
			total += len(p)
		}
		if total != len(fr)-s.hl {
			t.Fatalf("segments carry %d bytes of %d", total, len(fr)-s.hl)
		}
	})
}

// tcpMIB reads counters of the Tcp line of /proc/net/snmp in ns (IPv4
// and IPv6 share them).
func tcpMIB(t *testing.T, ns *nstest.Netns) map[string]uint64 { return snmp(t, ns, "Tcp:") }

// snmp reads the counters of one protocol's lines of /proc/net/snmp.
func snmp(t *testing.T, ns *nstest.Netns, proto string) map[string]uint64 {
	t.Helper()
	out, err := ns.Output("cat", "/proc/net/snmp")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	m := map[string]uint64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != proto {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, v := range f[1:] {
			n, _ := strconv.ParseUint(v, 10, 64)
			m[names[i]] = n
		}
	}
	return m
}

// udpSuperFrame is a UDP datagram of n payload bytes from
// 198.19.21.1 to 198.19.21.2 port 9, to send as a USO super-frame.
func udpSuperFrame(t *testing.T, src, dst net.HardwareAddr, n int) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IPv4(198, 19, 21, 1), DstIP: net.IPv4(198, 19, 21, 2)}
	udp := &layers.UDP{SrcPort: 4000, DstPort: 9}
	_ = udp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}, ip, udp,
		gopacket.Payload(make([]byte, n))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSuperFramesToKernelVXLAN sends TCP super-frames through the port to
// a Linux vxlan device, IPv4 and IPv6 outside and inside, with the
// segmented send and with one datagram per segment: the receiving kernel
// decapsulates every segment and validates its IP and TCP checksums (a
// segment to a closed port with a good checksum is answered with a
// reset, one with a bad one counted in InCsumErrors), and the port's
// counters show the segments left in runs.
func TestSuperFramesToKernelVXLAN(t *testing.T) {
	u := newUnderlay(t)
	macA, macB := net.HardwareAddr{2, 0, 0, 0, 0x21, 1}, net.HardwareAddr{2, 0, 0, 0, 0x21, 2}
	for i, outer6 := range []bool{false, true} {
		la, lb := u.a4, u.b4
		if outer6 {
			la, lb = u.ip6(t)
		}
		vni := uint32(100 + i)
		vx := nstest.Name("tvx")
		u.b.Run(t, "ip", "link", "add", vx, "address", macB.String(), "type", "vxlan", "id", strconv.Itoa(int(vni)),
			"local", lb.String(), "remote", la.String(), "dstport", "4789")
		u.b.Run(t, "ip", "addr", "add", "198.19.21.2/24", "dev", vx)
		u.b.Run(t, "ip", "addr", "add", "2001:db8:21::2/64", "dev", vx, "nodad")
		// Without GRO every segment reaches TCP (and is answered) alone.
		u.b.Run(t, "ethtool", "-K", vx, "gro", "off")
		u.b.Run(t, "ip", "link", "set", vx, "up")
		u.b.Run(t, "ip", "neigh", "replace", "198.19.21.1", "lladdr", macA.String(), "dev", vx)
		u.b.Run(t, "ip", "neigh", "replace", "2001:db8:21::1", "lladdr", macA.String(), "dev", vx)
		pa := openIn(t, u.a, Options{Remote: lb, Key: vni})
		if !pa.SendsGSO() {
			t.Skip("the kernel has no UDP segmentation offload")
		}
		pool := packet.NewPool(4, 70000)
		for _, inner6 := range []bool{false, true} {
			for _, perSegment := range []bool{false, true} {
				name := fmt.Sprintf("outer6=%v/inner6=%v/perSegment=%v", outer6, inner6, perSegment)
				mss := 1398
				if inner6 {
					mss = 1378
				}
				const payload = 64000
				f, o, _ := superFrame(t, superSpec{v6: inner6, payload: payload, mss: mss, flags: "P"})
				copy(f[0:6], macB)
				copy(f[6:12], macA)
				if inner6 {
					copy(f[14+8:], net.ParseIP("2001:db8:21::1").To16())
					copy(f[14+24:], net.ParseIP("2001:db8:21::2").To16())
				} else {
					copy(f[14+12:], net.IPv4(198, 19, 21, 1).To4())
					copy(f[14+16:], net.IPv4(198, 19, 21, 2).To4())
				}
				// The port clamps the MSS to its MTU (1450 on an IPv4
				// underlay, 1430 on IPv6) less the inner IP and TCP
				// headers.
				ipLen := 20
				if inner6 {
					ipLen = 40
				}
				eff := min(mss, pa.MTU()-ipLen-32)
				segs := (payload + eff - 1) / eff
				pkt := pool.Get()
				pkt.SetData(f)
				pkt.Offload = o
				pkt.Hash, pkt.HashValid = 7, true
				pa.tx[0].gso.on = !perSegment
				before, st0 := tcpMIB(t, u.b), pa.SuperStats()
				var b packet.Batch
				b.Add(pkt)
				if sent := pa.Send(0, &b); sent != 1 {
					t.Fatalf("%s: sent %d, drops %v", name, sent, pa.DropsByCause())
				}
				pkt.Free()
				var after map[string]uint64
				nstest.WaitFor(t, 5*time.Second, name+": resets for every segment", func() bool {
					after = tcpMIB(t, u.b)
					return after["OutRsts"]-before["OutRsts"] >= uint64(segs)
				})
				if d := after["InCsumErrors"] - before["InCsumErrors"]; d != 0 {
					t.Errorf("%s: %d TCP checksum errors", name, d)
				}
				if d := after["OutRsts"] - before["OutRsts"]; d != uint64(segs) {
					t.Errorf("%s: %d resets for %d segments", name, d, segs)
				}
				st := pa.SuperStats()
				sends, nseg := st.Sends-st0.Sends, st.Segments-st0.Segments
				t.Logf("%s: %d segments in %d segmented sends", name, nseg, sends)
				switch {
				case st.Frames-st0.Frames != 1:
					t.Errorf("%s: %d super-frames counted", name, st.Frames-st0.Frames)
				case perSegment && sends != 0:
					t.Errorf("%s: %d segmented sends with the offload off", name, sends)
				case !perSegment && (sends != 2 || nseg != uint64(segs)):
					// 64,000 bytes of payload with the headers repeated
					// per segment exceed one UDP datagram's 65,507.
					t.Errorf("%s: %d segments in %d sends, want %d in 2", name, nseg, sends, segs)
				}
			}
		}
		// A UDP super-frame (USO) takes the copying path
		// (vnethdr.Segmenter): seven datagrams to a closed port, each
		// counted by the receiving kernel with a good checksum.
		pa.tx[0].gso.on = true
		uf := udpSuperFrame(t, macA, macB, 9000)
		pkt := pool.Get()
		pkt.SetData(uf)
		pkt.Offload = packet.Offload{GSOType: vnethdr.GSOUDPL4, GSOSize: 1300}
		before, st0 := snmp(t, u.b, "Udp:"), pa.SuperStats()
		var b packet.Batch
		b.Add(pkt)
		if sent := pa.Send(0, &b); sent != 1 {
			t.Fatalf("UDP super-frame: sent %d, drops %v", sent, pa.DropsByCause())
		}
		pkt.Free()
		nstest.WaitFor(t, 5*time.Second, "seven UDP datagrams", func() bool {
			after := snmp(t, u.b, "Udp:")
			return after["NoPorts"]-before["NoPorts"] >= 7
		})
		after, st := snmp(t, u.b, "Udp:"), pa.SuperStats()
		if d := after["NoPorts"] - before["NoPorts"]; d != 7 || after["InCsumErrors"] != before["InCsumErrors"] {
			t.Errorf("UDP super-frame: %d datagrams, %d checksum errors", d, after["InCsumErrors"]-before["InCsumErrors"])
		}
		if st.Sends-st0.Sends != 1 || st.Segments-st0.Segments != 7 {
			t.Errorf("UDP super-frame: %d segments in %d sends, want 7 in 1", st.Segments-st0.Segments, st.Sends-st0.Sends)
		}
	}
}

// threadCPU is the calling thread's user+system CPU time.
func threadCPU() time.Duration {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_THREAD, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSuperFrameSend sends one 64,000-byte TCP super-frame per op
// over a veth underlay (the peer's socket is not read: its queue fills
// and the kernel drops there, after the sender paid its share): "whole"
// is the port taking the frame (tcpseg.go), "segmented" what the
// datapath did before, cutting it into pool packets with
// vnethdr.Segmenter and sending them as runs. cpu-ns/op is the sending
// thread's CPU time, which a loaded machine disturbs less than the wall
// clock.
func BenchmarkSuperFrameSend(b *testing.B) {
	u := newUnderlay(b)
	pa := openIn(b, u.a, Options{Remote: u.b4, Key: 5})
	openIn(b, u.b, Options{Remote: u.a4, Key: 5})
	if !pa.SendsGSO() {
		b.Skip("no UDP segmentation offload")
	}
	f, o, _ := superFrame(b, superSpec{payload: 64000, mss: 1398})
	big := packet.NewPool(2, 70000)
	pool := packet.NewPool(128, packet.DefaultBufSize)
	for _, mode := range []string{"whole", "segmented"} {
		b.Run(mode, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var seg vnethdr.Segmenter
			b.SetBytes(int64(len(f)))
			c0 := threadCPU()
			for b.Loop() {
				var batch packet.Batch
				if mode == "whole" {
					pkt := big.Get()
					pkt.SetData(f)
					pkt.Offload = o
					pkt.Hash, pkt.HashValid = 1, true
					batch.Add(pkt)
					pa.Send(0, &batch)
					pkt.Free()
					continue
				}
				h := vnethdr.Header(o)
				if err := seg.Reset(&h, f); err != nil {
					b.Fatal(err)
				}
				for !seg.Done() {
					s := pool.Get()
					n, _, err := seg.Next(s.Buffer())
					if err != nil {
						b.Fatal(err)
					}
					s.SetLen(n)
					s.Hash, s.HashValid = 1, true
					batch.Add(s)
					if batch.Full() || seg.Done() {
						pa.Send(0, &batch)
						for _, p := range batch.Packets() {
							p.Free()
						}
						batch = packet.Batch{}
					}
				}
			}
			b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkSmallRunSend sends a batch of 32 64-byte frames of one flow
// per op, a segmented run: "flat" copies them into one buffer, "iovecs"
// gathers each frame with its own iovec.
func BenchmarkSmallRunSend(b *testing.B) {
	u := newUnderlay(b)
	pa := openIn(b, u.a, Options{Remote: u.b4, Key: 5})
	openIn(b, u.b, Options{Remote: u.a4, Key: 5})
	if !pa.tx[0].gso.on {
		b.Skip("no UDP segmentation offload")
	}
	pool := packet.NewPool(64, packet.DefaultBufSize)
	var batch packet.Batch
	for i := range packet.BatchSize {
		pkt := pool.Get()
		pkt.SetData(frame(byte(i)))
		pkt.Hash, pkt.HashValid = 1, true
		batch.Add(pkt)
	}
	for _, mode := range []string{"flat", "iovecs"} {
		b.Run(mode, func(b *testing.B) {
			noFlat = mode == "iovecs"
			defer func() { noFlat = false }()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			runs := pa.tx[0].gso.runs
			c0 := threadCPU()
			for b.Loop() {
				pa.Send(0, &batch)
			}
			b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
			if pa.tx[0].gso.runs-runs != uint64(b.N) {
				b.Fatalf("%d runs for %d sends", pa.tx[0].gso.runs-runs, b.N)
			}
		})
	}
}

// tcpCsumRight checks the TCP checksum of an untagged frame with the TCP
// header at l4 against refSum.
func tcpCsumRight(f []byte, l4 int, v6 bool) bool {
	var ph []byte
	if v6 {
		ph = make([]byte, 40)
		copy(ph, f[14+8:14+40])
		binary.BigEndian.PutUint32(ph[32:], uint32(len(f)-l4))
		ph[39] = 6
	} else {
		ph = make([]byte, 12)
		copy(ph, f[14+12:14+20])
		ph[9] = 6
		binary.BigEndian.PutUint16(ph[10:], uint16(len(f)-l4))
	}
	return refSum(ph, f[l4:]) == 0xffff
}

// TestRecvMergesRuns: a super-frame sent whole by one port arrives at
// the other as coalesced runs, which the receiving port merges back into
// TCP super-frames (rxmerge.go): the payload intact and in order, GSO
// state with the segment size, and re-cut by vnethdr.Segmenter into
// segments with good checksums. With merging off the same run arrives as
// MTU-size segments.
func TestRecvMergesRuns(t *testing.T) {
	u := newUnderlay(t)
	for _, v6 := range []bool{false, true} {
		la, lb := u.a4, u.b4
		if v6 {
			la, lb = u.ip6(t)
		}
		pa := openIn(t, u.a, Options{Remote: lb, Key: 9})
		pb := openIn(t, u.b, Options{Remote: la, Key: 9})
		if !pa.SendsGSO() || pb.rx[0].gro == nil {
			t.Skip("no UDP segmentation offload or GRO")
		}
		pool := bigPool(256, 8)
		for _, merge := range []bool{true, false} {
			noMerge = !merge
			f, o, pay := superFrame(t, superSpec{v6: v6, payload: 40000, mss: 1300, flags: "P"})
			pkt := pool.GetBig()
			pkt.SetData(f)
			pkt.Offload = o
			var b packet.Batch
			b.Add(pkt)
			if pa.Send(0, &b) != 1 {
				t.Fatalf("send: drops %v", pa.DropsByCause())
			}
			pkt.Free()
			var got []byte
			var frames, whole int
			deadline := time.Now().Add(5 * time.Second)
			for len(got) < len(pay) && time.Now().Before(deadline) {
				var rb packet.Batch
				pb.Recv(0, pool, &rb)
				for _, r := range rb.Packets() {
					frames++
					d := r.Data()
					if r.GSO() {
						whole++
						if r.Offload.GSOSize != 1300 {
							t.Errorf("merged frame's GSO size %d", r.Offload.GSOSize)
						}
						// The partial checksum completes to a right one.
						c := append([]byte(nil), d...)
						ch := vnethdr.Header{Flags: vnethdr.FlagNeedsCsum, CsumStart: r.Offload.CsumStart, CsumOffset: r.Offload.CsumOffset}
						if err := vnethdr.CompleteChecksum(&ch, c); err != nil {
							t.Fatal(err)
						}
						if l4 := int(r.Offload.CsumStart); !tcpCsumRight(c, l4, v6) {
							t.Errorf("merged frame's partial checksum does not complete right")
						}
						var seg vnethdr.Segmenter
						h := vnethdr.Header(r.Offload)
						if err := seg.Reset(&h, d); err != nil {
							t.Fatalf("merged frame does not re-cut: %v", err)
						}
						buf := make([]byte, 2048)
						for !seg.Done() {
							n, _, err := seg.Next(buf)
							if err != nil {
								t.Fatal(err)
							}
							s := buf[:n]
							pk := gopacket.NewPacket(s, layers.LayerTypeEthernet, gopacket.Default)
							tl, _ := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
							if tl == nil {
								t.Fatal("re-cut segment has no TCP layer")
							}
							got = append(got, tl.Payload...)
						}
					} else {
						pk := gopacket.NewPacket(d, layers.LayerTypeEthernet, gopacket.Default)
						tl, _ := pk.Layer(layers.LayerTypeTCP).(*layers.TCP)
						if tl == nil {
							t.Fatal("segment has no TCP layer")
						}
						got = append(got, tl.Payload...)
					}
					r.Free()
				}
				if rb.N == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			t.Logf("v6=%v merge=%v: %d frames, %d merged", v6, merge, frames, whole)
			if !bytes.Equal(got, pay) {
				t.Errorf("v6=%v merge=%v: payload differs (%d of %d bytes)", v6, merge, len(got), len(pay))
			}
			if merge && (whole == 0 || frames > 4) || !merge && whole != 0 {
				t.Errorf("v6=%v merge=%v: %d frames, %d merged", v6, merge, frames, whole)
			}
		}
		noMerge = false
	}
}

// segmentRun cuts a super-frame into the VXLAN datagrams a peer's
// segmented send carries, returning them and the datagram size.
func segmentRun(t testing.TB, spec superSpec) (dgrams [][]byte, seg int, pay []byte) {
	t.Helper()
	fr, o, pay := superFrame(t, spec)
	var s tcpSegmenter
	if !s.reset(fr, &o, 1450, hdrLen) {
		t.Fatal("segmenter refuses the frame")
	}
	var h [segHdrMax]byte
	for !s.done() {
		copy(h[:], hdr(VXLAN, 1))
		p := s.next(h[hdrLen:])
		dgrams = append(dgrams, append(append([]byte(nil), h[:hdrLen+s.hl]...), p...))
	}
	return dgrams, hdrLen + s.hl + spec.mss, pay
}

// spansOf joins datagrams into messages of the given datagram counts.
func spansOf(dgrams [][]byte, seg int, counts ...int) []rxSpan {
	var spans []rxSpan
	for _, c := range counts {
		var msg []byte
		for _, d := range dgrams[:c] {
			msg = append(msg, d...)
		}
		dgrams = dgrams[c:]
		spans = append(spans, rxSpan{msg: msg, seg: seg})
	}
	return spans
}

// TestMergeRunAcrossReads: a run split over several reads (one of them a
// single datagram) merges into one frame with the whole payload, ending
// at the last read's end; a gap in the sequence between two reads ends
// the run at the first read's end; a run starting mid-read goes on into
// the next read.
func TestMergeRunAcrossReads(t *testing.T) {
	dgrams, seg, pay := segmentRun(t, superSpec{payload: 10 * 1000, mss: 1000})
	pool := bigPool(1, 1)
	payloadOf := func(big *packet.Packet) []byte {
		d := big.Data()[hdrLen:]
		s, ok := parseInner(d)
		if !ok {
			t.Fatal("merged frame does not parse")
		}
		return d[s.hl:]
	}

	spans := spansOf(dgrams, seg, 4, 1, 5)
	big, end := mergeRun(VXLAN, pool, spans, spanPos{})
	if big == nil {
		t.Fatal("no merge across reads")
	}
	if end != (spanPos{2, len(spans[2].msg)}) {
		t.Errorf("end %+v", end)
	}
	if !bytes.Equal(payloadOf(big), pay) {
		t.Errorf("merged payload differs")
	}
	big.Free()

	// From the second datagram of the first read on.
	big, end = mergeRun(VXLAN, pool, spans, spanPos{0, seg})
	if big == nil || end != (spanPos{2, len(spans[2].msg)}) || !bytes.Equal(payloadOf(big), pay[1000:]) {
		t.Fatalf("mid-read start: %v %+v", big != nil, end)
	}
	big.Free()

	// A lost datagram between the reads.
	gap := append(spansOf(dgrams, seg, 4), spansOf(dgrams[5:], seg, 5)...)
	big, end = mergeRun(VXLAN, pool, gap, spanPos{})
	if big == nil || end != (spanPos{0, len(gap[0].msg)}) || !bytes.Equal(payloadOf(big), pay[:4000]) {
		t.Fatalf("gap: %v %+v", big != nil, end)
	}
	big.Free()

	// A corrupted segment in the next read ends the run before it.
	bad := spansOf(dgrams, seg, 3, 7)
	bad[1].msg[seg+len(bad[1].msg)/20]++ // payload byte of its second datagram
	big, end = mergeRun(VXLAN, pool, bad, spanPos{})
	if big == nil || end != (spanPos{1, seg}) || !bytes.Equal(payloadOf(big), pay[:4000]) {
		t.Fatalf("bad checksum: %v %+v", big != nil, end)
	}
	big.Free()
}

// TestMergeRunWholeTSOFrame: a workload's 64 KB TSO frame behind the
// 1,450-byte MTU (46 segments of 1,398 bytes) arrives as the peer's two
// segmented sends of 44 and 2 datagrams, and merges back whole.
func TestMergeRunWholeTSOFrame(t *testing.T) {
	dgrams, seg, pay := segmentRun(t, superSpec{payload: 46 * 1398, mss: 1398})
	if len(dgrams) != 46 {
		t.Fatalf("%d datagrams", len(dgrams))
	}
	spans := spansOf(dgrams, seg, 44, 2)
	pool := bigPool(1, 1)
	big, end := mergeRun(VXLAN, pool, spans, spanPos{})
	if big == nil || end != (spanPos{1, len(spans[1].msg)}) {
		t.Fatalf("merged %v, end %+v", big != nil, end)
	}
	defer big.Free()
	d := big.Data()[hdrLen:]
	s, _ := parseInner(d)
	if !bytes.Equal(d[s.hl:], pay) {
		t.Errorf("merged payload differs")
	}
}

// FuzzMergeRun feeds hostile reads to the receive-side merge, as one
// message or two with their own datagram sizes: it must not panic, and a
// merged frame must consume at least two datagrams, carry exactly their
// payload bytes, and have a GSO size no larger than one datagram.
func FuzzMergeRun(f *testing.F) {
	dgrams, seg, _ := segmentRun(f, superSpec{payload: 3000, mss: 1000})
	var msg []byte
	for _, d := range dgrams {
		msg = append(msg, d...)
	}
	f.Add(msg, uint16(seg), uint16(len(msg)), uint16(0))
	f.Add(msg, uint16(seg), uint16(seg), uint16(seg))
	f.Add(msg, uint16(seg), uint16(2*seg), uint16(len(msg)))
	pool := bigPool(1, 1)
	f.Fuzz(func(t *testing.T, msg []byte, seg, split, seg2 uint16) {
		if seg == 0 || int(split) > len(msg) {
			return
		}
		spans := []rxSpan{{msg: msg[:split], seg: int(seg)}}
		if int(split) < len(msg) {
			spans = append(spans, rxSpan{msg: msg[split:], seg: int(seg2)})
		}
		big, end := mergeRun(VXLAN, pool, spans, spanPos{})
		if big == nil {
			if end != (spanPos{}) {
				t.Fatalf("no frame, end %+v", end)
			}
			return
		}
		defer big.Free()
		if end.i >= len(spans) || end.off > len(spans[end.i].msg) || end.off == 0 {
			t.Fatalf("end %+v of %d spans", end, len(spans))
		}
		hl := int(big.Offload.HdrLen)
		if big.Offload.GSOSize == 0 || hl+hdrLen >= big.Len() {
			t.Fatalf("offload %+v for %d bytes", big.Offload, big.Len())
		}
		var pos spanPos
		n, payload, maxD := 0, 0, 0
		for pos != end {
			d := nextDgram(spans, &pos)
			if d == nil {
				t.Fatalf("end %+v not reached", end)
			}
			n++
			payload += len(d) - hdrLen - hl
			maxD = max(maxD, len(d))
		}
		if n < 2 || payload != big.Len()-hdrLen-hl || int(big.Offload.GSOSize) > maxD {
			t.Fatalf("%d datagrams, %d payload bytes, frame %d, offload %+v", n, payload, big.Len(), big.Offload)
		}
	})
}

package afxdp

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// gsoTestFrame is a TCP/IPv4 super-frame as a local sender hands it over:
// the whole payload, the pseudo-header sum in the checksum field.
func gsoTestFrame(payload int) ([]byte, packet.Offload) {
	f := make([]byte, 54+payload)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0})
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 6
	binary.BigEndian.PutUint16(ip[2:], uint16(40+payload))
	copy(ip[12:], net.IPv4(198, 18, 7, 1).To4())
	copy(ip[16:], net.IPv4(198, 18, 7, 2).To4())
	binary.BigEndian.PutUint16(ip[10:], ^vnethdr.Sum(ip))
	tcp := f[34:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 5201)
	tcp[12], tcp[13] = 5<<4, 0x10
	for i := range tcp[20:] {
		tcp[20+i] = byte(i)
	}
	s := uint32(vnethdr.Sum(ip[12:20])) + 6 + uint32(len(tcp))
	s = s&0xffff + s>>16
	binary.BigEndian.PutUint16(tcp[16:], uint16(s&0xffff+s>>16))
	return f, packet.Offload{Flags: packet.OffloadNeedsCsum, GSOType: vnethdr.GSOTCPv4, GSOSize: 1448,
		HdrLen: 54, CsumStart: 34, CsumOffset: 16}
}

// TestE2EGSOSendWholeInOrder: a port in copy mode takes GSO frames
// (SendsGSO) and sends one whole between the ring frames of the same
// batch, which the peer receives in batch order: the frame before it
// (kicked out of the ring first), the super-frame as one frame, the frame
// after it.
func TestE2EGSOSendWholeInOrder(t *testing.T) {
	port, peer := vethPair(t)
	p, err := New(port, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.ZeroCopy() {
		t.Skip("zero-copy port: no GSO frames")
	}
	if !p.SendsGSO() {
		t.Fatal("a copy-mode port does not take GSO frames")
	}
	pif, err := net.InterfaceByName(peer)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: pif.Index}); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}

	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	udp := func(seq uint32) []byte {
		return nstest.UDP{Dst: mac("02:00:00:00:00:02"), Src: mac("02:00:00:00:00:01"),
			SrcIP: net.IPv4(198, 18, 7, 1), DstIP: net.IPv4(198, 18, 7, 2), SrcPort: 9999, DstPort: 9,
			Payload: nstest.SeqPayload(seq)}.Frame()
	}
	super, off := gsoTestFrame(10 * 1448)
	pool := packet.NewPool(4, packet.DefaultBufSize)
	pool.AttachBig(packet.NewPool(1, packet.BigBufSize))
	var b packet.Batch
	for i, f := range [][]byte{udp(1), super, udp(2)} {
		var pkt *packet.Packet
		if i == 1 {
			pkt = pool.GetBig()
		} else {
			pkt = pool.Get()
		}
		pkt.SetData(f)
		if i == 1 {
			pkt.Offload = off
		}
		b.Add(pkt)
	}
	if n := p.Send(0, &b); n != 3 {
		t.Fatalf("Send took %d of 3 (stats %+v)", n, p.Stats())
	}
	b.FreeAll()

	want := [][]byte{udp(1), super, udp(2)}
	var got [][]byte
	buf := make([]byte, 70000)
	deadline := time.Now().Add(5 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		f := buf[:n]
		// Only ours: IPv4 from 198.18.7.1 (the host sends its own
		// IPv6 chatter on a new link).
		if n >= 34 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && net.IP(f[26:30]).Equal(net.IPv4(198, 18, 7, 1)) {
			got = append(got, append([]byte(nil), f...))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("peer received %d of our frames, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) || string(got[i][:54]) != string(want[i][:54]) {
			t.Errorf("frame %d: %d bytes, want %d (the super-frame whole, in batch order)", i, len(got[i]), len(want[i]))
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

package afpacket

import (
	"encoding/binary"
	"net"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"vswitch/internal/nstest"
)

// vlanCase is one tagged frame sent through the switch.
type vlanCase struct {
	name     string
	tags     [][2]uint16 // (TPID, TCI), outermost first
	partial  bool        // sent with a partial UDP checksum (CHECKSUM_PARTIAL)
	wantTags [][2]uint16
}

var vlanCases = []vlanCase{
	{name: "802.1Q", tags: [][2]uint16{{0x8100, 5<<13 | 100}}},
	{name: "802.1Q priority tag", tags: [][2]uint16{{0x8100, 3 << 13}}},
	{name: "802.1Q partial checksum", tags: [][2]uint16{{0x8100, 100}}, partial: true},
	{name: "QinQ", tags: [][2]uint16{{0x88a8, 200}, {0x8100, 100}}},
	{name: "QinQ partial checksum", tags: [][2]uint16{{0x88a8, 200}, {0x8100, 100}}, partial: true},
}

// vlanTags sends tagged UDP frames from host from to host to through the
// switch and checks that each arrives with the same tags (the kernel moves
// the outer tag into metadata at both ends; the driver must put it back
// into the frame it forwards) and, for frames sent with a partial
// checksum, that the forwarded frame's UDP checksum is complete and right.
func vlanTags(t *testing.T, from, to *nstest.Host) {
	t.Helper()
	rx, err := packetSocketIn(to.NS.Name, to.Dev, unix.ETH_P_ALL, false)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rx)
	if err := unix.SetsockoptInt(rx, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(200 * time.Millisecond))
	if err := unix.SetsockoptTimeval(rx, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	tx, err := packetSocketIn(from.NS.Name, from.Dev, 0, true)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(tx)
	src, _ := net.ParseMAC(from.MAC)
	for i, c := range vlanCases {
		frame, vh := taggedUDP(unusedMAC, src, c.tags, uint16(30000+i), c.partial)
		if _, err := unix.Write(tx, append(vh, frame...)); err != nil {
			t.Fatalf("%s: send: %v", c.name, err)
		}
		got, ok := recvMarked(t, rx, uint16(30000+i))
		if !ok {
			t.Errorf("%s %s → %s: frame not received", c.name, from.IP, to.IP)
			continue
		}
		if gt := frameTags(got); !equalTags(gt, c.tags) {
			t.Errorf("%s %s → %s: arrived with tags %04x, sent %04x", c.name, from.IP, to.IP, gt, c.tags)
		}
		if !udpChecksumOK(got) {
			t.Errorf("%s %s → %s: bad UDP checksum in % x", c.name, from.IP, to.IP, got)
		}
	}
}

// taggedUDP builds an Ethernet frame with the given tags around an
// IPv4/UDP datagram with source port sport and a 32-byte payload, and the
// virtio_net_hdr to send it with: with partial set, the UDP checksum field
// holds the pseudo-header sum and the header asks for completion.
func taggedUDP(dst, src net.HardwareAddr, tags [][2]uint16, sport uint16, partial bool) (frame, vh []byte) {
	base := udpFrame(dst, src, net.IPv4(198, 18, 0, 1).To4(), net.IPv4(198, 18, 0, 2).To4(), sport, 9)
	ip := base[14:34]
	// Grow the payload to 32 bytes so the frame is not padded.
	payload := make([]byte, 32)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	udpLen := 8 + len(payload)
	binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^csum(ip, 0))
	udp := append(append([]byte{}, base[34:42]...), payload...)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	udp[6], udp[7] = 0, 0
	ps := csum(ip[12:20], uint32(17+udpLen))
	frame = append([]byte{}, base[:12]...)
	for _, tg := range tags {
		frame = binary.BigEndian.AppendUint16(frame, tg[0])
		frame = binary.BigEndian.AppendUint16(frame, tg[1])
	}
	frame = append(frame, 0x08, 0x00)
	frame = append(frame, ip...)
	l4 := len(frame)
	frame = append(frame, udp...)
	vh = make([]byte, 10)
	if partial {
		binary.BigEndian.PutUint16(frame[l4+6:], ps)
		vh[0] = 1 // NEEDS_CSUM
		binary.LittleEndian.PutUint16(vh[6:], uint16(l4))
		binary.LittleEndian.PutUint16(vh[8:], 6)
	} else {
		c := ^csum(frame[l4:], uint32(ps))
		if c == 0 {
			c = 0xffff
		}
		binary.BigEndian.PutUint16(frame[l4+6:], c)
	}
	return frame, vh
}

// recvMarked reads frames from rx until one with UDP source port sport
// arrives (or a read times out) and returns it with the tag the kernel
// stripped put back, as tcpdump does.
func recvMarked(t *testing.T, rx int, sport uint16) ([]byte, bool) {
	buf := make([]byte, 4096)
	oob := make([]byte, 256)
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		n, oobn, _, _, err := unix.Recvmsg(rx, buf, oob, 0)
		if err != nil {
			continue // timeout: try again until the deadline
		}
		f := append([]byte{}, buf[:n]...)
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				continue
			}
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
			if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 && len(f) >= 12 {
				tpid := uint16(0x8100)
				if aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
					tpid = aux.Vlan_tpid
				}
				tag := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, tpid), aux.Vlan_tci)
				f = append(f[:12], append(tag, f[12:]...)...)
			}
		}
		if off := l3Offset(f); off > 0 && len(f) >= off+28 && f[off+9] == 17 && binary.BigEndian.Uint16(f[off+20:]) == sport {
			return f, true
		}
	}
	return nil, false
}

// l3Offset returns where the IPv4 header of a (possibly tagged) frame
// starts, or 0.
func l3Offset(f []byte) int {
	off := 12
	for off+2 <= len(f) {
		switch binary.BigEndian.Uint16(f[off:]) {
		case 0x8100, 0x88a8:
			off += 4
		case 0x0800:
			return off + 2
		default:
			return 0
		}
	}
	return 0
}

func frameTags(f []byte) [][2]uint16 {
	var tags [][2]uint16
	for off := 12; off+4 <= len(f); off += 4 {
		tpid := binary.BigEndian.Uint16(f[off:])
		if tpid != 0x8100 && tpid != 0x88a8 {
			break
		}
		tags = append(tags, [2]uint16{tpid, binary.BigEndian.Uint16(f[off+2:])})
	}
	return tags
}

func equalTags(a, b [][2]uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// udpChecksumOK verifies the UDP checksum of a (possibly tagged) IPv4 frame.
func udpChecksumOK(f []byte) bool {
	off := l3Offset(f)
	if off == 0 || len(f) < off+28 {
		return false
	}
	ip := f[off : off+20]
	l := int(binary.BigEndian.Uint16(ip[2:])) - 20
	if len(f) < off+20+l {
		return false
	}
	udp := f[off+20 : off+20+l]
	ps := csum(ip[12:20], uint32(17+l))
	return csum(udp, uint32(ps)) == 0xffff
}

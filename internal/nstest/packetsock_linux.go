package nstest

import (
	"net"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SocketOptions configure a packet socket.
type SocketOptions struct {
	// Protocol is the EtherType (host order) the socket receives,
	// unix.ETH_P_ALL for every frame; 0 makes a send-only socket, which
	// costs the interface nothing on receive.
	Protocol uint16
	// VnetHdr (PACKET_VNET_HDR) prefixes every frame with a
	// virtio_net_hdr, to send partial checksums and GSO frames.
	VnetHdr bool
	// AuxData (PACKET_AUXDATA) reports the VLAN tag the kernel strips
	// from received frames; Receiver needs it.
	AuxData bool
	// Timeout (SO_RCVTIMEO), if set, bounds each receive.
	Timeout time.Duration
}

// OpenPacketSocket opens an AF_PACKET raw socket bound to dev inside
// namespace ns (a socket keeps the namespace it was made in). It does not
// fail the test, so a sender goroutine can use it; the caller closes the
// descriptor.
func OpenPacketSocket(ns *Netns, dev string, o SocketOptions) (int, error) {
	fd := -1
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		s, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := configure(s, o); err != nil {
			unix.Close(s)
			return err
		}
		if err := unix.Bind(s, &unix.SockaddrLinklayer{Ifindex: ifi.Index, Protocol: htons(o.Protocol)}); err != nil {
			unix.Close(s)
			return err
		}
		fd = s
		return nil
	})
	return fd, err
}

func configure(fd int, o SocketOptions) error {
	if o.VnetHdr {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
			return err
		}
	}
	if o.AuxData {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_AUXDATA, 1); err != nil {
			return err
		}
	}
	if o.Timeout > 0 {
		tv := unix.NsecToTimeval(int64(o.Timeout))
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return err
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// PacketSocket is OpenPacketSocket for the test goroutine: it fails the
// test on error and closes the socket when the test ends.
func PacketSocket(t testing.TB, ns *Netns, dev string, o SocketOptions) int {
	t.Helper()
	fd, err := OpenPacketSocket(ns, dev, o)
	if err != nil {
		t.Fatalf("packet socket on %s in %s: %v", dev, ns.Name, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// Flood sends frames, in order and over again, on packet socket fd in
// bursts of up to 1,024 (one sendmmsg each, the kernel's most) until d
// has passed (d 0: no limit) or stop is closed, and returns how many
// frames the kernel accepted: exactly those count on the interface. A
// full queue (ENOBUFS, EAGAIN) is waited out; any other error (the
// interface deleted under the flood) ends it.
func Flood(fd int, frames [][]byte, d time.Duration, stop <-chan struct{}) uint64 {
	return FloodPaced(fd, frames, d, 0, stop)
}

// FloodPaced is Flood with a pause after each burst: a flood at a rate
// the switch under test can take (a race-detector build takes a tenth of
// a normal one's), so that what a test checks is the switch's behaviour
// under it, not the kernel's receive ring overflowing before the switch
// sees a frame.
func FloodPaced(fd int, frames [][]byte, d, pause time.Duration, stop <-chan struct{}) uint64 {
	iovs := make([]unix.Iovec, len(frames))
	msgs := make([]mmsghdr, len(frames))
	for i := range frames {
		iovs[i].Base = &frames[i][0]
		iovs[i].SetLen(len(frames[i]))
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
	}
	var sent uint64
	at := 0 // the next frame to send
	end := time.Now().Add(d)
	for d == 0 || time.Now().Before(end) {
		select {
		case <-stop:
			return sent
		default:
		}
		burst := min(len(msgs)-at, 1024)
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[at])), uintptr(burst), 0, 0, 0)
		runtime.KeepAlive(frames)
		runtime.KeepAlive(iovs)
		if e != 0 {
			if e == unix.ENOBUFS || e == unix.EAGAIN || e == unix.EINTR {
				time.Sleep(10 * time.Microsecond)
				continue
			}
			return sent
		}
		sent += uint64(n)
		if at += int(n); at == len(msgs) {
			at = 0
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	return sent
}

// Receiver reads the frames an interface in a namespace receives, VLAN
// tags included: the kernel strips the outer tag into metadata before a
// packet socket sees the frame, and Receiver puts it back (from
// PACKET_AUXDATA) where it stood, as tcpdump does. An interface without
// an 802.1Q subinterface still receives tagged frames, so this is how the
// VLAN tests see tags on a kernel without the 8021q module.
type Receiver struct{ fd int }

// NewReceiver opens a Receiver on dev in ns, closed when the test ends.
func NewReceiver(t testing.TB, ns *Netns, dev string) *Receiver {
	t.Helper()
	return &Receiver{fd: PacketSocket(t, ns, dev, SocketOptions{
		Protocol: unix.ETH_P_ALL, AuxData: true, Timeout: 200 * time.Millisecond,
	})}
}

// Next returns the next frame the interface received (frames it sent are
// skipped) with its stripped tag restored, or ok false after 200 ms with
// none.
func (r *Receiver) Next() (frame []byte, ok bool) {
	buf := make([]byte, 65536)
	oob := make([]byte, 256)
	for {
		n, oobn, _, from, err := unix.Recvmsg(r.fd, buf, oob, 0)
		if err != nil {
			return nil, false
		}
		if ll, _ := from.(*unix.SockaddrLinklayer); ll != nil && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		f := append([]byte(nil), buf[:n]...)
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if m.Header.Level != unix.SOL_PACKET || m.Header.Type != unix.PACKET_AUXDATA || len(m.Data) < int(unsafe.Sizeof(unix.TpacketAuxdata{})) {
				continue
			}
			aux := (*unix.TpacketAuxdata)(unsafe.Pointer(&m.Data[0]))
			if aux.Status&unix.TP_STATUS_VLAN_VALID != 0 && len(f) >= 12 {
				tpid := uint16(0x8100) // the only TPID reported without TP_STATUS_VLAN_TPID_VALID
				if aux.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
					tpid = aux.Vlan_tpid
				}
				f = InsertTag(f, Tag{TPID: tpid, TCI: aux.Vlan_tci})
			}
		}
		return f, true
	}
}

// Await returns the first frame received within d for which match is true
// (others are skipped), or ok false.
func (r *Receiver) Await(d time.Duration, match func([]byte) bool) (frame []byte, ok bool) {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if f, ok := r.Next(); ok && match(f) {
			return f, true
		}
	}
	return nil, false
}

// Sender is a send-only packet socket on an interface in a namespace:
// what it writes leaves the interface as written, tags and all, which is
// how the VLAN tests send tagged frames without an 802.1Q subinterface.
type Sender struct {
	fd   int
	vnet bool
}

// NewSender opens a Sender on dev in ns, closed when the test ends; with
// vnetHdr every frame is sent behind a virtio_net_hdr (see SendVnet).
func NewSender(t testing.TB, ns *Netns, dev string, vnetHdr bool) *Sender {
	t.Helper()
	return &Sender{fd: PacketSocket(t, ns, dev, SocketOptions{VnetHdr: vnetHdr}), vnet: vnetHdr}
}

// FD is the socket, for Flood.
func (s *Sender) FD() int { return s.fd }

// Send sends one frame; an error means the kernel did not take it. On a
// vnet-header socket it goes with an all-zero header.
func (s *Sender) Send(frame []byte) error {
	if s.vnet {
		return s.SendVnet(make([]byte, 10), frame)
	}
	_, err := unix.Write(s.fd, frame)
	return err
}

// SendVnet sends frame behind virtio_net_hdr vh (see UDP.VnetHeader) on a
// Sender opened with vnetHdr.
func (s *Sender) SendVnet(vh, frame []byte) error {
	_, err := unix.Write(s.fd, append(append([]byte(nil), vh...), frame...))
	return err
}

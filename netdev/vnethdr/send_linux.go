package vnethdr

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// FrameSender sends one frame behind its virtio-net header through a
// packet socket with PACKET_VNET_HDR: what afpacket and afxdp (in copy
// mode) do with a super-frame, which fits neither a ring slot nor a UMEM
// frame. Its buffers are reused, so a send allocates nothing.
type FrameSender struct {
	hdr [Len]byte
	iov [2]unix.Iovec
	msg unix.Msghdr
}

// Send sends frame with h (its hdr_len recomputed for the frame) on fd
// without blocking and returns the errno, 0 when the kernel took it. The
// kernel copies the frame, so its buffer is free again at once.
func (s *FrameSender) Send(fd int, h Header, frame []byte) unix.Errno {
	if len(frame) == 0 || !h.SetTxHdrLen(frame) {
		return unix.EINVAL
	}
	h.Encode(s.hdr[:])
	s.iov[0].Base = &s.hdr[0]
	s.iov[0].SetLen(Len)
	s.iov[1].Base = &frame[0]
	s.iov[1].SetLen(len(frame))
	s.msg.Iov = &s.iov[0]
	s.msg.SetIovlen(2)
	_, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&s.msg)), unix.MSG_DONTWAIT)
	return e
}

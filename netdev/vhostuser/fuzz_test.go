package vhostuser

import (
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// msgBytes encodes one request for the fuzz corpus.
func msgBytes(req, flags uint32, payload []byte) []byte {
	b := le.AppendUint32(nil, req)
	b = le.AppendUint32(b, flags)
	b = le.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// FuzzProtocol feeds hostile request streams (optionally with a memory
// file descriptor attached) to a session: it must end with an error or a
// close, never a panic, and leave no ring running and nothing mapped.
func FuzzProtocol(f *testing.F) {
	var seq []byte
	seq = append(seq, msgBytes(reqSetOwner, 1, nil)...)
	seq = append(seq, msgBytes(reqGetFeatures, 1, nil)...)
	seq = append(seq, msgBytes(reqSetProtocolFeatures, 1, u64b(1<<protoReplyAck))...)
	seq = append(seq, msgBytes(reqSetFeatures, 9, u64b(1<<featVersion1))...)
	mt := le.AppendUint64(nil, 1)
	for _, v := range []uint64{0x1000, 65536, 0x7000_0000, 0} {
		mt = le.AppendUint64(mt, v)
	}
	seq = append(seq, msgBytes(reqSetMemTable, 9, mt)...)
	seq = append(seq, msgBytes(reqSetVringNum, 9, state(1, 8))...)
	addr := le.AppendUint64(le.AppendUint64(le.AppendUint64(le.AppendUint64(le.AppendUint64(nil, 1), 0x7000_0000), 0x7000_0200), 0x7000_0080), 0)
	seq = append(seq, msgBytes(reqSetVringAddr, 9, addr)...)
	seq = append(seq, msgBytes(reqSetVringKick, 9, u64b(1|0x100))...)
	seq = append(seq, msgBytes(reqSetVringEnable, 9, state(1, 1))...)
	seq = append(seq, msgBytes(reqGetVringBase, 1, state(1, 0))...)
	seq = append(seq, msgBytes(reqGetConfig, 1, make([]byte, 12+10))...)
	f.Add(seq, true)
	f.Add(msgBytes(99, 9, nil), false)
	f.Add(msgBytes(reqSetVringCall, 1, u64b(300)), false)
	f.Add(msgBytes(reqGetFeatures, 1, make([]byte, 5000)), false)

	memfd, err := unix.MemfdCreate("vhu-fuzz", unix.MFD_CLOEXEC)
	if err != nil {
		f.Fatal(err)
	}
	defer unix.Close(memfd)
	if err := unix.Ftruncate(memfd, 65536); err != nil {
		f.Fatal(err)
	}
	p, err := newPort("fuzz", Options{Queues: 2})
	if err != nil {
		f.Fatal(err)
	}
	defer p.closeEpoll()

	f.Fuzz(func(t *testing.T, data []byte, withFD bool) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		ours := fileConn(t, fds[0])
		theirs := fileConn(t, fds[1])
		defer ours.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			var oob []byte
			if withFD {
				oob = unix.UnixRights(memfd)
			}
			theirs.WriteMsgUnix(data, oob, nil)
			theirs.CloseWrite()
			io.Copy(io.Discard, theirs) // replies
			theirs.Close()
		}()
		p.serve(ours)
		ours.Close()
		<-done
		for i := range p.slots {
			if p.slots[i].q.Load() != nil {
				t.Fatalf("ring %d still running after the session", i)
			}
		}
		if p.connected.Load() {
			t.Fatal("still connected")
		}
		if n := fuzzMappings(t); n != 0 {
			t.Fatalf("%d mappings of the frontend's memory left", n)
		}
	})
}

func fileConn(t *testing.T, fd int) *net.UnixConn {
	fl := os.NewFile(uintptr(fd), "sock")
	c, err := net.FileConn(fl)
	fl.Close()
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

func fuzzMappings(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:vhu-fuzz")
}

package vhostuser

import (
	"errors"
	"io"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Outcomes of a hostile request.
const (
	refused  = "refused"  // answered with a non-zero REPLY_ACK
	closed   = "closed"   // the port ended the session
	accepted = "accepted" // answered with a zero REPLY_ACK
)

// hostileStep is one request of a hostile session: raw bytes when raw is
// set (written as they are), else a request asking for REPLY_ACK.
type hostileStep struct {
	req     uint32
	payload []byte
	fds     []int
	raw     []byte
}

// outcome sends step and says what the port made of it.
func (f *frontend) outcome(s hostileStep) string {
	f.t.Helper()
	if s.raw != nil {
		var oob []byte
		if len(s.fds) > 0 {
			oob = unix.UnixRights(s.fds...)
		}
		if _, _, err := f.conn.WriteMsgUnix(s.raw, oob, nil); err != nil {
			return closed
		}
		// Whatever the bytes were, a GET_FEATURES after them must get
		// its answer only if the session is still sound.
		s = hostileStep{req: reqGetFeatures}
	}
	r, err := f.send(s.req, s.payload, s.fds, true)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, unix.ECONNRESET) || errors.Is(err, unix.EPIPE):
		return closed
	case err != nil:
		// A reply to another request (the raw bytes' own) or a
		// timeout: the session is confused, which the test reports.
		f.t.Fatalf("request %d: %v", s.req, err)
	case s.req == reqGetFeatures && len(r) == 8:
		return accepted
	case len(r) == 8 && le.Uint64(r) != 0:
		return refused
	}
	return accepted
}

// negotiate runs the start of a well-behaved setup: owner, features with
// REPLY_ACK, and (with mem) the memory table.
func (f *frontend) negotiate(mem bool) {
	f.t.Helper()
	f.must(reqSetOwner, nil)
	f.must(reqGetFeatures, nil)
	f.must(reqSetProtocolFeatures, u64b(1<<protoReplyAck|1<<protoMQ))
	f.proto = 1<<protoReplyAck | 1<<protoMQ
	f.must(reqSetFeatures, u64b(1<<featVersion1|1<<featProtocolFeature|1<<featNetMrgRxbuf))
	if mem {
		mt, fds := f.memTable()
		f.must(reqSetMemTable, mt, fds...)
	}
}

// region encodes a one-region memory table.
func region(gpa, size, uva, off uint64) []byte {
	b := le.AppendUint64(nil, 1)
	for _, v := range []uint64{gpa, size, uva, off} {
		b = le.AppendUint64(b, v)
	}
	return b
}

// vringAddr encodes SET_VRING_ADDR for ring i.
func vringAddr(i int, desc, used, avail uint64) []byte {
	a := le.AppendUint32(le.AppendUint32(nil, uint32(i)), 0)
	for _, v := range []uint64{desc, used, avail, 0} {
		a = le.AppendUint64(a, v)
	}
	return a
}

// TestHostileFrontend: a frontend that sends wrong sizes, absurd memory
// tables, non-memory descriptors, bad ring sizes, ring addresses outside
// its memory (refused by SET_VRING_ADDR itself, not only when the ring
// would start) or kicks before any setup gets each request refused or its
// session closed; no ring runs on what it sent, nothing stays mapped, and
// the port then serves a well-behaved frontend.
func TestHostileFrontend(t *testing.T) {
	before := memfdMappings(t)
	p, path := newServerPort(t, 1)
	pipe := make([]int, 2)
	if err := unix.Pipe2(pipe, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	sock, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, fd := range append(pipe, sock[:]...) {
			unix.Close(fd)
		}
	})
	hdr := func(req, flags, size uint32) []byte {
		return le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, req), flags), size)
	}
	memSize := uint64(8 << 20)
	const gpa, uva = 0x4000_0000, 0x7f12_3400_0000

	cases := []struct {
		name string
		mem  bool // the memory table set before the steps
		// setup steps must be accepted; the last step must not be.
		steps func(f *frontend) []hostileStep
	}{
		{"payload longer than any request", false, func(*frontend) []hostileStep {
			return []hostileStep{{raw: hdr(reqSetFeatures, flagVersion, maxPayload+1)}}
		}},
		{"u64 request with 4 bytes", false, func(*frontend) []hostileStep {
			return []hostileStep{{req: reqSetFeatures, payload: make([]byte, 4)}}
		}},
		{"vring state with 3 bytes", false, func(*frontend) []hostileStep {
			return []hostileStep{{req: reqSetVringNum, payload: make([]byte, 3)}}
		}},
		{"garbage after a valid header", false, func(*frontend) []hostileStep {
			raw := hdr(reqSetOwner, flagVersion, 0)
			for i := range 64 {
				raw = append(raw, byte(0xa5^i*7))
			}
			return []hostileStep{{raw: raw}}
		}},
		{"header cut short", false, func(f *frontend) []hostileStep {
			f.conn.Write(hdr(reqSetOwner, flagVersion, 0)[:5])
			f.conn.CloseWrite()
			return []hostileStep{{raw: []byte{}}}
		}},
		{"memory table of no region", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: le.AppendUint64(nil, 0)}}
		}},
		{"memory table of 9 regions", false, func(f *frontend) []hostileStep {
			b := le.AppendUint64(nil, 9)
			b = append(b, make([]byte, 9*32)...)
			return []hostileStep{{req: reqSetMemTable, payload: b, fds: []int{f.memfd}}}
		}},
		{"region count beyond the payload", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(gpa, memSize, uva, 0)[:20], fds: []int{f.memfd}}}
		}},
		{"region of size 0", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(gpa, 0, uva, 0), fds: []int{f.memfd}}}
		}},
		{"region wrapping the address space", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(^uint64(0)-4095, memSize, uva, 0), fds: []int{f.memfd}}}
		}},
		{"region of 2^60 bytes", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(gpa, 1<<60, uva, 0), fds: []int{f.memfd}}}
		}},
		{"region past the end of its file", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(gpa, memSize, uva, 4096), fds: []int{f.memfd}}}
		}},
		{"region backed by a pipe", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(gpa, 65536, uva, 0), fds: []int{pipe[0]}}}
		}},
		{"region backed by a socket", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(gpa, 65536, uva, 0), fds: []int{sock[0]}}}
		}},
		{"region without its descriptor", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetMemTable, payload: region(gpa, memSize, uva, 0)}}
		}},
		{"ring size 0", true, func(*frontend) []hostileStep {
			return []hostileStep{{req: reqSetVringNum, payload: state(1, 0)}}
		}},
		{"ring size 65536", true, func(*frontend) []hostileStep {
			return []hostileStep{{req: reqSetVringNum, payload: state(1, 65536)}}
		}},
		{"ring size 300", true, func(*frontend) []hostileStep {
			return []hostileStep{{req: reqSetVringNum, payload: state(1, 300)}}
		}},
		{"ring index out of range", true, func(*frontend) []hostileStep {
			return []hostileStep{{req: reqSetVringNum, payload: state(99, 256)}}
		}},
		{"ring addresses outside the memory", true, func(f *frontend) []hostileStep {
			return []hostileStep{
				{req: reqSetVringNum, payload: state(1, 256)},
				{req: reqSetVringAddr, payload: vringAddr(1, uva+memSize, uva+memSize+8192, uva+memSize+4096)},
			}
		}},
		{"ring straddling the end of the memory", true, func(f *frontend) []hostileStep {
			return []hostileStep{
				{req: reqSetVringNum, payload: state(1, 256)},
				{req: reqSetVringAddr, payload: vringAddr(1, uva+memSize-16, uva+8192, uva+4096)},
			}
		}},
		{"kick descriptor with its no-descriptor bit", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetVringKick, payload: u64b(1 | 0x100), fds: []int{pipe[0]}}}
		}},
		{"kick for a ring out of range", false, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetVringKick, payload: u64b(7), fds: []int{pipe[0]}}}
		}},
		{"dirty-page log", true, func(f *frontend) []hostileStep {
			return []hostileStep{{req: reqSetLogFD, payload: nil, fds: []int{f.memfd}}}
		}},
		{"unknown request", false, func(*frontend) []hostileStep {
			return []hostileStep{{req: 999}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := dialFrontend(t, path, feCfg{})
			f.negotiate(c.mem)
			steps := c.steps(f)
			got, at := accepted, 0
			for i, s := range steps {
				got, at = f.outcome(s), i
				if got != accepted {
					break
				}
				if i == len(steps)-1 {
					t.Fatalf("every step accepted")
				}
			}
			for i := range p.slots {
				if p.slots[i].q.Load() != nil {
					t.Fatalf("ring %d runs after %s", i, got)
				}
			}
			t.Logf("step %d of %d %s", at+1, len(steps), got)
			f.close()
			waitFor(t, "the session to end", func() bool { return !p.connected.Load() })
		})
	}

	// A kick before any setup wakes nothing and breaks nothing: the
	// frontend that sent it then sets up and passes traffic.
	pool := packet.NewPool(64, packet.DefaultBufSize)
	f := dialFrontend(t, path, feCfg{})
	f.vqs = []*fvq{f.newVQ(0), f.newVQ(1)}
	f.must(reqSetVringKick, u64b(1), f.vqs[1].kick)
	unix.Write(f.vqs[1].kick, u64b(1))
	f.setup()
	waitFor(t, "link up", p.LinkUp)
	f.tx(0).transmit(testFrame(80, 7))
	if got := recvFrames(t, p, 0, pool, 1); len(got) != 1 || seqOf(got[0]) != 7 {
		t.Fatalf("well-behaved frontend after the hostile ones: received %d frames", len(got))
	}
	if sendFrames(p, 0, pool, [][]byte{testFrame(90, 8)}) != 1 {
		t.Fatal("send to the well-behaved frontend failed")
	}
	var rx [][]byte
	waitFor(t, "the frontend to receive", func() bool { rx = append(rx, f.rx(0).receive()...); return len(rx) > 0 })
	f.close()
	waitFor(t, "the session to end", func() bool { return !p.connected.Load() })
	// Only the last frontend's own mapping remains (it goes at cleanup).
	if n, want := memfdMappings(t), before+1; n != want {
		t.Errorf("%d memfd mappings, want %d: the port kept some", n, want)
	}
	if pool.Available() != pool.Size() {
		t.Error("pool leak")
	}
}

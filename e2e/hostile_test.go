package e2e

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// addPortsArgs is one vsctl command line adding n internal ports named
// stem0..stem(n-1) to bridge br, chained as one transaction.
func addPortsArgs(br, stem string, n int) []string {
	var args []string
	for i := range n {
		if i > 0 {
			args = append(args, "--")
		}
		args = append(args, "add-port", br, fmt.Sprintf("%s%d", stem, i), "--", "set", "Interface", fmt.Sprintf("%s%d", stem, i), "type=internal")
	}
	return args
}

// TestE2EPortLimitRefusesRequest: one vsctl request adding more ports
// than the default per-request limit (1,024) is refused with an error
// naming other_config:max-ports-per-request, and creates nothing.
func TestE2EPortLimitRefusesRequest(t *testing.T) {
	d := newDaemon(t)
	d.start()
	br := nstest.Name("hlb")
	d.vsctl("add-br", br)
	stem := nstest.Name("h")
	_, errOut, code := d.vsctlRaw(addPortsArgs(br, stem, 1025)...)
	if code == 0 || !strings.Contains(errOut, "adds 1025 ports") || !strings.Contains(errOut, "max-ports-per-request=1024") {
		t.Fatalf("1,025 ports in one request: exit %d, %q", code, errOut)
	}
	if got := d.vsctl("list-ports", br); got != "" {
		t.Fatalf("list-ports after the refused request: %q", got)
	}
	for _, i := range []int{0, 1024} {
		if _, err := net.InterfaceByName(fmt.Sprintf("%s%d", stem, i)); err == nil {
			t.Fatalf("interface %s%d exists after the refused request", stem, i)
		}
	}
}

// TestE2EShowDuringBigTransaction: while one request adds 300 internal
// ports, show and list-ports answer, and the request then completes whole.
// The test waits for the request to be under way (its first interface
// exists) and asks; whether the answer came before the last interface
// is a race with the kernel it does not judge (the daemon now creates
// the 300 taps in ~0.2 s): that show never waits for a change in
// progress is TestShowDuringChange's, in the daemon's own tests.
func TestE2EShowDuringBigTransaction(t *testing.T) {
	const n = 300
	d := newDaemon(t)
	d.start()
	br := nstest.Name("hlb")
	d.vsctl("add-br", br)
	stem := nstest.Name("h")
	type result struct {
		errOut string
		code   int
	}
	big := make(chan result, 1)
	go func() {
		_, errOut, code := d.vsctlRaw(addPortsArgs(br, stem, n)...)
		big <- result{errOut, code}
	}()
	first := stem + "0"
	nstest.WaitFor(t, 20*time.Second, "the big request's first interface", func() bool {
		_, err := net.InterfaceByName(first)
		return err == nil
	})
	show := d.vsctl("show")
	if !strings.Contains(show, "Bridge "+br) {
		t.Fatalf("show during the request:\n%s", show)
	}
	d.vsctl("list-ports", br)
	r := <-big
	if r.code != 0 {
		t.Fatalf("adding %d ports: exit %d: %s", n, r.code, r.errOut)
	}
	if got := strings.Count(d.vsctl("list-ports", br), "\n"); got != n {
		t.Fatalf("list-ports after the request: %d ports, want %d", got, n)
	}
}

// vhostMsg encodes one vhost-user request (version 1, NEED_REPLY).
func vhostMsg(req uint32, payload []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, req)
	b = binary.LittleEndian.AppendUint32(b, 1|8)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// TestE2EVhostUserHostileFrontend: hostile clients on a vhostuser port's
// socket (a payload longer than any request, a memory table backed by a
// pipe, a ring of 65,536 entries, bytes that are no request) each have
// their session closed; the daemon keeps answering and the socket serves
// the next client (GET_FEATURES answered). netdev/vhostuser's
// TestHostileFrontend covers each refusal in detail.
func TestE2EVhostUserHostileFrontend(t *testing.T) {
	d := newDaemon(t)
	d.start()
	br, port := nstest.Name("hlb"), nstest.Name("hvu")
	d.vsctl("add-br", br)
	d.vsctl("add-port", br, port, "--", "set", "Interface", port, "type=vhostuser")
	sock := filepath.Join(d.stateDir, port)
	pipe := make([]int, 2)
	if err := unix.Pipe2(pipe, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pipe[0])
	defer unix.Close(pipe[1])
	dial := func() *net.UnixConn {
		t.Helper()
		var c *net.UnixConn
		nstest.WaitFor(t, 5*time.Second, "the vhost-user socket to accept", func() bool {
			var err error
			c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
			return err == nil
		})
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	memTable := binary.LittleEndian.AppendUint64(nil, 1)
	for _, v := range []uint64{0x4000_0000, 65536, 0x7f00_0000_0000, 0} {
		memTable = binary.LittleEndian.AppendUint64(memTable, v)
	}
	ringState := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 65536)
	for _, c := range []struct {
		name string
		msg  []byte
		fd   bool
	}{
		{"payload longer than any request", vhostMsg(2, make([]byte, 5000)), false},
		{"memory table backed by a pipe", vhostMsg(5, memTable), true},
		{"ring of 65536 entries", vhostMsg(8, ringState), false},
		{"no request at all", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false},
	} {
		conn := dial()
		var oob []byte
		if c.fd {
			oob = unix.UnixRights(pipe[0])
		}
		if _, _, err := conn.WriteMsgUnix(c.msg, oob, nil); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// Closed: end of file, or a reset when the port closed with
		// the rest of the request unread.
		if n, err := io.Copy(io.Discard, conn); n != 0 || err != nil && !errors.Is(err, unix.ECONNRESET) {
			t.Fatalf("%s: the session answered %d bytes (%v) instead of closing", c.name, n, err)
		}
		conn.Close()
	}
	if show := d.vsctl("show"); !strings.Contains(show, "Port "+port) {
		t.Fatalf("show after the hostile clients:\n%s", show)
	}
	conn := dial()
	defer conn.Close()
	if _, err := conn.Write(vhostMsg(1, nil)); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 12+8)
	if _, err := io.ReadFull(conn, reply); err != nil || binary.LittleEndian.Uint32(reply) != 1 || binary.LittleEndian.Uint32(reply[8:]) != 8 {
		t.Fatalf("GET_FEATURES after the hostile clients: %x, %v", reply, err)
	}
}

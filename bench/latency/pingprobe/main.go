// Command pingprobe is the UDP ping-pong probe of bench/latency/breakdown.sh:
// like veth-bench's hb-pingpong (one probe in flight, blocking sockets, a
// fixed gap), but each probe carries the datapath's probe marker
// (datapath.ProbeMagic) and its sender's CLOCK_MONOTONIC stamp, so that a
// switch running with other_config:latency-probe times the kernel side in
// front of its PMD, and the two ends report the one-way times of both
// directions besides the round trip (all clocks are one machine's).
//
//	pingprobe server ADDR:PORT
//	pingprobe client [-n 5000] [-i 200] [-t 200] [-busy] ADDR:PORT
//
// The client prints one line: "rtt p50 … p90 … p99 … max … fwd p50 … p99 …
// back p50 … p99 … lost N" in microseconds; fwd is client → server (stamped
// by the client, timed by the server), back server → client. A second line
// splits each one-way time at the kernel's receive timestamp of the
// datagram (SO_TIMESTAMPNS, taken when the receiving host's stack got it
// from the device): "path" is the sender's stamp to that moment (the
// switches and the kernel paths in between), "wake" from it to the
// receiving process having the datagram (socket delivery, the wake-up and
// the wait for a CPU).
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath"
)

// Payload: magic, stamp of the current sender, client's send time,
// forward one-way time measured by the server, sequence number.
const (
	offStamp = 8
	offT0    = 16
	offFwd   = 24
	offSeq   = 32
	offFwdWk = 40
	payLen   = 48
)

func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// rtOffset is CLOCK_REALTIME minus CLOCK_MONOTONIC: the kernel's receive
// timestamps are wall-clock times, the probe's stamps monotonic.
var rtOffset = func() int64 {
	var rt unix.Timespec
	m := mono()
	_ = unix.ClockGettime(unix.CLOCK_REALTIME, &rt)
	return rt.Nano() - m
}()

// recvStamped receives one datagram on fd (a socket with SO_TIMESTAMPNS on)
// and returns its length and the kernel's receive time on the monotonic
// clock (0 if there was none).
func recvStamped(fd int, buf, oob []byte, flags int) (int, unix.Sockaddr, int64, error) {
	n, oobn, _, from, err := unix.Recvmsg(fd, buf, oob, flags)
	if err != nil {
		return 0, nil, 0, err
	}
	var at int64
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
			ts := unix.Timespec{Sec: int64(binary.NativeEndian.Uint64(m.Data)), Nsec: int64(binary.NativeEndian.Uint64(m.Data[8:]))}
			at = ts.Nano() - rtOffset
		}
	}
	return n, from, at, nil
}

func stampedSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func sockaddr(s string) (*unix.SockaddrInet4, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil || !ap.Addr().Is4() {
		return nil, fmt.Errorf("bad IPv4 ADDR:PORT %q", s)
	}
	return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pingprobe server ADDR:PORT | client [flags] ADDR:PORT")
		os.Exit(2)
	}
	runtime.LockOSThread()
	var err error
	switch os.Args[1] {
	case "server":
		err = server(os.Args[2:])
	case "client":
		err = client(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pingprobe:", err)
		os.Exit(1)
	}
}

func server(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("server ADDR:PORT")
	}
	sa, err := sockaddr(args[0])
	if err != nil {
		return err
	}
	fd, err := stampedSocket()
	if err != nil {
		return err
	}
	if err := unix.Bind(fd, sa); err != nil {
		return err
	}
	buf := make([]byte, 2048)
	oob := make([]byte, 128)
	for {
		n, from, at, err := recvStamped(fd, buf, oob, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		now := mono()
		if n >= payLen && string(buf[:8]) == datapath.ProbeMagic {
			st := int64(binary.LittleEndian.Uint64(buf[offStamp:]))
			binary.LittleEndian.PutUint64(buf[offFwd:], uint64(now-st))
			if at != 0 {
				binary.LittleEndian.PutUint64(buf[offFwdWk:], uint64(now-at))
			}
			binary.LittleEndian.PutUint64(buf[offStamp:], uint64(mono()))
		}
		_ = unix.Sendto(fd, buf[:n], 0, from)
	}
}

func pct(v []int64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	i := min(int(q*float64(len(v))), len(v)-1)
	return float64(v[i]) / 1000
}

func client(args []string) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	n := fs.Int("n", 5000, "probes")
	gap := fs.Int("i", 200, "gap between probes, µs")
	timeout := fs.Int("t", 200, "reply timeout, ms")
	busy := fs.Bool("busy", false, "busy-poll the socket instead of blocking")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("client [flags] ADDR:PORT")
	}
	sa, err := sockaddr(fs.Arg(0))
	if err != nil {
		return err
	}
	fd, err := stampedSocket()
	if err != nil {
		return err
	}
	tv := unix.NsecToTimeval(int64(*timeout) * 1e6)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	if err := unix.Connect(fd, sa); err != nil {
		return err
	}
	flags := 0
	if *busy {
		flags = unix.MSG_DONTWAIT
	}
	var rtt, fwd, back, fwdWake, backWake []int64
	lost := 0
	pkt := make([]byte, payLen)
	buf := make([]byte, 2048)
	oob := make([]byte, 128)
	copy(pkt, datapath.ProbeMagic)
	for seq := range *n {
		binary.LittleEndian.PutUint64(pkt[offSeq:], uint64(seq))
		t0 := mono()
		binary.LittleEndian.PutUint64(pkt[offStamp:], uint64(t0))
		binary.LittleEndian.PutUint64(pkt[offT0:], uint64(t0))
		if _, err := unix.Write(fd, pkt); err != nil {
			return err
		}
		for {
			m, _, at, err := recvStamped(fd, buf, oob, flags)
			now := mono()
			if err == unix.EAGAIN && *busy && now-t0 < int64(*timeout)*1e6 {
				continue
			}
			if err == unix.EINTR {
				continue
			}
			if err != nil || m < payLen {
				lost++
				break
			}
			if binary.LittleEndian.Uint64(buf[offSeq:]) != uint64(seq) {
				continue // a late reply to an earlier probe
			}
			rtt = append(rtt, now-t0)
			fwd = append(fwd, int64(binary.LittleEndian.Uint64(buf[offFwd:])))
			back = append(back, now-int64(binary.LittleEndian.Uint64(buf[offStamp:])))
			fwdWake = append(fwdWake, int64(binary.LittleEndian.Uint64(buf[offFwdWk:])))
			if at != 0 {
				backWake = append(backWake, now-at)
			}
			break
		}
		ts := unix.NsecToTimespec(int64(*gap) * 1000)
		_ = unix.Nanosleep(&ts, nil)
	}
	fwdPath, backPath := minus(fwd, fwdWake), minus(back, backWake)
	for _, v := range [][]int64{rtt, fwd, back, fwdWake, backWake, fwdPath, backPath} {
		slices.Sort(v)
	}
	mx := 0.0
	if len(rtt) > 0 {
		mx = float64(rtt[len(rtt)-1]) / 1000
	}
	fmt.Printf("rtt p50 %.1f p90 %.1f p99 %.1f max %.1f fwd p50 %.1f p99 %.1f back p50 %.1f p99 %.1f lost %d\n",
		pct(rtt, .5), pct(rtt, .9), pct(rtt, .99), mx, pct(fwd, .5), pct(fwd, .99), pct(back, .5), pct(back, .99), lost)
	if len(backWake) == len(back) {
		fmt.Printf("fwd path p50 %.1f p99 %.1f wake p50 %.1f p99 %.1f back path p50 %.1f p99 %.1f wake p50 %.1f p99 %.1f\n",
			pct(fwdPath, .5), pct(fwdPath, .99), pct(fwdWake, .5), pct(fwdWake, .99),
			pct(backPath, .5), pct(backPath, .99), pct(backWake, .5), pct(backWake, .99))
	}
	return nil
}

// minus returns total[i] - part[i] for each probe (before sorting).
func minus(total, part []int64) []int64 {
	if len(part) != len(total) {
		return nil
	}
	d := make([]int64, len(total))
	for i := range total {
		d[i] = total[i] - part[i]
	}
	return d
}

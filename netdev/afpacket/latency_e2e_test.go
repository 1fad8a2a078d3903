package afpacket

import (
	"encoding/binary"
	"net"
	"slices"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// Parameters of the latency probe.
const (
	latencyProbes  = 50
	latencyGap     = 20 * time.Millisecond
	latencyBaseSrc = 47000 // UDP source port of probe 0; probe i uses +i
	// latencyWait bounds the wait for the last probes once all are sent:
	// a bound on a lost probe, not on latency (one arrives in well under
	// a millisecond).
	latencyWait = 5 * time.Second
)

// TestE2ELatency sends lone UDP frames, 20 ms apart, from host a through
// the switch to host b and measures each one's one-way latency: from just
// before the send in a's namespace to the kernel's receive timestamp on
// b's interface (SO_TIMESTAMPNS; both clocks are this machine's
// CLOCK_REALTIME). At this rate a V3 ring retires every block on its timer
// (1 ms), so its latencies spread over 0..1 ms where V2's stay at tens of
// µs on an idle machine: the figures (median, p99) are logged for both
// rings, for a person to compare, and never asserted, since a busy machine
// moves them by hundreds of µs. Asserted is what a ring must do at any
// speed: every probe arrives, once, in the order it was sent.
func TestE2ELatency(t *testing.T) {
	for _, ring := range rings {
		t.Run(ring.String(), func(t *testing.T) {
			s := newSwitchTopo(t, Options{RxRing: ring}, 1)
			lat, order := oneWayLatencies(t, s.A, s.B)
			if len(order) != latencyProbes {
				t.Fatalf("%d of %d probes arrived (in this order: %v)", len(order), latencyProbes, order)
			}
			for k, i := range order {
				if i != k {
					t.Fatalf("probes arrived in the order %v, want 0..%d", order, latencyProbes-1)
				}
			}
			// The first probe pays for the upcall that installs the
			// flow: it is logged, not counted.
			first := lat[0]
			lat = lat[1:]
			slices.Sort(lat)
			med, p99 := lat[len(lat)/2], lat[(len(lat)*99+99)/100-1]
			t.Logf("%v ring: one-way latency over %d probes: median %v, p99 %v, min %v, max %v (first probe %v)",
				ring, len(lat), med, p99, lat[0], lat[len(lat)-1], first)
		})
	}
}

// oneWayLatencies sends the probes from host from to host to and returns
// each one's latency, by probe number, and the probe numbers in the order
// they arrived, each as often as it arrived.
func oneWayLatencies(t *testing.T, from, to *nstest.Host) (lat []time.Duration, order []int) {
	t.Helper()
	rx := nstest.PacketSocket(t, to.NS, to.Dev, nstest.SocketOptions{Protocol: unix.ETH_P_ALL, Timeout: 100 * time.Millisecond})
	if err := unix.SetsockoptInt(rx, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); err != nil {
		t.Fatal(err)
	}
	tx := nstest.NewSender(t, from.NS, from.Dev, false)

	// The receiver records the arrival of each probe by number, and
	// closes all once every probe has arrived.
	arrived := make([]int64, latencyProbes)
	done := make(chan struct{})
	all := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		buf := make([]byte, 2048)
		oob := make([]byte, 128)
		seen := 0
		for {
			select {
			case <-done:
				return
			default:
			}
			n, oobn, _, _, err := unix.Recvmsg(rx, buf, oob, 0)
			if err != nil {
				continue // timeout: look at done again
			}
			i, ok := probeNumber(buf[:n])
			if !ok {
				continue // not ours: the kernel's own traffic, say
			}
			order = append(order, i)
			if arrived[i] == 0 {
				arrived[i] = rxTimestamp(oob[:oobn])
				if seen++; seen == latencyProbes {
					close(all)
				}
			}
		}
	}()

	src, _ := net.ParseMAC(from.MAC)
	sent := make([]int64, latencyProbes)
	for i := range sent {
		f := nstest.UDPFrame(nstest.UnusedMAC, src, net.ParseIP(from.IP).To4(), net.ParseIP(to.IP).To4(), uint16(latencyBaseSrc+i), 9)
		sent[i] = time.Now().UnixNano()
		if err := tx.Send(f); err != nil {
			t.Fatalf("probe %d: %v", i, err)
		}
		time.Sleep(latencyGap)
	}
	select {
	case <-all:
	case <-time.After(latencyWait):
	}
	close(done)
	<-finished

	lat = make([]time.Duration, latencyProbes)
	for i := range sent {
		lat[i] = time.Duration(arrived[i] - sent[i])
	}
	return lat, order
}

// probeNumber reports which probe a received frame is.
func probeNumber(f []byte) (int, bool) {
	if len(f) < 42 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 || !slices.Equal(f[:6], nstest.UnusedMAC) {
		return 0, false
	}
	i := int(binary.BigEndian.Uint16(f[34:])) - latencyBaseSrc
	if i < 0 || i >= latencyProbes {
		return 0, false
	}
	return i, true
}

// rxTimestamp returns the SCM_TIMESTAMPNS time in the control messages, or
// now if there is none.
func rxTimestamp(oob []byte) int64 {
	msgs, _ := unix.ParseSocketControlMessage(oob)
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return ts.Nano()
		}
	}
	return time.Now().UnixNano()
}

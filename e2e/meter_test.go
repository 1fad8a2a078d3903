package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// meterSrc is the source MAC of every frame trafgen sends here: frames
// with it come from the test and from nothing the kernel sends.
var meterSrc = []byte{0x02, 0x00, 0x4d, 0x45, 0x54, 0x52}

// meterTally counts the test's frames as the receiving host sees them:
// IPv4 by DSCP, ARP apart, with the arrival time of each DSCP's frames.
type meterTally struct {
	mu     sync.Mutex
	arp    int
	dscp   map[int][]time.Time
	others int
}

func (m *meterTally) add(f []byte, at time.Time) {
	if len(f) < 16 || string(f[6:12]) != string(meterSrc) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case f[12] == 0x08 && f[13] == 0x06:
		m.arp++
	case f[12] == 0x08 && f[13] == 0x00:
		d := int(f[15] >> 2)
		m.dscp[d] = append(m.dscp[d], at)
	default:
		m.others++
	}
}

// receiveAll counts, until stop is closed, the frames dev in ns receives.
func receiveAll(t *testing.T, ns *nstest.Netns, dev string, stop <-chan struct{}) (*meterTally, *sync.WaitGroup) {
	fd := nstest.PacketSocket(t, ns, dev, nstest.SocketOptions{Protocol: unix.ETH_P_ALL, Timeout: 100 * time.Millisecond})
	// A receiver descheduled for a moment must not lose frames to a full
	// socket buffer.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 32<<20); err != nil {
		t.Fatal(err)
	}
	m := &meterTally{dscp: map[int][]time.Time{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				continue
			}
			if ll, _ := from.(*unix.SockaddrLinklayer); ll != nil && ll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			m.add(buf[:n], time.Now())
		}
	}()
	return m, &wg
}

// trafgenFrame is a trafgen packet config: an IPv4/UDP frame of size
// bytes with DSCP dscp, or an ARP reply (padded to size), from meterSrc
// to dst.
func trafgenFrame(dst string, size int, arp bool, dscp int) string {
	mac := func(s string) string {
		var b []string
		for _, p := range strings.Split(s, ":") {
			b = append(b, "0x"+p)
		}
		return strings.Join(b, ",")
	}
	src := fmt.Sprintf("0x%02x,0x%02x,0x%02x,0x%02x,0x%02x,0x%02x", meterSrc[0], meterSrc[1], meterSrc[2], meterSrc[3], meterSrc[4], meterSrc[5])
	if arp {
		return fmt.Sprintf("{ %s, %s, c16(0x0806), c16(1), c16(0x0800), 6, 4, c16(2), %s, 198,18,0,77, %s, 198,18,0,2, fill(0, %d) }",
			mac(dst), src, src, mac(dst), size-42)
	}
	return fmt.Sprintf("{ %s, %s, c16(0x0800), 0x45, %d, c16(%d), c16(1), c16(0x4000), 64, 17, csumip(14, 33), "+
		"198,18,0,77, 198,18,0,2, c16(5000), c16(6000), c16(%d), c16(0), fill(0xab, %d) }",
		mac(dst), src, dscp<<2, size-14, size-34, size-42)
}

// meterDrops reads the datapath's meter drop counter from drop-stats.
func meterDrops(t *testing.T, d *daemon) uint64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*meter\s+(\d+)`).FindStringSubmatch(d.vsctl("drop-stats"))
	if m == nil {
		t.Fatal("drop-stats has no meter line")
	}
	v, _ := strconv.ParseUint(m[1], 10, 64)
	return v
}

// meterIn reads a meter's packet_in_count and its first band's count.
func meterIn(t *testing.T, d *daemon, id int) (in, band uint64) {
	t.Helper()
	out := d.vsctl("meter-stats", "br0", fmt.Sprintf("meter=%d", id))
	m := regexp.MustCompile(`packet_in_count:(\d+)[\s\S]*0: packet_count:(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("meter-stats: %s", out)
	}
	in, _ = strconv.ParseUint(m[1], 10, 64)
	band, _ = strconv.ParseUint(m[2], 10, 64)
	return in, band
}

// meterCase is one band TestMeterRemarkTrafgen offers traffic to at twice
// its rate.
type meterCase struct {
	name      string
	band      string
	pps, size int
	ratePkts  int // the band's rate in frames/s, and its bucket
	secs      int // how long trafgen offers pps
}

// meterCases are the bands TestMeterRemarkTrafgen runs: a pktps and a kbps
// band, or with VSWITCH_METER_SWEEP=1 (bench/meters/bands.sh) the range a
// production meter is expected to hold: 100 to 20,000 pktps (100 B
// frames) and 1 to 200 Mbit/s (1000 B frames, 8 kbit each).
func meterCases() []meterCase {
	band := func(unit string, rate int) string {
		return fmt.Sprintf("%s,band=type=dscp_remark,rate=%d,prec_level=1", unit, rate)
	}
	if os.Getenv("VSWITCH_METER_SWEEP") == "" {
		return []meterCase{
			{"pktps", band("pktps", 2000), 4000, 100, 2000, 3},
			{"kbps", band("kbps", 16000), 4000, 1000, 2000, 3}, // 16 Mbit/s of 1000 B
		}
	}
	var cs []meterCase
	for _, r := range []int{100, 1000, 10000, 20000} {
		cs = append(cs, meterCase{fmt.Sprintf("pktps-%d", r), band("pktps", r), 2 * r, 100, r, 6})
	}
	for _, mbit := range []int{1, 10, 100, 200} {
		fps := mbit * 1000 / 8
		cs = append(cs, meterCase{fmt.Sprintf("kbps-%dM", mbit), band("kbps", mbit*1000), 2 * fps, 1000, fps, 6})
	}
	return cs
}

// TestMeterRemarkTrafgen offers trafgen traffic at twice a dscp_remark
// band's rate through veth ports (pktps and kbps bands), IPv4 with DSCP
// AF21 and ARP, and logs a benchmark line per run: what the switch
// received, and the rates that left unchanged and remarked over the
// steady part of the run (after the band's one-second bucket). It asserts
// no rate: only that every remarked frame carries AF22, that the band
// remarked some, that no meter drop was counted, and that every ARP frame
// that reached the meter left the switch.
func TestMeterRemarkTrafgen(t *testing.T) {
	nstest.RequireTool(t, "trafgen")
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	d.start()
	d.vsctl("add-br", "br0")
	// VSWITCH_METER_PORT_TYPE=afxdp (or "" for the automatic choice)
	// sweeps through other port drivers.
	portType, ok := os.LookupEnv("VSWITCH_METER_PORT_TYPE")
	if !ok {
		portType = "afpacket"
	}
	d.vsctl("add-port", "br0", a.Port, "--", "type="+portType)
	d.vsctl("add-port", "br0", b.Port, "--", "type="+portType)
	dir := t.TempDir()
	for i, c := range meterCases() {
		t.Run(c.name, func(t *testing.T) {
			ipM, arpM := 10+2*i, 11+2*i
			d.vsctl("add-meter", "br0", fmt.Sprintf("meter=%d,%s", ipM, c.band))
			d.vsctl("add-meter", "br0", fmt.Sprintf("meter=%d,%s", arpM, c.band))
			d.vsctl("del-flows", "br0")
			d.vsctl("add-flow", "br0", fmt.Sprintf("priority=100,in_port=%s,ip,actions=meter:%d,output:%s", a.Port, ipM, b.Port))
			d.vsctl("add-flow", "br0", fmt.Sprintf("priority=100,in_port=%s,arp,actions=meter:%d,output:%s", a.Port, arpM, b.Port))
			drops0 := meterDrops(t, d)
			stop := make(chan struct{})
			tally, wg := receiveAll(t, b.NS, b.Dev, stop)
			defer func() { close(stop); wg.Wait() }()

			send := func(arp bool) (int, time.Duration) {
				cfg := filepath.Join(dir, fmt.Sprintf("%s-%v.cfg", c.name, arp))
				if err := os.WriteFile(cfg, []byte(trafgenFrame(b.MAC, c.size, arp, 18)), 0o644); err != nil {
					t.Fatal(err)
				}
				n := c.pps * c.secs
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				start := time.Now()
				out, err := a.NS.Cmd(ctx, "trafgen", "-o", a.Dev, "-i", cfg, "-b", fmt.Sprintf("%dpps", c.pps),
					"-n", strconv.Itoa(n), "-P", "1", "-C", "-q").CombinedOutput()
				if err != nil {
					t.Fatalf("trafgen: %v\n%s", err, out)
				}
				return n, time.Since(start)
			}

			sent, took := send(false)
			// Wait (bounded) until everything the meter took in has left.
			// (A frame the switch's rx ring lost never reaches the meter:
			// the meter's own count is what must come out.)
			var in, band, prev uint64
			nstest.WaitFor(t, 20*time.Second, "the IPv4 frames the meter took in to arrive", func() bool {
				prev = in
				in, band = meterIn(t, d, ipM)
				tally.mu.Lock()
				got := 0
				for _, ts := range tally.dscp {
					got += len(ts)
				}
				tally.mu.Unlock()
				return in > 0 && in == prev && got == int(in)
			})
			tally.mu.Lock()
			unchanged, remarked := tally.dscp[18], tally.dscp[20]
			var wrong []string
			for dscp, ts := range tally.dscp {
				if dscp != 18 && dscp != 20 {
					wrong = append(wrong, fmt.Sprintf("%d×DSCP %d", len(ts), dscp))
				}
			}
			tally.mu.Unlock()
			if len(wrong) > 0 {
				t.Errorf("frames left with DSCPs other than AF21 and AF22: %v", wrong)
			}
			if len(remarked) == 0 {
				t.Errorf("no frame remarked of %d sent at twice the band's rate", sent)
			}
			if uint64(len(remarked)) != band {
				t.Errorf("%d frames arrived remarked, the band counted %d", len(remarked), band)
			}
			// Rates over the span of the arrivals: the unchanged ones
			// less the band's one-second bucket (rate frames), and the
			// remarked ones. trafgen paces in bursts on a loaded
			// machine, so no shorter window is steady.
			first, last := time.Now(), time.Time{}
			for _, ts := range [][]time.Time{unchanged, remarked} {
				for _, x := range ts {
					if x.Before(first) {
						first = x
					}
					if x.After(last) {
						last = x
					}
				}
			}
			span := last.Sub(first).Seconds()
			beyond := float64(len(unchanged)-c.ratePkts) / span
			t.Logf("BENCH meter %s band (%s), trafgen -b %dpps -n %d of %d B frames (took %.2f s): switch took in %d, arrivals over %.2f s: %d unchanged (%.0f/s beyond the %d-frame bucket, %.1f %% of the band rate), %d remarked (%.0f/s), band rate %d frames/s",
				c.name, c.band, c.pps, sent, c.size, took.Seconds(), in, span, len(unchanged), beyond,
				c.ratePkts, 100*beyond/float64(c.ratePkts), len(remarked), float64(len(remarked))/span, c.ratePkts)

			arpSent, _ := send(true)
			var arpIn, arpPrev uint64
			nstest.WaitFor(t, 20*time.Second, "the ARP frames the meter took in to arrive", func() bool {
				arpPrev = arpIn
				arpIn, _ = meterIn(t, d, arpM)
				tally.mu.Lock()
				defer tally.mu.Unlock()
				return arpIn > 0 && arpIn == arpPrev && tally.arp == int(arpIn)
			})
			if dr := meterDrops(t, d) - drops0; dr != 0 {
				t.Errorf("%d meter drops through remark bands", dr)
			}
			t.Logf("BENCH meter %s band ARP: trafgen %d, switch took in %d, %d arrived", c.name, arpSent, arpIn, tally.arp)
		})
	}
}

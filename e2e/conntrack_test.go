package e2e

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestConntrackAcrossKill9: connections live in memory only, as in Open
// vSwitch. After a kill -9 and restart the table is empty, the firewall's
// flows are back from the flow journal, and an established TCP connection
// from the inside goes on: its next segment (an ACK, not a SYN) is
// committed again as new, and the replies pass as established.
func TestConntrackAcrossKill9(t *testing.T) {
	d, a, b, run, br := firewallDaemon(t)
	echo := tcpEcho(t, a, b)
	echo("before")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/dump-conntrack"); !strings.Contains(got, "tcp,orig=(src="+a.IP) {
		t.Fatalf("no TCP connection tracked:\n%s", got)
	}

	d.kill9()
	d.start("--pidfile")
	nstest.WaitFor(t, 30*time.Second, "the restarted daemon's control socket", func() bool {
		_, _, code := ovsTool(t, run, "ovs-appctl", "dpctl/ct-get-nconns")
		return code == 0
	})
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-nconns"); got != "0\n" {
		t.Errorf("connections after a restart: %q, want none (they are not persistent)", got)
	}
	if got := mustOVSTool(t, run, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", br); !strings.Contains(got, "ct(commit)") {
		t.Fatalf("the firewall's flows after the restart:\n%s", got)
	}
	echo("after")
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/dump-conntrack"); !strings.Contains(got, "tcp,orig=(src="+a.IP) {
		t.Errorf("the connection is not tracked again:\n%s", got)
	}
	// Something started on the outside still does not get in.
	if out, err := b.NS.Output("ping", "-c", "1", "-W", "1", a.IP); err == nil {
		t.Errorf("a ping from the outside got through after the restart:\n%s", out)
	}
}

// firewallDaemon starts the daemon (pidfile in a run directory of its
// own) with a bridge between hosts A and B and a stateful firewall:
// connections from A are committed, their replies pass, nothing B starts
// gets through.
func firewallDaemon(t *testing.T) (d *daemon, a, b *nstest.Host, run, br string) {
	t.Helper()
	nstest.RequireTool(t, "ovs-appctl", "ovs-ofctl")
	d = newDaemon(t)
	a, b = nstest.TwoHosts(t)
	run = filepath.Join(t.TempDir(), "run")
	t.Setenv("OVS_RUNDIR", run)
	d.start("--pidfile")
	br = nstest.Name("brct")
	d.vsctl("add-br", br)
	d.vsctl("add-port", br, a.Port, "--", "type=afpacket")
	d.vsctl("add-port", br, b.Port, "--", "type=afpacket")
	for _, f := range []string{
		"priority=100,arp,actions=NORMAL",
		"priority=10,ip,ct_state=-trk,actions=ct(table=1)",
		"table=1,ip,in_port=1,ct_state=+trk+new,actions=ct(commit),output:2",
		"table=1,ip,ct_state=+trk+est,actions=NORMAL",
		"table=1,priority=0,actions=drop",
	} {
		mustOVSTool(t, run, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", br, f)
	}
	return d, a, b, run, br
}

// tcpEcho opens a TCP connection from A to a line echo server in B and
// returns a function that sends a line and checks it comes back (within a
// minute: TCP retransmits through an outage).
func tcpEcho(t *testing.T, a, b *nstest.Host) func(msg string) {
	t.Helper()
	var ln net.Listener
	if err := b.NS.Do(func() (err error) { ln, err = net.Listen("tcp", b.IP+":0"); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			c.Write([]byte(line))
		}
	}()
	var conn net.Conn
	if err := a.NS.Do(func() (err error) { conn, err = net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r := bufio.NewReader(conn)
	return func(msg string) {
		t.Helper()
		conn.SetDeadline(time.Now().Add(60 * time.Second))
		if _, err := conn.Write([]byte(msg + "\n")); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != msg+"\n" {
			t.Fatalf("echo of %q: %q, %v", msg, got, err)
		}
	}
}

// TestConntrackSYNFlood: SYNs from 100,000 spoofed sources fill the
// connection table only to its limit, evicting unanswered connections,
// while an established connection keeps flowing.
func TestConntrackSYNFlood(t *testing.T) {
	d, a, b, run, _ := firewallDaemon(t)
	const limit = 5000
	mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-set-maxconns", strconv.Itoa(limit))
	echo := tcpEcho(t, a, b)
	echo("before")

	// The SYNs go to a MAC nobody owns: B counts and drops them, and
	// answers none (no RST would close them early).
	sink, _ := net.ParseMAC("02:00:c6:12:00:fe")
	src, _ := net.ParseMAC(a.MAC)
	frames := make([][]byte, 100_000)
	for i := range frames {
		frames[i] = synFrame(t, src, sink, net.IPv4(198, 19, byte(i>>8), byte(i)), net.ParseIP(b.IP), uint16(1024+i%50000), 80)
	}
	fd := nstest.PacketSocket(t, a.NS, a.Dev, nstest.SocketOptions{})
	stop := make(chan struct{})
	flooded := make(chan uint64)
	// About 100,000 SYNs a second: the table fills in a second, and the
	// established connection's frames are not lost in the kernel's
	// receive ring before the switch sees them (an unpaced flood starved
	// it for a minute once, with the race detector's slower daemon).
	go func() { flooded <- nstest.FloodPaced(fd, frames, 0, 10*time.Millisecond, stop) }()
	for i := range 5 {
		echo(fmt.Sprintf("during %d", i))
		time.Sleep(200 * time.Millisecond)
	}
	// Until every spoofed SYN has gone out at least once.
	nstest.WaitFor(t, 60*time.Second, "100,000 SYNs sent", func() bool {
		return d.scrape()["vswitch_conntrack_created_total"] >= float64(len(frames))/2
	})
	close(stop)
	sent := <-flooded
	echo("after")
	m := d.scrape()
	n, _ := strconv.Atoi(strings.TrimSpace(mustOVSTool(t, run, "ovs-appctl", "dpctl/ct-get-nconns")))
	t.Logf("%d SYNs sent; %d connections; created %.0f, evicted %.0f, refused %.0f", sent, n,
		m["vswitch_conntrack_created_total"], m["vswitch_conntrack_evicted_total"], m["vswitch_conntrack_limit_refused_total"])
	if n > limit || n < limit/2 {
		t.Errorf("%d connections after the flood, limit %d", n, limit)
	}
	if m["vswitch_conntrack_evicted_total"] == 0 {
		t.Errorf("the flood evicted nothing")
	}
	if got := mustOVSTool(t, run, "ovs-appctl", "dpctl/dump-conntrack"); !strings.Contains(got, "tcp,orig=(src="+a.IP) {
		t.Errorf("the established connection is gone from the table")
	}
}

func synFrame(t *testing.T, src, dst net.HardwareAddr, sip, dip net.IP, sport, dport uint16) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: sip.To4(), DstIP: dip.To4()}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: layers.TCPPort(dport), Seq: 1, SYN: true, Window: 64240}
	tcp.SetNetworkLayerForChecksum(ip)
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: layers.EthernetTypeIPv4}, ip, tcp); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

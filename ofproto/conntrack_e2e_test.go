//go:build linux

package ofproto

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestConntrackFirewall runs the stateful firewall every security group
// is, installed with the real ovs-ofctl over veth namespaces: connections
// from host A are committed (zone 5, ct_mark 42) and their replies pass
// as established; nothing host B starts gets through. Ping and a TCP
// stream (iperf3) both cross it.
func TestConntrackFirewall(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	nstest.RequireTool(t, "iperf3")
	a, b, br, target := newE2EBridge(t, "ptcp:0:127.0.0.1")
	const a6, b6 = "2001:db8:5::1", "2001:db8:5::2"
	for _, h := range []struct {
		host *nstest.Host
		ip   string
	}{{a, a6}, {b, b6}} {
		h.host.NS.Run(t, "sysctl", "-qw", "net.ipv6.conf."+h.host.Dev+".disable_ipv6=0")
		h.host.NS.Run(t, "ip", "-6", "addr", "add", h.ip+"/64", "dev", h.host.Dev, "nodad")
	}
	var flows []string
	for _, ip := range []string{"ip", "ipv6"} {
		flows = append(flows,
			"priority=10,"+ip+",ct_state=-trk,actions=ct(table=1,zone=5)",
			"table=1,priority=10,"+ip+",in_port=1,ct_state=+trk+new,actions=ct(commit,zone=5,exec(set_field:42->ct_mark)),output:2",
			"table=1,priority=10,"+ip+",in_port=1,ct_state=+trk+est-rpl,actions=output:2",
			"table=1,priority=10,"+ip+",in_port=2,ct_state=+trk+est+rpl,ct_mark=42,ct_zone=5,actions=output:1")
	}
	flows = append(flows,
		"priority=100,arp,in_port=1,actions=output:2",
		"priority=100,arp,in_port=2,actions=output:1",
		// Neighbour discovery is not a connection: it passes untracked.
		"priority=100,icmp6,icmp_type=135,actions=NORMAL",
		"priority=100,icmp6,icmp_type=136,actions=NORMAL",
		"table=1,priority=1,actions=drop")
	for _, f := range flows {
		ovsOfctlIn(t, "OpenFlow13", "add-flow", target, f)
	}
	for _, dst := range []string{b.IP, b6} {
		nstest.Ping(t, a.NS, dst)
	}
	for _, dst := range []string{a.IP, a6} {
		if out, err := b.NS.Output("ping", "-c", "2", "-i", "0.2", "-W", "1", dst); err == nil {
			t.Fatalf("a ping started on the outside got through to %s:\n%s", dst, out)
		}
	}
	// Datagrams of 3,000 bytes cross in fragments: ct reassembles them
	// to track them (a fragment alone is +inv, which the firewall drops)
	// and the fragments pass on with the datagram's verdict.
	for _, dst := range []string{b.IP, b6} {
		if out, err := a.NS.Output("ping", "-c", "3", "-i", "0.2", "-W", "2", "-s", "3000", dst); err != nil {
			t.Errorf("3,000-byte pings to %s through the firewall: %v\n%s", dst, err, out)
		}
	}
	for _, ip := range []string{b.IP, b6} {
		udpEchoFragmented(t, a.NS, b.NS, ip, ip, 3000)
	}
	v4, v6, held := br.dp.FragmentStats()
	if v4.Completed == 0 || v6.Completed == 0 || held != 0 {
		t.Errorf("fragments: v4 %+v, v6 %+v, %d held", v4, v6, held)
	}
	nstest.IperfTCP(t, a.NS, b.NS, b.IP, 1)
	t.Logf("tracker: %+v", br.dp.Conntrack().Stats())

	dump := ovsOfctlIn(t, "OpenFlow13", "dump-flows", target, "table=1")
	for _, f := range flowLines(dump) {
		if strings.Contains(f, "ct_state=+new+trk") && strings.Contains(f, "n_packets=0,") ||
			strings.Contains(f, "+est+rpl+trk") && strings.Contains(f, "n_packets=0,") {
			t.Errorf("a firewall flow the traffic needs counted nothing:\n%s", dump)
		}
	}
	var icmp, icmp6, tcp bool
	zone := uint16(5)
	for _, e := range br.dp.DumpConntrack(&zone) {
		s := e.String()
		icmp = icmp || strings.HasPrefix(s, "icmp,orig=(src="+a.IP+",dst="+b.IP) && strings.Contains(s, ",zone=5,mark=42")
		icmp6 = icmp6 || strings.HasPrefix(s, "icmpv6,orig=(src="+a6+",dst="+b6) && strings.Contains(s, ",type=128,code=0),reply=(src="+b6)
		tcp = tcp || strings.HasPrefix(s, "tcp,orig=(src="+a.IP+",dst="+b.IP) && strings.Contains(s, ",zone=5,mark=42,protoinfo=(state=")
	}
	if !icmp || !icmp6 || !tcp {
		t.Errorf("connections in zone 5 (icmp %v, icmpv6 %v, tcp %v):\n%v", icmp, icmp6, tcp, br.dp.DumpConntrack(nil))
	}
	// A controller's NXT_CT_FLUSH removes the connections its tuple
	// names: the IPv6 ones from A, not the IPv4 ones.
	before := len(br.dp.DumpConntrack(&zone))
	ovsOfctlIn(t, "OpenFlow13", "ct-flush", target, "zone=5", "ct_ipv6_src="+a6)
	after := br.dp.DumpConntrack(&zone)
	for _, e := range after {
		if e.Orig.IPv6 {
			t.Errorf("after ct-flush of ct_ipv6_src=%s: %s", a6, e.String())
		}
	}
	if len(after) == before || len(after) == 0 {
		t.Errorf("ct-flush by tuple left %d of %d connections", len(after), before)
	}
	// A controller's NXT_CT_FLUSH_ZONE empties the zone.
	ovsOfctlIn(t, "OpenFlow13", "ct-flush-zone", target, "5")
	if es := br.dp.DumpConntrack(&zone); len(es) != 0 {
		t.Errorf("after ct-flush-zone 5: %v", es)
	}
	if out, err := b.NS.Output("ping", "-c", "1", "-W", "1", a.IP); err == nil {
		t.Fatalf("after the flush, an outside ping got through:\n%s", out)
	}
}

// TestConntrackNAT: DNAT of a virtual address to host B (ping and a TCP
// stream), then SNAT of host A behind another address, written as an
// Open vSwitch user writes them and installed with the real ovs-ofctl.
func TestConntrackNAT(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	nstest.RequireTool(t, "iperf3")
	a, b, br, target := newE2EBridge(t, "ptcp:0:127.0.0.1")
	const vip, outside = "198.18.0.100", "198.18.0.77"
	// A reaches the virtual address at B's MAC; B answers the outside
	// address at A's.
	nstest.StaticNeighbour(t, a.NS, a.Dev, vip, b.MAC)
	nstest.StaticNeighbour(t, b.NS, b.Dev, outside, a.MAC)
	common := []string{
		"priority=100,arp,in_port=1,actions=output:2",
		"priority=100,arp,in_port=2,actions=output:1",
		"priority=10,ip,ct_state=-trk,actions=ct(table=1,zone=7,nat)",
		"table=1,ip,in_port=1,ct_state=+trk+est,actions=output:2",
		"table=1,ip,in_port=2,ct_state=+trk+est,actions=output:1",
		"table=1,ip,in_port=2,ct_state=+trk+rel,actions=output:1",
		"table=1,priority=0,actions=drop",
	}
	install := func(extra string) {
		ovsOfctlIn(t, "OpenFlow13", "del-flows", target)
		for _, f := range append(common, extra) {
			ovsOfctlIn(t, "OpenFlow13", "add-flow", target, f)
		}
	}

	install("table=1,ip,in_port=1,nw_dst=" + vip + ",ct_state=+trk+new,actions=ct(commit,zone=7,nat(dst=" + b.IP + ")),output:2")
	nstest.Ping(t, a.NS, vip)
	// Translated in fragments: addresses in each, the port and the
	// checksum in the first.
	udpEchoFragmented(t, a.NS, b.NS, b.IP, vip, 3000)
	nstest.IperfTCPVia(t, a.NS, b.NS, vip, b.IP, 1)
	zone := uint16(7)
	var dnat bool
	for _, e := range br.dp.DumpConntrack(&zone) {
		s := e.String()
		dnat = dnat || strings.HasPrefix(s, "icmp,orig=(src="+a.IP+",dst="+vip) && strings.Contains(s, "reply=(src="+b.IP+",dst="+a.IP)
	}
	if !dnat {
		t.Errorf("no DNAT connection in zone 7:\n%v", br.dp.DumpConntrack(&zone))
	}

	br.dp.Conntrack().Flush(nil)
	install("table=1,ip,in_port=1,ct_state=+trk+new,actions=ct(commit,zone=7,nat(src=" + outside + ")),output:2")
	nstest.Ping(t, a.NS, b.IP)
	udpEchoFragmented(t, a.NS, b.NS, b.IP, b.IP, 3000)
	// B's port unreachable, sent to the outside address about the
	// translated datagram, reaches A translated back: A's socket sees
	// the refusal.
	var u net.Conn
	if err := a.NS.Do(func() (err error) { u, err = net.Dial("udp", net.JoinHostPort(b.IP, "9")); return }); err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.Write([]byte("anyone?"))
	u.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := u.Read(make([]byte, 64)); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("UDP to a closed port through SNAT: %v, want the refusal B's ICMP error carries", err)
	}
	var snat bool
	for _, e := range br.dp.DumpConntrack(&zone) {
		s := e.String()
		snat = snat || strings.HasPrefix(s, "icmp,orig=(src="+a.IP+",dst="+b.IP) && strings.Contains(s, "reply=(src="+b.IP+",dst="+outside)
	}
	if !snat {
		t.Errorf("no SNAT connection in zone 7:\n%v", br.dp.DumpConntrack(&zone))
	}
	if st := br.dp.Conntrack().Stats(); st.NATExhausted != 0 {
		t.Errorf("stats %+v", st)
	}

	// The same over IPv6: DNAT of a virtual address (ping, a TCP
	// stream, a datagram in fragments), then SNAT.
	const a6, b6, vip6, out6 = "2001:db8:7::1", "2001:db8:7::2", "2001:db8:7::100", "2001:db8:7::77"
	for _, h := range []struct {
		host *nstest.Host
		ip   string
	}{{a, a6}, {b, b6}} {
		h.host.NS.Run(t, "sysctl", "-qw", "net.ipv6.conf."+h.host.Dev+".disable_ipv6=0")
		h.host.NS.Run(t, "ip", "-6", "addr", "add", h.ip+"/64", "dev", h.host.Dev, "nodad")
	}
	nstest.StaticNeighbour(t, a.NS, a.Dev, vip6, b.MAC)
	nstest.StaticNeighbour(t, a.NS, a.Dev, b6, b.MAC)
	nstest.StaticNeighbour(t, b.NS, b.Dev, out6, a.MAC)
	nstest.StaticNeighbour(t, b.NS, b.Dev, a6, a.MAC)
	common6 := []string{
		"priority=10,ipv6,ct_state=-trk,actions=ct(table=1,zone=7,nat)",
		"table=1,ipv6,in_port=1,ct_state=+trk+est,actions=output:2",
		"table=1,ipv6,in_port=2,ct_state=+trk+est,actions=output:1",
		"table=1,priority=0,actions=drop",
	}
	install6 := func(extra string) {
		ovsOfctlIn(t, "OpenFlow13", "del-flows", target)
		for _, f := range append(common6, extra) {
			ovsOfctlIn(t, "OpenFlow13", "add-flow", target, f)
		}
	}
	br.dp.Conntrack().Flush(nil)
	install6("table=1,ipv6,in_port=1,ipv6_dst=" + vip6 + ",ct_state=+trk+new,actions=ct(commit,zone=7,nat(dst=" + b6 + ")),output:2")
	nstest.Ping(t, a.NS, vip6)
	udpEchoFragmented(t, a.NS, b.NS, b6, vip6, 3000)
	nstest.IperfTCPVia(t, a.NS, b.NS, vip6, b6, 1)
	br.dp.Conntrack().Flush(nil)
	install6("table=1,ipv6,in_port=1,ct_state=+trk+new,actions=ct(commit,zone=7,nat(src=" + out6 + ")),output:2")
	nstest.Ping(t, a.NS, b6)
	udpEchoFragmented(t, a.NS, b.NS, b6, b6, 3000)
	var snat6 bool
	for _, e := range br.dp.DumpConntrack(&zone) {
		snat6 = snat6 || strings.Contains(e.String(), "reply=(src="+b6+",dst="+out6)
	}
	if !snat6 {
		t.Errorf("no IPv6 SNAT connection in zone 7:\n%v", br.dp.DumpConntrack(&zone))
	}
}

// udpEchoFragmented sends a UDP datagram of size bytes from client to
// dst, for a server at ip that echoes it (dst is ip, or an address NAT
// turns into it), and checks the echo comes back whole: both ways it
// crosses the switch in fragments.
func udpEchoFragmented(t *testing.T, client, server *nstest.Netns, ip, dst string, size int) {
	t.Helper()
	var srv, cli net.PacketConn
	if err := server.Do(func() (err error) { srv, err = net.ListenPacket("udp", net.JoinHostPort(ip, "0")); return }); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := client.Do(func() (err error) { cli, err = net.ListenPacket("udp", ":0"); return }); err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	go func() {
		buf := make([]byte, 65536)
		n, from, err := srv.ReadFrom(buf)
		if err == nil {
			srv.WriteTo(buf[:n], from)
		}
	}()
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	to := &net.UDPAddr{IP: net.ParseIP(dst), Port: srv.LocalAddr().(*net.UDPAddr).Port}
	if _, err := cli.WriteTo(msg, to); err != nil {
		t.Fatal(err)
	}
	cli.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65536)
	n, _, err := cli.ReadFrom(buf)
	if err != nil || !bytes.Equal(buf[:n], msg) {
		t.Errorf("UDP echo of %d bytes to %s: %d bytes back, %v", size, dst, n, err)
	}
}

// TestConntrackALG: a firewall that lets host A open only the control
// connection (TFTP's request, FTP's control connection) and connections
// related to it passes a download from B when the control connection is
// committed with the helper (alg=tftp, alg=ftp; passive FTP: the data
// connection goes from A to a port B announces), and not without it. The
// servers are small ones in B's namespace; the clients busybox's tftp and
// ftpget.
func TestConntrackALG(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	nstest.RequireTool(t, "busybox")
	for _, c := range []struct {
		alg, control string
		serve        func(t *testing.T, ns *nstest.Netns, ip, content string)
		fetch        func(ip, out string) []string
	}{
		{"tftp", "udp,tp_dst=69", serveTFTP, func(ip, out string) []string {
			return []string{"busybox", "tftp", "-g", "-r", "file", "-l", out, ip}
		}},
		{"ftp", "tcp,tp_dst=21", serveFTP, func(ip, out string) []string { return []string{"busybox", "ftpget", ip, out, "file"} }},
	} {
		t.Run(c.alg, func(t *testing.T) {
			a, b, _, target := newE2EBridge(t, "ptcp:0:127.0.0.1")
			content := c.alg + " through a stateful firewall\n"
			c.serve(t, b.NS, b.IP, content)
			install := func(commit string) {
				ovsOfctlIn(t, "OpenFlow13", "del-flows", target)
				for _, f := range []string{
					"priority=100,arp,in_port=1,actions=output:2",
					"priority=100,arp,in_port=2,actions=output:1",
					"priority=10,ip,ct_state=-trk,actions=ct(table=1)",
					"table=1,priority=30,ip,ct_state=+trk+new+rel,actions=ct(commit),NORMAL",
					"table=1,priority=20," + c.control + ",in_port=1,ct_state=+trk+new,actions=" + commit + ",output:2",
					"table=1,priority=10,ip,in_port=1,ct_state=+trk+est,actions=output:2",
					"table=1,priority=10,ip,in_port=2,ct_state=+trk+est,actions=output:1",
					"table=1,priority=0,actions=drop",
				} {
					ovsOfctlIn(t, "OpenFlow13", "add-flow", target, f)
				}
			}
			get := func() (string, error) {
				out := filepath.Join(t.TempDir(), "got")
				_, err := a.NS.Output("timeout", append([]string{"5"}, c.fetch(b.IP, out)...)...)
				data, _ := os.ReadFile(out)
				return string(data), err
			}
			install("ct(commit)")
			if got, err := get(); err == nil && got == content {
				t.Fatalf("the download passed without the helper: the firewall lets unrelated connections through")
			}
			install("ct(commit,alg=" + c.alg + ")")
			if got, err := get(); err != nil || got != content {
				t.Errorf("with alg=%s: %v, got %q", c.alg, err, got)
			}
		})
	}
}

// serveTFTP answers read requests on ip:69 in ns with content, from a
// port of its own per transfer (RFC 1350), until the test ends.
func serveTFTP(t *testing.T, ns *nstest.Netns, ip, content string) {
	t.Helper()
	var srv net.PacketConn
	if err := ns.Do(func() (err error) { srv, err = net.ListenPacket("udp", net.JoinHostPort(ip, "69")); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := srv.ReadFrom(buf)
			if err != nil {
				return
			}
			if n < 2 || buf[1] != 1 { // RRQ
				continue
			}
			var data net.PacketConn
			if err := ns.Do(func() (err error) { data, err = net.ListenPacket("udp", net.JoinHostPort(ip, "0")); return }); err != nil {
				return
			}
			go func() {
				defer data.Close()
				pkt := append([]byte{0, 3, 0, 1}, content...) // DATA, block 1: short, so the last
				for range 3 {
					data.WriteTo(pkt, from)
					data.SetReadDeadline(time.Now().Add(time.Second))
					ack := make([]byte, 16)
					if n, _, err := data.ReadFrom(ack); err == nil && n >= 4 && ack[1] == 4 {
						return
					}
				}
			}()
		}
	}()
}

// serveFTP is the least of an FTP server on ip:21 in ns: login, TYPE,
// SIZE, PASV and RETR of one file with content, until the test ends.
func serveFTP(t *testing.T, ns *nstest.Netns, ip, content string) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", net.JoinHostPort(ip, "21")); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				r := bufio.NewReader(c)
				fmt.Fprintf(c, "220 ready\r\n")
				var data net.Listener
				defer func() {
					if data != nil {
						data.Close()
					}
				}()
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					cmd, _, _ := strings.Cut(strings.TrimSpace(line), " ")
					switch strings.ToUpper(cmd) {
					case "USER":
						fmt.Fprintf(c, "331 password\r\n")
					case "PASS":
						fmt.Fprintf(c, "230 in\r\n")
					case "SIZE":
						fmt.Fprintf(c, "213 %d\r\n", len(content))
					case "PASV":
						if err := ns.Do(func() (err error) { data, err = net.Listen("tcp", net.JoinHostPort(ip, "0")); return }); err != nil {
							return
						}
						p := data.Addr().(*net.TCPAddr).Port
						fmt.Fprintf(c, "227 Entering Passive Mode (%s,%d,%d).\r\n", strings.ReplaceAll(ip, ".", ","), p>>8, p&0xff)
					case "RETR":
						if data == nil {
							fmt.Fprintf(c, "425 no PASV\r\n")
							continue
						}
						fmt.Fprintf(c, "150 sending\r\n")
						if tcp, ok := data.(*net.TCPListener); ok {
							tcp.SetDeadline(time.Now().Add(3 * time.Second))
						}
						dc, err := data.Accept()
						if err != nil {
							fmt.Fprintf(c, "425 no data connection\r\n")
							continue
						}
						dc.Write([]byte(content))
						dc.Close()
						fmt.Fprintf(c, "226 done\r\n")
					case "QUIT":
						fmt.Fprintf(c, "221 bye\r\n")
						return
					default:
						fmt.Fprintf(c, "200 ok\r\n")
					}
				}
			}()
		}
	}()
}

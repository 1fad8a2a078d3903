package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestFTPThroughNAT: FTP in passive and active mode through SNAT (a
// client, A, behind a public address on the server's link) and DNAT (a
// server, B, behind a virtual address the client dials), through a switch
// whose flows (ovs-ofctl syntax) let in from B only what A's connections
// are related to: ct(commit,alg=ftp,nat(...)) on the control connection,
// ct(commit,nat) on the data connections. Each end sees only the
// addresses it knows: through SNAT the server sees the public address in
// the control connection, in A's PORT (rewritten by the switch) and in
// both data connections; through DNAT the client sees the virtual address
// in the 227 (rewritten) and the active data connection comes from it. A
// file arrives whole every time. The FTP ends are a few lines of Go on
// real sockets.
func TestFTPThroughNAT(t *testing.T) {
	nstest.RequireTool(t, "ovs-appctl", "ovs-ofctl")
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	run := filepath.Join(t.TempDir(), "run")
	t.Setenv("OVS_RUNDIR", run)
	d.start("--pidfile")
	br := nstest.Name("brftp")
	d.vsctl("add-br", br)
	d.vsctl("add-port", br, a.Port, "--", "type=afpacket")
	d.vsctl("add-port", br, b.Port, "--", "type=afpacket")
	const (
		pub = "198.18.0.100" // A's public address, on B's link
		vip = "198.18.0.200" // B's virtual address, on A's link
	)
	// B reaches the public address at A's port of the switch, A the
	// virtual one at B's.
	nstest.StaticNeighbour(t, b.NS, b.Dev, pub, a.MAC)
	nstest.StaticNeighbour(t, a.NS, a.Dev, vip, b.MAC)
	for _, f := range []string{
		"priority=100,arp,actions=NORMAL",
		"priority=10,ip,ct_state=-trk,actions=ct(table=1,nat)",
		"table=1,priority=20,in_port=1,tcp,nw_dst=" + b.IP + ",tp_dst=21,ct_state=+trk+new-rel,actions=ct(commit,alg=ftp,nat(src=" + pub + ")),output:2",
		"table=1,priority=20,in_port=1,tcp,nw_dst=" + vip + ",tp_dst=21,ct_state=+trk+new-rel,actions=ct(commit,alg=ftp,nat(dst=" + b.IP + ")),output:2",
		"table=1,priority=20,in_port=1,tcp,ct_state=+trk+new+rel,actions=ct(commit,nat),output:2",
		"table=1,priority=20,in_port=2,tcp,ct_state=+trk+new+rel,actions=ct(commit,nat),output:1",
		"table=1,priority=10,in_port=1,ip,ct_state=+trk+est,actions=output:2",
		"table=1,priority=10,in_port=2,ip,ct_state=+trk+est,actions=output:1",
		"table=1,priority=0,actions=drop",
	} {
		mustOVSTool(t, run, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", br, f)
	}

	file := make([]byte, 200_000)
	for i := range file {
		file[i] = byte(rand.Uint32())
	}
	srv := startFTPServer(t, b, file)
	for _, tc := range []struct {
		name    string
		server  string // where A dials
		passive bool
		// What the server sees of A (control and data), and where A
		// sees the data come from or go to.
		serverSees, clientSees string
	}{
		{"SNAT passive", b.IP, true, pub, b.IP},
		{"SNAT active", b.IP, false, pub, b.IP},
		{"DNAT passive", vip, true, a.IP, vip},
		{"DNAT active", vip, false, a.IP, vip},
	} {
		got, seen, err := ftpFetch(a, tc.server+":21", tc.passive)
		if err != nil {
			t.Fatalf("%s: %v\nconntrack:\n%s", tc.name, err, mustOVSTool(t, run, "ovs-appctl", "dpctl/dump-conntrack"))
		}
		if !bytes.Equal(got, file) {
			t.Fatalf("%s: got %d bytes, not the file's %d", tc.name, len(got), len(file))
		}
		s := <-srv
		if s.err != nil {
			t.Fatalf("%s: server: %v", tc.name, s.err)
		}
		if s.ctl != tc.serverSees || s.data != tc.serverSees {
			t.Errorf("%s: the server saw the control connection from %s, the data connection with %s; want %s for both",
				tc.name, s.ctl, s.data, tc.serverSees)
		}
		if seen != tc.clientSees {
			t.Errorf("%s: the client saw the data connection with %s, want %s", tc.name, seen, tc.clientSees)
		}
	}
	ct := mustOVSTool(t, run, "ovs-appctl", "dpctl/dump-conntrack")
	if !strings.Contains(ct, "helper=ftp") {
		t.Errorf("no FTP control connection in the table:\n%s", ct)
	}
}

// ftpSession is what the server saw of one session: the control
// connection's peer, and the data connection's (passive: who connected;
// active: the address PORT named).
type ftpSession struct {
	ctl, data string
	err       error
}

// startFTPServer serves file (RETR) over FTP on B's port 21, one session
// after another, reporting each on the channel.
func startFTPServer(t *testing.T, b *nstest.Host, file []byte) <-chan ftpSession {
	t.Helper()
	var ln net.Listener
	if err := b.NS.Do(func() (err error) { ln, err = net.Listen("tcp", b.IP+":21"); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	out := make(chan ftpSession, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s := ftpServe(b, c, file)
			c.Close()
			out <- s
		}
	}()
	return out
}

func ftpServe(b *nstest.Host, c net.Conn, file []byte) (s ftpSession) {
	c.SetDeadline(time.Now().Add(60 * time.Second))
	s.ctl, _, _ = net.SplitHostPort(c.RemoteAddr().String())
	r := bufio.NewReader(c)
	fmt.Fprintf(c, "220 hello\r\n")
	var pasv net.Listener
	var port string // the address:port PORT named
	defer func() {
		if pasv != nil {
			pasv.Close()
		}
	}()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			s.err = err
			return s
		}
		cmd := strings.TrimRight(line, "\r\n")
		switch {
		case cmd == "PASV":
			if err := b.NS.Do(func() (err error) { pasv, err = net.Listen("tcp", b.IP+":0"); return }); err != nil {
				s.err = err
				return s
			}
			p := pasv.Addr().(*net.TCPAddr).Port
			fmt.Fprintf(c, "227 Entering Passive Mode (%s,%d,%d).\r\n", strings.ReplaceAll(b.IP, ".", ","), p>>8, p&0xff)
		case strings.HasPrefix(cmd, "PORT "):
			f := strings.Split(cmd[5:], ",")
			if len(f) != 6 {
				s.err = fmt.Errorf("bad %q", cmd)
				return s
			}
			hi, _ := strconv.Atoi(f[4])
			lo, _ := strconv.Atoi(f[5])
			s.data = strings.Join(f[:4], ".")
			port = net.JoinHostPort(s.data, strconv.Itoa(hi<<8|lo))
			fmt.Fprintf(c, "200 PORT ok\r\n")
		case cmd == "RETR file":
			var dc net.Conn
			if pasv != nil {
				fmt.Fprintf(c, "150 here it comes\r\n")
				pasv.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
				dc, err = pasv.Accept()
				if err == nil {
					s.data, _, _ = net.SplitHostPort(dc.RemoteAddr().String())
				}
			} else {
				fmt.Fprintf(c, "150 connecting\r\n")
				err = b.NS.Do(func() (err error) { dc, err = net.DialTimeout("tcp", port, 30*time.Second); return })
			}
			if err != nil {
				s.err = fmt.Errorf("data connection: %v", err)
				return s
			}
			_, err = dc.Write(file)
			dc.Close()
			if err != nil {
				s.err = err
				return s
			}
			fmt.Fprintf(c, "226 done\r\n")
		case cmd == "QUIT":
			fmt.Fprintf(c, "221 bye\r\n")
			return s
		default:
			fmt.Fprintf(c, "502 %q?\r\n", cmd)
		}
	}
}

// ftpFetch fetches "file" from A over FTP, passive or active, and says
// with which address the data connection was (passive: the one the 227
// named; active: where it came from).
func ftpFetch(a *nstest.Host, server string, passive bool) ([]byte, string, error) {
	var seen string
	var c net.Conn
	if err := a.NS.Do(func() (err error) { c, err = net.DialTimeout("tcp", server, 30*time.Second); return }); err != nil {
		return nil, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	expect := func(code string) (string, error) {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("waiting for %s: %v", code, err)
		}
		if !strings.HasPrefix(line, code+" ") {
			return "", fmt.Errorf("got %q, want %s", line, code)
		}
		return line, nil
	}
	if _, err := expect("220"); err != nil {
		return nil, "", err
	}
	var data net.Conn
	if passive {
		fmt.Fprintf(c, "PASV\r\n")
		line, err := expect("227")
		if err != nil {
			return nil, "", err
		}
		open, close := strings.IndexByte(line, '('), strings.IndexByte(line, ')')
		if open < 0 || close < open {
			return nil, "", fmt.Errorf("227 without an address: %q", line)
		}
		f := strings.Split(line[open+1:close], ",")
		if len(f) != 6 {
			return nil, "", fmt.Errorf("227 with a bad address: %q", line)
		}
		hi, _ := strconv.Atoi(f[4])
		lo, _ := strconv.Atoi(f[5])
		seen = strings.Join(f[:4], ".")
		addr := net.JoinHostPort(seen, strconv.Itoa(hi<<8|lo))
		if err := a.NS.Do(func() (err error) { data, err = net.DialTimeout("tcp", addr, 30*time.Second); return }); err != nil {
			return nil, "", fmt.Errorf("passive data connection to %s: %v", addr, err)
		}
		fmt.Fprintf(c, "RETR file\r\n")
	} else {
		var ln net.Listener
		if err := a.NS.Do(func() (err error) { ln, err = net.Listen("tcp", a.IP+":0"); return }); err != nil {
			return nil, "", err
		}
		defer ln.Close()
		p := ln.Addr().(*net.TCPAddr).Port
		fmt.Fprintf(c, "PORT %s,%d,%d\r\n", strings.ReplaceAll(a.IP, ".", ","), p>>8, p&0xff)
		if _, err := expect("200"); err != nil {
			return nil, "", err
		}
		fmt.Fprintf(c, "RETR file\r\n")
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
		var err error
		if data, err = ln.Accept(); err != nil {
			return nil, "", fmt.Errorf("active data connection: %v", err)
		}
		seen, _, _ = net.SplitHostPort(data.RemoteAddr().String())
	}
	defer data.Close()
	if _, err := expect("150"); err != nil {
		return nil, "", err
	}
	data.SetDeadline(time.Now().Add(60 * time.Second))
	got, err := io.ReadAll(data)
	if err != nil {
		return nil, "", fmt.Errorf("reading the data: %v", err)
	}
	if _, err := expect("226"); err != nil {
		return nil, "", err
	}
	fmt.Fprintf(c, "QUIT\r\n")
	if _, err := expect("221"); err != nil {
		return nil, "", err
	}
	return got, seen, nil
}

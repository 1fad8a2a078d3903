package e2e

import (
	"bufio"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestConntrackAcrossKill9: connections live in memory only, as in Open
// vSwitch. After a kill -9 and restart the table is empty, the firewall's
// flows are back from the flow journal, and an established TCP connection
// from the inside goes on: its next segment (an ACK, not a SYN) is
// committed again as new, and the replies pass as established.
func TestConntrackAcrossKill9(t *testing.T) {
	nstest.RequireTool(t, "ovs-appctl", "ovs-ofctl")
	d := newDaemon(t)
	a, b := nstest.TwoHosts(t)
	run := filepath.Join(t.TempDir(), "run")
	t.Setenv("OVS_RUNDIR", run)
	d.start("--pidfile")
	br := nstest.Name("brct")
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

	// A line echo server in B, a client in A.
	var ln net.Listener
	if err := b.NS.Do(func() (err error) { ln, err = net.Listen("tcp", b.IP+":0"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
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
	defer conn.Close()
	r := bufio.NewReader(conn)
	echo := func(msg string) {
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

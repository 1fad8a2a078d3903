package ofproto

import (
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestOvsOfctlPacketIn2: a controller that asks for NXT_PACKET_IN2 (the
// real "ovs-ofctl -P nxt_packet_in2 monitor", as OVN's pinctrl does) gets
// controller2's userdata, the table and cookie of the sending flow and the
// registers and metadata the pipeline had set; one in the standard format
// gets the registers in its PACKET_IN's match.
func TestOvsOfctlPacketIn2(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	ovsOfctlIn(t, "OpenFlow15", "add-flow", target,
		"table=0,in_port=1,actions=set_field:0x5->reg0,set_field:0xabc->reg7,write_metadata:0x10,goto_table:3")
	ovsOfctlIn(t, "OpenFlow15", "add-flow", target,
		"table=3,cookie=0x99,actions=controller(userdata=01.02.03.04.05,max_len=128)")
	for _, c := range []struct {
		format string
		want   []string
	}{
		{"nxt_packet_in2", []string{"NXT_PACKET_IN2", "cookie=0x99", "table_id=3", "reg0=0x5", "reg7=0xabc", "metadata=0x10", "in_port=1", "userdata=01.02.03.04.05"}},
		{"standard", []string{"OFPT_PACKET_IN", "cookie=0x99", "table_id=3", "reg0=0x5", "reg7=0xabc", "metadata=0x10", "in_port=1"}},
	} {
		t.Run(c.format, func(t *testing.T) {
			var out nstest.SyncBuffer
			cmd := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "-P", c.format, "monitor", target, "65535")
			cmd.Env = monitorEnv(t)
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			// Wait for the monitor's connection, then send one packet at
			// a time until a packet-in shows (the monitor may still be
			// setting its format when the first arrives).
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), "PACKET_IN") {
				if time.Now().After(deadline) {
					t.Fatalf("no packet-in in the monitor's output:\n%s", out.String())
				}
				mb.forward(mb.p1, mb.p2, frame())
				time.Sleep(50 * time.Millisecond)
			}
			got := out.String()
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("monitor output lacks %q:\n%s", w, got)
				}
			}
			if c.format == "standard" && strings.Contains(got, "userdata") {
				t.Errorf("a standard PACKET_IN with userdata:\n%s", got)
			}
		})
	}
}

// TestOvsOfctlPacketOutPipeline: an OpenFlow 1.5 packet-out's match sets
// the registers and metadata its packet starts the pipeline with, as
// pinctrl's packet-outs do: the real "ovs-ofctl -O OpenFlow15 packet-out"
// with reg1 and metadata reaches the flow that matches them, and without
// them does not.
func TestOvsOfctlPacketOutPipeline(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	ovsOfctlIn(t, "OpenFlow15", "add-flow", target, "table=3,reg1=0x2a,metadata=0x5,actions=output:2")
	pkt := hex.EncodeToString(frame())
	for _, c := range []struct {
		match string
		want  int
	}{{"in_port=1,reg1=0x2a,metadata=0x5", 1}, {"in_port=1,reg1=0x2a", 0}, {"in_port=1", 0}} {
		ovsOfctlIn(t, "OpenFlow15", "packet-out", target, c.match+" packet="+pkt+" actions=resubmit(,3)")
		mb.dp.PMDs()[0].PollOnce() // flush the tx batch
		if n := mb.p2.Drain(0, func([]byte) {}); n != c.want {
			t.Errorf("packet-out %s: %d frames on port 2, want %d", c.match, n, c.want)
		}
	}
}

// TestOvsOfctlResume: controller(pause) stops the pipeline and sends a
// packet-in2 with a continuation; the real "ovs-ofctl monitor ... resume"
// hands it back as NXT_RESUME, and the packet goes on from the action
// after the pause with the registers it had (here at the end of a
// resubmit, as OVN's DHCP and DNS actions pause): it reaches port 2 once
// per packet sent, and only once resumed.
func TestOvsOfctlResume(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	for _, f := range []string{
		"table=0,in_port=1,actions=set_field:0x5->reg0,resubmit(,1)",
		"table=1,actions=controller(userdata=0a.0b,pause),set_field:0x7->reg1,resubmit(,3)",
		"table=3,reg0=0x5,reg1=0x7,actions=output:2",
	} {
		ovsOfctlIn(t, "OpenFlow15", "add-flow", target, f)
	}
	// Without a controller that resumes, the packet stays paused.
	if got := mb.forward(mb.p1, mb.p2, frame()); len(got) != 0 {
		t.Fatalf("%d frames left a paused pipeline", len(got))
	}
	var out nstest.SyncBuffer
	cmd := exec.Command("ovs-ofctl", "-O", "OpenFlow15", "monitor", target, "65535", "resume")
	cmd.Env = monitorEnv(t)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	sent, got := 0, 0
	for got == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no resumed packet on port 2 after %d sent; monitor:\n%s", sent, out.String())
		}
		mb.p1.Inject(0, frame())
		sent++
		for range 20 {
			mb.dp.PMDs()[0].PollOnce()
			time.Sleep(5 * time.Millisecond)
			got += mb.p2.Drain(0, func([]byte) {})
		}
	}
	if got > sent {
		t.Fatalf("%d frames on port 2 for %d sent", got, sent)
	}
	if s := out.String(); !strings.Contains(s, "NXT_PACKET_IN2") || !strings.Contains(s, "continuation") {
		t.Errorf("monitor saw no paused packet-in2:\n%s", s)
	}
}

// monitorEnv gives ovs-ofctl monitor a run directory of its own for its
// control socket: the system's (/var/run/openvswitch) exists only where
// Open vSwitch's service has run.
func monitorEnv(t *testing.T) []string {
	return append(os.Environ(), "OVS_RUNDIR="+t.TempDir())
}

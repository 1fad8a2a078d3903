package ofproto

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOvsOfctlNiciraPipeline drives a pipeline of registers, load, move,
// masked set-field, resubmit and note through the real ovs-ofctl in
// OpenFlow 1.3 and 1.5 (the latter as one bundle, as ovn-controller sends
// its flows): traffic follows it, dump-flows prints it back as ovs-ofctl
// prints Open vSwitch's own flows in that version, and diff-flows finds
// the switch's table equal to the file it came from.
func TestOvsOfctlNiciraPipeline(t *testing.T) {
	// The loads are written as each version prints them (1.3 sends them
	// as reg_load, 1.5 as set-field; Open vSwitch prints each as it came),
	// so that diff-flows compares like with like.
	flows := func(load1, load2 string) []string {
		return []string{
			"table=0,priority=10,udp,in_port=1,tp_dst=2000 actions=" + load1 + ",move:NXM_OF_UDP_DST[]->NXM_NX_REG2[0..15]," + load2 + ",resubmit(,3),note:ab.cd.00.00.00.00",
			"table=3,priority=10,reg1=0x2a,reg2=0x7d0,reg7=0x5/0xff actions=move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[],output:2",
			"table=3,priority=0 actions=drop",
		}
	}
	for _, c := range []struct {
		version string
		bundle  bool
		flows   []string
		want    []string
	}{
		{"OpenFlow13", false, flows("load:0x2a->NXM_NX_REG1[]", "load:0x5->OXM_OF_PKT_REG3[0..7]"),
			[]string{"load:0x2a->NXM_NX_REG1[]", "move:NXM_OF_UDP_DST[]->NXM_NX_REG2[0..15]",
				"load:0x5->OXM_OF_PKT_REG3[0..7]", "resubmit(,3),note:ab.cd.00.00.00.00", "reg1=0x2a,reg2=0x7d0,reg7=0x5/0xff"}},
		{"OpenFlow15", true, flows("set_field:0x2a->reg1", "set_field:0x5/0xff->xreg3"),
			[]string{"set_field:0x2a->reg1", "move:NXM_OF_UDP_DST[]->NXM_NX_REG2[0..15]",
				"set_field:0x5/0xff->xreg3", "resubmit(,3),note:ab.cd.00.00.00.00", "reg1=0x2a,reg2=0x7d0,reg7=0x5/0xff"}},
	} {
		t.Run(c.version, func(t *testing.T) {
			mb := newMeterBridge(t)
			target := "unix:" + mb.sock
			file := filepath.Join(t.TempDir(), "flows.txt")
			if err := os.WriteFile(file, []byte(strings.Join(c.flows, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"add-flows", target, file}
			if c.bundle {
				args = append([]string{"--bundle"}, args...)
			}
			ovsOfctlIn(t, c.version, args...)
			n := 0
			for left := 5; left > 0; left-- {
				got := mb.forward(mb.p1, mb.p2, frame())
				for _, f := range got {
					if !bytes.Equal(f[0:6], mac1) {
						t.Fatalf("eth_dst %x after move from eth_src, want %x", f[0:6], mac1)
					}
				}
				n += len(got)
			}
			if n != 5 {
				t.Fatalf("%d of 5 frames followed the registers to port 2", n)
			}
			dump := ovsOfctlIn(t, c.version, "dump-flows", target)
			for _, w := range c.want {
				if !strings.Contains(dump, w) {
					t.Errorf("dump-flows lacks %q:\n%s", w, dump)
				}
			}
			if out, err := ovsOfctlMayFail(t, "-O", c.version, "diff-flows", target, file); err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("diff-flows against the file: %v\n%s", err, out)
			}
		})
	}
}

// TestOvsOfctlOF10Pipeline: plain ovs-ofctl, which speaks OpenFlow 1.0 and
// turns to Open vSwitch's NXM flow format (NXT_SET_FLOW_FORMAT,
// NXT_FLOW_MOD, NXST_FLOW) for what a 1.0 match cannot hold, adds a
// pipeline of registers, move, resubmit, learn and conjunction; diff-flows
// finds the switch's tables equal to the file, traffic follows the
// pipeline, and the learned flow shows in dump-flows.
func TestOvsOfctlOF10Pipeline(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	flows := []string{
		"table=0,priority=10,udp,in_port=1,tp_dst=2000 actions=load:0x2a->NXM_NX_REG1[],move:NXM_OF_UDP_DST[]->NXM_NX_REG2[0..15],resubmit(,3)",
		"table=3,priority=10,reg1=0x2a,reg2=0x7d0 actions=learn(table=5,hard_timeout=60,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],output:NXM_OF_IN_PORT[]),resubmit(,4)",
		"table=4,priority=10,ip,nw_src=198.18.0.1 actions=conjunction(9,1/2)",
		"table=4,priority=10,udp,tp_src=1000 actions=conjunction(9,2/2)",
		"table=4,priority=10,conj_id=9 actions=output:2",
	}
	file := filepath.Join(t.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ovsOfctlIn(t, "", "add-flows", target, file)
	if out, err := ovsOfctlMayFail(t, "diff-flows", target, file); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("diff-flows against the file: %v\n%s", err, out)
	}
	for i := range 3 {
		if got := mb.forward(mb.p1, mb.p2, frame()); len(got) != 1 {
			t.Fatalf("frame %d: %d frames on port 2, want 1 (registers, resubmit, conjunction)", i, len(got))
		}
	}
	dump := ovsOfctlIn(t, "", "dump-flows", target)
	for _, w := range []string{"NXST_FLOW", "reg1=0x2a,reg2=0x7d0", "conj_id=9", "learn(table=5",
		"table=5, n_packets=0, n_bytes=0, hard_timeout=60, dl_dst=02:00:00:00:00:01 actions=output:1"} {
		if !strings.Contains(dump, w) {
			t.Errorf("dump-flows lacks %q:\n%s", w, dump)
		}
	}
	// Deletes by a register match, in the NXM format too.
	ovsOfctlIn(t, "", "del-flows", target, "table=3,reg1=0x2a")
	if dump := ovsOfctlIn(t, "", "dump-flows", target, "table=3"); strings.Contains(dump, "reg1") {
		t.Errorf("del-flows table=3,reg1=0x2a left:\n%s", dump)
	}
}

// TestOvsOfctlOF10Tables: ovs-ofctl's default (1.0) add-flow table=N and
// del-flows table=N send plain OFPT_FLOW_MODs with the table in the
// command's high byte after NXT_FLOW_MOD_TABLE_ID: the flow goes to table
// N, a line without table= in the same batch to table 0, and the delete
// touches table N alone (it used to take every table's flows).
func TestOvsOfctlOF10Tables(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	ovsOfctlIn(t, "", "add-flow", target, "table=0,priority=1,actions=drop")
	ovsOfctlIn(t, "", "add-flow", target, "table=2,priority=5,ip,nw_dst=198.18.0.9,actions=output:2")
	file := filepath.Join(t.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte("table=4,priority=1,actions=drop\npriority=3,arp,actions=output:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ovsOfctlIn(t, "", "add-flows", target, file)
	tables := func() map[string]int {
		n := map[string]int{}
		for _, l := range flowLines(ovsOfctl(t, "dump-flows", target)) {
			for _, f := range strings.Split(l, ", ") {
				if strings.HasPrefix(f, "table=") {
					n[f]++
				}
			}
		}
		return n
	}
	if got := tables(); got["table=0"] != 2 || got["table=2"] != 1 || got["table=4"] != 1 || len(got) != 3 {
		t.Fatalf("flows by table after the 1.0 adds: %v, want table 0: 2, table 2: 1, table 4: 1", got)
	}
	ovsOfctlIn(t, "", "del-flows", target, "table=2")
	if got := tables(); got["table=0"] != 2 || got["table=2"] != 0 || got["table=4"] != 1 {
		t.Fatalf("flows by table after del-flows table=2: %v", got)
	}
}

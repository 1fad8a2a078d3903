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

package ofproto

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// withTOS returns f (an IPv4 frame) with TOS byte tos and the header
// checksum fixed.
func withTOS(f []byte, tos byte) []byte {
	f = append([]byte(nil), f...)
	ip := f[14:34]
	ip[1] = tos
	ip[10], ip[11] = 0, 0
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	return f
}

// TestOvsOfctlRecircIDAndNwTOS: flows the real ovs-ofctl sends in
// OpenFlow 1.0 (NXM), 1.3 and 1.5 that match recirc_id=0 and move a
// register into NXM_OF_IP_TOS (Open vSwitch's nw_tos, refused before as an
// unknown field) are accepted, forward traffic (the DSCP bits take the
// register's value, the packet's ECN bits stay), print back as ovs-ofctl
// prints Open vSwitch's own flows, and diff-flows finds the table equal
// to the file. A flow on a recirc_id no first pass has never matches.
func TestOvsOfctlRecircIDAndNwTOS(t *testing.T) {
	for _, version := range []string{"OpenFlow10", "OpenFlow13", "OpenFlow15"} {
		t.Run(version, func(t *testing.T) {
			mb := newMeterBridge(t)
			target := "unix:" + mb.sock
			// The load as each version prints it (1.5 sends set-field),
			// so that diff-flows compares like with like.
			load := "load:0x2e->NXM_NX_REG0[]"
			if version == "OpenFlow15" {
				load = "set_field:0x2e->reg0"
			}
			flows := []string{
				"priority=20,recirc_id=0x7,udp,in_port=1 actions=output:1",
				"priority=10,recirc_id=0,udp,in_port=1 actions=" + load + ",move:NXM_NX_REG0[0..5]->NXM_OF_IP_TOS[2..7],output:2",
			}
			file := filepath.Join(t.TempDir(), "flows.txt")
			if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ovsOfctlIn(t, version, "add-flows", target, file)
			for i := range 3 {
				got := mb.forward(mb.p1, mb.p2, withTOS(frame(), 0x01))
				if len(got) != 1 {
					t.Fatalf("frame %d: %d frames on port 2, want 1 (recirc_id=0 matches a first pass)", i, len(got))
				}
				if tos := got[0][15]; tos != 0x2e<<2|0x01 {
					t.Fatalf("frame %d: TOS %#x, want %#x (DSCP from reg0, ECN kept)", i, tos, 0x2e<<2|0x01)
				}
			}
			dump := ovsOfctlIn(t, version, "dump-flows", target)
			for _, w := range []string{"priority=10,recirc_id=0,eth,udp,in_port=1", "priority=20,recirc_id=0x7,eth,udp,in_port=1",
				"move:NXM_NX_REG0[0..5]->NXM_OF_IP_TOS[2..7]"} {
				if !strings.Contains(dump, w) {
					t.Errorf("dump-flows lacks %q:\n%s", w, dump)
				}
			}
			if out, err := ovsOfctlMayFail(t, "-O", version, "diff-flows", target, file); err != nil || strings.TrimSpace(out) != "" {
				t.Errorf("diff-flows against the file: %v\n%s", err, out)
			}
		})
	}
}

// TestOvsOfctlDPHash: a select group with selection_method=dp_hash (1.5)
// or no method (1.3, which Open vSwitch also runs by dp_hash) leaves the
// hash in dp_hash: flows before it match dp_hash=0, flows after it split
// on its low bit (dp_hash=0x1/0x1) and copy it (move:NXM_NX_DP_HASH) into
// the DSCP bits. Every frame of one flow gets the same DSCP, through the
// datapath's caches too; the odd ones have it odd, the others 0; flows
// of both kinds occur. ovs-ofctl reads the dp_hash matches back as it
// wrote them.
func TestOvsOfctlDPHash(t *testing.T) {
	for _, c := range []struct{ version, group string }{
		{"OpenFlow13", "group_id=1,type=select,bucket=resubmit(,1)"},
		{"OpenFlow15", "group_id=1,type=select,selection_method=dp_hash,bucket=resubmit(,1)"},
	} {
		t.Run(c.version, func(t *testing.T) {
			mb := newMeterBridge(t)
			target := "unix:" + mb.sock
			ovsOfctlIn(t, c.version, "add-group", target, c.group)
			for _, f := range []string{
				"table=0,priority=10,dp_hash=0,udp,in_port=1 actions=group:1",
				"table=1,priority=20,dp_hash=0 actions=drop",
				"table=1,priority=15,dp_hash=0x1/0x1,ip actions=move:NXM_NX_DP_HASH[0..5]->NXM_OF_IP_TOS[2..7],output:2",
				"table=1,priority=10,ip actions=load:0->NXM_OF_IP_TOS[2..7],output:2",
			} {
				ovsOfctlIn(t, c.version, "add-flow", target, f)
			}
			kinds := map[bool]int{}
			for sport := uint16(1000); sport < 1016; sport++ {
				f := nstest.UDPFrame(mac2, mac1, net.IPv4(198, 18, 0, 1), net.IPv4(198, 18, 0, 2), sport, 2000)
				var dscp byte
				for i := range 3 {
					got := mb.forward(mb.p1, mb.p2, f)
					if len(got) != 1 {
						t.Fatalf("source port %d, frame %d: %d frames on port 2, want 1", sport, i, len(got))
					}
					d := got[0][15] >> 2
					if i > 0 && d != dscp {
						t.Fatalf("source port %d: DSCP %#x, then %#x: dp_hash changed within one flow", sport, dscp, d)
					}
					dscp = d
				}
				if dscp != 0 && dscp&1 == 0 {
					t.Fatalf("source port %d: DSCP %#x: an even dp_hash matched dp_hash=0x1/0x1", sport, dscp)
				}
				kinds[dscp != 0]++
			}
			if kinds[true] == 0 || kinds[false] == 0 {
				t.Fatalf("16 flows: %d odd dp_hash, %d even: the match does not see the hash", kinds[true], kinds[false])
			}
			dump := ovsOfctlIn(t, c.version, "dump-flows", target)
			for _, w := range []string{"dp_hash=0,udp,in_port=1", "dp_hash=0x1/0x1", "move:NXM_NX_DP_HASH[0..5]->NXM_OF_IP_TOS[2..7]",
				fmt.Sprintf("n_packets=%d", 16*3)} {
				if !strings.Contains(dump, w) {
					t.Errorf("dump-flows lacks %q:\n%s", w, dump)
				}
			}
		})
	}
}

package ofproto

import (
	"encoding/hex"
	"strings"
	"testing"
)

// ovsOfctlIn runs ovs-ofctl speaking the given version ("OpenFlow15"; ""
// is its default, OpenFlow 1.0) and fails the test on an error.
func ovsOfctlIn(t *testing.T, version string, args ...string) string {
	t.Helper()
	if version != "" {
		args = append([]string{"-O", version}, args...)
	}
	out, err := ovsOfctlMayFail(t, args...)
	if err != nil || strings.Contains(out, "decode error") || strings.Contains(out, "OFPT_ERROR") {
		t.Fatalf("ovs-ofctl %v: %v\n%s", args, err, out)
	}
	return out
}

// TestOvsOfctlInEveryVersion drives one bridge with the real ovs-ofctl in
// each OpenFlow version it speaks: the same commands, the same tables and
// counters, in each version's own encoding (groups with bucket properties
// and meters as actions in 1.5, ports with properties in 1.4+).
func TestOvsOfctlInEveryVersion(t *testing.T) {
	for _, v := range []string{"OpenFlow13", "OpenFlow14", "OpenFlow15"} {
		t.Run(v, func(t *testing.T) {
			mb := newMeterBridge(t)
			target := "unix:" + mb.sock
			of := func(args ...string) string { return ovsOfctlIn(t, v, args...) }
			tag := "(OF1." + v[len(v)-1:] + ")"
			if out := of("show", target); !strings.Contains(out, "OFPT_FEATURES_REPLY "+tag) || !strings.Contains(out, " 1(r1)") {
				t.Fatalf("show:\n%s", out)
			}
			of("add-meter", target, "meter=1,pktps,burst,stats,band=type=drop,rate=10,burst_size=5")
			of("add-group", target, "group_id=1,type=select,bucket=weight:2,output:2,bucket=weight:3,output:2")
			of("add-group", target, "group_id=2,type=ff,bucket=watch_port:2,output:2")
			of("add-flow", target, "table=0,priority=7,in_port=1,udp,actions=meter:1,group:1")
			if n := mb.burst(t, frame(), 12); n != 5 {
				t.Fatalf("%d of 12 passed the meter, want 5", n)
			}
			flows := flowLines(of("dump-flows", target))
			if len(flows) != 1 || !strings.Contains(flows[0], "n_packets=12,") ||
				!strings.Contains(flows[0], "priority=7,udp,in_port=1 actions=meter:1,group:1") {
				t.Fatalf("dump-flows:\n%s", strings.Join(flows, "\n"))
			}
			groups := of("dump-groups", target)
			for _, w := range []string{"weight:2,actions=output:2", "weight:3,actions=output:2", "watch_port:2,actions=output:2"} {
				if !strings.Contains(groups, w) {
					t.Fatalf("dump-groups lacks %q:\n%s", w, groups)
				}
			}
			if agg := of("dump-aggregate", target); !strings.Contains(agg, "packet_count=12") || !strings.Contains(agg, "flow_count=1") {
				t.Fatalf("dump-aggregate:\n%s", agg)
			}
			if ports := of("dump-ports", target, "1"); !strings.Contains(ports, "rx pkts=12") {
				t.Fatalf("dump-ports:\n%s", ports)
			}
			// A packet-out: 1.5 carries its input port in a match.
			of("packet-out", target, "in_port=1 packet="+hex.EncodeToString(frame())+" actions=output:2")
			mb.dp.PMDs()[0].PollOnce() // flushes what the packet-out queued
			if n := mb.p2.Drain(0, func([]byte) {}); n != 1 {
				t.Fatalf("packet-out: %d frames on port 2, want 1", n)
			}
			of("mod-port", target, "r2", "down")
			if desc := of("dump-ports-desc", target); !strings.Contains(desc, "PORT_DOWN") {
				t.Fatalf("dump-ports-desc after mod-port down:\n%s", desc)
			}
			of("del-flows", target)
			of("del-groups", target)
			if flows := flowLines(of("dump-flows", target)); len(flows) != 0 {
				t.Fatalf("flows after del-flows:\n%s", strings.Join(flows, "\n"))
			}
		})
	}
}

// TestOvsOfctlDefaultOpenFlow10 is what a user types without -O: plain
// ovs-ofctl speaks OpenFlow 1.0 (one table, 1.0 actions, ports in the
// features reply).
func TestOvsOfctlDefaultOpenFlow10(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	of := func(args ...string) string { return ovsOfctlIn(t, "", args...) }
	if out := of("show", target); !strings.Contains(out, "OFPT_FEATURES_REPLY (xid=") || !strings.Contains(out, " 1(r1)") ||
		!strings.Contains(out, " 2(r2)") {
		t.Fatalf("show:\n%s", out)
	}
	of("add-flow", target, "priority=7,in_port=1,udp,nw_dst=198.18.0.0/24,tp_dst=2000,actions=mod_nw_tos:8,mod_tp_dst:53,output:2")
	if n := mb.burst(t, frame(), 3); n != 3 {
		t.Fatalf("%d of 3 forwarded", n)
	}
	flows := flowLines(of("dump-flows", target))
	if len(flows) != 1 || !strings.Contains(flows[0], "n_packets=3,") ||
		!strings.Contains(flows[0], "priority=7,udp,in_port=1,nw_dst=198.18.0.0/24,tp_dst=2000 actions=mod_nw_tos:8,mod_tp_dst:53,output:2") {
		t.Fatalf("dump-flows:\n%s", strings.Join(flows, "\n"))
	}
	// The same flow seen in 1.3: the 1.0 actions became set-fields.
	if f13 := ovsOfctlIn(t, "OpenFlow13", "dump-flows", target); !strings.Contains(f13, "actions=set_field:2->ip_dscp,set_field:53->udp_dst,output:2") &&
		!strings.Contains(f13, "actions=mod_nw_tos:8,mod_tp_dst:53,output:2") {
		t.Fatalf("dump-flows in 1.3:\n%s", f13)
	}
	if ports := of("dump-ports", target, "1"); !strings.Contains(ports, "rx pkts=3") {
		t.Fatalf("dump-ports:\n%s", ports)
	}
	if agg := of("dump-aggregate", target); !strings.Contains(agg, "packet_count=3") || !strings.Contains(agg, "flow_count=1") {
		t.Fatalf("dump-aggregate:\n%s", agg)
	}
	of("packet-out", target, "in_port=1 packet="+hex.EncodeToString(frame())+" actions=output:2")
	mb.dp.PMDs()[0].PollOnce()
	if n := mb.p2.Drain(0, func([]byte) {}); n != 1 {
		t.Fatalf("packet-out: %d frames on port 2, want 1", n)
	}
	of("mod-port", target, "r2", "down")
	if desc := of("dump-ports-desc", target); !strings.Contains(desc, "PORT_DOWN") {
		t.Fatalf("dump-ports-desc after mod-port down:\n%s", desc)
	}
	of("mod-flows", target, "priority=7,in_port=1,udp,nw_dst=198.18.0.0/24,tp_dst=2000,actions=drop")
	if flows := flowLines(of("dump-flows", target)); len(flows) != 1 || !strings.HasSuffix(flows[0], "actions=drop") {
		t.Fatalf("dump-flows after mod-flows:\n%s", strings.Join(flows, "\n"))
	}
	of("del-flows", target)
	if flows := flowLines(of("dump-flows", target)); len(flows) != 0 {
		t.Fatalf("flows after del-flows:\n%s", strings.Join(flows, "\n"))
	}
}

package ofproto

import (
	"strings"
	"testing"
)

// TestOvsOfctlTLVMap: the real ovs-ofctl maps OVN's Geneve option to
// tun_metadata0 (add-tlv-map), reads the table back (dump-tlv-map) and
// gets Open vSwitch's errors for a duplicate, a taken index and a second
// option that does not fit; flows set, move and match the field, and
// traffic follows them; dump-flows prints them back.
func TestOvsOfctlTLVMap(t *testing.T) {
	mb := newMeterBridge(t)
	target := "unix:" + mb.sock
	ovsOfctlIn(t, "OpenFlow15", "add-tlv-map", target, "{class=0x102,type=0x80,len=4}->tun_metadata0")
	dump := ovsOfctlIn(t, "OpenFlow15", "dump-tlv-map", target)
	for _, w := range []string{"max option space=4", "max fields=64", "0x102  0x80       4  tun_metadata0"} {
		if !strings.Contains(dump, w) {
			t.Errorf("dump-tlv-map lacks %q:\n%s", w, dump)
		}
	}
	for _, c := range []struct{ mapping, want string }{
		{"{class=0x102,type=0x80,len=4}->tun_metadata3", "NXTTMFC_DUP_ENTRY"},
		{"{class=0x103,type=0x1,len=4}->tun_metadata0", "NXTTMFC_ALREADY_MAPPED"},
		{"{class=0x103,type=0x1,len=4}->tun_metadata1", "NXTTMFC_TABLE_FULL"},
		{"{class=0x103,type=0x1,len=3}->tun_metadata1", "length"},
	} {
		out, err := ovsOfctlMayFail(t, "-O", "OpenFlow15", "add-tlv-map", target, c.mapping)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("add-tlv-map %s: %v, want %s:\n%s", c.mapping, err, c.want, out)
		}
	}
	flows := []string{
		"table=0,priority=10,in_port=1 actions=load:0x2->NXM_NX_TUN_METADATA0[0..15],load:0x1->NXM_NX_TUN_METADATA0[16..30],resubmit(,1)",
		"table=1,priority=10,tun_metadata0=0x10002/0x7fffffff actions=move:NXM_NX_TUN_METADATA0[0..15]->NXM_NX_REG15[0..15],resubmit(,2)",
		"table=1,priority=1 actions=drop",
		"table=2,priority=10,reg15=0x2 actions=set_field:0x5->tun_metadata0,output:2",
	}
	for _, f := range flows {
		ovsOfctlIn(t, "OpenFlow15", "add-flow", target, f)
	}
	n := 0
	for range 3 {
		n += len(mb.forward(mb.p1, mb.p2, frame()))
	}
	if n != 3 {
		t.Fatalf("%d of 3 frames followed tun_metadata0 and reg15 to port 2", n)
	}
	dump = ovsOfctlIn(t, "OpenFlow15", "dump-flows", target)
	// In 1.5 a load travels, and prints, as a masked set_field.
	for _, w := range []string{"set_field:0x2/0xffff->tun_metadata0", "tun_metadata0=0x10002/0x7fffffff",
		"move:NXM_NX_TUN_METADATA0[0..15]->NXM_NX_REG15[0..15]", "set_field:0x5->tun_metadata0"} {
		if !strings.Contains(dump, w) {
			t.Errorf("dump-flows lacks %q:\n%s", w, dump)
		}
	}
	// Without the first load the value differs: the table-1 match fails.
	ovsOfctlIn(t, "OpenFlow15", "mod-flows", target, "table=0,in_port=1 actions=load:0x3->NXM_NX_TUN_METADATA0[0..15],resubmit(,1)")
	if got := mb.forward(mb.p1, mb.p2, frame()); len(got) != 0 {
		t.Errorf("a frame with tun_metadata0=0x3 matched 0x10002/0x7fffffff")
	}
	ovsOfctlIn(t, "OpenFlow15", "del-tlv-map", target, "{class=0x102,type=0x80,len=4}->tun_metadata0")
	if dump := ovsOfctlIn(t, "OpenFlow15", "dump-tlv-map", target); strings.Contains(dump, "tun_metadata0") {
		t.Errorf("after del-tlv-map:\n%s", dump)
	}
}

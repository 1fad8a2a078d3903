package ifinfo

import (
	"os/exec"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// A veth reports 10000 Mb/s full duplex and its own MAC address, which
// is what ovs-ofctl show prints for it under Open vSwitch.
func TestVethSpeedAndMAC(t *testing.T) {
	nstest.RequireRoot(t)
	a, b := nstest.Name("ifa"), nstest.Name("ifb")
	if out, err := exec.Command("ip", "link", "add", a, "type", "veth", "peer", "name", b).CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", a).Run() })
	in, ok := Get(a)
	if !ok {
		t.Fatalf("Get(%s): not found", a)
	}
	if in.SpeedMbps != 10000 || !in.FullDuplex {
		t.Errorf("speed %d Mb/s full=%v, want 10000 full", in.SpeedMbps, in.FullDuplex)
	}
	if len(in.MAC) != 6 || in.MAC.String() == "00:00:00:00:00:00" {
		t.Errorf("MAC %v, want the veth's", in.MAC)
	}
	if _, ok := Get("no-such-if-0"); ok {
		t.Error("Get of a missing interface reported one")
	}
}

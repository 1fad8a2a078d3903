package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestBundleCommitSurvivesKill9: a bundle commit is acknowledged by its
// reply, so it is saved before the reply: the flows and groups ovs-ofctl
// --bundle committed are there after a kill -9 and restart, and a bundle
// that failed left nothing behind.
func TestBundleCommitSurvivesKill9(t *testing.T) {
	nstest.RequireTool(t, "ovs-ofctl")
	d := newDaemon(t)
	d.start()
	br := nstest.Name("brbu")
	d.vsctl("add-br", br)
	sock := "unix:" + filepath.Join(d.stateDir, br+".mgmt")
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-groups", sock, write("g", "group_id=4,type=all,bucket=output:LOCAL"))
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-flows", sock,
		write("f", "priority=7,udp,actions=group:4", "priority=6,tcp,actions=drop"))
	if out, err := nstest.Output("ovs-ofctl", "-O", "OpenFlow14", "--bundle", "add-flows", sock,
		write("bad", "priority=9,arp,actions=drop", "priority=8,arp,actions=group:77")); err == nil ||
		!strings.Contains(out, "OFPBFC_MSG_FAILED") {
		t.Fatalf("bundle with a bad flow: %v\n%s", err, out)
	}
	d.kill9()
	d.start()
	flows := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", sock)
	for _, want := range []string{"priority=7,udp actions=group:4", "priority=6,tcp actions=drop"} {
		if !strings.Contains(flows, want) {
			t.Fatalf("after kill -9, dump-flows lacks %q:\n%s", want, flows)
		}
	}
	if strings.Contains(flows, "priority=9") {
		t.Fatalf("a flow of the failed bundle survived:\n%s", flows)
	}
	if groups := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "dump-groups", sock); !strings.Contains(groups, "group_id=4,type=all") {
		t.Fatalf("after kill -9, dump-groups:\n%s", groups)
	}
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	// A bundle of thousands of flows (journaled as OpenFlow messages), and
	// one with a select group whose selection_method only the text form
	// carries.
	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf("table=3,priority=100,ip,reg1=0x%x,nw_dst=198.18.%d.%d,actions=load:0x%x->NXM_NX_REG2[],resubmit(,4)",
			i, i/256, i%256, i))
	}
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-flows", sock, write("many", many...))
	nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "--bundle", "add-groups", sock,
		write("sel", "group_id=5,type=select,selection_method=hash,fields(ip_src),bucket=weight:10,actions=output:1,bucket=weight:20,actions=output:2"))
	d.kill9()
	// The journal's bundle records are OpenFlow bytes in base64;
	// --print-journal shows them as text.
	printed, err := exec.Command(d.bin, "--print-journal", filepath.Join(d.stateDir, br+".journal")).CombinedOutput()
	if err != nil || !strings.Contains(string(printed), "a bundle commit of 5000 changes") ||
		!strings.Contains(string(printed), "flow add table=3,priority=100,ip,nw_dst=198.18.19.135,reg1=0x1387 actions=") {
		t.Fatalf("--print-journal: %v\n%.2000s", err, printed)
	}
	d.start()
	if n := strings.Count(nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", sock, "table=3"), "resubmit(,4)"); n != len(many) {
		t.Fatalf("after kill -9, %d of the large bundle's %d flows", n, len(many))
	}
	if m := regexp.MustCompile(`msg="flows restored".*`).FindString(d.log.String()); m != "" {
		t.Log(m)
	}
	flows := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "dump-flows", sock)
	for _, want := range []string{"priority=7,udp actions=group:4", "priority=6,tcp actions=drop"} {
		if !strings.Contains(flows, want) {
			t.Fatalf("after kill -9, dump-flows lacks %q:\n%s", want, flows)
		}
	}
	if strings.Contains(flows, "priority=9") {
		t.Fatalf("a flow of the failed bundle survived:\n%s", flows)
	}
	groups := nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow15", "dump-groups", sock)
	if !strings.Contains(groups, "group_id=4,type=all") || !strings.Contains(groups, "group_id=5,type=select") {
		t.Fatalf("after kill -9, dump-groups:\n%s", groups)
	}
	if !strings.Contains(groups, "selection_method=hash") {
		t.Fatalf("the select group came back without its selection_method:\n%s", groups)
	}
}

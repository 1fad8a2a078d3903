package ofproto

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestOvsOfctlMultipathBundle: the real ovs-ofctl installs multipath,
// bundle and bundle_load flows in OpenFlow 1.3 and (as one bundle) 1.5;
// traffic follows them (a bundle member that does not exist is passed
// over), dump-flows prints them as Open vSwitch 3.1 does ("members:",
// also for a flow written with "slaves:"), and diff-flows finds the
// switch's table equal to the file.
func TestOvsOfctlMultipathBundle(t *testing.T) {
	flows := []string{
		"table=0,priority=10,udp,in_port=1 actions=multipath(symmetric_l4,1024,hrw,2,0,NXM_NX_REG0[0..1]),resubmit(,1)",
		"table=1,priority=10,reg0=0 actions=bundle(eth_src,0,active_backup,ofport,members:5,2)",
		"table=1,priority=10,reg0=1 actions=bundle_load(symmetric_l3l4+udp,7,hrw,ofport,NXM_NX_REG1[0..15],slaves:2,6),output:NXM_NX_REG1[0..15]",
		"table=1,priority=0 actions=drop",
	}
	for _, c := range []struct {
		version string
		bundle  bool
	}{{"OpenFlow13", false}, {"OpenFlow15", true}} {
		t.Run(c.version, func(t *testing.T) {
			mb := newMeterBridge(t)
			target := "unix:" + mb.sock
			file := filepath.Join(t.TempDir(), "flows.txt")
			if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"add-flows", target, file}
			if c.bundle {
				args = append([]string{"--bundle"}, args...)
			}
			ovsOfctlIn(t, c.version, args...)
			// Both links end at port 2: through member 2 of the
			// active_backup bundle (5 does not exist), or through the
			// port bundle_load chose (6 does not exist).
			n := 0
			for i := range 8 {
				f := frame()
				f[len(f)-1] = byte(i) // different payloads, same flow
				n += len(mb.forward(mb.p1, mb.p2, f))
			}
			if n != 8 {
				t.Fatalf("%d of 8 frames reached port 2", n)
			}
			dump := ovsOfctlIn(t, c.version, "dump-flows", target)
			for _, w := range []string{
				"actions=multipath(symmetric_l4,1024,hrw,2,0,NXM_NX_REG0[0..1]),resubmit(,1)",
				"actions=bundle(eth_src,0,active_backup,ofport,members:5,2)",
				"actions=bundle_load(symmetric_l3l4+udp,7,hrw,ofport,NXM_NX_REG1[0..15],members:2,6),output:NXM_NX_REG1[0..15]",
			} {
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

// TestMultipathBundleAgainstOVS: the same multipath and bundle flows and
// the same packets in Debian's ovs-vswitchd and in this switch pick the
// same links and members, for every hash field set and algorithm: the
// flow hashes are Open vSwitch's, bit for bit.
func TestMultipathBundleAgainstOVS(t *testing.T) {
	ovs := startOVSOracle(t)
	// Open vSwitch's megaflow for symmetric_l3l4 on a non-IP packet
	// leaves out the L2 fields its hash reads (flow_mask_hash_fields,
	// still so in 3.7), so a cached flow answers for packets that hash
	// elsewhere: compare each packet's own translation instead.
	nstest.Run(t, "ovs-appctl", "-t", ovs.ctl, "upcall/disable-megaflows")
	ours := newOurDiffBridge(t)
	var configs [][]string
	// Three links: port 2, port 3, and port 2 with another destination
	// MAC, so that every link is told apart.
	links := []string{
		"table=1,priority=10,reg0=0,actions=output:2",
		"table=1,priority=10,reg0=1,actions=output:3",
		"table=1,priority=10,reg0=2,actions=mod_dl_dst:02:00:00:00:00:77,output:2",
	}
	for _, f := range []string{"eth_src", "symmetric_l4", "symmetric_l3l4", "symmetric_l3l4+udp", "nw_src", "nw_dst", "symmetric_l3"} {
		for _, alg := range []string{"modulo_n", "hash_threshold", "hrw", "iter_hash"} {
			configs = append(configs, append([]string{
				fmt.Sprintf("table=0,priority=1,actions=multipath(%s,%d,%s,3,4,NXM_NX_REG0[0..1]),resubmit(,1)", f, 50+len(configs), alg)},
				links...))
		}
		configs = append(configs, []string{
			fmt.Sprintf("table=0,priority=1,actions=bundle(%s,%d,hrw,ofport,members:2,3)", f, len(configs))})
		configs = append(configs, []string{
			fmt.Sprintf("table=0,priority=1,actions=bundle_load(%s,9,hrw,ofport,NXM_NX_REG1[0..15],members:2,7,3),output:NXM_NX_REG1[0..15]", f)})
	}
	marker := fmt.Sprintf("table=0,priority=65535,dl_type=0x%04x,actions=output:%d", diffMarkerEth, diffSentinel)
	g := diffGen{rand.New(rand.NewPCG(diffSeed(), 27))}
	file := filepath.Join(t.TempDir(), "flows.txt")
	const perConfig = 60
	spread := 0
	for round, flows := range configs {
		if err := os.WriteFile(file, []byte(strings.Join(flows, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, sw := range []string{ovs.mgmt, "unix:" + ours.sock} {
			nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "del-flows", sw)
			nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-flows", sw, file)
		}
		nstest.Run(t, "ovs-ofctl", "-O", "OpenFlow13", "add-flow", ovs.mgmt, marker)
		nstest.Run(t, "ovs-appctl", "-t", ovs.ctl, "revalidator/purge")
		var pkts [][]byte
		for i := range perConfig {
			pkts = append(pkts, g.packet(round*perConfig+i))
		}
		want, got := byIndex(ovs.run(pkts, round)), byIndex(ours.run(pkts))
		seen := map[string]bool{}
		for i := range pkts {
			idx := uint32(round*perConfig + i)
			if !slices.Equal(want[idx], got[idx]) {
				t.Fatalf("%s, packet %d (%x):\n ovs  %v\n ours %v", flows[0], i, pkts[i], want[idx], got[idx])
			}
			if len(want[idx]) > 0 {
				seen[want[idx][0][:14]] = true // "port:" and the destination MAC
			}
		}
		if len(seen) > 1 {
			spread++
		}
	}
	// Most configurations must use more than one link, or the
	// comparison says little.
	if spread < len(configs)*2/3 {
		t.Errorf("only %d of %d configurations spread packets over more than one link", spread, len(configs))
	}
	t.Logf("%d multipath/bundle configurations × %d packets: the same links in Open vSwitch and here; %d spread traffic", len(configs), perConfig, spread)
}

package ofproto

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// TestDifferentialGroupBuckets: OpenFlow 1.5's INSERT_BUCKET and
// REMOVE_BUCKET, sent by the real ovs-ofctl (-O OpenFlow15 insert-buckets
// / remove-buckets) to Open vSwitch and to this switch: after every
// command both dump the same groups (bucket ids, order, weights), refuse
// the same commands with the same error (an unknown bucket, an id used
// twice, an unknown group), and forward a packet through the edited group
// alike.
func TestDifferentialGroupBuckets(t *testing.T) {
	ovs := startOVSOracle(t)
	ours := newOurDiffBridge(t)
	switches := []string{ovs.mgmt, "unix:" + ours.sock}
	ofctl := func(sw string, args ...string) (string, error) {
		out, err := nstest.Output("ovs-ofctl", append([]string{"-O", "OpenFlow15"}, append(args[:1:1], append([]string{sw}, args[1:]...)...)...)...)
		return string(out), err
	}
	dump := func(sw string) []string {
		out, err := ofctl(sw, "dump-groups")
		if err != nil {
			t.Fatalf("dump-groups %s: %v\n%s", sw, err, out)
		}
		var l []string
		for _, s := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			l = append(l, strings.TrimSpace(s))
		}
		slices.Sort(l)
		return l
	}
	// errorName is the OpenFlow error ovs-ofctl reports, or "".
	errorName := func(out string) string {
		if i := strings.Index(out, "OFPGMFC_"); i >= 0 {
			return strings.Fields(out[i:])[0]
		}
		if i := strings.Index(out, "OFPBRC_"); i >= 0 {
			return strings.Fields(out[i:])[0]
		}
		return ""
	}
	steps := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"add-group", "group_id=1,type=all,bucket=bucket_id:10,output:2,bucket=bucket_id:20,output:3"}, ""},
		{[]string{"add-group", "group_id=2,type=select,bucket=output:2,bucket=output:3"}, ""},
		{[]string{"insert-buckets", "group_id=1,command_bucket_id=first,bucket=bucket_id:5,mod_dl_src:02:00:00:00:00:05,output:3"}, ""},
		{[]string{"insert-buckets", "group_id=1,command_bucket_id=last,bucket=bucket_id:30,output:2"}, ""},
		{[]string{"insert-buckets", "group_id=1,command_bucket_id=10,bucket=bucket_id:15,mod_dl_dst:02:00:00:00:00:15,output:2,bucket=bucket_id:16,output:3"}, ""},
		{[]string{"insert-buckets", "group_id=1,command_bucket_id=99,bucket=bucket_id:40,output:2"}, "OFPGMFC_UNKNOWN_BUCKET"},
		{[]string{"insert-buckets", "group_id=1,command_bucket_id=first,bucket=bucket_id:20,output:2"}, "OFPGMFC_BUCKET_EXISTS"},
		{[]string{"insert-buckets", "group_id=7,command_bucket_id=first,bucket=bucket_id:1,output:2"}, "OFPGMFC_UNKNOWN_GROUP"},
		{[]string{"insert-buckets", "group_id=2,command_bucket_id=last,bucket=bucket_id:7,weight:5,output:1"}, ""},
		{[]string{"remove-buckets", "group_id=1,command_bucket_id=15"}, ""},
		{[]string{"remove-buckets", "group_id=1,command_bucket_id=first"}, ""},
		{[]string{"remove-buckets", "group_id=1,command_bucket_id=last"}, ""},
		{[]string{"remove-buckets", "group_id=1,command_bucket_id=77"}, "OFPGMFC_UNKNOWN_BUCKET"},
		{[]string{"remove-buckets", "group_id=2,command_bucket_id=all"}, ""},
		{[]string{"remove-buckets", "group_id=2,command_bucket_id=first"}, ""},
	}
	for i, st := range steps {
		var outs [2]string
		for k, sw := range switches {
			out, err := ofctl(sw, st.args...)
			if err == nil {
				out = ""
			}
			outs[k] = errorName(out)
			if err != nil && outs[k] == "" {
				t.Fatalf("step %d %v on %s: %v\n%s", i, st.args, sw, err, out)
			}
		}
		if outs[0] != st.wantErr || outs[1] != st.wantErr {
			t.Errorf("step %d %v: Open vSwitch says %q, this switch %q, want %q", i, st.args, outs[0], outs[1], st.wantErr)
		}
		if o, g := dump(ovs.mgmt), dump("unix:"+ours.sock); !slices.Equal(o, g) {
			t.Errorf("step %d %v: dump-groups\n ovs  %q\n ours %q", i, st.args, o, g)
		}
	}
	// Traffic through the edited group: what is left of group 1.
	flows := fmt.Sprintf("table=0,priority=10,udp,actions=group:1\ntable=0,priority=65535,dl_type=0x%04x,actions=output:%d\n", diffMarkerEth, diffSentinel)
	for _, sw := range switches {
		if out, err := nstest.Output("sh", "-c", "printf '"+flows+"' | ovs-ofctl -O OpenFlow15 add-flows "+sw+" -"); err != nil {
			t.Fatalf("add-flows %s: %v\n%s", sw, err, out)
		}
	}
	pkts := [][]byte{checkLenFrame(100, 0, 53, 0)}
	want, got := byIndex(ovs.run(pkts, 0)), byIndex(ours.run(pkts))
	if len(want[0]) == 0 || !slices.Equal(want[0], got[0]) {
		t.Errorf("through group 1:\n ovs  %v\n ours %v", want[0], got[0])
	}
}

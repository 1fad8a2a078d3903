package vswitchd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/internal/nstest"
	"github.com/vswitch-go/vswitch/vswitchd/config"
	"github.com/vswitch-go/vswitch/vswitchd/ovsdb/dbserver"
)

// requireCPUs0and1 ends the test unless this process may run on CPUs 0
// and 1, which the masks below name.
func requireCPUs0and1(t *testing.T) {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || !set.IsSet(0) || !set.IsSet(1) {
		nstest.Unavailable(t, "needs CPUs 0 and 1")
	}
}

// pmdCores returns the core_id of each of br0's PMDs in pmd-stats-show's
// data, -1 for an unpinned one.
func pmdCores(t *testing.T, d *Daemon, bridge string) []int {
	t.Helper()
	r, err := call(t, d, "pmd-stats-show")
	if err != nil {
		t.Fatal(err)
	}
	var views []PMDStatsView
	if err := json.Unmarshal(r.Data, &views); err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, v := range views {
		if v.Bridge != bridge {
			continue
		}
		if v.CoreID == nil {
			out = append(out, -1)
		} else {
			out = append(out, *v.CoreID)
		}
	}
	return out
}

// pinnedThreads returns, for each single CPU some thread of this process
// is restricted to, that CPU (sorted, once each).
func pinnedThreads(t *testing.T) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				v = strings.TrimSpace(v)
				if !strings.ContainsAny(v, ",-") && !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestPMDCPUMaskSetsCount: as in Open vSwitch, pmd-cpu-mask=0x3 runs two
// PMDs, on CPUs 0 and 1 (pmd-stats-show names the cores, and the threads
// are pinned there), and pmd-rxq-affinity=0:1 then puts queue 0 on the
// PMD of CPU 1. Without a mask n-pmd counts, unpinned.
func TestPMDCPUMaskSetsCount(t *testing.T) {
	nstest.RequireRoot(t)
	requireCPUs0and1(t)
	d, err := Start(Options{StateDir: t.TempDir(), DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:n-pmd=2")
	if got := pmdCores(t, d, "br0"); !slices.Equal(got, []int{-1, -1}) {
		t.Fatalf("n-pmd=2 without a mask: PMD cores %v, want two unpinned PMDs", got)
	}
	mustCall(t, d, "remove", "Open_vSwitch", ".", "other_config", "n-pmd")

	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x3")
	if got := pmdCores(t, d, "br0"); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("pmd-cpu-mask=0x3: PMD cores %v, want [0 1]", got)
	}
	if out := mustCall(t, d, "pmd-stats-show"); !strings.Contains(out, "pmd thread bridge br0 pmd 1 core_id 1:") {
		t.Fatalf("pmd-stats-show does not name PMD 1's core:\n%s", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for got := pinnedThreads(t); !slices.Contains(got, "0") || !slices.Contains(got, "1"); got = pinnedThreads(t) {
		if time.Now().After(deadline) {
			t.Fatalf("threads pinned to single CPUs: %v, want PMD threads on CPU 0 and on CPU 1", got)
		}
		time.Sleep(20 * time.Millisecond)
	}

	port := nstest.Name("vspm")
	mustCall(t, d, "add-port", "br0", port, "type=internal", "options:n_rxq=2")
	mustCall(t, d, "set", "Port", port, "other_config:pmd-rxq-affinity=0:1")
	r, err := call(t, d, "pmd-rxq-show")
	if err != nil {
		t.Fatal(err)
	}
	var rxqs []RxqView
	if err := json.Unmarshal(r.Data, &rxqs); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range rxqs {
		if v.Port == port && v.Queue == 0 {
			found = true
			if !v.Pinned || v.PMD != 1 || v.CoreID == nil || *v.CoreID != 1 {
				t.Fatalf("queue 0 %+v: want pinned on PMD 1, core 1", v)
			}
		}
	}
	if !found {
		t.Fatalf("pmd-rxq-show lacks %s queue 0: %+v", port, rxqs)
	}
}

// TestPMDCountAndMaskDisagree: n-pmd may stay set beside a mask only if it
// says the same count; a change that makes them disagree is refused with
// both keys named, while a stored configuration that disagrees (written
// when the mask only pinned) still starts, with the mask's count.
func TestPMDCountAndMaskDisagree(t *testing.T) {
	requireCPUs0and1(t)
	dir := t.TempDir()
	d, err := Start(Options{StateDir: dir, DefaultBridge: "br0"})
	if err != nil {
		t.Fatal(err)
	}
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x3", "other_config:n-pmd=2")
	for _, bad := range [][]string{
		{"set", "Open_vSwitch", ".", "other_config:n-pmd=1"},
		{"set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x1"},
	} {
		_, err := call(t, d, bad...)
		if err == nil || !strings.Contains(err.Error(), "n-pmd") || !strings.Contains(err.Error(), "pmd-cpu-mask") {
			t.Errorf("%v: error %v, want a refusal naming n-pmd and pmd-cpu-mask", bad, err)
		}
	}
	for _, mask := range []string{"0x0", "0xg", "0x8000000000000000"} {
		if _, err := call(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask="+mask, "other_config:n-pmd=1"); err == nil {
			t.Errorf("pmd-cpu-mask=%s accepted", mask)
		}
	}
	// Both at once, agreeing, is fine.
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-cpu-mask=0x1", "other_config:n-pmd=1")
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := config.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(func(c *config.Config) error {
		c.OtherConfig["n-pmd"], c.OtherConfig["pmd-cpu-mask"] = "1", "0x3"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The database is the configuration: the disagreement goes there too,
	// written as a client that does not check it would (vsctl refuses it).
	db, _, err := dbserver.Open(filepath.Join(dir, EmbeddedDBName), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dbserver.New(db, nil).Transact([]ovsdb.Operation{{Op: ovsdb.OperationUpdate, Table: "Open_vSwitch",
		Where: []ovsdb.Condition{}, Row: ovsdb.Row{"other_config": ovsdb.OvsMap{GoMap: map[any]any{"n-pmd": "1", "pmd-cpu-mask": "0x3"}}}}}) {
		if r != nil && r.Error != "" {
			t.Fatalf("%s: %s", r.Error, r.Details)
		}
	}
	db.Close()
	d, err = Start(Options{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := pmdCores(t, d, "br0"); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("stored n-pmd=1 with pmd-cpu-mask=0x3: PMD cores %v, want [0 1] (the mask decides)", got)
	}
	// Other changes are not blocked by the stored disagreement.
	mustCall(t, d, "set", "Open_vSwitch", ".", "other_config:pmd-sleep-max=50")
}

package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vswitch-go/vswitch/internal/nstest"
)

// fillExceptFree fills the file system of dir with one file until it is
// full, then gives back free bytes: a disk that is nearly full.
func fillExceptFree(t *testing.T, dir string, free int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := bytes.Repeat([]byte{0xa5}, 64<<10)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(max(n-free, 0)); err != nil {
		t.Fatal(err)
	}
	return path
}

var refusedLine = regexp.MustCompile(`flows\.txt:(\d+): flow .*switch refused it: OFPET_FLOW_MOD_FAILED/OFPFMFC_UNKNOWN`)

// TestFullDiskKeepsAcknowledgedFlows: with the state directory on a
// nearly full tmpfs, add-flows of 3,000 flows fails (exit 1, the cause
// given) for the flows the journal could not take, which are not
// installed; after kill -9 and a restart with space again, every flow that
// was acknowledged is back and no refused one is. At both durability
// levels.
func TestFullDiskKeepsAcknowledgedFlows(t *testing.T) {
	for _, level := range []string{"written", "fsync"} {
		t.Run(level, func(t *testing.T) {
			mnt := nstest.Tmpfs(t, "2m")
			d := newDaemon(t)
			d.stateDir = mnt
			d.start()
			d.vsctl("add-br", "br0")
			d.vsctl("set", "Open_vSwitch", ".", "other_config:flow-sync="+level)
			const n = 3000
			var flows strings.Builder
			for i := 1; i <= n; i++ {
				fmt.Fprintf(&flows, "priority=%d,udp,tp_dst=%d,actions=drop\n", 1000+i, i)
			}
			file := filepath.Join(t.TempDir(), "flows.txt")
			if err := os.WriteFile(file, []byte(flows.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			filler := fillExceptFree(t, mnt, 96<<10)

			_, errOut, code := d.vsctlRaw("add-flows", "br0", file)
			if code == 0 {
				t.Fatal("add-flows succeeded on a full disk")
			}
			if !strings.Contains(errOut, "no space left on device") {
				t.Fatalf("the cause is not given:\n%.2000s", errOut)
			}
			t.Logf("first error: %s", strings.SplitN(errOut, "\n", 3)[:2])
			refused := map[int]bool{}
			for _, m := range refusedLine.FindAllStringSubmatch(errOut, -1) {
				line, _ := strconv.Atoi(m[1])
				refused[line] = true
			}
			if len(refused) == 0 || len(refused) == n {
				t.Fatalf("%d of %d flows refused: the test wants a disk that takes some", len(refused), n)
			}
			check := func(when string) {
				t.Helper()
				dump := d.vsctl("dump-flows", "br0")
				have := map[int]bool{}
				for _, m := range regexp.MustCompile(`tp_dst=(\d+)`).FindAllStringSubmatch(dump, -1) {
					v, _ := strconv.Atoi(m[1])
					have[v] = true
				}
				for i := 1; i <= n; i++ {
					if !refused[i] && !have[i] {
						t.Fatalf("%s: acknowledged flow %d missing (%d refused, %d present)", when, i, len(refused), len(have))
					}
					if refused[i] && have[i] {
						t.Fatalf("%s: refused flow %d is installed", when, i)
					}
				}
			}
			check("before the kill")
			d.kill9()
			if err := os.Remove(filler); err != nil {
				t.Fatal(err)
			}
			d.start()
			check("after kill -9 and restart")
			t.Logf("%s: %d of %d flows acknowledged, %d refused", level, n-len(refused), n, len(refused))
		})
	}
}

// writeJournal writes records as a format 2 journal (the layout in
// docs/architecture.md), independently of the daemon's code.
func writeJournal(t *testing.T, path string, records []string) []byte {
	t.Helper()
	tab := crc32.MakeTable(crc32.Castagnoli)
	b := []byte("vswitchd-flow-journal 2\n")
	for _, r := range records {
		b = fmt.Appendf(b, "%08x %08x %s\n", len(r), crc32.Checksum([]byte(r), tab), r)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// countFlows counts the flows dump-flows lists.
func countFlows(t *testing.T, d *daemon) int {
	t.Helper()
	return strings.Count(d.vsctl("dump-flows", "br0"), "tp_dst=")
}

// TestDamagedJournal: a journal damaged before its last record (a 17 MiB
// line, a garbage line, 4 KiB of NULs) stops start-up with the bad
// record's number and offset, files untouched; --recover then keeps the
// records before the damage, moves the file aside and says what it
// dropped. A journal cut short (the last record torn) loses only that
// record, with a warning.
func TestDamagedJournal(t *testing.T) {
	const n = 300
	records := make([]string, n)
	for i := range records {
		records[i] = fmt.Sprintf("flow add priority=%d,udp,tp_dst=%d actions=drop", 1000+i, i+1)
	}
	offsetOf := func(k int) int { // byte offset of record k (0-based)
		off := len("vswitchd-flow-journal 2\n")
		for _, r := range records[:k] {
			off += 18 + len(r) + 1
		}
		return off
	}
	mid := offsetOf(150)
	for _, c := range []struct {
		name    string
		corrupt func([]byte) []byte
		torn    bool
		kept    int
	}{
		{"long-line", func(b []byte) []byte {
			return append(b[:mid:mid], append(append(bytes.Repeat([]byte("x"), 17<<20), '\n'), b[mid:]...)...)
		}, false, 150},
		{"garbage-line", func(b []byte) []byte {
			return append(b[:mid:mid], append([]byte("\x7fELF garbage here\n"), b[mid:]...)...)
		}, false, 150},
		{"nuls", func(b []byte) []byte {
			copy(b[mid:mid+4096], make([]byte, 4096))
			return b
		}, false, 150},
		{"truncated", func(b []byte) []byte { return b[:len(b)*2/3] }, true, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDaemon(t)
			d.start()
			d.vsctl("add-br", "br0")
			if err := d.stop(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(d.stateDir, "br0.journal")
			data := c.corrupt(writeJournal(t, path, records))
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.torn {
				kept := 0
				for kept < n && offsetOf(kept+1) <= len(data) {
					kept++
				}
				d.start()
				if got := countFlows(t, d); got != kept {
					t.Fatalf("%d flows restored, want the %d whole records", got, kept)
				}
				if !strings.Contains(d.log.String(), "level=WARN msg=\"flow journal: dropped a torn last record") {
					t.Fatalf("no warning for the torn record:\n%s", d.log.String())
				}
				return
			}

			// Refused: exit status 1, the record and offset named, the
			// way out given, the file untouched.
			cmd := exec.Command(d.bin, "--state-dir", d.stateDir, "--metrics-addr", "", "--default-bridge", "")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("start with a damaged journal: %v\n%s", err, out.String())
			}
			want := fmt.Sprintf("record %d (byte offset %d of %d)", c.kept+1, mid, len(data))
			if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "--recover") {
				t.Fatalf("refusal does not say %q and --recover:\n%s", want, out.String())
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
				t.Fatal("the damaged journal was modified")
			}
			t.Logf("refusal: %s", out.String())

			d.start("--recover")
			if got := countFlows(t, d); got != c.kept {
				t.Fatalf("--recover restored %d flows, want %d", got, c.kept)
			}
			aside, _ := filepath.Glob(path + ".corrupt-*")
			if len(aside) != 1 {
				t.Fatalf("damaged journal moved to %q", aside)
			}
			if got, _ := os.ReadFile(aside[0]); !bytes.Equal(got, data) {
				t.Fatal("the file moved aside is not the damaged journal")
			}
			if log := d.log.String(); !strings.Contains(log, "moved the file aside") || !strings.Contains(log, fmt.Sprintf("dropped-bytes=%d", len(data)-mid)) {
				t.Fatalf("--recover does not say what it dropped:\n%s", log)
			}
			// A normal start afterwards works and keeps them.
			if err := d.stop(); err != nil {
				t.Fatal(err)
			}
			d.start()
			if got := countFlows(t, d); got != c.kept {
				t.Fatalf("after --recover and a restart %d flows, want %d", got, c.kept)
			}
		})
	}
}

// TestLegacyJournalUpgrade: a journal of the first format (bare lines,
// no checksums) left by an older vswitchd is read once and replaced by a
// format 3 one.
func TestLegacyJournalUpgrade(t *testing.T) {
	d := newDaemon(t)
	d.start()
	d.vsctl("add-br", "br0")
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.stateDir, "br0.journal")
	var old strings.Builder
	for i := 1; i <= 50; i++ {
		fmt.Fprintf(&old, "flow add priority=%d,udp,tp_dst=%d actions=drop\n", 1000+i, i)
	}
	if err := os.WriteFile(path, []byte(old.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d.start()
	if got := countFlows(t, d); got != 50 {
		t.Fatalf("%d flows from the old journal, want 50", got)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 24)
	io.ReadFull(f, head)
	f.Close()
	if string(head) != "vswitchd-flow-journal 3\n" {
		t.Fatalf("journal not rewritten: starts %q", head)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("journal mode %v", st.Mode())
	}
}

// TestJournalFormat2Loads: the state directory of a vswitchd that wrote
// format 2 (a bundle as one record of tab-joined ovs-ofctl changes) comes
// back whole after an upgrade, and the journal goes on as format 3.
func TestJournalFormat2Loads(t *testing.T) {
	d := newDaemon(t)
	d.start()
	d.vsctl("add-br", "br0")
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}
	var bundle []string
	for i := 1; i <= 30; i++ {
		bundle = append(bundle, fmt.Sprintf("flow add priority=%d,udp,tp_dst=%d actions=drop", 2000+i, 100+i))
	}
	path := filepath.Join(d.stateDir, "br0.journal")
	writeJournal(t, path, []string{
		"flow add priority=1001,udp,tp_dst=1 actions=drop",
		"bundle " + strings.Join(bundle, "\t"),
		"flow add priority=1002,udp,tp_dst=2 actions=drop",
	})
	d.start()
	if got := countFlows(t, d); got != 32 {
		t.Fatalf("%d flows from the format 2 journal, want 32", got)
	}
	d.vsctl("add-flow", "br0", "priority=1003,udp,tp_dst=3,actions=drop")
	head := make([]byte, 24)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(f, head)
	f.Close()
	if string(head) != "vswitchd-flow-journal 3\n" {
		t.Fatalf("journal not rewritten: starts %q", head)
	}
	d.kill9()
	d.start()
	if got := countFlows(t, d); got != 33 {
		t.Fatalf("%d flows after kill -9, want 33", got)
	}
}

// TestWrittenLevelSurvivesKill: at flow-sync=written with background
// fsyncs a minute apart (none happens during the test), every change a
// barrier acknowledged is back after kill -9: the kernel kept the
// journal's written pages when the daemon died.
func TestWrittenLevelSurvivesKill(t *testing.T) {
	d := newDaemon(t)
	d.start()
	d.vsctl("add-br", "br0")
	d.vsctl("set", "Open_vSwitch", ".", "other_config:flow-sync=written", "other_config:flow-sync-interval=60000")
	var flows strings.Builder
	for i := 1; i <= 2000; i++ {
		fmt.Fprintf(&flows, "priority=%d,udp,tp_dst=%d,actions=drop\n", 1000+i, i)
	}
	file := filepath.Join(t.TempDir(), "flows.txt")
	if err := os.WriteFile(file, []byte(flows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	d.vsctl("add-flows", "br0", file)
	for i := 1; i <= 20; i++ {
		d.vsctl("add-flow", "br0", fmt.Sprintf("priority=%d,tcp,tp_dst=%d,actions=drop", 5000+i, i))
	}
	d.vsctl("del-flows", "br0", "--strict", "priority=1001,udp,tp_dst=1")
	d.kill9()
	d.start()
	if got := countFlows(t, d); got != 2000-1+20 {
		t.Fatalf("%d flows after kill -9, want %d", got, 2000-1+20)
	}
	if strings.Contains(d.vsctl("dump-flows", "br0"), "priority=1001,") {
		t.Fatal("an acknowledged delete was undone")
	}
	if m := regexp.MustCompile(`msg="flows restored".*`).FindString(d.log.String()); m != "" {
		t.Log(m)
	}
}

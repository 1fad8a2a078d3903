package vswitchd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestJournalRecordsRoundTrip(t *testing.T) {
	for _, line := range []string{
		"flow add table=2,priority=100,cookie=0x5,ip,nw_dst=198.18.0.2 actions=output:2",
		"flow delete_strict table=2,priority=100,ip,nw_dst=198.18.0.2",
		"flow modify in_port=1 actions=drop",
		"flow delete",
		"group add group_id=1,type=select,bucket=weight:10,actions=output:1,bucket=weight:20,actions=output:2",
		"group delete group_id=1",
		"meter add meter=1,pktps,burst,band=type=drop,rate=1000,burst_size=100",
		"meter delete meter=1",
	} {
		m, err := parseMod(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		again, err := formatMod(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := parseMod(again)
		if err != nil {
			t.Fatalf("%q (from %q): %v", again, line, err)
		}
		if third, _ := formatMod(m2); third != again {
			t.Fatalf("not stable: %q → %q → %q", line, again, third)
		}
	}
	for _, bad := range []string{"", "flow", "flow frob x", "port add x", "group add group_id=x"} {
		if _, err := parseMod(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestJournalTornTail: a record the process died writing (no newline) was
// never acknowledged; it is dropped and the file cut back, and appends
// continue after the last whole record.
func TestJournalTornTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "br0.journal")
	if err := os.WriteFile(path, []byte("flow add a\nflow add b\nflow add c-torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	j, lines, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lines, []string{"flow add a", "flow add b"}) || j.records != 2 {
		t.Fatalf("lines %q records %d", lines, j.records)
	}
	if err := j.append("flow add d"); err != nil {
		t.Fatal(err)
	}
	if err := j.sync(); err != nil {
		t.Fatal(err)
	}
	j.close()
	data, _ := os.ReadFile(path)
	if string(data) != "flow add a\nflow add b\nflow add d\n" {
		t.Fatalf("file %q", data)
	}
	j, _, _ = openJournal(path)
	if err := j.reset(); err != nil {
		t.Fatal(err)
	}
	j.close()
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Fatalf("after reset %q", data)
	}
}

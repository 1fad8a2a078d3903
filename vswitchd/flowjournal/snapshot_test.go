package flowjournal

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vswitch-go/vswitch/vswitchd/config"
)

// TestSnapshotRoundTrip: what WriteSnapshot saves ReadSnapshot gives back;
// no file is "never saved" (nil), an empty table "saved empty".
func TestSnapshotRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "br0"+SnapshotSuffix)
	if got, err := ReadSnapshot(path); got != nil || err != nil {
		t.Fatalf("no file: %+v, %v; want nil, nil", got, err)
	}
	for _, want := range []*config.Tables{
		{Flows: []string{}},
		{Flows: []string{"priority=5,udp actions=drop", "table=1, actions=NORMAL"},
			Groups: []string{"group_id=1,type=all,bucket=actions=drop"}, Meters: []string{"meter=1,kbps,band=type=drop,rate=10"}},
	} {
		if err := WriteSnapshot(path, want); err != nil {
			t.Fatal(err)
		}
		got, err := ReadSnapshot(path)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("read back %+v, %v; want %+v", got, err, want)
		}
	}
	if err := WriteSnapshot(path, &config.Tables{}); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadSnapshot(path); err != nil || got == nil || got.Flows == nil {
		t.Fatalf("tables saved with nil flows read back as %+v, %v; want saved empty", got, err)
	}
}

// TestSnapshotDamage: a file that is not a snapshot of this format, or
// holds a line that is no line, is an error naming it.
func TestSnapshotDamage(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"cut":      `{"format":1,"flows":["a"`,
		"format":   `{"format":2,"flows":[]}`,
		"empty":    `{"format":1,"flows":[" "]}`,
		"newline":  `{"format":1,"flows":["a\nb"]}`,
		"group":    `{"format":1,"flows":[],"groups":[""]}`,
		"notjson":  "\x00\x01",
		"zerosize": "",
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadSnapshot(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %+v, %v; want an error naming the file", name, got, err)
		}
	}
}

// FuzzReadSnapshot: any file contents give tables or an error, never a
// panic; the tables given hold only non-empty single lines.
func FuzzReadSnapshot(f *testing.F) {
	f.Add([]byte(`{"format":1,"flows":["priority=1 actions=drop"],"groups":["group_id=1,type=all"]}`))
	f.Add([]byte(`{"format":1,"flows":null}`))
	f.Add([]byte(`{"format":1}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		tb, err := ReadSnapshot(path)
		if err != nil {
			return
		}
		if tb == nil || tb.Flows == nil {
			t.Fatalf("a file read as never saved: %+v", tb)
		}
		for _, l := range append(append(append([]string{}, tb.Flows...), tb.Groups...), tb.Meters...) {
			if strings.TrimSpace(l) == "" || strings.ContainsAny(l, "\n\r") {
				t.Fatalf("line %q accepted", l)
			}
		}
	})
}

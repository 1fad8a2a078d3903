package flowjournal

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// TestSnapshotLinesAreJSON: the snapshot written line by line is the JSON
// encoding/json reads, whatever a line holds (quotes, backslashes,
// control characters, non-ASCII, invalid UTF-8 as U+FFFD), and counts
// the flows; a table too large for the writer's buffer is whole.
func TestSnapshotLinesAreJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "br0"+SnapshotSuffix)
	odd := []string{`note:"q"`, `a\b`, "tab\there\x01", "caf\u00e9 \u2603", "bad\xffutf8"}
	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf("priority=%d,ip,nw_dst=198.18.%d.%d actions=output:2", i%7, i/256, i%256))
	}
	for _, flows := range [][]string{nil, odd, many} {
		n, err := WriteSnapshotLines(path, slices.Values(flows), []string{"group_id=1,type=all"}, nil)
		if err != nil || n != len(flows) {
			t.Fatalf("wrote %d flows, %v; want %d", n, err, len(flows))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Format int               `json:"format"`
			Flows  []string          `json:"flows"`
			Groups []string          `json:"groups"`
			Other  map[string]string `json:"meters"`
		}
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("not JSON: %v\n%.200s", err, data)
		}
		want := make([]string, len(flows))
		for i, l := range flows {
			want[i] = string([]rune(l))
		}
		if got.Format != snapshotFormat || !slices.Equal(got.Flows, want) || !slices.Equal(got.Groups, []string{"group_id=1,type=all"}) || got.Other != nil {
			t.Fatalf("read back %+v; want flows %q", got, want)
		}
	}
}

// FuzzSnapshotLine: any line is written as JSON that reads back as the
// line (each byte that is not UTF-8 as U+FFFD, as encoding/json does).
func FuzzSnapshotLine(f *testing.F) {
	for _, s := range []string{"", `"`, `\`, "\x00\x1f\x7f", "\xff\xfe", "caf\u00e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if want := string([]rune(s)); got != want {
			t.Fatalf("%q read back as %q, want %q", s, got, want)
		}
	})
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

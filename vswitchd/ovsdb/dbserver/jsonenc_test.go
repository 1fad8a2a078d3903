package dbserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// TestAppendJSON: what appendJSON writes reads back as what encoding/json
// (with libovsdb's MarshalJSON methods) writes for the same value.
func TestAppendJSON(t *testing.T) {
	u := ovsdb.UUID{GoUUID: "2b64caf0-4f3d-4569-a40c-8b6f5abc6fb6"}
	row := ovsdb.Row{
		"name":       "br0 \"quoted\" \\ <tag> & \u2028 é \x01",
		"ofport":     7,
		"big":        int64(1) << 40,
		"up":         true,
		"ratio":      0.25,
		"ports":      ovsdb.OvsSet{GoSet: []any{u, ovsdb.UUID{GoUUID: "named"}}},
		"one":        ovsdb.OvsSet{GoSet: []any{"x"}},
		"none":       ovsdb.OvsSet{GoSet: []any{}},
		"nilset":     ovsdb.OvsSet{},
		"other":      ovsdb.OvsMap{GoMap: map[any]any{"k": "v", "n": 3}},
		"emptymap":   ovsdb.OvsMap{},
		"statistics": ovsdb.OvsMap{GoMap: map[any]any{"rx_packets": 1, "tx_packets": 2}},
	}
	values := []any{
		nil, "s", 1, true, json.RawMessage(`{"a":[1,2]}`), json.RawMessage(nil), u, row,
		map[string]any{"initial": row, "x": nil},
		map[string]map[string]any{"Bridge": {u.GoUUID: map[string]any{"new": row}}},
		[]any{false, "txn", map[string]map[string]any{"Port": {}}},
		[]any(nil), map[string]any(nil), map[string]map[string]any(nil),
		struct{ A int }{3}, // not one of appendJSON's types: encoding/json writes it
		"bad utf-8: \xff\xfe",
	}
	for i, v := range values {
		got, err := appendJSON(nil, v)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("value %d: %s is not JSON: %v", i, got, err)
		}
		json.Unmarshal(want, &w)
		if !reflect.DeepEqual(normalize(g), normalize(w)) {
			t.Errorf("value %d:\n got  %s\n want %s", i, got, want)
		}
	}
}

// normalize sorts the elements of OVSDB sets and the pairs of maps in a
// decoded JSON value, whose order Go's map iteration chose.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
		if len(x) == 2 && (x[0] == "set" || x[0] == "map") {
			if inner, ok := x[1].([]any); ok {
				slices.SortFunc(inner, func(a, b any) int {
					ja, _ := json.Marshal(a)
					jb, _ := json.Marshal(b)
					return bytes.Compare(ja, jb)
				})
			}
		}
	}
	return v
}

// FuzzAppendString: a JSON string as encoding/json writes it, byte for
// byte.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\<>&\u2028\u2029\x00\x1f\x7f", "é\xff\xc3", "\ufffd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

// FuzzIsUUID: isUUID says what libovsdb's ValidateUUID says.
func FuzzIsUUID(f *testing.F) {
	for _, s := range []string{"2b64caf0-4f3d-4569-a40c-8b6f5abc6fb6", "2B64CAF0-4F3D-4569-A40C-8B6F5ABC6FB6",
		"named", "", "2b64caf0-4f3d-4569-a40c-8b6f5abc6fb", "2b64caf0x4f3d-4569-a40c-8b6f5abc6fb6",
		"2b64caf0-4f3d-4569-a40c-8b6f5abc6fbg", "2b64caf0-4f3d-4569-a40c-8b6f5abc6fb6\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isUUID(s), ovsdb.ValidateUUID(s) == nil; got != want {
			t.Fatalf("isUUID(%q) = %v, ValidateUUID says %v", s, got, want)
		}
	})
}

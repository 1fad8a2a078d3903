package dbctl

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestJSONValue(t *testing.T) {
	cases := map[string]any{
		"[]":                           []any{},
		"[10, 20]":                     []any{int64(10), int64(20)},
		`{a="x,y", b="2"}`:             map[string]any{"a": "x,y", "b": "2"},
		"{}":                           map[string]any{},
		`"9a:a3:60:10:1f:7c"`:          "9a:a3:60:10:1f:7c",
		"5":                            int64(5),
		"18446744073709551615":         uint64(18446744073709551615),
		"up":                           "up",
		`["tcp:198.18.0.99:6653"]`:     []any{"tcp:198.18.0.99:6653"},
		"{collisions=0, rx_packets=4}": map[string]any{"collisions": int64(0), "rx_packets": int64(4)},
	}
	for in, want := range cases {
		if got := jsonValue(in); !reflect.DeepEqual(got, want) {
			t.Errorf("jsonValue(%q) = %#v, want %#v", in, got, want)
		}
	}
}

// FuzzJSONValue: any printed value becomes JSON data that encodes,
// without a panic.
func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{"[]", "{a=\"b\"}", `{a="x\"y", b=1}`, "[1, \"2\"]", "\"", "{=}", "{,,}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := json.Marshal(jsonValue(s)); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	})
}

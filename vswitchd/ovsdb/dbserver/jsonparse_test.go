package dbserver

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// jsonSamples are JSON texts parseJSON reads as encoding/json does, or
// refuses as it does.
var jsonSamples = []string{
	`null`, `true`, `false`, `0`, `-0`, `12`, `-1.5e3`, `1E+2`, `0.25`, `1e400`, `01`, `1.`, `.5`, `-`, `1e`, `+1`,
	`""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u20ac"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`,
	"\"\xff\xfe\"", "\"caf\xc3\xa9\"", "\"\xed\xa0\x80\"", "\"a\tb\"", `"\x"`, `"\u12"`, `"\u12G4"`, `"abc`,
	`[]`, `[1,"a",[true,null],{}]`, `[1,]`, `[,1]`, `[1 2]`, `{}`, `{"a":1,"b":[{"c":"d"}]}`, `{"a":1,"a":2}`,
	`{"a"}`, `{"a":}`, `{1:2}`, `{"a":1,}`, ` [ 1 , { "k" : "v" } ] `, `1 2`, `nul`, `truex`, ``, `  `,
	`{"rows":[{"interfaces":["uuid","3ca3d8d8-2643-45e4-8721-d21b27d73fac"]}],"until":"==","timeout":0,"op":"wait"}`,
	strings.Repeat("[", 1100) + strings.Repeat("]", 1100),
}

// TestParseJSONAsEncodingJSON: parseJSON reads what encoding/json reads,
// alike, and takes nothing it refuses.
func TestParseJSONAsEncodingJSON(t *testing.T) {
	for _, s := range jsonSamples {
		checkParseJSON(t, s)
		checkSplitArray(t, s)
		checkSplitArray(t, "["+s+"]")
		checkSplitArray(t, `["Open_vSwitch",`+s+`,{"op":"comment"}]`)
	}
}

func checkParseJSON(t *testing.T, s string) {
	t.Helper()
	got, err := parseJSON([]byte(s))
	var want any
	werr := json.Unmarshal([]byte(s), &want)
	switch {
	case err == nil && werr != nil:
		t.Fatalf("parseJSON took %q, which encoding/json refuses: %v", s, werr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("%q:\n got  %#v\n want %#v", s, got, want)
	}
}

func checkSplitArray(t *testing.T, s string) {
	t.Helper()
	got, err := splitArray([]byte(s))
	var want []json.RawMessage
	werr := json.Unmarshal([]byte(s), &want)
	switch {
	case err == nil && werr != nil:
		t.Fatalf("splitArray took %q, which encoding/json refuses: %v", s, werr)
	case err == nil && !reflect.DeepEqual(got, want):
		t.Fatalf("%q:\n got  %q\n want %q", s, got, want)
	}
}

// FuzzParseJSON: parseJSON and splitArray never panic, never take what
// encoding/json refuses, and read what they take as it does.
func FuzzParseJSON(f *testing.F) {
	for _, s := range jsonSamples {
		f.Add(s)
	}
	for _, s := range opSamples {
		f.Add(s)
		f.Add("[" + s + "]")
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkParseJSON(t, s)
		checkSplitArray(t, s)
	})
}

// wireSamples are operations fastWireOperation reads as json.Unmarshal
// into a wireOperation does, or leaves to it.
var wireSamples = []string{
	`{"op":"update","table":"Port","where":[],"row":{"name":"a"},"row":{"tag":1}}`,
	`{"op":"wait","table":"Port","timeout":1e3,"where":[],"columns":[],"until":"==","rows":[]}`,
	`{"op":"wait","table":"Port","timeout":1.0}`, `{"op":"wait","timeout":"0"}`, `{"op":"wait","timeout":99999999999999999999}`,
	`{"op":"wait","timeout":-7,"columns":["a",null]}`, `{"op":1}`, `{"op":null,"table":null,"durable":true}`,
	`{"rows":[1]}`, `{"where":[1]}`, `{"where":{}}`, `{"row":[]}`, `{"durable":"true"}`, `{"comment":5}`, `[]`, `null`, `{}`,
	`{"op":"comment","comment":"\u00e9"}`, ` { "op" : "wait" } `, `{"op":"wait"} x`, `{"op":"insert","row":null,"where":[null],"rows":[null],"until":null,"timeout":-0}`,
}

// TestFastWireOperation: fastWireOperation reads what it takes as
// json.Unmarshal into a wireOperation does.
func TestFastWireOperation(t *testing.T) {
	for _, s := range append(slices.Clone(wireSamples), opSamples...) {
		checkFastWire(t, s)
	}
	if _, ok := fastWireOperation([]byte(opSamples[0])); !ok {
		t.Fatalf("an ovs-vsctl wait left to encoding/json: %s", opSamples[0])
	}
}

func checkFastWire(t *testing.T, s string) {
	t.Helper()
	got, ok := fastWireOperation([]byte(s))
	if !ok {
		return
	}
	var want wireOperation
	if err := json.Unmarshal([]byte(s), &want); err != nil {
		t.Fatalf("fastWireOperation took %q, which encoding/json refuses: %v", s, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got  %#v\n want %#v", s, got, want)
	}
}

// FuzzFastWireOperation: fastWireOperation never panics and reads what
// it takes as encoding/json does.
func FuzzFastWireOperation(f *testing.F) {
	for _, s := range append(slices.Clone(wireSamples), opSamples...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkFastWire(t, s) })
}

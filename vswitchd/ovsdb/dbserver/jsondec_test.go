package dbserver

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/ovn-kubernetes/libovsdb/ovsdb"
)

// opSamples are operations as ovs-vsctl, ovn-controller and libovsdb
// clients send them.
var opSamples = []string{
	`{"rows":[{"interfaces":["uuid","3ca3d8d8-2643-45e4-8721-d21b27d73fac"]}],"until":"==","where":[["_uuid","==",["uuid","2b64caf0-4f3d-4569-a40c-8b6f5abc6fb6"]]],"columns":["interfaces"],"timeout":0,"op":"wait","table":"Port"}`,
	`{"row":{"ports":["set",[["uuid","0daf2b3d-140d-4ee2-a7f8-5da79a53c787"],["named-uuid","row1"]]],"other_config":["map",[["k","v"],["n",3]]],"name":"br0","stp_enable":false,"tag":["set",[]]},"op":"update","table":"Bridge","where":[["_uuid","==",["uuid","0daf2b3d-140d-4ee2-a7f8-5da79a53c787"]]]}`,
	`{"uuid-name":"row1","row":{"name":"p1","interfaces":["named-uuid","row2"],"external_ids":["map",[["iface-id",["uuid","0daf2b3d-140d-4ee2-a7f8-5da79a53c787"]]]]},"op":"insert","table":"Port"}`,
	`{"mutations":[["next_cfg","+=",1],["bridges","insert",["set",[["named-uuid","b"]]]],["external_ids","delete",["set",["a","b"]]]],"op":"mutate","table":"Open_vSwitch","where":[]}`,
	`{"op":"select","table":"Interface","where":[["ofport",">=",1.5],["name","includes",["set",["a"]]]],"columns":["name","ofport"]}`,
	`{"op":"delete","table":"Bridge","where":[["name","!=","br0"]]}`,
	`{"op":"comment","comment":"ovs-vsctl: add-port br0 p1"}`,
	`{"op":"commit","durable":true}`,
	`{"op":"assert","lock":"ovn_controller"}`,
	`{"op":"update","table":"Interface","where":[],"row":{"options":["map",[]],"mtu":["set",[1500]]}}`,
	// Left to encoding/json by the fast path: another case, an
	// unknown member.
	`{"OP":"wait","Table":"Port","timeout":0,"where":[],"columns":[],"until":"==","rows":[]}`,
	`{"op":"wait","table":"Port","timeout":-0,"where":[],"columns":null,"until":null,"rows":[{}],"x":[1]}`,
	`{"op":"insert","table":"Port","row":{},"uuid-name":"n","comment":null,"durable":null,"lock":"l"}`,
}

// TestDecodeOperationAsLibovsdb: decodeOperation reads what libovsdb's
// own decoding reads.
func TestDecodeOperationAsLibovsdb(t *testing.T) {
	for _, s := range opSamples {
		var want ovsdb.Operation
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("libovsdb: %v\n%s", err, s)
		}
		got, err := decodeOperation(json.RawMessage(s))
		if err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got  %#v\n want %#v", s, got, want)
		}
	}
	for _, bad := range []string{
		`{"op":"select","table":"Port","where":[["name","=="]]}`,
		`{"op":"select","table":"Port","where":[["name","~=","x"]]}`,
		`{"op":"mutate","table":"Port","mutations":[["tag","^=",1]]}`,
		`{"op":"insert","table":"Port","row":{"interfaces":["uuid"]}}`,
		`{"op":"insert","table":"Port","row":{"interfaces":["uuid",7]}}`,
		`{"op":"insert","table":"Port","row":{"trunks":["set",7]}}`,
		`{"op":"insert","table":"Port","row":{"external_ids":["map",[["k"]]]}}`,
		`{"op":"insert","table":"Port","row":{"external_ids":["map",[[{"a":1},"v"]]]}}`,
		`{"op":"insert","table":"Port","row":{"external_ids":["map",[[["set",[]],"v"]]]}}`,
		`{"op":"insert","table":"Port","row":[]}`,
	} {
		if _, err := decodeOperation(json.RawMessage(bad)); err == nil {
			t.Errorf("decoded %s", bad)
		}
	}
}

// FuzzDecodeOperation: decodeOperation never panics, and what both it
// and libovsdb decode, they decode alike.
func FuzzDecodeOperation(f *testing.F) {
	for _, s := range opSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := decodeOperation(json.RawMessage(s))
		if err != nil {
			return
		}
		var want ovsdb.Operation
		func() {
			defer func() {
				if recover() != nil {
					err = errMalformed
				}
			}()
			err = json.Unmarshal([]byte(s), &want)
		}()
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s\n got  %#v\n want %#v", s, got, want)
		}
	})
}
